/* SPDX-License-Identifier: MIT */
/* A webhook delivery's POST (see webhook-post.h). The caller resolved and
 * checked the address; we connect to that address only (a second lookup
 * here could answer differently: DNS rebinding). */

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "sock-io.h"
#include "str-util.h"
#include "time-util.h"
#include "webhook-post.h"

typedef struct Conn {
        int fd;
        SSL *ssl;
        int64_t deadline;
} Conn;

/* One per process (the webhook thread and the API's test deliveries share it). */
static SSL_CTX *tls_ctx_shared = NULL;
static pthread_once_t tls_ctx_once = PTHREAD_ONCE_INIT;

static void tls_ctx_init(void) {
        SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

        if (!ctx)
                return;
        if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 || SSL_CTX_set_default_verify_paths(ctx) != 1) {
                SSL_CTX_free(ctx);
                return;
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        tls_ctx_shared = ctx;
}

static SSL_CTX *tls_ctx(void) {
        (void) pthread_once(&tls_ctx_once, tls_ctx_init);
        return tls_ctx_shared;
}

/* Runs one SSL call until it is done or the deadline passes. */
static int tls_step(Conn *c, int r) {
        int e = SSL_get_error(c->ssl, r);

        if (e == SSL_ERROR_WANT_READ)
                return sock_wait_until(c->fd, POLLIN, c->deadline) < 0 ? -ETIMEDOUT : 1;
        if (e == SSL_ERROR_WANT_WRITE)
                return sock_wait_until(c->fd, POLLOUT, c->deadline) < 0 ? -ETIMEDOUT : 1;
        if (e == SSL_ERROR_ZERO_RETURN)
                return 0;
        return -EPROTO;
}

static int conn_write(Conn *c, const char *p, size_t n, char *why, size_t why_size) {
        while (n > 0) {
                ssize_t k;

                if (c->ssl) {
                        int r = SSL_write(c->ssl, p, (int) MIN(n, (size_t) INT32_MAX));
                        if (r > 0)
                                k = r;
                        else {
                                r = tls_step(c, r);
                                if (r == 1)
                                        continue;
                                (void) snprintf(why, why_size, r == -ETIMEDOUT ? "timed out" : "TLS write failed");
                                return r < 0 ? r : -EPIPE;
                        }
                } else {
                        k = send(c->fd, p, n, MSG_NOSIGNAL);
                        if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
                                if (sock_wait_until(c->fd, POLLOUT, c->deadline) < 0) {
                                        (void) snprintf(why, why_size, "timed out");
                                        return -ETIMEDOUT;
                                }
                                continue;
                        }
                        if (k < 0) {
                                (void) snprintf(why, why_size, "send: %s", strerror(errno));
                                return -errno;
                        }
                }
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

/* Reads some bytes: > 0, 0 at the end, or -errno. */
static ssize_t conn_read(Conn *c, char *buf, size_t n) {
        for (;;) {
                if (c->ssl) {
                        int r = SSL_read(c->ssl, buf, (int) n);
                        if (r > 0)
                                return r;
                        r = tls_step(c, r);
                        if (r == 1)
                                continue;
                        return r;
                }
                ssize_t k = recv(c->fd, buf, n, 0);
                if (k >= 0)
                        return k;
                if (errno != EAGAIN && errno != EINTR)
                        return -errno;
                if (sock_wait_until(c->fd, POLLIN, c->deadline) < 0)
                        return -ETIMEDOUT;
        }
}

static int conn_open(Conn *c, const WebhookUrl *u, const struct sockaddr *sa, socklen_t sa_len, char *why,
                     size_t why_size) {
        int r;

        c->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (c->fd < 0) {
                (void) snprintf(why, why_size, "socket: %s", strerror(errno));
                return -errno;
        }
        r = sock_connect_until(c->fd, sa, sa_len, c->deadline);
        if (r < 0) {
                if (r == -ETIMEDOUT)
                        (void) snprintf(why, why_size, "connect timed out");
                else
                        (void) snprintf(why, why_size, "connect: %s", strerror(-r));
                return r;
        }
        if (!u->https)
                return 0;
        SSL_CTX *ctx = tls_ctx();
        if (!ctx) {
                (void) snprintf(why, why_size, "TLS is not available");
                return -EIO;
        }
        c->ssl = SSL_new(ctx);
        if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1) {
                (void) snprintf(why, why_size, "TLS is not available");
                return -EIO;
        }
        {
                struct in6_addr a;
                bool literal = inet_pton(AF_INET, u->host, &a) == 1 || inet_pton(AF_INET6, u->host, &a) == 1;

                if (literal ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), u->host) != 1
                            : SSL_set_tlsext_host_name(c->ssl, u->host) != 1 || SSL_set1_host(c->ssl, u->host) != 1) {
                        (void) snprintf(why, why_size, "TLS setup failed");
                        return -EIO;
                }
        }
        for (;;) {
                r = SSL_connect(c->ssl);
                if (r == 1)
                        return 0;
                r = tls_step(c, r);
                if (r == 1)
                        continue;
                if (r == -ETIMEDOUT)
                        (void) snprintf(why, why_size, "TLS handshake timed out");
                else {
                        long v = SSL_get_verify_result(c->ssl);
                        (void) snprintf(why, why_size, "TLS: %s",
                                        v != X509_V_OK ? X509_verify_cert_error_string(v) : "handshake failed");
                }
                return r < 0 ? r : -EPROTO;
        }
}

static void conn_close(Conn *c) {
        if (c->ssl)
                SSL_free(c->ssl);
        c->ssl = NULL;
        c->fd = safe_close(c->fd);
        ERR_clear_error();
}

int webhook_post(const WebhookUrl *u, const struct sockaddr *sa, socklen_t sa_len, const char *headers,
                 const char *body, size_t n, int timeout_msec, char *why, size_t why_size) {
        Conn c = { .fd = -EBADF, .deadline = mono_msec() + timeout_msec };
        _cleanup_free_ char *head = NULL;
        char host[WEBHOOK_HOST_MAX + 16], buf[512];
        size_t got = 0;
        unsigned status;
        int r;

        if (!u || !sa || !body || !why || why_size == 0)
                return -EINVAL;
        why[0] = 0;
        if (strchr(u->host, ':'))
                (void) snprintf(host, sizeof host, "[%s]", u->host);
        else
                (void) snprintf(host, sizeof host, "%s", u->host);
        if ((u->https && u->port != 443) || (!u->https && u->port != 80))
                (void) snprintf(host + strlen(host), sizeof host - strlen(host), ":%u", u->port);
        if (asprintf(&head,
                     "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: space-webhooks\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n%s\r\n",
                     u->target, host, n, strempty(headers)) < 0) {
                head = NULL;
                return -ENOMEM;
        }
        r = conn_open(&c, u, sa, sa_len, why, why_size);
        if (r >= 0)
                r = conn_write(&c, head, strlen(head), why, why_size);
        if (r >= 0)
                r = conn_write(&c, body, n, why, why_size);
        /* the status line is all we need */
        while (r >= 0 && got < sizeof buf - 1 && !memmem(buf, got, "\r\n", 2)) {
                ssize_t k = conn_read(&c, buf + got, sizeof buf - 1 - got);
                if (k < 0) {
                        (void) snprintf(why, why_size, k == -ETIMEDOUT ? "timed out waiting for the answer"
                                                                         : "reading the answer failed");
                        r = (int) k;
                } else if (k == 0) {
                        (void) snprintf(why, why_size, "connection closed before an answer");
                        r = -ECONNRESET;
                } else
                        got += (size_t) k;
        }
        conn_close(&c);
        if (r < 0)
                return r;
        buf[got] = 0;
        if (sscanf(buf, "HTTP/1.%*1[01] %3u", &status) != 1 || status < 100 || status > 599) {
                (void) snprintf(why, why_size, "not an HTTP answer");
                return -EBADMSG;
        }
        if (status < 200 || status > 299) {
                (void) snprintf(why, why_size, status >= 300 && status < 400 ? "HTTP %u (redirects are not followed)"
                                                                              : "HTTP %u", status);
                return -EPROTO;
        }
        return 0;
}

int webhook_send(const WebhookGuard *g, const char *url_s, const char *secret, const char *webhook_id,
                 const char *delivery_id, int64_t now_usec, const char *body, size_t n, char *why,
                 size_t why_size) {
        char ts[24], sig[WEBHOOK_SIG_HEX], sig_e2b[WEBHOOK_SIG_B64], headers[1024];
        const char *bad = NULL;
        struct sockaddr_storage ss;
        socklen_t len = 0;
        WebhookUrl u;
        int r;

        if (!g || !url_s || !secret || !webhook_id || !delivery_id || !body || !why || why_size == 0)
                return -EINVAL;
        r = webhook_url_parse(url_s, &u, &bad);
        if (r < 0) {
                (void) snprintf(why, why_size, "%s", strna(bad));
                return r;
        }
        r = webhook_resolve(g, &u, &ss, &len, why, why_size);
        if (r < 0)
                return r;
        (void) snprintf(ts, sizeof ts, "%lld", (long long) (now_usec / 1000000));
        r = webhook_sign(secret, ts, body, n, sig);
        if (r >= 0)
                r = webhook_sign_e2b(secret, body, n, sig_e2b);
        if (r < 0) {
                (void) snprintf(why, why_size, "cannot sign: %s", strerror(-r));
                return r;
        }
        /* ids are ours ([a-z0-9_-]): nothing to escape in a header */
        (void) snprintf(headers, sizeof headers,
                        "X-Space-Webhook-Id: %s\r\nX-Space-Delivery-Id: %s\r\nX-Space-Timestamp: %s\r\n"
                        "X-Space-Signature: sha256=%s\r\n"
                        "e2b-webhook-id: %s\r\ne2b-delivery-id: %s\r\ne2b-signature-version: v1\r\n"
                        "e2b-signature: %s\r\n",
                        webhook_id, delivery_id, ts, sig, webhook_id, delivery_id, sig_e2b);
        return webhook_post(&u, (struct sockaddr *) &ss, len, headers, body, n, WEBHOOK_POST_TIMEOUT_MSEC, why,
                            why_size);
}
