/* SPDX-License-Identifier: MIT */
/* Base64 (base64.h). decode reads hostile bytes: (pointer, length), linear,
 * every output byte bounded by the input's length. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc-util.h"
#include "base64.h"

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
