/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "gateway-client.h"
#include "log.h"
#include "str-util.h"

#define GATEWAY_CLIENT_LINE_MAX (256U * 1024U)

/* A reply that arrived while another one was awaited. */
typedef struct GatewayReply {
        int64_t seq;
        JsonValue *v;
} GatewayReply;

struct GatewayClient {
        int fd;
        pid_t pid;
        int64_t seq;
        char *buf;
        size_t n;
        GatewayEventFn on_event;
        void *userdata;
        char **queued; /* event lines read while waiting for a reply */
        GatewayReply replies[GATEWAY_CLIENT_PENDING_MAX];
        size_t n_replies;
};

int gateway_client_new(int fd, pid_t pid, GatewayEventFn on_event, void *userdata, GatewayClient **ret) {
        GatewayClient *g = calloc(1, sizeof *g);
        if (!g)
                return -ENOMEM;
        g->buf = malloc(GATEWAY_CLIENT_LINE_MAX);
        if (!g->buf) {
                free(g);
                return -ENOMEM;
        }
        g->fd = fd;
        g->pid = pid;
        g->on_event = on_event;
        g->userdata = userdata;
        (void) fd_nonblock(fd, true);
        *ret = g;
        return 0;
}

int gateway_client_start(const GatewayConfig *config, GatewayEventFn on_event, void *userdata, GatewayClient **ret) {
        int sp[2];
        pid_t pid, parent = getpid();
        int r;

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
                return -errno;
        pid = fork();
        if (pid < 0) {
                r = -errno;
                safe_close(sp[0]);
                safe_close(sp[1]);
                return r;
        }
        if (pid == 0) {
                /* the child: only stdio and the control socket (as fd 3) stay */
                if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
                        _exit(1);
                if (dup2(sp[1], 3) < 0)
                        _exit(1);
                if (syscall(SYS_close_range, 4U, ~0U, 0U) < 0)
                        for (int fd = 4; fd < 4096; fd++)
                                (void) close(fd);
                (void) signal(SIGTERM, SIG_DFL);
                (void) signal(SIGINT, SIG_IGN);
                sigset_t all;
                sigemptyset(&all);
                (void) sigprocmask(SIG_SETMASK, &all, NULL);
                r = gateway_main(config, 3);
                _exit(r < 0 ? 1 : 0);
        }
        safe_close(sp[1]);
        r = gateway_client_new(sp[0], pid, on_event, userdata, ret);
        if (r < 0) {
                safe_close(sp[0]);
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
        }
        return r;
}

GatewayClient *gateway_client_free(GatewayClient *g) {
        if (!g)
                return NULL;
        g->fd = safe_close(g->fd);
        if (g->pid > 0) {
                /* it exits on EOF; a bounded wait, then SIGKILL */
                for (int i = 0; i < 200; i++) {
                        if (waitpid(g->pid, NULL, WNOHANG) == g->pid) {
                                g->pid = 0;
                                break;
                        }
                        usleep(10000);
                }
                if (g->pid > 0) {
                        (void) kill(g->pid, SIGKILL);
                        (void) waitpid(g->pid, NULL, 0);
                }
        }
        strv_free(g->queued);
        for (size_t i = 0; i < g->n_replies; i++)
                json_free(g->replies[i].v);
        free(g->buf);
        free(g);
        return NULL;
}

int gateway_client_fd(GatewayClient *g) {
        return g->fd;
}

pid_t gateway_client_pid(GatewayClient *g) {
        return g->pid;
}

static void deliver(GatewayClient *g, const char *line, size_t n) {
        _cleanup_json_ JsonValue *v = NULL;
        _cleanup_free_ char *data = NULL;
        const JsonValue *d;
        if (json_parse(line, n, &v, NULL, 0) < 0 || !json_get(v, "event"))
                return;
        d = json_get(v, "data");
        if (d)
                (void) json_serialize(d, &data, NULL);
        if (g->on_event)
                g->on_event(g->userdata, json_string(json_get(v, "event")), json_string(json_get(v, "sandbox")),
                            json_string(json_get(v, "tenant")), json_string(json_get(v, "reason")), data);
}

/* Keeps a reply nobody waits for yet (a request sent ahead, see
 * gateway_client_send_register()); the oldest goes when all slots are taken. */
static void keep_reply(GatewayClient *g, int64_t seq, JsonValue *v) {
        if (g->n_replies == GATEWAY_CLIENT_PENDING_MAX) {
                json_free(g->replies[0].v);
                memmove(g->replies, g->replies + 1, (GATEWAY_CLIENT_PENDING_MAX - 1) * sizeof g->replies[0]);
                g->n_replies--;
        }
        g->replies[g->n_replies++] = (GatewayReply){ .seq = seq, .v = v };
}

static JsonValue *take_reply(GatewayClient *g, int64_t seq) {
        for (size_t i = 0; i < g->n_replies; i++)
                if (g->replies[i].seq == seq) {
                        JsonValue *v = g->replies[i].v;
                        memmove(g->replies + i, g->replies + i + 1, (g->n_replies - i - 1) * sizeof g->replies[0]);
                        g->n_replies--;
                        return v;
                }
        return NULL;
}

/* Reads lines; event lines are queued, the reply with want_seq is returned
 * in *ret, replies to other requests are kept for their waiters. */
static int read_lines(GatewayClient *g, int64_t want_seq, JsonValue **ret) {
        for (;;) {
                char *nl;
                while ((nl = memchr(g->buf, '\n', g->n))) {
                        size_t len = (size_t) (nl - g->buf);
                        JsonValue *v = NULL;
                        int64_t seq;
                        if (json_parse(g->buf, len, &v, NULL, 0) >= 0 && !json_get(v, "event") &&
                            json_int64(json_get(v, "seq"), &seq) >= 0 && seq >= 0) {
                                memmove(g->buf, nl + 1, g->n - len - 1);
                                g->n -= len + 1;
                                if (seq == 0) { /* a request nobody waits for (its failure came as an event) */
                                        json_free(v);
                                        continue;
                                }
                                if (seq == want_seq) {
                                        *ret = v;
                                        return 1;
                                }
                                keep_reply(g, seq, v);
                                continue;
                        }
                        json_free(v);
                        if (strv_push(&g->queued, memdup_suffix0(g->buf, len)) < 0)
                                return -ENOMEM;
                        memmove(g->buf, nl + 1, g->n - len - 1);
                        g->n -= len + 1;
                }
                if (g->n == GATEWAY_CLIENT_LINE_MAX)
                        return -EBADMSG;
                ssize_t k = read(g->fd, g->buf + g->n, GATEWAY_CLIENT_LINE_MAX - g->n);
                if (k < 0)
                        return errno == EAGAIN || errno == EINTR ? 0 : -errno;
                if (k == 0)
                        return -ECONNRESET;
                g->n += (size_t) k;
        }
}

bool gateway_client_has_queued(GatewayClient *g) {
        return g && g->queued && g->queued[0];
}

int gateway_client_dispatch(GatewayClient *g) {
        JsonValue *unused = NULL;
        int r = read_lines(g, 0, &unused);
        char **q = TAKE_PTR(g->queued);
        for (size_t i = 0; q && q[i]; i++)
                deliver(g, q[i], strlen(q[i]));
        strv_free(q);
        return r < 0 ? r : 0;
}

/* Sends the request in w (its seq is g->seq) without waiting for the reply. */
static int send_request(GatewayClient *g, JsonWriter *w) {
        _cleanup_free_ char *line = NULL;
        size_t n, off = 0;
        int r;

        r = json_w_finish(w, &line, &n);
        if (r < 0)
                return r;
        line[n] = '\n';
        /* lines are small; the socket buffer takes them (blocking briefly if not) */
        while (off < n + 1) {
                ssize_t k = write(g->fd, line + off, n + 1 - off);
                if (k < 0 && errno == EAGAIN) {
                        struct pollfd p = { .fd = g->fd, .events = POLLOUT };
                        if (poll(&p, 1, GATEWAY_CLIENT_REPLY_TIMEOUT_MSEC) <= 0)
                                return -ETIMEDOUT;
                        continue;
                }
                if (k < 0)
                        return -errno;
                off += (size_t) k;
        }
        explicit_bzero(line, n + 1); /* it may have held a CA key */
        return 0;
}

/* The reply to seq; *ret_reply (if given) gets it on success. */
static int wait_reply(GatewayClient *g, int64_t seq, char *errbuf, size_t errbuf_size, JsonValue **ret_reply) {
        _cleanup_json_ JsonValue *reply = take_reply(g, seq);
        bool ok = false;
        int r;

        if (seq <= 0 || seq > g->seq)
                return -EINVAL;
        while (!reply) {
                r = read_lines(g, seq, &reply);
                if (r < 0)
                        return r;
                if (r > 0)
                        break;
                struct pollfd p = { .fd = g->fd, .events = POLLIN };
                r = poll(&p, 1, GATEWAY_CLIENT_REPLY_TIMEOUT_MSEC);
                if (r == 0)
                        return -ETIMEDOUT;
                if (r < 0 && errno != EINTR)
                        return -errno;
        }
        (void) json_bool(json_get(reply, "ok"), &ok);
        if (ok) {
                if (ret_reply)
                        *ret_reply = TAKE_PTR(reply);
                return 0;
        }
        int64_t e = EIO;
        (void) json_int64(json_get(reply, "errno"), &e);
        if (errbuf && errbuf_size)
                snprintf(errbuf, errbuf_size, "%s", strempty(json_string(json_get(reply, "error"))));
        return e > 0 && e < 4096 ? -(int) e : -EIO;
}

int gateway_client_wait(GatewayClient *g, int64_t seq, char *errbuf, size_t errbuf_size) {
        return wait_reply(g, seq, errbuf, errbuf_size, NULL);
}

static int request(GatewayClient *g, JsonWriter *w, char *errbuf, size_t errbuf_size) {
        int r = send_request(g, w);
        if (r < 0)
                return r;
        return gateway_client_wait(g, g->seq, errbuf, errbuf_size);
}

static int with_policy(JsonWriter *w, const char *policy_json) {
        if (!policy_json)
                return 0;
        _cleanup_json_ JsonValue *v = NULL;
        if (json_parse(policy_json, strlen(policy_json), &v, NULL, 0) < 0)
                return -EINVAL;
        json_w_key(w, "policy");
        json_w_raw(w, policy_json);
        return 0;
}

static int send_register(GatewayClient *g, const char *id, const char *tenant, struct in_addr sandbox_ip,
                         struct in_addr host_ip, const char *policy_json, bool replace, int64_t *ret_seq) {
        char a[INET_ADDRSTRLEN], b[INET_ADDRSTRLEN];
        int64_t seq = ret_seq ? g->seq + 1 : 0; /* 0: never awaited */
        JsonWriter w;
        int r;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_int(&w, "seq", seq);
        json_w_kv_string(&w, "op", "register");
        if (replace)
                json_w_kv_bool(&w, "replace", true);
        json_w_kv_string(&w, "id", id);
        json_w_kv_string(&w, "tenant", tenant);
        json_w_kv_string(&w, "sandbox_ip", inet_ntop(AF_INET, &sandbox_ip, a, sizeof a));
        json_w_kv_string(&w, "host_ip", inet_ntop(AF_INET, &host_ip, b, sizeof b));
        if (with_policy(&w, policy_json) < 0) {
                json_w_done(&w);
                return -EINVAL;
        }
        json_w_object_end(&w);
        r = send_request(g, &w);
        if (r < 0)
                return r;
        if (seq > 0)
                g->seq = seq;
        if (ret_seq)
                *ret_seq = seq;
        return 0;
}

int gateway_client_send_register(GatewayClient *g, const char *id, const char *tenant, struct in_addr sandbox_ip,
                                 struct in_addr host_ip, const char *policy_json, int64_t *ret_seq) {
        return send_register(g, id, tenant, sandbox_ip, host_ip, policy_json, false, ret_seq);
}

int gateway_client_send_replace(GatewayClient *g, const char *id, const char *tenant, struct in_addr sandbox_ip,
                                struct in_addr host_ip, const char *policy_json) {
        return send_register(g, id, tenant, sandbox_ip, host_ip, policy_json, true, NULL);
}

int gateway_client_send_register_again(GatewayClient *g, const char *id, const char *tenant,
                                       struct in_addr sandbox_ip, struct in_addr host_ip, const char *policy_json,
                                       int64_t *ret_seq) {
        return send_register(g, id, tenant, sandbox_ip, host_ip, policy_json, true, ret_seq);
}

int gateway_client_register(GatewayClient *g, const char *id, const char *tenant, struct in_addr sandbox_ip,
                            struct in_addr host_ip, const char *policy_json, char *errbuf, size_t errbuf_size) {
        int64_t seq;
        int r = gateway_client_send_register(g, id, tenant, sandbox_ip, host_ip, policy_json, &seq);
        if (r < 0)
                return r;
        return gateway_client_wait(g, seq, errbuf, errbuf_size);
}

int gateway_client_set_policy(GatewayClient *g, const char *id, const char *policy_json, char *errbuf, size_t errbuf_size) {
        JsonWriter w;
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_int(&w, "seq", ++g->seq);
        json_w_kv_string(&w, "op", "policy");
        json_w_kv_string(&w, "id", id);
        if (with_policy(&w, policy_json) < 0) {
                json_w_done(&w);
                return -EINVAL;
        }
        json_w_object_end(&w);
        return request(g, &w, errbuf, errbuf_size);
}

int gateway_client_unregister(GatewayClient *g, const char *id) {
        JsonWriter w;
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_int(&w, "seq", ++g->seq);
        json_w_kv_string(&w, "op", "unregister");
        json_w_kv_string(&w, "id", id);
        json_w_object_end(&w);
        return request(g, &w, NULL, 0);
}

int gateway_client_set_credentials(GatewayClient *g, const char *id, const char *ca_cert_pem, const char *ca_key_pem,
                                   const GatewayCred *creds, size_t n, char *errbuf, size_t errbuf_size) {
        JsonWriter w;
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_int(&w, "seq", ++g->seq);
        json_w_kv_string(&w, "op", "credentials");
        json_w_kv_string(&w, "id", id);
        if (ca_cert_pem && ca_key_pem) {
                json_w_kv_string(&w, "ca_cert", ca_cert_pem);
                json_w_kv_string(&w, "ca_key", ca_key_pem);
        }
        json_w_key(&w, "creds");
        json_w_array_begin(&w);
        for (size_t i = 0; i < n; i++) {
                const GatewayCred *c = &creds[i];
                _cleanup_json_ JsonValue *hosts = NULL;
                if (!c->hosts_json || json_parse(c->hosts_json, strlen(c->hosts_json), &hosts, NULL, 0) < 0) {
                        json_w_done(&w);
                        return -EINVAL;
                }
                json_w_object_begin(&w);
                json_w_kv_string(&w, "id", c->id);
                json_w_kv_string(&w, "tenant", c->tenant);
                json_w_kv_string(&w, "name", c->name);
                json_w_key(&w, "hosts");
                json_w_raw(&w, c->hosts_json);
                json_w_kv_string(&w, "apply", c->apply);
                if (c->header_name)
                        json_w_kv_string(&w, "header_name", c->header_name);
                if (c->header_format)
                        json_w_kv_string(&w, "header_format", c->header_format);
                if (c->basic_user)
                        json_w_kv_string(&w, "basic_user", c->basic_user);
                json_w_kv_string(&w, "ciphertext", c->ciphertext);
                json_w_kv_string(&w, "nonce", c->nonce);
                json_w_kv_string(&w, "key_id", c->key_id);
                json_w_kv_int(&w, "expires_usec", c->expires_usec);
                json_w_kv_int(&w, "revoked_usec", c->revoked_usec);
                json_w_object_end(&w);
        }
        json_w_array_end(&w);
        json_w_object_end(&w);
        return request(g, &w, errbuf, errbuf_size);
}

int gateway_client_host_addr_stats(GatewayClient *g, GatewayHostAddrStats *ret) {
        _cleanup_json_ JsonValue *reply = NULL;
        const JsonValue *h;
        JsonWriter w;
        int64_t v;
        int r;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_int(&w, "seq", ++g->seq);
        json_w_kv_string(&w, "op", "stats");
        json_w_object_end(&w);
        r = send_request(g, &w);
        if (r < 0)
                return r;
        r = wait_reply(g, g->seq, NULL, 0, &reply);
        if (r < 0)
                return r;
        h = json_get(reply, "host_addrs");
        if (!h)
                return -EBADMSG;
        *ret = (GatewayHostAddrStats){};
        (void) json_bool(json_get(h, "complete"), &ret->complete);
        static const struct {
                const char *key;
                size_t offset;
        } fields[] = {
                { "count", offsetof(GatewayHostAddrStats, count) },
                { "bytes", offsetof(GatewayHostAddrStats, bytes) },
                { "events", offsetof(GatewayHostAddrStats, events) },
                { "dumps", offsetof(GatewayHostAddrStats, dumps) },
                { "redumps", offsetof(GatewayHostAddrStats, redumps) },
                { "overruns", offsetof(GatewayHostAddrStats, overruns) },
                { "errors", offsetof(GatewayHostAddrStats, errors) },
                { "reopens", offsetof(GatewayHostAddrStats, reopens) },
                { "drift", offsetof(GatewayHostAddrStats, drift) },
                { "denied_unknown", offsetof(GatewayHostAddrStats, denied_unknown) },
        };
        for (size_t i = 0; i < ELEMENTSOF(fields); i++)
                if (json_int64(json_get(h, fields[i].key), &v) >= 0 && v >= 0)
                        *(uint64_t *) (void *) ((uint8_t *) ret + fields[i].offset) = (uint64_t) v;
        return 0;
}
