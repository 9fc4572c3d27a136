/* SPDX-License-Identifier: MIT */
#pragma once

/* HTTP/1.1 message heads and chunked framing. Parsers take (pointer, length)
 * and never rely on a NUL; every limit is a named constant. */

#include "macros.h"
#include "str-util.h"

#define HTTP_HEAD_MAX (16U * 1024U)   /* request line + headers */
#define HTTP_HEADERS_MAX 100U
#define HTTP_URL_MAX 8192U
#define HTTP_CHUNK_LINE_MAX 64U       /* "ffff;ext\r\n" */
#define HTTP_CHUNK_SIZE_MAX (UINT64_C(1) << 60) /* 15 hex digits; larger sizes are refused */
#define HTTP_TRAILERS_MAX (8U * 1024U) /* trailer bytes after the last chunk (skipped) */

typedef struct HttpHeader {
        char *name; /* as sent; compare case-insensitively */
        char *value;
} HttpHeader;

typedef struct HttpHead {
        /* request */
        char method[16];
        char *target;   /* raw request-target, e.g. "/v1/sandboxes?x=1" */
        char *path;     /* percent-decoded path part, never contains NUL */
        char *query;    /* raw query string after '?', or NULL */
        /* response */
        int status;
        char *reason;
        /* both */
        int version_minor; /* 0 or 1 */
        HttpHeader *headers;
        size_t n_headers;
        int64_t content_length; /* -1 if absent */
        bool chunked;           /* Transfer-Encoding: chunked */
        bool keep_alive;        /* after Connection/version rules */
} HttpHead;

void http_head_done(HttpHead *h);

/* Finds the end of a head ("\r\n\r\n") in (p, n): returns its length including
 * the terminator, 0 if more bytes are needed, -E2BIG past HTTP_HEAD_MAX. */
ssize_t http_head_length(const char *p, size_t n);

/* Parse a complete head (as delimited by http_head_length). -EINVAL on syntax
 * errors (bad method, bad version, header without colon, obs-fold, CTLs,
 * both Content-Length and chunked, conflicting Content-Length, bad
 * Transfer-Encoding), -E2BIG over the limits, -ENOMEM.
 * Requests also: -ENAMETOOLONG if the request-target exceeds HTTP_URL_MAX
 * (answer 414); -EINVAL unless the target is origin-form ("/..."), its path
 * percent-decodes cleanly (no %00) and HTTP/1.1 carries exactly one Host.
 * Transfer-Encoding in an HTTP/1.0 message is refused (faulty framing).
 * On failure *ret is left zeroed (nothing to free). */
int http_parse_request_head(const char *p, size_t n, HttpHead *ret);
int http_parse_response_head(const char *p, size_t n, HttpHead *ret);

const char *http_head_header(const HttpHead *h, const char *name);
/* The Upgrade header's value if the Connection header names the "upgrade" token, else NULL. */
const char *http_head_upgrade(const HttpHead *h);

/* Query string: finds key and returns the percent-decoded value (malloc'd).
 * -ENOENT if absent, -EINVAL on bad encoding or an embedded NUL. */
int http_query_get(const char *query, const char *key, char **ret);
/* Percent-decodes (p, n) ('+' → ' ' only if plus_is_space). -EINVAL on bad escapes or NUL. */
int http_percent_decode(const char *p, size_t n, bool plus_is_space, char **ret);
/* Percent-encodes a string for use in a query value or path segment. */
char *http_percent_encode(const char *s);

/* Incremental chunked-body decoder. Feed bytes; it copies payload bytes to out. */
typedef struct HttpChunkDecoder {
        int state;
        uint64_t remaining; /* bytes left in the current chunk */
        char line[HTTP_CHUNK_LINE_MAX];
        size_t line_len;
        bool done;
} HttpChunkDecoder;

/* Consumes up to n bytes of in, writes up to out_size payload bytes to out.
 * *ret_consumed / *ret_produced say how much. Returns 1 when the final chunk
 * and trailers were consumed, 0 to continue, -EINVAL on malformed framing. */
int http_chunk_decode(HttpChunkDecoder *d, const char *in, size_t n, char *out, size_t out_size,
                      size_t *ret_consumed, size_t *ret_produced);

const char *http_status_reason(int status);
