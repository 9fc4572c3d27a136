/* SPDX-License-Identifier: MIT */
/* Sandbox create/destroy on this host: pool root + runtime, and the
 * bookkeeping of live sandboxes (their PID 1 is watched through a pidfd). */
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "log.h"
#include "str-util.h"
#include "tap.h"
#include "worker-internal.h"

LiveSandbox *worker_live_find(Worker *w, const char *id) {
        for (size_t i = 0; i < w->n_live; i++)
                if (streq(w->live[i].id, id))
                        return &w->live[i];
        return NULL;
}

const RuntimeOps *worker_runtime(Worker *w, const char *name, ApiError *e) {
        const RuntimeOps *rt = isempty(name) ? w->runtime : runtime_find(name);
        size_t i = runtime_index(rt);

        if (i == SIZE_MAX) {
                api_error(e, -EINVAL, API_INVALID_ARGUMENT, "unknown runtime '%.32s'", name);
                return NULL;
        }
        if (!w->runtimes[i])
                api_error(e, -EOPNOTSUPP, API_INVALID_ARGUMENT, "runtime '%s' is not available on this host: %s",
                          rt->name, w->runtime_why[i]);
        return w->runtimes[i];
}

const RuntimeOps *worker_runtime_of(Worker *w, const char *id) {
        LiveSandbox *l = worker_live_find(w, id);
        return l && l->rt ? l->rt : w->runtime;
}

int worker_live_add(Worker *w, const RuntimeOps *rt, const char *id, uint64_t slot, pid_t pid, uint64_t starttime,
                    int pidfd) {
        struct epoll_event ev = { .events = EPOLLIN };
        LiveSandbox *l;

        if (GREEDY_REALLOC(w->live, w->allocated_live, w->n_live + 1) < 0)
                return -ENOMEM;
        l = &w->live[w->n_live];
        *l = (LiveSandbox){ .pid = pid, .starttime = starttime, .pidfd = pidfd, .rt = rt, .slot = slot,
                            .statfs_fd = -EBADF, .quota_fd = -EBADF };
        (void) rt->oom_kills(id, &l->oom_kills);
        if (strscpy(l->id, sizeof l->id, id) < 0)
                return -ENAMETOOLONG;
        /* tag pidfds with the high bit so the loop can tell them from sockets */
        ev.data.u64 = (UINT64_C(1) << 63) | (uint64_t) (unsigned) pidfd;
        if (epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, pidfd, &ev) < 0)
                return negative_errno();
        w->n_live++;
        if (rt->start == RUNTIME_START_SPAWN && w->statfs_emulate)
                worker_statfs_attach(w, l);
        return 0;
}

void worker_live_remove(Worker *w, const char *id) {
        LiveSandbox *l = worker_live_find(w, id);
        if (!l)
                return;
        (void) epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, l->pidfd, NULL);
        safe_close(l->pidfd);
        worker_statfs_detach(w, l);
        *l = w->live[--w->n_live];
}

int worker_agent_socket(Worker *w, const char *id, char *buf, size_t n) {
        int k = snprintf(buf, n, "%s/%s/agent.sock", w->agent_dir, id);
        return k < 0 || (size_t) k >= n ? -ENAMETOOLONG : 0;
}

bool id_valid(const char *id) {
        size_t n = strlen(id);
        if (n == 0 || n >= 64)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9')))
                        return false;
        return true;
}

void worker_event(Worker *w, const Sandbox *sb, const char *type, const char *reason, const char *data_json) {
        Event ev = {};
        int r;

        if (sb) {
                (void) strscpy(ev.tenant_id, sizeof ev.tenant_id, sb->tenant_id);
                (void) strscpy(ev.sandbox_id, sizeof ev.sandbox_id, sb->id);
        }
        (void) strscpy(ev.type, sizeof ev.type, type);
        (void) strscpy(ev.actor, sizeof ev.actor, "worker");
        (void) strscpy(ev.reason, sizeof ev.reason, strempty(reason));
        ev.data_json = (char *) data_json;
        r = store_event_append(w->store, &ev);
        if (r < 0)
                log_warning_errno(r, "Failed to record event %s: %m", type);
}

int worker_cleanup_sandbox(Worker *w, const char *id_arg, bool remove_root) {
        char sock[PATH_MAX], dir[PATH_MAX], id[STORE_ID_MAX];
        LiveSandbox *l;
        int r = 0, k;

        /* a copy: id_arg may be a live entry's own id, which worker_live_remove() overwrites */
        if (strscpy(id, sizeof id, id_arg) < 0)
                return -ENAMETOOLONG;
        if (worker_agent_socket(w, id, sock, sizeof sock) < 0)
                return -ENAMETOOLONG;
        l = worker_live_find(w, id);
        if (l && l->net)
                worker_net_detach(w, id, l->slot);
        /* every runtime's destroy is idempotent: a sandbox that is not live may be of any */
        k = worker_runtime_of(w, id)->destroy(id, sock);
        if (k < 0)
                r = k;
        for (size_t i = 1; i < RUNTIMES_MAX && !l; i++)
                if (w->runtimes[i])
                        (void) w->runtimes[i]->destroy(id, sock);
        l = worker_live_find(w, id);
        if (l) {
                siginfo_t si = {};
                /* PID 1 is dead or dying after the cgroup kill: reap it */
                (void) waitid(P_PIDFD, (id_t) l->pidfd, &si, WEXITED);
                worker_live_remove(w, id);
        }
        snprintf(dir, sizeof dir, "%s/%s", w->agent_dir, id);
        (void) rm_rf(dir);
        if (remove_root) {
                k = pool_sandbox_remove(w->pool, id);
                if (k < 0) {
                        log_warning_errno(k, "Failed to remove root of sandbox %s: %m", id);
                        if (r >= 0)
                                r = k;
                }
        }
        return r;
}

/* MemTotal in MiB, 0 if unknown. */
static uint64_t host_memory_mb(void) {
        _cleanup_free_ char *m = NULL;
        unsigned long long kb;
        const char *p;

        if (read_full_file("/proc/meminfo", 65536, &m, NULL) < 0 || !(p = strstr(m, "MemTotal:")) ||
            sscanf(p + STRLEN("MemTotal:"), "%llu", &kb) != 1)
                return 0;
        return kb / 1024;
}

static int env_from_json(const JsonValue *env, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;

        for (size_t i = 0; env && i < json_object_size(env); i++) {
                const char *k = json_object_key(env, i), *v = json_string(json_object_value(env, i));
                if (!v)
                        return -EINVAL;
                if (strv_push(&l, strjoin(k, "=", v)) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

static int get_u64(const JsonValue *o, const char *key, uint64_t *ret) {
        JsonValue *v = json_get(o, key);
        if (!v) {
                *ret = 0;
                return 0;
        }
        return json_uint64(v, ret);
}

void worker_spec_done(WorkerSpec *s) {
        s->env = strv_free(s->env);
        s->policy = mfree(s->policy);
}

int worker_spec_parse(Worker *w, const JsonValue *spec, WorkerSpec *ret, ApiError *e) {
        const char *id = json_string(json_get(spec, "id")), *tmpl = json_string(json_get(spec, "template"));
        WorkerSpec s = {};

        if (!id || !id_valid(id) || strscpy(s.id, sizeof s.id, id) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "bad sandbox spec: id");
        if (tmpl && strscpy(s.template_name, sizeof s.template_name, tmpl) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "bad sandbox spec: template");
        if (json_get(spec, "tenant") &&
            (!json_string(json_get(spec, "tenant")) ||
             strscpy(s.tenant, sizeof s.tenant, json_string(json_get(spec, "tenant"))) < 0))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "bad sandbox spec: tenant");
        if (json_string(json_get(spec, "runtime")) &&
            strscpy(s.runtime, sizeof s.runtime, json_string(json_get(spec, "runtime"))) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "bad sandbox spec: runtime");
        if (get_u64(spec, "slot", &s.slot) < 0 || get_u64(spec, "cpu_millis", &s.cpu_millis) < 0 ||
            get_u64(spec, "memory_mb", &s.memory_mb) < 0 || get_u64(spec, "disk_mb", &s.disk_mb) < 0 ||
            get_u64(spec, "pids_max", &s.pids_max) < 0 || get_u64(spec, "io_weight", &s.io_weight) < 0 ||
            s.io_weight > 10000 || s.slot >= w->config->slots_max || s.disk_mb > WORKER_DISK_MB_MAX ||
            s.cpu_millis > UINT32_MAX || s.pids_max > UINT32_MAX)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "bad sandbox limits");
        if (env_from_json(json_get(spec, "env"), &s.env) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "bad sandbox env");
        /* the egress policy, checked by the gateway when it is registered */
        const JsonValue *policy = json_get(spec, "policy");
        if (policy && !json_is_null(policy) &&
            (json_type(policy) != JSON_OBJECT || json_serialize(policy, &s.policy, NULL) < 0)) {
                worker_spec_done(&s);
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "bad sandbox spec: policy");
        }
        *ret = s;
        return 0;
}

RuntimeLimits worker_spec_limits(const WorkerSpec *s) {
        return (RuntimeLimits){
                .cpu_millis = (uint32_t) s->cpu_millis,
                .memory_bytes = s->memory_mb * 1024 * 1024,
                .pids_max = (uint32_t) s->pids_max,
                .fsize_bytes = s->disk_mb * 1024 * 1024,
                .io_weight = (uint32_t) s->io_weight,
        };
}

/* A spawned PID 1 that will not get its root: killed, reaped, and its
 * cgroups and socket removed. */
void worker_spawn_abandon(const RuntimeOps *rt, RuntimePending *p) {
        siginfo_t si = {};

        (void) syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0);
        (void) waitid(P_PIDFD, (id_t) p->pidfd, &si, WEXITED);
        (void) rt->destroy(p->id, p->agent_socket);
        p->pidfd = safe_close(p->pidfd);
        p->sync_fd = safe_close(p->sync_fd);
}

void worker_spawn_prep_done(WorkerSpawnPrep *prep) {
        prep->env = strv_free(prep->env);
        prep->root = mfree(prep->root);
        prep->tap_fd = safe_close(prep->tap_fd);
        worker_volumes_prep_done(prep);
}

int worker_spawn_prepare(Worker *w, const WorkerSpec *s, const char *root, WorkerSpawnPrep *prep,
                         WorkerPending *ret, ApiError *e) {
        const RuntimeOps *rt = worker_runtime(w, s->runtime, e);
        bool image, tap;
        AddrPair pair = {};
        int r;

        *prep = (WorkerSpawnPrep){ .tap_fd = -EBADF };
        *ret = (WorkerPending){ .rt = rt, .p = { .pidfd = -EBADF, .sync_fd = -EBADF }, .inst = { .pidfd = -EBADF },
                                .start_usec = now_usec() };
        if (!rt)
                return -EOPNOTSUPP;
        image = rt->root == RUNTIME_ROOT_IMAGE;
        tap = rt->net == RUNTIME_NET_TAP;
        if (!root && (image || !rt->give_root))
                return api_error(e, -EINVAL, API_INTERNAL, "a %s sandbox's root is made before it starts", rt->name);
        r = root ? ((prep->root = strdup(root)) ? 0 : -ENOMEM) : pool_sandbox_root_path_planned(w->pool, s->id, &prep->root);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "bad sandbox root: %s", strerror(-r));
        prep->root_later = !root;
        if (strscpy(ret->id, sizeof ret->id, s->id) < 0)
                return api_error(e, -ENAMETOOLONG, API_INVALID_ARGUMENT, "bad sandbox id");
        ret->slot = s->slot;
        if (worker_live_find(w, s->id))
                return api_error(e, -EEXIST, API_ALREADY_EXISTS, "sandbox %s already runs here", s->id);
        r = worker_slot_claim(w, s, e);
        if (r < 0)
                return r;
        for (char **x = s->env; x && *x; x++)
                if (strv_extend(&prep->env, *x) < 0)
                        return api_error(e, -ENOMEM, API_INTERNAL, "out of memory");
        /* the sandbox network: proxy variables and resolv.conf name the host end */
        r = worker_net_env(w, s->slot, &prep->env, prep->resolv, sizeof prep->resolv);
        if (r >= 0)
                r = worker_net_pair(w, s->slot, &pair);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "cannot describe the network of slot %" PRIu64 ": %s", s->slot,
                                 strerror(-r));
        r = worker_volumes_prepare(w, s->id, s->restore_path != NULL, prep, e);
        if (r < 0)
                return r;
        /* the tap exists before the VMM (which holds it from then on) */
        if (tap) {
                r = worker_net_tap(w, s->slot, &prep->tap_fd, e);
                if (r < 0)
                        return r;
        }
        snprintf(prep->dir, sizeof prep->dir, "%s/%s", w->agent_dir, s->id);
        if (mkdir(prep->dir, 0700) < 0 && errno != EEXIST) {
                r = negative_errno();
                return api_error(e, r, API_INTERNAL, "cannot create %s: %s", prep->dir, strerror(-r));
        }
        /* the CA its resumed processes trust, saved with its memory (another sandbox's machine gets its own) */
        if (s->restore_path && !s->new_identity) {
                char ca_saved[PATH_MAX];
                snprintf(ca_saved, sizeof ca_saved, "%s" WORKER_CA_SAVED_SUFFIX, s->restore_path);
                ret->keep_ca = worker_cred_load_saved(w, s->id, ca_saved, !s->restore_checkpoint) >= 0;
        }
        (void) worker_agent_socket(w, s->id, prep->sock, sizeof prep->sock);
        snprintf(prep->hostname, sizeof prep->hostname, "space-%s", s->id);

        prep->rs = (RuntimeSpec){
                .id = s->id,
                .root_path = image ? NULL : prep->root,
                .disk_path = image ? prep->root : NULL,
                .vcpus = (uint32_t) ((s->cpu_millis + 999) / 1000),
                .restore_path = s->restore_path,
                .new_identity = s->new_identity,
                .neutral = s->neutral,
                .hostname = prep->hostname,
                .uid_base = (uid_t) (w->config->uid_base + s->slot * RUNTIME_ID_RANGE),
                .limits = worker_spec_limits(s),
                .env = prep->env,
                .agent_socket = prep->sock,
                .agent_exe_fd = w->agent_exe_fd,
                .seccomp = &w->seccomp,
                .seccomp_notify = w->statfs_emulate && rt->start == RUNTIME_START_SPAWN,
                .resolv_conf = prep->resolv,
                .net = tap,
                .net_fd = prep->tap_fd,
                .net_addr = pair.peer,
                .net_gateway = pair.host,
                .root_later = prep->root_later,
                .volumes = prep->volumes,
                .n_volumes = prep->n_volumes,
        };
        tap_guest_mac(s->slot, prep->rs.net_mac);
        prep->prepared = true;
        return 0;
}

void worker_spawn_send(Worker *w, const WorkerPending *p, WorkerSpawnPrep *prep) {
        if (prep->prepared && p->rt->start == RUNTIME_START_SPAWN)
                prep->sent = worker_spawner_send(w, &prep->rs) >= 0; /* else spawned in process */
}

int worker_spawn_complete(Worker *w, const WorkerSpec *s, WorkerSpawnPrep *prep, const char *root_made,
                          WorkerPending *ret, ApiError *e) {
        const RuntimeOps *rt = ret->rt;
        char err[1024] = "";
        int r;

        ret->limits = prep->rs.limits;
        if (rt->start == RUNTIME_START_SPAWN)
                r = worker_spawner_recv(w, prep->sent, &prep->rs, &ret->p, err, sizeof err);
        else if (rt->spawn)
                r = rt->spawn(&prep->rs, &ret->p, err, sizeof err);
        else { /* a runtime that cannot split its create makes it whole here */
                r = rt->create(&prep->rs, &ret->inst, err, sizeof err);
                ret->created = r >= 0;
        }
        prep->sent = false;
        if (r >= 0 && prep->root_later) {
                if (!root_made || !streq(root_made, prep->root))
                        r = -EXDEV, snprintf(err, sizeof err, "the root is not where it was planned: %s",
                                             strna(root_made));
                else
                        r = rt->give_root(&ret->p, root_made, prep->rs.volumes, prep->rs.n_volumes, err,
                                          sizeof err);
                if (r < 0)
                        worker_spawn_abandon(rt, &ret->p);
        }
        if (r < 0) {
                (void) rm_rf(prep->dir);
                log_warning("Failed to start sandbox %s: %s", s->id, err);
                /* its own files in a shape that cannot start (a symlink or a file where a mount goes): its doing */
                return worker_storage_error(w, r, e, r == -ELOOP || r == -ENOTDIR ? API_CONFLICT : API_INTERNAL,
                                            "cannot start the sandbox: %s", err);
        }
        ret->spawned_usec = now_usec();
        /* its network goes up while PID 1 sets itself up (it runs nothing
         * of the user's before the create returns); a failure is reported by
         * finish, which reaps PID 1 and unwinds the rest */
        if (rt->net == RUNTIME_NET_VETH) {
                r = worker_net_attach_begin(w, s->id, s->slot, ret->created ? ret->inst.pid : ret->p.pid, s->tenant,
                                            s->policy, &ret->net, &ret->net_api_error);
                if (r < 0)
                        ret->net_error = r;
        }
        return 0;
}

void worker_spawn_cancel(Worker *w, WorkerSpawnPrep *prep, WorkerPending *p) {
        if (prep->sent) {
                char err[1024];
                prep->sent = false;
                if (worker_spawner_recv(w, true, &prep->rs, &p->p, err, sizeof err) >= 0)
                        worker_spawn_abandon(p->rt, &p->p);
        }
        if (prep->prepared)
                (void) rm_rf(prep->dir);
        prep->prepared = false;
}

/* root NULL: an ns sandbox's root is made from its template here, while the
 * spawner clones it (PID 1 waits for the root); ret->root_made says whether
 * it was made, also after a failure. */
int worker_spawn_runtime(Worker *w, const WorkerSpec *s, const char *root, WorkerPending *ret, ApiError *e) {
        _cleanup_(worker_spawn_prep_done) WorkerSpawnPrep prep = { .tap_fd = -EBADF };
        _cleanup_free_ char *root_made = NULL;
        int r;

        r = worker_spawn_prepare(w, s, root, &prep, ret, e);
        if (r < 0) {
                if (prep.prepared)
                        (void) rm_rf(prep.dir);
                return r;
        }
        worker_spawn_send(w, ret, &prep);
        if (prep.root_later) {
                /* the spawner clones while the root is made; in process, one after the other */
                ret->root_begin_usec = now_usec();
                r = pool_sandbox_create(w->pool, s->template_name, s->id, s->disk_mb, &root_made);
                ret->root_made = r >= 0;
                ret->root_usec = now_usec();
                if (r < 0) {
                        worker_spawn_cancel(w, &prep, ret);
                        return worker_storage_error(w, r, e, api_error_code_from_errno(r),
                                                    "cannot create the root filesystem: %s", strerror(-r));
                }
        }
        return worker_spawn_complete(w, s, &prep, prep.root_later ? root_made : root, ret, e);
}

int worker_finish_runtime(Worker *w, WorkerPending *p, int64_t *ret_pid, uint64_t *ret_starttime, ApiError *e) {
        RuntimeInstance inst = p->inst;
        char dir[PATH_MAX], err[1024] = "";
        int64_t t_wait = now_usec(), t_exec, t_net;
        int r = 0;

        p->inst.pidfd = -EBADF;
        if (!p->created)
                r = p->rt->finish(&p->p, &inst, err, sizeof err);
        t_exec = now_usec();
        if (r < 0) {
                worker_net_attach_abort(w, &p->net);
                snprintf(dir, sizeof dir, "%s/%s", w->agent_dir, p->id);
                (void) rm_rf(dir);
                log_warning("Failed to start sandbox %s: %s", p->id, err);
                /* its own files in a shape that cannot start (a symlink or a file where a mount goes): its doing */
                return worker_storage_error(w, r, e, r == -ELOOP || r == -ENOTDIR ? API_CONFLICT : API_INTERNAL,
                                            "cannot start the sandbox: %s", err);
        }
        r = worker_live_add(w, p->rt, p->id, p->slot, inst.pid, inst.starttime, inst.pidfd);
        if (r < 0) {
                safe_close(inst.pidfd);
                worker_net_attach_abort(w, &p->net);
                (void) worker_cleanup_sandbox(w, p->id, false);
                return api_error(e, r, API_INTERNAL, "cannot track the sandbox: %s", strerror(-r));
        }
        if (p->make_base) {
                /* a neutral boot: saved as its template's base snapshot, then told who it is */
                r = worker_vm_base_after_boot(w, p, e);
                if (r < 0) {
                        (void) worker_cleanup_sandbox(w, p->id, false);
                        return r;
                }
        }
        LiveSandbox *l = worker_live_find(w, p->id);
        if (l) {
                l->limits = p->limits;
                l->limits_known = true;
        }
        /* the agent waits for connections; nothing runs inside before the create returns
         * (a vm's guest has its eth0 already: until its element is there, the firewall drops all) */
        if (p->net_error < 0) {
                (void) worker_cleanup_sandbox(w, p->id, false);
                *e = p->net_api_error;
                return p->net_error;
        }
        if (p->net.active)
                r = worker_net_attach_end(w, &p->net, e); /* ns: begun at spawn */
        else
                r = worker_net_attach(w, p->id, p->slot, p->rt->net == RUNTIME_NET_VETH ? inst.pid : 0, NULL, e);
        if (r < 0) {
                (void) worker_cleanup_sandbox(w, p->id, false);
                return r;
        }
        worker_live_find(w, p->id)->net = true;
        t_net = now_usec();
        /* its credentials: a new CA for this life of its processes, in its trust store (a machine
         * resumed with its memory keeps its own: its processes continue) */
        if (!p->keep_ca)
                worker_cred_forget(w, p->id);
        r = worker_cred_sync(w, p->id, true, e); /* registered by this start */
        if (r < 0) {
                (void) worker_cleanup_sandbox(w, p->id, false);
                return r;
        }
        log_debug("Sandbox %s: started in %" PRIi64 " us (root made in %" PRIi64 ", after %" PRIi64 ", spawned %" PRIi64
                  ", network begun %" PRIi64 ", exec awaited %" PRIi64 ", network ended %" PRIi64
                  ", credentials %" PRIi64 ")", p->id, now_usec() - p->start_usec,
                  p->root_usec - p->root_begin_usec, p->root_usec ? p->root_usec - p->start_usec : 0, p->spawned_usec - p->start_usec,
                  t_wait - p->spawned_usec, t_exec - t_wait, t_net - t_exec, now_usec() - t_net);
        *ret_pid = inst.pid;
        *ret_starttime = inst.starttime;
        return 0;
}

int worker_start_runtime(Worker *w, const WorkerSpec *s, const char *root, int64_t *ret_pid, uint64_t *ret_starttime,
                         ApiError *e) {
        WorkerPending p;
        int r = worker_spawn_runtime(w, s, root, &p, e);

        if (r < 0)
                return r;
        return worker_finish_runtime(w, &p, ret_pid, ret_starttime, e);
}

/* name: NAME or one version of it, NAME@vN (what a cluster's create names) */
static int template_missing(const char *name, ApiError *e) {
        const char *at = strstr(name, "@v");

        if (at)
                return api_error(e, -ENOENT, API_NOT_FOUND, "version %s of template '%.*s' is not on this host yet",
                                 at + 2, (int) (at - name), name);
        return api_error(e, -ENOENT, API_NOT_FOUND, "template '%s' is not on this host", name);
}

int worker_create_sandbox(Worker *w, const JsonValue *spec, int64_t *ret_pid, uint64_t *ret_starttime,
                          ApiError *e) {
        _cleanup_(worker_spec_done) WorkerSpec s = {};
        const RuntimeOps *rt;
        int r;

        r = worker_spec_parse(w, spec, &s, e);
        if (r < 0)
                return r;
        if (!s.template_name[0])
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "bad sandbox spec: template");
        if (worker_live_find(w, s.id))
                return api_error(e, -EEXIST, API_ALREADY_EXISTS, "sandbox %s already runs here", s.id);
        if (!pool_template_exists(w->pool, s.template_name))
                return template_missing(s.template_name, e);
        rt = worker_runtime(w, s.runtime, e);
        if (!rt)
                return -EOPNOTSUPP;
        /* its disk quota, against what the pool holds and promised, before anything is made */
        r = worker_admit_disk(w, "create", NULL, s.disk_mb << 20, s.disk_mb << 20, e);
        if (r < 0)
                return r;

        if (rt->start == RUNTIME_START_BOOT) {
                uint64_t host_mb = host_memory_mb();
                if (s.memory_mb == 0 || (host_mb > 0 && s.memory_mb > host_mb))
                        return api_error(e, -ERANGE, API_INVALID_ARGUMENT,
                                         "memory_mb %" PRIu64 " is more than this host has (%" PRIu64 " MiB)",
                                         s.memory_mb, host_mb);
                /* a guest boots (or loads) for seconds: deferred to the event loop (worker-vm.c, worker-boot.c) */
                return worker_vm_create(w, rt, &s, spec, ret_pid, ret_starttime, e);
        }
        /* ns: the root is made while the spawner clones (worker_spawn_runtime) */
        WorkerPending p;
        r = worker_spawn_runtime(w, &s, NULL, &p, e);
        if (r >= 0)
                r = worker_finish_runtime(w, &p, ret_pid, ret_starttime, e);
        if (r < 0 && p.root_made)
                (void) pool_sandbox_remove(w->pool, s.id);
        return r;
}

/* Deleting an ns sandbox kills its cgroup and answers: the gateway forgets
 * it at once, its slot stays held in the store, and once PID 1 (and with it
 * the pid namespace) is gone the rest is torn down in the background
 * (worker-teardown.c). Where the slot cannot be held (the store failed, no
 * teardown thread) the delete waits this long for PID 1, which is the usual
 * case, and tears down in line; a sandbox with thousands of processes takes
 * the kernel far longer (minutes on a small machine), and is finished in the
 * background so that the worker keeps serving every other sandbox
 * meanwhile. */
#define WORKER_DELETE_WAIT_MSEC 500

static void reap_begin(Worker *w, LiveSandbox *l, bool slot_held) {
        char sock[PATH_MAX], dir[PATH_MAX];

        l->reaping = true;
        l->reap_usec = now_usec();
        l->slot_held = slot_held;
        if (slot_held && l->net)
                /* the gateway forgets it now; link and firewall element go with the teardown */
                worker_net_unregister(w, l->id);
        else if (l->net) {
                /* its network goes now: the slot may be handed to a new sandbox meanwhile */
                worker_net_detach(w, l->id, l->slot);
                l->net = false;
        }
        /* nothing may reach its agent any more */
        if (worker_agent_socket(w, l->id, sock, sizeof sock) >= 0)
                (void) unlink(sock);
        snprintf(dir, sizeof dir, "%s/%s", w->agent_dir, l->id);
        if (slot_held)
                return; /* the agent directory goes with the teardown */
        snprintf(dir, sizeof dir, "%s/%s", w->agent_dir, l->id);
        (void) rm_rf(dir);
        log_info("Sandbox %s killed; the kernel is still tearing its processes down, finishing in the background",
                 l->id);
}

void worker_reap_finish(Worker *w, LiveSandbox *l) {
        char id[STORE_ID_MAX];
        int64_t dt = now_usec() - l->reap_usec;
        bool held = l->slot_held;
        int r;

        if (l->teardown)
                return; /* queued already */
        if (held) {
                siginfo_t si = {};
                /* PID 1 exited: reaped here, the rest goes to the teardown thread */
                (void) waitid(P_PIDFD, (id_t) l->pidfd, &si, WEXITED | WNOHANG);
                if (worker_teardown_queue(w, l) >= 0)
                        return;
        }
        memcpy(id, l->id, sizeof id);
        r = worker_cleanup_sandbox(w, id, true);
        if (r < 0)
                log_warning_errno(r, "Teardown of deleted sandbox %s incomplete (the orphan scan retries): %m", id);
        else {
                if (dt >= 1000000)
                        log_info("Sandbox %s torn down %" PRIi64 ".%01" PRIi64 " s after its delete", id,
                                 dt / 1000000, dt / 100000 % 10);
                if (held && (r = store_sandbox_hold_slot(w->store, id, false)) < 0 && r != -ENOENT)
                        log_warning_errno(r, "Sandbox %s: cannot free its slot (until the next start): %m", id);
        }
}

void worker_reap_all(Worker *w, int timeout_msec) {
        int64_t end = now_usec() + (int64_t) timeout_msec * 1000;

        for (size_t i = 0; i < w->n_live;) {
                LiveSandbox *l = &w->live[i];
                struct pollfd p = { .fd = l->pidfd, .events = POLLIN };
                int64_t left = (end - now_usec()) / 1000;

                if (!l->reaping || l->teardown) { /* a queued teardown: worker_teardown_stop() */
                        i++;
                        continue;
                }
                if (poll(&p, 1, (int) MAX(left, (int64_t) 0)) <= 0) {
                        /* left for the orphan scan of the next start */
                        log_warning("Sandbox %s is still being torn down by the kernel at stop", l->id);
                        i++;
                        continue;
                }
                worker_reap_finish(w, l); /* removes entry i */
        }
}

int worker_destroy_sandbox(Worker *w, const char *id, ApiError *e) {
        LiveSandbox *l;
        int r;

        if (!id_valid(id))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "bad sandbox id");
        (void) worker_boot_cancel(w, id); /* still booting: that ends now */
        l = worker_live_find(w, id);
        if (l && l->reaping)
                return 0; /* deleted already, on its way */
        if (l && l->rt->kill) { /* a runtime without kill (vm) is destroyed at once */
                struct pollfd p = { .fd = l->pidfd, .events = POLLIN };
                r = l->rt->kill(id);
                if (r < 0)
                        log_warning_errno(r, "Failed to kill sandbox %s at once: %m", id);
                else if (worker_teardown_available(w) && !l->lost_pending &&
                         store_sandbox_hold_slot(w->store, id, true) >= 0) {
                        /* killed: the rest once PID 1 is gone (the event loop sees its pidfd) */
                        reap_begin(w, l, true);
                        return 0;
                } else if (poll(&p, 1, WORKER_DELETE_WAIT_MSEC) == 0) {
                        reap_begin(w, l, false);
                        return 0;
                }
        }
        r = worker_cleanup_sandbox(w, id, true);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "cannot remove sandbox %s completely: %s", id, strerror(-r));
        return 0;
}

void worker_sandbox_died(Worker *w, LiveSandbox *l) {
        char id[STORE_ID_MAX], reason[256];
        siginfo_t si = {};
        Sandbox sb = {};
        int r;

        memcpy(id, l->id, sizeof id);
        if (l->net)
                worker_net_detach(w, id, l->slot);
        if (waitid(P_PIDFD, (id_t) l->pidfd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0)
                snprintf(reason, sizeof reason, "sandbox init exited");
        else if (si.si_code == CLD_EXITED)
                snprintf(reason, sizeof reason, "sandbox init exited with status %d", si.si_status);
        else
                snprintf(reason, sizeof reason, "sandbox init killed by signal %s", sigabbrev_np(si.si_status) ?: "?");
        /* the runtime may know better (vm: a guest kernel panic, a broken agent channel); before the
         * cleanup, which removes what it reads */
        if (l->rt->stopped_reason) {
                char why[200];
                if (l->rt->stopped_reason(id, why, sizeof why) >= 0)
                        snprintf(reason, sizeof reason, "the VM stopped: %s", why);
        }
        worker_live_remove(w, id);
        (void) worker_cleanup_sandbox(w, id, false); /* keep the files for inspection */
        log_warning("Sandbox %s stopped: %s", id, reason);

        r = store_sandbox_get(w->store, NULL, id, &sb);
        if (r < 0)
                return;
        if (sb.state == SANDBOX_RUNNING || sb.state == SANDBOX_PAUSED) {
                r = store_sandbox_set_state(w->store, id, (int) sb.state, SANDBOX_ERROR, reason);
                if (r >= 0)
                        worker_event(w, &sb, "sandbox.error", reason, NULL);
        }
        sandbox_done(&sb);
}

void worker_tick(Worker *w) {
        for (size_t i = 0; i < w->n_live; i++) {
                LiveSandbox *l = &w->live[i];
                char reason[160];
                uint64_t n = 0;
                Sandbox sb = {};

                if (l->reaping)
                        continue;
                if (l->rt->oom_kills(l->id, &n) < 0 || n <= l->oom_kills)
                        continue;
                snprintf(reason, sizeof reason, "out of memory: the kernel killed %" PRIu64
                         " process(es) inside the sandbox (memory limit reached)", n - l->oom_kills);
                l->oom_kills = n;
                log_warning("Sandbox %s: %s", l->id, reason);
                if (store_sandbox_get(w->store, NULL, l->id, &sb) >= 0) {
                        worker_event(w, &sb, "sandbox.oom", reason, NULL);
                        sandbox_done(&sb);
                }
        }
}
