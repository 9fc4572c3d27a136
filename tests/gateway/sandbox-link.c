/* SPDX-License-Identifier: MIT */
/* Makes one sandbox link and its host firewall the way the ns runtime does
 * (src/worker/worker-net.c: veth_create, veth_configure_host,
 * veth_configure_peer_here, firewall_setup, firewall_add_link), in the
 * network namespace it runs in, for benchmarks that must measure the
 * production path rather than a copy of its rules (bench/gateway.py):
 *
 *   sandbox-link TABLE LINK SANDBOX_NETNS HOST_ADDR SANDBOX_ADDR DNS PROXY TRANSPARENT UDP
 *
 * LINK's prefix (up to and including its last '-') is the table's link
 * prefix; SANDBOX_NETNS a path such as /run/netns/NAME; the four ports the
 * gateway's (UDP: the first of GATEWAY_UDP_PORTS). The link and the table
 * stay; removing the namespaces and the table is the caller's. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "addr-pool.h"
#include "fd-util.h"
#include "firewall.h"
#include "gateway.h"
#include "str-util.h"
#include "veth.h"

#define PREFIX_MAX 16U

static int port_arg(const char *s, uint16_t *ret) {
        unsigned v;
        if (safe_atou(s, &v) < 0 || v == 0 || v > 65535)
                return -EINVAL;
        *ret = (uint16_t) v;
        return 0;
}

int main(int argc, char **argv) {
        _cleanup_(firewall_freep) Firewall *f = NULL;
        _cleanup_close_ int nsfd = -EBADF, self = -EBADF;
        FirewallPorts ports = { .n_udp = GATEWAY_UDP_PORTS };
        AddrPair pair = { .prefixlen = 31 };
        char prefix[PREFIX_MAX];
        int r;

        if (argc != 10 || inet_pton(AF_INET, argv[4], &pair.host) != 1 ||
            inet_pton(AF_INET, argv[5], &pair.peer) != 1 || port_arg(argv[6], &ports.dns) < 0 ||
            port_arg(argv[7], &ports.proxy) < 0 || port_arg(argv[8], &ports.transparent) < 0 ||
            port_arg(argv[9], &ports.udp) < 0) {
                fprintf(stderr, "usage: sandbox-link TABLE LINK SANDBOX_NETNS HOST_ADDR SANDBOX_ADDR DNS PROXY "
                                "TRANSPARENT UDP\n");
                return 2;
        }
        const char *table = argv[1], *link = argv[2], *dash = strrchr(link, '-');
        if (!dash || (size_t) (dash - link) + 2 > sizeof prefix) {
                fprintf(stderr, "sandbox-link: %s has no prefix ending in '-'\n", link);
                return 2;
        }
        memcpy(prefix, link, (size_t) (dash - link) + 1);
        prefix[dash - link + 1] = '\0';

        nsfd = open(argv[3], O_RDONLY | O_CLOEXEC);
        self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (nsfd < 0 || self < 0) {
                fprintf(stderr, "sandbox-link: %s: %s\n", nsfd < 0 ? argv[3] : "/proc/self/ns/net", strerror(errno));
                return 1;
        }
        r = veth_create(link, VETH_PEER_DEFAULT, nsfd);
        if (r >= 0)
                r = veth_configure_host(link, &pair);
        if (r >= 0)
                r = veth_configure_peer_here(nsfd, self, VETH_PEER_DEFAULT, &pair);
        if (r < 0) {
                (void) veth_delete(link);
                fprintf(stderr, "sandbox-link: the link %s: %s\n", link, strerror(-r));
                return 1;
        }
        FirewallLink fl = { .link = link, .addr = pair.peer, .gateway = pair.host };
        r = firewall_new(&f);
        if (r >= 0)
                r = firewall_setup(f, table, prefix, &ports, NULL, 0);
        if (r >= 0)
                r = firewall_add_link(f, table, &fl);
        if (r < 0) {
                (void) veth_delete(link);
                fprintf(stderr, "sandbox-link: the firewall: %s %s\n", strerror(-r), f ? firewall_last_error(f) : "");
                return 1;
        }
        return 0;
}
