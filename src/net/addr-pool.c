/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "addr-pool.h"
#include "macros.h"

typedef struct PrivateRange {
        uint32_t base;
        unsigned prefixlen;
} PrivateRange;

/* RFC 1918 */
static const PrivateRange private_ranges[] = {
        { 0x0A000000U, 8 },  /* 10.0.0.0/8 */
        { 0xAC100000U, 12 }, /* 172.16.0.0/12 */
        { 0xC0A80000U, 16 }, /* 192.168.0.0/16 */
};

static uint32_t prefix_mask(unsigned prefixlen) {
        return prefixlen == 0 ? 0 : ~0U << (32 - prefixlen);
}

int addr_pool_parse(const char *s, size_t n, AddrPool *ret) {
        char buf[ADDR_POOL_CIDR_MAX + 1];
        struct in_addr a;
        uint32_t len = 0;

        if (!s || n == 0 || n > ADDR_POOL_CIDR_MAX)
                return -EINVAL;
        const char *slash = memchr(s, '/', n);
        if (!slash)
                return -EINVAL;
        size_t alen = (size_t) (slash - s), plen = n - alen - 1;
        if (alen == 0 || plen == 0 || plen > 2)
                return -EINVAL;
        for (size_t i = 0; i < plen; i++) {
                if (slash[1 + i] < '0' || slash[1 + i] > '9')
                        return -EINVAL;
                len = len * 10 + (uint32_t) (slash[1 + i] - '0');
        }
        if (plen == 2 && slash[1] == '0')
                return -EINVAL;
        memcpy(buf, s, alen);
        buf[alen] = '\0';
        if (inet_pton(AF_INET, buf, &a) != 1)
                return -EINVAL;
        if (len < ADDR_POOL_PREFIXLEN_MIN || len > ADDR_POOL_PREFIXLEN_MAX)
                return -EINVAL;
        uint32_t base = ntohl(a.s_addr);
        if ((base & ~prefix_mask(len)) != 0)
                return -EINVAL;

        bool private = false;
        for (size_t i = 0; i < ELEMENTSOF(private_ranges); i++)
                if (len >= private_ranges[i].prefixlen &&
                    (base & prefix_mask(private_ranges[i].prefixlen)) == private_ranges[i].base)
                        private = true;
        if (!private)
                return -EINVAL;

        *ret = (AddrPool) { .base = base, .prefixlen = len };
        return 0;
}

uint32_t addr_pool_slots(const AddrPool *p) {
        return 1U << (31 - p->prefixlen);
}

int addr_pool_slot(const AddrPool *p, uint32_t slot, AddrPair *ret) {
        if (slot >= addr_pool_slots(p))
                return -ERANGE;
        uint32_t host = p->base + 2 * slot;
        *ret = (AddrPair) {
                .host.s_addr = htonl(host),
                .peer.s_addr = htonl(host + 1),
                .prefixlen = 31,
        };
        return 0;
}

int addr_pool_slot_of(const AddrPool *p, struct in_addr addr, uint32_t *ret) {
        uint32_t a = ntohl(addr.s_addr);
        if ((a & prefix_mask(p->prefixlen)) != p->base)
                return -ENOENT;
        *ret = (a - p->base) / 2;
        return 0;
}
