/* SPDX-License-Identifier: MIT */
/* The Public Suffix List through libpsl. See public-suffix.h. */

#include <errno.h>
#include <fcntl.h>
#include <libpsl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "public-suffix.h"

#define PUBLIC_SUFFIX_DAT_MAX (8U * 1024U * 1024U) /* bytes of the text list (Debian 12's: 246 KB) */
#define PUBLIC_SUFFIX_ENTRIES_MAX 65536U           /* rules of it (Debian 12's: about 9500) */
/* the ends of the list's two sections: a whole file */
#define PUBLIC_SUFFIX_ICANN_END "// ===END ICANN DOMAINS==="
#define PUBLIC_SUFFIX_PRIVATE_END "// ===END PRIVATE DOMAINS==="

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const psl_ctx_t *psl_data;
static const char *psl_from = "none";
/* The text list's rules, each stored byte-reversed ("moc.swanozama.3s") and
 * sorted, so the rules below a name are one range: what libpsl cannot list. */
static char *dat_text;
static char **dat_rev;
static size_t dat_n;

/* Debian's publicsuffix file when it is newer than the list compiled into
 * libpsl (what psl_latest() does, but opened O_CLOEXEC: libpsl's own fopen
 * is not, and spaced forks children from other threads). */
static psl_ctx_t *load_dist_file(time_t builtin_time) {
        const char *path = psl_dist_filename();
        psl_ctx_t *ctx = NULL;
        struct stat st;
        FILE *f;
        int fd;

        if (!path || !*path)
                return NULL;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return NULL;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (builtin_time > 0 && st.st_mtime <= builtin_time)) {
                (void) close(fd);
                return NULL;
        }
        f = fdopen(fd, "re");
        if (!f) {
                (void) close(fd);
                return NULL;
        }
        ctx = psl_load_fp(f);
        (void) fclose(f);
        if (ctx && psl_is_public_suffix2(ctx, "com", PSL_TYPE_ICANN) != 1) {
                /* a truncated or foreign file: not a list we can trust */
                psl_free(ctx);
                return NULL;
        }
        return ctx;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static void reverse(char *p, size_t n) {
        for (size_t i = 0; i < n / 2; i++) {
                char t = p[i];
                p[i] = p[n - 1 - i];
                p[n - 1 - i] = t;
        }
}

/* Whether the list's text holds line (a whole line). */
static bool has_line(const char *text, size_t size, const char *line) {
        size_t n = strlen(line);

        for (const char *p = text; (p = memmem(p, size - (size_t) (p - text), line, n)); p += n)
                if ((p == text || p[-1] == '\n') && (p + n == text + size || p[n] == '\n' || p[n] == '\r'))
                        return true;
        return false;
}

/* Every rule of the text list but exceptions ("!x"). The file is the package's, owned by root; bounded
 * all the same. A file without the ends of both sections (truncated, or not the Public Suffix List) is
 * no list: a rule missing from it would let a wildcard over that suffix through. */
static void load_dat(void) {
        char *text = NULL, **rev = NULL;
        size_t size = 0, n = 0;

        if (read_full_file(PUBLIC_SUFFIX_DAT_PATH, PUBLIC_SUFFIX_DAT_MAX, &text, &size) < 0)
                return;
        if (!has_line(text, size, PUBLIC_SUFFIX_ICANN_END) || !has_line(text, size, PUBLIC_SUFFIX_PRIVATE_END))
                goto fail;
        rev = calloc(PUBLIC_SUFFIX_ENTRIES_MAX, sizeof *rev);
        if (!rev)
                goto fail;
        for (char *line = text, *next; line < text + size; line = next) {
                char *end = memchr(line, '\n', (size_t) (text + size - line));
                size_t len;

                next = end ? end + 1 : text + size;
                if (end)
                        *end = 0;
                len = strcspn(line, " \t\r");
                line[len] = 0;
                if (len == 0 || line[0] == '!' || (len >= 2 && line[0] == '/' && line[1] == '/'))
                        continue;
                /* "*.x" kept whole: reversed it starts with "x.", so it is below x */
                if (len > PUBLIC_SUFFIX_NAME_MAX || memchr(line + 1, '*', len - 1) ||
                    (line[0] == '*' && (len < 3 || line[1] != '.')))
                        continue;
                if (n == PUBLIC_SUFFIX_ENTRIES_MAX)
                        goto fail;
                for (size_t i = 0; i < len; i++)
                        if (line[i] >= 'A' && line[i] <= 'Z')
                                line[i] = (char) (line[i] - 'A' + 'a');
                reverse(line, len);
                rev[n++] = line;
        }
        if (n == 0)
                goto fail;
        qsort(rev, n, sizeof *rev, cmp_str);
        dat_text = text;
        dat_rev = rev;
        dat_n = n;
        return;
fail:
        free(rev);
        free(text);
}

static void load(void) {
        const psl_ctx_t *builtin = psl_builtin();
        psl_ctx_t *dist = load_dist_file(builtin ? psl_builtin_file_time() : 0);

        if (dist) {
                psl_data = dist; /* kept for the life of the process */
                psl_from = psl_dist_filename();
        } else if (builtin) {
                psl_data = builtin;
                psl_from = "built-in (libpsl)";
        }
        load_dat();
}

int public_suffix_init(void) {
        (void) pthread_once(&load_once, load);
        return psl_data && dat_rev ? 0 : -ENOENT;
}

const char *public_suffix_source(void) {
        return psl_data ? psl_from : "none";
}

/* name (n bytes, one trailing dot allowed) in lower case into buf
 * (PUBLIC_SUFFIX_NAME_MAX + 1), NUL-terminated; its length, or -EINVAL for
 * anything but letters, digits, '-', '_' and non-empty labels. */
static ssize_t name_lower(const char *name, size_t n, char *buf) {
        if (n > 0 && name[n - 1] == '.')
                n--;
        if (n == 0 || n > PUBLIC_SUFFIX_NAME_MAX || name[n - 1] == '.')
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                char c = name[i];

                if (c >= 'A' && c <= 'Z')
                        c = (char) (c - 'A' + 'a');
                else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_'))
                        return -EINVAL;
                if (c == '.' && (i == 0 || buf[i - 1] == '.'))
                        return -EINVAL; /* an empty label */
                buf[i] = c;
        }
        buf[n] = 0;
        return (ssize_t) n;
}

int public_suffix_lookup(const char *name, size_t n, PublicSuffixSection *ret) {
        char buf[PUBLIC_SUFFIX_NAME_MAX + 1];

        if (!name || !ret || name_lower(name, n, buf) < 0)
                return -EINVAL;
        (void) public_suffix_init();
        if (!psl_data)
                return -ENOENT;
        /* "*" (the list's implicit rule for unknown TLDs) counts: an unknown
         * TLD is a public suffix as much as a listed one */
        if (psl_is_public_suffix2(psl_data, buf, PSL_TYPE_ICANN))
                *ret = PUBLIC_SUFFIX_ICANN;
        else if (psl_is_public_suffix2(psl_data, buf, PSL_TYPE_PRIVATE))
                *ret = PUBLIC_SUFFIX_PRIVATE;
        else
                *ret = PUBLIC_SUFFIX_NONE;
        return 0;
}

int public_suffix_below(const char *name, size_t n, char *ret_suffix, size_t ret_size) {
        char buf[PUBLIC_SUFFIX_NAME_MAX + 1], key[PUBLIC_SUFFIX_NAME_MAX + 2];
        size_t lo = 0, hi;
        ssize_t k;

        if (!name || (k = name_lower(name, n, buf)) < 0)
                return -EINVAL;
        n = (size_t) k;
        for (size_t i = 0; i < n; i++)
                key[n - 1 - i] = buf[i];
        key[n] = '.'; /* reversed "x.name": strictly below name */
        key[n + 1] = 0;
        (void) public_suffix_init();
        if (!dat_rev)
                return -ENOENT;
        /* the first rule >= key; rules below name start with key */
        hi = dat_n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (strcmp(dat_rev[mid], key) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo == dat_n || strncmp(dat_rev[lo], key, n + 1) != 0)
                return 0;
        if (ret_suffix && ret_size > 0) {
                size_t len = strlen(dat_rev[lo]);
                if (len < ret_size) {
                        memcpy(ret_suffix, dat_rev[lo], len + 1);
                        reverse(ret_suffix, len);
                } else
                        ret_suffix[0] = 0;
        }
        return 1;
}

const char *public_suffix_section_to_string(PublicSuffixSection s) {
        static const char *const table[_PUBLIC_SUFFIX_MAX] = {
                [PUBLIC_SUFFIX_ICANN] = "ICANN",
                [PUBLIC_SUFFIX_PRIVATE] = "private",
        };
        return s >= 0 && s < _PUBLIC_SUFFIX_MAX ? table[s] : NULL;
}
