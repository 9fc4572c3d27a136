/* SPDX-License-Identifier: MIT */
#pragma once

/* The per-sandbox certificate authority of TLS interception: an EC P-256
 * key and a self-signed CA certificate (basicConstraints CA:TRUE,
 * pathlen 0, keyUsage keyCertSign), generated when a sandbox that has
 * credentials is created. Its certificate goes into the sandbox's trust
 * store; its key never leaves the host (the worker keeps the PEM, mode 0600,
 * beside the sandbox's other host-side state, so a restarted gateway can load
 * it again).
 *
 * Leaf certificates for the host names the gateway intercepts are signed by
 * it on demand (one EC P-256 leaf key per CA, subjectAltName = the name,
 * valid from an hour ago for TLS_CA_LEAF_DAYS) and cached (up to
 * TLS_CA_LEAF_CACHE_MAX names, least recently used evicted).
 *
 * Use (gateway, one TlsCa per sandbox):
 *     tls_ca_new("space sandbox <id>", &ca)      at sandbox create, or
 *     tls_ca_load(cert_pem, n, key_pem, n, &ca)  after a restart;
 *     tls_ca_cert_pem(ca, ...)                   what the sandbox trusts;
 *     tls_ca_key_pem(ca, ...)                    what the worker keeps (0600);
 *     tls_intercept_server_new(ca, host, ...)    per intercepted connection
 *                                                (tls-intercept.h; it calls
 *                                                tls_ca_leaf()). */

#include <openssl/ssl.h>

#include "macros.h"

#define TLS_CA_DAYS 3650               /* the CA certificate's validity */
#define TLS_CA_LEAF_DAYS 30            /* a leaf's; re-issued when the cache entry is older than half */
#define TLS_CA_LEAF_CACHE_MAX 64U
#define TLS_CA_PEM_MAX (16U * 1024U)   /* a certificate or key in PEM */
#define TLS_CA_NAME_MAX 253U

typedef struct TlsCa TlsCa;

/* common_name: e.g. "space sandbox abcd..." (up to 64 bytes). */
int tls_ca_new(const char *common_name, TlsCa **ret);
/* From PEM (as written by tls_ca_cert_pem / tls_ca_key_pem); -EBADMSG if
 * they do not parse, are not a CA certificate or do not belong together. */
int tls_ca_load(const char *cert_pem, size_t cert_n, const char *key_pem, size_t key_n, TlsCa **ret);
TlsCa *tls_ca_free(TlsCa *ca);
DEFINE_TRIVIAL_CLEANUP_FUNC(TlsCa *, tls_ca_free);

/* malloc'd PEM text, NUL-terminated (*ret_n without the NUL). */
int tls_ca_cert_pem(const TlsCa *ca, char **ret, size_t *ret_n);
/* The private key (PKCS#8 PEM): wipe it after use (OPENSSL_cleanse). */
int tls_ca_key_pem(const TlsCa *ca, char **ret, size_t *ret_n);

/* A leaf for host (a DNS name, lower-cased here), signed by ca; references
 * owned by the caller (X509_free / EVP_PKEY_free). -EINVAL for a name that
 * is not a DNS name. */
int tls_ca_leaf(TlsCa *ca, const char *host, X509 **ret_cert, EVP_PKEY **ret_key);
/* The CA certificate (borrowed). */
X509 *tls_ca_cert(const TlsCa *ca);
