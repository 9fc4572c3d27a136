/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdarg.h>

#include "macros.h"

/* A read-only view of bytes; never assumed NUL-terminated. */
typedef struct Slice {
        const char *p;
        size_t n;
} Slice;

#define SLICE(s) ((Slice){ (s), strlen(s) })
static inline bool slice_eq(Slice a, const char *s) {
        size_t n = strlen(s);
        return a.n == n && memcmp(a.p, s, n) == 0;
}
bool slice_eq_ci(Slice a, const char *s);

/* Returns the rest of s after prefix, or NULL. */
const char *startswith(const char *s, const char *prefix);
const char *endswith(const char *s, const char *suffix);

/* Joins NULL-terminated arguments; returns malloc'd string or NULL on OOM. */
char *strjoin_real(const char *first, ...);
#define strjoin(...) strjoin_real(__VA_ARGS__, NULL)
char *strdup_printf(const char *fmt, ...) _printf_(1, 2);

/* Copies at most n-1 bytes and NUL-terminates; returns -ENAMETOOLONG if truncated. */
int strscpy(char *dst, size_t n, const char *src);

/* Strict number parsing: whole string, no sign for unsigned, range-checked. */
int safe_atou64(const char *s, uint64_t *ret);
int safe_atoi64(const char *s, int64_t *ret);
int safe_atou(const char *s, unsigned *ret);
int safe_atoi(const char *s, int *ret);
int slice_to_u64(Slice s, uint64_t *ret);

/* NULL-terminated string vectors. */
char **strv_free(char **l);
DEFINE_TRIVIAL_CLEANUP_FUNC(char **, strv_free);
#define _cleanup_strv_free_ _cleanup_(strv_freep)
size_t strv_length(char *const *l);
int strv_push(char ***l, char *value); /* takes ownership of value (also on failure) */
int strv_extend(char ***l, const char *value);
char **strv_copy(char *const *l);
bool strv_contains(char *const *l, const char *s);

/* Random lower-case alphanumeric string of length n from getrandom(). */
int random_alnum(char *buf, size_t n);
int random_bytes(void *buf, size_t n);

/* Hex encode n bytes into out (2n+1 bytes). */
void hexencode(const uint8_t *p, size_t n, char *out);
