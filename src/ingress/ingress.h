/* SPDX-License-Identifier: MIT */
#pragma once

/* The ingress: a reverse proxy on its own listener that routes
 * Host: {port}-{sandbox}.{domain} to that TCP port of the sandbox, over the
 * sandbox's own address on its link (nothing else: not the host, not another
 * sandbox), and 49983-{sandbox}.{domain} to the E2B envd handlers.
 *
 *   ingress.c        the listener, Host routing, access, the sandbox's address
 *   ingress-auth.c   traffic tokens, one-time links and signed cookies (pure)
 *   ingress-proxy.c  one request to the sandbox: head, bodies, Upgrade relay
 *
 * Access: private unless the sandbox allows public traffic; a request
 * carries the sandbox's traffic token (X-Space-Traffic-Token or E2B's
 * e2b-traffic-access-token) or the cookie a one-time link set. */

#include <netinet/in.h>

#include "api.h"
#include "http-server.h"

#define INGRESS_ENVD_PORT 49983U
#define INGRESS_TOKEN_HEADER "X-Space-Traffic-Token"
#define INGRESS_E2B_TOKEN_HEADER "e2b-traffic-access-token"
#define INGRESS_COOKIE "space_traffic"
#define INGRESS_LINK_PARAM "space_token"
#define INGRESS_LINK_TTL_SEC 900U              /* a one-time link is good this long */
#define INGRESS_COOKIE_TTL_SEC (24U * 3600U)   /* the cookie it sets */
#define INGRESS_TOKEN_LEN 64U                  /* hex HMAC-SHA256 */
#define INGRESS_SIGNED_MAX 96U                 /* "<exp>.<hex>" of links and cookies */
#define INGRESS_CONNECT_TIMEOUT_MSEC 5000
#define INGRESS_RESPONSE_TIMEOUT_MSEC 60000    /* for the sandbox's response head */
#define INGRESS_IDLE_TIMEOUT_MSEC 300000       /* a body or relay without a byte this long ends */
#define INGRESS_BUFFER (64U * 1024U)           /* each direction's buffer */
#define INGRESS_USED_LINKS_MAX 4096U           /* one-time links remembered until they expire */
#define INGRESS_PORTS_SEEN_MAX 65536U          /* (sandbox, port) pairs whose first use was recorded */

/* ---- ingress-auth.c (pure but for the server secret) ---- */

/* "{port}-{id}.{domain}[:listen port]" → port, id. -EINVAL unless the port
 * is 1..65535 in decimal (no leading zero), the id a valid sandbox id and
 * the rest the domain exactly (case-insensitive). */
int ingress_host_parse(const char *host, const char *domain, uint16_t *ret_port, char ret_id[static 17]);
/* The sandbox's traffic token: HMAC of "traffic:" + id under the E2B
 * secret (never the envdAccessToken). */
int ingress_traffic_token(const Config *c, const char *id, char ret[static INGRESS_TOKEN_LEN + 1]);
/* "<expiry s>.<hex HMAC of kind:id:expiry>", kind "link" or "cookie". */
int ingress_signed_make(const Config *c, const char *kind, const char *id, uint64_t expiry_sec,
                        char ret[static INGRESS_SIGNED_MAX]);
/* 0 if value (n bytes) is a valid, unexpired signature of kind for id at
 * now_sec; -EACCES if forged or malformed, -ETIME if expired. */
int ingress_signed_check(const Config *c, const char *kind, const char *id, const char *value, size_t n,
                         uint64_t now_sec);
/* The value of cookie name in a Cookie header: a pointer into it and its
 * length, or NULL. */
const char *ingress_cookie_find(const char *header, const char *name, size_t *ret_len);
/* The Cookie header without cookie name (malloc'd; NULL if nothing is left). */
int ingress_cookie_strip(const char *header, const char *name, char **ret);

/* ---- ingress-proxy.c ---- */

/* Forwards the request on c to the connected socket fd (the sandbox's
 * port) and its answer back; an Upgrade becomes a relay both ways. Always
 * responds (502 if the sandbox fails us before a response began). */
void ingress_proxy(HttpConn *c, const HttpHead *req, int fd, const char *forwarded_for);

/* ---- ingress.c ---- */

typedef struct Ingress Ingress;

/* Listens on config->ingress_listen (a host:port). */
int ingress_new(Api *api, Ingress **ret);
int ingress_port(const Ingress *g);
/* Serves until ingress_stop() (from a thread of its own). */
int ingress_run(Ingress *g);
void ingress_stop(Ingress *g);
Ingress *ingress_free(Ingress *g);
DEFINE_TRIVIAL_CLEANUP_FUNC(Ingress *, ingress_free);
