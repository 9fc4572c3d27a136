/* SPDX-License-Identifier: MIT */
/* GETs to a registry: TCP with a timeout on every read and write, TLS 1.2+
 * with the peer's certificate checked against the trust store (or
 * registry_ca_file) and its name (or IP address) against the URL's host,
 * redirects followed (to another host without the Authorization header, never
 * from https down to http unless that host is listed insecure). */

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "log.h"
#include "registry-http.h"
#include "sock-io.h"
#include "str-util.h"
#include "time-util.h"

struct RegistryHttp {
        SSL_CTX *ctx;
        const RegistryOptions *o;
};

typedef enum RegBody {
        REG_BODY_LENGTH,
        REG_BODY_CHUNKED,
        REG_BODY_CLOSE,
        REG_BODY_DONE,
} RegBody;

struct RegConn {
        int fd;
        SSL *ssl;
        char authority[REGISTRY_HOST_MAX + 1];
        char buf[HTTP_HEAD_MAX];
        size_t rpos, rlen;
        HttpHead head;
        RegBody body;
        uint64_t remaining;
        HttpChunkDecoder dec;
};

typedef struct RegUrl {
        bool https;
        char authority[REGISTRY_HOST_MAX + 1]; /* host[:port] as written */
        char host[REGISTRY_HOST_MAX + 1];      /* without brackets and port */
        char port[8];
        const char *target;                    /* "/..." (points into the URL) */
} RegUrl;

int registry_http_new(const RegistryOptions *o, RegistryHttp **ret, ApiError *e) {
        _cleanup_free_ RegistryHttp *h = new0(RegistryHttp, 1);
        int ok;

        if (!h)
                return -ENOMEM;
        h->o = o;
        h->ctx = SSL_CTX_new(TLS_client_method());
        if (!h->ctx)
                return api_error(e, -ENOMEM, API_INTERNAL, "cannot set up TLS");
        (void) SSL_CTX_set_min_proto_version(h->ctx, TLS1_2_VERSION);
        ok = o->ca_file && *o->ca_file ? SSL_CTX_load_verify_locations(h->ctx, o->ca_file, NULL)
                                       : SSL_CTX_set_default_verify_paths(h->ctx);
        if (ok != 1) {
                SSL_CTX_free(h->ctx);
                ERR_clear_error();
                return api_error(e, -EINVAL, API_INTERNAL, "cannot load the registry CA bundle %s",
                                 o->ca_file && *o->ca_file ? o->ca_file : "(the host's trust store)");
        }
        SSL_CTX_set_verify(h->ctx, SSL_VERIFY_PEER, NULL);
        *ret = TAKE_PTR(h);
        return 0;
}

RegistryHttp *registry_http_free(RegistryHttp *h) {
        if (!h)
                return NULL;
        SSL_CTX_free(h->ctx);
        return mfree(h);
}

RegConn *reg_conn_free(RegConn *c) {
        if (!c)
                return NULL;
        if (c->ssl) {
                (void) SSL_shutdown(c->ssl);
                SSL_free(c->ssl);
        }
        safe_close(c->fd);
        http_head_done(&c->head);
        return mfree(c);
}

const HttpHead *reg_conn_head(const RegConn *c) {
        return &c->head;
}

static int url_parse(const char *url, RegUrl *ret) {
        const char *p, *slash, *a;
        size_t n;

        *ret = (RegUrl){};
        if (strncasecmp(url, "https://", 8) == 0) {
                ret->https = true;
                p = url + 8;
        } else if (strncasecmp(url, "http://", 7) == 0)
                p = url + 7;
        else
                return -EINVAL;
        slash = strchr(p, '/');
        n = slash ? (size_t) (slash - p) : strlen(p);
        if (n == 0 || n > REGISTRY_HOST_MAX || memchr(p, '@', n) || memchr(p, '?', n) || memchr(p, '#', n))
                return -EINVAL;
        memcpy(ret->authority, p, n);
        ret->target = slash ?: "/";
        for (const char *t = ret->target; *t; t++)
                if ((unsigned char) *t <= ' ' || (unsigned char) *t >= 0x7f)
                        return -EINVAL;
        a = ret->authority;
        if (a[0] == '[') {
                const char *rb = strchr(a, ']');
                if (!rb || rb == a + 1)
                        return -EINVAL;
                memcpy(ret->host, a + 1, (size_t) (rb - a - 1));
                a = rb + 1;
                if (*a && *a != ':')
                        return -EINVAL;
        } else {
                const char *c = strchr(a, ':');
                size_t hl = c ? (size_t) (c - a) : strlen(a);
                if (hl == 0)
                        return -EINVAL;
                memcpy(ret->host, a, hl);
                a += hl;
        }
        if (*a == ':') {
                if (strlen(a + 1) == 0 || strlen(a + 1) > 5 || strspn(a + 1, "0123456789") != strlen(a + 1))
                        return -EINVAL;
                (void) strscpy(ret->port, sizeof ret->port, a + 1);
        } else
                (void) strscpy(ret->port, sizeof ret->port, ret->https ? "443" : "80");
        return 0;
}

static int set_timeouts(int fd, int msec) {
        struct timeval tv = { .tv_sec = msec / 1000, .tv_usec = (msec % 1000) * 1000 };

        if (msec <= 0)
                return 0;
        if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0)
                return negative_errno();
        return 0;
}

static int connect_addr(const struct addrinfo *ai, int timeout_msec) {
        _cleanup_close_ int fd = -EBADF;
        int one = 1, k;

        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return negative_errno();
        (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        k = sock_connect_until(fd, ai->ai_addr, ai->ai_addrlen, timeout_msec > 0 ? mono_msec() + timeout_msec : -1);
        if (k < 0)
                return k;
        /* blocking from here: SO_RCVTIMEO/SO_SNDTIMEO bound every read and write */
        k = fcntl(fd, F_GETFL);
        if (k < 0 || fcntl(fd, F_SETFL, k & ~O_NONBLOCK) < 0)
                return negative_errno();
        k = set_timeouts(fd, timeout_msec);
        if (k < 0)
                return k;
        return TAKE_FD(fd);
}

/* The address registry_resolve gives host ("name=address,..."), or host itself. */
static int resolve_override(const char *list, const char *host, char *buf, size_t size, const char **ret) {
        size_t hl = strlen(host);

        *ret = host;
        for (const char *p = list ?: ""; *p;) {
                const char *e = strchr(p, ','), *eq;
                size_t n = e ? (size_t) (e - p) : strlen(p);

                while (n > 0 && *p == ' ') {
                        p++;
                        n--;
                }
                eq = memchr(p, '=', n);
                if (eq && (size_t) (eq - p) == hl && strncasecmp(p, host, hl) == 0) {
                        size_t al = n - hl - 1;
                        while (al > 0 && eq[al] == ' ')
                                al--;
                        if (al == 0 || al >= size)
                                return -EINVAL;
                        memcpy(buf, eq + 1, al);
                        buf[al] = '\0';
                        *ret = buf;
                        return 0;
                }
                p += n;
                if (*p == ',')
                        p++;
        }
        return 0;
}

static int tcp_connect(const RegUrl *u, const RegistryOptions *o) {
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
        struct addrinfo *ai = NULL;
        char addr[INET6_ADDRSTRLEN + 1];
        const char *target;
        int timeout_msec = o->timeout_msec, r;

        r = resolve_override(o->resolve, u->host, addr, sizeof addr, &target);
        if (r < 0)
                return r;
        if (target != u->host)
                hints.ai_flags |= AI_NUMERICHOST;
        r = getaddrinfo(target, u->port, &hints, &ai);
        if (r != 0)
                return r == EAI_SYSTEM ? negative_errno() : -EHOSTUNREACH;
        r = -EHOSTUNREACH;
        for (struct addrinfo *i = ai; i; i = i->ai_next) {
                r = connect_addr(i, timeout_msec);
                if (r >= 0)
                        break;
        }
        freeaddrinfo(ai);
        return r;
}

static int tls_start(RegistryHttp *h, RegConn *c, const RegUrl *u, ApiError *e) {
        unsigned char addr[16];
        bool is_ip = inet_pton(AF_INET, u->host, addr) == 1 || inet_pton(AF_INET6, u->host, addr) == 1;
        X509_VERIFY_PARAM *vp;
        long vr;

        c->ssl = SSL_new(h->ctx);
        if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1)
                return api_error(e, -ENOMEM, API_INTERNAL, "cannot set up TLS");
        vp = SSL_get0_param(c->ssl);
        X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        if (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, u->host) != 1
                  : (SSL_set_tlsext_host_name(c->ssl, u->host) != 1 ||
                     X509_VERIFY_PARAM_set1_host(vp, u->host, 0) != 1))
                return api_error(e, -EINVAL, API_INTERNAL, "cannot set up TLS for %s", u->authority);
        if (SSL_connect(c->ssl) == 1)
                return 0;
        vr = SSL_get_verify_result(c->ssl);
        if (vr != X509_V_OK) {
                ERR_clear_error();
                return api_error(e, -EPERM, API_BAD_GATEWAY,
                                 "the TLS certificate of %s does not verify: %s (registry_ca_file names the CA "
                                 "bundle to trust)",
                                 u->authority, X509_verify_cert_error_string(vr));
        }
        unsigned long err = ERR_get_error();
        char buf[160];
        ERR_error_string_n(err, buf, sizeof buf);
        ERR_clear_error();
        return api_error(e, -EPROTO, API_BAD_GATEWAY, "the TLS handshake with %s failed: %s", u->authority,
                         err ? buf : "the connection closed");
}

static ssize_t conn_recv(RegConn *c, void *buf, size_t n) {
        if (c->ssl) {
                int k = SSL_read(c->ssl, buf, (int) MIN(n, (size_t) INT32_MAX));
                if (k > 0)
                        return k;
                switch (SSL_get_error(c->ssl, k)) {
                case SSL_ERROR_ZERO_RETURN:
                        return 0;
                case SSL_ERROR_WANT_READ:
                case SSL_ERROR_WANT_WRITE: /* SO_RCVTIMEO ran out */
                        ERR_clear_error();
                        return -ETIMEDOUT;
                case SSL_ERROR_SYSCALL:
                        ERR_clear_error();
                        return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : k == 0 ? 0 : -ECONNRESET;
                default:
                        ERR_clear_error();
                        return -EPROTO;
                }
        }
        for (;;) {
                ssize_t k = recv(c->fd, buf, n, 0);
                if (k >= 0)
                        return k;
                if (errno == EINTR)
                        continue;
                return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : negative_errno();
        }
}

static int conn_send(RegConn *c, const char *p, size_t n) {
        while (n > 0) {
                ssize_t k;
                if (c->ssl) {
                        int w = SSL_write(c->ssl, p, (int) MIN(n, (size_t) INT32_MAX));
                        if (w <= 0) {
                                ERR_clear_error();
                                return -ECONNRESET;
                        }
                        k = w;
                } else {
                        k = send(c->fd, p, n, MSG_NOSIGNAL);
                        if (k < 0 && errno == EINTR)
                                continue;
                        if (k < 0)
                                return errno == EAGAIN ? -ETIMEDOUT : negative_errno();
                }
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

static int read_head(RegConn *c) {
        ssize_t hl;
        int r;

        for (;;) {
                ssize_t k;
                hl = http_head_length(c->buf, c->rlen);
                if (hl < 0)
                        return (int) hl;
                if (hl > 0)
                        break;
                if (c->rlen == sizeof c->buf)
                        return -E2BIG;
                k = conn_recv(c, c->buf + c->rlen, sizeof c->buf - c->rlen);
                if (k < 0)
                        return (int) k;
                if (k == 0)
                        return -ECONNRESET;
                c->rlen += (size_t) k;
        }
        r = http_parse_response_head(c->buf, (size_t) hl, &c->head);
        if (r < 0)
                return r;
        c->rpos = (size_t) hl;
        if (c->head.status == 204 || c->head.status == 304 || (c->head.status >= 100 && c->head.status < 200))
                c->body = REG_BODY_DONE;
        else if (c->head.chunked)
                c->body = REG_BODY_CHUNKED;
        else if (c->head.content_length >= 0) {
                c->body = c->head.content_length == 0 ? REG_BODY_DONE : REG_BODY_LENGTH;
                c->remaining = (uint64_t) c->head.content_length;
        } else
                c->body = REG_BODY_CLOSE;
        return 0;
}

ssize_t reg_conn_read(RegConn *c, void *buf, size_t n) {
        ssize_t k;

        if (n == 0)
                return -EINVAL;
        switch (c->body) {
        case REG_BODY_LENGTH:
        case REG_BODY_CLOSE:
                if (c->body == REG_BODY_LENGTH)
                        n = (size_t) MIN((uint64_t) n, c->remaining);
                if (c->rpos < c->rlen) {
                        k = (ssize_t) MIN(n, c->rlen - c->rpos);
                        memcpy(buf, c->buf + c->rpos, (size_t) k);
                        c->rpos += (size_t) k;
                } else {
                        k = conn_recv(c, buf, n);
                        if (k < 0)
                                return k;
                        if (k == 0) {
                                if (c->body == REG_BODY_LENGTH)
                                        return -ECONNRESET;
                                c->body = REG_BODY_DONE;
                                return 0;
                        }
                }
                if (c->body == REG_BODY_LENGTH) {
                        c->remaining -= (uint64_t) k;
                        if (c->remaining == 0)
                                c->body = REG_BODY_DONE;
                }
                return k;
        case REG_BODY_CHUNKED:
                for (;;) {
                        size_t consumed, produced;
                        int r;

                        if (c->rpos == c->rlen) {
                                c->rpos = c->rlen = 0;
                                k = conn_recv(c, c->buf, sizeof c->buf);
                                if (k == 0)
                                        k = -ECONNRESET;
                                if (k < 0)
                                        return k;
                                c->rlen = (size_t) k;
                        }
                        r = http_chunk_decode(&c->dec, c->buf + c->rpos, c->rlen - c->rpos, buf, n, &consumed,
                                              &produced);
                        if (r < 0)
                                return r;
                        c->rpos += consumed;
                        if (r > 0)
                                c->body = REG_BODY_DONE;
                        if (produced > 0 || r > 0)
                                return (ssize_t) produced;
                }
        default:
                return 0;
        }
}

int reg_conn_read_all(RegConn *c, size_t max, char **ret, size_t *ret_len) {
        _cleanup_free_ char *b = NULL;
        size_t n = 0, size = 0;

        if (c->body == REG_BODY_LENGTH && c->remaining > max)
                return -E2BIG;
        for (;;) {
                ssize_t k;
                if (n + 4096 + 1 > size) {
                        size_t ns = MAX(size * 2, (size_t) 8192);
                        char *nb;
                        if (ns > max + 4096 + 1)
                                ns = max + 4096 + 1;
                        if (ns <= n + 1)
                                return -E2BIG;
                        nb = realloc(b, ns);
                        if (!nb)
                                return -ENOMEM;
                        b = nb;
                        size = ns;
                }
                k = reg_conn_read(c, b + n, size - n - 1);
                if (k < 0)
                        return (int) k;
                if (k == 0)
                        break;
                n += (size_t) k;
                if (n > max)
                        return -E2BIG;
        }
        b[n] = '\0';
        *ret = TAKE_PTR(b);
        if (ret_len)
                *ret_len = n;
        return 0;
}

static int get_once(RegistryHttp *h, const RegUrl *u, const char *auth, const char *accept, RegConn **ret,
                    ApiError *e) {
        _cleanup_(reg_conn_freep) RegConn *c = new0(RegConn, 1);
        _cleanup_free_ char *req = NULL;
        int r;

        if (!c)
                return -ENOMEM;
        c->fd = -EBADF;
        (void) strscpy(c->authority, sizeof c->authority, u->authority);
        r = tcp_connect(u, h->o);
        if (r < 0)
                return api_error(e, r, API_BAD_GATEWAY, "cannot connect to %s: %s", u->authority, strerror(-r));
        c->fd = r;
        if (u->https) {
                r = tls_start(h, c, u, e);
                if (r < 0)
                        return r;
        }
        req = strjoin("GET ", u->target, " HTTP/1.1\r\nHost: ", u->authority,
                      "\r\nUser-Agent: space\r\nConnection: close\r\n", accept ?: "", auth ?: "", "\r\n");
        if (!req)
                return -ENOMEM;
        r = conn_send(c, req, strlen(req));
        explicit_bzero(req, strlen(req)); /* it may carry a credential */
        if (r >= 0)
                r = read_head(c);
        if (r < 0)
                return api_error(e, r, API_BAD_GATEWAY, "the registry at %s did not answer: %s", u->authority,
                                 strerror(-r));
        *ret = TAKE_PTR(c);
        return 0;
}

static bool is_redirect(int status) {
        return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

int registry_get(RegistryHttp *h, const char *url, const char *auth, const char *accept, RegConn **ret,
                 ApiError *e) {
        _cleanup_free_ char *cur = strdup(url);
        char origin[REGISTRY_HOST_MAX + 1];
        int r;

        if (!cur)
                return -ENOMEM;
        for (unsigned hop = 0;; hop++) {
                _cleanup_(reg_conn_freep) RegConn *c = NULL;
                const char *loc;
                RegUrl u;

                if (url_parse(cur, &u) < 0)
                        return api_error(e, -EINVAL, API_BAD_GATEWAY, "the registry sent a bad URL: %.200s", cur);
                if (hop == 0)
                        (void) strscpy(origin, sizeof origin, u.authority);
                if (!u.https && !registry_host_listed(h->o->insecure, u.authority))
                        return api_error(e, -EPERM, API_BAD_GATEWAY,
                                         "refusing plain http to %s (only hosts listed in registry_insecure are "
                                         "reached without TLS)", u.authority);
                /* the credential goes to the host it was meant for, not where it redirects to */
                r = get_once(h, &u, strcasecmp(u.authority, origin) == 0 ? auth : NULL, accept, &c, e);
                if (r < 0)
                        return r;
                if (!is_redirect(c->head.status)) {
                        *ret = TAKE_PTR(c);
                        return 0;
                }
                if (hop >= REGISTRY_REDIRECTS_MAX)
                        return api_error(e, -ELOOP, API_BAD_GATEWAY, "the registry at %s redirects too often", origin);
                loc = http_head_header(&c->head, "Location");
                if (!loc || !*loc)
                        return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the registry at %s redirects nowhere",
                                         u.authority);
                char *next;
                if (loc[0] == '/' && loc[1] != '/')
                        next = strjoin(u.https ? "https://" : "http://", u.authority, loc);
                else
                        next = strdup(loc);
                if (!next)
                        return -ENOMEM;
                if (u.https && strncasecmp(next, "http://", 7) == 0) {
                        RegUrl nu;
                        if (url_parse(next, &nu) < 0 || !registry_host_listed(h->o->insecure, nu.authority)) {
                                free(next);
                                return api_error(e, -EPERM, API_BAD_GATEWAY,
                                                 "the registry at %s redirects from https to plain http; refused",
                                                 u.authority);
                        }
                }
                free(cur);
                cur = next;
        }
}
