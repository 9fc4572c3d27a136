/* SPDX-License-Identifier: MIT */
/* A streaming multipart/form-data parser (RFC 7578 / 2046) for envd's
 * POST /files: body bytes go in as they arrive, part bodies come out through
 * the callback without being held whole. What is held is bounded: the headers
 * of one part and a delimiter's worth of bytes that might start one. */

#include <strings.h>

#include "alloc-util.h"
#include "e2b.h"
#include "str-util.h"

enum {
        MP_PREAMBLE,    /* before the first delimiter */
        MP_AFTER_DELIM, /* "--" (the end) or CRLF (a part follows) */
        MP_HEADERS,
        MP_BODY,
        MP_DONE,
};

#define MP_PADDING_MAX 64U /* transport padding (spaces, tabs) after a delimiter */

void e2b_multipart_done(E2bMultipart *m) {
        if (!m)
                return;
        m->buf = mfree(m->buf);
        m->len = 0;
}

/* The boundary parameter of a Content-Type, quoted or not. */
static int boundary_param(const char *ct, char *out, size_t size) {
        const char *p = ct;

        while ((p = strcasestr(p, "boundary="))) {
                size_t n = 0;

                if (p != ct && p[-1] != ';' && p[-1] != ' ' && p[-1] != '\t') {
                        p += 9;
                        continue;
                }
                p += 9;
                if (*p == '"') {
                        p++;
                        while (p[n] && p[n] != '"')
                                n++;
                        if (p[n] != '"')
                                return -EINVAL;
                } else
                        n = strcspn(p, "; \t");
                if (n == 0 || n > E2B_MULTIPART_BOUNDARY_MAX || n >= size)
                        return -EINVAL;
                memcpy(out, p, n);
                out[n] = 0;
                for (size_t i = 0; i < n; i++)
                        if ((unsigned char) out[i] < 0x20 || (unsigned char) out[i] > 0x7e)
                                return -EINVAL;
                return 0;
        }
        return -EINVAL;
}

int e2b_multipart_init(E2bMultipart *m, const char *content_type) {
        char boundary[E2B_MULTIPART_BOUNDARY_MAX + 1];
        size_t l;

        *m = (E2bMultipart){};
        if (!content_type || strncasecmp(content_type, "multipart/form-data", 19) != 0 ||
            (content_type[19] != ';' && content_type[19] != ' '))
                return -EINVAL;
        if (boundary_param(content_type + 19, boundary, sizeof boundary) < 0)
                return -EINVAL;
        l = strlen(boundary);
        memcpy(m->delim, "\r\n--", 4);
        memcpy(m->delim + 4, boundary, l + 1);
        m->delim_len = 4 + l;
        m->buf = malloc(E2B_MULTIPART_BUF + E2B_MULTIPART_HEADERS_MAX);
        if (!m->buf)
                return -ENOMEM;
        /* the first delimiter may open the body without a CRLF: pretend one came before it */
        memcpy(m->buf, "\r\n", 2);
        m->len = 2;
        m->state = MP_PREAMBLE;
        return 0;
}

static const char *find_bytes(const char *hay, size_t n, const char *needle, size_t k) {
        if (k == 0 || n < k)
                return NULL;
        for (const char *p = hay; (p = memchr(p, needle[0], (size_t) (hay + n - p))); p++) {
                if ((size_t) (hay + n - p) < k)
                        return NULL;
                if (memcmp(p, needle, k) == 0)
                        return p;
        }
        return NULL;
}

/* A quoted-string parameter value (undici escapes '"', CR, LF as %22, %0D, %0A). */
static int disposition_param(Slice line, const char *key, char *out, size_t size, bool *found) {
        size_t kl = strlen(key);

        *found = false;
        for (size_t i = 0; i + kl + 1 < line.n; i++) {
                size_t j, o = 0;

                if (strncasecmp(line.p + i, key, kl) != 0 || line.p[i + kl] != '=')
                        continue;
                if (i > 0 && line.p[i - 1] != ';' && line.p[i - 1] != ' ' && line.p[i - 1] != '\t')
                        continue;
                j = i + kl + 1;
                if (j < line.n && line.p[j] == '"') {
                        for (j++; j < line.n && line.p[j] != '"'; j++) {
                                char c = line.p[j];
                                if (c == '\\' && j + 1 < line.n)
                                        c = line.p[++j];
                                else if (c == '%' && j + 2 < line.n &&
                                         (strncasecmp(line.p + j, "%22", 3) == 0 ||
                                          strncasecmp(line.p + j, "%0D", 3) == 0 ||
                                          strncasecmp(line.p + j, "%0A", 3) == 0)) {
                                        c = line.p[j + 2] == '2' ? '"' : (line.p[j + 2] | 0x20) == 'd' ? '\r' : '\n';
                                        j += 2;
                                }
                                if (c == 0 || o + 1 >= size)
                                        return -EBADMSG;
                                out[o++] = c;
                        }
                        if (j >= line.n)
                                return -EBADMSG; /* unterminated */
                } else
                        for (; j < line.n && line.p[j] != ';' && line.p[j] != ' '; j++) {
                                if (line.p[j] == 0 || o + 1 >= size)
                                        return -EBADMSG;
                                out[o++] = line.p[j];
                        }
                out[o] = 0;
                *found = true;
                return 0;
        }
        return 0;
}

/* Parses the headers of a part (without the final CRLF CRLF). */
static int part_headers(E2bMultipart *m, const char *p, size_t n) {
        bool disposition = false;

        m->name[0] = m->filename[0] = 0;
        m->has_filename = false;
        while (n > 0) {
                const char *eol = find_bytes(p, n, "\r\n", 2);
                Slice line = { p, eol ? (size_t) (eol - p) : n };
                size_t adv = eol ? line.n + 2 : n;

                if (line.n > 20 && strncasecmp(line.p, "Content-Disposition:", 20) == 0) {
                        Slice v = { line.p + 20, line.n - 20 };
                        bool found;
                        int r;

                        while (v.n > 0 && (v.p[0] == ' ' || v.p[0] == '\t'))
                                v.p++, v.n--;
                        if (v.n < 9 || strncasecmp(v.p, "form-data", 9) != 0)
                                return -EBADMSG;
                        r = disposition_param(v, "name", m->name, sizeof m->name, &found);
                        if (r < 0)
                                return r;
                        r = disposition_param(v, "filename", m->filename, sizeof m->filename, &found);
                        if (r < 0)
                                return r;
                        m->has_filename = found;
                        disposition = true;
                } else if (line.n > 0 && !memchr(line.p, ':', line.n))
                        return -EBADMSG;
                p += adv;
                n -= adv;
        }
        return disposition ? 0 : -EBADMSG;
}

static void consume(E2bMultipart *m, size_t n) {
        memmove(m->buf, m->buf + n, m->len - n);
        m->len -= n;
}

/* Processes what is in buf; leaves what cannot be decided yet. */
static int process(E2bMultipart *m, E2bMultipartCallback cb, void *userdata) {
        for (;;) {
                const char *hit;
                size_t keep;
                int r;

                switch (m->state) {
                case MP_PREAMBLE:
                        hit = find_bytes(m->buf, m->len, m->delim, m->delim_len);
                        if (!hit) {
                                /* keep a possible start of the delimiter */
                                keep = MIN(m->len, m->delim_len - 1);
                                consume(m, m->len - keep);
                                return 0;
                        }
                        consume(m, (size_t) (hit - m->buf) + m->delim_len);
                        m->state = MP_AFTER_DELIM;
                        break;
                case MP_AFTER_DELIM: {
                        size_t i = 0;
                        if (m->len >= 2 && memcmp(m->buf, "--", 2) == 0) {
                                m->state = MP_DONE;
                                m->len = 0;
                                return 1;
                        }
                        while (i < m->len && (m->buf[i] == ' ' || m->buf[i] == '\t'))
                                i++;
                        if (i > MP_PADDING_MAX)
                                return -EBADMSG;
                        if (m->len < i + 2)
                                return 0;
                        if (m->buf[i] != '\r' || m->buf[i + 1] != '\n')
                                return -EBADMSG;
                        consume(m, i + 2);
                        m->state = MP_HEADERS;
                        break;
                }
                case MP_HEADERS:
                        if (m->len >= 2 && memcmp(m->buf, "\r\n", 2) == 0)
                                hit = m->buf; /* a part without headers */
                        else {
                                hit = find_bytes(m->buf, m->len, "\r\n\r\n", 4);
                                if (hit)
                                        hit += 2;
                        }
                        if (!hit) {
                                /* a block of HEADERS_MAX bytes still needs its final CRLF */
                                if (m->len >= E2B_MULTIPART_HEADERS_MAX + 2)
                                        return -E2BIG;
                                return 0;
                        }
                        if ((size_t) (hit - m->buf) > E2B_MULTIPART_HEADERS_MAX)
                                return -E2BIG;
                        r = part_headers(m, m->buf, (size_t) (hit - m->buf));
                        if (r < 0)
                                return r;
                        consume(m, (size_t) (hit - m->buf) + 2);
                        m->parts++;
                        m->state = MP_BODY;
                        r = cb(m, E2B_MULTIPART_PART_BEGIN, NULL, 0, userdata);
                        if (r < 0)
                                return r;
                        break;
                case MP_BODY:
                        hit = find_bytes(m->buf, m->len, m->delim, m->delim_len);
                        if (!hit) {
                                keep = MIN(m->len, m->delim_len - 1);
                                if (m->len > keep) {
                                        r = cb(m, E2B_MULTIPART_DATA, m->buf, m->len - keep, userdata);
                                        if (r < 0)
                                                return r;
                                        consume(m, m->len - keep);
                                }
                                return 0;
                        }
                        if (hit > m->buf) {
                                r = cb(m, E2B_MULTIPART_DATA, m->buf, (size_t) (hit - m->buf), userdata);
                                if (r < 0)
                                        return r;
                        }
                        r = cb(m, E2B_MULTIPART_PART_END, NULL, 0, userdata);
                        if (r < 0)
                                return r;
                        consume(m, (size_t) (hit - m->buf) + m->delim_len);
                        m->state = MP_AFTER_DELIM;
                        break;
                case MP_DONE:
                        m->len = 0;
                        return 1;
                default:
                        return -EBADMSG;
                }
        }
}

int e2b_multipart_feed(E2bMultipart *m, const char *p, size_t n, E2bMultipartCallback cb, void *userdata) {
        const size_t cap = E2B_MULTIPART_BUF + E2B_MULTIPART_HEADERS_MAX;
        int r;

        if (!m->buf)
                return -EINVAL;
        if (m->state == MP_DONE)
                return 1; /* the epilogue is ignored */
        if (n == 0) {
                r = process(m, cb, userdata);
                if (r < 0)
                        return r;
                return m->state == MP_DONE ? 1 : -EBADMSG;
        }
        while (n > 0) {
                size_t take = MIN(n, cap - m->len);

                if (take == 0)
                        return -E2BIG; /* cannot happen: process() always leaves room */
                memcpy(m->buf + m->len, p, take);
                m->len += take;
                p += take;
                n -= take;
                r = process(m, cb, userdata);
                if (r != 0)
                        return r;
        }
        return 0;
}
