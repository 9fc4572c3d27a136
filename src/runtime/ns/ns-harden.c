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
#include <sys/syscall.h>

#include "ns-harden.h"

const unsigned ns_caps_allowed[] = {
        CAP_CHOWN,   CAP_DAC_OVERRIDE, CAP_FOWNER,           CAP_FSETID,     CAP_KILL,        CAP_SETGID,
        CAP_SETUID,  CAP_SETPCAP,      CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT, CAP_AUDIT_WRITE, CAP_SETFCAP,
};
const size_t ns_caps_allowed_count = ELEMENTSOF(ns_caps_allowed);

/* Files under /proc that reveal the host or poke the kernel. */
static const char *const proc_null[] = {
        "kcore",       "keys",        "key-users",  "sysrq-trigger", "timer_list", "sched_debug",
        "kallsyms",    "cmdline",     "config.gz",  "kpagecount",    "kpageflags", "kpagecgroup",
        "latency_stats", "kmsg",      "modules",    "vmallocinfo",   "iomem",      "ioports",
        "slabinfo",    "buddyinfo",   "pagetypeinfo", "zoneinfo",    "mtrr",       "partitions",
        "diskstats",   "devices",     "misc",       "consoles",      "bootconfig", "softirqs",
};
/* Directories that become empty. */
static const char *const proc_empty[] = { "acpi", "scsi", "driver", "tty", "dynamic_debug" };
/* Directories that stay, read-only. */
static const char *const proc_ro[] = { "sys", "irq", "bus", "fs", "sysvipc" };

static int open_in(int dirfd, const char *rel, int flags) {
        struct open_how how = {
                .flags = (uint64_t) (flags | O_PATH | O_CLOEXEC),
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        return (int) syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
}

static int mount_on(int fd, const char *src, const char *type, unsigned long flags, const char *data) {
        char p[64];
        snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
        return mount(src, p, type, flags, data);
}

int ns_mask_proc(int rootfd) {
        int proc = open_in(rootfd, "proc", O_DIRECTORY), fd, r = 0;

        if (proc < 0)
                return -1;
        for (size_t i = 0; i < ELEMENTSOF(proc_null) && r == 0; i++) {
                fd = open_in(proc, proc_null[i], 0);
                if (fd < 0) {
                        if (errno == ENOENT)
                                continue;
                        r = -1;
                        break;
                }
                r = mount_on(fd, "/dev/null", NULL, MS_BIND, NULL);
                close(fd);
        }
        for (size_t i = 0; i < ELEMENTSOF(proc_empty) && r == 0; i++) {
                fd = open_in(proc, proc_empty[i], O_DIRECTORY);
                if (fd < 0) {
                        if (errno == ENOENT)
                                continue;
                        r = -1;
                        break;
                }
                r = mount_on(fd, "tmpfs", "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0,mode=555");
                close(fd);
        }
        for (size_t i = 0; i < ELEMENTSOF(proc_ro) && r == 0; i++) {
                fd = open_in(proc, proc_ro[i], O_DIRECTORY);
                if (fd < 0) {
                        if (errno == ENOENT)
                                continue;
                        r = -1;
                        break;
                }
                char self[64];
                snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
                r = mount_on(fd, self, NULL, MS_BIND | MS_REC, NULL);
                if (r == 0) {
                        /* the bind is a new mount on top: reopen to reach it, then remount it read-only */
                        int top = open_in(proc, proc_ro[i], O_DIRECTORY);
                        if (top < 0)
                                r = -1;
                        else {
                                r = mount_on(top, NULL, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
                                close(top);
                        }
                }
                close(fd);
        }
        close(proc);
        return r;
}

/* A random version 4 UUID as /proc/sys/kernel/random/boot_id prints it. */
static int random_uuid(char out[static 37]) {
        static const char hex[] = "0123456789abcdef";
        uint8_t raw[16];
        size_t o = 0;

        if (getrandom(raw, sizeof raw, 0) != (ssize_t) sizeof raw)
                return -1;
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

int ns_fake_boot_id(int rootfd, const char *scratch) {
        char id[37], p[64];
        int dir = -1, top = -1, file = -1, target = -1, r = -1;
        ssize_t k;

        if (random_uuid(id) < 0)
                return -1;
        /* a scratch tmpfs for the file, detached again once the file is bound */
        dir = open_in(rootfd, scratch, O_DIRECTORY);
        if (dir < 0)
                return -1;
        if (mount_on(dir, "tmpfs", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,nr_inodes=4,mode=700") < 0)
                goto out;
        top = open_in(rootfd, scratch, O_DIRECTORY);
        if (top < 0)
                goto out_umount;
        snprintf(p, sizeof p, "/proc/self/fd/%d/boot_id", top);
        file = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
        if (file < 0)
                goto out_umount;
        k = write(file, id, sizeof id);
        close(file);
        file = -1;
        if (k != (ssize_t) sizeof id) {
                errno = EIO;
                goto out_umount;
        }
        target = open_in(rootfd, "proc/sys/kernel/random/boot_id", 0);
        if (target < 0) {
                r = errno == ENOENT ? 0 : -1; /* a kernel without it: nothing to hide */
                goto out_umount;
        }
        if (mount_on(target, p, NULL, MS_BIND, NULL) < 0)
                goto out_umount;
        close(target);
        target = open_in(rootfd, "proc/sys/kernel/random/boot_id", 0); /* the bind on top */
        if (target < 0 || mount_on(target, NULL, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV |
                                                      MS_NOEXEC, NULL) < 0)
                goto out_umount;
        r = 0;
out_umount:
        {
                int e = errno;
                snprintf(p, sizeof p, "/proc/self/fd/%d", top >= 0 ? top : dir);
                if (umount2(p, MNT_DETACH) < 0 && r == 0)
                        r = -1;
                else
                        errno = e;
        }
out:
        if (target >= 0)
                close(target);
        if (top >= 0)
                close(top);
        close(dir);
        return r;
}

int ns_write_machine_id(void) {
        static const char hex[] = "0123456789abcdef";
        uint8_t raw[16];
        char id[33];
        int fd;
        ssize_t k;

        if (getrandom(raw, sizeof raw, 0) != (ssize_t) sizeof raw)
                return -1;
        for (size_t i = 0; i < sizeof raw; i++) {
                id[2 * i] = hex[raw[i] >> 4];
                id[2 * i + 1] = hex[raw[i] & 15];
        }
        id[32] = '\n';
        fd = open("/etc/machine-id", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0444);
        if (fd < 0)
                return errno == ENOENT ? 0 : -1;
        k = write(fd, id, sizeof id);
        close(fd);
        return k == (ssize_t) sizeof id ? 0 : -1;
}

int ns_write_resolv_conf(const char *content) {
        size_t n = strlen(content);
        ssize_t k;
        int fd;

        fd = open("/etc/resolv.conf", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno == ELOOP) {
                /* a symlink (e.g. to a resolver stub that is not running here) */
                if (unlink("/etc/resolv.conf") < 0)
                        return -1;
                fd = open("/etc/resolv.conf", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        }
        if (fd < 0)
                return errno == ENOENT || errno == EISDIR || errno == EROFS ? 0 : -1;
        k = write(fd, content, n);
        close(fd);
        return k == (ssize_t) n ? 0 : -1;
}

/* Lowers a limit to want (never raises it: that needs host privileges). */
static int lower_rlimit(int resource, rlim_t want) {
        struct rlimit cur;
        if (getrlimit(resource, &cur) < 0)
                return -1;
        if (cur.rlim_max != RLIM_INFINITY && cur.rlim_max < want)
                want = cur.rlim_max;
        cur.rlim_max = want;
        cur.rlim_cur = want;
        return setrlimit(resource, &cur);
}

int ns_set_rlimits(const RuntimeLimits *l) {
        if (lower_rlimit(RLIMIT_CORE, 0) < 0 || lower_rlimit(RLIMIT_NOFILE, 65536) < 0)
                return -1;
        if (l->pids_max && lower_rlimit(RLIMIT_NPROC, l->pids_max) < 0)
                return -1;
        if (l->fsize_bytes && lower_rlimit(RLIMIT_FSIZE, l->fsize_bytes) < 0)
                return -1;
        return 0;
}

int ns_drop_privileges(void) {
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct d[2] = {};
        int last = CAP_LAST_CAP;
        int fd;

        /* the running kernel may know more capabilities than our headers */
        fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
                char buf[16] = "";
                if (read(fd, buf, sizeof buf - 1) > 0) {
                        int v = 0;
                        for (char *p = buf; *p >= '0' && *p <= '9'; p++)
                                v = v * 10 + (*p - '0');
                        if (v > 0 && v < 64)
                                last = v;
                }
                close(fd);
        }
        for (int cap = 0; cap <= last; cap++) {
                bool keep = false;
                for (size_t i = 0; i < ns_caps_allowed_count; i++)
                        if ((int) ns_caps_allowed[i] == cap)
                                keep = true;
                if (!keep && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
                        return -1;
        }
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
                return -1;
        /* lock the securebits at their defaults, and forbid raising ambient caps */
        if (prctl(PR_SET_SECUREBITS, SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_NOROOT_LOCKED |
                                         SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
                  0, 0, 0) < 0)
                return -1;
        for (size_t i = 0; i < ns_caps_allowed_count; i++) {
                unsigned c = ns_caps_allowed[i];
                d[c / 32].permitted |= 1U << (c % 32);
                d[c / 32].effective |= 1U << (c % 32);
        }
        if (syscall(SYS_capset, &h, d) < 0)
                return -1;
        return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}
