/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <strings.h>
#include <sys/random.h>

#include "alloc-util.h"
#include "str-util.h"

bool slice_eq_ci(Slice a, const char *s) {
        size_t n = strlen(s);
        return a.n == n && strncasecmp(a.p, s, n) == 0;
}

const char *startswith(const char *s, const char *prefix) {
        size_t n = strlen(prefix);
        return strncmp(s, prefix, n) == 0 ? s + n : NULL;
}

const char *endswith(const char *s, const char *suffix) {
        size_t a = strlen(s), b = strlen(suffix);
        if (b > a || memcmp(s + a - b, suffix, b) != 0)
                return NULL;
        return s + a - b;
}

char *strjoin_real(const char *first, ...) {
        va_list ap;
        size_t len = 0;
        char *r, *p;

        va_start(ap, first);
        for (const char *s = first; s; s = va_arg(ap, const char *))
                len += strlen(s);
        va_end(ap);

        r = malloc(len + 1);
        if (!r)
                return NULL;
        p = r;
        va_start(ap, first);
        for (const char *s = first; s; s = va_arg(ap, const char *)) {
                size_t n = strlen(s);
                memcpy(p, s, n);
                p += n;
        }
        va_end(ap);
        *p = 0;
        return r;
}

char *strdup_printf(const char *fmt, ...) {
        va_list ap;
        char *r;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&r, fmt, ap);
        va_end(ap);
        return k < 0 ? NULL : r;
}

int strscpy(char *dst, size_t n, const char *src) {
        size_t l = strlen(src);
        if (n == 0)
                return -ENAMETOOLONG;
        if (l >= n) {
                memcpy(dst, src, n - 1);
                dst[n - 1] = 0;
                return -ENAMETOOLONG;
        }
        memcpy(dst, src, l + 1);
        return 0;
}

int safe_atou64(const char *s, uint64_t *ret) {
        char *end;
        unsigned long long v;

        if (isempty(s) || !isdigit((unsigned char) s[0]))
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno == ERANGE)
                return -ERANGE;
        if (*end != 0)
                return -EINVAL;
        *ret = v;
        return 0;
}

int safe_atoi64(const char *s, int64_t *ret) {
        char *end;
        long long v;

        if (isempty(s) || isspace((unsigned char) s[0]))
                return -EINVAL;
        errno = 0;
        v = strtoll(s, &end, 10);
        if (errno == ERANGE)
                return -ERANGE;
        if (*end != 0)
                return -EINVAL;
        *ret = v;
        return 0;
}

int safe_atou(const char *s, unsigned *ret) {
        uint64_t v;
        int r = safe_atou64(s, &v);
        if (r < 0)
                return r;
        if (v > UINT_MAX)
                return -ERANGE;
        *ret = (unsigned) v;
        return 0;
}

int safe_atoi(const char *s, int *ret) {
        int64_t v;
        int r = safe_atoi64(s, &v);
        if (r < 0)
                return r;
        if (v < INT_MIN || v > INT_MAX)
                return -ERANGE;
        *ret = (int) v;
        return 0;
}

int slice_to_u64(Slice s, uint64_t *ret) {
        char buf[32];
        if (s.n == 0 || s.n >= sizeof buf)
                return -EINVAL;
        memcpy(buf, s.p, s.n);
        buf[s.n] = 0;
        return safe_atou64(buf, ret);
}

char **strv_free(char **l) {
        if (!l)
                return NULL;
        for (char **i = l; *i; i++)
                free(*i);
        free(l);
        return NULL;
}

size_t strv_length(char *const *l) {
        size_t n = 0;
        if (l)
                while (l[n])
                        n++;
        return n;
}

int strv_push(char ***l, char *value) {
        size_t n = strv_length(*l);
        char **c = realloc(*l, sizeof(char *) * (n + 2));
        if (!c) {
                free(value);
                return -ENOMEM;
        }
        c[n] = value;
        c[n + 1] = NULL;
        *l = c;
        return 0;
}

int strv_extend(char ***l, const char *value) {
        char *v = strdup(value);
        if (!v)
                return -ENOMEM;
        return strv_push(l, v);
}

char **strv_copy(char *const *l) {
        char **r = new0(char *, strv_length(l) + 1);
        size_t i = 0;
        if (!r)
                return NULL;
        for (char *const *s = l; s && *s; s++) {
                r[i] = strdup(*s);
                if (!r[i])
                        return strv_free(r);
                i++;
        }
        return r;
}

bool strv_contains(char *const *l, const char *s) {
        for (char *const *i = l; i && *i; i++)
                if (streq(*i, s))
                        return true;
        return false;
}

int random_bytes(void *buf, size_t n) {
        char *p = buf;
        while (n > 0) {
                ssize_t k = getrandom(p, n, 0);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

int random_alnum(char *buf, size_t n) {
        static const char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyz";
        uint8_t raw[256];
        int r;

        if (n > sizeof raw)
                return -EINVAL;
        r = random_bytes(raw, n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                buf[i] = alphabet[raw[i] % 36]; /* slight bias is fine for ids */
        buf[n] = 0;
        return 0;
}

void hexencode(const uint8_t *p, size_t n, char *out) {
        static const char hex[] = "0123456789abcdef";
        for (size_t i = 0; i < n; i++) {
                out[2 * i] = hex[p[i] >> 4];
                out[2 * i + 1] = hex[p[i] & 15];
        }
        out[2 * n] = 0;
}
