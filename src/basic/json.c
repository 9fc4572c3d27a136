/* SPDX-License-Identifier: MIT */
/* Strict RFC 8259 parser into a read-only tree, and UTF-8 validation (the
 * writer is json-writer.c, base64 base64.c). Everything that reads hostile bytes works on (pointer, length), is
 * linear in the input (large objects are checked for duplicate keys by sorting,
 * not pairwise), and bounded by the limits below.
 *
 * Numbers are kept as their source text, so 64-bit integers convert exactly.
 * Number text is produced and read with the "C" numeric locale in mind: the
 * daemon never calls setlocale(LC_NUMERIC, ...). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "alloc-util.h"
#include "json-internal.h"

/* Longest number text accepted (digits, sign, '.', exponent). Longer is hostile. */
#define JSON_NUMBER_TEXT_MAX 1024U
/* Objects with more keys than this are checked for duplicates by sorting. */
#define JSON_DUP_LINEAR_MAX 16U
/* Exponents are clamped here; any larger magnitude is out of every range anyway. */
#define JSON_EXPONENT_CLAMP 100000L

/* ---------------------------------------------------------------- UTF-8 */

/* Length of the strict UTF-8 sequence at s (at most n bytes), 0 if invalid. */
size_t utf8_char_len(const uint8_t *s, size_t n) {
        uint8_t c = s[0];

        if (c < 0x80)
                return 1;
        if (c < 0xC2) /* continuation byte or overlong 2-byte lead */
                return 0;
        if (c < 0xE0) {
                if (n < 2 || (s[1] & 0xC0) != 0x80)
                        return 0;
                return 2;
        }
        if (c < 0xF0) {
                if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80)
                        return 0;
                if (c == 0xE0 && s[1] < 0xA0) /* overlong */
                        return 0;
                if (c == 0xED && s[1] >= 0xA0) /* UTF-16 surrogate */
                        return 0;
                return 3;
        }
        if (c < 0xF5) {
                if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
                        return 0;
                if (c == 0xF0 && s[1] < 0x90) /* overlong */
                        return 0;
                if (c == 0xF4 && s[1] >= 0x90) /* above U+10FFFF */
                        return 0;
                return 4;
        }
        return 0;
}

bool utf8_valid(const char *p, size_t n) {
        const uint8_t *s = (const uint8_t *) p;

        if (!p)
                return n == 0;
        for (size_t i = 0; i < n;) {
                size_t k;

                if (s[i] < 0x80) {
                        i++;
                        continue;
                }
                k = utf8_char_len(s + i, n - i);
                if (k == 0)
                        return false;
                i += k;
        }
        return true;
}

static size_t utf8_encode(uint32_t cp, char *out) {
        if (cp < 0x80) {
                out[0] = (char) cp;
                return 1;
        }
        if (cp < 0x800) {
                out[0] = (char) (0xC0 | (cp >> 6));
                out[1] = (char) (0x80 | (cp & 0x3F));
                return 2;
        }
        if (cp < 0x10000) {
                out[0] = (char) (0xE0 | (cp >> 12));
                out[1] = (char) (0x80 | ((cp >> 6) & 0x3F));
                out[2] = (char) (0x80 | (cp & 0x3F));
                return 3;
        }
        out[0] = (char) (0xF0 | (cp >> 18));
        out[1] = (char) (0x80 | ((cp >> 12) & 0x3F));
        out[2] = (char) (0x80 | ((cp >> 6) & 0x3F));
        out[3] = (char) (0x80 | (cp & 0x3F));
        return 4;
}

/* ---------------------------------------------------------------- tree */

static const char *const json_type_table[_JSON_TYPE_MAX] = {
        [JSON_NULL] = "null",
        [JSON_BOOL] = "boolean",
        [JSON_NUMBER] = "number",
        [JSON_STRING] = "string",
        [JSON_ARRAY] = "array",
        [JSON_OBJECT] = "object",
};

const char *json_type_to_string(JsonType t) {
        if (t < 0 || t >= _JSON_TYPE_MAX)
                return NULL;
        return json_type_table[t];
}

static JsonValue *json_new(JsonType type, size_t text_len) {
        JsonValue *v;

        if (text_len > SIZE_MAX - sizeof(JsonValue) - 1)
                return NULL;
        v = malloc(sizeof(JsonValue) + text_len + 1);
        if (!v)
                return NULL;
        *v = (JsonValue){ .type = type };
        v->text[0] = 0;
        return v;
}

static void json_items_free(JsonValue **items, size_t n) {
        for (size_t i = 0; i < n; i++)
                json_free(items[i]);
        free(items);
}

JsonValue *json_free(JsonValue *v) {
        if (!v)
                return NULL;
        if (v->type == JSON_ARRAY)
                json_items_free(v->items, v->n);
        else if (v->type == JSON_OBJECT)
                json_items_free(v->items, 2 * v->n);
        free(v);
        return NULL;
}

JsonType json_type(const JsonValue *v) {
        return v ? v->type : _JSON_TYPE_INVALID;
}

static bool key_eq(const JsonValue *k, const char *key, size_t len) {
        return k->n == len && memcmp(k->text, key, len) == 0;
}

JsonValue *json_get(const JsonValue *obj, const char *key) {
        size_t len;

        if (!obj || obj->type != JSON_OBJECT || !key)
                return NULL;
        len = strlen(key);
        for (size_t i = 0; i < obj->n; i++)
                if (key_eq(obj->items[2 * i], key, len))
                        return obj->items[2 * i + 1];
        return NULL;
}

size_t json_object_size(const JsonValue *obj) {
        return obj && obj->type == JSON_OBJECT ? obj->n : 0;
}

const char *json_object_key(const JsonValue *obj, size_t i) {
        if (!obj || obj->type != JSON_OBJECT || i >= obj->n)
                return NULL;
        return obj->items[2 * i]->text;
}

JsonValue *json_object_value(const JsonValue *obj, size_t i) {
        if (!obj || obj->type != JSON_OBJECT || i >= obj->n)
                return NULL;
        return obj->items[2 * i + 1];
}

int json_check_keys(const JsonValue *obj, const char *const *allowed, const char **ret_unknown) {
        if (!obj || obj->type != JSON_OBJECT) {
                if (ret_unknown)
                        *ret_unknown = NULL;
                return -EINVAL;
        }
        for (size_t i = 0; i < obj->n; i++) {
                const JsonValue *k = obj->items[2 * i];
                bool found = false;

                for (const char *const *a = allowed; a && *a; a++)
                        if (key_eq(k, *a, strlen(*a))) {
                                found = true;
                                break;
                        }
                if (!found) {
                        if (ret_unknown)
                                *ret_unknown = k->text;
                        return -EINVAL;
                }
        }
        return 0;
}

size_t json_array_size(const JsonValue *arr) {
        return arr && arr->type == JSON_ARRAY ? arr->n : 0;
}

JsonValue *json_array_at(const JsonValue *arr, size_t i) {
        if (!arr || arr->type != JSON_ARRAY || i >= arr->n)
                return NULL;
        return arr->items[i];
}

const char *json_string(const JsonValue *v) {
        return v && v->type == JSON_STRING ? v->text : NULL;
}

size_t json_string_len(const JsonValue *v) {
        return v && v->type == JSON_STRING ? v->n : 0;
}

int json_bool(const JsonValue *v, bool *ret) {
        if (!v || v->type != JSON_BOOL)
                return -EINVAL;
        if (ret)
                *ret = v->boolean;
        return 0;
}

bool json_is_null(const JsonValue *v) {
        return v && v->type == JSON_NULL;
}

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

/* Exact value of a number's text as sign + 64-bit magnitude; -ERANGE if it is
 * not an integer or its magnitude does not fit. The text was validated by the
 * parser, so the grammar is known to hold. */
static int number_to_magnitude(const JsonValue *v, bool *ret_negative, uint64_t *ret_mag) {
        const char *s = v->text;
        char digits[JSON_NUMBER_TEXT_MAX];
        size_t nd = 0, first, last, frac = 0;
        long exp = 0;
        bool negative = false;
        uint64_t mag = 0;

        if (*s == '-') {
                negative = true;
                s++;
        }
        for (; is_digit(*s); s++)
                digits[nd++] = *s;
        if (*s == '.')
                for (s++; is_digit(*s); s++, frac++)
                        digits[nd++] = *s;
        if (*s == 'e' || *s == 'E') {
                bool eneg = false;

                s++;
                if (*s == '+' || *s == '-')
                        eneg = *s++ == '-';
                for (; is_digit(*s); s++)
                        if (exp < JSON_EXPONENT_CLAMP)
                                exp = exp * 10 + (*s - '0');
                if (eneg)
                        exp = -exp;
        }

        for (first = 0; first < nd && digits[first] == '0'; first++)
                ;
        if (first == nd) { /* zero, whatever the exponent */
                *ret_negative = false;
                *ret_mag = 0;
                return 0;
        }
        for (last = nd; digits[last - 1] == '0'; last--)
                ;
        /* value = digits[first..last) * 10^exp */
        exp = exp - (long) frac + (long) (nd - last);
        if (exp < 0 || (long) (last - first) + exp > 20)
                return -ERANGE;
        for (size_t i = first; i < last; i++) {
                unsigned d = (unsigned) (digits[i] - '0');
                if (mag > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                mag = mag * 10 + d;
        }
        for (long i = 0; i < exp; i++) {
                if (mag > UINT64_MAX / 10)
                        return -ERANGE;
                mag *= 10;
        }
        *ret_negative = negative;
        *ret_mag = mag;
        return 0;
}

int json_int64(const JsonValue *v, int64_t *ret) {
        bool negative;
        uint64_t mag;
        int64_t x;
        int r;

        if (!v || v->type != JSON_NUMBER)
                return -EINVAL;
        r = number_to_magnitude(v, &negative, &mag);
        if (r < 0)
                return r;
        if (negative) {
                if (mag > (uint64_t) INT64_MAX + 1)
                        return -ERANGE;
                x = mag == (uint64_t) INT64_MAX + 1 ? INT64_MIN : -(int64_t) mag;
        } else {
                if (mag > INT64_MAX)
                        return -ERANGE;
                x = (int64_t) mag;
        }
        if (ret)
                *ret = x;
        return 0;
}

int json_uint64(const JsonValue *v, uint64_t *ret) {
        bool negative;
        uint64_t mag;
        int r;

        if (!v || v->type != JSON_NUMBER)
                return -EINVAL;
        r = number_to_magnitude(v, &negative, &mag);
        if (r < 0)
                return r;
        if (negative && mag != 0)
                return -ERANGE;
        if (ret)
                *ret = mag;
        return 0;
}

int json_double(const JsonValue *v, double *ret) {
        char *end;
        double d;

        if (!v || v->type != JSON_NUMBER)
                return -EINVAL;
        d = strtod(v->text, &end);
        if (end != v->text + v->n)
                return -EINVAL; /* only if the numeric locale is not "C" */
        if (!isfinite(d))
                return -ERANGE; /* overflow; underflow rounds to 0 or a subnormal */
        if (ret)
                *ret = d;
        return 0;
}

/* ---------------------------------------------------------------- parser */

typedef struct JsonParser {
        const char *p;
        size_t n, i;
        char *errbuf;
        size_t errbuf_size;
} JsonParser;

_printf_(4, 5) static int parse_error(JsonParser *ps, int r, size_t at, const char *fmt, ...) {
        va_list ap;
        int k;

        if (!ps->errbuf || ps->errbuf_size == 0)
                return r;
        va_start(ap, fmt);
        k = vsnprintf(ps->errbuf, ps->errbuf_size, fmt, ap);
        va_end(ap);
        if (k >= 0 && (size_t) k < ps->errbuf_size)
                (void) snprintf(ps->errbuf + k, ps->errbuf_size - (size_t) k, " at byte %zu", at);
        return r;
}

static int parse_error_oom(JsonParser *ps) {
        return parse_error(ps, -ENOMEM, ps->i, "out of memory");
}

/* "unexpected 'x'", "unexpected byte 0x01" or "unexpected end of input", at ps->i. */
static int parse_unexpected(JsonParser *ps, const char *what) {
        unsigned char c;

        if (ps->i >= ps->n)
                return parse_error(ps, -EINVAL, ps->i, "unexpected end of input%s%s", what ? ", " : "", strempty(what));
        c = (unsigned char) ps->p[ps->i];
        if (c > 0x20 && c < 0x7F)
                return parse_error(ps, -EINVAL, ps->i, "unexpected '%c'%s%s", c, what ? ", " : "", strempty(what));
        return parse_error(ps, -EINVAL, ps->i, "unexpected byte 0x%02x%s%s", c, what ? ", " : "", strempty(what));
}

static void skip_ws(JsonParser *ps) {
        while (ps->i < ps->n) {
                char c = ps->p[ps->i];
                if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
                        return;
                ps->i++;
        }
}

static int hex4(const char *s, uint32_t *ret) {
        uint32_t v = 0;

        for (size_t i = 0; i < 4; i++) {
                char c = s[i];
                v <<= 4;
                if (c >= '0' && c <= '9')
                        v |= (uint32_t) (c - '0');
                else if (c >= 'a' && c <= 'f')
                        v |= (uint32_t) (c - 'a' + 10);
                else if (c >= 'A' && c <= 'F')
                        v |= (uint32_t) (c - 'A' + 10);
                else
                        return -EINVAL;
        }
        *ret = v;
        return 0;
}


/* Parses the string starting at the '"' at ps->i into a JSON_STRING node. */
static int parse_string(JsonParser *ps, JsonValue **ret) {
        _cleanup_(json_freep) JsonValue *v = NULL;
        size_t start = ps->i + 1, end, k, o = 0;
        const char *p = ps->p;

        /* Find the closing quote; an escape always covers the next byte. */
        for (end = start; end < ps->n && p[end] != '"'; end++)
                if (p[end] == '\\')
                        end++;
        if (end >= ps->n)
                return parse_error(ps, -EINVAL, ps->i, "unterminated string");

        /* Escapes only shrink, so the raw length bounds the decoded one. */
        v = json_new(JSON_STRING, end - start);
        if (!v)
                return parse_error_oom(ps);

        for (k = start; k < end;) {
                unsigned char c = (unsigned char) p[k];
                const char *e;

                if (c < 0x20)
                        return parse_error(ps, -EINVAL, k, "unescaped control character 0x%02x in string", c);
                if (c >= 0x80) {
                        size_t l = utf8_char_len((const uint8_t *) p + k, end - k);
                        if (l == 0)
                                return parse_error(ps, -EINVAL, k, "invalid UTF-8 in string");
                        memcpy(v->text + o, p + k, l);
                        o += l;
                        k += l;
                        continue;
                }
                if (c != '\\') {
                        v->text[o++] = (char) c;
                        k++;
                        continue;
                }

                /* k + 1 < end: the scan above never stops on a lone backslash. */
                if (p[k + 1] == 'u') {
                        uint32_t cp, lo;

                        if (end - k < 6 || hex4(p + k + 2, &cp) < 0)
                                return parse_error(ps, -EINVAL, k, "invalid \\u escape");
                        if (cp >= 0xDC00 && cp <= 0xDFFF)
                                return parse_error(ps, -EINVAL, k, "lone low surrogate \\u%04" PRIX32, cp);
                        if (cp >= 0xD800 && cp <= 0xDBFF) {
                                if (end - k < 12 || p[k + 6] != '\\' || p[k + 7] != 'u' ||
                                    hex4(p + k + 8, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF)
                                        return parse_error(ps, -EINVAL, k, "lone high surrogate \\u%04" PRIX32, cp);
                                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                                k += 6;
                        }
                        o += utf8_encode(cp, v->text + o);
                        k += 6;
                        continue;
                }
                e = p[k + 1] ? strchr(json_escape_chars, p[k + 1]) : NULL;
                if (!e) {
                        ps->i = k + 1;
                        return parse_unexpected(ps, "invalid escape");
                }
                v->text[o++] = json_escape_values[e - json_escape_chars];
                k += 2;
        }

        if (o > JSON_STRING_MAX)
                return parse_error(ps, -E2BIG, ps->i, "string longer than %u bytes", JSON_STRING_MAX);
        v->text[o] = 0;
        v->n = o;
        ps->i = end + 1;
        *ret = TAKE_PTR(v);
        return 0;
}

static int parse_number(JsonParser *ps, JsonValue **ret) {
        const char *p = ps->p;
        size_t start = ps->i, i = ps->i, n = ps->n;
        JsonValue *v;

        if (i < n && p[i] == '-')
                i++;
        if (i >= n || !is_digit(p[i])) {
                ps->i = i;
                return parse_unexpected(ps, "expected digit");
        }
        if (p[i] == '0') {
                i++;
                if (i < n && is_digit(p[i]))
                        return parse_error(ps, -EINVAL, start, "leading zero in number");
        } else
                while (i < n && is_digit(p[i]))
                        i++;
        if (i < n && p[i] == '.') {
                i++;
                if (i >= n || !is_digit(p[i])) {
                        ps->i = i;
                        return parse_unexpected(ps, "expected digit after '.'");
                }
                while (i < n && is_digit(p[i]))
                        i++;
        }
        if (i < n && (p[i] == 'e' || p[i] == 'E')) {
                i++;
                if (i < n && (p[i] == '+' || p[i] == '-'))
                        i++;
                if (i >= n || !is_digit(p[i])) {
                        ps->i = i;
                        return parse_unexpected(ps, "expected digit in exponent");
                }
                while (i < n && is_digit(p[i]))
                        i++;
        }
        if (i - start > JSON_NUMBER_TEXT_MAX)
                return parse_error(ps, -E2BIG, start, "number longer than %u characters", JSON_NUMBER_TEXT_MAX);

        v = json_new(JSON_NUMBER, i - start);
        if (!v)
                return parse_error_oom(ps);
        memcpy(v->text, p + start, i - start);
        v->text[i - start] = 0;
        v->n = i - start;
        ps->i = i;
        *ret = v;
        return 0;
}

static int parse_literal(JsonParser *ps, const char *word, JsonType type, bool b, JsonValue **ret) {
        size_t l = strlen(word);
        JsonValue *v;

        if (ps->n - ps->i < l || memcmp(ps->p + ps->i, word, l) != 0)
                return parse_error(ps, -EINVAL, ps->i, "invalid literal, expected '%s'", word);
        v = json_new(type, 0);
        if (!v)
                return parse_error_oom(ps);
        v->boolean = b;
        ps->i += l;
        *ret = v;
        return 0;
}

static int parse_value(JsonParser *ps, unsigned depth, JsonValue **ret);

typedef struct ItemList {
        JsonValue **items;
        size_t n, allocated;
} ItemList;

static void item_list_done(ItemList *l) {
        json_items_free(l->items, l->n);
}

static int item_list_push(ItemList *l, JsonValue *v) {
        if (GREEDY_REALLOC(l->items, l->allocated, l->n + 1) < 0) {
                json_free(v);
                return -ENOMEM;
        }
        l->items[l->n++] = v;
        return 0;
}

static int key_cmp(const JsonValue *a, const JsonValue *b) {
        int c = memcmp(a->text, b->text, MIN(a->n, b->n));
        if (c != 0)
                return c;
        return a->n < b->n ? -1 : a->n > b->n;
}

/* True if two of the n keys (items[0], items[2], ...) are equal. Bottom-up
 * merge sort of key indices: O(n log n) whatever the input. */
static int keys_have_duplicate(JsonValue *const *items, size_t n, bool *ret) {
        _cleanup_free_ size_t *a = new(size_t, n), *b = new(size_t, n);

        if (!a || !b)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                a[i] = 2 * i;
        for (size_t w = 1; w < n; w *= 2) {
                for (size_t lo = 0; lo < n; lo += 2 * w) {
                        size_t mid = MIN(lo + w, n), hi = MIN(lo + 2 * w, n), x = lo, y = mid, o = lo;
                        while (x < mid && y < hi)
                                b[o++] = key_cmp(items[a[y]], items[a[x]]) < 0 ? a[y++] : a[x++];
                        while (x < mid)
                                b[o++] = a[x++];
                        while (y < hi)
                                b[o++] = a[y++];
                }
                size_t *t = a;
                a = b;
                b = t;
        }
        for (size_t i = 1; i < n; i++)
                if (key_cmp(items[a[i - 1]], items[a[i]]) == 0) {
                        *ret = true;
                        return 0;
                }
        *ret = false;
        return 0;
}

static int parse_array(JsonParser *ps, unsigned depth, JsonValue **ret) {
        _cleanup_(item_list_done) ItemList l = {};
        JsonValue *v;
        int r;

        ps->i++; /* '[' */
        skip_ws(ps);
        if (ps->i < ps->n && ps->p[ps->i] == ']')
                goto done;
        for (;;) {
                r = parse_value(ps, depth, &v);
                if (r < 0)
                        return r;
                if (item_list_push(&l, v) < 0)
                        return parse_error_oom(ps);
                skip_ws(ps);
                if (ps->i < ps->n && ps->p[ps->i] == ']')
                        break;
                if (ps->i >= ps->n || ps->p[ps->i] != ',')
                        return parse_unexpected(ps, "expected ',' or ']'");
                ps->i++;
                skip_ws(ps);
                if (ps->i < ps->n && ps->p[ps->i] == ']')
                        return parse_error(ps, -EINVAL, ps->i, "trailing comma in array");
        }
done:
        ps->i++; /* ']' */
        v = json_new(JSON_ARRAY, 0);
        if (!v)
                return parse_error_oom(ps);
        v->items = TAKE_PTR(l.items);
        v->n = l.n;
        l.n = 0;
        *ret = v;
        return 0;
}

static int parse_object(JsonParser *ps, unsigned depth, JsonValue **ret) {
        _cleanup_(item_list_done) ItemList l = {};
        size_t start = ps->i;
        JsonValue *k, *v;
        int r;

        ps->i++; /* '{' */
        skip_ws(ps);
        if (ps->i < ps->n && ps->p[ps->i] == '}')
                goto done;
        for (;;) {
                size_t key_at = ps->i;

                if (ps->i >= ps->n || ps->p[ps->i] != '"')
                        return parse_unexpected(ps, "expected string key");
                r = parse_string(ps, &k);
                if (r < 0)
                        return r;
                if (item_list_push(&l, k) < 0)
                        return parse_error_oom(ps);
                if (l.n / 2 < JSON_DUP_LINEAR_MAX)
                        for (size_t i = 0; i + 1 < l.n; i += 2)
                                if (key_cmp(l.items[i], k) == 0)
                                        return parse_error(ps, -EINVAL, key_at, "duplicate key");

                skip_ws(ps);
                if (ps->i >= ps->n || ps->p[ps->i] != ':')
                        return parse_unexpected(ps, "expected ':'");
                ps->i++;
                r = parse_value(ps, depth, &v);
                if (r < 0)
                        return r;
                if (item_list_push(&l, v) < 0)
                        return parse_error_oom(ps);

                skip_ws(ps);
                if (ps->i < ps->n && ps->p[ps->i] == '}')
                        break;
                if (ps->i >= ps->n || ps->p[ps->i] != ',')
                        return parse_unexpected(ps, "expected ',' or '}'");
                ps->i++;
                skip_ws(ps);
                if (ps->i < ps->n && ps->p[ps->i] == '}')
                        return parse_error(ps, -EINVAL, ps->i, "trailing comma in object");
        }
        if (l.n / 2 > JSON_DUP_LINEAR_MAX) {
                bool dup;
                if (keys_have_duplicate(l.items, l.n / 2, &dup) < 0)
                        return parse_error_oom(ps);
                if (dup)
                        return parse_error(ps, -EINVAL, start, "duplicate key in object");
        }
done:
        ps->i++; /* '}' */
        v = json_new(JSON_OBJECT, 0);
        if (!v)
                return parse_error_oom(ps);
        v->items = TAKE_PTR(l.items);
        v->n = l.n / 2;
        l.n = 0;
        *ret = v;
        return 0;
}

/* depth: containers already open around this value. */
static int parse_value(JsonParser *ps, unsigned depth, JsonValue **ret) {
        skip_ws(ps);
        if (ps->i >= ps->n)
                return parse_unexpected(ps, "expected a value");

        switch (ps->p[ps->i]) {
        case '{':
        case '[':
                if (depth >= JSON_DEPTH_MAX)
                        return parse_error(ps, -E2BIG, ps->i, "nesting deeper than %d", JSON_DEPTH_MAX);
                return ps->p[ps->i] == '{' ? parse_object(ps, depth + 1, ret) : parse_array(ps, depth + 1, ret);
        case '"':
                return parse_string(ps, ret);
        case 't':
                return parse_literal(ps, "true", JSON_BOOL, true, ret);
        case 'f':
                return parse_literal(ps, "false", JSON_BOOL, false, ret);
        case 'n':
                return parse_literal(ps, "null", JSON_NULL, false, ret);
        case '-':
        case '0' ... '9':
                return parse_number(ps, ret);
        default:
                return parse_unexpected(ps, NULL);
        }
}

int json_parse(const char *p, size_t n, JsonValue **ret, char *errbuf, size_t errbuf_size) {
        _cleanup_(json_freep) JsonValue *v = NULL;
        JsonParser ps = { .p = p, .n = n, .errbuf = errbuf, .errbuf_size = errbuf_size };
        int r;

        if (errbuf && errbuf_size > 0)
                errbuf[0] = 0;
        if (!ret || (!p && n > 0))
                return parse_error(&ps, -EINVAL, 0, "invalid arguments");

        r = parse_value(&ps, 0, &v);
        if (r < 0)
                return r;
        skip_ws(&ps);
        if (ps.i < ps.n)
                return parse_unexpected(&ps, "trailing data after value");
        *ret = TAKE_PTR(v);
        return 0;
}
