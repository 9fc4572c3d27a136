/* SPDX-License-Identifier: MIT */
/* Blocking HTTP/1.1 client over one (keep-alive) connection: non-blocking
 * socket plus poll() so every read and write honours the timeout. */

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "http-client.h"
#include "sock-io.h"
#include "time-util.h"

#define HTTP_CLIENT_REPLAY_MAX (64U * 1024U) /* requests up to this size are resent once on a stale connection */
#define HTTP_CLIENT_URL_MAX 4096U

typedef enum ClientState {
        CLIENT_IDLE,           /* no request in flight */
        CLIENT_SENDING_BODY,   /* chunked upload in progress */
        CLIENT_AWAIT_RESPONSE, /* request sent, head not read */
        CLIENT_READING_BODY,   /* head read, body not finished */
} ClientState;

typedef enum ClientBody {
        CLIENT_BODY_NONE,
        CLIENT_BODY_LENGTH,
        CLIENT_BODY_CHUNKED,
        CLIENT_BODY_CLOSE,
} ClientBody;

struct HttpClient {
        char *host, *port;   /* TCP */
        char *unix_path;     /* or AF_UNIX */
        char *host_header;
        int fd;
        int timeout_msec;
        unsigned n_on_conn;  /* responses completed on this connection */

        char buf[HTTP_HEAD_MAX];
        size_t rpos, rlen;

        ClientState state;
        bool head_request;
        bool upload_aborted;
        char *replay; /* the last request, if small and idempotent, for one resend on a stale connection */
        size_t replay_len;

        HttpHead head;
        bool have_head;
        ClientBody body;
        uint64_t remaining;
        HttpChunkDecoder decoder;
        bool keep_alive;
};

static int client_wait(HttpClient *c, short events) {
        return sock_wait(c->fd, events, c->timeout_msec);
}

static void client_disconnect(HttpClient *c) {
        c->fd = safe_close(c->fd);
        c->rpos = c->rlen = 0;
        c->n_on_conn = 0;
}

static ssize_t client_recv(HttpClient *c, void *buf, size_t n) {
        for (;;) {
                ssize_t k = recv(c->fd, buf, n, 0);
                int r;

                if (k >= 0)
                        return k;
                if (errno == EINTR)
                        continue;
                if (errno != EAGAIN && errno != EWOULDBLOCK)
                        return negative_errno();
                r = client_wait(c, POLLIN);
                if (r < 0)
                        return r;
        }
}

static int client_sendv(HttpClient *c, struct iovec *iov, size_t n_iov) {
        while (n_iov > 0) {
                struct msghdr mh = { .msg_iov = iov, .msg_iovlen = n_iov };
                ssize_t k;

                if (iov->iov_len == 0) {
                        iov++;
                        n_iov--;
                        continue;
                }
                k = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
                if (k < 0) {
                        int r;
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN && errno != EWOULDBLOCK)
                                return negative_errno();
                        r = client_wait(c, POLLOUT);
                        if (r < 0)
                                return r;
                        continue;
                }
                iovec_advance(&iov, &n_iov, (size_t) k);
        }
        return 0;
}

static int client_send(HttpClient *c, const void *p, size_t n) {
        struct iovec iov = { (void *) p, n };
        return client_sendv(c, &iov, 1);
}

static int connect_one(HttpClient *c, int family, const struct sockaddr *sa, socklen_t salen) {
        _cleanup_close_ int fd = -EBADF;
        int one = 1, r;

        fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return negative_errno();
        if (family != AF_UNIX)
                (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        r = sock_connect_until(fd, sa, salen, c->timeout_msec >= 0 ? mono_msec() + c->timeout_msec : -1);
        if (r < 0)
                return r;
        c->fd = TAKE_FD(fd);
        c->rpos = c->rlen = 0;
        c->n_on_conn = 0;
        return 0;
}

static int client_connect(HttpClient *c) {
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
        struct addrinfo *ai = NULL;
        int r = -EHOSTUNREACH;

        client_disconnect(c);
        if (c->unix_path) {
                struct sockaddr_un sa = { .sun_family = AF_UNIX };
                memcpy(sa.sun_path, c->unix_path, strlen(c->unix_path) + 1);
                return connect_one(c, AF_UNIX, (struct sockaddr *) &sa, sizeof sa);
        }

        r = getaddrinfo(c->host, c->port, &hints, &ai);
        if (r != 0)
                return r == EAI_SYSTEM ? negative_errno() : -EHOSTUNREACH;
        r = -EHOSTUNREACH;
        for (struct addrinfo *i = ai; i; i = i->ai_next) {
                r = connect_one(c, i->ai_family, i->ai_addr, i->ai_addrlen);
                if (r >= 0)
                        break;
        }
        freeaddrinfo(ai);
        return r;
}

int http_client_new(const char *base_url, HttpClient **ret) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        const char *rest, *path;

        if (!base_url || !ret || strlen(base_url) > HTTP_CLIENT_URL_MAX)
                return -EINVAL;
        c = new0(HttpClient, 1);
        if (!c)
                return -ENOMEM;
        c->fd = -EBADF;
        c->timeout_msec = -1;
        c->head = (HttpHead){ .content_length = -1 };

        path = startswith(base_url, "unix:");
        if (path) {
                if (path[0] != '/' || strlen(path) >= sizeof(((struct sockaddr_un *) NULL)->sun_path))
                        return -EINVAL;
                c->unix_path = strdup(path);
                c->host_header = strdup("localhost");
                if (!c->unix_path || !c->host_header)
                        return -ENOMEM;
        } else {
                const char *hostport_end, *colon = NULL;
                size_t hl;

                rest = startswith(base_url, "http://");
                if (!rest)
                        return startswith(base_url, "https://") ? -EPROTONOSUPPORT : -EINVAL;
                hostport_end = strchr(rest, '/');
                if (hostport_end && !streq(hostport_end, "/"))
                        return -EINVAL; /* a base URL, not one with a path */
                hl = hostport_end ? (size_t) (hostport_end - rest) : strlen(rest);
                if (hl == 0)
                        return -EINVAL;
                c->host_header = strndup(rest, hl);
                if (!c->host_header)
                        return -ENOMEM;
                for (const char *i = c->host_header; *i; i++)
                        if ((unsigned char) *i <= ' ' || *i == '@' || *i == '?' || *i == '#' || (unsigned char) *i >= 0x7f)
                                return -EINVAL;

                if (c->host_header[0] == '[') {
                        const char *rb = strchr(c->host_header, ']');
                        if (!rb || (rb[1] != 0 && rb[1] != ':'))
                                return -EINVAL;
                        c->host = strndup(c->host_header + 1, (size_t) (rb - c->host_header - 1));
                        if (rb[1] == ':')
                                colon = rb + 1;
                } else {
                        colon = strchr(c->host_header, ':');
                        c->host = strndup(c->host_header, colon ? (size_t) (colon - c->host_header) : strlen(c->host_header));
                }
                if (!c->host)
                        return -ENOMEM;
                if (isempty(c->host))
                        return -EINVAL;
                if (colon) {
                        unsigned port;
                        if (safe_atou(colon + 1, &port) < 0 || port == 0 || port > 65535)
                                return -EINVAL;
                        c->port = strdup(colon + 1);
                } else
                        c->port = strdup("80");
                if (!c->port)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

HttpClient *http_client_free(HttpClient *c) {
        if (!c)
                return NULL;
        safe_close(c->fd);
        http_head_done(&c->head);
        free(c->replay);
        free(c->host);
        free(c->port);
        free(c->unix_path);
        free(c->host_header);
        free(c);
        return NULL;
}

void http_client_set_timeout(HttpClient *c, int timeout_msec) {
        if (c)
                c->timeout_msec = timeout_msec < 0 ? -1 : timeout_msec;
}

int http_client_fd(const HttpClient *c) {
        return c ? c->fd : -EBADF;
}

int http_client_take_upgraded(HttpClient *c, int *ret_fd, char **ret_pending, size_t *ret_pending_len) {
        _cleanup_free_ char *pending = NULL;
        size_t n;

        if (!c || !c->have_head || c->head.status != 101 || c->fd < 0)
                return -EINVAL;
        n = c->rlen - c->rpos;
        pending = malloc(n + 1);
        if (!pending)
                return -ENOMEM;
        memcpy(pending, c->buf + c->rpos, n);
        *ret_fd = TAKE_FD(c->fd);
        *ret_pending = TAKE_PTR(pending);
        *ret_pending_len = n;
        c->state = CLIENT_IDLE;
        c->have_head = false;
        client_disconnect(c);
        return 0;
}

static bool is_token(const char *s) {
        if (isempty(s))
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
                      strchr("!#$%&'*+-.^_`|~", *s)))
                        return false;
        return true;
}

/* Caller-provided header lines: "Name: value\r\n" each, nothing that could end the head or split a line. */
static bool headers_valid(const char *h) {
        size_t n = strlen(h);

        if (n == 0)
                return true;
        if (n < 2 || h[n - 2] != '\r' || h[n - 1] != '\n' || h[0] == '\r' || strstr(h, "\r\n\r\n"))
                return false;
        for (size_t i = 0; i < n; i++) {
                if (h[i] == '\r' && h[i + 1] != '\n')
                        return false;
                if (h[i] == '\n' && (i == 0 || h[i - 1] != '\r'))
                        return false;
        }
        return true;
}

/* The connection is fit for another request: idle, nothing unexpected to read, no EOF pending. */
static bool client_conn_alive(HttpClient *c) {
        struct pollfd p = { .fd = c->fd, .events = POLLIN | POLLRDHUP };

        if (c->fd < 0 || c->rpos != c->rlen)
                return false;
        if (poll(&p, 1, 0) != 0)
                return false;
        return true;
}

int http_client_request(HttpClient *c, const char *method, const char *target, const char *headers,
                        const void *body, size_t body_len) {
        _cleanup_free_ char *head = NULL;
        char framing[64] = "";
        bool chunked = body_len == SIZE_MAX, reused;
        int r;

        if (!c || !is_token(method) || strlen(method) >= sizeof(c->head.method) || !target || target[0] != '/' ||
            strlen(target) > HTTP_URL_MAX || (!body && body_len > 0 && !chunked))
                return -EINVAL;
        for (const char *i = target; *i; i++)
                if ((unsigned char) *i <= ' ' || (unsigned char) *i >= 0x7f)
                        return -EINVAL;
        if (headers && !headers_valid(headers))
                return -EINVAL;

        /* A previous exchange left unfinished: its bytes would be taken for our response. */
        if (c->state != CLIENT_IDLE)
                client_disconnect(c);
        c->state = CLIENT_IDLE;
        http_head_done(&c->head);
        c->have_head = false;
        c->replay = mfree(c->replay);
        c->replay_len = 0;
        c->upload_aborted = false;
        c->head_request = streq(method, "HEAD");

        if (c->fd >= 0 && !client_conn_alive(c))
                client_disconnect(c); /* the server closed the idle connection */
        reused = c->fd >= 0;

        if (chunked)
                (void) snprintf(framing, sizeof framing, "Transfer-Encoding: chunked\r\n");
        else if (body || !(streq(method, "GET") || streq(method, "HEAD") || streq(method, "DELETE") ||
                           streq(method, "OPTIONS")))
                (void) snprintf(framing, sizeof framing, "Content-Length: %zu\r\n", body_len);
        head = strdup_printf("%s %s HTTP/1.1\r\nHost: %s\r\n%s%s\r\n", method, target, c->host_header,
                             strempty(headers), framing);
        if (!head)
                return -ENOMEM;
        if (strlen(head) > HTTP_HEAD_MAX)
                return -E2BIG;

        for (unsigned attempt = 0;; attempt++) {
                struct iovec iov[2] = {
                        { head, strlen(head) },
                        { (void *) body, chunked ? 0 : body_len },
                };

                if (c->fd < 0) {
                        r = client_connect(c);
                        if (r < 0)
                                return r;
                }
                r = client_sendv(c, iov, 2);
                if (r >= 0)
                        break;
                client_disconnect(c);
                /* A connection that served before may have been closed under us: one fresh try. */
                if (!reused || attempt > 0 || (r != -EPIPE && r != -ECONNRESET))
                        return r;
        }

        /* RFC 9110 9.2.2: only idempotent requests may be repeated without asking */
        if (reused && !chunked && strlen(head) + body_len <= HTTP_CLIENT_REPLAY_MAX &&
            (streq(method, "GET") || streq(method, "HEAD") || streq(method, "PUT") || streq(method, "DELETE") ||
             streq(method, "OPTIONS"))) {
                size_t hl = strlen(head);
                c->replay = malloc(hl + body_len + 1);
                if (c->replay) {
                        memcpy(c->replay, head, hl);
                        if (body_len > 0)
                                memcpy(c->replay + hl, body, body_len);
                        c->replay_len = hl + body_len;
                }
        }
        c->state = chunked ? CLIENT_SENDING_BODY : CLIENT_AWAIT_RESPONSE;
        return 0;
}

int http_client_write_body(HttpClient *c, const void *p, size_t n) {
        char size[32];
        struct iovec iov[3];
        int r;

        if (!c || (!p && n > 0))
                return -EINVAL;
        if (c->state != CLIENT_SENDING_BODY)
                return -EINVAL;
        if (n == 0)
                return 0; /* an empty chunk would end the body */
        (void) snprintf(size, sizeof size, "%zx\r\n", n);
        iov[0] = (struct iovec){ size, strlen(size) };
        iov[1] = (struct iovec){ (void *) p, n };
        iov[2] = (struct iovec){ (void *) "\r\n", 2 };
        r = client_sendv(c, iov, 3);
        if (r < 0)
                c->upload_aborted = true;
        return r;
}

int http_client_end_body(HttpClient *c) {
        int r;

        if (!c || c->state != CLIENT_SENDING_BODY)
                return -EINVAL;
        r = client_send(c, "0\r\n\r\n", 5);
        if (r < 0)
                c->upload_aborted = true;
        c->state = CLIENT_AWAIT_RESPONSE;
        return r;
}

/* The exchange is over: keep the connection for the next request or close it. */
static void client_finish(HttpClient *c) {
        c->state = CLIENT_IDLE;
        c->n_on_conn++;
        if (!c->keep_alive || c->upload_aborted)
                client_disconnect(c);
}

static void client_fail(HttpClient *c) {
        c->state = CLIENT_IDLE;
        client_disconnect(c);
}

/* Reads one head into c->buf[0..len). -ENODATA: EOF before any byte. */
static ssize_t client_read_head(HttpClient *c) {
        size_t scanned = 0;

        if (c->rpos > 0) {
                memmove(c->buf, c->buf + c->rpos, c->rlen - c->rpos);
                c->rlen -= c->rpos;
                c->rpos = 0;
        }
        for (;;) {
                ssize_t l = http_head_length(c->buf + scanned, c->rlen - scanned), k;

                if (l < 0)
                        return l;
                if (l > 0)
                        return (ssize_t) scanned + l;
                if (c->rlen >= sizeof c->buf)
                        return -E2BIG;
                scanned = c->rlen >= 3 ? c->rlen - 3 : 0;
                k = client_recv(c, c->buf + c->rlen, sizeof c->buf - c->rlen);
                if (k < 0)
                        return k;
                if (k == 0)
                        return c->rlen == 0 ? -ENODATA : -ECONNRESET;
                c->rlen += (size_t) k;
        }
}

int http_client_response(HttpClient *c, const HttpHead **ret) {
        bool resent = false;
        int r;

        if (!c || !ret)
                return -EINVAL;
        if (c->have_head) {
                *ret = &c->head;
                return 0;
        }
        if (c->state == CLIENT_SENDING_BODY)
                c->upload_aborted = true; /* an early answer (e.g. 413): the upload ends here */
        else if (c->state != CLIENT_AWAIT_RESPONSE)
                return -EINVAL;
        if (c->fd < 0)
                return -ENOTCONN;

        for (;;) {
                ssize_t l = client_read_head(c);

                if (l == -ENODATA || l == -ECONNRESET) {
                        /* Stale keep-alive connection closed as we sent: resend once if we still can. */
                        if (c->replay && !resent && c->rlen == 0) {
                                resent = true;
                                r = client_connect(c);
                                if (r >= 0)
                                        r = client_send(c, c->replay, c->replay_len);
                                if (r < 0) {
                                        client_fail(c);
                                        return r;
                                }
                                continue;
                        }
                        client_fail(c);
                        return -ECONNRESET;
                }
                if (l < 0) {
                        client_fail(c);
                        return (int) l;
                }
                http_head_done(&c->head);
                r = http_parse_response_head(c->buf, (size_t) l, &c->head);
                c->rpos = (size_t) l;
                if (r < 0) {
                        client_fail(c);
                        return r;
                }
                if (c->head.status >= 100 && c->head.status < 200 && c->head.status != 101)
                        continue; /* 100 Continue and other interim answers */
                break;
        }
        c->replay = mfree(c->replay);
        c->replay_len = 0;

        c->have_head = true;
        c->decoder = (HttpChunkDecoder){};
        c->remaining = 0;
        if (c->head_request || c->head.status < 200 || c->head.status == 204 || c->head.status == 304)
                c->body = CLIENT_BODY_NONE;
        else if (c->head.chunked)
                c->body = CLIENT_BODY_CHUNKED;
        else if (c->head.content_length >= 0) {
                c->body = c->head.content_length > 0 ? CLIENT_BODY_LENGTH : CLIENT_BODY_NONE;
                c->remaining = (uint64_t) c->head.content_length;
        } else
                c->body = CLIENT_BODY_CLOSE;
        c->keep_alive = c->head.keep_alive && c->body != CLIENT_BODY_CLOSE && c->head.status != 101;

        c->state = CLIENT_READING_BODY;
        if (c->body == CLIENT_BODY_NONE && c->head.status != 101) /* a 101's connection waits to be taken */
                client_finish(c);
        *ret = &c->head;
        return 0;
}

ssize_t http_client_read_body(HttpClient *c, void *buf, size_t n) {
        const HttpHead *h;
        int r;

        if (!c || !buf || n == 0)
                return -EINVAL;
        if (!c->have_head) {
                r = http_client_response(c, &h);
                if (r < 0)
                        return r;
        }
        if (c->state != CLIENT_READING_BODY)
                return 0;

        switch (c->body) {
        case CLIENT_BODY_LENGTH: {
                size_t want = (size_t) MIN((uint64_t) n, c->remaining);
                ssize_t k;

                if (c->rpos < c->rlen) {
                        k = (ssize_t) MIN(want, c->rlen - c->rpos);
                        memcpy(buf, c->buf + c->rpos, (size_t) k);
                        c->rpos += (size_t) k;
                } else {
                        k = client_recv(c, buf, want);
                        if (k == 0)
                                k = -ECONNRESET; /* truncated body */
                        if (k < 0) {
                                client_fail(c);
                                return k;
                        }
                }
                c->remaining -= (uint64_t) k;
                if (c->remaining == 0)
                        client_finish(c);
                return k;
        }

        case CLIENT_BODY_CLOSE: {
                ssize_t k;
                if (c->rpos < c->rlen) {
                        k = (ssize_t) MIN(n, c->rlen - c->rpos);
                        memcpy(buf, c->buf + c->rpos, (size_t) k);
                        c->rpos += (size_t) k;
                        return k;
                }
                k = client_recv(c, buf, n);
                if (k < 0) {
                        client_fail(c);
                        return k;
                }
                if (k == 0)
                        client_finish(c); /* keep_alive is false: closes */
                return k;
        }

        case CLIENT_BODY_CHUNKED:
                for (;;) {
                        size_t consumed, produced;

                        if (c->rpos == c->rlen) {
                                ssize_t k;
                                c->rpos = c->rlen = 0;
                                k = client_recv(c, c->buf, sizeof c->buf);
                                if (k == 0)
                                        k = -ECONNRESET;
                                if (k < 0) {
                                        client_fail(c);
                                        return k;
                                }
                                c->rlen = (size_t) k;
                        }
                        r = http_chunk_decode(&c->decoder, c->buf + c->rpos, c->rlen - c->rpos, buf, n, &consumed,
                                              &produced);
                        if (r < 0) {
                                client_fail(c);
                                return r;
                        }
                        c->rpos += consumed;
                        if (r > 0)
                                client_finish(c);
                        if (produced > 0 || r > 0)
                                return (ssize_t) produced;
                }

        default:
                client_finish(c);
                return 0;
        }
}

int http_client_read_body_all(HttpClient *c, size_t max, char **ret, size_t *ret_len) {
        _cleanup_free_ char *b = NULL;
        size_t n = 0, allocated = 0;

        if (!c || !ret || max >= SIZE_MAX - 1)
                return -EINVAL;
        for (;;) {
                size_t want = MIN((size_t) 64 * 1024, max + 1 - n);
                ssize_t k;

                if (GREEDY_REALLOC(b, allocated, n + want + 1) < 0)
                        return -ENOMEM;
                k = http_client_read_body(c, b + n, want);
                if (k < 0)
                        return (int) k;
                if (k == 0)
                        break;
                n += (size_t) k;
                if (n > max)
                        return -EFBIG;
        }
        if (!b && !(b = malloc(1)))
                return -ENOMEM;
        b[n] = 0;
        *ret = TAKE_PTR(b);
        if (ret_len)
                *ret_len = n;
        return 0;
}
