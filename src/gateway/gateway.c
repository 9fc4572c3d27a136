/* SPDX-License-Identifier: MIT */
/* The gateway process: the event loop, the control socket, the sandbox table,
 * per-sandbox listeners and rate-limited decision events. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <grp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "gateway-internal.h"
#include "log.h"
#include "str-util.h"
#include "time-util.h"

#define GW_TICK_MSEC 500
#define GW_EVENT_BURST_FACTOR 10.0
#define GW_DNS_BURST_FACTOR 2.0
#define GW_FDS_WANTED (2U * GW_CONNS_MAX + 4U * GW_SANDBOXES_MAX + 1024U)

uint64_t gw_now_usec(void) {
        return (uint64_t) mono_usec();
}

bool gw_bucket_take(GwBucket *b, double per_sec, double burst) {
        uint64_t now = gw_now_usec();
        if (b->last_usec == 0)
                b->tokens = burst;
        else
                b->tokens = fmin(burst, b->tokens + (double) (now - b->last_usec) * per_sec / 1e6);
        b->last_usec = now;
        if (b->tokens < 1.0)
                return false;
        b->tokens -= 1.0;
        return true;
}

int gw_epoll_add(Gateway *gw, GwIo *io, uint32_t events) {
        struct epoll_event ev = { .events = events, .data.ptr = io };
        if (epoll_ctl(gw->epoll_fd, EPOLL_CTL_ADD, io->fd, &ev) < 0)
                return -errno;
        io->events = events;
        return 0;
}

int gw_epoll_mod(Gateway *gw, GwIo *io, uint32_t events) {
        struct epoll_event ev = { .events = events, .data.ptr = io };
        if (io->events == events) /* level-triggered: nothing to change (two syscalls per relayed chunk saved) */
                return 0;
        if (epoll_ctl(gw->epoll_fd, EPOLL_CTL_MOD, io->fd, &ev) < 0)
                return -errno;
        io->events = events;
        return 0;
}

void gw_epoll_del(Gateway *gw, GwIo *io) {
        if (io->fd >= 0)
                (void) epoll_ctl(gw->epoll_fd, EPOLL_CTL_DEL, io->fd, NULL);
}

void gw_io_close(Gateway *gw, GwIo *io) {
        /* the rest of the batch being handled must not reach io: it may be freed next */
        for (int i = 0; i < gw->batch_n; i++)
                if (gw->batch[i].data.ptr == io)
                        gw->batch[i].data.ptr = NULL;
        gw_epoll_del(gw, io);
        io->fd = safe_close(io->fd);
}

int gateway_parse_upstream(const char *s, struct sockaddr_in *ret) {
        char host[INET_ADDRSTRLEN];
        const char *colon = strchr(s, ':');
        size_t hl = colon ? (size_t) (colon - s) : strlen(s);
        unsigned port = 53;
        struct sockaddr_in sa = { .sin_family = AF_INET };

        if (hl == 0 || hl >= sizeof host)
                return -EINVAL;
        memcpy(host, s, hl);
        host[hl] = 0;
        if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
                return -EINVAL;
        if (colon && (safe_atou(colon + 1, &port) < 0 || port == 0 || port > 65535))
                return -EINVAL;
        sa.sin_port = htons((uint16_t) port);
        *ret = sa;
        return 0;
}

int gateway_config_default(GatewayConfig *ret) {
        GatewayConfig c = {
                .dns_port = GATEWAY_DNS_PORT_DEFAULT,
                .proxy_port = GATEWAY_PROXY_PORT_DEFAULT,
                .transparent_port = GATEWAY_TRANSPARENT_PORT_DEFAULT,
                .udp_port = GATEWAY_UDP_PORT_DEFAULT,
                .conns_per_sandbox = 256,
                .dns_per_sec = 100,
                .events_per_sec = 20,
                .handshake_timeout_sec = 10,
                .idle_timeout_sec = 600,
                .run_as_uid = GATEWAY_RUN_AS_DEFAULT,
                .run_as_gid = GATEWAY_RUN_AS_DEFAULT,
        };
        _cleanup_free_ char *rc = NULL;
        (void) gateway_parse_upstream("127.0.0.1:53", &c.upstream_dns);
        if (read_full_file("/etc/resolv.conf", 64 * 1024, &rc, NULL) >= 0) {
                char *save = NULL;
                for (char *l = strtok_r(rc, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                        const char *v = startswith(l, "nameserver");
                        struct sockaddr_in sa;
                        if (!v || (*v != ' ' && *v != '\t'))
                                continue;
                        v += strspn(v, " \t");
                        char addr[INET_ADDRSTRLEN] = "";
                        size_t al = strcspn(v, " \t#");
                        if (al == 0 || al >= sizeof addr)
                                continue;
                        memcpy(addr, v, al);
                        if (gateway_parse_upstream(addr, &sa) >= 0) {
                                c.upstream_dns = sa;
                                break;
                        }
                }
        }
        *ret = c;
        return 0;
}

GwSandbox *gw_sandbox_find(Gateway *gw, const char *id) {
        for (size_t i = 0; i < gw->n_sandboxes; i++)
                if (streq(gw->sandboxes[i]->id, id))
                        return gw->sandboxes[i];
        return NULL;
}

static GwSandbox *sandbox_by_ip(Gateway *gw, struct in_addr a, bool host_end) {
        for (size_t i = 0; i < gw->n_sandboxes; i++)
                if ((host_end ? gw->sandboxes[i]->host.s_addr : gw->sandboxes[i]->ip.s_addr) == a.s_addr)
                        return gw->sandboxes[i];
        return NULL;
}

static void control_write(Gateway *gw, const char *line, size_t n) {
        if (gw->control.fd < 0)
                return;
        if (gw->out_n + n + 1 > GW_CONTROL_LINE_MAX * 16) {
                log_warning("gateway: control output backlog full, dropping a line");
                return;
        }
        if (greedy_realloc((void **) &gw->out_buf, &gw->out_allocated, gw->out_n + n + 1, 1) < 0)
                return;
        memcpy(gw->out_buf + gw->out_n, line, n);
        gw->out_buf[gw->out_n + n] = '\n';
        gw->out_n += n + 1;
        /* try at once; the rest on EPOLLOUT */
        ssize_t k = write(gw->control.fd, gw->out_buf, gw->out_n);
        if (k > 0) {
                memmove(gw->out_buf, gw->out_buf + k, gw->out_n - (size_t) k);
                gw->out_n -= (size_t) k;
        }
        (void) gw_epoll_mod(gw, &gw->control, EPOLLIN | (gw->out_n ? EPOLLOUT : 0));
}

void gw_control_writer(Gateway *gw, JsonWriter *w) {
        _cleanup_free_ char *s = NULL;
        size_t n;
        if (json_w_finish(w, &s, &n) >= 0)
                control_write(gw, s, n);
}

void gw_event(Gateway *gw, GwSandbox *sb, bool allow, const char *kind, const char *host, const struct in_addr *addr,
              uint16_t port, const char *why) {
        char reason[GW_EVENT_REASON_MAX], ip[INET_ADDRSTRLEN] = "";
        JsonWriter w;

        if (!gw_bucket_take(&sb->event_bucket, gw->config->events_per_sec,
                            gw->config->events_per_sec * GW_EVENT_BURST_FACTOR)) {
                sb->events_dropped++;
                return;
        }
        if (addr)
                inet_ntop(AF_INET, addr, ip, sizeof ip);
        /* "denied http example.com:80: no rule allows it" */
        if (port)
                snprintf(reason, sizeof reason, "%s %s %s:%u: %s", allow ? "allowed" : "denied", kind, host ? host : ip,
                         port, why);
        else
                snprintf(reason, sizeof reason, "%s %s %s: %s", allow ? "allowed" : "denied", kind, host ? host : ip, why);
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "event", allow ? "network.allow" : "network.deny");
        json_w_kv_string(&w, "sandbox", sb->id);
        json_w_kv_string(&w, "tenant", sb->tenant);
        json_w_kv_string(&w, "reason", reason);
        json_w_key(&w, "data");
        json_w_object_begin(&w);
        json_w_kv_string(&w, "verdict", allow ? "allow" : "deny");
        json_w_kv_string(&w, "kind", kind);
        if (host)
                json_w_kv_string(&w, "host", host);
        if (addr)
                json_w_kv_string(&w, "ip", ip);
        if (port)
                json_w_kv_int(&w, "port", port);
        json_w_kv_string(&w, "why", why);
        json_w_object_end(&w);
        json_w_object_end(&w);
        gw_control_writer(gw, &w);
}

static void events_dropped_flush(Gateway *gw, GwSandbox *sb) {
        char reason[128];
        JsonWriter w;
        if (sb->events_dropped == 0)
                return;
        if (!gw_bucket_take(&sb->event_bucket, gw->config->events_per_sec,
                            gw->config->events_per_sec * GW_EVENT_BURST_FACTOR))
                return;
        snprintf(reason, sizeof reason, "%" PRIu64 " network decision events not recorded (rate limit)", sb->events_dropped);
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "event", "network.dropped");
        json_w_kv_string(&w, "sandbox", sb->id);
        json_w_kv_string(&w, "tenant", sb->tenant);
        json_w_kv_string(&w, "reason", reason);
        json_w_key(&w, "data");
        json_w_object_begin(&w);
        json_w_key(&w, "dropped");
        json_w_uint(&w, sb->events_dropped);
        json_w_object_end(&w);
        json_w_object_end(&w);
        gw_control_writer(gw, &w);
        sb->events_dropped = 0;
}

static int listen_on(Gateway *gw, GwIo *io, struct in_addr host, uint16_t port, int type, GwIoFn fn) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = host, .sin_port = htons(port) };
        int one = 1;

        fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        /* the host end may be configured just after registration */
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
            setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof one) < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0)
                return -errno;
        if (type == SOCK_STREAM && listen(fd, 128) < 0)
                return -errno;
        io->fd = TAKE_FD(fd);
        io->fn = fn;
        int r = gw_epoll_add(gw, io, EPOLLIN);
        if (r < 0)
                io->fd = safe_close(io->fd);
        return r;
}

static void sandbox_free(Gateway *gw, GwSandbox *sb) {
        if (!sb)
                return;
        gw_sandbox_drop_conns(gw, sb);
        gw_io_close(gw, &sb->dns_udp);
        gw_io_close(gw, &sb->dns_tcp);
        gw_io_close(gw, &sb->proxy);
        gw_io_close(gw, &sb->transparent);
        gw_udp_close(gw, sb);
        egress_policy_free(sb->policy);
        gw_sandbox_cred_done(sb);
        free(sb->memory);
        free(sb);
}

static int policy_of(const JsonValue *req, EgressPolicy **ret, char *err, size_t errsize) {
        const JsonValue *p = json_get(req, "policy");
        if (!p || json_is_null(p))
                return egress_policy_new_empty(ret);
        return egress_policy_from_json(p, ret, err, errsize);
}

static void sandbox_remove(Gateway *gw, GwSandbox *sb) {
        for (size_t i = 0; i < gw->n_sandboxes; i++)
                if (gw->sandboxes[i] == sb) {
                        gw->sandboxes[i] = gw->sandboxes[--gw->n_sandboxes];
                        break;
                }
        sandbox_free(gw, sb);
}

/* A registered sandbox becomes another tenant's, with another policy, as if
 * registered afresh but on the listeners it has (a connection queued on them
 * is decided under the new registration): what the gateway kept for it goes
 * (connections, lookups, UDP flows, the names its DNS gave it, credentials,
 * counters). A failure removes the registration: nothing of the sandbox is
 * decided under the old one, ever (fail closed: nothing listens for it). */
static int sandbox_replace(Gateway *gw, GwSandbox *sb, const char *tenant, const JsonValue *req, char *err,
                           size_t errsize) {
        EgressPolicy *p = NULL;
        int r = policy_of(req, &p, err, errsize);
        if (r < 0) {
                log_warning("gateway: sandbox %s: the new registration failed (%s); it is removed", sb->id, err);
                sandbox_remove(gw, sb);
                return r;
        }
        gw_sandbox_drop_conns(gw, sb);
        gw_udp_drop_flows(gw, sb);
        gw_sandbox_cred_done(sb);
        sb->memory = mfree(sb->memory);
        sb->n_memory = 0;
        sb->dns_bucket = sb->event_bucket = sb->cred_bucket = (GwBucket){};
        sb->events_dropped = sb->cred_uses_dropped = 0;
        egress_policy_free(sb->policy);
        sb->policy = p;
        (void) strscpy(sb->tenant, sizeof sb->tenant, tenant);
        log_debug("gateway: sandbox %s registered again (tenant %s)", sb->id, tenant);
        return 0;
}

static int op_register(Gateway *gw, const JsonValue *req, char *err, size_t errsize) {
        const char *id = json_string(json_get(req, "id")), *tenant = json_string(json_get(req, "tenant"));
        const char *ip = json_string(json_get(req, "sandbox_ip")), *host = json_string(json_get(req, "host_ip"));
        bool replace = false;
        GwSandbox *sb;
        int r;

        if (!id || !tenant || !ip || !host || strlen(id) >= GW_ID_MAX || strlen(tenant) >= GW_ID_MAX || !id[0]) {
                snprintf(err, errsize, "register needs id, tenant, sandbox_ip, host_ip");
                return -EINVAL;
        }
        (void) json_bool(json_get(req, "replace"), &replace);
        sb = gw_sandbox_find(gw, id);
        if (sb && replace) {
                struct in_addr a, b;
                if (inet_pton(AF_INET, ip, &a) == 1 && inet_pton(AF_INET, host, &b) == 1 &&
                    a.s_addr == sb->ip.s_addr && b.s_addr == sb->host.s_addr)
                        return sandbox_replace(gw, sb, tenant, req, err, errsize);
                sandbox_remove(gw, sb); /* other addresses: registered afresh below */
        } else if (sb) {
                snprintf(err, errsize, "sandbox %s is already registered", id);
                return -EEXIST;
        }
        if (gw->n_sandboxes >= GW_SANDBOXES_MAX) {
                snprintf(err, errsize, "too many sandboxes");
                return -E2BIG;
        }
        sb = calloc(1, sizeof *sb);
        if (!sb)
                return -ENOMEM;
        sb->dns_udp.fd = sb->dns_tcp.fd = sb->proxy.fd = sb->transparent.fd = -EBADF;
        for (unsigned i = 0; i < GATEWAY_UDP_PORTS; i++)
                sb->udp[i].io.fd = -EBADF;
        (void) strscpy(sb->id, sizeof sb->id, id);
        (void) strscpy(sb->tenant, sizeof sb->tenant, tenant);
        if (inet_pton(AF_INET, ip, &sb->ip) != 1 || inet_pton(AF_INET, host, &sb->host) != 1) {
                snprintf(err, errsize, "sandbox_ip and host_ip must be IPv4 addresses");
                sandbox_free(gw, sb);
                return -EINVAL;
        }
        if (sandbox_by_ip(gw, sb->ip, false) || sandbox_by_ip(gw, sb->host, true)) {
                snprintf(err, errsize, "address already used by another sandbox");
                sandbox_free(gw, sb);
                return -EEXIST;
        }
        r = policy_of(req, &sb->policy, err, errsize);
        if (r < 0) {
                sandbox_free(gw, sb);
                return r;
        }
        const GatewayConfig *c = gw->config;
        if ((r = listen_on(gw, &sb->dns_udp, sb->host, c->dns_port, SOCK_DGRAM, gw_dns_udp_event)) < 0 ||
            (r = listen_on(gw, &sb->dns_tcp, sb->host, c->dns_port, SOCK_STREAM, gw_listener_event)) < 0 ||
            (r = listen_on(gw, &sb->proxy, sb->host, c->proxy_port, SOCK_STREAM, gw_listener_event)) < 0 ||
            (r = listen_on(gw, &sb->transparent, sb->host, c->transparent_port, SOCK_STREAM, gw_listener_event)) < 0 ||
            (r = gw_udp_listen(gw, sb)) < 0) {
                snprintf(err, errsize, "cannot listen on %s: %s", host, strerror(-r));
                sandbox_free(gw, sb);
                return r;
        }
        GwSandbox **n = realloc(gw->sandboxes, (gw->n_sandboxes + 1) * sizeof *n);
        if (!n) {
                sandbox_free(gw, sb);
                return -ENOMEM;
        }
        gw->sandboxes = n;
        gw->sandboxes[gw->n_sandboxes++] = sb;
        log_debug("gateway: sandbox %s registered on %s", id, host);
        return 0;
}

static int op_policy(Gateway *gw, const JsonValue *req, char *err, size_t errsize) {
        const char *id = json_string(json_get(req, "id"));
        GwSandbox *sb = id ? gw_sandbox_find(gw, id) : NULL;
        EgressPolicy *p = NULL;
        int r;
        if (!sb) {
                snprintf(err, errsize, "no such sandbox");
                return -ENOENT;
        }
        r = policy_of(req, &p, err, errsize);
        if (r < 0)
                return r;
        egress_policy_free(sb->policy);
        sb->policy = p;
        gw_udp_drop_flows(gw, sb); /* decided again on their next datagram */
        gw_policy_recheck(gw, sb); /* what the new policy denies is cut now */
        return 0;
}

static int op_unregister(Gateway *gw, const JsonValue *req, char *err, size_t errsize) {
        const char *id = json_string(json_get(req, "id"));
        GwSandbox *sb = id ? gw_sandbox_find(gw, id) : NULL;
        if (sb) {
                sandbox_remove(gw, sb);
                return 0;
        }
        snprintf(err, errsize, "no such sandbox");
        return -ENOENT;
}

static void control_line(Gateway *gw, const char *line, size_t n) {
        _cleanup_json_ JsonValue *req = NULL;
        char err[EGRESS_POLICY_ERR_MAX + 64] = "";
        const char *op;
        int64_t seq = 0;
        JsonWriter w;
        int r;

        if (json_parse(line, n, &req, err, sizeof err) < 0 || json_type(req) != JSON_OBJECT) {
                log_warning("gateway: bad control line: %s", err);
                return;
        }
        (void) json_int64(json_get(req, "seq"), &seq);
        op = json_string(json_get(req, "op"));
        if (!op)
                r = -EINVAL, snprintf(err, sizeof err, "no op");
        else if (streq(op, "register"))
                r = op_register(gw, req, err, sizeof err);
        else if (streq(op, "policy"))
                r = op_policy(gw, req, err, sizeof err);
        else if (streq(op, "unregister"))
                r = op_unregister(gw, req, err, sizeof err);
        else if (streq(op, "credentials"))
                r = gw_op_credentials(gw, req, err, sizeof err);
        else if (streq(op, "ping") || streq(op, "stats"))
                r = 0;
        else
                r = -EINVAL, snprintf(err, sizeof err, "unknown op");
        if (r < 0 && seq == 0 && op && streq(op, "register")) {
                /* sent ahead and never awaited (a warm sandbox's new owner): its failure is an event */
                const char *id = json_string(json_get(req, "id")), *tenant = json_string(json_get(req, "tenant"));
                char reason[GW_EVENT_REASON_MAX];
                snprintf(reason, sizeof reason, "the gateway could not register the sandbox: %s; it has no egress",
                         err[0] ? err : strerror(-r));
                json_w_init(&w);
                json_w_object_begin(&w);
                json_w_kv_string(&w, "event", "network.error");
                json_w_kv_string(&w, "sandbox", strempty(id));
                json_w_kv_string(&w, "tenant", strempty(tenant));
                json_w_kv_string(&w, "reason", reason);
                json_w_object_end(&w);
                gw_control_writer(gw, &w);
        }
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_int(&w, "seq", seq);
        json_w_kv_bool(&w, "ok", r >= 0);
        if (r >= 0 && streq(op, "stats"))
                gw_host_addrs_write_stats(gw, &w);
        if (r < 0) {
                json_w_kv_string(&w, "error", err[0] ? err : strerror(-r));
                json_w_kv_int(&w, "errno", -r);
        }
        json_w_object_end(&w);
        gw_control_writer(gw, &w);
}

/* Reads and carries out every complete control line there is; returns how
 * many. */
static unsigned control_read(Gateway *gw) {
        unsigned lines = 0;
        for (;;) {
                ssize_t k = read(gw->control.fd, gw->control_buf + gw->control_n, GW_CONTROL_LINE_MAX - gw->control_n);
                if (k < 0) {
                        if (errno != EAGAIN && errno != EINTR)
                                gw->control_eof = true;
                        return lines;
                }
                if (k == 0) {
                        gw->control_eof = true;
                        return lines;
                }
                gw->control_n += (size_t) k;
                char *nl;
                while ((nl = memchr(gw->control_buf, '\n', gw->control_n))) {
                        size_t len = (size_t) (nl - gw->control_buf);
                        control_line(gw, gw->control_buf, len);
                        lines++;
                        memmove(gw->control_buf, nl + 1, gw->control_n - len - 1);
                        gw->control_n -= len + 1;
                }
                if (gw->control_n == GW_CONTROL_LINE_MAX) {
                        log_error("gateway: control line too long");
                        gw->control_eof = true;
                        return lines;
                }
        }
}

static void control_event(Gateway *gw, GwIo *io, uint32_t events) {
        if (events & EPOLLOUT && gw->out_n) {
                ssize_t k = write(io->fd, gw->out_buf, gw->out_n);
                if (k > 0) {
                        memmove(gw->out_buf, gw->out_buf + k, gw->out_n - (size_t) k);
                        gw->out_n -= (size_t) k;
                } else if (k < 0 && errno != EAGAIN && errno != EINTR)
                        gw->control_eof = true;
                (void) gw_epoll_mod(gw, io, EPOLLIN | (gw->out_n ? EPOLLOUT : 0));
        }
        if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                (void) control_read(gw);
}

/* Two fds per connection and four per sandbox: the default soft limit of
 * 1024 would cap the gateway long before GW_CONNS_MAX. Raised while still
 * root (the hard limit too), else up to the hard limit. */
static void raise_fd_limit(void) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return;
        if (geteuid() == 0 && rl.rlim_max < GW_FDS_WANTED) {
                struct rlimit want = { GW_FDS_WANTED, GW_FDS_WANTED };
                if (setrlimit(RLIMIT_NOFILE, &want) == 0)
                        return;
        }
        rl.rlim_cur = rl.rlim_max;
        (void) setrlimit(RLIMIT_NOFILE, &rl);
}

/* The gateway needs no privilege: its listeners are on ports above 1024
 * (IP_FREEBIND needs none), SO_ORIGINAL_DST and outgoing connections neither.
 * So it gives up root before it reads a byte from a sandbox. */
static int drop_privileges(const GatewayConfig *c) {
        if (geteuid() != 0 || c->run_as_uid == 0)
                return 0;
        if (c->dns_port < 1024 || c->proxy_port < 1024 || c->transparent_port < 1024 ||
            (c->udp_port > 0 && c->udp_port < 1024)) {
                log_warning("gateway: a port below 1024 is configured; the gateway keeps running as root");
                return 0;
        }
        if (setgroups(0, NULL) < 0 || setresgid(c->run_as_gid, c->run_as_gid, c->run_as_gid) < 0 ||
            setresuid(c->run_as_uid, c->run_as_uid, c->run_as_uid) < 0)
                return log_error_errno(errno, "gateway: cannot drop privileges: %m");
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return log_error_errno(errno, "gateway: prctl: %m");
        if (geteuid() != c->run_as_uid || setuid(0) == 0) /* really gone */
                return -EPERM;
        return 0;
}

int gateway_main(const GatewayConfig *config, int control_fd) {
        Gateway gw = { .config = config, .epoll_fd = -EBADF, .control = { .fd = control_fd, .fn = control_event } };
        int r;

        (void) signal(SIGPIPE, SIG_IGN);
        (void) prctl(PR_SET_NAME, "space-gateway");
        /* it holds credential values: no core dump, no ptrace by its own uid, no /proc/PID/mem */
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || setrlimit(RLIMIT_CORE, &(struct rlimit){ 0, 0 }) < 0)
                return log_error_errno(errno, "gateway: cannot make the process non-dumpable: %m");
        log_set_prefix("gateway");
        gw.guard.pool_base = config->pool_base;
        gw.guard.pool_prefixlen = config->pool_prefixlen;
        /* the host's addresses (this namespace's: upstream connections leave from here), from netlink */
        r = gw_host_addrs_init(&gw);
        if (r < 0) {
                gw_host_addrs_done(&gw);
                return log_error_errno(r, "gateway: cannot keep the host's addresses: %m");
        }
        raise_fd_limit();
        r = gw_cred_setup(&gw); /* reads master.key and the CA file while still root */
        if (r < 0) {
                gw_host_addrs_done(&gw);
                return r;
        }
        r = drop_privileges(config);
        if (r >= 0)
                r = gw_cred_setup_unprivileged(&gw);
        if (r < 0) {
                gw_cred_done(&gw);
                gw_host_addrs_done(&gw);
                return r;
        }
        gw.control_buf = malloc(GW_CONTROL_LINE_MAX);
        if (!gw.control_buf) {
                r = -ENOMEM;
                goto finish;
        }
        gw.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        if (gw.epoll_fd < 0 || fd_nonblock(control_fd, true) < 0 || gw_epoll_add(&gw, &gw.control, EPOLLIN) < 0) {
                r = -errno;
                goto finish;
        }
        r = gw_host_addrs_watch(&gw);
        if (r < 0)
                goto finish;
        while (!gw.control_eof) {
                struct epoll_event evs[64];
                int n = epoll_wait(gw.epoll_fd, evs, ELEMENTSOF(evs), GW_TICK_MSEC);
                if (n < 0 && errno != EINTR) {
                        r = -errno;
                        goto finish;
                }
                gw.batch = evs;
                gw.batch_n = MAX(n, 0);
                for (int i = 0; i < n; i++) {
                        GwIo *io = evs[i].data.ptr;
                        if (!io)
                                continue; /* closed by an earlier event of this batch */
                        /* What the worker wrote before this event's cause is carried out before
                         * the event (a registration sent ahead, then the sandbox thawed: its first
                         * packet is decided under that registration). Lines may free what the
                         * rest of this batch points to: after any, the batch is dropped and
                         * epoll (level-triggered) reports what is still pending. */
                        if (io != &gw.control && control_read(&gw) > 0)
                                break;
                        if (io->fd >= 0)
                                io->fn(&gw, io, evs[i].events);
                        if (gw.control_eof)
                                break;
                }
                gw.batch = NULL;
                gw.batch_n = 0;
                uint64_t now = gw_now_usec();
                gw_resolves_tick(&gw, now);
                gw_conns_tick(&gw, now);
                gw_udp_tick(&gw, now);
                for (size_t i = 0; i < gw.n_sandboxes; i++) {
                        events_dropped_flush(&gw, gw.sandboxes[i]);
                        gw_cred_flush(&gw, gw.sandboxes[i]);
                }
                gw_host_addrs_tick(&gw, now);
        }
        r = 0;
finish:
        while (gw.n_sandboxes > 0)
                sandbox_free(&gw, gw.sandboxes[--gw.n_sandboxes]);
        free(gw.sandboxes);
        gw_cred_done(&gw);
        gw_host_addrs_done(&gw);
        free(gw.control_buf);
        free(gw.out_buf);
        free(gw.udp_buf);
        safe_close(gw.epoll_fd);
        return r;
}
