/* SPDX-License-Identifier: MIT */
/* The vm runtime: each sandbox a microVM with its own guest kernel.
 *
 * Per sandbox, on the host (everything in the sandbox's cgroup):
 *   - the VMM (vmm.h; QEMU microvm) as the sandbox's unprivileged uid, with
 *     the guest kernel, an initramfs (modules + space-agent as /init + the
 *     sandbox's settings, a sealed memfd) and the root disk (a reflink clone
 *     of the template's ext4 image) handed over as fds;
 *   - the relay: a process that listens on the sandbox's usual agent socket
 *     and multiplexes its connections over the guest's virtio-serial port
 *     (vmux.h), as the sandbox's uid after binding;
 *   - <run_dir>/<id>/qmp.sock, the VMM's control socket, and console.log,
 *     the VMM's output and the guest's console.
 * The sandbox's "PID 1" for the worker is the VMM: when it exits, the
 * sandbox has stopped (a guest kernel panic makes QEMU exit: panic=-1,
 * -no-reboot). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <grp.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc-util.h"
#include "cgroup.h"
#include "fd-util.h"
#include "json.h"
#include "log.h"
#include "qmp.h"
#include "sock-io.h"
#include "str-util.h"
#include "time-util.h"
#include "vm-initrd.h"
#include "vm-kvm.h"
#include "vm-identity.h"
#include "vm-restored.h"
#include "vm-virtiofs.h"
#include "vmm.h"
#include "vmux.h"

#define VM_BOOT_TIMEOUT_MSEC 120000     /* TCG on a loaded host is slow */
#define VM_KVM_PROBE_MSEC 20000         /* a KVM boot that takes longer is not working */
#define VM_MEMORY_OVERHEAD_MB 192U      /* the VMM's own memory in the cgroup beside the guest's */
#define VM_PIDS_MAX 256U                /* the VMM's threads and the relay */
#define VM_CONSOLE_TAIL 600U            /* bytes of console.log quoted in a failed create */
#define VM_KERNEL_DIR_FILES_MAX (64U * 1024U * 1024U)
#define VM_QEMU_DEFAULT "/usr/bin/qemu-system-x86_64"
#define VM_REASON_MAX 200U              /* bytes of a stop reason read from the console */
#define VM_CONSOLE_SCAN 8192U           /* bytes at the end of console.log searched for one */
#define VM_RELAY_MARK "space-vm-relay: " /* how the relay's lines in console.log start */
#define VM_NEUTRAL_HOSTNAME "space"      /* the hostname a base snapshot is booted with */

static const VmmDriver *vmm = &vmm_qemu;

static struct {
        bool probed, usable;
        char why[256];
        char run_dir[512];
        char kernel_dir[512];
        char qemu[512];
        char virtiofsd[512];     /* serves volumes (vm-virtiofs.h) */
        char kernel_version[128];
        char vmm_version[64];
        VmmAccel accel;          /* chosen: TCG until a KVM boot worked */
        bool accel_auto, kvm_tried, kvm_probing;
        char kvm_device[256];
        gid_t kvm_gid;           /* the group the VMM keeps to open kvm_device ((gid_t) -1: none needed) */
        uint8_t *modules;        /* modules.cpio */
        size_t modules_len;
        VmInitrd base;           /* modules + /dev + /init: each sandbox's initramfs starts with it */
        uint64_t base_hash;      /* FNV-1a of base (modules and agent): part of a base snapshot's key */
        char kernel_stamp[96];   /* vmlinux inode-size-mtime: part of a base snapshot's key */
        unsigned tsc_khz;
        bool cmdline_devices;    /* the kernel finds its virtio-mmio devices on its command line, not in ACPI */
} vm;

static int vm_read_file(const char *dir, const char *name, size_t max, char **ret, size_t *ret_size) {
        _cleanup_free_ char *p = strjoin(dir, "/", name);
        return p ? read_full_file(p, max, ret, ret_size) : -ENOMEM;
}

/* The host's TSC rate for tsc_early_khz= (the guest cannot calibrate it under microvm). */
static unsigned vm_tsc_khz(void) {
        _cleanup_free_ char *info = NULL;
        const char *p;
        double mhz;

        if (read_full_file("/proc/cpuinfo", 4U << 20, &info, NULL) < 0 || !(p = strstr(info, "cpu MHz")) ||
            !(p = strchr(p, ':')) || sscanf(p + 1, "%lf", &mhz) != 1 || mhz < 100 || mhz > 100000)
                return 2000000U;
        return (unsigned) (mhz * 1000);
}

static int vm_build_base(int agent_fd) {
        _cleanup_free_ uint8_t *agent = NULL;
        struct stat st;
        int r;

        if (fstat(agent_fd, &st) < 0)
                return negative_errno();
        agent = malloc((size_t) st.st_size);
        if (!agent)
                return -ENOMEM;
        if (pread(agent_fd, agent, (size_t) st.st_size, 0) != st.st_size)
                return -EIO;
        r = vm_initrd_append(&vm.base, vm.modules, vm.modules_len);
        if (r >= 0)
                r = vm_initrd_add(&vm.base, "dev", S_IFDIR | 0755, 0, 0, NULL, 0);
        if (r >= 0)
                r = vm_initrd_add(&vm.base, "dev/console", S_IFCHR | 0600, 5, 1, NULL, 0);
        if (r >= 0)
                r = vm_initrd_add(&vm.base, "dev/null", S_IFCHR | 0666, 1, 3, NULL, 0);
        if (r >= 0)
                r = vm_initrd_add(&vm.base, "init", S_IFREG | 0755, 0, 0, agent, (size_t) st.st_size);
        return r;
}

static int vm_probe(const RuntimeHost *host, char *why, size_t why_size) {
        _cleanup_free_ char *version = NULL, *modules = NULL, *vmlinux = NULL;
        size_t n = 0;
        int r;

        if (vm.probed) {
                snprintf(why, why_size, "%s", vm.why);
                return vm.usable ? 0 : -EOPNOTSUPP;
        }
        vm.probed = true;
        (void) strscpy(vm.run_dir, sizeof vm.run_dir, host->run_dir);
        (void) strscpy(vm.kernel_dir, sizeof vm.kernel_dir, strempty(host->vm_kernel_dir));
        (void) strscpy(vm.qemu, sizeof vm.qemu, isempty(host->vm_qemu) ? VM_QEMU_DEFAULT : host->vm_qemu);
        (void) strscpy(vm.virtiofsd, sizeof vm.virtiofsd, VM_VIRTIOFSD_DEFAULT);
        r = vmm->available(vm.qemu, vm.vmm_version, sizeof vm.vmm_version);
        if (r < 0) {
                snprintf(vm.why, sizeof vm.why, "QEMU is not installed (%s: %s)", vm.qemu,
                         r == -EINVAL ? "not an absolute path" : strerror(-r));
                goto fail;
        }
        vmlinux = strjoin(vm.kernel_dir, "/vmlinux");
        if (!vmlinux || access(vmlinux, R_OK) < 0) {
                snprintf(vm.why, sizeof vm.why, "no guest kernel in '%s' (make one with vm/kernel/build.sh DIR)",
                         vm.kernel_dir);
                r = -ENOENT;
                goto fail;
        }
        r = vm_read_file(vm.kernel_dir, "modules.cpio", VM_KERNEL_DIR_FILES_MAX, &modules, &n);
        if (r < 0) {
                snprintf(vm.why, sizeof vm.why, "cannot read %s/modules.cpio: %s", vm.kernel_dir, strerror(-r));
                goto fail;
        }
        vm.modules = (uint8_t *) TAKE_PTR(modules);
        vm.modules_len = n;
        if (vm_read_file(vm.kernel_dir, "version", 256, &version, NULL) >= 0) {
                version[strcspn(version, "\n")] = 0;
                (void) strscpy(vm.kernel_version, sizeof vm.kernel_version, version);
        }
        r = vm_build_base(host->agent_exe_fd);
        if (r < 0) {
                snprintf(vm.why, sizeof vm.why, "cannot build the guest initramfs: %s", strerror(-r));
                goto fail;
        }
        vm.tsc_khz = vm_tsc_khz();
        /* a kernel without (usable) ACPI says so with this file (vm/kernel/build-minimal.sh) */
        {
                _cleanup_free_ char *p = strjoin(vm.kernel_dir, "/cmdline-devices");
                vm.cmdline_devices = p && access(p, F_OK) == 0;
        }
        vm.base_hash = UINT64_C(14695981039346656037);
        for (size_t i = 0; i < vm.base.len; i++)
                vm.base_hash = (vm.base_hash ^ vm.base.data[i]) * UINT64_C(1099511628211);
        {
                struct stat st;
                if (stat(vmlinux, &st) == 0)
                        snprintf(vm.kernel_stamp, sizeof vm.kernel_stamp, "%llu-%lld-%lld.%09ld",
                                 (unsigned long long) st.st_ino, (long long) st.st_size,
                                 (long long) st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
        }

        vm.accel_auto = isempty(host->vm_accel) || streq(host->vm_accel, "auto");
        (void) strscpy(vm.kvm_device, sizeof vm.kvm_device,
                       isempty(host->vm_kvm_device) ? "/dev/kvm" : host->vm_kvm_device);
        vm.kvm_gid = (gid_t) -1;
        if (vm.accel_auto) {
                /* the VMM opens it as the sandbox's uid: the device's mode decides, not root's access */
                struct stat st;
                int k = stat(vm.kvm_device, &st) < 0 ? negative_errno() : vm_kvm_access(&st, &vm.kvm_gid);
                vm.accel = k >= 0 ? VMM_ACCEL_KVM : VMM_ACCEL_TCG;
                if (k == -EACCES)
                        log_warning("vm runtime: %s (mode %04o) opens for its owner only, not for the sandboxes' "
                                    "VMMs: make it 0666, or 0660 with a group of its own (kvm), to use KVM",
                                    vm.kvm_device, (unsigned) (st.st_mode & 07777));
        } else
                vm.accel = vmm_accel_from_string(host->vm_accel);
        if ((int) vm.accel < 0) {
                snprintf(vm.why, sizeof vm.why, "unknown accelerator '%s'", host->vm_accel);
                r = -EINVAL;
                goto fail;
        }
        if (vm.accel == VMM_ACCEL_TCG)
                log_warning("vm runtime: no usable KVM (%s), microVMs run under TCG software emulation: "
                            "slow, for development and tests only", vm.accel_auto ? vm.kvm_device : "vm_accel tcg");
        log_info("vm runtime: %s, guest kernel %s, accelerator %s%s", vm.vmm_version, vm.kernel_version,
                 vmm_accel_to_string(vm.accel), vm.accel_auto && vm.accel == VMM_ACCEL_KVM ? " (if a boot succeeds)" : "");
        vm.usable = true;
        vm.why[0] = 0;
        return 0;
fail:
        snprintf(why, why_size, "%s", vm.why);
        log_info("vm runtime unavailable: %s", vm.why);
        return r;
}

static char *vm_info_json(void) {
        JsonWriter w;
        char *s = NULL;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "name", "vm");
        json_w_kv_bool(&w, "available", vm.usable);
        if (!vm.usable)
                json_w_kv_string(&w, "reason", vm.why);
        else {
                json_w_kv_string(&w, "vmm", vm.vmm_version);
                json_w_kv_string(&w, "accelerator", vmm_accel_to_string(vm.accel));
                json_w_key(&w, "accelerators");
                json_w_array_begin(&w);
                if (vm.accel == VMM_ACCEL_KVM)
                        json_w_string(&w, "kvm");
                json_w_string(&w, "tcg");
                json_w_array_end(&w);
                json_w_kv_string(&w, "agent_transport", "virtio-serial");
                json_w_kv_string(&w, "guest_kernel", vm.kernel_version);
                json_w_kv_string(&w, "disk", "ext4 image, reflink clone");
        }
        json_w_object_end(&w);
        if (json_w_finish(&w, &s, NULL) < 0)
                return NULL;
        return s;
}

static int vm_path(const char *id, const char *name, char *buf, size_t n) {
        int k = snprintf(buf, n, "%s/%s/%s", vm.run_dir, id, name);
        return k < 0 || (size_t) k >= n ? -ENAMETOOLONG : 0;
}

static int vm_initrd_for(const RuntimeSpec *spec, int *ret_fd) {
        _cleanup_(vm_initrd_done) VmInitrd c = {};
        _cleanup_free_ char *cfg = NULL;
        size_t len = 0;
        int r;

        /* /config: "H<hostname>\0" "E<K=V>\0"... "N<address> <gateway>\0" "R<resolv.conf>\0" */
        cfg = malloc(VM_INITRD_CONFIG_MAX);
        if (!cfg)
                return -ENOMEM;
#define CFG_ADD(prefix, s)                                                   \
        do {                                                                 \
                size_t l_ = strlen(s);                                       \
                if (len + l_ + 2 > VM_INITRD_CONFIG_MAX)                     \
                        return -E2BIG;                                       \
                cfg[len++] = (prefix);                                       \
                memcpy(cfg + len, (s), l_ + 1);                              \
                len += l_ + 1;                                               \
        } while (0)
        /* neutral: nothing of the sandbox in the memory a base snapshot is saved from */
        CFG_ADD('H', spec->neutral ? VM_NEUTRAL_HOSTNAME : spec->hostname);
        if (!spec->neutral) {
                char idenv[128];
                snprintf(idenv, sizeof idenv, "SPACE_SANDBOX_ID=%s", spec->id);
                CFG_ADD('E', idenv);
                for (char **e = spec->env; e && *e; e++)
                        CFG_ADD('E', *e);
        }
        if (spec->net && !spec->neutral) {
                char a[INET_ADDRSTRLEN], g[INET_ADDRSTRLEN], n[2 * INET_ADDRSTRLEN + 2];
                if (!inet_ntop(AF_INET, &spec->net_addr, a, sizeof a) ||
                    !inet_ntop(AF_INET, &spec->net_gateway, g, sizeof g))
                        return -EINVAL;
                snprintf(n, sizeof n, "%s %s", a, g);
                CFG_ADD('N', n);
        }
        if (spec->resolv_conf && !spec->neutral)
                CFG_ADD('R', spec->resolv_conf);
        /* "V<index> <rw|ro> <path>": the virtiofs tag space<index> mounted at path */
        for (size_t i = 0; i < spec->n_volumes; i++) {
                char v[RUNTIME_VOLUME_PATH_MAX + 16];
                snprintf(v, sizeof v, "%zu %s %s", i, spec->volumes[i].read_only ? "ro" : "rw", spec->volumes[i].path);
                CFG_ADD('V', v);
        }
#undef CFG_ADD
        r = vm_initrd_append(&c, vm.base.data, vm.base.len);
        if (r >= 0)
                r = vm_initrd_add(&c, "config", S_IFREG | 0600, 0, 0, cfg, len);
        if (r >= 0)
                r = vm_initrd_finish(&c);
        if (r < 0)
                return r;
        return vm_initrd_memfd(&c, ret_fd);
}

/* Relays are children of the worker (reaped at destroy, so none lingers as
 * a zombie); their pidfds by sandbox id. */
typedef struct VmRelay {
        char id[64];
        int pidfd;
} VmRelay;
static VmRelay *relays;
static size_t n_relays, allocated_relays;

static void vm_relay_reap(const char *id) {
        for (size_t i = 0; i < n_relays;)
                if (streq(relays[i].id, id)) {
                        (void) syscall(SYS_pidfd_send_signal, relays[i].pidfd, SIGKILL, NULL, 0);
                        (void) waitid(P_PIDFD, (id_t) relays[i].pidfd, &(siginfo_t){}, WEXITED);
                        safe_close(relays[i].pidfd);
                        relays[i] = relays[--n_relays];
                } else
                        i++;
}

/* a sandbox's virtiofsds are reaped with its relay */
static int vm_relay_keep(const char *id, int pidfd) {
        if (GREEDY_REALLOC(relays, allocated_relays, n_relays + 1) < 0 || strlen(id) >= sizeof relays->id)
                return -ENOMEM;
        relays[n_relays] = (VmRelay){ .pidfd = pidfd };
        (void) strscpy(relays[n_relays].id, sizeof relays[n_relays].id, id);
        n_relays++;
        return 0;
}

/* One virtiofsd per volume, in the sandbox's cgroup; fs_fd: the VMM's ends. */
static int vm_start_virtiofsds(const RuntimeSpec *spec, int cgfd, int logfd, int *fs_fd, char *errbuf,
                               size_t errbuf_size) {
        if (spec->n_volumes > 0 && access(vm.virtiofsd, X_OK) < 0) {
                snprintf(errbuf, errbuf_size, "volumes on the vm runtime need virtiofsd, not installed here (%s)",
                         vm.virtiofsd);
                return -EOPNOTSUPP;
        }
        for (size_t i = 0; i < spec->n_volumes; i++) {
                char sock[PATH_MAX], name[32], why[200] = "";
                int pidfd = -EBADF, r;
                pid_t pid = -1;

                snprintf(name, sizeof name, "virtiofs%zu.sock", i);
                r = vm_path(spec->id, name, sock, sizeof sock);
                if (r >= 0)
                        r = vm_virtiofsd_start(&(VmVirtiofsd){ .binary = vm.virtiofsd,
                                                               .host_path = spec->volumes[i].host_path,
                                                               .read_only = spec->volumes[i].read_only,
                                                               .uid_base = spec->uid_base,
                                                               .cgroup_fd = cgfd,
                                                               .log_fd = logfd,
                                                               .socket_path = sock },
                                               &pid, &pidfd, &fs_fd[i], why, sizeof why);
                if (r >= 0 && vm_relay_keep(spec->id, pidfd) < 0) {
                        (void) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                        (void) waitid(P_PIDFD, (id_t) pidfd, &(siginfo_t){}, WEXITED);
                        safe_close(pidfd);
                        fs_fd[i] = safe_close(fs_fd[i]);
                        r = -ENOMEM;
                }
                if (r >= 0) /* counted with the VMM (its v1 hierarchies too; v2: started there) */
                        r = cgroup_attach_v1(spec->id, pid);
                if (r < 0) {
                        snprintf(errbuf, errbuf_size, "cannot serve the volume for %s: %s", spec->volumes[i].path,
                                 why[0] ? why : strerror(-r));
                        return r;
                }
        }
        return 0;
}

/* The relay: a child in the sandbox's cgroup, as the sandbox's uid once its
 * sockets exist. When the link ends (the VMM went, or the guest broke the
 * channel's protocol) it writes why to the VM's console log and stops the
 * VMM: a VM whose agent cannot be reached any more is of no use, and the
 * worker reports its end (vm_stopped_reason) like any other. */
static int vm_start_relay(const RuntimeSpec *spec, int cgroup_fd, int listen_fd, int link_fd, int ready_fd,
                          int vmm_pidfd, int log_fd, int control_fd) {
        int pidfd = -EBADF, r;
        struct clone_args args = {
                .flags = CLONE_PIDFD,
                .pidfd = (uint64_t) (uintptr_t) &pidfd,
                .exit_signal = SIGCHLD,
        };
        pid_t pid;

        if (GREEDY_REALLOC(relays, allocated_relays, n_relays + 1) < 0 || strlen(spec->id) >= sizeof relays->id)
                return -ENOMEM;
        if (cgroup_fd >= 0) {
                args.flags |= CLONE_INTO_CGROUP;
                args.cgroup = (uint64_t) cgroup_fd;
        }
        pid = (pid_t) syscall(SYS_clone3, &args, sizeof args);
        if (pid < 0)
                return negative_errno();
        if (pid == 0) {
                sigset_t none;
                int fds[6] = { listen_fd, link_fd, ready_fd, vmm_pidfd, log_fd, control_fd };
                int nfds = control_fd >= 0 ? 6 : 5;
                (void) prctl(PR_SET_NAME, "space-vm-relay");
                sigemptyset(&none);
                (void) sigprocmask(SIG_SETMASK, &none, NULL);
                /* only the relay's fds stay open: move them to 3..7 (and the control connection to 8) */
                for (int i = 0; i < nfds; i++)
                        if ((fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 100)) < 0)
                                _exit(1);
                for (int i = 0; i < nfds; i++)
                        if (dup3(fds[i], 3 + i, O_CLOEXEC) < 0)
                                _exit(1);
                if (syscall(SYS_close_range, 3U + (unsigned) nfds, ~0U, 0U) < 0)
                        _exit(1);
                if (setgroups(0, NULL) < 0 || setresgid(spec->uid_base, spec->uid_base, spec->uid_base) < 0 ||
                    setresuid(spec->uid_base, spec->uid_base, spec->uid_base) < 0 ||
                    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                        _exit(1);
                if (control_fd >= 0) {
                        /* a saved machine: QEMU loads it (seconds under TCG) while the worker serves
                         * others; then it runs, and its agent is greeted first (it said HELLO long ago) */
                        char why[256] = "", msg[400];
                        r = vmm->resume_incoming(8, why, sizeof why);
                        if (r < 0) {
                                int k = snprintf(msg, sizeof msg,
                                                 "\n" VM_RELAY_MARK "the saved machine did not load (%s); the VM is stopped\n",
                                                 why[0] ? why : strerror(-r));
                                if (k > 0)
                                        (void) !write(7, msg, (size_t) MIN(k, (int) sizeof msg - 1));
                                (void) syscall(SYS_pidfd_send_signal, 6, SIGKILL, NULL, 0);
                                _exit(1);
                        }
                }
                VmuxConfig vc = { .role = VMUX_ROLE_HOST, .link_fd = 4, .listen_fd = 3, .ready_fd = 5,
                                  .hello_first = control_fd >= 0 };
                r = vmux_run(&vc);
                if (r == -EPROTO) {
                        static const char msg[] = "\n" VM_RELAY_MARK
                                                  "the guest broke the agent channel's protocol; the VM is stopped\n";
                        (void) !write(7, msg, sizeof msg - 1);
                } else if (r < 0 && r != -ECONNRESET && r != -EPIPE) {
                        char msg[160];
                        int k = snprintf(msg, sizeof msg, "\n" VM_RELAY_MARK "the agent channel failed (%s); the VM is stopped\n",
                                         strerror(-r));
                        if (k > 0)
                                (void) !write(7, msg, (size_t) MIN(k, (int) sizeof msg - 1));
                }
                (void) syscall(SYS_pidfd_send_signal, 6, SIGKILL, NULL, 0);
                _exit(r < 0 ? 1 : 0);
        }
        r = cgroup_attach_v1(spec->id, pid);
        if (r < 0) {
                (void) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                (void) waitid(P_PIDFD, (id_t) pidfd, &(siginfo_t){}, WEXITED);
                safe_close(pidfd);
                return r;
        }
        relays[n_relays] = (VmRelay){ .pidfd = pidfd };
        (void) strscpy(relays[n_relays].id, sizeof relays[n_relays].id, spec->id);
        n_relays++;
        return 0;
}

/* The last bytes of console.log (at most n - 1), NUL-terminated; 0 if there is none. */
static size_t vm_console_read_tail(const char *id, char *buf, size_t n) {
        char path[PATH_MAX];
        _cleanup_close_ int fd = -EBADF;
        off_t size;
        ssize_t k;

        if (n == 0 || vm_path(id, "console.log", path, sizeof path) < 0 ||
            (fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
                return 0;
        size = lseek(fd, 0, SEEK_END);
        k = size > 0 ? pread(fd, buf, n - 1, size > (off_t) (n - 1) ? size - (off_t) (n - 1) : 0) : 0;
        if (k < 0)
                k = 0;
        buf[k] = 0;
        /* the guest writes this file: no NUL, no control character goes further */
        for (ssize_t i = 0; i < k; i++)
                if (buf[i] == 0 || ((unsigned char) buf[i] < 0x20 && buf[i] != '\n'))
                        buf[i] = ' ';
        return (size_t) k;
}

static void vm_console_tail(const char *id, char *buf, size_t n) {
        char tail[VM_CONSOLE_TAIL + 1];
        size_t k = vm_console_read_tail(id, tail, sizeof tail);

        if (k == 0)
                return;
        for (size_t i = 0; i < k; i++)
                if (tail[i] == '\n')
                        tail[i] = ' ';
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, "; console: …%s", tail);
}

/* The console says why the VM ended: the relay's last word, or the guest
 * kernel's panic message (with panic=-1 and -no-reboot, QEMU exits then).
 * The guest can write its console, so this is the sandbox's own account:
 * shown to its owner, bounded and stripped of control characters. */
static int vm_stopped_reason(const char *id, char *buf, size_t size) {
        char tail[VM_CONSOLE_SCAN + 1], line[VM_REASON_MAX + 1];
        const char *p, *what;

        if (vm_console_read_tail(id, tail, sizeof tail) == 0)
                return -ENODATA;
        if ((p = strstr(tail, VM_RELAY_MARK))) {
                p += STRLEN(VM_RELAY_MARK);
                what = "";
        } else if ((p = strstr(tail, "Kernel panic - not syncing: "))) {
                p += STRLEN("Kernel panic - not syncing: ");
                what = "the guest kernel panicked: ";
        } else
                return -ENODATA;
        size_t l = MIN(strcspn(p, "\n"), (size_t) VM_REASON_MAX);
        memcpy(line, p, l);
        line[l] = 0;
        while (l > 0 && (line[l - 1] == ' ' || line[l - 1] == '\r'))
                line[--l] = 0;
        snprintf(buf, size, "%s%s", what, line);
        return 0;
}

/* Waits until the guest's agent said HELLO, the VMM exited, or timeout. */
static int vm_wait_ready(int ready_fd, int pidfd, int timeout_msec) {
        struct pollfd p[2] = { { .fd = ready_fd, .events = POLLIN }, { .fd = pidfd, .events = POLLIN } };
        char c;

        for (;;) {
                int r = poll(p, 2, timeout_msec);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return negative_errno();
                if (r == 0)
                        return -ETIMEDOUT;
                if (p[0].revents && read(ready_fd, &c, 1) == 1)
                        return 0;
                return -ECHILD; /* the VMM (or the relay) ended first */
        }
}

/* Everything a boot made goes: the VMM and relay, cgroups, sockets. */
static void vm_unwind(const char *id, const char *agent_socket, int vmm_pidfd) {
        char qmp[PATH_MAX];

        if (vmm_pidfd >= 0) {
                (void) syscall(SYS_pidfd_send_signal, vmm_pidfd, SIGKILL, NULL, 0);
                (void) waitid(P_PIDFD, (id_t) vmm_pidfd, &(siginfo_t){}, WEXITED);
        }
        (void) cgroup_kill(id);
        vm_relay_reap(id);
        (void) cgroup_remove(id);
        (void) unlink(agent_socket);
        if (vm_path(id, "qmp.sock", qmp, sizeof qmp) >= 0)
                (void) unlink(qmp);
}

/* The first half of a boot: the VMM and the relay run, the guest boots on
 * its own; *ret's sync_fd turns readable when its agent answers (or the
 * relay ends), its pidfd when the VMM exits. */
static int vm_spawn_accel(const RuntimeSpec *spec, VmmAccel accel, int timeout_msec, RuntimePending *ret,
                          char *errbuf, size_t errbuf_size) {
        _cleanup_close_ int cgfd = -EBADF, lfd = -EBADF, qfd = -EBADF, kfd = -EBADF, ifd = -EBADF, dfd = -EBADF,
                            logfd = -EBADF, pidfd = -EBADF, infd = -EBADF, cfd = -EBADF;
        int link[2] = { -EBADF, -EBADF }, ready[2] = { -EBADF, -EBADF };
        char qmp[PATH_MAX], log[PATH_MAX], kernel[PATH_MAX], cmdline[512];
        int fs_fd[VMM_FS_MAX];
        RuntimeLimits lim = spec->limits;
        uint64_t memory_mb = spec->limits.memory_bytes >> 20;
        pid_t pid = -1;
        int r;

        if (strlen(spec->id) >= sizeof ret->id || strlen(spec->agent_socket) >= sizeof ret->agent_socket) {
                snprintf(errbuf, errbuf_size, "sandbox id or socket path too long");
                return -ENAMETOOLONG;
        }
        if (spec->n_volumes > VMM_FS_MAX) {
                snprintf(errbuf, errbuf_size, "more than %d volumes", VMM_FS_MAX);
                return -E2BIG;
        }
        /* a saved machine has the devices it was saved with; QEMU saves none with virtiofs */
        if (spec->n_volumes > 0 && spec->restore_path) {
                snprintf(errbuf, errbuf_size, "a VM with volumes cannot start from a saved machine");
                return -EOPNOTSUPP;
        }
        for (size_t i = 0; i < ELEMENTSOF(fs_fd); i++)
                fs_fd[i] = -EBADF;
        /* the cgroup holds the VMM: the guest's memory plus the VMM's own */
        lim.memory_bytes = (memory_mb + VM_MEMORY_OVERHEAD_MB) << 20;
        lim.pids_max = VM_PIDS_MAX;
        lim.fsize_bytes = 0;
        r = cgroup_create(spec->id, &lim, &cgfd);
        if (r < 0) {
                snprintf(errbuf, errbuf_size, "cannot create cgroups: %s", strerror(-r));
                return r;
        }
        if (vm_path(spec->id, "qmp.sock", qmp, sizeof qmp) < 0 || vm_path(spec->id, "console.log", log, sizeof log) < 0 ||
            snprintf(kernel, sizeof kernel, "%s/vmlinux", vm.kernel_dir) >= (int) sizeof kernel) {
                r = -ENAMETOOLONG;
                goto fail;
        }
        r = sock_listen_unix(spec->agent_socket, 0, 128, &lfd);
        if (r >= 0)
                r = sock_listen_unix(qmp, 0, 128, &qfd);
        if (r < 0) {
                snprintf(errbuf, errbuf_size, "cannot create the sandbox's sockets: %s", strerror(-r));
                goto fail;
        }
        logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
        kfd = open(kernel, O_RDONLY | O_CLOEXEC);
        dfd = open(spec->disk_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (logfd < 0 || kfd < 0 || dfd < 0) {
                r = negative_errno();
                snprintf(errbuf, errbuf_size, "cannot open the VM's files: %s", strerror(-r));
                goto fail;
        }
        if (spec->restore_path) {
                infd = open(spec->restore_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                if (infd < 0) {
                        r = negative_errno();
                        snprintf(errbuf, errbuf_size, "cannot open the saved machine: %s", strerror(-r));
                        goto fail;
                }
        }
        r = vm_initrd_for(spec, &ifd);
        if (r < 0) {
                snprintf(errbuf, errbuf_size, "cannot build the initramfs: %s%s", strerror(-r),
                         r == -E2BIG ? " (environment too large)" : "");
                goto fail;
        }
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, link) < 0 || pipe2(ready, O_CLOEXEC) < 0) {
                r = negative_errno();
                goto fail;
        }
        r = vm_start_virtiofsds(spec, cgfd, logfd, fs_fd, errbuf, errbuf_size);
        if (r < 0)
                goto fail;
        /* IPv6 off in the guest: not even a link-local address (the firewall drops it anyway) */
        snprintf(cmdline, sizeof cmdline,
                 "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init ipv6.disable=1 tsc_early_khz=%u", vm.tsc_khz);

        VmmConfig vc = {
                .binary = vm.qemu,
                .id = spec->id,
                .accel = accel,
                .vcpus = spec->vcpus ?: 1,
                .memory_mb = memory_mb,
                .uid = spec->uid_base,
                .kvm_gid = vm.kvm_gid,
                .cgroup_fd = cgfd,
                .kernel_fd = kfd,
                .initrd_fd = ifd,
                .disk_fd = dfd,
                .cmdline = cmdline,
                .agent_link_fd = link[1],
                .control_fd = qfd,
                .log_fd = logfd,
                .incoming_fd = infd,
                .net_fd = spec->net ? spec->net_fd : -1,
                .cmdline_devices = vm.cmdline_devices,
                .n_fs = spec->n_volumes,
        };
        memcpy(vc.net_mac, spec->net_mac, sizeof vc.net_mac);
        memcpy(vc.fs_fd, fs_fd, sizeof vc.fs_fd);
        r = vmm->start(&vc, &pid, &pidfd, errbuf, errbuf_size);
        for (size_t i = 0; i < ELEMENTSOF(fs_fd); i++)
                fs_fd[i] = safe_close(fs_fd[i]);
        if (r < 0)
                goto fail;
        link[1] = safe_close(link[1]);
        qfd = safe_close(qfd); /* QEMU listens on it now */
        r = cgroup_attach_v1(spec->id, pid);
        if (r < 0) {
                snprintf(errbuf, errbuf_size, "cannot attach to cgroups: %s", strerror(-r));
                goto fail;
        }
        if (spec->restore_path) {
                /* the relay runs the machine once it is loaded: connected now, QEMU answers then */
                r = qmp_connect(qmp, &cfd);
                if (r < 0) {
                        snprintf(errbuf, errbuf_size, "cannot reach the VMM to restore the saved machine: %s",
                                 strerror(-r));
                        goto fail;
                }
        }
        r = vm_start_relay(spec, cgfd, lfd, link[0], ready[1], pidfd, logfd, cfd);
        if (r < 0) {
                snprintf(errbuf, errbuf_size, "cannot start the agent relay: %s", strerror(-r));
                goto fail;
        }
        safe_close(link[0]);
        safe_close(ready[1]);

        *ret = (RuntimePending){ .pid = pid, .pidfd = TAKE_FD(pidfd), .sync_fd = ready[0],
                                 .deadline_usec = (uint64_t) (mono_usec() + (int64_t) timeout_msec * 1000) };
        (void) strscpy(ret->id, sizeof ret->id, spec->id);
        (void) strscpy(ret->agent_socket, sizeof ret->agent_socket, spec->agent_socket);
        return 0;

fail:
        for (size_t i = 0; i < ELEMENTSOF(fs_fd); i++)
                safe_close(fs_fd[i]);
        safe_close(link[0]);
        safe_close(link[1]);
        safe_close(ready[0]);
        safe_close(ready[1]);
        lfd = safe_close(lfd);
        vm_unwind(spec->id, spec->agent_socket, pid > 0 ? pidfd : -EBADF);
        return r;
}

static RuntimeAccelProbe vm_accel_probe_state(void) {
        if (!vm.accel_auto || vm.accel != VMM_ACCEL_KVM || vm.kvm_tried)
                return RUNTIME_ACCEL_DECIDED;
        return vm.kvm_probing ? RUNTIME_ACCEL_PROBING : RUNTIME_ACCEL_UNDECIDED;
}

/* The probe boot ended (r: its guest answered, or why not): KVM is kept, or TCG from now on
 * (-EAGAIN: boot again). A VMM killed by the worker (the sandbox deleted meanwhile) says nothing
 * about KVM: the next boot probes again. */
static int vm_probe_verdict(RuntimePending *p, int pidfd, int r, char *errbuf, size_t errbuf_size) {
        siginfo_t si = {};

        vm.kvm_probing = false;
        if (r >= 0) {
                vm.kvm_tried = true;
                log_info("vm runtime: KVM works (sandbox %s booted under it)", p->id);
                return 0;
        }
        if (r == -ECHILD && waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED | WNOHANG | WNOWAIT) >= 0 &&
            si.si_code == CLD_KILLED && si.si_status == SIGKILL)
                return r;
        vm.kvm_tried = true;
        vm.accel = VMM_ACCEL_TCG;
        log_warning("vm runtime: a KVM boot failed (%s); falling back to TCG software emulation: slow, for "
                    "development and tests only", errbuf);
        snprintf(errbuf, errbuf_size, "the KVM probe boot failed; booting again under TCG");
        return -EAGAIN;
}

static int vm_spawn(const RuntimeSpec *spec, RuntimePending *ret, char *errbuf, size_t errbuf_size) {
        VmmAccel accel;
        int r;

        if (!vm.usable) {
                snprintf(errbuf, errbuf_size, "the vm runtime is not available: %s", vm.why);
                return -EOPNOTSUPP;
        }
        if (!spec->disk_path) {
                snprintf(errbuf, errbuf_size, "no root disk");
                return -EINVAL;
        }
        accel = vm.accel;
        if (vm_accel_probe_state() != RUNTIME_ACCEL_DECIDED) {
                if (spec->restore_path || spec->new_identity || vm.kvm_probing)
                        /* only a create's boot probes: a saved machine, or a branch's child (whose
                         * branch would fail with it), runs under the emulator, which runs every
                         * machine; the worker holds back creates while a probe runs */
                        accel = VMM_ACCEL_TCG;
                else {
                        /* the probe: this boot under KVM, with a short deadline (/dev/kvm can exist
                         * and not work, as in some nested set-ups); its verdict at finish */
                        r = vm_spawn_accel(spec, VMM_ACCEL_KVM, VM_KVM_PROBE_MSEC, ret, errbuf, errbuf_size);
                        if (r < 0) {
                                log_warning("vm runtime: a KVM boot failed (%s); falling back to TCG software "
                                            "emulation: slow, for development and tests only", errbuf);
                                vm.kvm_tried = true;
                                vm.accel = accel = VMM_ACCEL_TCG;
                                errbuf[0] = 0;
                        } else {
                                ret->accel_probe = true;
                                vm.kvm_probing = true;
                                log_info("vm runtime: probing KVM with the boot of sandbox %s", spec->id);
                                goto spawned;
                        }
                }
        }
        r = vm_spawn_accel(spec, accel, VM_BOOT_TIMEOUT_MSEC, ret, errbuf, errbuf_size);
spawned:
        if (r >= 0 && (spec->restore_path || spec->neutral)) {
                /* it wakes up with another moment's clock, RNG and maybe identity: told at finish
                 * (a neutral boot: once the worker saved it as a base snapshot) */
                r = vm_identity_put(spec);
                if (r < 0) {
                        snprintf(errbuf, errbuf_size, "cannot prepare the guest's identity: %s", strerror(-r));
                        vm_unwind(ret->id, ret->agent_socket, ret->pidfd);
                        ret->pidfd = safe_close(ret->pidfd);
                        ret->sync_fd = safe_close(ret->sync_fd);
                }
        }
        return r;
}

static int vm_finish(RuntimePending *p, RuntimeInstance *ret, char *errbuf, size_t errbuf_size) {
        _cleanup_close_ int sync_fd = TAKE_FD(p->sync_fd), pidfd = TAKE_FD(p->pidfd);
        int64_t left = (int64_t) p->deadline_usec - mono_usec();
        uint64_t starttime = 0;
        int r;

        r = vm_wait_ready(sync_fd, pidfd, p->deadline_usec == 0 ? VM_BOOT_TIMEOUT_MSEC : (int) MAX(left / 1000, 0));
        if (r < 0) {
                snprintf(errbuf, errbuf_size, "%s",
                         r == -ETIMEDOUT ? "the guest's agent did not answer in time"
                                         : "the VM stopped before its agent answered");
                vm_console_tail(p->id, errbuf, errbuf_size);
        } else if (proc_starttime(p->pid, &starttime) < 0) {
                snprintf(errbuf, errbuf_size, "the VMM vanished");
                r = -ESRCH;
        } else {
                _cleanup_free_ char *json = vm_identity_take(p->id, false);
                if (json) {
                        r = vm_restored_deliver(p->agent_socket, json, errbuf, errbuf_size);
                        explicit_bzero(json, strlen(json));
                }
        }
        if (p->accel_probe)
                r = vm_probe_verdict(p, pidfd, r, errbuf, errbuf_size);
        if (r < 0) {
                vm_identity_drop(p->id);
                vm_unwind(p->id, p->agent_socket, pidfd);
                return r;
        }
        ret->pid = p->pid;
        ret->starttime = starttime;
        ret->pidfd = TAKE_FD(pidfd);
        return 0;
}

static int vm_create(const RuntimeSpec *spec, RuntimeInstance *ret, char *errbuf, size_t errbuf_size) {
        RuntimePending p;
        int r = vm_spawn(spec, &p, errbuf, errbuf_size);

        return r < 0 ? r : vm_finish(&p, ret, errbuf, errbuf_size);
}

static int vm_destroy(const char *id, const char *agent_socket) {
        char qmp[PATH_MAX];
        int r = cgroup_kill(id), k;

        vm_identity_drop(id);
        vm_relay_reap(id);
        k = cgroup_remove(id);
        if (r >= 0)
                r = k;
        if (agent_socket && unlink(agent_socket) < 0 && errno != ENOENT && r >= 0)
                r = negative_errno();
        if (vm.run_dir[0] && vm_path(id, "qmp.sock", qmp, sizeof qmp) >= 0)
                (void) unlink(qmp);
        return r;
}

/* Whether the sandbox's VMM still listens on its control socket: the relay
 * (the pid the store has) outlives a dead QEMU by a moment. */
static bool vm_vmm_listens(const char *id) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;

        if (vm_path(id, "qmp.sock", sa.sun_path, sizeof sa.sun_path) < 0)
                return false;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        return fd >= 0 && connect(fd, (struct sockaddr *) &sa, sizeof sa) == 0;
}

static int vm_adopt(const char *id, pid_t pid, uint64_t starttime, int *ret_pidfd) {
        uint64_t st;
        int fd;

        if (pid <= 0 || proc_starttime(pid, &st) < 0 || st != starttime || !cgroup_contains(id, pid) ||
            !vm_vmm_listens(id))
                return -ESRCH;
        fd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (fd < 0)
                return negative_errno();
        *ret_pidfd = fd;
        return 0;
}

static int vm_freeze(const char *id, bool frozen) {
        char qmp[PATH_MAX];
        int r = vm_path(id, "qmp.sock", qmp, sizeof qmp);
        return r < 0 ? r : vmm->pause(qmp, frozen);
}

static int vm_suspend(const char *id, const char *state_path) {
        _cleanup_close_ int fd = -EBADF;
        char qmp[PATH_MAX];
        int r;

        r = vm_path(id, "qmp.sock", qmp, sizeof qmp);
        if (r < 0)
                return r;
        fd = open(state_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return negative_errno();
        r = vmm->save(qmp, fd);
        if (r < 0)
                (void) unlink(state_path);
        return r;
}

static int vm_snapshot(const char *id, const char *state_path, bool paused, int (*between)(void *ctx), void *ctx) {
        char qmp[PATH_MAX];
        int r, k;

        r = vm_path(id, "qmp.sock", qmp, sizeof qmp);
        if (r < 0)
                return r;
        /* stopped, memory written, disks flushed (and handed over, as to a migration target) */
        r = vm_suspend(id, state_path);
        if (r >= 0 && between) {
                r = between(ctx);
                if (r < 0)
                        (void) unlink(state_path);
        }
        /* cont takes the disks back; a paused machine is stopped again at once */
        k = vmm->pause(qmp, false);
        if (k >= 0 && paused)
                k = vmm->pause(qmp, true);
        if (k < 0)
                log_warning_errno(k, "Sandbox %s: cannot run on after saving its memory: %m", id);
        return r < 0 ? r : k;
}

static int vm_base_key(char *buf, size_t size) {
        int k;

        if (!vm.usable)
                return -EOPNOTSUPP;
        k = snprintf(buf, size, "vmm=%s kernel=%s/%s initrd=%016" PRIx64 " accel=%s", vm.vmm_version,
                     vm.kernel_version, vm.kernel_stamp, vm.base_hash, vmm_accel_to_string(vm.accel));
        return k < 0 || (size_t) k >= size ? -ENAMETOOLONG : 0;
}

static int vm_sync(const char *agent_socket) {
        char err[256] = "";
        int r = vm_agent_sync(agent_socket, err, sizeof err);
        if (r < 0)
                log_debug("sync through %s failed: %s", agent_socket, err);
        return r;
}

static int vm_identify_deferred(const char *id, const char *agent_socket, char *errbuf, size_t errbuf_size) {
        _cleanup_free_ char *json = vm_identity_take(id, true);
        int r;

        if (!json) {
                snprintf(errbuf, errbuf_size, "no identity waits for sandbox %s", id);
                return -ENOENT;
        }
        r = vm_restored_deliver(agent_socket, json, errbuf, errbuf_size);
        explicit_bzero(json, strlen(json));
        return r;
}

static int vm_set_limits(const char *id, const RuntimeLimits *limits) {
        return -EOPNOTSUPP; /* the guest's memory is fixed at boot (no balloon yet) */
}

const RuntimeOps vm_runtime_ops = {
        .name = "vm",
        .root = RUNTIME_ROOT_IMAGE,
        .net = RUNTIME_NET_TAP,
        .start = RUNTIME_START_BOOT,
        .probe = vm_probe,
        .info_json = vm_info_json,
        .create = vm_create,
        .spawn = vm_spawn,
        .finish = vm_finish,
        .destroy = vm_destroy,
        .adopt = vm_adopt,
        .list = cgroup_list,
        .freeze = vm_freeze,
        .set_limits = vm_set_limits,
        .suspend = vm_suspend,
        .oom_kills = cgroup_oom_kills,
        .stopped_reason = vm_stopped_reason,
        .snapshot = vm_snapshot,
        .identify = vm_identify,
        .identify_deferred = vm_identify_deferred,
        .base_key = vm_base_key,
        .sync = vm_sync,
        .accel_probe_state = vm_accel_probe_state,
};
