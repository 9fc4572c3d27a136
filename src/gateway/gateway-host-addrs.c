/* SPDX-License-Identifier: MIT */
/* The host's addresses for the guard, kept from rtnetlink. The gateway runs
 * in the network namespace of the worker that forked it: its upstream
 * connections leave from there and the host ends of the sandbox links are
 * there, so the addresses of that namespace are "the host's". One
 * NETLINK_ROUTE socket subscribed to RTMGRP_IPV4_IFADDR|RTMGRP_IPV6_IFADDR is
 * part of the event loop: a full RTM_GETADDR dump at start, then every
 * RTM_NEWADDR/RTM_DELADDR as it comes.
 *
 * Fail closed: the guard lets nothing through while the set is incomplete
 * (egress_policy_addr_forbidden() answers EGRESS_POLICY_HOST_UNKNOWN). It is
 * incomplete until the first dump ends, after an overrun of the socket
 * (ENOBUFS: events were lost; a new dump is started at once), after an
 * allocation failed, and while the socket is broken (reopened on the tick).
 *
 * A dump is read from the subscribed socket itself, into a second set, with
 * the events that come between its parts applied to both sets in the order
 * the kernel queued them: the dump's set is exact when it ends and replaces
 * the guard's. A dump the kernel marks interrupted (NLM_F_DUMP_INTR: the
 * address lists changed under it, it may have skipped one) is thrown away
 * and done again. Every GW_HOST_ADDRS_RECHECK_USEC a dump is also compared
 * with the set the events kept (a difference is logged and counted: it
 * would be a bug), never the only source.
 *
 * Each decision drains the socket first (a non-blocking read), so an
 * address added before a connection is decided is in the set when it is. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "gateway-internal.h"
#include "log.h"
#include "str-util.h"

#define GW_HOST_ADDRS_BUF (64U * 1024U)                     /* a dump's part is at most 32 KiB */
#define GW_HOST_ADDRS_RCVBUF (4 * 1024 * 1024)              /* ~10,000 queued events (the kernel doubles it) */
#define GW_HOST_ADDRS_START_MSEC 5000                       /* the first dump, before serving */
#define GW_HOST_ADDRS_RECHECK_USEC (120ULL * 1000000ULL)    /* the consistency dump */
#define GW_HOST_ADDRS_RETRY_USEC (1000000ULL)               /* a broken socket, a failed dump */
#define GW_HOST_ADDRS_DRAIN_MAX 65536U                     /* reads thrown away after an overrun (one event each; a full buffer holds ~12,000) */
#define GW_HOST_ADDRS_LOG_USEC (10ULL * 1000000ULL)         /* refusals while unknown: one line per */

static void host_addrs_read(Gateway *gw);
static void socket_close(Gateway *gw, const char *why);

static void host_addrs_event(Gateway *gw, GwIo *io, uint32_t events) {
        (void) io;
        (void) events;
        host_addrs_read(gw);
}

static void set_unknown(GwHostAddrs *h, const char *why) {
        if (host_addr_set_is_complete(h->set))
                log_warning("gateway: the host's addresses are unknown (%s): every destination is refused until a dump completes",
                            why);
        host_addr_set_mark_complete(h->set, false);
}

static int dump_start(Gateway *gw) {
        GwHostAddrs *h = &gw->host_addrs;
        struct {
                struct nlmsghdr hdr;
                struct ifaddrmsg ifa;
        } req = {};
        struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };

        if (h->io.fd < 0)
                return -EBADF;
        if (h->dump_seq != 0) {
                h->redump = true; /* one at a time per socket: this one is thrown away at its end */
                return 0;
        }
        host_addr_set_clear(h->dump);
        h->dump_intr = false;
        if (++h->seq == 0)
                h->seq = 1;
        req.hdr.nlmsg_len = sizeof req;
        req.hdr.nlmsg_type = RTM_GETADDR;
        req.hdr.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
        req.hdr.nlmsg_seq = h->seq;
        req.ifa.ifa_family = AF_UNSPEC;
        if (sendto(h->io.fd, &req, sizeof req, 0, (struct sockaddr *) &kernel, sizeof kernel) < 0) {
                int r = -errno;
                h->n_errors++;
                h->retry_usec = gw_now_usec() + GW_HOST_ADDRS_RETRY_USEC;
                return log_warning_errno(r, "gateway: cannot ask for the host's addresses: %m");
        }
        h->dump_seq = h->seq;
        h->retry_usec = 0;
        return 0;
}

static void dump_end(Gateway *gw) {
        GwHostAddrs *h = &gw->host_addrs;
        bool was_complete = host_addr_set_is_complete(h->set);

        h->dump_seq = 0;
        if (h->dump_intr || h->redump) {
                h->redump = false;
                h->n_redumps++;
                (void) dump_start(gw);
                return;
        }
        host_addr_set_mark_complete(h->dump, true);
        if (!host_addr_set_is_complete(h->dump)) { /* an allocation failed on the way */
                h->retry_usec = gw_now_usec() + GW_HOST_ADDRS_RETRY_USEC;
                return;
        }
        if (was_complete && !host_addr_set_equal(h->set, h->dump)) {
                h->n_drift++;
                log_warning("gateway: the host's addresses the events kept (%zu) differ from a dump (%zu); the dump's are used",
                            host_addr_set_size(h->set), host_addr_set_size(h->dump));
        }
        host_addr_set_swap(h->set, h->dump);
        host_addr_set_clear(h->dump);
        h->n_dumps++;
        h->next_dump_usec = gw_now_usec() + GW_HOST_ADDRS_RECHECK_USEC;
        if (!was_complete)
                log_info("gateway: the host's addresses are known: %zu", host_addr_set_size(h->set));
}

static void apply(Gateway *gw, HostAddrSet *s, bool add, int ifindex, int family, const uint8_t *a) {
        if (!add) {
                (void) host_addr_set_remove(s, ifindex, family, a);
                return;
        }
        if (host_addr_set_add(s, ifindex, family, a) == -ENOMEM) {
                GwHostAddrs *h = &gw->host_addrs;
                h->n_errors++;
                log_error("gateway: out of memory for the host's addresses: every destination is refused until a dump completes");
                if (s == h->set)
                        (void) dump_start(gw); /* a fresh start; retried on the tick if it fails too */
        }
}

/* One RTM_NEWADDR/RTM_DELADDR: its local address (IFA_LOCAL if there, the
 * peer's being IFA_ADDRESS on a point-to-point link, else IFA_ADDRESS). */
static int address_message(Gateway *gw, const struct nlmsghdr *m) {
        GwHostAddrs *h = &gw->host_addrs;
        const struct ifaddrmsg *ifa = NLMSG_DATA(m);
        const uint8_t *local = NULL, *address = NULL;
        size_t want;

        if (m->nlmsg_len < NLMSG_LENGTH(sizeof *ifa))
                return -EBADMSG;
        if (ifa->ifa_family != AF_INET && ifa->ifa_family != AF_INET6)
                return 0;
        want = ifa->ifa_family == AF_INET ? 4 : 16;
        int len = (int) (m->nlmsg_len - NLMSG_LENGTH(sizeof *ifa));
        for (const struct rtattr *a = IFA_RTA(ifa); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
                if (a->rta_type != IFA_LOCAL && a->rta_type != IFA_ADDRESS)
                        continue;
                if (RTA_PAYLOAD(a) != want)
                        return -EBADMSG;
                if (a->rta_type == IFA_LOCAL)
                        local = RTA_DATA(a);
                else
                        address = RTA_DATA(a);
        }
        const uint8_t *addr = local ?: address;
        if (!addr)
                return -EBADMSG;
        bool add = m->nlmsg_type == RTM_NEWADDR;
        if (h->dump_seq != 0 && m->nlmsg_seq == h->dump_seq && (m->nlmsg_flags & NLM_F_MULTI)) {
                /* a part of the dump */
                if (m->nlmsg_flags & NLM_F_DUMP_INTR)
                        h->dump_intr = true;
                apply(gw, h->dump, true, (int) ifa->ifa_index, ifa->ifa_family, addr);
                return 0;
        }
        h->n_events++;
        apply(gw, h->set, add, (int) ifa->ifa_index, ifa->ifa_family, addr);
        if (h->dump_seq != 0)
                apply(gw, h->dump, add, (int) ifa->ifa_index, ifa->ifa_family, addr);
        return 0;
}

static void socket_close(Gateway *gw, const char *why) {
        GwHostAddrs *h = &gw->host_addrs;
        set_unknown(h, why);
        h->n_errors++;
        h->dump_seq = 0;
        h->redump = false;
        if (h->io.fd >= 0)
                gw_io_close(gw, &h->io);
        h->retry_usec = gw_now_usec() + GW_HOST_ADDRS_RETRY_USEC;
}

static int socket_open(Gateway *gw);

/* The kernel dropped events: nothing is known until a new dump. What the
 * socket still holds is from before the dump asked for below (some of it from
 * before the loss: an address added then, whose deletion was lost, would
 * spoil the dump), and the dump sees the result of all of it: thrown away.
 * The socket is kept (its buffer was sized with privilege, at start); if it
 * does not run dry (or a dump in flight does not end), a new one. */
static void overrun(Gateway *gw) {
        GwHostAddrs *h = &gw->host_addrs;
        bool dry = false;

        h->n_overruns++;
        set_unknown(h, "netlink overrun");
        h->redump = false;
        h->dump_intr = false;
        for (unsigned i = 0; i < GW_HOST_ADDRS_DRAIN_MAX && !dry; i++) {
                ssize_t k = recv(h->io.fd, h->buf, GW_HOST_ADDRS_BUF, MSG_DONTWAIT);
                if (k < 0) {
                        if (errno == EAGAIN)
                                dry = true;
                        else if (errno != EINTR && errno != ENOBUFS)
                                break;
                        continue;
                }
                size_t left = (size_t) k;
                for (const struct nlmsghdr *m = (const struct nlmsghdr *) h->buf; NLMSG_OK(m, left); m = NLMSG_NEXT(m, left))
                        if (h->dump_seq != 0 && m->nlmsg_seq == h->dump_seq &&
                            (m->nlmsg_type == NLMSG_DONE || m->nlmsg_type == NLMSG_ERROR))
                                h->dump_seq = 0; /* the socket may ask for another */
        }
        if (dry && h->dump_seq == 0) {
                (void) dump_start(gw);
                return;
        }
        h->dump_seq = 0;
        gw_io_close(gw, &h->io);
        int r = socket_open(gw);
        if (r < 0) {
                log_warning_errno(r, "gateway: cannot watch the host's addresses again: %m");
                socket_close(gw, "no netlink socket");
        }
}

static void host_addrs_read(Gateway *gw) {
        GwHostAddrs *h = &gw->host_addrs;

        while (h->io.fd >= 0) {
                struct sockaddr_nl from = {};
                struct iovec iov = { .iov_base = h->buf, .iov_len = GW_HOST_ADDRS_BUF };
                struct msghdr mh = { .msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov, .msg_iovlen = 1 };
                ssize_t k = recvmsg(h->io.fd, &mh, MSG_DONTWAIT);
                if (k < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                return;
                        if (errno == ENOBUFS) {
                                overrun(gw);
                                continue;
                        }
                        log_warning_errno(errno, "gateway: reading address events: %m");
                        socket_close(gw, "netlink error");
                        return;
                }
                if (mh.msg_flags & MSG_TRUNC) {
                        socket_close(gw, "truncated netlink message");
                        return;
                }
                if (from.nl_pid != 0)
                        continue; /* not from the kernel */
                size_t left = (size_t) k;
                for (const struct nlmsghdr *m = (const struct nlmsghdr *) h->buf; NLMSG_OK(m, left); m = NLMSG_NEXT(m, left)) {
                        int r = 0;
                        switch (m->nlmsg_type) {
                        case RTM_NEWADDR:
                        case RTM_DELADDR:
                                r = address_message(gw, m);
                                break;
                        case NLMSG_DONE:
                                if (h->dump_seq != 0 && m->nlmsg_seq == h->dump_seq) {
                                        if (m->nlmsg_flags & NLM_F_DUMP_INTR)
                                                h->dump_intr = true;
                                        dump_end(gw);
                                }
                                break;
                        case NLMSG_ERROR:
                                if (h->dump_seq != 0 && m->nlmsg_seq == h->dump_seq) {
                                        const struct nlmsgerr *e = NLMSG_DATA(m);
                                        r = m->nlmsg_len >= NLMSG_LENGTH(sizeof *e) && e->error < 0 ? e->error : -EIO;
                                        log_warning_errno(r, "gateway: the dump of the host's addresses failed: %m");
                                        h->dump_seq = 0;
                                        h->n_errors++;
                                        h->retry_usec = gw_now_usec() + GW_HOST_ADDRS_RETRY_USEC;
                                        r = 0;
                                }
                                break;
                        case NLMSG_OVERRUN:
                                overrun(gw);
                                return;
                        default:
                                break;
                        }
                        if (r < 0) {
                                log_warning_errno(r, "gateway: a malformed address message: %m");
                                socket_close(gw, "malformed netlink message");
                                return;
                        }
                }
        }
}

static int socket_open(Gateway *gw) {
        GwHostAddrs *h = &gw->host_addrs;
        int size = GW_HOST_ADDRS_RCVBUF;
        _cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
        if (fd < 0)
                return -errno;
        /* beyond rmem_max only with privilege (at start, before it is dropped) */
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) < 0)
                (void) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
        struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR };
        if (bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0)
                return -errno;
        h->io.fd = TAKE_FD(fd);
        if (h->opened++ > 0)
                h->n_reopens++;
        if (gw->epoll_fd >= 0) {
                int r = gw_epoll_add(gw, &h->io, EPOLLIN);
                if (r < 0) {
                        h->io.fd = safe_close(h->io.fd);
                        return r;
                }
        }
        return dump_start(gw);
}

int gw_host_addrs_init(Gateway *gw) {
        GwHostAddrs *h = &gw->host_addrs;
        int r;

        h->io = (GwIo){ .fd = -EBADF, .fn = host_addrs_event };
        h->buf = malloc(GW_HOST_ADDRS_BUF);
        if (!h->buf)
                return -ENOMEM;
        r = host_addr_set_new(&h->set);
        if (r >= 0)
                r = host_addr_set_new(&h->dump);
        if (r < 0)
                return r;
        gw->guard.host = h->set;
        r = socket_open(gw);
        if (r < 0) {
                log_warning_errno(r, "gateway: cannot watch the host's addresses: %m; every destination is refused until it can");
                socket_close(gw, "no netlink socket");
                return 0;
        }
        /* the first dump before anything is served (else the first connections are refused) */
        uint64_t deadline = gw_now_usec() + GW_HOST_ADDRS_START_MSEC * 1000ULL;
        while (h->io.fd >= 0 && !host_addr_set_is_complete(h->set) && h->dump_seq != 0 && gw_now_usec() < deadline) {
                struct pollfd p = { .fd = h->io.fd, .events = POLLIN };
                (void) poll(&p, 1, 100);
                host_addrs_read(gw);
        }
        if (!host_addr_set_is_complete(h->set))
                log_warning("gateway: the host's addresses are not known yet: every destination is refused until they are");
        return 0;
}

int gw_host_addrs_watch(Gateway *gw) {
        GwHostAddrs *h = &gw->host_addrs;
        return h->io.fd >= 0 ? gw_epoll_add(gw, &h->io, EPOLLIN) : 0;
}

void gw_host_addrs_tick(Gateway *gw, uint64_t now) {
        GwHostAddrs *h = &gw->host_addrs;

        if (h->io.fd < 0) {
                if (now < h->retry_usec)
                        return;
                int r = socket_open(gw);
                if (r < 0) {
                        h->retry_usec = now + GW_HOST_ADDRS_RETRY_USEC;
                        h->n_errors++;
                        log_debug_errno(r, "gateway: cannot watch the host's addresses: %m");
                }
                return;
        }
        if (h->dump_seq != 0)
                return;
        if ((h->retry_usec != 0 && now >= h->retry_usec) || (!host_addr_set_is_complete(h->set) && h->retry_usec == 0) ||
            now >= h->next_dump_usec)
                (void) dump_start(gw);
}

void gw_host_addrs_done(Gateway *gw) {
        GwHostAddrs *h = &gw->host_addrs;
        h->io.fd = safe_close(h->io.fd);
        gw->guard.host = NULL;
        h->set = host_addr_set_free(h->set);
        h->dump = host_addr_set_free(h->dump);
        h->buf = mfree(h->buf);
}

const char *gw_addr_forbidden(Gateway *gw, int family, const void *addr) {
        GwHostAddrs *h = &gw->host_addrs;
        const char *why;

        host_addrs_read(gw); /* what the kernel has queued applies to this decision */
        why = egress_policy_addr_forbidden(&gw->guard, family, addr);
        if (why && streq(why, EGRESS_POLICY_HOST_UNKNOWN)) {
                uint64_t now = gw_now_usec();
                h->n_denied_unknown++;
                if (now - h->last_unknown_log_usec >= GW_HOST_ADDRS_LOG_USEC) {
                        log_warning("gateway: refused a destination: the host's addresses are unknown (%" PRIu64 " so far)",
                                    h->n_denied_unknown);
                        h->last_unknown_log_usec = now;
                }
        }
        return why;
}

void gw_host_addrs_write_stats(Gateway *gw, JsonWriter *w) {
        GwHostAddrs *h = &gw->host_addrs;
        json_w_key(w, "host_addrs");
        json_w_object_begin(w);
        json_w_kv_bool(w, "complete", host_addr_set_is_complete(h->set));
        json_w_kv_int(w, "count", (int64_t) host_addr_set_size(h->set));
        json_w_kv_int(w, "bytes", (int64_t) (host_addr_set_memory(h->set) + host_addr_set_memory(h->dump)));
        json_w_kv_int(w, "events", (int64_t) h->n_events);
        json_w_kv_int(w, "dumps", (int64_t) h->n_dumps);
        json_w_kv_int(w, "redumps", (int64_t) h->n_redumps);
        json_w_kv_int(w, "overruns", (int64_t) h->n_overruns);
        json_w_kv_int(w, "errors", (int64_t) h->n_errors);
        json_w_kv_int(w, "reopens", (int64_t) h->n_reopens);
        json_w_kv_int(w, "drift", (int64_t) h->n_drift);
        json_w_kv_int(w, "denied_unknown", (int64_t) h->n_denied_unknown);
        json_w_object_end(w);
}
