/* SPDX-License-Identifier: MIT */
#include "alloc-util.h"
#include "fd-util.h"
#include "mountinfo.h"
#include "str-util.h"

/* Decodes the octal escapes (\040 etc.) the kernel uses in mountinfo fields. */
static char *unescape(const char *p, size_t n) {
        char *r = malloc(n + 1), *o = r;
        if (!r)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                if (p[i] == '\\' && i + 3 < n && p[i + 1] >= '0' && p[i + 1] <= '3' &&
                    p[i + 2] >= '0' && p[i + 2] <= '7' && p[i + 3] >= '0' && p[i + 3] <= '7') {
                        *o++ = (char) ((p[i + 1] - '0') * 64 + (p[i + 2] - '0') * 8 + (p[i + 3] - '0'));
                        i += 3;
                } else
                        *o++ = p[i];
        }
        *o = 0;
        return r;
}

/* Splits the line [p, p+n) at spaces into at most max fields. */
static size_t split_fields(const char *p, size_t n, Slice *fields, size_t max) {
        size_t k = 0, i = 0;
        while (i < n && k < max) {
                size_t start;
                while (i < n && p[i] == ' ')
                        i++;
                if (i >= n)
                        break;
                start = i;
                while (i < n && p[i] != ' ')
                        i++;
                fields[k++] = (Slice){ p + start, i - start };
        }
        return k;
}

int mountinfo_lookup(const char *path, char **ret_fstype, char **ret_source) {
        _cleanup_free_ char *buf = NULL, *fstype = NULL, *source = NULL;
        size_t size;
        bool found = false;
        int r;

        if (isempty(path) || path[0] != '/')
                return -EINVAL;
        r = read_full_file("/proc/self/mountinfo", MOUNTINFO_SIZE_MAX, &buf, &size);
        if (r < 0)
                return r;

        for (const char *line = buf, *end = buf + size; line < end;) {
                const char *nl = memchr(line, '\n', (size_t) (end - line));
                size_t len = nl ? (size_t) (nl - line) : (size_t) (end - line);
                /* id parent maj:min root mountpoint options [optional...] - fstype source superopts */
                Slice f[64];
                size_t nf = split_fields(line, len, f, ELEMENTSOF(f)), sep;
                _cleanup_free_ char *mp = NULL;

                line += len + 1;
                if (nf < 7)
                        continue;
                for (sep = 6; sep < nf; sep++)
                        if (slice_eq(f[sep], "-"))
                                break;
                if (sep + 2 >= nf)
                        continue;
                mp = unescape(f[4].p, f[4].n);
                if (!mp)
                        return -ENOMEM;
                if (!streq(mp, path))
                        continue;
                /* Later lines are mounted on top of earlier ones: keep the last. */
                free(fstype);
                free(source);
                fstype = unescape(f[sep + 1].p, f[sep + 1].n);
                source = unescape(f[sep + 2].p, f[sep + 2].n);
                if (!fstype || !source)
                        return -ENOMEM;
                found = true;
        }
        if (!found)
                return -ENOENT;
        if (ret_fstype)
                *ret_fstype = TAKE_PTR(fstype);
        if (ret_source)
                *ret_source = TAKE_PTR(source);
        return 0;
}
