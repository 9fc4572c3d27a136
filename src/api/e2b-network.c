/* SPDX-License-Identifier: MIT */
/* E2B's network model on space's egress policy: allow_internet_access and
 * network.{allowOut, denyOut} of a create, and PUT /sandboxes/{id}/network,
 * which replaces them on a live sandbox.
 *
 * E2B: a destination is allowed if an allowOut entry names it, else unless a
 * denyOut entry does, else if the sandbox has internet access. Domains in
 * allowOut are matched on HTTP Host / TLS SNI (ports 80 and 443), addresses
 * and CIDRs on every port; denyOut holds addresses and CIDRs only. That is a
 * space policy with "precedence": "allow" (an allow entry wins), "default":
 * "allow" or "deny" (internet access), host entries for the domains and
 * CIDR entries on every port, TCP and UDP, for the addresses. The gateway's
 * host-address guard refuses what it always refuses whatever they say.
 *
 * Internet access that the request does not set is the deployment's choice:
 * e2b_internet = 1 gives it as E2B does, 0 (the default) keeps space's
 * default of no egress (default_network for a create that asks nothing).
 * What cannot be mapped is a 400, never dropped. */

#include <arpa/inet.h>
#include <stdio.h>

#include "api-internal.h"
#include "e2b.h"
#include "egress-policy.h"
#include "str-util.h"

/* The E2B body's own fields of the network object ("rules" etc. are refused below with what they are). */
static bool is_cidr_or_ip(const char *s, size_t n) {
        int family;
        uint8_t addr[16];
        unsigned prefixlen;

        return egress_policy_cidr_parse(s, n, &family, addr, &prefixlen) == 0;
}

static int check_strings(const JsonValue *v, const char *what, ApiError *e) {
        if (json_type(v) != JSON_ARRAY)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "%s must be an array of strings", what);
        if (json_array_size(v) > EGRESS_POLICY_RULES_MAX)
                return api_error(e, -E2BIG, API_INVALID_ARGUMENT, "%s: more than %u entries", what,
                                 EGRESS_POLICY_RULES_MAX);
        for (size_t i = 0; i < json_array_size(v); i++)
                if (json_type(json_array_at(v, i)) != JSON_STRING || json_string_len(json_array_at(v, i)) == 0)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "%s[%zu] must be a non-empty string", what, i);
        return 0;
}

/* E2B options space has no counterpart for: a 400 naming them. */
static int refuse_unmapped(const JsonValue *net, bool create, ApiError *e) {
        const JsonValue *v;

        if ((v = json_get(net, "egressProxy")) && !json_is_null(v))
                return api_error(e, -EOPNOTSUPP, API_INVALID_ARGUMENT,
                                 "network.egressProxy is not supported by space (egress leaves through space's own "
                                 "gateway; there is no SOCKS5 upstream)");
        if ((v = json_get(net, "rules")) && !json_is_null(v) &&
            !(json_type(v) == JSON_OBJECT && json_object_size(v) == 0))
                return api_error(e, -EOPNOTSUPP, API_INVALID_ARGUMENT,
                                 "network.rules (header transforms) are not supported by space's E2B API: grant a "
                                 "space credential for the host instead (POST /v1/credentials); the gateway puts its "
                                 "value on the sandbox's HTTPS requests without the sandbox seeing it");
        if (create && (v = json_get(net, "maskRequestHost")) && !json_is_null(v))
                return api_error(e, -EOPNOTSUPP, API_INVALID_ARGUMENT,
                                 "network.maskRequestHost is not supported by space's ingress (requests reach the "
                                 "sandbox with the Host they were sent with)");
        if (create && (v = json_get(net, "httpsPorts")) && !json_is_null(v) &&
            !(json_type(v) == JSON_ARRAY && json_array_size(v) == 0))
                return api_error(e, -EOPNOTSUPP, API_INVALID_ARGUMENT,
                                 "network.httpsPorts is not supported by space's ingress (it speaks plain HTTP to "
                                 "the sandbox's ports)");
        return 0;
}

int e2b_network_policy(const JsonValue *internet, const JsonValue *net, const Config *c, bool create,
                       char **ret, ApiError *e) {
        static const char *const create_keys[] = { "allowOut", "denyOut", "rules", "egressProxy", "allowPublicTraffic",
                                                   "maskRequestHost", "httpsPorts", NULL };
        static const char *const update_keys[] = { "allowOut", "denyOut", "rules", "egressProxy",
                                                   "allow_internet_access", NULL };
        _cleanup_(json_w_done) JsonWriter w = {};
        const JsonValue *allow = NULL, *deny = NULL;
        const char *unknown = NULL;
        bool on = c->e2b_internet, given = false;
        int k;

        if (internet && !json_is_null(internet)) {
                if (json_bool(internet, &on) < 0)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "allow_internet_access must be a boolean");
                given = true;
        }
        if (net && !json_is_null(net)) {
                if (json_type(net) != JSON_OBJECT)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "network must be an object");
                if (json_check_keys(net, create ? create_keys : update_keys, &unknown) < 0)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "network: unknown field \"%.64s\"", unknown);
                k = refuse_unmapped(net, create, e);
                if (k < 0)
                        return k;
                allow = json_get(net, "allowOut");
                deny = json_get(net, "denyOut");
                if (allow && json_is_null(allow))
                        allow = NULL;
                if (deny && json_is_null(deny))
                        deny = NULL;
                if (allow && (k = check_strings(allow, "network.allowOut", e)) < 0)
                        return k;
                if (deny && (k = check_strings(deny, "network.denyOut", e)) < 0)
                        return k;
                given = given || allow || deny;
        }
        if (!given && !c->e2b_internet) {
                *ret = NULL; /* nothing asked: the deployment's default_network */
                return 0;
        }

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "allow");
        json_w_array_begin(&w);
        for (size_t i = 0; allow && i < json_array_size(allow); i++) {
                const JsonValue *s = json_array_at(allow, i);
                if (!is_cidr_or_ip(json_string(s), json_string_len(s))) {
                        /* a domain or *.domain: HTTP Host / TLS SNI on 80 and 443, as E2B matches it */
                        json_w_string_n(&w, json_string(s), json_string_len(s));
                        continue;
                }
                /* an address or CIDR: every port, both transports (UDP 443, QUIC, stays refused) */
                json_w_object_begin(&w);
                json_w_key(&w, "cidr");
                json_w_string_n(&w, json_string(s), json_string_len(s));
                json_w_key(&w, "ports");
                json_w_array_begin(&w);
                json_w_string(&w, "1-65535");
                json_w_array_end(&w);
                json_w_object_end(&w);
                json_w_object_begin(&w);
                json_w_key(&w, "cidr");
                json_w_string_n(&w, json_string(s), json_string_len(s));
                json_w_kv_string(&w, "proto", "udp");
                json_w_key(&w, "ports");
                json_w_array_begin(&w);
                json_w_string(&w, "1-65535");
                json_w_array_end(&w);
                json_w_object_end(&w);
        }
        json_w_array_end(&w);
        json_w_key(&w, "deny");
        json_w_array_begin(&w);
        for (size_t i = 0; deny && i < json_array_size(deny); i++) {
                const JsonValue *s = json_array_at(deny, i);
                if (!is_cidr_or_ip(json_string(s), json_string_len(s)))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "network.denyOut[%zu]: \"%.128s\" is not an IP address or CIDR block "
                                         "(domain names are not supported for deny rules)",
                                         i, json_string(s));
                json_w_string_n(&w, json_string(s), json_string_len(s));
        }
        json_w_array_end(&w);
        json_w_kv_string(&w, "precedence", "allow");
        json_w_kv_string(&w, "default", on ? "allow" : "deny");
        json_w_object_end(&w);
        if (json_w_finish(&w, ret, NULL) < 0)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        return 0;
}

/* PUT /sandboxes/{id}/network: the whole egress configuration replaced
 * (omitted fields clear theirs), on the running sandbox at once → 204. */
int e2b_network_update(ApiRequest *r, const char *id, ApiError *e) {
        _cleanup_json_ JsonValue *body = NULL, *policy = NULL;
        _cleanup_free_ char *text = NULL;
        int k;

        k = e2b_read_json(r, &body, e);
        if (k < 0)
                return k;
        if (json_type(body) != JSON_OBJECT)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "the body must be a JSON object");
        k = e2b_network_policy(json_get(body, "allow_internet_access"), body, api_config(r->api), false, &text, e);
        if (k < 0)
                return k;
        if (text && json_parse(text, strlen(text), &policy, NULL, 0) < 0)
                return api_error(e, -EINVAL, API_INTERNAL, "cannot build the policy");
        k = api_sandbox_policy_apply(r, id, policy, e); /* NULL: the deployment's default again */
        if (k < 0) {
                if (e->code == API_NOT_FOUND)
                        (void) api_error(e, k, API_NOT_FOUND, "sandbox '%.64s' not found", id);
                return k;
        }
        return e2b_reply(r, 204, NULL, NULL, 0, NULL);
}

/* One policy target as E2B writes it: "host", "*.host" or "a.b.c.d/len". */
static void write_target(JsonWriter *w, const EgressPolicyRule *rule) {
        char a[INET6_ADDRSTRLEN], s[INET6_ADDRSTRLEN + 8];

        if (rule->kind == EGRESS_POLICY_RULE_HOST) {
                _cleanup_free_ char *h = rule->wildcard ? strjoin("*.", rule->host) : NULL;
                if (rule->wildcard && !h)
                        w->error = -ENOMEM;
                json_w_string(w, h ?: rule->host);
                return;
        }
        inet_ntop(rule->family, rule->addr, a, sizeof a);
        snprintf(s, sizeof s, "%s/%u", a, rule->prefixlen);
        json_w_string(w, s);
}

void e2b_network_write_info(JsonWriter *w, const Sandbox *sb) {
        _cleanup_egress_policy_ EgressPolicy *p = NULL;

        /* a policy made from E2B's model (allow wins) reads back as E2B's fields; others have no E2B form */
        if (sb->network_json &&
            egress_policy_parse(sb->network_json, strlen(sb->network_json), &p, NULL, 0) >= 0 && !p->allow_wins)
                p = egress_policy_free(p);
        json_w_key(w, "allowInternetAccess");
        if (p)
                json_w_bool(w, p->default_allow);
        else
                json_w_null(w);
        json_w_key(w, "network");
        json_w_object_begin(w);
        json_w_kv_bool(w, "allowPublicTraffic", sb->public_traffic);
        if (p) {
                json_w_key(w, "allowOut");
                json_w_array_begin(w);
                for (size_t i = 0; i < p->n_allow; i++)
                        if (p->allow[i].proto != EGRESS_POLICY_PROTO_UDP) /* an address's UDP twin is the same entry */
                                write_target(w, &p->allow[i]);
                json_w_array_end(w);
                json_w_key(w, "denyOut");
                json_w_array_begin(w);
                for (size_t i = 0; i < p->n_deny; i++)
                        if (p->deny[i].kind == EGRESS_POLICY_RULE_CIDR)
                                write_target(w, &p->deny[i]);
                json_w_array_end(w);
        }
        json_w_object_end(w);
}
