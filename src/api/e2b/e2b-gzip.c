/* SPDX-License-Identifier: MIT */
/* gzip streams for envd's /files: see e2b-gzip.h. */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "e2b-gzip.h"
#include "macros.h"
#include "str-util.h"

#define E2B_GZIP_OUT 65536U
#define E2B_GZIP_WINDOW (15 + 16) /* zlib: a gzip wrapper, not zlib's own */

int e2b_gunzip_begin(E2bGzip *g) {
        *g = (E2bGzip){ .inflating = true };
        if (inflateInit2(&g->z, E2B_GZIP_WINDOW) != Z_OK)
                return -ENOMEM;
        g->ready = true;
        return 0;
}

int e2b_gunzip_feed(E2bGzip *g, const void *in, size_t n, E2bGzipSink sink, void *userdata) {
        char out[E2B_GZIP_OUT];

        g->z.next_in = (Bytef *) in;
        g->z.avail_in = (uInt) n;
        while (g->z.avail_in > 0) {
                int z, k;

                if (g->member_end) {
                        /* concatenated members are one gzip file (RFC 1952 2.2) */
                        if (inflateReset(&g->z) != Z_OK)
                                return -EBADMSG;
                        g->member_end = false;
                }
                g->z.next_out = (Bytef *) out;
                g->z.avail_out = sizeof out;
                z = inflate(&g->z, Z_NO_FLUSH);
                if (z != Z_OK && z != Z_STREAM_END && z != Z_BUF_ERROR)
                        return -EBADMSG;
                if (sizeof out - g->z.avail_out > 0) {
                        k = sink(out, sizeof out - g->z.avail_out, userdata);
                        if (k < 0)
                                return k;
                }
                if (z == Z_STREAM_END)
                        g->member_end = true;
                else if (z == Z_BUF_ERROR && g->z.avail_out > 0)
                        return -EBADMSG; /* no progress with input and room: cannot happen on good data */
        }
        return 0;
}

int e2b_gunzip_end(const E2bGzip *g) {
        return g->member_end ? 0 : -EBADMSG;
}

int e2b_gzip_begin(E2bGzip *g) {
        *g = (E2bGzip){};
        if (deflateInit2(&g->z, Z_BEST_SPEED, Z_DEFLATED, E2B_GZIP_WINDOW, 8, Z_DEFAULT_STRATEGY) != Z_OK)
                return -ENOMEM;
        g->ready = true;
        return 0;
}

int e2b_gzip_feed(E2bGzip *g, const void *in, size_t n, bool finish, E2bGzipSink sink, void *userdata) {
        char out[E2B_GZIP_OUT];
        int z;

        g->z.next_in = (Bytef *) in;
        g->z.avail_in = (uInt) n;
        do {
                int k;

                g->z.next_out = (Bytef *) out;
                g->z.avail_out = sizeof out;
                z = deflate(&g->z, finish ? Z_FINISH : Z_NO_FLUSH);
                if (z == Z_STREAM_ERROR)
                        return -EIO;
                if (sizeof out - g->z.avail_out > 0) {
                        k = sink(out, sizeof out - g->z.avail_out, userdata);
                        if (k < 0)
                                return k;
                }
        } while (g->z.avail_out == 0 || (finish && z != Z_STREAM_END));
        return 0;
}

void e2b_gzip_done(E2bGzip *g) {
        if (!g->ready)
                return;
        if (g->inflating)
                (void) inflateEnd(&g->z);
        else
                (void) deflateEnd(&g->z);
        g->ready = false;
}

int e2b_gzip_content_encoding(const char *value) {
        if (!value || strcasecmp(value, "identity") == 0)
                return 0;
        if (strcasecmp(value, "gzip") == 0 || strcasecmp(value, "x-gzip") == 0)
                return 1;
        return -EINVAL;
}

/* One Accept-Encoding item "name[;q=V]": does it name gzip with q > 0? */
static bool item_accepts_gzip(const char *p, size_t n) {
        const char *semi = memchr(p, ';', n);
        size_t name_n = semi ? (size_t) (semi - p) : n;

        while (name_n > 0 && (p[name_n - 1] == ' ' || p[name_n - 1] == '\t'))
                name_n--;
        if (!((name_n == 4 && strncasecmp(p, "gzip", 4) == 0) || (name_n == 6 && strncasecmp(p, "x-gzip", 6) == 0)))
                return false;
        if (!semi)
                return true;
        /* q=0, 0.0, 0.00, 0.000: refused; any other weight accepts */
        for (const char *q = semi + 1; q < p + n; q++) {
                if (*q == ' ' || *q == '\t')
                        continue;
                if ((*q == 'q' || *q == 'Q') && q + 1 < p + n && q[1] == '=') {
                        const char *v = q + 2, *end = p + n;
                        bool zero = v < end && *v == '0';
                        for (const char *d = v + 1; zero && d < end && *d != ';' && *d != ' '; d++)
                                zero = *d == '0' || (*d == '.' && d == v + 1);
                        return !zero;
                }
                break;
        }
        return true;
}

bool e2b_gzip_accepted(const char *accept_encoding) {
        const char *p = accept_encoding;

        while (p && *p) {
                const char *comma = strchr(p, ',');
                size_t n = comma ? (size_t) (comma - p) : strlen(p);
                while (n > 0 && (*p == ' ' || *p == '\t'))
                        p++, n--;
                if (item_accepts_gzip(p, n))
                        return true;
                p = comma ? comma + 1 : NULL;
        }
        return false;
}
