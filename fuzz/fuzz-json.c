/* SPDX-License-Identifier: MIT */
/* libFuzzer target for src/basic/json.c. For every input:
 *  - json_parse(); on failure the error must be one of the documented ones with
 *    an offset in the message; on success serialise, re-parse, compare the trees
 *    and check that serialising again is byte-identical; call every accessor and
 *    check that the integer and double views of a number agree;
 *  - write the input as a JSON string with json_w_string_n(): the result must be
 *    valid UTF-8 and parse back to the input exactly when utf8_valid() said so;
 *  - base64-encode and decode the input, and decode it as base64: a successful
 *    decode must re-encode to the same (padded) text. */
#include <inttypes.h>
#include <stdio.h>

#include "base64.h"
#include "fuzz-check.h"
#include "alloc-util.h"
#include "json.h"

#define FUZZ_INPUT_MAX (256U * 1024U)

static bool values_equal(const JsonValue *a, const JsonValue *b) {
        JsonType t = json_type(a);
        bool x, y;

        if (t != json_type(b))
                return false;
        switch (t) {
        case JSON_NULL:
                return true;
        case JSON_BOOL:
                return json_bool(a, &x) == 0 && json_bool(b, &y) == 0 && x == y;
        case JSON_NUMBER: {
                _cleanup_free_ char *sa = NULL, *sb = NULL;
                size_t na, nb;
                return json_serialize(a, &sa, &na) == 0 && json_serialize(b, &sb, &nb) == 0 && na == nb &&
                       memcmp(sa, sb, na) == 0;
        }
        case JSON_STRING:
                return json_string_len(a) == json_string_len(b) &&
                       memcmp(json_string(a), json_string(b), json_string_len(a)) == 0;
        case JSON_ARRAY:
                if (json_array_size(a) != json_array_size(b))
                        return false;
                for (size_t i = 0; i < json_array_size(a); i++)
                        if (!values_equal(json_array_at(a, i), json_array_at(b, i)))
                                return false;
                return true;
        case JSON_OBJECT:
                if (json_object_size(a) != json_object_size(b))
                        return false;
                for (size_t i = 0; i < json_object_size(a); i++)
                        if (!streq(json_object_key(a, i), json_object_key(b, i)) ||
                            !values_equal(json_object_value(a, i), json_object_value(b, i)))
                                return false;
                return true;
        default:
                return false;
        }
}

static void check_number(const JsonValue *v) {
        int64_t i;
        uint64_t u;
        double d;
        int ri = json_int64(v, &i), ru = json_uint64(v, &u), rd = json_double(v, &d);

        CHECK(ri == 0 || ri == -ERANGE);
        CHECK(ru == 0 || ru == -ERANGE);
        CHECK(rd == 0 || rd == -ERANGE);
        /* strtod and int→double both round correctly from the same exact value */
        if (ri == 0) {
                CHECK(rd == 0 && d == (double) i);
                if (i >= 0)
                        CHECK(ru == 0 && u == (uint64_t) i);
        }
        if (ru == 0) {
                CHECK(rd == 0 && d == (double) u);
                if (u <= INT64_MAX)
                        CHECK(ri == 0);
        }
}

static void walk(const JsonValue *v, unsigned depth) {
        static const char *const allowed[] = { "id", "name", "", NULL };
        const char *unknown;
        bool b;

        CHECK(depth <= JSON_DEPTH_MAX);
        CHECK(json_type_to_string(json_type(v)));
        switch (json_type(v)) {
        case JSON_NULL:
                CHECK(json_is_null(v));
                break;
        case JSON_BOOL:
                CHECK(json_bool(v, &b) == 0);
                break;
        case JSON_NUMBER:
                check_number(v);
                break;
        case JSON_STRING:
                CHECK(json_string(v));
                CHECK(json_string(v)[json_string_len(v)] == 0);
                CHECK(json_string_len(v) <= JSON_STRING_MAX);
                CHECK(utf8_valid(json_string(v), json_string_len(v)));
                break;
        case JSON_ARRAY:
                CHECK(!json_array_at(v, json_array_size(v)));
                for (size_t i = 0; i < json_array_size(v); i++)
                        walk(json_array_at(v, i), depth + 1);
                break;
        case JSON_OBJECT:
                CHECK(!json_object_key(v, json_object_size(v)));
                (void) json_check_keys(v, allowed, &unknown);
                for (size_t i = 0; i < json_object_size(v); i++) {
                        const char *k = json_object_key(v, i);
                        /* json_get() finds it unless the key embeds a NUL */
                        CHECK(k);
                        (void) json_get(v, k);
                        walk(json_object_value(v, i), depth + 1);
                }
                break;
        default:
                CHECK(false);
        }
}

static void fuzz_parse(const char *p, size_t n) {
        _cleanup_json_ JsonValue *v = NULL, *v2 = NULL;
        _cleanup_free_ char *out = NULL, *out2 = NULL;
        size_t n1, n2;
        char err[256];
        int r;

        r = json_parse(p, n, &v, err, sizeof err);
        if (r < 0) {
                const char *at = strstr(err, " at byte ");
                uint64_t off;

                CHECK(r == -EINVAL || r == -E2BIG || r == -ENOMEM);
                CHECK(!v);
                CHECK(at);
                CHECK(sscanf(at, " at byte %" SCNu64, &off) == 1 && off <= n);
                return;
        }
        walk(v, 0);

        CHECK(json_serialize(v, &out, &n1) == 0);
        CHECK(strlen(out) == n1); /* embedded NULs are escaped */
        CHECK(utf8_valid(out, n1));
        r = json_parse(out, n1, &v2, err, sizeof err);
        if (r < 0) {
                fprintf(stderr, "re-parse failed: %s\n", err);
                abort();
        }
        CHECK(values_equal(v, v2));
        CHECK(json_serialize(v2, &out2, &n2) == 0);
        CHECK(n1 == n2 && memcmp(out, out2, n1) == 0);
        CHECK(n1 <= n * 6 + 16); /* only \u00XX escapes grow text */
}

static void fuzz_writer_utf8(const char *p, size_t n) {
        _cleanup_json_ JsonValue *v = NULL;
        _cleanup_free_ char *s = NULL;
        bool valid = utf8_valid(p, n);
        JsonWriter w;
        size_t len;

        json_w_init(&w);
        json_w_array_begin(&w);
        json_w_string_n(&w, p, n);
        json_w_object_begin(&w);
        json_w_key(&w, "k");
        json_w_string_n(&w, p, n);
        json_w_object_end(&w);
        json_w_array_end(&w);
        CHECK(json_w_finish(&w, &s, &len) == 0);
        CHECK(utf8_valid(s, len));
        CHECK(json_parse(s, len, &v, NULL, 0) == 0);

        for (size_t i = 0; i < 2; i++) {
                const JsonValue *str = i == 0 ? json_array_at(v, 0) : json_get(json_array_at(v, 1), "k");
                bool same = json_string_len(str) == n && memcmp(json_string(str), p, n) == 0;
                CHECK(valid == same);
        }
}

static void fuzz_base64(const uint8_t *data, size_t size) {
        _cleanup_free_ char *enc = NULL, *reenc = NULL;
        _cleanup_free_ void *dec = NULL, *dec2 = NULL;
        size_t n, m;

        CHECK(base64_encode(data, size, &enc, &n) == 0);
        CHECK(n == (size + 2) / 3 * 4 && strlen(enc) == n);
        CHECK(base64_decode(enc, n, &dec, &m) == 0);
        CHECK(m == size && (size == 0 || memcmp(dec, data, size) == 0));

        if (base64_decode((const char *) data, size, &dec2, &m) < 0)
                return;
        CHECK(((const char *) dec2)[m] == 0);
        CHECK(base64_encode(dec2, m, &reenc, &n) == 0);
        /* canonical: the input is the encoding, with or without its padding */
        CHECK(n >= size && n - size <= 2 && memcmp(reenc, data, size) == 0);
        for (size_t i = size; i < n; i++)
                CHECK(reenc[i] == '=');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > FUZZ_INPUT_MAX)
                return 0;
        fuzz_parse((const char *) data, size);
        fuzz_writer_utf8((const char *) data, size);
        fuzz_base64(data, size);
        return 0;
}
