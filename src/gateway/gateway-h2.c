/* SPDX-License-Identifier: MIT */
/* HTTP/2 relay of an intercepted connection, stream by stream, with the
 * credentials applied to every request. See gateway-h2.h. */
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc-util.h"
#include "gateway-h2.h"
#include "gateway-internal.h"

/* One direction of a stream's body: bytes received on one leg, not yet
 * taken by the other (at most GW_H2_WINDOW: the window is not reopened
 * before they are taken). */
typedef struct H2Body {
        uint8_t *p;
        size_t off, n, cap;
} H2Body;

/* A header block as it is received: pseudo-headers apart (never touched by
 * the credentials), the regular ones in an HttpHead for cred_inject_head(). */
typedef struct H2Block {
        HttpHeader pseudo[GW_H2_PSEUDO_MAX];
        size_t n_pseudo;
        HttpHead head;
        size_t bytes;     /* name + value + 32 per field */
        bool too_big;
        bool bad;         /* a pseudo-header repeated or unknown */
} H2Block;

typedef struct H2Stream H2Stream;
struct H2Stream {
        H2Stream *prev, *next;
        int32_t down_id, up_id; /* 0: closed on that leg (or never opened) */
        H2Block block;          /* the header block being received (either leg) */
        H2Body req, resp;
        bool req_end, resp_end;
        bool final_sent;        /* the final response's HEADERS went to the sandbox */
        bool refused;           /* answered here: no upstream stream, the request body is dropped */
        bool req_sent;          /* its request's HEADERS went to the upstream (it may act on it) */
        H2Block req_trailers, resp_trailers;
        bool has_req_trailers, has_resp_trailers;
};

struct GwH2 {
        Gateway *gw;
        GwConn *c;
        GwH2Sink down_sink, up_sink;
        nghttp2_session *down, *up;
        H2Stream *streams;
        unsigned n_streams;
        bool up_goaway;   /* the upstream said GOAWAY: no new streams */
        bool up_gone;     /* its TLS/TCP ended, or its session did */
        bool cut;         /* the policy denied the connection: GOAWAY to the sandbox, then the close */
        bool failed;
};

static void body_done(H2Body *b) {
        if (b->p) {
                OPENSSL_cleanse(b->p, b->cap);
                free(b->p);
        }
        *b = (H2Body){};
}

static int body_add(H2Body *b, const uint8_t *p, size_t n) {
        if (n > GW_H2_WINDOW || b->n > GW_H2_WINDOW - n)
                return -ENOBUFS; /* more than the window allowed: nghttp2 enforces it, never reached */
        if (b->off + b->n + n > b->cap) {
                if (b->off > 0) {
                        memmove(b->p, b->p + b->off, b->n);
                        b->off = 0;
                }
                if (b->n + n > b->cap) {
                        size_t cap = MAX(MIN((size_t) GW_H2_WINDOW, MAX(b->cap * 2, (size_t) 16384)), b->n + n);
                        uint8_t *q = malloc(cap);
                        if (!q)
                                return -ENOMEM;
                        if (b->p) {
                                memcpy(q, b->p, b->n);
                                OPENSSL_cleanse(b->p, b->cap);
                                free(b->p);
                        }
                        b->p = q;
                        b->cap = cap;
                }
        }
        memcpy(b->p + b->off + b->n, p, n);
        b->n += n;
        return 0;
}

static size_t body_take(H2Body *b, uint8_t *buf, size_t n) {
        n = MIN(n, b->n);
        if (n == 0)
                return 0;
        memcpy(buf, b->p + b->off, n);
        b->off += n;
        b->n -= n;
        if (b->n == 0)
                b->off = 0;
        return n;
}

static void block_done(H2Block *k) {
        for (size_t i = 0; i < k->n_pseudo; i++) {
                free(k->pseudo[i].name);
                free(k->pseudo[i].value);
        }
        cred_inject_head_done(&k->head); /* wipes the values: they may hold the credential */
        *k = (H2Block){};
}

static const char *block_pseudo(const H2Block *k, const char *name) {
        for (size_t i = 0; i < k->n_pseudo; i++)
                if (strcmp(k->pseudo[i].name, name) == 0)
                        return k->pseudo[i].value;
        return NULL;
}

static int block_add(H2Block *k, const uint8_t *name, size_t nl, const uint8_t *value, size_t vl, size_t max) {
        HttpHeader hdr;

        if (k->too_big || k->bad)
                return 0;
        if (nl + vl + 32 > max - MIN(max, k->bytes)) {
                k->too_big = true;
                return 0;
        }
        k->bytes += nl + vl + 32;
        hdr.name = strndup((const char *) name, nl);
        hdr.value = strndup((const char *) value, vl);
        if (!hdr.name || !hdr.value) {
                free(hdr.name);
                free(hdr.value);
                return -ENOMEM;
        }
        if (nl > 0 && name[0] == ':') {
                if (k->n_pseudo >= GW_H2_PSEUDO_MAX || block_pseudo(k, hdr.name)) {
                        k->bad = true;
                        free(hdr.name);
                        free(hdr.value);
                        return 0;
                }
                k->pseudo[k->n_pseudo++] = hdr;
                return 0;
        }
        if (k->head.n_headers >= HTTP_HEADERS_MAX) {
                k->too_big = true;
                free(hdr.name);
                free(hdr.value);
                return 0;
        }
        HttpHeader *a = realloc(k->head.headers, (k->head.n_headers + 1) * sizeof *a);
        if (!a) {
                free(hdr.name);
                free(hdr.value);
                return -ENOMEM;
        }
        k->head.headers = a;
        k->head.headers[k->head.n_headers++] = hdr;
        return 0;
}

static bool never_index(const GwH2 *h, const char *name) {
        const CredInjectSet *set = &h->c->sb->creds;

        if (strcasecmp(name, "authorization") == 0 || strcasecmp(name, "proxy-authorization") == 0 ||
            strcasecmp(name, "cookie") == 0)
                return true;
        for (size_t i = 0; i < set->n; i++)
                if (strcasecmp(name, set->items[i].header_name) == 0)
                        return true;
        return false;
}

/* The block as nghttp2 name/value pairs (pointing into k; nghttp2 copies
 * them on submit). Names go lower-case (a credential's header name may not be). */
static nghttp2_nv *block_nv(const GwH2 *h, H2Block *k, size_t *ret_n) {
        size_t n = k->n_pseudo + k->head.n_headers, o = 0;
        nghttp2_nv *nv = new0(nghttp2_nv, MAX(n, (size_t) 1));

        if (!nv)
                return NULL;
        for (size_t i = 0; i < k->n_pseudo; i++, o++)
                nv[o] = (nghttp2_nv){ (uint8_t *) k->pseudo[i].name, (uint8_t *) k->pseudo[i].value,
                                      strlen(k->pseudo[i].name), strlen(k->pseudo[i].value), NGHTTP2_NV_FLAG_NONE };
        for (size_t i = 0; i < k->head.n_headers; i++, o++) {
                HttpHeader *hdr = &k->head.headers[i];
                for (char *s = hdr->name; *s; s++)
                        if (*s >= 'A' && *s <= 'Z')
                                *s = (char) (*s - 'A' + 'a');
                nv[o] = (nghttp2_nv){ (uint8_t *) hdr->name, (uint8_t *) hdr->value, strlen(hdr->name),
                                      strlen(hdr->value),
                                      never_index(h, hdr->name) ? NGHTTP2_NV_FLAG_NO_INDEX : NGHTTP2_NV_FLAG_NONE };
        }
        *ret_n = n;
        return nv;
}

static H2Stream *stream_new(GwH2 *h) {
        H2Stream *st = new0(H2Stream, 1);

        if (!st)
                return NULL;
        st->next = h->streams;
        if (h->streams)
                h->streams->prev = st;
        h->streams = st;
        h->n_streams++;
        return st;
}

static void stream_free(GwH2 *h, H2Stream *st) {
        if (st->prev)
                st->prev->next = st->next;
        else
                h->streams = st->next;
        if (st->next)
                st->next->prev = st->prev;
        h->n_streams--;
        block_done(&st->block);
        block_done(&st->req_trailers);
        block_done(&st->resp_trailers);
        body_done(&st->req);
        body_done(&st->resp);
        free(st);
}

static void stream_maybe_free(GwH2 *h, H2Stream *st) {
        if (st->down_id == 0 && st->up_id == 0)
                stream_free(h, st);
}

/* Bytes received on a leg and taken (or dropped) reopen its windows: the
 * stream's while it lives, the connection's always (a stream closed with
 * bytes still buffered must not shrink the connection's window for good). */
static void give_back(nghttp2_session *s, int32_t id, size_t n) {
        if (n == 0)
                return;
        if (id > 0)
                (void) nghttp2_session_consume(s, id, n);
        else
                (void) nghttp2_session_consume_connection(s, n);
}

/* Data providers: the sandbox's request body to the upstream, the
 * upstream's response body to the sandbox. Taking bytes opens the other
 * leg's window by as much. */
static ssize_t provide(GwH2 *h, nghttp2_session *to, H2Stream *st, bool request, uint8_t *buf, size_t length,
                       uint32_t *data_flags) {
        H2Body *b = request ? &st->req : &st->resp;
        bool end = request ? st->req_end : st->resp_end;
        nghttp2_session *from = request ? h->down : h->up;
        int32_t from_id = request ? st->down_id : st->up_id;
        size_t n = body_take(b, buf, length);

        if (request || !st->refused) /* a refusal's body came from nowhere */
                give_back(from, from_id, n);
        if (b->n == 0 && end) {
                H2Block *t = request ? &st->req_trailers : &st->resp_trailers;
                bool has_t = request ? st->has_req_trailers : st->has_resp_trailers;
                *data_flags |= NGHTTP2_DATA_FLAG_EOF;
                if (has_t) {
                        size_t nn = 0;
                        _cleanup_free_ nghttp2_nv *nv = block_nv(h, t, &nn);
                        int32_t id = request ? st->up_id : st->down_id;
                        if (nv && nghttp2_submit_trailer(to, id, nv, nn) == 0)
                                *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
                        block_done(t);
                        if (request)
                                st->has_req_trailers = false;
                        else
                                st->has_resp_trailers = false;
                }
                return (ssize_t) n;
        }
        if (n == 0)
                return NGHTTP2_ERR_DEFERRED;
        return (ssize_t) n;
}

static ssize_t provide_up(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length, uint32_t *data_flags,
                          nghttp2_data_source *source, void *user_data) {
        (void) id;
        return provide(user_data, s, source->ptr, true, buf, length, data_flags);
}

static ssize_t provide_down(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length, uint32_t *data_flags,
                            nghttp2_data_source *source, void *user_data) {
        (void) id;
        return provide(user_data, s, source->ptr, false, buf, length, data_flags);
}

/* Answers a stream here (refusals): status and a one-line text body. */
static void stream_answer(GwH2 *h, H2Stream *st, int status, const char *why) {
        char code[8], len[24], body[GW_EVENT_REASON_MAX + 32];
        int bn = snprintf(body, sizeof body, "space gateway: %s\n", why);
        nghttp2_data_provider prd = { .source.ptr = st, .read_callback = provide_down };

        if (bn < 0 || (size_t) bn >= sizeof body)
                bn = 0;
        (void) snprintf(code, sizeof code, "%d", status);
        (void) snprintf(len, sizeof len, "%d", bn);
        nghttp2_nv nv[] = {
                { (uint8_t *) ":status", (uint8_t *) code, 7, strlen(code), NGHTTP2_NV_FLAG_NONE },
                { (uint8_t *) "content-type", (uint8_t *) "text/plain", 12, 10, NGHTTP2_NV_FLAG_NONE },
                { (uint8_t *) "content-length", (uint8_t *) len, 14, strlen(len), NGHTTP2_NV_FLAG_NONE },
        };
        st->refused = true;
        body_done(&st->resp);
        if (body_add(&st->resp, (const uint8_t *) body, (size_t) bn) < 0) {
                (void) nghttp2_submit_rst_stream(h->down, NGHTTP2_FLAG_NONE, st->down_id, NGHTTP2_INTERNAL_ERROR);
                return;
        }
        st->resp_end = true;
        st->final_sent = true;
        if (nghttp2_submit_response(h->down, st->down_id, nv, ELEMENTSOF(nv), &prd) != 0)
                (void) nghttp2_submit_rst_stream(h->down, NGHTTP2_FLAG_NONE, st->down_id, NGHTTP2_INTERNAL_ERROR);
}

static void stream_refuse(GwH2 *h, H2Stream *st, int status, const char *why) {
        gw_event(h->gw, h->c->sb, false, "tls", h->c->host, NULL, h->c->port, why);
        stream_answer(h, st, status, why);
}

/* A request's header block is complete: checked, credentials applied, sent upstream. */
static void request(GwH2 *h, H2Stream *st, bool end_stream) {
        char why[DNS_NAME_MAX * 2 + 128];
        const char *method = block_pseudo(&st->block, ":method");
        const char *authority = block_pseudo(&st->block, ":authority");
        const char *host = http_head_header(&st->block.head, "host");
        CredInjectUsed used = {};
        int32_t id;
        int r;

        st->req_end = end_stream;
        if (st->block.too_big) {
                stream_refuse(h, st, 431, "request header block too large");
                return;
        }
        if (st->block.bad || !method) {
                stream_refuse(h, st, 400, "malformed request header block");
                return;
        }
        if (strcmp(method, "CONNECT") == 0) {
                stream_refuse(h, st, 501, "CONNECT is not relayed over HTTP/2");
                return;
        }
        if ((!authority && !host) || (authority && !gw_host_header_matches(h->c, authority)) ||
            (host && !gw_host_header_matches(h->c, host))) {
                (void) snprintf(why, sizeof why,
                                "HTTP/2 request for %.253s on a connection for %s (TLS SNI): refused",
                                authority ?: host ?: "no authority", h->c->host);
                stream_refuse(h, st, 421, why);
                return;
        }
        r = cred_inject_head(&h->c->sb->creds, h->c->host, gw_wall_usec(), &st->block.head, &used);
        if (r < 0) {
                stream_refuse(h, st, r == -E2BIG ? 431 : 502, "the credential could not be applied to the request");
                return;
        }
        if (h->up_gone || h->up_goaway) {
                (void) nghttp2_submit_rst_stream(h->down, NGHTTP2_FLAG_NONE, st->down_id, NGHTTP2_REFUSED_STREAM);
                return;
        }
        size_t n = 0;
        _cleanup_free_ nghttp2_nv *nv = block_nv(h, &st->block, &n);
        nghttp2_data_provider prd = { .source.ptr = st, .read_callback = provide_up };
        id = nv ? nghttp2_submit_request(h->up, NULL, nv, n, end_stream ? NULL : &prd, st) : NGHTTP2_ERR_NOMEM;
        block_done(&st->block); /* nghttp2 copied it (wiped here: it held the credential) */
        if (id < 0) {
                /* the upstream said GOAWAY: the client may retry on a new connection */
                (void) nghttp2_submit_rst_stream(h->down, NGHTTP2_FLAG_NONE, st->down_id,
                                                 id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE ? NGHTTP2_REFUSED_STREAM
                                                                                           : NGHTTP2_INTERNAL_ERROR);
                return;
        }
        st->up_id = id;
        gw_cred_used(h->gw, h->c->sb, h->c->host, &used);
}

/* A response's header block from the upstream is complete. */
static void response(GwH2 *h, H2Stream *st, bool end_stream) {
        size_t n = 0;
        const char *status = block_pseudo(&st->block, ":status");
        nghttp2_data_provider prd = { .source.ptr = st, .read_callback = provide_down };
        int r;

        if (st->down_id == 0) {
                block_done(&st->block);
                return;
        }
        if (st->final_sent) { /* trailers */
                block_done(&st->resp_trailers);
                st->resp_trailers = st->block;
                st->block = (H2Block){};
                st->has_resp_trailers = true;
                st->resp_end = true;
                (void) nghttp2_session_resume_data(h->down, st->down_id);
                return;
        }
        if (st->block.too_big || st->block.bad || !status) {
                block_done(&st->block);
                (void) nghttp2_submit_rst_stream(h->up, NGHTTP2_FLAG_NONE, st->up_id, NGHTTP2_CANCEL);
                stream_answer(h, st, 502, "the upstream's response header block was too large or malformed");
                return;
        }
        _cleanup_free_ nghttp2_nv *nv = block_nv(h, &st->block, &n);
        if (!nv)
                r = NGHTTP2_ERR_NOMEM;
        else if (status[0] == '1') /* 1xx: more headers follow */
                r = nghttp2_submit_headers(h->down, NGHTTP2_FLAG_NONE, st->down_id, NULL, nv, n, NULL);
        else {
                st->final_sent = true;
                st->resp_end = end_stream;
                r = nghttp2_submit_response(h->down, st->down_id, nv, n, end_stream ? NULL : &prd);
        }
        block_done(&st->block);
        if (r != 0)
                (void) nghttp2_submit_rst_stream(h->down, NGHTTP2_FLAG_NONE, st->down_id, NGHTTP2_INTERNAL_ERROR);
}

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *frame, void *user_data) {
        GwH2 *h = user_data;
        H2Stream *st;

        if (frame->hd.type != NGHTTP2_HEADERS)
                return 0;
        if (s == h->down && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
                st = stream_new(h);
                if (!st)
                        return NGHTTP2_ERR_CALLBACK_FAILURE;
                st->down_id = frame->hd.stream_id;
                if (nghttp2_session_set_stream_user_data(s, st->down_id, st) != 0) {
                        stream_free(h, st);
                        return NGHTTP2_ERR_CALLBACK_FAILURE;
                }
                return 0;
        }
        st = nghttp2_session_get_stream_user_data(s, frame->hd.stream_id);
        if (st)
                block_done(&st->block);
        return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *user_data) {
        GwH2 *h = user_data;
        H2Stream *st;

        (void) flags;
        if (frame->hd.type != NGHTTP2_HEADERS)
                return 0;
        st = nghttp2_session_get_stream_user_data(s, frame->hd.stream_id);
        if (!st || (s == h->down && st->refused))
                return 0;
        if (block_add(&st->block, name, namelen, value, valuelen,
                      s == h->down ? GW_H2_REQUEST_HEADERS_MAX : GW_H2_RESPONSE_HEADERS_MAX) < 0)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        return 0;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *frame, void *user_data) {
        GwH2 *h = user_data;
        bool end = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;
        H2Stream *st;

        if (frame->hd.type == NGHTTP2_GOAWAY) {
                if (s == h->up && !h->up_goaway && !h->up_gone)
                        (void) nghttp2_submit_goaway(h->down, NGHTTP2_FLAG_NONE,
                                                     nghttp2_session_get_last_proc_stream_id(h->down),
                                                     frame->goaway.error_code, NULL, 0);
                if (s == h->up)
                        h->up_goaway = true;
                return 0;
        }
        if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
                return 0;
        st = nghttp2_session_get_stream_user_data(s, frame->hd.stream_id);
        if (!st)
                return 0;
        if (s == h->down) {
                if (st->refused)
                        return 0;
                if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
                        request(h, st, end);
                        return 0;
                }
                if (frame->hd.type == NGHTTP2_HEADERS) { /* trailers (nghttp2 checked END_STREAM) */
                        if (st->block.too_big || st->block.bad) {
                                block_done(&st->block);
                                (void) nghttp2_submit_rst_stream(h->down, NGHTTP2_FLAG_NONE, st->down_id,
                                                                 NGHTTP2_PROTOCOL_ERROR);
                                return 0;
                        }
                        block_done(&st->req_trailers);
                        st->req_trailers = st->block;
                        st->block = (H2Block){};
                        st->has_req_trailers = true;
                }
                if (end) {
                        st->req_end = true;
                        if (st->up_id > 0)
                                (void) nghttp2_session_resume_data(h->up, st->up_id);
                }
                return 0;
        }
        if (frame->hd.type == NGHTTP2_HEADERS) {
                response(h, st, end);
                return 0;
        }
        if (end && st->down_id > 0) {
                st->resp_end = true;
                (void) nghttp2_session_resume_data(h->down, st->down_id);
        }
        return 0;
}

static int on_data_chunk(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                         void *user_data) {
        GwH2 *h = user_data;
        H2Stream *st = nghttp2_session_get_stream_user_data(s, id);
        bool down = s == h->down;

        (void) flags;
        if (!st || (down ? st->refused || st->up_id == 0 : st->down_id == 0 || st->refused)) {
                (void) nghttp2_session_consume(s, id, len); /* nowhere to go */
                return 0;
        }
        if (body_add(down ? &st->req : &st->resp, data, len) < 0)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        (void) nghttp2_session_resume_data(down ? h->up : h->down, down ? st->up_id : st->down_id);
        return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t error_code, void *user_data) {
        GwH2 *h = user_data;
        H2Stream *st = nghttp2_session_get_stream_user_data(s, id);

        if (!st)
                return 0;
        if (s == h->down) {
                st->down_id = 0;
                if (!st->refused)
                        give_back(h->up, st->up_id, st->resp.n); /* nobody takes them now */
                body_done(&st->resp);
                if (st->up_id > 0 && error_code != NGHTTP2_NO_ERROR)
                        (void) nghttp2_submit_rst_stream(h->up, NGHTTP2_FLAG_NONE, st->up_id, error_code);
        } else {
                st->up_id = 0;
                give_back(h->down, st->down_id, st->req.n);
                body_done(&st->req);
                if (st->down_id > 0 && !st->refused && (error_code != NGHTTP2_NO_ERROR || !st->resp_end))
                        (void) nghttp2_submit_rst_stream(h->down, NGHTTP2_FLAG_NONE, st->down_id,
                                                         error_code != NGHTTP2_NO_ERROR ? error_code
                                                                                        : NGHTTP2_INTERNAL_ERROR);
        }
        stream_maybe_free(h, st);
        return 0;
}

static int on_frame_send(nghttp2_session *s, const nghttp2_frame *frame, void *user_data) {
        GwH2 *h = user_data;
        H2Stream *st;

        if (s != h->up || frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
                return 0;
        st = nghttp2_session_get_stream_user_data(s, frame->hd.stream_id);
        if (st)
                st->req_sent = true;
        return 0;
}

/* A request that never went out (it waited for a stream slot and the
 * upstream said GOAWAY meanwhile): no stream was opened on that leg, so no
 * close either; the sandbox's stream is refused (it may retry elsewhere). */
static int on_frame_not_send(nghttp2_session *s, const nghttp2_frame *frame, int lib_error_code, void *user_data) {
        GwH2 *h = user_data;

        (void) lib_error_code;
        if (s != h->up || frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
                return 0;
        if (nghttp2_session_get_stream_user_data(s, frame->hd.stream_id))
                return 0; /* the stream was opened: its close comes (on_stream_close) */
        for (H2Stream *st = h->streams; st; st = st->next) {
                if (st->up_id != frame->hd.stream_id)
                        continue;
                st->up_id = 0;
                give_back(h->down, st->down_id, st->req.n);
                body_done(&st->req);
                if (st->down_id > 0)
                        (void) nghttp2_submit_rst_stream(h->down, NGHTTP2_FLAG_NONE, st->down_id,
                                                         NGHTTP2_REFUSED_STREAM);
                stream_maybe_free(h, st);
                break;
        }
        return 0;
}

static int session_new(GwH2 *h, bool server, nghttp2_session **ret) {
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
        nghttp2_session_callbacks_set_on_frame_not_send_callback(cb, on_frame_not_send);
        nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
        nghttp2_option_set_no_auto_window_update(opt, 1);
        nghttp2_option_set_max_send_header_block_length(opt, GW_H2_RESPONSE_HEADERS_MAX + 1024);
        r = server ? nghttp2_session_server_new2(ret, cb, h, opt) : nghttp2_session_client_new2(ret, cb, h, opt);
        nghttp2_option_del(opt);
        nghttp2_session_callbacks_del(cb);
        if (r != 0)
                return -ENOMEM;
        return 0;
}

int gw_h2_new(Gateway *gw, GwConn *c, GwH2Sink down, GwH2Sink up, GwH2 **ret) {
        _cleanup_(gw_h2_freep) GwH2 *h = NULL;
        const nghttp2_settings_entry down_settings[] = {
                { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, GW_H2_STREAMS_MAX },
                { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, GW_H2_WINDOW },
                { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, GW_H2_REQUEST_HEADERS_MAX },
        };
        const nghttp2_settings_entry up_settings[] = {
                { NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
                { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, GW_H2_STREAMS_MAX },
                { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, GW_H2_WINDOW },
                { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, GW_H2_RESPONSE_HEADERS_MAX },
        };
        int r;

        if (!gw || !c || !down.write || !down.pending || !up.write || !up.pending || !ret)
                return -EINVAL;
        h = new0(GwH2, 1);
        if (!h)
                return -ENOMEM;
        h->gw = gw;
        h->c = c;
        h->down_sink = down;
        h->up_sink = up;
        r = session_new(h, true, &h->down);
        if (r >= 0)
                r = session_new(h, false, &h->up);
        if (r < 0)
                return r;
        if (nghttp2_submit_settings(h->down, NGHTTP2_FLAG_NONE, down_settings, ELEMENTSOF(down_settings)) != 0 ||
            nghttp2_submit_settings(h->up, NGHTTP2_FLAG_NONE, up_settings, ELEMENTSOF(up_settings)) != 0 ||
            nghttp2_session_set_local_window_size(h->down, NGHTTP2_FLAG_NONE, 0, GW_H2_WINDOW) != 0 ||
            nghttp2_session_set_local_window_size(h->up, NGHTTP2_FLAG_NONE, 0, GW_H2_WINDOW) != 0)
                return -ENOMEM;
        *ret = TAKE_PTR(h);
        return 0;
}

GwH2 *gw_h2_free(GwH2 *h) {
        if (!h)
                return NULL;
        nghttp2_session_del(h->down);
        nghttp2_session_del(h->up);
        while (h->streams)
                stream_free(h, h->streams);
        free(h);
        return NULL;
}

int gw_h2_recv(GwH2 *h, bool from_sandbox, const uint8_t *p, size_t n) {
        ssize_t k;

        if (!h || (!p && n > 0))
                return -EINVAL;
        k = nghttp2_session_mem_recv(from_sandbox ? h->down : h->up, p, n);
        if (k < 0) {
                h->failed = true;
                return -EPROTO;
        }
        return 0;
}

static ssize_t send_leg(nghttp2_session *s, const GwH2Sink *sink, size_t limit) {
        ssize_t total = 0;

        while (sink->pending(sink->userdata) < limit) {
                const uint8_t *data = NULL;
                ssize_t k = nghttp2_session_mem_send(s, &data);
                if (k < 0)
                        return -EPROTO;
                if (k == 0)
                        break;
                int r = sink->write(sink->userdata, data, (size_t) k);
                if (r < 0)
                        return r;
                total += k;
        }
        return total;
}

int gw_h2_send(GwH2 *h, size_t limit) {
        if (!h)
                return -EINVAL;
        /* a leg's sending takes bodies of the other (WINDOW_UPDATEs to send there): until neither moves */
        for (unsigned i = 0; i < 8; i++) {
                ssize_t a = send_leg(h->down, &h->down_sink, limit);
                ssize_t b = h->up_gone ? 0 : send_leg(h->up, &h->up_sink, limit);
                if (a < 0) {
                        h->failed = true;
                        return -EPROTO;
                }
                if (b < 0) {
                        /* the upstream went away while there was still something for it (a window update,
                         * an ack): what it answered before still goes to the sandbox, then its GOAWAY */
                        gw_h2_upstream_gone(h);
                        continue;
                }
                if (a == 0 && b == 0)
                        break;
        }
        /* the upstream's session ended (its GOAWAY, or a protocol error on that leg) */
        if (!nghttp2_session_want_read(h->up) && !nghttp2_session_want_write(h->up))
                gw_h2_upstream_gone(h);
        return 0;
}

void gw_h2_upstream_gone(GwH2 *h) {
        if (!h || h->up_gone)
                return;
        h->up_gone = true;
        for (H2Stream *st = h->streams; st; st = st->next)
                if (st->down_id > 0 && !st->refused && !st->resp_end)
                        (void) nghttp2_submit_rst_stream(h->down, NGHTTP2_FLAG_NONE, st->down_id,
                                                         NGHTTP2_INTERNAL_ERROR); /* it may have been processed */
        if (!h->up_goaway)
                (void) nghttp2_submit_goaway(h->down, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(h->down),
                                     NGHTTP2_NO_ERROR, NULL, 0);
}

int gw_h2_cut(GwH2 *h, const char *why) {
        char debug[GW_EVENT_REASON_MAX + 32];
        int n;

        if (!h)
                return -EINVAL;
        if (h->cut)
                return 0;
        h->cut = true;
        h->up_gone = true; /* nothing more goes to or comes from the upstream */
        for (H2Stream *st = h->streams; st; st = st->next) {
                if (st->down_id <= 0 || (st->refused ? st->resp_end : st->resp_end && st->resp.n == 0))
                        continue; /* closed, or its whole answer is queued (a refusal; a response taken) */
                /* a request that went upstream may have been acted on there: CANCEL; one that did not (its
                 * header block incomplete, or waiting for a stream slot upstream) was not processed:
                 * REFUSED_STREAM, the client may retry it */
                (void) nghttp2_submit_rst_stream(h->down, NGHTTP2_FLAG_NONE, st->down_id,
                                                 st->req_sent || st->refused ? NGHTTP2_CANCEL
                                                                             : NGHTTP2_REFUSED_STREAM);
        }
        n = snprintf(debug, sizeof debug, "space gateway: %s", why ?: "connection cut");
        if (n < 0)
                n = 0;
        if ((size_t) n >= sizeof debug)
                n = (int) sizeof debug - 1;
        /* the streams above the last one the gateway took were not processed: the client may retry them */
        if (nghttp2_submit_goaway(h->down, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(h->down),
                                  NGHTTP2_NO_ERROR, (const uint8_t *) debug, (size_t) n) != 0) {
                h->failed = true;
                return -ENOMEM;
        }
        return 0;
}

bool gw_h2_done(const GwH2 *h) {
        if (!h || h->failed)
                return true;
        if (h->cut) /* the GOAWAY (and the resets before it) went out */
                return !nghttp2_session_want_write(h->down);
        if (!nghttp2_session_want_read(h->down) && !nghttp2_session_want_write(h->down))
                return true;
        return false;
}
