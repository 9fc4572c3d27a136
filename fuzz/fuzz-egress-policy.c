/* SPDX-License-Identifier: MIT */
/* libFuzzer target for src/gateway/policy.c. For every input:
 *  - egress_policy_parse(); on failure the error is -EINVAL/-E2BIG with a message; on
 *    success the canonical JSON parses again to the same canonical JSON;
 *  - the input (and its halves) as a name and as a 4/16-byte address is matched
 *    against the policy on a port taken from the input, and the address against
 *    the guard: nothing may crash, and a name the normaliser refuses never matches;
 *  - the Public Suffix List checks on the policy and on the input as a name. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-check.h"
#include "alloc-util.h"
#include "egress-policy.h"
#include "public-suffix.h"

static const char fixed[] = "{\"allow\":[\"example.com\",\"*.github.com\",\"192.168.0.0/16\",{\"host\":\"a.b\",\"ports\":[\"1-65535\"]}],"
                            "\"deny\":[\"x.github.com\"]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_egress_policy_ EgressPolicy *p = NULL, *f = NULL;
        char err[EGRESS_POLICY_ERR_MAX] = "", norm[EGRESS_POLICY_HOST_MAX + 1];
        EgressPolicyGuard g = { .pool_base = 0x0AC80000U, .pool_prefixlen = 16 };
        const char *s = (const char *) data;
        uint16_t port = size >= 2 ? (uint16_t) (data[0] << 8 | data[1]) : 443;
        bool wc;
        int r;

        if (size > 4 * EGRESS_POLICY_JSON_MAX)
                return 0;
        r = egress_policy_parse(s, size, &p, err, sizeof err);
        if (r < 0) {
                CHECK(r == -EINVAL || r == -E2BIG || r == -ENOMEM);
                CHECK(err[0] != 0);
                CHECK(!p);
        } else {
                _cleanup_free_ char *a = NULL, *b = NULL;
                _cleanup_egress_policy_ EgressPolicy *q = NULL;
                CHECK(egress_policy_to_json(p, &a) >= 0);
                CHECK(egress_policy_parse(a, strlen(a), &q, err, sizeof err) >= 0);
                CHECK(egress_policy_to_json(q, &b) >= 0);
                CHECK(strcmp(a, b) == 0);
                /* the Public Suffix List check of new policies: ok or a reason */
                err[0] = 0;
                r = egress_policy_check_public_suffixes(p, err, sizeof err);
                CHECK(r == 0 || (r == -EINVAL && err[0] != 0));
        }
        CHECK(egress_policy_parse(fixed, strlen(fixed), &f, err, sizeof err) >= 0);
        for (size_t half = 0; half < 2; half++) {
                const char *n = s + (half ? size / 2 : 0);
                size_t len = half ? size - size / 2 : size;
                EgressPolicyMatch m;
                bool valid = egress_policy_host_normalize(n, len, norm, &wc, NULL, 0) >= 0 && !wc;
                PublicSuffixSection sec;
                char below[PUBLIC_SUFFIX_NAME_MAX + 1];
                r = public_suffix_lookup(n, len, &sec);
                CHECK(r == -EINVAL || (r == 0 && sec >= PUBLIC_SUFFIX_NONE && sec < _PUBLIC_SUFFIX_MAX));
                r = public_suffix_below(n, len, below, sizeof below);
                CHECK(r == -EINVAL || r == 0 || (r == 1 && strlen(below) <= PUBLIC_SUFFIX_NAME_MAX));
                EgressPolicyVerdict v = egress_policy_match_host(f, n, len, port, &m);
                if (!valid)
                        CHECK(v == EGRESS_POLICY_DENY_NO_RULE);
                if (p)
                        (void) egress_policy_match_host(p, n, len, port, NULL);
                if (len >= 16) {
                        (void) egress_policy_match_addr(f, AF_INET6, n, port, NULL);
                        (void) egress_policy_addr_forbidden(&g, AF_INET6, n);
                }
                if (len >= 4) {
                        (void) egress_policy_match_addr(p ?: f, AF_INET, n, port, NULL);
                        (void) egress_policy_addr_forbidden(&g, AF_INET, n);
                }
        }
        return 0;
}
