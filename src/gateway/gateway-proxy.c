/* SPDX-License-Identifier: MIT */
/* TCP on the gateway: DNS over TCP, the explicit HTTP proxy (absolute-URI
 * requests and CONNECT) and transparent interception (port 80: Host; 443:
 * TLS SNI; other ports: plain relay when a rule names the port). Decisions
 * use the name the sandbox asked for, checked against the policy, and for
 * redirected connections against the addresses this gateway resolved for
 * that name for this sandbox: forged DNS, domain fronting with a different
 * Host/SNI, and raw addresses get nothing unless a CIDR rule allows them. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "gateway-internal.h"
#include "log.h"
#include "sni-parse.h"
#include "sock-io.h"
#include "str-util.h"

#define GW_HEAD_READ_MAX (HTTP_HEAD_MAX + 4096U) /* head plus the start of a body */
#define GW_HELLO_READ_MAX (SNI_HELLO_MAX + 5U)

static void conn_update(Gateway *gw, GwConn *c);
static void uio_event(Gateway *gw, GwIo *io, uint32_t events);
static void tls_hello(Gateway *gw, GwConn *c);
static void connect_first_bytes(Gateway *gw, GwConn *c);

/* Bytes on their way to the sandbox: our own (refusals, the CONNECT reply,
 * DNS answers) in out[], then the upstream's in the pipe. */
static size_t to_client(const GwConn *c) {
        return c->out_n + c->pipe_n;
}

static bool upstream_room(const GwConn *c) {
        return c->pipe_r >= 0 ? c->pipe_n < c->pipe_cap : c->out_n < GW_BUF_SIZE;
}

static void drain_unread(int fd) {
        uint8_t buf[4096];

        if (fd < 0)
                return;
        for (size_t i = 0; i < GW_CLOSE_DRAIN_MAX / sizeof buf; i++)
                if (recv(fd, buf, sizeof buf, MSG_DONTWAIT) <= 0)
                        return;
}

void gw_conn_close(Gateway *gw, GwConn *c) {
        if (c->prev)
                c->prev->next = c->next;
        else if (gw->conns == c)
                gw->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        if (c->resolve) {
                c->resolve->conn = NULL;
                gw_resolve_free(gw, c->resolve);
        }
        drain_unread(c->cio.fd);
        gw_io_close(gw, &c->cio);
        gw_io_close(gw, &c->uio);
        safe_close(c->pipe_r);
        safe_close(c->pipe_w);
        gw_intercept_free(c->ix);
        if (c->sb && c->sb->n_conns > 0)
                c->sb->n_conns--;
        gw->n_conns--;
        free(c->in);
        free(c->out);
        free(c);
}

void gw_sandbox_drop_conns(Gateway *gw, GwSandbox *sb) {
        GwConn *c = gw->conns, *next;
        for (; c; c = next) {
                next = c->next;
                if (c->sb == sb)
                        gw_conn_close(gw, c);
        }
        for (GwResolve *r = gw->resolves, *rn; r; r = rn) {
                rn = r->next;
                if (r->sb == sb)
                        gw_resolve_free(gw, r);
        }
}

/* A refusal: an HTTP 403 for HTTP clients, a close for the rest. */
static void conn_refuse(Gateway *gw, GwConn *c, int status, const char *why) {
        if (c->kind == GW_CONN_PROXY || (c->kind == GW_CONN_TRANSPARENT && c->proto && streq(c->proto, "http"))) {
                int n = snprintf((char *) c->out, GW_BUF_SIZE,
                                 "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                                 "Content-Length: %zu\r\n\r\nspace gateway: %s\n",
                                 status, http_status_reason(status), strlen(why) + 16, why);
                c->out_n = n > 0 && (size_t) n < GW_BUF_SIZE ? (size_t) n : 0;
        } else
                c->out_n = 0;
        c->in_n = 0;
        c->state = GW_CONN_FLUSH;
        c->deadline_usec = gw_now_usec() + gw->config->handshake_timeout_sec * 1000000ULL;
        gw_io_close(gw, &c->uio);
        if (c->out_n == 0) {
                gw_conn_close(gw, c);
                return;
        }
        conn_update(gw, c);
}

static void deny(Gateway *gw, GwConn *c, int status, const char *why) {
        gw_event(gw, c->sb, false, c->proto ?: "tcp", c->host[0] ? c->host : NULL, c->host[0] ? NULL : &c->dst.sin_addr,
                 c->port, why);
        conn_refuse(gw, c, status, why);
}

void gw_conn_deny(Gateway *gw, GwConn *c, int status, const char *why) {
        deny(gw, c, status, why);
}

void gw_conn_cut(Gateway *gw, GwConn *c, const char *why) {
        static const struct linger reset = { .l_onoff = 1, .l_linger = 0 };
        if ((c->state == GW_CONN_RESOLVING || c->state == GW_CONN_CONNECTING) && !c->ix) {
                if (c->resolve) { /* its answer must not connect the refused connection */
                        c->resolve->conn = NULL;
                        gw_resolve_free(gw, c->resolve);
                        c->resolve = NULL;
                }
                deny(gw, c, 403, why); /* nothing went either way yet (a CONNECT is not answered before) */
                return;
        }
        gw_event(gw, c->sb, false, c->proto ?: "tcp", c->host[0] ? c->host : NULL, c->host[0] ? NULL : &c->dst.sin_addr,
                 c->port, why);
        /* a reset, not a FIN: an end the sandbox cannot take for the stream's own (a download without
         * a length, a relayed protocol); what it had not read yet goes too */
        if (c->cio.fd >= 0)
                (void) setsockopt(c->cio.fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
        if (c->uio.fd >= 0)
                (void) setsockopt(c->uio.fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
        gw_conn_close(gw, c);
}

static void conn_update(Gateway *gw, GwConn *c) {
        uint32_t ce = 0, ue = 0;
        switch (c->state) {
        case GW_CONN_HEAD:
                ce = EPOLLIN;
                break;
        case GW_CONN_RESOLVING:
                break;
        case GW_CONN_CONNECTING:
                ue = EPOLLOUT;
                break;
        case GW_CONN_RELAY:
                if (c->kind == GW_CONN_DNS) {
                        if (!c->resolve && !c->c_eof && c->in_n < GW_BUF_SIZE)
                                ce |= EPOLLIN;
                        if (c->out_n)
                                ce |= EPOLLOUT;
                        break;
                }
                if (!c->c_eof && c->in_n < GW_BUF_SIZE && !(c->one_request && c->body_done))
                        ce |= EPOLLIN;
                if (to_client(c))
                        ce |= EPOLLOUT;
                if (!c->u_eof && upstream_room(c))
                        ue |= EPOLLIN;
                if (c->in_n && !c->sni_check)
                        ue |= EPOLLOUT;
                break;
        case GW_CONN_FLUSH:
                ce = EPOLLOUT;
                break;
        }
        if (c->cio.fd >= 0)
                (void) gw_epoll_mod(gw, &c->cio, ce);
        if (c->uio.fd >= 0)
                (void) gw_epoll_mod(gw, &c->uio, ue);
}

void gw_conn_dns_reply(Gateway *gw, GwConn *c, const uint8_t *p, size_t n) {
        if (c->out_n + 2 + n > GW_BUF_SIZE)
                return;
        c->out[c->out_n] = (uint8_t) (n >> 8);
        c->out[c->out_n + 1] = (uint8_t) n;
        memcpy(c->out + c->out_n + 2, p, n);
        c->out_n += 2 + n;
        conn_update(gw, c);
}

static void dns_tcp_input(Gateway *gw, GwConn *c) {
        while (!c->resolve && c->in_n >= 2) {
                size_t len = ((size_t) c->in[0] << 8) | c->in[1];
                if (len < DNS_HEADER_SIZE || len > DNS_MSG_MAX) {
                        gw_conn_close(gw, c);
                        return;
                }
                if (c->in_n < 2 + len)
                        break;
                uint8_t msg[DNS_MSG_MAX];
                memcpy(msg, c->in + 2, len);
                memmove(c->in, c->in + 2 + len, c->in_n - 2 - len);
                c->in_n -= 2 + len;
                gw_dns_query(gw, c->sb, c, msg, len, NULL);
        }
        conn_update(gw, c);
}

void gw_conn_dns_continue(Gateway *gw, GwConn *c) {
        dns_tcp_input(gw, c);
}

/* Starts the upstream connection to c->dst. */
static void conn_connect(Gateway *gw, GwConn *c) {
        const char *why = gw_addr_forbidden(gw, AF_INET, &c->dst.sin_addr);
        char rule[EGRESS_POLICY_RULE_TEXT_MAX + 64];
        int fd, r;
        if (why) {
                deny(gw, c, 403, why);
                return;
        }
        if (c->by_addr && !gw_verdict_addr(gw, c, rule, sizeof rule)) {
                /* a name no host rule decided: the address it resolved to is what the policy judges */
                deny(gw, c, 403, rule);
                return;
        }
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
                conn_refuse(gw, c, 502, "cannot open a socket");
                return;
        }
        c->uio.fd = fd;
        c->uio.fn = uio_event;
        r = connect(fd, (struct sockaddr *) &c->dst, sizeof c->dst);
        if (r < 0 && errno != EINPROGRESS) {
                conn_refuse(gw, c, 502, "upstream connection failed");
                return;
        }
        if (gw_epoll_add(gw, &c->uio, EPOLLOUT) < 0) {
                conn_refuse(gw, c, 502, "upstream connection failed");
                return;
        }
        c->state = GW_CONN_CONNECTING;
        c->deadline_usec = gw_now_usec() + gw->config->handshake_timeout_sec * 1000000ULL;
        conn_update(gw, c);
}

/* Bulk relaying sends from the gateway's own CPU (see GW_NOTSENT_LOWAT), and
 * towards the sandbox without pacing (GW_SANDBOX_LEG_CC). Best effort: a
 * kernel without the option relays as before. */
static void relay_sockopts(GwConn *c) {
        int lowat = (int) GW_NOTSENT_LOWAT;
        (void) setsockopt(c->cio.fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof lowat);
        (void) setsockopt(c->uio.fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof lowat);
        (void) setsockopt(c->cio.fd, IPPROTO_TCP, TCP_CONGESTION, GW_SANDBOX_LEG_CC, STRLEN(GW_SANDBOX_LEG_CC));
}

static void connected(Gateway *gw, GwConn *c) {
        if (sock_connect_result(c->uio.fd) < 0) {
                conn_refuse(gw, c, 502, "upstream connection failed");
                return;
        }
        relay_sockopts(c);
        if (c->intercept) { /* transparent TLS to a credential host */
                gw_intercept_start(gw, c);
                return;
        }
        c->state = GW_CONN_RELAY;
        c->last_usec = gw_now_usec();
        /* the bulk direction goes through a pipe with splice(): no copy through here */
        int p[2];
        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) >= 0) {
                c->pipe_r = p[0];
                c->pipe_w = p[1];
                (void) fcntl(p[1], F_SETPIPE_SZ, (int) GW_PIPE_SIZE); /* fewer, larger splices; may be refused */
                int cap = fcntl(p[1], F_GETPIPE_SZ);
                c->pipe_cap = cap > 0 ? (size_t) cap : GW_BUF_SIZE;
        }
        if (c->connect_reply) {
                static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
                memcpy(c->out, ok, STRLEN(ok));
                c->out_n = STRLEN(ok);
        }
        if (c->sni_check && c->in_n > 0) {
                /* bytes that came with the CONNECT head: checked now, not on the next read
                 * (none may come: a TLS client waits for the server's answer) */
                conn_update(gw, c);
                connect_first_bytes(gw, c);
                return;
        }
        conn_update(gw, c);
}

void gw_conn_resolved(Gateway *gw, GwConn *c, int rcode, const struct in_addr *addrs, size_t n) {
        if (rcode != DNS_RCODE_NOERROR || n == 0) {
                deny(gw, c, 502, rcode < 0 ? "the name could not be resolved (upstream resolver failed)"
                                           : "the name does not resolve to an address the sandbox may reach");
                return;
        }
        c->dst.sin_addr = addrs[0];
        conn_connect(gw, c);
}

/* The decision for a name (and, when redirected, the destination the sandbox chose). */
static bool decide_name(Gateway *gw, GwConn *c, const char *name, bool check_memory) {
        char rule[EGRESS_POLICY_RULE_TEXT_MAX + 64], why[DNS_NAME_MAX + 128];
        if (!gw_verdict_name(gw, c, name, rule, sizeof rule)) {
                deny(gw, c, 403, rule);
                return false;
        }
        /* (a name decided by its address needs no proof that the address is the name's) */
        if (check_memory && !c->by_addr && !gw_memory_has(c->sb, c->host, c->dst.sin_addr)) {
                char ip[INET_ADDRSTRLEN];
                inet_ntop(AF_INET, &c->dst.sin_addr, ip, sizeof ip);
                snprintf(why, sizeof why, "destination %s was not resolved for %s by the gateway", ip, c->host);
                deny(gw, c, 403, why);
                return false;
        }
        gw_event(gw, c->sb, true, c->proto, c->host, NULL, c->port, rule);
        return true;
}

static bool decide_addr(Gateway *gw, GwConn *c) {
        char why[EGRESS_POLICY_RULE_TEXT_MAX + 64];
        c->host[0] = 0;
        if (!gw_verdict_addr(gw, c, why, sizeof why)) {
                deny(gw, c, 403, why);
                return false;
        }
        gw_event(gw, c->sb, true, c->proto, NULL, &c->dst.sin_addr, c->port, why);
        return true;
}

static bool is_ipv4_literal(const char *s, struct in_addr *ret) {
        return inet_pton(AF_INET, s, ret) == 1;
}

/* Body accounting for one request: keeps at most the first request's body of
 * in[off..in_n); returns false on malformed chunked framing. */
static bool body_feed(GwConn *c, size_t off) {
        size_t avail = c->in_n - off;
        if (c->body_done) {
                c->in_n = off;
                return true;
        }
        if (!c->chunked) {
                if (avail >= c->body_left) {
                        c->in_n = off + (size_t) c->body_left;
                        c->body_left = 0;
                        c->body_done = true;
                } else
                        c->body_left -= avail;
                return true;
        }
        while (off < c->in_n && !c->body_done) {
                char scratch[4096];
                size_t used = 0, produced = 0;
                int r = http_chunk_decode(&c->chunk, (const char *) c->in + off, c->in_n - off, scratch, sizeof scratch,
                                          &used, &produced);
                if (r < 0)
                        return false;
                off += used;
                if (r == 1) {
                        c->body_done = true;
                        c->in_n = off;
                }
                if (used == 0 && r == 0)
                        break;
        }
        return true;
}

/* Plain HTTP to a host the sandbox holds a credential for is refused: the
 * value goes only over TLS to an upstream the gateway verified, never in
 * clear over the network (and the request would fail without it anyway). */
static bool http_credential_host(Gateway *gw, GwConn *c) {
        char why[DNS_NAME_MAX + 128];

        if (!cred_inject_wants(&c->sb->creds, c->host, gw_wall_usec()))
                return false;
        snprintf(why, sizeof why, "%s takes a credential of this sandbox: use https (credentials go over TLS only)",
                 c->host);
        deny(gw, c, 403, why);
        return true;
}

/* Rewrites a parsed request head into in[] as origin-form with Connection:
 * close and without proxy headers, followed by `extra` already-read bytes. */
static int http_rewrite(GwConn *c, const HttpHead *h, const uint8_t *extra, size_t extra_n) {
        _cleanup_free_ uint8_t *buf = malloc(GW_BUF_SIZE);
        size_t o = 0;
        int k;
        if (!buf)
                return -ENOMEM;
        k = snprintf((char *) buf, GW_BUF_SIZE, "%s %s HTTP/1.%d\r\n", h->method, h->target, h->version_minor);
        if (k < 0 || (size_t) k >= GW_BUF_SIZE)
                return -E2BIG;
        o = (size_t) k;
        for (size_t i = 0; i < h->n_headers; i++) {
                const char *n = h->headers[i].name;
                if (strcasecmp(n, "connection") == 0 || strcasecmp(n, "proxy-connection") == 0 ||
                    strcasecmp(n, "proxy-authorization") == 0 || strcasecmp(n, "keep-alive") == 0)
                        continue;
                k = snprintf((char *) buf + o, GW_BUF_SIZE - o, "%s: %s\r\n", n, h->headers[i].value);
                if (k < 0 || (size_t) k >= GW_BUF_SIZE - o)
                        return -E2BIG;
                o += (size_t) k;
        }
        k = snprintf((char *) buf + o, GW_BUF_SIZE - o, "Connection: close\r\n\r\n");
        if (k < 0 || (size_t) k >= GW_BUF_SIZE - o || o + (size_t) k + extra_n > GW_BUF_SIZE)
                return -E2BIG;
        o += (size_t) k;
        memcpy(buf + o, extra, extra_n);
        memcpy(c->in, buf, o + extra_n);
        c->in_n = o + extra_n;
        return (int) o;
}

/* Plain HTTP goes upstream one request per connection (its Host decided):
 * in[] becomes its head, rewritten, and the part of its body read so far.
 * False when c was refused. */
static bool one_request_start(Gateway *gw, GwConn *c, const HttpHead *h, size_t head_len) {
        size_t extra_n = c->in_n - head_len;
        _cleanup_free_ uint8_t *extra = memdup(c->in + head_len, extra_n ?: 1);
        int r;

        c->one_request = true;
        c->chunked = h->chunked;
        c->body_left = h->content_length > 0 ? (uint64_t) h->content_length : 0;
        c->body_done = !h->chunked && c->body_left == 0;
        if (!extra || (r = http_rewrite(c, h, extra, extra_n)) < 0) {
                conn_refuse(gw, c, 431, "request head too large");
                return false;
        }
        if (!body_feed(c, (size_t) r)) {
                conn_refuse(gw, c, 400, "malformed chunked body");
                return false;
        }
        return true;
}

/* Explicit proxy: the policy decides on the name, then the gateway resolves it
 * itself (the sandbox's own DNS plays no part) and connects. */
static void resolve_and_connect(Gateway *gw, GwConn *c) {
        int r;
        if (!decide_name(gw, c, c->host, false))
                return;
        r = gw_resolve_start(gw, c->sb, c->host, &c->resolve);
        if (r < 0) {
                deny(gw, c, 502, "the name could not be resolved");
                return;
        }
        c->resolve->conn = c;
        c->state = GW_CONN_RESOLVING;
        conn_update(gw, c);
}

static void http_head(Gateway *gw, GwConn *c, size_t head_len) {
        _cleanup_(http_head_done) HttpHead h = {};
        char host[DNS_NAME_MAX + 1], why[DNS_NAME_MAX * 2 + 64];
        const char *line_end = memmem(c->in, head_len, "\r\n", 2);
        const char *sp1, *sp2;
        uint16_t hport;
        struct in_addr lit;
        int r;

        c->proto = "http";
        if (!line_end) {
                conn_refuse(gw, c, 400, "malformed request");
                return;
        }
        sp1 = memchr(c->in, ' ', (size_t) (line_end - (char *) c->in));
        sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t) (line_end - sp1 - 1)) : NULL;
        if (!sp1 || !sp2) {
                conn_refuse(gw, c, 400, "malformed request line");
                return;
        }
        Slice method = { (const char *) c->in, (size_t) (sp1 - (char *) c->in) };
        Slice target = { sp1 + 1, (size_t) (sp2 - sp1 - 1) };

        if (c->kind == GW_CONN_PROXY && slice_eq(method, "CONNECT")) {
                c->proto = "connect";
                if (gw_split_authority(target.p, target.n, 0, c->host, &c->port) < 0 || c->port == 0) {
                        conn_refuse(gw, c, 400, "CONNECT needs host:port");
                        return;
                }
                /* bytes after the head (an eager ClientHello) stay for the SNI check */
                memmove(c->in, c->in + head_len, c->in_n - head_len);
                c->in_n -= head_len;
                c->connect_reply = true;
                c->sni_check = true;
                c->dst.sin_family = AF_INET;
                c->dst.sin_port = htons(c->port);
                if (is_ipv4_literal(c->host, &lit)) {
                        c->dst.sin_addr = lit;
                        if (decide_addr(gw, c))
                                conn_connect(gw, c);
                        return;
                }
                resolve_and_connect(gw, c);
                return;
        }

        /* a request: parse the head as origin-form (absolute-URI rewritten first) */
        _cleanup_free_ char *rewritten = NULL;
        const char *head = (const char *) c->in;
        size_t hn = head_len;
        char uhost[DNS_NAME_MAX + 1] = "";
        uint16_t uport = 80;
        if (c->kind == GW_CONN_PROXY) {
                const char *rest = NULL;
                if (target.n > 7 && strncasecmp(target.p, "http://", 7) == 0)
                        rest = target.p + 7;
                else {
                        conn_refuse(gw, c, 400,
                                    target.n > 8 && strncasecmp(target.p, "https://", 8) == 0
                                            ? "use CONNECT for https"
                                            : "the proxy takes absolute http:// URIs and CONNECT");
                        return;
                }
                const char *path = memchr(rest, '/', (size_t) (sp2 - rest));
                const char *auth_end = path ? path : sp2;
                if (gw_split_authority(rest, (size_t) (auth_end - rest), 80, uhost, &uport) < 0) {
                        conn_refuse(gw, c, 400, "bad host in the URI");
                        return;
                }
                size_t before = (size_t) (rest - 7 - (const char *) c->in);
                size_t pathlen = path ? (size_t) (sp2 - path) : 1;
                rewritten = malloc(head_len + 2);
                if (!rewritten) {
                        conn_refuse(gw, c, 500, "out of memory");
                        return;
                }
                memcpy(rewritten, c->in, before);
                memcpy(rewritten + before, path ? path : "/", pathlen);
                memcpy(rewritten + before + pathlen, sp2, head_len - (size_t) (sp2 - (const char *) c->in));
                hn = before + pathlen + head_len - (size_t) (sp2 - (const char *) c->in);
                head = rewritten;
        }
        r = http_parse_request_head(head, hn, &h);
        if (r < 0) {
                conn_refuse(gw, c, r == -ENAMETOOLONG ? 414 : 400, "malformed request head");
                return;
        }
        const char *hosthdr = http_head_header(&h, "host");
        if (!hosthdr ||
            gw_split_authority(hosthdr, strlen(hosthdr), c->kind == GW_CONN_PROXY ? 80 : ntohs(c->dst.sin_port), host,
                               &hport) < 0) {
                conn_refuse(gw, c, 400, "a valid Host header is required");
                return;
        }
        if (c->kind == GW_CONN_PROXY) {
                if (!streq(host, uhost) || hport != uport) {
                        (void) strscpy(c->host, sizeof c->host, uhost);
                        c->port = uport;
                        snprintf(why, sizeof why, "Host header %s does not match the URI host %s", host, uhost);
                        deny(gw, c, 403, why);
                        return;
                }
                c->port = uport;
        } else {
                c->port = ntohs(c->dst.sin_port);
                if (hport != c->port) {
                        (void) strscpy(c->host, sizeof c->host, host);
                        deny(gw, c, 403, "the Host header's port differs from the destination port");
                        return;
                }
        }
        (void) strscpy(c->host, sizeof c->host, host);
        if (http_credential_host(gw, c) || !one_request_start(gw, c, &h, head_len))
                return;
        if (is_ipv4_literal(c->host, &lit)) {
                if (c->kind == GW_CONN_TRANSPARENT && lit.s_addr != c->dst.sin_addr.s_addr) {
                        deny(gw, c, 403, "the Host address differs from the destination");
                        return;
                }
                c->dst.sin_addr = lit;
                c->dst.sin_family = AF_INET;
                c->dst.sin_port = htons(c->port);
                if (decide_addr(gw, c))
                        conn_connect(gw, c);
                return;
        }
        if (c->kind == GW_CONN_TRANSPARENT) {
                if (decide_name(gw, c, c->host, true))
                        conn_connect(gw, c);
                return;
        }
        c->dst.sin_family = AF_INET;
        c->dst.sin_port = htons(c->port);
        resolve_and_connect(gw, c);
}

/* A TLS ClientHello on the transparent port (443) or after CONNECT. */
static void tls_hello(Gateway *gw, GwConn *c) {
        char sni[SNI_NAME_MAX + 1], norm[EGRESS_POLICY_HOST_MAX + 1], why[SNI_NAME_MAX + DNS_NAME_MAX + 64];
        size_t rec = 0;
        bool wc;
        int r = sni_parse(c->in, c->in_n, sni, &rec);

        if (r == -EAGAIN) {
                if (c->in_n >= GW_HELLO_READ_MAX)
                        deny(gw, c, 403, "ClientHello too large");
                return;
        }
        if (c->kind == GW_CONN_PROXY) { /* after CONNECT: the SNI (if any) must be the CONNECT host */
                c->sni_check = false;
                if (r == 0) {
                        if (egress_policy_host_normalize(sni, strlen(sni), norm, &wc, NULL, 0) < 0 || wc ||
                            !streq(norm, c->host)) {
                                snprintf(why, sizeof why, "TLS SNI %s does not match the CONNECT host %s", sni, c->host);
                                deny(gw, c, 403, why);
                                return;
                        }
                } else if (r != -ENOENT) {
                        deny(gw, c, 403, "malformed TLS ClientHello");
                        return;
                }
                if (gw_cred_wants(c->sb, c->host)) { /* a credential host: TLS ends here */
                        if (c->pipe_n > 0) {
                                deny(gw, c, 502, "the upstream spoke before the TLS ClientHello");
                                return;
                        }
                        gw_intercept_start(gw, c);
                        return;
                }
                conn_update(gw, c);
                return;
        }
        c->proto = "tls";
        c->port = ntohs(c->dst.sin_port);
        if (r == -ENOENT) { /* no name: a raw address */
                if (decide_addr(gw, c))
                        conn_connect(gw, c);
                return;
        }
        if (r < 0) {
                deny(gw, c, 403, r == -EBADMSG ? "not a TLS ClientHello" : "malformed TLS ClientHello");
                return;
        }
        if (egress_policy_host_normalize(sni, strlen(sni), norm, &wc, NULL, 0) < 0 || wc) {
                deny(gw, c, 403, "invalid TLS SNI");
                return;
        }
        (void) strscpy(c->host, sizeof c->host, norm);
        /* A host the sandbox holds a credential for is intercepted
         * (gateway-intercept.c) instead of tunnelled; the policy decision is
         * the same. Every other host is spliced. */
        if (decide_name(gw, c, c->host, true)) {
                c->intercept = gw_cred_wants(c->sb, c->host);
                conn_connect(gw, c);
        }
}

/* A redirected connection to another port: decided on the destination alone
 * (server-first protocols send nothing): a CIDR rule, or a name this gateway
 * resolved to that address for the sandbox with a rule naming the port. */
static void plain_tcp(Gateway *gw, GwConn *c) {
        char host[DNS_NAME_MAX + 1], why[EGRESS_POLICY_RULE_TEXT_MAX + 64];
        c->proto = "tcp";
        c->port = ntohs(c->dst.sin_port);
        if (!gw_verdict_tcp(gw, c, host, why, sizeof why)) {
                deny(gw, c, 403, why);
                return;
        }
        (void) strscpy(c->host, sizeof c->host, host);
        gw_event(gw, c->sb, true, c->proto, c->host[0] ? c->host : NULL, &c->dst.sin_addr, c->port, why);
        conn_connect(gw, c);
}

static void head_input(Gateway *gw, GwConn *c) {
        if (c->kind == GW_CONN_TRANSPARENT && ntohs(c->dst.sin_port) == 443) {
                tls_hello(gw, c);
                return;
        }
        ssize_t hl = http_head_length((const char *) c->in, c->in_n);
        if (hl < 0) {
                conn_refuse(gw, c, 431, "request head too large");
                return;
        }
        if (hl == 0) {
                if (c->in_n >= GW_HEAD_READ_MAX)
                        conn_refuse(gw, c, 431, "request head too large");
                return;
        }
        http_head(gw, c, (size_t) hl);
}

/* Plain HTTP through a CONNECT tunnel: its Host must name the CONNECT host
 * (else a fronted request reaches another site on the allowed address), and
 * it goes upstream as one request, like the transparent port 80's. */
static void connect_http(Gateway *gw, GwConn *c) {
        _cleanup_(http_head_done) HttpHead h = {};
        char host[DNS_NAME_MAX + 1], why[DNS_NAME_MAX * 2 + 64];
        ssize_t hl = http_head_length((const char *) c->in, c->in_n);
        const char *hosthdr;
        uint16_t hport;

        if (hl == 0 && c->in_n < GW_HEAD_READ_MAX)
                return; /* the rest of the head is to come */
        if (hl <= 0) {
                deny(gw, c, 431, "request head too large");
                return;
        }
        c->proto = "http";
        if (http_parse_request_head((const char *) c->in, (size_t) hl, &h) < 0) {
                deny(gw, c, 400, "malformed HTTP request in the CONNECT tunnel");
                return;
        }
        hosthdr = http_head_header(&h, "host");
        if (!hosthdr || gw_split_authority(hosthdr, strlen(hosthdr), c->port, host, &hport) < 0) {
                deny(gw, c, 400, "a valid Host header is required");
                return;
        }
        if (!streq(host, c->host) || hport != c->port) {
                snprintf(why, sizeof why, "Host header %s does not match the CONNECT host %s", hosthdr, c->host);
                deny(gw, c, 403, why);
                return;
        }
        c->sni_check = false;
        if (http_credential_host(gw, c) || !one_request_start(gw, c, &h, (size_t) hl))
                return;
        conn_update(gw, c);
}

/* The client's first bytes through a CONNECT tunnel, held back until known:
 * a TLS ClientHello (its SNI checked), an HTTP request (its Host checked), or
 * another client-first protocol (relayed as it comes). */
static void connect_first_bytes(Gateway *gw, GwConn *c) {
        switch (gw_first_bytes_kind(c->in, c->in_n)) {
        case GW_FIRST_TLS:
                tls_hello(gw, c);
                return;
        case GW_FIRST_HTTP:
                connect_http(gw, c);
                return;
        case GW_FIRST_OTHER:
                c->sni_check = false; /* relayed as is to the allowed host:port (now, not on the next event) */
                conn_update(gw, c);
                return;
        default: /* the first line is still incomplete */
                if (c->in_n >= GW_HEAD_READ_MAX)
                        deny(gw, c, 431, "first line too long");
                return;
        }
}

static void client_readable(Gateway *gw, GwConn *c) {
        size_t cap = GW_BUF_SIZE;
        if (c->state == GW_CONN_HEAD)
                cap = c->kind == GW_CONN_TRANSPARENT && ntohs(c->dst.sin_port) == 443 ? GW_HELLO_READ_MAX : GW_HEAD_READ_MAX;
        if (c->in_n >= cap)
                return;
        size_t before = c->in_n;
        ssize_t k = read(c->cio.fd, c->in + c->in_n, cap - c->in_n);
        if (k < 0) {
                if (errno != EAGAIN && errno != EINTR)
                        gw_conn_close(gw, c);
                return;
        }
        if (k == 0) {
                if (c->state != GW_CONN_RELAY) {
                        gw_conn_close(gw, c);
                        return;
                }
                c->c_eof = true;
                if (c->in_n == 0 && !c->u_shut && c->uio.fd >= 0 && !c->sni_check) {
                        /* on to the upstream now: it may send nothing until it sees the end */
                        (void) shutdown(c->uio.fd, SHUT_WR);
                        c->u_shut = true;
                }
                conn_update(gw, c);
                return;
        }
        c->in_n += (size_t) k;
        c->last_usec = gw_now_usec();
        if (c->kind == GW_CONN_DNS) {
                dns_tcp_input(gw, c);
                return;
        }
        if (c->state == GW_CONN_HEAD) {
                head_input(gw, c);
                return;
        }
        if (c->one_request && !body_feed(c, before)) {
                gw_conn_close(gw, c);
                return;
        }
        if (c->sni_check && c->state == GW_CONN_RELAY) {
                connect_first_bytes(gw, c);
                return;
        }
        conn_update(gw, c);
}

static void cio_event(Gateway *gw, GwIo *io, uint32_t events) {
        GwConn *c = (GwConn *) ((char *) io - offsetof(GwConn, cio));
        if (events & EPOLLOUT && to_client(c)) {
                ssize_t k;
                if (c->out_n) {
                        k = write(c->cio.fd, c->out, c->out_n);
                        if (k > 0) {
                                memmove(c->out, c->out + k, c->out_n - (size_t) k);
                                c->out_n -= (size_t) k;
                        }
                } else {
                        k = splice(c->pipe_r, NULL, c->cio.fd, NULL, c->pipe_n, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
                        if (k > 0)
                                c->pipe_n -= (size_t) k;
                }
                if (k < 0 && errno != EAGAIN && errno != EINTR) {
                        gw_conn_close(gw, c);
                        return;
                }
                if (k > 0)
                        c->last_usec = gw_now_usec();
                if (c->state == GW_CONN_FLUSH && c->out_n == 0) {
                        gw_conn_close(gw, c);
                        return;
                }
                if (c->u_eof && to_client(c) == 0 && c->state == GW_CONN_RELAY) {
                        if (c->one_request || c->c_eof) {
                                gw_conn_close(gw, c);
                                return;
                        }
                        if (!c->c_shut) {
                                (void) shutdown(c->cio.fd, SHUT_WR);
                                c->c_shut = true;
                        }
                }
                conn_update(gw, c);
        }
        if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                if (events & (EPOLLERR | EPOLLHUP)) { /* the sandbox's side is gone both ways */
                        gw_conn_close(gw, c);
                        return;
                }
                if (c->state == GW_CONN_FLUSH) {
                        gw_conn_close(gw, c);
                        return;
                }
                client_readable(gw, c);
        }
}

static void uio_event(Gateway *gw, GwIo *io, uint32_t events) {
        GwConn *c = (GwConn *) ((char *) io - offsetof(GwConn, uio));
        if (c->state == GW_CONN_CONNECTING) {
                if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
                        connected(gw, c);
                return;
        }
        if (events & EPOLLOUT && c->in_n) {
                ssize_t k = write(c->uio.fd, c->in, c->in_n);
                if (k < 0 && errno != EAGAIN && errno != EINTR) {
                        gw_conn_close(gw, c);
                        return;
                }
                if (k > 0) {
                        memmove(c->in, c->in + k, c->in_n - (size_t) k);
                        c->in_n -= (size_t) k;
                        c->last_usec = gw_now_usec();
                }
                if (c->c_eof && c->in_n == 0 && !c->u_shut) {
                        (void) shutdown(c->uio.fd, SHUT_WR);
                        c->u_shut = true;
                }
        }
        if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->u_eof && upstream_room(c)) {
                ssize_t k = c->pipe_r >= 0 ? splice(c->uio.fd, NULL, c->pipe_w, NULL, c->pipe_cap - c->pipe_n,
                                                    SPLICE_F_NONBLOCK | SPLICE_F_MOVE)
                                           : read(c->uio.fd, c->out + c->out_n, GW_BUF_SIZE - c->out_n);
                if (k < 0 && errno != EAGAIN && errno != EINTR) {
                        if (to_client(c) == 0) {
                                gw_conn_close(gw, c);
                                return;
                        }
                        k = 0; /* deliver what is buffered, then close */
                }
                if (k == 0) {
                        c->u_eof = true;
                        if (to_client(c) == 0 && (c->one_request || c->c_eof)) {
                                gw_conn_close(gw, c);
                                return;
                        }
                        if (to_client(c) == 0 && !c->c_shut) {
                                (void) shutdown(c->cio.fd, SHUT_WR);
                                c->c_shut = true;
                        }
                }
                if (k > 0) {
                        if (c->pipe_r >= 0)
                                c->pipe_n += (size_t) k;
                        else
                                c->out_n += (size_t) k;
                        c->last_usec = gw_now_usec();
                }
                if (k > 0 && c->pipe_r >= 0 && c->out_n == 0 && c->state == GW_CONN_RELAY) {
                        /* on to the sandbox at once, without a round through epoll for its EPOLLOUT */
                        ssize_t w = splice(c->pipe_r, NULL, c->cio.fd, NULL, c->pipe_n, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
                        if (w > 0)
                                c->pipe_n -= (size_t) w;
                        else if (w < 0 && errno != EAGAIN && errno != EINTR) {
                                gw_conn_close(gw, c);
                                return;
                        }
                }
        }
        if (c->u_eof && (events & (EPOLLHUP | EPOLLERR))) {
                /* upstream gone both ways: nothing more to send it; stop its events */
                gw_io_close(gw, &c->uio);
                c->in_n = 0;
                c->u_shut = true;
        }
        if (c->u_eof && (events & (EPOLLHUP | EPOLLERR)) && c->uio.fd < 0 && to_client(c) == 0) {
                gw_conn_close(gw, c);
                return;
        }
        if (c->c_eof && c->in_n == 0 && !c->u_shut && c->uio.fd >= 0) {
                (void) shutdown(c->uio.fd, SHUT_WR);
                c->u_shut = true;
        }
        conn_update(gw, c);
}

void gw_listener_event(Gateway *gw, GwIo *io, uint32_t events) {
        GwSandbox *sb = NULL;
        GwConnKind kind;
        for (size_t i = 0; i < gw->n_sandboxes && !sb; i++) {
                GwSandbox *s = gw->sandboxes[i];
                if (io == &s->dns_tcp || io == &s->proxy || io == &s->transparent)
                        sb = s;
        }
        if (!sb)
                return;
        kind = io == &sb->dns_tcp ? GW_CONN_DNS : io == &sb->proxy ? GW_CONN_PROXY : GW_CONN_TRANSPARENT;
        for (unsigned i = 0; i < 64; i++) {
                struct sockaddr_in peer;
                socklen_t pl = sizeof peer;
                int fd = accept4(io->fd, (struct sockaddr *) &peer, &pl, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0)
                        return;
                if (pl != sizeof peer || peer.sin_family != AF_INET || peer.sin_addr.s_addr != sb->ip.s_addr) {
                        safe_close(fd); /* not from the sandbox's own address */
                        continue;
                }
                if (sb->n_conns >= gw->config->conns_per_sandbox || gw->n_conns >= GW_CONNS_MAX) {
                        safe_close(fd);
                        gw_event(gw, sb, false, "tcp", NULL, &sb->ip, 0, "connection limit reached");
                        continue;
                }
                GwConn *c = calloc(1, sizeof *c);
                if (c) {
                        c->in = malloc(GW_BUF_SIZE);
                        c->out = malloc(GW_BUF_SIZE);
                }
                if (!c || !c->in || !c->out) {
                        if (c) {
                                free(c->in);
                                free(c->out);
                        }
                        free(c);
                        safe_close(fd);
                        continue;
                }
                c->cio.fd = fd;
                c->cio.fn = cio_event;
                c->uio.fd = -EBADF;
                c->uio.fn = uio_event;
                c->pipe_r = c->pipe_w = -EBADF;
                c->sb = sb;
                c->kind = kind;
                c->state = kind == GW_CONN_DNS ? GW_CONN_RELAY : GW_CONN_HEAD;
                c->deadline_usec = gw_now_usec() + gw->config->handshake_timeout_sec * 1000000ULL;
                c->last_usec = gw_now_usec();
                c->next = gw->conns;
                if (gw->conns)
                        gw->conns->prev = c;
                gw->conns = c;
                gw->n_conns++;
                sb->n_conns++;
                if (gw_epoll_add(gw, &c->cio, EPOLLIN) < 0) {
                        gw_conn_close(gw, c);
                        continue;
                }
                if (kind == GW_CONN_TRANSPARENT) {
                        socklen_t dl = sizeof c->dst;
                        if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &c->dst, &dl) < 0 || c->dst.sin_family != AF_INET ||
                            (c->dst.sin_addr.s_addr == sb->host.s_addr &&
                             ntohs(c->dst.sin_port) == gw->config->transparent_port)) {
                                c->proto = "tcp";
                                deny(gw, c, 403, "not a redirected connection");
                                continue;
                        }
                        uint16_t port = ntohs(c->dst.sin_port);
                        if (port != 80 && port != 443)
                                plain_tcp(gw, c);
                }
        }
}

void gw_conns_tick(Gateway *gw, uint64_t now) {
        uint64_t idle = gw->config->idle_timeout_sec * 1000000ULL;
        for (GwConn *c = gw->conns, *next; c; c = next) {
                next = c->next;
                uint64_t dns_idle = gw->config->handshake_timeout_sec * 1000000ULL;
                bool expired = c->state == GW_CONN_RELAY ? now > c->last_usec + (c->kind == GW_CONN_DNS ? dns_idle : idle)
                                                         : now > c->deadline_usec;
                if (!expired)
                        continue;
                if (c->state == GW_CONN_HEAD || c->state == GW_CONN_CONNECTING || c->state == GW_CONN_RESOLVING) {
                        gw_event(gw, c->sb, false, c->proto ?: "tcp", c->host[0] ? c->host : NULL,
                                 c->host[0] ? NULL : &c->sb->ip, c->port,
                                 c->state == GW_CONN_HEAD ? "handshake timeout" : "upstream connect timeout");
                }
                /* conn_close may not free `next` (only c and lookups) */
                gw_conn_close(gw, c);
        }
}
