/* SPDX-License-Identifier: MIT */
/* The E2B surface's parsers of hostile bytes (src/api/e2b/e2b-connect.c,
 * e2b-multipart.c, e2b-users.c). The first input byte picks the parser, the
 * rest is its input:
 *  0  Connect envelopes: a stream of envelopes decoded one after another with
 *     a maximum from the input; every view must lie inside the input; and the
 *     whole input as a unary request body;
 *  1  multipart/form-data: the first line is the Content-Type, the rest the
 *     body. It is parsed at once and in chunks whose size comes from the
 *     input: events must come in order, names stay bounded, and both parses
 *     must agree on the result and on every event and byte;
 *  2  passwd/group text: lookups by a name and an id from the input;
 *     path resolution against a home: the result is absolute, normal and
 *     bounded, and resolving it again gives it back;
 *  3  proto3-JSON helpers on any value of a parsed JSON document. */
#include <stdio.h>

#include "fuzz-check.h"
#include "alloc-util.h"
#include "e2b.h"

#define FUZZ_INPUT_MAX (256U * 1024U)
#define FUZZ_LOG_MAX (2U * FUZZ_INPUT_MAX + 1024U)

static void fuzz_envelopes(const uint8_t *p, size_t n) {
        size_t max = n > 0 ? p[0] * 16U : 0, off = 0;
        Slice msg;
        int r;

        while (off < n) {
                uint8_t flags = 0xff;
                size_t sz = 0;

                r = e2b_envelope_decode(p + off, n - off, max, &flags, &msg, &sz);
                CHECK(r == 0 || r == 1 || r == -EBADMSG || r == -EMSGSIZE);
                if (r <= 0)
                        break;
                CHECK((flags & ~E2B_ENVELOPE_FLAG_END) == 0);
                CHECK(sz == E2B_ENVELOPE_HEADER + msg.n && msg.n <= max && sz <= n - off);
                CHECK(msg.p == (const char *) p + off + E2B_ENVELOPE_HEADER);
                {
                        uint8_t hdr[E2B_ENVELOPE_HEADER];
                        e2b_envelope_header(hdr, flags, (uint32_t) msg.n);
                        CHECK(memcmp(hdr, p + off, E2B_ENVELOPE_HEADER) == 0);
                }
                off += sz;
        }

        r = e2b_envelope_request(p, n, &msg);
        CHECK(r == 0 || r == -EBADMSG || r == -EMSGSIZE);
        if (r == 0)
                CHECK(n >= E2B_ENVELOPE_HEADER && p[0] == 0 && msg.n == n - E2B_ENVELOPE_HEADER &&
                      msg.p == (const char *) p + E2B_ENVELOPE_HEADER);
}

/* What the callback saw: a textual log of events and bytes, and the state. */
typedef struct MpLog {
        char *buf;
        size_t len;
        bool in_part;
        size_t parts;
} MpLog;

static void log_add(MpLog *l, const void *p, size_t n) {
        CHECK(l->len + n <= FUZZ_LOG_MAX);
        memcpy(l->buf + l->len, p, n);
        l->len += n;
}

static int mp_cb(E2bMultipart *m, E2bMultipartEvent ev, const char *p, size_t n, void *userdata) {
        MpLog *l = userdata;
        size_t nl = strnlen(m->name, sizeof m->name), fl = strnlen(m->filename, sizeof m->filename);

        CHECK(nl <= E2B_MULTIPART_NAME_MAX && fl <= E2B_MULTIPART_FILENAME_MAX);
        switch (ev) {
        case E2B_MULTIPART_PART_BEGIN:
                CHECK(!l->in_part);
                l->in_part = true;
                log_add(l, "B", 1);
                log_add(l, m->name, nl + 1);
                if (m->has_filename)
                        log_add(l, m->filename, fl + 1);
                else
                        log_add(l, "-", 1);
                break;
        case E2B_MULTIPART_DATA:
                CHECK(l->in_part);
                CHECK(n > 0 && p);
                /* data is coalesced differently per chunking: log only the bytes */
                log_add(l, p, n);
                break;
        case E2B_MULTIPART_PART_END:
                CHECK(l->in_part);
                l->in_part = false;
                l->parts++;
                log_add(l, "E", 1);
                break;
        default:
                CHECK(false);
        }
        return 0;
}

static int mp_run(const char *ct, const char *body, size_t n, size_t step, MpLog *l) {
        _cleanup_(e2b_multipart_done) E2bMultipart m = {};
        int r;

        r = e2b_multipart_init(&m, ct);
        CHECK(r == 0 || r == -EINVAL);
        if (r < 0)
                return r;
        CHECK(m.delim_len >= 5 && m.delim_len <= 4 + E2B_MULTIPART_BOUNDARY_MAX);
        r = 0;
        for (size_t off = 0; off < n && r == 0;) {
                size_t k = step ? MIN(step, n - off) : n - off;
                r = e2b_multipart_feed(&m, body + off, k, mp_cb, l);
                CHECK(m.len <= E2B_MULTIPART_BUF + E2B_MULTIPART_HEADERS_MAX);
                off += k;
        }
        if (r == 0)
                r = e2b_multipart_feed(&m, NULL, 0, mp_cb, l);
        CHECK(r == 0 || r == 1 || r == -EBADMSG || r == -E2BIG);
        if (r == 1)
                CHECK(!l->in_part && m.parts == l->parts);
        return r;
}

static void fuzz_multipart(const uint8_t *data, size_t size) {
        const char *p = (const char *) data + 1, *nl;
        _cleanup_free_ char *ct = NULL, *log1 = NULL, *log2 = NULL;
        MpLog a = {}, b = {};
        size_t step;
        int r1, r2;

        /* a byte of chunk size, the Content-Type up to '\n', the body */
        if (size < 2)
                return;
        step = data[0];
        nl = memchr(p, '\n', MIN(size - 1, (size_t) 256));
        if (!nl)
                return;
        ct = memdup_suffix0(p, (size_t) (nl - p));
        CHECK(ct);
        p = nl + 1;
        size -= (size_t) (p - (const char *) data);

        log1 = malloc(FUZZ_LOG_MAX);
        log2 = malloc(FUZZ_LOG_MAX);
        CHECK(log1 && log2);
        a.buf = log1;
        b.buf = log2;
        r1 = mp_run(ct, p, size, 0, &a);
        r2 = mp_run(ct, p, size, step + 1, &b);
        if (r1 != r2 || a.len != b.len || memcmp(a.buf, b.buf, a.len) != 0) {
                fprintf(stderr, "whole: %d (%zu log bytes), in %zu-byte chunks: %d (%zu log bytes)\n", r1, a.len,
                        step + 1, r2, b.len);
                abort();
        }
}

static bool path_normal(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || s[0] != '/' || (n > 1 && s[n - 1] == '/'))
                return false;
        for (size_t i = 1; i < n;) {
                size_t c = strcspn(s + i, "/");
                if (c == 0 || (c == 1 && s[i] == '.') || (c == 2 && s[i] == '.' && s[i + 1] == '.'))
                        return false;
                i += c + 1;
        }
        return true;
}

static void fuzz_users(const uint8_t *data, size_t size) {
        const char *p = (const char *) data;
        char name[E2B_USER_NAME_MAX + 8], buf[64];
        _cleanup_free_ char *path = NULL, *again = NULL;
        size_t nn, id_bytes;
        uint32_t id = 0;
        E2bUser u;
        ApiError e = {};
        int r;

        /* name: up to the first NUL (bounded); then 4 bytes of id; the rest is the file */
        nn = strnlen(p, MIN(size, sizeof name - 1));
        memcpy(name, p, nn);
        name[nn] = 0;
        p += MIN(nn + 1, size);
        size -= MIN(nn + 1, size);
        id_bytes = MIN(size, (size_t) 4);
        for (size_t i = 0; i < id_bytes; i++)
                id = (id << 8) | (uint8_t) p[i];
        p += id_bytes;
        size -= id_bytes;

        r = e2b_passwd_find(p, size, name, &u);
        CHECK(r == 0 || r == -ENOENT);
        if (r == 0) {
                CHECK(streq(u.name, name));
                CHECK(strnlen(u.home, sizeof u.home) <= API_PATH_MAX);
        }
        r = e2b_id_name(p, size, id, buf, sizeof buf);
        CHECK(r == 0 || r == -ENOENT);
        if (r == 0)
                CHECK(buf[0] && strnlen(buf, sizeof buf) < sizeof buf);
        CHECK(e2b_id_name(p, size, id, buf, 1) == -ENOENT); /* no name fits */

        /* the same bytes as a path, relative to a home from the name (or /root) */
        r = e2b_path_resolve(p, size, name[0] == '/' ? name : "/root", &path, &e);
        CHECK(r == 0 || r == -EINVAL || r == -ENAMETOOLONG);
        if (r < 0) {
                CHECK(e.code == API_INVALID_PATH && e.message[0]);
                return;
        }
        CHECK(strlen(path) <= API_PATH_MAX);
        if (name[0] != '/' || path_normal(name))
                CHECK(path_normal(path));
        CHECK(e2b_path_resolve(path, strlen(path), "/nonexistent", &again, &e) == 0);
        if (path_normal(path))
                CHECK(streq(path, again));
}

static void fuzz_proto3(const JsonValue *v, unsigned depth) {
        static const char *const names[] = { "ZERO", NULL, "TWO", "THREE" };
        _cleanup_free_ void *bytes = NULL;
        size_t len = SIZE_MAX;
        uint32_t u;
        int x = -1, r;

        r = e2b_bytes_decode(v, &bytes, &len);
        if (r >= 0)
                CHECK(len != SIZE_MAX && (len == 0 || bytes));
        r = e2b_uint32(v, &u);
        CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
        r = e2b_enum(v, names, ELEMENTSOF(names), &x);
        CHECK(r == 0 || r == -EINVAL);
        if (r == 0) {
                CHECK(x >= 0 && (size_t) x < ELEMENTSOF(names) && names[x]);
                if (json_type(v) == JSON_STRING)
                        CHECK(streq(names[x], json_string(v)));
        }

        if (depth > 8)
                return;
        if (json_type(v) == JSON_OBJECT) {
                (void) e2b_field(v, "fooBar", "foo_bar");
                for (size_t i = 0; i < json_object_size(v); i++) {
                        const char *k = json_object_key(v, i);
                        const JsonValue *f = e2b_field(v, k, "no_such_field");
                        CHECK(!f || !json_is_null(f));
                        fuzz_proto3(json_object_value(v, i), depth + 1);
                }
        } else if (json_type(v) == JSON_ARRAY)
                for (size_t i = 0; i < json_array_size(v); i++)
                        fuzz_proto3(json_array_at(v, i), depth + 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1 || size > FUZZ_INPUT_MAX)
                return 0;

        switch (data[0] & 3) {
        case 0:
                fuzz_envelopes(data + 1, size - 1);
                break;
        case 1:
                fuzz_multipart(data + 1, size - 1);
                break;
        case 2:
                fuzz_users(data + 1, size - 1);
                break;
        case 3: {
                _cleanup_json_ JsonValue *v = NULL;
                if (json_parse((const char *) data + 1, size - 1, &v, NULL, 0) >= 0)
                        fuzz_proto3(v, 0);
                break;
        }
        }
        return 0;
}
