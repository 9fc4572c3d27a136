/* SPDX-License-Identifier: MIT */
#pragma once

/* The egress gateway: one single-threaded epoll process per worker, serving
 * every sandbox of the host. Per registered sandbox it listens on the
 * sandbox's host-end address only: DNS (UDP and TCP), the explicit HTTP proxy
 * and the transparent port that the firewall redirects every other TCP
 * connection of the sandbox to, and GATEWAY_UDP_PORTS UDP ports from
 * udp_port that the firewall redirects every other datagram to (with its
 * original destination in the packet mark and priority; see gateway-udp.c). A
 * connection's sandbox is the listener it arrived on, and its source address
 * must be the sandbox's own.
 *
 * Control: JSON lines over control_fd (a socketpair with the worker; see
 * gateway-client.h for the requests). The gateway writes replies
 * {"seq":N,"ok":true} / {"seq":N,"ok":false,"error":"..."} and decision
 * events {"event":"network.allow"|"network.deny"|"network.dropped",
 * "sandbox":ID,"tenant":T,"reason":"...","data":{...}}, rate-limited per
 * sandbox. Before it handles any other event it carries out the control
 * lines there are, so a request written before something a sandbox does is
 * in effect when the gateway decides about it (a registration "replace"d
 * for a warm sandbox's new owner is never awaited; its failure is an event
 * {"event":"network.error",...} and leaves the sandbox unregistered). It
 * exits when control_fd is closed.
 *
 * Credentials (gateway-cred.c, gateway-intercept.c): a sandbox's granted
 * credentials arrive sealed with its CA ("credentials" op); the gateway opens
 * them with the master key it read at start, terminates TLS with the
 * sandbox's CA only for hosts one of them is for, verifies the real upstream
 * and puts the value on each request. Every use is an event
 * {"event":"credential.used","data":{"credential":NAME,"host":HOST}}. The
 * process is not dumpable. */

#include <netinet/in.h>
#include <stdint.h>
#include <sys/types.h>

#define GATEWAY_DNS_PORT_DEFAULT 10053
#define GATEWAY_PROXY_PORT_DEFAULT 10080
#define GATEWAY_TRANSPARENT_PORT_DEFAULT 10081
#define GATEWAY_UDP_PORT_DEFAULT 10082
#define GATEWAY_UDP_PORTS 8U /* udp_port .. udp_port + 7: the firewall's redirect range */
#define GATEWAY_RUN_AS_DEFAULT 65534 /* nobody */

typedef struct GatewayConfig {
        uint16_t dns_port, proxy_port, transparent_port;
        uint16_t udp_port;                /* first of GATEWAY_UDP_PORTS; 0: no UDP relay */
        struct sockaddr_in upstream_dns;  /* the resolver the gateway asks */
        uint32_t pool_base;               /* host order: the sandbox address pool (refused) */
        unsigned pool_prefixlen;          /* 0: none */
        unsigned conns_per_sandbox;       /* concurrent TCP connections (proxy+transparent+DNS) */
        unsigned dns_per_sec;             /* DNS queries per second per sandbox (burst 2x) */
        unsigned events_per_sec;          /* decision events per second per sandbox (burst 10x) */
        unsigned handshake_timeout_sec;   /* request head / ClientHello / upstream connect */
        unsigned idle_timeout_sec;        /* a relayed connection without traffic */
        uid_t run_as_uid;                 /* started as root: drops to this uid/gid (0: stays root; */
        gid_t run_as_gid;                 /* ports below 1024 keep root too) */
        const char *state_dir;            /* where master.key is (read once, before dropping root); */
                                          /* NULL: no credentials are applied */
        const char *master_key_file;      /* the master key's file, if not <state_dir>/master.key */
        const char *master_key_previous_file; /* a rotation's window: the key before it (opens only), or NULL */
        const char *upstream_ca_file;     /* intercepted upstreams are verified against it; */
                                          /* NULL: the host's trust store */
} GatewayConfig;

/* Defaults; the upstream resolver is the first IPv4 nameserver of
 * /etc/resolv.conf (127.0.0.1:53 if none). */
int gateway_config_default(GatewayConfig *ret);
/* Parses "a.b.c.d:port" (port optional: 53). */
int gateway_parse_upstream(const char *s, struct sockaddr_in *ret);

/* Runs the gateway until control_fd reaches EOF. Returns 0 then, or -errno. */
int gateway_main(const GatewayConfig *config, int control_fd);
