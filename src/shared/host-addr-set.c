/* SPDX-License-Identifier: MIT */
/* An open-addressing hash set with linear probing: the hash covers only
 * (family, address), so every entry of an address, whatever its link, is in
 * the same probe run, and a lookup by address stops at the first empty slot.
 * Removal shifts the run back (no tombstones), the table doubles at half
 * load and is never shrunk below what it held (24 bytes a slot). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "host-addr-set.h"
#include "str-util.h"

#define HOST_ADDR_SET_SLOTS_MIN 64U

typedef struct HostAddrEntry {
        uint8_t addr[16];
        int32_t ifindex;
        uint8_t family; /* 0: the slot is empty */
} HostAddrEntry;

struct HostAddrSet {
        HostAddrEntry *slots;
        size_t n_slots; /* a power of two, or 0 before the first addition */
        size_t n;
        uint64_t seed;
        bool complete, failed;
        HostAddrSetAllocFn alloc;
};

int host_addr_set_new(HostAddrSet **ret) {
        HostAddrSet *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->alloc = calloc;
        if (random_bytes(&s->seed, sizeof s->seed) < 0)
                s->seed = (uint64_t) (uintptr_t) s ^ 0x9E3779B97F4A7C15ULL;
        *ret = s;
        return 0;
}

HostAddrSet *host_addr_set_free(HostAddrSet *s) {
        if (!s)
                return NULL;
        free(s->slots);
        free(s);
        return NULL;
}

void host_addr_set_set_allocator(HostAddrSet *s, HostAddrSetAllocFn fn) {
        s->alloc = fn ?: calloc;
}

static size_t addr_len(int family) {
        return family == AF_INET ? 4 : family == AF_INET6 ? 16 : 0;
}

static uint64_t mix(uint64_t h) {
        h ^= h >> 33;
        h *= 0xFF51AFD7ED558CCDULL;
        h ^= h >> 33;
        h *= 0xC4CEB9FE1A85EC53ULL;
        h ^= h >> 33;
        return h;
}

static size_t home(const HostAddrSet *s, uint8_t family, const uint8_t addr[static 16]) {
        uint64_t a, b;
        memcpy(&a, addr, 8);
        memcpy(&b, addr + 8, 8);
        return (size_t) mix(mix(s->seed ^ family ^ a) ^ b) & (s->n_slots - 1);
}

static void entry_make(HostAddrEntry *e, int ifindex, int family, const void *addr) {
        memset(e, 0, sizeof *e);
        memcpy(e->addr, addr, addr_len(family));
        e->ifindex = ifindex;
        e->family = (uint8_t) family;
}

static bool same_addr(const HostAddrEntry *a, const HostAddrEntry *b) {
        return a->family == b->family && memcmp(a->addr, b->addr, 16) == 0;
}

/* The slot of e (same address and link), or of the empty slot ending its run. */
static size_t probe(const HostAddrSet *s, const HostAddrEntry *e, bool *ret_found) {
        size_t mask = s->n_slots - 1, i = home(s, e->family, e->addr);
        for (;; i = (i + 1) & mask) {
                const HostAddrEntry *x = &s->slots[i];
                if (x->family == 0) {
                        *ret_found = false;
                        return i;
                }
                if (x->ifindex == e->ifindex && same_addr(x, e)) {
                        *ret_found = true;
                        return i;
                }
        }
}

static int grow(HostAddrSet *s) {
        size_t n = s->n_slots ? s->n_slots * 2 : HOST_ADDR_SET_SLOTS_MIN;
        HostAddrEntry *old = s->slots;
        size_t n_old = s->n_slots;

        if (n < s->n_slots || n > SIZE_MAX / sizeof *old)
                return -ENOMEM;
        HostAddrEntry *t = s->alloc(n, sizeof *t);
        if (!t)
                return -ENOMEM;
        s->slots = t;
        s->n_slots = n;
        for (size_t i = 0; i < n_old; i++) {
                bool found;
                if (old[i].family != 0)
                        s->slots[probe(s, &old[i], &found)] = old[i];
        }
        free(old);
        return 0;
}

int host_addr_set_add(HostAddrSet *s, int ifindex, int family, const void *addr) {
        HostAddrEntry e;
        bool found;
        size_t i;

        if (addr_len(family) == 0)
                return -EAFNOSUPPORT;
        entry_make(&e, ifindex, family, addr);
        if (s->n_slots > 0) {
                i = probe(s, &e, &found);
                if (found)
                        return 0;
        }
        if ((s->n + 1) * 2 > s->n_slots && grow(s) < 0) {
                /* the set no longer holds every address: unknown until filled again */
                s->failed = true;
                s->complete = false;
                return -ENOMEM;
        }
        i = probe(s, &e, &found);
        s->slots[i] = e;
        s->n++;
        return 1;
}

int host_addr_set_remove(HostAddrSet *s, int ifindex, int family, const void *addr) {
        HostAddrEntry e;
        bool found;
        size_t i, j, mask;

        if (addr_len(family) == 0 || s->n_slots == 0)
                return 0;
        entry_make(&e, ifindex, family, addr);
        i = probe(s, &e, &found);
        if (!found)
                return 0;
        /* shift the rest of the run back over the hole (Knuth's algorithm R) */
        mask = s->n_slots - 1;
        for (j = (i + 1) & mask; s->slots[j].family != 0; j = (j + 1) & mask) {
                size_t k = home(s, s->slots[j].family, s->slots[j].addr);
                /* the entry at j may fill the hole at i if its home is not in (i, j] (cyclically) */
                bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
                if (stays)
                        continue;
                s->slots[i] = s->slots[j];
                i = j;
        }
        memset(&s->slots[i], 0, sizeof s->slots[i]);
        s->n--;
        return 1;
}

bool host_addr_set_contains(const HostAddrSet *s, int family, const void *addr) {
        HostAddrEntry e;
        size_t mask, i;

        if (!s || addr_len(family) == 0 || s->n_slots == 0)
                return false;
        entry_make(&e, 0, family, addr);
        mask = s->n_slots - 1;
        for (i = home(s, e.family, e.addr); s->slots[i].family != 0; i = (i + 1) & mask)
                if (same_addr(&s->slots[i], &e))
                        return true;
        return false;
}

void host_addr_set_clear(HostAddrSet *s) {
        if (s->slots)
                memset(s->slots, 0, s->n_slots * sizeof *s->slots);
        s->n = 0;
        s->complete = s->failed = false;
}

void host_addr_set_swap(HostAddrSet *a, HostAddrSet *b) {
        HostAddrSet t = *a;
        HostAddrSetAllocFn fa = a->alloc, fb = b->alloc;
        *a = *b;
        *b = t;
        a->alloc = fa; /* each keeps its allocator */
        b->alloc = fb;
}

bool host_addr_set_equal(const HostAddrSet *a, const HostAddrSet *b) {
        if (a->n != b->n)
                return false;
        for (size_t i = 0; i < a->n_slots; i++) {
                bool found;
                if (a->slots[i].family == 0)
                        continue;
                if (b->n_slots == 0)
                        return false;
                (void) probe(b, &a->slots[i], &found);
                if (!found)
                        return false;
        }
        return true;
}

void host_addr_set_mark_complete(HostAddrSet *s, bool complete) {
        s->complete = complete && !s->failed;
}

bool host_addr_set_is_complete(const HostAddrSet *s) {
        return s && s->complete;
}

size_t host_addr_set_size(const HostAddrSet *s) {
        return s ? s->n : 0;
}

size_t host_addr_set_memory(const HostAddrSet *s) {
        return s ? sizeof *s + s->n_slots * sizeof *s->slots : 0;
}
