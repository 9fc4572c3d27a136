/* SPDX-License-Identifier: MIT */
/* The policy's verdict on a TCP connection of the gateway: one function per
 * kind of decision (a name on a port, a raw address, a redirected
 * connection to another port). A connection is decided with them when it
 * opens, and every open one of a sandbox again when its policy changes: what
 * the new policy denies is cut at once (gw_policy_recheck()). */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "gateway-internal.h"
#include "str-util.h"

#define GW_NO_HOST_RULE "no rule allows this host and port"
#define GW_NO_ADDR_RULE "a raw address needs a CIDR rule"
#define GW_BY_ADDR "no host rule: decided by the address it resolves to"

bool gw_verdict_name(Gateway *gw, GwConn *c, const char *name, char *why, size_t whysize) {
        EgressPolicyMatch m;
        EgressPolicyVerdict v = egress_policy_match_host(c->sb->policy, name, strlen(name), c->port, &m);

        c->by_addr = v == EGRESS_POLICY_BY_ADDR;
        if (c->by_addr) {
                if (c->dst.sin_addr.s_addr != htonl(INADDR_ANY))
                        return gw_verdict_addr(gw, c, why, whysize);
                (void) strscpy(why, whysize, GW_BY_ADDR); /* the proxy resolves it first; conn_connect decides */
                return true;
        }
        (void) strscpy(why, whysize, m.rule[0] || v == EGRESS_POLICY_ALLOW ? m.rule : GW_NO_HOST_RULE);
        return v == EGRESS_POLICY_ALLOW;
}

bool gw_verdict_addr(Gateway *gw, const GwConn *c, char *why, size_t whysize) {
        EgressPolicyMatch m;
        const char *forbidden = gw_addr_forbidden(gw, AF_INET, &c->dst.sin_addr);
        if (forbidden) {
                (void) strscpy(why, whysize, forbidden);
                return false;
        }
        bool allow = egress_policy_match_addr(c->sb->policy, AF_INET, &c->dst.sin_addr, c->port, &m) ==
                     EGRESS_POLICY_ALLOW;
        (void) strscpy(why, whysize, m.rule[0] || allow ? m.rule : GW_NO_ADDR_RULE);
        return allow;
}

bool gw_verdict_tcp(Gateway *gw, const GwConn *c, char ret_host[static DNS_NAME_MAX + 1], char *why, size_t whysize) {
        const char *names[GW_NAMES_PER_ADDR_MAX + 1];
        size_t n = 0;

        ret_host[0] = 0;
        if (c->host[0]) /* the name it was allowed for first (its DNS answer may have expired since) */
                names[n++] = c->host;
        n += gw_memory_names(c->sb, c->dst.sin_addr, names + n, GW_NAMES_PER_ADDR_MAX);
        if (!gw_addr_forbidden(gw, AF_INET, &c->dst.sin_addr))
                for (size_t i = 0; i < n; i++) {
                        EgressPolicyMatch m;
                        if (egress_policy_match_host(c->sb->policy, names[i], strlen(names[i]), c->port, &m) ==
                            EGRESS_POLICY_ALLOW) {
                                (void) strscpy(ret_host, DNS_NAME_MAX + 1, names[i]);
                                (void) strscpy(why, whysize, m.rule);
                                return true;
                        }
                }
        return gw_verdict_addr(gw, c, why, whysize);
}

/* Whether c was decided (a connection still reading its request head or
 * ClientHello is decided with the policy in force once they are complete;
 * a refused one is on its way out; DNS answers follow the policy per query). */
static bool conn_decided(const GwConn *c) {
        if (c->kind == GW_CONN_DNS)
                return false;
        switch (c->state) {
        case GW_CONN_RESOLVING:
        case GW_CONN_CONNECTING:
        case GW_CONN_RELAY:
                return true;
        case GW_CONN_HEAD:
                return c->ix != NULL; /* intercepted: TLS handshakes under way */
        case GW_CONN_FLUSH:
                return false;
        }
        return false;
}

/* The verdict a new connection like c would get from the policy in force:
 * its name (Host / SNI / CONNECT authority) on its port, or its destination
 * address; a redirected other-port connection by the names the gateway
 * resolved to its destination, then by the address. The check that a
 * transparent connection's destination was resolved for its name by the
 * gateway is not repeated: it passed, and no policy changes it. */
static bool conn_allowed(Gateway *gw, GwConn *c, char *why, size_t whysize) {
        char host[DNS_NAME_MAX + 1];
        if (c->kind == GW_CONN_TRANSPARENT && c->proto && streq(c->proto, "tcp"))
                return gw_verdict_tcp(gw, c, host, why, whysize);
        if (c->host[0])
                return gw_verdict_name(gw, c, c->host, why, whysize);
        return gw_verdict_addr(gw, c, why, whysize);
}

void gw_policy_recheck(Gateway *gw, GwSandbox *sb) {
        for (GwConn *c = gw->conns, *next; c; c = next) {
                char why[EGRESS_POLICY_RULE_TEXT_MAX + 64], cut[EGRESS_POLICY_RULE_TEXT_MAX + 128];
                next = c->next; /* gw_conn_cut() frees c (and lookups), nothing else */
                if (c->sb != sb || !conn_decided(c) || conn_allowed(gw, c, why, sizeof why))
                        continue;
                snprintf(cut, sizeof cut, "the policy changed: %s", why);
                if (c->ix && gw_intercept_cut(gw, c, cut))
                        continue; /* HTTP/2: a GOAWAY, then the close */
                gw_conn_cut(gw, c, cut);
        }
}
