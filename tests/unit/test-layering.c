/* SPDX-License-Identifier: MIT */
/* The layering of STYLE.md, checked on every #include "..." under src/:
 * basic ← shared ← {proto, store, runtime, storage, net, gateway} ←
 * {api, controller, worker} ← spaced; the agent links only basic and proto;
 * the API side reaches a worker only through worker-client.h. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "str-util.h"
#include "test.h"

#ifndef SPACE_SOURCE_ROOT
#error "SPACE_SOURCE_ROOT must be defined by the build"
#endif

typedef struct Rule {
        const char *folder;
        const char *may_use; /* space-separated folders */
} Rule;

static const Rule rules[] = {
        { "basic", "basic" },
        { "shared", "basic shared" },
        { "proto", "basic proto" },
        { "store", "basic shared store" },
        { "storage", "basic shared storage oci-image" },
        { "runtime", "basic shared proto runtime" },
        { "net", "basic shared net" },
        { "gateway", "basic shared proto net gateway" },
        { "worker", "basic shared proto store storage oci-image runtime net gateway worker" },
        { "api", "basic shared proto store worker-client oci-image api" },
        { "ingress", "basic shared proto store worker-client net api ingress" },
        { "controller", "basic shared proto store worker-client controller" },
        { "agent", "basic proto agent" },
        { "cli", "basic shared cli" },
        { "spaced", "basic shared proto store storage oci-image runtime net gateway worker worker-client api ingress controller spaced" },
};

/* header name → folder (first path component under src/), and whether it
 * lies in a subfolder of it (src/runtime/ns/: a part's insides, private to
 * that folder; what it publishes is at its top) */
static char *headers[1024][2];
static bool header_private[1024];
static size_t n_headers;

static void index_headers(const char *dir, const char *top, unsigned depth) {
        DIR *d = opendir(dir);
        struct dirent *de;
        while (d && (de = readdir(d))) {
                char p[PATH_MAX];
                struct stat st;
                if (de->d_name[0] == '.')
                        continue;
                snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
                if (stat(p, &st) < 0)
                        continue;
                if (S_ISDIR(st.st_mode))
                        index_headers(p, top, depth + 1);
                else if (endswith(de->d_name, ".h") && n_headers < ELEMENTSOF(headers)) {
                        headers[n_headers][0] = strdup(de->d_name);
                        headers[n_headers][1] = strdup(top);
                        header_private[n_headers] = depth > 0;
                        n_headers++;
                }
        }
        if (d)
                closedir(d);
}

static bool is_private(const char *header) {
        for (size_t i = 0; i < n_headers; i++)
                if (streq(headers[i][0], header))
                        return header_private[i];
        return false;
}

static const char *folder_of(const char *header) {
        if (streq(header, "worker-client.h") || streq(header, "worker-proto.h"))
                return "worker-client";
        if (streq(header, "oci-image.h") || streq(header, "oci-tar.h"))
                /* pure parsing of image JSON and tar streams: a registry pull resolves an
                 * index, a template build reads its context */
                return "oci-image";
        for (size_t i = 0; i < n_headers; i++)
                if (streq(headers[i][0], header))
                        return headers[i][1];
        return NULL;
}

static bool allowed(const char *folder, const char *used) {
        for (size_t i = 0; i < ELEMENTSOF(rules); i++)
                if (streq(rules[i].folder, folder)) {
                        char buf[512], *save = NULL;
                        snprintf(buf, sizeof buf, "%s", rules[i].may_use);
                        for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save))
                                if (streq(t, used))
                                        return true;
                        return false;
                }
        return false; /* a folder without a rule is a failure: add it to the table */
}

static unsigned violations;

static void check_file(const char *path, const char *folder) {
        _cleanup_free_ char *text = NULL;
        char *save = NULL;
        if (read_full_file(path, 4 << 20, &text, NULL) < 0)
                return;
        for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                const char *p = startswith(line, "#include \"");
                char name[256];
                const char *end, *used;
                if (!p || !(end = strchr(p, '"')) || (size_t) (end - p) >= sizeof name)
                        continue;
                memcpy(name, p, (size_t) (end - p));
                name[end - p] = 0;
                if (streq(name, "space-build.h"))
                        continue;
                used = folder_of(name);
                if (!used) {
                        /* not a header under src/: a typo that builds by accident, or a header
                         * from outside the tree that no rule covers */
                        fprintf(stderr, "  %s: includes %s, which is no header under src/\n", path, name);
                        violations++;
                        continue;
                }
                /* a worker file may use its own client header */
                if (streq(used, "worker-client") && streq(folder, "worker"))
                        continue;
                if (!allowed(folder, used)) {
                        fprintf(stderr, "  %s: includes %s (%s) — not allowed for %s/\n", path, name, used, folder);
                        violations++;
                } else if (!streq(used, folder) && is_private(name)) {
                        fprintf(stderr, "  %s: includes %s, which is private to %s/ (in a subfolder)\n", path,
                                name, used);
                        violations++;
                }
        }
}

static void walk(const char *dir, const char *top) {
        DIR *d = opendir(dir);
        struct dirent *de;
        while (d && (de = readdir(d))) {
                char p[PATH_MAX];
                struct stat st;
                if (de->d_name[0] == '.')
                        continue;
                snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
                if (stat(p, &st) < 0)
                        continue;
                if (S_ISDIR(st.st_mode))
                        walk(p, top);
                else if (endswith(de->d_name, ".c") || endswith(de->d_name, ".h"))
                        check_file(p, top);
        }
        if (d)
                closedir(d);
}

TEST(include_layering) {
        char src[PATH_MAX];
        DIR *d;
        struct dirent *de;

        snprintf(src, sizeof src, "%s/src", SPACE_SOURCE_ROOT);
        d = opendir(src);
        ASSERT_NOT_NULL(d);
        while ((de = readdir(d))) {
                char p[PATH_MAX];
                if (de->d_name[0] == '.')
                        continue;
                snprintf(p, sizeof p, "%s/%s", src, de->d_name);
                index_headers(p, de->d_name, 0);
        }
        rewinddir(d);
        while ((de = readdir(d))) {
                char p[PATH_MAX];
                if (de->d_name[0] == '.')
                        continue;
                snprintf(p, sizeof p, "%s/%s", src, de->d_name);
                walk(p, de->d_name);
        }
        closedir(d);
        for (size_t i = 0; i < n_headers; i++) {
                free(headers[i][0]);
                free(headers[i][1]);
        }
        n_headers = 0;
        ASSERT_EQ(violations, 0);
}

TEST(unknown_header_is_a_violation) {
        char path[] = "/tmp/space-test-layering-XXXXXX.c";
        _cleanup_close_ int fd = mkstemps(path, 2);
        static const char text[] = "#include \"no-such-header.h\"\n#include \"space-build.h\"\n";
        unsigned before = violations;

        ASSERT_TRUE(fd >= 0);
        ASSERT_EQ(write(fd, text, sizeof text - 1), (ssize_t) (sizeof text - 1));
        check_file(path, "api");
        (void) unlink(path);
        ASSERT_EQ(violations, before + 1);
        violations = before;
}

TEST(private_header_is_a_violation_outside_its_folder) {
        char src[PATH_MAX], path[] = "/tmp/space-test-layering-XXXXXX.c";
        _cleanup_close_ int fd = mkstemps(path, 2);
        static const char text[] = "#include \"runtime.h\"\n#include \"ns-setup.h\"\n#include \"vmm.h\"\n";
        unsigned before = violations;

        snprintf(src, sizeof src, "%s/src/runtime", SPACE_SOURCE_ROOT);
        index_headers(src, "runtime", 0);
        ASSERT_TRUE(fd >= 0);
        ASSERT_EQ(write(fd, text, sizeof text - 1), (ssize_t) (sizeof text - 1));
        check_file(path, "worker");     /* runtime.h is public, ns-setup.h and vmm.h are not */
        ASSERT_EQ(violations, before + 2);
        check_file(path, "runtime");    /* inside runtime/ all three are its own */
        ASSERT_EQ(violations, before + 2);
        (void) unlink(path);
        violations = before;
        for (size_t i = 0; i < n_headers; i++) {
                free(headers[i][0]);
                free(headers[i][1]);
        }
        n_headers = 0;
}

TEST(rules_reject_upward_use) {
        ASSERT_FALSE(allowed("basic", "shared"));
        ASSERT_FALSE(allowed("agent", "store"));
        ASSERT_FALSE(allowed("api", "runtime"));
        ASSERT_FALSE(allowed("api", "worker"));
        ASSERT_TRUE(allowed("api", "worker-client"));
        ASSERT_FALSE(allowed("nonexistent", "basic"));
}
