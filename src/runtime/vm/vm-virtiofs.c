/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "ns-setup.h"
#include "sock-io.h"
#include "str-util.h"
#include "vm-exec.h"
#include "vm-virtiofs.h"

#define VIRTIOFSD_FD 3
/* where the volume is in virtiofsd's own mount namespace: a tmpfs over /tmp hides the host's */
#define VIRTIOFSD_TOP "/tmp"
#define VIRTIOFSD_SOURCE VIRTIOFSD_TOP "/volume"

/* a process in a new user namespace that waits until fd's other end closes: the namespace to map
 * and idmap the volume into before virtiofsd joins it */
static pid_t userns_holder(int *ret_pidfd, int *ret_release) {
        int p[2], pidfd = -EBADF;
        struct clone_args args = { .flags = CLONE_NEWUSER | CLONE_PIDFD, .pidfd = (uint64_t) (uintptr_t) &pidfd,
                                   .exit_signal = SIGCHLD };
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid = (pid_t) syscall(SYS_clone3, &args, sizeof args);
        if (pid < 0) {
                int r = -errno;
                safe_close(p[0]);
                safe_close(p[1]);
                return r;
        }
        if (pid == 0) {
                char c;
                (void) close(p[1]);
                (void) !read(p[0], &c, 1);
                _exit(0);
        }
        safe_close(p[0]);
        *ret_pidfd = pidfd;
        *ret_release = p[1];
        return pid;
}

int vm_virtiofsd_start(const VmVirtiofsd *a, pid_t *ret_pid, int *ret_pidfd, int *ret_vmm_fd, char *err,
                       size_t err_size) {
        _cleanup_close_ int hpidfd = -EBADF, release = -EBADF, userns = -EBADF, tree = -EBADF, lfd = -EBADF,
                            cfd = -EBADF, pidfd = -EBADF;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char path[64];
        int ep[2], r;
        pid_t h, pid;

        h = userns_holder(&hpidfd, &release);
        if (h < 0) {
                snprintf(err, err_size, "cannot create its user namespace: %s", strerror((int) -h));
                return (int) h;
        }
        r = ns_write_id_maps(h, a->uid_base);
        if (r >= 0) {
                snprintf(path, sizeof path, "/proc/%d/ns/user", (int) h);
                userns = open(path, O_RDONLY | O_CLOEXEC);
                if (userns < 0)
                        r = negative_errno();
        }
        if (r >= 0)
                r = ns_idmapped_volume(a->host_path, a->read_only, h, &tree);
        release = safe_close(release);
        (void) waitid(P_PIDFD, (id_t) hpidfd, &(siginfo_t){}, WEXITED);
        if (r < 0) {
                snprintf(err, err_size, "cannot map the volume into its user namespace: %s", strerror(-r));
                return r;
        }

        /* vhost-user: virtiofsd accepts one connection, made here (the path is gone at once) */
        if (strscpy(sa.sun_path, sizeof sa.sun_path, a->socket_path) < 0)
                return -ENAMETOOLONG;
        (void) unlink(a->socket_path);
        r = sock_listen_unix(a->socket_path, 0, 1, &lfd);
        if (r >= 0) {
                cfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (cfd < 0 || connect(cfd, (struct sockaddr *) &sa, sizeof sa) < 0)
                        r = negative_errno();
        }
        (void) unlink(a->socket_path);
        if (r < 0) {
                snprintf(err, err_size, "cannot create its socket: %s", strerror(-r));
                return r;
        }

        if (pipe2(ep, O_CLOEXEC) < 0)
                return negative_errno();
        struct clone_args args = { .flags = CLONE_PIDFD, .pidfd = (uint64_t) (uintptr_t) &pidfd,
                                   .exit_signal = SIGCHLD };
        if (a->cgroup_fd >= 0) {
                args.flags |= CLONE_INTO_CGROUP;
                args.cgroup = (uint64_t) a->cgroup_fd;
        }
        pid = (pid_t) syscall(SYS_clone3, &args, sizeof args);
        if (pid < 0) {
                r = negative_errno();
                safe_close(ep[0]);
                safe_close(ep[1]);
                snprintf(err, err_size, "clone3: %s", strerror(-r));
                return r;
        }
        if (pid == 0) {
                const char *argv[] = { a->binary, "--fd=3", "-o", "source=" VIRTIOFSD_SOURCE, "-o",
                                       "sandbox=namespace", "-o", "cache=auto", "-o", "no_xattr", "-o",
                                       "no_posix_lock", "-o", "no_flock", "--rlimit-nofile=0", "--thread-pool-size=0",
                                       "-o", "log_level=warn", NULL };
                char *envp[] = { (char *) "PATH=/usr/bin:/bin", NULL };
                int errfd = fcntl(ep[1], F_DUPFD_CLOEXEC, 16);
                sigset_t none;

                /* root of the namespace (host uid_base), with its capabilities over what it owns only */
                if (setns(userns, CLONE_NEWUSER) < 0)
                        vm_child_fail(errfd, "setns user");
                if (setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
                        vm_child_fail(errfd, "ids");
                if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                        vm_child_fail(errfd, "mount namespace");
                if (mount("tmpfs", VIRTIOFSD_TOP, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                          "mode=0755,size=64k") < 0 ||
                    mkdir(VIRTIOFSD_SOURCE, 0755) < 0)
                        vm_child_fail(errfd, "tmpfs");
                if (syscall(SYS_move_mount, tree, "", AT_FDCWD, VIRTIOFSD_SOURCE, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                        vm_child_fail(errfd, "move_mount");
                if (dup2(lfd, VIRTIOFSD_FD) < 0 || dup2(a->log_fd, STDOUT_FILENO) < 0 ||
                    dup2(a->log_fd, STDERR_FILENO) < 0)
                        vm_child_fail(errfd, "dup2");
                int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (nul < 0 || dup2(nul, STDIN_FILENO) < 0)
                        vm_child_fail(errfd, "open /dev/null");
                if (syscall(SYS_close_range, VIRTIOFSD_FD + 1, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
                        vm_child_fail(errfd, "close_range");
                sigemptyset(&none);
                (void) sigprocmask(SIG_SETMASK, &none, NULL);
                execve(a->binary, (char *const *) argv, envp);
                vm_child_fail(errfd, "execve");
        }
        safe_close(ep[1]);
        r = vm_child_exec_result(ep[0], pidfd, "virtiofsd", err, err_size);
        if (r < 0)
                return r;
        *ret_pid = pid;
        *ret_pidfd = TAKE_FD(pidfd);
        *ret_vmm_fd = TAKE_FD(cfd);
        return 0;
}
