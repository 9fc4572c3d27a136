/* SPDX-License-Identifier: MIT */
#pragma once

/* One GET to a registry (or its token service, or the blob store it
 * redirects to) over HTTPS, the certificate and the name verified, plain
 * http only to a host listed insecure. One request per connection: a pull
 * makes a handful. */

#include <sys/types.h>

#include "http-parse.h"
#include "registry.h"

#define REGISTRY_REDIRECTS_MAX 5U

typedef struct RegistryHttp RegistryHttp;
typedef struct RegConn RegConn;

int registry_http_new(const RegistryOptions *o, RegistryHttp **ret, ApiError *e);
RegistryHttp *registry_http_free(RegistryHttp *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(RegistryHttp *, registry_http_free);

/* GETs url, following redirects (auth, a "Name: value\r\n" header line or
 * NULL, is sent only to url's own host; accept likewise NULL or a line).
 * *ret's head is the final response's, whatever its status. */
int registry_get(RegistryHttp *h, const char *url, const char *auth, const char *accept, RegConn **ret,
                 ApiError *e);
const HttpHead *reg_conn_head(const RegConn *c);
/* The body: bytes read, 0 at its end, -errno (-ECONNRESET if cut short). */
ssize_t reg_conn_read(RegConn *c, void *buf, size_t n);
/* All of the body (NUL-terminated) if at most max bytes, else -E2BIG. */
int reg_conn_read_all(RegConn *c, size_t max, char **ret, size_t *ret_len);
RegConn *reg_conn_free(RegConn *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(RegConn *, reg_conn_free);
