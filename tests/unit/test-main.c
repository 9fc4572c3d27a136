/* SPDX-License-Identifier: MIT */
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>

#include "fd-util.h"
#include "test.h"

typedef struct TestCase {
        const char *name;
        test_fn fn;
} TestCase;

static TestCase tests[512];
static size_t n_tests;
static jmp_buf test_jmp;
static int test_outcome; /* 0 pass, 1 fail, 2 skip */
static char tmpdir[PATH_MAX];
static char build_dir[PATH_MAX];

void test_register(const char *name, test_fn fn) {
        if (n_tests < ELEMENTSOF(tests))
                tests[n_tests++] = (TestCase){ name, fn };
}

void test_fail(const char *file, int line, const char *fmt, ...) {
        va_list ap;
        fprintf(stderr, "  %s:%d: ", file, line);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        test_outcome = 1;
        longjmp(test_jmp, 1);
}

void test_skip(const char *why) {
        fprintf(stderr, "  skipped: %s\n", why);
        test_outcome = 2;
        longjmp(test_jmp, 1);
}

const char *test_tmpdir(void) {
        if (!tmpdir[0]) {
                snprintf(tmpdir, sizeof tmpdir, "/tmp/space-test-XXXXXX");
                if (!mkdtemp(tmpdir)) {
                        tmpdir[0] = 0;
                        test_fail(__FILE__, __LINE__, "mkdtemp: %m");
                }
        }
        return tmpdir;
}

const char *test_build_dir(void) {
        return build_dir;
}

int main(int argc, char *argv[]) {
        static unsigned passed, failed, skipped;
        const char *e = secure_getenv("SPACE_BUILD_DIR");

        if (e)
                snprintf(build_dir, sizeof build_dir, "%s", e);
        else {
                char self[PATH_MAX];
                ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
                if (k > 0) {
                        self[k] = 0;
                        /* test binaries live in <build>/tests */
                        snprintf(build_dir, sizeof build_dir, "%s/..", dirname(self));
                }
        }

        static size_t i; /* static: survives the longjmp of a failing test */
        for (i = 0; i < n_tests; i++) {
                bool selected = argc <= 1;
                for (int a = 1; a < argc; a++)
                        if (streq(argv[a], tests[i].name))
                                selected = true;
                if (!selected)
                        continue;
                test_outcome = 0;
                tmpdir[0] = 0;
                if (setjmp(test_jmp) == 0)
                        tests[i].fn();
                if (tmpdir[0])
                        (void) rm_rf(tmpdir);
                switch (test_outcome) {
                case 0:
                        printf("ok - %s\n", tests[i].name);
                        passed++;
                        break;
                case 1:
                        printf("not ok - %s\n", tests[i].name);
                        failed++;
                        break;
                default:
                        printf("ok - %s # SKIP\n", tests[i].name);
                        skipped++;
                }
                fflush(stdout);
        }
        printf("%u passed, %u failed, %u skipped\n", passed, failed, skipped);
        if (failed)
                return 1;
        if (passed == 0 && skipped > 0)
                return 77;
        return 0;
}
