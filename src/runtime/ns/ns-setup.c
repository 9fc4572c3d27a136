/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <grp.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include "cgroup-view.h"
#include "fd-util.h"
#include "ns-harden.h"
#include "ns-setup.h"
#include "ns-sys.h"
#include "sock-io.h"
#include "space-build.h"
#include "seccomp-filter.h"
#include "statfs-notify.h"

static const char *const step_names[_NS_STEP_MAX] = {
        [NS_STEP_SYNC] = "sync",
        [NS_STEP_IDENTITY] = "identity",
        [NS_STEP_MOUNT_PRIVATE] = "mount-private",
        [NS_STEP_STAGE] = "stage",
        [NS_STEP_ROOT] = "root",
        [NS_STEP_VOLUMES] = "volumes",
        [NS_STEP_PROC] = "proc",
        [NS_STEP_DEV] = "dev",
        [NS_STEP_SYS] = "sys",
        [NS_STEP_CGROUP] = "cgroup",
        [NS_STEP_RUN] = "run",
        [NS_STEP_PIVOT] = "pivot-root",
        [NS_STEP_HOSTNAME] = "hostname",
        [NS_STEP_LOOPBACK] = "loopback",
        [NS_STEP_RESOLV_CONF] = "resolv-conf",
        [NS_STEP_MACHINE_ID] = "machine-id",
        [NS_STEP_RLIMITS] = "rlimits",
        [NS_STEP_FDS] = "fds",
        [NS_STEP_PRIVILEGES] = "privileges",
        [NS_STEP_SECCOMP] = "seccomp",
        [NS_STEP_EXEC] = "exec",
};

const char *ns_step_to_string(NsStep s) {
        return s < _NS_STEP_MAX ? step_names[s] : "unknown";
}

/* ---- parent side ---- */

int send_fd(int sock, int fd) {
        return sock_send_fds(sock, "F", 1, &fd, 1);
}

/* The one descriptor a received message carries (no libc call: the child uses it too). */
static int fd_of_msghdr(struct msghdr *mh, int *ret_fd) {
        struct cmsghdr *c = CMSG_FIRSTHDR(mh);

        if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)))
                return -EBADMSG;
        memcpy(ret_fd, CMSG_DATA(c), sizeof(int));
        return 0;
}

int recv_fd(int sock, int *ret_fd) {
        char dummy;
        struct iovec iov = { .iov_base = &dummy, .iov_len = 1 };
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } u = {};
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf };
        ssize_t k;

        do
                k = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
        while (k < 0 && errno == EINTR);
        if (k < 0)
                return negative_errno();
        if (k == 0)
                return -ECONNRESET;
        return fd_of_msghdr(&mh, ret_fd);
}

int ns_write_id_maps(pid_t pid, uid_t base) {
        char path[64], map[64];
        int r;

        snprintf(map, sizeof map, "0 %u %u\n", (unsigned) base, RUNTIME_ID_RANGE);
        snprintf(path, sizeof path, "/proc/%d/uid_map", (int) pid);
        r = write_string_file(path, map);
        if (r < 0)
                return r;
        snprintf(path, sizeof path, "/proc/%d/gid_map", (int) pid);
        return write_string_file(path, map);
}

/* A detached clone of the mount at host_path, idmapped into pid's user
 * namespace with attr_set (MOUNT_ATTR_IDMAP and more): files stored as uid N
 * appear to the sandbox as N. */
static int idmapped_tree(const char *host_path, pid_t pid, uint64_t attr_set, int *ret_fd) {
        _cleanup_close_ int userns = -EBADF, tree = -EBADF;
        struct mount_attr attr = {};
        char path[64];

        snprintf(path, sizeof path, "/proc/%d/ns/user", (int) pid);
        userns = open(path, O_RDONLY | O_CLOEXEC);
        if (userns < 0)
                return negative_errno();
        tree = (int) syscall(SYS_open_tree, AT_FDCWD, host_path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (tree < 0)
                return negative_errno();
        attr.attr_set = attr_set;
        attr.userns_fd = (uint64_t) userns;
        if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
                return negative_errno();
        *ret_fd = TAKE_FD(tree);
        return 0;
}

int ns_idmapped_root(const char *root_path, pid_t pid, int *ret_fd) {
        return idmapped_tree(root_path, pid, MOUNT_ATTR_IDMAP | MOUNT_ATTR_NODEV, ret_fd);
}

int ns_idmapped_volume(const char *host_path, bool read_only, pid_t pid, int *ret_fd) {
        return idmapped_tree(host_path, pid,
                             MOUNT_ATTR_IDMAP | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID | (read_only ? MOUNT_ATTR_RDONLY : 0),
                             ret_fd);
}

int ns_send_volume(int sock, int fd, const char *path) {
        char msg[1 + RUNTIME_VOLUME_PATH_MAX];
        size_t n = strnlen(path, RUNTIME_VOLUME_PATH_MAX);

        if (n >= RUNTIME_VOLUME_PATH_MAX || path[0] != '/')
                return -EINVAL;
        msg[0] = 'V';
        memcpy(msg + 1, path, n + 1);
        return sock_send_fds(sock, msg, n + 2, &fd, 1);
}

/* ---- child side: no allocation, no logging, no errno (ns-sys.h) ---- */

_noreturn_ static void child_fail(const NsChildArgs *a, NsStep step, int error) {
        NsChildError e = { .step = (int32_t) step, .error = error > 0 ? error : (error < 0 ? -error : EIO) };
        (void) ns_sys3(SYS_write, a->sync_fd, &e, sizeof e);
        for (;;)
                (void) ns_sys1(SYS_exit_group, 127);
}

#define CHECK(a, step, expr)                                  \
        do {                                                  \
                long _r = (expr);                             \
                if (_r < 0)                                   \
                        child_fail((a), (step), (int) _r);    \
        } while (0)

static int child_recv_fd(int sock, int *ret_fd) {
        char dummy;
        struct iovec iov = { .iov_base = &dummy, .iov_len = 1 };
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } u = {};
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf };
        long k;

        do
                k = ns_sys3(SYS_recvmsg, sock, &mh, MSG_CMSG_CLOEXEC);
        while (k == -EINTR);
        if (k < 0)
                return (int) k;
        if (k == 0)
                return -ECONNRESET;
        return fd_of_msghdr(&mh, ret_fd);
}

/* Opens a directory below the new root, refusing symlinks and "..", so a
 * hostile image cannot point a mount target at a host path. */
static int open_beneath(int rootfd, const char *rel, bool create, mode_t mode) {
        struct open_how how = {
                .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        int fd = (int) ns_sys4(SYS_openat2, rootfd, rel, &how, sizeof how), r;
        if (fd == -ENOENT && create) {
                r = (int) ns_sys3(SYS_mkdirat, rootfd, rel, mode);
                if (r < 0 && r != -EEXIST)
                        return r;
                fd = (int) ns_sys4(SYS_openat2, rootfd, rel, &how, sizeof how);
        }
        return fd;
}

static int mount_at(int rootfd, const char *rel, const char *src, const char *type, unsigned long flags,
                    const char *data) {
        char p[NS_FD_PATH_MAX];
        int fd = open_beneath(rootfd, rel, true, 0755), r;
        if (fd < 0)
                return fd;
        r = (int) ns_sys5(SYS_mount, src, ns_fd_path(p, fd), type, flags, data);
        ns_close(fd);
        return r;
}

static int bind_dev(int devfd, const char *name) {
        char src[32] = "/dev/", p[NS_FD_PATH_MAX];
        int fd, r;

        for (size_t i = 0; name[i] && i + 6 < sizeof src; i++)
                src[5 + i] = name[i];
        fd = (int) ns_sys4(SYS_openat, devfd, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (fd < 0)
                return fd;
        r = (int) ns_sys5(SYS_mount, src, ns_fd_path(p, fd), NULL, MS_BIND, NULL);
        ns_close(fd);
        return r;
}

/* tmpfs memory is charged to the sandbox's cgroup: bound each one below the
 * memory limit so filling it ends in ENOSPC, not in the OOM killer. */
static uint64_t tmpfs_size(const RuntimeSpec *spec, uint64_t cap) {
        uint64_t half = spec->limits.memory_bytes / 2;
        return half && half < cap ? half : cap;
}

_ns_child_ static void step_dev(const NsChildArgs *a, int rootfd) {
        static const char *const nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };
        static const char *const links[][2] = {
                { "pts/ptmx", "ptmx" },         { "/proc/self/fd", "fd" },       { "/proc/self/fd/0", "stdin" },
                { "/proc/self/fd/1", "stdout" }, { "/proc/self/fd/2", "stderr" },
        };
        int devfd;
        char p[NS_FD_PATH_MAX], shm_opts[64];

        ns_fmt_u64(shm_opts, sizeof shm_opts, "mode=1777,size=", tmpfs_size(a->spec, UINT64_C(256) << 20));
        CHECK(a, NS_STEP_DEV, mount_at(rootfd, "dev", "tmpfs", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=65536"));
        devfd = open_beneath(rootfd, "dev", false, 0);
        CHECK(a, NS_STEP_DEV, devfd);
        for (size_t i = 0; i < ELEMENTSOF(nodes); i++)
                CHECK(a, NS_STEP_DEV, bind_dev(devfd, nodes[i]));
        CHECK(a, NS_STEP_DEV, ns_sys3(SYS_mkdirat, devfd, "pts", 0755));
        CHECK(a, NS_STEP_DEV, ns_sys3(SYS_mkdirat, devfd, "shm", 01777));
        CHECK(a, NS_STEP_DEV, mount_at(devfd, "pts", "devpts", "devpts", MS_NOSUID | MS_NOEXEC,
                                       "newinstance,ptmxmode=0666,mode=620"));
        CHECK(a, NS_STEP_DEV, mount_at(devfd, "shm", "tmpfs", "tmpfs", MS_NOSUID | MS_NODEV, shm_opts));
        for (size_t i = 0; i < ELEMENTSOF(links); i++)
                CHECK(a, NS_STEP_DEV, ns_sys3(SYS_symlinkat, links[i][0], devfd, links[i][1]));
        /* the tmpfs itself read-only from now on */
        CHECK(a, NS_STEP_DEV, ns_sys5(SYS_mount, NULL, ns_fd_path(p, devfd), NULL,
                                      MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC, NULL));
        ns_close(devfd);
}

_ns_child_ static void step_loopback(const NsChildArgs *a) {
        struct ifreq ifr = {};
        int s = (int) ns_sys3(SYS_socket, AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

        CHECK(a, NS_STEP_LOOPBACK, s);
        memcpy(ifr.ifr_name, "lo", 3);
        CHECK(a, NS_STEP_LOOPBACK, ns_sys3(SYS_ioctl, s, SIOCGIFFLAGS, &ifr));
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        CHECK(a, NS_STEP_LOOPBACK, ns_sys3(SYS_ioctl, s, SIOCSIFFLAGS, &ifr));
        ns_close(s);
}

/* The volumes that came after the root, until the go ("g"): their fds and paths. */
typedef struct ChildVolumes {
        int fd[RUNTIME_VOLUMES_MAX];
        char path[RUNTIME_VOLUMES_MAX][RUNTIME_VOLUME_PATH_MAX];
        size_t n;
} ChildVolumes;

static int child_recv_volumes(int sock, ChildVolumes *v) {
        for (;;) {
                char msg[1 + RUNTIME_VOLUME_PATH_MAX];
                struct iovec iov = { .iov_base = msg, .iov_len = sizeof msg };
                union {
                        struct cmsghdr h;
                        char buf[CMSG_SPACE(sizeof(int))];
                } u = {};
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                                     .msg_controllen = sizeof u.buf };
                long k;
                int fd = -1;

                do
                        k = ns_sys3(SYS_recvmsg, sock, &mh, MSG_CMSG_CLOEXEC);
                while (k == -EINTR);
                if (k < 0)
                        return (int) k;
                if (k == 0)
                        return -EPIPE;
                if (mh.msg_controllen > 0 && fd_of_msghdr(&mh, &fd) < 0)
                        return -EBADMSG;
                if (msg[0] == 'g' && k == 1 && fd < 0)
                        return 0;
                /* 'V', a path of at least "/x" and its NUL */
                if (msg[0] != 'V' || fd < 0 || k < 4 || msg[k - 1] != 0 || msg[1] != '/' ||
                    v->n >= RUNTIME_VOLUMES_MAX) {
                        if (fd >= 0)
                                ns_close(fd);
                        return -EBADMSG;
                }
                for (long i = 1; i < k; i++)
                        v->path[v->n][i - 1] = msg[i];
                v->fd[v->n++] = fd;
        }
}

/* Opens (making what is missing, 0755) each component of path below rootfd,
 * one at a time, refusing symlinks and "..": a hostile image cannot aim a
 * volume at a host path or at /proc. */
static int volume_target(int rootfd, const char *path) {
        char name[RUNTIME_VOLUME_PATH_MAX];
        int dfd = -1;
        size_t i = 0;

        while (path[i] == '/')
                i++;
        while (path[i]) {
                size_t n = 0;
                int fd;

                while (path[i] && path[i] != '/' && n + 1 < sizeof name)
                        name[n++] = path[i++];
                name[n] = 0;
                if (path[i] && path[i] != '/')
                        fd = -ENAMETOOLONG;
                else if (n == 0 || (name[0] == '.' && (n == 1 || (n == 2 && name[1] == '.'))))
                        fd = -EINVAL;
                else
                        fd = open_beneath(dfd >= 0 ? dfd : rootfd, name, true, 0755);
                if (dfd >= 0)
                        ns_close(dfd);
                if (fd < 0)
                        return fd;
                dfd = fd;
                while (path[i] == '/')
                        i++;
        }
        return dfd >= 0 ? dfd : -EINVAL; /* "/" is no place for a volume */
}

_ns_child_ void ns_child_main(const NsChildArgs *args) {
        NsChildArgs copy = *args, *a = &copy;
        const RuntimeSpec *spec = a->spec;
        ChildVolumes vols = {};
        char go;
        /* proc last: the moves before it name their mounts through /proc/self/fd */
        static const char *const staged[] = { "dev", "sys", "run", "proc" };
        int rootfd_mnt = -1, rootfd, stagefd, listen_fd, exe_fd;
        long k;

        (void) ns_close(args->parent_fd);
        if (a->settle_wfd >= 0)
                (void) ns_close(a->settle_wfd);
        /* Keep the fds we need away from 0-3, which we are about to replace. */
        k = ns_sys3(SYS_fcntl, args->sync_fd, F_DUPFD_CLOEXEC, 10);
        if (k < 0)
                child_fail(args, NS_STEP_SYNC, (int) k);
        a->sync_fd = (int) k;
        listen_fd = (int) ns_sys3(SYS_fcntl, a->listen_fd, F_DUPFD_CLOEXEC, 10);
        CHECK(a, NS_STEP_SYNC, listen_fd);
        exe_fd = (int) ns_sys3(SYS_fcntl, spec->agent_exe_fd, F_DUPFD_CLOEXEC, 10);
        CHECK(a, NS_STEP_SYNC, exe_fd);
        if (a->settle_fd >= 0) {
                k = ns_sys3(SYS_fcntl, a->settle_fd, F_DUPFD_CLOEXEC, 10);
                CHECK(a, NS_STEP_SYNC, k);
                a->settle_fd = (int) k;
        }

        /* 1. wait for the parent: cgroups joined (v1: with settle_later, at 4), id maps written */
        do
                k = ns_sys3(SYS_read, a->sync_fd, &go, 1);
        while (k == -EINTR);
        if (k != 1 || go != 'm')
                child_fail(a, NS_STEP_SYNC, k < 0 ? (int) k : -EPIPE);

        /* 2. nothing we mount propagates back to the host */
        CHECK(a, NS_STEP_MOUNT_PRIVATE, ns_sys5(SYS_mount, NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL));

        /* 3. the staging directory (<socket>.stage), opened by its path in our own mount namespace
         *    while we still are the host's root, owner of its parent */
        stagefd = (int) ns_sys4(SYS_openat, AT_FDCWD, a->stage_path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
        CHECK(a, NS_STEP_STAGE, stagefd);

        /* 4. settle_later: in its cgroup v1 hierarchies (the parent moved us there meanwhile)
         * before the cgroup namespace is rooted at them and before anything runs here; EOF is
         * the parent's failure */
        if (a->settle_fd >= 0) {
                char c = 0;
                do
                        k = ns_sys3(SYS_read, a->settle_fd, &c, 1);
                while (k == -EINTR);
                if (k != 1 || c != 'c')
                        child_fail(a, NS_STEP_SYNC, k < 0 ? (int) k : -EPIPE);
                (void) ns_close(a->settle_fd);
        }
        /* a cgroup namespace rooted at the sandbox's cgroups (the parent moved us there) */
        CHECK(a, NS_STEP_IDENTITY, ns_sys1(SYS_unshare, CLONE_NEWCGROUP));

        /* 5. become root of the new user namespace (one thread: no libc set*id broadcast needed) */
        CHECK(a, NS_STEP_IDENTITY, ns_sys3(SYS_setresgid, 0, 0, 0));
        CHECK(a, NS_STEP_IDENTITY, ns_sys3(SYS_setresuid, 0, 0, 0));
        CHECK(a, NS_STEP_IDENTITY, ns_sys2(SYS_setgroups, 0, NULL));

        /* 6. while the root is being made, a tmpfs of ours stacked on the staging directory (in our
         *    own mount namespace only); its fd stays the way to it */
        {
                int fs = (int) ns_sys2(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC), mnt;
                CHECK(a, NS_STEP_STAGE, fs);
                CHECK(a, NS_STEP_STAGE, ns_sys5(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", "700", 0));
                CHECK(a, NS_STEP_STAGE, ns_sys5(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", "65536", 0));
                CHECK(a, NS_STEP_STAGE, ns_sys5(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "nr_inodes", "64", 0));
                CHECK(a, NS_STEP_STAGE, ns_sys5(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0));
                mnt = (int) ns_sys3(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
                CHECK(a, NS_STEP_STAGE, mnt);
                ns_close(fs);
                CHECK(a, NS_STEP_STAGE, ns_sys5(SYS_move_mount, mnt, "", stagefd, "",
                                                MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH));
                ns_close(stagefd);
                stagefd = mnt; /* the root of the attached tmpfs */
        }

        /* 7. in it: /proc, /dev, /sys, /run and where the root will be mounted */
        CHECK(a, NS_STEP_STAGE, ns_sys3(SYS_mkdirat, stagefd, "root", 0755));
        CHECK(a, NS_STEP_STAGE, ns_sys3(SYS_mkdirat, stagefd, "run", 0755));
        /* /proc of the new pid namespace */
        CHECK(a, NS_STEP_PROC, mount_at(stagefd, "proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                                        "hidepid=invisible"));
        if (!SPACE_BENCH_NO_HARDENING) {
                CHECK(a, NS_STEP_PROC, ns_mask_proc(stagefd));
                CHECK(a, NS_STEP_PROC, ns_fake_boot_id(stagefd, "run")); /* /run gets its own tmpfs below */
        }
        /* a minimal /dev */
        step_dev(a, stagefd);
        /* /sys read-only (of our own network namespace) */
        CHECK(a, NS_STEP_SYS, mount_at(stagefd, "sys", "sysfs", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
                                       NULL));
        if (!SPACE_BENCH_NO_HARDENING)
                CHECK(a, NS_STEP_SYS, ns_mask_sys(stagefd));
        /* its own cgroups, read-only, at /sys/fs/cgroup (the cgroup namespace of step 4 is their root) */
        CHECK(a, NS_STEP_CGROUP, ns_mount_cgroup_view(stagefd, cgroup_view_get()));
        /* /run as tmpfs */
        {
                char run_opts[64];
                ns_fmt_u64(run_opts, sizeof run_opts, "mode=755,size=", tmpfs_size(spec, UINT64_C(64) << 20) / 2);
                CHECK(a, NS_STEP_RUN, mount_at(stagefd, "run", "tmpfs", "tmpfs", MS_NOSUID | MS_NODEV, run_opts));
        }
        /* identity and network (our own uts and net namespaces), limits */
        CHECK(a, NS_STEP_HOSTNAME, ns_sys2(SYS_sethostname, spec->hostname, strlen(spec->hostname)));
        step_loopback(a);
        CHECK(a, NS_STEP_RLIMITS, ns_set_rlimits(&spec->limits));

        /* 7b. the staging tmpfs becomes our root and the host's tree (our copy of it) goes, now and
         *     not after the root comes: an unmount waits for an RCU grace period (milliseconds on a
         *     busy host), which the root's snapshot hides. Nothing of the host's is reached by a path
         *     from here on (the root and the agent come as fds; /proc/self/fd is the staged /proc). */
        CHECK(a, NS_STEP_PIVOT, ns_sys1(SYS_fchdir, stagefd));
        CHECK(a, NS_STEP_PIVOT, ns_sys2(SYS_pivot_root, ".", "."));
        CHECK(a, NS_STEP_PIVOT, ns_sys2(SYS_umount2, ".", MNT_DETACH));
        CHECK(a, NS_STEP_PIVOT, ns_sys1(SYS_chdir, "/"));

        /* 8. the idmapped root (its fd), the volumes (each fd with its path), then "g" */
        k = child_recv_fd(a->sync_fd, &rootfd_mnt);
        CHECK(a, NS_STEP_SYNC, k);
        CHECK(a, NS_STEP_SYNC, child_recv_volumes(a->sync_fd, &vols));

        /* 9. the idmapped root attached in the staging tmpfs, then work below it */
        {
                int target = open_beneath(stagefd, "root", false, 0);
                CHECK(a, NS_STEP_ROOT, target);
                CHECK(a, NS_STEP_ROOT, ns_sys5(SYS_move_mount, rootfd_mnt, "", target, "",
                                               MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH));
                ns_close(target);
                rootfd = rootfd_mnt; /* now the root of the attached mount */
                CHECK(a, NS_STEP_ROOT, ns_sys1(SYS_fchdir, rootfd));
        }

        /* 10. the staged mounts onto the root's directories (symlinks and ".." refused there) */
        for (size_t i = 0; i < ELEMENTSOF(staged); i++) {
                char from[NS_FD_PATH_MAX], to[NS_FD_PATH_MAX];
                int src = open_beneath(stagefd, staged[i], false, 0), dst;

                CHECK(a, NS_STEP_STAGE, src);
                dst = open_beneath(rootfd, staged[i], true, 0755);
                CHECK(a, NS_STEP_STAGE, dst);
                CHECK(a, NS_STEP_STAGE, ns_sys5(SYS_mount, ns_fd_path(from, src), ns_fd_path(to, dst), NULL, MS_MOVE, NULL));
                ns_close(src);
                ns_close(dst);
        }

        /* 10b. the volumes onto their directories (made if missing; symlinks and ".." refused) */
        for (size_t i = 0; i < vols.n; i++) {
                int target = volume_target(rootfd, vols.path[i]);
                CHECK(a, NS_STEP_VOLUMES, target);
                CHECK(a, NS_STEP_VOLUMES, ns_sys5(SYS_move_mount, vols.fd[i], "", target, "",
                                                  MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH));
                ns_close(target);
                ns_close(vols.fd[i]);
        }

        /* 11. the root moved onto "/", over the staging tmpfs, and made ours: no unmount, so no
         *     grace period to wait for after the root came. The tmpfs stays below as the mount
         *     namespace's root, emptied and read-only: a process that climbs out of a chroot of
         *     its own finds an empty directory there (the sandbox can neither unmount nor mount:
         *     no CAP_SYS_ADMIN, umount2 refused by seccomp). */
        CHECK(a, NS_STEP_PIVOT, ns_sys5(SYS_mount, ".", "/", NULL, MS_MOVE, NULL));
        CHECK(a, NS_STEP_PIVOT, ns_sys1(SYS_chroot, "."));
        CHECK(a, NS_STEP_PIVOT, ns_sys1(SYS_chdir, "/"));
        for (size_t i = 0; i < ELEMENTSOF(staged); i++)
                CHECK(a, NS_STEP_PIVOT, ns_sys3(SYS_unlinkat, stagefd, staged[i], AT_REMOVEDIR));
        CHECK(a, NS_STEP_PIVOT, ns_sys3(SYS_unlinkat, stagefd, "root", AT_REMOVEDIR));
        {
                char p[NS_FD_PATH_MAX];
                CHECK(a, NS_STEP_PIVOT, ns_sys5(SYS_mount, NULL, ns_fd_path(p, stagefd), NULL,
                                                MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                                                NULL));
        }
        ns_close(stagefd);
        ns_close(rootfd);

        /* 12. the root's own files */
        if (spec->resolv_conf)
                CHECK(a, NS_STEP_RESOLV_CONF, ns_write_resolv_conf(spec->resolv_conf));
        CHECK(a, NS_STEP_MACHINE_ID, ns_write_machine_id());

        /* 13. fds: 0-2 → /dev/null, 3 = agent socket, every other fd closes at exec */
        {
                int null = (int) ns_sys4(SYS_openat, AT_FDCWD, "/dev/null", O_RDWR | O_CLOEXEC, 0);
                CHECK(a, NS_STEP_FDS, null);
                for (int i = 0; i < 3; i++)
                        CHECK(a, NS_STEP_FDS, ns_dup2(null, i));
                if (null > 2)
                        ns_close(null);
                CHECK(a, NS_STEP_FDS, ns_dup2(listen_fd, 3)); /* dup2 clears CLOEXEC on 3 */
                CHECK(a, NS_STEP_FDS, ns_sys3(SYS_close_range, 4, ~0U, CLOSE_RANGE_CLOEXEC));
        }

        /* 14. capabilities down to the allow-list, securebits locked, no_new_privs */
        if (!SPACE_BENCH_NO_HARDENING)
                CHECK(a, NS_STEP_PRIVILEGES, ns_drop_privileges());
        /* the reviewed policy of seccomp-policy.c, built by the worker at start */
        if (spec->seccomp && !SPACE_BENCH_NO_HARDENING) {
                int listener = -1, r = seccomp_install(spec->seccomp, spec->seccomp_notify ? &listener : NULL);
                if (r < 0)
                        child_fail(a, NS_STEP_SECCOMP, r);
                /* the listener stays with the agent (no CLOEXEC: it is PID 1's fd NS_NOTIFY_FD; the
                 * agent's children close it at exec): the worker takes a copy through PID 1's pidfd,
                 * after this create and again after a restart of its own */
                if (listener >= 0 && listener != NS_NOTIFY_FD) {
                        CHECK(a, NS_STEP_SECCOMP, ns_dup2(listener, NS_NOTIFY_FD));
                        ns_close(listener);
                } else if (listener == NS_NOTIFY_FD)
                        CHECK(a, NS_STEP_SECCOMP, ns_sys3(SYS_fcntl, listener, F_SETFD, 0));
        }

        /* 15. space-agent as PID 1 (the sync socket closes on success) */
        {
                char *argv[] = { (char *) "space-agent", NULL };
                k = ns_sys5(SYS_execveat, exe_fd, "", argv, a->envp, AT_EMPTY_PATH);
                child_fail(a, NS_STEP_EXEC, (int) k);
        }
}
