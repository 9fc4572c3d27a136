/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdlib.h>
#include <string.h>

#include "macros.h"

#define new(t, n) ((t *) calloc_multiply(sizeof(t), (n)))
#define new0(t, n) ((t *) calloc((n) ?: 1, sizeof(t)))

static inline void *calloc_multiply(size_t size, size_t n) {
        if (n > 0 && size > SIZE_MAX / n)
                return NULL;
        return malloc(size * n ?: 1);
}

/* Duplicates (p, n) and appends a NUL. */
static inline char *memdup_suffix0(const void *p, size_t n) {
        char *r = malloc(n + 1);
        if (!r)
                return NULL;
        if (n)
                memcpy(r, p, n);
        r[n] = 0;
        return r;
}

static inline void *memdup(const void *p, size_t n) {
        void *r = malloc(n ?: 1);
        if (r && n)
                memcpy(r, p, n);
        return r;
}

/* Grows *p to hold at least need elements of size sz; keeps *allocated. */
int greedy_realloc(void **p, size_t *allocated, size_t need, size_t sz);
#define GREEDY_REALLOC(array, allocated, need) \
        greedy_realloc((void **) &(array), &(allocated), (need), sizeof((array)[0]))
