/* SPDX-License-Identifier: MIT */
#pragma once

/* The host firewall of sandbox links: one nftables table (`inet space`),
 * changed only in whole `nft -f -` transactions.
 *
 *   input:   iifname vmap @sandboxes      one jump per sandbox link
 *            iifname "<prefix>*" drop     a link without rules yet says nothing
 *   forward: iifname/oifname "<prefix>*" drop   no forwarding from or to sandbox links
 *   chain sb-<link>: ip saddr <own> ip daddr <gateway> tcp/udp dport {ports} accept; drop
 *
 * The scripts are built as text (firewall_format_*) and applied by exec'ing nft. */

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#define FIREWALL_TABLE_DEFAULT "space"
#define FIREWALL_PORTS_MAX 32U
/* Table names follow the link-name rule of veth_name_is_valid() but may be longer. */
#define FIREWALL_TABLE_NAME_MAX 32U

typedef struct FirewallSandbox {
        const char *link;         /* the host-side veth end */
        struct in_addr addr;      /* the sandbox's own address: the only source allowed */
        struct in_addr gateway;   /* the only destination allowed */
        const uint16_t *tcp_ports;
        size_t n_tcp_ports;
        const uint16_t *udp_ports;
        size_t n_udp_ports;
} FirewallSandbox;

/* Text of the idempotent table setup; link_prefix is the name prefix of all
 * sandbox links (VETH_HOST_PREFIX in production). */
int firewall_format_setup(const char *table, const char *link_prefix, char **ret);
int firewall_format_add(const char *table, const FirewallSandbox *s, char **ret);
int firewall_format_remove(const char *table, const char *link, char **ret);

/* Runs `nft -f -` with script on stdin: -ENOENT without nft, -EPROTO if nft
 * refused the script (nft's stderr goes to ours). */
int firewall_apply(const char *script);

int firewall_setup(const char *table, const char *link_prefix);
/* Replaces the rules of s->link (idempotent). */
int firewall_add_sandbox(const char *table, const FirewallSandbox *s);
/* Removes the rules of link; removing absent rules is not an error. */
int firewall_remove_sandbox(const char *table, const char *link);
/* Deletes the whole table; an absent table is not an error. */
int firewall_teardown(const char *table);
