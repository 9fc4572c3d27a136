/* SPDX-License-Identifier: MIT */
/* Tries privileged or kernel-poking syscalls from inside a sandbox, one per
 * argument, and prints one line each: "NAME ok" or "NAME errno=E (text)".
 * Attempts are chosen to be harmless if they succeed (the clock is set to
 * the value just read, a ptrace attach is undone at once). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/reboot.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_fsopen
#define SYS_fsopen 430
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif

static int report(const char *name, long r) {
        if (r < 0)
                printf("%s errno=%d (%s)\n", name, errno, strerror(errno));
        else
                printf("%s ok\n", name);
        fflush(stdout);
        return 0;
}

static long clone_newuser(void) {
        long pid = syscall(SYS_clone, (unsigned long) (CLONE_NEWUSER | SIGCHLD), NULL, NULL, NULL, 0);
        if (pid == 0)
                _exit(0);
        if (pid > 0)
                waitpid((pid_t) pid, NULL, 0);
        return pid;
}

static long clone3_newuser(void) {
        struct clone_args a = { .flags = CLONE_NEWUSER, .exit_signal = SIGCHLD };
        long pid = syscall(SYS_clone3, &a, sizeof a);
        if (pid == 0)
                _exit(0);
        if (pid > 0)
                waitpid((pid_t) pid, NULL, 0);
        return pid;
}

static long ptrace_seize(pid_t pid) {
        long r = ptrace(PTRACE_SEIZE, pid, NULL, NULL);
        if (r == 0) {
                int e = errno;
                (void) ptrace(PTRACE_DETACH, pid, NULL, NULL);
                errno = e;
        }
        return r;
}

/* The classic chroot breakout (CAP_SYS_CHROOT is kept inside): chroot into
 * a subdirectory while holding a directory fd outside it, climb up, chroot
 * "."; then list what "/" is. It must be the sandbox's own root. */
static long chroot_escape(void) {
        int fd;
        (void) mkdir("/tmp/.chroot-probe", 0700);
        fd = open("/", O_RDONLY | O_DIRECTORY);
        if (fd < 0 || chroot("/tmp/.chroot-probe") < 0 || fchdir(fd) < 0)
                return -1;
        for (int i = 0; i < 64; i++)
                if (chdir("..") < 0)
                        return -1;
        if (chroot(".") < 0)
                return -1;
        printf("chroot-escape root:");
        DIR *d = opendir("/");
        if (!d)
                return -1;
        for (struct dirent *de; (de = readdir(d));)
                printf(" %s", de->d_name);
        closedir(d);
        printf("\n");
        return 0;
}

static long try(const char *name, const char *arg) {
        struct timeval tv;
        struct timespec ts;
        int fd;

        if (!strcmp(name, "mount-tmpfs"))
                return mount("none", "/tmp", "tmpfs", 0, NULL);
        if (!strcmp(name, "mount-proc")) {
                (void) mkdir("/tmp/.proc-probe", 0700);
                return mount("proc", "/tmp/.proc-probe", "proc", 0, NULL);
        }
        if (!strcmp(name, "mount-bind"))
                return mount("/proc", "/tmp", NULL, MS_BIND | MS_REC, NULL);
        if (!strcmp(name, "mount-sysfs-rw"))
                return mount("sysfs", "/sys", "sysfs", MS_REMOUNT, NULL);
        if (!strcmp(name, "remount-proc-sys-rw"))
                return mount(NULL, "/proc/sys", NULL, MS_REMOUNT | MS_BIND, NULL);
        if (!strcmp(name, "umount-proc-kcore"))
                return umount2("/proc/kcore", MNT_DETACH);
        if (!strcmp(name, "umount-proc-kallsyms"))
                return umount2("/proc/kallsyms", MNT_DETACH);
        if (!strcmp(name, "fsopen"))
                return syscall(SYS_fsopen, "tmpfs", 0);
        if (!strcmp(name, "open_tree"))
                return syscall(SYS_open_tree, AT_FDCWD, "/proc", 1 /* OPEN_TREE_CLONE */);
        if (!strcmp(name, "pivot_root"))
                return syscall(SYS_pivot_root, "/tmp", "/tmp");
        if (!strcmp(name, "mknod-block"))
                return mknod("/tmp/.blk-probe", S_IFBLK | 0600, makedev(8, 0));
        if (!strcmp(name, "mknod-char-mem"))
                return mknod("/tmp/.mem-probe", S_IFCHR | 0600, makedev(1, 1));
        if (!strcmp(name, "init_module"))
                return syscall(SYS_init_module, "\177ELF", 4UL, "");
        if (!strcmp(name, "finit_module")) {
                fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
                return syscall(SYS_finit_module, fd, "", 0);
        }
        if (!strcmp(name, "delete_module"))
                return syscall(SYS_delete_module, "space_probe_no_such_module", O_NONBLOCK);
        if (!strcmp(name, "keyctl"))
                return syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 1);
        if (!strcmp(name, "add_key"))
                return syscall(SYS_add_key, "user", "space-probe", "x", 1UL, KEY_SPEC_PROCESS_KEYRING);
        if (!strcmp(name, "request_key"))
                return syscall(SYS_request_key, "user", "space-probe", NULL, 0);
        if (!strcmp(name, "bpf")) {
                union bpf_attr a;
                memset(&a, 0, sizeof a);
                a.map_type = BPF_MAP_TYPE_ARRAY;
                a.key_size = 4;
                a.value_size = 4;
                a.max_entries = 1;
                return syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof a);
        }
        if (!strcmp(name, "perf_event_open")) {
                struct perf_event_attr a;
                memset(&a, 0, sizeof a);
                a.size = sizeof a;
                a.type = PERF_TYPE_SOFTWARE;
                a.config = PERF_COUNT_SW_CPU_CLOCK;
                a.exclude_kernel = 1;
                return syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
        }
        if (!strcmp(name, "userfaultfd"))
                return syscall(SYS_userfaultfd, O_CLOEXEC);
        if (!strcmp(name, "unshare-user"))
                return unshare(CLONE_NEWUSER);
        if (!strcmp(name, "unshare-net"))
                return unshare(CLONE_NEWNET);
        if (!strcmp(name, "unshare-mount"))
                return unshare(CLONE_NEWNS);
        if (!strcmp(name, "clone-newuser"))
                return clone_newuser();
        if (!strcmp(name, "clone3-newuser"))
                return clone3_newuser();
        if (!strcmp(name, "setns-user")) {
                fd = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
                return fd < 0 ? -1 : setns(fd, CLONE_NEWUSER);
        }
        if (!strcmp(name, "setns-net")) {
                /* its own network namespace (PID 1's /proc entry is out of sight): the
                 * setns itself is what must be refused */
                fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
                return fd < 0 ? -1 : setns(fd, CLONE_NEWNET);
        }
        if (!strcmp(name, "settimeofday")) {
                gettimeofday(&tv, NULL);
                return settimeofday(&tv, NULL);
        }
        if (!strcmp(name, "clock_settime")) {
                clock_gettime(CLOCK_REALTIME, &ts);
                return clock_settime(CLOCK_REALTIME, &ts);
        }
        if (!strcmp(name, "adjtimex")) {
                struct timex tx;
                memset(&tx, 0, sizeof tx);
                return adjtimex(&tx);
        }
        if (!strcmp(name, "socket-packet-raw"))
                return socket(AF_PACKET, SOCK_RAW, htons(3 /* ETH_P_ALL */));
        if (!strcmp(name, "socket-packet-dgram"))
                return socket(AF_PACKET, SOCK_DGRAM, htons(3));
        if (!strcmp(name, "socket-inet-raw"))
                return socket(AF_INET, SOCK_RAW, 1 /* ICMP */);
        if (!strcmp(name, "socket-inet6-raw"))
                return socket(AF_INET6, SOCK_RAW, 58 /* ICMPv6 */);
        if (!strcmp(name, "socket-inet-packet"))
                return socket(AF_INET, SOCK_PACKET, htons(3));
        if (!strcmp(name, "open_by_handle_at")) {
                char buf[sizeof(struct file_handle) + 8];
                struct file_handle *h = (struct file_handle *) buf;
                memset(buf, 0, sizeof buf);
                h->handle_bytes = 8;
                h->handle_type = 1;
                return syscall(SYS_open_by_handle_at, AT_FDCWD, h, O_RDONLY);
        }
        if (!strcmp(name, "iopl"))
                return iopl(3);
        if (!strcmp(name, "ioperm"))
                return ioperm(0x80, 1, 1);
        if (!strcmp(name, "reboot-cad-off"))
                return syscall(SYS_reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2, LINUX_REBOOT_CMD_CAD_OFF, NULL);
        if (!strcmp(name, "syslog-read"))
                return syscall(SYS_syslog, 3 /* READ_ALL */, (char[64]){ 0 }, 64);
        if (!strcmp(name, "swapon"))
                return swapon("/tmp/.swap-probe", 0);
        if (!strcmp(name, "kexec_load"))
                return syscall(SYS_kexec_load, 0UL, 0UL, NULL, 0UL);
        if (!strcmp(name, "acct"))
                return syscall(SYS_acct, "/tmp/.acct-probe");
        if (!strcmp(name, "personality-addr-no-randomize"))
                return personality(ADDR_NO_RANDOMIZE) < 0 || (personality(0xffffffff) & ADDR_NO_RANDOMIZE) == 0 ? -1 : 0;
        if (!strcmp(name, "raise-nofile")) {
                struct rlimit rl;
                getrlimit(RLIMIT_NOFILE, &rl);
                rl.rlim_max = rl.rlim_max == RLIM_INFINITY ? RLIM_INFINITY : rl.rlim_max + 1;
                rl.rlim_cur = rl.rlim_max;
                return setrlimit(RLIMIT_NOFILE, &rl);
        }
        if (!strcmp(name, "raise-nproc")) {
                struct rlimit rl;
                getrlimit(RLIMIT_NPROC, &rl);
                if (rl.rlim_max == RLIM_INFINITY)
                        return 0;
                rl.rlim_max += 1;
                rl.rlim_cur = rl.rlim_max;
                return setrlimit(RLIMIT_NPROC, &rl);
        }
        if (!strcmp(name, "sethostname"))
                return sethostname(arg ? arg : "pwned", strlen(arg ? arg : "pwned"));
        if (!strcmp(name, "ptrace-seize"))
                return ptrace_seize(arg ? atoi(arg) : 1);
        if (!strcmp(name, "kill0"))
                return kill(arg ? atoi(arg) : 1, 0);
        if (!strcmp(name, "chroot-escape"))
                return chroot_escape();
        errno = EINVAL;
        return -1;
}

int main(int argc, char **argv) {
        for (int i = 1; i < argc; i++) {
                char name[128];
                const char *arg = NULL, *eq = strchr(argv[i], '=');
                size_t n = eq ? (size_t) (eq - argv[i]) : strlen(argv[i]);
                if (n >= sizeof name)
                        n = sizeof name - 1;
                memcpy(name, argv[i], n);
                name[n] = 0;
                if (eq)
                        arg = eq + 1;
                errno = 0;
                report(argv[i], try(name, arg));
        }
        return 0;
}
