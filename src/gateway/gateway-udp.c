/* SPDX-License-Identifier: MIT */
/* UDP on the gateway: every datagram of a sandbox other than DNS arrives here
 * and is relayed only when a rule names UDP and its port.
 *
 * The firewall (src/net/firewall.c) redirects such a datagram to one of the
 * GATEWAY_UDP_PORTS ports from udp_port on the sandbox's host end, and before
 * that copies its original destination address into the packet mark and its
 * source and destination ports into the packet priority. This process reads
 * both with SO_RCVMARK and SO_RCVPRIORITY (Linux >= 6.14): no privilege, no
 * conntrack lookup. Replies go back through the same listener to the
 * sandbox's address and port, and conntrack turns their source back into the
 * original destination. (Several ports: a sandbox socket that talks to
 * several destinations needs one distinct reply tuple per destination, and
 * the redirect picks a free port of the range for each.)
 *
 * A datagram counts only if it came in on the sandbox's own link, from the
 * sandbox's own address, and its mark and priority agree with it (the source
 * port in the priority is the datagram's): nothing from another interface or
 * from a forged address is relayed. The decision, once per flow (sandbox
 * port, destination): UDP 443 (QUIC) never; the always-refused addresses
 * never; then a host rule for UDP and the port whose name this gateway
 * resolved to that address for this sandbox, or a CIDR rule for UDP and the
 * port. Every decision is an event (kind "udp"). A flow is a connected socket
 * of its own upstream, closed after GW_UDP_IDLE_SEC without a datagram and on
 * every policy change (the next datagram is decided again). */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "gateway-internal.h"
#include "log.h"
#include "str-util.h"

#ifndef SO_RCVMARK
#define SO_RCVMARK 75
#endif
#ifndef SO_RCVPRIORITY
#define SO_RCVPRIORITY 82
#endif

#define GW_UDP_NAMES_PER_ADDR_MAX 16U

struct GwUdpFlow {
        GwIo io; /* the connected upstream socket */
        GwUdpFlow *prev, *next;
        GwSandbox *sb;
        unsigned listener; /* the sandbox listener its datagrams last came in on: replies leave there */
        uint16_t sport;    /* the sandbox's port */
        struct sockaddr_in dst;
        uint64_t last_usec;
};

static void flow_free(Gateway *gw, GwUdpFlow *f) {
        GwSandbox *sb = f->sb;
        if (f->prev)
                f->prev->next = f->next;
        else if (sb->udp_flows == f)
                sb->udp_flows = f->next;
        if (f->next)
                f->next->prev = f->prev;
        gw_io_close(gw, &f->io);
        sb->n_udp_flows--;
        gw->n_udp_flows--;
        free(f);
}

void gw_udp_drop_flows(Gateway *gw, GwSandbox *sb) {
        while (sb->udp_flows)
                flow_free(gw, sb->udp_flows);
}

void gw_udp_close(Gateway *gw, GwSandbox *sb) {
        gw_udp_drop_flows(gw, sb);
        for (unsigned i = 0; i < GATEWAY_UDP_PORTS; i++)
                gw_io_close(gw, &sb->udp[i].io);
}

void gw_udp_tick(Gateway *gw, uint64_t now) {
        for (size_t i = 0; i < gw->n_sandboxes; i++) {
                GwSandbox *sb = gw->sandboxes[i];
                for (GwUdpFlow *f = sb->udp_flows, *next; f; f = next) {
                        next = f->next;
                        if (now > f->last_usec + GW_UDP_IDLE_SEC * 1000000ULL)
                                flow_free(gw, f);
                }
        }
}

/* Upstream → sandbox: out through the listener the sandbox last used. */
static void flow_event(Gateway *gw, GwIo *io, uint32_t events) {
        GwUdpFlow *f = (GwUdpFlow *) ((char *) io - offsetof(GwUdpFlow, io));
        GwSandbox *sb = f->sb;
        struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr = sb->ip, .sin_port = htons(f->sport) };

        if (!(events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
                return;
        for (unsigned k = 0; k < GW_UDP_BATCH; k++) {
                ssize_t n = recv(f->io.fd, gw->udp_buf, GW_UDP_DATAGRAM_MAX, MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                return;
                        continue; /* ECONNREFUSED and the like: an ICMP error for an earlier datagram */
                }
                f->last_usec = gw_now_usec();
                if (sb->udp[f->listener].io.fd >= 0)
                        (void) sendto(sb->udp[f->listener].io.fd, gw->udp_buf, (size_t) n, MSG_DONTWAIT,
                                      (struct sockaddr *) &to, sizeof to);
        }
}

static GwUdpFlow *flow_find(GwSandbox *sb, uint16_t sport, const struct sockaddr_in *dst) {
        for (GwUdpFlow *f = sb->udp_flows; f; f = f->next)
                if (f->sport == sport && f->dst.sin_addr.s_addr == dst->sin_addr.s_addr && f->dst.sin_port == dst->sin_port)
                        return f;
        return NULL;
}

/* The decision for a new flow: true (and the name it was allowed for, if any) or false (an event said why). */
static bool decide(Gateway *gw, GwSandbox *sb, const struct sockaddr_in *dst) {
        const char *names[GW_UDP_NAMES_PER_ADDR_MAX];
        uint16_t port = ntohs(dst->sin_port);
        EgressPolicyMatch m;
        const char *why;
        size_t n;

        if (port == EGRESS_POLICY_QUIC_PORT) {
                gw_event(gw, sb, false, "udp", NULL, &dst->sin_addr, port,
                         "QUIC (UDP 443) is not relayed; HTTP/3 clients fall back to TCP 443");
                return false;
        }
        why = gw_addr_forbidden(gw, AF_INET, &dst->sin_addr);
        if (why) {
                gw_event(gw, sb, false, "udp", NULL, &dst->sin_addr, port, why);
                return false;
        }
        /* a host rule counts for the addresses this gateway resolved its name to for this sandbox */
        n = gw_memory_names(sb, dst->sin_addr, names, ELEMENTSOF(names));
        for (size_t i = 0; i < n; i++)
                if (egress_policy_match_host_proto(sb->policy, EGRESS_POLICY_PROTO_UDP, names[i], strlen(names[i]), port, &m) ==
                    EGRESS_POLICY_ALLOW) {
                        gw_event(gw, sb, true, "udp", names[i], &dst->sin_addr, port, m.rule);
                        return true;
                }
        if (egress_policy_match_addr_proto(sb->policy, EGRESS_POLICY_PROTO_UDP, AF_INET, &dst->sin_addr, port, &m) ==
            EGRESS_POLICY_ALLOW) {
                gw_event(gw, sb, true, "udp", NULL, &dst->sin_addr, port, m.rule);
                return true;
        }
        for (size_t i = 0; i < n && !m.rule[0]; i++) /* a deny rule for the name says more than "no rule" */
                (void) egress_policy_match_host_proto(sb->policy, EGRESS_POLICY_PROTO_UDP, names[i], strlen(names[i]), port, &m);
        gw_event(gw, sb, false, "udp", n > 0 ? names[0] : NULL, &dst->sin_addr, port,
                 m.rule[0] ? m.rule : "no rule allows UDP to this destination and port");
        return false;
}

static GwUdpFlow *flow_new(Gateway *gw, GwSandbox *sb, unsigned listener, uint16_t sport, const struct sockaddr_in *dst) {
        _cleanup_close_ int fd = -EBADF;
        GwUdpFlow *f;

        if (sb->n_udp_flows >= GW_UDP_FLOWS_PER_SANDBOX || gw->n_udp_flows >= GW_UDP_FLOWS_MAX) {
                gw_event(gw, sb, false, "udp", NULL, &dst->sin_addr, ntohs(dst->sin_port), "UDP flow limit reached");
                return NULL;
        }
        fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0 || connect(fd, (const struct sockaddr *) dst, sizeof *dst) < 0) {
                log_debug_errno(errno, "gateway: UDP flow of %s: %m", sb->id);
                return NULL;
        }
        f = calloc(1, sizeof *f);
        if (!f)
                return NULL;
        f->io.fd = TAKE_FD(fd);
        f->io.fn = flow_event;
        f->sb = sb;
        f->listener = listener;
        f->sport = sport;
        f->dst = *dst;
        f->last_usec = gw_now_usec();
        if (gw_epoll_add(gw, &f->io, EPOLLIN) < 0) {
                safe_close(f->io.fd);
                free(f);
                return NULL;
        }
        f->next = sb->udp_flows;
        if (sb->udp_flows)
                sb->udp_flows->prev = f;
        sb->udp_flows = f;
        sb->n_udp_flows++;
        gw->n_udp_flows++;
        return f;
}

/* The link that holds the host end's address. */
static int host_end_ifindex(const GwSandbox *sb) {
        struct ifaddrs *ifa = NULL;
        int idx = 0;
        if (getifaddrs(&ifa) < 0)
                return 0;
        for (struct ifaddrs *i = ifa; i && idx == 0; i = i->ifa_next)
                if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
                    ((struct sockaddr_in *) (void *) i->ifa_addr)->sin_addr.s_addr == sb->host.s_addr)
                        idx = (int) if_nametoindex(i->ifa_name);
        freeifaddrs(ifa);
        return idx;
}

/* One datagram from the sandbox: its original destination from the cmsgs, or false. */
static bool datagram_origin(GwSandbox *sb, struct msghdr *mh, const struct sockaddr_in *from, struct sockaddr_in *ret) {
        bool have_mark = false, have_prio = false;
        int ifindex = -1;
        uint8_t mark[4] = {}, prio[4] = {};

        if (mh->msg_namelen != sizeof *from || from->sin_family != AF_INET || from->sin_addr.s_addr != sb->ip.s_addr ||
            (mh->msg_flags & MSG_CTRUNC))
                return false;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_MARK && c->cmsg_len >= CMSG_LEN(4)) {
                        memcpy(mark, CMSG_DATA(c), 4);
                        have_mark = true;
                } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_PRIORITY && c->cmsg_len >= CMSG_LEN(4)) {
                        memcpy(prio, CMSG_DATA(c), 4);
                        have_prio = true;
                } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO &&
                           c->cmsg_len >= CMSG_LEN(sizeof(struct in_pktinfo))) {
                        struct in_pktinfo pi;
                        memcpy(&pi, CMSG_DATA(c), sizeof pi);
                        ifindex = pi.ipi_ifindex;
                }
        }
        if (!have_mark || !have_prio || ifindex <= 0)
                return false;
        /* the firewall's copy: mark = the destination address, priority = source and
         * destination port, each in network byte order (the bytes of the packet) */
        if (memcmp(prio, &from->sin_port, 2) != 0)
                return false;
        if (sb->udp_ifindex <= 0)
                sb->udp_ifindex = host_end_ifindex(sb);
        if (ifindex != sb->udp_ifindex)
                return false;
        *ret = (struct sockaddr_in){ .sin_family = AF_INET };
        memcpy(&ret->sin_addr, mark, 4);
        memcpy(&ret->sin_port, prio + 2, 2);
        return true;
}

static void listener_event(Gateway *gw, GwIo *io, uint32_t events) {
        GwUdpListener *l = (GwUdpListener *) io;
        GwSandbox *sb = l->sb;

        if (!(events & EPOLLIN))
                return;
        for (unsigned k = 0; k < GW_UDP_BATCH; k++) {
                union {
                        struct cmsghdr align;
                        uint8_t buf[CMSG_SPACE(4) * 2 + CMSG_SPACE(sizeof(struct in_pktinfo)) + 64];
                } control;
                struct sockaddr_in from, dst;
                struct iovec iov = { .iov_base = gw->udp_buf, .iov_len = GW_UDP_DATAGRAM_MAX };
                struct msghdr mh = { .msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov, .msg_iovlen = 1,
                                     .msg_control = control.buf, .msg_controllen = sizeof control.buf };
                ssize_t n = recvmsg(io->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                return;
                        continue;
                }
                if (mh.msg_flags & MSG_TRUNC || !datagram_origin(sb, &mh, &from, &dst))
                        continue; /* not a datagram of this sandbox that the firewall sent here */
                uint16_t sport = ntohs(from.sin_port);
                GwUdpFlow *f = flow_find(sb, sport, &dst);
                if (!f) {
                        if (!decide(gw, sb, &dst))
                                continue;
                        f = flow_new(gw, sb, l->index, sport, &dst);
                        if (!f)
                                continue;
                }
                f->listener = l->index;
                f->last_usec = gw_now_usec();
                (void) send(f->io.fd, gw->udp_buf, (size_t) n, MSG_DONTWAIT);
        }
}

int gw_udp_listen(Gateway *gw, GwSandbox *sb) {
        const GatewayConfig *c = gw->config;
        int one = 1;

        for (unsigned i = 0; i < GATEWAY_UDP_PORTS; i++) {
                sb->udp[i].io.fd = -EBADF;
                sb->udp[i].sb = sb;
                sb->udp[i].index = i;
        }
        if (c->udp_port == 0 || gw->udp_off)
                return 0;
        if (!gw->udp_buf) {
                gw->udp_buf = malloc(GW_UDP_DATAGRAM_MAX);
                if (!gw->udp_buf)
                        return -ENOMEM;
        }
        for (unsigned i = 0; i < GATEWAY_UDP_PORTS; i++) {
                _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = sb->host,
                                          .sin_port = htons((uint16_t) (c->udp_port + i)) };
                if (fd < 0)
                        return -errno;
                if (setsockopt(fd, SOL_SOCKET, SO_RCVMARK, &one, sizeof one) < 0 ||
                    setsockopt(fd, SOL_SOCKET, SO_RCVPRIORITY, &one, sizeof one) < 0) {
                        if (errno != ENOPROTOOPT)
                                return -errno;
                        /* an older kernel: no UDP relay at all (datagrams go nowhere) */
                        log_warning("gateway: this kernel has no SO_RCVPRIORITY (Linux 6.14): UDP is not relayed");
                        gw->udp_off = true;
                        return 0;
                }
                if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
                    setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof one) < 0 ||
                    setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof one) < 0)
                        return -errno;
                if (bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0)
                        return -errno;
                sb->udp[i].io.fd = TAKE_FD(fd);
                sb->udp[i].io.fn = listener_event;
                int r = gw_epoll_add(gw, &sb->udp[i].io, EPOLLIN);
                if (r < 0) {
                        sb->udp[i].io.fd = safe_close(sb->udp[i].io.fd);
                        return r;
                }
        }
        return 0;
}
