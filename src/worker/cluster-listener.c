/* SPDX-License-Identifier: MIT */
/* The worker host's internal listener: mutual TLS (cluster-tls.h, when
 * configured), token check, then worker requests
 * relayed line by line to the local worker process, or one sandbox agent
 * stream relayed byte for byte (never buffered whole). One thread per
 * connection, bounded. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>

#include "addr-pool.h"
#include "alloc-util.h"
#include "fd-util.h"
#include "json.h"
#include "log.h"
#include "net-dial.h"
#include "sock-io.h"
#include "str-util.h"
#include "worker-client.h"
#include "cluster-listener.h"
#include "cluster-net.h"
#include "cluster-tls.h"
#include "worker-proto.h"
#include "worker-ship.h"

#define LISTENER_CONNECTIONS_MAX 512
#define LISTENER_IDLE_MSEC (10 * 60 * 1000)          /* an idle connection is closed after this */
#define LISTENER_DRAIN_MSEC 1000                     /* a refused peer's pending bytes: waited for this long */
#define LISTENER_DRAIN_MAX (64U * 1024U)             /* ... and read up to this much */

struct ClusterListener {
        const Config *config;
        char *token;
        int listen_fd;
        int stop_pipe[2];
        pthread_t thread;
        bool thread_started;
        atomic_int connections;
        char worker_sock[PATH_MAX];
        char agent_dir[PATH_MAX];
};

typedef struct Conn {
        ClusterListener *g;
        int fd;
        int worker_fd;
        char peer[INET6_ADDRSTRLEN + 8];
} Conn;

static bool sandbox_id_ok(const char *id) {
        size_t n = strlen(id);
        if (n == 0 || n >= 64)
                return false;
        for (const char *p = id; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
                        return false;
        return true;
}

/* The connection turns into the sandbox's agent stream. */
static void serve_agent(Conn *c, const char *id) {
        _cleanup_close_ int afd = -EBADF;
        char path[PATH_MAX];
        int r;

        if (!sandbox_id_ok(id))
                return net_reply(c->fd, false, "bad_request", "invalid sandbox id", NULL);
        if ((size_t) snprintf(path, sizeof path, "%s/%s/agent.sock", c->g->agent_dir, id) >= sizeof path)
                return net_reply(c->fd, false, "internal", "agent path too long", NULL);
        r = socket_connect_unix(path, &afd);
        if (r < 0) {
                char msg[128];
                snprintf(msg, sizeof msg, "cannot reach the sandbox's agent: %s", strerror(-r));
                return net_reply(c->fd, false, "bad_gateway", msg, NULL);
        }
        net_reply(c->fd, true, NULL, NULL, NULL);
        (void) net_splice_both(c->fd, afd);
}

/* The connection turns into a TCP stream to a port of a sandbox of this
 * host: to its slot's own address (net-dial.h), and only for a sandbox that
 * lives here (its agent directory). The peer holds the cluster token. */
static void serve_port(Conn *c, const JsonValue *req) {
        _cleanup_close_ int fd = -EBADF;
        const char *id = json_string(json_get(req, "id"));
        char path[PATH_MAX], msg[160];
        uint64_t slot = 0, port = 0;
        AddrPool pool;
        int r;

        if (!id || !sandbox_id_ok(id))
                return net_reply(c->fd, false, "bad_request", "invalid sandbox id", NULL);
        if (json_uint64(json_get(req, "slot"), &slot) < 0 || slot > UINT32_MAX ||
            json_uint64(json_get(req, "port"), &port) < 0 || port == 0 || port > 65535)
                return net_reply(c->fd, false, "bad_request", "slot and port must be integers in range", NULL);
        if ((size_t) snprintf(path, sizeof path, "%s/%s", c->g->agent_dir, id) >= sizeof path)
                return net_reply(c->fd, false, "internal", "agent path too long", NULL);
        if (access(path, F_OK) < 0)
                return net_reply(c->fd, false, "not_found", "no such sandbox on this worker", NULL);
        if (isempty(c->g->config->net_pool) ||
            addr_pool_parse(c->g->config->net_pool, strlen(c->g->config->net_pool), &pool) < 0)
                return net_reply(c->fd, false, "bad_gateway", "this worker's sandboxes have no network", NULL);
        r = net_dial_sandbox(&pool, (uint32_t) slot, (uint16_t) port, &fd);
        if (r < 0) {
                snprintf(msg, sizeof msg, "nothing answers on port %u of sandbox %s (%s)", (unsigned) port, id,
                         r == -ECONNREFUSED ? "connection refused" : r == -ETIMEDOUT ? "timed out" : "unreachable");
                return net_reply(c->fd, false, "bad_gateway", msg, NULL);
        }
        net_reply(c->fd, true, NULL, NULL, NULL);
        r = sock_relay(c->fd, NULL, 0, fd, NULL, 0, 64U * 1024U, LISTENER_IDLE_MSEC * 6);
        if (r < 0)
                log_debug_errno(r, "Port %u of sandbox %s: the stream ended: %m", (unsigned) port, id);
}

/* A connection to the worker process kept from an earlier request that it
 * closed since (it restarted): readable (EOF) or hung up. */
static bool connection_stale(int fd) {
        struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
        return poll(&p, 1, 0) != 0;
}

/* Sends one request line to the worker process; a kept connection found
 * closed is replaced first, and a write that fails is tried once more on a
 * fresh connection (a failed write delivered no line: the worker acts on
 * none that lacks its newline). */
static int relay_send(Conn *c, const char *line, size_t len) {
        int r = -EPIPE;

        for (int attempt = 0; attempt < 2 && r < 0; attempt++) {
                if (c->worker_fd >= 0 && (attempt > 0 || connection_stale(c->worker_fd)))
                        c->worker_fd = safe_close(c->worker_fd);
                if (c->worker_fd < 0) {
                        r = socket_connect_unix(c->g->worker_sock, &c->worker_fd);
                        if (r < 0)
                                return r;
                }
                r = loop_write(c->worker_fd, line, len);
                if (r >= 0)
                        r = loop_write(c->worker_fd, "\n", 1);
        }
        return r;
}

/* One worker request: relayed to the local worker process, its reply back
 * (within the op's deadline). Never sent twice once it may have arrived. */
static int serve_request(Conn *c, WorkerOpKind kind, const char *line, size_t len, char *buf, size_t size) {
        size_t n = 0;
        int r;

        r = relay_send(c, line, len);
        if (r < 0) {
                c->worker_fd = safe_close(c->worker_fd);
                net_reply(c->fd, false, "unavailable", "the worker process is not running", NULL);
                return 0;
        }
        r = net_read_line(c->worker_fd, buf, size, worker_op(kind)->deadline_msec, &n);
        if (r < 0) {
                c->worker_fd = safe_close(c->worker_fd);
                net_reply(c->fd, false, "unavailable",
                          r == -ETIMEDOUT ? "the worker process did not answer in time (its outcome is unknown)"
                                          : "the worker process did not answer (its outcome is unknown)",
                          NULL);
                return 0;
        }
        r = loop_write(c->fd, buf, n);
        if (r >= 0)
                r = loop_write(c->fd, "\n", 1);
        return r;
}

/* A template's tar streamed by an API server: stored under our state dir,
 * imported by the worker process (its reply is ours), removed. */
static void serve_template_put(Conn *c, const JsonValue *req, char *buf, size_t size) {
        _cleanup_free_ char *path = NULL, *line = NULL;
        JsonWriter jw;
        size_t len;

        if (worker_ship_template_put(c->g->config, c->fd, req, &path) < 0)
                return;
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", "template_import");
        json_w_kv_string(&jw, "name", json_string(json_get(req, "name")));
        json_w_kv_string(&jw, "tar", path);
        json_w_object_end(&jw);
        if (json_w_finish(&jw, &line, &len) < 0)
                net_reply(c->fd, false, "internal", "out of memory", NULL);
        else
                (void) serve_request(c, WORKER_OP_TEMPLATE_IMPORT, line, len, buf, size);
        (void) unlink(path);
}

/* A build step's files streamed by an API server ({"op":"build_layer_put",
 * "key","from","name"?,"mkdir"?,"defaults"?} and the tar): stored under our
 * state dir, then the step's build_layer by the worker process with that
 * file as its "tar" (its reply is ours), removed. */
static void serve_build_layer_put(Conn *c, const JsonValue *req, char *buf, size_t size) {
        static const char *const copied[] = { "key", "from", "name", "mkdir", "defaults" };
        const char *key = json_string(json_get(req, "key"));
        _cleanup_free_ char *path = NULL, *line = NULL;
        JsonWriter jw;
        size_t len;

        if (!key || strlen(key) != 64 || strspn(key, "0123456789abcdef") != 64) {
                net_reply(c->fd, false, "invalid_argument", "invalid layer key", NULL);
                return;
        }
        if (worker_ship_upload(c->g->config, c->fd, "build", key, &path) < 0)
                return;
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", "build_layer");
        for (size_t i = 0; i < ELEMENTSOF(copied); i++) {
                const JsonValue *v = json_get(req, copied[i]);
                if (v && json_type(v) != JSON_STRING) {
                        json_w_done(&jw);
                        (void) unlink(path);
                        net_reply(c->fd, false, "invalid_argument", "a build_layer_put field is not a string", NULL);
                        return;
                }
                if (v)
                        json_w_kv_string(&jw, copied[i], json_string(v));
        }
        json_w_kv_string(&jw, "tar", path);
        json_w_object_end(&jw);
        if (json_w_finish(&jw, &line, &len) < 0)
                net_reply(c->fd, false, "internal", "out of memory", NULL);
        else
                (void) serve_request(c, WORKER_OP_BUILD_LAYER, line, len, buf, size);
        (void) unlink(path);
}

/* After a refusal: the peer gets to read our answer before the close (a
 * close with its unread bytes pending would reset the connection and could
 * discard the answer). Bounded in time and bytes. */
static void linger_close(int fd) {
        char buf[4096];
        size_t drained = 0;

        (void) shutdown(fd, SHUT_WR);
        while (drained < LISTENER_DRAIN_MAX) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                ssize_t k;
                if (poll(&p, 1, LISTENER_DRAIN_MSEC) <= 0)
                        break;
                k = read(fd, buf, sizeof buf);
                if (k <= 0)
                        break;
                drained += (size_t) k;
        }
}

static bool hello_ok(Conn *c) {
        _cleanup_json_ JsonValue *v = NULL;
        char line[WORKER_HANDSHAKE_LINE_MAX];
        const char *op, *token, *want;
        size_t n = 0;
        int r;

        r = net_read_line(c->fd, line, sizeof line, WORKER_HELLO_TIMEOUT_MSEC, &n);
        if (r < 0) {
                log_info("Internal connection from %s ended before its hello: %s", c->peer, strerror(-r));
                return false;
        }
        r = json_parse(line, n, &v, NULL, 0);
        explicit_bzero(line, sizeof line);
        op = r >= 0 ? json_string(json_get(v, "op")) : NULL;
        token = r >= 0 ? json_string(json_get(v, "token")) : NULL;
        if (!op || !streq(op, "hello") || !token) {
                log_warning("Refused an internal connection from %s: no hello", c->peer);
                net_reply(c->fd, false, "unauthorized", "a connection starts with a hello and the cluster token", NULL);
                return false;
        }
        if (!cluster_token_equal(token, c->g->token)) {
                log_warning("Refused an internal connection from %s: wrong cluster token", c->peer);
                net_reply(c->fd, false, "unauthorized", "wrong cluster token", NULL);
                return false;
        }
        want = json_string(json_get(v, "worker"));
        if (!isempty(want) && !streq(want, c->g->config->worker_name)) {
                log_warning("Refused an internal connection from %s: it wanted worker '%s'", c->peer, want);
                net_reply(c->fd, false, "unavailable", "this is another worker", c->g->config->worker_name);
                return false;
        }
        net_reply(c->fd, true, NULL, NULL, c->g->config->worker_name);
        return true;
}

/* One connection, from its TLS handshake (when configured) to its end. */
static void serve_conn(Conn *c) {
        _cleanup_free_ char *line = malloc(WORKER_LINE_MAX + 1), *out = malloc(WORKER_LINE_MAX + 1);

        if (!line || !out)
                return;
        if (cluster_tls_enabled()) {
                char why[320] = "";
                int fd = c->fd, r;

                c->fd = -EBADF;
                r = cluster_tls_server(fd, &c->fd, why, sizeof why);
                if (r < 0) {
                        log_warning("Refused an internal connection from %s: %s", c->peer,
                                    why[0] ? why : strerror(-r));
                        return;
                }
        }
        if (!hello_ok(c)) {
                linger_close(c->fd);
                return;
        }
        for (;;) {
                _cleanup_(worker_request_done) WorkerRequest req = { .kind = _WORKER_OP_INVALID };
                char err[192];
                size_t n = 0;
                int r;

                if (net_read_line(c->fd, line, WORKER_LINE_MAX + 1, LISTENER_IDLE_MSEC, &n) < 0)
                        break;
                /* which ops a peer may ask for, and which this process serves itself
                 * (ship, receive, template_put, agent): the table of worker-proto.h */
                r = worker_request_decode(line, n, &req, err, sizeof err);
                if (r == -EOPNOTSUPP) {
                        net_reply(c->fd, false, "forbidden", "this worker op is not served over the network", NULL);
                        continue;
                }
                if (r < 0) {
                        char msg[256];
                        snprintf(msg, sizeof msg, "bad worker request: %s", err);
                        net_reply(c->fd, false, "bad_request", msg, NULL);
                        break;
                }
                switch (req.kind) {
                case WORKER_OP_SHIP: /* this host sends one of its subvolumes to another */
                        worker_ship_send(c->g->config, c->g->token, c->fd, req.json);
                        continue;
                case WORKER_OP_RECEIVE: /* another host sends us one: the connection was the stream */
                        worker_ship_receive(c->g->config, c->fd, req.json);
                        linger_close(c->fd); /* a refusal may come before the sender's last byte */
                        return;
                case WORKER_OP_TEMPLATE_PUT:
                        serve_template_put(c, req.json, out, WORKER_LINE_MAX + 1);
                        linger_close(c->fd);
                        return;
                case WORKER_OP_BUILD_LAYER_PUT:
                        serve_build_layer_put(c, req.json, out, WORKER_LINE_MAX + 1);
                        linger_close(c->fd);
                        return;
                case WORKER_OP_BUILD_LAYER:
                        /* a path on this host: a peer's files come with build_layer_put */
                        if (json_get(req.json, "tar")) {
                                net_reply(c->fd, false, "forbidden",
                                          "build_layer takes no tar path over the network (build_layer_put)", NULL);
                                continue;
                        }
                        break;
                case WORKER_OP_AGENT:
                        serve_agent(c, json_string(json_get(req.json, "id")));
                        return; /* the connection was the stream */
                case WORKER_OP_PORT:
                        serve_port(c, req.json);
                        return; /* the connection was the stream */
                default:
                        break;
                }
                if (!worker_op(req.kind)->relayed) {
                        net_reply(c->fd, false, "forbidden", "this worker op is not served over the network", NULL);
                        continue;
                }
                if (serve_request(c, req.kind, line, n, out, WORKER_LINE_MAX + 1) < 0)
                        break;
        }
}

static void conn_free(Conn *c) {
        safe_close(c->fd);
        safe_close(c->worker_fd);
        atomic_fetch_sub(&c->g->connections, 1);
        free(c);
}

static void *conn_thread(void *userdata) {
        Conn *c = userdata;

        log_set_context(NULL, "cluster");
        serve_conn(c);
        conn_free(c);
        return NULL;
}

int cluster_listener_serve(ClusterListener *g, int fd, const char *peer) {
        Conn *c = new0(Conn, 1);

        if (!c) {
                safe_close(fd);
                return -ENOMEM;
        }
        atomic_fetch_add(&g->connections, 1);
        *c = (Conn){ .g = g, .fd = fd, .worker_fd = -EBADF };
        (void) strscpy(c->peer, sizeof c->peer, peer);
        serve_conn(c);
        conn_free(c);
        return 0;
}

static void peer_name(const struct sockaddr_storage *ss, char *buf, size_t size) {
        char a[INET6_ADDRSTRLEN] = "?";
        unsigned port = 0;

        if (ss->ss_family == AF_INET) {
                const struct sockaddr_in *s4 = (const struct sockaddr_in *) ss;
                inet_ntop(AF_INET, &s4->sin_addr, a, sizeof a);
                port = ntohs(s4->sin_port);
        } else if (ss->ss_family == AF_INET6) {
                const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *) ss;
                inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof a);
                port = ntohs(s6->sin6_port);
        }
        snprintf(buf, size, "%s:%u", a, port);
}

static void *accept_thread(void *userdata) {
        ClusterListener *g = userdata;

        log_set_context(NULL, "cluster");
        for (;;) {
                struct pollfd p[2] = { { .fd = g->listen_fd, .events = POLLIN }, { .fd = g->stop_pipe[0], .events = POLLIN } };
                struct sockaddr_storage ss;
                socklen_t len = sizeof ss;
                pthread_attr_t attr;
                pthread_t t;
                Conn *c;
                int fd;

                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (p[1].revents)
                        break;
                fd = accept4(g->listen_fd, (struct sockaddr *) &ss, &len, SOCK_CLOEXEC);
                if (fd < 0)
                        continue;
                /* a reply's second write must not wait for the ACK of its first (~40 ms) */
                (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int) { 1 }, sizeof(int));
                if (atomic_fetch_add(&g->connections, 1) >= LISTENER_CONNECTIONS_MAX) {
                        atomic_fetch_sub(&g->connections, 1);
                        safe_close(fd);
                        continue;
                }
                c = new0(Conn, 1);
                if (!c) {
                        atomic_fetch_sub(&g->connections, 1);
                        safe_close(fd);
                        continue;
                }
                *c = (Conn){ .g = g, .fd = fd, .worker_fd = -EBADF };
                peer_name(&ss, c->peer, sizeof c->peer);
                pthread_attr_init(&attr);
                pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                if (pthread_create(&t, &attr, conn_thread, c) != 0) {
                        atomic_fetch_sub(&g->connections, 1);
                        safe_close(fd);
                        free(c);
                }
                pthread_attr_destroy(&attr);
        }
        return NULL;
}

int cluster_listener_start(const Config *config, const char *token, ClusterListener **ret) {
        _cleanup_free_ ClusterListener *g = NULL;
        int r;

        g = new0(ClusterListener, 1);
        if (!g)
                return -ENOMEM;
        g->config = config;
        g->listen_fd = -EBADF;
        g->stop_pipe[0] = g->stop_pipe[1] = -EBADF;
        r = worker_socket_path(config, g->worker_sock, sizeof g->worker_sock);
        if (r >= 0)
                r = worker_agent_dir(config, g->agent_dir, sizeof g->agent_dir);
        if (r < 0)
                return r;
        g->token = strdup(token);
        if (!g->token)
                return -ENOMEM;
        r = net_listen(config->worker_listen, 256, &g->listen_fd);
        if (r < 0) {
                cluster_token_free(g->token);
                return log_error_errno(r, "Cannot listen on %s: %m", config->worker_listen);
        }
        if (pipe2(g->stop_pipe, O_CLOEXEC) < 0 || pthread_create(&g->thread, NULL, accept_thread, g) != 0) {
                r = -errno ?: -EAGAIN;
                safe_close(g->listen_fd);
                safe_close(g->stop_pipe[0]);
                safe_close(g->stop_pipe[1]);
                cluster_token_free(g->token);
                return r;
        }
        g->thread_started = true;
        *ret = TAKE_PTR(g);
        return 0;
}

/* A listener freed while connection threads still ran (see below); volatile:
 * the store is kept although nothing reads it. */
static ClusterListener *volatile listener_in_use;

ClusterListener *cluster_listener_free(ClusterListener *g) {
        if (!g)
                return NULL;
        if (g->thread_started) {
                (void) !write(g->stop_pipe[1], "x", 1);
                pthread_join(g->thread, NULL);
        }
        safe_close(g->listen_fd);
        safe_close(g->stop_pipe[0]);
        safe_close(g->stop_pipe[1]);
        /* connection threads are detached and end with their peers: while one
         * runs it still uses g (the process exits right after this), so g
         * stays where those threads find it, not lost */
        if (atomic_load(&g->connections) > 0) {
                listener_in_use = g;
                return NULL;
        }
        cluster_token_free(g->token);
        free(g);
        return NULL;
}
