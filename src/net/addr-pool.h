/* SPDX-License-Identifier: MIT */
#pragma once

/* IPv4 /31 point-to-point pairs carved out of one private CIDR, by slot
 * number: slot n is (base + 2n, base + 2n + 1), the host end first. */

#include <netinet/in.h>
#include <stdint.h>

#define ADDR_POOL_DEFAULT "10.200.0.0/16"
/* The smallest pool holds two /31s, the largest a /8. */
#define ADDR_POOL_PREFIXLEN_MIN 8U
#define ADDR_POOL_PREFIXLEN_MAX 30U
/* "255.255.255.255/32" plus NUL */
#define ADDR_POOL_CIDR_MAX 19U

typedef struct AddrPool {
        uint32_t base; /* host byte order, aligned to the prefix */
        unsigned prefixlen;
} AddrPool;

typedef struct AddrPair {
        struct in_addr host; /* the host-side end (the sandbox's gateway) */
        struct in_addr peer; /* the sandbox's own address */
        unsigned prefixlen;  /* always 31 */
} AddrPair;

/* Parses "a.b.c.d/len" (s, n bytes, no NUL needed): -EINVAL unless well formed,
 * inside 10/8, 172.16/12 or 192.168/16, prefixlen in [8, 30] and the base
 * aligned to it. */
int addr_pool_parse(const char *s, size_t n, AddrPool *ret);
/* Number of /31 slots in the pool. */
uint32_t addr_pool_slots(const AddrPool *p);
/* The pair of slot: -ERANGE if the slot is outside the pool. */
int addr_pool_slot(const AddrPool *p, uint32_t slot, AddrPair *ret);
/* The slot whose pair contains addr: -ENOENT if addr is outside the pool. */
int addr_pool_slot_of(const AddrPool *p, struct in_addr addr, uint32_t *ret);
