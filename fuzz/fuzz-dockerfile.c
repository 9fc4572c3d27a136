/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the Dockerfile parser of template builds
 * (src/api/dockerfile.c): the input either fails with an error message or
 * gives at most DOCKERFILE_STEPS_MAX instructions, one FROM with only ARGs
 * before it, each with its line and its arguments; every argument expands
 * (or fails with a message), a COPY source that is a context path is
 * relative and never climbs out, and the input read as a .dockerignore
 * gives patterns that match without crashing. */
#include <stdio.h>
#include <string.h>

#include "alloc-util.h"
#include "dockerfile.h"
#include "fuzz-check.h"
#include "str-util.h"

static void check_expand(const char *s) {
        char *const vars[] = { (char *) "A=1", (char *) "PATH=/bin", NULL };
        _cleanup_free_ char *out = NULL;
        char err[DOCKERFILE_ERR_MAX] = "";

        if (dockerfile_expand(s, vars, &out, err, sizeof err) < 0)
                CHECK(err[0] != '\0' || out == NULL);
        else
                CHECK(out != NULL);
}

static void check_path(const char *s) {
        _cleanup_free_ char *clean = NULL;

        if (dockerfile_context_path(s, &clean) < 0)
                return;
        CHECK(clean[0] != '/' && !strstr(clean, "//"));
        CHECK(!streq(clean, "..") && !startswith(clean, "../") && !strstr(clean, "/../") && !endswith(clean, "/.."));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(dockerfile_done) Dockerfile d = {};
        _cleanup_strv_free_ char **ignore = NULL;
        char err[DOCKERFILE_ERR_MAX] = "";

        if (size > 64 * 1024)
                return 0;
        if (dockerignore_parse((const char *) data, size, &ignore) >= 0) {
                for (char **p = ignore; *p; p++) {
                        CHECK((*p)[0] != '/');
                        (void) dockerignore_match(ignore, *p[0] == '!' ? *p + 1 : *p);
                }
                (void) dockerignore_match(ignore, "a/b/c");
        }
        if (dockerfile_parse((const char *) data, size, &d, err, sizeof err) < 0) {
                CHECK(err[0] != '\0');
                return 0;
        }
        CHECK(d.n > 0 && d.n <= DOCKERFILE_STEPS_MAX && d.from < d.n);
        CHECK(d.steps[d.from].kind == DOCKERFILE_FROM && d.steps[d.from].args && d.steps[d.from].args[0]);
        for (size_t i = 0; i < d.n; i++) {
                const DockerfileStep *s = &d.steps[i];
                CHECK(s->line > 0 && s->text && dockerfile_kind_to_string(s->kind));
                CHECK(i >= d.from || s->kind == DOCKERFILE_ARG);
                CHECK(i == d.from || s->kind != DOCKERFILE_FROM);
                if (i > 0)
                        CHECK(s->line > d.steps[i - 1].line);
                if (s->kind == DOCKERFILE_RUN)
                        CHECK(s->json ? s->args && s->args[0] : s->shell && s->shell[0]);
                if (s->kind == DOCKERFILE_COPY || s->kind == DOCKERFILE_ADD) {
                        CHECK(strv_length(s->args) >= 2);
                        for (char **a = s->args; *a; a++) {
                                check_expand(*a);
                                check_path(*a);
                        }
                }
                for (char **kv = s->kv; kv && *kv; kv++) {
                        CHECK(s->kind == DOCKERFILE_ARG || strchr(*kv, '='));
                        check_expand(*kv);
                }
        }
        return 0;
}
