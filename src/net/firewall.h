/* SPDX-License-Identifier: MIT */
#pragma once

/* The host firewall of one daemon's sandbox links: one nftables table per
 * daemon (`inet <table>`), changed in whole transactions through libnftables
 * in-process (no `nft` spawned per sandbox). Every sandbox link is one element
 * of one set, so adding a sandbox is one element, not a chain.
 *
 *   set links: ifname . ipv4_addr . ipv4_addr     link . sandbox address . host end
 *   prerouting (nat, dstnat - 10), links of <prefix>* only:
 *            udp/tcp dport 53                    redirect to :dns
 *            to a local address, a gateway port  left alone (input decides)
 *            any other tcp                       redirect to :transparent
 *            any other udp                       redirect to :udp-(udp + n_udp - 1)
 *   udpmark (filter, mangle - 10), every udp datagram of those links:
 *            mark = its destination address, priority = its two ports
 *   input:   iifname . ip saddr . ip daddr @links tcp dport {dns, proxy, transparent} accept
 *            iifname . ip saddr . ip daddr @links udp dport {dns, udp-…} accept
 *            iifname . ip saddr . ip daddr @links, tcp, ct mark INGRESS, established reply  accept
 *            iifname "<prefix>*" drop            spoofed sources, other ports, IPv6, all else
 *   ingressmark (output): tcp to a link with socket mark INGRESS, new   ct mark set INGRESS
 *   forward: iifname/oifname "<prefix>*" drop    nothing forwarded from or to sandbox links
 *
 * So a sandbox reaches its own host end on the gateway's ports only, from its
 * own address only, and the host reaches a sandbox only over connections
 * the ingress opens (SO_MARK FIREWALL_INGRESS_MARK needs CAP_NET_ADMIN: any
 * other host process's SYN reaches the sandbox, but its answer is dropped); redirected TCP arrives at the transparent port with the
 * original destination in conntrack (SO_ORIGINAL_DST), redirected UDP at a
 * UDP port with it in the packet's mark and priority (SO_RCVMARK,
 * SO_RCVPRIORITY; see src/gateway/gateway-udp.c). */

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macros.h"

#define FIREWALL_TABLE_DEFAULT "space"
#define FIREWALL_SET "links"
/* Table names follow the link-name rule of veth_name_is_valid() but may be longer. */
#define FIREWALL_TABLE_NAME_MAX 32U
#define FIREWALL_DNS_PORT 53U
/* The socket mark of the ingress's connections to sandboxes ("spac"), kept in
 * conntrack so that their replies pass the input chain. */
#define FIREWALL_INGRESS_MARK 0x73706163U
/* Room for the error text nft gives back. */
#define FIREWALL_ERROR_MAX 512U

typedef struct FirewallPorts {
        uint16_t dns;         /* the gateway's DNS listener (UDP and TCP) */
        uint16_t proxy;       /* the explicit HTTP proxy */
        uint16_t transparent; /* where every other TCP connection is redirected */
        uint16_t udp;         /* first of n_udp ports every other datagram is redirected to */
        uint16_t n_udp;       /* 1..FIREWALL_UDP_PORTS_MAX */
} FirewallPorts;

#define FIREWALL_UDP_PORTS_MAX 64U

typedef struct FirewallLink {
        const char *link;       /* the host-side veth end */
        struct in_addr addr;    /* the sandbox's own address: the only source allowed */
        struct in_addr gateway; /* the host end's address: the only destination allowed */
} FirewallLink;

bool firewall_table_name_is_valid(const char *t);

/* The whole table, replaced atomically: every chain and exactly links[0..n)
 * in the set. link_prefix is the name prefix of this daemon's links. */
int firewall_format_setup(const char *table, const char *link_prefix, const FirewallPorts *ports,
                          const FirewallLink *links, size_t n_links, char **ret);
/* Adds (idempotent) or removes (absent is fine) one link's element. */
int firewall_format_link(const char *table, const FirewallLink *l, bool add, char **ret);

typedef struct Firewall Firewall;

/* A libnftables context; -ENOMEM. */
int firewall_new(Firewall **ret);
Firewall *firewall_free(Firewall *f);
DEFINE_TRIVIAL_CLEANUP_FUNC(Firewall *, firewall_free);

/* Runs one nft script (libnftables) as one transaction: -EPROTO if nft refused it (its
 * error text is logged and kept for firewall_last_error()). */
int firewall_run(Firewall *f, const char *script);
const char *firewall_last_error(const Firewall *f);

int firewall_setup(Firewall *f, const char *table, const char *link_prefix, const FirewallPorts *ports,
                   const FirewallLink *links, size_t n_links);
/* One element, straight over nfnetlink (no ruleset fetch): -ENOENT if the
 * table or set is missing; errno-style errors, text in firewall_last_error(). */
int firewall_add_link(Firewall *f, const char *table, const FirewallLink *l);
int firewall_remove_link(Firewall *f, const char *table, const FirewallLink *l);
/* Deletes the whole table; an absent table is not an error. */
int firewall_teardown(Firewall *f, const char *table);
/* 1 if the table exists, 0 if not. */
int firewall_table_exists(Firewall *f, const char *table);
