/* SPDX-License-Identifier: MIT */
/* The API side of the worker boundary: the client's state and the
 * request/response plumbing. All in one (role all): requests over the local
 * worker's unix socket. In a cluster: each call goes to the worker that holds
 * the sandbox (the store says which, and where it listens) over TCP, after
 * the cluster token (worker-net.h); a worker that cannot be reached is
 * skipped, never waited for. The operations: worker-client-sandbox.c (a
 * sandbox's life), -agent.c (agent streams), -ship.c (templates and shipped
 * state), -info.c (what the workers offer). */
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <time.h>
#include <sys/socket.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "json.h"
#include "log.h"
#include "str-util.h"
#include "time-util.h"
#include "worker-client-internal.h"
#include "cluster-net.h"
#include "worker-placement.h"
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
        r = net_connect_worker(w->target_address, w->target, WORKER_CONNECT_TIMEOUT_MSEC, &fd, NULL, 0);
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

void worker_client_request_begin(WorkerCall *c, WorkerOpKind kind) {
        c->kind = kind;
        json_w_init(&c->jw);
        json_w_object_begin(&c->jw);
        json_w_kv_string(&c->jw, "op", worker_op_kind_to_string(kind));
}

int worker_client_send_request(int fd, WorkerCall *c) {
        _cleanup_free_ char *req = NULL;
        size_t len;
        int r = json_w_finish(&c->jw, &req, &len);
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

static int left_msec(int64_t deadline_msec) {
        int64_t left = deadline_msec - mono_msec();
        return left <= 0 ? 0 : (int) MIN(left, (int64_t) INT_MAX);
}

/* A kept connection the worker closed since our last call (it restarted, or
 * its listener dropped an idle connection), or that holds bytes no request
 * asked for: not to be used. Nothing was sent on it yet, so a fresh one is
 * as good. */
static bool connection_stale(WorkerClient *w) {
        struct pollfd p = { .fd = w->fd, .events = POLLIN | POLLRDHUP };
        return w->n > 0 || poll(&p, 1, 0) != 0;
}

/* All of buf, before the deadline (a stopped worker's full socket buffer
 * does not hold us); never raises SIGPIPE. */
static int write_all(int fd, const char *buf, size_t len, int64_t deadline_msec) {
        while (len > 0) {
                struct pollfd p = { .fd = fd, .events = POLLOUT };
                ssize_t k = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
                int r;

                if (k > 0) {
                        buf += k;
                        len -= (size_t) k;
                        continue;
                }
                if (k == 0)
                        return -EIO;
                if (errno == EINTR)
                        continue;
                if (errno != EAGAIN)
                        return negative_errno();
                r = poll(&p, 1, left_msec(deadline_msec));
                if (r < 0 && errno != EINTR)
                        return negative_errno();
                if (r == 0)
                        return -ETIMEDOUT;
        }
        return 0;
}

/* A call to a cluster worker waits for its reply in slices of this: one whose
 * heartbeats stopped meanwhile (stopped, cut off from the store, its host
 * gone) is not waited for to the op's deadline, which may be minutes. */
#define WORKER_WATCH_MSEC 1000

/* The called worker's heartbeat is older than the lost timeout, by the
 * store's clock. A store that does not answer says nothing: the wait goes on
 * to the deadline, as without a store. */
static bool target_silent(WorkerClient *w) {
        WorkerNode node;
        int64_t now;

        if (!w->store || w->lost_timeout_usec <= 0 || store_worker_get(w->store, w->target, &node) < 0 ||
            store_clock(w->store, &now) < 0)
                return false;
        return node.heartbeat_usec < now - w->lost_timeout_usec;
}

/* Sends one request line and reads the reply line into *ret (parsed), all
 * before the deadline. *ret_sent: the whole line went out, so the worker
 * may have acted on it whatever happened next. */
static int call_once(WorkerClient *w, const char *req, size_t len, int64_t deadline_msec, bool *ret_sent,
                     JsonValue **ret) {
        int r;

        *ret_sent = false;
        if (w->fd >= 0 && w->store && !streq(w->fd_worker, w->target))
                w->fd = safe_close(w->fd);
        if (w->fd >= 0 && connection_stale(w))
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
        r = write_all(w->fd, req, len, deadline_msec);
        if (r >= 0)
                r = write_all(w->fd, "\n", 1, deadline_msec);
        if (r < 0)
                return r; /* without its newline the worker acts on no line */
        *ret_sent = true;
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
                int slice = left_msec(deadline_msec);
                if (w->store)
                        slice = MIN(slice, WORKER_WATCH_MSEC);
                r = poll(&pfd, 1, slice);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r == 0 && left_msec(deadline_msec) > 0) {
                        if (target_silent(w))
                                return -EHOSTDOWN;
                        continue;
                }
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

/* Who the call went to, for its error messages. */
static const char *target_name(WorkerClient *w, char *buf, size_t size) {
        if (w->store)
                snprintf(buf, size, "worker '%s' (%s)", w->target, w->target_address);
        else
                snprintf(buf, size, "worker");
        return buf;
}

int worker_client_call(WorkerClient *w, WorkerCall *c, JsonValue **ret, ApiError *e) {
        _cleanup_free_ char *req = NULL;
        _cleanup_json_ JsonValue *reply = NULL;
        const WorkerOp *op = worker_op(c->kind);
        int timeout_msec = w->reply_timeout_msec > 0 ? w->reply_timeout_msec : op->deadline_msec;
        int64_t deadline_msec = mono_msec() + timeout_msec;
        char who[STORE_NAME_MAX + STORE_WORKER_ADDRESS_MAX + 16];
        bool sent = false;
        size_t len;
        int r;

        r = json_w_finish(&c->jw, &req, &len);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "out of memory");
        w->connect_failed = false;
        r = call_once(w, req, len, deadline_msec, &sent, &reply);
        if ((r == -EPIPE || r == -ECONNRESET) && (!sent || op->idempotent) && !w->connect_failed) {
                /* the connection broke (the worker restarted): one more try on a fresh one if
                 * the request never arrived, or if arriving twice is as once */
                w->fd = safe_close(w->fd);
                log_debug("Worker op '%s': the connection broke (%s); sending it again", op->name, strerror(-r));
                r = call_once(w, req, len, deadline_msec, &sent, &reply);
        }
        if (r < 0) {
                w->fd = safe_close(w->fd);
                (void) target_name(w, who, sizeof who);
                /* the local worker: down, restarting (its supervisor starts it again) or not
                 * answering: worker_unavailable, with Retry-After */
                ApiErrorCode code = w->store ? API_UNAVAILABLE : API_WORKER_UNAVAILABLE;
                if (w->connect_failed)
                        return api_error(e, r, code, "%s unavailable: %s", who, strerror(-r));
                if (r == -ETIMEDOUT && !sent)
                        return api_error(e, r, code,
                                         "%s did not read '%s' within %d s (stopped or overloaded?)", who, op->name,
                                         (timeout_msec + 999) / 1000);
                if (r == -ETIMEDOUT)
                        return api_error(e, r, code,
                                         "%s did not answer '%s' within %d s (stopped or overloaded?)%s", who,
                                         op->name, (timeout_msec + 999) / 1000,
                                         sent && !op->idempotent ? "; its outcome is unknown" : "");
                if (r == -EHOSTDOWN)
                        return api_error(e, r, code,
                                         "%s stopped heartbeating while it ran '%s'%s", who, op->name,
                                         op->idempotent ? "" : "; its outcome is unknown");
                if (sent)
                        return api_error(e, r, code,
                                         "%s connection lost after '%s' was sent (%s); its outcome is unknown", who,
                                         op->name, strerror(-r));
                return api_error(e, r, code, "%s unavailable: %s", who, strerror(-r));
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
        int64_t now = store_now_usec(w->store); /* heartbeats are in the store's time */
        if (node.heartbeat_usec < now - w->lost_timeout_usec)
                return api_error(e, -EHOSTDOWN, API_UNAVAILABLE, "worker '%s' has sent no heartbeat for %llds", name,
                                 (long long) ((now - node.heartbeat_usec) / 1000000));
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

int worker_client_place(WorkerClient *w, const Sandbox *like, WorkerNode **ret_nodes, size_t *ret_n,
                        size_t **ret_order, size_t *ret_n_order, ApiError *e) {
        _cleanup_free_ WorkerNode *nodes = NULL;
        size_t n = 0;
        int r;

        r = worker_client_list_workers(w, &nodes, &n, e);
        if (r < 0)
                return r;
        *ret_order = new0(size_t, n + 1);
        if (!*ret_order)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        worker_place(nodes, n, like, store_now_usec(w->store) - w->lost_timeout_usec, *ret_order, ret_n_order);
        *ret_nodes = TAKE_PTR(nodes);
        *ret_n = n;
        return 0;
}
