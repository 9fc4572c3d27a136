/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _noreturn_ __attribute__((noreturn))
#define _pure_ __attribute__((pure))
#define _warn_unused_result_ __attribute__((warn_unused_result))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define STRLEN(s) (sizeof(s) - 1)

/* Hand over ownership: returns the value and resets the variable. */
#define TAKE_PTR(p)                          \
        ({                                   \
                __typeof__(p) _take_ = (p);  \
                (p) = NULL;                  \
                _take_;                      \
        })
#define TAKE_FD(fd)                          \
        ({                                   \
                int _take_fd_ = (fd);        \
                (fd) = -EBADF;               \
                _take_fd_;                   \
        })

/* Defines func##p(type *p) that calls func(*p) if non-NULL, for _cleanup_. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)          \
        static inline void func##p(type *p) {            \
                if (*p)                                  \
                        func(*p);                        \
        }

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline void *mfree(void *p) {
        free(p);
        return NULL;
}

/* Returns a negative errno from errno, never 0. */
static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}

#define RET_NERRNO(expr)                        \
        ({                                      \
                long _r_ = (long) (expr);       \
                _r_ < 0 ? negative_errno() : (int) _r_; \
        })

#define streq(a, b) (strcmp((a), (b)) == 0)
#define strneq(a, b, n) (strncmp((a), (b), (n)) == 0)
#define isempty(s) (!(s) || (s)[0] == '\0')

static inline const char *strempty(const char *s) {
        return s ? s : "";
}
static inline const char *strna(const char *s) {
        return s ? s : "n/a";
}

#define zero(x) memset(&(x), 0, sizeof(x))

/* Calls banned by house style: using them fails the build (-Werror). */
#include <stdio.h>
/* gcc only: clang refuses attributes on glibc's fortified inline definitions. */
#if defined(__clang__)
#define BANNED(why)
#else
#define BANNED(why) __attribute__((deprecated(why)))
#endif
BANNED("use strscpy/strjoin") char *strcpy(char *, const char *);
BANNED("use strjoin") char *strcat(char *, const char *);
BANNED("use snprintf/asprintf") int sprintf(char *, const char *, ...);
BANNED("use safe_atoi") int atoi(const char *);
BANNED("use safe_atoi") long atol(const char *);
BANNED("use fork+exec") int system(const char *);
BANNED("use fork+exec") FILE *popen(const char *, const char *);
BANNED("use secure_getenv") char *getenv(const char *);
