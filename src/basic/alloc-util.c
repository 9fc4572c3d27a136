/* SPDX-License-Identifier: MIT */
#include "alloc-util.h"

int greedy_realloc(void **p, size_t *allocated, size_t need, size_t sz) {
        size_t n;
        void *q;

        if (need <= *allocated)
                return 0;
        if (need > SIZE_MAX / 2 / sz)
                return -ENOMEM;
        n = MAX(need * 2, (size_t) 16);
        q = realloc(*p, n * sz);
        if (!q)
                return -ENOMEM;
        *p = q;
        *allocated = n;
        return 0;
}
