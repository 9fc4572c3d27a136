/* SPDX-License-Identifier: MIT */
#pragma once

/* The host's own addresses, as the gateway's guard consults them: a hash set
 * of (interface, family, address) entries with no fixed cap (it grows as
 * needed), O(1) lookup of an address on any interface, and a "complete"
 * flag. The set is complete only when its keeper (gateway-host-addrs.c) has
 * marked it so after a full dump and no addition has failed since: a failed
 * allocation leaves the set incomplete, and an incomplete set means "the
 * host's addresses are unknown", which the guard answers with a refusal.
 *
 * An address is kept per interface, so that the same address on two links
 * stays in the set until both are gone (RTM_DELADDR names the link). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macros.h"

typedef struct HostAddrSet HostAddrSet;

/* The allocator the set grows with (calloc semantics); tests put one in
 * that fails. */
typedef void *(*HostAddrSetAllocFn)(size_t n, size_t size);

int host_addr_set_new(HostAddrSet **ret);
HostAddrSet *host_addr_set_free(HostAddrSet *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(HostAddrSet *, host_addr_set_free);

/* ifindex: the link the address is on (any value; 0 for none). family
 * AF_INET (4 bytes at addr) or AF_INET6 (16). Returns 1 if added, 0 if it
 * was there, -EAFNOSUPPORT, or -ENOMEM, after which the set is incomplete
 * until marked complete again. */
int host_addr_set_add(HostAddrSet *s, int ifindex, int family, const void *addr);
/* 1 if removed, 0 if it was not there. */
int host_addr_set_remove(HostAddrSet *s, int ifindex, int family, const void *addr);
/* Whether addr is on some link. */
bool host_addr_set_contains(const HostAddrSet *s, int family, const void *addr);
/* Empties the set (and leaves it incomplete). */
void host_addr_set_clear(HostAddrSet *s);
/* Exchanges the contents (entries and completeness) of a and b. */
void host_addr_set_swap(HostAddrSet *a, HostAddrSet *b);
/* Whether a and b hold the same entries. */
bool host_addr_set_equal(const HostAddrSet *a, const HostAddrSet *b);

/* complete is kept only if no addition has failed since the last clear. */
void host_addr_set_mark_complete(HostAddrSet *s, bool complete);
bool host_addr_set_is_complete(const HostAddrSet *s);

size_t host_addr_set_size(const HostAddrSet *s);
/* Bytes the set holds (the table and the header). */
size_t host_addr_set_memory(const HostAddrSet *s);

void host_addr_set_set_allocator(HostAddrSet *s, HostAddrSetAllocFn fn);
