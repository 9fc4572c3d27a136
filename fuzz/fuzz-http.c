/* SPDX-License-Identifier: MIT */
/* Feeds hostile bytes to the HTTP head parsers, the chunked decoder (whole and
 * split at a data-derived point, with a tiny output buffer) and the
 * percent/query decoders. Every result must be self-consistent. */

#include <stdio.h>

#include "http-parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                  \
        do {                                                                      \
                if (!(x)) {                                                       \
                        fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #x); \
                        abort();                                                  \
                }                                                                 \
        } while (0)

static void check_head(const HttpHead *h, bool request) {
        CHECK(h->version_minor == 0 || h->version_minor == 1);
        CHECK(h->n_headers <= HTTP_HEADERS_MAX);
        CHECK(!(h->chunked && h->content_length >= 0));
        for (size_t i = 0; i < h->n_headers; i++) {
                CHECK(h->headers[i].name[0] != 0);
                CHECK(http_head_header(h, h->headers[i].name) != NULL);
        }
        if (request) {
                CHECK(h->method[0] != 0);
                CHECK(h->target && h->target[0] == '/');
                CHECK(h->path && h->path[0] == '/');
                CHECK(strlen(h->target) <= HTTP_URL_MAX);
                if (h->query) {
                        _cleanup_free_ char *v = NULL;
                        int r = http_query_get(h->query, "a", &v);
                        CHECK(r == 0 || r == -ENOENT || r == -EINVAL);
                }
        } else
                CHECK(h->status >= 100 && h->status <= 599 && h->reason);
}

static void fuzz_head(const char *p, size_t n) {
        ssize_t l = http_head_length(p, n);
        HttpHead h;

        CHECK(l == -E2BIG || (l >= 0 && (size_t) l <= n && (size_t) l <= HTTP_HEAD_MAX));
        if (l <= 0)
                return;
        if (http_parse_request_head(p, (size_t) l, &h) >= 0) {
                check_head(&h, true);
                http_head_done(&h);
        }
        if (http_parse_response_head(p, (size_t) l, &h) >= 0) {
                check_head(&h, false);
                http_head_done(&h);
        }
}

/* Decodes all of (p, n) feeding at most `step` bytes and producing at most `out_max` per call. */
static int decode_all(const char *p, size_t n, size_t step, size_t out_max, char *out, size_t out_size,
                      size_t *ret_len) {
        HttpChunkDecoder d = {};
        size_t pos = 0, len = 0;
        int r = 0;

        for (unsigned spins = 0; pos < n; spins++) {
                size_t consumed, produced, feed = MIN(step, n - pos);
                size_t room = MIN(out_max, out_size - len);

                r = http_chunk_decode(&d, p + pos, feed, out + len, room, &consumed, &produced);
                if (r < 0)
                        return r;
                CHECK(consumed <= feed && produced <= room);
                pos += consumed;
                len += produced;
                if (r > 0)
                        break;
                if (consumed == 0 && produced == 0) {
                        CHECK(room == 0); /* no progress only when the output is full */
                        break;
                }
                CHECK(spins < 4 * n + 16);
        }
        *ret_len = len;
        return r;
}

static void fuzz_chunked(const char *p, size_t n) {
        static char a[1 << 16], b[1 << 16];
        size_t la = 0, lb = 0, step;
        int ra, rb;

        if (n == 0)
                return;
        step = 1 + (unsigned char) p[0] % 7;
        ra = decode_all(p, n, n, SIZE_MAX, a, sizeof a, &la);
        rb = decode_all(p, n, step, 3, b, sizeof b, &lb);
        /* Split points and output sizes must not change the outcome. */
        if (la < sizeof a && lb < sizeof b) {
                CHECK((ra < 0) == (rb < 0));
                if (ra >= 0) {
                        CHECK(ra == rb);
                        CHECK(la == lb && memcmp(a, b, la) == 0);
                }
        }
}

static void fuzz_percent(const char *p, size_t n) {
        _cleanup_free_ char *d = NULL, *e = NULL, *back = NULL;

        if (http_percent_decode(p, n, true, &d) < 0)
                return;
        CHECK(strlen(d) <= n);
        e = http_percent_encode(d);
        CHECK(e);
        CHECK(http_percent_decode(e, strlen(e), false, &back) == 0);
        CHECK(streq(back, d));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *p = (const char *) data;

        if (size > 256 * 1024)
                return 0;
        fuzz_head(p, size);
        fuzz_chunked(p, size);
        if (size <= HTTP_URL_MAX)
                fuzz_percent(p, size);
        return 0;
}
