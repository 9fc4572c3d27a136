/* SPDX-License-Identifier: MIT */
#pragma once

/* The sandbox egress policy: parsed from hostile JSON (the create request's
 * "network" field or PUT /v1/sandboxes/{id}/policy), matched by the gateway
 * for every DNS query and connection.
 *
 *   {"allow": [ "example.com", "*.github.com",
 *               {"host": "db.example.com", "ports": [5432]},
 *               {"cidr": "192.168.7.0/24", "ports": [443, "8000-8100"]},
 *               {"cidr": "10.0.0.0/8", "proto": "udp", "ports": [5000]} ],
 *    "deny":  [ "evil.github.com", {"cidr": "192.168.7.9/32"} ]}
 *
 * A string entry is a host (or "*.suffix" wildcard, which matches names
 * strictly below suffix, not suffix itself) or, if it contains '/', a CIDR.
 * Allow entries without "ports" allow 80 and 443; deny entries without
 * "ports" deny every port. "proto" is "tcp" or "udp": an allow entry is TCP
 * unless it says "udp" (and a UDP entry must name its ports); a deny entry
 * without "proto" denies both. UDP port 443 (QUIC) is never relayed: an entry
 * naming only it is refused, and the gateway refuses it whatever the entries
 * say (HTTP/3 clients fall back to TCP). A deny entry wins over any allow
 * entry. An empty policy ({} or {"allow": []}) allows nothing.
 *
 * Two optional fields change that (E2B's network model is both):
 *   "precedence": "allow"  an allow entry wins over a deny entry;
 *   "default": "allow"     what no entry names is allowed.
 * With either, a name that no host entry decides is decided by its
 * destination address, as a raw address is (CIDR entries, then the default):
 * E2B filters names on HTTP(S) only and everything else by IP. Neither ever
 * opens what egress_policy_addr_forbidden() refuses.
 *
 * Independently of the policy, egress_policy_addr_forbidden() refuses the addresses
 * no sandbox may reach: loopback, link-local (cloud metadata), multicast,
 * broadcast/reserved, unspecified, the host's own addresses and the sandbox
 * pool, and their IPv6 forms (incl. IPv4-mapped / NAT64 / 6to4 wrappers). */

#include <netinet/in.h>
#include <stdint.h>

#include "host-addr-set.h"
#include "json.h"
#include "macros.h"

#define EGRESS_POLICY_JSON_MAX (64U * 1024U)  /* bytes of policy JSON */
#define EGRESS_POLICY_RULES_MAX 256U          /* allow + deny entries */
#define EGRESS_POLICY_PORTS_MAX 32U           /* port items per entry */
#define EGRESS_POLICY_HOST_MAX 253U           /* DNS name, without trailing dot */
#define EGRESS_POLICY_LABEL_MAX 63U
#define EGRESS_POLICY_ERR_MAX 256U            /* size of an error buffer */
#define EGRESS_POLICY_RULE_TEXT_MAX 320U      /* "deny *.host:1-2,…" for events */
#define EGRESS_POLICY_DEFAULT_ALLOW_TEXT "default allow" /* the rule text of what "default": "allow" let through */

typedef enum EgressPolicyRuleKind {
        EGRESS_POLICY_RULE_HOST,
        EGRESS_POLICY_RULE_CIDR,
        _EGRESS_POLICY_RULE_KIND_MAX,
        _EGRESS_POLICY_RULE_KIND_INVALID = -EINVAL,
} EgressPolicyRuleKind;

/* The transport an entry is for. */
typedef enum EgressPolicyProto {
        EGRESS_POLICY_PROTO_ANY, /* deny entries without "proto" */
        EGRESS_POLICY_PROTO_TCP,
        EGRESS_POLICY_PROTO_UDP,
        _EGRESS_POLICY_PROTO_MAX,
        _EGRESS_POLICY_PROTO_INVALID = -EINVAL,
} EgressPolicyProto;

#define EGRESS_POLICY_QUIC_PORT 443U

typedef struct EgressPolicyPortRange {
        uint16_t lo, hi; /* inclusive, 1 ≤ lo ≤ hi */
} EgressPolicyPortRange;

typedef struct EgressPolicyRule {
        EgressPolicyRuleKind kind;
        char *host;     /* HOST: lower-case name; for a wildcard the suffix after "*." */
        bool wildcard;  /* HOST: "*.host" */
        int family;     /* CIDR: AF_INET or AF_INET6 */
        uint8_t addr[16]; /* CIDR: network address (4 or 16 bytes used), host bits zero */
        unsigned prefixlen;
        EgressPolicyPortRange *ports; /* NULL with n_ports == 0: every port */
        size_t n_ports;
        bool ports_given; /* "ports" was in the request (shown back as given) */
        EgressPolicyProto proto;
} EgressPolicyRule;

typedef struct EgressPolicy {
        EgressPolicyRule *allow;
        size_t n_allow;
        EgressPolicyRule *deny;
        size_t n_deny;
        bool allow_wins;    /* "precedence": "allow" */
        bool default_allow; /* "default": "allow" */
} EgressPolicy;

typedef enum EgressPolicyVerdict {
        EGRESS_POLICY_DENY_NO_RULE, /* nothing allows it */
        EGRESS_POLICY_DENY_RULE,    /* a deny entry matched */
        EGRESS_POLICY_ALLOW,
        EGRESS_POLICY_BY_ADDR, /* a name no host entry decides: its destination address does (see above) */
        _EGRESS_POLICY_VERDICT_MAX,
        _EGRESS_POLICY_VERDICT_INVALID = -EINVAL,
} EgressPolicyVerdict;

typedef struct EgressPolicyMatch {
        EgressPolicyVerdict verdict;
        char rule[EGRESS_POLICY_RULE_TEXT_MAX]; /* the matching entry, e.g. "allow *.github.com:80,443"; "" for no rule */
} EgressPolicyMatch;

EgressPolicy *egress_policy_free(EgressPolicy *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(EgressPolicy *, egress_policy_free);
#define _cleanup_egress_policy_ _cleanup_(egress_policy_freep)

/* An empty policy: nothing allowed. */
int egress_policy_new_empty(EgressPolicy **ret);
/* Parses policy JSON text (at most EGRESS_POLICY_JSON_MAX bytes, else -E2BIG). On
 * -EINVAL / -E2BIG writes a reason naming the bad entry into errbuf. */
int egress_policy_parse(const char *p, size_t n, EgressPolicy **ret, char *errbuf, size_t errbuf_size);
/* Same from an already parsed value (the API's request body). */
int egress_policy_from_json(const JsonValue *v, EgressPolicy **ret, char *errbuf, size_t errbuf_size);
/* What the API adds on a new policy (not on stored ones, which stay valid
 * when the list grows): refuses an allow entry whose wildcard covers a public
 * suffix of the ICANN section of the Public Suffix List ("*.co.uk",
 * "*.com.au", "*.foo.ck"): anyone can register a name there, so it allows
 * nearly as much as "*.com". Private-section suffixes ("*.github.io",
 * "*.s3.amazonaws.com") are one company's service and stay allowed; deny
 * entries may name any suffix. Without a list any wildcard allow is refused. */
int egress_policy_check_public_suffixes(const EgressPolicy *p, char *errbuf, size_t errbuf_size);
/* Also on a new policy only: refuses an allow entry that can never take
 * effect because every destination it names is one the gateway refuses
 * whatever the policy says (egress_policy_addr_forbidden() without a guard):
 * a CIDR wholly inside one such range (loopback, link-local and the metadata
 * addresses, multicast, ...), or "localhost" and names under it (RFC 6761:
 * loopback). Such an entry would read as a permission it is not. Deny
 * entries may name them. */
int egress_policy_check_reachable(const EgressPolicy *p, char *errbuf, size_t errbuf_size);
/* Also on a new policy only: refuses an entry listed twice in the same list
 * (the same target, transport and ports), as the credential API refuses a
 * host or a grant listed twice. Stored policies may hold such pairs. */
int egress_policy_check_listed_once(const EgressPolicy *p, char *errbuf, size_t errbuf_size);
/* All of the checks above, in that order: what a new policy (a request, the
 * configured default_network) must pass. */
int egress_policy_check_new(const EgressPolicy *p, char *errbuf, size_t errbuf_size);
/* Canonical JSON (objects with host|cidr and ports), NUL-terminated. */
int egress_policy_to_json(const EgressPolicy *p, char **ret);
void egress_policy_write_json(const EgressPolicy *p, JsonWriter *w);

/* Validates and normalises one host pattern ("Example.COM.", "*.x.org") into
 * out (lower case, no trailing dot). -EINVAL with a reason for anything else:
 * empty or long labels, bad characters, an IP literal, "*" alone, a wildcard
 * that covers a whole top-level domain ("*.com"), a '*' elsewhere. */
int egress_policy_host_normalize(const char *p, size_t n, char out[static EGRESS_POLICY_HOST_MAX + 1], bool *ret_wildcard,
                          char *errbuf, size_t errbuf_size);
/* Parses "a.b.c.d/len" or "v6/len" (len optional: a single address). Host
 * bits must be zero. */
int egress_policy_cidr_parse(const char *p, size_t n, int *ret_family, uint8_t ret_addr[static 16], unsigned *ret_prefixlen);

/* Name (p, n; any case, a trailing dot allowed) on a TCP port. A name that is
 * not a valid host name is denied without a rule. */
EgressPolicyVerdict egress_policy_match_host(const EgressPolicy *p, const char *name, size_t n, uint16_t port, EgressPolicyMatch *ret);
/* The same for proto TCP or UDP (UDP 443 is denied without a rule). */
EgressPolicyVerdict egress_policy_match_host_proto(const EgressPolicy *p, EgressPolicyProto proto, const char *name, size_t n,
                                                   uint16_t port, EgressPolicyMatch *ret);
/* Whether name may be resolved: an allow entry matches it (on some port) and
 * no deny entry for every port does. ret as for egress_policy_match_host(). */
EgressPolicyVerdict egress_policy_match_name(const EgressPolicy *p, const char *name, size_t n, EgressPolicyMatch *ret);
/* An IP destination (4 or 16 bytes) on a TCP port, against CIDR entries (then the default) only. */
EgressPolicyVerdict egress_policy_match_addr(const EgressPolicy *p, int family, const void *addr, uint16_t port, EgressPolicyMatch *ret);
EgressPolicyVerdict egress_policy_match_addr_proto(const EgressPolicy *p, EgressPolicyProto proto, int family, const void *addr,
                                                   uint16_t port, EgressPolicyMatch *ret);
const char *egress_policy_proto_to_string(EgressPolicyProto p);
EgressPolicyProto egress_policy_proto_from_string(const char *s, size_t n);

const char *egress_policy_verdict_to_string(EgressPolicyVerdict v);

/* The always-refused set. The host's addresses come from a HostAddrSet that
 * the gateway keeps current from netlink (gateway-host-addrs.c); while that
 * set is not complete (not yet dumped, an overrun, a failed allocation) no
 * address that passes the fixed checks is let through: the reason is
 * EGRESS_POLICY_HOST_UNKNOWN. */
#define EGRESS_POLICY_HOST_UNKNOWN "host addresses unknown"
typedef struct EgressPolicyGuard {
        uint32_t pool_base; /* host byte order; the sandbox address pool */
        unsigned pool_prefixlen; /* 0: no pool configured */
        const HostAddrSet *host; /* NULL or incomplete: every address is refused as unknown */
} EgressPolicyGuard;

/* NULL if addr may be reached (subject to the policy), else the reason. g
 * NULL: only the fixed ranges (what no policy can open, whatever the host). */
const char *egress_policy_addr_forbidden(const EgressPolicyGuard *g, int family, const void *addr);
