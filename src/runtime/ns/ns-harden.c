/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <linux/securebits.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "ns-harden.h"
#include "ns-sys.h"

const unsigned ns_caps_allowed[] = {
        CAP_CHOWN,   CAP_DAC_OVERRIDE, CAP_FOWNER,           CAP_FSETID,     CAP_KILL,        CAP_SETGID,
        CAP_SETUID,  CAP_SETPCAP,      CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT, CAP_AUDIT_WRITE, CAP_SETFCAP,
};
const size_t ns_caps_allowed_count = ELEMENTSOF(ns_caps_allowed);

/* Files under /proc that reveal the host or poke the kernel (runc, crun and Docker mask kcore,
 * keys, latency_stats, timer_list, timer_stats, sched_debug; the rest are ours). */
static const char *const proc_null[] = {
        "kcore",       "keys",        "key-users",  "sysrq-trigger", "timer_list", "timer_stats", "sched_debug",
        "kallsyms",    "cmdline",     "config.gz",  "kpagecount",    "kpageflags", "kpagecgroup",
        "latency_stats", "kmsg",      "modules",    "vmallocinfo",   "iomem",      "ioports",
        "slabinfo",    "buddyinfo",   "pagetypeinfo", "zoneinfo",    "mtrr",       "partitions",
        "diskstats",   "devices",     "misc",       "consoles",      "bootconfig", "softirqs",
};
/* Directories that become empty (acpi, asound, scsi as the container runtimes mask them). */
static const char *const proc_empty[] = { "acpi", "asound", "scsi", "driver", "tty", "dynamic_debug" };
/* Directories that stay, read-only. */
static const char *const proc_ro[] = { "sys", "irq", "bus", "fs", "sysvipc" };

static int open_in(int dirfd, const char *rel, int flags) {
        struct open_how how = {
                .flags = (uint64_t) (flags | O_PATH | O_CLOEXEC),
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        return (int) ns_sys4(SYS_openat2, dirfd, rel, &how, sizeof how);
}

static int mount_on(int fd, const char *src, const char *type, unsigned long flags, const char *data) {
        char p[NS_FD_PATH_MAX];
        return (int) ns_sys5(SYS_mount, src, ns_fd_path(p, fd), type, flags, data);
}

/* Masks the entries names[] below dir (a missing one is left alone) with
 * mount(src, type, flags, data), or with a read-only bind of itself (src NULL). */
static int mask_each(int dir, const char *const *names, size_t n, int open_flags, const char *src, const char *type,
                     unsigned long flags, const char *data) {
        for (size_t i = 0; i < n; i++) {
                char self[NS_FD_PATH_MAX];
                int fd = open_in(dir, names[i], open_flags), r;

                if (fd == -ENOENT)
                        continue;
                if (fd < 0)
                        return fd;
                r = mount_on(fd, src ?: ns_fd_path(self, fd), type, flags, data);
                if (r == 0 && !src) {
                        /* the bind is a new mount on top: reopen to reach it, then remount it read-only */
                        int top = open_in(dir, names[i], open_flags);
                        r = top < 0 ? top
                                    : mount_on(top, NULL, NULL,
                                               MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
                        if (top >= 0)
                                ns_close(top);
                }
                ns_close(fd);
                if (r < 0)
                        return r;
        }
        return 0;
}

int ns_mask_proc(int rootfd) {
        int proc = open_in(rootfd, "proc", O_DIRECTORY), r;

        if (proc < 0)
                return proc;
        r = mask_each(proc, proc_null, ELEMENTSOF(proc_null), 0, "/dev/null", NULL, MS_BIND, NULL);
        if (r >= 0)
                r = mask_each(proc, proc_empty, ELEMENTSOF(proc_empty), O_DIRECTORY, "tmpfs", "tmpfs",
                              MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0,mode=555");
        if (r >= 0)
                r = mask_each(proc, proc_ro, ELEMENTSOF(proc_ro), O_DIRECTORY, NULL, NULL, MS_BIND | MS_REC, NULL);
        ns_close(proc);
        return r;
}

/* Directories of the sandbox's own (read-only) sysfs that still show the host's hardware and
 * firmware: ACPI tables, the EFI variables, the boot memory map, DMI (firmware); the RAPL energy
 * counters, whose readings leak what other tenants compute (powercap, CVE-2020-8694). */
static const char *const sys_empty[] = { "firmware", "devices/virtual/powercap" };

int ns_mask_sys(int rootfd) {
        int sys = open_in(rootfd, "sys", O_DIRECTORY), r;

        if (sys < 0)
                return sys;
        r = mask_each(sys, sys_empty, ELEMENTSOF(sys_empty), O_DIRECTORY, "tmpfs", "tmpfs",
                      MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0,mode=555");
        ns_close(sys);
        return r;
}

/* A random version 4 UUID as /proc/sys/kernel/random/boot_id prints it. */
static int random_uuid(char out[static 37]) {
        static const char hex[] = "0123456789abcdef";
        uint8_t raw[16];
        size_t o = 0;
        long k = ns_sys3(SYS_getrandom, raw, sizeof raw, 0);

        if (k != (long) sizeof raw)
                return k < 0 ? (int) k : -EIO;
        raw[6] = (uint8_t) ((raw[6] & 0x0f) | 0x40); /* version 4 */
        raw[8] = (uint8_t) ((raw[8] & 0x3f) | 0x80); /* variant 1 */
        for (size_t i = 0; i < sizeof raw; i++) {
                if (i == 4 || i == 6 || i == 8 || i == 10)
                        out[o++] = '-';
                out[o++] = hex[raw[i] >> 4];
                out[o++] = hex[raw[i] & 15];
        }
        out[o] = '\n';
        return 0;
}

/* The file name of a scratch directory's fd with "/boot_id" after it. */
static const char *boot_id_path(char *buf, int fd) {
        static const char name[] = "/boot_id";
        size_t o = 0;

        ns_fd_path(buf, fd);
        while (buf[o])
                o++;
        for (size_t i = 0; i < sizeof name; i++)
                buf[o + i] = name[i];
        return buf;
}

int ns_fake_boot_id(int rootfd, const char *scratch) {
        char id[37], p[NS_FD_PATH_MAX + 16];
        int dir = -1, top = -1, file, target = -1, r;
        long k;

        r = random_uuid(id);
        if (r < 0)
                return r;
        /* a scratch tmpfs for the file, detached again once the file is bound */
        dir = open_in(rootfd, scratch, O_DIRECTORY);
        if (dir < 0)
                return dir;
        r = mount_on(dir, "tmpfs", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,nr_inodes=4,mode=700");
        if (r < 0)
                goto out;
        top = open_in(rootfd, scratch, O_DIRECTORY);
        if (top < 0) {
                r = top;
                goto out_umount;
        }
        boot_id_path(p, top);
        file = (int) ns_sys4(SYS_openat, AT_FDCWD, p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
        if (file < 0) {
                r = file;
                goto out_umount;
        }
        k = ns_sys3(SYS_write, file, id, sizeof id);
        ns_close(file);
        if (k != (long) sizeof id) {
                r = k < 0 ? (int) k : -EIO;
                goto out_umount;
        }
        target = open_in(rootfd, "proc/sys/kernel/random/boot_id", 0);
        if (target < 0) {
                r = target == -ENOENT ? 0 : target; /* a kernel without it: nothing to hide */
                goto out_umount;
        }
        r = mount_on(target, p, NULL, MS_BIND, NULL);
        if (r < 0)
                goto out_umount;
        ns_close(target);
        target = open_in(rootfd, "proc/sys/kernel/random/boot_id", 0); /* the bind on top */
        r = target < 0 ? target
                       : mount_on(target, NULL, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                                  NULL);
out_umount: {
        char q[NS_FD_PATH_MAX];
        int u = (int) ns_sys2(SYS_umount2, ns_fd_path(q, top >= 0 ? top : dir), MNT_DETACH);
        if (u < 0 && r >= 0)
                r = u;
}
out:
        if (target >= 0)
                ns_close(target);
        if (top >= 0)
                ns_close(top);
        ns_close(dir);
        return r;
}

/* content (n bytes) as the whole file fd, which is closed. Written over what
 * was there, then cut to n if it was longer: on btrfs a truncation to 0
 * first (O_TRUNC) is a transaction of its own. */
static int write_over(int fd, const char *content, size_t n) {
        struct stat st;
        long k = ns_sys4(SYS_pwrite64, fd, content, n, 0);
        int r = k == (long) n ? 0 : k < 0 ? (int) k : -EIO;

        if (r >= 0)
                r = (int) ns_sys2(SYS_fstat, fd, &st);
        if (r >= 0 && st.st_size > (off_t) n)
                r = (int) ns_sys2(SYS_ftruncate, fd, n);
        ns_close(fd);
        return r < 0 ? r : 0;
}

int ns_write_machine_id(void) {
        static const char hex[] = "0123456789abcdef";
        uint8_t raw[16];
        char id[33];
        int fd;
        long k = ns_sys3(SYS_getrandom, raw, sizeof raw, 0);

        if (k != (long) sizeof raw)
                return k < 0 ? (int) k : -EIO;
        for (size_t i = 0; i < sizeof raw; i++) {
                id[2 * i] = hex[raw[i] >> 4];
                id[2 * i + 1] = hex[raw[i] & 15];
        }
        id[32] = '\n';
        fd = (int) ns_sys4(SYS_openat, AT_FDCWD, "/etc/machine-id", O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0444);
        if (fd < 0)
                return fd == -ENOENT ? 0 : fd;
        return write_over(fd, id, sizeof id);
}

int ns_write_resolv_conf(const char *content) {
        static const char path[] = "/etc/resolv.conf";
        int fd;

        fd = (int) ns_sys4(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd == -ELOOP) {
                /* a symlink (e.g. to a resolver stub that is not running here) */
                int r = (int) ns_sys3(SYS_unlinkat, AT_FDCWD, path, 0);
                if (r < 0)
                        return r;
                fd = (int) ns_sys4(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        }
        if (fd < 0)
                return fd == -ENOENT || fd == -EISDIR || fd == -EROFS ? 0 : fd;
        return write_over(fd, content, strlen(content));
}

/* Lowers a limit to want (never raises it: that needs host privileges). */
static int lower_rlimit(int resource, rlim_t want) {
        struct rlimit cur;
        int r = (int) ns_sys4(SYS_prlimit64, 0, resource, NULL, &cur);

        if (r < 0)
                return r;
        if (cur.rlim_max != RLIM_INFINITY && cur.rlim_max < want)
                want = cur.rlim_max;
        cur.rlim_max = want;
        cur.rlim_cur = want;
        return (int) ns_sys4(SYS_prlimit64, 0, resource, &cur, NULL);
}

int ns_set_rlimits(const RuntimeLimits *l) {
        int r = lower_rlimit(RLIMIT_CORE, 0);

        if (r >= 0)
                r = lower_rlimit(RLIMIT_NOFILE, 65536);
        if (r >= 0 && l->pids_max)
                r = lower_rlimit(RLIMIT_NPROC, l->pids_max);
        if (r >= 0 && l->fsize_bytes)
                r = lower_rlimit(RLIMIT_FSIZE, l->fsize_bytes);
        return r < 0 ? r : 0;
}

int ns_drop_privileges(void) {
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct d[2] = {};
        int last = CAP_LAST_CAP, fd, r;

        /* the running kernel may know more capabilities than our headers */
        fd = (int) ns_sys4(SYS_openat, AT_FDCWD, "/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC, 0);
        if (fd >= 0) {
                char buf[16] = "";
                if (ns_sys3(SYS_read, fd, buf, sizeof buf - 1) > 0) {
                        int v = 0;
                        for (char *p = buf; *p >= '0' && *p <= '9' && v < 64; p++)
                                v = v * 10 + (*p - '0');
                        if (v > 0 && v < 64)
                                last = v;
                }
                ns_close(fd);
        }
        for (int cap = 0; cap <= last; cap++) {
                bool keep = false;
                for (size_t i = 0; i < ns_caps_allowed_count; i++)
                        if ((int) ns_caps_allowed[i] == cap)
                                keep = true;
                if (!keep && (r = (int) ns_sys2(SYS_prctl, PR_CAPBSET_DROP, cap)) < 0 && r != -EINVAL)
                        return r;
        }
        r = (int) ns_sys2(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL);
        if (r < 0)
                return r;
        /* lock the securebits at their defaults, and forbid raising ambient caps */
        r = (int) ns_sys2(SYS_prctl, PR_SET_SECUREBITS,
                          SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_NOROOT_LOCKED |
                                  SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ns_caps_allowed_count; i++) {
                unsigned c = ns_caps_allowed[i];
                d[c / 32].permitted |= 1U << (c % 32);
                d[c / 32].effective |= 1U << (c % 32);
        }
        r = (int) ns_sys2(SYS_capset, &h, d);
        if (r < 0)
                return r;
        return (int) ns_sys2(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1);
}
