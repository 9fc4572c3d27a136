/* SPDX-License-Identifier: MIT */
/* The Public Suffix List through libpsl. See public-suffix.h. */

#include <errno.h>
#include <fcntl.h>
#include <libpsl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "public-suffix.h"

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const psl_ctx_t *psl_data;
static const char *psl_from = "none";

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
}

int public_suffix_init(void) {
        (void) pthread_once(&load_once, load);
        return psl_data ? 0 : -ENOENT;
}

const char *public_suffix_source(void) {
        return psl_data ? psl_from : "none";
}

int public_suffix_lookup(const char *name, size_t n, PublicSuffixSection *ret) {
        char buf[PUBLIC_SUFFIX_NAME_MAX + 1];
        int r;

        if (!name || !ret)
                return -EINVAL;
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
        r = public_suffix_init();
        if (r < 0)
                return r;
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

const char *public_suffix_section_to_string(PublicSuffixSection s) {
        static const char *const table[_PUBLIC_SUFFIX_MAX] = {
                [PUBLIC_SUFFIX_ICANN] = "ICANN",
                [PUBLIC_SUFFIX_PRIVATE] = "private",
        };
        return s >= 0 && s < _PUBLIC_SUFFIX_MAX ? table[s] : NULL;
}
