/* SPDX-License-Identifier: MIT */
#pragma once

/* Lifecycle webhooks, the parts the API (create checks) and the controller
 * (deliveries) share: the URL a tenant names, the guard that keeps spaced
 * from calling the host's own or private services on a tenant's behalf
 * (SSRF), the signatures, and the event type patterns and E2B names. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "macros.h"

#define WEBHOOK_URL_MAX 2047U
#define WEBHOOK_HOST_MAX 253U
#define WEBHOOK_PATTERNS_MAX 32U
#define WEBHOOK_PATTERN_MAX 64U
#define WEBHOOK_SECRET_MIN 16U
#define WEBHOOK_SECRET_MAX 255U
#define WEBHOOK_SEALED_MAX 512U     /* a secret as stored, NUL */
#define WEBHOOK_SEALED_PREFIX "sealed1:"
#define WEBHOOK_SIG_HEX 65U          /* hex of a SHA-256, NUL */
#define WEBHOOK_SIG_B64 44U          /* unpadded base64 of a SHA-256 (43), NUL */

typedef struct WebhookUrl {
        bool https;
        char host[WEBHOOK_HOST_MAX + 1]; /* a name, an IPv4 literal or an IPv6 literal (no brackets) */
        uint16_t port;
        char target[WEBHOOK_URL_MAX + 1]; /* path and query, "/" at least */
} WebhookUrl;

/* "http[s]://host[:port][/path][?query]": no user info, no fragment, only
 * printable ASCII. -EINVAL with *ret_why set. */
int webhook_url_parse(const char *s, WebhookUrl *ret, const char **ret_why);

typedef struct WebhookGuard {
        bool allow_private;        /* config webhook_allow_private: anything goes */
        int pool_family;           /* the sandboxes' net_pool, AF_UNSPEC = none */
        uint8_t pool_addr[16];
        unsigned pool_prefixlen;
} WebhookGuard;

/* Fills g from the config values; net_pool "" = none (it is private anyway). */
int webhook_guard_init(WebhookGuard *g, bool allow_private, const char *net_pool);
/* Why spaced must not connect to sa (a static string: "loopback",
 * "link-local", "metadata", "private", "the host's own address", "the
 * sandboxes' network", ...), or NULL if it may. */
const char *webhook_addr_forbidden(const WebhookGuard *g, const struct sockaddr *sa);
/* Resolves u->host and checks every address (one forbidden refuses the
 * URL: a name must not be a way around the guard). *ret: the first address
 * with u->port. -EPERM with why = the refusal, or -EHOSTUNREACH (does not
 * resolve). */
int webhook_resolve(const WebhookGuard *g, const WebhookUrl *u, struct sockaddr_storage *ret, socklen_t *ret_len,
                    char *why, size_t why_size);

/* X-Space-Signature: hex HMAC-SHA256(secret, timestamp "." body). */
int webhook_sign(const char *secret, const char *timestamp, const void *body, size_t n,
                 char ret[static WEBHOOK_SIG_HEX]);
/* e2b-signature: unpadded base64 of SHA-256(secret body). */
int webhook_sign_e2b(const char *secret, const void *body, size_t n, char ret[static WEBHOOK_SIG_B64]);
/* A new secret: "whsec_" and 40 random [a-z0-9]. */
#define WEBHOOK_SECRET_GEN_LEN 46U
int webhook_secret_generate(char ret[static WEBHOOK_SECRET_GEN_LEN + 1]);

/* A pattern a webhook may name: "*", "sandbox.*", a sandbox event type of
 * ours, or an E2B name ("sandbox.lifecycle.created", "sandbox.lifecycle.*"). */
bool webhook_pattern_valid(const char *p);
bool webhook_pattern_match(const char *pattern, const char *type);
/* The E2B name of one of our event types, NULL if E2B has none. */
const char *webhook_e2b_type(const char *type);

/* Webhook secrets at rest: sealed like credentials (cred-crypt.h) under the
 * master key, bound to the webhook's id and tenant, stored as
 * "sealed1:<key_id>:<nonce>:<base64 ciphertext>". _seal writes that into
 * ret (WEBHOOK_SEALED_MAX); _open the plaintext into ret (WEBHOOK_SECRET_MAX
 * + 1; the caller wipes it): -EKEYREJECTED if no key of k's ring sealed it,
 * -EBADMSG if it does not authenticate (tampered, or another row's),
 * -ENOKEY if k is NULL. A stored value without the prefix (a row from before
 * sealing) opens as itself; webhook_secret_sealed() tells which it is. */
struct CredKey;
int webhook_secret_seal(const struct CredKey *k, const char *id, const char *tenant, const char *plain,
                        char ret[static WEBHOOK_SEALED_MAX]);
int webhook_secret_open(const struct CredKey *k, const char *id, const char *tenant, const char *stored,
                        char ret[static WEBHOOK_SECRET_MAX + 1]);
bool webhook_secret_sealed(const char *stored);
