/* SPDX-License-Identifier: MIT */
/* The image reference parser of template pulls, and the host lists of the
 * registry_* config keys. */
#include <stdio.h>
#include <string.h>

#include "registry.h"
#include "test.h"

static void ref_is(const char *in, const char *host, const char *name, const char *repo, const char *tag,
                   const char *digest) {
        RegistryRef r;
        char err[160] = "";

        if (registry_ref_parse(in, &r, err, sizeof err) < 0)
                test_fail(__FILE__, __LINE__, "'%s' refused: %s", in, err);
        ASSERT_STREQ(r.host, host);
        ASSERT_STREQ(r.name, name);
        ASSERT_STREQ(r.repo, repo);
        ASSERT_STREQ(r.tag, tag);
        ASSERT_STREQ(r.digest, digest);
}

static void ref_bad(const char *in, const char *why) {
        RegistryRef r;
        char err[160] = "";

        ASSERT_ERRNO(registry_ref_parse(in, &r, err, sizeof err), EINVAL);
        if (!strstr(err, why))
                test_fail(__FILE__, __LINE__, "'%s': error '%s' does not say '%s'", strna(in), err, why);
}

#define D "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

TEST(ref_valid) {
        ref_is("docker.io/library/python:3.12", "registry-1.docker.io", "docker.io", "library/python", "3.12", "");
        ref_is("docker.io/python", "registry-1.docker.io", "docker.io", "library/python", "latest", "");
        ref_is("index.docker.io/org/app:v1", "registry-1.docker.io", "index.docker.io", "org/app", "v1", "");
        ref_is("ghcr.io/org/team/app", "ghcr.io", "ghcr.io", "org/team/app", "latest", "");
        ref_is("127.0.0.1:5000/repo:tag", "127.0.0.1:5000", "127.0.0.1:5000", "repo", "tag", "");
        ref_is("localhost/a", "localhost", "localhost", "a", "latest", "");
        ref_is("localhost:5000/a_b/c__d/e-f/g--h.i:T_1.x-y", "localhost:5000", "localhost:5000", "a_b/c__d/e-f/g--h.i",
               "T_1.x-y", "");
        ref_is("reg.test/app@" D, "reg.test", "reg.test", "app", "", D);
        ref_is("reg.test/app:v1@" D, "reg.test", "reg.test", "app", "", D); /* the digest wins */
        ref_is("[::1]:5000/app", "[::1]:5000", "[::1]:5000", "app", "latest", "");
        ref_is("Reg.Example.COM/app:_x", "Reg.Example.COM", "Reg.Example.COM", "app", "_x", "");
}

TEST(ref_invalid) {
        char long_tag[200], long_ref[700];

        ref_bad("", "empty");
        ref_bad(NULL, "empty");
        ref_bad("python:3.12", "names no registry");
        ref_bad("library/python", "names no registry");
        ref_bad("registry/python", "names no registry");
        ref_bad("reg.test", "names no registry");
        ref_bad("reg.test/", "no repository");
        ref_bad("reg.test/:tag", "no repository");
        ref_bad("reg.test/App", "lowercase");
        ref_bad("reg.test/a//b", "lowercase");
        ref_bad("reg.test/a/", "ends with");
        ref_bad("reg.test/-a", "lowercase");
        ref_bad("reg.test/a.", "lowercase");
        ref_bad("reg.test/a..b", "lowercase");
        ref_bad("reg.test/a___b", "lowercase");
        ref_bad("reg.test/a/../b", "lowercase");
        ref_bad("reg.test/a:", "tag");
        ref_bad("reg.test/a:-x", "tag");
        ref_bad("reg.test/a:x/y", "lowercase"); /* a ':' inside the path is no tag */
        ref_bad("reg.test/a:b:c", "lowercase");
        ref_bad("reg.test/a@sha256:abc", "digest");
        ref_bad("reg.test/a@sha512:" "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "digest");
        ref_bad("reg.test/a@sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef", "digest");
        ref_bad("reg.test/a@" D "@" D, "more than one '@'");
        ref_bad("reg.test:0/a", "registry must be");
        ref_bad("reg.test:65536/a", "registry must be");
        ref_bad("reg.test:/a", "registry must be");
        ref_bad("reg.test:01/a", "registry must be");
        ref_bad("-reg.test/a", "registry must be");
        ref_bad("reg-.test/a", "registry must be");
        ref_bad("reg..test/a", "registry must be");
        ref_bad("user@reg.test/a", "digest"); /* no userinfo */
        ref_bad("reg.test/a b", "space");
        ref_bad("reg.test/a\n", "control");
        ref_bad("https://reg.test/a", "registry must be");
        memset(long_tag, 'a', sizeof long_tag);
        memcpy(long_tag, "reg.test/a:", 11);
        long_tag[11 + 129] = '\0';
        ref_bad(long_tag, "tag");
        memset(long_ref, 'a', sizeof long_ref);
        memcpy(long_ref, "reg.test/", 9);
        long_ref[sizeof long_ref - 1] = '\0';
        ref_bad(long_ref, "too long");
}

TEST(host_lists) {
        ASSERT_TRUE(registry_host_listed("a.test:5000", "a.test:5000"));
        ASSERT_TRUE(registry_host_listed("x.test, a.test:5000 ,y", "a.test:5000"));
        ASSERT_TRUE(registry_host_listed("A.Test", "a.test"));
        ASSERT_FALSE(registry_host_listed("a.test", "a.test:5000"));
        ASSERT_FALSE(registry_host_listed("a.test:5000", "a.test"));
        ASSERT_FALSE(registry_host_listed("", "a.test"));
        ASSERT_FALSE(registry_host_listed(NULL, "a.test"));
        ASSERT_FALSE(registry_host_listed("b.a.test", "a.test"));
}
