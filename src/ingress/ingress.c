/* SPDX-License-Identifier: MIT */
/* The ingress's listener and its routing: Host {port}-{id}.{domain} names a
 * sandbox and a port; the request must carry the sandbox's traffic token
 * (header) or the cookie of a one-time link; the sandbox is looked up (any
 * tenant: the token is the sandbox's own), resumed if it is paused with
 * auto_resume, and the connection goes to its own address on its link
 * (api_sandbox_dial: dialled here, or by its worker in a cluster; net-dial.h).
 * Port 49983 is envd's: the E2B handlers serve it as if E2b-Sandbox-Id named
 * the sandbox. */

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "fd-util.h"
#include "ingress.h"
#include "log.h"
#include "str-util.h"

typedef struct UsedLink {
        char id[API_ID_LEN + 1];
        char value[INGRESS_SIGNED_MAX];
        uint64_t expiry_sec;
} UsedLink;

struct Ingress {
        Api *api;
        const Config *config;
        HttpServer *server;
        SSL_CTX *tls; /* ingress_tls_cert/key, NULL = plaintext */

        pthread_mutex_t lock;
        UsedLink *used; /* one-time links already spent (until they expire) */
        size_t n_used;
        char (*seen)[API_ID_LEN + 8]; /* "id:port" whose first use was recorded */
        size_t n_seen, allocated_seen;
};

static uint64_t now_sec(void) {
        return (uint64_t) time(NULL);
}

/* An answer of ours instead of the sandbox's (JSON error, or the link's redirect). */
static void refuse(IngressRefusal *f, int status, const char *code, const char *message, char *headers) {
        f->status = status;
        f->body = strdup_printf("{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}\n", code, message);
        f->headers = headers;
}

void ingress_refusal_done(IngressRefusal *f) {
        if (f->headers)
                explicit_bzero(f->headers, strlen(f->headers));
        f->body = mfree(f->body);
        f->headers = mfree(f->headers);
}

static void reply_refusal(HttpConn *c, IngressRefusal *f) {
        if (f->status == 302 && f->headers)
                (void) http_conn_respond(c, 302, NULL, NULL, 0, f->headers);
        else if (f->body)
                (void) http_conn_respond(c, f->status, "application/json", f->body, strlen(f->body), f->headers);
        else {
                http_conn_set_close(c);
                (void) http_conn_respond(c, 500, NULL, NULL, 0, NULL);
        }
}

/* Spends a one-time link: 0 the first time, -EALREADY after; -ENOSPC when
 * too many unexpired ones are remembered (refused: fail closed). */
static int link_spend(Ingress *g, const char *id, const char *value, size_t n, uint64_t expiry) {
        uint64_t now = now_sec();
        int r = 0;

        pthread_mutex_lock(&g->lock);
        for (size_t i = 0; i < g->n_used;) {
                if (g->used[i].expiry_sec < now) {
                        g->used[i] = g->used[--g->n_used];
                        continue;
                }
                if (streq(g->used[i].id, id) && strlen(g->used[i].value) == n &&
                    memcmp(g->used[i].value, value, n) == 0) {
                        r = -EALREADY;
                        goto out;
                }
                i++;
        }
        if (g->n_used >= INGRESS_USED_LINKS_MAX) {
                r = -ENOSPC;
                goto out;
        }
        UsedLink *u = &g->used[g->n_used++];
        (void) strscpy(u->id, sizeof u->id, id);
        memcpy(u->value, value, n);
        u->value[n] = 0;
        u->expiry_sec = expiry;
out:
        pthread_mutex_unlock(&g->lock);
        return r;
}

/* 1 the first time (id, port) is seen since start. */
static bool port_first_use(Ingress *g, const char *id, uint16_t port) {
        char key[API_ID_LEN + 8];
        bool first = true;

        snprintf(key, sizeof key, "%s:%u", id, (unsigned) port);
        pthread_mutex_lock(&g->lock);
        for (size_t i = 0; i < g->n_seen; i++)
                if (streq(g->seen[i], key)) {
                        first = false;
                        break;
                }
        if (first && g->n_seen < INGRESS_PORTS_SEEN_MAX &&
            greedy_realloc((void **) &g->seen, &g->allocated_seen, g->n_seen + 1, sizeof *g->seen) >= 0)
                memcpy(g->seen[g->n_seen++], key, sizeof key);
        pthread_mutex_unlock(&g->lock);
        return first;
}

/* The target without the space_token parameter (for the redirect after a link). */
static char *target_without_link(const HttpHead *head) {
        _cleanup_free_ char *q = NULL;
        size_t n = 0;
        const char *p = head->query;

        q = new0(char, strlen(strempty(head->query)) + 1);
        if (!q)
                return NULL;
        while (p && *p) {
                size_t l = strcspn(p, "&");
                if (!(l >= STRLEN(INGRESS_LINK_PARAM "=") && strncmp(p, INGRESS_LINK_PARAM "=", STRLEN(INGRESS_LINK_PARAM "=")) == 0) && l > 0) {
                        if (n > 0)
                                q[n++] = '&';
                        memcpy(q + n, p, l);
                        n += l;
                }
                p += l;
                if (*p == '&')
                        p++;
        }
        q[n] = 0;
        const char *path = head->target;
        size_t path_len = strcspn(path, "?");
        /* "//evil.example/?space_token=..." must not become a redirect to another host */
        while (path_len > 1 && path[0] == '/' && path[1] == '/') {
                path++;
                path_len--;
        }
        return strdup_printf("%.*s%s%s", (int) path_len, path, n > 0 ? "?" : "", q);
}

/* Access to sandbox id: 1 if granted, 0 if answered already, 2 if the
 * request offers no credentials (granted only if the sandbox is public). */
static int check_access(Ingress *g, IngressRefusal *f, const char *peer, bool tls, const HttpHead *head, const char *id) {
        const char *tok = http_head_header(head, INGRESS_TOKEN_HEADER) ?: http_head_header(head, INGRESS_E2B_TOKEN_HEADER);
        _cleanup_free_ char *link = NULL;
        char want[INGRESS_TOKEN_LEN + 1];
        const char *cookie;
        size_t cookie_len;
        int r;

        if (head->query && http_query_get(head->query, INGRESS_LINK_PARAM, &link) >= 0) {
                char value[INGRESS_SIGNED_MAX], hdr[INGRESS_SIGNED_MAX + 256];
                _cleanup_free_ char *location = NULL, *headers = NULL;
                uint64_t exp = 0;

                r = ingress_signed_check(g->config, "link", id, link, strlen(link), now_sec());
                if (r >= 0) {
                        exp = strtoull(link, NULL, 10);
                        r = link_spend(g, id, link, strlen(link), exp);
                }
                if (r < 0) {
                        log_info("Ingress: refused a %s link to sandbox %s from %s", r == -ETIME ? "expired"
                                 : r == -EALREADY ? "spent" : "forged", id, peer);
                        refuse(f, 403, "forbidden", r == -ETIME ? "this link has expired"
                              : r == -EALREADY ? "this link was used already" : "this link is not valid", NULL);
                        return 0;
                }
                r = ingress_signed_make(g->config, "cookie", id, now_sec() + INGRESS_COOKIE_TTL_SEC, value);
                location = target_without_link(head);
                if (r < 0 || !location) {
                        refuse(f, 500, "internal", "cannot sign the cookie", NULL);
                        return 0;
                }
                snprintf(hdr, sizeof hdr, "Set-Cookie: " INGRESS_COOKIE "=%s; Path=/; Max-Age=%u; HttpOnly; SameSite=Lax%s\r\n",
                         value, INGRESS_COOKIE_TTL_SEC, tls ? "; Secure" : "");
                headers = strdup_printf("%sLocation: %s\r\nCache-Control: no-store\r\n", hdr, location);
                explicit_bzero(value, sizeof value);
                if (!headers) {
                        refuse(f, 500, "internal", "out of memory", NULL);
                        return 0;
                }
                explicit_bzero(hdr, sizeof hdr);
                f->status = 302;
                f->headers = TAKE_PTR(headers);
                return 0;
        }
        if (tok) {
                r = ingress_traffic_token(g->config, id, want);
                if (r < 0) {
                        refuse(f, 500, "internal", "traffic tokens are unavailable", NULL);
                        return 0;
                }
                r = strlen(tok) == INGRESS_TOKEN_LEN && CRYPTO_memcmp(tok, want, INGRESS_TOKEN_LEN) == 0;
                explicit_bzero(want, sizeof want);
                if (!r) {
                        log_info("Ingress: refused a wrong traffic token for sandbox %s from %s", id, peer);
                        refuse(f, 403, "forbidden", "wrong traffic token for this sandbox", NULL);
                        return 0;
                }
                return 1;
        }
        cookie = ingress_cookie_find(http_head_header(head, "Cookie"), INGRESS_COOKIE, &cookie_len);
        if (cookie) {
                r = ingress_signed_check(g->config, "cookie", id, cookie, cookie_len, now_sec());
                if (r < 0) {
                        log_info("Ingress: refused a %s cookie for sandbox %s from %s", r == -ETIME ? "expired" : "forged",
                                 id, peer);
                        refuse(f, r == -ETIME ? 401 : 403, r == -ETIME ? "unauthorized" : "forbidden",
                              r == -ETIME ? "the traffic cookie has expired: open a new link"
                                          : "the traffic cookie is not valid for this sandbox", NULL);
                        return 0;
                }
                return 1;
        }
        return 2; /* nothing offered: only a public sandbox lets it in */
}

static void refuse_private(IngressRefusal *f) {
        refuse(f, 401, "unauthorized",
              "this sandbox's ports are private: send its traffic token as " INGRESS_TOKEN_HEADER
              " or open its link (space port ID PORT)", NULL);
}

/* ingress_route() up to the dial: wait false leaves the connect under way (t->connecting). */
static int route(Ingress *g, HttpConn *c, const HttpHead *head, IngressTarget *t, IngressRefusal *f, bool wait) {
        ApiRequest r = { .conn = c, .head = head, .api = g->api };
        const char *peer = http_conn_peer(c);
        _cleanup_(sandbox_done) Sandbox sb = {};
        _cleanup_close_ int fd = -EBADF;
        ApiError e = {};
        int k, access;

        *f = (IngressRefusal){};
        t->connecting = false;
        access = check_access(g, f, peer, http_conn_ssl(c) != NULL, head, t->id);
        if (access <= 0)
                return 1;
        const char *id = t->id;
        uint16_t port = t->port;

        k = api_get_store(&r, &e);
        if (k >= 0)
                k = store_sandbox_get(r.store, NULL, id, &sb);
        if (k == -ENOENT) {
                /* without a token, unknown and private look the same: ids are not probed here */
                if (access == 2)
                        refuse_private(f);
                else
                        refuse(f, 404, "not_found", "no such sandbox", NULL);
                return 1;
        }
        if (k < 0) {
                refuse(f, 503, "unavailable", "the store is unavailable", NULL);
                return 1;
        }
        if (access == 2 && !sb.public_traffic) {
                refuse_private(f);
                return 1;
        }
        (void) strscpy(r.key.tenant_id, sizeof r.key.tenant_id, sb.tenant_id);
        snprintf(r.actor, sizeof r.actor, "ingress");
        if (sb.state == SANDBOX_PAUSED && (sb.auto_resume || g->config->auto_resume_paused)) {
                k = api_sandbox_resume_paused(&r, &sb, "resumed by ingress traffic (auto_resume)", &e);
                if (k < 0 && e.code != API_SANDBOX_NOT_RUNNING) {
                        refuse(f, 503, "unavailable", "the sandbox could not be resumed", NULL);
                        return 1;
                }
        }
        if (sb.state != SANDBOX_RUNNING) {
                refuse(f, 502, "sandbox_not_running", "the sandbox is not running", NULL);
                return 1;
        }
        k = wait ? api_sandbox_dial(&r, &sb, port, &fd, &e) : api_sandbox_dial_start(&r, &sb, port, &fd, &e);
        if (k < 0) {
                refuse(f, api_error_code_to_status(e.code), api_error_code_to_string(e.code), e.message, NULL);
                return 1;
        }
        (void) strscpy(t->tenant_id, sizeof t->tenant_id, sb.tenant_id);
        if (k == 0 && port_first_use(g, id, port))
                ingress_port_opened(g, c, t);
        /* activity (not waiting: before the connect's outcome, which comes later, elsewhere) */
        if (sb.idle_s > 0)
                (void) store_sandbox_touch(r.store, id);
        (void) strscpy(t->mask, sizeof t->mask, sb.ingress_host);
        t->connecting = k > 0;
        t->fd = TAKE_FD(fd);
        return 0;
}

int ingress_route(Ingress *g, HttpConn *c, const HttpHead *head, IngressTarget *t, IngressRefusal *f) {
        return route(g, c, head, t, f, true);
}

int ingress_route_start(Ingress *g, HttpConn *c, const HttpHead *head, IngressTarget *t, IngressRefusal *f) {
        return route(g, c, head, t, f, false);
}

int ingress_route_connected(Ingress *g, IngressTarget *t, bool timed_out, IngressRefusal *f) {
        ApiError e = {};

        *f = (IngressRefusal){};
        if (api_sandbox_dial_finish(t->id, t->port, t->fd, timed_out, &e) < 0) {
                refuse(f, api_error_code_to_status(e.code), api_error_code_to_string(e.code), e.message, NULL);
                return 1;
        }
        t->connecting = false;
        return port_first_use(g, t->id, t->port) ? 2 : 0;
}

void ingress_port_opened(Ingress *g, HttpConn *c, const IngressTarget *t) {
        ApiRequest r = { .conn = c, .api = g->api };
        ApiError e = {};
        char data[32];

        if (api_get_store(&r, &e) < 0)
                return;
        (void) strscpy(r.key.tenant_id, sizeof r.key.tenant_id, t->tenant_id);
        snprintf(r.actor, sizeof r.actor, "ingress");
        snprintf(data, sizeof data, "{\"port\":%u}", (unsigned) t->port);
        api_event_tenant(&r, t->tenant_id, t->id, "sandbox.port_opened", "first ingress request to the port", data);
}

static void handle(HttpConn *c, const HttpHead *head, void *userdata) {
        _cleanup_(ingress_refusal_done) IngressRefusal f = {};
        Ingress *g = userdata;
        IngressTarget t = { .fd = -EBADF };
        char peer[64];

        if (ingress_host_parse(http_head_header(head, "Host"), g->config->ingress_domain, &t.port, t.id) < 0) {
                char msg[160];
                snprintf(msg, sizeof msg, "the Host must be {port}-{sandbox}.%.64s", g->config->ingress_domain);
                refuse(&f, 400, "bad_request", msg, NULL);
                reply_refusal(c, &f);
                return;
        }
        if (t.port == INGRESS_ENVD_PORT) {
                api_handle_envd(c, head, g->api, t.id);
                return;
        }
        if (ingress_route(g, c, head, &t, &f) != 0) {
                reply_refusal(c, &f);
                return;
        }
        (void) strscpy(peer, sizeof peer, http_conn_peer(c));
        char *colon = strrchr(peer, ':');
        if (colon)
                *colon = 0;
        ingress_proxy(c, head, t.fd, peer, t.mask, t.port);
        safe_close(t.fd);
}

static void h2_hook(HttpConn *c, int fd, const void *pending, size_t n, void *userdata) {
        ingress_h2_serve(userdata, c, fd, pending, n, http_conn_peer(c));
}

const char *ingress_domain(const Ingress *g) {
        return g->config->ingress_domain;
}

/* ALPN: h2 if the client offers it, else http/1.1; no agreement = HTTP/1.1 anyway. */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                       unsigned inlen, void *arg) {
        static const unsigned char ours[] = "\x02h2\x08http/1.1";
        unsigned char *o = NULL;

        if (SSL_select_next_proto(&o, outlen, ours, sizeof ours - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
                return SSL_TLSEXT_ERR_NOACK;
        *out = o;
        return SSL_TLSEXT_ERR_OK;
}

static int tls_new(const Config *c, SSL_CTX **ret) {
        SSL_CTX *ctx;

        if (isempty(c->ingress_tls_cert) != isempty(c->ingress_tls_key)) {
                log_error("Ingress: ingress_tls_cert and ingress_tls_key go together");
                return -EINVAL;
        }
        if (isempty(c->ingress_tls_cert)) {
                *ret = NULL;
                return 0;
        }
        ctx = SSL_CTX_new(TLS_server_method());
        if (!ctx)
                return -ENOMEM;
        (void) SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
        SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
        if (SSL_CTX_use_certificate_chain_file(ctx, c->ingress_tls_cert) != 1 ||
            SSL_CTX_use_PrivateKey_file(ctx, c->ingress_tls_key, SSL_FILETYPE_PEM) != 1 ||
            SSL_CTX_check_private_key(ctx) != 1) {
                char err[256];
                ERR_error_string_n(ERR_get_error(), err, sizeof err);
                log_error("Ingress: cannot load the TLS certificate %s and key %s: %s", c->ingress_tls_cert,
                          c->ingress_tls_key, err);
                SSL_CTX_free(ctx);
                return -EINVAL;
        }
        SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
        *ret = ctx;
        return 0;
}

int ingress_new(Api *api, Ingress **ret) {
        _cleanup_(ingress_freep) Ingress *g = new0(Ingress, 1);
        const Config *c = api_config(api);
        int r;

        if (!g)
                return -ENOMEM;
        g->api = api;
        g->config = c;
        pthread_mutex_init(&g->lock, NULL);
        g->used = new0(UsedLink, INGRESS_USED_LINKS_MAX);
        if (!g->used)
                return -ENOMEM;
        if (isempty(c->ingress_domain) || startswith(c->ingress_listen, "unix:"))
                return -EINVAL;
        r = tls_new(c, &g->tls);
        if (r < 0)
                return r;
        r = http_server_new(c->ingress_listen, handle, g, &g->server);
        if (r < 0)
                return r;
        if (g->tls)
                http_server_set_tls(g->server, g->tls);
        http_server_set_timeouts(g->server, 0, 0, (int) (c->http_stall_s * 1000));
        http_server_set_h2_hook(g->server, h2_hook);
        *ret = TAKE_PTR(g);
        return 0;
}

int ingress_port(const Ingress *g) {
        return http_server_port(g->server);
}

int ingress_run(Ingress *g) {
        return http_server_run(g->server);
}

void ingress_stop(Ingress *g) {
        if (g && g->server)
                http_server_stop(g->server);
}

Ingress *ingress_free(Ingress *g) {
        if (!g)
                return NULL;
        http_server_free(g->server);
        if (g->tls)
                SSL_CTX_free(g->tls);
        pthread_mutex_destroy(&g->lock);
        free(g->used);
        free(g->seen);
        free(g);
        return NULL;
}
