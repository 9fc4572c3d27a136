/* SPDX-License-Identifier: MIT */
#pragma once

/* TLS interception for hosts the sandbox holds credentials for: the gateway
 * ends the sandbox's TLS with a leaf of the sandbox's CA (tls-ca.h) and
 * opens its own TLS to the real upstream, verifying the upstream's
 * certificate chain against the host's trust store (or a CA file) and its
 * name against the host the decision was about. Hosts without credentials
 * are tunnelled, not intercepted (cred_inject_wants() says which).
 *
 * A TlsPipe is one TLS endpoint over memory BIOs: the caller owns the
 * sockets and its event loop, moves ciphertext between socket and pipe, and
 * reads/writes plaintext. Nothing here blocks or touches a file descriptor,
 * so it fits the gateway's single-threaded epoll loop, and bytes the gateway
 * already read (the ClientHello it took the SNI from) are simply fed first.
 *
 * Per intercepted connection (c = sandbox side, u = upstream side):
 *     tls_intercept_server_new(ca, sni, &c)      leaf for sni from the sandbox's CA
 *     tls_pipe_feed(c, clienthello, n)           the bytes already read
 *     loop: tls_pipe_handshake(c) → 1 done / 0 more I/O / -errno (close);
 *           send tls_pipe_take(c) output to the sandbox; feed what it sends.
 *     read the request head in plaintext: tls_pipe_read(c) (-EAGAIN: feed more)
 *     cred_inject_head(...) on the parsed head (cred-inject.h)
 *     connect upstream; tls_intercept_client_new(ctx, host, &u); handshake the same way
 *       (-EPROTO: the upstream's certificate failed verification; tls_pipe_error() says why:
 *        answer the sandbox 502 and record an event)
 *     tls_pipe_write(u, rewritten head + body); relay: read(c)→write(u), read(u)→write(c),
 *     always draining tls_pipe_take() of both into their sockets.
 *     tls_pipe_free() both; wipe plaintext buffers that held the head (OPENSSL_cleanse).
 *
 * The client context (one per gateway): tls_intercept_client_ctx_new(NULL)
 * verifies against the system trust store; a CA file instead is for tests
 * (upstreams with their own CA) and deployments with a private CA. */

#include <openssl/ssl.h>
#include <sys/types.h>

#include "macros.h"
#include "tls-ca.h"

#define TLS_PIPE_ERROR_MAX 256U

typedef struct TlsPipe TlsPipe;

/* ALPN: the protocols an intercepted connection can carry end to end. A
 * bit set of them (tls_alpn_parse: a wire list of length-prefixed names,
 * others ignored, 0 when malformed). */
typedef enum TlsAlpn {
        TLS_ALPN_NONE = 0,
        TLS_ALPN_HTTP11 = 1U << 0,
        TLS_ALPN_H2 = 1U << 1,
} TlsAlpn;

unsigned tls_alpn_parse(const uint8_t *p, size_t n);

/* TLS 1.2+, peer verification required, ALPN http/1.1 (per pipe: tls_pipe_offer). ca_file NULL = the
 * host's trust store: OpenSSL's default certificate directory (/etc/ssl/certs,
 * hashed names), consulted per verification rather than loaded up front. */
int tls_intercept_client_ctx_new(const char *ca_file, SSL_CTX **ret);

/* The sandbox's side: a TLS server for host, with a leaf from ca. */
int tls_intercept_server_new(TlsCa *ca, const char *host, TlsPipe **ret);
/* The upstream's side: SNI host, the certificate must be valid for host. */
int tls_intercept_client_new(SSL_CTX *ctx, const char *host, TlsPipe **ret);
TlsPipe *tls_pipe_free(TlsPipe *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(TlsPipe *, tls_pipe_free);

/* Ciphertext received from the peer's socket. */
int tls_pipe_feed(TlsPipe *p, const void *buf, size_t n);
/* Ciphertext to send to the peer's socket: bytes waiting, and taking them. */
size_t tls_pipe_pending(const TlsPipe *p);
ssize_t tls_pipe_take(TlsPipe *p, void *buf, size_t n);

/* 1 = established, 0 = needs more ciphertext (feed, then call again; send
 * what tls_pipe_take gives first), -EPROTO = the handshake failed (for a
 * client pipe: also when the upstream's certificate does not verify), with
 * the reason in tls_pipe_error(). */
int tls_pipe_handshake(TlsPipe *p);
/* Plaintext: > 0 bytes, 0 = the peer closed (close_notify), -EAGAIN =
 * feed more first, -EPROTO = a TLS error. */
ssize_t tls_pipe_read(TlsPipe *p, void *buf, size_t n);
/* Plaintext to send: all n bytes are taken (the ciphertext waits in the pipe). */
int tls_pipe_write(TlsPipe *p, const void *buf, size_t n);
/* Sends close_notify (take it afterwards). */
int tls_pipe_shutdown(TlsPipe *p);
const char *tls_pipe_error(const TlsPipe *p);

/* ALPN end to end. A server pipe records the client's offers when the
 * ClientHello arrives (tls_pipe_hello_seen). If they include h2, its
 * handshake pauses (tls_pipe_handshake returns 0) until tls_pipe_set_answer:
 * the caller first offers upstream what the client offered
 * (tls_pipe_offer on the client pipe), then answers with what the upstream
 * chose (TLS_ALPN_H2, or TLS_ALPN_HTTP11 for anything else: http/1.1 is then
 * selected if the client offered it, none otherwise). A client not offering
 * h2 gets http/1.1 without pausing. tls_pipe_alpn: what was negotiated. */
bool tls_pipe_hello_seen(const TlsPipe *p);
unsigned tls_pipe_offers(const TlsPipe *p);
int tls_pipe_set_answer(TlsPipe *p, TlsAlpn answer);
int tls_pipe_offer(TlsPipe *p, unsigned offers);
TlsAlpn tls_pipe_alpn(const TlsPipe *p);
