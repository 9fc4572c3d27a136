/* SPDX-License-Identifier: MIT */
/* The JSON writer (JsonWriter of json.h): compact text, strings escaped and
 * checked as UTF-8, nesting bounded by JSON_DEPTH_MAX; and a parsed tree
 * written back. An error sticks: every later call does nothing and
 * json_w_finish returns it. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "alloc-util.h"
#include "json-internal.h"

void json_w_init(JsonWriter *w) {
        *w = (JsonWriter){};
}

void json_w_done(JsonWriter *w) {
        free(w->buf);
        json_w_init(w);
}

static void w_append(JsonWriter *w, const char *s, size_t k) {
        if (w->error)
                return;
        if (k > SIZE_MAX - w->n - 1 || GREEDY_REALLOC(w->buf, w->allocated, w->n + k + 1) < 0) {
                w->error = -ENOMEM;
                return;
        }
        memcpy(w->buf + w->n, s, k);
        w->n += k;
        w->buf[w->n] = 0;
}

static void w_fail(JsonWriter *w, int error) {
        if (!w->error)
                w->error = error;
}

/* Writes the ',' a new value or key needs; false if the writer has failed. */
static bool w_prefix(JsonWriter *w) {
        uint64_t bit;

        if (w->error)
                return false;
        if (w->after_key) {
                w->after_key = false;
                return true;
        }
        if (w->depth == 0) {
                if (w->n > 0)
                        w_fail(w, -EINVAL); /* a second top-level value */
                return !w->error;
        }
        bit = UINT64_C(1) << (w->depth - 1);
        if (w->first_bits & bit)
                w->first_bits &= ~bit;
        else
                w_append(w, ",", 1);
        return !w->error;
}

static void w_begin(JsonWriter *w, char c) {
        if (!w_prefix(w))
                return;
        if (w->depth >= JSON_DEPTH_MAX) {
                w_fail(w, -E2BIG);
                return;
        }
        w_append(w, &c, 1);
        w->depth++;
        w->first_bits |= UINT64_C(1) << (w->depth - 1);
}

static void w_end(JsonWriter *w, char c) {
        if (w->error)
                return;
        if (w->depth == 0 || w->after_key) {
                w_fail(w, -EINVAL);
                return;
        }
        w->depth--;
        w_append(w, &c, 1);
}

void json_w_object_begin(JsonWriter *w) {
        w_begin(w, '{');
}

void json_w_object_end(JsonWriter *w) {
        w_end(w, '}');
}

void json_w_array_begin(JsonWriter *w) {
        w_begin(w, '[');
}

void json_w_array_end(JsonWriter *w) {
        w_end(w, ']');
}

/* Appends p as the inside of a JSON string, invalid UTF-8 replaced by U+FFFD. */
static void w_escaped(JsonWriter *w, const char *p, size_t n) {
        static const char hex[] = "0123456789abcdef";
        size_t run = 0; /* bytes before i that need no escaping */

        for (size_t i = 0; i < n && !w->error;) {
                unsigned char c = (unsigned char) p[i];
                const char *e;
                char esc[6];
                size_t l, el = 2;

                if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
                        i++;
                        run++;
                        continue;
                }
                if (c >= 0x80) {
                        l = utf8_char_len((const uint8_t *) p + i, n - i);
                        if (l > 0) {
                                i += l;
                                run += l;
                                continue;
                        }
                }
                w_append(w, p + i - run, run);
                run = 0;
                if (c >= 0x80) { /* invalid UTF-8: one U+FFFD per bad byte */
                        w_append(w, "\xEF\xBF\xBD", 3);
                        i++;
                        continue;
                }
                esc[0] = '\\';
                e = memchr(json_escape_values, c, STRLEN(json_escape_values));
                if (e)
                        esc[1] = json_escape_chars[e - json_escape_values];
                else {
                        esc[1] = 'u';
                        esc[2] = '0';
                        esc[3] = '0';
                        esc[4] = hex[c >> 4];
                        esc[5] = hex[c & 0xF];
                        el = 6;
                }
                w_append(w, esc, el);
                i++;
        }
        w_append(w, p + n - run, run);
}

static void w_string(JsonWriter *w, const char *p, size_t n) {
        w_append(w, "\"", 1);
        w_escaped(w, p, n);
        w_append(w, "\"", 1);
}

void json_w_key(JsonWriter *w, const char *key) {
        if (w->error)
                return;
        if (!key || w->depth == 0 || w->after_key) {
                w_fail(w, -EINVAL);
                return;
        }
        if (!w_prefix(w))
                return;
        w_string(w, key, strlen(key));
        w_append(w, ":", 1);
        w->after_key = true;
}

void json_w_string_n(JsonWriter *w, const char *p, size_t n) {
        if (!p && n > 0) {
                w_fail(w, -EINVAL);
                return;
        }
        if (w_prefix(w))
                w_string(w, p ?: "", n);
}

void json_w_string(JsonWriter *w, const char *s) {
        if (!s)
                json_w_null(w);
        else
                json_w_string_n(w, s, strlen(s));
}

static void w_raw_n(JsonWriter *w, const char *p, size_t n) {
        if (w_prefix(w))
                w_append(w, p, n);
}

void json_w_int(JsonWriter *w, int64_t v) {
        char buf[32];
        int k = snprintf(buf, sizeof buf, "%" PRIi64, v);
        w_raw_n(w, buf, (size_t) k);
}

void json_w_uint(JsonWriter *w, uint64_t v) {
        char buf[32];
        int k = snprintf(buf, sizeof buf, "%" PRIu64, v);
        w_raw_n(w, buf, (size_t) k);
}

void json_w_double(JsonWriter *w, double v) {
        char buf[40];
        int k = 0;

        if (!isfinite(v)) {
                json_w_null(w);
                return;
        }
        if (fabs(v) < 1e15 && v == (double) (int64_t) v) /* integral: plain digits, exact */
                k = snprintf(buf, sizeof buf, "%.0f", v);
        else /* shortest %g text that reads back as the same double; %.17g always does */
                for (int prec = 1; prec <= 17; prec++) {
                        k = snprintf(buf, sizeof buf, "%.*g", prec, v);
                        if (strtod(buf, NULL) == v)
                                break;
                }
        w_raw_n(w, buf, (size_t) k);
}

void json_w_bool(JsonWriter *w, bool v) {
        if (v)
                w_raw_n(w, "true", STRLEN("true"));
        else
                w_raw_n(w, "false", STRLEN("false"));
}

void json_w_null(JsonWriter *w) {
        w_raw_n(w, "null", STRLEN("null"));
}

void json_w_raw(JsonWriter *w, const char *json) {
        if (!json)
                json_w_null(w);
        else
                w_raw_n(w, json, strlen(json));
}

void json_w_kv_string(JsonWriter *w, const char *key, const char *s) {
        json_w_key(w, key);
        json_w_string(w, s);
}

void json_w_kv_int(JsonWriter *w, const char *key, int64_t v) {
        json_w_key(w, key);
        json_w_int(w, v);
}

void json_w_kv_bool(JsonWriter *w, const char *key, bool v) {
        json_w_key(w, key);
        json_w_bool(w, v);
}

int json_w_finish(JsonWriter *w, char **ret, size_t *ret_len) {
        int r = w->error;

        if (r == 0 && (w->depth > 0 || w->after_key || w->n == 0))
                r = -EINVAL; /* unclosed container, dangling key, or nothing written */
        if (r == 0 && !ret)
                r = -EINVAL;
        if (r < 0) {
                json_w_done(w);
                return r;
        }
        if (ret_len)
                *ret_len = w->n;
        *ret = TAKE_PTR(w->buf);
        json_w_init(w);
        return 0;
}

static void w_value(JsonWriter *w, const JsonValue *v) {
        switch (v->type) {
        case JSON_NULL:
                json_w_null(w);
                break;
        case JSON_BOOL:
                json_w_bool(w, v->boolean);
                break;
        case JSON_NUMBER:
                w_raw_n(w, v->text, v->n);
                break;
        case JSON_STRING:
                json_w_string_n(w, v->text, v->n);
                break;
        case JSON_ARRAY:
                json_w_array_begin(w);
                for (size_t i = 0; i < v->n && !w->error; i++)
                        w_value(w, v->items[i]);
                json_w_array_end(w);
                break;
        case JSON_OBJECT:
                json_w_object_begin(w);
                for (size_t i = 0; i < v->n && !w->error; i++) {
                        const JsonValue *k = v->items[2 * i];
                        /* Keys may embed NUL, so not json_w_key(). */
                        if (w_prefix(w)) {
                                w_string(w, k->text, k->n);
                                w_append(w, ":", 1);
                                w->after_key = true;
                        }
                        w_value(w, v->items[2 * i + 1]);
                }
                json_w_object_end(w);
                break;
        default:
                w_fail(w, -EINVAL);
        }
}

int json_serialize(const JsonValue *v, char **ret, size_t *ret_len) {
        JsonWriter w;

        if (!v || !ret)
                return -EINVAL;
        json_w_init(&w);
        w_value(&w, v);
        return json_w_finish(&w, ret, ret_len);
}
