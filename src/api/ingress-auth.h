/* SPDX-License-Identifier: MIT */
#pragma once

/* The ingress's host names and access (src/ingress/ingress.h): traffic
 * tokens, one-time links and signed cookies, HMACs under the server secret
 * of src/api/e2b/e2b-route.c. Here in the API so that it hands out links too
 * (GET /v1/sandboxes/{id}/ports/{port}). */

#include "config.h"

#define INGRESS_ENVD_PORT 49983U
#define INGRESS_TOKEN_HEADER "X-Space-Traffic-Token"
#define INGRESS_E2B_TOKEN_HEADER "e2b-traffic-access-token"
#define INGRESS_COOKIE "space_traffic"
#define INGRESS_LINK_PARAM "space_token"
#define INGRESS_LINK_TTL_SEC 900U              /* a one-time link is good this long */
#define INGRESS_COOKIE_TTL_SEC (24U * 3600U)   /* the cookie it sets */
#define INGRESS_TOKEN_LEN 64U                  /* hex HMAC-SHA256 */
#define INGRESS_SIGNED_MAX 112U                /* "<exp>.<nonce>.<hex>" of links and cookies */


/* "{port}-{id}.{domain}[:listen port]" → port, id. -EINVAL unless the port
 * is 1..65535 in decimal (no leading zero), the id a valid sandbox id and
 * the rest the domain exactly (case-insensitive). */
int ingress_host_parse(const char *host, const char *domain, uint16_t *ret_port, char ret_id[static 17]);
/* The sandbox's traffic token: HMAC of "traffic:" + id under the E2B
 * secret (never the envdAccessToken). */
int ingress_traffic_token(const Config *c, const char *id, char ret[static INGRESS_TOKEN_LEN + 1]);
/* "<expiry s>.<nonce>.<hex HMAC of kind:id:expiry:nonce>", kind "link" or
 * "cookie"; the random nonce makes every one unique (a link is spent by its
 * value). */
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

/* "{domain}" or "{domain}:{listen port}" (the port unless 80): what a port's
 * host name ends in, and E2B's sandbox `domain`. -ENODATA when the ingress
 * is off. */
int ingress_public_domain(const Config *c, char *ret, size_t size);
/* The URL of a port ("http://{port}-{id}.{domain}[:listen port]/"), from
 * the ingress's config: -ENODATA when the ingress is off. */
int ingress_url(const Config *c, const char *id, unsigned port, char *ret, size_t size);
