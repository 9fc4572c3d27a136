/* SPDX-License-Identifier: MIT */
#pragma once

/* What every fuzz target checks its properties with: a failed check aborts,
 * so libFuzzer (and the corpus replay) reports the input. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(expr)                                                                              \
        do {                                                                                     \
                if (!(expr)) {                                                                   \
                        fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #expr); \
                        abort();                                                                 \
                }                                                                                \
        } while (0)
