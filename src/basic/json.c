/* SPDX-License-Identifier: MIT */
/* Strict RFC 8259 parser into a read-only tree, a writer, UTF-8 validation and
 * base64. Everything that reads hostile bytes works on (pointer, length), is
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
#include "json.h"

/* Longest number text accepted (digits, sign, '.', exponent). Longer is hostile. */
#define JSON_NUMBER_TEXT_MAX 1024U
/* Objects with more keys than this are checked for duplicates by sorting. */
#define JSON_DUP_LINEAR_MAX 16U
/* Exponents are clamped here; any larger magnitude is out of every range anyway. */
#define JSON_EXPONENT_CLAMP 100000L

struct JsonValue {
        JsonType type;
        bool boolean;
        size_t n;          /* string/number: bytes of text; array: items; object: keys */
        JsonValue **items; /* array: items; object: key0, value0, key1, value1, ... */
        char text[];       /* string/number, NUL-terminated */
};

/* ---------------------------------------------------------------- UTF-8 */

/* Length of the strict UTF-8 sequence at s (at most n bytes), 0 if invalid. */
static size_t utf8_char_len(const uint8_t *s, size_t n) {
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

/* Two-character escapes: '\\' + json_escape_chars[i] stands for json_escape_values[i]. */
static const char json_escape_chars[] = "\"\\/bfnrt";
static const char json_escape_values[] = "\"\\/\b\f\n\r\t";

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

/* ---------------------------------------------------------------- writer */

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

/* ---------------------------------------------------------------- base64 */

static const char base64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int base64_encode(const void *p, size_t n, char **ret, size_t *ret_len) {
        const uint8_t *s = p;
        size_t len, o = 0;
        char *out;

        if ((!p && n > 0) || !ret)
                return -EINVAL;
        if (n / 3 >= (SIZE_MAX - 1) / 4 - 1)
                return -ENOMEM;
        len = (n + 2) / 3 * 4;
        out = malloc(len + 1);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < n; i += 3) {
                uint32_t t = (uint32_t) s[i] << 16;
                if (i + 1 < n)
                        t |= (uint32_t) s[i + 1] << 8;
                if (i + 2 < n)
                        t |= s[i + 2];
                out[o++] = base64_alphabet[(t >> 18) & 0x3F];
                out[o++] = base64_alphabet[(t >> 12) & 0x3F];
                out[o++] = i + 1 < n ? base64_alphabet[(t >> 6) & 0x3F] : '=';
                out[o++] = i + 2 < n ? base64_alphabet[t & 0x3F] : '=';
        }
        out[o] = 0;
        if (ret_len)
                *ret_len = o;
        *ret = out;
        return 0;
}

static int base64_value(char c) {
        const char *e = c ? strchr(base64_alphabet, c) : NULL;
        return e ? (int) (e - base64_alphabet) : -EINVAL;
}

int base64_decode(const char *p, size_t n, void **ret, size_t *ret_len) {
        _cleanup_free_ uint8_t *out = NULL;
        uint32_t acc = 0;
        size_t o = 0, bits = 0;

        if ((!p && n > 0) || !ret)
                return -EINVAL;

        /* Padding is optional, but if present it must complete the last quantum. */
        if (n % 4 == 0 && n > 0 && p[n - 1] == '=')
                n -= (n >= 2 && p[n - 2] == '=') ? 2 : 1;
        if (n % 4 == 1)
                return -EINVAL;

        out = malloc(n / 4 * 3 + 3);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                int v = base64_value(p[i]); /* '=' here is in the wrong place */
                if (v < 0)
                        return -EINVAL;
                acc = (acc << 6) | (uint32_t) v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[o++] = (uint8_t) (acc >> bits);
                        acc &= (1U << bits) - 1;
                }
        }
        if (acc != 0) /* non-zero pad bits: not the canonical encoding */
                return -EINVAL;
        out[o] = 0;
        if (ret_len)
                *ret_len = o;
        *ret = TAKE_PTR(out);
        return 0;
}
