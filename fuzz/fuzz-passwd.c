/* SPDX-License-Identifier: MIT */
/* libFuzzer target for src/basic/passwd-util.c. The input's first line is the
 * name to look up, the rest the file (an /etc/passwd and an /etc/group). Both
 * lookups must agree with a plain reference (the first line of the name with
 * enough fields whose ids are decimal and below 2^32-1; else -EBADMSG if one
 * had the name, else 0), never read past the input and leave the results
 * untouched unless they found the name. */
#include <errno.h>
#include <string.h>

#include "fuzz-check.h"
#include "passwd-util.h"

static bool ref_id(const uint8_t *p, size_t n, uint32_t *ret) {
        uint64_t v = 0;

        if (n == 0 || n > 10)
                return false;
        for (size_t i = 0; i < n; i++) {
                if (p[i] < '0' || p[i] > '9')
                        return false;
                v = v * 10 + (p[i] - '0');
        }
        *ret = (uint32_t) v;
        return v < UINT32_MAX;
}

static int ref_lookup(const uint8_t *buf, size_t n, const char *name, size_t need, size_t id1, int id2,
                      uint32_t *ret1, uint32_t *ret2) {
        bool bad = false;
        size_t start = 0;

        if (!passwd_name_valid(name))
                return -EINVAL;
        while (start < n) {
                size_t end = start, fs[8], fe[8], nf = 0;
                uint32_t a, b = 0;

                while (end < n && buf[end] != '\n')
                        end++;
                /* fields: [fs, fe) between colons */
                fs[0] = start;
                for (size_t i = start; i <= end && nf < 8; i++)
                        if (i == end || buf[i] == ':') {
                                fe[nf++] = i;
                                if (nf < 8)
                                        fs[nf] = i + 1;
                                if (i == end)
                                        break;
                        }
                start = end + 1;
                if (fe[0] - fs[0] != strlen(name) || memcmp(buf + fs[0], name, strlen(name)) != 0)
                        continue;
                if (nf < need || !ref_id(buf + fs[id1], fe[id1] - fs[id1], &a) ||
                    (id2 >= 0 && !ref_id(buf + fs[id2], fe[id2] - fs[id2], &b))) {
                        bad = true;
                        continue;
                }
                *ret1 = a;
                *ret2 = b;
                return 1;
        }
        return bad ? -EBADMSG : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const uint8_t *nl = memchr(data, '\n', size < 64 ? size : 64);
        char name[64];
        size_t nlen, n;
        const char *buf;
        uint32_t u = 4242, g = 4343, ru = 0, rg = 0;
        int r, want;

        if (!nl)
                return 0;
        nlen = (size_t) (nl - data);
        memcpy(name, data, nlen);
        name[nlen] = 0;
        buf = (const char *) nl + 1;
        n = size - nlen - 1;

        r = passwd_lookup(buf, n, name, &u, &g);
        want = ref_lookup((const uint8_t *) buf, n, name, 4, 2, 3, &ru, &rg);
        CHECK(r == want);
        if (r == 1)
                CHECK(u == ru && g == rg);
        else
                CHECK(u == 4242 && g == 4343);
        u = 4242;
        r = group_lookup(buf, n, name, &u);
        want = ref_lookup((const uint8_t *) buf, n, name, 3, 2, -1, &ru, &rg);
        CHECK(r == want);
        CHECK(r == 1 ? u == ru : u == 4242);
        return 0;
}
