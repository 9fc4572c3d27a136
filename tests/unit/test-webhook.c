/* SPDX-License-Identifier: MIT */
/* src/shared/webhook.c: the URL a tenant names, the SSRF guard (the attack
 * addresses next to the defence), the signatures against known values, and
 * the event patterns with their E2B names. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "str-util.h"
#include "test.h"
#include "webhook-post.h"
#include "webhook.h"

TEST(url_parse_good) {
        WebhookUrl u;

        ASSERT_OK(webhook_url_parse("http://example.com/hook?x=1", &u, NULL));
        ASSERT_FALSE(u.https);
        ASSERT_STREQ(u.host, "example.com");
        ASSERT_EQ(u.port, 80);
        ASSERT_STREQ(u.target, "/hook?x=1");
        ASSERT_OK(webhook_url_parse("HTTPS://Example.COM:8443", &u, NULL));
        ASSERT_TRUE(u.https);
        ASSERT_STREQ(u.host, "example.com");
        ASSERT_EQ(u.port, 8443);
        ASSERT_STREQ(u.target, "/");
        ASSERT_OK(webhook_url_parse("http://[::1]:9/a", &u, NULL));
        ASSERT_STREQ(u.host, "::1");
        ASSERT_EQ(u.port, 9);
        ASSERT_OK(webhook_url_parse("http://h?q", &u, NULL));
        ASSERT_STREQ(u.target, "/?q");
}

TEST(url_parse_bad) {
        static const char *const bad[] = {
                "", "ftp://example.com/", "example.com", "file:///etc/passwd", "http://", "http:///x",
                "http://user:pw@example.com/", "http://example.com:0/", "http://example.com:65536/",
                "http://example.com:/", "http://example.com:8x/", "http://exa mple.com/", "http://ex_ample.com/",
                "http://example.com/#frag", "http://[::1/", "http://[zz]/", "gopher://127.0.0.1:25/",
                "http://example.com/\x01", "http://example.com/\xc3\xa9",
        };
        char long_url[WEBHOOK_URL_MAX + 16];
        const char *why = NULL;
        WebhookUrl u;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                ASSERT_ERRNO(webhook_url_parse(bad[i], &u, &why), EINVAL);
                ASSERT_NOT_NULL(why);
        }
        memcpy(long_url, "http://a.b/", 11);
        memset(long_url + 11, 'x', sizeof long_url - 12);
        long_url[sizeof long_url - 1] = 0;
        ASSERT_ERRNO(webhook_url_parse(long_url, &u, &why), EINVAL);
        ASSERT_STREQ(why, "url is longer than 2047 bytes");
}

static const char *v4(const WebhookGuard *g, const char *a) {
        struct sockaddr_in sa = { .sin_family = AF_INET };

        ASSERT_TRUE(inet_pton(AF_INET, a, &sa.sin_addr) == 1);
        return webhook_addr_forbidden(g, (struct sockaddr *) &sa);
}

static const char *v6(const WebhookGuard *g, const char *a) {
        struct sockaddr_in6 sa = { .sin6_family = AF_INET6 };

        ASSERT_TRUE(inet_pton(AF_INET6, a, &sa.sin6_addr) == 1);
        return webhook_addr_forbidden(g, (struct sockaddr *) &sa);
}

TEST(guard_refuses) {
        WebhookGuard g;

        ASSERT_OK(webhook_guard_init(&g, false, "100.127.0.0/16"));
        ASSERT_STREQ(v4(&g, "127.0.0.1"), "loopback");
        ASSERT_STREQ(v4(&g, "127.1.2.3"), "loopback");
        ASSERT_STREQ(v4(&g, "169.254.169.254"), "metadata");
        ASSERT_STREQ(v4(&g, "169.254.1.1"), "link-local");
        ASSERT_STREQ(v4(&g, "0.0.0.0"), "unspecified");
        ASSERT_STREQ(v4(&g, "10.1.2.3"), "private");
        ASSERT_STREQ(v4(&g, "172.20.0.1"), "private");
        ASSERT_STREQ(v4(&g, "192.168.0.1"), "private");
        ASSERT_STREQ(v4(&g, "224.0.0.1"), "multicast");
        ASSERT_STREQ(v4(&g, "255.255.255.255"), "reserved");
        ASSERT_NOT_NULL(v4(&g, "100.127.3.4")); /* the pool (inside 100.64/10 as well) */
        ASSERT_STREQ(v6(&g, "::1"), "loopback");
        ASSERT_STREQ(v6(&g, "::"), "unspecified");
        ASSERT_STREQ(v6(&g, "fe80::1"), "link-local");
        ASSERT_STREQ(v6(&g, "fd00::1"), "private");
        ASSERT_STREQ(v6(&g, "ff02::1"), "multicast");
        /* an IPv4 address in IPv6 clothing is judged as IPv4 */
        ASSERT_STREQ(v6(&g, "::ffff:127.0.0.1"), "loopback");
        ASSERT_STREQ(v6(&g, "::ffff:169.254.169.254"), "metadata");
        ASSERT_STREQ(v6(&g, "64:ff9b::a9fe:a9fe"), "metadata");
        ASSERT_STREQ(v6(&g, "::127.0.0.1"), "loopback");
        ASSERT_STREQ(v6(&g, "::10.0.0.1"), "private");
        /* public addresses pass */
        ASSERT_NULL(v4(&g, "93.184.216.34"));
        ASSERT_NULL(v6(&g, "2606:2800:220:1::1"));
}

TEST(guard_pool_and_allow_private) {
        WebhookGuard g;

        ASSERT_OK(webhook_guard_init(&g, false, "203.0.113.0/24"));
        ASSERT_STREQ(v4(&g, "203.0.113.9"), "the sandboxes' network");
        ASSERT_NULL(v4(&g, "203.0.114.9"));
        ASSERT_ERRNO(webhook_guard_init(&g, false, "nonsense"), EINVAL);
        ASSERT_ERRNO(webhook_guard_init(&g, false, "10.0.0.0/33"), EINVAL);
        ASSERT_OK(webhook_guard_init(&g, true, ""));
        ASSERT_NULL(v4(&g, "127.0.0.1"));
        ASSERT_NULL(v4(&g, "169.254.169.254"));
        ASSERT_NULL(v6(&g, "::1"));
        /* never a receiver, whatever the operator allows */
        ASSERT_STREQ(v4(&g, "224.0.0.1"), "multicast");
}

TEST(resolve_checks_every_address) {
        struct sockaddr_storage ss;
        socklen_t len;
        char why[256];
        WebhookGuard g;
        WebhookUrl u;

        ASSERT_OK(webhook_guard_init(&g, false, ""));
        ASSERT_OK(webhook_url_parse("http://localhost:8080/x", &u, NULL));
        ASSERT_ERRNO(webhook_resolve(&g, &u, &ss, &len, why, sizeof why), EPERM);
        ASSERT_TRUE(strstr(why, "loopback") != NULL);
        ASSERT_OK(webhook_url_parse("http://169.254.169.254/latest/meta-data/", &u, NULL));
        ASSERT_ERRNO(webhook_resolve(&g, &u, &ss, &len, why, sizeof why), EPERM);
        ASSERT_TRUE(strstr(why, "metadata") != NULL);
        ASSERT_OK(webhook_url_parse("http://no-such-host.invalid/", &u, NULL));
        ASSERT_ERRNO(webhook_resolve(&g, &u, &ss, &len, why, sizeof why), EHOSTUNREACH);
        ASSERT_OK(webhook_guard_init(&g, true, ""));
        ASSERT_OK(webhook_url_parse("http://127.0.0.1:8080/x", &u, NULL));
        ASSERT_OK(webhook_resolve(&g, &u, &ss, &len, why, sizeof why));
        ASSERT_EQ(ss.ss_family, AF_INET);
        ASSERT_EQ(ntohs(((struct sockaddr_in *) &ss)->sin_port), 8080);
}

TEST(signatures) {
        char hex[WEBHOOK_SIG_HEX], b64[WEBHOOK_SIG_B64], secret[WEBHOOK_SECRET_GEN_LEN + 1];
        char other[WEBHOOK_SECRET_GEN_LEN + 1];

        /* python3: hmac.new(b'whsec_test', b'1700000000.{"a":1}', hashlib.sha256).hexdigest() */
        ASSERT_OK(webhook_sign("whsec_test", "1700000000", "{\"a\":1}", 7, hex));
        ASSERT_STREQ(hex, "38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789");
        /* another timestamp is another signature (a replay with a new time does not verify) */
        ASSERT_OK(webhook_sign("whsec_test", "1700000001", "{\"a\":1}", 7, hex));
        ASSERT_FALSE(streq(hex, "38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789"));
        /* base64(sha256(b'whsec_test{"a":1}')).rstrip('=') */
        ASSERT_OK(webhook_sign_e2b("whsec_test", "{\"a\":1}", 7, b64));
        ASSERT_STREQ(b64, "CX5qarZl5mOYUHAn+uk1onc6wLUATjBkX7VuWYsdn2Q");
        ASSERT_OK(webhook_secret_generate(secret));
        ASSERT_OK(webhook_secret_generate(other));
        ASSERT_TRUE(startswith(secret, "whsec_") != NULL);
        ASSERT_EQ(strlen(secret), WEBHOOK_SECRET_GEN_LEN);
        ASSERT_FALSE(streq(secret, other));
}

TEST(patterns) {
        ASSERT_TRUE(webhook_pattern_valid("*"));
        ASSERT_TRUE(webhook_pattern_valid("sandbox.*"));
        ASSERT_TRUE(webhook_pattern_valid("sandbox.created"));
        ASSERT_TRUE(webhook_pattern_valid("sandbox.lifecycle.killed"));
        ASSERT_TRUE(webhook_pattern_valid("sandbox.lifecycle.*"));
        ASSERT_FALSE(webhook_pattern_valid("sandbox.nope"));
        ASSERT_FALSE(webhook_pattern_valid("key.*"));
        ASSERT_FALSE(webhook_pattern_valid(""));
        ASSERT_FALSE(webhook_pattern_valid("sandbox.created "));
        ASSERT_TRUE(webhook_pattern_match("sandbox.*", "sandbox.paused"));
        ASSERT_FALSE(webhook_pattern_match("sandbox.*", "key.created"));
        ASSERT_TRUE(webhook_pattern_match("*", "key.created"));
        ASSERT_TRUE(webhook_pattern_match("sandbox.lifecycle.killed", "sandbox.deleted"));
        ASSERT_TRUE(webhook_pattern_match("sandbox.lifecycle.paused", "sandbox.suspended"));
        ASSERT_FALSE(webhook_pattern_match("sandbox.lifecycle.*", "sandbox.oom"));
        ASSERT_FALSE(webhook_pattern_match("sandbox.created", "sandbox.deleted"));
        ASSERT_STREQ(webhook_e2b_type("sandbox.created"), "sandbox.lifecycle.created");
        ASSERT_STREQ(webhook_e2b_type("sandbox.resumed"), "sandbox.lifecycle.resumed");
        ASSERT_NULL(webhook_e2b_type("sandbox.oom"));
}

/* The guard runs again at delivery: a webhook whose name now points at
 * loopback (or a URL stored before the operator turned private off) is
 * refused before any connection. */
TEST(send_refused_at_delivery) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof sa;
        char url[64], why[256];
        WebhookGuard g;
        int fd, c;

        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ASSERT_TRUE(fd >= 0);
        ASSERT_TRUE(bind(fd, (struct sockaddr *) &sa, sizeof sa) == 0);
        ASSERT_TRUE(listen(fd, 4) == 0);
        ASSERT_TRUE(getsockname(fd, (struct sockaddr *) &sa, &len) == 0);
        ASSERT_OK(webhook_guard_init(&g, false, ""));
        snprintf(url, sizeof url, "http://127.0.0.1:%u/", ntohs(sa.sin_port));
        ASSERT_ERRNO(webhook_send(&g, url, "whsec_test", "wh_x", "d1", 1700000000000000, "{}", 2, why, sizeof why),
                     EPERM);
        ASSERT_TRUE(strstr(why, "loopback") != NULL);
        snprintf(url, sizeof url, "http://localhost:%u/", ntohs(sa.sin_port));
        ASSERT_ERRNO(webhook_send(&g, url, "whsec_test", "wh_x", "d1", 1700000000000000, "{}", 2, why, sizeof why),
                     EPERM);
        /* nothing connected */
        c = accept(fd, NULL, NULL);
        ASSERT_TRUE(c < 0);
        /* allowed: it connects, and a receiver that never answers is a failure, within the deadline */
        ASSERT_OK(webhook_guard_init(&g, true, ""));
        ASSERT_TRUE(webhook_send(&g, url, "whsec_test", "wh_x", "d1", 1700000000000000, "{}", 2, why, sizeof why) < 0);
        c = accept(fd, NULL, NULL);
        ASSERT_TRUE(c >= 0);
        close(c);
        close(fd);
}
