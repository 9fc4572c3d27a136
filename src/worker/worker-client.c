/* SPDX-License-Identifier: MIT */
/* The API side of the worker boundary. All in one (role all): requests over
 * the local worker's unix socket, direct connections to sandbox agents. In a
 * cluster: each call goes to the worker that holds the sandbox (the store
 * says which, and where it listens) over TCP, after the cluster token
 * (worker-net.h); creates are placed first (worker-placement.c) and a worker
 * that cannot be reached is skipped, never waited for. */
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "json.h"
#include "log.h"
#include "proto.h"
#include "str-util.h"
#include "worker-client.h"
#include "cluster-net.h"
#include "worker-placement.h"
#include "worker-proto.h"
#include "ship-stream.h"
#include <fcntl.h>

#define WORKER_REPLY_TIMEOUT_MSEC (10 * 60 * 1000) /* template imports can take minutes */
#define AGENT_HELLO_TIMEOUT_MSEC 10000

struct WorkerClient {
        char path[108];                 /* local: the worker's socket */
        char agent_dir[PATH_MAX];       /* local: where agents listen */
        Store *store;                   /* cluster: borrowed; NULL = local */
        char *token;                    /* cluster: the token */
        int64_t lost_timeout_usec;      /* cluster: a worker silent this long is not used */
        char target[STORE_NAME_MAX];    /* cluster: the worker the next call goes to */
        char target_address[STORE_WORKER_ADDRESS_MAX];
        bool connect_failed;            /* the last call did not reach the worker at all */
        int reply_timeout_msec;         /* a call without an answer this long fails (-ETIMEDOUT) */
        int fd;
        char fd_worker[STORE_NAME_MAX]; /* whom fd talks to ("" = local) */
        char *buf;
        size_t n, allocated;
};

int worker_socket_path(const Config *config, char *buf, size_t n) {
        int k = snprintf(buf, n, "%s/run/worker.sock", config->state_dir);
        return k < 0 || (size_t) k >= n ? -ENAMETOOLONG : 0;
}

int worker_agent_dir(const Config *config, char *buf, size_t n) {
        int k = snprintf(buf, n, "%s/run/sandboxes", config->state_dir);
        return k < 0 || (size_t) k >= n ? -ENAMETOOLONG : 0;
}

int worker_client_new(const char *address, const char *agent_dir, WorkerClient **ret) {
        const char *p = startswith(address, "unix:");
        WorkerClient *w;

        if (!p)
                return -EPROTONOSUPPORT;
        w = calloc(1, sizeof *w);
        if (!w)
                return -ENOMEM;
        w->fd = -EBADF;
        if (strscpy(w->path, sizeof w->path, p) < 0 || strscpy(w->agent_dir, sizeof w->agent_dir, agent_dir) < 0) {
                free(w);
                return -ENAMETOOLONG;
        }
        *ret = w;
        return 0;
}

void worker_client_set_reply_timeout(WorkerClient *w, int msec) {
        w->reply_timeout_msec = msec;
}

int worker_client_new_cluster(Store *store, const char *token, uint64_t lost_timeout_s, WorkerClient **ret) {
        WorkerClient *w;

        if (!store || !token || lost_timeout_s == 0)
                return -EINVAL;
        w = calloc(1, sizeof *w);
        if (!w)
                return -ENOMEM;
        w->fd = -EBADF;
        w->store = store;
        w->lost_timeout_usec = (int64_t) lost_timeout_s * 1000000;
        w->token = strdup(token);
        if (!w->token) {
                free(w);
                return -ENOMEM;
        }
        *ret = w;
        return 0;
}

bool worker_client_is_cluster(const WorkerClient *w) {
        return w && w->store;
}

WorkerClient *worker_client_free(WorkerClient *w) {
        if (!w)
                return NULL;
        cluster_token_free(w->token);
        safe_close(w->fd);
        free(w->buf);
        free(w);
        return NULL;
}

static int connect_unix(const char *path, int *ret_fd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;

        if (strlen(path) >= sizeof sa.sun_path)
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return negative_errno();
        if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0)
                return negative_errno();
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* The hello of cluster-net.h on a fresh connection to w->target. */
static int hello(WorkerClient *w, int fd) {
        char msg[256] = "";
        int r = net_hello(fd, w->token, w->target, msg, sizeof msg);

        if (r == -EACCES)
                log_warning("Worker %s (%s) refused us: %s", w->target, w->target_address, msg);
        return r;
}

/* A fresh connection to the current target (cluster) or the local socket. */
static int open_connection(WorkerClient *w, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (!w->store)
                return connect_unix(w->path, ret_fd);
        r = net_connect(w->target_address, WORKER_CONNECT_TIMEOUT_MSEC, &fd);
        if (r >= 0)
                r = hello(w, fd);
        if (r < 0)
                return r;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* Sends one request line and reads the reply line into *ret (parsed). */
static int call_once(WorkerClient *w, const char *req, size_t len, JsonValue **ret) {
        int r;

        if (w->fd >= 0 && w->store && !streq(w->fd_worker, w->target))
                w->fd = safe_close(w->fd);
        if (w->fd < 0) {
                r = open_connection(w, &w->fd);
                if (r < 0) {
                        w->connect_failed = true;
                        return r;
                }
                (void) strscpy(w->fd_worker, sizeof w->fd_worker, w->store ? w->target : "");
                w->n = 0;
        }
        r = loop_write(w->fd, req, len);
        if (r >= 0)
                r = loop_write(w->fd, "\n", 1);
        if (r < 0)
                return r;
        for (;;) {
                char *nl = w->buf ? memchr(w->buf, '\n', w->n) : NULL;
                struct pollfd pfd = { .fd = w->fd, .events = POLLIN };
                ssize_t k;

                if (nl) {
                        size_t l = (size_t) (nl - w->buf);
                        r = json_parse(w->buf, l, ret, NULL, 0);
                        memmove(w->buf, nl + 1, w->n - l - 1);
                        w->n -= l + 1;
                        return r;
                }
                if (w->n > WORKER_LINE_MAX)
                        return -EMSGSIZE;
                if (GREEDY_REALLOC(w->buf, w->allocated, w->n + 4096) < 0)
                        return -ENOMEM;
                r = poll(&pfd, 1, w->reply_timeout_msec > 0 ? w->reply_timeout_msec : WORKER_REPLY_TIMEOUT_MSEC);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return r < 0 ? negative_errno() : -ETIMEDOUT;
                k = read(w->fd, w->buf + w->n, w->allocated - w->n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? negative_errno() : -ECONNRESET;
                w->n += (size_t) k;
        }
}

static int call(WorkerClient *w, JsonWriter *jw, JsonValue **ret, ApiError *e) {
        _cleanup_free_ char *req = NULL;
        _cleanup_json_ JsonValue *reply = NULL;
        size_t len;
        int r;

        r = json_w_finish(jw, &req, &len);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "out of memory");
        w->connect_failed = false;
        r = call_once(w, req, len, &reply);
        if (r == -EPIPE || r == -ECONNRESET) {
                /* the worker restarted since our last call: one retry on a fresh connection
                 * (only for requests that never reached it) */
                w->fd = safe_close(w->fd);
                r = call_once(w, req, len, &reply);
        }
        if (r < 0) {
                w->fd = safe_close(w->fd);
                if (w->store)
                        return api_error(e, r, API_UNAVAILABLE, "worker '%s' (%s) unavailable: %s", w->target,
                                         w->target_address, strerror(-r));
                return api_error(e, r, API_UNAVAILABLE, "worker unavailable: %s", strerror(-r));
        }
        bool ok = false;
        if (json_bool(json_get(reply, "ok"), &ok) < 0)
                return api_error(e, -EBADMSG, API_INTERNAL, "malformed worker reply");
        if (!ok) {
                const char *code = json_string(json_get(reply, "code")), *msg = json_string(json_get(reply, "message"));
                ApiErrorCode c = code ? api_error_code_from_string(code) : API_INTERNAL;
                if (c < 0)
                        c = API_INTERNAL;
                return api_error(e, -EIO, c, "%s", msg ?: "worker error");
        }
        if (ret)
                *ret = TAKE_PTR(reply);
        return 0;
}

/* Cluster: the next call goes to worker name, if it is live. -EHOSTDOWN if
 * it is not (lost, stopped, silent), -ENXIO if it is not registered. */
static int select_worker(WorkerClient *w, const char *name, ApiError *e) {
        WorkerNode node;
        int r;

        if (!w->store)
                return 0;
        r = store_worker_get(w->store, name, &node);
        if (r == -ENOENT)
                return api_error(e, -ENXIO, API_UNAVAILABLE, "worker '%s' is not registered", name);
        if (r < 0)
                return api_error(e, r, API_UNAVAILABLE, "the store failed (looking up worker '%s'): %s", name,
                                 strerror(-r));
        if (node.state != WORKER_LIVE)
                return api_error(e, -EHOSTDOWN, API_UNAVAILABLE, "worker '%s' is %s", name,
                                 worker_state_to_string(node.state));
        if (node.heartbeat_usec < now_usec() - w->lost_timeout_usec)
                return api_error(e, -EHOSTDOWN, API_UNAVAILABLE, "worker '%s' has sent no heartbeat for %llds", name,
                                 (long long) ((now_usec() - node.heartbeat_usec) / 1000000));
        (void) strscpy(w->target, sizeof w->target, node.name);
        (void) strscpy(w->target_address, sizeof w->target_address, node.address);
        return 0;
}

/* Cluster: the next call goes to the worker that holds sandbox id. */
static int select_sandbox(WorkerClient *w, const char *id, ApiError *e) {
        char name[STORE_NAME_MAX];
        Sandbox sb = {};
        int r;

        if (!w->store)
                return 0;
        r = store_sandbox_get(w->store, NULL, id, &sb);
        if (r == -ENOENT)
                return api_error(e, r, API_NOT_FOUND, "sandbox '%s' not found", id);
        if (r < 0)
                return api_error(e, r, API_UNAVAILABLE, "the store failed (looking up sandbox '%s'): %s", id,
                                 strerror(-r));
        (void) strscpy(name, sizeof name, sb.worker);
        sandbox_done(&sb);
        if (name[0] == 0)
                return api_error(e, -ENXIO, API_UNAVAILABLE, "sandbox '%s' is on no worker", id);
        return select_worker(w, name, e);
}

static void write_spec(JsonWriter *jw, const Sandbox *sb) {
        json_w_object_begin(jw);
        json_w_kv_string(jw, "id", sb->id);
        json_w_kv_string(jw, "tenant", sb->tenant_id); /* with "policy": the gateway registration */
        json_w_kv_int(jw, "slot", sb->slot);
        json_w_kv_string(jw, "template", sb->template_name);
        if (!isempty(sb->runtime))
                json_w_kv_string(jw, "runtime", sb->runtime);
        json_w_kv_int(jw, "cpu_millis", sb->cpu_millis);
        json_w_key(jw, "memory_mb");
        json_w_uint(jw, sb->memory_mb);
        json_w_key(jw, "disk_mb");
        json_w_uint(jw, sb->disk_mb);
        json_w_kv_int(jw, "pids_max", sb->pids_max);
        json_w_kv_int(jw, "io_weight", sb->io_weight);
        if (sb->env_json) {
                json_w_key(jw, "env");
                json_w_raw(jw, sb->env_json);
        }
        if (sb->network_json) { /* the egress policy, for the gateway */
                json_w_key(jw, "policy");
                json_w_raw(jw, sb->network_json);
        }
        json_w_object_end(jw);
}

static int reply_pid(const JsonValue *reply, int64_t *ret_pid, uint64_t *ret_starttime, ApiError *e) {
        int64_t pid = 0;
        uint64_t st = 0;
        if (json_int64(json_get(reply, "pid"), &pid) < 0 || json_uint64(json_get(reply, "starttime"), &st) < 0)
                return api_error(e, -EBADMSG, API_INTERNAL, "malformed worker reply");
        *ret_pid = pid;
        *ret_starttime = st;
        return 0;
}

/* {"op":OP,"sandbox":{spec}[,"checkpoint":CK]} → pid, starttime */
static int call_spec(WorkerClient *w, const char *op, const Sandbox *sb, const char *checkpoint, int64_t *ret_pid,
                     uint64_t *ret_starttime, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        JsonWriter jw;
        int r;

        r = select_worker(w, sb->worker, e);
        if (r < 0)
                return r;
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", op);
        json_w_key(&jw, "sandbox");
        write_spec(&jw, sb);
        if (checkpoint)
                json_w_kv_string(&jw, "checkpoint", checkpoint);
        json_w_object_end(&jw);
        r = call(w, &jw, &reply, e);
        if (r < 0 || !ret_pid)
                return r;
        return reply_pid(reply, ret_pid, ret_starttime, e);
}

/* Cluster: tries the workers in placement order; one that cannot be reached
 * (connect or hello failed: the request never left) is skipped. The row's
 * worker is set before each try, so a delete finds the sandbox wherever the
 * create got to. */
static int create_placed(WorkerClient *w, const Sandbox *sb, int64_t *ret_pid, uint64_t *ret_starttime,
                         ApiError *e) {
        _cleanup_free_ WorkerNode *nodes = NULL;
        _cleanup_free_ size_t *order = NULL;
        size_t n = 0, n_order = 0;
        Sandbox placed;
        int r;

        r = store_worker_list(w->store, &nodes, &n);
        if (r < 0)
                return api_error(e, r, API_UNAVAILABLE, "the store failed (listing workers): %s", strerror(-r));
        order = new0(size_t, n + 1);
        if (!order)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        worker_place(nodes, n, sb, now_usec() - w->lost_timeout_usec, order, &n_order);
        if (n_order == 0)
                return api_error(e, -ENOSPC, API_UNAVAILABLE,
                                 "no live worker has room for this sandbox (%zu workers registered)", n);
        for (size_t i = 0; i < n_order; i++) {
                const WorkerNode *node = &nodes[order[i]];

                r = store_sandbox_set_runtime(w->store, sb->id, 0, 0, node->name);
                if (r < 0)
                        return api_error(e, r, r == -ENOENT ? API_CONFLICT : API_UNAVAILABLE,
                                         "the store failed (placing the sandbox): %s", strerror(-r));
                placed = *sb;
                (void) strscpy(placed.worker, sizeof placed.worker, node->name);
                *e = (ApiError){};
                r = call_spec(w, "create", &placed, NULL, ret_pid, ret_starttime, e);
                if (r >= 0 || !w->connect_failed)
                        return r;
                log_warning("Worker %s (%s) is unreachable; placing sandbox %s elsewhere", node->name,
                            node->address, sb->id);
        }
        return r;
}

int worker_sandbox_create(WorkerClient *w, const Sandbox *sb, int64_t *ret_pid, uint64_t *ret_starttime,
                          ApiError *e) {
        if (w->store)
                return create_placed(w, sb, ret_pid, ret_starttime, e);
        return call_spec(w, "create", sb, NULL, ret_pid, ret_starttime, e);
}

int worker_sandbox_start(WorkerClient *w, const Sandbox *sb, int64_t *ret_pid, uint64_t *ret_starttime, bool *ret_preserved,
                         ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        JsonWriter jw;
        bool preserved = false;
        int r;

        r = select_worker(w, sb->worker, e);
        if (r < 0)
                return r;
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", "start");
        json_w_key(&jw, "sandbox");
        write_spec(&jw, sb);
        json_w_object_end(&jw);
        r = call(w, &jw, &reply, e);
        if (r < 0)
                return r;
        (void) json_bool(json_get(reply, "processes_preserved"), &preserved);
        if (ret_preserved)
                *ret_preserved = preserved;
        return reply_pid(reply, ret_pid, ret_starttime, e);
}

int worker_sandbox_set_limits(WorkerClient *w, const Sandbox *sb, ApiError *e) {
        return call_spec(w, "set_limits", sb, NULL, NULL, NULL, e);
}

/* {"op":"set_policy","id":ID,"policy":{...}|null} */
int worker_sandbox_set_network(WorkerClient *w, const Sandbox *sb, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        JsonWriter jw;
        int r;

        r = select_worker(w, sb->worker, e);
        if (r < 0)
                return r;
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", "set_policy");
        json_w_kv_string(&jw, "id", sb->id);
        json_w_key(&jw, "policy");
        if (sb->network_json)
                json_w_raw(&jw, sb->network_json);
        else
                json_w_null(&jw);
        json_w_object_end(&jw);
        return call(w, &jw, &reply, e);
}

/* {"op":"set_credentials","id":ID} */
int worker_sandbox_set_credentials(WorkerClient *w, const Sandbox *sb, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        JsonWriter jw;
        int r;

        r = select_worker(w, sb->worker, e);
        if (r < 0)
                return r;
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", "set_credentials");
        json_w_kv_string(&jw, "id", sb->id);
        json_w_object_end(&jw);
        return call(w, &jw, &reply, e);
}

int worker_sandbox_take_warm(WorkerClient *w, const Sandbox *sb, ApiError *e) {
        return call_spec(w, "take_warm", sb, NULL, NULL, NULL, e);
}

int worker_sandbox_restore(WorkerClient *w, const Sandbox *sb, const char *checkpoint_id, int64_t *ret_pid,
                           uint64_t *ret_starttime, bool *ret_preserved, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        JsonWriter jw;
        bool preserved = false;
        int r;

        r = select_worker(w, sb->worker, e);
        if (r < 0)
                return r;
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", "restore");
        json_w_key(&jw, "sandbox");
        write_spec(&jw, sb);
        json_w_kv_string(&jw, "checkpoint", checkpoint_id);
        json_w_object_end(&jw);
        r = call(w, &jw, &reply, e);
        if (r < 0)
                return r;
        (void) json_bool(json_get(reply, "processes_preserved"), &preserved);
        if (ret_preserved)
                *ret_preserved = preserved;
        return reply_pid(reply, ret_pid, ret_starttime, e);
}

/* {"op":OP,"id":ID[,"checkpoint":CK]} */
static int call_id(WorkerClient *w, const char *op, const char *id, const char *checkpoint, JsonValue **ret,
                   ApiError *e) {
        JsonWriter jw;
        int r = select_sandbox(w, id, e);
        if (r < 0)
                return r;
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", op);
        json_w_kv_string(&jw, "id", id);
        if (checkpoint)
                json_w_kv_string(&jw, "checkpoint", checkpoint);
        json_w_object_end(&jw);
        return call(w, &jw, ret, e);
}

int worker_sandbox_pause(WorkerClient *w, const char *id, bool pause, ApiError *e) {
        return call_id(w, pause ? "pause" : "resume", id, NULL, NULL, e);
}

int worker_sandbox_suspend(WorkerClient *w, const char *id, bool *ret_processes_preserved, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        bool kept = false;
        int r = call_id(w, "suspend", id, NULL, &reply, e);
        if (r < 0)
                return r;
        (void) json_bool(json_get(reply, "processes_preserved"), &kept);
        if (ret_processes_preserved)
                *ret_processes_preserved = kept;
        return 0;
}

int worker_checkpoint_create(WorkerClient *w, const char *id, const char *checkpoint_id, uint64_t max_mb,
                             bool with_memory, uint64_t *ret_size_bytes, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        JsonWriter jw;
        int r;

        r = select_sandbox(w, id, e);
        if (r < 0)
                return r;
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", "checkpoint");
        json_w_kv_string(&jw, "id", id);
        json_w_kv_string(&jw, "checkpoint", checkpoint_id);
        json_w_key(&jw, "max_mb");
        json_w_uint(&jw, max_mb);
        json_w_kv_bool(&jw, "with_memory", with_memory);
        json_w_object_end(&jw);
        r = call(w, &jw, &reply, e);
        if (r < 0)
                return r;
        if (ret_size_bytes && json_uint64(json_get(reply, "size_bytes"), ret_size_bytes) < 0)
                *ret_size_bytes = 0;
        return 0;
}

int worker_checkpoint_remove(WorkerClient *w, const char *id, const char *checkpoint_id, ApiError *e) {
        return call_id(w, "checkpoint_remove", id, checkpoint_id, NULL, e);
}

int worker_checkpoint_sizes(WorkerClient *w, const char *id, JsonValue **ret, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        const JsonValue *sizes;
        int r;

        r = call_id(w, "checkpoint_sizes", id, NULL, &reply, e);
        if (r < 0)
                return r;
        sizes = json_get(reply, "sizes");
        if (json_type(sizes) != JSON_OBJECT)
                return api_error(e, -EBADMSG, API_INTERNAL, "the worker sent no checkpoint sizes");
        *ret = TAKE_PTR(reply);
        return 0;
}

int worker_sandbox_branch(WorkerClient *w, const char *source_id, const char *checkpoint_id, bool with_memory,
                          const Sandbox *children, size_t n, int64_t *ret_pids, uint64_t *ret_starttimes, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        const JsonValue *arr;
        JsonWriter jw;
        int r;

        r = select_sandbox(w, source_id, e);
        if (r < 0)
                return r;
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", "branch");
        json_w_kv_string(&jw, "source", source_id);
        if (checkpoint_id)
                json_w_kv_string(&jw, "checkpoint", checkpoint_id);
        json_w_kv_bool(&jw, "with_memory", with_memory);
        json_w_key(&jw, "sandboxes");
        json_w_array_begin(&jw);
        for (size_t i = 0; i < n; i++)
                write_spec(&jw, &children[i]);
        json_w_array_end(&jw);
        json_w_object_end(&jw);
        r = call(w, &jw, &reply, e);
        if (r < 0)
                return r;
        arr = json_get(reply, "sandboxes");
        if (json_type(arr) != JSON_ARRAY || json_array_size(arr) != n)
                return api_error(e, -EBADMSG, API_INTERNAL, "malformed worker reply");
        for (size_t i = 0; i < n; i++) {
                r = reply_pid(json_array_at(arr, i), &ret_pids[i], &ret_starttimes[i], e);
                if (r < 0)
                        return r;
        }
        return 0;
}

int worker_sandbox_destroy(WorkerClient *w, const char *id, ApiError *e) {
        JsonWriter jw;
        int r = select_sandbox(w, id, e);
        if (r == -ENOENT || r == -EHOSTDOWN || r == -ENXIO) {
                /* nothing reachable holds it: a worker that comes back removes
                 * what it has of a sandbox the store no longer gives it */
                log_info("Sandbox %s: %s; nothing to stop", id, e->message);
                *e = (ApiError){};
                return 0;
        }
        if (r < 0)
                return r;
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", "destroy");
        json_w_kv_string(&jw, "id", id);
        json_w_object_end(&jw);
        return call(w, &jw, NULL, e);
}

/* Cluster: a fresh connection to the sandbox's worker that becomes the
 * agent stream (worker-net.h); the reply line is read byte by byte so that
 * nothing of the agent's first frame is consumed. */
static int agent_connect_remote(WorkerClient *w, const char *id, int *ret_fd, ApiError *e) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_json_ JsonValue *v = NULL;
        _cleanup_free_ char *req = NULL;
        char line[WORKER_HANDSHAKE_LINE_MAX];
        JsonWriter jw;
        bool ok = false;
        size_t len;
        int r;

        r = select_sandbox(w, id, e);
        if (r < 0)
                return r;
        r = open_connection(w, &fd);
        if (r < 0)
                return api_error(e, r, API_UNAVAILABLE, "worker '%s' (%s) unavailable: %s", w->target,
                                 w->target_address, strerror(-r));
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", "agent");
        json_w_kv_string(&jw, "id", id);
        json_w_object_end(&jw);
        r = json_w_finish(&jw, &req, &len);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "out of memory");
        r = loop_write(fd, req, len);
        if (r >= 0)
                r = loop_write(fd, "\n", 1);
        if (r >= 0)
                r = net_read_line(fd, line, sizeof line, AGENT_HELLO_TIMEOUT_MSEC, &len);
        if (r < 0)
                return api_error(e, r, API_BAD_GATEWAY, "worker '%s' did not open the agent stream: %s", w->target,
                                 strerror(-r));
        if (json_parse(line, len, &v, NULL, 0) < 0 || json_bool(json_get(v, "ok"), &ok) < 0)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "malformed worker reply");
        if (!ok)
                return api_error(e, -EIO, API_BAD_GATEWAY, "worker '%s': %s", w->target,
                                 strna(json_string(json_get(v, "message"))));
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int worker_agent_connect(WorkerClient *w, const char *id, int *ret_fd, ApiError *e) {
        _cleanup_close_ int fd = -EBADF;
        char path[PATH_MAX];
        ProtoFrame f = {};
        struct timeval tv = { .tv_sec = AGENT_HELLO_TIMEOUT_MSEC / 1000 };
        int r;

        if (w->store) {
                r = agent_connect_remote(w, id, &fd, e);
                if (r < 0)
                        return r;
        } else {
                if ((size_t) snprintf(path, sizeof path, "%s/%s/agent.sock", w->agent_dir, id) >= sizeof path)
                        return api_error(e, -ENAMETOOLONG, API_INTERNAL, "agent path too long");
                r = connect_unix(path, &fd);
                if (r < 0)
                        return api_error(e, r, API_BAD_GATEWAY, "cannot reach the sandbox's agent: %s",
                                         strerror(-r));
        }
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        r = proto_recv(fd, &f);
        if (r < 0 || f.type != PROTO_HELLO) {
                proto_frame_done(&f);
                return api_error(e, r < 0 ? r : -EBADMSG, API_BAD_GATEWAY, "the sandbox's agent did not greet: %s",
                                 r < 0 ? strerror(-r) : "unexpected frame");
        }
        proto_frame_done(&f);
        tv.tv_sec = 0;
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* Cluster: {"op":"template_put"} and the tar on a fresh connection to the current target. */
static int template_put(WorkerClient *w, const char *name, int tar_fd, uint64_t *ret_size_bytes, ApiError *e) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_json_ JsonValue *v = NULL;
        _cleanup_free_ char *req = NULL;
        char line[WORKER_HANDSHAKE_LINE_MAX];
        JsonWriter jw;
        bool ok = false;
        size_t len;
        int r;

        r = open_connection(w, &fd);
        if (r < 0) {
                w->connect_failed = true;
                return api_error(e, r, API_UNAVAILABLE, "worker '%s' (%s) unavailable: %s", w->target,
                                 w->target_address, strerror(-r));
        }
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", "template_put");
        json_w_kv_string(&jw, "name", name);
        json_w_object_end(&jw);
        r = json_w_finish(&jw, &req, &len);
        if (r >= 0)
                r = loop_write(fd, req, len);
        if (r >= 0)
                r = loop_write(fd, "\n", 1);
        if (r >= 0)
                r = ship_stream_send(fd, tar_fd, NULL, NULL, NULL, NULL);
        if (r >= 0)
                r = net_read_line(fd, line, sizeof line, WORKER_REPLY_TIMEOUT_MSEC, &len);
        if (r < 0)
                return api_error(e, r, API_UNAVAILABLE, "sending the template to worker '%s' failed: %s", w->target,
                                 strerror(-r));
        if (json_parse(line, len, &v, NULL, 0) < 0 || json_bool(json_get(v, "ok"), &ok) < 0)
                return api_error(e, -EBADMSG, API_INTERNAL, "malformed worker reply");
        if (!ok) {
                const char *code = json_string(json_get(v, "code")), *msg = json_string(json_get(v, "message"));
                ApiErrorCode c = code ? api_error_code_from_string(code) : API_INTERNAL;
                return api_error(e, -EIO, c < 0 ? API_INTERNAL : c, "%s", msg ?: "worker error");
        }
        if (json_uint64(json_get(v, "size_bytes"), ret_size_bytes) < 0)
                *ret_size_bytes = 0;
        return 0;
}

/* Cluster: the tar goes to the first live worker that takes it, which then
 * ships the template to every other live worker. A worker that cannot be
 * reached now gets it from the controller (its template pass) later. */
static int template_import_cluster(WorkerClient *w, const char *name, const char *tar_path,
                                   uint64_t *ret_size_bytes, ApiError *e) {
        _cleanup_free_ WorkerNode *nodes = NULL;
        char holder[STORE_NAME_MAX] = "";
        size_t n = 0;
        int r = -ENOENT;

        r = store_worker_list(w->store, &nodes, &n);
        if (r < 0)
                return api_error(e, r, API_UNAVAILABLE, "the store failed (listing workers): %s", strerror(-r));
        r = api_error(e, -EHOSTDOWN, API_UNAVAILABLE, "no live worker to import template '%s' on", name);
        for (size_t i = 0; i < n && !holder[0]; i++) {
                _cleanup_close_ int tar_fd = -EBADF;
                *e = (ApiError){};
                if (select_worker(w, nodes[i].name, e) < 0)
                        continue;
                tar_fd = open(tar_path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (tar_fd < 0)
                        return api_error(e, negative_errno(), API_INTERNAL, "cannot open the archive: %m");
                w->connect_failed = false;
                r = template_put(w, name, tar_fd, ret_size_bytes, e);
                if (r >= 0)
                        (void) strscpy(holder, sizeof holder, nodes[i].name);
                else if (!w->connect_failed)
                        return r; /* the worker refused it (a bad archive, ...): so would the others */
        }
        if (!holder[0])
                return r;
        log_info("Template %s imported on worker %s; shipping it to the other workers", name, holder);
        for (size_t i = 0; i < n; i++) {
                WorkerShipResult res;
                ApiError ignored = {};
                if (streq(nodes[i].name, holder) || select_worker(w, nodes[i].name, &ignored) < 0)
                        continue;
                if (worker_ship(w, holder, nodes[i].name, NULL, name, NULL, &res, &ignored) < 0)
                        log_warning("Shipping template %s to worker %s failed (the controller tries again): %s",
                                    name, nodes[i].name, ignored.message);
        }
        *e = (ApiError){};
        return 0;
}

int worker_template_import(WorkerClient *w, const char *name, const char *tar_path, uint64_t *ret_size_bytes,
                           ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        JsonWriter jw;
        int r;

        if (w->store)
                return template_import_cluster(w, name, tar_path, ret_size_bytes, e);

        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", "template_import");
        json_w_kv_string(&jw, "name", name);
        json_w_kv_string(&jw, "tar", tar_path);
        json_w_object_end(&jw);
        r = call(w, &jw, &reply, e);
        if (r < 0)
                return r;
        if (json_uint64(json_get(reply, "size_bytes"), ret_size_bytes) < 0)
                *ret_size_bytes = 0;
        return 0;
}

static int template_remove_one(WorkerClient *w, const char *name, ApiError *e) {
        JsonWriter jw;
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", "template_remove");
        json_w_kv_string(&jw, "name", name);
        json_w_object_end(&jw);
        return call(w, &jw, NULL, e);
}

int worker_template_remove(WorkerClient *w, const char *name, ApiError *e) {
        _cleanup_free_ WorkerNode *nodes = NULL;
        size_t n = 0;
        int r;

        if (!w->store)
                return template_remove_one(w, name, e);
        /* from every live worker; one that is down removes it ... never: it keeps its copy */
        r = store_worker_list(w->store, &nodes, &n);
        if (r < 0)
                return api_error(e, r, API_UNAVAILABLE, "the store failed (listing workers): %s", strerror(-r));
        for (size_t i = 0; i < n; i++) {
                if (select_worker(w, nodes[i].name, e) < 0) {
                        *e = (ApiError){};
                        continue;
                }
                r = template_remove_one(w, name, e);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Cluster: what the store knows of the workers. */
static int cluster_info(WorkerClient *w, char **ret_json, ApiError *e) {
        _cleanup_free_ WorkerNode *nodes = NULL;
        JsonWriter jw;
        size_t n = 0, len;
        int r;

        r = store_worker_list(w->store, &nodes, &n);
        if (r < 0)
                return api_error(e, r, API_UNAVAILABLE, "the store failed (listing workers): %s", strerror(-r));
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "worker", "cluster");
        json_w_key(&jw, "workers");
        json_w_array_begin(&jw);
        for (size_t i = 0; i < n; i++) {
                const WorkerNode *x = &nodes[i];
                bool fresh = x->heartbeat_usec >= now_usec() - w->lost_timeout_usec;
                json_w_object_begin(&jw);
                json_w_kv_string(&jw, "name", x->name);
                json_w_kv_string(&jw, "state",
                                 x->state == WORKER_LIVE && !fresh ? "silent" : worker_state_to_string(x->state));
                json_w_kv_string(&jw, "address", x->address);
                json_w_kv_int(&jw, "cpu_millis", x->cpu_millis);
                json_w_kv_int(&jw, "memory_mb", (int64_t) x->memory_mb);
                json_w_kv_int(&jw, "disk_mb", (int64_t) x->disk_mb);
                json_w_kv_string(&jw, "runtimes", x->runtimes);
                json_w_kv_string(&jw, "accelerators", x->accelerators);
                json_w_kv_string(&jw, "templates", x->templates);
                json_w_kv_int(&jw, "sandboxes", x->sandboxes);
                json_w_kv_int(&jw, "heartbeat_age_ms", (now_usec() - x->heartbeat_usec) / 1000);
                json_w_object_end(&jw);
        }
        json_w_array_end(&jw);
        json_w_object_end(&jw);
        r = json_w_finish(&jw, ret_json, &len);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "out of memory");
        return 0;
}

int worker_info(WorkerClient *w, char **ret_json, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        JsonWriter jw;
        size_t len;
        int r;

        if (w->store)
                return cluster_info(w, ret_json, e);

        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", "info");
        json_w_object_end(&jw);
        r = call(w, &jw, &reply, e);
        if (r < 0)
                return r;
        r = json_serialize(json_get(reply, "info"), ret_json, &len);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "malformed worker info");
        return 0;
}

int worker_templates(WorkerClient *w, char *buf, size_t size, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        const JsonValue *arr;
        JsonWriter jw;
        size_t n = 0;
        int r;

        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", "templates");
        json_w_object_end(&jw);
        r = call(w, &jw, &reply, e);
        if (r < 0)
                return r;
        arr = json_get(reply, "templates");
        if (json_type(arr) != JSON_ARRAY || size == 0)
                return api_error(e, -EBADMSG, API_INTERNAL, "malformed worker reply");
        buf[0] = 0;
        for (size_t i = 0; i < json_array_size(arr); i++) {
                const char *t = json_string(json_array_at(arr, i));
                size_t l = t ? strlen(t) : 0;
                if (l == 0 || n + l + 2 > size)
                        continue; /* what does not fit is left out: locality is a preference */
                if (n > 0)
                        buf[n++] = ',';
                memcpy(buf + n, t, l + 1);
                n += l;
        }
        return 0;
}

/* Appends the strings of a JSON array to a comma-separated list (what does
 * not fit or is not a plain name is left out). */
static void list_append(char *buf, size_t size, const JsonValue *arr) {
        size_t n = strlen(buf);

        for (size_t i = 0; i < json_array_size(arr); i++) {
                const char *t = json_string(json_array_at(arr, i));
                size_t l = t ? strlen(t) : 0;
                if (l == 0 || strpbrk(t, ", ") || n + l + 2 > size)
                        continue;
                if (n > 0)
                        buf[n++] = ',';
                memcpy(buf + n, t, l + 1);
                n += l;
        }
}

int worker_runtimes(WorkerClient *w, char *runtimes, size_t runtimes_size, char *accelerators,
                    size_t accelerators_size, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        const JsonValue *info, *vm, *accels;
        bool available = false;
        JsonWriter jw;
        int r;

        if (w->store || runtimes_size == 0 || accelerators_size == 0)
                return api_error(e, -EINVAL, API_INTERNAL, "worker_runtimes: the local worker only");
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", "info");
        json_w_object_end(&jw);
        r = call(w, &jw, &reply, e);
        if (r < 0)
                return r;
        info = json_get(reply, "info");
        if (json_type(json_get(info, "runtimes")) != JSON_ARRAY)
                return api_error(e, -EBADMSG, API_INTERNAL, "malformed worker info");
        runtimes[0] = accelerators[0] = 0;
        list_append(runtimes, runtimes_size, json_get(info, "runtimes"));
        /* hardware acceleration the vm runtime can use (tcg is emulation: not one) */
        vm = json_get(info, "vm");
        accels = json_get(vm, "accelerators");
        if (json_bool(json_get(vm, "available"), &available) >= 0 && available && json_type(accels) == JSON_ARRAY)
                for (size_t i = 0; i < json_array_size(accels); i++) {
                        const char *a = json_string(json_array_at(accels, i));
                        if (a && streq(a, "kvm"))
                                (void) strscpy(accelerators, accelerators_size, "kvm");
                }
        return 0;
}

int worker_ship(WorkerClient *w, const char *from, const char *to, const char *sandbox_id, const char *name,
                const char *template_name, WorkerShipResult *ret, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        char to_address[STORE_WORKER_ADDRESS_MAX];
        const char *sha, *parent;
        JsonWriter jw;
        int r;

        if (!w->store)
                return api_error(e, -EOPNOTSUPP, API_NOT_IMPLEMENTED, "shipping needs a cluster");
        r = select_worker(w, to, e);
        if (r < 0)
                return r;
        (void) strscpy(to_address, sizeof to_address, w->target_address);
        r = select_worker(w, from, e);
        if (r < 0)
                return r;
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", "ship");
        json_w_kv_string(&jw, "kind", sandbox_id ? "checkpoint" : "template");
        if (sandbox_id)
                json_w_kv_string(&jw, "sandbox", sandbox_id);
        json_w_kv_string(&jw, "name", name);
        if (template_name)
                json_w_kv_string(&jw, "template", template_name);
        json_w_kv_string(&jw, "to", to);
        json_w_kv_string(&jw, "address", to_address);
        json_w_object_end(&jw);
        r = call(w, &jw, &reply, e);
        if (r < 0)
                return r;
        *ret = (WorkerShipResult){};
        sha = json_string(json_get(reply, "sha256"));
        parent = json_string(json_get(reply, "parent"));
        (void) strscpy(ret->sha256, sizeof ret->sha256, strempty(sha));
        (void) strscpy(ret->parent, sizeof ret->parent, strempty(parent));
        (void) json_uint64(json_get(reply, "bytes"), &ret->bytes);
        (void) json_bool(json_get(reply, "complete"), &ret->complete);
        return 0;
}

int worker_checkpoint_remove_on(WorkerClient *w, const char *worker, const char *sandbox_id, const char *checkpoint_id,
                                ApiError *e) {
        JsonWriter jw;
        int r = select_worker(w, worker, e);

        if (r < 0)
                return r;
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", "checkpoint_remove");
        json_w_kv_string(&jw, "id", sandbox_id);
        json_w_kv_string(&jw, "checkpoint", checkpoint_id);
        json_w_object_end(&jw);
        return call(w, &jw, NULL, e);
}

int worker_sandbox_recover(WorkerClient *w, const Sandbox *sb, const char *checkpoint_id, char *ret_worker,
                           int64_t *ret_pid, uint64_t *ret_starttime, ApiError *e) {
        _cleanup_free_ CheckpointCopy *copies = NULL;
        size_t n = 0, tried = 0;
        Sandbox placed;
        int r;

        if (!w->store)
                return api_error(e, -EOPNOTSUPP, API_NOT_IMPLEMENTED, "recovering a lost sandbox needs a cluster");
        r = store_checkpoint_copy_list(w->store, checkpoint_id, &copies, &n);
        if (r < 0)
                return api_error(e, r, API_UNAVAILABLE, "the store failed (listing the checkpoint's copies): %s",
                                 strerror(-r));
        /* workers other than the lost one first */
        for (int pass = 0; pass < 2; pass++)
                for (size_t i = 0; i < n; i++) {
                        ApiError skip = {};
                        if (!copies[i].available || streq(copies[i].worker, sb->worker) != (pass == 1))
                                continue;
                        if (select_worker(w, copies[i].worker, &skip) < 0)
                                continue;
                        tried++;
                        r = store_sandbox_set_runtime(w->store, sb->id, 0, 0, copies[i].worker);
                        if (r < 0)
                                return api_error(e, r, r == -ENOENT ? API_CONFLICT : API_UNAVAILABLE,
                                                 "the store failed (placing the sandbox): %s", strerror(-r));
                        placed = *sb;
                        (void) strscpy(placed.worker, sizeof placed.worker, copies[i].worker);
                        *e = (ApiError){};
                        w->connect_failed = false;
                        r = call_spec(w, "restore", &placed, checkpoint_id, ret_pid, ret_starttime, e);
                        if (r >= 0) {
                                (void) strscpy(ret_worker, STORE_NAME_MAX, copies[i].worker);
                                return 0;
                        }
                        if (!w->connect_failed)
                                return r;
                        log_warning("Worker %s is unreachable; recovering sandbox %s elsewhere", copies[i].worker,
                                    sb->id);
                }
        if (tried > 0)
                return r;
        return api_error(e, -ENOENT, API_CONFLICT,
                         "sandbox '%s' is lost with worker '%s' and no live worker holds a copy of checkpoint '%s' "
                         "(checkpoints are shipped to other workers when ship_checkpoints > 0)",
                         sb->id, sb->worker, checkpoint_id);
}
