/* SPDX-License-Identifier: MIT */
/* Runs the gateway standalone for the integration tests: the control socket is
 * --control-fd (a socketpair end the test passes in; default 3), options set the ports, the
 * upstream resolver and the address pool. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway.h"
#include "log.h"
#include "str-util.h"

static int port_arg(const char *s, uint16_t *ret) {
        unsigned v;
        if (safe_atou(s, &v) < 0 || v == 0 || v > 65535)
                return -EINVAL;
        *ret = (uint16_t) v;
        return 0;
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "upstream", required_argument, NULL, 'u' },    { "pool", required_argument, NULL, 'p' },
                { "dns-port", required_argument, NULL, 'd' },    { "proxy-port", required_argument, NULL, 'x' },
                { "transparent-port", required_argument, NULL, 't' }, { "conns", required_argument, NULL, 'c' },
                { "events-per-sec", required_argument, NULL, 'e' }, { "dns-per-sec", required_argument, NULL, 'q' },
                { "handshake-timeout", required_argument, NULL, 'h' }, { "debug", no_argument, NULL, 'D' },
                { "control-fd", required_argument, NULL, 'f' }, { "udp-port", required_argument, NULL, 'U' },
                { "state-dir", required_argument, NULL, 'S' }, { "ca-file", required_argument, NULL, 'C' },
                {},
        };
        GatewayConfig c;
        int o, control_fd = 3;
        unsigned v;

        (void) gateway_config_default(&c);
        while ((o = getopt_long(argc, argv, "", opts, NULL)) >= 0) {
                switch (o) {
                case 'u':
                        if (gateway_parse_upstream(optarg, &c.upstream_dns) < 0)
                                return 2;
                        break;
                case 'p': {
                        char a[INET_ADDRSTRLEN];
                        const char *slash = strchr(optarg, '/');
                        struct in_addr in;
                        if (!slash || (size_t) (slash - optarg) >= sizeof a)
                                return 2;
                        memcpy(a, optarg, (size_t) (slash - optarg));
                        a[slash - optarg] = 0;
                        if (inet_pton(AF_INET, a, &in) != 1 || safe_atou(slash + 1, &c.pool_prefixlen) < 0)
                                return 2;
                        c.pool_base = ntohl(in.s_addr);
                        break;
                }
                case 'd':
                        if (port_arg(optarg, &c.dns_port) < 0)
                                return 2;
                        break;
                case 'x':
                        if (port_arg(optarg, &c.proxy_port) < 0)
                                return 2;
                        break;
                case 't':
                        if (port_arg(optarg, &c.transparent_port) < 0)
                                return 2;
                        break;
                case 'U':
                        if (port_arg(optarg, &c.udp_port) < 0)
                                return 2;
                        break;
                case 'c':
                case 'e':
                case 'q':
                case 'h':
                        if (safe_atou(optarg, &v) < 0)
                                return 2;
                        if (o == 'c')
                                c.conns_per_sandbox = v;
                        else if (o == 'e')
                                c.events_per_sec = v;
                        else if (o == 'q')
                                c.dns_per_sec = v;
                        else
                                c.handshake_timeout_sec = v;
                        break;
                case 'f':
                        if (safe_atoi(optarg, &control_fd) < 0 || control_fd < 0)
                                return 2;
                        break;
                case 'S':
                        c.state_dir = optarg;
                        break;
                case 'C':
                        c.upstream_ca_file = optarg;
                        break;
                case 'D':
                        log_set_max_level(LOG_DEBUG_);
                        break;
                default:
                        return 2;
                }
        }
        int r = gateway_main(&c, control_fd);
        if (r < 0) {
                fprintf(stderr, "gateway: %s\n", strerror(-r));
                return 1;
        }
        return 0;
}
