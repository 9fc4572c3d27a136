/* SPDX-License-Identifier: MIT */
/* The Dockerfile parser of template builds, its variable expansion, the
 * context paths of COPY and .dockerignore. */
#include <stdlib.h>
#include <string.h>

#include "alloc-util.h"
#include "dockerfile.h"
#include "str-util.h"
#include "test.h"

static void parse_ok(const char *text, Dockerfile *d) {
        char err[DOCKERFILE_ERR_MAX] = "";

        if (dockerfile_parse(text, strlen(text), d, err, sizeof err) < 0)
                test_fail(__FILE__, __LINE__, "'%s' refused: %s", text, err);
}

static void parse_bad(const char *text, const char *why) {
        _cleanup_(dockerfile_done) Dockerfile d = {};
        char err[DOCKERFILE_ERR_MAX] = "";

        if (dockerfile_parse(text, strlen(text), &d, err, sizeof err) >= 0)
                test_fail(__FILE__, __LINE__, "'%s' accepted", text);
        if (!strstr(err, why))
                test_fail(__FILE__, __LINE__, "'%s': error '%s' does not say '%s'", text, err, why);
}

TEST(dockerfile_instructions) {
        _cleanup_(dockerfile_done) Dockerfile d = {};

        parse_ok("# syntax=docker/dockerfile:1\n"
                 "ARG BASE=base\n"
                 "from ${BASE} AS build\n"
                 "\n"
                 "ENV A=1 B=\"two words\" \\\n"
                 "    C=3\n"
                 "ENV OLD the rest of it\n"
                 "RUN apt-get update && \\\n"
                 "  # a comment inside\n"
                 "  apt-get install -y x\n"
                 "RUN [\"/bin/echo\", \"hi\"]\n"
                 "COPY --chown=1000:1000 a b /dst/\n"
                 "ADD [\"with space\", \"/x\"]\n"
                 "WORKDIR /srv/app  \n"
                 "USER 1000:1000\n"
                 "LABEL org.x=\"y z\"\n"
                 "ENTRYPOINT [\"/bin/sh\", \"-c\"]\n"
                 "CMD echo hi\r\n",
                 &d);
        ASSERT_EQ(d.n, 13);
        ASSERT_EQ(d.from, 1);
        ASSERT_EQ(d.steps[0].kind, DOCKERFILE_ARG);
        ASSERT_STREQ(d.steps[0].kv[0], "BASE=base");
        ASSERT_EQ(d.steps[1].kind, DOCKERFILE_FROM);
        ASSERT_STREQ(d.steps[1].args[0], "${BASE}");
        ASSERT_EQ(d.steps[1].line, 3);
        ASSERT_STREQ(d.steps[2].kv[0], "A=1");
        ASSERT_STREQ(d.steps[2].kv[1], "B=two words");
        ASSERT_STREQ(d.steps[2].kv[2], "C=3");
        ASSERT_EQ(d.steps[2].line, 5);
        ASSERT_STREQ(d.steps[3].kv[0], "OLD=the rest of it");
        ASSERT_EQ(d.steps[4].kind, DOCKERFILE_RUN);
        ASSERT_FALSE(d.steps[4].json);
        ASSERT_TRUE(strstr(d.steps[4].shell, "update &&") && strstr(d.steps[4].shell, "install -y x"));
        ASSERT_EQ(d.steps[4].line, 8);
        ASSERT_TRUE(d.steps[5].json);
        ASSERT_STREQ(d.steps[5].args[1], "hi");
        ASSERT_STREQ(d.steps[6].chown, "1000:1000");
        ASSERT_EQ(strv_length(d.steps[6].args), 3);
        ASSERT_STREQ(d.steps[7].args[0], "with space");
        ASSERT_STREQ(d.steps[8].args[0], "/srv/app");
        ASSERT_STREQ(d.steps[9].args[0], "1000:1000");
        ASSERT_STREQ(d.steps[10].kv[0], "org.x=y z");
        ASSERT_TRUE(d.steps[11].json);
        ASSERT_STREQ(d.steps[12].shell, "echo hi");
        ASSERT_EQ(d.steps[12].kind, DOCKERFILE_CMD);
}

TEST(dockerfile_refusals) {
        parse_bad("", "no FROM");
        parse_bad("# only a comment\n", "no FROM");
        parse_bad("RUN true\n", "line 1: RUN before FROM");
        parse_bad("FROM base\nFROM other\n", "line 2: a second FROM");
        parse_bad("FROM base\n\n\nEXPOSE 80\n", "line 4: EXPOSE is not supported");
        parse_bad("FROM base\nHEALTHCHECK NONE\n", "line 2: HEALTHCHECK is not supported");
        parse_bad("FROM base\nFOO bar\n", "line 2: unknown instruction 'FOO'");
        parse_bad("FROM base\nRUN\n", "line 2: RUN needs a command");
        parse_bad("FROM base\nRUN --mount=type=cache,target=/x true\n", "line 2: RUN flags");
        parse_bad("FROM base\nCOPY onlyone\n", "line 2: COPY needs a source and a destination");
        parse_bad("FROM base\nCOPY --from=build /a /b\n", "multi-stage");
        parse_bad("FROM base\nCOPY --chmod=644 a /b\n", "flag '--chmod=644' is not supported");
        parse_bad("FROM base\nADD https://example.com/x /x\n", "line 2: ADD of a URL");
        parse_bad("FROM base\nADD git@github.com:a/b /x\n", "ADD of a URL");
        parse_bad("FROM base\nENV 1X=2\n", "not a variable name");
        parse_bad("FROM base\nENV X\n", "needs a value");
        parse_bad("FROM base\nLABEL novalue\n", "NAME=VALUE");
        parse_bad("FROM base\nENV A=\"open\n", "unterminated quote");
        parse_bad("FROM --platform=linux/arm64 base\n", "FROM flags");
        parse_bad("FROM a b\n", "FROM takes one image");
        parse_bad("FROM base\nUSER a b\n", "USER takes one");
        parse_bad("FROM base\nWORKDIR\n", "WORKDIR needs a value");
}

TEST(dockerfile_nul_and_size) {
        _cleanup_(dockerfile_done) Dockerfile d = {};
        char err[DOCKERFILE_ERR_MAX] = "";
        static const char nul[] = "FROM base\nRUN a\0b\n";

        ASSERT_ERRNO(dockerfile_parse(nul, sizeof nul - 1, &d, err, sizeof err), EINVAL);
        ASSERT_TRUE(strstr(err, "NUL") != NULL);
        ASSERT_ERRNO(dockerfile_parse(nul, DOCKERFILE_MAX + 1, &d, err, sizeof err), E2BIG);
}

TEST(dockerfile_expand) {
        char *const vars[] = { (char *) "A=1", (char *) "B=two", (char *) "A=3", (char *) "E=", NULL };
        char err[DOCKERFILE_ERR_MAX];
        struct {
                const char *in, *out;
        } t[] = {
                { "$A", "3" },               { "${B}x", "twox" },       { "${NONE}", "" },
                { "${NONE:-dflt}", "dflt" }, { "${E:-dflt}", "dflt" }, { "${B:+set}", "set" },
                { "${NONE:+set}", "" },      { "\\$A", "$A" },          { "cost $5", "cost $5" },
                { "a$", "a$" },              { "/p/$B/q", "/p/two/q" },
        };

        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                _cleanup_free_ char *out = NULL;
                ASSERT_OK(dockerfile_expand(t[i].in, vars, &out, err, sizeof err));
                ASSERT_STREQ(out, t[i].out);
        }
        {
                _cleanup_free_ char *out = NULL;
                ASSERT_ERRNO(dockerfile_expand("${A", vars, &out, err, sizeof err), EINVAL);
                ASSERT_ERRNO(dockerfile_expand("${A:?x}", vars, &out, err, sizeof err), EINVAL);
        }
}

TEST(dockerfile_context_paths) {
        struct {
                const char *in, *out;
        } ok[] = { { "a", "a" },   { "./a//b/", "a/b" }, { "", "." },         { ".", "." },
                   { "/", "." },   { "/etc/x", "etc/x" }, { "a/../b", "b" }, { "a/b/../../c", "c" } };
        const char *bad[] = { "..", "../x", "a/../../x", "/../x", "./.." };

        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                _cleanup_free_ char *out = NULL;
                ASSERT_OK(dockerfile_context_path(ok[i].in, &out));
                ASSERT_STREQ(out, ok[i].out);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_free_ char *out = NULL;
                ASSERT_ERRNO(dockerfile_context_path(bad[i], &out), EINVAL);
        }
}

TEST(dockerignore) {
        const char *text = "# comment\n\nsecret.key\n*.log\n!keep.log\nbuild/\n**/tmp\n../outside\n";
        _cleanup_strv_free_ char **p = NULL;

        ASSERT_OK(dockerignore_parse(text, strlen(text), &p));
        ASSERT_EQ(strv_length(p), 5);
        ASSERT_TRUE(dockerignore_match(p, "secret.key"));
        ASSERT_FALSE(dockerignore_match(p, "dir/secret.key"));
        ASSERT_TRUE(dockerignore_match(p, "x.log"));
        ASSERT_FALSE(dockerignore_match(p, "keep.log"));
        ASSERT_TRUE(dockerignore_match(p, "build"));
        ASSERT_TRUE(dockerignore_match(p, "build/out/a.o"));
        ASSERT_TRUE(dockerignore_match(p, "a/b/tmp/c"));
        ASSERT_TRUE(dockerignore_match(p, "tmp"));
        ASSERT_FALSE(dockerignore_match(p, "src/main.c"));
}
