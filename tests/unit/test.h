/* SPDX-License-Identifier: MIT */
#pragma once

/* Minimal unit-test framework: TEST(name) { ... } registers itself; ASSERT_*
 * fail the current test (and stop it); main() runs all or those named on the
 * command line, prints a TAP-like line per test and "N passed, N failed". A test
 * calls test_skip("why") to skip (exit 77 if every test skipped). */

#include <setjmp.h>
#include <stdio.h>

#include "macros.h"

typedef void (*test_fn)(void);
void test_register(const char *name, test_fn fn);
_noreturn_ void test_fail(const char *file, int line, const char *fmt, ...) _printf_(3, 4);
_noreturn_ void test_skip(const char *why);
/* A fresh temporary directory for this test, removed after it. */
const char *test_tmpdir(void);
/* The build directory (where binaries are), from $SPACE_BUILD_DIR or argv[0]'s dir. */
const char *test_build_dir(void);

#define TEST(name)                                                            \
        static void test_##name(void);                                        \
        __attribute__((constructor)) static void test_register_##name(void) { \
                test_register(#name, test_##name);                            \
        }                                                                     \
        static void test_##name(void)

#define ASSERT_TRUE(expr)                                                     \
        do {                                                                  \
                if (!(expr))                                                  \
                        test_fail(__FILE__, __LINE__, "expected true: %s", #expr); \
        } while (0)
#define ASSERT_FALSE(expr) ASSERT_TRUE(!(expr))
#define ASSERT_OK(expr)                                                       \
        ({                                                                    \
                long long _r = (long long) (expr);                            \
                if (_r < 0)                                                   \
                        test_fail(__FILE__, __LINE__, "%s failed: %s (%lld)", #expr, strerror((int) -_r), _r); \
                _r;                                                           \
        })
#define ASSERT_ERRNO(expr, err)                                               \
        do {                                                                  \
                long long _r = (long long) (expr);                            \
                if (_r != -(long long) (err))                                 \
                        test_fail(__FILE__, __LINE__, "%s = %lld, expected -%s (%d)", #expr, _r, #err, -(err)); \
        } while (0)
#define ASSERT_EQ(a, b)                                                       \
        do {                                                                  \
                long long _a = (long long) (a), _b = (long long) (b);         \
                if (_a != _b)                                                 \
                        test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, _a, _b); \
        } while (0)
#define ASSERT_STREQ(a, b)                                                    \
        do {                                                                  \
                const char *_a = (a), *_b = (b);                              \
                if (!_a || !_b || strcmp(_a, _b) != 0)                        \
                        test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b, strna(_a), strna(_b)); \
        } while (0)
#define ASSERT_NULL(p) ASSERT_TRUE((p) == NULL)
#define ASSERT_NOT_NULL(p) ASSERT_TRUE((p) != NULL)
