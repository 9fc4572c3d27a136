/* SPDX-License-Identifier: MIT */
/* The ns runtime, parent side: cgroups, agent socket, clone into new
 * namespaces, id maps and the idmapped root, then wait for space-agent's
 * exec. A failed create unwinds everything it made. */
#include <fcntl.h>
#include <limits.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "alloc-util.h"
#include "cgroup.h"
#include "fd-util.h"
#include "log.h"
#include "ns-clone.h"
#include "ns-setup.h"
#include "sock-io.h"
#include "str-util.h"

#define NS_CREATE_TIMEOUT_MSEC 10000

static int ns_probe(const RuntimeHost *host, char *why, size_t why_size) {
        if (access("/proc/self/ns/user", F_OK) < 0) {
                snprintf(why, why_size, "no user namespaces: %s", strerror(errno));
                return log_error_errno(errno, "No user namespaces: %m");
        }
        return 0;
}

/* The staging directory, named after the agent's socket (<socket>.stage, so
 * sandboxes whose sockets share a directory never share it), empty: PID 1
 * stacks a tmpfs there in its own mount namespace and builds /proc, /dev,
 * /sys and /run in it before its root exists (ns-setup.h). */
static int stage_dir_path(const char *agent_socket, char *buf, size_t n) {
        if (snprintf(buf, n, "%s%s", agent_socket, NS_STAGE_SUFFIX) >= (int) n)
                return -ENAMETOOLONG;
        return 0;
}

static int stage_dir_make(const char *agent_socket, char *buf, size_t n) {
        int r = stage_dir_path(agent_socket, buf, n);

        if (r < 0)
                return r;
        if (mkdir(buf, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        return 0;
}

/* The staging directory goes with the socket. */
static void stage_dir_remove(const char *agent_socket) {
        char p[PATH_MAX];

        if (stage_dir_path(agent_socket, p, sizeof p) >= 0)
                (void) rmdir(p);
}

static char **build_env(const RuntimeSpec *spec) {
        _cleanup_strv_free_ char **env = NULL;

        if (strv_extend(&env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin") < 0)
                return NULL;
        if (strv_push(&env, strdup_printf("SPACE_SANDBOX_ID=%s", spec->id)) < 0)
                return NULL;
        for (char **e = spec->env; e && *e; e++)
                if (strv_extend(&env, *e) < 0)
                        return NULL;
        return TAKE_PTR(env);
}

/* Waits for the child's verdict: EOF = exec happened, else an NsChildError. */
static int wait_child(int sync_fd, char *errbuf, size_t errbuf_size) {
        struct pollfd pfd = { .fd = sync_fd, .events = POLLIN };
        NsChildError e;
        ssize_t k;
        int r;

        r = poll(&pfd, 1, NS_CREATE_TIMEOUT_MSEC);
        if (r < 0)
                return negative_errno();
        if (r == 0) {
                snprintf(errbuf, errbuf_size, "sandbox setup timed out");
                return -ETIMEDOUT;
        }
        k = read(sync_fd, &e, sizeof e);
        if (k == 0)
                return 0;
        if (k != (ssize_t) sizeof e) {
                snprintf(errbuf, errbuf_size, "sandbox setup died");
                return -EPROTO;
        }
        snprintf(errbuf, errbuf_size, "sandbox setup failed at step '%s': %s",
                 ns_step_to_string((NsStep) e.step), strerror(e.error));
        return -(e.error ?: EIO);
}

/* Kills a guest that did not come up and removes what was made for it.
 * PID 1 of another parent (clone_parent) is awaited, not reaped. */
static void unwind(const char *id, const char *agent_socket, pid_t pid, int pidfd, bool cgroup_made) {
        if (pid > 0) {
                (void) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                if (waitpid(pid, NULL, 0) < 0 && errno == ECHILD) {
                        struct pollfd p = { .fd = pidfd, .events = POLLIN };
                        while (poll(&p, 1, -1) < 0 && errno == EINTR)
                                ;
                }
        }
        if (cgroup_made) {
                (void) cgroup_kill(id);
                (void) cgroup_remove(id);
        }
        (void) unlink(agent_socket);
        stage_dir_remove(agent_socket);
}

/* The idmapped root to PID 1 over the sync socket, then each volume
 * (idmapped the same way, with where it goes), and its go. */
static int root_send(int sync_fd, const char *root_path, const RuntimeVolume *volumes, size_t n_volumes, pid_t pid,
                     char *errbuf, size_t errbuf_size) {
        _cleanup_close_ int mntfd = -EBADF;
        int r;

        if (n_volumes > RUNTIME_VOLUMES_MAX) {
                snprintf(errbuf, errbuf_size, "more than %d volumes", RUNTIME_VOLUMES_MAX);
                return -E2BIG;
        }
        r = ns_idmapped_root(root_path, pid, &mntfd);
        if (r < 0) {
                snprintf(errbuf, errbuf_size, "cannot create idmapped root mount: %s", strerror(-r));
                return r;
        }
        r = send_fd(sync_fd, mntfd);
        for (size_t i = 0; r >= 0 && i < n_volumes; i++) {
                _cleanup_close_ int volfd = -EBADF;

                r = ns_idmapped_volume(volumes[i].host_path, volumes[i].read_only, pid, &volfd);
                if (r < 0) {
                        snprintf(errbuf, errbuf_size, "cannot create the idmapped mount of the volume for %s: %s",
                                 volumes[i].path, strerror(-r));
                        return r;
                }
                r = ns_send_volume(sync_fd, volfd, volumes[i].path);
        }
        if (r >= 0 && write(sync_fd, "g", 1) != 1)
                r = negative_errno();
        if (r < 0)
                snprintf(errbuf, errbuf_size, "sandbox setup died early");
        return r;
}

/* PID 1 into its cgroup v1 hierarchies (the v2 one it was cloned into). */
static int attach_v1(const char *id, pid_t pid, char *errbuf, size_t errbuf_size) {
        int r = cgroup_attach_v1(id, pid);
        if (r < 0) {
                snprintf(errbuf, errbuf_size, "cannot attach to cgroups: %s", strerror(-r));
                return r;
        }
        /* the agent is the last thing the OOM killer should pick (its children run at +500);
         * lowering needs CAP_SYS_RESOURCE, which a host in a container may lack */
        char p[64];
        snprintf(p, sizeof p, "/proc/%d/oom_score_adj", (int) pid);
        if (write_string_file(p, "-998") < 0)
                log_debug("Cannot lower the OOM score of sandbox %s's PID 1", id);
        return 0;
}

static int ns_settle(RuntimePending *p, char *errbuf, size_t errbuf_size) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (!p->settle_pending)
                return 0;
        p->settle_pending = false;
        fd = TAKE_FD(p->settle_fd);
        r = attach_v1(p->id, p->pid, errbuf, errbuf_size);
        if (r >= 0 && write(fd, "c", 1) != 1) {
                r = negative_errno();
                snprintf(errbuf, errbuf_size, "sandbox setup died early");
        }
        return r; /* a failure: the pipe closes unwritten and PID 1's setup fails */
}

static int ns_give_root(RuntimePending *p, const char *root_path, const RuntimeVolume *volumes, size_t n_volumes,
                        char *errbuf, size_t errbuf_size) {
        return root_send(p->sync_fd, root_path, volumes, n_volumes, p->pid, errbuf, errbuf_size);
}

static int ns_spawn(const RuntimeSpec *spec, RuntimePending *ret, char *errbuf, size_t errbuf_size) {
        _cleanup_close_ int cgfd = -EBADF, lfd = -EBADF, pidfd = -EBADF;
        char stage[PATH_MAX];
        _cleanup_strv_free_ char **envp = NULL;
        int sync[2] = { -EBADF, -EBADF }, settle[2] = { -EBADF, -EBADF };
        bool cgroup_made = false;
        pid_t pid = -1;
        int r;

        if (strscpy(ret->id, sizeof ret->id, spec->id) < 0 ||
            strscpy(ret->agent_socket, sizeof ret->agent_socket, spec->agent_socket) < 0)
                return -ENAMETOOLONG;
        envp = build_env(spec);
        if (!envp)
                return -ENOMEM;

        r = cgroup_create(spec->id, &spec->limits, &cgfd);
        if (r < 0) {
                snprintf(errbuf, errbuf_size, "cannot create cgroups: %s", strerror(-r));
                return r;
        }
        cgroup_made = true;

        r = sock_listen_unix(spec->agent_socket, 0, 128, &lfd);
        if (r < 0) {
                snprintf(errbuf, errbuf_size, "cannot create agent socket: %s", strerror(-r));
                goto fail;
        }
        r = stage_dir_make(spec->agent_socket, stage, sizeof stage);
        if (r < 0) {
                snprintf(errbuf, errbuf_size, "cannot make the staging directory: %s", strerror(-r));
                goto fail;
        }
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync) < 0) {
                r = negative_errno();
                goto fail;
        }
        if (spec->settle_later && pipe2(settle, O_CLOEXEC) < 0) {
                r = negative_errno();
                goto fail;
        }

        {
                NsChildArgs a = { .spec = spec, .sync_fd = sync[1], .parent_fd = sync[0], .listen_fd = lfd,
                                  .settle_fd = settle[0] >= 0 ? settle[0] : -1,
                                  .settle_wfd = settle[1] >= 0 ? settle[1] : -1,
                                  .stage_path = stage, .envp = envp };
                pid = ns_clone_child(&a, cgfd, spec->clone_parent, &pidfd);
        }
        if (pid < 0) {
                r = pid;
                snprintf(errbuf, errbuf_size, "clone3: %s", strerror(-r));
                pidfd = -EBADF;
                goto fail;
        }
        sync[1] = safe_close(sync[1]);
        settle[0] = safe_close(settle[0]);
        lfd = safe_close(lfd); /* the agent holds it now */

        if (!spec->settle_later) {
                r = attach_v1(spec->id, pid, errbuf, errbuf_size);
                if (r < 0)
                        goto fail;
        }
        r = ns_write_id_maps(pid, spec->uid_base);
        if (r >= 0 && write(sync[0], "m", 1) != 1) /* PID 1 sets up what needs no root meanwhile */
                r = negative_errno();
        if (r < 0) {
                snprintf(errbuf, errbuf_size, "cannot write id maps: %s", strerror(-r));
                goto fail;
        }
        if (!spec->root_later) {
                r = root_send(sync[0], spec->root_path, spec->volumes, spec->n_volumes, pid, errbuf, errbuf_size);
                if (r < 0)
                        goto fail;
        }
        ret->pid = pid;
        ret->pidfd = TAKE_FD(pidfd);
        ret->sync_fd = sync[0];
        ret->settle_pending = spec->settle_later;
        ret->settle_fd = settle[1];
        return 0;

fail:
        safe_close(sync[0]);
        safe_close(sync[1]);
        safe_close(settle[0]);
        safe_close(settle[1]);
        unwind(spec->id, spec->agent_socket, pid, pidfd, cgroup_made);
        if (spec->clone_parent && pid > 0)
                ret->pid = pid; /* dead: its parent reaps it */
        return r;
}

static int ns_finish(RuntimePending *p, RuntimeInstance *ret, char *errbuf, size_t errbuf_size) {
        _cleanup_close_ int sync_fd = TAKE_FD(p->sync_fd), pidfd = TAKE_FD(p->pidfd);
        uint64_t starttime = 0;
        int r;

        r = wait_child(sync_fd, errbuf, errbuf_size);
        if (r >= 0) {
                r = proc_starttime(p->pid, &starttime);
                if (r < 0)
                        snprintf(errbuf, errbuf_size, "sandbox init vanished");
        }
        if (r < 0) {
                unwind(p->id, p->agent_socket, p->pid, pidfd, true);
                return r;
        }
        ret->pid = p->pid;
        ret->starttime = starttime;
        ret->pidfd = TAKE_FD(pidfd);
        return 0;
}

static int ns_create(const RuntimeSpec *spec, RuntimeInstance *ret, char *errbuf, size_t errbuf_size) {
        RuntimePending p = { .pidfd = -EBADF, .sync_fd = -EBADF };
        int r = ns_spawn(spec, &p, errbuf, errbuf_size);

        if (r < 0)
                return r;
        return ns_finish(&p, ret, errbuf, errbuf_size);
}

static int ns_destroy(const char *id, const char *agent_socket) {
        int r = cgroup_kill(id), k;

        k = cgroup_remove(id);
        if (r >= 0)
                r = k;
        if (agent_socket && unlink(agent_socket) < 0 && errno != ENOENT && r >= 0)
                r = negative_errno();
        if (agent_socket)
                stage_dir_remove(agent_socket);
        return r;
}

static int ns_kill(const char *id) {
        return cgroup_kill_now(id);
}

static int ns_adopt(const char *id, pid_t pid, uint64_t starttime, int *ret_pidfd) {
        uint64_t st;
        int fd;

        if (pid <= 0 || proc_starttime(pid, &st) < 0 || st != starttime)
                return -ESRCH;
        if (!cgroup_contains(id, pid))
                return -ESRCH;
        fd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (fd < 0)
                return negative_errno();
        *ret_pidfd = fd;
        return 0;
}

const RuntimeOps ns_runtime_ops = {
        .name = "ns",
        .root = RUNTIME_ROOT_TREE,
        .net = RUNTIME_NET_VETH,
        .start = RUNTIME_START_SPAWN,
        .probe = ns_probe,
        .create = ns_create,
        .spawn = ns_spawn,
        .finish = ns_finish,
        .give_root = ns_give_root,
        .settle = ns_settle,
        .destroy = ns_destroy,
        .kill = ns_kill,
        .adopt = ns_adopt,
        .list = cgroup_list,
        .freeze = cgroup_freeze,
        .set_limits = cgroup_set_limits,
        .oom_kills = cgroup_oom_kills,
};
