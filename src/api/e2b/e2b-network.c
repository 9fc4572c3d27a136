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
#include <string.h>
#include <strings.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "cred-rules.h"
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
        if (create && (v = json_get(net, "maskRequestHost")) && !json_is_null(v)) {
                char mask[STORE_INGRESS_HOST_MAX];
                int k = e2b_mask_host(v, mask, e);
                if (k < 0)
                        return k;
        }
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

static int rules_unchanged(ApiRequest *r, const char *id, const JsonValue *body, ApiError *e);

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
        if (k >= 0)
                k = rules_unchanged(r, id, body, e);
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

/* network.maskRequestHost: the Host the sandbox's servers see for ingress
 * requests, "${PORT}" standing for the port: a host[:port] of [A-Za-z0-9.-],
 * a bracketed IPv6 literal or "${PORT}" (nothing that could end the header
 * or start another). "" if absent. */
int e2b_mask_host(const JsonValue *v, char ret[static STORE_INGRESS_HOST_MAX], ApiError *e) {
        const char *s = json_string(v);
        size_t n;

        ret[0] = 0;
        if (!v || json_is_null(v))
                return 0;
        if (!s || strlen(s) != json_string_len(v))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "network.maskRequestHost must be a string");
        n = strlen(s);
        if (n == 0 || n >= STORE_INGRESS_HOST_MAX)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "network.maskRequestHost must be 1 to %u characters", STORE_INGRESS_HOST_MAX - 1);
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (startswith(s + i, "${PORT}")) {
                        i += 6;
                        continue;
                }
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '-' || c == ':' || c == '[' || c == ']' || c == '_'))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "network.maskRequestHost '%.64s': a host[:port] (letters, digits, '.', "
                                         "'-', ':', '[', ']', or ${PORT} for the port)", s);
        }
        if (strstr(s, "${PORT}") && strstr(strstr(s, "${PORT}") + 7, "${PORT}"))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "network.maskRequestHost names ${PORT} more than once");
        memcpy(ret, s, n + 1);
        return 0;
}

/* ---- network.rules: header transforms as space credentials ----
 * E2B's transform {"headers": {"H": "Bearer ${e2b.secrets.NAME}"}} for a host
 * has its egress proxy put the secret NAME on the sandbox's requests to that
 * host: space's credential NAME granted to the sandbox does exactly that, if
 * it applies as "H: Bearer {value}" and names the host (the sandbox holds a
 * placeholder at most; the value stays in the gateway). Anything else (a
 * literal value, which would have to be stored somewhere, a workload
 * identity token, a credential that applies otherwise) is a 400 saying why. */

#define E2B_SECRET_OPEN "${e2b.secrets."

static bool host_listed(const char *hosts_json, const char *host) {
        _cleanup_json_ JsonValue *hosts = NULL;

        if (!hosts_json || json_parse(hosts_json, strlen(hosts_json), &hosts, NULL, 0) < 0 ||
            json_type(hosts) != JSON_ARRAY)
                return false;
        for (size_t i = 0; i < json_array_size(hosts); i++) {
                const JsonValue *h = json_array_at(hosts, i);
                if (json_type(h) == JSON_STRING && strcasecmp(json_string(h), host) == 0)
                        return true;
        }
        return false;
}

/* What a sandbox's rules grant of one credential: the credential as it is,
 * or (a secret of POST /secrets, which names no hosts) scoped to the hosts
 * and the header of the rules. */
typedef struct RuleGrant {
        char name[STORE_NAME_MAX];
        bool scoped;
        char header[STORE_CRED_HEADER_MAX];
        char format[STORE_CRED_FORMAT_MAX];
        const char *hosts[CRED_HOSTS_MAX];
        size_t n_hosts;
} RuleGrant;

/* One header of a transform for host → the grant that does it. */
static int transform_header(ApiRequest *r, const char *host, const char *name, const JsonValue *value,
                            RuleGrant *ret, ApiError *e) {
        _cleanup_(credential_done) Credential c = {};
        _cleanup_free_ char *want = NULL;
        const char *v = json_string(value), *open, *close;
        char secret[STORE_NAME_MAX];
        int k;

        if (!v || strlen(v) != json_string_len(value))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "network.rules[\"%.128s\"]: header %.64s must be a string", host, name);
        open = strstr(v, E2B_SECRET_OPEN);
        close = open ? strchr(open, '}') : NULL;
        if (!open || !close || strstr(close, "${") || memmem(v, (size_t) (open - v), "${", 2))
                return api_error(e, -EOPNOTSUPP, API_INVALID_ARGUMENT,
                                 "network.rules[\"%.128s\"]: header %.64s: space puts only stored secrets on a "
                                 "sandbox's requests, named as ${e2b.secrets.NAME} (Secret.fill(NAME)) for a space "
                                 "credential NAME (POST /v1/credentials {name, value, hosts: [\"%.128s\"], header: "
                                 "\"%.64s: {value}\"}); literal values and workload identity tokens are not supported",
                                 host, name, host, name);
        if ((size_t) (close - open) - STRLEN(E2B_SECRET_OPEN) >= sizeof secret || close == open + STRLEN(E2B_SECRET_OPEN))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "network.rules[\"%.128s\"]: header %.64s names no valid secret", host, name);
        memcpy(secret, open + STRLEN(E2B_SECRET_OPEN), (size_t) (close - open) - STRLEN(E2B_SECRET_OPEN));
        secret[(close - open) - STRLEN(E2B_SECRET_OPEN)] = 0;
        for (char *p = secret; *p; p++) /* E2B lower-cases a secret's name */
                if (*p >= 'A' && *p <= 'Z')
                        *p = (char) (*p - 'A' + 'a');
        k = store_credential_get(r->store, r->key.tenant_id, secret, &c);
        if (k == -ENOENT)
                return api_error(e, k, API_INVALID_ARGUMENT,
                                 "network.rules[\"%.128s\"]: secret '%.64s': the tenant has no space credential of "
                                 "that name (POST /v1/credentials)", host, secret);
        if (k < 0)
                return api_store_error(e, k, "looking up the credential");
        want = strdup_printf("%.*s{value}%s", (int) (open - v), v, close + 1);
        if (!want)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        *ret = (RuleGrant) {};
        (void) strscpy(ret->name, sizeof ret->name, c.name);
        if (api_credential_hostless(&c)) {
                char err[256];
                if (cred_header_name_check(name, strlen(name), err, sizeof err) < 0 ||
                    cred_header_format_check(want, strlen(want), err, sizeof err) < 0)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "network.rules[\"%.128s\"]: header %.64s: %s", host, name, err);
                if (cred_host_pattern_check(host, strlen(host), err, sizeof err) < 0)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "network.rules[\"%.128s\"]: %s", host,
                                         err);
                ret->scoped = true;
                (void) strscpy(ret->header, sizeof ret->header, name);
                (void) strscpy(ret->format, sizeof ret->format, want);
                ret->hosts[ret->n_hosts++] = host;
                return 0;
        }
        if (c.apply != CRED_APPLY_HEADER || strcasecmp(c.header_name, name) != 0 || !streq(c.header_format, want))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "network.rules[\"%.128s\"]: credential '%.64s' applies as '%s: %s', the transform "
                                 "asks '%.64s: %.128s'", host, secret,
                                 c.apply == CRED_APPLY_HEADER ? c.header_name : "Authorization",
                                 c.apply == CRED_APPLY_HEADER ? c.header_format : "Basic ...", name, want);
        if (!host_listed(c.hosts_json, host))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "network.rules[\"%.128s\"]: credential '%.64s' is not for that host (its hosts: %.256s)",
                                 host, secret, c.hosts_json ?: "[]");
        return 0;
}

int e2b_network_credentials(ApiRequest *r, const JsonValue *net, char **ret, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w = {};
        const JsonValue *rules = net && json_type(net) == JSON_OBJECT ? json_get(net, "rules") : NULL;
        _cleanup_free_ RuleGrant *g = new0(RuleGrant, CRED_GRANTS_MAX);
        size_t n = 0;
        int k;

        *ret = NULL;
        if (!rules || json_is_null(rules))
                return 0;
        if (!g)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        if (json_type(rules) != JSON_OBJECT)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "network.rules must be an object of host → rules");
        for (size_t i = 0; i < json_object_size(rules); i++) {
                const char *host = json_object_key(rules, i);
                const JsonValue *list = json_object_value(rules, i);

                if (isempty(host) || streq(host, "*"))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "network.rules: \"%.128s\" is not a host name or *.domain", strempty(host));
                if (json_type(list) != JSON_ARRAY)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "network.rules[\"%.128s\"] must be an array of rules", host);
                for (size_t j = 0; j < json_array_size(list); j++) {
                        const JsonValue *rule = json_array_at(list, j), *t, *headers;
                        if (json_type(rule) != JSON_OBJECT)
                                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                                 "network.rules[\"%.128s\"][%zu] must be an object", host, j);
                        t = json_get(rule, "transform");
                        if (!t || json_is_null(t))
                                continue; /* a rule without a transform changes nothing */
                        headers = json_type(t) == JSON_OBJECT ? json_get(t, "headers") : NULL;
                        if (json_type(t) != JSON_OBJECT || (headers && json_type(headers) != JSON_OBJECT))
                                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                                 "network.rules[\"%.128s\"][%zu].transform must be "
                                                 "{\"headers\": {name: value}}", host, j);
                        for (size_t h = 0; headers && h < json_object_size(headers); h++) {
                                RuleGrant one;
                                RuleGrant *seen = NULL;
                                k = transform_header(r, host, json_object_key(headers, h),
                                                     json_object_value(headers, h), &one, e);
                                if (k < 0)
                                        return k;
                                for (size_t x = 0; x < n && !seen; x++)
                                        if (streq(g[x].name, one.name))
                                                seen = &g[x];
                                if (seen && one.scoped) {
                                        /* one secret for several hosts: the same header on each */
                                        bool listed = false;
                                        if (strcasecmp(seen->header, one.header) != 0 || !streq(seen->format, one.format))
                                                return api_error(e, -EOPNOTSUPP, API_INVALID_ARGUMENT,
                                                                 "network.rules: secret '%.64s' is used as '%s: %s' "
                                                                 "and as '%s: %s': space puts a secret on a "
                                                                 "sandbox's requests in one header only",
                                                                 one.name, seen->header, seen->format, one.header,
                                                                 one.format);
                                        for (size_t y = 0; y < seen->n_hosts && !listed; y++)
                                                listed = strcasecmp(seen->hosts[y], host) == 0;
                                        if (listed)
                                                continue;
                                        if (seen->n_hosts >= CRED_HOSTS_MAX)
                                                return api_error(e, -E2BIG, API_INVALID_ARGUMENT,
                                                                 "network.rules: secret '%.64s' may be used for at "
                                                                 "most %d hosts", one.name, CRED_HOSTS_MAX);
                                        seen->hosts[seen->n_hosts++] = host;
                                        continue;
                                }
                                if (seen)
                                        continue;
                                if (n >= CRED_GRANTS_MAX)
                                        return api_error(e, -E2BIG, API_INVALID_ARGUMENT,
                                                         "network.rules: a sandbox may be granted at most %d credentials",
                                                         CRED_GRANTS_MAX);
                                g[n++] = one;
                        }
                }
        }
        json_w_init(&w);
        json_w_array_begin(&w);
        for (size_t i = 0; i < n; i++) {
                if (!g[i].scoped) {
                        json_w_string(&w, g[i].name);
                        continue;
                }
                json_w_object_begin(&w);
                json_w_kv_string(&w, "name", g[i].name);
                json_w_key(&w, "hosts");
                json_w_array_begin(&w);
                for (size_t j = 0; j < g[i].n_hosts; j++)
                        json_w_string(&w, g[i].hosts[j]);
                json_w_array_end(&w);
                json_w_kv_string(&w, "header", g[i].header);
                json_w_kv_string(&w, "format", g[i].format);
                json_w_object_end(&w);
        }
        json_w_array_end(&w);
        if (json_w_finish(&w, ret, NULL) < 0)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        return 0;
}

/* Whether a grant is what an item of e2b_network_credentials() asks: the
 * credential as it is, or scoped to the same hosts in the same header. */
static bool grant_same(const Credential *g, const JsonValue *want) {
        _cleanup_json_ JsonValue *hosts = NULL;
        const JsonValue *wh;

        if (json_type(want) != JSON_OBJECT)
                return !g->grant_scoped;
        if (!g->grant_scoped || strcasecmp(g->header_name, strempty(json_string(json_get(want, "header")))) != 0 ||
            !streq(g->header_format, strempty(json_string(json_get(want, "format")))))
                return false;
        wh = json_get(want, "hosts");
        if (!g->hosts_json || json_parse(g->hosts_json, strlen(g->hosts_json), &hosts, NULL, 0) < 0 ||
            json_array_size(hosts) != json_array_size(wh))
                return false;
        for (size_t i = 0; i < json_array_size(wh); i++) {
                bool found = false;
                for (size_t j = 0; j < json_array_size(hosts) && !found; j++)
                        found = strcasecmp(strempty(json_string(json_array_at(wh, i))),
                                           strempty(json_string(json_array_at(hosts, j)))) == 0;
                if (!found)
                        return false;
        }
        return true;
}

/* An update's rules may only say what the sandbox's grants already do:
 * changing them is granting or removing space credentials, which the space
 * API does (without rules, the grants stay as they are). */
static int rules_unchanged(ApiRequest *r, const char *id, const JsonValue *body, ApiError *e) {
        _cleanup_json_ JsonValue *want = NULL;
        _cleanup_free_ char *names = NULL;
        Credential *list = NULL;
        Sandbox sb = {};
        size_t n = 0, m;
        bool same;
        int k;

        k = e2b_network_credentials(r, body, &names, e);
        if (k < 0 || !names)
                return k;
        k = api_sandbox_lookup(r, id, false, &sb, e);
        sandbox_done(&sb);
        if (k < 0)
                return k;
        if (json_parse(names, strlen(names), &want, NULL, 0) < 0)
                return api_error(e, -EINVAL, API_INTERNAL, "cannot read the rules back");
        k = store_grant_list(r->store, id, &list, &n);
        if (k < 0)
                return api_store_error(e, k, "listing the sandbox's credentials");
        m = json_array_size(want);
        same = m == n;
        for (size_t i = 0; i < m && same; i++) {
                bool found = false;
                const JsonValue *x = json_array_at(want, i);
                const char *name = json_type(x) == JSON_OBJECT ? json_string(json_get(x, "name")) : json_string(x);
                for (size_t j = 0; j < n && !found; j++)
                        found = streq(list[j].name, strempty(name)) && grant_same(&list[j], x);
                same = found;
        }
        credential_array_free(list, n);
        if (!same)
                return api_error(e, -EOPNOTSUPP, API_INVALID_ARGUMENT,
                                 "network.rules would change the sandbox's credentials: grant or remove them with "
                                 "the space API (PUT/DELETE /v1/sandboxes/%s/credentials/NAME)", id);
        return 0;
}
