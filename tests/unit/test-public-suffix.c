/* SPDX-License-Identifier: MIT */
/* src/shared/public-suffix.c without its lists: the checks that use it (a
 * credential's host pattern, a policy's wildcard allow rules) fail closed.
 * Each case runs in a child process with a mount namespace of its own, where
 * /usr/share/publicsuffix (Debian's publicsuffix package: the text list and
 * libpsl's distribution file) is an empty tmpfs, or holds an empty, a
 * truncated or a foreign list: the production code reads the real path,
 * no test knob. The list is loaded once per process, so every case forks
 * before the first lookup (no test here loads it in the parent). Needs root
 * (mount namespaces); skipped otherwise. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cred-rules.h"
#include "egress-policy.h"
#include "fd-util.h"
#include "public-suffix.h"
#include "test.h"

#define PSL_DIR "/usr/share/publicsuffix"

/* In the child: a failed check says why and ends it (the framework's longjmp belongs to the parent). */
_printf_(2, 3) static void child_check(bool ok, const char *fmt, ...) {
        va_list ap;

        if (ok)
                return;
        va_start(ap, fmt);
        (void) vfprintf(stderr, fmt, ap);
        va_end(ap);
        (void) fputc('\n', stderr);
        _exit(1);
}

static void write_list(const char *text, size_t n) {
        int fd = open(PUBLIC_SUFFIX_DAT_PATH, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

        child_check(fd >= 0, "create %s: %s", PUBLIC_SUFFIX_DAT_PATH, strerror(errno));
        child_check(write(fd, text, n) == (ssize_t) n, "write %s: %s", PUBLIC_SUFFIX_DAT_PATH, strerror(errno));
        (void) close(fd);
}

/* The real list's first n_lines lines (its ICANN section begins, the file ends early). */
static void write_truncated_list(size_t n_lines) {
        _cleanup_free_ char *text = NULL;
        size_t size = 0, end = 0;

        child_check(read_full_file(PUBLIC_SUFFIX_DAT_PATH, 8U * 1024U * 1024U, &text, &size) >= 0,
                    "read the real list");
        for (size_t lines = 0; end < size && lines < n_lines; end++)
                if (text[end] == '\n')
                        lines++;
        child_check(mount("tmpfs", PSL_DIR, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m") == 0, "tmpfs: %s",
                    strerror(errno));
        write_list(text, end);
}

typedef enum ListState {
        LIST_PRESENT,   /* the installed list, no mount namespace: the control */
        LIST_MISSING,   /* the directory empty */
        LIST_EMPTY,     /* the text list a file of 0 bytes */
        LIST_TRUNCATED, /* the first 2000 lines of the real one (no end of the ICANN section) */
        LIST_FOREIGN,   /* a file of rules that is not the Public Suffix List */
} ListState;

static void child_setup(ListState state) {
        static const char foreign[] = "com\nuk\nco.uk\nexample\n";

        if (state == LIST_PRESENT)
                return;
        if (unshare(CLONE_NEWNS) < 0)
                _exit(77);
        child_check(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0, "private /: %s", strerror(errno));
        if (state == LIST_TRUNCATED) {
                write_truncated_list(2000);
                return;
        }
        child_check(mount("tmpfs", PSL_DIR, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m") == 0, "tmpfs: %s",
                    strerror(errno));
        if (state == LIST_EMPTY)
                write_list("", 0);
        else if (state == LIST_FOREIGN)
                write_list(foreign, sizeof foreign - 1);
}

/* The control: the real list is loaded and refuses what it should. */
static void checks_with_the_list(void) {
        char err[512];

        child_check(public_suffix_init() == 0, "the installed list did not load");
        child_check(cred_host_pattern_check("*.example.com", 13, err, sizeof err) == 0, "refused: %s", err);
        child_check(cred_host_pattern_check("*.amazonaws.com", 15, err, sizeof err) == -EINVAL,
                    "'*.amazonaws.com' accepted");
        child_check(strstr(err, "covers public suffixes below") != NULL, "reason: %s", err);
}

static void child_checks(ListState state) {
        char err[512];
        _cleanup_(egress_policy_freep) EgressPolicy *p = NULL;
        static const char plain[] = "{\"allow\":[\"api.example.com\",\"*.example.com\"]}";
        static const char over_suffix[] = "{\"allow\":[\"*.co.uk\"]}";

        if (state == LIST_PRESENT) {
                checks_with_the_list();
                return;
        }
        /* the text list is incomplete: public_suffix_init says so */
        child_check(public_suffix_init() == -ENOENT, "public_suffix_init() with list %d: %d", (int) state,
                    public_suffix_init());
        child_check(public_suffix_below("amazonaws.com", 13, NULL, 0) == -ENOENT, "below() without the list");
        /* a wildcard credential host: refused, naming the missing list */
        err[0] = 0;
        child_check(cred_host_pattern_check("*.example.com", 13, err, sizeof err) == -EINVAL,
                    "'*.example.com' accepted without the list");
        child_check(strstr(err, "Public Suffix List") && strstr(err, PUBLIC_SUFFIX_DAT_PATH) &&
                            strstr(err, "'*.example.com'"),
                    "unclear reason: %s", err);
        /* one that the text list would refuse as covering suffixes below it: refused all the same */
        child_check(cred_host_pattern_check("*.amazonaws.com", 15, err, sizeof err) == -EINVAL,
                    "'*.amazonaws.com' accepted without the list");
        /* exact hosts need no list */
        child_check(cred_host_pattern_check("api.example.com", 15, err, sizeof err) == 0, "exact host refused: %s",
                    err);
        child_check(cred_host_pattern_check("s3.amazonaws.com", 16, err, sizeof err) == 0,
                    "exact host refused: %s", err);
        /* a policy's wildcards are checked with libpsl's own (built-in) list, which needs no file: what is
         * narrow is allowed, a wildcard over a public suffix still refused */
        child_check(egress_policy_parse(plain, sizeof plain - 1, &p, err, sizeof err) == 0, "parse: %s", err);
        if (streq(public_suffix_source(), "none")) {
                /* libpsl without a built-in list: no wildcard can be checked */
                child_check(egress_policy_check_public_suffixes(p, err, sizeof err) == -EINVAL,
                            "a wildcard allowed without any list");
                child_check(strstr(err, "no Public Suffix List") != NULL, "unclear reason: %s", err);
        } else {
                child_check(streq(public_suffix_source(), "built-in (libpsl)"), "list from %s",
                            public_suffix_source());
                child_check(egress_policy_check_public_suffixes(p, err, sizeof err) == 0, "refused: %s", err);
                p = egress_policy_free(p);
                child_check(egress_policy_parse(over_suffix, sizeof over_suffix - 1, &p, err, sizeof err) == 0,
                            "parse: %s", err);
                child_check(egress_policy_check_public_suffixes(p, err, sizeof err) == -EINVAL,
                            "'*.co.uk' allowed with the built-in list");
        }
}

static void run_case(ListState state) {
        pid_t pid;
        int status;

        if (state != LIST_PRESENT && geteuid() != 0)
                test_skip("needs root (a mount namespace hides the list)");
        if (access(PUBLIC_SUFFIX_DAT_PATH, R_OK) < 0)
                test_skip("Debian's publicsuffix package is not installed");
        (void) fflush(NULL);
        pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                child_setup(state);
                child_checks(state);
                _exit(0);
        }
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
                test_skip("no mount namespace here");
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                test_fail(__FILE__, __LINE__, "list state %d: child %s %d", (int) state,
                          WIFEXITED(status) ? "exited" : "killed by signal",
                          WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

TEST(public_suffix_list_missing) {
        run_case(LIST_MISSING);
}

TEST(public_suffix_list_empty) {
        run_case(LIST_EMPTY);
}

TEST(public_suffix_list_truncated) {
        run_case(LIST_TRUNCATED);
}

TEST(public_suffix_list_foreign) {
        run_case(LIST_FOREIGN);
}

/* The control: the real list, in the same kind of child. */
TEST(public_suffix_list_present) {
        run_case(LIST_PRESENT);
}
