/* SPDX-License-Identifier: MIT */
/* The guard's host addresses: the set (src/shared/host-addr-set.c) against a
 * plain model, past thousands of entries, its allocation failure (refused as
 * unknown), and a real gateway in a network namespace of its own kept
 * current from netlink: addresses added after it started are refused at once
 * (through its proxy, with a network.deny event naming the reason), deleted
 * ones leave the set, an overrun of its netlink socket is recovered by a
 * dump on the same socket. Prints the set's memory and the time per address event for 1,000
 * addresses (figures, never asserted). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <linux/rtnetlink.h>

#include "egress-policy.h"
#include "fd-util.h"
#include "gateway-client.h"
#include "host-addr-set.h"
#include "netlink.h"
#include "str-util.h"
#include "test.h"

static uint64_t now_nsec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

static void v4(uint32_t x, uint8_t out[4]) {
        out[0] = (uint8_t) (x >> 24);
        out[1] = (uint8_t) (x >> 16);
        out[2] = (uint8_t) (x >> 8);
        out[3] = (uint8_t) x;
}

static void v6(uint32_t x, uint8_t out[16]) {
        memset(out, 0, 16);
        out[0] = 0x20, out[1] = 0x01, out[2] = 0x0d, out[3] = 0xb8;
        v4(x, out + 12);
}

TEST(set_grows_adds_removes) {
        _cleanup_(host_addr_set_freep) HostAddrSet *s = NULL;
        uint8_t a[16], b[16];
        const unsigned N = 20000;

        ASSERT_OK(host_addr_set_new(&s));
        ASSERT_FALSE(host_addr_set_is_complete(s));
        v4(0xC6124D01U, a);
        ASSERT_FALSE(host_addr_set_contains(s, AF_INET, a)); /* empty, no table yet */
        ASSERT_EQ(host_addr_set_remove(s, 1, AF_INET, a), 0);
        for (unsigned i = 0; i < N; i++) {
                v4(0x0A000000U + i, a);
                v6(i, b);
                ASSERT_EQ(host_addr_set_add(s, (int) (i % 7), AF_INET, a), 1);
                ASSERT_EQ(host_addr_set_add(s, (int) (i % 7), AF_INET6, b), 1);
        }
        ASSERT_EQ(host_addr_set_size(s), 2 * N);
        for (unsigned i = 0; i < N; i++) {
                v4(0x0A000000U + i, a);
                v6(i, b);
                ASSERT_TRUE(host_addr_set_contains(s, AF_INET, a));
                ASSERT_TRUE(host_addr_set_contains(s, AF_INET6, b));
        }
        /* the IPv4 bytes as the first four of an IPv6 address are another address */
        v4(0x0A000001U, a);
        memset(a + 4, 0, 12);
        ASSERT_FALSE(host_addr_set_contains(s, AF_INET6, a));
        v4(0x0A000000U + N, a);
        ASSERT_FALSE(host_addr_set_contains(s, AF_INET, a));
        /* removing the odd ones keeps the even ones findable (the runs are shifted back) */
        for (unsigned i = 1; i < N; i += 2) {
                v4(0x0A000000U + i, a);
                v6(i, b);
                ASSERT_EQ(host_addr_set_remove(s, (int) (i % 7), AF_INET, a), 1);
                ASSERT_EQ(host_addr_set_remove(s, (int) (i % 7), AF_INET6, b), 1);
                ASSERT_EQ(host_addr_set_remove(s, (int) (i % 7), AF_INET6, b), 0);
        }
        ASSERT_EQ(host_addr_set_size(s), N);
        for (unsigned i = 0; i < N; i++) {
                v4(0x0A000000U + i, a);
                v6(i, b);
                ASSERT_EQ(host_addr_set_contains(s, AF_INET, a), i % 2 == 0);
                ASSERT_EQ(host_addr_set_contains(s, AF_INET6, b), i % 2 == 0);
        }
        /* one address on two links: there until both are gone; another link's removal is no removal */
        v4(0xC6124D01U, a);
        ASSERT_EQ(host_addr_set_add(s, 100, AF_INET, a), 1);
        ASSERT_EQ(host_addr_set_add(s, 101, AF_INET, a), 1);
        ASSERT_EQ(host_addr_set_remove(s, 102, AF_INET, a), 0);
        ASSERT_EQ(host_addr_set_remove(s, 100, AF_INET, a), 1);
        ASSERT_TRUE(host_addr_set_contains(s, AF_INET, a));
        ASSERT_EQ(host_addr_set_remove(s, 101, AF_INET, a), 1);
        ASSERT_FALSE(host_addr_set_contains(s, AF_INET, a));
        ASSERT_ERRNO(host_addr_set_add(s, 1, AF_UNIX, a), EAFNOSUPPORT);
        ASSERT_FALSE(host_addr_set_contains(s, AF_UNIX, a));

        host_addr_set_mark_complete(s, true);
        ASSERT_TRUE(host_addr_set_is_complete(s));
        host_addr_set_clear(s);
        ASSERT_EQ(host_addr_set_size(s), 0);
        ASSERT_FALSE(host_addr_set_is_complete(s));
        v4(0x0A000000U, a);
        ASSERT_FALSE(host_addr_set_contains(s, AF_INET, a));
}

/* Random adds and removes on few distinct values (long probe runs, many
 * shifts) against a plain array. */
TEST(set_matches_a_model) {
        _cleanup_(host_addr_set_freep) HostAddrSet *s = NULL, *t = NULL;
        enum { ADDRS = 300, LINKS = 3 };
        static bool model[ADDRS][LINKS];
        uint32_t x = 12345;
        size_t n = 0;

        ASSERT_OK(host_addr_set_new(&s));
        ASSERT_OK(host_addr_set_new(&t));
        for (unsigned step = 0; step < 200000; step++) {
                x = x * 1103515245U + 12345U;
                unsigned i = (x >> 8) % ADDRS, l = (x >> 20) % LINKS;
                bool add = (x >> 30) & 1;
                uint8_t a[16];
                if (i % 2)
                        v6(i, a);
                else
                        v4(0xC0A80000U + i, a);
                int fam = i % 2 ? AF_INET6 : AF_INET;
                int r = add ? host_addr_set_add(s, (int) l, fam, a) : host_addr_set_remove(s, (int) l, fam, a);
                ASSERT_EQ(r, model[i][l] != add ? 1 : 0);
                if (r == 1)
                        n = add ? n + 1 : n - 1;
                model[i][l] = add;
                if (step % 997 == 0)
                        for (unsigned k = 0; k < ADDRS; k++) {
                                uint8_t b[16];
                                if (k % 2)
                                        v6(k, b);
                                else
                                        v4(0xC0A80000U + k, b);
                                bool any = model[k][0] || model[k][1] || model[k][2];
                                ASSERT_EQ(host_addr_set_contains(s, k % 2 ? AF_INET6 : AF_INET, b), any);
                        }
        }
        ASSERT_EQ(host_addr_set_size(s), n);
        /* equal to a set built from the model; swapped, each keeps what it had */
        for (unsigned k = 0; k < ADDRS; k++)
                for (unsigned l = 0; l < LINKS; l++)
                        if (model[k][l]) {
                                uint8_t b[16];
                                if (k % 2)
                                        v6(k, b);
                                else
                                        v4(0xC0A80000U + k, b);
                                ASSERT_EQ(host_addr_set_add(t, (int) l, k % 2 ? AF_INET6 : AF_INET, b), 1);
                        }
        ASSERT_TRUE(host_addr_set_equal(s, t));
        uint8_t extra[4] = { 203, 0, 113, 1 };
        ASSERT_EQ(host_addr_set_add(t, 9, AF_INET, extra), 1);
        ASSERT_FALSE(host_addr_set_equal(s, t));
        host_addr_set_swap(s, t);
        ASSERT_TRUE(host_addr_set_contains(s, AF_INET, extra));
        ASSERT_FALSE(host_addr_set_contains(t, AF_INET, extra));
        ASSERT_EQ(host_addr_set_size(s), n + 1);
}

static unsigned allocs_left;
static void *failing_calloc(size_t n, size_t size) {
        if (allocs_left == 0)
                return NULL;
        allocs_left--;
        return calloc(n, size);
}

/* A failed allocation leaves the set incomplete: the guard refuses every
 * destination as unknown until the set is filled again (cleared and marked). */
TEST(set_allocation_failure_denies) {
        _cleanup_(host_addr_set_freep) HostAddrSet *s = NULL;
        uint8_t a[4], probe[4] = { 1, 1, 1, 1 };
        int r = 0;
        unsigned i;

        ASSERT_OK(host_addr_set_new(&s));
        EgressPolicyGuard g = { .pool_base = 0x0AC80000U, .pool_prefixlen = 16, .host = s };
        host_addr_set_set_allocator(s, failing_calloc);
        allocs_left = 2; /* the first table and one doubling */
        host_addr_set_mark_complete(s, true);
        ASSERT_NULL(egress_policy_addr_forbidden(&g, AF_INET, probe));
        for (i = 0; i < 1000 && r >= 0; i++) {
                v4(0x64400000U + i, a);
                r = host_addr_set_add(s, 1, AF_INET, a);
        }
        ASSERT_EQ(r, -ENOMEM);
        ASSERT_EQ(i, 65); /* 64 slots, then 128 at half load: the 65th needed 256 */
        ASSERT_FALSE(host_addr_set_is_complete(s));
        ASSERT_STREQ(egress_policy_addr_forbidden(&g, AF_INET, probe), EGRESS_POLICY_HOST_UNKNOWN);
        ASSERT_STREQ(egress_policy_addr_forbidden(&g, AF_INET, a), EGRESS_POLICY_HOST_UNKNOWN);
        /* marking it complete does not make it so: it lost an address */
        host_addr_set_mark_complete(s, true);
        ASSERT_FALSE(host_addr_set_is_complete(s));
        /* what it holds is still found */
        v4(0x64400000U, a);
        ASSERT_TRUE(host_addr_set_contains(s, AF_INET, a));
        /* filled again from scratch (a dump): complete */
        host_addr_set_set_allocator(s, NULL);
        host_addr_set_clear(s);
        for (i = 0; i < 1000; i++) {
                v4(0x64400000U + i, a);
                ASSERT_EQ(host_addr_set_add(s, 1, AF_INET, a), 1);
        }
        host_addr_set_mark_complete(s, true);
        ASSERT_TRUE(host_addr_set_is_complete(s));
        ASSERT_NULL(egress_policy_addr_forbidden(&g, AF_INET, probe));
        ASSERT_STREQ(egress_policy_addr_forbidden(&g, AF_INET, a), "host address");
}

/* The figures for 1,000 host addresses (printed, not asserted). */
TEST(set_figures_1000) {
        _cleanup_(host_addr_set_freep) HostAddrSet *s = NULL;
        uint8_t a[16];
        enum { N = 1000, ROUNDS = 200 };
        uint64_t t0, t_add = 0, t_del = 0, t_look;

        ASSERT_OK(host_addr_set_new(&s));
        for (unsigned r = 0; r < ROUNDS; r++) {
                t0 = now_nsec();
                for (unsigned i = 0; i < N; i++) {
                        v4(0x0AC80000U + 2 * i, a);
                        (void) host_addr_set_add(s, (int) i + 2, AF_INET, a);
                }
                t_add += now_nsec() - t0;
                if (r + 1 == ROUNDS)
                        break;
                t0 = now_nsec();
                for (unsigned i = 0; i < N; i++) {
                        v4(0x0AC80000U + 2 * i, a);
                        (void) host_addr_set_remove(s, (int) i + 2, AF_INET, a);
                }
                t_del += now_nsec() - t0;
        }
        ASSERT_EQ(host_addr_set_size(s), N);
        t0 = now_nsec();
        unsigned hits = 0;
        for (unsigned r = 0; r < ROUNDS; r++)
                for (unsigned i = 0; i < 2 * N; i++) {
                        v4(0x0AC80000U + i, a);
                        hits += host_addr_set_contains(s, AF_INET, a);
                }
        t_look = now_nsec() - t0;
        ASSERT_EQ(hits, ROUNDS * N);
        fprintf(stderr, "  host-addr-set, %u addresses: %zu bytes; add %.0f ns, remove %.0f ns, lookup %.0f ns (this build)\n",
                (unsigned) N, host_addr_set_memory(s), (double) t_add / (ROUNDS * N), (double) t_del / ((ROUNDS - 1) * N),
                (double) t_look / (ROUNDS * 2.0 * N));
}

/* ---- a real gateway in a namespace of its own ---- */

static void addr_msg(NetlinkMessage *m, bool add, int ifindex, uint32_t addr) {
        struct ifaddrmsg ifa = { .ifa_family = AF_INET, .ifa_prefixlen = 32, .ifa_index = (unsigned) ifindex };
        struct in_addr a = { .s_addr = htonl(addr) };
        netlink_message_init(m, add ? RTM_NEWADDR : RTM_DELADDR, add ? NLM_F_CREATE | NLM_F_EXCL : 0);
        netlink_message_append(m, &ifa, sizeof ifa);
        netlink_attr(m, IFA_LOCAL, &a, sizeof a);
        netlink_attr(m, IFA_ADDRESS, &a, sizeof a);
}

/* n addresses from base (host order) added to or deleted from link ifindex, 8 per call. */
static int addrs_change(int fd, bool add, int ifindex, uint32_t base, unsigned n) {
        static NetlinkMessage m[NETLINK_BATCH_MAX];
        NetlinkMessage *p[NETLINK_BATCH_MAX];
        for (unsigned i = 0; i < n;) {
                size_t k = 0;
                for (; k < NETLINK_BATCH_MAX && i < n; k++, i++) {
                        addr_msg(&m[k], add, ifindex, base + i);
                        p[k] = &m[k];
                }
                int r = netlink_call_many(fd, p, k);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* CPU time the process has run, in ns (schedstat), 0 if unknown. */
static uint64_t cpu_nsec(pid_t pid) {
        char path[64], buf[128];
        unsigned long long v = 0;
        snprintf(path, sizeof path, "/proc/%d/schedstat", (int) pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t k = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (k <= 0)
                return 0;
        buf[k] = 0;
        return sscanf(buf, "%llu", &v) == 1 ? v : 0;
}

static GatewayHostAddrStats stats(GatewayClient *g) {
        GatewayHostAddrStats st;
        ASSERT_OK(gateway_client_host_addr_stats(g, &st));
        return st;
}

/* Polls (bounded) until the gateway's set is complete and holds want addresses. */
static GatewayHostAddrStats wait_count(GatewayClient *g, uint64_t want) {
        GatewayHostAddrStats st = {};
        for (int i = 0; i < 1000; i++) {
                st = stats(g);
                if (st.complete && st.count == want)
                        return st;
                usleep(5000);
        }
        test_fail(__FILE__, __LINE__, "the gateway holds %" PRIu64 " host addresses (complete %d), not %" PRIu64,
                  st.count, st.complete, want);
        return st;
}

typedef struct Seen {
        unsigned n;
        char type[64], reason[512];
} Seen;

static void on_event(void *userdata, const char *type, const char *sandbox, const char *tenant, const char *reason,
                     const char *data_json) {
        Seen *s = userdata;
        s->n++;
        snprintf(s->type, sizeof s->type, "%s", strna(type));
        snprintf(s->reason, sizeof s->reason, "%s", strna(reason));
}

/* CONNECT addr:7777 through the gateway's proxy from the sandbox's address: the status line. */
static void proxy_connect(struct in_addr sb, struct in_addr host, uint16_t port, const char *target, char *status, size_t size) {
        _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr = sb };
        struct sockaddr_in dst = { .sin_family = AF_INET, .sin_addr = host, .sin_port = htons(port) };
        char req[256], buf[512];
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(bind(fd, (struct sockaddr *) &src, sizeof src));
        ASSERT_OK(connect(fd, (struct sockaddr *) &dst, sizeof dst));
        int n = snprintf(req, sizeof req, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target);
        ASSERT_EQ(write(fd, req, (size_t) n), n);
        struct pollfd p = { .fd = fd, .events = POLLIN };
        ASSERT_EQ(poll(&p, 1, 5000), 1);
        ssize_t k = read(fd, buf, sizeof buf - 1);
        ASSERT_TRUE(k > 0);
        buf[k] = 0;
        buf[strcspn(buf, "\r\n")] = 0;
        snprintf(status, size, "%s", buf);
}

static void events_until(GatewayClient *g, Seen *seen, unsigned n) {
        for (int i = 0; i < 100 && seen->n < n; i++) {
                struct pollfd e = { .fd = gateway_client_fd(g), .events = POLLIN };
                (void) poll(&e, 1, 50);
                ASSERT_OK(gateway_client_dispatch(g));
        }
        ASSERT_TRUE(seen->n >= n);
}

static void gateway_in_fresh_netns(int self_ns) {
        _cleanup_(gateway_client_freep) GatewayClient *g = NULL;
        _cleanup_close_ int nl = -EBADF;
        GatewayHostAddrStats st;
        GatewayConfig c;
        char err[256] = "", status[512];
        Seen seen = {};
        struct in_addr host = { .s_addr = htonl(0x7F0A0000U) }, sb = { .s_addr = htonl(0x7F0A0001U) };
        const uint32_t victim = 0xC6124D01U; /* 198.18.77.1 */
        const unsigned N = 1000;
        int lo = (int) if_nametoindex("lo");

        ASSERT_OK(netlink_open(&nl));
        {
                struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC, .ifi_index = lo, .ifi_flags = IFF_UP, .ifi_change = IFF_UP };
                NetlinkMessage m;
                netlink_message_init(&m, RTM_NEWLINK, 0);
                netlink_message_append(&m, &ifi, sizeof ifi);
                ASSERT_OK(netlink_call(nl, &m));
        }
        ASSERT_OK(gateway_config_default(&c));
        c.dns_port = 20453;
        c.proxy_port = 20480;
        c.transparent_port = 20481;
        c.udp_port = 0;
        ASSERT_OK(gateway_parse_upstream("127.0.0.1:9", &c.upstream_dns));
        ASSERT_OK(gateway_client_start(&c, on_event, &seen, &g));
        /* lo: 127.0.0.1 (and ::1 where IPv6 is on) */
        for (int i = 0; i < 200 && !stats(g).complete; i++)
                usleep(5000);
        st = stats(g);
        ASSERT_TRUE(st.complete);
        ASSERT_EQ(st.dumps, 1);
        const uint64_t base = st.count;
        ASSERT_TRUE(base >= 1);
        ASSERT_OK(gateway_client_register(g, "sb-1", "t", sb, host,
                                          "{\"allow\":[{\"cidr\":\"198.18.0.0/15\",\"ports\":[7777]}]}", err, sizeof err));

        /* an address added after the start: refused at once, by name */
        ASSERT_OK(addrs_change(nl, true, lo, victim, 1));
        proxy_connect(sb, host, c.proxy_port, "198.18.77.1:7777", status, sizeof status);
        ASSERT_TRUE(strstr(status, " 403") != NULL);
        events_until(g, &seen, 1);
        ASSERT_STREQ(seen.type, "network.deny");
        ASSERT_TRUE(strstr(seen.reason, "host address") != NULL);
        /* a neighbour that is not the host's passes the guard (and fails upstream: no route here) */
        proxy_connect(sb, host, c.proxy_port, "198.18.77.2:7777", status, sizeof status);
        ASSERT_TRUE(strstr(status, " 403") == NULL);

        /* 1,000 more: each event applied; the time is the kernel's and the gateway's per address */
        st = stats(g);
        pid_t gpid = gateway_client_pid(g);
        uint64_t events0 = st.events, t0 = now_nsec();
        (void) stats(g);
        uint64_t cpu_stats = cpu_nsec(gpid);
        (void) stats(g); /* what one stats request costs the gateway, taken off below */
        cpu_stats = cpu_nsec(gpid) - cpu_stats;
        uint64_t cpu0 = cpu_nsec(gpid);
        ASSERT_OK(addrs_change(nl, true, lo, 0x64400000U, N)); /* 100.64.0.0 .. */
        st = wait_count(g, base + 1 + N);
        uint64_t t_add = now_nsec() - t0, cpu_add = cpu_nsec(gpid) - cpu0;
        ASSERT_TRUE(st.events >= events0 + N);
        fprintf(stderr, "  gateway, %u host addresses: %" PRIu64 " bytes of sets; %.1f us per added address "
                        "from the netlink call to the gateway's set, %.2f us of the gateway's CPU per address event "
                        "(this build)\n",
                N + (unsigned) base + 1, st.bytes, (double) t_add / N / 1000.0,
                cpu_add > cpu_stats ? (double) (cpu_add - cpu_stats) / N / 1000.0 : 0.0);
        proxy_connect(sb, host, c.proxy_port, "198.18.77.1:7777", status, sizeof status);
        ASSERT_TRUE(strstr(status, " 403") != NULL);

        /* deleted: the set shrinks, and the address is no longer the host's */
        t0 = now_nsec();
        ASSERT_OK(addrs_change(nl, false, lo, 0x64400000U, N));
        st = wait_count(g, base + 1);
        fprintf(stderr, "  gateway: %.1f us per deleted address\n", (double) (now_nsec() - t0) / N / 1000.0);
        ASSERT_OK(addrs_change(nl, false, lo, victim, 1));
        st = wait_count(g, base);
        seen.n = 0;
        proxy_connect(sb, host, c.proxy_port, "198.18.77.1:7777", status, sizeof status);
        ASSERT_TRUE(strstr(status, " 403") == NULL);

        /* an overrun: the gateway stopped while more events come than its socket holds; it
         * notices (ENOBUFS), dumps again and holds exactly what is there */
        ASSERT_OK(kill(gateway_client_pid(g), SIGSTOP));
        unsigned flood = 0;
        uint64_t overruns0 = st.overruns, dumps0 = st.dumps;
        for (unsigned round = 0; round < 6; round++) {
                ASSERT_OK(addrs_change(nl, true, lo, 0x64400000U, 3000));
                ASSERT_OK(addrs_change(nl, false, lo, 0x64400000U, 3000));
                flood += 6000;
        }
        ASSERT_OK(addrs_change(nl, true, lo, 0x64500000U, 100));
        ASSERT_OK(kill(gateway_client_pid(g), SIGCONT));
        st = wait_count(g, base + 100);
        fprintf(stderr, "  overrun after %u events: %" PRIu64 " overruns, %" PRIu64 " dumps\n", flood,
                st.overruns - overruns0, st.dumps - dumps0);
        ASSERT_TRUE(st.overruns > overruns0);
        ASSERT_TRUE(st.dumps > dumps0);
        ASSERT_EQ(st.drift, 0);
        ASSERT_EQ(st.reopens, 0); /* drained and dumped again on the same socket (its large buffer kept) */
        ASSERT_EQ(st.errors, 0);
        ASSERT_OK(addrs_change(nl, false, lo, 0x64500000U, 100));
        (void) wait_count(g, base);
        ASSERT_OK(gateway_client_unregister(g, "sb-1"));
        (void) self_ns;
}

TEST(gateway_keeps_host_addrs_from_netlink) {
        _cleanup_close_ int self_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (geteuid() != 0)
                test_skip("needs root (a network namespace)");
        ASSERT_TRUE(self_ns >= 0);
        if (unshare(CLONE_NEWNET) < 0)
                test_skip("cannot unshare a network namespace");
        gateway_in_fresh_netns(self_ns);
        ASSERT_OK(setns(self_ns, CLONE_NEWNET));
}

/* A gateway that cannot open its netlink socket at start (out of file
 * descriptors then) does not know the host's addresses: it refuses every
 * destination as unknown, counts it, and reopens the socket on its tick; from
 * then on the policy decides again. */
static void gateway_without_netlink_at_start(void) {
        _cleanup_(gateway_client_freep) GatewayClient *g = NULL;
        GatewayHostAddrStats st;
        GatewayConfig c;
        char err[256] = "", status[512];
        Seen seen = {};
        struct in_addr host = { .s_addr = htonl(0x7F0B0000U) }, sb = { .s_addr = htonl(0x7F0B0001U) };

        ASSERT_OK(gateway_config_default(&c));
        c.dns_port = 20553;
        c.proxy_port = 20580;
        c.transparent_port = 20581;
        c.udp_port = 0;
        ASSERT_OK(gateway_parse_upstream("127.0.0.1:9", &c.upstream_dns));
        /* the gateway forked as gateway_client_start() does, but with fds 0-3 and a limit
         * of 4: it may open no other until it raises the limit (after the netlink socket) */
        int sp[2];
        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp));
        pid_t pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                struct rlimit old, low;
                if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || dup2(sp[1], 3) < 0 ||
                    syscall(SYS_close_range, 4U, ~0U, 0U) < 0 || getrlimit(RLIMIT_NOFILE, &old) < 0)
                        _exit(1);
                low = (struct rlimit){ .rlim_cur = 4, .rlim_max = old.rlim_max };
                if (setrlimit(RLIMIT_NOFILE, &low) < 0)
                        _exit(1);
                _exit(gateway_main(&c, 3) < 0 ? 1 : 0);
        }
        safe_close(sp[1]);
        ASSERT_OK(gateway_client_new(sp[0], pid, on_event, &seen, &g));
        st = stats(g);
        ASSERT_FALSE(st.complete);
        ASSERT_OK(gateway_client_register(g, "sb-u", "t", sb, host,
                                          "{\"allow\":[{\"cidr\":\"198.18.0.0/15\",\"ports\":[7777]}]}", err, sizeof err));
        proxy_connect(sb, host, c.proxy_port, "198.18.77.2:7777", status, sizeof status);
        st = stats(g);
        if (!st.complete) {
                /* decided while unknown (the set is still not known now): refused, counted, named */
                ASSERT_TRUE(strstr(status, " 403") != NULL);
                ASSERT_TRUE(st.denied_unknown >= 1);
                events_until(g, &seen, 1);
                ASSERT_STREQ(seen.type, "network.deny");
                ASSERT_TRUE(strstr(seen.reason, EGRESS_POLICY_HOST_UNKNOWN) != NULL);
        } else if (strstr(status, " 403")) /* the socket came back meanwhile (a slow machine) */
                ASSERT_TRUE(st.denied_unknown >= 1);
        /* the socket is opened again on the tick: known, and the policy decides */
        for (int i = 0; i < 400 && !(st = stats(g)).complete; i++)
                usleep(10000);
        ASSERT_TRUE(st.complete);
        ASSERT_TRUE(st.errors >= 1);
        ASSERT_TRUE(st.count >= 1);
        proxy_connect(sb, host, c.proxy_port, "198.18.77.2:7777", status, sizeof status);
        ASSERT_TRUE(strstr(status, " 403") == NULL);
        ASSERT_OK(gateway_client_unregister(g, "sb-u"));
}

TEST(gateway_refuses_while_host_addrs_unknown) {
        _cleanup_close_ int self_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (geteuid() != 0)
                test_skip("needs root (a network namespace)");
        ASSERT_TRUE(self_ns >= 0);
        if (unshare(CLONE_NEWNET) < 0)
                test_skip("cannot unshare a network namespace");
        {
                _cleanup_close_ int nl = -EBADF;
                struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC, .ifi_index = (int) if_nametoindex("lo"),
                                         .ifi_flags = IFF_UP, .ifi_change = IFF_UP };
                NetlinkMessage m;
                ASSERT_OK(netlink_open(&nl));
                netlink_message_init(&m, RTM_NEWLINK, 0);
                netlink_message_append(&m, &ifi, sizeof ifi);
                ASSERT_OK(netlink_call(nl, &m));
        }
        gateway_without_netlink_at_start();
        ASSERT_OK(setns(self_ns, CLONE_NEWNET));
}
