/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <net/if.h>
#include <nftables/libnftables.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "firewall.h"
#include "netlink.h"
#include "log.h"
#include "str-util.h"
#include "veth.h"

struct Firewall {
        struct nft_ctx *ctx;
        char error[FIREWALL_ERROR_MAX];
};

bool firewall_table_name_is_valid(const char *t) {
        size_t n = t ? strnlen(t, FIREWALL_TABLE_NAME_MAX + 1) : 0;
        if (n == 0 || n > FIREWALL_TABLE_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = t[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
                        return false;
        }
        return true;
}

/* A growing text buffer; the first failure sticks. */
typedef struct Text {
        char *s;
        size_t n, allocated;
        int error;
} Text;

_printf_(2, 3) static void text_printf(Text *t, const char *fmt, ...) {
        va_list ap;
        if (t->error < 0)
                return;
        for (;;) {
                size_t room = t->allocated - t->n;
                va_start(ap, fmt);
                int k = t->s ? vsnprintf(t->s + t->n, room, fmt, ap) : -1;
                va_end(ap);
                if (k >= 0 && (size_t) k < room) {
                        t->n += (size_t) k;
                        return;
                }
                if (greedy_realloc((void **) &t->s, &t->allocated, t->n + (k > 0 ? (size_t) k : 0) + 256, 1) < 0) {
                        t->error = -ENOMEM;
                        return;
                }
        }
}

static int text_take(Text *t, char **ret) {
        if (t->error < 0) {
                free(t->s);
                return t->error;
        }
        *ret = t->s;
        return 0;
}

static bool in_udp_range(const FirewallPorts *p, uint16_t port) {
        return port >= p->udp && port < p->udp + p->n_udp;
}

static bool ports_are_valid(const FirewallPorts *p) {
        return p && p->dns > 0 && p->proxy > 0 && p->transparent > 0 && p->dns != p->proxy &&
               p->dns != p->transparent && p->proxy != p->transparent && p->udp > 0 && p->n_udp > 0 &&
               p->n_udp <= FIREWALL_UDP_PORTS_MAX && (unsigned) p->udp + p->n_udp - 1 <= 65535 &&
               !in_udp_range(p, p->dns) && !in_udp_range(p, p->proxy) && !in_udp_range(p, p->transparent);
}

static bool link_is_valid(const FirewallLink *l) {
        return l && veth_name_is_valid(l->link) && l->addr.s_addr != INADDR_ANY && l->gateway.s_addr != INADDR_ANY;
}

/* `"link" . addr . gateway`: the names are checked, so nothing is injected. */
static void text_element(Text *t, const FirewallLink *l) {
        char addr[INET_ADDRSTRLEN], gw[INET_ADDRSTRLEN];
        if (!inet_ntop(AF_INET, &l->addr, addr, sizeof addr) || !inet_ntop(AF_INET, &l->gateway, gw, sizeof gw)) {
                t->error = -EINVAL;
                return;
        }
        text_printf(t, "\"%s\" . %s . %s", l->link, addr, gw);
}

int firewall_format_setup(const char *table, const char *link_prefix, const FirewallPorts *p,
                          const FirewallLink *links, size_t n_links, char **ret) {
        Text t = {};

        if (!firewall_table_name_is_valid(table) || !veth_name_is_valid(link_prefix) || !ports_are_valid(p) ||
            (n_links > 0 && !links))
                return -EINVAL;
        for (size_t i = 0; i < n_links; i++)
                if (!link_is_valid(&links[i]) || !startswith(links[i].link, link_prefix))
                        return -EINVAL;

        /* add-then-delete: an absent table is fine; the rest rebuilds it in the same transaction */
        text_printf(&t,
                "add table inet %1$s\n"
                "delete table inet %1$s\n"
                "add table inet %1$s\n"
                "add set inet %1$s " FIREWALL_SET " { type ifname . ipv4_addr . ipv4_addr; }\n"
                "add chain inet %1$s prerouting { type nat hook prerouting priority dstnat - 10; policy accept; }\n"
                "add rule inet %1$s prerouting iifname \"%2$s*\" udp dport %3$u redirect to :%4$u\n"
                "add rule inet %1$s prerouting iifname \"%2$s*\" tcp dport %3$u redirect to :%4$u\n"
                "add rule inet %1$s prerouting iifname \"%2$s*\" fib daddr type local tcp dport { %4$u, %5$u, %6$u } return\n"
                "add rule inet %1$s prerouting iifname \"%2$s*\" fib daddr type local udp dport %4$u return\n"
                "add rule inet %1$s prerouting iifname \"%2$s*\" meta l4proto tcp redirect to :%6$u\n"
                "add rule inet %1$s prerouting iifname \"%2$s*\" meta l4proto udp redirect to :%7$u-%8$u\n"
                /* every datagram (nat sees only a flow's first) carries its original destination
                 * to the gateway: the address in the mark, the ports in the priority */
                "add chain inet %1$s udpmark { type filter hook prerouting priority mangle - 10; policy accept; }\n"
                "add rule inet %1$s udpmark iifname \"%2$s*\" meta l4proto udp meta mark set @nh,128,32 "
                "meta priority set @th,0,32\n"
                "add chain inet %1$s input { type filter hook input priority filter - 10; policy accept; }\n"
                "add rule inet %1$s input iifname \"%2$s*\" iifname . ip saddr . ip daddr @links tcp dport { %4$u, %5$u, %6$u } accept\n"
                "add rule inet %1$s input iifname \"%2$s*\" iifname . ip saddr . ip daddr @links udp dport { %4$u, %7$u-%8$u } accept\n"
                /* replies of the ingress's own connections to a sandbox (marked, see firewall.h) */
                "add rule inet %1$s input iifname \"%2$s*\" iifname . ip saddr . ip daddr @links ct direction reply "
                "ct state established ct mark %9$#x meta l4proto tcp accept\n"
                "add rule inet %1$s input iifname \"%2$s*\" counter drop\n"
                "add chain inet %1$s ingressmark { type filter hook output priority mangle - 10; policy accept; }\n"
                "add rule inet %1$s ingressmark oifname \"%2$s*\" meta mark %9$#x meta l4proto tcp ct state new "
                "ct mark set %9$#x\n"
                "add chain inet %1$s forward { type filter hook forward priority filter - 10; policy accept; }\n"
                "add rule inet %1$s forward iifname \"%2$s*\" counter drop\n"
                "add rule inet %1$s forward oifname \"%2$s*\" counter drop\n",
                table, link_prefix, FIREWALL_DNS_PORT, (unsigned) p->dns, (unsigned) p->proxy,
                (unsigned) p->transparent, (unsigned) p->udp, (unsigned) p->udp + p->n_udp - 1,
                (unsigned) FIREWALL_INGRESS_MARK);
        if (n_links > 0) {
                text_printf(&t, "add element inet %s links { ", table);
                for (size_t i = 0; i < n_links; i++) {
                        if (i > 0)
                                text_printf(&t, ", ");
                        text_element(&t, &links[i]);
                }
                text_printf(&t, " }\n");
        }
        return text_take(&t, ret);
}

int firewall_format_link(const char *table, const FirewallLink *l, bool add, char **ret) {
        Text t = {};

        if (!firewall_table_name_is_valid(table) || !link_is_valid(l))
                return -EINVAL;
        /* nft refuses to delete an absent element: add it first (adding is
         * idempotent), then delete, in one transaction */
        text_printf(&t, "add element inet %s links { ", table);
        text_element(&t, l);
        text_printf(&t, " }\n");
        if (!add) {
                text_printf(&t, "delete element inet %s links { ", table);
                text_element(&t, l);
                text_printf(&t, " }\n");
        }
        return text_take(&t, ret);
}

int firewall_new(Firewall **ret) {
        _cleanup_free_ Firewall *f = new0(Firewall, 1);
        if (!f)
                return -ENOMEM;
        f->ctx = nft_ctx_new(NFT_CTX_DEFAULT);
        if (!f->ctx)
                return -ENOMEM;
        /* output and errors into buffers, not our stdout/stderr */
        if (nft_ctx_buffer_output(f->ctx) < 0 || nft_ctx_buffer_error(f->ctx) < 0) {
                nft_ctx_free(f->ctx);
                return -ENOMEM;
        }
        *ret = TAKE_PTR(f);
        return 0;
}

Firewall *firewall_free(Firewall *f) {
        if (!f)
                return NULL;
        nft_ctx_free(f->ctx);
        free(f);
        return NULL;
}

const char *firewall_last_error(const Firewall *f) {
        return f->error;
}

int firewall_run(Firewall *f, const char *script) {
        int r;

        f->error[0] = '\0';
        r = nft_run_cmd_from_buffer(f->ctx, script);
        if (r != 0) {
                const char *e = nft_ctx_get_error_buffer(f->ctx);
                (void) strscpy(f->error, sizeof f->error, strempty(e));
                /* one line is enough for a log */
                char *nl = strchr(f->error, '\n');
                if (nl)
                        *nl = '\0';
                log_debug("nft refused a script: %s", f->error);
                return -EPROTO;
        }
        return 0;
}

static int format_and_run(Firewall *f, int r, char *script) {
        _cleanup_free_ char *s = script;
        if (r < 0)
                return r;
        return firewall_run(f, s);
}

int firewall_setup(Firewall *f, const char *table, const char *link_prefix, const FirewallPorts *ports,
                   const FirewallLink *links, size_t n_links) {
        char *s = NULL;
        int r = firewall_format_setup(table, link_prefix, ports, links, n_links, &s);
        return format_and_run(f, r, s);
}

/* One element of the links set, added (existing is fine) or deleted (absent
 * is fine), straight over NETLINK_NETFILTER in one batch: what nft would
 * send, without libnftables fetching the host's whole ruleset first. The key
 * is the concatenation, each field in 4-byte registers: the link name
 * (IFNAMSIZ, NUL-padded), the sandbox's address, the host end's. */
static int link_element(const char *table, const FirewallLink *l, bool add) {
        uint8_t key[IFNAMSIZ + 2 * sizeof(struct in_addr)] = {};
        _cleanup_close_ int fd = -EBADF;
        struct nfgenmsg g = { .nfgen_family = NFPROTO_INET, .version = NFNETLINK_V0 };
        NetlinkMessage m;
        int r;

        if (!firewall_table_name_is_valid(table) || !link_is_valid(l))
                return -EINVAL;
        memcpy(key, l->link, strlen(l->link));
        memcpy(key + IFNAMSIZ, &l->addr, sizeof l->addr);
        memcpy(key + IFNAMSIZ + sizeof l->addr, &l->gateway, sizeof l->gateway);

        r = netlink_open_protocol(NETLINK_NETFILTER, &fd);
        if (r < 0)
                return r;
        netlink_message_init(&m, (NFNL_SUBSYS_NFTABLES << 8) | (add ? NFT_MSG_NEWSETELEM : NFT_MSG_DELSETELEM),
                             add ? NLM_F_CREATE : 0);
        netlink_message_append(&m, &g, sizeof g);
        netlink_attr_string(&m, NFTA_SET_ELEM_LIST_TABLE, table);
        netlink_attr_string(&m, NFTA_SET_ELEM_LIST_SET, FIREWALL_SET);
        netlink_nest_begin(&m, NFTA_SET_ELEM_LIST_ELEMENTS);
        netlink_nest_begin(&m, NFTA_LIST_ELEM);
        netlink_nest_begin(&m, NFTA_SET_ELEM_KEY);
        netlink_attr(&m, NFTA_DATA_VALUE, key, sizeof key);
        netlink_nest_end(&m);
        netlink_nest_end(&m);
        netlink_nest_end(&m);
        r = netlink_call_batch(fd, &m, NFNL_SUBSYS_NFTABLES);
        if (!add && r == -ENOENT)
                return 0;
        return r;
}

int firewall_add_link(Firewall *f, const char *table, const FirewallLink *l) {
        int r = link_element(table, l, true);
        if (r < 0)
                (void) snprintf(f->error, sizeof f->error, "adding the element of %s: %s", l ? l->link : "?",
                                strerror(-r));
        return r;
}

int firewall_remove_link(Firewall *f, const char *table, const FirewallLink *l) {
        int r = link_element(table, l, false);
        if (r < 0)
                (void) snprintf(f->error, sizeof f->error, "removing the element of %s: %s", l ? l->link : "?",
                                strerror(-r));
        return r;
}

int firewall_teardown(Firewall *f, const char *table) {
        _cleanup_free_ char *s = NULL;
        if (!firewall_table_name_is_valid(table))
                return -EINVAL;
        s = strdup_printf("add table inet %1$s\ndelete table inet %1$s\n", table);
        if (!s)
                return -ENOMEM;
        return firewall_run(f, s);
}

int firewall_table_exists(Firewall *f, const char *table) {
        _cleanup_free_ char *s = NULL;
        if (!firewall_table_name_is_valid(table))
                return -EINVAL;
        s = strdup_printf("list table inet %s\n", table);
        if (!s)
                return -ENOMEM;
        return firewall_run(f, s) < 0 ? 0 : 1;
}
