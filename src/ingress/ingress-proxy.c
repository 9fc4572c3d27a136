/* SPDX-License-Identifier: MIT */
/* One request through the ingress: the head rebuilt for the sandbox
 * (hop-by-hop headers and our own credentials dropped, X-Forwarded-*
 * added), the request body streamed as it came (length or chunked), the
 * response head parsed (the server inside is not trusted: the same parser
 * and limits as for clients) and its body streamed back; a 101 to an
 * Upgrade turns the connection into a byte relay both ways. Buffers are
 * INGRESS_BUFFER per direction; every wait has a deadline. */

#include <errno.h>
#include <inttypes.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "http-parse.h"
#include "ingress.h"
#include "log.h"
#include "sock-io.h"
#include "str-util.h"
#include "time-util.h"

static int send_all(int fd, const void *p, size_t n) {
        return sock_send_all(fd, p, n, INGRESS_IDLE_TIMEOUT_MSEC);
}

/* Headers that belong to one hop (RFC 9110 7.6.1) or to us: never forwarded. */
bool ingress_header_is_hop(const char *name) {
        static const char *const hop[] = { "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
                                           "Proxy-Authorization", "TE", "Trailer", "Transfer-Encoding", "Upgrade", "HTTP2-Settings",
                                           "Content-Length", "Host", INGRESS_TOKEN_HEADER,
                                           INGRESS_E2B_TOKEN_HEADER, "X-Forwarded-For", "X-Forwarded-Host",
                                           "X-Forwarded-Proto", "Forwarded" };
        for (size_t i = 0; i < ELEMENTSOF(hop); i++)
                if (strcasecmp(name, hop[i]) == 0)
                        return true;
        return false;
}

/* The header values the parser accepted have no CR, LF or NUL. */
static int append(char **buf, size_t *len, size_t *allocated, const char *fmt, ...) _printf_(4, 5);
static int append(char **buf, size_t *len, size_t *allocated, const char *fmt, ...) {
        va_list ap;
        for (;;) {
                size_t room = *allocated - *len;
                int k;
                va_start(ap, fmt);
                k = *buf ? vsnprintf(*buf + *len, room, fmt, ap) : -1;
                va_end(ap);
                if (k >= 0 && (size_t) k < room) {
                        *len += (size_t) k;
                        return 0;
                }
                if (greedy_realloc((void **) buf, allocated, *len + (k > 0 ? (size_t) k : 0) + 512, 1) < 0)
                        return -ENOMEM;
        }
}

int ingress_request_head(const HttpHead *req, const char *upgrade, const char *forwarded_for, bool tls,
                         const char *mask, uint16_t port, char **ret, size_t *ret_len) {
        _cleanup_free_ char *b = NULL;
        size_t len = 0, allocated = 0;
        const char *host = http_head_header(req, "Host"), *h2_settings = http_head_header(req, "HTTP2-Settings");
        int r;

        if (!isempty(mask)) { /* maskRequestHost: checked at create (no CR, LF, space) */
                const char *at = strstr(mask, "${PORT}");
                if (at)
                        r = append(&b, &len, &allocated, "%s %s HTTP/1.1\r\nHost: %.*s%u%s\r\n", req->method,
                                   req->target, (int) (at - mask), mask, (unsigned) port, at + 7);
                else
                        r = append(&b, &len, &allocated, "%s %s HTTP/1.1\r\nHost: %s\r\n", req->method,
                                   req->target, mask);
        } else
                r = append(&b, &len, &allocated, "%s %s HTTP/1.1\r\nHost: %s\r\n", req->method, req->target,
                           strempty(host));
        for (size_t i = 0; r >= 0 && i < req->n_headers; i++) {
                const HttpHeader *h = &req->headers[i];
                if (ingress_header_is_hop(h->name))
                        continue;
                if (strcasecmp(h->name, "Cookie") == 0) {
                        _cleanup_free_ char *rest = NULL;
                        r = ingress_cookie_strip(h->value, INGRESS_COOKIE, &rest);
                        if (r >= 0 && rest)
                                r = append(&b, &len, &allocated, "Cookie: %s\r\n", rest);
                        continue;
                }
                r = append(&b, &len, &allocated, "%s: %s\r\n", h->name, h->value);
        }
        if (r >= 0)
                r = append(&b, &len, &allocated, "X-Forwarded-For: %s\r\nX-Forwarded-Host: %s\r\nX-Forwarded-Proto: %s\r\n",
                           forwarded_for, strempty(host), tls ? "https" : "http");
        if (r >= 0 && upgrade && strcasecmp(upgrade, "h2c") == 0 && h2_settings)
                /* RFC 7540 3.2: the upgrade to HTTP/2 carries its settings, named in Connection */
                r = append(&b, &len, &allocated, "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: %s\r\n",
                           h2_settings);
        else if (r >= 0 && upgrade)
                r = append(&b, &len, &allocated, "Connection: Upgrade\r\nUpgrade: %s\r\n", upgrade);
        else if (r >= 0)
                r = append(&b, &len, &allocated, "Connection: close\r\n");
        if (r >= 0 && req->chunked)
                r = append(&b, &len, &allocated, "Transfer-Encoding: chunked\r\n");
        else if (r >= 0 && req->content_length >= 0)
                r = append(&b, &len, &allocated, "Content-Length: %" PRIi64 "\r\n", req->content_length);
        if (r >= 0)
                r = append(&b, &len, &allocated, "\r\n");
        if (r < 0)
                return r;
        *ret_len = len;
        *ret = TAKE_PTR(b);
        return 0;
}

/* The request body, as it came: Content-Length bytes, or re-chunked. */
static int request_body(HttpConn *c, const HttpHead *req, int fd) {
        _cleanup_free_ char *buf = malloc(INGRESS_BUFFER + 32);
        if (!buf)
                return -ENOMEM;
        if (!req->chunked && req->content_length <= 0)
                return 0;
        for (;;) {
                ssize_t k = http_conn_read_body(c, buf + 16, INGRESS_BUFFER);
                int r;
                if (k < 0)
                        return (int) k;
                if (req->chunked) {
                        char line[20];
                        int l = snprintf(line, sizeof line, "%zx\r\n", (size_t) k);
                        r = send_all(fd, line, (size_t) l);
                        if (r >= 0 && k > 0)
                                r = send_all(fd, buf + 16, (size_t) k);
                        if (r >= 0)
                                r = send_all(fd, "\r\n", 2);
                } else
                        r = k > 0 ? send_all(fd, buf + 16, (size_t) k) : 0;
                if (r < 0)
                        return r;
                if (k == 0)
                        return 0;
        }
}

/* The response headers we pass on (the framing is ours). */
int ingress_response_headers(const HttpHead *resp, bool upgrade, char **ret) {
        _cleanup_free_ char *b = NULL;
        size_t len = 0, allocated = 0;
        int r = append(&b, &len, &allocated, "%s", "");

        for (size_t i = 0; r >= 0 && i < resp->n_headers; i++) {
                const HttpHeader *h = &resp->headers[i];
                if (ingress_header_is_hop(h->name) || strcasecmp(h->name, "Date") == 0)
                        continue;
                /* the sandbox does not get to set (or shadow, with a Domain) the ingress's cookie */
                if (strcasecmp(h->name, "Set-Cookie") == 0 &&
                    strncmp(h->value + strspn(h->value, " \t"), INGRESS_COOKIE "=", STRLEN(INGRESS_COOKIE "=")) == 0)
                        continue;
                r = append(&b, &len, &allocated, "%s: %s\r\n", h->name, h->value);
        }
        if (r >= 0 && upgrade)
                r = append(&b, &len, &allocated, "Connection: Upgrade\r\nUpgrade: %s\r\n",
                           strempty(http_head_header(resp, "Upgrade")));
        if (r < 0)
                return r;
        *ret = TAKE_PTR(b);
        return 0;
}

/* Reads the response head into buf; *ret_head_len its length, *ret_len all bytes read. */
static int response_read_head(int fd, char *buf, size_t size, size_t have, size_t *ret_head_len, size_t *ret_len) {
        size_t len = have;
        int64_t deadline = mono_msec() + INGRESS_RESPONSE_TIMEOUT_MSEC;

        for (;;) {
                ssize_t l = http_head_length(buf, len), k;
                if (l < 0)
                        return (int) l;
                if (l > 0) {
                        *ret_head_len = (size_t) l;
                        *ret_len = len;
                        return 0;
                }
                if (len == size)
                        return -E2BIG;
                int64_t left = deadline - mono_msec();
                if (left <= 0)
                        return -ETIMEDOUT;
                k = sock_recv_some(fd, buf + len, size - len, (int) left);
                if (k < 0)
                        return (int) k;
                if (k == 0)
                        return -ECONNRESET;
                len += (size_t) k;
        }
}

static int reply_502(HttpConn *c, const char *why) {
        char body[256];
        int n = snprintf(body, sizeof body, "{\"error\":{\"code\":\"bad_gateway\",\"message\":\"%s\"}}\n", why);
        http_conn_set_close(c);
        return http_conn_respond(c, 502, "application/json", body, (size_t) n, NULL);
}

/* The response body to the client: its length, chunked, or until the sandbox closes. */
static int response_body(HttpConn *c, const HttpHead *resp, int fd, const char *pending, size_t pending_len,
                         bool sized) {
        _cleanup_free_ char *in = malloc(INGRESS_BUFFER), *out = malloc(INGRESS_BUFFER);
        HttpChunkDecoder d = {};
        uint64_t left = resp->content_length >= 0 ? (uint64_t) resp->content_length : UINT64_MAX;
        int r;

        if (!in || !out)
                return -ENOMEM;
        for (bool first = true;; first = false) {
                const char *p;
                size_t n;
                if (first && pending_len > 0) {
                        p = pending;
                        n = pending_len;
                } else {
                        if (sized && left == 0)
                                return 0;
                        ssize_t k = sock_recv_some(fd, in, INGRESS_BUFFER, INGRESS_IDLE_TIMEOUT_MSEC);
                        if (k < 0)
                                return (int) k;
                        if (k == 0)
                                return resp->chunked || sized ? -ECONNRESET : 0; /* until close: the end */
                        p = in;
                        n = (size_t) k;
                }
                if (resp->chunked) {
                        while (n > 0) {
                                size_t consumed, produced;
                                int dr = http_chunk_decode(&d, p, n, out, INGRESS_BUFFER, &consumed, &produced);
                                if (dr < 0)
                                        return -EBADMSG;
                                if (produced > 0 && (r = http_conn_stream_write(c, out, produced)) < 0)
                                        return r;
                                p += consumed;
                                n -= consumed;
                                if (dr > 0)
                                        return 0;
                        }
                } else if (sized) {
                        if (n > left)
                                n = (size_t) left; /* anything past the length is not ours to pass on */
                        r = http_conn_sized_write(c, p, n);
                        if (r < 0)
                                return r;
                        left -= n;
                } else {
                        r = http_conn_stream_write(c, p, n);
                        if (r < 0)
                                return r;
                }
                if (first && pending_len > 0 && sized && left == 0)
                        return 0;
        }
}

static int wait_one(int fd, short events, int msec) {
        struct pollfd p = { .fd = fd, .events = events };
        int k;
        do
                k = poll(&p, 1, msec);
        while (k < 0 && errno == EINTR);
        return k < 0 ? negative_errno() : k == 0 ? -ETIMEDOUT : 0;
}

static int tls_send_all(void *ssl, int fd, const char *p, size_t n) {
        while (n > 0) {
                short ev = 0;
                ssize_t k = http_tls_io(ssl, true, (void *) p, n, &ev);
                if (k == -EAGAIN) {
                        int r = wait_one(fd, ev, INGRESS_IDLE_TIMEOUT_MSEC);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (k <= 0)
                        return k < 0 ? (int) k : -EPIPE;
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

/* sock_relay() with TLS on the client's side (cfd, ssl): each direction
 * holds one buffer at most, an idle relay ends after the idle timeout. */
static int tls_relay(void *ssl, int cfd, const void *c_pending, size_t c_pending_len, int up, const char *up_pending,
                     size_t up_pending_len) {
        _cleanup_free_ char *buf = malloc(INGRESS_BUFFER);
        bool c_open = true, up_open = true;
        short wants = 0;
        int r;

        if (!buf)
                return -ENOMEM;
        r = send_all(up, c_pending, c_pending_len);
        if (r >= 0)
                r = tls_send_all(ssl, cfd, up_pending, up_pending_len);
        if (r < 0)
                return r;
        while (c_open || up_open) {
                struct pollfd p[2] = { { .fd = c_open ? cfd : -1, .events = (short) (POLLIN | wants) },
                                       { .fd = up_open ? up : -1, .events = POLLIN } };
                bool pending = c_open && SSL_pending(ssl) > 0;
                int k = poll(p, 2, pending ? 0 : INGRESS_IDLE_TIMEOUT_MSEC);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return negative_errno();
                if (k == 0 && !pending)
                        return -ETIMEDOUT;
                if (c_open && (pending || (p[0].revents & (POLLIN | POLLOUT | POLLHUP | POLLERR)))) {
                        ssize_t n = http_tls_io(ssl, false, buf, INGRESS_BUFFER, &wants);
                        if (n > 0) {
                                wants = 0;
                                r = send_all(up, buf, (size_t) n);
                                if (r < 0)
                                        return r;
                        } else if (n == 0) {
                                c_open = false;
                                (void) shutdown(up, SHUT_WR);
                        } else if (n != -EAGAIN)
                                return (int) n;
                }
                if (up_open && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
                        ssize_t n = recv(up, buf, INGRESS_BUFFER, MSG_DONTWAIT);
                        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                                continue;
                        if (n < 0)
                                return negative_errno();
                        if (n == 0) {
                                up_open = false;
                                (void) SSL_shutdown(ssl); /* close_notify: the client's end of it */
                                if (p[1].revents & (POLLHUP | POLLERR))
                                        return 0;
                                continue;
                        }
                        r = tls_send_all(ssl, cfd, buf, (size_t) n);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

void ingress_proxy(HttpConn *c, const HttpHead *req, int fd, const char *forwarded_for, const char *mask,
                   uint16_t port) {
        _cleanup_free_ char *head = NULL, *buf = NULL, *hdrs = NULL;
        _cleanup_(http_head_done) HttpHead resp = {};
        const char *upgrade = http_head_upgrade(req);
        size_t head_len, got, resp_head_len = 0;
        int r;

        if (upgrade && (req->chunked || req->content_length > 0))
                upgrade = NULL; /* an upgrade with a body is not one we relay */
        r = ingress_request_head(req, upgrade, forwarded_for, http_conn_ssl(c) != NULL, mask, port, &head, &head_len);
        if (r < 0) {
                (void) reply_502(c, "out of memory");
                return;
        }
        r = send_all(fd, head, head_len);
        if (r >= 0)
                r = request_body(c, req, fd);
        if (r < 0) {
                log_debug_errno(r, "Ingress: sending the request to the sandbox failed: %m");
                (void) reply_502(c, "the sandbox did not take the request");
                return;
        }
        buf = malloc(HTTP_HEAD_MAX);
        if (!buf) {
                (void) reply_502(c, "out of memory");
                return;
        }
        for (got = 0;;) {
                r = response_read_head(fd, buf, HTTP_HEAD_MAX, got, &resp_head_len, &got);
                if (r >= 0)
                        r = http_parse_response_head(buf, resp_head_len, &resp);
                if (r < 0) {
                        log_debug_errno(r, "Ingress: no valid response head from the sandbox: %m");
                        (void) reply_502(c, r == -ETIMEDOUT ? "the sandbox did not answer in time"
                                                           : "the sandbox's answer was not valid HTTP/1.1");
                        return;
                }
                if (resp.status >= 100 && resp.status < 200 && resp.status != 101) {
                        /* interim (100 Continue): ours was sent already; skip it, keep what followed */
                        memmove(buf, buf + resp_head_len, got - resp_head_len);
                        got -= resp_head_len;
                        http_head_done(&resp);
                        resp = (HttpHead){};
                        continue;
                }
                break;
        }
        if (resp.status == 101) {
                const void *pending;
                size_t pending_len;
                _cleanup_free_ char *line = NULL;
                int cfd;

                if (!upgrade) {
                        (void) reply_502(c, "the sandbox switched protocols unasked");
                        return;
                }
                r = ingress_response_headers(&resp, true, &hdrs);
                if (r >= 0) {
                        line = strdup_printf("HTTP/1.1 101 Switching Protocols\r\n%s\r\n", hdrs);
                        if (!line)
                                r = -ENOMEM;
                }
                if (r < 0) {
                        (void) reply_502(c, "out of memory");
                        return;
                }
                cfd = http_conn_hijack(c, line, strlen(line), &pending, &pending_len);
                if (cfd < 0)
                        return;
                if (http_conn_ssl(c))
                        r = tls_relay(http_conn_ssl(c), cfd, pending, pending_len, fd, buf + resp_head_len,
                                      got - resp_head_len);
                else
                        r = sock_relay(cfd, pending, pending_len, fd, buf + resp_head_len, got - resp_head_len,
                                       INGRESS_BUFFER, INGRESS_IDLE_TIMEOUT_MSEC);
                if (r < 0)
                        log_debug_errno(r, "Ingress: the relay ended: %m");
                return;
        }
        r = ingress_response_headers(&resp, false, &hdrs);
        if (r < 0) {
                (void) reply_502(c, "out of memory");
                return;
        }
        if (streq(req->method, "HEAD") && resp.content_length >= 0 && !resp.chunked && resp.status != 204 &&
            resp.status != 304) {
                /* the length the GET would have, no body */
                (void) http_conn_sized_begin(c, resp.status, NULL, (uint64_t) resp.content_length, hdrs);
                return;
        }
        if (streq(req->method, "HEAD") || resp.status == 204 || resp.status == 304) {
                (void) http_conn_respond(c, resp.status, NULL, NULL, 0, hdrs);
                return;
        }
        if (resp.content_length >= 0 && !resp.chunked) {
                r = http_conn_sized_begin(c, resp.status, NULL, (uint64_t) resp.content_length, hdrs);
                if (r >= 0)
                        r = response_body(c, &resp, fd, buf + resp_head_len, got - resp_head_len, true);
        } else {
                r = http_conn_stream_begin(c, resp.status, NULL, hdrs);
                if (r >= 0)
                        r = response_body(c, &resp, fd, buf + resp_head_len, got - resp_head_len, false);
                if (r >= 0)
                        r = http_conn_stream_end(c);
        }
        if (r < 0) {
                log_debug_errno(r, "Ingress: the response from the sandbox broke off: %m");
                http_conn_set_close(c); /* the client sees a short body, never a wrong one */
        }
}
