/* SPDX-License-Identifier: MIT */
/* TLS endpoints over memory BIOs for interception. See tls-intercept.h. */

#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>

#include "alloc-util.h"
#include "tls-intercept.h"

#define TLS_PIPE_HOST_MAX 253U

struct TlsPipe {
        SSL *ssl;
        BIO *rbio, *wbio; /* owned by ssl */
        bool server;
        bool hello_seen;      /* server: the ClientHello was read (offers is valid) */
        unsigned offers;      /* server: TLS_ALPN_* the client offered */
        TlsAlpn answer;       /* server: what to select; TLS_ALPN_NONE = not decided yet */
        char error[TLS_PIPE_ERROR_MAX];
};

static const uint8_t alpn_http11[] = { 8, 'h', 't', 't', 'p', '/', '1', '.', '1' };
static const uint8_t alpn_h2[] = { 2, 'h', '2' };

unsigned tls_alpn_parse(const uint8_t *p, size_t n) {
        unsigned offers = 0;
        size_t i = 0;

        while (i < n) {
                size_t l = p[i++];
                if (l == 0 || l > n - i)
                        return 0; /* malformed: nothing we can serve */
                if (l == alpn_h2[0] && memcmp(p + i, alpn_h2 + 1, l) == 0)
                        offers |= TLS_ALPN_H2;
                else if (l == alpn_http11[0] && memcmp(p + i, alpn_http11 + 1, l) == 0)
                        offers |= TLS_ALPN_HTTP11;
                i += l;
        }
        return offers;
}

int tls_intercept_client_ctx_new(const char *ca_file, SSL_CTX **ret) {
        SSL_CTX *ctx;

        if (!ret)
                return -EINVAL;
        ctx = SSL_CTX_new(TLS_client_method());
        if (!ctx)
                return -ENOMEM;
        if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
            /* the default: the hashed directory (/etc/ssl/certs), looked up per verification;
             * the default bundle file would be parsed whole right here (~0.5 s in a sanitizer build) */
            (ca_file ? SSL_CTX_load_verify_locations(ctx, ca_file, NULL)
                     : SSL_CTX_load_verify_dir(ctx, X509_get_default_cert_dir())) != 1 ||
            SSL_CTX_set_alpn_protos(ctx, alpn_http11, sizeof alpn_http11) != 0) {
                SSL_CTX_free(ctx);
                ERR_clear_error();
                return -EINVAL;
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        *ret = ctx;
        return 0;
}

/* The ClientHello's ALPN offers; a client offering h2 waits here (the
 * handshake pauses: SSL_ERROR_WANT_CLIENT_HELLO_CB) until the caller says
 * what the upstream chose (tls_pipe_set_answer). One that does not offer h2
 * gets http/1.1 at once. */
static int client_hello(SSL *ssl, int *al, void *arg) {
        TlsPipe *p = SSL_get_app_data(ssl);
        const uint8_t *ext;
        size_t n;

        (void) al;
        (void) arg;
        if (!p)
                return SSL_CLIENT_HELLO_ERROR;
        if (!p->hello_seen) {
                p->offers = 0;
                /* the extension: a 2-byte length, then the list */
                if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &ext, &n) == 1 &&
                    n >= 2 && (size_t) ((ext[0] << 8) | ext[1]) == n - 2)
                        p->offers = tls_alpn_parse(ext + 2, n - 2);
                p->hello_seen = true;
        }
        if ((p->offers & TLS_ALPN_H2) && p->answer == TLS_ALPN_NONE)
                return SSL_CLIENT_HELLO_RETRY;
        return SSL_CLIENT_HELLO_SUCCESS;
}

/* h2 only when the upstream chose it; otherwise http/1.1 if offered. */
static int alpn_select(SSL *ssl, const uint8_t **out, uint8_t *outlen, const uint8_t *in, unsigned inlen,
                       void *arg) {
        TlsPipe *p = SSL_get_app_data(ssl);

        (void) arg;
        if (p && p->answer == TLS_ALPN_H2 &&
            SSL_select_next_proto((uint8_t **) out, outlen, alpn_h2, sizeof alpn_h2, in, inlen) ==
                    OPENSSL_NPN_NEGOTIATED)
                return SSL_TLSEXT_ERR_OK;
        if (SSL_select_next_proto((uint8_t **) out, outlen, alpn_http11, sizeof alpn_http11, in, inlen) !=
            OPENSSL_NPN_NEGOTIATED)
                return SSL_TLSEXT_ERR_NOACK;
        return SSL_TLSEXT_ERR_OK;
}

static int pipe_new(SSL_CTX *ctx, bool server, TlsPipe **ret) {
        _cleanup_(tls_pipe_freep) TlsPipe *p = NULL;

        p = new0(TlsPipe, 1);
        if (!p)
                return -ENOMEM;
        p->server = server;
        p->ssl = SSL_new(ctx);
        p->rbio = BIO_new(BIO_s_mem());
        p->wbio = BIO_new(BIO_s_mem());
        if (!p->ssl || !p->rbio || !p->wbio) {
                BIO_free(p->rbio);
                BIO_free(p->wbio);
                p->rbio = p->wbio = NULL;
                return -ENOMEM;
        }
        BIO_set_mem_eof_return(p->rbio, -1); /* empty = retry, not EOF */
        SSL_set_bio(p->ssl, p->rbio, p->wbio);
        SSL_set_app_data(p->ssl, p);
        if (server)
                SSL_set_accept_state(p->ssl);
        else
                SSL_set_connect_state(p->ssl);
        *ret = TAKE_PTR(p);
        return 0;
}

int tls_intercept_server_new(TlsCa *ca, const char *host, TlsPipe **ret) {
        SSL_CTX *ctx;
        X509 *leaf = NULL;
        EVP_PKEY *key = NULL;
        TlsPipe *p = NULL;
        int r;

        if (!ca || !host || !ret)
                return -EINVAL;
        r = tls_ca_leaf(ca, host, &leaf, &key);
        if (r < 0)
                return r;
        ctx = SSL_CTX_new(TLS_server_method());
        if (!ctx)
                r = -ENOMEM;
        else if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
                 SSL_CTX_use_certificate(ctx, leaf) != 1 || SSL_CTX_use_PrivateKey(ctx, key) != 1)
                r = -EIO;
        else {
                SSL_CTX_set_client_hello_cb(ctx, client_hello, NULL);
                SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
                SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
                r = pipe_new(ctx, true, &p);
        }
        SSL_CTX_free(ctx); /* the SSL keeps its reference */
        X509_free(leaf);
        EVP_PKEY_free(key);
        ERR_clear_error();
        if (r < 0)
                return r;
        *ret = p;
        return 0;
}

int tls_intercept_client_new(SSL_CTX *ctx, const char *host, TlsPipe **ret) {
        _cleanup_(tls_pipe_freep) TlsPipe *p = NULL;
        int r;

        if (!ctx || !host || !ret || strlen(host) == 0 || strlen(host) > TLS_PIPE_HOST_MAX)
                return -EINVAL;
        r = pipe_new(ctx, false, &p);
        if (r < 0)
                return r;
        /* SNI, and the name the certificate must carry (no partial wildcards) */
        if (SSL_set_tlsext_host_name(p->ssl, host) != 1 || SSL_set1_host(p->ssl, host) != 1) {
                ERR_clear_error();
                return -EINVAL;
        }
        SSL_set_hostflags(p->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        *ret = TAKE_PTR(p);
        return 0;
}

TlsPipe *tls_pipe_free(TlsPipe *p) {
        if (!p)
                return NULL;
        SSL_free(p->ssl); /* frees the BIOs */
        free(p);
        return NULL;
}

int tls_pipe_feed(TlsPipe *p, const void *buf, size_t n) {
        if (!p || (!buf && n > 0) || n > INT32_MAX)
                return -EINVAL;
        if (n == 0)
                return 0;
        return BIO_write(p->rbio, buf, (int) n) == (int) n ? 0 : -ENOMEM;
}

size_t tls_pipe_pending(const TlsPipe *p) {
        return p ? BIO_ctrl_pending(p->wbio) : 0;
}

ssize_t tls_pipe_take(TlsPipe *p, void *buf, size_t n) {
        int k;

        if (!p || !buf)
                return -EINVAL;
        if (BIO_ctrl_pending(p->wbio) == 0 || n == 0)
                return 0;
        k = BIO_read(p->wbio, buf, (int) MIN(n, (size_t) INT32_MAX));
        return k > 0 ? k : 0;
}

/* Records the reason of a failure (the verify result first) and clears the queue. */
static int pipe_fail(TlsPipe *p, int ssl_err) {
        unsigned long e = ERR_peek_last_error();
        long v = SSL_get_verify_result(p->ssl);

        if (!p->server && v != X509_V_OK)
                (void) snprintf(p->error, sizeof p->error, "upstream certificate: %s",
                                X509_verify_cert_error_string(v));
        else if (e != 0)
                (void) snprintf(p->error, sizeof p->error, "%s", ERR_reason_error_string(e) ?: "TLS error");
        else
                (void) snprintf(p->error, sizeof p->error, "TLS error %d", ssl_err);
        ERR_clear_error();
        return -EPROTO;
}

int tls_pipe_handshake(TlsPipe *p) {
        int k, e;

        if (!p)
                return -EINVAL;
        if (SSL_is_init_finished(p->ssl))
                return 1;
        k = SSL_do_handshake(p->ssl);
        if (k == 1)
                return 1;
        e = SSL_get_error(p->ssl, k);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_CLIENT_HELLO_CB)
                return 0;
        return pipe_fail(p, e);
}

bool tls_pipe_hello_seen(const TlsPipe *p) {
        return p && p->server && p->hello_seen;
}

unsigned tls_pipe_offers(const TlsPipe *p) {
        return p && p->server ? p->offers : 0;
}

int tls_pipe_set_answer(TlsPipe *p, TlsAlpn answer) {
        if (!p || !p->server || (answer != TLS_ALPN_H2 && answer != TLS_ALPN_HTTP11))
                return -EINVAL;
        p->answer = answer;
        return 0;
}

int tls_pipe_offer(TlsPipe *p, unsigned offers) {
        uint8_t wire[sizeof alpn_h2 + sizeof alpn_http11];
        size_t n = 0;

        if (!p || p->server || offers == 0 || (offers & ~(unsigned) (TLS_ALPN_H2 | TLS_ALPN_HTTP11)))
                return -EINVAL;
        if (offers & TLS_ALPN_H2) {
                memcpy(wire + n, alpn_h2, sizeof alpn_h2);
                n += sizeof alpn_h2;
        }
        if (offers & TLS_ALPN_HTTP11) {
                memcpy(wire + n, alpn_http11, sizeof alpn_http11);
                n += sizeof alpn_http11;
        }
        return SSL_set_alpn_protos(p->ssl, wire, (unsigned) n) == 0 ? 0 : -ENOMEM;
}

TlsAlpn tls_pipe_alpn(const TlsPipe *p) {
        const uint8_t *sel = NULL;
        unsigned n = 0;

        if (!p)
                return TLS_ALPN_NONE;
        SSL_get0_alpn_selected(p->ssl, &sel, &n);
        if (n == 2 && memcmp(sel, "h2", 2) == 0)
                return TLS_ALPN_H2;
        if (n == 8 && memcmp(sel, "http/1.1", 8) == 0)
                return TLS_ALPN_HTTP11;
        return TLS_ALPN_NONE;
}

ssize_t tls_pipe_read(TlsPipe *p, void *buf, size_t n) {
        size_t got = 0;
        int k, e;

        if (!p || !buf || n == 0)
                return -EINVAL;
        k = SSL_read_ex(p->ssl, buf, n, &got);
        if (k == 1)
                return (ssize_t) got;
        e = SSL_get_error(p->ssl, k);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                return -EAGAIN;
        if (e == SSL_ERROR_ZERO_RETURN)
                return 0;
        return pipe_fail(p, e);
}

int tls_pipe_write(TlsPipe *p, const void *buf, size_t n) {
        size_t done = 0, w;
        int k;

        if (!p || (!buf && n > 0))
                return -EINVAL;
        while (done < n) {
                /* memory BIOs grow: a write only stops on an error */
                k = SSL_write_ex(p->ssl, (const uint8_t *) buf + done, n - done, &w);
                if (k != 1)
                        return pipe_fail(p, SSL_get_error(p->ssl, k));
                done += w;
        }
        return 0;
}

int tls_pipe_shutdown(TlsPipe *p) {
        if (!p)
                return -EINVAL;
        (void) SSL_shutdown(p->ssl);
        ERR_clear_error();
        return 0;
}

const char *tls_pipe_error(const TlsPipe *p) {
        return p && p->error[0] ? p->error : "no error";
}
