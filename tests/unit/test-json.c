/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <math.h>

#include "alloc-util.h"
#include "base64.h"
#include "json.h"
#include "test.h"

static JsonValue *parse_ok(const char *s) {
        char err[128];
        JsonValue *v = NULL;
        int r = json_parse(s, strlen(s), &v, err, sizeof err);
        if (r < 0)
                test_fail(__FILE__, __LINE__, "parse of '%s' failed: %s", s, err);
        ASSERT_NOT_NULL(v);
        ASSERT_STREQ(err, "");
        return v;
}

/* Parses (p, n), expects error -err and, if want is given, that message. */
static void check_reject_n(const char *p, size_t n, int err, const char *want) {
        char buf[128];
        JsonValue *v = NULL;
        int r = json_parse(p, n, &v, buf, sizeof buf);
        if (r != -err)
                test_fail(__FILE__, __LINE__, "parse of '%.*s' = %d, expected %d", (int) n, p, r, -err);
        ASSERT_NULL(v);
        ASSERT_TRUE(strstr(buf, " at byte ") != NULL);
        if (want)
                ASSERT_STREQ(buf, want);
}

static void check_reject(const char *s, const char *want) {
        check_reject_n(s, strlen(s), EINVAL, want);
}

/* Parses s, serialises it and compares with want (compact form). */
static void check_roundtrip(const char *s, const char *want) {
        _cleanup_json_ JsonValue *v = parse_ok(s), *v2 = NULL;
        _cleanup_free_ char *out = NULL, *out2 = NULL;
        size_t n, n2;

        ASSERT_OK(json_serialize(v, &out, &n));
        ASSERT_STREQ(out, want);
        ASSERT_EQ(n, strlen(want));
        ASSERT_OK(json_parse(out, n, &v2, NULL, 0));
        ASSERT_OK(json_serialize(v2, &out2, &n2));
        ASSERT_EQ(n, n2);
        ASSERT_TRUE(memcmp(out, out2, n) == 0);
}

static char *writer_text(JsonWriter *w) {
        char *s = NULL;
        size_t n = 0;
        ASSERT_OK(json_w_finish(w, &s, &n));
        ASSERT_EQ(n, strlen(s));
        return s;
}

/* ---------------------------------------------------------------- parser: valid */

TEST(parse_scalars) {
        _cleanup_json_ JsonValue *a = parse_ok("null"), *b = parse_ok(" true "), *c = parse_ok("\t\r\nfalse\n"),
                                  *d = parse_ok("-12.5e+3"), *e = parse_ok("\"hi\"");
        bool x;
        double dv;

        ASSERT_TRUE(json_is_null(a));
        ASSERT_EQ(json_type(a), JSON_NULL);
        ASSERT_OK(json_bool(b, &x));
        ASSERT_TRUE(x);
        ASSERT_OK(json_bool(c, &x));
        ASSERT_FALSE(x);
        ASSERT_EQ(json_type(d), JSON_NUMBER);
        ASSERT_OK(json_double(d, &dv));
        ASSERT_TRUE(dv == -12500.0);
        ASSERT_STREQ(json_string(e), "hi");
        ASSERT_EQ(json_string_len(e), 2);
}

TEST(parse_nested_document) {
        _cleanup_json_ JsonValue *v = parse_ok(
                "{ \"name\" : \"box\", \"cpus\": 2, \"tags\": [\"a\", \"b\", []], \"env\": {\"K\": \"V\"}, \"z\": null }");
        JsonValue *tags;
        int64_t i;

        ASSERT_EQ(json_type(v), JSON_OBJECT);
        ASSERT_EQ(json_object_size(v), 5);
        ASSERT_STREQ(json_object_key(v, 0), "name");
        ASSERT_STREQ(json_object_key(v, 4), "z");
        ASSERT_NULL(json_object_key(v, 5));
        ASSERT_NULL(json_object_value(v, 5));
        ASSERT_TRUE(json_is_null(json_object_value(v, 4)));
        ASSERT_STREQ(json_string(json_get(v, "name")), "box");
        ASSERT_OK(json_int64(json_get(v, "cpus"), &i));
        ASSERT_EQ(i, 2);
        tags = json_get(v, "tags");
        ASSERT_EQ(json_array_size(tags), 3);
        ASSERT_STREQ(json_string(json_array_at(tags, 1)), "b");
        ASSERT_EQ(json_type(json_array_at(tags, 2)), JSON_ARRAY);
        ASSERT_EQ(json_array_size(json_array_at(tags, 2)), 0);
        ASSERT_NULL(json_array_at(tags, 3));
        ASSERT_STREQ(json_string(json_get(json_get(v, "env"), "K")), "V");
        ASSERT_NULL(json_get(v, "missing"));
        ASSERT_NULL(json_get(tags, "name"));
}

TEST(parse_empty_containers) {
        _cleanup_json_ JsonValue *a = parse_ok("[]"), *b = parse_ok("{ }"), *c = parse_ok(" [ \n ] "), *d = parse_ok("\"\"");

        ASSERT_EQ(json_array_size(a), 0);
        ASSERT_EQ(json_type(b), JSON_OBJECT);
        ASSERT_EQ(json_object_size(b), 0);
        ASSERT_EQ(json_array_size(c), 0);
        ASSERT_STREQ(json_string(d), "");
}

TEST(parse_string_escapes) {
        _cleanup_json_ JsonValue *v = parse_ok("\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\u20AC \\ud83d\\ude00\"");

        ASSERT_STREQ(json_string(v), "\" \\ / \b \f \n \r \t \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
}

TEST(parse_string_embedded_nul) {
        _cleanup_json_ JsonValue *v = parse_ok("\"a\\u0000b\"");

        ASSERT_EQ(json_string_len(v), 3);
        ASSERT_TRUE(memcmp(json_string(v), "a\0b", 4) == 0);
}

TEST(parse_raw_utf8) {
        _cleanup_json_ JsonValue *v = parse_ok("{\"\xC3\xA9t\xC3\xA9\": \"\xE6\x97\xA5\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF\"}");

        ASSERT_STREQ(json_object_key(v, 0), "\xC3\xA9t\xC3\xA9");
        ASSERT_STREQ(json_string(json_object_value(v, 0)), "\xE6\x97\xA5\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF");
}

/* ---------------------------------------------------------------- parser: rejections */

TEST(reject_invalid_utf8) {
        check_reject("\"\xC0\x80\"", "invalid UTF-8 in string at byte 1");   /* overlong NUL */
        check_reject("\"\xC1\xBF\"", NULL);                                  /* overlong */
        check_reject("\"\xE0\x80\xAF\"", NULL);                              /* overlong '/' */
        check_reject("\"\xF0\x80\x80\xAF\"", NULL);                          /* overlong */
        check_reject("\"ab\xED\xA0\x80\"", "invalid UTF-8 in string at byte 3"); /* raw surrogate */
        check_reject("\"\xF4\x90\x80\x80\"", NULL);                          /* > U+10FFFF */
        check_reject("\"\xF5\x80\x80\x80\"", NULL);
        check_reject("\"\x80\"", NULL);                                      /* lone continuation */
        check_reject("\"\xE2\x82\"", NULL);                                  /* truncated */
        check_reject("\"\xFF\"", NULL);
        check_reject("{\"k\xFE\":1}", NULL);                                 /* in a key */
        check_reject("\xEF\xBB\xBF[]", "unexpected byte 0xef at byte 0");    /* BOM */
}

TEST(reject_lone_surrogates) {
        check_reject("\"\\uD800\"", "lone high surrogate \\uD800 at byte 1");
        check_reject("\"x\\udc00\"", "lone low surrogate \\uDC00 at byte 2");
        check_reject("\"\\uD800\\u0041\"", NULL);
        check_reject("\"\\uD800x\"", NULL);
        check_reject("\"\\uD83D\\uD83D\"", NULL);
        check_reject("\"\\uD83D\\", NULL);
        check_reject("\"\\uDBFF\\uE000\"", NULL);
}

TEST(reject_bad_escapes) {
        check_reject("\"\\x\"", "unexpected 'x', invalid escape at byte 2");
        check_reject("\"\\'\"", NULL);
        check_reject("\"\\u12\"", "invalid \\u escape at byte 1");
        check_reject("\"\\u12G4\"", NULL);
        check_reject("\"\\U0041\"", NULL);
        check_reject("\"abc\\\"", "unterminated string at byte 0");
}

TEST(reject_control_characters) {
        check_reject("\"a\nb\"", "unescaped control character 0x0a in string at byte 2");
        check_reject("\"\t\"", NULL);
        check_reject_n("\"a\0b\"", 5, EINVAL, "unescaped control character 0x00 in string at byte 2");
        check_reject_n("[1]\0", 4, EINVAL, NULL);
        check_reject("[1,\f2]", "unexpected byte 0x0c at byte 3"); /* not JSON whitespace */
}

TEST(reject_leading_zeros) {
        check_reject("01", "leading zero in number at byte 0");
        check_reject("[-01]", "leading zero in number at byte 1");
        check_reject("00", NULL);
        check_reject("-00.5", NULL);
}

TEST(reject_bad_numbers) {
        check_reject("NaN", "unexpected 'N' at byte 0");
        check_reject("Infinity", NULL);
        check_reject("-Infinity", "unexpected 'I', expected digit at byte 1");
        check_reject("+1", NULL);
        check_reject(".5", NULL);
        check_reject("1.", "unexpected end of input, expected digit after '.' at byte 2");
        check_reject("1.e5", NULL);
        check_reject("1e", NULL);
        check_reject("1e+", NULL);
        check_reject("-", NULL);
        check_reject("0x10", NULL);
        check_reject("1_000", NULL);
}

TEST(reject_trailing_commas) {
        check_reject("[1,]", "trailing comma in array at byte 3");
        check_reject("{\"a\":1 , }", "trailing comma in object at byte 9");
        check_reject("[,1]", NULL);
        check_reject("[1,,2]", NULL);
        check_reject("{,}", NULL);
}

TEST(reject_comments) {
        check_reject("// c\n1", NULL);
        check_reject("[1 /* c */]", "unexpected '/', expected ',' or ']' at byte 3");
        check_reject("{\"a\":1} # c", NULL);
}

TEST(reject_trailing_garbage) {
        check_reject("1 2", "unexpected '2', trailing data after value at byte 2");
        check_reject("{}x", NULL);
        check_reject("[]]", NULL);
        check_reject("\"a\"\"b\"", NULL);
        check_reject("truex", NULL);
        check_reject("nul", "invalid literal, expected 'null' at byte 0");
        check_reject("True", NULL);
}

TEST(reject_structure) {
        check_reject("", "unexpected end of input, expected a value at byte 0");
        check_reject("  \n", NULL);
        check_reject("[1,}", "unexpected '}' at byte 3");
        check_reject("[1", "unexpected end of input, expected ',' or ']' at byte 2");
        check_reject("{\"a\" 1}", "unexpected '1', expected ':' at byte 5");
        check_reject("{a:1}", "unexpected 'a', expected string key at byte 1");
        check_reject("{1:1}", NULL);
        check_reject("{\"a\":}", NULL);
        check_reject("{\"a\":1", NULL);
        check_reject("['a']", NULL);
        check_reject("\"abc", NULL);
        check_reject("[1 2]", NULL);
        check_reject("{\"a\":1 \"b\":2}", NULL);
}

TEST(reject_duplicate_keys) {
        _cleanup_json_ JsonValue *v = parse_ok("{\"a\":1,\"A\":2,\"a \":3,\"\":4}");

        check_reject("{\"a\":1,\"a\":2}", "duplicate key at byte 7");
        check_reject("{\"a\":1,\"\\u0061\":2}", NULL);
        check_reject("{\"\":1,\"\":2}", NULL);
        check_reject("{\"x\":{\"a\":1,\"b\":{},\"a\":[]}}", NULL);
        check_reject("{\"a\\u0000\":1,\"a\\u0000\":2}", NULL);
        ASSERT_EQ(json_object_size(v), 4);
}

/* Builds {"k0":0,"k1":1,...} with n keys, then optionally repeats key dup. */
static char *make_object(size_t n, long dup) {
        JsonWriter w;
        char key[32];

        json_w_init(&w);
        json_w_object_begin(&w);
        for (size_t i = 0; i < n; i++) {
                snprintf(key, sizeof key, "k%zu", i);
                json_w_kv_int(&w, key, (int64_t) i);
        }
        if (dup >= 0) {
                snprintf(key, sizeof key, "k%ld", dup);
                json_w_kv_int(&w, key, -1);
        }
        json_w_object_end(&w);
        return writer_text(&w);
}

TEST(reject_duplicate_keys_large_object) {
        _cleanup_free_ char *ok = make_object(20000, -1), *dup_first = make_object(20000, 0),
                            *dup_last = make_object(20000, 19999), *dup_small = make_object(17, 3);
        _cleanup_json_ JsonValue *v = parse_ok(ok);
        int64_t i;

        ASSERT_EQ(json_object_size(v), 20000);
        ASSERT_OK(json_int64(json_get(v, "k12345"), &i));
        ASSERT_EQ(i, 12345);
        check_reject(dup_first, "duplicate key in object at byte 0");
        check_reject(dup_last, NULL);
        check_reject(dup_small, NULL);
}

TEST(depth_limit) {
        char buf[2 * JSON_DEPTH_MAX + 8];
        _cleanup_json_ JsonValue *v = NULL;
        size_t n = 0;

        for (size_t i = 0; i < JSON_DEPTH_MAX; i++)
                buf[n++] = '[';
        for (size_t i = 0; i < JSON_DEPTH_MAX; i++)
                buf[n++] = ']';
        ASSERT_OK(json_parse(buf, n, &v, NULL, 0));

        n = 0;
        for (size_t i = 0; i < JSON_DEPTH_MAX + 1; i++)
                buf[n++] = '[';
        for (size_t i = 0; i < JSON_DEPTH_MAX + 1; i++)
                buf[n++] = ']';
        check_reject_n(buf, n, E2BIG, "nesting deeper than 64 at byte 64");
        /* unterminated, deeper still: the limit hits before the end of input */
        check_reject_n(buf, JSON_DEPTH_MAX + 1, E2BIG, NULL);
}

TEST(depth_limit_objects) {
        _cleanup_free_ char *deep = NULL, *ok = NULL;
        size_t n = 0;

        deep = malloc(10 * (JSON_DEPTH_MAX + 1) + 2);
        ok = malloc(10 * JSON_DEPTH_MAX + 2);
        ASSERT_NOT_NULL(deep);
        ASSERT_NOT_NULL(ok);
        for (size_t i = 0; i < JSON_DEPTH_MAX + 1; i++) {
                memcpy(deep + n, "{\"a\":", 5);
                n += 5;
        }
        deep[n++] = '1';
        for (size_t i = 0; i < JSON_DEPTH_MAX + 1; i++)
                deep[n++] = '}';
        check_reject_n(deep, n, E2BIG, NULL);
        /* one level less: accepted */
        memcpy(ok, deep + 5, n - 6);
        {
                _cleanup_json_ JsonValue *v = NULL;
                ASSERT_OK(json_parse(ok, n - 6, &v, NULL, 0));
        }
}

TEST(string_size_limit) {
        size_t n = JSON_STRING_MAX + 3;
        _cleanup_free_ char *buf = malloc(n);
        _cleanup_json_ JsonValue *v = NULL;

        ASSERT_NOT_NULL(buf);
        memset(buf, 'x', n);
        buf[0] = buf[n - 1] = '"';
        check_reject_n(buf, n, E2BIG, "string longer than 16777216 bytes at byte 0");
        /* exactly the limit: fine */
        buf[n - 2] = '"';
        ASSERT_OK(json_parse(buf, n - 1, &v, NULL, 0));
        ASSERT_EQ(json_string_len(v), JSON_STRING_MAX);
}

TEST(number_size_limit) {
        char buf[2048];

        memset(buf, '7', sizeof buf);
        check_reject_n(buf, sizeof buf, E2BIG, "number longer than 1024 characters at byte 0");
        {
                _cleanup_json_ JsonValue *v = NULL;
                double d;
                ASSERT_OK(json_parse(buf, 400, &v, NULL, 0)); /* 7.7e399 */
                ASSERT_ERRNO(json_int64(v, NULL), ERANGE);
                ASSERT_ERRNO(json_double(v, &d), ERANGE);
        }
}

TEST(errbuf_handling) {
        char small[12];
        JsonValue *v = NULL;

        /* truncated but terminated */
        memset(small, 'Z', sizeof small);
        ASSERT_ERRNO(json_parse("[1,}", 4, &v, small, sizeof small), EINVAL);
        ASSERT_EQ(strlen(small), sizeof small - 1);
        ASSERT_TRUE(strncmp(small, "unexpected '", 12 - 1) == 0);
        /* no errbuf at all */
        ASSERT_ERRNO(json_parse("[1,}", 4, &v, NULL, 0), EINVAL);
        ASSERT_ERRNO(json_parse("[", 1, &v, small, 0), EINVAL);
        ASSERT_ERRNO(json_parse(NULL, 3, &v, NULL, 0), EINVAL);
        ASSERT_NULL(v);
        /* not NUL-terminated input: only n bytes are read */
        {
                _cleanup_json_ JsonValue *w = NULL;
                ASSERT_OK(json_parse("[1]garbage", 3, &w, NULL, 0));
                ASSERT_EQ(json_array_size(w), 1);
        }
}

TEST(parse_long_array_and_string) {
        size_t count = 300000, n = 0;
        _cleanup_free_ char *buf = malloc(count * 2 + 2), *s = malloc(4 * 1000000 + 2);
        _cleanup_json_ JsonValue *v = NULL, *str = NULL;
        int64_t x;

        ASSERT_NOT_NULL(buf);
        ASSERT_NOT_NULL(s);
        buf[n++] = '[';
        for (size_t i = 0; i < count; i++) {
                buf[n++] = (char) ('0' + i % 10);
                buf[n++] = ',';
        }
        buf[n - 1] = ']';
        ASSERT_OK(json_parse(buf, n, &v, NULL, 0));
        ASSERT_EQ(json_array_size(v), count);
        ASSERT_OK(json_int64(json_array_at(v, count - 1), &x));
        ASSERT_EQ(x, (int64_t) ((count - 1) % 10));

        n = 0;
        s[n++] = '"';
        for (size_t i = 0; i < 1000000; i++) {
                memcpy(s + n, i % 2 ? "\\n" : "ab", 2);
                n += 2;
        }
        s[n++] = '"';
        ASSERT_OK(json_parse(s, n, &str, NULL, 0));
        ASSERT_EQ(json_string_len(str), 1500000);
}

/* ---------------------------------------------------------------- numbers */

static void check_int64(const char *s, int want_r, int64_t want) {
        _cleanup_json_ JsonValue *v = parse_ok(s);
        int64_t x = 42;
        int r = json_int64(v, &x);
        if (r != want_r || (r == 0 && x != want))
                test_fail(__FILE__, __LINE__, "json_int64(%s) = %d, %" PRIi64, s, r, x);
}

static void check_uint64(const char *s, int want_r, uint64_t want) {
        _cleanup_json_ JsonValue *v = parse_ok(s);
        uint64_t x = 42;
        int r = json_uint64(v, &x);
        if (r != want_r || (r == 0 && x != want))
                test_fail(__FILE__, __LINE__, "json_uint64(%s) = %d, %" PRIu64, s, r, x);
}

TEST(int64_boundaries) {
        check_int64("9223372036854775807", 0, INT64_MAX);
        check_int64("9223372036854775808", -ERANGE, 0);
        check_int64("-9223372036854775808", 0, INT64_MIN);
        check_int64("-9223372036854775809", -ERANGE, 0);
        check_int64("99999999999999999999999", -ERANGE, 0);
        check_int64("0", 0, 0);
        check_int64("-0", 0, 0);
        check_int64("-1", 0, -1);
        check_int64("9007199254740993", 0, INT64_C(9007199254740993)); /* not exact as a double */
}

TEST(uint64_boundaries) {
        check_uint64("18446744073709551615", 0, UINT64_MAX);
        check_uint64("18446744073709551616", -ERANGE, 0);
        check_uint64("-1", -ERANGE, 0);
        check_uint64("-0", 0, 0);
        check_uint64("-0.0e5", 0, 0);
        check_uint64("9223372036854775808", 0, UINT64_C(9223372036854775808));
        check_uint64("18446744073709551615.000", 0, UINT64_MAX);
}

TEST(integers_with_fraction_or_exponent) {
        check_int64("1.0", 0, 1);
        check_int64("1e3", 0, 1000);
        check_int64("12.50e1", 0, 125);
        check_int64("100e-2", 0, 1);
        check_int64("-922337203685477580.8E1", 0, INT64_MIN);
        check_int64("1.5", -ERANGE, 0);
        check_int64("1e-1", -ERANGE, 0);
        check_int64("1e400", -ERANGE, 0);
        check_int64("1e-400", -ERANGE, 0);
        check_int64("0e999999999999999999999", 0, 0);
        check_int64("0.000", 0, 0);
        check_int64("1e99999999999999999999", -ERANGE, 0);
        check_uint64("1844674407370955161.5e1", 0, UINT64_MAX);
        check_uint64("1e19", 0, UINT64_C(10000000000000000000));
        check_uint64("1e20", -ERANGE, 0);
        check_uint64("0.00000000000000000000000000001e29", 0, 1);
}

TEST(double_values) {
        static const struct {
                const char *text;
                int r;
                double want;
        } cases[] = {
                { "1.5", 0, 1.5 },
                { "-0.25", 0, -0.25 },
                { "5", 0, 5.0 },
                { "1e308", 0, 1e308 },
                { "1E-3", 0, 1e-3 },
                { "1e309", -ERANGE, 0 },
                { "-1e309", -ERANGE, 0 },
                { "1e-400", 0, 0.0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_json_ JsonValue *v = parse_ok(cases[i].text);
                double d = -7;
                ASSERT_EQ(json_double(v, &d), cases[i].r);
                if (cases[i].r == 0)
                        ASSERT_TRUE(d == cases[i].want);
        }
}

TEST(accessor_type_mismatch) {
        _cleanup_json_ JsonValue *s = parse_ok("\"5\""), *n = parse_ok("5"), *z = parse_ok("null"), *a = parse_ok("[1]");
        int64_t i;
        uint64_t u;
        double d;
        bool b;

        ASSERT_ERRNO(json_int64(s, &i), EINVAL);
        ASSERT_ERRNO(json_uint64(z, &u), EINVAL);
        ASSERT_ERRNO(json_double(a, &d), EINVAL);
        ASSERT_ERRNO(json_bool(n, &b), EINVAL);
        ASSERT_NULL(json_string(n));
        ASSERT_EQ(json_string_len(n), 0);
        ASSERT_EQ(json_array_size(s), 0);
        ASSERT_EQ(json_object_size(a), 0);
        ASSERT_NULL(json_object_key(a, 0));
        ASSERT_FALSE(json_is_null(n));
        /* NULL (e.g. from json_get of a missing key) is safe everywhere */
        ASSERT_EQ(json_type(NULL), _JSON_TYPE_INVALID);
        ASSERT_ERRNO(json_int64(NULL, &i), EINVAL);
        ASSERT_ERRNO(json_bool(NULL, &b), EINVAL);
        ASSERT_NULL(json_string(NULL));
        ASSERT_FALSE(json_is_null(NULL));
        ASSERT_NULL(json_get(NULL, "a"));
        ASSERT_NULL(json_array_at(NULL, 0));
        ASSERT_NULL(json_free(NULL));
}

TEST(type_to_string) {
        ASSERT_STREQ(json_type_to_string(JSON_NULL), "null");
        ASSERT_STREQ(json_type_to_string(JSON_BOOL), "boolean");
        ASSERT_STREQ(json_type_to_string(JSON_NUMBER), "number");
        ASSERT_STREQ(json_type_to_string(JSON_STRING), "string");
        ASSERT_STREQ(json_type_to_string(JSON_ARRAY), "array");
        ASSERT_STREQ(json_type_to_string(JSON_OBJECT), "object");
        ASSERT_NULL(json_type_to_string(_JSON_TYPE_MAX));
        ASSERT_NULL(json_type_to_string(_JSON_TYPE_INVALID));
}

TEST(check_keys) {
        static const char *const allowed[] = { "image", "cpus", "memory_bytes", NULL };
        _cleanup_json_ JsonValue *good = parse_ok("{\"image\":\"x\",\"cpus\":1}"),
                                  *bad = parse_ok("{\"cpus\":1,\"cpu\":2}"), *nul = parse_ok("{\"cpus\\u0000x\":1}"),
                                  *arr = parse_ok("[]"), *empty = parse_ok("{}");
        const char *unknown = "unset";

        ASSERT_OK(json_check_keys(good, allowed, &unknown));
        ASSERT_OK(json_check_keys(empty, allowed, NULL));
        ASSERT_ERRNO(json_check_keys(bad, allowed, &unknown), EINVAL);
        ASSERT_STREQ(unknown, "cpu");
        ASSERT_ERRNO(json_check_keys(nul, allowed, &unknown), EINVAL); /* "cpus\0x" is not "cpus" */
        ASSERT_ERRNO(json_check_keys(arr, allowed, &unknown), EINVAL);
        ASSERT_NULL(unknown);
        ASSERT_ERRNO(json_check_keys(good, NULL, NULL), EINVAL);
}

/* ---------------------------------------------------------------- writer */

TEST(writer_object) {
        _cleanup_free_ char *s = NULL;
        JsonWriter w;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "id", "sbx_1");
        json_w_kv_int(&w, "cpus", -2);
        json_w_kv_bool(&w, "ok", true);
        json_w_key(&w, "tags");
        json_w_array_begin(&w);
        json_w_string(&w, "a");
        json_w_uint(&w, UINT64_MAX);
        json_w_null(&w);
        json_w_array_end(&w);
        json_w_kv_string(&w, "none", NULL);
        json_w_key(&w, "raw");
        json_w_raw(&w, "{\"x\":[1,2]}");
        json_w_object_end(&w);
        s = writer_text(&w);
        ASSERT_STREQ(s, "{\"id\":\"sbx_1\",\"cpus\":-2,\"ok\":true,\"tags\":[\"a\",18446744073709551615,null],"
                        "\"none\":null,\"raw\":{\"x\":[1,2]}}");
        ASSERT_NULL(w.buf); /* reset */
        ASSERT_EQ(w.n, 0);
}

TEST(writer_nesting_commas) {
        _cleanup_free_ char *s = NULL;
        JsonWriter w;

        json_w_init(&w);
        json_w_array_begin(&w);
        json_w_array_begin(&w);
        json_w_array_end(&w);
        json_w_array_begin(&w);
        json_w_int(&w, 1);
        json_w_array_begin(&w);
        json_w_array_end(&w);
        json_w_array_end(&w);
        json_w_object_begin(&w);
        json_w_object_end(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "a");
        json_w_object_begin(&w);
        json_w_kv_int(&w, "b", 2);
        json_w_kv_int(&w, "c", 3);
        json_w_object_end(&w);
        json_w_kv_bool(&w, "d", false);
        json_w_object_end(&w);
        json_w_int(&w, INT64_MIN);
        json_w_array_end(&w);
        s = writer_text(&w);
        ASSERT_STREQ(s, "[[],[1,[]],{},{\"a\":{\"b\":2,\"c\":3},\"d\":false},-9223372036854775808]");
}

TEST(writer_escaping) {
        _cleanup_free_ char *s = NULL;
        JsonWriter w;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "q\"k\\", "a\"b\\c/d\b\f\n\r\t\x01\x1f\x7f \xC3\xA9");
        json_w_object_end(&w);
        s = writer_text(&w);
        ASSERT_STREQ(s, "{\"q\\\"k\\\\\":\"a\\\"b\\\\c/d\\b\\f\\n\\r\\t\\u0001\\u001f\x7f \xC3\xA9\"}");
}

TEST(writer_invalid_utf8_replaced) {
        _cleanup_free_ char *s = NULL;
        JsonWriter w;

        json_w_init(&w);
        json_w_array_begin(&w);
        json_w_string_n(&w, "a\xFF" "b", 3);
        json_w_string_n(&w, "\xE2\x82", 2);             /* truncated: two replacement chars */
        json_w_string_n(&w, "\xED\xA0\x80", 3);         /* raw surrogate */
        json_w_string_n(&w, "x\0y", 3);                 /* embedded NUL */
        json_w_string_n(&w, "\xF0\x9F\x98\x80", 4);     /* valid: kept */
        json_w_string_n(&w, NULL, 0);
        json_w_array_end(&w);
        s = writer_text(&w);
        ASSERT_STREQ(s, "[\"a\xEF\xBF\xBD" "b\",\"\xEF\xBF\xBD\xEF\xBF\xBD\",\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\","
                        "\"x\\u0000y\",\"\xF0\x9F\x98\x80\",\"\"]");
        ASSERT_TRUE(utf8_valid(s, strlen(s)));
}

static void check_double_text(double d, const char *want) {
        _cleanup_free_ char *s = NULL;
        JsonWriter w;

        json_w_init(&w);
        json_w_double(&w, d);
        s = writer_text(&w);
        ASSERT_STREQ(s, want);
}

TEST(writer_double) {
        check_double_text(0.1, "0.1");
        check_double_text(1.5, "1.5");
        check_double_text(100, "100");
        check_double_text(-123456789012345, "-123456789012345");
        check_double_text(1e15, "1e+15");
        check_double_text(1e-5, "1e-05");
        check_double_text(-0.0, "-0");
        check_double_text(1e300, "1e+300");
        check_double_text(5e-324, "5e-324");
        check_double_text(0.1 + 0.2, "0.30000000000000004");
        check_double_text(NAN, "null");
        check_double_text(INFINITY, "null");
        check_double_text(-INFINITY, "null");

        /* whatever it prints parses back to the same double */
        for (double d = 1e-300; d < 1e300; d *= 7.3) {
                _cleanup_free_ char *s = NULL;
                _cleanup_json_ JsonValue *v = NULL;
                JsonWriter w;
                double back;

                json_w_init(&w);
                json_w_double(&w, d / 3);
                s = writer_text(&w);
                ASSERT_OK(json_parse(s, strlen(s), &v, NULL, 0));
                ASSERT_OK(json_double(v, &back));
                ASSERT_TRUE(back == d / 3);
        }
}

TEST(writer_depth_limit) {
        _cleanup_free_ char *s = NULL;
        JsonWriter w;

        json_w_init(&w);
        for (unsigned i = 0; i < JSON_DEPTH_MAX; i++)
                json_w_array_begin(&w);
        for (unsigned i = 0; i < JSON_DEPTH_MAX; i++)
                json_w_array_end(&w);
        s = writer_text(&w);
        ASSERT_EQ(strlen(s), 2 * JSON_DEPTH_MAX);

        json_w_init(&w);
        for (unsigned i = 0; i < JSON_DEPTH_MAX + 1; i++)
                json_w_object_begin(&w);
        ASSERT_EQ(w.error, -E2BIG);
        for (unsigned i = 0; i < JSON_DEPTH_MAX + 1; i++)
                json_w_object_end(&w);
        ASSERT_ERRNO(json_w_finish(&w, &s, NULL), E2BIG);
        ASSERT_NULL(w.buf);
}

TEST(writer_misuse) {
        char *s = NULL;
        JsonWriter w;

        json_w_init(&w); /* nothing written */
        ASSERT_ERRNO(json_w_finish(&w, &s, NULL), EINVAL);

        json_w_init(&w); /* two top-level values */
        json_w_int(&w, 1);
        json_w_int(&w, 2);
        ASSERT_ERRNO(json_w_finish(&w, &s, NULL), EINVAL);

        json_w_init(&w); /* end without begin */
        json_w_array_end(&w);
        ASSERT_ERRNO(json_w_finish(&w, &s, NULL), EINVAL);

        json_w_init(&w); /* key at top level */
        json_w_key(&w, "a");
        ASSERT_ERRNO(json_w_finish(&w, &s, NULL), EINVAL);

        json_w_init(&w); /* unclosed container */
        json_w_object_begin(&w);
        ASSERT_ERRNO(json_w_finish(&w, &s, NULL), EINVAL);

        json_w_init(&w); /* dangling key, then key after key, then NULL key */
        json_w_object_begin(&w);
        json_w_key(&w, "a");
        json_w_object_end(&w);
        ASSERT_EQ(w.error, -EINVAL);
        json_w_done(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "a");
        json_w_key(&w, "b");
        ASSERT_EQ(w.error, -EINVAL);
        json_w_done(&w);
        json_w_object_begin(&w);
        json_w_key(&w, NULL);
        ASSERT_ERRNO(json_w_finish(&w, &s, NULL), EINVAL);

        /* sticky: later calls change nothing */
        json_w_init(&w);
        json_w_array_begin(&w);
        json_w_array_end(&w);
        json_w_array_end(&w);
        size_t n = w.n;
        json_w_string(&w, "more");
        json_w_array_begin(&w);
        ASSERT_EQ(w.n, n);
        ASSERT_ERRNO(json_w_finish(&w, &s, NULL), EINVAL);
        ASSERT_NULL(s);
}

TEST(writer_scalar_toplevel_and_reuse) {
        _cleanup_free_ char *a = NULL, *b = NULL;
        JsonWriter w;

        json_w_init(&w);
        json_w_string(&w, "x");
        a = writer_text(&w);
        ASSERT_STREQ(a, "\"x\"");
        /* finish resets the writer: usable again */
        json_w_bool(&w, false);
        b = writer_text(&w);
        ASSERT_STREQ(b, "false");
        json_w_null(&w);
        json_w_done(&w);
        ASSERT_NULL(w.buf);
}

/* ---------------------------------------------------------------- serialise */

TEST(serialize_roundtrip) {
        check_roundtrip(" { \"a\" : [ 1 , -2.50e+3 , true , false , null ] , \"b\" : { } , \"c\" : [ ] } ",
                        "{\"a\":[1,-2.50e+3,true,false,null],\"b\":{},\"c\":[]}");
        check_roundtrip("\"\\u00e9\\/\\u001F\\ud83d\\ude00\"", "\"\xC3\xA9/\\u001f\xF0\x9F\x98\x80\"");
        check_roundtrip("{\"k\\u0000\":\"\\u0000\"}", "{\"k\\u0000\":\"\\u0000\"}");
        check_roundtrip("18446744073709551616000", "18446744073709551616000");
        check_roundtrip("[[[[{\"\":[]}]]]]", "[[[[{\"\":[]}]]]]");
        check_roundtrip("\"\\b\\f\\n\\r\\t\\\"\\\\\"", "\"\\b\\f\\n\\r\\t\\\"\\\\\"");
}

TEST(serialize_max_depth) {
        char buf[2 * JSON_DEPTH_MAX];
        _cleanup_json_ JsonValue *v = NULL;
        _cleanup_free_ char *out = NULL;
        size_t n;

        memset(buf, '[', JSON_DEPTH_MAX);
        memset(buf + JSON_DEPTH_MAX, ']', JSON_DEPTH_MAX);
        ASSERT_OK(json_parse(buf, sizeof buf, &v, NULL, 0));
        ASSERT_OK(json_serialize(v, &out, &n));
        ASSERT_EQ(n, sizeof buf);
        ASSERT_TRUE(memcmp(out, buf, n) == 0);
        ASSERT_ERRNO(json_serialize(NULL, &out, &n), EINVAL);
}

/* ---------------------------------------------------------------- UTF-8 */

TEST(utf8_validity) {
        ASSERT_TRUE(utf8_valid("", 0));
        ASSERT_TRUE(utf8_valid(NULL, 0));
        ASSERT_TRUE(utf8_valid("plain ascii", 11));
        ASSERT_TRUE(utf8_valid("a\0b", 3));
        ASSERT_TRUE(utf8_valid("\xC2\x80\xDF\xBF", 4));               /* U+0080, U+07FF */
        ASSERT_TRUE(utf8_valid("\xE0\xA0\x80\xEF\xBF\xBF", 6));       /* U+0800, U+FFFF */
        ASSERT_TRUE(utf8_valid("\xED\x9F\xBF\xEE\x80\x80", 6));       /* around the surrogates */
        ASSERT_TRUE(utf8_valid("\xF0\x90\x80\x80\xF4\x8F\xBF\xBF", 8)); /* U+10000, U+10FFFF */
        ASSERT_FALSE(utf8_valid("\xC0\xAF", 2));
        ASSERT_FALSE(utf8_valid("\xE0\x9F\xBF", 3));
        ASSERT_FALSE(utf8_valid("\xED\xA0\x80", 3));
        ASSERT_FALSE(utf8_valid("\xED\xBF\xBF", 3));
        ASSERT_FALSE(utf8_valid("\xF0\x8F\xBF\xBF", 4));
        ASSERT_FALSE(utf8_valid("\xF4\x90\x80\x80", 4));
        ASSERT_FALSE(utf8_valid("\xF8\x88\x80\x80\x80", 5));
        ASSERT_FALSE(utf8_valid("\xC3", 1));
        ASSERT_FALSE(utf8_valid("\xC3\xA9", 1)); /* length bounds the read */
        ASSERT_FALSE(utf8_valid("\xC3\x28", 2));
        ASSERT_FALSE(utf8_valid("\xBF", 1));
}

/* ---------------------------------------------------------------- base64 */

TEST(base64_rfc4648_vectors) {
        static const char *const vec[][2] = {
                { "", "" },         { "f", "Zg==" },         { "fo", "Zm8=" },         { "foo", "Zm9v" },
                { "foob", "Zm9vYg==" }, { "fooba", "Zm9vYmE=" }, { "foobar", "Zm9vYmFy" },
        };

        for (size_t i = 0; i < ELEMENTSOF(vec); i++) {
                _cleanup_free_ char *enc = NULL;
                _cleanup_free_ void *dec = NULL;
                size_t n, m;

                ASSERT_OK(base64_encode(vec[i][0], strlen(vec[i][0]), &enc, &n));
                ASSERT_STREQ(enc, vec[i][1]);
                ASSERT_EQ(n, strlen(vec[i][1]));
                ASSERT_OK(base64_decode(vec[i][1], strlen(vec[i][1]), &dec, &m));
                ASSERT_EQ(m, strlen(vec[i][0]));
                ASSERT_STREQ((const char *) dec, vec[i][0]); /* NUL-terminated */
        }
}

TEST(base64_unpadded_and_alphabet) {
        _cleanup_free_ void *a = NULL, *b = NULL, *c = NULL;
        size_t n;

        ASSERT_OK(base64_decode("Zg", 2, &a, &n));
        ASSERT_EQ(n, 1);
        ASSERT_STREQ((char *) a, "f");
        ASSERT_OK(base64_decode("Zm9vYmE", 7, &b, &n));
        ASSERT_EQ(n, 5);
        ASSERT_STREQ((char *) b, "fooba");
        ASSERT_OK(base64_decode("+/+/", 4, &c, &n));
        ASSERT_EQ(n, 3);
        ASSERT_TRUE(memcmp(c, "\xFB\xFF\xBF", 3) == 0);
}

TEST(base64_rejects) {
        static const char *const bad[] = {
                "Z", "Zg=", "Zg===", "=", "==", "====", "A===", "Zg==Zg==", "Zm9v!", "Zm 9v", "Zm9v\n", "Zh==",
                "Zm9=", "Zm-_", "Z=g=",
        };
        void *out = NULL;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                size_t n = 99;
                if (base64_decode(bad[i], strlen(bad[i]), &out, &n) != -EINVAL)
                        test_fail(__FILE__, __LINE__, "base64_decode(\"%s\") not rejected", bad[i]);
                ASSERT_NULL(out);
                ASSERT_EQ(n, 99);
        }
        ASSERT_ERRNO(base64_decode("Zm\0v", 4, &out, NULL), EINVAL);
        ASSERT_ERRNO(base64_decode(NULL, 4, &out, NULL), EINVAL);
}

TEST(base64_binary_roundtrip) {
        uint8_t data[300];

        for (size_t i = 0; i < sizeof data; i++)
                data[i] = (uint8_t) (i * 37 + 11);
        for (size_t len = 0; len <= sizeof data; len++) {
                _cleanup_free_ char *enc = NULL;
                _cleanup_free_ void *dec = NULL;
                size_t n, m;

                ASSERT_OK(base64_encode(data, len, &enc, &n));
                ASSERT_EQ(n, (len + 2) / 3 * 4);
                ASSERT_EQ(n % 4, 0);
                ASSERT_OK(base64_decode(enc, n, &dec, &m));
                ASSERT_EQ(m, len);
                ASSERT_TRUE(len == 0 || memcmp(dec, data, len) == 0);
        }
}
