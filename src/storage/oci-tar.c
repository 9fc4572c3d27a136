/* SPDX-License-Identifier: MIT */
/* A tar reader for hostile archives: ustar, GNU long names and pax headers
 * (path, linkpath, size, uid, gid, mtime, SCHILY.xattr.*), every field
 * bounded; anything else (sparse files, volumes) is refused, so what this
 * reader sees is exactly what gets applied. Plus the path and whiteout rules
 * of OCI layers. */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "oci.h"
#include "str-util.h"

#define TAR_BLOCK_SIZE 512U

void tar_entry_done(TarEntry *e) {
        free(e->path);
        free(e->link);
        for (size_t i = 0; i < e->n_xattrs; i++) {
                free(e->xattrs[i].name);
                free(e->xattrs[i].value);
        }
        *e = (TarEntry){};
}

static int stream_read(TarStream *s, void *buf, size_t n) {
        int r = s->read(s->userdata, buf, n);
        if (r < 0)
                return r;
        s->offset += n;
        return 0;
}

_printf_(4, 5) static int fail(int r, char *err, size_t errlen, const char *fmt, ...) {
        va_list ap;

        if (err && errlen > 0) {
                va_start(ap, fmt);
                vsnprintf(err, errlen, fmt, ap);
                va_end(ap);
        }
        return r;
}

/* An octal field (NUL/space terminated) or GNU base-256. */
static int tar_number(const uint8_t *f, size_t n, uint64_t *ret) {
        uint64_t v = 0;
        size_t i = 0;

        if (n > 0 && (f[0] & 0x80)) {
                if (f[0] != 0x80)
                        return -ERANGE; /* negative or too wide */
                for (i = 1; i < n; i++) {
                        if (v >> 56)
                                return -ERANGE;
                        v = (v << 8) | f[i];
                }
                *ret = v;
                return 0;
        }
        while (i < n && f[i] == ' ')
                i++;
        for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
                if (v >> 60)
                        return -ERANGE;
                v = (v << 3) | (uint64_t) (f[i] - '0');
        }
        for (; i < n; i++)
                if (f[i] != ' ' && f[i] != '\0')
                        return -EINVAL;
        *ret = v;
        return 0;
}

static bool block_is_zero(const uint8_t *b) {
        for (size_t i = 0; i < TAR_BLOCK_SIZE; i++)
                if (b[i])
                        return false;
        return true;
}

static bool checksum_ok(const uint8_t *b) {
        uint64_t want, sum = 0;

        if (tar_number(b + 148, 8, &want) < 0)
                return false;
        for (size_t i = 0; i < TAR_BLOCK_SIZE; i++)
                sum += (i >= 148 && i < 156) ? ' ' : b[i];
        return sum == want;
}

static char *field_dup(const uint8_t *f, size_t n) {
        return strndup((const char *) f, strnlen((const char *) f, n));
}

/* Reads a long name / pax body of size bytes (bounded by max) with padding. */
static int read_body(TarStream *s, uint64_t size, size_t max, char **ret) {
        uint64_t padded = (size + TAR_BLOCK_SIZE - 1) / TAR_BLOCK_SIZE * TAR_BLOCK_SIZE;
        _cleanup_free_ char *buf = NULL;
        int r;

        if (size > max)
                return -E2BIG;
        buf = malloc((size_t) padded + 1);
        if (!buf)
                return -ENOMEM;
        r = stream_read(s, buf, (size_t) padded);
        if (r < 0)
                return r;
        buf[size] = '\0';
        *ret = TAKE_PTR(buf);
        return 0;
}

typedef struct PaxState {
        char *path, *link;
        bool has_size, has_uid, has_gid, has_mtime;
        uint64_t size, uid, gid;
        int64_t mtime;
        TarXattr xattrs[OCI_TAR_XATTRS_MAX];
        size_t n_xattrs;
} PaxState;

static void pax_done(PaxState *p) {
        free(p->path);
        free(p->link);
        for (size_t i = 0; i < p->n_xattrs; i++) {
                free(p->xattrs[i].name);
                free(p->xattrs[i].value);
        }
        *p = (PaxState){};
}

static int pax_decimal(const char *v, size_t n, uint64_t *ret) {
        uint64_t x = 0;
        size_t i;

        if (n == 0)
                return -EINVAL;
        for (i = 0; i < n && v[i] >= '0' && v[i] <= '9'; i++) {
                if (x > (UINT64_MAX - 9) / 10)
                        return -ERANGE;
                x = x * 10 + (uint64_t) (v[i] - '0');
        }
        if (i == 0 || (i < n && v[i] != '.'))
                return -EINVAL;
        *ret = x;
        return 0;
}

/* "LEN key=value\n" records. */
static int pax_parse(const char *b, size_t n, PaxState *p, char *err, size_t errlen) {
        size_t pos = 0;

        while (pos < n) {
                size_t len = 0, i = pos, klen;
                const char *key, *val, *eq;
                size_t vlen;

                while (i < n && b[i] >= '0' && b[i] <= '9' && len <= n) {
                        len = len * 10 + (size_t) (b[i] - '0');
                        i++;
                }
                if (i >= n || b[i] != ' ' || len == 0 || len > n - pos || b[pos + len - 1] != '\n')
                        return fail(-EBADMSG, err, errlen, "malformed pax header");
                key = b + i + 1;
                eq = memchr(key, '=', (size_t) (b + pos + len - 1 - key));
                if (!eq)
                        return fail(-EBADMSG, err, errlen, "malformed pax record");
                klen = (size_t) (eq - key);
                val = eq + 1;
                vlen = (size_t) (b + pos + len - 1 - val);
                pos += len;

#define KEY_IS(k) (klen == strlen(k) && memcmp(key, k, klen) == 0)
                if (KEY_IS("path") || KEY_IS("linkpath")) {
                        char **t = KEY_IS("path") ? &p->path : &p->link;
                        if (vlen > OCI_TAR_NAME_MAX || memchr(val, '\0', vlen))
                                return fail(-EBADMSG, err, errlen, "a pax path is too long or has a NUL");
                        free(*t);
                        *t = strndup(val, vlen);
                        if (!*t)
                                return -ENOMEM;
                } else if (KEY_IS("size") || KEY_IS("uid") || KEY_IS("gid") || KEY_IS("mtime")) {
                        uint64_t x;
                        if (pax_decimal(val, vlen, &x) < 0)
                                return fail(-EBADMSG, err, errlen, "a pax number is malformed");
                        if (KEY_IS("size"))
                                p->size = x, p->has_size = true;
                        else if (KEY_IS("uid"))
                                p->uid = x, p->has_uid = true;
                        else if (KEY_IS("gid"))
                                p->gid = x, p->has_gid = true;
                        else
                                p->mtime = x > INT64_MAX ? INT64_MAX : (int64_t) x, p->has_mtime = true;
                } else if (klen > 13 && memcmp(key, "SCHILY.xattr.", 13) == 0) {
                        TarXattr *x;
                        if (p->n_xattrs >= OCI_TAR_XATTRS_MAX)
                                return fail(-E2BIG, err, errlen, "too many xattrs on one member");
                        if (memchr(key, '\0', klen))
                                return fail(-EBADMSG, err, errlen, "an xattr name has a NUL");
                        x = &p->xattrs[p->n_xattrs];
                        x->name = strndup(key + 13, klen - 13);
                        x->value = memdup(val, vlen ?: 1);
                        if (!x->name || !x->value) {
                                free(x->name);
                                free(x->value);
                                return -ENOMEM;
                        }
                        x->len = vlen;
                        p->n_xattrs++;
                } else if (klen >= 10 && memcmp(key, "GNU.sparse", 10) == 0)
                        return fail(-EOPNOTSUPP, err, errlen, "sparse members are not supported");
                /* else: atime, ctime, uname, gname, comment, charset... are not applied */
#undef KEY_IS
        }
        return 0;
}

int tar_skip_data(TarStream *s) {
        uint8_t buf[TAR_BLOCK_SIZE * 16];

        if (s->skip && s->data_left > 0) {
                int r = s->skip(s->userdata, s->data_left);
                if (r < 0)
                        return r;
                s->offset += s->data_left;
                s->data_left = 0;
                return 0;
        }

        while (s->data_left > 0) {
                size_t n = s->data_left < sizeof buf ? (size_t) s->data_left : sizeof buf;
                int r = stream_read(s, buf, n);
                if (r < 0)
                        return r;
                s->data_left -= n;
        }
        return 0;
}

int tar_read_data(TarStream *s, void *buf, size_t n) {
        int r;

        if (n > s->data_left)
                return -EINVAL;
        r = stream_read(s, buf, n);
        if (r < 0)
                return r;
        s->data_left -= n;
        return 0;
}

static TarType tar_type_of(char c) {
        switch (c) {
        case '0': case '\0': case '7': return TAR_FILE;
        case '1': return TAR_HARDLINK;
        case '2': return TAR_SYMLINK;
        case '3': return TAR_CHAR;
        case '4': return TAR_BLOCK;
        case '5': return TAR_DIR;
        case '6': return TAR_FIFO;
        default: return _TAR_TYPE_INVALID;
        }
}

int tar_next(TarStream *s, TarEntry *ret, char *err, size_t errlen) {
        _cleanup_free_ char *longname = NULL, *longlink = NULL;
        _cleanup_(pax_done) PaxState pax = {};
        uint8_t b[TAR_BLOCK_SIZE];
        int r;

        if (s->ended)
                return 0;
        r = tar_skip_data(s);
        if (r < 0)
                return fail(r, err, errlen, "the archive ends inside a member");

        for (unsigned hops = 0;; hops++) {
                TarEntry e = {};
                uint64_t size, x;
                char flag;

                if (hops > 8)
                        return fail(-EBADMSG, err, errlen, "too many extension headers in a row");
                r = stream_read(s, b, sizeof b);
                if (r < 0)
                        return fail(r, err, errlen, "the archive ends without an end marker");
                if (block_is_zero(b)) {
                        s->ended = true;
                        return 0;
                }
                if (!checksum_ok(b))
                        return fail(-EBADMSG, err, errlen, "a tar header has a bad checksum (not a tar archive?)");
                if (tar_number(b + 124, 12, &size) < 0)
                        return fail(-EBADMSG, err, errlen, "a tar header has a malformed size");
                flag = (char) b[156];

                if (flag == 'L' || flag == 'K' || flag == 'x' || flag == 'g') {
                        _cleanup_free_ char *body = NULL;
                        r = read_body(s, size, flag == 'L' || flag == 'K' ? OCI_TAR_NAME_MAX : OCI_TAR_PAX_MAX, &body);
                        if (r == -E2BIG)
                                return fail(r, err, errlen, "a tar extension header is too large");
                        if (r < 0)
                                return fail(r, err, errlen, "the archive ends inside a header");
                        if (flag == 'L')
                                free(longname), longname = TAKE_PTR(body);
                        else if (flag == 'K')
                                free(longlink), longlink = TAKE_PTR(body);
                        else if (flag == 'x') {
                                r = pax_parse(body, (size_t) size, &pax, err, errlen);
                                if (r < 0)
                                        return r;
                        } /* 'g': global headers are not applied */
                        continue;
                }

                e.type = tar_type_of(flag);
                if (e.type < 0) {
                        char f[8];
                        snprintf(f, sizeof f, "%c", flag >= 0x20 && flag < 0x7f ? flag : '?');
                        return fail(-EOPNOTSUPP, err, errlen, "a member has tar type '%s', which is not supported", f);
                }
                if (pax.path)
                        e.path = TAKE_PTR(pax.path);
                else if (longname)
                        e.path = TAKE_PTR(longname);
                else if (b[345] && memcmp(b + 257, "ustar", 5) == 0) {
                        _cleanup_free_ char *pre = field_dup(b + 345, 155), *nm = field_dup(b, 100);
                        e.path = pre && nm ? strjoin(pre, "/", nm) : NULL;
                } else
                        e.path = field_dup(b, 100);
                if (pax.link)
                        e.link = TAKE_PTR(pax.link);
                else if (longlink)
                        e.link = TAKE_PTR(longlink);
                else
                        e.link = field_dup(b + 157, 100);
                if (!e.path || !e.link) {
                        tar_entry_done(&e);
                        return -ENOMEM;
                }
                if (tar_number(b + 100, 8, &x) < 0) {
                        tar_entry_done(&e);
                        return fail(-EBADMSG, err, errlen, "a tar header has a malformed mode");
                }
                e.mode = (uint32_t) (x & 07777);
                r = tar_number(b + 108, 8, &e.uid);
                if (r >= 0)
                        r = tar_number(b + 116, 8, &e.gid);
                if (r >= 0)
                        r = tar_number(b + 136, 12, &x);
                if (r < 0) {
                        tar_entry_done(&e);
                        return fail(-EBADMSG, err, errlen, "a tar header has a malformed number");
                }
                e.mtime = x > INT64_MAX ? INT64_MAX : (int64_t) x;
                if (pax.has_size)
                        size = pax.size;
                if (pax.has_uid)
                        e.uid = pax.uid;
                if (pax.has_gid)
                        e.gid = pax.gid;
                if (pax.has_mtime)
                        e.mtime = pax.mtime;
                /* Only regular files carry data. */
                e.size = e.type == TAR_FILE ? size : 0;
                if (size > UINT64_MAX - 2 * TAR_BLOCK_SIZE) {
                        tar_entry_done(&e);
                        return fail(-EBADMSG, err, errlen, "a member declares an impossible size");
                }
                s->data_left = (size + TAR_BLOCK_SIZE - 1) / TAR_BLOCK_SIZE * TAR_BLOCK_SIZE;
                memcpy(e.xattrs, pax.xattrs, sizeof pax.xattrs);
                e.n_xattrs = pax.n_xattrs;
                pax.n_xattrs = 0;
                *ret = e;
                return 1;
        }
}

int oci_whiteout_classify(const char *clean, OciWhiteout *ret_kind, char **ret_target) {
        const char *base = strrchr(clean, '/');
        size_t dirlen = base ? (size_t) (base - clean) : 0;
        char *t;

        base = base ? base + 1 : clean;
        if (strncmp(base, ".wh.", 4) != 0) {
                *ret_kind = OCI_WHITEOUT_NONE;
                *ret_target = NULL;
                return 0;
        }
        if (streq(base, ".wh..wh..opq")) {
                t = dirlen ? strndup(clean, dirlen) : strdup(".");
                if (!t)
                        return -ENOMEM;
                *ret_kind = OCI_WHITEOUT_OPAQUE;
                *ret_target = t;
                return 0;
        }
        base += 4;
        /* .wh..wh.* other than the opaque marker (aufs internals) and empty,
         * "." or ".." names are malformed. */
        if (!*base || streq(base, ".") || streq(base, "..") || strncmp(base, ".wh.", 4) == 0)
                return -EINVAL;
        t = dirlen ? malloc(dirlen + 1 + strlen(base) + 1) : strdup(base);
        if (!t)
                return -ENOMEM;
        if (dirlen) {
                memcpy(t, clean, dirlen);
                t[dirlen] = '/';
                memcpy(t + dirlen + 1, base, strlen(base) + 1);
        }
        *ret_kind = OCI_WHITEOUT_FILE;
        *ret_target = t;
        return 0;
}

static int fd_read_exact(void *u, void *buf, size_t n) {
        ssize_t k = loop_read(*(int *) u, buf, n);
        if (k < 0)
                return (int) k;
        return (size_t) k == n ? 0 : -EBADMSG;
}

static int fd_skip(void *u, uint64_t n) {
        return lseek(*(int *) u, (off_t) n, SEEK_CUR) < 0 ? negative_errno() : 0;
}

TarStream tar_stream_of_fd(int *fd) {
        return (TarStream){ .read = fd_read_exact, .skip = fd_skip, .userdata = fd };
}
