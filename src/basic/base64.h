/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/* Base64 (RFC 4648, standard alphabet, padded). decode accepts missing padding,
 * rejects other bad input with -EINVAL. Output buffers are malloc'd, NUL-terminated. */
int base64_encode(const void *p, size_t n, char **ret, size_t *ret_len);
int base64_decode(const char *p, size_t n, void **ret, size_t *ret_len);
