/* SPDX-License-Identifier: MIT */
/* HTTP/1.1 server: an accept loop polling the listener and a stop eventfd,
 * one detached thread per connection (bounded), non-blocking sockets with
 * poll() deadlines for every read and write (slowloris, stalled readers). */

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "http-listen.h"
#include "http-server.h"
#include "log.h"
#include "time-util.h"

#define HTTP_DRAIN_MAX (1024U * 1024U)        /* unread request body we discard to keep a connection */
#define HTTP_LINGER_MSEC 1000                 /* reading leftovers before close, so our answer is not RST */
#define HTTP_CONN_STACK_SIZE (1024U * 1024U)
#define HTTP_ACCEPT_BACKOFF_MSEC 100          /* after EMFILE and friends */
#define HTTP_HEAD_OUT_MAX (64U * 1024U)       /* our own response head incl. extra headers */
#define HTTP_HEAD_HOOK_MAX 256U                /* header lines of the head hook */

typedef enum BodyMode {
        BODY_NONE,
        BODY_LENGTH,
        BODY_CHUNKED,
} BodyMode;

typedef enum RespMode {
        RESP_NONE,
        RESP_FIXED,      /* http_conn_respond(): complete */
        RESP_CHUNKED,    /* stream_begin() */
        RESP_UNTIL_CLOSE, /* stream_begin() to an HTTP/1.0 client: no chunked, close ends it */
        RESP_SIZED,      /* sized_begin() */
} RespMode;

struct HttpConn {
        HttpServer *server;
        HttpConn *prev, *next;
        int fd;
        SSL *ssl; /* TLS (http_server_set_tls()), NULL in plaintext */
        char peer[INET6_ADDRSTRLEN + 8];
        char addr[INET6_ADDRSTRLEN];    /* the peer's address alone, "" for a unix socket */

        char buf[HTTP_HEAD_MAX]; /* raw bytes: the head, then body bytes and pipelined requests */
        size_t rpos, rlen;

        /* current request */
        HttpHead head;
        bool head_request;
        BodyMode body_mode;
        uint64_t body_remaining;
        HttpChunkDecoder decoder;
        bool body_done;
        int body_error;
        bool expect_continue, continue_sent;

        /* current response */
        RespMode resp_mode;
        bool resp_complete;
        uint64_t sized_remaining;

        bool close;  /* no keep-alive after this response */
        bool broken; /* I/O failed or framing unknown: close now */

        /* CLOCK_MONOTONIC msec since which it waits for a request head, 0 while a
         * request is served; read by the accept loop (atomics) to pick whom to evict */
        int64_t waiting_since;
        bool evicted; /* under the server lock */
};

struct HttpServer {
        int listen_fd;
        int stop_fd;
        int port;
        char *unix_path;
        HttpHandler handler;
        HttpHeadHook head_hook;
        HttpThreadHook thread_done_hook;
        HttpH2Hook h2_hook;
        SSL_CTX *tls;
        void *userdata;
        int head_timeout_msec, idle_timeout_msec, body_idle_timeout_msec;
        unsigned peer_waiting_max;      /* 0 = no per-address cap */

        pthread_mutex_t lock;
        pthread_cond_t cond;
        HttpConn *conns;
        unsigned n_conns;
        bool stopping;
};

/* Waits for events on fd until the absolute deadline (msec, CLOCK_MONOTONIC). */
static int wait_fd(int fd, short events, int64_t deadline) {
        for (;;) {
                struct pollfd p = { .fd = fd, .events = events };
                int64_t left = deadline - mono_msec();
                int k;

                if (left <= 0)
                        return -ETIMEDOUT;
                k = poll(&p, 1, (int) MIN(left, (int64_t) INT32_MAX));
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (k > 0)
                        return 0; /* ready, or an error/hangup the next call will report */
        }
}

/* Bytes read, 0 at EOF, -ETIMEDOUT, or -errno. */
/* One TLS read or write: bytes, 0 at a clean close, -EAGAIN with *ret_events what to wait for. */
static ssize_t tls_io(SSL *ssl, bool write, void *buf, size_t n, short *ret_events) {
        int k, e;

        ERR_clear_error();
        k = write ? SSL_write(ssl, buf, (int) MIN(n, (size_t) INT32_MAX)) : SSL_read(ssl, buf, (int) MIN(n, (size_t) INT32_MAX));
        if (k > 0)
                return k;
        e = SSL_get_error(ssl, k);
        switch (e) {
        case SSL_ERROR_WANT_READ:
                *ret_events = POLLIN;
                return -EAGAIN;
        case SSL_ERROR_WANT_WRITE:
                *ret_events = POLLOUT;
                return -EAGAIN;
        case SSL_ERROR_ZERO_RETURN:
                return 0;
        default:
                return write ? -EPIPE : -ECONNRESET;
        }
}

ssize_t http_tls_io(void *ssl, bool write, void *buf, size_t n, short *ret_events) {
        return tls_io(ssl, write, buf, n, ret_events);
}

static ssize_t conn_recv(HttpConn *c, void *buf, size_t n, int64_t deadline) {
        while (c->ssl) {
                short ev = 0;
                ssize_t k = tls_io(c->ssl, false, buf, n, &ev);
                int r;

                if (k != -EAGAIN)
                        return k;
                r = wait_fd(c->fd, ev, deadline);
                if (r < 0)
                        return r;
        }
        for (;;) {
                ssize_t k = recv(c->fd, buf, n, 0);
                int r;

                if (k >= 0)
                        return k;
                if (errno == EINTR)
                        continue;
                if (errno != EAGAIN && errno != EWOULDBLOCK)
                        return negative_errno();
                r = wait_fd(c->fd, POLLIN, deadline);
                if (r < 0)
                        return r;
        }
}

/* Sends all of iov; each stall may last body_idle_timeout_msec. Never raises SIGPIPE. */
static int conn_sendv(HttpConn *c, struct iovec *iov, size_t n_iov) {
        int64_t timeout = c->server->body_idle_timeout_msec;

        if (c->broken)
                return -ECONNRESET;
        while (n_iov > 0) {
                struct msghdr mh = { .msg_iov = iov, .msg_iovlen = n_iov };
                ssize_t k;

                if (iov->iov_len == 0) {
                        iov++;
                        n_iov--;
                        continue;
                }
                if (c->ssl) {
                        short ev = 0;
                        k = tls_io(c->ssl, true, iov->iov_base, iov->iov_len, &ev);
                        if (k == -EAGAIN) {
                                int r = wait_fd(c->fd, ev, mono_msec() + timeout);
                                if (r < 0) {
                                        c->broken = true;
                                        return r;
                                }
                                continue;
                        }
                        if (k <= 0) {
                                c->broken = true;
                                return k < 0 ? (int) k : -EPIPE;
                        }
                        iovec_advance(&iov, &n_iov, (size_t) k);
                        continue;
                }
                k = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
                if (k < 0) {
                        int r;
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN && errno != EWOULDBLOCK) {
                                c->broken = true;
                                return negative_errno();
                        }
                        r = wait_fd(c->fd, POLLOUT, mono_msec() + timeout);
                        if (r < 0) {
                                c->broken = true;
                                return r;
                        }
                        continue;
                }
                iovec_advance(&iov, &n_iov, (size_t) k);
        }
        return 0;
}

static int conn_send(HttpConn *c, const void *p, size_t n) {
        struct iovec iov = { (void *) p, n };
        return conn_sendv(c, &iov, 1);
}

static bool server_stopping(HttpServer *s) {
        bool b;
        pthread_mutex_lock(&s->lock);
        b = s->stopping;
        pthread_mutex_unlock(&s->lock);
        return b;
}

/* Sends the head of a response. framing: "Content-Length: N\r\n", "Transfer-Encoding: chunked\r\n" or "". */
/* Errors before anything was sent leave the connection as it was; after that, the response counts as started. */
static int conn_send_head(HttpConn *c, RespMode mode, int status, const char *content_type, const char *framing,
                          const char *extra_headers, const void *body, size_t n) {
        static const char days[7][4] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
        static const char months[12][4] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
        _cleanup_free_ char *head = NULL;
        char date[64] = "", hooked[HTTP_HEAD_HOOK_MAX] = "";
        struct iovec iov[2];
        struct tm tm;
        time_t t = time(NULL);

        if (status < 200 || status > 599)
                return -EINVAL;
        if (c->resp_mode != RESP_NONE)
                return -EBUSY;
        if (c->broken)
                return -ECONNRESET;

        /* Unread request body we cannot (or should not) discard afterwards, or a body
         * that failed (timeout, bad chunking): say we close. */
        if (c->body_error)
                c->close = true;
        else if (!c->body_done && ((c->expect_continue && !c->continue_sent) ||
                                   (c->body_mode == BODY_LENGTH && c->body_remaining > HTTP_DRAIN_MAX)))
                c->close = true;
        if (server_stopping(c->server))
                c->close = true;

        /* IMF-fixdate, spelled out: strftime()'s %a/%b would follow the locale */
        if (gmtime_r(&t, &tm) && tm.tm_wday >= 0 && tm.tm_wday < 7 && tm.tm_mon >= 0 && tm.tm_mon < 12)
                (void) snprintf(date, sizeof date, "Date: %s, %02d %s %04d %02d:%02d:%02d GMT\r\n",
                                days[tm.tm_wday], tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour,
                                tm.tm_min, tm.tm_sec);
        if (c->server->head_hook)
                c->server->head_hook(hooked, sizeof hooked, c->server->userdata);
        hooked[sizeof hooked - 1] = 0;
        head = strdup_printf("HTTP/1.1 %d %s\r\n%s%s%s%s%s%s%s%s\r\n", status, http_status_reason(status), date,
                             content_type ? "Content-Type: " : "", strempty(content_type),
                             content_type ? "\r\n" : "", framing,
                             c->close ? "Connection: close\r\n"
                             : c->head.version_minor == 0 ? "Connection: keep-alive\r\n" : "",
                             strempty(extra_headers), hooked);
        if (!head)
                return -ENOMEM;
        if (strlen(head) > HTTP_HEAD_OUT_MAX)
                return -E2BIG;

        iov[0] = (struct iovec){ head, strlen(head) };
        iov[1] = (struct iovec){ (void *) body, c->head_request ? 0 : n };
        c->resp_mode = mode;
        return conn_sendv(c, iov, 2);
}

static bool status_has_body(int status) {
        return status != 204 && status != 304;
}

int http_conn_respond(HttpConn *c, int status, const char *content_type, const void *body, size_t n,
                      const char *extra_headers) {
        char framing[64] = "";
        int r;

        if (!c || (!body && n > 0))
                return -EINVAL;
        if (status_has_body(status))
                (void) snprintf(framing, sizeof framing, "Content-Length: %zu\r\n", n);
        else
                n = 0;
        r = conn_send_head(c, RESP_FIXED, status, content_type, framing, extra_headers, body, n);
        if (r < 0)
                return r;
        c->resp_complete = true;
        return 0;
}

/* A JSON error answer of our own (fixed messages only: nothing to escape). */
static int conn_respond_error(HttpConn *c, int status, const char *code, const char *message) {
        _cleanup_free_ char *body = strdup_printf("{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}", code, message);
        if (!body)
                return -ENOMEM;
        return http_conn_respond(c, status, "application/json", body, strlen(body), NULL);
}

int http_conn_stream_begin(HttpConn *c, int status, const char *content_type, const char *extra_headers) {
        bool chunked;
        int r;

        if (!c)
                return -EINVAL;
        if (c->resp_mode != RESP_NONE)
                return -EBUSY;
        chunked = c->head.version_minor >= 1;
        if (!chunked)
                c->close = true; /* HTTP/1.0: the end of the body is the close */
        r = conn_send_head(c, chunked ? RESP_CHUNKED : RESP_UNTIL_CLOSE, status, content_type,
                           chunked ? "Transfer-Encoding: chunked\r\n" : "", extra_headers, NULL, 0);
        if (r < 0)
                return r;
        c->resp_complete = c->head_request;
        return 0;
}

int http_conn_stream_write(HttpConn *c, const void *p, size_t n) {
        char size[32];
        struct iovec iov[3];

        if (!c || (!p && n > 0))
                return -EINVAL;
        if (c->resp_mode != RESP_CHUNKED && c->resp_mode != RESP_UNTIL_CLOSE)
                return -EINVAL;
        if (n == 0 || c->head_request)
                return 0; /* an empty chunk would end the stream */
        if (c->resp_mode == RESP_UNTIL_CLOSE)
                return conn_send(c, p, n);
        (void) snprintf(size, sizeof size, "%zx\r\n", n);
        iov[0] = (struct iovec){ size, strlen(size) };
        iov[1] = (struct iovec){ (void *) p, n };
        iov[2] = (struct iovec){ (void *) "\r\n", 2 };
        return conn_sendv(c, iov, 3);
}

int http_conn_stream_end(HttpConn *c) {
        int r = 0;

        if (!c)
                return -EINVAL;
        if (c->resp_mode != RESP_CHUNKED && c->resp_mode != RESP_UNTIL_CLOSE)
                return -EINVAL;
        if (c->resp_complete)
                return 0;
        if (c->resp_mode == RESP_CHUNKED)
                r = conn_send(c, "0\r\n\r\n", 5);
        if (r >= 0)
                c->resp_complete = true;
        return r;
}

int http_conn_sized_begin(HttpConn *c, int status, const char *content_type, uint64_t length,
                          const char *extra_headers) {
        char framing[64];
        int r;

        if (!c)
                return -EINVAL;
        (void) snprintf(framing, sizeof framing, "Content-Length: %" PRIu64 "\r\n", length);
        r = conn_send_head(c, RESP_SIZED, status, content_type, framing, extra_headers, NULL, 0);
        if (r < 0)
                return r;
        c->sized_remaining = c->head_request ? 0 : length;
        c->resp_complete = c->sized_remaining == 0;
        return 0;
}

int http_conn_sized_write(HttpConn *c, const void *p, size_t n) {
        int r;

        if (!c || (!p && n > 0) || c->resp_mode != RESP_SIZED)
                return -EINVAL;
        if (c->head_request)
                return 0;
        if (n > c->sized_remaining)
                return -EINVAL; /* more than announced */
        r = conn_send(c, p, n);
        if (r < 0)
                return r;
        c->sized_remaining -= n;
        if (c->sized_remaining == 0)
                c->resp_complete = true;
        return 0;
}

static int conn_send_continue(HttpConn *c) {
        static const char msg[] = "HTTP/1.1 100 Continue\r\n\r\n";
        int r;

        c->continue_sent = true;
        r = conn_send(c, msg, STRLEN(msg));
        if (r < 0)
                c->body_error = r;
        return r;
}

/* Requests carry secrets (credential values, API keys): the buffer's bytes
 * are wiped once read, never left for a later request to overwrite, nor in
 * freed memory. Past rlen it holds zeros or what was wiped already. */
static void conn_wipe(HttpConn *c) {
        explicit_bzero(c->buf, c->rlen);
        c->rpos = c->rlen = 0;
}

ssize_t http_conn_read_body(HttpConn *c, void *buf, size_t n) {
        if (!c || !buf || n == 0)
                return -EINVAL;
        if (c->body_error)
                return c->body_error;
        if (c->body_done)
                return 0;
        if (c->expect_continue && !c->continue_sent && c->resp_mode == RESP_NONE) {
                int r = conn_send_continue(c);
                if (r < 0)
                        return r;
        }

        if (c->body_mode == BODY_LENGTH) {
                size_t want = (size_t) MIN((uint64_t) n, c->body_remaining);
                ssize_t k;

                if (c->rpos < c->rlen) {
                        k = (ssize_t) MIN(want, c->rlen - c->rpos);
                        memcpy(buf, c->buf + c->rpos, (size_t) k);
                        c->rpos += (size_t) k;
                } else {
                        k = conn_recv(c, buf, want, mono_msec() + c->server->body_idle_timeout_msec);
                        if (k == 0)
                                k = -ECONNRESET; /* EOF inside the body */
                        if (k < 0)
                                return c->body_error = (int) k;
                }
                c->body_remaining -= (uint64_t) k;
                if (c->body_remaining == 0)
                        c->body_done = true;
                return k;
        }

        /* chunked */
        for (;;) {
                size_t consumed, produced;
                int r;

                if (c->rpos == c->rlen) {
                        ssize_t k;
                        conn_wipe(c);
                        k = conn_recv(c, c->buf, sizeof c->buf, mono_msec() + c->server->body_idle_timeout_msec);
                        if (k == 0)
                                k = -ECONNRESET;
                        if (k < 0)
                                return c->body_error = (int) k;
                        c->rlen = (size_t) k;
                }
                r = http_chunk_decode(&c->decoder, c->buf + c->rpos, c->rlen - c->rpos, buf, n, &consumed,
                                      &produced);
                if (r < 0)
                        return c->body_error = -EINVAL;
                c->rpos += consumed;
                if (r > 0)
                        c->body_done = true;
                if (produced > 0 || r > 0)
                        return (ssize_t) produced;
        }
}

/* A body being read: its bytes are wiped whenever a buffer is let go. */
typedef struct BodyAll {
        char *p;
        size_t allocated;
} BodyAll;

static void body_all_done(BodyAll *b) {
        if (b->p) {
                explicit_bzero(b->p, b->allocated);
                free(b->p);
        }
}

/* Like GREEDY_REALLOC, but the old buffer is wiped, not left in freed memory by realloc(). */
static int body_all_grow(BodyAll *b, size_t used, size_t need) {
        char *p;
        size_t a;

        if (need <= b->allocated)
                return 0;
        a = MAX(need, b->allocated * 2);
        p = malloc(a);
        if (!p)
                return -ENOMEM;
        if (used > 0)
                memcpy(p, b->p, used);
        body_all_done(b);
        b->p = p;
        b->allocated = a;
        return 0;
}

int http_conn_read_body_all(HttpConn *c, size_t max, char **ret, size_t *ret_len) {
        _cleanup_(body_all_done) BodyAll b = {};
        size_t n = 0;

        if (!c || !ret || max >= SIZE_MAX - 1)
                return -EINVAL;
        if (c->body_mode == BODY_LENGTH && !c->body_done && c->head.content_length > (int64_t) MIN(max, (size_t) INT64_MAX))
                return -EFBIG;
        for (;;) {
                ssize_t k;
                size_t want = MIN((size_t) 64 * 1024, max + 1 - n);

                if (b.allocated < n + 2 && body_all_grow(&b, n, n + want + 1) < 0)
                        return -ENOMEM;
                want = MIN(want, b.allocated - n - 1); /* into the room left: a copy only when it is full */
                k = http_conn_read_body(c, b.p + n, want);
                if (k < 0)
                        return (int) k;
                if (k == 0)
                        break;
                n += (size_t) k;
                if (n > max)
                        return -EFBIG;
        }
        b.p[n] = 0; /* grown to n + want + 1 at least once */
        *ret = TAKE_PTR(b.p);
        if (ret_len)
                *ret_len = n;
        return 0;
}

int http_conn_hijack(HttpConn *c, const void *head, size_t n, const void **ret_pending, size_t *ret_pending_len) {
        int r;

        if (!c || c->resp_mode != RESP_NONE || !c->body_done)
                return -EBUSY;
        if (c->broken)
                return -ECONNRESET;
        c->resp_mode = RESP_FIXED;
        c->resp_complete = true;
        c->close = true;
        r = conn_send(c, head, n);
        if (r < 0)
                return r;
        /* ends the connection after the handler: no lingering, no next request */
        c->broken = true;
        *ret_pending = c->buf + c->rpos;
        *ret_pending_len = c->rlen - c->rpos;
        return c->fd;
}

int http_conn_fd(const HttpConn *c) {
        return c ? c->fd : -EBADF;
}

void http_conn_set_idle(HttpConn *c, bool idle) {
        if (c)
                __atomic_store_n(&c->waiting_since, idle ? mono_msec() : 0, __ATOMIC_RELAXED);
}

void *http_conn_ssl(const HttpConn *c) {
        return c ? c->ssl : NULL;
}

bool http_conn_responded(const HttpConn *c) {
        return c && c->resp_mode != RESP_NONE;
}

void http_conn_set_close(HttpConn *c) {
        if (c)
                c->close = true;
}

const char *http_conn_peer(const HttpConn *c) {
        return c ? c->peer : NULL;
}

/* Reads until a complete head is buffered; returns its length. The first
 * request must arrive within the head timeout of the accept; later ones may
 * idle first, and then must complete within the head timeout of their first
 * byte. -ENODATA on a clean close between requests. */
static ssize_t conn_read_head(HttpConn *c, bool first) {
        HttpServer *s = c->server;
        int64_t deadline;
        size_t scanned = 0;
        bool started;

        if (c->rpos > 0) {
                size_t left = c->rlen - c->rpos;

                memmove(c->buf, c->buf + c->rpos, left);
                explicit_bzero(c->buf + left, c->rpos); /* the last request's bytes: no copy stays */
                c->rlen = left;
                c->rpos = 0;
        }
        started = first || c->rlen > 0;
        deadline = mono_msec() + (started ? s->head_timeout_msec : s->idle_timeout_msec);

        for (;;) {
                ssize_t l, k;

                /* RFC 9112 2.2: ignore empty lines before the request-line */
                while (c->rlen >= 2 && c->buf[0] == '\r' && c->buf[1] == '\n') {
                        memmove(c->buf, c->buf + 2, c->rlen - 2);
                        explicit_bzero(c->buf + c->rlen - 2, 2);
                        c->rlen -= 2;
                        scanned = 0;
                }
                l = http_head_length(c->buf + scanned, c->rlen - scanned);
                if (l < 0)
                        return l;
                if (l > 0)
                        return (ssize_t) scanned + l; /* <= HTTP_HEAD_MAX as the buffer is no larger */
                if (c->rlen >= sizeof c->buf)
                        return -E2BIG;
                scanned = c->rlen >= 3 ? c->rlen - 3 : 0;

                k = conn_recv(c, c->buf + c->rlen, sizeof c->buf - c->rlen, deadline);
                if (k < 0)
                        return k;
                if (k == 0)
                        return c->rlen == 0 ? -ENODATA : -ECONNRESET;
                c->rlen += (size_t) k;
                if (!started) {
                        started = true;
                        deadline = mono_msec() + s->head_timeout_msec;
                }
        }
}

/* Discards the rest of the request body (bounded) so the connection can carry the next request. */
static int conn_drain_body(HttpConn *c) {
        char sink[8192];
        size_t total = 0;

        if (c->body_done)
                return 0;
        if (c->body_error)
                return c->body_error;
        if (c->expect_continue && !c->continue_sent)
                return -EPIPE; /* the client may not send it at all */
        if (c->body_mode == BODY_LENGTH && c->body_remaining > HTTP_DRAIN_MAX)
                return -EFBIG;
        for (;;) {
                ssize_t k = http_conn_read_body(c, sink, sizeof sink);
                if (k < 0)
                        return (int) k;
                if (k == 0)
                        return 0;
                total += (size_t) k;
                if (total > HTTP_DRAIN_MAX)
                        return -EFBIG;
        }
}

/* Half-close and read what the client still sends for a moment, so that
 * unread input does not turn our last answer into a RST. */
static void conn_lingering_close(HttpConn *c) {
        int64_t deadline = mono_msec() + MIN(HTTP_LINGER_MSEC, c->server->body_idle_timeout_msec);
        size_t total = 0;

        if (c->ssl)
                (void) SSL_shutdown(c->ssl); /* close_notify, then the same half-close */
        if (shutdown(c->fd, SHUT_WR) < 0)
                return;
        while (total < HTTP_DRAIN_MAX) {
                char sink[4096];
                ssize_t k = conn_recv(c, sink, sizeof sink, deadline);
                if (k <= 0)
                        return;
                total += (size_t) k;
        }
}

static int conn_parse_error(HttpConn *c, int r) {
        c->close = true;
        switch (r) {
        case -E2BIG:
                return conn_respond_error(c, 431, "headers_too_large", "request head too large");
        case -ENAMETOOLONG:
                return conn_respond_error(c, 414, "uri_too_long", "request target too long");
        case -ENOMEM:
                return conn_respond_error(c, 500, "internal", "out of memory");
        default:
                return conn_respond_error(c, 400, "bad_request", "malformed request head");
        }
}

/* RFC 9113 3.4: a client that starts with the HTTP/2 preface (prior
 * knowledge, no Upgrade) gets an HTTP/2 answer it can read: the server's
 * SETTINGS, then GOAWAY with HTTP_1_1_REQUIRED, which tells it to use
 * HTTP/1.1 (where the ingress passes an Upgrade: h2c through). */
#define H2_PREFACE_HEAD "PRI * HTTP/2.0\r\n\r\n"
#define H2_GOAWAY_DEBUG "HTTP/2 is not served here: use HTTP/1.1"

static void conn_refuse_h2(HttpConn *c) {
        uint8_t frames[9 + 9 + 8 + sizeof H2_GOAWAY_DEBUG - 1] = {
                /* SETTINGS, empty: length 0, type 4, flags 0, stream 0 */
                0, 0, 0, 4, 0, 0, 0, 0, 0,
                /* GOAWAY: length 8 + debug, type 7, flags 0, stream 0 */
                0, 0, 8 + sizeof H2_GOAWAY_DEBUG - 1, 7, 0, 0, 0, 0, 0,
                /* last stream 0, error 0xd (HTTP_1_1_REQUIRED) */
                0, 0, 0, 0, 0, 0, 0, 0xd,
        };
        memcpy(frames + 26, H2_GOAWAY_DEBUG, sizeof H2_GOAWAY_DEBUG - 1);
        (void) conn_send(c, frames, sizeof frames);
        c->close = true;
}

static void conn_reset_request(HttpConn *c) {
        http_head_done(&c->head);
        c->head_request = false;
        c->body_mode = BODY_NONE;
        c->body_remaining = 0;
        c->decoder = (HttpChunkDecoder){};
        c->body_done = true;
        c->body_error = 0;
        c->expect_continue = c->continue_sent = false;
        c->resp_mode = RESP_NONE;
        c->resp_complete = false;
        c->sized_remaining = 0;
}

/* The TLS handshake, within the head timeout; ALPN "h2" goes to the HTTP/2 hook. 1 to go on with HTTP/1.1. */
static int conn_tls_accept(HttpConn *c) {
        HttpServer *s = c->server;
        int64_t deadline = mono_msec() + s->head_timeout_msec;
        const unsigned char *alpn = NULL;
        unsigned alpn_len = 0;

        c->ssl = SSL_new(s->tls);
        if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1)
                return -ENOMEM;
        SSL_set_mode(c->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        for (;;) {
                int k, e, r;
                ERR_clear_error();
                k = SSL_accept(c->ssl);
                if (k == 1)
                        break;
                e = SSL_get_error(c->ssl, k);
                if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
                        log_debug("TLS handshake with %s failed", c->peer);
                        return -EPROTO;
                }
                r = wait_fd(c->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline);
                if (r < 0)
                        return r;
        }
        SSL_get0_alpn_selected(c->ssl, &alpn, &alpn_len);
        if (alpn_len == 2 && memcmp(alpn, "h2", 2) == 0) {
                if (s->h2_hook)
                        s->h2_hook(c, c->fd, NULL, 0, s->userdata);
                return 0;
        }
        return 1;
}

static void conn_serve(HttpConn *c) {
        HttpServer *s = c->server;
        bool linger = false;

        if (s->tls) {
                int r;
                /* a handshake in progress counts as waiting for a head (eviction, per-peer cap) */
                __atomic_store_n(&c->waiting_since, mono_msec(), __ATOMIC_RELAXED);
                r = conn_tls_accept(c);
                __atomic_store_n(&c->waiting_since, 0, __ATOMIC_RELAXED);
                if (r <= 0) {
                        c->broken = true;
                        return;
                }
        }

        for (bool first = true;; first = false) {
                const char *expect;
                ssize_t l;
                int r;

                conn_reset_request(c);
                if (server_stopping(s))
                        break;

                __atomic_store_n(&c->waiting_since, mono_msec(), __ATOMIC_RELAXED);
                l = conn_read_head(c, first);
                __atomic_store_n(&c->waiting_since, 0, __ATOMIC_RELAXED);
                if (l == -E2BIG) {
                        (void) conn_parse_error(c, (int) l);
                        linger = true;
                        break;
                }
                if (l < 0) /* timeout, reset or clean close: nothing to answer */
                        break;

                if (first && (size_t) l == strlen(H2_PREFACE_HEAD) && memcmp(c->buf, H2_PREFACE_HEAD, (size_t) l) == 0 &&
                    s->h2_hook) {
                        s->h2_hook(c, c->fd, c->buf, c->rlen, s->userdata);
                        c->broken = true; /* nothing more of HTTP/1.1 on it */
                        break;
                }
                if (first && (size_t) l == strlen(H2_PREFACE_HEAD) && memcmp(c->buf, H2_PREFACE_HEAD, (size_t) l) == 0) {
                        log_debug("HTTP/2 with prior knowledge from %s: GOAWAY HTTP_1_1_REQUIRED", c->peer);
                        conn_refuse_h2(c);
                        linger = true;
                        break;
                }
                r = http_parse_request_head(c->buf, (size_t) l, &c->head);
                c->rpos = (size_t) l;
                if (r < 0) {
                        log_debug_errno(r, "Bad request head from %s: %m", c->peer);
                        (void) conn_parse_error(c, r);
                        linger = true;
                        break;
                }

                c->head_request = streq(c->head.method, "HEAD");
                if (c->head.chunked) {
                        c->body_mode = BODY_CHUNKED;
                        c->body_done = false;
                } else if (c->head.content_length > 0) {
                        c->body_mode = BODY_LENGTH;
                        c->body_remaining = (uint64_t) c->head.content_length;
                        c->body_done = false;
                }
                expect = http_head_header(&c->head, "Expect");
                c->expect_continue = !c->body_done && c->head.version_minor >= 1 && expect &&
                                     strcasecmp(expect, "100-continue") == 0;
                c->close = !c->head.keep_alive;

                s->handler(c, &c->head, s->userdata);

                if (c->resp_mode == RESP_NONE && !c->broken)
                        (void) conn_respond_error(c, 500, "internal", "no response");
                if (c->broken)
                        break;
                linger = true;
                if (!c->resp_complete)
                        break; /* a stream or sized body the handler left unfinished: only a close ends it */
                if (conn_drain_body(c) < 0)
                        break;
                if (c->close)
                        break;
                linger = false;
        }
        if (linger && !c->broken)
                conn_lingering_close(c);
        conn_reset_request(c);
}

static void server_unlink_conn(HttpServer *s, HttpConn *c) {
        if (c->prev)
                c->prev->next = c->next;
        else
                s->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->prev = c->next = NULL;
}

static void *conn_thread(void *arg) {
        HttpConn *c = arg;
        HttpServer *s = c->server;

        conn_serve(c);
        if (s->thread_done_hook)
                s->thread_done_hook(s->userdata);

        /* Out of the list first, so stop() never shuts down a reused fd number. */
        pthread_mutex_lock(&s->lock);
        server_unlink_conn(s, c);
        pthread_mutex_unlock(&s->lock);
        if (c->ssl)
                SSL_free(c->ssl);
        safe_close(c->fd);
        conn_wipe(c);
        free(c);

        pthread_mutex_lock(&s->lock);
        s->n_conns--;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        return NULL;
}

static void format_peer(const struct sockaddr_storage *sa, char *buf, size_t n, char addr[static INET6_ADDRSTRLEN]) {
        char a[INET6_ADDRSTRLEN] = "?";

        addr[0] = 0;
        if (sa->ss_family == AF_INET) {
                const struct sockaddr_in *in = (const struct sockaddr_in *) sa;
                (void) inet_ntop(AF_INET, &in->sin_addr, a, sizeof a);
                (void) snprintf(buf, n, "%s:%u", a, ntohs(in->sin_port));
                memcpy(addr, a, sizeof a);
        } else if (sa->ss_family == AF_INET6) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) sa;
                (void) inet_ntop(AF_INET6, &in6->sin6_addr, a, sizeof a);
                (void) snprintf(buf, n, "[%s]:%u", a, ntohs(in6->sin6_port));
                memcpy(addr, a, sizeof a);
        } else
                (void) snprintf(buf, n, "unix");
}

/* Under the lock: a peer address that already has peer_waiting_max
 * connections waiting for a request head (idle keep-alive, or not yet
 * sent) loses its oldest one to its newcomer, so one address cannot fill
 * the server with connections nobody authenticated. */
static void server_cap_peer_locked(HttpServer *s, const char *addr) {
        HttpConn *victim = NULL;
        int64_t oldest = INT64_MAX;
        unsigned waiting = 0;

        if (!addr[0])
                return;
        for (HttpConn *o = s->conns; o; o = o->next) {
                int64_t w = __atomic_load_n(&o->waiting_since, __ATOMIC_RELAXED);
                if (w <= 0 || o->evicted || !streq(o->addr, addr))
                        continue;
                waiting++;
                if (w < oldest) {
                        oldest = w;
                        victim = o;
                }
        }
        unsigned max = __atomic_load_n(&s->peer_waiting_max, __ATOMIC_RELAXED);

        if (max == 0 || waiting < max || !victim)
                return;
        victim->evicted = true;
        (void) shutdown(victim->fd, SHUT_RDWR);
}

/* Connections past HTTP_CONNECTIONS_MAX while evicted ones are still closing. */
#define HTTP_EVICT_SLACK 64U

/* Over HTTP_CONNECTIONS_MAX: answer from the accept loop without blocking, then close. */
static void refuse_connection(int fd) {
#define REFUSE_BODY "{\"error\":{\"code\":\"unavailable\",\"message\":\"too many open connections\"}}"
        char msg[256], sink[4096];
        int n = snprintf(msg, sizeof msg,
                         "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                         "Content-Length: %zu\r\nConnection: close\r\nRetry-After: 1\r\n\r\n%s",
                         STRLEN(REFUSE_BODY), REFUSE_BODY);

        if (n > 0 && (size_t) n < sizeof msg)
                (void) send(fd, msg, (size_t) n, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void) shutdown(fd, SHUT_WR);
        (void) recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        safe_close(fd);
}

static int server_accept(HttpServer *s) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_storage sa = {};
        socklen_t salen = sizeof sa;
        char peer[INET6_ADDRSTRLEN + 8], addr[INET6_ADDRSTRLEN];
        pthread_attr_t attr;
        pthread_t t;
        HttpConn *c;
        int one = 1, r;

        fd = accept4(s->listen_fd, (struct sockaddr *) &sa, &salen, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
                return negative_errno();
        if (sa.ss_family == AF_INET || sa.ss_family == AF_INET6)
                (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        format_peer(&sa, peer, sizeof peer, addr);

        pthread_mutex_lock(&s->lock);
        server_cap_peer_locked(s, addr);
        if (s->n_conns >= HTTP_CONNECTIONS_MAX) {
                /* Full: rather than refuse the newcomer, drop the connection that has
                 * waited longest for a request head (idle keep-alive, or a slowloris
                 * client trickling bytes), so slow clients cannot lock everyone out. */
                HttpConn *victim = NULL;
                int64_t oldest = INT64_MAX;
                if (s->n_conns < HTTP_CONNECTIONS_MAX + HTTP_EVICT_SLACK)
                        for (HttpConn *o = s->conns; o; o = o->next) {
                                int64_t w = __atomic_load_n(&o->waiting_since, __ATOMIC_RELAXED);
                                if (w > 0 && w < oldest && !o->evicted) {
                                        oldest = w;
                                        victim = o;
                                }
                        }
                if (!victim) {
                        pthread_mutex_unlock(&s->lock);
                        refuse_connection(TAKE_FD(fd));
                        return 0;
                }
                victim->evicted = true;
                (void) shutdown(victim->fd, SHUT_RDWR);
        }
        pthread_mutex_unlock(&s->lock);

        c = new0(HttpConn, 1);
        if (!c) {
                refuse_connection(TAKE_FD(fd));
                return 0;
        }
        c->server = s;
        c->fd = fd;
        memcpy(c->peer, peer, sizeof c->peer);
        memcpy(c->addr, addr, sizeof c->addr);

        pthread_mutex_lock(&s->lock);
        c->next = s->conns;
        if (s->conns)
                s->conns->prev = c;
        s->conns = c;
        s->n_conns++;
        pthread_mutex_unlock(&s->lock);

        r = -pthread_attr_init(&attr);
        if (r == 0) {
                (void) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                (void) pthread_attr_setstacksize(&attr, HTTP_CONN_STACK_SIZE);
                r = -pthread_create(&t, &attr, conn_thread, c);
                pthread_attr_destroy(&attr);
        }
        if (r < 0) {
                pthread_mutex_lock(&s->lock);
                server_unlink_conn(s, c);
                s->n_conns--;
                pthread_mutex_unlock(&s->lock);
                free(c);
                refuse_connection(TAKE_FD(fd));
                return 0;
        }
        TAKE_FD(fd); /* the thread owns it now */
        return 0;
}

static void server_close_listener(HttpServer *s) {
        s->listen_fd = safe_close(s->listen_fd);
        if (s->unix_path) {
                (void) unlink(s->unix_path);
                s->unix_path = mfree(s->unix_path);
        }
}

static void server_shutdown_conns(HttpServer *s) {
        pthread_mutex_lock(&s->lock);
        s->stopping = true;
        for (HttpConn *c = s->conns; c; c = c->next)
                (void) shutdown(c->fd, SHUT_RDWR);
        pthread_mutex_unlock(&s->lock);
}

int http_server_run(HttpServer *s) {
        int backoff = -1;

        if (!s || s->listen_fd < 0)
                return -EINVAL;
        for (;;) {
                struct pollfd p[2] = {
                        { .fd = s->stop_fd, .events = POLLIN },
                        { .fd = s->listen_fd, .events = POLLIN },
                };
                int k, r;

                /* While backing off, watch only the stop fd. */
                k = poll(p, backoff < 0 ? 2 : 1, backoff);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                backoff = -1;
                if (p[0].revents)
                        break;
                if (!p[1].revents)
                        continue;
                r = server_accept(s);
                if (r == -EMFILE || r == -ENFILE || r == -ENOBUFS || r == -ENOMEM) {
                        log_debug_errno(r, "accept() failed, backing off: %m");
                        backoff = HTTP_ACCEPT_BACKOFF_MSEC;
                } else if (r == -EBADF || r == -EINVAL || r == -ENOTSOCK)
                        return r;
                /* anything else (EAGAIN, ECONNABORTED, EPROTO, EPERM, ...) concerns one connection */
        }

        server_close_listener(s);
        server_shutdown_conns(s);
        return 0;
}

void http_server_stop(HttpServer *s) {
        uint64_t one = 1;
        int saved = errno;

        /* write(2) on an eventfd: async-signal-safe */
        if (s && s->stop_fd >= 0)
                (void) !write(s->stop_fd, &one, sizeof one);
        errno = saved;
}

void http_server_set_timeouts(HttpServer *s, int head_msec, int idle_msec, int body_idle_msec) {
        if (!s)
                return;
        if (head_msec > 0)
                s->head_timeout_msec = head_msec;
        if (idle_msec > 0)
                s->idle_timeout_msec = idle_msec;
        if (body_idle_msec > 0)
                s->body_idle_timeout_msec = body_idle_msec;
}

void http_server_set_peer_waiting_max(HttpServer *s, unsigned n) {
        if (s)
                __atomic_store_n(&s->peer_waiting_max, n, __ATOMIC_RELAXED);
}

void http_server_set_thread_done_hook(HttpServer *s, HttpThreadHook hook) {
        s->thread_done_hook = hook;
}

void http_server_set_tls(HttpServer *s, void *ssl_ctx) {
        s->tls = ssl_ctx;
}

void http_server_set_h2_hook(HttpServer *s, HttpH2Hook hook) {
        s->h2_hook = hook;
}

void http_server_set_head_hook(HttpServer *s, HttpHeadHook hook) {
        s->head_hook = hook;
}

int http_server_port(const HttpServer *s) {
        return s ? s->port : -EINVAL;
}

HttpServer *http_server_free(HttpServer *s) {
        if (!s)
                return NULL;
        server_close_listener(s);
        server_shutdown_conns(s);
        pthread_mutex_lock(&s->lock);
        while (s->n_conns > 0)
                pthread_cond_wait(&s->cond, &s->lock);
        pthread_mutex_unlock(&s->lock);
        pthread_cond_destroy(&s->cond);
        pthread_mutex_destroy(&s->lock);
        safe_close(s->stop_fd);
        free(s);
        return NULL;
}

int http_server_new(const char *listen_address, HttpHandler handler, void *userdata, HttpServer **ret) {
        HttpServer *s;
        int r;

        if (!listen_address || !handler || !ret)
                return -EINVAL;
        s = new0(HttpServer, 1);
        if (!s)
                return -ENOMEM;
        *s = (HttpServer){
                .listen_fd = -EBADF,
                .handler = handler,
                .userdata = userdata,
                .head_timeout_msec = HTTP_HEAD_TIMEOUT_MSEC,
                .idle_timeout_msec = HTTP_IDLE_TIMEOUT_MSEC,
                .body_idle_timeout_msec = HTTP_BODY_IDLE_TIMEOUT_MSEC,
        };
        pthread_mutex_init(&s->lock, NULL);
        pthread_cond_init(&s->cond, NULL);
        s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (s->stop_fd < 0) {
                r = negative_errno();
                goto fail;
        }

        r = http_listen(listen_address, &s->listen_fd, &s->port, &s->unix_path);
        if (r < 0)
                goto fail;
        *ret = s;
        return 0;
fail:
        http_server_free(s);
        return r;
}
