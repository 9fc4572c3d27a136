/* SPDX-License-Identifier: MIT */
/* src/gateway/policy: parsing (valid, invalid, limits), canonical output,
 * matching of names and addresses, deny precedence and the always-refused
 * address set. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc-util.h"
#include "egress-policy.h"
#include "str-util.h"
#include "test.h"

static EgressPolicy *parse_ok(const char *json) {
        EgressPolicy *p = NULL;
        char err[EGRESS_POLICY_ERR_MAX] = "";
        int r = egress_policy_parse(json, strlen(json), &p, err, sizeof err);
        if (r < 0)
                test_fail(__FILE__, __LINE__, "policy %s refused: %s (%d)", json, err, r);
        return p;
}

static void parse_bad(const char *json, int expect, const char *in_msg) {
        EgressPolicy *p = NULL;
        char err[EGRESS_POLICY_ERR_MAX] = "";
        int r = egress_policy_parse(json, strlen(json), &p, err, sizeof err);
        if (r != expect)
                test_fail(__FILE__, __LINE__, "policy %s: got %d, expected %d (%s)", json, r, expect, err);
        if (p)
                test_fail(__FILE__, __LINE__, "policy %s: returned a policy on error", json);
        if (in_msg && !strstr(err, in_msg))
                test_fail(__FILE__, __LINE__, "policy %s: message \"%s\" lacks \"%s\"", json, err, in_msg);
        if (!err[0])
                test_fail(__FILE__, __LINE__, "policy %s: no message", json);
}

static EgressPolicyVerdict host(const EgressPolicy *p, const char *name, uint16_t port) {
        return egress_policy_match_host(p, name, strlen(name), port, NULL);
}

static EgressPolicyVerdict ip(const EgressPolicy *p, const char *a, uint16_t port) {
        uint8_t b[16];
        int fam = strchr(a, ':') ? AF_INET6 : AF_INET;
        ASSERT_EQ(inet_pton(fam, a, b), 1);
        return egress_policy_match_addr(p, fam, b, port, NULL);
}

static const char *forbidden(const EgressPolicyGuard *g, const char *a) {
        uint8_t b[16];
        int fam = strchr(a, ':') ? AF_INET6 : AF_INET;
        ASSERT_EQ(inet_pton(fam, a, b), 1);
        return egress_policy_addr_forbidden(g, fam, b);
}

TEST(host_normalize) {
        char out[EGRESS_POLICY_HOST_MAX + 1], err[EGRESS_POLICY_ERR_MAX];
        bool wc;
        struct {
                const char *in, *out;
                bool wc;
        } good[] = {
                { "example.com", "example.com", false },
                { "Example.COM.", "example.com", false },
                { "*.github.com", "github.com", true },
                { "*.a.b.c.d", "a.b.c.d", true },
                { "a-b.x_y.io", "a-b.x_y.io", false },
                { "localhost", "localhost", false },
                { "xn--bcher-kva.example", "xn--bcher-kva.example", false },
                { "1a.example", "1a.example", false },
                { "0x7f.example.x1", "0x7f.example.x1", false },
        };
        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                if (egress_policy_host_normalize(good[i].in, strlen(good[i].in), out, &wc, err, sizeof err) < 0)
                        test_fail(__FILE__, __LINE__, "refused \"%s\": %s", good[i].in, err);
                ASSERT_STREQ(out, good[i].out);
                ASSERT_EQ(wc, good[i].wc);
        }
        static const char *const bad[] = {
                "", ".", "*", "*.", "**.example.com", "*.com", "*.*.example.com", "a.*.example.com", "ex*ample.com",
                "example..com", ".example.com", "-a.example.com", "a-.example.com", "exa mple.com", "exa/mple.com",
                "example.com:443", "1.2.3.4", "10.0.0.1.", "127.1", "0x7f.1", "ex\xc3\xa4mple.com", "a\tb.com",
                "[::1]", "user@example.com", "example.com..", "*.example.com.\x01",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                err[0] = 0;
                if (egress_policy_host_normalize(bad[i], strlen(bad[i]), out, &wc, err, sizeof err) != -EINVAL)
                        test_fail(__FILE__, __LINE__, "accepted \"%s\"", bad[i]);
                ASSERT_TRUE(err[0] != 0);
        }
        /* an embedded NUL counts */
        ASSERT_ERRNO(egress_policy_host_normalize("a.com\0b", 7, out, &wc, NULL, 0), EINVAL);
        /* only n bytes are read */
        ASSERT_OK(egress_policy_host_normalize("a.comXYZ", 5, out, &wc, NULL, 0));
        ASSERT_STREQ(out, "a.com");

        /* length limits: 63-byte label ok, 64 not; 253-byte name ok, 254 not */
        char name[300];
        memset(name, 'a', 63);
        memcpy(name + 63, ".com", 5);
        ASSERT_OK(egress_policy_host_normalize(name, strlen(name), out, &wc, NULL, 0));
        memset(name, 'a', 64);
        memcpy(name + 64, ".com", 5);
        ASSERT_ERRNO(egress_policy_host_normalize(name, strlen(name), out, &wc, NULL, 0), EINVAL);
        size_t o = 0;
        while (o + 50 < 253) {
                memset(name + o, 'b', 49);
                name[o + 49] = '.';
                o += 50;
        }
        memset(name + o, 'c', 253 - o);
        name[253] = 0;
        ASSERT_OK(egress_policy_host_normalize(name, 253, out, &wc, NULL, 0));
        name[253] = '.';
        ASSERT_OK(egress_policy_host_normalize(name, 254, out, &wc, NULL, 0)); /* trailing dot not counted */
        name[253] = 'c';
        ASSERT_ERRNO(egress_policy_host_normalize(name, 254, out, &wc, NULL, 0), EINVAL);
}

TEST(cidr_parse) {
        int fam;
        uint8_t a[16];
        unsigned pl;
        ASSERT_OK(egress_policy_cidr_parse("192.168.7.0/24", 14, &fam, a, &pl));
        ASSERT_EQ(fam, AF_INET);
        ASSERT_EQ(pl, 24);
        ASSERT_EQ(a[2], 7);
        ASSERT_OK(egress_policy_cidr_parse("203.0.113.5", 11, &fam, a, &pl));
        ASSERT_EQ(pl, 32);
        ASSERT_OK(egress_policy_cidr_parse("0.0.0.0/0", 9, &fam, a, &pl));
        ASSERT_EQ(pl, 0);
        ASSERT_OK(egress_policy_cidr_parse("2001:db8::/32", 13, &fam, a, &pl));
        ASSERT_EQ(fam, AF_INET6);
        ASSERT_EQ(pl, 32);
        ASSERT_OK(egress_policy_cidr_parse("10.1.0.0/16junk", 11, &fam, a, &pl));
        static const char *const bad[] = {
                "", "/", "/24", "10.0.0.0/", "10.0.0.1/24", "10.0.0.0/33", "10.0.0.0/024", "10.0.0.0/-1",
                "10.0.0.0/2x", "10.0.0/24", "10.0.0.0.0/8", "010.0.0.0/8", "10.0.0.256/32", "0x0a.0.0.0/8",
                "10.0.0.0/8/8", "2001:db8::1/32", "2001:db8::/129", "fe80::1%eth0/128", "::g/128", " 10.0.0.0/8",
                "10.0.0.0 /8", "10.0.0.0/ 8", "10.0.0.0/99999999999",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                if (egress_policy_cidr_parse(bad[i], strlen(bad[i]), &fam, a, &pl) != -EINVAL)
                        test_fail(__FILE__, __LINE__, "accepted \"%s\"", bad[i]);
        ASSERT_ERRNO(egress_policy_cidr_parse("10.0.0.0\0/8", 11, &fam, a, &pl), EINVAL);
}

TEST(parse_valid_and_canonical) {
        _cleanup_egress_policy_ EgressPolicy *p = parse_ok(
                "{\"allow\":[\"Example.com\",\"*.github.com\",{\"host\":\"db.example.com\",\"ports\":[5432,\"8000-8100\"]},"
                "\"192.168.7.0/24\",{\"cidr\":\"10.9.0.0/16\",\"ports\":[22]},\"2001:db8::/32\",\"203.0.113.5\"],"
                "\"deny\":[\"bad.github.com\",{\"cidr\":\"192.168.7.9/32\",\"ports\":[443]}]}");
        _cleanup_free_ char *json = NULL;
        ASSERT_EQ(p->n_allow, 7);
        ASSERT_EQ(p->n_deny, 2);
        ASSERT_OK(egress_policy_to_json(p, &json));
        ASSERT_STREQ(json,
                     "{\"allow\":[{\"host\":\"example.com\",\"ports\":[80,443]},{\"host\":\"*.github.com\",\"ports\":[80,443]},"
                     "{\"host\":\"db.example.com\",\"ports\":[5432,\"8000-8100\"]},{\"cidr\":\"192.168.7.0/24\",\"ports\":[80,443]},"
                     "{\"cidr\":\"10.9.0.0/16\",\"ports\":[22]},{\"cidr\":\"2001:db8::/32\",\"ports\":[80,443]},"
                     "{\"cidr\":\"203.0.113.5/32\",\"ports\":[80,443]}],"
                     "\"deny\":[{\"host\":\"bad.github.com\"},{\"cidr\":\"192.168.7.9/32\",\"ports\":[443]}]}");
        /* the canonical form parses to itself */
        _cleanup_egress_policy_ EgressPolicy *q = parse_ok(json);
        _cleanup_free_ char *json2 = NULL;
        ASSERT_OK(egress_policy_to_json(q, &json2));
        ASSERT_STREQ(json, json2);

        _cleanup_egress_policy_ EgressPolicy *e1 = parse_ok("{}");
        _cleanup_egress_policy_ EgressPolicy *e2 = parse_ok(" {\"allow\":[],\"deny\":[]} ");
        ASSERT_EQ(e1->n_allow + e1->n_deny + e2->n_allow + e2->n_deny, 0);
        ASSERT_EQ(host(e1, "example.com", 443), EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_EQ(ip(e1, "192.168.1.1", 443), EGRESS_POLICY_DENY_NO_RULE);
}

TEST(parse_invalid) {
        parse_bad("", -EINVAL, "not valid JSON");
        parse_bad("[]", -EINVAL, "must be an object");
        parse_bad("null", -EINVAL, "must be an object");
        parse_bad("{\"allow\":[],\"allow\":[]}", -EINVAL, "not valid JSON");
        parse_bad("{\"alow\":[]}", -EINVAL, "unknown field \"alow\"");
        parse_bad("{\"allow\":\"example.com\"}", -EINVAL, "allow: must be an array");
        parse_bad("{\"deny\":{}}", -EINVAL, "deny: must be an array");
        parse_bad("{\"allow\":[1]}", -EINVAL, "allow[0]");
        parse_bad("{\"allow\":[null]}", -EINVAL, "allow[0]");
        parse_bad("{\"allow\":[\"ok.com\",\"bad..com\"]}", -EINVAL, "allow[1]: invalid host \"bad..com\"");
        parse_bad("{\"allow\":[\"*\"]}", -EINVAL, "invalid host");
        parse_bad("{\"allow\":[\"*.com\"]}", -EINVAL, "top-level");
        parse_bad("{\"allow\":[\"10.0.0.1/8\"]}", -EINVAL, "invalid CIDR");
        parse_bad("{\"allow\":[\"10.0.0.0/33\"]}", -EINVAL, "invalid CIDR");
        parse_bad("{\"allow\":[\"example.com:443\"]}", -EINVAL, "invalid character ':'");
        parse_bad("{\"allow\":[{\"host\":\"a.com\",\"cidr\":\"10.0.0.0/8\"}]}", -EINVAL, "exactly one");
        parse_bad("{\"allow\":[{\"ports\":[80]}]}", -EINVAL, "exactly one");
        parse_bad("{\"allow\":[{\"host\":5}]}", -EINVAL, "must be a string");
        parse_bad("{\"allow\":[{\"host\":\"1.2.3.4\"}]}", -EINVAL, "CIDR");
        parse_bad("{\"allow\":[{\"cidr\":\"a.com\"}]}", -EINVAL, "invalid CIDR");
        parse_bad("{\"allow\":[{\"host\":\"a.com\",\"port\":80}]}", -EINVAL, "unknown field \"port\"");
        parse_bad("{\"allow\":[{\"host\":\"a.com\",\"ports\":[]}]}", -EINVAL, "ports: empty");
        parse_bad("{\"allow\":[{\"host\":\"a.com\",\"ports\":80}]}", -EINVAL, "must be an array");
        parse_bad("{\"allow\":[{\"host\":\"a.com\",\"ports\":[0]}]}", -EINVAL, "ports[0]");
        parse_bad("{\"allow\":[{\"host\":\"a.com\",\"ports\":[65536]}]}", -EINVAL, "1-65535");
        parse_bad("{\"allow\":[{\"host\":\"a.com\",\"ports\":[-1]}]}", -EINVAL, "1-65535");
        parse_bad("{\"allow\":[{\"host\":\"a.com\",\"ports\":[80.5]}]}", -EINVAL, "1-65535");
        parse_bad("{\"allow\":[{\"host\":\"a.com\",\"ports\":[\"80\"]}]}", -EINVAL, "LO-HI");
        parse_bad("{\"allow\":[{\"host\":\"a.com\",\"ports\":[\"90-80\"]}]}", -EINVAL, "LO-HI");
        parse_bad("{\"allow\":[{\"host\":\"a.com\",\"ports\":[\"0-80\"]}]}", -EINVAL, "LO-HI");
        parse_bad("{\"allow\":[{\"host\":\"a.com\",\"ports\":[\"1-65536\"]}]}", -EINVAL, "LO-HI");
        parse_bad("{\"allow\":[{\"host\":\"a.com\",\"ports\":[\"1--2\"]}]}", -EINVAL, "LO-HI");
        parse_bad("{\"allow\":[{\"host\":\"a.com\",\"ports\":[true]}]}", -EINVAL, "ports[0]");
        parse_bad("{\"allow\":[\"a.com\\u0000.evil.com\"]}", -EINVAL, "invalid byte 0x00");
}

static int suffix_check(const char *json, char err[static EGRESS_POLICY_ERR_MAX]) {
        _cleanup_(egress_policy_freep) EgressPolicy *p = parse_ok(json); /* the syntax is fine */
        err[0] = 0;
        return egress_policy_check_public_suffixes(p, err, EGRESS_POLICY_ERR_MAX);
}

TEST(public_suffix_allow) {
        char err[EGRESS_POLICY_ERR_MAX];
        /* an allow wildcard over an ICANN-section public suffix: anyone registers names there */
        static const struct {
                const char *json, *msg;
        } bad[] = {
                { "{\"allow\":[\"*.co.uk\"]}", "allow[0]: \"*.co.uk\" covers the public suffix \"co.uk\" (ICANN" },
                { "{\"allow\":[\"*.CO.UK.\"]}", "\"*.co.uk\" covers the public suffix \"co.uk\"" },
                { "{\"allow\":[\"a.com\",{\"host\":\"*.com.au\",\"ports\":[443]}]}", "allow[1]: \"*.com.au\"" },
                { "{\"allow\":[\"*.foo.ck\"]}", "\"foo.ck\" (ICANN section" },
                { "{\"allow\":[\"*.xn--ciqpn.hk\"]}", "\"xn--ciqpn.hk\"" },
                { "{\"allow\":[\"*.example.com\",\"*.org.uk\"]}", "allow[1]" },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                if (suffix_check(bad[i].json, err) != -EINVAL)
                        test_fail(__FILE__, __LINE__, "%s accepted", bad[i].json);
                if (!strstr(err, bad[i].msg) || !strstr(err, "Public Suffix List"))
                        test_fail(__FILE__, __LINE__, "%s: message \"%s\" lacks \"%s\"", bad[i].json, err, bad[i].msg);
        }
        /* private-section suffixes are one company's service: a legitimate egress
         * choice; names under an ICANN suffix, exact hosts and deny entries are fine */
        static const char *const good[] = {
                "{\"allow\":[\"*.github.io\",\"*.s3.amazonaws.com\",\"*.blogspot.com\"]}",
                "{\"allow\":[\"*.example.co.uk\",\"co.uk\",\"api.co.uk\",\"*.city.kawasaki.jp\"]}",
                "{\"allow\":[\"*.example.xn--p1ai\"],\"deny\":[\"*.co.uk\",\"*.github.io\",\"*.foo.ck\"]}",
                "{\"allow\":[\"10.0.0.0/8\",\"example.com\"]}",
                "{}",
        };
        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                if (suffix_check(good[i], err) < 0)
                        test_fail(__FILE__, __LINE__, "%s refused: %s", good[i], err);
        /* the parser alone keeps stored policies valid when the list grows */
        _cleanup_(egress_policy_freep) EgressPolicy *p = parse_ok("{\"allow\":[\"*.co.uk\"]}");
        ASSERT_EQ(host(p, "shop.co.uk", 443), EGRESS_POLICY_ALLOW);
}

static int reachable_check(const char *json, char err[static EGRESS_POLICY_ERR_MAX]) {
        _cleanup_(egress_policy_freep) EgressPolicy *p = parse_ok(json);
        err[0] = 0;
        return egress_policy_check_reachable(p, err, EGRESS_POLICY_ERR_MAX);
}

/* An allow entry the gateway's fixed refusals make void is refused: it
 * would read as a permission it is not. Broad ranges that merely include such
 * addresses, and deny entries, are fine. */
TEST(unreachable_allow) {
        char err[EGRESS_POLICY_ERR_MAX];
        static const struct {
                const char *json, *msg;
        } bad[] = {
                { "{\"allow\":[\"169.254.169.254/32\"]}", "allow[0]: 169.254.169.254/32 is never reachable: every "
                                                          "address in it is a link-local address (metadata)" },
                { "{\"allow\":[\"a.example\",\"127.0.0.1\"]}", "allow[1]: 127.0.0.1/32 is never reachable" },
                { "{\"allow\":[{\"cidr\":\"127.0.0.0/8\",\"ports\":[80]}]}", "loopback address" },
                { "{\"allow\":[\"169.254.0.0/16\"]}", "link-local address" },
                { "{\"allow\":[\"0.0.0.0/8\"]}", "unspecified address" },
                { "{\"allow\":[\"224.0.0.0/4\"]}", "multicast address" },
                { "{\"allow\":[\"::1/128\"]}", "::1/128 is never reachable: every address in it is a loopback" },
                { "{\"allow\":[\"fe80::/10\"]}", "link-local address" },
                { "{\"allow\":[\"fd00:ec2::254/128\"]}", "link-local address (metadata)" },
                { "{\"allow\":[\"::ffff:127.0.0.0/104\"]}", "loopback address" },
                { "{\"allow\":[\"ff02::/16\"]}", "multicast address" },
                { "{\"allow\":[\"localhost\"]}", "allow[0]: \"localhost\" is never reachable: localhost names the "
                                                 "loopback address (RFC 6761)" },
                { "{\"allow\":[\"api.localhost\"]}", "\"api.localhost\" is never reachable" },
                { "{\"allow\":[\"*.Dev.LOCALHOST.\"]}", "\"*.dev.localhost\" is never reachable" },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                if (reachable_check(bad[i].json, err) != -EINVAL)
                        test_fail(__FILE__, __LINE__, "%s accepted", bad[i].json);
                if (!strstr(err, bad[i].msg) || !strstr(err, "whatever the policy says"))
                        test_fail(__FILE__, __LINE__, "%s: message \"%s\" lacks \"%s\"", bad[i].json, err, bad[i].msg);
        }
        static const char *const good[] = {
                "{\"allow\":[\"0.0.0.0/0\",\"::/0\"]}", /* everything the gateway lets through */
                "{\"allow\":[\"10.0.0.0/8\",\"192.168.1.1\",\"2001:db8::/32\",\"224.0.0.0/3\"]}",
                "{\"allow\":[\"2002::/16\",\"::ffff:0:0/96\",\"168.0.0.0/6\"]}",
                "{\"allow\":[\"localhost.example.com\",\"mylocalhost\",\"*.example.com\"]}",
                "{\"deny\":[\"169.254.169.254/32\",\"127.0.0.0/8\",\"localhost\",\"*.dev.localhost\"]}",
                "{}",
        };
        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                if (reachable_check(good[i], err) < 0)
                        test_fail(__FILE__, __LINE__, "%s refused: %s", good[i], err);
        /* the parser alone keeps stored policies valid */
        _cleanup_(egress_policy_freep) EgressPolicy *p = parse_ok("{\"allow\":[\"localhost\",\"127.0.0.1\"]}");
        ASSERT_TRUE(p != NULL);
}

static int new_check(const char *json, char err[static EGRESS_POLICY_ERR_MAX]) {
        _cleanup_(egress_policy_freep) EgressPolicy *p = parse_ok(json);
        err[0] = 0;
        return egress_policy_check_new(p, err, EGRESS_POLICY_ERR_MAX);
}

/* An entry listed twice in one list is refused, as a credential's host or a
 * grant listed twice is: the same target, transport and ports, however
 * spelled. Entries that differ in any of them, or sit in different lists,
 * are fine. */
TEST(listed_once) {
        char err[EGRESS_POLICY_ERR_MAX];
        static const struct {
                const char *json, *msg;
        } bad[] = {
                { "{\"allow\":[\"a.example\",\"a.example\"]}",
                  "allow[1]: the same entry as allow[0] (allow a.example:80,443); list each entry once" },
                { "{\"allow\":[\"x.example\",\"A.Example.\",{\"host\":\"a.example\",\"ports\":[443,80]}]}",
                  "allow[2]: the same entry as allow[1]" },
                { "{\"allow\":[\"*.a.example\",\"*.A.EXAMPLE\"]}", "allow[1]: the same entry as allow[0] (allow *.a.example" },
                { "{\"allow\":[\"10.1.0.0/16\",{\"cidr\":\"10.1.0.0/16\",\"ports\":[80,443]}]}",
                  "allow[1]: the same entry as allow[0] (allow 10.1.0.0/16:80,443)" },
                { "{\"allow\":[\"10.1.2.3\",\"10.1.2.3/32\"]}", "allow[1]: the same entry as allow[0]" },
                { "{\"allow\":[{\"cidr\":\"2001:db8::/32\",\"proto\":\"udp\",\"ports\":[\"5000-5010\",53]},"
                  "{\"cidr\":\"2001:0db8::/32\",\"proto\":\"udp\",\"ports\":[53,\"5000-5010\"]}]}",
                  "allow[1]: the same entry as allow[0] (allow 2001:db8::/32:53,5000-5010/udp)" },
                { "{\"deny\":[\"b.example\",\"c.example\",\"B.example\"]}", "deny[2]: the same entry as deny[0] (deny b.example)" },
                { "{\"allow\":[\"a.example\"],\"deny\":[{\"cidr\":\"10.0.0.0/8\",\"ports\":[22]},{\"cidr\":\"10.0.0.0/8\","
                  "\"ports\":[22]}]}",
                  "deny[1]: the same entry as deny[0]" },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                if (new_check(bad[i].json, err) != -EINVAL)
                        test_fail(__FILE__, __LINE__, "%s accepted", bad[i].json);
                if (!strstr(err, bad[i].msg))
                        test_fail(__FILE__, __LINE__, "%s: message \"%s\" lacks \"%s\"", bad[i].json, err, bad[i].msg);
        }
        static const char *const good[] = {
                "{\"allow\":[\"a.example\",\"*.a.example\",{\"host\":\"a.example\",\"ports\":[5432]}]}",
                "{\"allow\":[{\"host\":\"a.example\",\"ports\":[443]},{\"host\":\"a.example\",\"ports\":[443,80,8080]}]}",
                "{\"allow\":[\"10.1.0.0/16\",\"10.1.0.0/24\",{\"cidr\":\"10.1.0.0/16\",\"proto\":\"udp\",\"ports\":[443,53]}]}",
                "{\"allow\":[\"a.example\"],\"deny\":[\"a.example\"]}",
                "{\"deny\":[\"b.example\",{\"host\":\"b.example\",\"ports\":[80,443]},{\"host\":\"b.example\",\"proto\":\"tcp\"}]}",
                "{}",
        };
        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                if (new_check(good[i], err) < 0)
                        test_fail(__FILE__, __LINE__, "%s refused: %s", good[i], err);
        /* the other checks run too */
        ASSERT_EQ(new_check("{\"allow\":[\"*.co.uk\"]}", err), -EINVAL);
        ASSERT_NOT_NULL(strstr(err, "public suffix"));
        ASSERT_EQ(new_check("{\"allow\":[\"localhost\"]}", err), -EINVAL);
        ASSERT_NOT_NULL(strstr(err, "never reachable"));
        /* the parser alone keeps stored policies valid */
        _cleanup_(egress_policy_freep) EgressPolicy *p = parse_ok("{\"allow\":[\"a.example\",\"a.example\"]}");
        ASSERT_EQ(p->n_allow, 2U);
}

TEST(parse_limits) {
        /* EGRESS_POLICY_RULES_MAX entries pass, one more is -E2BIG */
        _cleanup_free_ char *buf = malloc(EGRESS_POLICY_JSON_MAX * 2);
        size_t o;
        ASSERT_NOT_NULL(buf);
        o = (size_t) snprintf(buf, 32, "{\"allow\":[");
        for (unsigned i = 0; i < EGRESS_POLICY_RULES_MAX; i++)
                o += (size_t) snprintf(buf + o, 64, "%s\"h%u.example.com\"", i ? "," : "", i);
        memcpy(buf + o, "]}", 3);
        _cleanup_egress_policy_ EgressPolicy *p = parse_ok(buf);
        ASSERT_EQ(p->n_allow, EGRESS_POLICY_RULES_MAX);
        memcpy(buf + o, "],\"deny\":[\"x.com\"]}", 20);
        parse_bad(buf, -E2BIG, "more than");

        /* ports per entry */
        o = (size_t) snprintf(buf, 64, "{\"allow\":[{\"host\":\"a.com\",\"ports\":[");
        for (unsigned i = 0; i <= EGRESS_POLICY_PORTS_MAX; i++)
                o += (size_t) snprintf(buf + o, 16, "%s%u", i ? "," : "", i + 1);
        memcpy(buf + o, "]}]}", 5);
        parse_bad(buf, -E2BIG, "more than");

        /* bytes */
        memset(buf, ' ', EGRESS_POLICY_JSON_MAX + 1);
        buf[0] = '{';
        buf[EGRESS_POLICY_JSON_MAX] = '}';
        buf[EGRESS_POLICY_JSON_MAX + 1] = 0;
        parse_bad(buf, -E2BIG, "larger than");
        buf[EGRESS_POLICY_JSON_MAX - 1] = '}';
        buf[EGRESS_POLICY_JSON_MAX] = 0;
        _cleanup_egress_policy_ EgressPolicy *q = parse_ok(buf);
}

TEST(match_host) {
        _cleanup_egress_policy_ EgressPolicy *p = parse_ok(
                "{\"allow\":[\"example.com\",\"*.github.com\",{\"host\":\"db.example.com\",\"ports\":[5432,\"8000-8100\"]}],"
                "\"deny\":[\"evil.github.com\",{\"host\":\"*.corp.github.com\",\"ports\":[443]}]}");
        EgressPolicyMatch m;

        ASSERT_EQ(host(p, "example.com", 443), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(host(p, "example.com", 80), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(host(p, "EXAMPLE.com.", 443), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(host(p, "example.com", 8080), EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_EQ(host(p, "example.com", 0), EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_EQ(host(p, "www.example.com", 443), EGRESS_POLICY_DENY_NO_RULE); /* exact rule: no subdomains */
        ASSERT_EQ(host(p, "example.com.evil.net", 443), EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_EQ(host(p, "notexample.com", 443), EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_EQ(host(p, "db.example.com", 5432), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(host(p, "db.example.com", 8000), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(host(p, "db.example.com", 8100), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(host(p, "db.example.com", 8101), EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_EQ(host(p, "db.example.com", 443), EGRESS_POLICY_DENY_NO_RULE);

        ASSERT_EQ(egress_policy_match_host(p, "api.github.com", 14, 443, &m), EGRESS_POLICY_ALLOW);
        ASSERT_STREQ(m.rule, "allow *.github.com:80,443");
        ASSERT_EQ(host(p, "a.b.c.github.com", 80), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(host(p, "github.com", 443), EGRESS_POLICY_DENY_NO_RULE); /* wildcard is strictly below */
        ASSERT_EQ(host(p, "xgithub.com", 443), EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_EQ(host(p, "github.com.evil.net", 443), EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_EQ(host(p, ".github.com", 443), EGRESS_POLICY_DENY_NO_RULE);

        /* deny wins, on the ports it names */
        ASSERT_EQ(egress_policy_match_host(p, "evil.github.com", 15, 443, &m), EGRESS_POLICY_DENY_RULE);
        ASSERT_STREQ(m.rule, "deny evil.github.com");
        ASSERT_EQ(host(p, "Evil.GitHub.com.", 80), EGRESS_POLICY_DENY_RULE);
        ASSERT_EQ(host(p, "x.evil.github.com", 80), EGRESS_POLICY_ALLOW); /* exact deny: not below */
        ASSERT_EQ(egress_policy_match_host(p, "a.corp.github.com", 17, 443, &m), EGRESS_POLICY_DENY_RULE);
        ASSERT_STREQ(m.rule, "deny *.corp.github.com:443");
        ASSERT_EQ(host(p, "a.corp.github.com", 80), EGRESS_POLICY_ALLOW);

        /* hostile names never match */
        static const char *const hostile[] = {
                "", ".", "*.github.com", "a..github.com", "a b.github.com", "a.github.com\n", "a/github.com",
                "1.2.3.4", "a.github.com:443", "-a.github.com",
        };
        for (size_t i = 0; i < ELEMENTSOF(hostile); i++)
                if (host(p, hostile[i], 443) != EGRESS_POLICY_DENY_NO_RULE)
                        test_fail(__FILE__, __LINE__, "matched \"%s\"", hostile[i]);
        ASSERT_EQ(egress_policy_match_host(p, "a.github.com\0x", 14, 443, NULL), EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_EQ(egress_policy_match_host(NULL, "example.com", 11, 443, NULL), EGRESS_POLICY_DENY_NO_RULE);

        /* resolvable names: allowed on some port, not denied on every port */
        ASSERT_EQ(egress_policy_match_name(p, "db.example.com", 14, &m), EGRESS_POLICY_ALLOW);
        ASSERT_STREQ(m.rule, "allow db.example.com:5432,8000-8100");
        ASSERT_EQ(egress_policy_match_name(p, "a.corp.github.com", 17, &m), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(egress_policy_match_name(p, "evil.github.com", 15, &m), EGRESS_POLICY_DENY_RULE);
        ASSERT_EQ(egress_policy_match_name(p, "www.example.com", 15, &m), EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_EQ(egress_policy_match_name(p, "*.github.com", 12, &m), EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_EQ(egress_policy_match_name(NULL, "example.com", 11, &m), EGRESS_POLICY_DENY_NO_RULE);

        ASSERT_EQ(egress_policy_match_host(p, "nothing.org", 11, 443, &m), EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_STREQ(m.rule, "");
        ASSERT_STREQ(egress_policy_verdict_to_string(EGRESS_POLICY_ALLOW), "allow");
        ASSERT_STREQ(egress_policy_verdict_to_string(EGRESS_POLICY_DENY_RULE), "deny");
        ASSERT_NULL(egress_policy_verdict_to_string(_EGRESS_POLICY_VERDICT_INVALID));
}

TEST(match_addr) {
        _cleanup_egress_policy_ EgressPolicy *p = parse_ok(
                "{\"allow\":[\"192.168.7.0/24\",{\"cidr\":\"10.9.0.0/16\",\"ports\":[22,\"1000-2000\"]},\"2001:db8::/32\","
                "\"203.0.113.5\",\"allowed.example\"],"
                "\"deny\":[{\"cidr\":\"192.168.7.9/32\",\"ports\":[443]},\"10.9.9.0/24\"]}");
        EgressPolicyMatch m;
        ASSERT_EQ(ip(p, "192.168.7.1", 443), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(ip(p, "192.168.7.255", 80), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(ip(p, "192.168.8.1", 443), EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_EQ(ip(p, "192.168.7.1", 22), EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_EQ(ip(p, "192.168.7.9", 80), EGRESS_POLICY_ALLOW);
        uint8_t a[4] = { 192, 168, 7, 9 };
        ASSERT_EQ(egress_policy_match_addr(p, AF_INET, a, 443, &m), EGRESS_POLICY_DENY_RULE);
        ASSERT_STREQ(m.rule, "deny 192.168.7.9/32:443");
        ASSERT_EQ(ip(p, "10.9.1.1", 22), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(ip(p, "10.9.1.1", 1500), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(ip(p, "10.9.1.1", 443), EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_EQ(ip(p, "10.9.9.1", 22), EGRESS_POLICY_DENY_RULE);
        ASSERT_EQ(ip(p, "203.0.113.5", 443), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(ip(p, "203.0.113.6", 443), EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_EQ(ip(p, "2001:db8::1", 443), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(ip(p, "2001:db9::1", 443), EGRESS_POLICY_DENY_NO_RULE);
        /* an IPv4 CIDR does not match an IPv4-mapped IPv6 address by accident (nor the reverse) */
        ASSERT_EQ(ip(p, "::ffff:192.168.7.1", 443), EGRESS_POLICY_DENY_NO_RULE);
        /* host rules never match addresses */
        ASSERT_EQ(egress_policy_match_addr(p, AF_UNIX, a, 443, NULL), EGRESS_POLICY_DENY_NO_RULE);

        _cleanup_egress_policy_ EgressPolicy *all = parse_ok("{\"allow\":[{\"cidr\":\"0.0.0.0/0\",\"ports\":[\"1-65535\"]}]}");
        ASSERT_EQ(ip(all, "1.1.1.1", 1), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(ip(all, "255.255.255.255", 65535), EGRESS_POLICY_ALLOW); /* the policy allows it; the guard does not */
        ASSERT_EQ(ip(all, "::1", 80), EGRESS_POLICY_DENY_NO_RULE);
        _cleanup_egress_policy_ EgressPolicy *odd = parse_ok("{\"allow\":[{\"cidr\":\"10.0.0.0/9\",\"ports\":[80]}]}");
        ASSERT_EQ(ip(odd, "10.127.255.255", 80), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(ip(odd, "10.128.0.0", 80), EGRESS_POLICY_DENY_NO_RULE);
}

/* E2B's model: an allow entry wins over a deny entry, what no entry names is
 * allowed, and names no host entry decides go by their address. */
TEST(precedence_and_default) {
        _cleanup_egress_policy_ EgressPolicy *e2b = parse_ok(
                "{\"allow\":[\"api.example.com\",{\"cidr\":\"1.1.1.1/32\",\"ports\":[\"1-65535\"]}],"
                "\"deny\":[\"0.0.0.0/0\"],\"precedence\":\"allow\"}");
        _cleanup_egress_policy_ EgressPolicy *open = parse_ok(
                "{\"deny\":[\"8.8.8.0/24\",\"evil.example\"],\"precedence\":\"allow\",\"default\":\"allow\"}");
        _cleanup_egress_policy_ EgressPolicy *ours = parse_ok(
                "{\"allow\":[\"1.1.1.1\"],\"deny\":[\"1.1.1.0/24\"],\"default\":\"allow\"}");
        _cleanup_free_ char *json = NULL;
        EgressPolicyMatch m;

        /* allow beats deny; deny 0.0.0.0/0 takes the rest */
        ASSERT_EQ(ip(e2b, "1.1.1.1", 5432), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(ip(e2b, "1.1.1.2", 443), EGRESS_POLICY_DENY_RULE);
        ASSERT_EQ(host(e2b, "api.example.com", 443), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(host(e2b, "api.example.com", 22), EGRESS_POLICY_BY_ADDR); /* E2B filters names on HTTP(S) only */
        ASSERT_EQ(host(e2b, "other.example.com", 443), EGRESS_POLICY_BY_ADDR);
        ASSERT_EQ(egress_policy_match_name(e2b, "other.example.com", 17, &m), EGRESS_POLICY_BY_ADDR);
        /* the default allows; a deny entry still bites, a host deny entry too */
        ASSERT_EQ(egress_policy_match_addr(open, AF_INET, (uint8_t[]){ 9, 9, 9, 9 }, 12345, &m), EGRESS_POLICY_ALLOW);
        ASSERT_STREQ(m.rule, EGRESS_POLICY_DEFAULT_ALLOW_TEXT);
        ASSERT_EQ(ip(open, "8.8.8.8", 53), EGRESS_POLICY_DENY_RULE);
        ASSERT_EQ(host(open, "evil.example", 443), EGRESS_POLICY_DENY_RULE);
        ASSERT_EQ(egress_policy_match_name(open, "evil.example", 12, NULL), EGRESS_POLICY_DENY_RULE);
        ASSERT_EQ(host(open, "good.example", 443), EGRESS_POLICY_BY_ADDR);
        /* "default" alone keeps deny-wins */
        ASSERT_EQ(ip(ours, "1.1.1.1", 443), EGRESS_POLICY_DENY_RULE);
        ASSERT_EQ(ip(ours, "1.1.2.1", 443), EGRESS_POLICY_ALLOW);
        /* a name is only resolved by address when some address could be allowed */
        _cleanup_egress_policy_ EgressPolicy *names = parse_ok(
                "{\"allow\":[\"a.example\"],\"deny\":[\"0.0.0.0/0\"],\"precedence\":\"allow\"}");
        ASSERT_EQ(egress_policy_match_name(names, "b.example", 9, NULL), EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_EQ(egress_policy_match_name(names, "a.example", 9, NULL), EGRESS_POLICY_ALLOW);
        /* the plain model is unchanged: names never go by address */
        _cleanup_egress_policy_ EgressPolicy *plain = parse_ok("{\"allow\":[\"0.0.0.0/0\"]}");
        ASSERT_EQ(host(plain, "x.example", 443), EGRESS_POLICY_DENY_NO_RULE);

        /* canonical form: the fields only where they are not the default */
        ASSERT_OK(egress_policy_to_json(open, &json));
        ASSERT_NOT_NULL(strstr(json, "\"precedence\":\"allow\",\"default\":\"allow\""));
        json = mfree(json);
        ASSERT_OK(egress_policy_to_json(plain, &json));
        ASSERT_NULL(strstr(json, "precedence"));
        ASSERT_NULL(strstr(json, "default"));
        parse_bad("{\"precedence\":\"deny-first\"}", -EINVAL, "precedence: \"allow\" or \"deny\"");
        parse_bad("{\"default\":true}", -EINVAL, "default: \"allow\" or \"deny\"");
        parse_bad("{\"fallback\":\"allow\"}", -EINVAL, "allowed: allow, deny, precedence, default");
}

static EgressPolicyVerdict udp_host(const EgressPolicy *p, const char *name, uint16_t port, EgressPolicyMatch *m) {
        return egress_policy_match_host_proto(p, EGRESS_POLICY_PROTO_UDP, name, strlen(name), port, m);
}

static EgressPolicyVerdict udp_ip(const EgressPolicy *p, const char *a, uint16_t port, EgressPolicyMatch *m) {
        uint8_t b[16];
        ASSERT_EQ(inet_pton(AF_INET, a, b), 1);
        return egress_policy_match_addr_proto(p, EGRESS_POLICY_PROTO_UDP, AF_INET, b, port, m);
}

TEST(proto) {
        _cleanup_egress_policy_ EgressPolicy *p = parse_ok(
                "{\"allow\":[{\"cidr\":\"10.0.0.0/8\",\"proto\":\"udp\",\"ports\":[5000,\"6000-6010\"]},"
                "{\"cidr\":\"192.168.0.0/16\",\"proto\":\"udp\",\"ports\":[\"1-65535\"]},"
                "{\"host\":\"stun.example.com\",\"proto\":\"udp\",\"ports\":[3478]},"
                "{\"host\":\"db.example.com\",\"proto\":\"tcp\",\"ports\":[5432]},{\"cidr\":\"10.0.0.0/8\",\"ports\":[22]}],"
                "\"deny\":[{\"cidr\":\"10.9.0.0/16\",\"proto\":\"udp\"},{\"cidr\":\"10.8.0.0/16\",\"proto\":\"tcp\"},"
                "\"10.7.0.0/16\",{\"host\":\"stun.example.com\",\"proto\":\"udp\",\"ports\":[3479]}]}");
        _cleanup_free_ char *json = NULL;
        EgressPolicyMatch m;

        /* canonical: proto shown where it is not the default (allow tcp, deny both) */
        ASSERT_OK(egress_policy_to_json(p, &json));
        ASSERT_STREQ(json,
                     "{\"allow\":[{\"cidr\":\"10.0.0.0/8\",\"proto\":\"udp\",\"ports\":[5000,\"6000-6010\"]},"
                     "{\"cidr\":\"192.168.0.0/16\",\"proto\":\"udp\",\"ports\":[\"1-65535\"]},"
                     "{\"host\":\"stun.example.com\",\"proto\":\"udp\",\"ports\":[3478]},"
                     "{\"host\":\"db.example.com\",\"ports\":[5432]},{\"cidr\":\"10.0.0.0/8\",\"ports\":[22]}],"
                     "\"deny\":[{\"cidr\":\"10.9.0.0/16\",\"proto\":\"udp\"},{\"cidr\":\"10.8.0.0/16\",\"proto\":\"tcp\"},"
                     "{\"cidr\":\"10.7.0.0/16\"},{\"host\":\"stun.example.com\",\"proto\":\"udp\",\"ports\":[3479]}]}");
        _cleanup_egress_policy_ EgressPolicy *q = parse_ok(json);
        _cleanup_free_ char *json2 = NULL;
        ASSERT_OK(egress_policy_to_json(q, &json2));
        ASSERT_STREQ(json, json2);

        /* UDP rules allow UDP, TCP rules TCP, never the other */
        ASSERT_EQ(udp_ip(p, "10.1.2.3", 5000, &m), EGRESS_POLICY_ALLOW);
        ASSERT_STREQ(m.rule, "allow 10.0.0.0/8:5000,6000-6010/udp");
        ASSERT_EQ(udp_ip(p, "10.1.2.3", 6010, NULL), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(udp_ip(p, "10.1.2.3", 22, NULL), EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_EQ(ip(p, "10.1.2.3", 5000), EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_EQ(ip(p, "10.1.2.3", 22), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(udp_host(p, "stun.example.com", 3478, &m), EGRESS_POLICY_ALLOW);
        ASSERT_STREQ(m.rule, "allow stun.example.com:3478/udp");
        ASSERT_EQ(host(p, "stun.example.com", 3478), EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_EQ(host(p, "db.example.com", 5432), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(udp_host(p, "db.example.com", 5432, NULL), EGRESS_POLICY_DENY_NO_RULE);
        /* deny: with a proto only that one, without both */
        ASSERT_EQ(udp_ip(p, "10.9.1.1", 5000, &m), EGRESS_POLICY_DENY_RULE);
        ASSERT_STREQ(m.rule, "deny 10.9.0.0/16/udp");
        ASSERT_EQ(ip(p, "10.9.1.1", 22), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(udp_ip(p, "10.8.1.1", 5000, NULL), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(ip(p, "10.8.1.1", 22), EGRESS_POLICY_DENY_RULE);
        ASSERT_EQ(udp_ip(p, "10.7.1.1", 5000, NULL), EGRESS_POLICY_DENY_RULE);
        ASSERT_EQ(ip(p, "10.7.1.1", 22), EGRESS_POLICY_DENY_RULE);
        ASSERT_EQ(udp_host(p, "stun.example.com", 3479, NULL), EGRESS_POLICY_DENY_RULE);
        /* QUIC: UDP 443 never, even under a rule for every port */
        ASSERT_EQ(udp_ip(p, "192.168.1.1", 443, &m), EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_EQ(udp_ip(p, "192.168.1.1", 444, NULL), EGRESS_POLICY_ALLOW);
        /* names of UDP rules resolve; a deny of one protocol does not stop the name */
        ASSERT_EQ(egress_policy_match_name(p, "stun.example.com", 16, &m), EGRESS_POLICY_ALLOW);
        _cleanup_egress_policy_ EgressPolicy *d = parse_ok(
                "{\"allow\":[\"a.example.com\"],\"deny\":[{\"host\":\"a.example.com\",\"proto\":\"udp\"}]}");
        ASSERT_EQ(egress_policy_match_name(d, "a.example.com", 13, NULL), EGRESS_POLICY_ALLOW);
        ASSERT_EQ(egress_policy_match_host_proto(p, _EGRESS_POLICY_PROTO_INVALID, "stun.example.com", 16, 3478, NULL),
                  EGRESS_POLICY_DENY_NO_RULE);
        ASSERT_EQ(egress_policy_match_host_proto(p, EGRESS_POLICY_PROTO_ANY, "stun.example.com", 16, 3478, NULL),
                  EGRESS_POLICY_DENY_NO_RULE);

        ASSERT_STREQ(egress_policy_proto_to_string(EGRESS_POLICY_PROTO_UDP), "udp");
        ASSERT_EQ(egress_policy_proto_from_string("tcp", 3), EGRESS_POLICY_PROTO_TCP);
        ASSERT_EQ(egress_policy_proto_from_string("any", 3), _EGRESS_POLICY_PROTO_INVALID);
        ASSERT_EQ(egress_policy_proto_from_string("udp\0", 4), _EGRESS_POLICY_PROTO_INVALID);

        parse_bad("{\"allow\":[{\"cidr\":\"10.0.0.0/8\",\"proto\":\"udp\"}]}", -EINVAL, "must name its \"ports\"");
        parse_bad("{\"allow\":[{\"cidr\":\"10.0.0.0/8\",\"proto\":\"udp\",\"ports\":[443]}]}", -EINVAL, "QUIC");
        parse_bad("{\"allow\":[{\"cidr\":\"10.0.0.0/8\",\"proto\":\"udp\",\"ports\":[443,\"443-443\"]}]}", -EINVAL, "QUIC");
        parse_bad("{\"allow\":[{\"cidr\":\"10.0.0.0/8\",\"proto\":\"sctp\",\"ports\":[1]}]}", -EINVAL, "proto");
        parse_bad("{\"allow\":[{\"cidr\":\"10.0.0.0/8\",\"proto\":\"any\",\"ports\":[1]}]}", -EINVAL, "proto");
        parse_bad("{\"allow\":[{\"cidr\":\"10.0.0.0/8\",\"proto\":\"UDP\",\"ports\":[1]}]}", -EINVAL, "proto");
        parse_bad("{\"allow\":[{\"cidr\":\"10.0.0.0/8\",\"proto\":17,\"ports\":[1]}]}", -EINVAL, "proto");
        parse_bad("{\"deny\":[{\"cidr\":\"10.0.0.0/8\",\"proto\":null}]}", -EINVAL, "proto");
}

TEST(guard) {
        _cleanup_(host_addr_set_freep) HostAddrSet *host = NULL;
        uint8_t h4[4] = { 192, 0, 2, 10 }, h6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 7 };

        ASSERT_OK(host_addr_set_new(&host));
        EgressPolicyGuard g = { .pool_base = 0x0AC80000U, .pool_prefixlen = 16, .host = host };
        ASSERT_EQ(host_addr_set_add(host, 2, AF_INET, h4), 1);
        ASSERT_EQ(host_addr_set_add(host, 2, AF_INET, h4), 0);
        ASSERT_EQ(host_addr_set_size(host), 1);
        ASSERT_EQ(host_addr_set_add(host, 3, AF_INET6, h6), 1);
        ASSERT_ERRNO(host_addr_set_add(host, 2, AF_UNIX, h4), EAFNOSUPPORT);
        /* not known yet: every address that passes the fixed checks is refused */
        ASSERT_STREQ(forbidden(&g, "1.1.1.1"), EGRESS_POLICY_HOST_UNKNOWN);
        ASSERT_STREQ(forbidden(&g, "2606:4700::1111"), EGRESS_POLICY_HOST_UNKNOWN);
        ASSERT_STREQ(forbidden(&g, "::ffff:1.1.1.1"), EGRESS_POLICY_HOST_UNKNOWN);
        ASSERT_STREQ(forbidden(&g, "127.0.0.1"), "loopback address"); /* the fixed reasons stay first */
        host_addr_set_mark_complete(host, true);

        static const struct {
                const char *addr, *reason;
        } refused[] = {
                { "0.0.0.0", "unspecified" },      { "0.1.2.3", "unspecified" },
                { "127.0.0.1", "loopback" },       { "127.255.255.254", "loopback" },
                { "169.254.169.254", "metadata" }, { "169.254.0.1", "link-local" },
                { "224.0.0.1", "multicast" },      { "239.255.255.250", "multicast" },
                { "255.255.255.255", "broadcast" }, { "240.0.0.1", "reserved" },
                { "10.200.0.1", "pool" },          { "10.200.255.254", "pool" },
                { "192.0.2.10", "host address" },  { "::", "unspecified" },
                { "::1", "loopback" },             { "fe80::1", "link-local" },
                { "febf::1", "link-local" },       { "fec0::1", "site-local" },
                { "ff02::1", "multicast" },        { "::ffff:127.0.0.1", "loopback" },
                { "::ffff:169.254.169.254", "metadata" }, { "::ffff:10.200.0.3", "pool" },
                { "64:ff9b::a9fe:a9fe", "metadata" }, { "2002:7f00:1::", "loopback" },
                { "::127.0.0.1", "IPv4-compatible" }, { "fd00:ec2::254", "metadata" },
                { "2001:db8::7", "host address" },
        };
        for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
                const char *why = forbidden(&g, refused[i].addr);
                if (!why || !strstr(why, refused[i].reason))
                        test_fail(__FILE__, __LINE__, "%s: %s, expected %s", refused[i].addr, strna(why), refused[i].reason);
        }
        static const char *const fine[] = {
                "1.1.1.1", "10.201.0.1", "10.199.255.255", "192.168.1.1", "172.16.0.1", "169.253.255.255",
                "169.255.0.0", "223.255.255.255", "126.255.255.255", "128.0.0.1", "192.0.2.11", "2001:db8::8",
                "2606:4700::1111", "::ffff:1.1.1.1", "fe00::1", "fc00::1",
        };
        for (size_t i = 0; i < ELEMENTSOF(fine); i++)
                if (forbidden(&g, fine[i]))
                        test_fail(__FILE__, __LINE__, "%s refused: %s", fine[i], forbidden(&g, fine[i]));
        /* without a guard the fixed set still holds */
        ASSERT_NOT_NULL(forbidden(NULL, "127.0.0.1"));
        ASSERT_NULL(forbidden(NULL, "10.200.0.1"));
        ASSERT_NOT_NULL(egress_policy_addr_forbidden(&g, AF_UNIX, h4));
        /* a guard without a set knows no host address: nothing passes */
        EgressPolicyGuard none = { .pool_base = 0x0AC80000U, .pool_prefixlen = 16 };
        ASSERT_STREQ(forbidden(&none, "1.1.1.1"), EGRESS_POLICY_HOST_UNKNOWN);

        /* no cap: thousands of host addresses, each refused, the next one not */
        for (unsigned i = 0; i < 5000; i++) {
                uint8_t x[4] = { 100, 64, (uint8_t) (i >> 8), (uint8_t) i };
                ASSERT_EQ(host_addr_set_add(host, 10 + (int) i, AF_INET, x), 1);
        }
        ASSERT_STREQ(forbidden(&g, "100.64.0.0"), "host address");
        ASSERT_STREQ(forbidden(&g, "100.64.19.135"), "host address"); /* 4999 */
        ASSERT_STREQ(forbidden(&g, "::ffff:100.64.19.135"), "host address");
        ASSERT_NULL(forbidden(&g, "100.64.19.136"));
        ASSERT_STREQ(forbidden(&g, "192.0.2.10"), "host address");
}
