/* SPDX-License-Identifier: MIT */
/* src/gateway/tls-ca.c, tls-intercept.c and cred-inject.c: a sandbox's CA
 * and its leaves; real TLS between a client that trusts only the sandbox's
 * CA, the interception glue as the gateway runs it (over a socketpair on the
 * sandbox's side) and an upstream HTTPS server with its own CA on loopback:
 * the injected header arrives, a wrong upstream certificate (other CA, other
 * name) is refused, a host without credentials is left alone, and the
 * placeholder of one host's credential never brings its value to another. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "alloc-util.h"
#include "base64.h"
#include "cred-inject.h"
#include "fd-util.h"
#include "json.h"
#include "str-util.h"
#include "test.h"
#include "tls-ca.h"
#include "tls-intercept.h"

#define VALUE "sk-live-0123456789abcdefXYZ"
#define IO_TIMEOUT_SEC 20

/* ---- credential sets ---- */

static void cred_add(CredInjectSet *s, const char *name, const char *hosts_json, CredInjectApply apply,
                     const char *header, const char *format, const char *value) {
        CredInject *c;

        s->items = realloc(s->items, (s->n + 1) * sizeof *s->items);
        ASSERT_NOT_NULL(s->items);
        c = &s->items[s->n++];
        *c = (CredInject) { .apply = apply };
        ASSERT_OK(strscpy(c->name, sizeof c->name, name));
        ASSERT_OK(cred_inject_set_hosts(c, hosts_json));
        if (apply == CRED_INJECT_BASIC)
                ASSERT_OK(strscpy(c->basic_user, sizeof c->basic_user, header));
        else {
                ASSERT_OK(strscpy(c->header_name, sizeof c->header_name, header));
                ASSERT_OK(strscpy(c->header_format, sizeof c->header_format, format));
        }
        ASSERT_OK(cred_secret_from(value, strlen(value), &c->value));
}

static void parse(const char *req, HttpHead *h) {
        ASSERT_OK(http_parse_request_head(req, strlen(req), h));
}

static const char *hdr(const HttpHead *h, const char *name) {
        return http_head_header(h, name);
}

TEST(inject_replaces_placeholder_adds_header_and_respects_hosts) {
        _cleanup_(cred_inject_set_done) CredInjectSet set = {};
        HttpHead h = {};
        CredInjectUsed used;

        cred_add(&set, "a", "[\"api.test\"]", CRED_INJECT_HEADER, "Authorization", "Bearer {value}", VALUE);
        cred_add(&set, "ab", "[\"*.other.test\"]", CRED_INJECT_HEADER, "x-api-key", "{value}", "other-secret");

        /* the placeholder in the header is replaced; "space-cred-ab" is another token and not for this host */
        parse("GET / HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer space-cred-a\r\n"
              "X-Other: space-cred-ab\r\n\r\n", &h);
        ASSERT_TRUE(cred_inject_wants(&set, "api.test", 1));
        ASSERT_OK(cred_inject_head(&set, "api.test", 1, &h, &used));
        ASSERT_STREQ(hdr(&h, "Authorization"), "Bearer " VALUE);
        ASSERT_STREQ(hdr(&h, "X-Other"), "space-cred-ab");
        ASSERT_EQ(used.n, 1u);
        ASSERT_STREQ(used.names[0], "a");
        cred_inject_head_done(&h);

        /* no placeholder: the header is added */
        parse("GET / HTTP/1.1\r\nHost: x.other.test\r\n\r\n", &h);
        ASSERT_OK(cred_inject_head(&set, "x.other.test", 1, &h, &used));
        ASSERT_STREQ(hdr(&h, "x-api-key"), "other-secret");
        ASSERT_NULL(hdr(&h, "Authorization"));
        cred_inject_head_done(&h);

        /* the sandbox's own header of that name is replaced, not doubled */
        parse("GET / HTTP/1.1\r\nHost: api.test\r\nauthorization: Bearer mine\r\nAuthorization: x\r\n\r\n", &h);
        ASSERT_OK(cred_inject_head(&set, "API.test.", 1, &h, &used));
        ASSERT_STREQ(hdr(&h, "Authorization"), "Bearer " VALUE);
        size_t n_auth = 0;
        for (size_t i = 0; i < h.n_headers; i++)
                n_auth += strcasecmp(h.headers[i].name, "authorization") == 0;
        ASSERT_EQ(n_auth, 1u);
        cred_inject_head_done(&h);

        /* a host without credentials: untouched, placeholders and all */
        parse("GET / HTTP/1.1\r\nHost: evil.test\r\nAuthorization: Bearer space-cred-a\r\n\r\n", &h);
        ASSERT_FALSE(cred_inject_wants(&set, "evil.test", 1));
        ASSERT_FALSE(cred_inject_wants(&set, "api.test.evil.test", 1));
        ASSERT_OK(cred_inject_head(&set, "evil.test", 1, &h, &used));
        ASSERT_EQ(used.n, 0u);
        ASSERT_STREQ(hdr(&h, "Authorization"), "Bearer space-cred-a");
        ASSERT_EQ(h.n_headers, 2u);
        cred_inject_head_done(&h);
}

TEST(inject_revoked_expired_and_basic) {
        _cleanup_(cred_inject_set_done) CredInjectSet set = {};
        _cleanup_free_ char *b64 = NULL;
        char req[512];
        HttpHead h = {};
        CredInjectUsed used;
        size_t n;

        cred_add(&set, "gh", "[\"git.test\"]", CRED_INJECT_BASIC, "x-access-token", NULL, VALUE);
        cred_add(&set, "tok", "[\"api.test\"]", CRED_INJECT_HEADER, "Authorization", "token {value}", VALUE);

        /* basic: added as Authorization: Basic base64(user:value) */
        parse("GET / HTTP/1.1\r\nHost: git.test\r\n\r\n", &h);
        ASSERT_OK(cred_inject_head(&set, "git.test", 1, &h, &used));
        ASSERT_OK(base64_encode("x-access-token:" VALUE, strlen("x-access-token:" VALUE), &b64, &n));
        snprintf(req, sizeof req, "Basic %s", b64);
        ASSERT_STREQ(hdr(&h, "Authorization"), req);
        cred_inject_head_done(&h);

        /* git's https://user:space-cred-tok@api.test/ becomes Basic base64(user:placeholder): the password is replaced */
        b64 = mfree(b64);
        ASSERT_OK(base64_encode("me:space-cred-tok", strlen("me:space-cred-tok"), &b64, &n));
        snprintf(req, sizeof req, "GET / HTTP/1.1\r\nHost: api.test\r\nAuthorization: Basic %s\r\n\r\n", b64);
        parse(req, &h);
        ASSERT_OK(cred_inject_head(&set, "api.test", 1, &h, &used));
        b64 = mfree(b64);
        ASSERT_OK(base64_encode("me:" VALUE, strlen("me:" VALUE), &b64, &n));
        snprintf(req, sizeof req, "Basic %s", b64);
        ASSERT_STREQ(hdr(&h, "Authorization"), req);
        cred_inject_head_done(&h);

        /* revoked: nothing applied, the placeholder stays */
        set.items[1].revoked_usec = 5;
        parse("GET / HTTP/1.1\r\nHost: api.test\r\nAuthorization: token space-cred-tok\r\n\r\n", &h);
        ASSERT_FALSE(cred_inject_wants(&set, "api.test", 10));
        ASSERT_OK(cred_inject_head(&set, "api.test", 10, &h, &used));
        ASSERT_EQ(used.n, 0u);
        ASSERT_STREQ(hdr(&h, "Authorization"), "token space-cred-tok");
        cred_inject_head_done(&h);

        /* expired: from its expiry on */
        set.items[1].revoked_usec = 0;
        set.items[1].expires_usec = 100;
        ASSERT_TRUE(cred_inject_wants(&set, "api.test", 99));
        ASSERT_FALSE(cred_inject_wants(&set, "api.test", 100));
}

/* ---- the CA ---- */

static bool verify_leaf(TlsCa *ca, X509 *leaf, const char *host) {
        X509_STORE *st = X509_STORE_new();
        X509_STORE_CTX *ctx = X509_STORE_CTX_new();
        bool ok;

        ASSERT_TRUE(st && ctx);
        ASSERT_EQ(X509_STORE_add_cert(st, tls_ca_cert(ca)), 1);
        ASSERT_EQ(X509_STORE_CTX_init(ctx, st, leaf, NULL), 1);
        X509_VERIFY_PARAM_set1_host(X509_STORE_CTX_get0_param(ctx), host, 0);
        X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
        ok = X509_verify_cert(ctx) == 1;
        X509_STORE_CTX_free(ctx);
        X509_STORE_free(st);
        return ok;
}

TEST(ca_leaves_and_pem) {
        _cleanup_(tls_ca_freep) TlsCa *ca = NULL, *again = NULL, *other = NULL;
        _cleanup_free_ char *cert = NULL, *key = NULL, *key2 = NULL;
        size_t cert_n, key_n, key2_n;
        X509 *leaf, *leaf2;
        EVP_PKEY *k;

        ASSERT_OK(tls_ca_new("space sandbox test", &ca));
        ASSERT_EQ(X509_check_ca(tls_ca_cert(ca)), 1);
        ASSERT_OK(tls_ca_leaf(ca, "API.Test", &leaf, &k));
        ASSERT_TRUE(verify_leaf(ca, leaf, "api.test"));
        ASSERT_FALSE(verify_leaf(ca, leaf, "other.test"));
        EVP_PKEY_free(k);
        /* cached: the same certificate again */
        ASSERT_OK(tls_ca_leaf(ca, "api.test", &leaf2, &k));
        ASSERT_TRUE(leaf == leaf2);
        X509_free(leaf2);
        EVP_PKEY_free(k);
        ASSERT_ERRNO(tls_ca_leaf(ca, "bad name", &leaf2, &k), EINVAL);
        ASSERT_ERRNO(tls_ca_leaf(ca, "", &leaf2, &k), EINVAL);

        /* many names: the cache stays bounded and still answers */
        for (unsigned i = 0; i < TLS_CA_LEAF_CACHE_MAX + 10; i++) {
                char name[64];
                snprintf(name, sizeof name, "h%u.test", i);
                ASSERT_OK(tls_ca_leaf(ca, name, &leaf2, &k));
                X509_free(leaf2);
                EVP_PKEY_free(k);
        }

        /* PEM round trip; a key of another CA does not load */
        ASSERT_OK(tls_ca_cert_pem(ca, &cert, &cert_n));
        ASSERT_OK(tls_ca_key_pem(ca, &key, &key_n));
        ASSERT_TRUE(strstr(cert, "BEGIN CERTIFICATE") != NULL);
        ASSERT_TRUE(strstr(key, "PRIVATE KEY") != NULL);
        ASSERT_OK(tls_ca_load(cert, cert_n, key, key_n, &again));
        ASSERT_TRUE(verify_leaf(again, leaf, "api.test")); /* same CA certificate */
        ASSERT_OK(tls_ca_new("another", &other));
        ASSERT_OK(tls_ca_key_pem(other, &key2, &key2_n));
        TlsCa *bad = NULL;
        ASSERT_ERRNO(tls_ca_load(cert, cert_n, key2, key2_n, &bad), EBADMSG);
        ASSERT_ERRNO(tls_ca_load("junk", 4, key, key_n, &bad), EBADMSG);
        X509_free(leaf);
        OPENSSL_cleanse(key, key_n);
        OPENSSL_cleanse(key2, key2_n);
}

/* ---- real TLS end to end ---- */

typedef struct Upstream {
        int listen_fd;
        uint16_t port;
        TlsCa *ca;      /* the upstream's own CA */
        char name[64];  /* the name on its certificate */
        char got[4096]; /* the request head it received */
        size_t got_n;
        bool handshake_ok;
        pthread_t thread;
} Upstream;

static void set_timeouts(int fd) {
        struct timeval tv = { .tv_sec = IO_TIMEOUT_SEC };
        ASSERT_OK(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv));
        ASSERT_OK(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv));
}

/* One connection: TLS with a leaf of its CA for its name; echoes the request head as the body. */
static void *upstream_main(void *arg) {
        Upstream *u = arg;
        SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
        X509 *leaf = NULL;
        EVP_PKEY *key = NULL;
        SSL *ssl = NULL;
        int fd = accept4(u->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        char resp[5000];
        int k;

        if (fd < 0 || !ctx || tls_ca_leaf(u->ca, u->name, &leaf, &key) < 0)
                goto out;
        set_timeouts(fd);
        SSL_CTX_use_certificate(ctx, leaf);
        SSL_CTX_use_PrivateKey(ctx, key);
        ssl = SSL_new(ctx);
        SSL_set_fd(ssl, fd);
        if (SSL_accept(ssl) != 1)
                goto out;
        u->handshake_ok = true;
        while (u->got_n < sizeof u->got - 1 && !memmem(u->got, u->got_n, "\r\n\r\n", 4)) {
                k = SSL_read(ssl, u->got + u->got_n, (int) (sizeof u->got - 1 - u->got_n));
                if (k <= 0)
                        goto out;
                u->got_n += (size_t) k;
        }
        k = snprintf(resp, sizeof resp, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%.*s",
                     u->got_n, (int) u->got_n, u->got);
        SSL_write(ssl, resp, k);
        SSL_shutdown(ssl);
out:
        ERR_clear_error();
        SSL_free(ssl);
        SSL_CTX_free(ctx);
        X509_free(leaf);
        EVP_PKEY_free(key);
        if (fd >= 0)
                close(fd);
        return NULL;
}

static void upstream_start(Upstream *u, TlsCa *ca, const char *name) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof a;

        *u = (Upstream) { .ca = ca };
        snprintf(u->name, sizeof u->name, "%s", name);
        u->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ASSERT_TRUE(u->listen_fd >= 0);
        ASSERT_OK(bind(u->listen_fd, (struct sockaddr *) &a, sizeof a));
        ASSERT_OK(listen(u->listen_fd, 4));
        ASSERT_OK(getsockname(u->listen_fd, (struct sockaddr *) &a, &len));
        u->port = ntohs(a.sin_port);
        ASSERT_EQ(pthread_create(&u->thread, NULL, upstream_main, u), 0);
}

static void upstream_join(Upstream *u) {
        pthread_join(u->thread, NULL);
        close(u->listen_fd);
}

static int connect_upstream(const Upstream *u) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(u->port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(connect(fd, (struct sockaddr *) &a, sizeof a));
        set_timeouts(fd);
        return fd;
}

/* The sandbox's client: trusts only the sandbox's CA, sends one request, reads the answer. */
typedef struct Client {
        int fd;
        TlsCa *ca;
        const char *host, *request;
        char answer[8192];
        size_t answer_n;
        bool verified;
        pthread_t thread;
} Client;

static void *client_main(void *arg) {
        Client *c = arg;
        SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
        SSL *ssl = NULL;
        int k;

        X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), tls_ca_cert(c->ca));
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        ssl = SSL_new(ctx);
        SSL_set_tlsext_host_name(ssl, c->host);
        SSL_set1_host(ssl, c->host);
        SSL_set_fd(ssl, c->fd);
        if (SSL_connect(ssl) == 1) {
                c->verified = SSL_get_verify_result(ssl) == X509_V_OK;
                SSL_write(ssl, c->request, (int) strlen(c->request));
                while (c->answer_n < sizeof c->answer - 1 &&
                       (k = SSL_read(ssl, c->answer + c->answer_n, (int) (sizeof c->answer - 1 - c->answer_n))) > 0)
                        c->answer_n += (size_t) k;
        } else
                fprintf(stderr, "  client: handshake failed: %s (verify: %s)\n",
                        ERR_reason_error_string(ERR_peek_last_error()) ?: "?",
                        X509_verify_cert_error_string(SSL_get_verify_result(ssl)));
        ERR_clear_error();
        SSL_free(ssl);
        SSL_CTX_free(ctx);
        shutdown(c->fd, SHUT_WR);
        return NULL;
}

/* Blocking glue around a TlsPipe, as the gateway's event loop would drive it. */
static void pipe_flush(TlsPipe *p, int fd) {
        char buf[16384];
        ssize_t k;

        while ((k = tls_pipe_take(p, buf, sizeof buf)) > 0)
                ASSERT_OK(loop_write(fd, buf, (size_t) k));
}

static bool pipe_fill(TlsPipe *p, int fd) {
        char buf[16384];
        ssize_t k = read(fd, buf, sizeof buf);

        if (k <= 0)
                return false;
        ASSERT_OK(tls_pipe_feed(p, buf, (size_t) k));
        return true;
}

static int pipe_handshake(TlsPipe *p, int fd) {
        for (;;) {
                int r = tls_pipe_handshake(p);
                pipe_flush(p, fd);
                if (r != 0)
                        return r;
                if (!pipe_fill(p, fd))
                        return -EIO;
        }
}

static ssize_t pipe_read(TlsPipe *p, int fd, char *buf, size_t n) {
        for (;;) {
                ssize_t r = tls_pipe_read(p, buf, n);
                pipe_flush(p, fd);
                if (r != -EAGAIN)
                        return r;
                if (!pipe_fill(p, fd))
                        return 0;
        }
}

/* Serialises a head (what the gateway's http_rewrite does). */
static size_t head_write(const HttpHead *h, char *buf, size_t size) {
        size_t o = (size_t) snprintf(buf, size, "%s %s HTTP/1.1\r\n", h->method, h->target);
        for (size_t i = 0; i < h->n_headers; i++)
                o += (size_t) snprintf(buf + o, size - o, "%s: %s\r\n", h->headers[i].name, h->headers[i].value);
        o += (size_t) snprintf(buf + o, size - o, "Connection: close\r\n\r\n");
        ASSERT_TRUE(o < size);
        return o;
}

/* One intercepted request: returns the upstream pipe's handshake result. */
static int intercept(TlsCa *sandbox_ca, SSL_CTX *up_ctx, const CredInjectSet *set, const Upstream *u,
                     const char *host, int sfd) {
        _cleanup_(tls_pipe_freep) TlsPipe *c = NULL, *up = NULL;
        char head[HTTP_HEAD_MAX], out[HTTP_HEAD_MAX], buf[16384];
        size_t head_n = 0, out_n;
        HttpHead h = {};
        CredInjectUsed used;
        _cleanup_close_ int ufd = -EBADF;
        ssize_t k;
        int r;

        ASSERT_OK(tls_intercept_server_new(sandbox_ca, host, &c));
        ASSERT_EQ(pipe_handshake(c, sfd), 1);
        while (!memmem(head, head_n, "\r\n\r\n", 4)) {
                k = pipe_read(c, sfd, head + head_n, sizeof head - head_n);
                ASSERT_TRUE(k > 0);
                head_n += (size_t) k;
        }
        ASSERT_OK(http_parse_request_head(head, head_n, &h));
        OPENSSL_cleanse(head, sizeof head);
        ASSERT_OK(cred_inject_head(set, host, 1, &h, &used));
        out_n = head_write(&h, out, sizeof out);
        cred_inject_head_done(&h);

        ufd = connect_upstream(u);
        ASSERT_OK(tls_intercept_client_new(up_ctx, host, &up));
        r = pipe_handshake(up, ufd);
        if (r < 0) {
                OPENSSL_cleanse(out, sizeof out);
                fprintf(stderr, "  upstream refused: %s\n", tls_pipe_error(up));
                ASSERT_TRUE(strlen(tls_pipe_error(up)) > 0);
                tls_pipe_shutdown(c);
                pipe_flush(c, sfd);
                return r;
        }
        ASSERT_OK(tls_pipe_write(up, out, out_n));
        OPENSSL_cleanse(out, sizeof out);
        pipe_flush(up, ufd);
        while ((k = pipe_read(up, ufd, buf, sizeof buf)) > 0) {
                ASSERT_OK(tls_pipe_write(c, buf, (size_t) k));
                pipe_flush(c, sfd);
        }
        tls_pipe_shutdown(c);
        pipe_flush(c, sfd);
        return r;
}

static void write_pem(TlsCa *ca, const char *path) {
        _cleanup_free_ char *pem = NULL;
        size_t n;

        ASSERT_OK(tls_ca_cert_pem(ca, &pem, &n));
        ASSERT_OK(write_file_atomic(path, pem, n, 0644));
}

static void run_case(const char *cert_name, bool trust_upstream_ca, const char *request, int want,
                     const char *expect_in_upstream, const char *not_in_upstream) {
        _cleanup_(tls_ca_freep) TlsCa *sandbox_ca = NULL, *up_ca = NULL;
        _cleanup_(cred_inject_set_done) CredInjectSet set = {};
        char ca_file[4096];
        SSL_CTX *up_ctx = NULL;
        Upstream u;
        Client cl = { .host = "api.test", .request = request };
        int sv[2];

        ASSERT_OK(tls_ca_new("space sandbox t", &sandbox_ca));
        ASSERT_OK(tls_ca_new("upstream test CA", &up_ca));
        snprintf(ca_file, sizeof ca_file, "%s/ca.pem", test_tmpdir());
        write_pem(trust_upstream_ca ? up_ca : sandbox_ca, ca_file);
        ASSERT_OK(tls_intercept_client_ctx_new(ca_file, &up_ctx));
        cred_add(&set, "k", "[\"api.test\"]", CRED_INJECT_HEADER, "Authorization", "Bearer {value}", VALUE);
        cred_add(&set, "elsewhere", "[\"other.test\"]", CRED_INJECT_HEADER, "X-Key", "{value}", "never-here");

        upstream_start(&u, up_ca, cert_name);
        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
        set_timeouts(sv[0]);
        set_timeouts(sv[1]);
        cl.fd = sv[0];
        cl.ca = sandbox_ca;
        ASSERT_EQ(pthread_create(&cl.thread, NULL, client_main, &cl), 0);

        int r = intercept(sandbox_ca, up_ctx, &set, &u, "api.test", sv[1]);
        shutdown(sv[1], SHUT_RDWR);
        pthread_join(cl.thread, NULL);
        upstream_join(&u);
        close(sv[0]);
        close(sv[1]);
        SSL_CTX_free(up_ctx);

        ASSERT_TRUE(cl.verified); /* the sandbox trusted the leaf of its own CA */
        if (want < 0) {
                ASSERT_ERRNO(r, -want);
                ASSERT_FALSE(u.handshake_ok && u.got_n > 0); /* nothing reached the wrong upstream */
                return;
        }
        ASSERT_EQ(r, 1);
        u.got[u.got_n] = 0;
        cl.answer[cl.answer_n] = 0;
        ASSERT_TRUE(strstr(u.got, expect_in_upstream) != NULL);
        if (not_in_upstream)
                ASSERT_TRUE(strstr(u.got, not_in_upstream) == NULL);
        ASSERT_TRUE(strstr(u.got, "never-here") == NULL);
        ASSERT_TRUE(strstr(cl.answer, "200 OK") != NULL);
}

TEST(intercept_injects_header_upstream) {
        run_case("api.test", true, "GET /v1/models HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer space-cred-k\r\n"
                                   "X-Other: space-cred-elsewhere\r\n\r\n",
                 1, "Authorization: Bearer " VALUE "\r\n", "space-cred-k\r\n");
}

TEST(intercept_adds_header_when_absent) {
        run_case("api.test", true, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n", 1, "Authorization: Bearer " VALUE,
                 NULL);
}

TEST(intercept_refuses_upstream_of_another_ca) {
        /* the upstream's certificate is signed by a CA the gateway does not trust */
        run_case("api.test", false, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n", -EPROTO, NULL, NULL);
}

TEST(intercept_refuses_upstream_with_another_name) {
        /* a valid chain, but for another name */
        run_case("evil.test", true, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n", -EPROTO, NULL, NULL);
}

TEST(client_ctx_bad_ca_file) {
        SSL_CTX *ctx = NULL;
        ASSERT_ERRNO(tls_intercept_client_ctx_new("/nonexistent/ca.pem", &ctx), EINVAL);
        ASSERT_OK(tls_intercept_client_ctx_new(NULL, &ctx)); /* the host's trust store */
        SSL_CTX_free(ctx);
}

/* ---- ALPN end to end: the sandbox's pipe pauses for the upstream's choice ---- */

TEST(alpn_parse) {
        static const uint8_t both[] = { 2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1' };
        static const uint8_t other[] = { 6, 's', 'p', 'd', 'y', '/', '3', 2, 'h', '2' };
        static const uint8_t truncated[] = { 2, 'h', '2', 9, 'h', 't', 't', 'p' };
        static const uint8_t empty_name[] = { 0, 2, 'h', '2' };
        static const uint8_t h2c[] = { 3, 'h', '2', 'c' };

        ASSERT_EQ(tls_alpn_parse(both, sizeof both), (unsigned) (TLS_ALPN_H2 | TLS_ALPN_HTTP11));
        ASSERT_EQ(tls_alpn_parse(other, sizeof other), (unsigned) TLS_ALPN_H2);
        ASSERT_EQ(tls_alpn_parse(truncated, sizeof truncated), 0U);
        ASSERT_EQ(tls_alpn_parse(empty_name, sizeof empty_name), 0U);
        ASSERT_EQ(tls_alpn_parse(h2c, sizeof h2c), 0U);
        ASSERT_EQ(tls_alpn_parse(NULL, 0), 0U);
}

/* Moves ciphertext both ways between a client SSL (memory BIOs) and a server pipe, handshaking both. */
static int alpn_exchange(SSL *cl, BIO *cl_in, BIO *cl_out, TlsPipe *srv, int *ret_srv) {
        uint8_t buf[16384];
        int r = 0;

        for (unsigned i = 0; i < 16; i++) {
                (void) SSL_do_handshake(cl);
                int k;
                while ((k = BIO_read(cl_out, buf, sizeof buf)) > 0)
                        if (tls_pipe_feed(srv, buf, (size_t) k) < 0)
                                return -EIO;
                r = tls_pipe_handshake(srv);
                if (r < 0)
                        return r;
                ssize_t t;
                while ((t = tls_pipe_take(srv, buf, sizeof buf)) > 0)
                        BIO_write(cl_in, buf, (int) t);
        }
        *ret_srv = r;
        return 0;
}

static void alpn_case(TlsCa *ca, const uint8_t *offer, size_t offer_n, bool answer_h2, bool expect_pause,
                      const char *expect) {
        _cleanup_(tls_pipe_freep) TlsPipe *srv = NULL;
        SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
        SSL *cl = SSL_new(ctx);
        BIO *cl_in = BIO_new(BIO_s_mem()), *cl_out = BIO_new(BIO_s_mem());
        const uint8_t *sel = NULL;
        unsigned sel_n = 0;
        int done = 0;

        ASSERT_TRUE(cl && cl_in && cl_out);
        BIO_set_mem_eof_return(cl_in, -1);
        SSL_set_bio(cl, cl_in, cl_out);
        SSL_set_connect_state(cl);
        SSL_set_verify(cl, SSL_VERIFY_NONE, NULL);
        if (offer_n > 0)
                ASSERT_EQ(SSL_set_alpn_protos(cl, offer, (unsigned) offer_n), 0);
        ASSERT_OK(tls_intercept_server_new(ca, "alpn.test", &srv));
        ASSERT_OK(alpn_exchange(cl, cl_in, cl_out, srv, &done));
        ASSERT_TRUE(tls_pipe_hello_seen(srv));
        ASSERT_EQ(done == 0, expect_pause);
        if (expect_pause) {
                ASSERT_TRUE(tls_pipe_offers(srv) & TLS_ALPN_H2);
                ASSERT_OK(tls_pipe_set_answer(srv, answer_h2 ? TLS_ALPN_H2 : TLS_ALPN_HTTP11));
                ASSERT_OK(alpn_exchange(cl, cl_in, cl_out, srv, &done));
        }
        ASSERT_EQ(done, 1);
        SSL_get0_alpn_selected(cl, &sel, &sel_n);
        ASSERT_EQ(sel_n, (unsigned) strlen(expect));
        ASSERT_TRUE(sel_n == 0 || memcmp(sel, expect, sel_n) == 0);
        ASSERT_EQ(tls_pipe_alpn(srv), strcmp(expect, "h2") == 0 ? TLS_ALPN_H2
                                      : strcmp(expect, "http/1.1") == 0 ? TLS_ALPN_HTTP11 : TLS_ALPN_NONE);
        SSL_free(cl);
        SSL_CTX_free(ctx);
}

TEST(alpn_answered_with_the_upstreams_choice) {
        _cleanup_(tls_ca_freep) TlsCa *ca = NULL;
        static const uint8_t both[] = { 2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1' };
        static const uint8_t h2only[] = { 2, 'h', '2' };
        static const uint8_t h11[] = { 8, 'h', 't', 't', 'p', '/', '1', '.', '1' };

        ASSERT_OK(tls_ca_new("space sandbox alpn", &ca));
        alpn_case(ca, both, sizeof both, true, true, "h2");          /* the upstream chose h2 */
        alpn_case(ca, both, sizeof both, false, true, "http/1.1");   /* it did not: http/1.1 */
        alpn_case(ca, h2only, sizeof h2only, false, true, "");       /* h2 only, upstream without: none */
        alpn_case(ca, h11, sizeof h11, false, false, "http/1.1");    /* no pause without h2 */
        alpn_case(ca, NULL, 0, false, false, "");                    /* no ALPN at all */
}

TEST(alpn_offer_and_answer_bad_input) {
        _cleanup_(tls_ca_freep) TlsCa *ca = NULL;
        _cleanup_(tls_pipe_freep) TlsPipe *srv = NULL, *cl = NULL;
        SSL_CTX *ctx = NULL;

        ASSERT_OK(tls_ca_new("space sandbox alpn2", &ca));
        ASSERT_OK(tls_intercept_server_new(ca, "alpn.test", &srv));
        ASSERT_OK(tls_intercept_client_ctx_new(NULL, &ctx));
        ASSERT_OK(tls_intercept_client_new(ctx, "alpn.test", &cl));
        ASSERT_ERRNO(tls_pipe_offer(srv, TLS_ALPN_H2), EINVAL);      /* a server pipe answers, never offers */
        ASSERT_ERRNO(tls_pipe_offer(cl, 0), EINVAL);
        ASSERT_ERRNO(tls_pipe_offer(cl, 1U << 7), EINVAL);
        ASSERT_OK(tls_pipe_offer(cl, TLS_ALPN_H2 | TLS_ALPN_HTTP11));
        ASSERT_ERRNO(tls_pipe_set_answer(cl, TLS_ALPN_H2), EINVAL);
        ASSERT_ERRNO(tls_pipe_set_answer(srv, TLS_ALPN_NONE), EINVAL);
        ASSERT_FALSE(tls_pipe_hello_seen(srv));
        SSL_CTX_free(ctx);
}
