/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc-util.h"
#include "egress-policy.h"
#include "public-suffix.h"
#include "str-util.h"

static const EgressPolicyPortRange default_allow_ports[] = { { 80, 80 }, { 443, 443 } };

static void err_set(char *errbuf, size_t size, const char *fmt, ...) _printf_(3, 4);
static void err_set(char *errbuf, size_t size, const char *fmt, ...) {
        va_list ap;
        if (!errbuf || size == 0)
                return;
        va_start(ap, fmt);
        vsnprintf(errbuf, size, fmt, ap);
        va_end(ap);
}

static void rule_done(EgressPolicyRule *r) {
        free(r->host);
        free(r->ports);
}

EgressPolicy *egress_policy_free(EgressPolicy *p) {
        if (!p)
                return NULL;
        for (size_t i = 0; i < p->n_allow; i++)
                rule_done(&p->allow[i]);
        for (size_t i = 0; i < p->n_deny; i++)
                rule_done(&p->deny[i]);
        free(p->allow);
        free(p->deny);
        free(p);
        return NULL;
}

int egress_policy_new_empty(EgressPolicy **ret) {
        EgressPolicy *p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

static bool is_label_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static bool looks_numeric_tld(const char *s) {
        /* the last label all digits: an IPv4 literal or a name no resolver serves */
        const char *dot = strrchr(s, '.');
        const char *l = dot ? dot + 1 : s;
        if (!*l)
                return false;
        for (; *l; l++)
                if (*l < '0' || *l > '9')
                        return false;
        return true;
}

int egress_policy_host_normalize(const char *p, size_t n, char out[static EGRESS_POLICY_HOST_MAX + 1], bool *ret_wildcard,
                          char *errbuf, size_t errbuf_size) {
        bool wildcard = false;
        size_t labels = 0, label_len = 0, o = 0;

        if (!p || n == 0) {
                err_set(errbuf, errbuf_size, "empty host");
                return -EINVAL;
        }
        if (n >= 2 && p[0] == '*' && p[1] == '.') {
                wildcard = true;
                p += 2;
                n -= 2;
        }
        if (n > 0 && p[n - 1] == '.')
                n--;
        if (n == 0) {
                err_set(errbuf, errbuf_size, wildcard ? "wildcard without a domain" : "empty host");
                return -EINVAL;
        }
        if (n > EGRESS_POLICY_HOST_MAX) {
                err_set(errbuf, errbuf_size, "host longer than %u bytes", EGRESS_POLICY_HOST_MAX);
                return -EINVAL;
        }
        for (size_t i = 0; i < n; i++) {
                char c = p[i];
                if (c >= 'A' && c <= 'Z')
                        c = (char) (c - 'A' + 'a');
                if (c == '.') {
                        if (label_len == 0) {
                                err_set(errbuf, errbuf_size, "empty label in host");
                                return -EINVAL;
                        }
                        if (out[o - 1] == '-') {
                                err_set(errbuf, errbuf_size, "label ends with '-'");
                                return -EINVAL;
                        }
                        labels++;
                        label_len = 0;
                } else if (c == '*') {
                        err_set(errbuf, errbuf_size, "'*' only as the whole first label (\"*.example.com\")");
                        return -EINVAL;
                } else if (!is_label_char(c)) {
                        if ((unsigned char) c < 0x20 || (unsigned char) c >= 0x7f)
                                err_set(errbuf, errbuf_size, "invalid byte 0x%02x in host", (unsigned char) c);
                        else
                                err_set(errbuf, errbuf_size, "invalid character '%c' in host", c);
                        return -EINVAL;
                } else {
                        if (label_len == 0 && c == '-') {
                                err_set(errbuf, errbuf_size, "label starts with '-'");
                                return -EINVAL;
                        }
                        if (++label_len > EGRESS_POLICY_LABEL_MAX) {
                                err_set(errbuf, errbuf_size, "label longer than %u bytes", EGRESS_POLICY_LABEL_MAX);
                                return -EINVAL;
                        }
                }
                out[o++] = c;
        }
        if (label_len == 0) {
                err_set(errbuf, errbuf_size, "empty label in host");
                return -EINVAL;
        }
        if (out[o - 1] == '-') {
                err_set(errbuf, errbuf_size, "label ends with '-'");
                return -EINVAL;
        }
        labels++;
        out[o] = 0;
        if (looks_numeric_tld(out)) {
                err_set(errbuf, errbuf_size, "an IP address is not a host: use a CIDR entry");
                return -EINVAL;
        }
        if (wildcard && labels < 2) {
                err_set(errbuf, errbuf_size, "wildcard covers a whole top-level domain");
                return -EINVAL;
        }
        if (ret_wildcard)
                *ret_wildcard = wildcard;
        return 0;
}

static bool parse_dec(const char *p, size_t n, unsigned max, unsigned *ret) {
        unsigned v = 0;
        if (n == 0 || n > 5 || (n > 1 && p[0] == '0'))
                return false;
        for (size_t i = 0; i < n; i++) {
                if (p[i] < '0' || p[i] > '9')
                        return false;
                v = v * 10 + (unsigned) (p[i] - '0');
        }
        if (v > max)
                return false;
        *ret = v;
        return true;
}

int egress_policy_cidr_parse(const char *p, size_t n, int *ret_family, uint8_t ret_addr[static 16], unsigned *ret_prefixlen) {
        char buf[INET6_ADDRSTRLEN + 1];
        uint8_t a[16] = {};
        const char *slash;
        size_t alen;
        unsigned plen, maxlen;
        int family;

        if (!p || n == 0)
                return -EINVAL;
        slash = memchr(p, '/', n);
        alen = slash ? (size_t) (slash - p) : n;
        if (alen == 0 || alen >= sizeof buf)
                return -EINVAL;
        memcpy(buf, p, alen);
        buf[alen] = 0;
        if (memchr(buf, 0, alen))
                return -EINVAL;
        if (strchr(buf, ':')) {
                family = AF_INET6;
                maxlen = 128;
                if (inet_pton(AF_INET6, buf, a) != 1)
                        return -EINVAL;
        } else {
                family = AF_INET;
                maxlen = 32;
                if (inet_pton(AF_INET, buf, a) != 1) /* strict dotted quad, no octal/short forms */
                        return -EINVAL;
        }
        if (slash) {
                if (!parse_dec(slash + 1, n - alen - 1, maxlen, &plen))
                        return -EINVAL;
        } else
                plen = maxlen;
        for (unsigned bit = plen; bit < maxlen; bit++)
                if (a[bit / 8] & (0x80U >> (bit % 8)))
                        return -EINVAL; /* host bits set */
        *ret_family = family;
        memcpy(ret_addr, a, 16);
        *ret_prefixlen = plen;
        return 0;
}

static int parse_ports(const JsonValue *v, EgressPolicyRule *r, const char *what, size_t idx, char *errbuf, size_t errbuf_size) {
        size_t n = json_array_size(v);

        if (json_type(v) != JSON_ARRAY) {
                err_set(errbuf, errbuf_size, "%s[%zu].ports: must be an array", what, idx);
                return -EINVAL;
        }
        if (n == 0) {
                err_set(errbuf, errbuf_size, "%s[%zu].ports: empty (leave it out for the default)", what, idx);
                return -EINVAL;
        }
        if (n > EGRESS_POLICY_PORTS_MAX) {
                err_set(errbuf, errbuf_size, "%s[%zu].ports: more than %u items", what, idx, EGRESS_POLICY_PORTS_MAX);
                return -E2BIG;
        }
        r->ports = new0(EgressPolicyPortRange, n);
        if (!r->ports)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const JsonValue *e = json_array_at(v, i);
                unsigned lo, hi;
                if (json_type(e) == JSON_NUMBER) {
                        int64_t x;
                        if (json_int64(e, &x) < 0 || x < 1 || x > 65535) {
                                err_set(errbuf, errbuf_size, "%s[%zu].ports[%zu]: a port is an integer 1-65535", what, idx, i);
                                return -EINVAL;
                        }
                        lo = hi = (unsigned) x;
                } else if (json_type(e) == JSON_STRING) {
                        const char *s = json_string(e);
                        size_t sl = json_string_len(e);
                        const char *dash = memchr(s, '-', sl);
                        if (!dash || !parse_dec(s, (size_t) (dash - s), 65535, &lo) ||
                            !parse_dec(dash + 1, sl - (size_t) (dash - s) - 1, 65535, &hi) || lo < 1 || lo > hi) {
                                err_set(errbuf, errbuf_size, "%s[%zu].ports[%zu]: a range is \"LO-HI\" with 1 <= LO <= HI <= 65535",
                                        what, idx, i);
                                return -EINVAL;
                        }
                } else {
                        err_set(errbuf, errbuf_size, "%s[%zu].ports[%zu]: a port number or a \"LO-HI\" range", what, idx, i);
                        return -EINVAL;
                }
                r->ports[i] = (EgressPolicyPortRange){ (uint16_t) lo, (uint16_t) hi };
        }
        r->n_ports = n;
        r->ports_given = true;
        return 0;
}

static int parse_target(const char *s, size_t n, bool is_cidr, EgressPolicyRule *r, const char *what, size_t idx,
                        char *errbuf, size_t errbuf_size) {
        char why[EGRESS_POLICY_ERR_MAX];
        if (is_cidr) {
                if (egress_policy_cidr_parse(s, n, &r->family, r->addr, &r->prefixlen) < 0) {
                        err_set(errbuf, errbuf_size, "%s[%zu]: invalid CIDR \"%.*s\" (\"a.b.c.d/len\" with the host bits zero)",
                                what, idx, (int) MIN(n, 64U), s);
                        return -EINVAL;
                }
                r->kind = EGRESS_POLICY_RULE_CIDR;
                return 0;
        }
        char host[EGRESS_POLICY_HOST_MAX + 1];
        if (egress_policy_host_normalize(s, n, host, &r->wildcard, why, sizeof why) < 0) {
                err_set(errbuf, errbuf_size, "%s[%zu]: invalid host \"%.*s\": %s", what, idx, (int) MIN(n, 64U), s, why);
                return -EINVAL;
        }
        r->kind = EGRESS_POLICY_RULE_HOST;
        r->host = strdup(host);
        return r->host ? 0 : -ENOMEM;
}

static const char *const proto_table[_EGRESS_POLICY_PROTO_MAX] = {
        [EGRESS_POLICY_PROTO_ANY] = "any",
        [EGRESS_POLICY_PROTO_TCP] = "tcp",
        [EGRESS_POLICY_PROTO_UDP] = "udp",
};

const char *egress_policy_proto_to_string(EgressPolicyProto p) {
        return p >= 0 && p < _EGRESS_POLICY_PROTO_MAX ? proto_table[p] : NULL;
}

EgressPolicyProto egress_policy_proto_from_string(const char *s, size_t n) {
        /* "any" is no value a request may give: leave "proto" out for it */
        for (EgressPolicyProto p = EGRESS_POLICY_PROTO_TCP; p < _EGRESS_POLICY_PROTO_MAX; p++)
                if (s && strlen(proto_table[p]) == n && memcmp(s, proto_table[p], n) == 0)
                        return p;
        return _EGRESS_POLICY_PROTO_INVALID;
}

static bool ports_only_quic(const EgressPolicyRule *r) {
        for (size_t i = 0; i < r->n_ports; i++)
                if (r->ports[i].lo != EGRESS_POLICY_QUIC_PORT || r->ports[i].hi != EGRESS_POLICY_QUIC_PORT)
                        return false;
        return r->n_ports > 0;
}

static int parse_rule(const JsonValue *e, bool allow, size_t idx, EgressPolicyRule *r, char *errbuf, size_t errbuf_size) {
        static const char *const keys[] = { "host", "cidr", "ports", "proto", NULL };
        const char *what = allow ? "allow" : "deny";
        const char *unknown = NULL;
        int k;

        r->proto = allow ? EGRESS_POLICY_PROTO_TCP : EGRESS_POLICY_PROTO_ANY;
        if (json_type(e) == JSON_STRING) {
                const char *s = json_string(e);
                size_t n = json_string_len(e);
                bool is_cidr = memchr(s, '/', n);
                if (!is_cidr) {
                        /* a bare IP literal is a /32 (/128) */
                        int fam;
                        uint8_t a[16];
                        unsigned pl;
                        is_cidr = egress_policy_cidr_parse(s, n, &fam, a, &pl) == 0;
                }
                k = parse_target(s, n, is_cidr, r, what, idx, errbuf, errbuf_size);
        } else if (json_type(e) == JSON_OBJECT) {
                const JsonValue *h = json_get(e, "host"), *c = json_get(e, "cidr"), *ports = json_get(e, "ports"),
                                *proto = json_get(e, "proto");
                if (json_check_keys(e, keys, &unknown) < 0) {
                        err_set(errbuf, errbuf_size, "%s[%zu]: unknown field \"%s\"", what, idx, unknown);
                        return -EINVAL;
                }
                if (!!h == !!c) {
                        err_set(errbuf, errbuf_size, "%s[%zu]: exactly one of \"host\" or \"cidr\"", what, idx);
                        return -EINVAL;
                }
                if (json_type(h ?: c) != JSON_STRING) {
                        err_set(errbuf, errbuf_size, "%s[%zu].%s: must be a string", what, idx, h ? "host" : "cidr");
                        return -EINVAL;
                }
                if (proto) {
                        r->proto = json_type(proto) == JSON_STRING
                                           ? egress_policy_proto_from_string(json_string(proto), json_string_len(proto))
                                           : _EGRESS_POLICY_PROTO_INVALID;
                        if (r->proto < 0) {
                                err_set(errbuf, errbuf_size, "%s[%zu].proto: \"tcp\" or \"udp\"", what, idx);
                                return -EINVAL;
                        }
                }
                k = parse_target(json_string(h ?: c), json_string_len(h ?: c), !!c, r, what, idx, errbuf, errbuf_size);
                if (k >= 0 && ports)
                        k = parse_ports(ports, r, what, idx, errbuf, errbuf_size);
        } else {
                err_set(errbuf, errbuf_size, "%s[%zu]: a host string, a CIDR string or an object", what, idx);
                return -EINVAL;
        }
        if (k < 0)
                return k;
        if (allow && r->proto == EGRESS_POLICY_PROTO_UDP) {
                if (!r->ports_given) {
                        err_set(errbuf, errbuf_size, "%s[%zu]: a udp entry must name its \"ports\"", what, idx);
                        return -EINVAL;
                }
                if (ports_only_quic(r)) {
                        err_set(errbuf, errbuf_size,
                                "%s[%zu]: udp port 443 (QUIC) is never relayed; HTTP/3 clients fall back to TCP 443", what, idx);
                        return -EINVAL;
                }
        }
        if (allow && !r->ports_given) {
                r->ports = memdup(default_allow_ports, sizeof default_allow_ports);
                if (!r->ports)
                        return -ENOMEM;
                r->n_ports = ELEMENTSOF(default_allow_ports);
        }
        return 0;
}

static int parse_list(const JsonValue *v, bool allow, EgressPolicyRule **ret, size_t *ret_n, size_t *budget,
                      char *errbuf, size_t errbuf_size) {
        const char *what = allow ? "allow" : "deny";
        size_t n;
        EgressPolicyRule *rules;

        if (!v) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        if (json_type(v) != JSON_ARRAY) {
                err_set(errbuf, errbuf_size, "%s: must be an array", what);
                return -EINVAL;
        }
        n = json_array_size(v);
        if (n > *budget) {
                err_set(errbuf, errbuf_size, "more than %u allow and deny entries", EGRESS_POLICY_RULES_MAX);
                return -E2BIG;
        }
        *budget -= n;
        rules = new0(EgressPolicyRule, n);
        if (!rules)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                int r = parse_rule(json_array_at(v, i), allow, i, &rules[i], errbuf, errbuf_size);
                if (r < 0) {
                        for (size_t j = 0; j <= i; j++)
                                rule_done(&rules[j]);
                        free(rules);
                        return r;
                }
        }
        *ret = rules;
        *ret_n = n;
        return 0;
}

/* "allow" or "deny" (absent: deny) */
static int parse_allow_deny(const JsonValue *v, const char *what, bool *ret, char *errbuf, size_t errbuf_size) {
        if (!v) {
                *ret = false;
                return 0;
        }
        if (json_type(v) == JSON_STRING && streq(json_string(v), "allow"))
                *ret = true;
        else if (json_type(v) == JSON_STRING && streq(json_string(v), "deny"))
                *ret = false;
        else {
                err_set(errbuf, errbuf_size, "%s: \"allow\" or \"deny\"", what);
                return -EINVAL;
        }
        return 0;
}

int egress_policy_from_json(const JsonValue *v, EgressPolicy **ret, char *errbuf, size_t errbuf_size) {
        static const char *const keys[] = { "allow", "deny", "precedence", "default", NULL };
        _cleanup_egress_policy_ EgressPolicy *p = NULL;
        const char *unknown = NULL;
        size_t budget = EGRESS_POLICY_RULES_MAX;
        int r;

        if (json_type(v) != JSON_OBJECT) {
                err_set(errbuf, errbuf_size, "the policy must be an object {\"allow\": [...], \"deny\": [...]}");
                return -EINVAL;
        }
        if (json_check_keys(v, keys, &unknown) < 0) {
                err_set(errbuf, errbuf_size, "unknown field \"%s\" (allowed: allow, deny, precedence, default)", unknown);
                return -EINVAL;
        }
        r = egress_policy_new_empty(&p);
        if (r < 0)
                return r;
        r = parse_list(json_get(v, "allow"), true, &p->allow, &p->n_allow, &budget, errbuf, errbuf_size);
        if (r < 0)
                return r;
        r = parse_list(json_get(v, "deny"), false, &p->deny, &p->n_deny, &budget, errbuf, errbuf_size);
        if (r < 0)
                return r;
        r = parse_allow_deny(json_get(v, "precedence"), "precedence", &p->allow_wins, errbuf, errbuf_size);
        if (r < 0)
                return r;
        r = parse_allow_deny(json_get(v, "default"), "default", &p->default_allow, errbuf, errbuf_size);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(p);
        return 0;
}

int egress_policy_check_public_suffixes(const EgressPolicy *p, char *errbuf, size_t errbuf_size) {
        if (!p)
                return -EINVAL;
        for (size_t i = 0; i < p->n_allow; i++) {
                const EgressPolicyRule *r = &p->allow[i];
                PublicSuffixSection s;
                int k;

                if (r->kind != EGRESS_POLICY_RULE_HOST || !r->wildcard)
                        continue;
                k = public_suffix_lookup(r->host, strlen(r->host), &s);
                if (k == -ENOENT) {
                        err_set(errbuf, errbuf_size,
                                "allow[%zu]: \"*.%.64s\": no Public Suffix List is installed to check a wildcard "
                                "against; allow exact hosts", i, r->host);
                        return -EINVAL;
                }
                if (k < 0) {
                        err_set(errbuf, errbuf_size, "allow[%zu]: \"*.%.64s\" is not a host name", i, r->host);
                        return -EINVAL;
                }
                if (s == PUBLIC_SUFFIX_ICANN) {
                        err_set(errbuf, errbuf_size,
                                "allow[%zu]: \"*.%.64s\" covers the public suffix \"%.64s\" (ICANN section of the "
                                "Public Suffix List), where anyone registers names: allow hosts under one "
                                "registered domain (\"*.example.%.64s\")",
                                i, r->host, r->host, r->host);
                        return -EINVAL;
                }
        }
        return 0;
}

/* The last address of a CIDR: its network address with the host bits set. */
static void cidr_last(const EgressPolicyRule *r, uint8_t ret[static 16]) {
        size_t len = r->family == AF_INET ? 4 : 16;

        memcpy(ret, r->addr, len);
        for (size_t i = 0; i < len; i++) {
                unsigned bits = r->prefixlen > i * 8 ? r->prefixlen - (unsigned) i * 8 : 0;
                if (bits < 8)
                        ret[i] |= (uint8_t) (0xFFU >> bits);
        }
}

static bool is_localhost(const char *host) {
        size_t n = strlen(host);
        return streq(host, "localhost") || (n > STRLEN(".localhost") && streq(host + n - STRLEN(".localhost"), ".localhost"));
}

int egress_policy_check_reachable(const EgressPolicy *p, char *errbuf, size_t errbuf_size) {
        if (!p)
                return -EINVAL;
        for (size_t i = 0; i < p->n_allow; i++) {
                const EgressPolicyRule *r = &p->allow[i];

                if (r->kind == EGRESS_POLICY_RULE_HOST && is_localhost(r->host)) {
                        err_set(errbuf, errbuf_size,
                                "allow[%zu]: \"%s%.64s\" is never reachable: localhost names the loopback address "
                                "(RFC 6761), which the gateway refuses whatever the policy says",
                                i, r->wildcard ? "*." : "", r->host);
                        return -EINVAL;
                }
                if (r->kind == EGRESS_POLICY_RULE_CIDR) {
                        /* the fixed ranges are aligned blocks: a CIDR is inside one if its first and last
                         * addresses are refused for the same reason */
                        uint8_t last[16];
                        const char *first_why = egress_policy_addr_forbidden(NULL, r->family, r->addr), *last_why;
                        char a[INET6_ADDRSTRLEN];

                        cidr_last(r, last);
                        last_why = egress_policy_addr_forbidden(NULL, r->family, last);
                        if (!first_why || !last_why || !streq(first_why, last_why))
                                continue;
                        inet_ntop(r->family, r->addr, a, sizeof a);
                        err_set(errbuf, errbuf_size,
                                "allow[%zu]: %s/%u is never reachable: every address in it is a %s, which the "
                                "gateway refuses whatever the policy says",
                                i, a, r->prefixlen, first_why);
                        return -EINVAL;
                }
        }
        return 0;
}

int egress_policy_parse(const char *p, size_t n, EgressPolicy **ret, char *errbuf, size_t errbuf_size) {
        _cleanup_json_ JsonValue *v = NULL;
        char why[EGRESS_POLICY_ERR_MAX];
        int r;

        if (n > EGRESS_POLICY_JSON_MAX) {
                err_set(errbuf, errbuf_size, "policy larger than %u bytes", EGRESS_POLICY_JSON_MAX);
                return -E2BIG;
        }
        r = json_parse(p, n, &v, why, sizeof why);
        if (r < 0) {
                err_set(errbuf, errbuf_size, "policy is not valid JSON: %s", why);
                return r == -ENOMEM ? r : -EINVAL;
        }
        return egress_policy_from_json(v, ret, errbuf, errbuf_size);
}

static void write_target(const EgressPolicyRule *r, JsonWriter *w) {
        if (r->kind == EGRESS_POLICY_RULE_HOST) {
                _cleanup_free_ char *h = r->wildcard ? strjoin("*.", r->host) : NULL;
                json_w_kv_string(w, "host", r->wildcard ? (h ?: "") : r->host);
                if (r->wildcard && !h)
                        w->error = -ENOMEM;
        } else {
                char a[INET6_ADDRSTRLEN], s[INET6_ADDRSTRLEN + 5];
                inet_ntop(r->family, r->addr, a, sizeof a);
                snprintf(s, sizeof s, "%s/%u", a, r->prefixlen);
                json_w_kv_string(w, "cidr", s);
        }
}

static void write_list(const EgressPolicyRule *rules, size_t n, bool allow, JsonWriter *w) {
        json_w_array_begin(w);
        for (size_t i = 0; i < n; i++) {
                const EgressPolicyRule *r = &rules[i];
                json_w_object_begin(w);
                write_target(r, w);
                /* shown where it is not the default (allow: tcp; deny: both) */
                if (r->proto != (allow ? EGRESS_POLICY_PROTO_TCP : EGRESS_POLICY_PROTO_ANY))
                        json_w_kv_string(w, "proto", egress_policy_proto_to_string(r->proto));
                if (r->n_ports > 0) {
                        json_w_key(w, "ports");
                        json_w_array_begin(w);
                        for (size_t j = 0; j < r->n_ports; j++) {
                                if (r->ports[j].lo == r->ports[j].hi)
                                        json_w_int(w, r->ports[j].lo);
                                else {
                                        char s[16];
                                        snprintf(s, sizeof s, "%u-%u", r->ports[j].lo, r->ports[j].hi);
                                        json_w_string(w, s);
                                }
                        }
                        json_w_array_end(w);
                }
                json_w_object_end(w);
        }
        json_w_array_end(w);
}

void egress_policy_write_json(const EgressPolicy *p, JsonWriter *w) {
        json_w_object_begin(w);
        json_w_key(w, "allow");
        write_list(p->allow, p->n_allow, true, w);
        json_w_key(w, "deny");
        write_list(p->deny, p->n_deny, false, w);
        /* shown where they are not the default, so older policies keep their canonical form */
        if (p->allow_wins)
                json_w_kv_string(w, "precedence", "allow");
        if (p->default_allow)
                json_w_kv_string(w, "default", "allow");
        json_w_object_end(w);
}

int egress_policy_to_json(const EgressPolicy *p, char **ret) {
        JsonWriter w;
        json_w_init(&w);
        egress_policy_write_json(p, &w);
        return json_w_finish(&w, ret, NULL);
}

static bool ports_match(const EgressPolicyRule *r, uint16_t port) {
        if (r->n_ports == 0)
                return true;
        for (size_t i = 0; i < r->n_ports; i++)
                if (port >= r->ports[i].lo && port <= r->ports[i].hi)
                        return true;
        return false;
}

static bool host_match(const EgressPolicyRule *r, const char *name) {
        size_t nl, hl;
        if (r->kind != EGRESS_POLICY_RULE_HOST)
                return false;
        if (!r->wildcard)
                return streq(r->host, name);
        nl = strlen(name);
        hl = strlen(r->host);
        /* strictly below: "x.example.com" for "*.example.com", never "example.com" or "badexample.com" */
        return nl > hl + 1 && name[nl - hl - 1] == '.' && streq(name + nl - hl, r->host);
}

static bool prefix_match(const uint8_t *a, const uint8_t *net, unsigned plen) {
        unsigned full = plen / 8, rest = plen % 8;
        if (memcmp(a, net, full) != 0)
                return false;
        if (rest == 0)
                return true;
        uint8_t mask = (uint8_t) (0xFFU << (8 - rest));
        return (a[full] & mask) == (net[full] & mask);
}

static bool cidr_match(const EgressPolicyRule *r, int family, const void *addr) {
        return r->kind == EGRESS_POLICY_RULE_CIDR && r->family == family && prefix_match(addr, r->addr, r->prefixlen);
}

static void rule_text(const EgressPolicyRule *r, bool allow, char *buf, size_t size) {
        char target[EGRESS_POLICY_HOST_MAX + 8];
        size_t o;
        if (r->kind == EGRESS_POLICY_RULE_HOST)
                snprintf(target, sizeof target, "%s%s", r->wildcard ? "*." : "", r->host);
        else {
                char a[INET6_ADDRSTRLEN];
                inet_ntop(r->family, r->addr, a, sizeof a);
                snprintf(target, sizeof target, "%s/%u", a, r->prefixlen);
        }
        o = (size_t) snprintf(buf, size, "%s %s", allow ? "allow" : "deny", target);
        for (size_t i = 0; i < r->n_ports && o < size; i++) {
                int k = r->ports[i].lo == r->ports[i].hi ? snprintf(buf + o, size - o, "%c%u", i ? ',' : ':', r->ports[i].lo)
                                                         : snprintf(buf + o, size - o, "%c%u-%u", i ? ',' : ':', r->ports[i].lo, r->ports[i].hi);
                if (k < 0)
                        break;
                o += (size_t) k;
        }
        if (r->proto != EGRESS_POLICY_PROTO_ANY && (r->proto != EGRESS_POLICY_PROTO_TCP || !allow) && o < size)
                (void) snprintf(buf + o, size - o, "/%s", egress_policy_proto_to_string(r->proto));
}

static bool ports_in(const EgressPolicyPortRange *r, const EgressPolicyRule *b) {
        for (size_t i = 0; i < b->n_ports; i++)
                if (b->ports[i].lo == r->lo && b->ports[i].hi == r->hi)
                        return true;
        return false;
}

/* The same entry: target, transport and port set (in any order; an allow
 * entry without "ports" has the default ones). */
static bool rule_same(const EgressPolicyRule *a, const EgressPolicyRule *b) {
        if (a->kind != b->kind || a->proto != b->proto || (a->n_ports == 0) != (b->n_ports == 0))
                return false;
        if (a->kind == EGRESS_POLICY_RULE_HOST ? a->wildcard != b->wildcard || !streq(a->host, b->host)
                                               : a->family != b->family || a->prefixlen != b->prefixlen ||
                                                         memcmp(a->addr, b->addr, a->family == AF_INET ? 4 : 16) != 0)
                return false;
        for (size_t i = 0; i < a->n_ports; i++)
                if (!ports_in(&a->ports[i], b))
                        return false;
        for (size_t i = 0; i < b->n_ports; i++)
                if (!ports_in(&b->ports[i], a))
                        return false;
        return true;
}

static int check_listed_once(const EgressPolicyRule *rules, size_t n, bool allow, char *errbuf, size_t errbuf_size) {
        for (size_t i = 1; i < n; i++)
                for (size_t j = 0; j < i; j++) {
                        char text[EGRESS_POLICY_RULE_TEXT_MAX];
                        if (!rule_same(&rules[i], &rules[j]))
                                continue;
                        rule_text(&rules[i], allow, text, sizeof text);
                        err_set(errbuf, errbuf_size, "%s[%zu]: the same entry as %s[%zu] (%.128s); list each entry once",
                                allow ? "allow" : "deny", i, allow ? "allow" : "deny", j, text);
                        return -EINVAL;
                }
        return 0;
}

int egress_policy_check_listed_once(const EgressPolicy *p, char *errbuf, size_t errbuf_size) {
        int r;

        if (!p)
                return -EINVAL;
        r = check_listed_once(p->allow, p->n_allow, true, errbuf, errbuf_size);
        if (r < 0)
                return r;
        return check_listed_once(p->deny, p->n_deny, false, errbuf, errbuf_size);
}

int egress_policy_check_new(const EgressPolicy *p, char *errbuf, size_t errbuf_size) {
        int r;

        r = egress_policy_check_public_suffixes(p, errbuf, errbuf_size);
        if (r >= 0)
                r = egress_policy_check_reachable(p, errbuf, errbuf_size);
        if (r >= 0)
                r = egress_policy_check_listed_once(p, errbuf, errbuf_size);
        return r;
}

static EgressPolicyVerdict verdict(EgressPolicyMatch *ret, EgressPolicyVerdict v, const EgressPolicyRule *r, bool allow) {
        if (ret) {
                ret->verdict = v;
                ret->rule[0] = 0;
                if (r)
                        rule_text(r, allow, ret->rule, sizeof ret->rule);
        }
        return v;
}

static bool proto_match(const EgressPolicyRule *r, EgressPolicyProto proto) {
        return r->proto == EGRESS_POLICY_PROTO_ANY || r->proto == proto;
}

/* Whether names no host entry decides go by their address (E2B's model). */
static bool names_by_addr(const EgressPolicy *p) {
        return p->allow_wins || p->default_allow;
}

/* Whether some address could be allowed: only then is a name that no host
 * entry allows worth resolving (else its query would leave for nothing). */
static bool some_addr_allowed(const EgressPolicy *p) {
        if (p->default_allow)
                return true;
        for (size_t i = 0; i < p->n_allow; i++)
                if (p->allow[i].kind == EGRESS_POLICY_RULE_CIDR)
                        return true;
        return false;
}

EgressPolicyVerdict egress_policy_match_host_proto(const EgressPolicy *p, EgressPolicyProto proto, const char *name, size_t n,
                                                   uint16_t port, EgressPolicyMatch *ret) {
        char norm[EGRESS_POLICY_HOST_MAX + 1];
        const EgressPolicyRule *deny;
        bool wildcard;

        if (!p || port == 0 || (proto != EGRESS_POLICY_PROTO_TCP && proto != EGRESS_POLICY_PROTO_UDP) ||
            (proto == EGRESS_POLICY_PROTO_UDP && port == EGRESS_POLICY_QUIC_PORT) ||
            egress_policy_host_normalize(name, n, norm, &wildcard, NULL, 0) < 0 || wildcard)
                return verdict(ret, EGRESS_POLICY_DENY_NO_RULE, NULL, false);
        deny = NULL;
        for (size_t i = 0; i < p->n_deny && !deny; i++)
                if (host_match(&p->deny[i], norm) && proto_match(&p->deny[i], proto) && ports_match(&p->deny[i], port))
                        deny = &p->deny[i];
        if (deny && !p->allow_wins)
                return verdict(ret, EGRESS_POLICY_DENY_RULE, deny, false);
        for (size_t i = 0; i < p->n_allow; i++)
                if (host_match(&p->allow[i], norm) && proto_match(&p->allow[i], proto) && ports_match(&p->allow[i], port))
                        return verdict(ret, EGRESS_POLICY_ALLOW, &p->allow[i], true);
        if (deny)
                return verdict(ret, EGRESS_POLICY_DENY_RULE, deny, false);
        return verdict(ret, names_by_addr(p) ? EGRESS_POLICY_BY_ADDR : EGRESS_POLICY_DENY_NO_RULE, NULL, false);
}

EgressPolicyVerdict egress_policy_match_host(const EgressPolicy *p, const char *name, size_t n, uint16_t port, EgressPolicyMatch *ret) {
        return egress_policy_match_host_proto(p, EGRESS_POLICY_PROTO_TCP, name, n, port, ret);
}

EgressPolicyVerdict egress_policy_match_name(const EgressPolicy *p, const char *name, size_t n, EgressPolicyMatch *ret) {
        char norm[EGRESS_POLICY_HOST_MAX + 1];
        const EgressPolicyRule *deny;
        bool wildcard;

        if (!p || egress_policy_host_normalize(name, n, norm, &wildcard, NULL, 0) < 0 || wildcard)
                return verdict(ret, EGRESS_POLICY_DENY_NO_RULE, NULL, false);
        /* only a deny entry for every port of both protocols keeps a name from resolving */
        deny = NULL;
        for (size_t i = 0; i < p->n_deny && !deny; i++)
                if (host_match(&p->deny[i], norm) && p->deny[i].n_ports == 0 && p->deny[i].proto == EGRESS_POLICY_PROTO_ANY)
                        deny = &p->deny[i];
        if (deny && !p->allow_wins)
                return verdict(ret, EGRESS_POLICY_DENY_RULE, deny, false);
        for (size_t i = 0; i < p->n_allow; i++)
                if (host_match(&p->allow[i], norm))
                        return verdict(ret, EGRESS_POLICY_ALLOW, &p->allow[i], true);
        if (deny)
                return verdict(ret, EGRESS_POLICY_DENY_RULE, deny, false);
        return verdict(ret, names_by_addr(p) && some_addr_allowed(p) ? EGRESS_POLICY_BY_ADDR : EGRESS_POLICY_DENY_NO_RULE,
                       NULL, false);
}

EgressPolicyVerdict egress_policy_match_addr_proto(const EgressPolicy *p, EgressPolicyProto proto, int family, const void *addr,
                                                   uint16_t port, EgressPolicyMatch *ret) {
        const EgressPolicyRule *deny;

        if (!p || port == 0 || (family != AF_INET && family != AF_INET6) ||
            (proto != EGRESS_POLICY_PROTO_TCP && proto != EGRESS_POLICY_PROTO_UDP) ||
            (proto == EGRESS_POLICY_PROTO_UDP && port == EGRESS_POLICY_QUIC_PORT))
                return verdict(ret, EGRESS_POLICY_DENY_NO_RULE, NULL, false);
        deny = NULL;
        for (size_t i = 0; i < p->n_deny && !deny; i++)
                if (cidr_match(&p->deny[i], family, addr) && proto_match(&p->deny[i], proto) && ports_match(&p->deny[i], port))
                        deny = &p->deny[i];
        if (deny && !p->allow_wins)
                return verdict(ret, EGRESS_POLICY_DENY_RULE, deny, false);
        for (size_t i = 0; i < p->n_allow; i++)
                if (cidr_match(&p->allow[i], family, addr) && proto_match(&p->allow[i], proto) && ports_match(&p->allow[i], port))
                        return verdict(ret, EGRESS_POLICY_ALLOW, &p->allow[i], true);
        if (deny)
                return verdict(ret, EGRESS_POLICY_DENY_RULE, deny, false);
        if (p->default_allow) {
                (void) verdict(ret, EGRESS_POLICY_ALLOW, NULL, true);
                if (ret)
                        (void) strscpy(ret->rule, sizeof ret->rule, EGRESS_POLICY_DEFAULT_ALLOW_TEXT);
                return EGRESS_POLICY_ALLOW;
        }
        return verdict(ret, EGRESS_POLICY_DENY_NO_RULE, NULL, false);
}

EgressPolicyVerdict egress_policy_match_addr(const EgressPolicy *p, int family, const void *addr, uint16_t port, EgressPolicyMatch *ret) {
        return egress_policy_match_addr_proto(p, EGRESS_POLICY_PROTO_TCP, family, addr, port, ret);
}

static const char *const verdict_table[_EGRESS_POLICY_VERDICT_MAX] = {
        [EGRESS_POLICY_DENY_NO_RULE] = "deny",
        [EGRESS_POLICY_DENY_RULE] = "deny",
        [EGRESS_POLICY_ALLOW] = "allow",
        [EGRESS_POLICY_BY_ADDR] = "by address",
};

const char *egress_policy_verdict_to_string(EgressPolicyVerdict v) {
        return v >= 0 && v < _EGRESS_POLICY_VERDICT_MAX ? verdict_table[v] : NULL;
}

/* The host's own addresses: refused, and all of them while they are not known. */
static const char *forbidden_host(const EgressPolicyGuard *g, int family, const void *a) {
        if (!host_addr_set_is_complete(g->host))
                return EGRESS_POLICY_HOST_UNKNOWN;
        return host_addr_set_contains(g->host, family, a) ? "host address" : NULL;
}

static const char *forbidden4(const EgressPolicyGuard *g, const uint8_t a[4]) {
        uint32_t x = ((uint32_t) a[0] << 24) | ((uint32_t) a[1] << 16) | ((uint32_t) a[2] << 8) | a[3];
        if (a[0] == 0)
                return "unspecified address";
        if (a[0] == 127)
                return "loopback address";
        if (a[0] == 169 && a[1] == 254)
                return "link-local address (metadata)";
        if (a[0] >= 224 && a[0] <= 239)
                return "multicast address";
        if (a[0] >= 240)
                return "broadcast or reserved address";
        if (g && g->pool_prefixlen > 0 && g->pool_prefixlen <= 32) {
                uint32_t mask = g->pool_prefixlen == 32 ? 0xFFFFFFFFU : ~(0xFFFFFFFFU >> g->pool_prefixlen);
                if ((x & mask) == (g->pool_base & mask))
                        return "sandbox address pool";
        }
        return g ? forbidden_host(g, AF_INET, a) : NULL;
}

const char *egress_policy_addr_forbidden(const EgressPolicyGuard *g, int family, const void *addr) {
        const uint8_t *a = addr;
        static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
        static const uint8_t nat64[12] = { 0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0 };

        if (family == AF_INET)
                return forbidden4(g, a);
        if (family != AF_INET6)
                return "unsupported address family";
        if (memcmp(a, v4mapped, 12) == 0 || memcmp(a, nat64, 12) == 0)
                return forbidden4(g, a + 12);
        if (a[0] == 0x20 && a[1] == 0x02) /* 6to4 2002:V4ADDR::/16 */
                return forbidden4(g, a + 2) ?: NULL;
        {
                static const uint8_t zero[16];
                if (memcmp(a, zero, 15) == 0) {
                        if (a[15] == 0)
                                return "unspecified address";
                        if (a[15] == 1)
                                return "loopback address";
                }
                if (memcmp(a, zero, 12) == 0)
                        return "IPv4-compatible address (deprecated)";
        }
        if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
                return "link-local address";
        if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0)
                return "site-local address (deprecated)";
        if (a[0] == 0xff)
                return "multicast address";
        if (a[0] == 0xfd && a[1] == 0x00 && a[2] == 0x0e && a[3] == 0xc2)
                return "link-local address (metadata)"; /* fd00:ec2::254, the IPv6 metadata service */
        return g ? forbidden_host(g, AF_INET6, a) : NULL;
}
