/* SPDX-License-Identifier: MIT */
/* Mutual TLS 1.3 under the worker protocol: handshake, then a relay thread
 * per connection between the TLS connection and a socketpair. */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "log.h"
#include "str-util.h"
#include "cluster-tls.h"
#include "cluster-net.h"

#define TLS_RELAY_BUF 16384U

static char *tls_cert, *tls_key, *tls_ca;

static void why_ssl(char *why, size_t why_size, const char *what) {
        unsigned long e = ERR_get_error();
        char buf[256] = "";

        if (e)
                ERR_error_string_n(e, buf, sizeof buf);
        ERR_clear_error();
        if (why && why_size)
                snprintf(why, why_size, "%s%s%s", what, buf[0] ? ": " : "", buf);
}

/* A fresh context from the files: read per connection (rotation). */
static SSL_CTX *context_new(bool server, char *why, size_t why_size) {
        SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());

        if (!ctx) {
                why_ssl(why, why_size, "cannot make a TLS context");
                return NULL;
        }
        if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1 ||
            SSL_CTX_use_certificate_chain_file(ctx, tls_cert) != 1 ||
            SSL_CTX_use_PrivateKey_file(ctx, tls_key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1 ||
            SSL_CTX_load_verify_locations(ctx, tls_ca, NULL) != 1) {
                why_ssl(why, why_size, "cannot load cluster_tls_cert, cluster_tls_key or cluster_tls_ca");
                SSL_CTX_free(ctx);
                return NULL;
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | (server ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), NULL);
        SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_num_tickets(ctx, 0);
        return ctx;
}

int cluster_tls_setup(const char *cert, const char *key, const char *ca) {
        char why[320];
        SSL_CTX *ctx;

        if (isempty(cert) && isempty(key) && isempty(ca))
                return 0;
        if (isempty(cert) || isempty(key) || isempty(ca))
                return log_error_errno(EINVAL,
                                       "Cluster TLS needs cluster_tls_cert, cluster_tls_key and cluster_tls_ca");
        tls_cert = strdup(cert);
        tls_key = strdup(key);
        tls_ca = strdup(ca);
        if (!tls_cert || !tls_key || !tls_ca)
                return -ENOMEM;
        ctx = context_new(true, why, sizeof why);
        if (!ctx) {
                free(tls_cert);
                tls_cert = NULL;
                return log_error_errno(EINVAL, "Cluster TLS: %s (%s, %s, %s)", why, cert, key, ca);
        }
        SSL_CTX_free(ctx);
        log_info("Cluster connections: mutual TLS 1.3 (certificate %s, CA %s)", cert, ca);
        return 0;
}

bool cluster_tls_enabled(void) {
        return tls_cert != NULL;
}

typedef struct Relay {
        SSL_CTX *ctx;
        SSL *ssl;
        int net;   /* the TLS connection */
        int plain; /* our end of the socketpair */
} Relay;

static void relay_free(Relay *t) {
        SSL_free(t->ssl);
        SSL_CTX_free(t->ctx);
        safe_close(t->net);
        safe_close(t->plain);
        free(t);
}

/* Both ways until both ended: a close_notify is passed on as a
 * shutdown(SHUT_WR) of the plaintext end, its EOF as a close_notify. Any
 * error or a TCP close without close_notify (a truncation) ends both. */
static void *relay_thread(void *userdata) {
        Relay *t = userdata;
        _cleanup_free_ char *down = malloc(TLS_RELAY_BUF), *up = malloc(TLS_RELAY_BUF);
        size_t down_len = 0, down_off = 0, up_len = 0, up_off = 0; /* down: net → plain, up: plain → net */
        bool net_open = true, plain_open = true, shut_sent = false;

        if (!down || !up || fd_nonblock(t->net, true) < 0 || fd_nonblock(t->plain, true) < 0)
                goto done;
        for (;;) {
                short net_ev = 0, plain_ev = 0;
                bool progress = false;
                struct pollfd p[2];
                int k;

                if (net_open && down_len == 0) {
                        k = SSL_read(t->ssl, down, TLS_RELAY_BUF);
                        if (k > 0) {
                                down_len = (size_t) k, down_off = 0, progress = true;
                        } else {
                                int e = SSL_get_error(t->ssl, k);
                                if (e == SSL_ERROR_WANT_READ)
                                        net_ev |= POLLIN;
                                else if (e == SSL_ERROR_WANT_WRITE)
                                        net_ev |= POLLOUT;
                                else if (e == SSL_ERROR_ZERO_RETURN) {
                                        net_open = false, progress = true;
                                        (void) shutdown(t->plain, SHUT_WR);
                                } else
                                        goto done;
                        }
                }
                if (down_len > 0) {
                        ssize_t w = send(t->plain, down + down_off, down_len, MSG_NOSIGNAL);
                        if (w > 0) {
                                down_off += (size_t) w, down_len -= (size_t) w, progress = true;
                        } else if (w < 0 && (errno == EAGAIN || errno == EINTR))
                                plain_ev |= POLLOUT;
                        else
                                goto done;
                }
                if (plain_open && up_len == 0) {
                        ssize_t r = read(t->plain, up, TLS_RELAY_BUF);
                        if (r > 0)
                                up_len = (size_t) r, up_off = 0, progress = true;
                        else if (r == 0)
                                plain_open = false, progress = true;
                        else if (errno == EAGAIN || errno == EINTR)
                                plain_ev |= POLLIN;
                        else
                                goto done;
                }
                if (up_len > 0) {
                        k = SSL_write(t->ssl, up + up_off, (int) up_len);
                        if (k > 0) {
                                up_off += (size_t) k, up_len -= (size_t) k, progress = true;
                        } else {
                                int e = SSL_get_error(t->ssl, k);
                                if (e == SSL_ERROR_WANT_READ)
                                        net_ev |= POLLIN;
                                else if (e == SSL_ERROR_WANT_WRITE)
                                        net_ev |= POLLOUT;
                                else
                                        goto done;
                        }
                }
                if (!plain_open && up_len == 0 && !shut_sent) {
                        k = SSL_shutdown(t->ssl);
                        if (k >= 0)
                                shut_sent = true, progress = true;
                        else {
                                int e = SSL_get_error(t->ssl, k);
                                if (e == SSL_ERROR_WANT_WRITE)
                                        net_ev |= POLLOUT;
                                else if (e == SSL_ERROR_WANT_READ)
                                        net_ev |= POLLIN;
                                else
                                        goto done;
                        }
                }
                if (!net_open && down_len == 0 && shut_sent)
                        break;
                if (progress)
                        continue;
                p[0] = (struct pollfd){ .fd = net_ev ? t->net : -1, .events = net_ev };
                p[1] = (struct pollfd){ .fd = plain_ev ? t->plain : -1, .events = plain_ev };
                /* no deadline of its own (as net_splice_both): the code above
                 * the socketpair has its deadlines and closes its end */
                k = poll(p, 2, -1);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        goto done;
        }
done:
        ERR_clear_error();
        relay_free(t);
        return NULL;
}

/* SO_RCVTIMEO/SO_SNDTIMEO on the blocking fd: the handshake's deadline. */
static void handshake_deadline(int fd, int msec) {
        struct timeval tv = { .tv_sec = msec / 1000, .tv_usec = (msec % 1000) * 1000 };
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        (void) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static int wrap(bool server, int fd, const char *worker, int *ret_fd, char *why, size_t why_size) {
        Relay *t = new0(Relay, 1);
        int sp[2] = { -EBADF, -EBADF }, r;
        pthread_attr_t attr;
        pthread_t th;

        if (!t) {
                safe_close(fd);
                return -ENOMEM;
        }
        *t = (Relay){ .net = fd, .plain = -EBADF };
        t->ctx = context_new(server, why, why_size);
        if (!t->ctx) {
                relay_free(t);
                return -EIO;
        }
        t->ssl = SSL_new(t->ctx);
        if (!t->ssl || SSL_set_fd(t->ssl, fd) != 1) {
                why_ssl(why, why_size, "cannot make a TLS connection");
                relay_free(t);
                return -ENOMEM;
        }
        if (!server && !isempty(worker)) {
                /* the worker's certificate must name it */
                SSL_set_hostflags(t->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
                if (SSL_set1_host(t->ssl, worker) != 1) {
                        why_ssl(why, why_size, "bad worker name");
                        relay_free(t);
                        return -EINVAL;
                }
        }
        handshake_deadline(fd, WORKER_HELLO_TIMEOUT_MSEC);
        r = server ? SSL_accept(t->ssl) : SSL_connect(t->ssl);
        if (r != 1) {
                long v = SSL_get_verify_result(t->ssl);
                if (v != X509_V_OK && why && why_size) {
                        ERR_clear_error();
                        snprintf(why, why_size, "TLS handshake refused: the peer's certificate: %s",
                                 X509_verify_cert_error_string(v));
                } else
                        why_ssl(why, why_size, "TLS handshake failed");
                relay_free(t);
                return -EPROTO;
        }
        handshake_deadline(fd, 0);
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
                r = negative_errno();
                relay_free(t);
                return r;
        }
        t->plain = sp[0];
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        r = pthread_create(&th, &attr, relay_thread, t);
        pthread_attr_destroy(&attr);
        if (r != 0) {
                relay_free(t);
                safe_close(sp[1]);
                return -r;
        }
        *ret_fd = sp[1];
        return 0;
}

int cluster_tls_client(int fd, const char *worker, int *ret_fd, char *why, size_t why_size) {
        return wrap(false, fd, worker, ret_fd, why, why_size);
}

int cluster_tls_server(int fd, int *ret_fd, char *why, size_t why_size) {
        return wrap(true, fd, NULL, ret_fd, why, why_size);
}
