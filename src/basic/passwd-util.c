/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>

#include "passwd-util.h"

#define PASSWD_FIELDS_MAX 4U /* the fields a lookup reads (name, pw, id, id) */

bool passwd_name_valid(const char *s) {
        size_t n;

        if (!s || s[0] == '-')
                return false;
        n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-");
        return n > 0 && n <= PASSWD_NAME_MAX && s[n] == 0;
}

static bool parse_id(const char *p, size_t n, uint32_t *ret) {
        uint64_t v = 0;

        if (n == 0 || n > 10)
                return false;
        for (size_t i = 0; i < n; i++) {
                if (p[i] < '0' || p[i] > '9')
                        return false;
                v = v * 10 + (uint64_t) (p[i] - '0');
        }
        if (v >= UINT32_MAX)
                return false;
        *ret = (uint32_t) v;
        return true;
}

/* The first line of name with at least need fields, its fields id1 and id2 (id2 < 0: none) as ids. */
static int lookup(const char *buf, size_t n, const char *name, size_t need, size_t id1, int id2, uint32_t *ret1,
                  uint32_t *ret2) {
        size_t name_len;
        bool bad = false;

        if (!passwd_name_valid(name))
                return -EINVAL;
        name_len = strlen(name);
        for (const char *p = buf, *end = buf + n; buf && p < end;) {
                const char *nl = memchr(p, '\n', (size_t) (end - p)), *eol = nl ?: end;
                const char *f[PASSWD_FIELDS_MAX];
                size_t fl[PASSWD_FIELDS_MAX], nf = 0;
                uint32_t a, b = 0;

                for (const char *q = p; nf < PASSWD_FIELDS_MAX;) {
                        const char *colon = memchr(q, ':', (size_t) (eol - q));
                        f[nf] = q;
                        fl[nf] = (size_t) ((colon ?: eol) - q);
                        nf++;
                        if (!colon)
                                break;
                        q = colon + 1;
                }
                p = nl ? nl + 1 : end;
                if (fl[0] != name_len || memcmp(f[0], name, name_len) != 0)
                        continue; /* also: blank, comment and NIS lines (no valid name starts with '#', '+', '-') */
                if (nf < need || !parse_id(f[id1], fl[id1], &a) || (id2 >= 0 && !parse_id(f[id2], fl[id2], &b))) {
                        bad = true;
                        continue;
                }
                *ret1 = a;
                if (ret2)
                        *ret2 = b;
                return 1;
        }
        return bad ? -EBADMSG : 0;
}

int passwd_lookup(const char *buf, size_t n, const char *name, uint32_t *ret_uid, uint32_t *ret_gid) {
        return lookup(buf, n, name, 4, 2, 3, ret_uid, ret_gid);
}

int group_lookup(const char *buf, size_t n, const char *name, uint32_t *ret_gid) {
        return lookup(buf, n, name, 3, 2, -1, ret_gid, NULL);
}
