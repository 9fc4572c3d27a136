/* SPDX-License-Identifier: MIT */
/* The ingress's pure parts: Host names, traffic tokens, signed links and
 * cookies (forged, expired, for another sandbox), cookie headers. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "alloc-util.h"
#include "e2b.h"
#include "ingress-auth.h"
#include "ingress.h"
#include "str-util.h"
#include "test.h"

TEST(host_parse) {
        char id[17];
        uint16_t port = 0;

        ASSERT_OK(ingress_host_parse("8000-abcdefghijklmnop.localhost", "localhost", &port, id));
        ASSERT_EQ(port, 8000);
        ASSERT_STREQ(id, "abcdefghijklmnop");
        ASSERT_OK(ingress_host_parse("1-ABCDEFGHIJKLMNOP.LocalHost:7072", "localhost", &port, id));
        ASSERT_EQ(port, 1);
        ASSERT_STREQ(id, "abcdefghijklmnop");
        ASSERT_OK(ingress_host_parse("65535-abcdefghijklmnop.sb.example.com.", "sb.example.com", &port, id));
        ASSERT_EQ(port, 65535);

        static const char *const bad[] = {
                "", "localhost", "127.0.0.1:7070", "8000-abcdefghijklmnop", "8000-abcdefghijklmnop.localhost.evil",
                "8000-abcdefghijklmnop.evillocalhost", "0-abcdefghijklmnop.localhost", "08000-abcdefghijklmnop.localhost",
                "65536-abcdefghijklmnop.localhost", "99999999-abcdefghijklmnop.localhost", "-abcdefghijklmnop.localhost",
                "8000-abcdefghijklmno.localhost", "8000-abcdefghijklmnopq.localhost", "8000-abc.efghijklmnop.localhost",
                "8000-1bcdefghijklmnop.localhost", "8000-abcdefghijklmnop.localhost:", "8000-abcdefghijklmnop.localhost:x",
                "8000-abcdefghijklmnop.x.localhost", "x8000-abcdefghijklmnop.localhost", "80a0-abcdefghijklmnop.localhost",
                "8000-abcdefghijklmn-p.localhost", "8000-abcdefghijklmnop..localhost",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                if (ingress_host_parse(bad[i], "localhost", &port, id) != -EINVAL) {
                        fprintf(stderr, "accepted: '%s'\n", bad[i]);
                        ASSERT_TRUE(false);
                }
        }
        ASSERT_ERRNO(ingress_host_parse(NULL, "localhost", &port, id), EINVAL);
        ASSERT_ERRNO(ingress_host_parse("8000-abcdefghijklmnop.localhost", "", &port, id), EINVAL);
}

static void state_dir(Config *c) {
        char tmpl[] = "/tmp/space-test-ingress-XXXXXX";
        *c = (Config){};
        ASSERT_NOT_NULL(mkdtemp(tmpl));
        (void) strscpy(c->state_dir, sizeof c->state_dir, tmpl);
}

static void state_dir_remove(const Config *c) {
        char p[CONFIG_STR_MAX + 32];
        snprintf(p, sizeof p, "%s/e2b.secret", c->state_dir);
        (void) unlink(p);
        (void) rmdir(c->state_dir);
}

TEST(tokens_are_per_sandbox_and_not_the_envd_token) {
        Config c;
        char a[INGRESS_TOKEN_LEN + 1], b[INGRESS_TOKEN_LEN + 1], envd[E2B_TOKEN_LEN + 1];

        state_dir(&c);
        ASSERT_OK(ingress_traffic_token(&c, "abcdefghijklmnop", a));
        ASSERT_OK(ingress_traffic_token(&c, "bbcdefghijklmnop", b));
        ASSERT_OK(e2b_access_token(&c, "abcdefghijklmnop", envd));
        ASSERT_EQ(strlen(a), INGRESS_TOKEN_LEN);
        ASSERT_FALSE(streq(a, b));
        ASSERT_FALSE(streq(a, envd));
        ASSERT_ERRNO(ingress_traffic_token(&c, "../x", a), EINVAL);
        state_dir_remove(&c);
}

TEST(signed_links_and_cookies) {
        Config c;
        char v[INGRESS_SIGNED_MAX], forged[INGRESS_SIGNED_MAX];
        const char *id = "abcdefghijklmnop";

        state_dir(&c);
        ASSERT_OK(ingress_signed_make(&c, "link", id, 2000, v));
        ASSERT_OK(ingress_signed_check(&c, "link", id, v, strlen(v), 1999));
        ASSERT_OK(ingress_signed_check(&c, "link", id, v, strlen(v), 2000));
        ASSERT_ERRNO(ingress_signed_check(&c, "link", id, v, strlen(v), 2001), ETIME);
        /* another sandbox, another kind, a changed expiry, a changed mac, a truncation */
        ASSERT_ERRNO(ingress_signed_check(&c, "link", "bbcdefghijklmnop", v, strlen(v), 1000), EACCES);
        ASSERT_ERRNO(ingress_signed_check(&c, "cookie", id, v, strlen(v), 1000), EACCES);
        memcpy(forged, v, sizeof v);
        forged[0] = '3';
        ASSERT_ERRNO(ingress_signed_check(&c, "link", id, forged, strlen(forged), 1000), EACCES);
        memcpy(forged, v, sizeof v);
        forged[strlen(forged) - 1] = forged[strlen(forged) - 1] == 'a' ? 'b' : 'a';
        ASSERT_ERRNO(ingress_signed_check(&c, "link", id, forged, strlen(forged), 1000), EACCES);
        ASSERT_ERRNO(ingress_signed_check(&c, "link", id, v, strlen(v) - 1, 1000), EACCES);
        ASSERT_ERRNO(ingress_signed_check(&c, "link", id, "", 0, 1000), EACCES);
        ASSERT_ERRNO(ingress_signed_check(&c, "link", id, "0.ab", 4, 1000), EACCES);
        ASSERT_ERRNO(ingress_signed_check(&c, "link", id, "99999999999999999999.x", 22, 1000), EACCES);
        ASSERT_ERRNO(ingress_signed_make(&c, "other", id, 2000, v), EINVAL);
        /* two made in the same second differ (a link is spent by its value) */
        ASSERT_OK(ingress_signed_make(&c, "link", id, 2000, forged));
        ASSERT_FALSE(streq(v, forged));
        ASSERT_OK(ingress_signed_check(&c, "link", id, forged, strlen(forged), 1000));
        state_dir_remove(&c);
}

TEST(cookies) {
        _cleanup_free_ char *rest = NULL, *none = NULL, *tight = NULL;
        size_t n = 0;
        const char *v;

        v = ingress_cookie_find("a=1; space_traffic=123.abc ; b=2", "space_traffic", &n);
        ASSERT_NOT_NULL(v);
        ASSERT_EQ(n, 7);
        ASSERT_TRUE(strncmp(v, "123.abc", 7) == 0);
        ASSERT_NULL(ingress_cookie_find("xspace_traffic=1; space_traffic2=3", "space_traffic", &n));
        ASSERT_NULL(ingress_cookie_find(NULL, "space_traffic", &n));
        ASSERT_OK(ingress_cookie_strip("a=1; space_traffic=123.abc; b=2", "space_traffic", &rest));
        ASSERT_STREQ(rest, "a=1; b=2");
        ASSERT_OK(ingress_cookie_strip("space_traffic=1", "space_traffic", &none));
        ASSERT_NULL(none);
        ASSERT_OK(ingress_cookie_strip("a=1;b=2;c=3;d=4", "space_traffic", &tight));
        ASSERT_STREQ(tight, "a=1; b=2; c=3; d=4");
}
