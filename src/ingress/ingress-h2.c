/* SPDX-License-Identifier: MIT */
/* HTTP/2 at the ingress (h2c with prior knowledge, or TLS with ALPN h2:
 * the client's bytes then go through the connection's SSL): an nghttp2
 * server session on the connection's thread, one poll loop for the client and every
 * stream's socket to the sandbox. Each stream becomes an HTTP/1.1 request:
 * its head is written out as HTTP/1.1 text and parsed by the same parser,
 * with the same limits, as a request that came as HTTP/1.1, then routed by
 * ingress_route() (token, cookie, link, public; resume; dial) and proxied
 * with the head ingress_request_head() builds ("Connection: close": one
 * connection to the sandbox per stream).
 *
 * One connection serves one sandbox: the first stream whose :authority
 * parses pins it, a stream naming another sandbox is answered 421 (and
 * every stream is authorized on its own anyway). Port 49983 (envd) is
 * answered 421 as well: it is served over HTTP/1.1 only.
 *
 * Bounds: a request body is taken only as fast as the sandbox reads it
 * (no automatic WINDOW_UPDATE; a stream's window is consumed back once
 * what we hold for it drops under half of it), a response body is read
 * from the sandbox only while its buffer (INGRESS_BUFFER) has room, the
 * client's input is read only once our output to it went out. A stream
 * costs at most about HTTP_HEAD_MAX + INGRESS_BUFFER + 1.5 windows. A
 * connection without streams counts as idle for the server (evictable when
 * it is full) and ends with GOAWAY after HTTP_IDLE_TIMEOUT_MSEC.
 *
 * Routing (store, resume) blocks: it runs on up to H2_ROUTERS threads of
 * the connection, so a slow one (a resume) does not hold the streams
 * already flowing; a stream's body that comes meanwhile waits in its
 * window. The dial does not wait there: a router starts the non-blocking
 * connect (ingress_route_start) and this poll loop waits for it beside
 * everything else, so a port whose listen backlog is full (its connects
 * wait for SYN retransmits) holds up no other stream. The port's first
 * use (an event in the store) goes back to a router. (In a cluster the
 * worker dials, and the stream to it is opened on the router: that one
 * still waits there.)
 *
 * WebSockets (RFC 8441): the session offers SETTINGS_ENABLE_CONNECT_PROTOCOL;
 * an extended CONNECT with :protocol websocket goes to the sandbox as the
 * HTTP/1.1 upgrade (GET, Upgrade: websocket, a Sec-WebSocket-Key of ours);
 * a 101 whose Sec-WebSocket-Accept matches that key is answered 200, and the
 * stream is then a relay of raw bytes both ways (the client's END_STREAM a
 * half-close towards the sandbox, the sandbox's close the stream's end). */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <nghttp2/nghttp2.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "http-parse.h"
#include "ingress.h"
#include "log.h"
#include "str-util.h"
#include "time-util.h"

#define H2_CONN_IDLE_MSEC HTTP_IDLE_TIMEOUT_MSEC /* no stream and no frame this long: GOAWAY */
#define H2_READ_MAX (16U * 1024U)      /* client bytes per read */
#define H2_ROUTERS 4U                  /* threads of a connection routing its streams (store, resume) */
#define H2_JOBS_MAX (2U * INGRESS_H2_STREAMS_MAX) /* a route per stream, and up to as many first-use events */
#define H2_ROUTER_STACK (1024U * 1024U)

typedef enum BodyMode {
        BODY_SIZED,
        BODY_CHUNKED,
        BODY_UNTIL_CLOSE,
} BodyMode;

typedef struct H2Conn H2Conn;
typedef struct H2Stream H2Stream;

struct H2Stream {
        H2Stream *prev, *next;
        H2Conn *h;
        int32_t id;

        /* the request as it came */
        char method[16];
        char protocol[16]; /* an extended CONNECT's :protocol (RFC 8441), "" if none */
        char *authority, *path, *host, *cookie;
        char *fields; /* "name: value\r\n"... */
        size_t fields_len, fields_allocated;
        int bad;      /* an HTTP status to answer with (431, 400), 0 if the head is fine */
        bool has_length, in_ended, end_queued;
        bool routing; /* its head is with a router (req too) */
        HttpHead req;

        /* to the sandbox */
        int up;
        bool connecting; /* up's connect is under way (until deadline) */
        IngressTarget t; /* where up goes (t.fd unused: up is the socket) */
        bool chunked; /* the request body is re-chunked (no content-length) */
        bool tunnel;  /* a WebSocket (extended CONNECT): raw bytes both ways once the sandbox switched */
        bool half_closed; /* the client's END_STREAM went on as a shutdown(SHUT_WR) */
        char ws_key[32];  /* the Sec-WebSocket-Key we sent the sandbox */
        char *out;
        size_t out_len, out_allocated;
        size_t unconsumed; /* DATA bytes taken but not yet given back to the window */

        /* from the sandbox */
        char *in; /* raw bytes: the head, then body bytes */
        size_t in_len;
        bool head_done, up_eof;
        HttpHead resp;
        BodyMode mode;
        uint64_t left;
        HttpChunkDecoder decoder;

        /* to the client: the response body (the sandbox's, or our answer) */
        char *body;
        size_t body_len;
        bool body_end, deferred, responded;

        int64_t deadline;
};

/* A stream's head on its way through ingress_route_start() on a router
 * thread, or (opened) the first-use event of a port a stream reached. */
typedef struct H2Job {
        struct H2Job *next;
        int32_t id;
        bool opened;
        HttpHead req;
        IngressTarget t;
        IngressRefusal f;
        int result;
} H2Job;

struct H2Conn {
        Ingress *g;
        HttpConn *c;
        int fd;
        nghttp2_session *s;
        SSL *ssl;                /* TLS (ALPN h2), NULL for h2c */
        short tls_wants;         /* what the last TLS read or write waits for */
        H2Stream *streams;
        unsigned n_streams;
        char pinned[17]; /* the sandbox this connection serves, "" until a stream named one */
        char peer[64];   /* the client's address, for X-Forwarded-For */
        size_t sent;             /* bytes sent to the client */
        int64_t client_deadline; /* the connection idles out then (no stream, nothing to send) */
        bool failed;
        bool idle;               /* no stream, nothing to send */

        /* routers: jobs queued under lock, finished ones back through done[] */
        pthread_mutex_t lock;
        pthread_cond_t cond;
        H2Job *queue, **queue_tail;
        pthread_t routers[H2_ROUTERS];
        unsigned n_routers, n_busy;
        unsigned n_jobs;          /* not yet read back from done[] */
        bool stopping;
        int done[2];
};

static H2Stream *stream_get(H2Conn *h, int32_t id) {
        return nghttp2_session_get_stream_user_data(h->s, id);
}

static void stream_free(H2Stream *st) {
        H2Conn *h = st->h;

        if (st->prev)
                st->prev->next = st->next;
        else
                h->streams = st->next;
        if (st->next)
                st->next->prev = st->prev;
        h->n_streams--;
        safe_close(st->up);
        http_head_done(&st->req);
        http_head_done(&st->resp);
        free(st->authority);
        free(st->path);
        free(st->host);
        if (st->cookie)
                explicit_bzero(st->cookie, strlen(st->cookie));
        free(st->cookie);
        if (st->fields)
                explicit_bzero(st->fields, st->fields_allocated);
        free(st->fields);
        if (st->out)
                explicit_bzero(st->out, st->out_allocated);
        free(st->out);
        free(st->in);
        free(st->body);
        free(st);
}

static int buf_add(char **buf, size_t *len, size_t *allocated, const void *p, size_t n) {
        if (greedy_realloc((void **) buf, allocated, *len + n + 1, 1) < 0)
                return -ENOMEM;
        memcpy(*buf + *len, p, n);
        *len += n;
        (*buf)[*len] = 0;
        return 0;
}

/* Wakes the data provider of a stream that had nothing to give. */
static void stream_resume(H2Stream *st) {
        if (st->deferred) {
                st->deferred = false;
                (void) nghttp2_session_resume_data(st->h->s, st->id);
        }
}

static ssize_t body_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                         nghttp2_data_source *source, void *user_data) {
        H2Stream *st = source->ptr;
        size_t n = MIN(length, st->body_len);

        if (n > 0) {
                memcpy(buf, st->body, n);
                memmove(st->body, st->body + n, st->body_len - n);
                st->body_len -= n;
        }
        if (st->body_len == 0 && st->body_end)
                *flags |= NGHTTP2_DATA_FLAG_EOF;
        else if (n == 0) {
                st->deferred = true;
                return NGHTTP2_ERR_DEFERRED;
        }
        return (ssize_t) n;
}

/* Response headers "Name: value\r\n"... as nghttp2 pairs after :status (names lowercased in place). */
static int submit_response(H2Stream *st, int status, char *headers, bool with_body) {
        nghttp2_nv nv[HTTP_HEADERS_MAX + 4];
        char status_str[8];
        size_t n = 0;
        nghttp2_data_provider prd = { .source.ptr = st, .read_callback = body_read };

        snprintf(status_str, sizeof status_str, "%d", status);
        nv[n++] = (nghttp2_nv){ (uint8_t *) ":status", (uint8_t *) status_str, 7, strlen(status_str), NGHTTP2_NV_FLAG_NONE };
        for (char *p = headers; p && *p && n < ELEMENTSOF(nv);) {
                char *eol = strstr(p, "\r\n"), *colon;
                if (!eol)
                        break;
                *eol = 0;
                colon = strchr(p, ':');
                if (colon) {
                        char *v = colon + 1;
                        *colon = 0;
                        v += strspn(v, " \t");
                        for (char *q = p; *q; q++)
                                if (*q >= 'A' && *q <= 'Z')
                                        *q = (char) (*q - 'A' + 'a');
                        nv[n++] = (nghttp2_nv){ (uint8_t *) p, (uint8_t *) v, strlen(p), strlen(v), NGHTTP2_NV_FLAG_NONE };
                }
                p = eol + 2;
        }
        st->responded = true;
        if (nghttp2_submit_response(st->h->s, st->id, nv, n, with_body ? &prd : NULL) != 0)
                return -EIO;
        return 0;
}

/* Our own answer: a JSON error (or a link's redirect); the sandbox gets nothing (more). */
static void stream_answer(H2Stream *st, int status, char *headers, const char *json) {
        _cleanup_free_ char *hdrs = NULL;

        st->up = safe_close(st->up);
        st->connecting = false;
        st->routing = false;
        st->out_len = 0;
        free(st->body);
        st->body = json ? strdup(json) : NULL;
        st->body_len = st->body ? strlen(st->body) : 0;
        st->body_end = true;
        if (json)
                hdrs = strdup_printf("Content-Type: application/json\r\n%s", strempty(headers));
        if (submit_response(st, status, hdrs ?: headers, st->body_len > 0) < 0)
                (void) nghttp2_submit_rst_stream(st->h->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
        /* what the client still sends is not wanted: give its window back */
        if (st->unconsumed > 0) {
                (void) nghttp2_session_consume(st->h->s, st->id, st->unconsumed);
                st->unconsumed = 0;
        }
}

static void stream_error(H2Stream *st, int status, const char *code, const char *message) {
        _cleanup_free_ char *json = strdup_printf("{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}\n", code, message);
        stream_answer(st, status, NULL, json ?: "{}\n");
}

/* Breaks a stream off after its response began. */
static void stream_reset(H2Stream *st, uint32_t error) {
        st->up = safe_close(st->up);
        st->connecting = false;
        st->routing = false; /* a router's answer for it is dropped */
        (void) nghttp2_submit_rst_stream(st->h->s, NGHTTP2_FLAG_NONE, st->id, error);
}

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11" /* RFC 6455 1.3 */

/* A fresh Sec-WebSocket-Key: 16 random bytes, base64. */
static int ws_key_new(char *buf, size_t size) {
        unsigned char raw[16];

        if (size < 25)
                return -ENOBUFS;
        if (getrandom(raw, sizeof raw, 0) != (ssize_t) sizeof raw)
                return -EIO;
        (void) EVP_EncodeBlock((unsigned char *) buf, raw, sizeof raw);
        return 0;
}

/* The sandbox's Sec-WebSocket-Accept is the one for our key (RFC 6455 4.2.2). */
static bool ws_accept_matches(const char *key, const char *accept) {
        unsigned char digest[SHA_DIGEST_LENGTH];
        char text[64], want[32];

        if (!accept)
                return false;
        snprintf(text, sizeof text, "%s" WS_GUID, key);
        (void) SHA1((const unsigned char *) text, strlen(text), digest);
        (void) EVP_EncodeBlock((unsigned char *) want, digest, sizeof digest);
        return streq(accept, want); /* the parser trimmed the value */
}

/* The head as HTTP/1.1 text, parsed like one that came so. */
static int stream_parse_head(H2Stream *st) {
        _cleanup_free_ char *text = NULL;
        const char *authority = st->authority ?: st->host;
        size_t len = 0, allocated = 0;
        char line[64];
        int r;

        if (!st->path || !authority || isempty(st->method))
                return -EINVAL; /* a plain CONNECT and friends: origin-form requests only */
        st->tunnel = streq(st->method, "CONNECT");
        if (st->tunnel && strcasecmp(st->protocol, "websocket") != 0)
                return -EPROTONOSUPPORT;
        if (!st->tunnel && st->protocol[0])
                return -EINVAL; /* :protocol only on a CONNECT (nghttp2 checks this too) */
        r = buf_add(&text, &len, &allocated, st->tunnel ? "GET" : st->method, strlen(st->tunnel ? "GET" : st->method));
        if (r >= 0)
                r = buf_add(&text, &len, &allocated, " ", 1);
        if (r >= 0)
                r = buf_add(&text, &len, &allocated, st->path, strlen(st->path));
        if (r >= 0)
                r = buf_add(&text, &len, &allocated, " HTTP/1.1\r\nHost: ", 17);
        if (r >= 0)
                r = buf_add(&text, &len, &allocated, authority, strlen(authority));
        if (r >= 0)
                r = buf_add(&text, &len, &allocated, "\r\n", 2);
        if (r >= 0 && st->fields)
                r = buf_add(&text, &len, &allocated, st->fields, st->fields_len);
        if (r >= 0 && st->tunnel) {
                r = ws_key_new(st->ws_key, sizeof st->ws_key);
                if (r >= 0) {
                        snprintf(line, sizeof line, "Sec-WebSocket-Key: %s\r\n", st->ws_key);
                        r = buf_add(&text, &len, &allocated, line, strlen(line));
                }
                if (r >= 0)
                        r = buf_add(&text, &len, &allocated, "Connection: Upgrade\r\nUpgrade: websocket\r\n", 41);
        }
        if (r >= 0 && st->cookie) {
                r = buf_add(&text, &len, &allocated, "Cookie: ", 8);
                if (r >= 0)
                        r = buf_add(&text, &len, &allocated, st->cookie, strlen(st->cookie));
                if (r >= 0)
                        r = buf_add(&text, &len, &allocated, "\r\n", 2);
        }
        st->chunked = !st->tunnel && !st->has_length && !st->in_ended;
        if (r >= 0 && st->chunked) {
                snprintf(line, sizeof line, "Transfer-Encoding: chunked\r\n");
                r = buf_add(&text, &len, &allocated, line, strlen(line));
        }
        if (r >= 0)
                r = buf_add(&text, &len, &allocated, "\r\n", 2);
        if (r < 0)
                return r;
        if (len > HTTP_HEAD_MAX)
                r = -E2BIG;
        else
                r = http_parse_request_head(text, len, &st->req);
        explicit_bzero(text, len);
        return r;
}

static void stream_routed(H2Stream *st, H2Job *job);

static void job_free(H2Job *job) {
        if (!job)
                return;
        safe_close(job->t.fd);
        ingress_refusal_done(&job->f);
        http_head_done(&job->req);
        free(job);
}

static void *router_main(void *arg) {
        H2Conn *h = arg;

        pthread_mutex_lock(&h->lock);
        for (;;) {
                H2Job *job;
                while (!h->queue && !h->stopping)
                        pthread_cond_wait(&h->cond, &h->lock);
                job = h->queue;
                if (!job)
                        break; /* stopping, nothing left */
                h->queue = job->next;
                if (!h->queue)
                        h->queue_tail = &h->queue;
                h->n_busy++;
                pthread_mutex_unlock(&h->lock);
                if (job->opened) {
                        if (!h->stopping)
                                ingress_port_opened(h->g, h->c, &job->t);
                } else
                        job->result = h->stopping ? (ingress_refusal_done(&job->f), 1)
                                                  : ingress_route_start(h->g, h->c, &job->req, &job->t, &job->f);
                /* at most H2_JOBS_MAX pointers in flight: the pipe never fills */
                if (write(h->done[1], &job, sizeof job) != sizeof job)
                        job_free(job); /* cannot happen; then the stream times out */
                pthread_mutex_lock(&h->lock);
                h->n_busy--;
        }
        pthread_mutex_unlock(&h->lock);
        return NULL;
}

/* Queues a job for a router (starting one if all are busy); -EBUSY when max are out already. */
static int router_queue(H2Conn *h, H2Job *job, unsigned max) {
        int r = 0;

        pthread_mutex_lock(&h->lock);
        if (h->n_jobs >= max) {
                pthread_mutex_unlock(&h->lock);
                return -EBUSY;
        }
        if (h->n_busy + 1 > h->n_routers && h->n_routers < H2_ROUTERS) {
                pthread_attr_t attr;
                r = -pthread_attr_init(&attr);
                if (r == 0) {
                        (void) pthread_attr_setstacksize(&attr, H2_ROUTER_STACK);
                        r = -pthread_create(&h->routers[h->n_routers], &attr, router_main, h);
                        pthread_attr_destroy(&attr);
                }
                if (r == 0)
                        h->n_routers++;
                else if (h->n_routers > 0)
                        r = 0; /* the ones there will get to it */
        }
        if (r == 0) {
                *h->queue_tail = job;
                h->queue_tail = &job->next;
                h->n_jobs++;
                pthread_cond_signal(&h->cond);
        }
        pthread_mutex_unlock(&h->lock);
        return r;
}

/* Hands the stream's head to a router. */
static int router_submit(H2Conn *h, H2Stream *st, const IngressTarget *t) {
        H2Job *job = new0(H2Job, 1);
        int r;

        if (!job)
                return -ENOMEM;
        job->id = st->id;
        job->req = st->req;
        job->t = *t;
        job->t.fd = -EBADF;
        r = router_queue(h, job, H2_JOBS_MAX);
        if (r < 0) {
                free(job);
                return r;
        }
        st->req = (HttpHead){};
        st->routing = true;
        return 0;
}

/* The port's first use, recorded by a router (the store may block); the
 * other half of H2_JOBS_MAX is the streams' own, so a stream is never
 * refused for these. */
static void router_submit_opened(H2Conn *h, const IngressTarget *t) {
        H2Job *job = new0(H2Job, 1);

        if (job) {
                job->opened = true;
                job->t = *t;
                job->t.fd = -EBADF;
        }
        if (!job || router_queue(h, job, INGRESS_H2_STREAMS_MAX) < 0) {
                log_warning("Ingress: cannot record the first use of port %u of sandbox %s", (unsigned) t->port, t->id);
                free(job);
        }
}

/* Finished jobs back to their streams (or away, for streams gone). */
static void routers_collect(H2Conn *h) {
        for (;;) {
                H2Job *job;
                H2Stream *st;
                ssize_t k = read(h->done[0], &job, sizeof job);
                if (k != sizeof job)
                        return;
                pthread_mutex_lock(&h->lock);
                h->n_jobs--;
                pthread_mutex_unlock(&h->lock);
                st = job->opened ? NULL : stream_get(h, job->id);
                if (st && st->routing)
                        stream_routed(st, job);
                job_free(job);
        }
}

static void routers_stop(H2Conn *h) {
        pthread_mutex_lock(&h->lock);
        h->stopping = true;
        pthread_cond_broadcast(&h->cond);
        pthread_mutex_unlock(&h->lock);
        for (unsigned i = 0; i < h->n_routers; i++)
                (void) pthread_join(h->routers[i], NULL);
        h->n_routers = 0;
        for (H2Job *job = h->queue, *next; job; job = next) {
                next = job->next;
                job_free(job);
        }
        h->queue = NULL;
        h->queue_tail = &h->queue;
        if (h->done[0] >= 0)
                for (;;) {
                        H2Job *job;
                        if (read(h->done[0], &job, sizeof job) != sizeof job)
                                break;
                        job_free(job);
                }
}

/* A stream's head is complete: route it. */
static void stream_start(H2Stream *st) {
        H2Conn *h = st->h;
        IngressTarget t = { .fd = -EBADF };
        char msg[192];
        int r;

        if (st->bad == 431) {
                stream_error(st, 431, "headers_too_large", "request head too large");
                return;
        }
        r = st->bad ? -EINVAL : stream_parse_head(st);
        if (r == -EPROTONOSUPPORT) {
                stream_error(st, 501, "not_implemented", "an extended CONNECT is served for :protocol websocket only");
                return;
        }
        if (r < 0) {
                stream_error(st, r == -E2BIG ? 431 : r == -ENAMETOOLONG ? 414 : 400,
                             r == -E2BIG ? "headers_too_large" : r == -ENAMETOOLONG ? "uri_too_long" : "bad_request",
                             "malformed request head");
                return;
        }
        if (ingress_host_parse(http_head_header(&st->req, "Host"), ingress_domain(h->g), &t.port, t.id) < 0) {
                snprintf(msg, sizeof msg, "the :authority must be {port}-{sandbox}.%.64s", ingress_domain(h->g));
                stream_error(st, 400, "bad_request", msg);
                return;
        }
        if (t.port == INGRESS_ENVD_PORT) {
                stream_error(st, 421, "misdirected_request",
                             "port 49983 (envd) is served over HTTP/1.1 only: send this request on an HTTP/1.1 connection");
                return;
        }
        if (isempty(h->pinned))
                (void) strscpy(h->pinned, sizeof h->pinned, t.id);
        else if (!streq(h->pinned, t.id)) {
                log_info("Ingress: refused an HTTP/2 stream to sandbox %s on a connection of sandbox %s from %s", t.id,
                         h->pinned, h->peer);
                snprintf(msg, sizeof msg,
                         "this HTTP/2 connection serves sandbox %s only: open a new connection for another sandbox",
                         h->pinned);
                stream_error(st, 421, "misdirected_request", msg);
                return;
        }
        if (router_submit(h, st, &t) < 0)
                stream_error(st, 503, "unavailable", "cannot route the request now");
}

/* The router's answer for a stream still there: our refusal, or its connection to the sandbox. */
static void stream_routed(H2Stream *st, H2Job *job) {
        H2Conn *h = st->h;
        _cleanup_free_ char *head = NULL, *out = NULL;
        size_t head_len = 0, out_len = 0, out_allocated = 0;
        int r;

        st->routing = false;
        st->req = job->req;
        job->req = (HttpHead){};
        if (job->result != 0) {
                stream_answer(st, job->f.status, job->f.headers, job->f.body);
                return;
        }
        st->up = TAKE_FD(job->t.fd);
        st->connecting = job->t.connecting;
        st->t = job->t;
        st->t.fd = -EBADF;
        r = fd_nonblock(st->up, true);
        if (r >= 0)
                r = ingress_request_head(&st->req, st->tunnel ? "websocket" : NULL, h->peer, h->ssl != NULL,
                                         job->t.mask, job->t.port, &head, &head_len);
        /* the head, then what of the body came meanwhile */
        if (r >= 0)
                r = buf_add(&out, &out_len, &out_allocated, head, head_len);
        if (r >= 0 && st->out_len > 0)
                r = buf_add(&out, &out_len, &out_allocated, st->out, st->out_len);
        if (head)
                explicit_bzero(head, head_len);
        if (r < 0) {
                stream_error(st, 502, "bad_gateway", "out of memory");
                return;
        }
        if (st->out)
                explicit_bzero(st->out, st->out_allocated);
        free(st->out);
        st->out = TAKE_PTR(out);
        st->out_len = out_len;
        st->out_allocated = out_allocated;
        st->in = malloc(HTTP_HEAD_MAX);
        if (!st->in) {
                stream_error(st, 502, "bad_gateway", "out of memory");
                return;
        }
        st->deadline = mono_msec() + (st->connecting ? API_PORT_DIAL_TIMEOUT_MSEC : INGRESS_RESPONSE_TIMEOUT_MSEC);
}

/* The connect to the sandbox's port ended (or timed out): its 502, or the request goes out. */
static void stream_connected(H2Stream *st, bool timed_out) {
        _cleanup_(ingress_refusal_done) IngressRefusal f = {};
        IngressTarget t = st->t;
        int r;

        t.fd = st->up;
        r = ingress_route_connected(st->h->g, &t, timed_out, &f);
        if (r == 1) {
                stream_answer(st, f.status, f.headers, f.body);
                return;
        }
        st->connecting = false;
        st->deadline = mono_msec() + INGRESS_RESPONSE_TIMEOUT_MSEC;
        if (r == 2)
                router_submit_opened(st->h, &t);
}

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *frame, void *user_data) {
        H2Conn *h = user_data;
        H2Stream *st;

        if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
                return 0;
        if (h->n_streams >= INGRESS_H2_STREAMS_MAX)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* (nghttp2 refuses past SETTINGS already) */
        st = new0(H2Stream, 1);
        if (!st)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* the stream is reset */
        st->h = h;
        st->id = frame->hd.stream_id;
        st->up = -EBADF;
        st->next = h->streams;
        if (h->streams)
                h->streams->prev = st;
        h->streams = st;
        h->n_streams++;
        nghttp2_session_set_stream_user_data(s, st->id, st);
        return 0;
}

static int set_str(char **p, const uint8_t *v, size_t n) {
        if (*p)
                return -EINVAL; /* nghttp2 refuses repeated pseudo-headers; host twice is ours to refuse */
        *p = strndup((const char *) v, n);
        return *p ? 0 : -ENOMEM;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *user_data) {
        H2Conn *h = user_data;
        H2Stream *st = stream_get(h, frame->hd.stream_id);
        int r = 0;

        if (!st || frame->hd.type != NGHTTP2_HEADERS || st->bad)
                return 0;
        if (frame->headers.cat != NGHTTP2_HCAT_REQUEST)
                return 0; /* trailers: not passed on */
        if (st->fields_len + namelen + valuelen + 4 > INGRESS_H2_HEADERS_MAX) {
                st->bad = 431;
                return 0;
        }
        /* nghttp2 checked the field (RFC 9113 8.2: no CR, LF, NUL; lowercase names; no connection headers) */
        if (namelen == 7 && memcmp(name, ":method", 7) == 0) {
                if (valuelen >= sizeof st->method)
                        r = -EINVAL;
                else {
                        memcpy(st->method, value, valuelen);
                        st->method[valuelen] = 0;
                }
        } else if (namelen == 9 && memcmp(name, ":protocol", 9) == 0) {
                if (valuelen >= sizeof st->protocol)
                        r = -EINVAL;
                else {
                        memcpy(st->protocol, value, valuelen);
                        st->protocol[valuelen] = 0;
                }
        } else if (namelen == 17 && memcmp(name, "sec-websocket-key", 17) == 0)
                ; /* not sent over HTTP/2 (RFC 8441 5): the key to the sandbox is ours */
        else if (namelen == 5 && memcmp(name, ":path", 5) == 0)
                r = set_str(&st->path, value, valuelen);
        else if (namelen == 10 && memcmp(name, ":authority", 10) == 0)
                r = set_str(&st->authority, value, valuelen);
        else if (namelen > 0 && name[0] == ':')
                ; /* :scheme */
        else if (namelen == 4 && memcmp(name, "host", 4) == 0)
                r = set_str(&st->host, value, valuelen);
        else if (namelen == 6 && memcmp(name, "cookie", 6) == 0) {
                /* RFC 9113 8.2.3: crumbs are joined with "; " */
                _cleanup_free_ char *old = st->cookie;
                st->cookie = old ? strdup_printf("%s; %.*s", old, (int) valuelen, (const char *) value)
                                 : strndup((const char *) value, valuelen);
                if (old)
                        explicit_bzero(old, strlen(old));
                r = st->cookie ? 0 : -ENOMEM;
        } else {
                if (namelen == 14 && memcmp(name, "content-length", 14) == 0)
                        st->has_length = true;
                r = buf_add(&st->fields, &st->fields_len, &st->fields_allocated, name, namelen);
                if (r >= 0)
                        r = buf_add(&st->fields, &st->fields_len, &st->fields_allocated, ": ", 2);
                if (r >= 0)
                        r = buf_add(&st->fields, &st->fields_len, &st->fields_allocated, value, valuelen);
                if (r >= 0)
                        r = buf_add(&st->fields, &st->fields_len, &st->fields_allocated, "\r\n", 2);
        }
        if (r < 0)
                st->bad = 400;
        return 0;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *frame, void *user_data) {
        H2Conn *h = user_data;
        H2Stream *st = stream_get(h, frame->hd.stream_id);

        if (!st)
                return 0;
        if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
                st->in_ended = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;
                stream_start(st);
                return 0;
        }
        if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) &&
            (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && !st->in_ended) {
                st->in_ended = true; /* the end of the body (or its trailers) */
                if ((st->up >= 0 || st->routing) && st->chunked &&
                    buf_add(&st->out, &st->out_len, &st->out_allocated, "0\r\n\r\n", 5) < 0)
                        stream_reset(st, NGHTTP2_INTERNAL_ERROR);
        }
        return 0;
}

static int on_data_chunk(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                         void *user_data) {
        H2Conn *h = user_data;
        H2Stream *st = stream_get(h, id);
        char line[24];
        int r = 0;

        if (!st || (st->up < 0 && !st->routing)) {
                /* nobody to take it: give the window back at once */
                (void) nghttp2_session_consume(s, id, len);
                return 0;
        }
        if (st->chunked && len > 0) {
                int l = snprintf(line, sizeof line, "%zx\r\n", len);
                r = buf_add(&st->out, &st->out_len, &st->out_allocated, line, (size_t) l);
        }
        if (r >= 0)
                r = buf_add(&st->out, &st->out_len, &st->out_allocated, data, len);
        if (r >= 0 && st->chunked && len > 0)
                r = buf_add(&st->out, &st->out_len, &st->out_allocated, "\r\n", 2);
        if (r < 0) {
                (void) nghttp2_session_consume(s, id, len);
                stream_reset(st, NGHTTP2_INTERNAL_ERROR);
                return 0;
        }
        st->unconsumed += len;
        return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t error_code, void *user_data) {
        H2Conn *h = user_data;
        H2Stream *st = stream_get(h, id);

        if (st) {
                nghttp2_session_set_stream_user_data(s, id, NULL);
                stream_free(st);
        }
        return 0;
}

/* What of a 101's fields the client's 200 carries: the subprotocol and extensions chosen. */
static char *ws_response_fields(const HttpHead *resp) {
        const char *proto = http_head_header(resp, "Sec-WebSocket-Protocol"),
                   *ext = http_head_header(resp, "Sec-WebSocket-Extensions");

        return strdup_printf("%s%s%s%s%s%s", proto ? "Sec-WebSocket-Protocol: " : "", strempty(proto),
                             proto ? "\r\n" : "", ext ? "Sec-WebSocket-Extensions: " : "", strempty(ext),
                             ext ? "\r\n" : "");
}

/* The sandbox's response head is in: the answer begins. */
static void stream_response_head(H2Stream *st, size_t head_len) {
        _cleanup_free_ char *hdrs = NULL;
        bool head = streq(st->req.method, "HEAD"), body;

        if (st->resp.status == 101 && !st->tunnel) {
                stream_error(st, 502, "bad_gateway", "the sandbox switched protocols (no Upgrade over HTTP/2)");
                return;
        }
        if (st->resp.status == 101 &&
            (!http_head_upgrade(&st->resp) || strcasecmp(http_head_upgrade(&st->resp), "websocket") != 0 ||
             !ws_accept_matches(st->ws_key, http_head_header(&st->resp, "Sec-WebSocket-Accept")))) {
                stream_error(st, 502, "bad_gateway", "the sandbox's answer to the WebSocket handshake was not valid");
                return;
        }
        if (st->tunnel && st->resp.status >= 200 && st->resp.status < 300) {
                /* a 2xx to the client would open its WebSocket on an HTTP answer */
                stream_error(st, 502, "bad_gateway", "the sandbox did not switch to WebSocket (it answered 2xx)");
                return;
        }
        if (st->tunnel && st->resp.status != 101)
                st->tunnel = false; /* refused: its answer is passed on, and the stream ends with it */
        if (ingress_response_headers(&st->resp, false, &hdrs) < 0) {
                stream_error(st, 502, "bad_gateway", "out of memory");
                return;
        }
        body = !head && st->resp.status != 204 && st->resp.status != 304;
        if (body && st->resp.content_length >= 0 && !st->resp.chunked) {
                char *with = strdup_printf("%sContent-Length: %" PRIi64 "\r\n", hdrs, st->resp.content_length);
                if (!with) {
                        stream_error(st, 502, "bad_gateway", "out of memory");
                        return;
                }
                free(hdrs);
                hdrs = with;
        } else if (head && st->resp.content_length >= 0 && !st->resp.chunked && st->resp.status != 204 &&
                   st->resp.status != 304) {
                char *with = strdup_printf("%sContent-Length: %" PRIi64 "\r\n", hdrs, st->resp.content_length);
                if (with) {
                        free(hdrs);
                        hdrs = with;
                }
        }
        if (st->tunnel) {
                /* switched: 200 and the relay (RFC 8441 5); the handshake's own fields stay behind */
                _cleanup_free_ char *kept = ws_response_fields(&st->resp);
                free(hdrs);
                hdrs = TAKE_PTR(kept);
                st->resp.status = 200;
                st->resp.chunked = false;
                st->resp.content_length = -1;
                body = true;
                log_debug("Ingress: a WebSocket over HTTP/2 (stream %" PRIi32 ") to sandbox %s port %u from %s", st->id,
                          st->t.id, (unsigned) st->t.port, st->h->peer);
                if (!hdrs) {
                        stream_error(st, 502, "bad_gateway", "out of memory");
                        return;
                }
        }
        st->mode = st->resp.chunked ? BODY_CHUNKED : st->resp.content_length >= 0 ? BODY_SIZED : BODY_UNTIL_CLOSE;
        st->left = st->resp.content_length >= 0 ? (uint64_t) st->resp.content_length : 0;
        memmove(st->in, st->in + head_len, st->in_len - head_len);
        st->in_len -= head_len;
        st->head_done = true;
        st->body = malloc(INGRESS_BUFFER);
        if (!st->body) {
                stream_error(st, 502, "bad_gateway", "out of memory");
                return;
        }
        st->body_len = 0;
        if (!body || (st->mode == BODY_SIZED && st->left == 0)) {
                st->body_end = true;
                st->up = safe_close(st->up);
        }
        if (submit_response(st, st->resp.status, hdrs, body && !st->body_end) < 0)
                stream_reset(st, NGHTTP2_INTERNAL_ERROR);
}

/* Raw bytes from the sandbox into the body the client reads. */
static void stream_decode(H2Stream *st) {
        while (st->head_done && !st->body_end && st->body && st->in_len > 0 && st->body_len < INGRESS_BUFFER) {
                size_t room = INGRESS_BUFFER - st->body_len, consumed, produced;

                if (st->mode == BODY_CHUNKED) {
                        int dr = http_chunk_decode(&st->decoder, st->in, st->in_len, st->body + st->body_len, room,
                                                   &consumed, &produced);
                        if (dr < 0) {
                                stream_reset(st, NGHTTP2_INTERNAL_ERROR);
                                return;
                        }
                        if (dr > 0)
                                st->body_end = true;
                } else {
                        consumed = produced = MIN(room, st->in_len);
                        if (st->mode == BODY_SIZED) {
                                consumed = produced = (size_t) MIN((uint64_t) produced, st->left);
                                st->left -= produced;
                                if (st->left == 0) {
                                        st->body_end = true;
                                        consumed = st->in_len; /* past the length: not ours to pass on */
                                }
                        }
                        memcpy(st->body + st->body_len, st->in, produced);
                }
                st->body_len += produced;
                memmove(st->in, st->in + consumed, st->in_len - consumed);
                st->in_len -= consumed;
                if (consumed == 0 && produced == 0)
                        break;
        }
        if (st->head_done && st->up_eof && !st->body_end && st->in_len == 0) {
                if (st->mode == BODY_UNTIL_CLOSE)
                        st->body_end = true;
                else {
                        stream_reset(st, NGHTTP2_INTERNAL_ERROR); /* cut short: the client sees a reset, not a wrong body */
                        return;
                }
        }
        if (st->body_end && st->up >= 0)
                st->up = safe_close(st->up);
        if (st->body_len > 0 || st->body_end)
                stream_resume(st);
}

static void stream_read(H2Stream *st) {
        size_t size = HTTP_HEAD_MAX;

        if (st->in_len < size) { /* a full buffer is not an end: what the sandbox sent waits in the socket */
                ssize_t k = recv(st->up, st->in + st->in_len, size - st->in_len, 0);
                if (k < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                return;
                        k = 0; /* a reset ends it as a close would; the framing says whether that was complete */
                }
                st->deadline = mono_msec() + INGRESS_IDLE_TIMEOUT_MSEC;
                if (k == 0)
                        st->up_eof = true;
                st->in_len += (size_t) k;
        }
        while (!st->head_done) {
                ssize_t l = http_head_length(st->in, st->in_len);
                int r;

                if (l == 0 && st->in_len == size)
                        l = -E2BIG;
                if (l == 0 && !st->up_eof)
                        return;
                r = l > 0 ? http_parse_response_head(st->in, (size_t) l, &st->resp) : -EBADMSG;
                if (r < 0) {
                        log_debug_errno(r, "Ingress: no valid response head from the sandbox (HTTP/2 stream): %m");
                        stream_error(st, 502, "bad_gateway", "the sandbox's answer was not valid HTTP/1.1");
                        return;
                }
                if (st->resp.status >= 100 && st->resp.status < 200 && st->resp.status != 101) {
                        memmove(st->in, st->in + l, st->in_len - (size_t) l); /* interim: skipped */
                        st->in_len -= (size_t) l;
                        http_head_done(&st->resp);
                        st->resp = (HttpHead){};
                        continue;
                }
                stream_response_head(st, (size_t) l);
                if (!st->head_done)
                        return;
        }
        stream_decode(st);
}

static void stream_write(H2Stream *st) {
        ssize_t k = send(st->up, st->out, st->out_len, MSG_NOSIGNAL);

        if (k < 0) {
                if (errno == EAGAIN || errno == EINTR)
                        return;
                /* the sandbox stopped reading: its answer (if any) may still come */
                st->out_len = 0;
                (void) shutdown(st->up, SHUT_WR);
                return;
        }
        memmove(st->out, st->out + k, st->out_len - (size_t) k);
        st->out_len -= (size_t) k;
        if (!st->head_done || st->tunnel)
                st->deadline = MAX(st->deadline, mono_msec() + INGRESS_IDLE_TIMEOUT_MSEC);
        if (st->unconsumed > 0 && st->out_len <= INGRESS_H2_WINDOW / 2) {
                (void) nghttp2_session_consume(st->h->s, st->id, st->unconsumed);
                st->unconsumed = 0;
        }
}

static void stream_timeout(H2Stream *st) {
        if (st->connecting)
                stream_connected(st, true);
        else if (!st->head_done)
                stream_error(st, 502, "bad_gateway", "the sandbox did not answer in time");
        else
                stream_reset(st, NGHTTP2_CANCEL);
}

static int session_new(H2Conn *h) {
        const nghttp2_settings_entry settings[] = {
                { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, INGRESS_H2_STREAMS_MAX },
                { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, INGRESS_H2_WINDOW },
                { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, INGRESS_H2_HEADERS_MAX },
                { NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
                { NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL, 1 }, /* WebSockets (RFC 8441) */
        };
        nghttp2_session_callbacks *cb = NULL;
        nghttp2_option *opt = NULL;
        int r;

        if (nghttp2_session_callbacks_new(&cb) != 0)
                return -ENOMEM;
        if (nghttp2_option_new(&opt) != 0) {
                nghttp2_session_callbacks_del(cb);
                return -ENOMEM;
        }
        nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
        nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
        nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
        nghttp2_option_set_no_auto_window_update(opt, 1);
        nghttp2_option_set_max_send_header_block_length(opt, HTTP_HEAD_MAX + 1024);
        r = nghttp2_session_server_new2(&h->s, cb, h, opt);
        nghttp2_option_del(opt);
        nghttp2_session_callbacks_del(cb);
        if (r != 0)
                return -ENOMEM;
        if (nghttp2_submit_settings(h->s, NGHTTP2_FLAG_NONE, settings, ELEMENTSOF(settings)) != 0 ||
            nghttp2_session_set_local_window_size(h->s, NGHTTP2_FLAG_NONE, 0,
                                                  (int32_t) (INGRESS_H2_STREAMS_MAX * INGRESS_H2_WINDOW)) != 0)
                return -ENOMEM;
        return 0;
}

/* Feeds client bytes to the session; a protocol error is answered by GOAWAY (nghttp2's, or ours). */
static void conn_feed(H2Conn *h, const void *p, size_t n) {
        ssize_t k = nghttp2_session_mem_recv(h->s, p, n);
        if (k < 0) {
                log_debug("Ingress: HTTP/2 from %s ended: %s", h->peer, nghttp2_strerror((int) k));
                (void) nghttp2_session_terminate_session(h->s, NGHTTP2_PROTOCOL_ERROR);
                h->failed = true;
        }
}

/* Sends what the session has for the client as far as the socket takes it;
 * *wdata, *wlen: what is left of the session's last output. */
static int conn_flush(H2Conn *h, const uint8_t **wdata, size_t *wlen) {
        for (;;) {
                if (*wlen == 0) {
                        ssize_t m = nghttp2_session_mem_send(h->s, wdata);
                        if (m < 0)
                                return -EIO;
                        *wlen = (size_t) m;
                }
                if (*wlen == 0)
                        return 0;
                ssize_t w;
                if (h->ssl) {
                        w = http_tls_io(h->ssl, true, (void *) *wdata, *wlen, &h->tls_wants);
                        if (w == -EAGAIN)
                                return 0;
                        if (w <= 0)
                                return w < 0 ? (int) w : -EPIPE;
                        h->tls_wants = 0;
                } else {
                        w = send(h->fd, *wdata, *wlen, MSG_NOSIGNAL);
                        if (w < 0) {
                                if (errno == EAGAIN || errno == EINTR)
                                        return 0;
                                return negative_errno();
                        }
                }
                *wdata += w;
                *wlen -= (size_t) w;
                h->sent += (size_t) w;
                h->client_deadline = mono_msec() + H2_CONN_IDLE_MSEC;
        }
}

void ingress_h2_serve(Ingress *g, HttpConn *c, int fd, const void *pending, size_t n, const char *peer) {
        H2Conn h = { .g = g, .c = c, .fd = fd, .client_deadline = mono_msec() + H2_CONN_IDLE_MSEC, .done = { -EBADF, -EBADF } };
        _cleanup_free_ struct pollfd *pfd = new0(struct pollfd, INGRESS_H2_STREAMS_MAX + 8);
        _cleanup_free_ int32_t *ids = new0(int32_t, INGRESS_H2_STREAMS_MAX + 8);
        const uint8_t *wdata = NULL;
        size_t wlen = 0;
        char buf[H2_READ_MAX];

        pthread_mutex_init(&h.lock, NULL);
        pthread_cond_init(&h.cond, NULL);
        h.queue_tail = &h.queue;
        if (!pfd || !ids || pipe2(h.done, O_CLOEXEC | O_NONBLOCK) < 0 || session_new(&h) < 0)
                goto out;
        h.ssl = http_conn_ssl(c);
        (void) strscpy(h.peer, sizeof h.peer, peer);
        char *colon = strrchr(h.peer, ':');
        if (colon)
                *colon = 0;
        log_debug("Ingress: HTTP/2 (%s) from %s", h.ssl ? "TLS, ALPN h2" : "prior knowledge", h.peer);
        conn_feed(&h, pending, n);

        for (;;) {
                size_t np = 0, cap = INGRESS_H2_STREAMS_MAX + 8;
                int64_t now, deadline;
                int k;

                /* what the session has for the client, as far as the socket takes it, and
                 * what that made room for taken from the sandboxes, until neither moves */
                for (bool more = true; more;) {
                        more = false;
                        for (H2Stream *st = h.streams; st; st = st->next) {
                                size_t before = st->in_len;
                                if (st->head_done && !st->body_end)
                                        stream_decode(st);
                                more = more || st->in_len != before;
                        }
                        size_t sent = h.sent;
                        if (conn_flush(&h, &wdata, &wlen) < 0)
                                goto out;
                        more = (more || h.sent != sent) && wlen == 0;
                }
                for (H2Stream *st = h.streams; st; st = st->next)
                        if (st->head_done && !st->body_end)
                                stream_decode(st); /* into the room the client's reading made */
                if (wlen == 0 && !nghttp2_session_want_read(h.s) && !nghttp2_session_want_write(h.s))
                        break;
                if (h.failed && wlen == 0 && !nghttp2_session_want_write(h.s))
                        break;

                bool idle = h.n_streams == 0 && wlen == 0 && h.n_jobs == 0;
                if (idle != h.idle) {
                        h.idle = idle;
                        http_conn_set_idle(c, idle); /* evictable like an idle keep-alive connection */
                }
                pfd[np] = (struct pollfd){ .fd = fd, .events = (short) ((wlen == 0 && !h.failed ? POLLIN : 0) |
                                                                        (wlen > 0 ? POLLOUT : 0) | h.tls_wants) };
                ids[np++] = 0;
                pfd[np] = (struct pollfd){ .fd = h.done[0], .events = POLLIN };
                ids[np++] = 0;
                now = mono_msec();
                deadline = h.n_streams > 0 || wlen > 0 ? now + H2_CONN_IDLE_MSEC : h.client_deadline;
                for (H2Stream *st = h.streams; st && np < cap; st = st->next) {
                        short ev = 0;
                        if (st->up < 0)
                                continue;
                        if (st->tunnel && st->head_done && st->in_ended && st->out_len == 0 && !st->half_closed) {
                                (void) shutdown(st->up, SHUT_WR); /* the client is done sending */
                                st->half_closed = true;
                        }
                        if (st->out_len > 0 || st->connecting)
                                ev |= POLLOUT;
                        if (!st->connecting && !st->up_eof && ((!st->head_done && st->in_len < HTTP_HEAD_MAX) ||
                                            (st->head_done && !st->body_end && st->in_len < HTTP_HEAD_MAX)))
                                ev |= POLLIN;
                        if (st->deadline > 0)
                                deadline = MIN(deadline, st->deadline);
                        if (ev == 0)
                                continue;
                        pfd[np] = (struct pollfd){ .fd = st->up, .events = ev };
                        ids[np++] = st->id;
                }
                /* TLS may hold decrypted bytes the socket no longer shows */
                k = poll(pfd, np, h.ssl && SSL_pending(h.ssl) > 0 && wlen == 0 ? 0 : (int) MAX(deadline - now, 0));
                if (k == 0 && h.ssl && SSL_pending(h.ssl) > 0) {
                        pfd[0].revents = POLLIN;
                        k = 1;
                }
                if (k < 0 && errno != EINTR)
                        goto out;

                if (k > 0 && pfd[1].revents)
                        routers_collect(&h);
                for (size_t i = 2; k > 0 && i < np; i++) {
                        H2Stream *st = stream_get(&h, ids[i]);
                        if (!st || st->up != pfd[i].fd || pfd[i].revents == 0)
                                continue;
                        if (st->connecting) {
                                stream_connected(st, false);
                                if (st->up < 0)
                                        continue;
                        }
                        if ((pfd[i].revents & POLLOUT) && st->out_len > 0)
                                stream_write(st);
                        if (st->up >= 0 && (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                                stream_read(st);
                }
                if (k > 0 && (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) && wlen == 0 && !h.failed) {
                        ssize_t m;
                        if (h.ssl) {
                                m = http_tls_io(h.ssl, false, buf, sizeof buf, &h.tls_wants);
                                if (m == -EAGAIN)
                                        m = -1, errno = EAGAIN;
                                else if (m < 0)
                                        goto out;
                                else
                                        h.tls_wants = 0;
                        } else
                                m = recv(fd, buf, sizeof buf, 0);
                        if (m == 0 || (m < 0 && errno != EAGAIN && errno != EINTR))
                                goto out; /* the client went away (or the server stops) */
                        if (m > 0) {
                                h.client_deadline = mono_msec() + H2_CONN_IDLE_MSEC;
                                conn_feed(&h, buf, (size_t) m);
                        }
                }
                /* bodies the client drained leave room: take more from the sandboxes */
                now = mono_msec();
                for (H2Stream *st = h.streams; st; st = st->next) {
                        if (st->up >= 0 && st->deadline > 0 && now >= st->deadline)
                                stream_timeout(st);
                }
                if (now >= h.client_deadline && h.n_streams == 0 && wlen == 0) {
                        (void) nghttp2_session_terminate_session(h.s, NGHTTP2_NO_ERROR);
                        h.failed = true;
                        h.client_deadline = now + 1000; /* for the GOAWAY to go out */
                } else if (now >= deadline && wlen > 0)
                        goto out; /* the client does not read: give up on it */
        }
out:
        if (h.idle)
                http_conn_set_idle(c, false);
        explicit_bzero(buf, sizeof buf);
        routers_stop(&h);
        if (h.s)
                nghttp2_session_del(h.s);
        while (h.streams)
                stream_free(h.streams);
        safe_close(h.done[0]);
        safe_close(h.done[1]);
        pthread_cond_destroy(&h.cond);
        pthread_mutex_destroy(&h.lock);
}
