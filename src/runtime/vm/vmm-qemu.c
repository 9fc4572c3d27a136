/* SPDX-License-Identifier: MIT */
/* The QEMU driver: `-M microvm`, every file handed over as an fd, QMP on a
 * listening socket the worker made, seccomp (`-sandbox on`), started inside
 * the sandbox's cgroup in new net/ipc/uts namespaces and running as the
 * sandbox's unprivileged uid. */
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <linux/close_range.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "log.h"
#include "qmp.h"
#include "str-util.h"
#include "vm-exec.h"
#include "vmm.h"

#define QEMU_TB_SIZE_MB 64 /* TCG translation cache (the default, 1 GiB, would be most of a small VM's budget) */
#define QEMU_ARGV_MAX (64 + 4 * VMM_FS_MAX + 4)
#define QEMU_MIGRATE_POLL_USEC 10000
#define QEMU_MIGRATE_POLLS 30000 /* 300 s */
#define QEMU_INCOMING_TIMEOUT_MSEC 300000

/* fds in the child, in this order from 3 */
enum { FD_KERNEL = 3, FD_INITRD, FD_DISK, FD_AGENT, FD_CONTROL, FD_INCOMING, FD_NET, _FD_NEXT };

static const char *const accel_table[_VMM_ACCEL_MAX] = {
        [VMM_ACCEL_KVM] = "kvm",
        [VMM_ACCEL_TCG] = "tcg",
};

const char *vmm_accel_to_string(VmmAccel a) {
        return a >= 0 && a < _VMM_ACCEL_MAX ? accel_table[a] : NULL;
}

VmmAccel vmm_accel_from_string(const char *s) {
        for (int i = 0; s && i < _VMM_ACCEL_MAX; i++)
                if (streq(accel_table[i], s))
                        return (VmmAccel) i;
        return _VMM_ACCEL_INVALID;
}

static int qemu_available(const char *binary, char *version, size_t version_size) {
        char out[256] = "";
        int p[2], r;
        pid_t pid;

        if (!binary || binary[0] != '/')
                return -EINVAL;
        if (access(binary, X_OK) < 0)
                return negative_errno();
        if (pipe2(p, O_CLOEXEC) < 0)
                return negative_errno();
        pid = fork();
        if (pid < 0) {
                r = negative_errno();
                safe_close(p[0]);
                safe_close(p[1]);
                return r;
        }
        if (pid == 0) {
                char *argv[] = { (char *) binary, (char *) "--version", NULL };
                char *envp[] = { NULL };
                (void) dup2(p[1], STDOUT_FILENO);
                execve(binary, argv, envp);
                _exit(127);
        }
        safe_close(p[1]);
        ssize_t k = loop_read(p[0], out, sizeof out - 1);
        safe_close(p[0]);
        (void) waitpid(pid, NULL, 0);
        out[k > 0 ? k : 0] = 0;
        out[strcspn(out, "\n(")] = 0;
        /* "QEMU emulator version 7.2.22 " → "QEMU 7.2.22" */
        const char *v = strstr(out, "version ");
        if (v)
                v += STRLEN("version ");
        snprintf(version, version_size, "QEMU %.*s", v ? (int) strcspn(v, " \t") : 1, v ?: "?");
        return 0;
}

static int qemu_start(const VmmConfig *c, pid_t *ret_pid, int *ret_pidfd, char *err, size_t err_size) {
        char mem[32], smp[32], kernel[32], initrd[32], drive[96], agent[64], control[80], accel[48], incoming[32],
                netdev[48], nic[96], machine[96], memobj[96], fs_chr[VMM_FS_MAX][48], fs_dev[VMM_FS_MAX][80];
        const char *argv[QEMU_ARGV_MAX];
        int n = 0, pidfd = -EBADF, ep[2], r;
        pid_t pid;

        if (c->n_fs > VMM_FS_MAX)
                return -E2BIG;
        snprintf(mem, sizeof mem, "%" PRIu64 "M", c->memory_mb);
        /* vhost-user: the daemon maps the guest's memory, which must be a shareable memfd */
        snprintf(memobj, sizeof memobj, "memory-backend-memfd,id=mem,size=%" PRIu64 "M,share=on", c->memory_mb);
        snprintf(machine, sizeof machine, "%s%s",
                 c->cmdline_devices ? "microvm,x-option-roms=off,rtc=on,acpi=off" : "microvm,x-option-roms=off,rtc=on",
                 c->n_fs > 0 ? ",memory-backend=mem" : "");
        for (size_t i = 0; i < c->n_fs; i++) {
                snprintf(fs_chr[i], sizeof fs_chr[i], "socket,id=fs%zu,fd=%d", i, _FD_NEXT + (int) i);
                snprintf(fs_dev[i], sizeof fs_dev[i], "vhost-user-fs-device,chardev=fs%zu,tag=space%zu", i, i);
        }
        snprintf(smp, sizeof smp, "%u", c->vcpus ?: 1);
        snprintf(kernel, sizeof kernel, "/proc/self/fd/%d", FD_KERNEL);
        snprintf(initrd, sizeof initrd, "/proc/self/fd/%d", FD_INITRD);
        snprintf(drive, sizeof drive, "file=/proc/self/fd/%d,format=raw,if=none,id=root,discard=unmap", FD_DISK);
        snprintf(agent, sizeof agent, "socket,id=agent,fd=%d", FD_AGENT);
        snprintf(control, sizeof control, "socket,id=qmp,fd=%d,server=on,wait=off", FD_CONTROL);
        snprintf(incoming, sizeof incoming, "fd:%d", FD_INCOMING);
        snprintf(netdev, sizeof netdev, "tap,id=net0,fd=%d", FD_NET);
        snprintf(nic, sizeof nic, "virtio-net-device,netdev=net0,mac=%02x:%02x:%02x:%02x:%02x:%02x", c->net_mac[0],
                 c->net_mac[1], c->net_mac[2], c->net_mac[3], c->net_mac[4], c->net_mac[5]);
        if (c->accel == VMM_ACCEL_KVM)
                snprintf(accel, sizeof accel, "kvm");
        else
                snprintf(accel, sizeof accel, "tcg,tb-size=%d", QEMU_TB_SIZE_MB);

        argv[n++] = c->binary;
        argv[n++] = "-name";
        argv[n++] = c->id;
        argv[n++] = "-M";
        /* acpi=off: QEMU lists the virtio-mmio devices on the kernel's command line instead */
        argv[n++] = machine;
        if (c->n_fs > 0) {
                argv[n++] = "-object";
                argv[n++] = memobj;
                /* libvhost-user (virtiofsd) serves virtio 1.0 only: modern virtio-mmio devices */
                argv[n++] = "-global";
                argv[n++] = "virtio-mmio.force-legacy=false";
        }
        argv[n++] = "-accel";
        argv[n++] = accel;
        argv[n++] = "-cpu";
        argv[n++] = c->accel == VMM_ACCEL_KVM ? "host" : "max";
        argv[n++] = "-smp";
        argv[n++] = smp;
        argv[n++] = "-m";
        argv[n++] = mem;
        argv[n++] = "-nodefaults";
        argv[n++] = "-no-user-config";
        argv[n++] = "-display";
        argv[n++] = "none";
        argv[n++] = "-serial";
        argv[n++] = "stdio";
        argv[n++] = "-no-reboot";
        argv[n++] = "-kernel";
        argv[n++] = kernel;
        argv[n++] = "-initrd";
        argv[n++] = initrd;
        argv[n++] = "-append";
        argv[n++] = c->cmdline;
        argv[n++] = "-drive";
        argv[n++] = drive;
        argv[n++] = "-device";
        argv[n++] = "virtio-blk-device,drive=root";
        argv[n++] = "-device";
        argv[n++] = "virtio-serial-device,max_ports=2";
        argv[n++] = "-chardev";
        argv[n++] = agent;
        argv[n++] = "-device";
        argv[n++] = "virtserialport,chardev=agent,name=space.agent";
        argv[n++] = "-device";
        argv[n++] = "virtio-rng-device";
        if (c->net_fd >= 0) {
                argv[n++] = "-netdev";
                argv[n++] = netdev;
                argv[n++] = "-device";
                argv[n++] = nic;
        }
        for (size_t i = 0; i < c->n_fs; i++) {
                argv[n++] = "-chardev";
                argv[n++] = fs_chr[i];
                argv[n++] = "-device";
                argv[n++] = fs_dev[i];
        }
        argv[n++] = "-chardev";
        argv[n++] = control;
        argv[n++] = "-mon";
        argv[n++] = "chardev=qmp,mode=control";
        argv[n++] = "-sandbox";
        argv[n++] = "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny";
        if (c->incoming_fd >= 0) {
                argv[n++] = "-incoming";
                argv[n++] = incoming;
        }
        argv[n] = NULL;

        if (pipe2(ep, O_CLOEXEC) < 0)
                return negative_errno();
        struct clone_args args = {
                .flags = CLONE_PIDFD | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS,
                .pidfd = (uint64_t) (uintptr_t) &pidfd,
                .exit_signal = SIGCHLD,
        };
        if (c->cgroup_fd >= 0) {
                args.flags |= CLONE_INTO_CGROUP;
                args.cgroup = (uint64_t) c->cgroup_fd;
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
                /* child: no allocation; fds into place, privileges away, exec */
                const int want[] = { c->kernel_fd, c->initrd_fd, c->disk_fd, c->agent_link_fd, c->control_fd,
                                     c->incoming_fd >= 0 ? c->incoming_fd : c->log_fd,
                                     c->net_fd >= 0 ? c->net_fd : c->log_fd };
                int errfd = ep[1], tmp[ELEMENTSOF(want)], fstmp[VMM_FS_MAX];
                sigset_t none;
                char *envp[] = { (char *) "PATH=/usr/bin:/bin", NULL };

                /* move everything above the target range first so dup2 never clobbers a source */
                errfd = fcntl(errfd, F_DUPFD_CLOEXEC, 64);
                for (size_t i = 0; i < ELEMENTSOF(want); i++)
                        if ((tmp[i] = fcntl(want[i], F_DUPFD, 64)) < 0)
                                vm_child_fail(errfd, "dup");
                for (size_t i = 0; i < c->n_fs; i++)
                        if ((fstmp[i] = fcntl(c->fs_fd[i], F_DUPFD, 64)) < 0)
                                vm_child_fail(errfd, "dup");
                if (dup2(c->log_fd, STDOUT_FILENO) < 0 || dup2(c->log_fd, STDERR_FILENO) < 0)
                        vm_child_fail(errfd, "dup2 log");
                int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (nul < 0 || dup2(nul, STDIN_FILENO) < 0)
                        vm_child_fail(errfd, "open /dev/null");
                for (size_t i = 0; i < ELEMENTSOF(want); i++)
                        if (dup2(tmp[i], FD_KERNEL + (int) i) < 0)
                                vm_child_fail(errfd, "dup2");
                for (size_t i = 0; i < c->n_fs; i++)
                        if (dup2(fstmp[i], _FD_NEXT + (int) i) < 0)
                                vm_child_fail(errfd, "dup2");
                if (syscall(SYS_close_range, _FD_NEXT + (unsigned) c->n_fs, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
                        vm_child_fail(errfd, "close_range");
                sigemptyset(&none);
                (void) sigprocmask(SIG_SETMASK, &none, NULL);
                /* under KVM it keeps only the group that opens /dev/kvm, if the device needs one */
                gid_t groups[1] = { c->kvm_gid };
                size_t n_groups = c->accel == VMM_ACCEL_KVM && c->kvm_gid != (gid_t) -1 ? 1 : 0;
                if (setgroups(n_groups, groups) < 0 || setresgid(c->uid, c->uid, c->uid) < 0 ||
                    setresuid(c->uid, c->uid, c->uid) < 0)
                        vm_child_fail(errfd, "drop privileges");
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                        vm_child_fail(errfd, "no_new_privs");
                execve(c->binary, (char *const *) argv, envp);
                vm_child_fail(errfd, "execve");
        }
        safe_close(ep[1]);
        r = vm_child_exec_result(ep[0], pidfd, "QEMU", err, err_size);
        if (r < 0) {
                safe_close(pidfd);
                return r;
        }
        *ret_pid = pid;
        *ret_pidfd = pidfd;
        return 0;
}

static int qemu_pause(const char *control_path, bool pause) {
        Qmp q;
        int r = qmp_open(control_path, &q);
        if (r < 0)
                return r;
        r = qmp_execute(&q, pause ? "stop" : "cont", NULL, NULL, NULL, 0);
        qmp_close(&q);
        return r;
}

static int qemu_save(const char *control_path, int fd) {
        char err[256] = "";
        Qmp q;
        int r;

        r = qmp_open(control_path, &q);
        if (r < 0)
                return r;
        r = qmp_execute(&q, "stop", NULL, NULL, err, sizeof err);
        if (r >= 0) /* the default (32 MiB/s) would make saving a large guest crawl */
                r = qmp_execute(&q, "migrate-set-parameters", "{\"max-bandwidth\":1099511627776}", NULL, err,
                                sizeof err);
        if (r >= 0)
                r = qmp_send_fd(&q, "space-save", fd);
        if (r >= 0)
                r = qmp_execute(&q, "migrate", "{\"uri\":\"fd:space-save\"}", NULL, err, sizeof err);
        for (int i = 0; r >= 0; i++) {
                JsonValue *st = NULL;
                if (i > QEMU_MIGRATE_POLLS) {
                        r = -ETIMEDOUT;
                        break;
                }
                r = qmp_execute(&q, "query-migrate", NULL, &st, err, sizeof err);
                if (r < 0)
                        break;
                const char *s = json_string(json_get(st, "status"));
                bool done = s && streq(s, "completed"), failed = s && (streq(s, "failed") || streq(s, "cancelled"));
                if (failed)
                        snprintf(err, sizeof err, "%s", strna(json_string(json_get(st, "error-desc"))));
                json_free(st);
                if (done)
                        break;
                if (failed)
                        r = -EIO;
                else
                        (void) usleep(QEMU_MIGRATE_POLL_USEC);
        }
        if (r < 0)
                log_warning("Saving the VM through %s failed: %s", control_path, err[0] ? err : strerror(-r));
        qmp_close(&q);
        return r;
}

static int qemu_resume_incoming(int control_fd, char *err, size_t err_size) {
        Qmp q;
        int r;

        if (err_size > 0)
                err[0] = 0;
        /* QEMU's monitor is silent while it reads the machine (a loaded host: many seconds) */
        r = qmp_open_fd(control_fd, QEMU_INCOMING_TIMEOUT_MSEC, &q);
        if (r < 0)
                return r;
        for (int i = 0;; i++) {
                JsonValue *st = NULL;
                if (i > QEMU_MIGRATE_POLLS) {
                        r = -ETIMEDOUT;
                        break;
                }
                r = qmp_execute(&q, "query-status", NULL, &st, err, err_size);
                if (r < 0)
                        break;
                const char *s = json_string(json_get(st, "status"));
                bool loading = !s || streq(s, "inmigrate") || streq(s, "prelaunch") || streq(s, "restore-vm");
                bool bad = s && (streq(s, "internal-error") || streq(s, "io-error") || streq(s, "shutdown") ||
                                 streq(s, "guest-panicked"));
                if (bad)
                        snprintf(err, err_size, "the machine is in state %s", s);
                json_free(st);
                if (bad) {
                        r = -EIO;
                        break;
                }
                if (!loading)
                        break;
                (void) usleep(QEMU_MIGRATE_POLL_USEC);
        }
        if (r >= 0)
                r = qmp_execute(&q, "cont", NULL, NULL, err, err_size);
        qmp_close(&q);
        return r;
}

static int qemu_quit(const char *control_path) {
        Qmp q;
        int r = qmp_open(control_path, &q);
        if (r < 0)
                return r;
        r = qmp_execute(&q, "quit", NULL, NULL, NULL, 0);
        qmp_close(&q);
        return r;
}

const VmmDriver vmm_qemu = {
        .name = "qemu",
        .available = qemu_available,
        .start = qemu_start,
        .pause = qemu_pause,
        .save = qemu_save,
        .resume_incoming = qemu_resume_incoming,
        .quit = qemu_quit,
};
