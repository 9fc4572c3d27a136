/* SPDX-License-Identifier: MIT */
/* HTTP parser, chunked decoder, server and client: parsers on every class of
 * bad input; server and client over real sockets on 127.0.0.1 (port 0) and a
 * unix socket, with the server's accept loop on its own thread. */

#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "http-client.h"
#include "http-server.h"
#include "test.h"

/* ---- parser ---- */

static int parse_req(const char *s, HttpHead *h) {
        return http_parse_request_head(s, strlen(s), h);
}

TEST(parse_valid_request) {
        _cleanup_(http_head_done) HttpHead h = {};
        const char *s = "GET /v1/sandboxes/a%20b?state=running&x=%2F HTTP/1.1\r\n"
                        "Host: localhost:7070\r\n"
                        "lang_version:  3.12 \r\n"
                        "X-Tab:\tv\t\r\n"
                        "X-Obs-Text: caf\xc3\xa9\r\n"
                        "Empty:\r\n"
                        "\r\n";

        ASSERT_EQ(http_head_length(s, strlen(s)), strlen(s));
        ASSERT_OK(parse_req(s, &h));
        ASSERT_STREQ(h.method, "GET");
        ASSERT_STREQ(h.target, "/v1/sandboxes/a%20b?state=running&x=%2F");
        ASSERT_STREQ(h.path, "/v1/sandboxes/a b");
        ASSERT_STREQ(h.query, "state=running&x=%2F");
        ASSERT_EQ(h.version_minor, 1);
        ASSERT_EQ(h.n_headers, 5);
        ASSERT_STREQ(http_head_header(&h, "host"), "localhost:7070");
        ASSERT_STREQ(http_head_header(&h, "LANG_VERSION"), "3.12");
        ASSERT_STREQ(http_head_header(&h, "x-tab"), "v");
        ASSERT_STREQ(http_head_header(&h, "x-obs-text"), "caf\xc3\xa9");
        ASSERT_STREQ(http_head_header(&h, "empty"), "");
        ASSERT_NULL(http_head_header(&h, "missing"));
        ASSERT_EQ(h.content_length, -1);
        ASSERT_FALSE(h.chunked);
        ASSERT_TRUE(h.keep_alive);
}

TEST(parse_framing) {
        _cleanup_(http_head_done) HttpHead h = {};

        ASSERT_OK(parse_req("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 0042\r\n\r\n", &h));
        ASSERT_EQ(h.content_length, 42);
        http_head_done(&h);
        /* identical duplicates are harmless */
        ASSERT_OK(parse_req("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 7\r\ncontent-length: 7\r\n\r\n", &h));
        ASSERT_EQ(h.content_length, 7);
        http_head_done(&h);
        ASSERT_OK(parse_req("POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n", &h));
        ASSERT_TRUE(h.chunked);
        ASSERT_EQ(h.content_length, -1);
        http_head_done(&h);
        ASSERT_OK(parse_req("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 999999999999999999\r\n\r\n", &h));
        ASSERT_EQ(h.content_length, 999999999999999999LL);
}

TEST(parse_keep_alive) {
        static const struct {
                const char *head;
                bool keep_alive;
        } cases[] = {
                { "GET / HTTP/1.1\r\nHost: h\r\n\r\n", true },
                { "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", false },
                { "GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Close\r\n\r\n", false },
                { "GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\n\r\n", true },
                { "GET / HTTP/1.0\r\n\r\n", false },
                { "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true },
                { "GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n", false },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(http_head_done) HttpHead h = {};
                ASSERT_OK(parse_req(cases[i].head, &h));
                if (h.keep_alive != cases[i].keep_alive)
                        test_fail(__FILE__, __LINE__, "case %zu: keep_alive=%d", i, h.keep_alive);
        }
}

TEST(parse_invalid_heads) {
        static const struct {
                const char *head;
                int err;
        } cases[] = {
                /* request line */
                { "G@T / HTTP/1.1\r\nHost: h\r\n\r\n", EINVAL },             /* non-token method */
                { "GET\x01 / HTTP/1.1\r\nHost: h\r\n\r\n", EINVAL },
                { " GET / HTTP/1.1\r\nHost: h\r\n\r\n", EINVAL },
                { "VERYLONGMETHODNAME / HTTP/1.1\r\nHost: h\r\n\r\n", EINVAL },
                { "GET  / HTTP/1.1\r\nHost: h\r\n\r\n", EINVAL },           /* double space */
                { "GET / HTTP/1.1 \r\nHost: h\r\n\r\n", EINVAL },
                { "GET /\r\nHost: h\r\n\r\n", EINVAL },                      /* HTTP/0.9 */
                { "GET / HTTP/2.0\r\nHost: h\r\n\r\n", EINVAL },
                { "GET / HTTP/1.2\r\nHost: h\r\n\r\n", EINVAL },
                { "GET / http/1.1\r\nHost: h\r\n\r\n", EINVAL },
                { "GET http://h/ HTTP/1.1\r\nHost: h\r\n\r\n", EINVAL },    /* absolute-form */
                { "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", EINVAL },
                { "GET /a#frag HTTP/1.1\r\nHost: h\r\n\r\n", EINVAL },
                { "GET /caf\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n", EINVAL }, /* raw non-ASCII in target */
                { "GET /a%00b HTTP/1.1\r\nHost: h\r\n\r\n", EINVAL },
                { "GET /a%2 HTTP/1.1\r\nHost: h\r\n\r\n", EINVAL },
                { "GET /a%zz HTTP/1.1\r\nHost: h\r\n\r\n", EINVAL },
                /* line endings */
                { "GET / HTTP/1.1\nHost: h\r\n\r\n", EINVAL },
                { "GET / HTTP/1.1\r\nHost: h\n\r\n", EINVAL },
                { "GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n", EINVAL },
                { "GET / HTTP/1.1\r\nHost: h\r\n\r\nextra", EINVAL },
                /* header names and values */
                { "GET / HTTP/1.1\r\nHost : h\r\n\r\n", EINVAL },           /* space before colon */
                { "GET / HTTP/1.1\r\nHost: h\r\n: v\r\n\r\n", EINVAL },
                { "GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", EINVAL },
                { "GET / HTTP/1.1\r\nHost: h\r\nX(y): v\r\n\r\n", EINVAL },
                { "GET / HTTP/1.1\r\nHost: h\r\nX: a\x01z\r\n\r\n", EINVAL },
                { "GET / HTTP/1.1\r\nHost: h\r\nX: a\x7fz\r\n\r\n", EINVAL },
                { "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n continued\r\n\r\n", EINVAL }, /* obs-fold */
                { "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n\tcontinued\r\n\r\n", EINVAL },
                { "GET / HTTP/1.1\r\n Host: h\r\n\r\n", EINVAL },
                /* Host */
                { "GET / HTTP/1.1\r\n\r\n", EINVAL },
                { "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", EINVAL },
                /* framing (request smuggling) */
                { "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", EINVAL },
                { "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\n\r\n", EINVAL },
                { "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +5\r\n\r\n", EINVAL },
                { "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", EINVAL },
                { "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0x10\r\n\r\n", EINVAL },
                { "POST / HTTP/1.1\r\nHost: h\r\nContent-Length:\r\n\r\n", EINVAL },
                { "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 9999999999999999999\r\n\r\n", EINVAL },
                { "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", EINVAL },
                { "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", EINVAL },
                { "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", EINVAL },
                { "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", EINVAL },
                { "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", EINVAL },
                { "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: xchunked\r\n\r\n", EINVAL },
                { "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", EINVAL },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                HttpHead h;
                int r = parse_req(cases[i].head, &h);
                if (r != -cases[i].err)
                        test_fail(__FILE__, __LINE__, "case %zu (%s): got %d", i, cases[i].head, r);
                ASSERT_NULL(h.headers); /* nothing to free after a failure */
        }
        /* Embedded NUL in a header value */
        {
                static const char s[] = "GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n";
                HttpHead h;
                ASSERT_ERRNO(http_parse_request_head(s, sizeof s - 1, &h), EINVAL);
        }
}

TEST(parse_limits) {
        _cleanup_free_ char *big = NULL, *many = NULL, *url = NULL, *url_ok = NULL;
        _cleanup_(http_head_done) HttpHead h = {};
        size_t n;

        /* http_head_length */
        ASSERT_EQ(http_head_length("GET / HTTP/1.1\r\n", 16), 0);
        ASSERT_EQ(http_head_length("GET / HTTP/1.1\r\n\r\nbody", 22), 18);
        ASSERT_EQ(http_head_length("", 0), 0);
        big = malloc(HTTP_HEAD_MAX + 10);
        ASSERT_NOT_NULL(big);
        memset(big, 'a', HTTP_HEAD_MAX + 10);
        ASSERT_ERRNO(http_head_length(big, HTTP_HEAD_MAX), E2BIG);
        ASSERT_EQ(http_head_length(big, HTTP_HEAD_MAX - 1), 0);
        memcpy(big + HTTP_HEAD_MAX - 4, "\r\n\r\n", 4); /* ends exactly at the limit: fine */
        ASSERT_EQ(http_head_length(big, HTTP_HEAD_MAX + 10), HTTP_HEAD_MAX);
        memcpy(big + HTTP_HEAD_MAX - 4, "aa\r\n\r\n", 6); /* ends 2 bytes past it */
        ASSERT_ERRNO(http_head_length(big, HTTP_HEAD_MAX + 10), E2BIG);
        ASSERT_ERRNO(http_parse_request_head(big, HTTP_HEAD_MAX + 2, &h), E2BIG);

        /* too many headers */
        many = malloc(HTTP_HEAD_MAX);
        ASSERT_NOT_NULL(many);
        n = (size_t) snprintf(many, HTTP_HEAD_MAX, "GET / HTTP/1.1\r\nHost: h\r\n");
        for (unsigned i = 0; i < HTTP_HEADERS_MAX; i++)
                n += (size_t) snprintf(many + n, HTTP_HEAD_MAX - n, "X-%u: v\r\n", i);
        n += (size_t) snprintf(many + n, HTTP_HEAD_MAX - n, "\r\n");
        ASSERT_ERRNO(http_parse_request_head(many, n, &h), E2BIG);
        /* exactly HTTP_HEADERS_MAX is fine */
        n = (size_t) snprintf(many, HTTP_HEAD_MAX, "GET / HTTP/1.1\r\nHost: h\r\n");
        for (unsigned i = 1; i < HTTP_HEADERS_MAX; i++)
                n += (size_t) snprintf(many + n, HTTP_HEAD_MAX - n, "X-%u: v\r\n", i);
        n += (size_t) snprintf(many + n, HTTP_HEAD_MAX - n, "\r\n");
        ASSERT_OK(http_parse_request_head(many, n, &h));
        ASSERT_EQ(h.n_headers, HTTP_HEADERS_MAX);
        http_head_done(&h);

        /* URL length */
        url = strdup_printf("GET /%0*d HTTP/1.1\r\nHost: h\r\n\r\n", (int) HTTP_URL_MAX, 0);
        ASSERT_NOT_NULL(url);
        ASSERT_ERRNO(parse_req(url, &h), ENAMETOOLONG);
        url_ok = strdup_printf("GET /%0*d HTTP/1.1\r\nHost: h\r\n\r\n", (int) HTTP_URL_MAX - 1, 0);
        ASSERT_NOT_NULL(url_ok);
        ASSERT_OK(parse_req(url_ok, &h));
        ASSERT_EQ(strlen(h.target), HTTP_URL_MAX);
}

TEST(parse_response) {
        _cleanup_(http_head_done) HttpHead h = {};
        const char *s;
        HttpHead bad;

        s = "HTTP/1.1 201 Created\r\nContent-Length: 12\r\nContent-Type: application/json\r\n\r\n";
        ASSERT_OK(http_parse_response_head(s, strlen(s), &h));
        ASSERT_EQ(h.status, 201);
        ASSERT_STREQ(h.reason, "Created");
        ASSERT_EQ(h.content_length, 12);
        ASSERT_TRUE(h.keep_alive);
        http_head_done(&h);

        s = "HTTP/1.0 200\r\nTransfer-Encoding: chunked\r\n\r\n"; /* TE in 1.0 */
        ASSERT_ERRNO(http_parse_response_head(s, strlen(s), &bad), EINVAL);
        s = "HTTP/1.1 204\r\n\r\n";
        ASSERT_OK(http_parse_response_head(s, strlen(s), &h));
        ASSERT_EQ(h.status, 204);
        ASSERT_STREQ(h.reason, "");
        http_head_done(&h);
        s = "HTTP/1.1 500 Internal Server Error\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n";
        ASSERT_OK(http_parse_response_head(s, strlen(s), &h));
        ASSERT_TRUE(h.chunked);
        ASSERT_FALSE(h.keep_alive);

        s = "HTTP/1.1 20 OK\r\n\r\n";
        ASSERT_ERRNO(http_parse_response_head(s, strlen(s), &bad), EINVAL);
        s = "HTTP/1.1 2000 OK\r\n\r\n";
        ASSERT_ERRNO(http_parse_response_head(s, strlen(s), &bad), EINVAL);
        s = "HTTP/1.1 099 OK\r\n\r\n";
        ASSERT_ERRNO(http_parse_response_head(s, strlen(s), &bad), EINVAL);
        s = "HTTP/2 200 OK\r\n\r\n";
        ASSERT_ERRNO(http_parse_response_head(s, strlen(s), &bad), EINVAL);
        s = "HTTP/1.1 200 O\x01K\r\n\r\n";
        ASSERT_ERRNO(http_parse_response_head(s, strlen(s), &bad), EINVAL);
        s = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n";
        ASSERT_ERRNO(http_parse_response_head(s, strlen(s), &bad), EINVAL);
        ASSERT_STREQ(http_status_reason(431), "Request Header Fields Too Large");
        ASSERT_STREQ(http_status_reason(799), "Unknown");
}

/* ---- chunked ---- */

static const char chunked_body[] = "5\r\nhello\r\n"
                                   "1;name=value\r\n \r\n"
                                   "0000000000000B \r\n world, end\r\n"
                                   "0\r\n"
                                   "X-Trailer: yes\r\n"
                                   "\r\n"
                                   "NEXT";
static const char chunked_payload[] = "hello  world, end";

/* Decodes in pieces of at most `step` input and `out_step` output bytes. */
static int decode_steps(const char *in, size_t n, size_t split, size_t step, size_t out_step, char *out,
                        size_t *ret_len, size_t *ret_consumed) {
        HttpChunkDecoder d = {};
        size_t pos = 0, len = 0;
        int r = 0;

        while (pos < n) {
                size_t consumed, produced, limit = pos < split ? split : n;
                size_t feed = MIN(step, limit - pos);
                r = http_chunk_decode(&d, in + pos, feed, out + len, out_step, &consumed, &produced);
                if (r < 0)
                        return r;
                pos += consumed;
                len += produced;
                if (r == 1)
                        break;
                if (consumed == 0 && produced == 0)
                        return -EIO; /* stuck */
        }
        *ret_len = len;
        *ret_consumed = pos;
        return r;
}

TEST(chunk_decode_every_split) {
        size_t n = strlen(chunked_body), end = n - 4;
        char out[64];

        for (size_t split = 0; split <= n; split++) {
                size_t len = 0, consumed = 0;
                ASSERT_EQ(decode_steps(chunked_body, n, split, SIZE_MAX, sizeof out, out, &len, &consumed), 1);
                ASSERT_EQ(len, strlen(chunked_payload));
                ASSERT_TRUE(memcmp(out, chunked_payload, len) == 0);
                ASSERT_EQ(consumed, end); /* "NEXT" (the next request) stays unconsumed */
        }
        for (size_t step = 1; step <= 4; step++)
                for (size_t out_step = 1; out_step <= 3; out_step++) {
                        size_t len = 0, consumed = 0;
                        ASSERT_EQ(decode_steps(chunked_body, n, 0, step, out_step, out, &len, &consumed), 1);
                        ASSERT_EQ(len, strlen(chunked_payload));
                        ASSERT_TRUE(memcmp(out, chunked_payload, len) == 0);
                        ASSERT_EQ(consumed, end);
                }
        /* an incomplete body asks for more */
        {
                HttpChunkDecoder d = {};
                size_t c, p;
                ASSERT_EQ(http_chunk_decode(&d, chunked_body, 12, out, sizeof out, &c, &p), 0);
                ASSERT_EQ(c, 12);
                ASSERT_EQ(p, 5);
                ASSERT_FALSE(d.done);
        }
}

TEST(chunk_decode_invalid) {
        static const char *const bad[] = {
                "fffffffffffffffff\r\n",        /* 17 hex digits: overflow */
                "1000000000000000\r\n",         /* 2^60: over HTTP_CHUNK_SIZE_MAX */
                "\r\n",                          /* no size */
                "-1\r\n",
                "0x5\r\nhello\r\n0\r\n\r\n",
                " 5\r\nhello\r\n0\r\n\r\n",
                "5\nhello\r\n0\r\n\r\n",         /* bare LF */
                "5\r\nhelloX\r\n0\r\n\r\n",      /* missing CRLF after data */
                "5\r\nhello\rX0\r\n\r\n",
                "5\r\nhello\n0\r\n\r\n",
                "5 junk\r\nhello\r\n0\r\n\r\n",
                "5;ext\x01\r\nhello\r\n0\r\n\r\n",
                "5\r\nhello\r\n0\r\nX: y\n\r\n",  /* bare LF in trailer */
                "5\r\nhello\r\n0\r\nX: y\r\n folded\r\n\r\n",
                "5\r\nhello\r\n0\r\n\r\r\n",
        };
        char out[64];

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                size_t len, consumed;
                int r = decode_steps(bad[i], strlen(bad[i]), 0, SIZE_MAX, sizeof out, out, &len, &consumed);
                if (r != -EINVAL)
                        test_fail(__FILE__, __LINE__, "case %zu: got %d", i, r);
        }

        /* a chunk-size line longer than HTTP_CHUNK_LINE_MAX */
        {
                char line[HTTP_CHUNK_LINE_MAX + 8];
                size_t len, consumed;
                memset(line, '0', sizeof line);
                line[0] = '1';
                line[1] = ';';
                ASSERT_ERRNO(decode_steps(line, sizeof line, 0, SIZE_MAX, sizeof out, out, &len, &consumed), EINVAL);
        }
        /* trailers beyond HTTP_TRAILERS_MAX */
        {
                _cleanup_free_ char *t = malloc(2 * HTTP_TRAILERS_MAX);
                size_t len, consumed, n = 0;
                ASSERT_NOT_NULL(t);
                n += (size_t) snprintf(t, 16, "0\r\n");
                while (n < 2 * HTTP_TRAILERS_MAX - 16) {
                        memcpy(t + n, "X: yyyyyyyyyyy\r\n", 16);
                        n += 16;
                }
                ASSERT_ERRNO(decode_steps(t, n, 0, SIZE_MAX, sizeof out, out, &len, &consumed), EINVAL);
        }
        /* largest allowed size parses (15 hex digits) */
        {
                HttpChunkDecoder d = {};
                size_t c, p;
                ASSERT_EQ(http_chunk_decode(&d, "fffffffffffffff\r\nab", 19, out, sizeof out, &c, &p), 0);
                ASSERT_EQ(d.remaining, 0xfffffffffffffffULL - 2);
                ASSERT_EQ(p, 2);
        }
}

/* ---- percent-encoding and queries ---- */

TEST(percent_decode) {
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL, *e = NULL, *back = NULL;
        char *x = NULL;

        ASSERT_OK(http_percent_decode("a%20b%2Fc+d%7e", 14, false, &a));
        ASSERT_STREQ(a, "a b/c+d~");
        ASSERT_OK(http_percent_decode("a+b", 3, true, &b));
        ASSERT_STREQ(b, "a b");
        ASSERT_OK(http_percent_decode("", 0, false, &c));
        ASSERT_STREQ(c, "");
        ASSERT_ERRNO(http_percent_decode("%00", 3, false, &x), EINVAL);
        ASSERT_ERRNO(http_percent_decode("%", 1, false, &x), EINVAL);
        ASSERT_ERRNO(http_percent_decode("%4", 2, false, &x), EINVAL);
        ASSERT_ERRNO(http_percent_decode("%g0", 3, false, &x), EINVAL);
        ASSERT_ERRNO(http_percent_decode("a\0b", 3, false, &x), EINVAL);
        ASSERT_NULL(x);
        /* only the first n bytes count (no NUL needed) */
        ASSERT_OK(http_percent_decode("ab%41zzz", 5, false, &x));
        ASSERT_STREQ(x, "abA");
        free(x);

        e = http_percent_encode("a b/c?d=é&~._-");
        ASSERT_STREQ(e, "a%20b%2Fc%3Fd%3D%C3%A9%26~._-");
        ASSERT_OK(http_percent_decode(e, strlen(e), false, &back));
        ASSERT_STREQ(back, "a b/c?d=é&~._-");
}

TEST(query_get) {
        const char *q = "state=running&limit=10&path=%2Ftmp%2Fa+b&flag&empty=&state=second&bad=%zz";
        char *v = NULL;

        ASSERT_OK(http_query_get(q, "state", &v));
        ASSERT_STREQ(v, "running");
        v = mfree(v);
        ASSERT_OK(http_query_get(q, "path", &v));
        ASSERT_STREQ(v, "/tmp/a b");
        v = mfree(v);
        ASSERT_OK(http_query_get(q, "flag", &v));
        ASSERT_STREQ(v, "");
        v = mfree(v);
        ASSERT_OK(http_query_get(q, "empty", &v));
        ASSERT_STREQ(v, "");
        v = mfree(v);
        ASSERT_ERRNO(http_query_get(q, "missing", &v), ENOENT);
        ASSERT_ERRNO(http_query_get(q, "sta", &v), ENOENT);
        ASSERT_ERRNO(http_query_get(NULL, "state", &v), ENOENT);
        ASSERT_ERRNO(http_query_get(q, "bad", &v), EINVAL);
        ASSERT_ERRNO(http_query_get("a=%00", "a", &v), EINVAL);
        ASSERT_OK(http_query_get("a%5Fb=1", "a_b", &v));
        ASSERT_STREQ(v, "1");
        free(v);
}

/* ---- server and client ---- */

#define UPLOAD_BYTES (64ULL * 1024 * 1024)

static int stream_pipe[2] = { -1, -1 }; /* the test releases the second half of /stream */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
        const unsigned char *b = p;
        for (size_t i = 0; i < n; i++)
                h = (h ^ b[i]) * 0x100000001b3ULL;
        return h;
}

static void fill_pattern(char *buf, size_t n, uint64_t offset) {
        for (size_t i = 0; i < n; i++)
                buf[i] = (char) ((offset + i) * 7 % 251);
}

/* Runs on connection threads: no ASSERTs here, answers tell the test what happened. */
static void test_handler(HttpConn *c, const HttpHead *req, void *userdata) {
        if (streq(req->path, "/echo")) {
                _cleanup_free_ char *body = NULL;
                size_t n;
                int r = http_conn_read_body_all(c, 1024 * 1024, &body, &n);
                if (r == -EFBIG)
                        (void) http_conn_respond(c, 413, "text/plain", "too big", 7, NULL);
                else if (r < 0) {
                        char msg[64];
                        (void) snprintf(msg, sizeof msg, "read error %d", r);
                        (void) http_conn_respond(c, 400, "text/plain", msg, strlen(msg), NULL);
                } else
                        (void) http_conn_respond(c, 200, "application/octet-stream", body, n, "X-Echo: 1\r\n");
        } else if (streq(req->path, "/count")) {
                static __thread char buf[64 * 1024];
                uint64_t total = 0, h = 0xcbf29ce484222325ULL;
                char msg[128];
                ssize_t k;

                while ((k = http_conn_read_body(c, buf, sizeof buf)) > 0) {
                        h = fnv1a(h, buf, (size_t) k);
                        total += (uint64_t) k;
                }
                (void) snprintf(msg, sizeof msg, "%zd %" PRIu64 " %016" PRIx64, k, total, h);
                (void) http_conn_respond(c, k < 0 ? 400 : 200, "text/plain", msg, strlen(msg), NULL);
        } else if (streq(req->path, "/info")) {
                _cleanup_free_ char *i = NULL, *msg = NULL;
                (void) http_query_get(req->query, "i", &i);
                msg = strdup_printf("%s %s %s %s", req->method, req->path, strna(i), http_conn_peer(c));
                (void) http_conn_respond(c, 200, "text/plain", msg, msg ? strlen(msg) : 0, NULL);
        } else if (streq(req->path, "/stream")) {
                struct pollfd p = { .fd = stream_pipe[0], .events = POLLIN };
                char x;
                if (http_conn_stream_begin(c, 200, "application/x-ndjson", NULL) < 0)
                        return;
                (void) http_conn_stream_write(c, "{\"n\":1}\n", 8);
                if (poll(&p, 1, 5000) == 1)
                        (void) !read(stream_pipe[0], &x, 1);
                (void) http_conn_stream_write(c, "", 0);
                (void) http_conn_stream_write(c, "{\"n\":2}\n", 8);
                (void) http_conn_stream_end(c);
        } else if (streq(req->path, "/big")) {
                static __thread char buf[64 * 1024];
                const uint64_t total = 32ULL * 1024 * 1024;
                memset(buf, 'x', sizeof buf);
                if (http_conn_sized_begin(c, 200, "application/octet-stream", total, NULL) < 0)
                        return;
                for (uint64_t done = 0; done < total; done += sizeof buf)
                        if (http_conn_sized_write(c, buf, sizeof buf) < 0)
                                return;
        } else if (streq(req->path, "/ignore"))
                (void) http_conn_respond(c, 204, NULL, NULL, 0, NULL);
        else if (streq(req->path, "/close")) {
                http_conn_set_close(c);
                (void) http_conn_respond(c, 200, "text/plain", "bye", 3, NULL);
        } else if (streq(req->path, "/noreply"))
                return;
        else
                (void) http_conn_respond(c, 404, "application/json", "{}", 2, NULL);
}

typedef struct TestServer {
        HttpServer *server;
        pthread_t thread;
        bool running;
        int port;
} TestServer;

static void *server_thread(void *arg) {
        TestServer *t = arg;
        (void) http_server_run(t->server);
        return NULL;
}

static void test_server_start(TestServer *t, const char *listen, int head_msec, int idle_msec, int body_msec) {
        *t = (TestServer){};
        ASSERT_OK(http_server_new(listen, test_handler, NULL, &t->server));
        http_server_set_timeouts(t->server, head_msec, idle_msec, body_msec);
        t->port = http_server_port(t->server);
        ASSERT_EQ(pthread_create(&t->thread, NULL, server_thread, t), 0);
        t->running = true;
}

static void test_server_stop(TestServer *t) {
        if (t->running) {
                http_server_stop(t->server);
                pthread_join(t->thread, NULL);
                t->running = false;
        }
        t->server = http_server_free(t->server);
}

static HttpClient *test_client(const TestServer *t) {
        char url[64];
        HttpClient *c = NULL;

        (void) snprintf(url, sizeof url, "http://127.0.0.1:%d", t->port);
        ASSERT_OK(http_client_new(url, &c));
        http_client_set_timeout(c, 10000);
        return c;
}

static int raw_connect(int port) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
        struct timeval tv = { .tv_sec = 10 };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return negative_errno();
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                int r = negative_errno();
                safe_close(fd);
                return r;
        }
        return fd;
}

static int raw_send(int fd, const char *s) {
        return send(fd, s, strlen(s), MSG_NOSIGNAL) == (ssize_t) strlen(s) ? 0 : -EIO;
}

/* Reads until EOF (or error/timeout), NUL-terminates; returns bytes read. */
static ssize_t raw_read_all(int fd, char *buf, size_t size) {
        size_t n = 0;
        while (n + 1 < size) {
                ssize_t k = recv(fd, buf + n, size - 1 - n, 0);
                if (k <= 0)
                        break;
                n += (size_t) k;
        }
        buf[n] = 0;
        return (ssize_t) n;
}

/* Reads until `needle` appears (or EOF), NUL-terminates. */
static ssize_t raw_read_until(int fd, char *buf, size_t size, const char *needle) {
        size_t n = 0;
        buf[0] = 0;
        while (n + 1 < size && !strstr(buf, needle)) {
                ssize_t k = recv(fd, buf + n, size - 1 - n, 0);
                if (k <= 0)
                        break;
                n += (size_t) k;
                buf[n] = 0;
        }
        return (ssize_t) n;
}

static int64_t mono_msec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

TEST(server_content_length_echo) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        _cleanup_free_ char *body = NULL;
        const HttpHead *h;
        TestServer t;
        size_t n;

        test_server_start(&t, "127.0.0.1:0", 0, 0, 0);
        ASSERT_TRUE(t.port > 0);
        c = test_client(&t);
        ASSERT_OK(http_client_request(c, "POST", "/echo", "Content-Type: text/plain\r\n", "hello", 5));
        ASSERT_OK(http_client_response(c, &h));
        ASSERT_EQ(h->status, 200);
        ASSERT_STREQ(http_head_header(h, "X-Echo"), "1");
        ASSERT_STREQ(http_head_header(h, "Content-Type"), "application/octet-stream");
        ASSERT_NOT_NULL(http_head_header(h, "Date"));
        ASSERT_EQ(strlen(http_head_header(h, "Date")), 29); /* "Sun, 06 Nov 1994 08:49:37 GMT" */
        ASSERT_TRUE(endswith(http_head_header(h, "Date"), " GMT") != NULL);
        ASSERT_OK(http_client_read_body_all(c, 1024, &body, &n));
        ASSERT_EQ(n, 5);
        ASSERT_STREQ(body, "hello");
        body = mfree(body);

        /* 404 and an empty POST */
        ASSERT_OK(http_client_request(c, "POST", "/echo", NULL, NULL, 0));
        ASSERT_OK(http_client_response(c, &h));
        ASSERT_EQ(h->status, 200);
        ASSERT_OK(http_client_read_body_all(c, 1024, &body, &n));
        ASSERT_EQ(n, 0);
        body = mfree(body);
        ASSERT_OK(http_client_request(c, "GET", "/nope", NULL, NULL, 0));
        ASSERT_OK(http_client_response(c, &h));
        ASSERT_EQ(h->status, 404);
        /* body too big for the handler's limit → 413; then the connection still works */
        {
                _cleanup_free_ char *big = malloc(1024 * 1024 + 1);
                ASSERT_NOT_NULL(big);
                memset(big, 'b', 1024 * 1024 + 1);
                ASSERT_OK(http_client_request(c, "POST", "/echo", NULL, big, 1024 * 1024 + 1));
                ASSERT_OK(http_client_response(c, &h));
                ASSERT_EQ(h->status, 413);
        }
        ASSERT_OK(http_client_request(c, "HEAD", "/echo", NULL, NULL, 0));
        ASSERT_OK(http_client_response(c, &h));
        ASSERT_EQ(h->status, 200);
        ASSERT_EQ(h->content_length, 0);
        ASSERT_OK(http_client_read_body_all(c, 1024, &body, &n));
        ASSERT_EQ(n, 0);
        test_server_stop(&t);
}

TEST(server_chunked_echo) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        _cleanup_free_ char *body = NULL;
        const HttpHead *h;
        TestServer t;
        size_t n;

        test_server_start(&t, "127.0.0.1:0", 0, 0, 0);
        c = test_client(&t);
        ASSERT_OK(http_client_request(c, "POST", "/echo", NULL, NULL, SIZE_MAX));
        ASSERT_OK(http_client_write_body(c, "hel", 3));
        ASSERT_OK(http_client_write_body(c, "", 0)); /* no-op, not the end */
        ASSERT_OK(http_client_write_body(c, "lo, chunks", 10));
        ASSERT_OK(http_client_end_body(c));
        ASSERT_OK(http_client_response(c, &h));
        ASSERT_EQ(h->status, 200);
        ASSERT_OK(http_client_read_body_all(c, 1024, &body, &n));
        ASSERT_STREQ(body, "hello, chunks");
        body = mfree(body);

        /* raw: chunk extensions, trailers, pipelined second request in the same segment */
        {
                char buf[4096];
                int fd = raw_connect(t.port);
                ASSERT_OK(fd);
                ASSERT_OK(raw_send(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                                       "3;a=b\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: 1\r\n\r\n"
                                       "GET /info?i=2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
                raw_read_all(fd, buf, sizeof buf);
                safe_close(fd);
                ASSERT_TRUE(strstr(buf, "HTTP/1.1 200 OK\r\n") == buf);
                ASSERT_NOT_NULL(strstr(buf, "\r\n\r\nabcdeHTTP/1.1 200 OK\r\n"));
                ASSERT_NOT_NULL(strstr(buf, "GET /info 2 127.0.0.1:"));
        }
        /* raw: bad chunking → the handler sees -EINVAL */
        {
                char buf[4096];
                int fd = raw_connect(t.port);
                ASSERT_OK(fd);
                ASSERT_OK(raw_send(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                                       "zz\r\nabc\r\n0\r\n\r\n"));
                raw_read_all(fd, buf, sizeof buf);
                safe_close(fd);
                ASSERT_TRUE(strstr(buf, "HTTP/1.1 400 ") == buf);
                ASSERT_NOT_NULL(strstr(buf, "read error -22"));
        }
        test_server_stop(&t);
}

TEST(server_expect_continue) {
        char buf[4096];
        TestServer t;
        int fd;

        test_server_start(&t, "127.0.0.1:0", 0, 0, 0);
        fd = raw_connect(t.port);
        ASSERT_OK(fd);
        ASSERT_OK(raw_send(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
        /* the body is sent only after the interim answer */
        raw_read_until(fd, buf, sizeof buf, "\r\n\r\n");
        ASSERT_STREQ(buf, "HTTP/1.1 100 Continue\r\n\r\n");
        ASSERT_OK(raw_send(fd, "hello"));
        raw_read_until(fd, buf, sizeof buf, "hello");
        ASSERT_TRUE(strstr(buf, "HTTP/1.1 200 OK\r\n") == buf);

        /* a handler that answers without reading: no 100, and the connection closes */
        ASSERT_OK(raw_send(fd, "POST /ignore HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
        raw_read_all(fd, buf, sizeof buf);
        ASSERT_TRUE(strstr(buf, "HTTP/1.1 204 No Content\r\n") == buf);
        ASSERT_NOT_NULL(strstr(buf, "Connection: close\r\n"));
        safe_close(fd);

        /* the client skips the interim answer */
        {
                _cleanup_(http_client_freep) HttpClient *c = test_client(&t);
                _cleanup_free_ char *body = NULL;
                const HttpHead *h;
                ASSERT_OK(http_client_request(c, "PUT", "/echo", "Expect: 100-continue\r\n", "abc", 3));
                ASSERT_OK(http_client_response(c, &h));
                ASSERT_EQ(h->status, 200);
                ASSERT_OK(http_client_read_body_all(c, 1024, &body, NULL));
                ASSERT_STREQ(body, "abc");
        }
        test_server_stop(&t);
}

TEST(server_keep_alive_100_requests) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        _cleanup_free_ char *first_peer = NULL;
        TestServer t;

        test_server_start(&t, "127.0.0.1:0", 0, 0, 0);
        c = test_client(&t);
        for (int i = 0; i < 100; i++) {
                _cleanup_free_ char *body = NULL, *expect = NULL;
                const HttpHead *h;
                char target[64];
                const char *peer;

                (void) snprintf(target, sizeof target, "/info?i=%d", i);
                ASSERT_OK(http_client_request(c, "GET", target, NULL, NULL, 0));
                ASSERT_OK(http_client_response(c, &h));
                ASSERT_EQ(h->status, 200);
                ASSERT_TRUE(h->keep_alive);
                ASSERT_OK(http_client_read_body_all(c, 1024, &body, NULL));
                expect = strdup_printf("GET /info %d ", i);
                ASSERT_TRUE(startswith(body, expect) != NULL);
                peer = body + strlen(expect);
                if (!first_peer)
                        first_peer = strdup(peer);
                ASSERT_STREQ(peer, first_peer); /* same connection every time */
        }
        /* unread request body (under 1 MiB) is drained and the connection kept */
        {
                _cleanup_free_ char *body = NULL, *big = malloc(200 * 1024);
                const HttpHead *h;
                ASSERT_NOT_NULL(big);
                memset(big, 'z', 200 * 1024);
                ASSERT_OK(http_client_request(c, "POST", "/ignore", NULL, big, 200 * 1024));
                ASSERT_OK(http_client_response(c, &h));
                ASSERT_EQ(h->status, 204);
                ASSERT_TRUE(h->keep_alive);
                ASSERT_OK(http_client_request(c, "GET", "/info?i=x", NULL, NULL, 0));
                ASSERT_OK(http_client_response(c, &h));
                ASSERT_OK(http_client_read_body_all(c, 1024, &body, NULL));
                ASSERT_TRUE(endswith(body, first_peer) != NULL);
        }
        /* a handler that does not answer → 500 with a JSON error */
        {
                _cleanup_free_ char *body = NULL;
                const HttpHead *h;
                ASSERT_OK(http_client_request(c, "GET", "/noreply", NULL, NULL, 0));
                ASSERT_OK(http_client_response(c, &h));
                ASSERT_EQ(h->status, 500);
                ASSERT_OK(http_client_read_body_all(c, 1024, &body, NULL));
                ASSERT_STREQ(body, "{\"error\":{\"code\":\"internal\",\"message\":\"no response\"}}");
        }
        /* set_close → Connection: close, then a new connection */
        {
                const HttpHead *h;
                ASSERT_OK(http_client_request(c, "GET", "/close", NULL, NULL, 0));
                ASSERT_OK(http_client_response(c, &h));
                ASSERT_FALSE(h->keep_alive);
        }
        test_server_stop(&t);
}

TEST(server_streaming_response) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        const HttpHead *h;
        TestServer t;
        char buf[64];
        ssize_t k;

        ASSERT_OK(pipe2(stream_pipe, O_CLOEXEC));
        test_server_start(&t, "127.0.0.1:0", 0, 0, 0);
        c = test_client(&t);
        ASSERT_OK(http_client_request(c, "GET", "/stream", NULL, NULL, 0));
        ASSERT_OK(http_client_response(c, &h));
        ASSERT_EQ(h->status, 200);
        ASSERT_TRUE(h->chunked);
        ASSERT_STREQ(http_head_header(h, "Content-Type"), "application/x-ndjson");
        /* the first line arrives while the handler still waits for us */
        k = http_client_read_body(c, buf, sizeof buf);
        ASSERT_EQ(k, 8);
        ASSERT_TRUE(memcmp(buf, "{\"n\":1}\n", 8) == 0);
        ASSERT_EQ(write(stream_pipe[1], "x", 1), 1);
        k = http_client_read_body(c, buf, sizeof buf);
        ASSERT_EQ(k, 8);
        ASSERT_TRUE(memcmp(buf, "{\"n\":2}\n", 8) == 0);
        ASSERT_EQ(http_client_read_body(c, buf, sizeof buf), 0);

        /* HTTP/1.0 gets the stream delimited by close */
        {
                char raw[1024];
                int fd = raw_connect(t.port);
                ASSERT_OK(fd);
                ASSERT_OK(raw_send(fd, "GET /stream HTTP/1.0\r\n\r\n"));
                ASSERT_EQ(write(stream_pipe[1], "x", 1), 1);
                raw_read_all(fd, raw, sizeof raw);
                safe_close(fd);
                ASSERT_NULL(strstr(raw, "Transfer-Encoding"));
                ASSERT_NOT_NULL(strstr(raw, "Connection: close\r\n"));
                ASSERT_TRUE(endswith(raw, "\r\n\r\n{\"n\":1}\n{\"n\":2}\n") != NULL);
        }
        test_server_stop(&t);
        stream_pipe[0] = safe_close(stream_pipe[0]);
        stream_pipe[1] = safe_close(stream_pipe[1]);
}

TEST(server_upload_64mib_streamed) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        _cleanup_free_ char *body = NULL;
        static char piece[64 * 1024];
        uint64_t h = 0xcbf29ce484222325ULL;
        const HttpHead *head;
        char expect[128];
        TestServer t;

        test_server_start(&t, "127.0.0.1:0", 0, 0, 0);
        c = test_client(&t);
        ASSERT_OK(http_client_request(c, "POST", "/count", "Content-Type: application/octet-stream\r\n", NULL, SIZE_MAX));
        for (uint64_t off = 0; off < UPLOAD_BYTES; off += sizeof piece) {
                fill_pattern(piece, sizeof piece, off);
                h = fnv1a(h, piece, sizeof piece);
                /* uneven pieces exercise chunk boundaries inside reads */
                ASSERT_OK(http_client_write_body(c, piece, 1000));
                ASSERT_OK(http_client_write_body(c, piece + 1000, sizeof piece - 1000));
        }
        ASSERT_OK(http_client_end_body(c));
        ASSERT_OK(http_client_response(c, &head));
        ASSERT_EQ(head->status, 200);
        ASSERT_OK(http_client_read_body_all(c, 1024, &body, NULL));
        (void) snprintf(expect, sizeof expect, "0 %llu %016" PRIx64, UPLOAD_BYTES, h);
        ASSERT_STREQ(body, expect);
        test_server_stop(&t);
}

TEST(server_bad_heads) {
        static const struct {
                const char *req;
                const char *status_line;
        } cases[] = {
                { "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", "HTTP/1.1 400 " },
                { "GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n folded\r\n\r\n", "HTTP/1.1 400 " },
                { "GET /a%00 HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 400 " },
                { "BREW / HTTP/3.0\r\nHost: x\r\n\r\n", "HTTP/1.1 400 " },
                { "GET / HTTP/1.1\nHost: x\n\n\r\n\r\n", "HTTP/1.1 400 " },
        };
        char buf[64 * 1024];
        TestServer t;

        test_server_start(&t, "127.0.0.1:0", 0, 0, 0);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                int fd = raw_connect(t.port);
                ASSERT_OK(fd);
                ASSERT_OK(raw_send(fd, cases[i].req));
                raw_read_all(fd, buf, sizeof buf); /* the server closes after answering */
                safe_close(fd);
                if (!startswith(buf, cases[i].status_line))
                        test_fail(__FILE__, __LINE__, "case %zu: %s", i, buf);
                ASSERT_NOT_NULL(strstr(buf, "Connection: close\r\n"));
                ASSERT_TRUE(endswith(buf, "\r\n\r\n{\"error\":{\"code\":\"bad_request\",\"message\":\"malformed request head\"}}") != NULL);
        }

        /* head over HTTP_HEAD_MAX → 431, even while the client keeps sending */
        {
                _cleanup_free_ char *big = malloc(40 * 1024);
                int fd = raw_connect(t.port);
                ASSERT_NOT_NULL(big);
                ASSERT_OK(fd);
                memset(big, 'a', 40 * 1024);
                memcpy(big, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: ", 32);
                ASSERT_EQ(send(fd, big, 40 * 1024, MSG_NOSIGNAL), 40 * 1024);
                raw_read_all(fd, buf, sizeof buf);
                safe_close(fd);
                ASSERT_TRUE(startswith(buf, "HTTP/1.1 431 Request Header Fields Too Large\r\n") != NULL);
                ASSERT_NOT_NULL(strstr(buf, "{\"error\":{\"code\":\"headers_too_large\""));
        }
        /* URL over HTTP_URL_MAX → 414 */
        {
                _cleanup_free_ char *req = strdup_printf("GET /%0*d HTTP/1.1\r\nHost: x\r\n\r\n", (int) HTTP_URL_MAX, 0);
                int fd = raw_connect(t.port);
                ASSERT_OK(fd);
                ASSERT_OK(raw_send(fd, req));
                raw_read_all(fd, buf, sizeof buf);
                safe_close(fd);
                ASSERT_TRUE(startswith(buf, "HTTP/1.1 414 ") != NULL);
                ASSERT_NOT_NULL(strstr(buf, "{\"error\":{\"code\":\"uri_too_long\""));
        }
        /* HTTP/1.0 with keep-alive: said so in the answer, and the connection stays */
        {
                int fd = raw_connect(t.port);
                ASSERT_OK(fd);
                ASSERT_OK(raw_send(fd, "GET /info?i=1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
                raw_read_until(fd, buf, sizeof buf, "GET /info 1 ");
                ASSERT_TRUE(startswith(buf, "HTTP/1.1 200 OK\r\n") != NULL);
                ASSERT_NOT_NULL(strstr(buf, "\r\nConnection: keep-alive\r\n"));
                ASSERT_OK(raw_send(fd, "GET /info?i=2 HTTP/1.0\r\n\r\n"));
                raw_read_all(fd, buf, sizeof buf);
                safe_close(fd);
                ASSERT_TRUE(startswith(buf, "HTTP/1.1 200 OK\r\n") != NULL);
                ASSERT_NOT_NULL(strstr(buf, "\r\nConnection: close\r\n"));
                ASSERT_NOT_NULL(strstr(buf, "GET /info 2 "));
        }
        /* leading empty lines are ignored (RFC 9112 2.2) */
        {
                int fd = raw_connect(t.port);
                ASSERT_OK(fd);
                ASSERT_OK(raw_send(fd, "\r\n\r\nGET /info?i=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
                raw_read_all(fd, buf, sizeof buf);
                safe_close(fd);
                ASSERT_TRUE(startswith(buf, "HTTP/1.1 200 OK\r\n") != NULL);
        }
        test_server_stop(&t);
}

TEST(server_slowloris) {
        char buf[1024];
        TestServer t;
        int64_t start, took;
        int fd;

        /* head 300 ms, keep-alive idle 400 ms, body idle 300 ms */
        test_server_start(&t, "127.0.0.1:0", 300, 400, 300);

        /* half a head, then silence: closed after the head timeout, keeping it alive byte by byte does not help */
        fd = raw_connect(t.port);
        ASSERT_OK(fd);
        start = mono_msec();
        ASSERT_OK(raw_send(fd, "GET / HTTP/1.1\r\nHo"));
        for (int i = 0; i < 3; i++) {
                usleep(100 * 1000);
                (void) send(fd, "s", 1, MSG_NOSIGNAL);
        }
        ASSERT_EQ(raw_read_all(fd, buf, sizeof buf), 0);
        took = mono_msec() - start;
        safe_close(fd);
        ASSERT_TRUE(took >= 250 && took < 5000);

        /* a connection that sends nothing at all */
        fd = raw_connect(t.port);
        ASSERT_OK(fd);
        start = mono_msec();
        ASSERT_EQ(raw_read_all(fd, buf, sizeof buf), 0);
        took = mono_msec() - start;
        safe_close(fd);
        ASSERT_TRUE(took >= 250 && took < 5000);

        /* a body that stalls: the handler's read times out */
        fd = raw_connect(t.port);
        ASSERT_OK(fd);
        start = mono_msec();
        ASSERT_OK(raw_send(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab"));
        raw_read_all(fd, buf, sizeof buf);
        took = mono_msec() - start;
        safe_close(fd);
        ASSERT_TRUE(startswith(buf, "HTTP/1.1 400 ") != NULL);
        ASSERT_NOT_NULL(strstr(buf, "read error -110")); /* -ETIMEDOUT */
        ASSERT_TRUE(took >= 250 && took < 5000);

        test_server_stop(&t);
}

static char *info_peer(HttpClient *c, int i) {
        _cleanup_free_ char *body = NULL;
        const HttpHead *h;
        char target[32];
        const char *p;

        (void) snprintf(target, sizeof target, "/info?i=%d", i);
        if (http_client_request(c, "GET", target, NULL, NULL, 0) < 0 || http_client_response(c, &h) < 0 ||
            h->status != 200 || http_client_read_body_all(c, 1024, &body, NULL) < 0)
                return NULL;
        p = strrchr(body, ' ');
        return p ? strdup(p + 1) : NULL;
}

TEST(client_reconnects_after_idle_close) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        _cleanup_free_ char *p1 = NULL, *p2 = NULL, *p3 = NULL, *body = NULL;
        const HttpHead *h;
        TestServer t;

        /* the server drops idle keep-alive connections after 100 ms */
        test_server_start(&t, "127.0.0.1:0", 0, 100, 0);
        c = test_client(&t);
        p1 = info_peer(c, 1);
        ASSERT_NOT_NULL(p1);
        usleep(300 * 1000);
        ASSERT_OK(http_client_request(c, "POST", "/echo", NULL, "again", 5));
        ASSERT_OK(http_client_response(c, &h));
        ASSERT_EQ(h->status, 200);
        ASSERT_OK(http_client_read_body_all(c, 1024, &body, NULL));
        ASSERT_STREQ(body, "again");
        p2 = info_peer(c, 2);
        p3 = info_peer(c, 3);
        ASSERT_NOT_NULL(p2);
        ASSERT_NOT_NULL(p3);
        ASSERT_TRUE(!streq(p1, p2)); /* a new connection ... */
        ASSERT_STREQ(p2, p3);        /* ... kept alive again */
        test_server_stop(&t);
}

typedef struct FakePeer {
        int lfd;
        int fd;
        char received[4096];
} FakePeer;

/* Accepts one connection, reads a request with a 4-byte body, answers 201. */
static void *fake_peer_thread(void *arg) {
        FakePeer *f = arg;
        f->fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (f->fd < 0)
                return NULL;
        raw_read_until(f->fd, f->received, sizeof f->received, "data");
        (void) raw_send(f->fd, "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n");
        return NULL;
}

TEST(client_resends_idempotent_on_stale_connection) {
        struct sockaddr_in sa = { .sin_family = AF_INET };
        socklen_t salen = sizeof sa;
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        _cleanup_free_ char *body = NULL;
        FakePeer f = { .fd = -1 };
        const HttpHead *h;
        char url[64], buf[4096];
        pthread_t th;
        int fd;

        f.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ASSERT_OK(f.lfd);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ASSERT_OK(bind(f.lfd, (struct sockaddr *) &sa, sizeof sa));
        ASSERT_OK(listen(f.lfd, 8));
        ASSERT_OK(getsockname(f.lfd, (struct sockaddr *) &sa, &salen));
        (void) snprintf(url, sizeof url, "http://127.0.0.1:%u", ntohs(sa.sin_port));
        ASSERT_OK(http_client_new(url, &c));
        http_client_set_timeout(c, 5000);

        ASSERT_OK(http_client_request(c, "GET", "/1", NULL, NULL, 0));
        fd = accept4(f.lfd, NULL, NULL, SOCK_CLOEXEC);
        ASSERT_OK(fd);
        raw_read_until(fd, buf, sizeof buf, "\r\n\r\n");
        ASSERT_OK(raw_send(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
        ASSERT_OK(http_client_response(c, &h));
        ASSERT_OK(http_client_read_body_all(c, 1024, &body, NULL));

        /* the server reads the next request and closes without a byte of answer
         * (it timed out the idle connection just as the request arrived) */
        ASSERT_OK(http_client_request(c, "PUT", "/2", NULL, "data", 4));
        raw_read_until(fd, buf, sizeof buf, "data");
        ASSERT_TRUE(startswith(buf, "PUT /2 HTTP/1.1\r\n") != NULL);
        safe_close(fd);
        /* the client resends it on a new connection */
        ASSERT_EQ(pthread_create(&th, NULL, fake_peer_thread, &f), 0);
        ASSERT_OK(http_client_response(c, &h));
        ASSERT_EQ(h->status, 201);
        pthread_join(th, NULL);
        ASSERT_TRUE(startswith(f.received, "PUT /2 HTTP/1.1\r\n") != NULL);
        ASSERT_NOT_NULL(strstr(f.received, "\r\n\r\ndata"));

        /* a POST is not repeated: the error is the caller's to handle */
        ASSERT_OK(http_client_request(c, "POST", "/3", NULL, "data", 4));
        raw_read_until(f.fd, buf, sizeof buf, "data");
        f.fd = safe_close(f.fd);
        ASSERT_ERRNO(http_client_response(c, &h), ECONNRESET);
        safe_close(f.lfd);
}

TEST(server_connection_limit) {
        const unsigned n = HTTP_CONNECTIONS_MAX + 76;
        _cleanup_free_ int *fds = NULL;
        struct rlimit rl;
        unsigned refused = 0, opened = 0;
        TestServer t;
        int64_t deadline;

        /* both ends live in this process: needs ~2 fds per connection */
        ASSERT_OK(getrlimit(RLIMIT_NOFILE, &rl));
        if (rl.rlim_cur < 2 * n + 64) {
                struct rlimit want = rl;
                want.rlim_cur = MIN(rl.rlim_max, (rlim_t) (2 * n + 256));
                if (want.rlim_cur < 2 * n + 64 || setrlimit(RLIMIT_NOFILE, &want) < 0)
                        test_skip("RLIMIT_NOFILE too low for 1100 connections");
        }

        fds = new(int, n);
        ASSERT_NOT_NULL(fds);
        /* a head timeout far beyond the test: slow thread creation (sanitizers, a loaded
         * machine) must not let accepted connections time out and free slots */
        test_server_start(&t, "127.0.0.1:0", 300000, 0, 0);
        for (unsigned i = 0; i < n; i++) {
                fds[i] = raw_connect(t.port);
                if (fds[i] < 0)
                        break;
                opened++;
        }
        ASSERT_EQ(opened, n);

        /* Full: each newcomer evicts the connection that has waited longest for a
         * head, so the oldest n - MAX are closed without an answer (a slowloris crowd
         * cannot lock new clients out), and the newest MAX stay open. */
        deadline = mono_msec() + 100000;
        while (refused < n - HTTP_CONNECTIONS_MAX && mono_msec() < deadline) {
                refused = 0;
                for (unsigned i = 0; i < n; i++) {
                        struct pollfd p = { .fd = fds[i], .events = POLLIN };
                        if (poll(&p, 1, 0) == 1)
                                refused++;
                }
                if (refused < n - HTTP_CONNECTIONS_MAX)
                        usleep(50 * 1000);
        }
        ASSERT_EQ(refused, n - HTTP_CONNECTIONS_MAX);
        refused = 0;
        for (unsigned i = 0; i < n; i++) {
                struct pollfd p = { .fd = fds[i], .events = POLLIN };
                char buf[512];
                if (poll(&p, 1, 0) != 1)
                        continue;
                raw_read_all(fds[i], buf, sizeof buf);
                if (buf[0] == 0)
                        refused++;
                fds[i] = safe_close(fds[i]);
        }
        ASSERT_EQ(refused, n - HTTP_CONNECTIONS_MAX);

        /* an accepted one is served */
        for (unsigned i = 0; i < n; i++)
                if (fds[i] >= 0) {
                        char buf[512];
                        ASSERT_OK(raw_send(fds[i], "GET /info?i=7 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
                        raw_read_all(fds[i], buf, sizeof buf);
                        ASSERT_TRUE(startswith(buf, "HTTP/1.1 200 OK\r\n") != NULL);
                        break;
                }
        for (unsigned i = 0; i < n; i++)
                fds[i] = safe_close(fds[i]);
        test_server_stop(&t);
        (void) setrlimit(RLIMIT_NOFILE, &rl);
}

/* A keep-alive request on fd from a source address of our choosing, answered; the connection then idles. */
static int raw_connect_from(int port, const char *src) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
        struct sockaddr_in from = { .sin_family = AF_INET };
        struct timeval tv = { .tv_sec = 10 };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return negative_errno();
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        (void) inet_pton(AF_INET, src, &from.sin_addr);
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (bind(fd, (struct sockaddr *) &from, sizeof from) < 0 || connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                int r = negative_errno();
                safe_close(fd);
                return r;
        }
        return fd;
}

static void idle_after_one_request(int fd) {
        char buf[512] = "";
        ssize_t k;

        ASSERT_OK(raw_send(fd, "GET /info?i=1 HTTP/1.1\r\nHost: x\r\n\r\n"));
        k = recv(fd, buf, sizeof buf - 1, 0);
        ASSERT_TRUE(k > 0);
        ASSERT_TRUE(startswith(buf, "HTTP/1.1 200 OK\r\n") != NULL);
        usleep(30 * 1000); /* back to waiting for the next head */
}

static bool peer_closed(int fd) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        char b;
        return poll(&p, 1, 0) == 1 && recv(fd, &b, 1, MSG_DONTWAIT) <= 0;
}

TEST(server_peer_waiting_cap) {
        int fds[12], other;
        TestServer t;
        int64_t deadline;

        test_server_start(&t, "127.0.0.1:0", 300000, 300000, 0);
        http_server_set_peer_waiting_max(t.server, 8); /* read by the accept loop: before anyone connects */
        for (unsigned i = 0; i < 8; i++) {
                fds[i] = raw_connect_from(t.port, "127.0.0.1");
                ASSERT_OK(fds[i]);
                idle_after_one_request(fds[i]);
        }
        /* another address is not held to this one's count */
        other = raw_connect_from(t.port, "127.0.0.2");
        ASSERT_OK(other);
        idle_after_one_request(other);
        for (unsigned i = 0; i < 8; i++)
                ASSERT_FALSE(peer_closed(fds[i]));
        /* four more from the first address: its four oldest idle ones go */
        for (unsigned i = 8; i < 12; i++) {
                fds[i] = raw_connect_from(t.port, "127.0.0.1");
                ASSERT_OK(fds[i]);
                idle_after_one_request(fds[i]);
        }
        deadline = mono_msec() + 10000;
        for (unsigned i = 0; i < 4; i++)
                while (!peer_closed(fds[i])) {
                        ASSERT_TRUE(mono_msec() < deadline);
                        usleep(10 * 1000);
                }
        for (unsigned i = 4; i < 12; i++)
                ASSERT_FALSE(peer_closed(fds[i]));
        ASSERT_FALSE(peer_closed(other));
        for (unsigned i = 0; i < 12; i++)
                safe_close(fds[i]);
        safe_close(other);
        test_server_stop(&t);
}

TEST(server_stop_with_open_connections) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        _cleanup_free_ char *body = NULL;
        const HttpHead *h;
        TestServer t;
        char buf[16];
        int64_t start;
        int fd, raw;

        test_server_start(&t, "127.0.0.1:0", 0, 0, 0);
        c = test_client(&t);
        ASSERT_OK(http_client_request(c, "GET", "/info?i=1", NULL, NULL, 0));
        ASSERT_OK(http_client_response(c, &h));
        ASSERT_OK(http_client_read_body_all(c, 1024, &body, NULL));
        fd = http_client_fd(c);
        ASSERT_OK(fd);
        raw = raw_connect(t.port); /* one more that sent nothing yet */
        ASSERT_OK(raw);
        usleep(50 * 1000);

        start = mono_msec();
        http_server_stop(t.server);
        pthread_join(t.thread, NULL);
        t.running = false;
        t.server = http_server_free(t.server); /* waits for the connection threads */
        ASSERT_TRUE(mono_msec() - start < 5000); /* not the 10 s head timeout or 60 s idle */

        /* both connections were closed by the server */
        ASSERT_EQ(recv(fd, buf, sizeof buf, 0), 0);
        ASSERT_EQ(raw_read_all(raw, buf, sizeof buf), 0);
        safe_close(raw);
        /* and the port no longer listens */
        ASSERT_ERRNO(raw_connect(t.port), ECONNREFUSED);
}

TEST(server_client_gone_no_sigpipe) {
        struct sigaction sa = { .sa_handler = SIG_DFL }, old;
        TestServer t;
        char buf[256];
        int fd;

        /* default SIGPIPE disposition: a plain write() to a closed socket would kill us */
        ASSERT_OK(sigaction(SIGPIPE, &sa, &old));
        test_server_start(&t, "127.0.0.1:0", 0, 0, 0);
        for (int i = 0; i < 3; i++) {
                fd = raw_connect(t.port);
                ASSERT_OK(fd);
                ASSERT_OK(raw_send(fd, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"));
                ASSERT_TRUE(recv(fd, buf, sizeof buf, 0) > 0);
                safe_close(fd); /* with 32 MiB still to come */
        }
        usleep(200 * 1000);
        /* still alive and serving */
        {
                _cleanup_(http_client_freep) HttpClient *c = test_client(&t);
                const HttpHead *h;
                ASSERT_OK(http_client_request(c, "GET", "/info", NULL, NULL, 0));
                ASSERT_OK(http_client_response(c, &h));
                ASSERT_EQ(h->status, 200);
        }
        test_server_stop(&t);
        ASSERT_OK(sigaction(SIGPIPE, &old, NULL));
}

TEST(server_unix_socket) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        _cleanup_free_ char *path = NULL, *url = NULL, *body = NULL;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        const HttpHead *h;
        struct stat st;
        TestServer t;
        int fd;

        path = strjoin(test_tmpdir(), "/api.sock");
        url = strjoin("unix:", path);
        ASSERT_NOT_NULL(url);

        /* a stale socket file (bound, never unlinked) is replaced */
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ASSERT_OK(fd);
        memcpy(sa.sun_path, path, strlen(path) + 1);
        ASSERT_OK(bind(fd, (struct sockaddr *) &sa, sizeof sa));
        safe_close(fd);
        ASSERT_OK(stat(path, &st));

        test_server_start(&t, url, 0, 0, 0);
        ASSERT_EQ(http_server_port(t.server), 0);
        /* a live socket is not stolen */
        {
                HttpServer *other = NULL;
                ASSERT_ERRNO(http_server_new(url, test_handler, NULL, &other), EADDRINUSE);
        }
        ASSERT_OK(http_client_new(url, &c));
        ASSERT_OK(http_client_request(c, "POST", "/echo", NULL, "via unix", 8));
        ASSERT_OK(http_client_response(c, &h));
        ASSERT_EQ(h->status, 200);
        ASSERT_OK(http_client_read_body_all(c, 1024, &body, NULL));
        ASSERT_STREQ(body, "via unix");
        c = http_client_free(c);
        test_server_stop(&t);
        ASSERT_ERRNO(RET_NERRNO(stat(path, &st)), ENOENT); /* removed on stop */

        /* a regular file in the way is not removed */
        fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        ASSERT_OK(fd);
        safe_close(fd);
        {
                HttpServer *other = NULL;
                ASSERT_ERRNO(http_server_new(url, test_handler, NULL, &other), EEXIST);
        }
}

TEST(server_listen_addresses) {
        HttpServer *s = NULL;

        ASSERT_OK(http_server_new("[::1]:0", test_handler, NULL, &s));
        ASSERT_TRUE(http_server_port(s) > 0);
        s = http_server_free(s);
        ASSERT_ERRNO(http_server_new("127.0.0.1", test_handler, NULL, &s), EINVAL);
        ASSERT_ERRNO(http_server_new("127.0.0.1:99999", test_handler, NULL, &s), EINVAL);
        ASSERT_ERRNO(http_server_new("127.0.0.1:x", test_handler, NULL, &s), EINVAL);
        ASSERT_ERRNO(http_server_new("::1:80", test_handler, NULL, &s), EINVAL);
        ASSERT_ERRNO(http_server_new("[::1:80", test_handler, NULL, &s), EINVAL);
        ASSERT_ERRNO(http_server_new("unix:relative", test_handler, NULL, &s), EINVAL);
}

TEST(client_urls_and_arguments) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        HttpClient *x = NULL;

        ASSERT_OK(http_client_new("http://127.0.0.1:7070", &c));
        c = http_client_free(c);
        ASSERT_OK(http_client_new("http://[::1]:7070/", &c));
        c = http_client_free(c);
        ASSERT_OK(http_client_new("http://localhost", &c));
        ASSERT_ERRNO(http_client_new("https://example.com", &x), EPROTONOSUPPORT);
        ASSERT_ERRNO(http_client_new("ftp://x", &x), EINVAL);
        ASSERT_ERRNO(http_client_new("http://", &x), EINVAL);
        ASSERT_ERRNO(http_client_new("http://h:0", &x), EINVAL);
        ASSERT_ERRNO(http_client_new("http://h:70000", &x), EINVAL);
        ASSERT_ERRNO(http_client_new("http://h/path", &x), EINVAL);
        ASSERT_ERRNO(http_client_new("http://u@h", &x), EINVAL);
        ASSERT_ERRNO(http_client_new("unix:rel", &x), EINVAL);

        /* header injection and bad request lines are refused before connecting */
        ASSERT_ERRNO(http_client_request(c, "GET", "/a b", NULL, NULL, 0), EINVAL);
        ASSERT_ERRNO(http_client_request(c, "GET", "/a\r\nX: y", NULL, NULL, 0), EINVAL);
        ASSERT_ERRNO(http_client_request(c, "GET", "a", NULL, NULL, 0), EINVAL);
        ASSERT_ERRNO(http_client_request(c, "G T", "/", NULL, NULL, 0), EINVAL);
        ASSERT_ERRNO(http_client_request(c, "GET", "/", "X: y", NULL, 0), EINVAL);
        ASSERT_ERRNO(http_client_request(c, "GET", "/", "X: y\r\n\r\nGET / HTTP/1.1\r\n", NULL, 0), EINVAL);
        ASSERT_ERRNO(http_client_request(c, "GET", "/", "X: y\nZ: w\r\n", NULL, 0), EINVAL);
        ASSERT_ERRNO(http_client_request(c, "POST", "/", NULL, NULL, 5), EINVAL);
        ASSERT_ERRNO(http_client_write_body(c, "x", 1), EINVAL);
}

TEST(client_timeout_and_bad_responses) {
        struct sockaddr_in sa = { .sin_family = AF_INET };
        socklen_t salen = sizeof sa;
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        const HttpHead *h;
        char url[64], buf[4096];
        int lfd, fd;
        int64_t start;

        /* a fake server we drive by hand */
        lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ASSERT_OK(lfd);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ASSERT_OK(bind(lfd, (struct sockaddr *) &sa, sizeof sa));
        ASSERT_OK(listen(lfd, 8));
        ASSERT_OK(getsockname(lfd, (struct sockaddr *) &sa, &salen));
        (void) snprintf(url, sizeof url, "http://127.0.0.1:%u", ntohs(sa.sin_port));
        ASSERT_OK(http_client_new(url, &c));
        http_client_set_timeout(c, 200);

        /* no answer → -ETIMEDOUT after the timeout */
        ASSERT_OK(http_client_request(c, "GET", "/", NULL, NULL, 0));
        fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        ASSERT_OK(fd);
        start = mono_msec();
        ASSERT_ERRNO(http_client_response(c, &h), ETIMEDOUT);
        ASSERT_TRUE(mono_msec() - start >= 150);
        safe_close(fd);

        /* response smuggling attempt → -EINVAL */
        ASSERT_OK(http_client_request(c, "GET", "/", NULL, NULL, 0));
        fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        ASSERT_OK(fd);
        raw_read_until(fd, buf, sizeof buf, "\r\n\r\n");
        ASSERT_TRUE(startswith(buf, "GET / HTTP/1.1\r\nHost: 127.0.0.1:") != NULL);
        ASSERT_OK(raw_send(fd, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"));
        ASSERT_ERRNO(http_client_response(c, &h), EINVAL);
        safe_close(fd);

        /* body until close, and a truncated Content-Length body */
        {
                _cleanup_free_ char *body = NULL;
                ASSERT_OK(http_client_request(c, "GET", "/", NULL, NULL, 0));
                fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                ASSERT_OK(fd);
                raw_read_until(fd, buf, sizeof buf, "\r\n\r\n"); /* else our close is a RST */
                ASSERT_OK(raw_send(fd, "HTTP/1.0 200 OK\r\n\r\nuntil close"));
                safe_close(fd);
                ASSERT_OK(http_client_response(c, &h));
                ASSERT_FALSE(h->keep_alive);
                ASSERT_OK(http_client_read_body_all(c, 1024, &body, NULL));
                ASSERT_STREQ(body, "until close");
        }
        {
                char *body = NULL;
                ASSERT_OK(http_client_request(c, "GET", "/", NULL, NULL, 0));
                fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                ASSERT_OK(fd);
                raw_read_until(fd, buf, sizeof buf, "\r\n\r\n");
                ASSERT_OK(raw_send(fd, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"));
                safe_close(fd);
                ASSERT_OK(http_client_response(c, &h));
                ASSERT_ERRNO(http_client_read_body_all(c, 1024, &body, NULL), ECONNRESET);
                ASSERT_NULL(body);
        }
        {
                char *body = NULL;
                ASSERT_OK(http_client_request(c, "GET", "/", NULL, NULL, 0));
                fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                ASSERT_OK(fd);
                ASSERT_OK(raw_send(fd, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789"));
                ASSERT_OK(http_client_response(c, &h));
                ASSERT_ERRNO(http_client_read_body_all(c, 9, &body, NULL), EFBIG);
                safe_close(fd);
        }
        safe_close(lfd);
}
