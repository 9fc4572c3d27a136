/* SPDX-License-Identifier: MIT */
/* TLS interception of a connection to a host the sandbox holds a credential
 * for. Two TLS endpoints over memory BIOs (tls-intercept.h): `down` ends the
 * sandbox's TLS with a leaf of the sandbox's CA, `up` is our own TLS to the
 * real upstream, verified against the host's trust store (or the configured
 * CA file) and the host name. Both handshakes run at once.
 *
 * The sandbox's plaintext is parsed as a sequence of HTTP/1.x requests
 * (keep-alive and pipelining work): each head must name the host TLS was for
 * (Host = SNI = the policy's decision), gets the credentials applied (so a
 * rotation or revocation holds from the next request on, even on an open
 * connection) and is forwarded; bodies are framed by Content-Length or
 * chunked encoding; after an Upgrade the rest is relayed as is. The
 * upstream's plaintext goes back unchanged. Every plaintext buffer is wiped
 * when it is freed.
 *
 * HTTP/2: the upstream is offered what the sandbox offered (h2 and/or
 * http/1.1), and the sandbox is answered with what the upstream chose, so a
 * protocol is only agreed when it can be served end to end. A sandbox
 * offering h2 therefore waits for the upstream's handshake before its own
 * ServerHello (tls-intercept.h); one offering only http/1.1 does not (both
 * handshakes run at once, as before). The upstream's choice is remembered
 * per sandbox, host and port (GW_ALPN_MEMORY_SEC): the next connection
 * answers the sandbox at once and offers the upstream only that protocol,
 * so both handshakes run in parallel again; an upstream that no longer
 * agrees (it chose nothing, or failed the handshake) costs that one
 * connection (closed, with an event) and the memory is dropped. With h2 on both legs the plaintext
 * goes through gateway-h2.c (stream by stream, credentials on every
 * request's HEADERS); otherwise through the HTTP/1.x parser here.
 *
 * Buffers of the GwConn: out[] stages ciphertext for the sandbox's socket,
 * in[] ciphertext for the upstream's socket. */
#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "gateway-h2.h"
#include "gateway-internal.h"
#include "log.h"
#include "sock-io.h"
#include "str-util.h"

#define IX_PENDING_MAX (256U * 1024U) /* ciphertext waiting in a pipe: reading stops beyond */
#define IX_READ_MAX (16U * 1024U)     /* plaintext or ciphertext moved at once */

typedef enum IxReq {
        IX_REQ_HEAD,  /* reading a request head */
        IX_REQ_BODY,  /* forwarding its body */
        IX_REQ_RAW,   /* after an Upgrade: everything as is */
} IxReq;

typedef struct GwIntercept {
        TlsPipe *down, *up;
        bool down_ready, up_ready, up_connected;
        uint8_t *req;     /* the sandbox's plaintext not yet forwarded (GW_BUF_SIZE) */
        size_t req_n;
        uint8_t *scratch; /* IX_READ_MAX */
        IxReq state;
        bool chunked;
        uint64_t body_left;
        HttpChunkDecoder chunk;
        bool refusing;    /* a refusal goes to the sandbox, then the connection closes */
        int refuse_status;
        char refuse_why[GW_EVENT_REASON_MAX];
        bool down_closed, up_closed; /* close_notify seen */
        bool alpn_set;    /* the upstream's ALPN offer follows the sandbox's ClientHello */
        bool answered;    /* the sandbox's pipe knows what to select */
        TlsAlpn recalled; /* answered from memory before the upstream chose (TLS_ALPN_NONE: not) */
        bool remembered;  /* the upstream's choice was handled */
        bool forwarded, spoke; /* HTTP/1.x: a request went upstream; the upstream sent a byte */
        bool up_gone;     /* HTTP/1.x: the upstream ended before the first request and said nothing */
        GwH2 *h2;         /* both legs chose h2 */
        bool cut;         /* h2: the policy denied it; the GOAWAY goes out, then the close */
        bool cut_notified; /* and after it the close_notify: the sandbox's bytes are no longer decrypted */
        bool cut_shut;    /* and our FIN: the sandbox's bytes are read and dropped until its FIN */
} GwIntercept;

static void ix_pump(Gateway *gw, GwConn *c);

void gw_intercept_free(GwIntercept *ix) {
        if (!ix)
                return;
        gw_h2_free(ix->h2);
        tls_pipe_free(ix->down);
        tls_pipe_free(ix->up);
        if (ix->req) {
                OPENSSL_cleanse(ix->req, GW_BUF_SIZE);
                free(ix->req);
        }
        if (ix->scratch) {
                OPENSSL_cleanse(ix->scratch, IX_READ_MAX);
                free(ix->scratch);
        }
        free(ix);
}

static void ix_close(Gateway *gw, GwConn *c) {
        gw_conn_close(gw, c);
}

static GwAlpnMemory *alpn_find(GwSandbox *sb, const char *host, uint16_t port) {
        for (size_t i = 0; i < GW_ALPN_MEMORY_MAX; i++) {
                GwAlpnMemory *m = &sb->alpn_memory[i];
                if (m->expiry_usec != 0 && m->port == port && strcmp(m->host, host) == 0)
                        return m;
        }
        return NULL;
}

static TlsAlpn alpn_recall(GwSandbox *sb, const char *host, uint16_t port) {
        GwAlpnMemory *m = alpn_find(sb, host, port);

        if (!m)
                return TLS_ALPN_NONE;
        if (m->expiry_usec <= gw_now_usec()) {
                m->expiry_usec = 0;
                return TLS_ALPN_NONE;
        }
        return (TlsAlpn) m->alpn;
}

static void alpn_remember(GwSandbox *sb, const char *host, uint16_t port, TlsAlpn alpn) {
        GwAlpnMemory *m = alpn_find(sb, host, port);

        if (!m) { /* a free entry, or the one that expires first */
                m = &sb->alpn_memory[0];
                for (size_t i = 1; i < GW_ALPN_MEMORY_MAX && m->expiry_usec != 0; i++)
                        if (sb->alpn_memory[i].expiry_usec < m->expiry_usec)
                                m = &sb->alpn_memory[i];
        }
        (void) strscpy(m->host, sizeof m->host, host);
        m->port = port;
        m->alpn = (uint8_t) alpn;
        m->expiry_usec = gw_now_usec() + GW_ALPN_MEMORY_SEC * 1000000ULL;
}

static void alpn_forget(GwSandbox *sb, const char *host, uint16_t port) {
        GwAlpnMemory *m = alpn_find(sb, host, port);

        if (m)
                m->expiry_usec = 0;
}

/* Answers the sandbox with status inside its TLS (once its handshake is
 * done), records the refusal, and closes after the answer is out. */
static void ix_refuse(Gateway *gw, GwConn *c, int status, const char *why) {
        GwIntercept *ix = c->ix;

        if (ix->refusing)
                return;
        if (ix->recalled != TLS_ALPN_NONE)
                alpn_forget(c->sb, c->host, c->port); /* learn again on the next connection */
        gw_event(gw, c->sb, false, "tls", c->host, NULL, c->port, why);
        /* the answer is HTTP/1.1: a sandbox waiting for the upstream's ALPN gets http/1.1 (or none) */
        (void) tls_pipe_set_answer(ix->down, TLS_ALPN_HTTP11);
        ix->answered = true;
        ix->refusing = true;
        ix->refuse_status = status;
        (void) strscpy(ix->refuse_why, sizeof ix->refuse_why, why);
        gw_io_close(gw, &c->uio);
        c->in_n = 0;
        c->state = GW_CONN_FLUSH;
        c->deadline_usec = gw_now_usec() + gw->config->handshake_timeout_sec * 1000000ULL;
}

#define IX_SILENT_UPSTREAM "the upstream closed the connection without answering (does it speak HTTP/1.1?)"

/* The upstream ended before the sandbox's first request (an upstream that
 * speaks no HTTP/1.1 closes right after its handshake): that request is
 * answered 502 with the reason once its head is in (so the answer does not
 * race it, and the close reads it away: a FIN, not a reset that could drop the
 * answer), or the connection ends with the sandbox's close or its idle
 * timeout. */
static void answer_gone(Gateway *gw, GwConn *c) {
        GwIntercept *ix = c->ix;

        if (ix->refusing || ix->req_n == 0)
                return;
        if (http_head_length((const char *) ix->req, ix->req_n) != 0 || ix->req_n >= GW_BUF_SIZE || ix->down_closed)
                ix_refuse(gw, c, 502, IX_SILENT_UPSTREAM);
}

static void ix_send_refusal(GwConn *c) {
        GwIntercept *ix = c->ix;
        char buf[GW_EVENT_REASON_MAX + 256];
        int n = snprintf(buf, sizeof buf,
                         "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                         "Content-Length: %zu\r\n\r\nspace gateway: %s\n",
                         ix->refuse_status, http_status_reason(ix->refuse_status), strlen(ix->refuse_why) + 16,
                         ix->refuse_why);
        if (n > 0 && (size_t) n < sizeof buf)
                (void) tls_pipe_write(ix->down, buf, (size_t) n);
        (void) tls_pipe_shutdown(ix->down);
        ix->refuse_status = 0; /* sent */
}

bool gw_host_header_matches(const GwConn *c, const char *v) {
        const char *colon = strrchr(v, ':');
        size_t n = colon ? (size_t) (colon - v) : strlen(v);
        unsigned port = 443;

        if (colon && (safe_atou(colon + 1, &port) < 0 || port == 0 || port > 65535))
                return false;
        if (n > 0 && v[n - 1] == '.')
                n--;
        return port == c->port && n == strlen(c->host) && strncasecmp(v, c->host, n) == 0;
}

static bool head_upgrades(const HttpHead *h) {
        return http_head_header(h, "upgrade") != NULL || strcasecmp(h->method, "CONNECT") == 0;
}

/* The head as it goes upstream, written into the upstream pipe (the buffer
 * held a credential: wiped). */
static int head_forward(GwIntercept *ix, const HttpHead *h) {
        size_t n = strlen(h->method) + strlen(h->target) + 16, o;
        int r;

        for (size_t i = 0; i < h->n_headers; i++)
                n += strlen(h->headers[i].name) + strlen(h->headers[i].value) + 4;
        n += 3;
        char *buf = malloc(n);
        if (!buf)
                return -ENOMEM;
        o = (size_t) snprintf(buf, n, "%s %s HTTP/1.%d\r\n", h->method, h->target, h->version_minor);
        for (size_t i = 0; i < h->n_headers && o < n; i++)
                o += (size_t) snprintf(buf + o, n - o, "%s: %s\r\n", h->headers[i].name, h->headers[i].value);
        if (o + 2 >= n)
                r = -E2BIG;
        else {
                memcpy(buf + o, "\r\n", 2);
                r = tls_pipe_write(ix->up, buf, o + 2);
        }
        OPENSSL_cleanse(buf, n);
        free(buf);
        return r;
}

static void req_consume(GwIntercept *ix, size_t n) {
        memmove(ix->req, ix->req + n, ix->req_n - n);
        OPENSSL_cleanse(ix->req + ix->req_n - n, n);
        ix->req_n -= n;
}

/* A complete head at the start of req: checked, credentials applied, forwarded. */
static int request_head(Gateway *gw, GwConn *c, size_t head_len) {
        _cleanup_(cred_inject_head_done) HttpHead h = {};
        GwIntercept *ix = c->ix;
        CredInjectUsed used = {};
        char why[DNS_NAME_MAX * 2 + 96];
        const char *host;
        int r;

        r = http_parse_request_head((const char *) ix->req, head_len, &h);
        if (r < 0) {
                ix_refuse(gw, c, r == -ENAMETOOLONG ? 414 : 400, "malformed request head");
                return -EBADMSG;
        }
        host = http_head_header(&h, "host");
        if (!host || !gw_host_header_matches(c, host)) {
                snprintf(why, sizeof why, "the Host header (%.253s) does not name %s, the host TLS was for",
                         host ?: "missing", c->host);
                ix_refuse(gw, c, 421, why);
                return -EBADMSG;
        }
        r = cred_inject_head(&c->sb->creds, c->host, gw_wall_usec(), &h, &used);
        if (r < 0) {
                ix_refuse(gw, c, r == -E2BIG ? 431 : 502, "the credential could not be applied to the request");
                return r;
        }
        r = head_forward(ix, &h);
        if (r < 0) {
                ix_refuse(gw, c, 502, "the request could not be forwarded");
                return r;
        }
        gw_cred_used(gw, c->sb, c->host, &used);
        ix->forwarded = true;
        req_consume(ix, head_len);
        if (head_upgrades(&h))
                ix->state = IX_REQ_RAW;
        else if (h.chunked) {
                ix->state = IX_REQ_BODY;
                ix->chunked = true;
                ix->chunk = (HttpChunkDecoder){};
        } else if (h.content_length > 0) {
                ix->state = IX_REQ_BODY;
                ix->chunked = false;
                ix->body_left = (uint64_t) h.content_length;
        }
        return 0;
}

/* Forwards what req holds of the current body (or everything, raw). */
static int request_body(GwConn *c) {
        GwIntercept *ix = c->ix;
        size_t n = ix->req_n;
        int r;

        if (ix->state == IX_REQ_BODY && !ix->chunked) {
                n = (size_t) MIN((uint64_t) n, ix->body_left);
                ix->body_left -= n;
                if (ix->body_left == 0)
                        ix->state = IX_REQ_HEAD;
        } else if (ix->state == IX_REQ_BODY) {
                size_t off = 0;
                while (off < ix->req_n) {
                        size_t used = 0, produced = 0;
                        r = http_chunk_decode(&ix->chunk, (const char *) ix->req + off, ix->req_n - off,
                                              (char *) ix->scratch, IX_READ_MAX, &used, &produced);
                        if (r < 0)
                                return -EBADMSG;
                        off += used;
                        if (r == 1) {
                                ix->state = IX_REQ_HEAD;
                                break;
                        }
                        if (used == 0)
                                break;
                }
                n = off;
        }
        if (n == 0)
                return 0;
        r = tls_pipe_write(ix->up, ix->req, n);
        if (r < 0)
                return r;
        req_consume(ix, n);
        return 1;
}

/* The sandbox's plaintext, request by request, once the upstream is ready. */
static void requests(Gateway *gw, GwConn *c) {
        GwIntercept *ix = c->ix;

        while (ix->req_n > 0 && !ix->refusing) {
                if (ix->state == IX_REQ_HEAD) {
                        ssize_t hl = http_head_length((const char *) ix->req, ix->req_n);
                        if (hl < 0 || (hl == 0 && ix->req_n >= HTTP_HEAD_MAX)) {
                                ix_refuse(gw, c, 431, "request head too large");
                                return;
                        }
                        if (hl == 0)
                                return;
                        if (request_head(gw, c, (size_t) hl) < 0)
                                return;
                        continue;
                }
                int r = request_body(c);
                if (r < 0) {
                        ix_refuse(gw, c, 400, "malformed request body");
                        return;
                }
                if (r == 0)
                        return;
        }
}

/* Moves ciphertext out of the pipes into the staging buffers and writes them. */
static int flush(Gateway *gw, GwConn *c) {
        GwIntercept *ix = c->ix;
        ssize_t k;

        if (c->out_n < GW_BUF_SIZE) {
                k = tls_pipe_take(ix->down, c->out + c->out_n, GW_BUF_SIZE - c->out_n);
                if (k > 0)
                        c->out_n += (size_t) k;
        }
        if (c->out_n > 0) {
                k = write(c->cio.fd, c->out, c->out_n);
                if (k < 0 && errno != EAGAIN && errno != EINTR)
                        return -errno;
                if (k > 0) {
                        memmove(c->out, c->out + k, c->out_n - (size_t) k);
                        c->out_n -= (size_t) k;
                        c->last_usec = gw_now_usec();
                }
        }
        if (c->uio.fd < 0 || !ix->up_connected)
                return 0;
        if (c->in_n < GW_BUF_SIZE) {
                k = tls_pipe_take(ix->up, c->in + c->in_n, GW_BUF_SIZE - c->in_n);
                if (k > 0)
                        c->in_n += (size_t) k;
        }
        if (c->in_n > 0) {
                k = write(c->uio.fd, c->in, c->in_n);
                if (k < 0 && errno != EAGAIN && errno != EINTR)
                        return -errno;
                if (k > 0) {
                        memmove(c->in, c->in + k, c->in_n - (size_t) k);
                        c->in_n -= (size_t) k;
                }
        }
        if (c->c_eof && c->in_n == 0 && tls_pipe_pending(ix->up) == 0 && !c->u_shut) {
                (void) shutdown(c->uio.fd, SHUT_WR);
                c->u_shut = true;
        }
        return 0;
}

static void update(Gateway *gw, GwConn *c) {
        GwIntercept *ix = c->ix;
        uint32_t ce = 0, ue = 0;

        bool want_in;

        if (ix->cut) /* read until the sandbox's FIN (a close with unread bytes would be a reset), but not while
                      * it leaves our close_notify unread: nothing it sends then matters, and it may flood */
                want_in = !ix->cut_notified || ix->cut_shut;
        else if (ix->refusing) /* only until the sandbox's handshake is done (the answer goes inside it) */
                want_in = !ix->down_ready;
        else /* (the sandbox's handshake done, the upstream's not: nothing to read until it is) */
                want_in = ix->req_n < GW_BUF_SIZE && tls_pipe_pending(ix->up) < IX_PENDING_MAX &&
                          (!ix->down_ready || ix->up_ready);
        if (!c->c_eof && want_in)
                ce |= EPOLLIN;
        if (c->out_n > 0 || tls_pipe_pending(ix->down) > 0)
                ce |= EPOLLOUT;
        if (c->uio.fd >= 0) {
                if (!ix->up_connected)
                        ue = EPOLLOUT;
                else {
                        if (!c->u_eof && tls_pipe_pending(ix->down) < IX_PENDING_MAX && c->out_n < GW_BUF_SIZE)
                                ue |= EPOLLIN;
                        if (c->in_n > 0 || tls_pipe_pending(ix->up) > 0)
                                ue |= EPOLLOUT;
                }
                (void) gw_epoll_mod(gw, &c->uio, ue);
        }
        (void) gw_epoll_mod(gw, &c->cio, ce);
}

/* The sandbox's handshake; false: the connection was closed. */
static bool down_handshake(Gateway *gw, GwConn *c) {
        GwIntercept *ix = c->ix;
        int r;

        if (ix->down_ready)
                return true;
        r = tls_pipe_handshake(ix->down);
        if (r < 0) {
                /* the sandbox does not trust its CA, or is no TLS client: nothing to answer */
                char why[TLS_PIPE_ERROR_MAX + 64];
                snprintf(why, sizeof why, "TLS handshake with the sandbox failed: %s", tls_pipe_error(ix->down));
                gw_event(gw, c->sb, false, "tls", c->host, NULL, c->port, why);
                (void) flush(gw, c); /* its alert */
                ix_close(gw, c);
                return false;
        }
        ix->down_ready = r > 0;
        return true;
}

/* Both handshakes: the upstream's starts once the sandbox's ClientHello
 * said what it offers; a sandbox offering h2 is answered once the upstream
 * chose. false: the connection was closed. */
static bool handshakes(Gateway *gw, GwConn *c) {
        GwIntercept *ix = c->ix;
        int r;

        if (!down_handshake(gw, c))
                return false;
        if (!ix->alpn_set && tls_pipe_hello_seen(ix->down)) {
                unsigned offers = tls_pipe_offers(ix->down);
                if (offers & TLS_ALPN_H2) {
                        /* the upstream's last choice: answered now, and only that is offered upstream */
                        TlsAlpn recalled = alpn_recall(c->sb, c->host, c->port);
                        if (recalled != TLS_ALPN_NONE) {
                                offers = recalled;
                                (void) tls_pipe_set_answer(ix->down, recalled);
                                ix->answered = true;
                                ix->recalled = recalled;
                        }
                        if (tls_pipe_offer(ix->up, offers) < 0) {
                                ix_refuse(gw, c, 502, "TLS to the upstream could not start");
                                return down_handshake(gw, c);
                        }
                }
                ix->alpn_set = true;
        }
        if (ix->up_connected && ix->alpn_set && !ix->up_ready && !ix->refusing) {
                r = tls_pipe_handshake(ix->up);
                if (r < 0) {
                        char why[TLS_PIPE_ERROR_MAX + 64];
                        snprintf(why, sizeof why, "TLS to the upstream failed: %s", tls_pipe_error(ix->up));
                        ix_refuse(gw, c, 502, why);
                } else
                        ix->up_ready = r > 0;
        }
        if (ix->up_ready && !ix->remembered) {
                TlsAlpn chose = tls_pipe_alpn(ix->up) == TLS_ALPN_H2 ? TLS_ALPN_H2 : TLS_ALPN_HTTP11;
                ix->remembered = true;
                if (!ix->answered) {
                        (void) tls_pipe_set_answer(ix->down, chose);
                        ix->answered = true;
                }
                if (tls_pipe_offers(ix->down) & TLS_ALPN_H2) {
                        if (ix->recalled != TLS_ALPN_NONE && ix->recalled != chose) {
                                /* the sandbox was told h2 and the upstream chose nothing: cannot be relayed */
                                alpn_forget(c->sb, c->host, c->port);
                                gw_event(gw, c->sb, false, "tls", c->host, NULL, c->port,
                                         "the upstream no longer chose h2 (ALPN): connection closed, the next "
                                         "one asks again");
                                ix_close(gw, c);
                                return false;
                        }
                        alpn_remember(c->sb, c->host, c->port, chose);
                }
        }
        return down_handshake(gw, c); /* again: the answer (or a refusal) may let it go on */
}

static int sink_write(void *pipe, const void *p, size_t n) {
        return tls_pipe_write(pipe, p, n);
}

static size_t sink_pending(void *pipe) {
        return tls_pipe_pending(pipe);
}

/* h2 on both legs: plaintext through the two sessions. < 0: close. */
static int h2_pump(GwConn *c) {
        GwIntercept *ix = c->ix;
        int r;

        while (!ix->down_closed && tls_pipe_pending(ix->up) < IX_PENDING_MAX) {
                ssize_t k = tls_pipe_read(ix->down, ix->scratch, IX_READ_MAX);
                if (k == -EAGAIN)
                        break;
                if (k <= 0)
                        return -ECONNRESET; /* the sandbox closed: its streams are gone with it */
                r = gw_h2_recv(ix->h2, true, ix->scratch, (size_t) k);
                if (r < 0)
                        break; /* nghttp2 queued its GOAWAY: sent below, then closed */
        }
        while (!ix->up_closed && tls_pipe_pending(ix->down) < IX_PENDING_MAX) {
                ssize_t k = tls_pipe_read(ix->up, ix->scratch, IX_READ_MAX);
                if (k == -EAGAIN)
                        break;
                if (k <= 0) {
                        ix->up_closed = true;
                        break;
                }
                if (gw_h2_recv(ix->h2, false, ix->scratch, (size_t) k) < 0)
                        break;
        }
        if (ix->up_closed || c->u_eof)
                gw_h2_upstream_gone(ix->h2);
        return gw_h2_send(ix->h2, IX_PENDING_MAX);
}

/* A cut h2 connection: the sandbox's frames are still read (nghttp2 ignores
 * new streams after its GOAWAY) until the frames queued for it and then the
 * close_notify are written. From then on nothing it sends can change what we
 * send: while it leaves those bytes unread, nothing is read from it (a
 * sandbox flooding a connection it no longer reads meets its own full
 * window, not our CPU); once they are all in the kernel, our FIN follows and
 * its bytes are read and dropped undecrypted until its FIN, and the socket
 * closed (a lingering close: closing with unread bytes would send a reset,
 * which discards what the sandbox's kernel has not taken yet, the GOAWAY
 * included). A sandbox that neither reads nor closes meets the deadline
 * (GW_CONN_FLUSH). */
static void cut_pump(Gateway *gw, GwConn *c) {
        GwIntercept *ix = c->ix;

        if (ix->cut_shut) {
                if (c->c_eof)
                        ix_close(gw, c);
                else
                        update(gw, c);
                return;
        }
        while (!ix->cut_notified && !ix->down_closed && !c->c_eof) {
                ssize_t k = tls_pipe_read(ix->down, ix->scratch, IX_READ_MAX);
                if (k == -EAGAIN)
                        break;
                if (k <= 0 || gw_h2_recv(ix->h2, true, ix->scratch, (size_t) k) < 0) {
                        ix->down_closed = true;
                        break;
                }
        }
        if (gw_h2_send(ix->h2, IX_PENDING_MAX) < 0) {
                ix_close(gw, c);
                return;
        }
        if (!ix->cut_notified && (gw_h2_done(ix->h2) || c->c_eof || ix->down_closed)) {
                (void) tls_pipe_shutdown(ix->down); /* close_notify after the GOAWAY */
                ix->cut_notified = true;
        }
        if (flush(gw, c) < 0) {
                ix_close(gw, c);
                return;
        }
        if (ix->cut_notified && c->out_n == 0 && tls_pipe_pending(ix->down) == 0) {
                if (c->c_eof || c->cio.fd < 0 || shutdown(c->cio.fd, SHUT_WR) < 0) {
                        ix_close(gw, c);
                        return;
                }
                ix->cut_shut = true;
        }
        update(gw, c);
}

bool gw_intercept_cut(Gateway *gw, GwConn *c, const char *why) {
        static const struct linger reset = { .l_onoff = 1, .l_linger = 0 };
        GwIntercept *ix = c->ix;

        if (!ix || !ix->h2 || ix->refusing || ix->cut)
                return false;
        gw_event(gw, c->sb, false, c->proto ?: "tls", c->host[0] ? c->host : NULL, NULL, c->port, why);
        ix->cut = true;
        if (c->uio.fd >= 0) /* the denied host gets nothing more, not even a GOAWAY */
                (void) setsockopt(c->uio.fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
        gw_io_close(gw, &c->uio);
        c->in_n = 0;
        if (gw_h2_cut(ix->h2, why) < 0) {
                if (c->cio.fd >= 0)
                        (void) setsockopt(c->cio.fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
                ix_close(gw, c);
                return true;
        }
        c->state = GW_CONN_FLUSH; /* decided: a later policy change leaves it alone */
        c->deadline_usec = gw_now_usec() + gw->config->handshake_timeout_sec * 1000000ULL;
        cut_pump(gw, c);
        return true;
}

static void ix_pump(Gateway *gw, GwConn *c) {
        GwIntercept *ix = c->ix;
        int r;

        if (ix->cut) {
                cut_pump(gw, c);
                return;
        }
        if (!handshakes(gw, c))
                return;
        if (ix->down_ready && ix->up_ready && !ix->refusing && !ix->h2 && tls_pipe_alpn(ix->down) == TLS_ALPN_H2) {
                r = gw_h2_new(gw, c, (GwH2Sink){ sink_write, sink_pending, ix->down },
                              (GwH2Sink){ sink_write, sink_pending, ix->up }, &ix->h2);
                if (r < 0) {
                        ix_close(gw, c);
                        return;
                }
        }
        if (ix->h2) {
                if (h2_pump(c) < 0 || c->c_eof) {
                        (void) flush(gw, c);
                        ix_close(gw, c);
                        return;
                }
        }
        if (ix->down_ready && ix->up_ready && !ix->refusing && !ix->h2) {
                /* the sandbox's plaintext (once both legs are up: it may be h2's preface) */
                while (!ix->down_closed && ix->req_n < GW_BUF_SIZE && tls_pipe_pending(ix->up) < IX_PENDING_MAX) {
                        ssize_t k = tls_pipe_read(ix->down, ix->req + ix->req_n, GW_BUF_SIZE - ix->req_n);
                        if (k == -EAGAIN)
                                break;
                        if (k == 0)
                                ix->down_closed = true;
                        else if (k < 0) {
                                ix_close(gw, c);
                                return;
                        } else
                                ix->req_n += (size_t) k;
                }
                if (ix->up_gone)
                        answer_gone(gw, c);
                else if (ix->up_ready)
                        requests(gw, c);
        }
        if (ix->up_ready && ix->down_ready && !ix->refusing && !ix->h2) {
                /* the upstream's plaintext, unchanged (once the sandbox's protocol is known: h2 would be relayed
                 * by frames, and an h2 upstream speaks first) */
                bool silent_end = false;
                while (!ix->up_closed && tls_pipe_pending(ix->down) < IX_PENDING_MAX) {
                        ssize_t k = tls_pipe_read(ix->up, ix->scratch, IX_READ_MAX);
                        if (k == -EAGAIN && !c->u_eof)
                                break;
                        if (k == -EAGAIN)
                                k = 0; /* its socket ended after its last record, without close_notify */
                        if (k <= 0 && ix->forwarded && !ix->spoke) {
                                /* a close, or a reset / TLS ended without close_notify: answered below */
                                silent_end = true;
                                break;
                        }
                        if (k <= 0 && !ix->forwarded && !ix->spoke) {
                                /* the same before the sandbox's first request came: that request is answered
                                 * (answer_gone), not met by a closed connection */
                                ix->up_gone = true;
                                break;
                        }
                        if (k == 0) {
                                ix->up_closed = true;
                                (void) tls_pipe_shutdown(ix->down);
                        } else if (k < 0) {
                                ix_close(gw, c);
                                return;
                        } else if (tls_pipe_write(ix->down, ix->scratch, (size_t) k) < 0) {
                                ix_close(gw, c);
                                return;
                        } else
                                ix->spoke = true;
                }
                /* the first request got nothing at all (an upstream that speaks no HTTP/1.1 closes so):
                 * the sandbox gets a reason rather than an empty reply; later ones get the close (clients retry) */
                if (ix->forwarded && !ix->spoke && (c->u_eof || silent_end))
                        ix_refuse(gw, c, 502, IX_SILENT_UPSTREAM);
                else if (ix->up_gone)
                        answer_gone(gw, c);
        }
        if (ix->down_ready && ix->refusing && ix->refuse_status) {
                if (tls_pipe_alpn(ix->down) == TLS_ALPN_H2) {
                        ix_close(gw, c); /* answered h2 from memory: an HTTP/1.1 refusal would be garbage */
                        return;
                }
                ix_send_refusal(c);
        }
        if (flush(gw, c) < 0) {
                ix_close(gw, c);
                return;
        }
        bool to_sandbox_empty = c->out_n == 0 && tls_pipe_pending(ix->down) == 0;
        if (ix->h2) {
                if (to_sandbox_empty && gw_h2_done(ix->h2)) {
                        ix_close(gw, c); /* both GOAWAY'd (or failed) and everything reached the sandbox */
                        return;
                }
        } else if (to_sandbox_empty &&
                   (ix->refusing ? ix->refuse_status == 0 && ix->down_ready
                                 : (c->u_eof || ix->up_closed) && !ix->up_gone)) {
                ix_close(gw, c); /* the upstream is done (or refused) and everything reached the sandbox */
                return;
        }
        if (c->c_eof && (c->u_eof || c->uio.fd < 0) && to_sandbox_empty) {
                ix_close(gw, c);
                return;
        }
        if (ix->down_ready && ix->up_ready && c->state != GW_CONN_RELAY && !ix->refusing) {
                c->state = GW_CONN_RELAY;
                c->last_usec = gw_now_usec();
        }
        update(gw, c);
}

/* A bounded number of reads per event, into the TLS pipe p, or (p NULL:
 * a cut connection's sandbox after our close_notify, or its TLS ended)
 * dropped. */
static int sock_read_feed(int fd, TlsPipe *p, uint8_t *buf, bool *ret_eof) {
        for (unsigned i = 0; i < 4; i++) {
                ssize_t k = read(fd, buf, IX_READ_MAX);
                if (k < 0)
                        return errno == EAGAIN || errno == EINTR ? 0 : -errno;
                if (k == 0) {
                        *ret_eof = true;
                        return 0;
                }
                int r = p ? tls_pipe_feed(p, buf, (size_t) k) : 0;
                if (r < 0)
                        return r;
                if ((size_t) k < IX_READ_MAX)
                        return 0;
        }
        return 0;
}

static void ix_cio_event(Gateway *gw, GwIo *io, uint32_t events) {
        GwConn *c = (GwConn *) ((char *) io - offsetof(GwConn, cio));

        if (events & (EPOLLERR | EPOLLHUP)) {
                ix_close(gw, c);
                return;
        }
        if ((events & EPOLLIN) && !c->c_eof) {
                bool drop = c->ix->cut && (c->ix->cut_notified || c->ix->down_closed);
                if (sock_read_feed(c->cio.fd, drop ? NULL : c->ix->down, c->ix->scratch, &c->c_eof) < 0) {
                        ix_close(gw, c);
                        return;
                }
                if (!drop) /* a cut connection's time is its deadline's */
                        c->last_usec = gw_now_usec();
        }
        ix_pump(gw, c);
}

static void ix_uio_event(Gateway *gw, GwIo *io, uint32_t events) {
        GwConn *c = (GwConn *) ((char *) io - offsetof(GwConn, uio));
        GwIntercept *ix = c->ix;

        if (!ix->up_connected) {
                if (sock_connect_result(c->uio.fd) < 0) {
                        ix_refuse(gw, c, 502, "upstream connection failed");
                        ix_pump(gw, c);
                        return;
                }
                ix->up_connected = true;
        } else if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->u_eof) {
                if (sock_read_feed(c->uio.fd, ix->up, ix->scratch, &c->u_eof) < 0)
                        c->u_eof = true;
                c->last_usec = gw_now_usec();
        }
        if (c->u_eof && !ix->up_ready && !ix->refusing)
                ix_refuse(gw, c, 502, "the upstream closed the connection during the TLS handshake");
        ix_pump(gw, c);
}

void gw_intercept_start(Gateway *gw, GwConn *c) {
        GwIntercept *ix;
        int r;

        ix = new0(GwIntercept, 1);
        if (!ix) {
                gw_conn_deny(gw, c, 502, "out of memory");
                return;
        }
        c->ix = ix;
        ix->req = malloc(GW_BUF_SIZE);
        ix->scratch = malloc(IX_READ_MAX);
        if (!ix->req || !ix->scratch) {
                gw_conn_deny(gw, c, 502, "out of memory");
                return;
        }
        r = tls_intercept_server_new(c->sb->ca, c->host, &ix->down);
        if (r >= 0)
                r = tls_intercept_client_new(gw->upstream_tls, c->host, &ix->up);
        if (r >= 0)
                r = tls_pipe_feed(ix->down, c->in, c->in_n); /* the ClientHello */
        if (r < 0) {
                gw_conn_deny(gw, c, 502, "TLS interception could not start");
                return;
        }
        c->in_n = 0;
        /* the upstream's bytes are ciphertext to decrypt now: no splice */
        c->pipe_r = safe_close(c->pipe_r);
        c->pipe_w = safe_close(c->pipe_w);
        c->pipe_n = 0;
        c->sni_check = false;
        c->one_request = false;
        c->connect_reply = false;
        c->proto = "tls";
        c->state = GW_CONN_HEAD; /* the handshake deadline applies until both sides are up */
        c->deadline_usec = gw_now_usec() + gw->config->handshake_timeout_sec * 1000000ULL;
        c->cio.fn = ix_cio_event;
        c->uio.fn = ix_uio_event;
        ix->up_connected = true; /* callers start us once the upstream's TCP is up */
        ix_pump(gw, c);
}
