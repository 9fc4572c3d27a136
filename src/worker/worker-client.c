/* SPDX-License-Identifier: MIT */
/* The API side of the worker boundary: the client's state and the
 * request/response plumbing. All in one (role all): requests over the local
 * worker's unix socket. In a cluster: each call goes to the worker that holds
 * the sandbox (the store says which, and where it listens) over TCP, after
 * the cluster token (worker-net.h); a worker that cannot be reached is
 * skipped, never waited for. The operations: worker-client-sandbox.c (a
 * sandbox's life), -agent.c (agent streams), -ship.c (templates and shipped
 * state), -info.c (what the workers offer). */
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "json.h"
#include "log.h"
#include "str-util.h"
#include "worker-client-internal.h"
#include "cluster-net.h"
#include "worker-proto.h"

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

/* The hello of cluster-net.h on a fresh connection to w->target. */
static int hello(WorkerClient *w, int fd) {
        char msg[256] = "";
        int r = net_hello(fd, w->token, w->target, msg, sizeof msg);

        if (r == -EACCES)
                log_warning("Worker %s (%s) refused us: %s", w->target, w->target_address, msg);
        return r;
}

int worker_client_open_connection(WorkerClient *w, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (!w->store)
                return socket_connect_unix(w->path, ret_fd);
        r = net_connect(w->target_address, WORKER_CONNECT_TIMEOUT_MSEC, &fd);
        if (r >= 0)
                r = hello(w, fd);
        if (r < 0)
                return r;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int write_line(int fd, const char *line, size_t len) {
        int r = loop_write(fd, line, len);
        return r < 0 ? r : loop_write(fd, "\n", 1);
}

void worker_client_request_begin(JsonWriter *jw, const char *op) {
        json_w_init(jw);
        json_w_object_begin(jw);
        json_w_kv_string(jw, "op", op);
}

int worker_client_send_request(int fd, JsonWriter *jw) {
        _cleanup_free_ char *req = NULL;
        size_t len;
        int r = json_w_finish(jw, &req, &len);
        return r < 0 ? r : write_line(fd, req, len);
}

int worker_client_reply_check(const JsonValue *reply, ApiError *e) {
        const char *code, *msg;
        ApiErrorCode c;
        bool ok = false;

        if (json_bool(json_get(reply, "ok"), &ok) < 0)
                return api_error(e, -EBADMSG, API_INTERNAL, "malformed worker reply");
        if (ok)
                return 0;
        code = json_string(json_get(reply, "code"));
        msg = json_string(json_get(reply, "message"));
        c = code ? api_error_code_from_string(code) : API_INTERNAL;
        return api_error(e, -EIO, c < 0 ? API_INTERNAL : c, "%s", msg ?: "worker error");
}

/* Sends one request line and reads the reply line into *ret (parsed). */
static int call_once(WorkerClient *w, const char *req, size_t len, JsonValue **ret) {
        int r;

        if (w->fd >= 0 && w->store && !streq(w->fd_worker, w->target))
                w->fd = safe_close(w->fd);
        if (w->fd < 0) {
                r = worker_client_open_connection(w, &w->fd);
                if (r < 0) {
                        w->connect_failed = true;
                        return r;
                }
                (void) strscpy(w->fd_worker, sizeof w->fd_worker, w->store ? w->target : "");
                w->n = 0;
        }
        r = write_line(w->fd, req, len);
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

int worker_client_call(WorkerClient *w, JsonWriter *jw, JsonValue **ret, ApiError *e) {
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
                /* the local worker is down or restarting (its supervisor starts it again) */
                return api_error(e, r, API_WORKER_UNAVAILABLE, "the worker is unavailable (restarting?): %s",
                                 strerror(-r));
        }
        r = worker_client_reply_check(reply, e);
        if (r < 0)
                return r;
        if (ret)
                *ret = TAKE_PTR(reply);
        return 0;
}

int worker_client_select_worker(WorkerClient *w, const char *name, ApiError *e) {
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

int worker_client_select_sandbox(WorkerClient *w, const char *id, ApiError *e) {
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
        return worker_client_select_worker(w, name, e);
}

int worker_client_list_workers(WorkerClient *w, WorkerNode **ret_nodes, size_t *ret_n, ApiError *e) {
        int r = store_worker_list(w->store, ret_nodes, ret_n);
        if (r < 0)
                return api_error(e, r, API_UNAVAILABLE, "the store failed (listing workers): %s", strerror(-r));
        return 0;
}
