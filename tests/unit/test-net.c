/* SPDX-License-Identifier: MIT */
/* src/net: the address pool, the rtnetlink builder, the veth pair and the
 * nftables rules. The root test builds a real pair into a fresh network
 * namespace and sends traffic only between the two ends of its own /31. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <linux/netfilter_ipv4.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "addr-pool.h"
#include "fd-util.h"
#include "firewall.h"
#include "netlink.h"
#include "str-util.h"
#include "tap.h"
#include "test.h"
#include "veth.h"

#define WAIT_MSEC 300

static AddrPair pair_of(uint32_t slot) {
        AddrPool p;
        AddrPair a;
        ASSERT_OK(addr_pool_parse(ADDR_POOL_DEFAULT, strlen(ADDR_POOL_DEFAULT), &p));
        ASSERT_OK(addr_pool_slot(&p, slot, &a));
        return a;
}

static const char *ntoa(struct in_addr a, char buf[static INET_ADDRSTRLEN]) {
        return inet_ntop(AF_INET, &a, buf, INET_ADDRSTRLEN);
}

TEST(addr_pool) {
        AddrPool p;
        AddrPair a;
        uint32_t slot;
        char b[INET_ADDRSTRLEN];

        ASSERT_OK(addr_pool_parse("10.200.0.0/16", 13, &p));
        ASSERT_EQ(addr_pool_slots(&p), 32768);
        ASSERT_OK(addr_pool_slot(&p, 0, &a));
        ASSERT_STREQ(ntoa(a.host, b), "10.200.0.0");
        ASSERT_STREQ(ntoa(a.peer, b), "10.200.0.1");
        ASSERT_EQ(a.prefixlen, 31);
        ASSERT_OK(addr_pool_slot(&p, 32767, &a));
        ASSERT_STREQ(ntoa(a.host, b), "10.200.255.254");
        ASSERT_STREQ(ntoa(a.peer, b), "10.200.255.255");
        ASSERT_ERRNO(addr_pool_slot(&p, 32768, &a), ERANGE);
        ASSERT_OK(addr_pool_slot_of(&p, a.peer, &slot));
        ASSERT_EQ(slot, 32767);
        struct in_addr outside = { .s_addr = htonl(0x0AC90000U) };
        ASSERT_ERRNO(addr_pool_slot_of(&p, outside, &slot), ENOENT);

        /* not NUL-terminated: only n bytes count */
        ASSERT_OK(addr_pool_parse("192.168.4.0/30xyz", 14, &p));
        ASSERT_EQ(addr_pool_slots(&p), 2);
        ASSERT_OK(addr_pool_parse("172.20.0.0/14", 13, &p));
        ASSERT_OK(addr_pool_parse("10.0.0.0/8", 10, &p));

        static const char *const bad[] = {
                "", "10.200.0.0", "10.200.0.0/", "/16", "10.200.0.1/16", "10.200.0.0/31",
                "10.200.0.0/7", "10.200.0.0/016", "10.200.0.0/1a", "8.8.8.0/24", "172.32.0.0/16",
                "192.169.0.0/16", "0.0.0.0/8", "10.200.0/16", "10.200.0.0/16/", "10.200.0.0/+6",
                "10.200.0.0.0/16", "10.200.0.0/16 ", "10.200.000.0/99999",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                if (addr_pool_parse(bad[i], strlen(bad[i]), &p) != -EINVAL)
                        test_fail(__FILE__, __LINE__, "accepted \"%s\"", bad[i]);
        ASSERT_ERRNO(addr_pool_parse(NULL, 0, &p), EINVAL);
}

TEST(veth_names) {
        ASSERT_TRUE(veth_name_is_valid("sp-0123456789ab"));
        ASSERT_TRUE(veth_name_is_valid("eth0"));
        ASSERT_FALSE(veth_name_is_valid("sp-0123456789abc")); /* 16 bytes */
        ASSERT_FALSE(veth_name_is_valid(""));
        ASSERT_FALSE(veth_name_is_valid(NULL));
        ASSERT_FALSE(veth_name_is_valid("sp-\"x"));
        ASSERT_FALSE(veth_name_is_valid("sp x"));
        ASSERT_FALSE(veth_name_is_valid("a/b"));
        ASSERT_FALSE(veth_name_is_valid("sp-*"));

        AddrPair a = pair_of(0);
        ASSERT_ERRNO(veth_create("bad name", "eth0", 0), EINVAL);
        ASSERT_ERRNO(veth_create("sp-x", "eth0;", 0), EINVAL);
        ASSERT_ERRNO(veth_create("sp-x", "eth0", -1), EINVAL);
        ASSERT_ERRNO(veth_configure_peer(-1, "eth0", &a), EINVAL);
        ASSERT_ERRNO(veth_delete("x*"), EINVAL);
        ASSERT_ERRNO(veth_delete_index(0), EINVAL);
        ASSERT_ERRNO(veth_delete_index(-1), EINVAL);
        a.prefixlen = 24;
        ASSERT_ERRNO(veth_configure_host("sp-x", &a), EINVAL);
}

TEST(netlink_message) {
        NetlinkMessage m;
        char big[NETLINK_MESSAGE_MAX];
        int fd;

        netlink_message_init(&m, RTM_NEWLINK, 0);
        netlink_nest_begin(&m, IFLA_LINKINFO);
        netlink_attr_string(&m, IFLA_INFO_KIND, "veth");
        netlink_nest_end(&m);
        ASSERT_EQ(m.error, 0);
        ASSERT_EQ(m.hdr.nlmsg_len, NLMSG_LENGTH(0) + NLA_HDRLEN + NLA_ALIGN(NLA_HDRLEN + 5));
        const struct nlattr *nest = (const struct nlattr *) (m.buf + NLMSG_LENGTH(0));
        ASSERT_EQ(nest->nla_len, NLA_HDRLEN + NLA_ALIGN(NLA_HDRLEN + 5));
        ASSERT_EQ(nest->nla_type, IFLA_LINKINFO | NLA_F_NESTED);

        /* an attribute that does not fit sticks as -ENOBUFS and is never sent */
        memset(big, 'x', sizeof big);
        netlink_attr(&m, IFLA_IFNAME, big, sizeof big);
        ASSERT_EQ(m.error, -ENOBUFS);
        ASSERT_OK(netlink_open(&fd));
        ASSERT_ERRNO(netlink_call(fd, &m), ENOBUFS);

        /* unbalanced nests */
        netlink_message_init(&m, RTM_NEWLINK, 0);
        netlink_nest_end(&m);
        ASSERT_ERRNO(netlink_call(fd, &m), EINVAL);
        netlink_message_init(&m, RTM_NEWLINK, 0);
        for (unsigned i = 0; i <= NETLINK_NEST_MAX; i++)
                netlink_nest_begin(&m, IFLA_LINKINFO);
        ASSERT_ERRNO(netlink_call(fd, &m), ENOBUFS);

        /* a real round trip: the kernel's error comes back as -errno */
        struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
        netlink_message_init(&m, RTM_DELLINK, 0);
        netlink_message_append(&m, &ifi, sizeof ifi);
        netlink_attr_string(&m, IFLA_IFNAME, "sp-no-such-lnk");
        int r = netlink_call(fd, &m);
        ASSERT_TRUE(r == -ENODEV || r == -EPERM);
        safe_close(fd);
}

TEST(firewall_format) {
        _cleanup_free_ char *setup = NULL, *add = NULL, *rm = NULL, *empty = NULL;
        FirewallPorts ports = { .dns = 10053, .proxy = 10080, .transparent = 10081, .udp = 10082, .n_udp = 8 };
        AddrPair a = pair_of(1), b2 = pair_of(2);
        FirewallLink links[] = {
                { .link = "sp-1", .addr = a.peer, .gateway = a.host },
                { .link = "sp-2", .addr = b2.peer, .gateway = b2.host },
        };

        ASSERT_OK(firewall_format_setup("space", "sp-", &ports, links, 2, &setup));
        ASSERT_NOT_NULL(strstr(setup, "add table inet space\ndelete table inet space\nadd table inet space\n"));
        ASSERT_NOT_NULL(strstr(setup, "add set inet space links { type ifname . ipv4_addr . ipv4_addr; }\n"));
        ASSERT_NOT_NULL(strstr(setup, "add rule inet space prerouting iifname \"sp-*\" udp dport 53 redirect to :10053\n"));
        ASSERT_NOT_NULL(strstr(setup, "add rule inet space prerouting iifname \"sp-*\" tcp dport 53 redirect to :10053\n"));
        ASSERT_NOT_NULL(strstr(setup, "add rule inet space prerouting iifname \"sp-*\" fib daddr type local tcp dport { 10053, 10080, 10081 } return\n"));
        ASSERT_NOT_NULL(strstr(setup, "add rule inet space prerouting iifname \"sp-*\" meta l4proto tcp redirect to :10081\n"));
        ASSERT_NOT_NULL(strstr(setup, "add rule inet space input iifname \"sp-*\" iifname . ip saddr . ip daddr @links tcp dport { 10053, 10080, 10081 } accept\n"));
        ASSERT_NOT_NULL(strstr(setup, "add rule inet space prerouting iifname \"sp-*\" fib daddr type local udp dport 10053 return\n"));
        ASSERT_NOT_NULL(strstr(setup, "add rule inet space prerouting iifname \"sp-*\" meta l4proto udp redirect to :10082-10089\n"));
        ASSERT_NOT_NULL(strstr(setup, "add chain inet space udpmark { type filter hook prerouting priority mangle - 10; policy accept; }\n"));
        ASSERT_NOT_NULL(strstr(setup, "add rule inet space udpmark iifname \"sp-*\" meta l4proto udp meta mark set @nh,128,32 meta priority set @th,0,32\n"));
        ASSERT_NOT_NULL(strstr(setup, "add rule inet space input iifname \"sp-*\" iifname . ip saddr . ip daddr @links udp dport { 10053, 10082-10089 } accept\n"));
        /* the ingress's connections only: replies on conntrack entries its marked sockets opened, accepted before the drop */
        ASSERT_NOT_NULL(strstr(setup, "add rule inet space input iifname \"sp-*\" iifname . ip saddr . ip daddr @links ct direction reply ct state established ct mark 0x73706163 meta l4proto tcp accept\nadd rule inet space input iifname \"sp-*\" counter drop\n"));
        ASSERT_NOT_NULL(strstr(setup, "add chain inet space ingressmark { type filter hook output priority mangle - 10; policy accept; }\n"));
        ASSERT_NOT_NULL(strstr(setup, "add rule inet space ingressmark oifname \"sp-*\" meta mark 0x73706163 meta l4proto tcp ct state new ct mark set 0x73706163\n"));
        ASSERT_NOT_NULL(strstr(setup, "add rule inet space forward iifname \"sp-*\" counter drop\n"));
        ASSERT_NOT_NULL(strstr(setup, "add rule inet space forward oifname \"sp-*\" counter drop\n"));
        ASSERT_NOT_NULL(strstr(setup, "add element inet space links { \"sp-1\" . 10.200.0.3 . 10.200.0.2, \"sp-2\" . 10.200.0.5 . 10.200.0.4 }\n"));
        ASSERT_OK(firewall_format_setup("space", "sp-", &ports, NULL, 0, &empty));
        ASSERT_NULL(strstr(empty, "add element"));

        ASSERT_OK(firewall_format_link("space", &links[0], true, &add));
        ASSERT_STREQ(add, "add element inet space links { \"sp-1\" . 10.200.0.3 . 10.200.0.2 }\n");
        ASSERT_OK(firewall_format_link("space", &links[0], false, &rm));
        ASSERT_STREQ(rm, "add element inet space links { \"sp-1\" . 10.200.0.3 . 10.200.0.2 }\n"
                         "delete element inet space links { \"sp-1\" . 10.200.0.3 . 10.200.0.2 }\n");

        char *x = NULL;
        ASSERT_ERRNO(firewall_format_setup("sp ace", "sp-", &ports, NULL, 0, &x), EINVAL);
        ASSERT_ERRNO(firewall_format_setup("space", "sp-\"", &ports, NULL, 0, &x), EINVAL);
        ASSERT_ERRNO(firewall_format_setup("", "sp-", &ports, NULL, 0, &x), EINVAL);
        ASSERT_ERRNO(firewall_format_setup("a23456789012345678901234567890123", "sp-", &ports, NULL, 0, &x), EINVAL);
        ASSERT_ERRNO(firewall_format_setup("space", "sp-", NULL, NULL, 0, &x), EINVAL);
        ASSERT_ERRNO(firewall_format_setup("space", "sq-", &ports, links, 2, &x), EINVAL); /* not our prefix */
        FirewallPorts same = { .dns = 10053, .proxy = 10053, .transparent = 10081 }, zero = { .dns = 0, .proxy = 1, .transparent = 2 };
        ASSERT_ERRNO(firewall_format_setup("space", "sp-", &same, NULL, 0, &x), EINVAL);
        ASSERT_ERRNO(firewall_format_setup("space", "sp-", &zero, NULL, 0, &x), EINVAL);
        FirewallPorts overlap = ports, noudp = ports, wrap = ports;
        overlap.udp = 10050; /* 10050-10057 holds the DNS port */
        noudp.n_udp = 0;
        wrap.udp = 65530;
        ASSERT_ERRNO(firewall_format_setup("space", "sp-", &overlap, NULL, 0, &x), EINVAL);
        ASSERT_ERRNO(firewall_format_setup("space", "sp-", &noudp, NULL, 0, &x), EINVAL);
        ASSERT_ERRNO(firewall_format_setup("space", "sp-", &wrap, NULL, 0, &x), EINVAL);
        FirewallLink bad = links[0];
        bad.link = "sp-1; flush ruleset";
        ASSERT_ERRNO(firewall_format_link("space", &bad, true, &x), EINVAL);
        bad.link = "sp-a}";
        ASSERT_ERRNO(firewall_format_link("space", &bad, true, &x), EINVAL);
        bad = links[0];
        bad.addr.s_addr = INADDR_ANY;
        ASSERT_ERRNO(firewall_format_link("space", &bad, true, &x), EINVAL);
        ASSERT_ERRNO(firewall_format_link("space", NULL, true, &x), EINVAL);
        ASSERT_ERRNO(firewall_format_link("no table", &links[0], true, &x), EINVAL);
        ASSERT_NULL(x);
}

/* ---- the root test: a real pair into a real namespace ---- */

/* Everything the root test creates, undone at the end and at exit (a failed
 * ASSERT longjmps past the test's own cleanup). */
static struct {
        char link[IFNAMSIZ];
        char table[FIREWALL_TABLE_NAME_MAX + 1];
        Firewall *fw;
        int netns_fd;
        bool registered;
} net_test = { .netns_fd = -1 };

static void net_test_cleanup(void) {
        if (net_test.link[0]) {
                (void) veth_delete(net_test.link);
                net_test.link[0] = '\0';
        }
        if (net_test.table[0] && net_test.fw) {
                (void) firewall_teardown(net_test.fw, net_test.table);
                net_test.table[0] = '\0';
        }
        net_test.fw = firewall_free(net_test.fw);
        net_test.netns_fd = safe_close(net_test.netns_fd);
}

static int wait_child(pid_t pid) {
        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (!WIFEXITED(status))
                return -EPROTO;
        return WEXITSTATUS(status);
}

/* lo gets addr/8 in the current namespace: an RTM_NEWADDR (NLM_F_EXCL: an
 * address already there is -EEXIST). */
static void lo_addr(NetlinkMessage *m, const char *addr) {
        struct ifaddrmsg ifa = { .ifa_family = AF_INET, .ifa_prefixlen = 8, .ifa_index = 1 /* lo */ };
        struct in_addr a;
        (void) inet_pton(AF_INET, addr, &a);
        netlink_message_init(m, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
        netlink_message_append(m, &ifa, sizeof ifa);
        netlink_attr(m, IFA_LOCAL, &a, sizeof a);
        netlink_attr(m, IFA_ADDRESS, &a, sizeof a);
}

/* In a namespace of its own: a batch whose middle request fails reports that
 * error, and the kernel carried out the requests after it too. */
static int batch_in_fresh_ns(void) {
        NetlinkMessage a, bad, c, again;
        struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
        int fd, r;

        if (unshare(CLONE_NEWNET) < 0 || netlink_open(&fd) < 0)
                return 10;
        lo_addr(&a, "127.0.0.2");
        netlink_message_init(&bad, RTM_DELLINK, 0);
        netlink_message_append(&bad, &ifi, sizeof ifi);
        netlink_attr_string(&bad, IFLA_IFNAME, "sp-no-such-lnk");
        lo_addr(&c, "127.0.0.3");
        r = netlink_call_many(fd, (NetlinkMessage *const[]){ &a, &bad, &c }, 3);
        if (r != -ENODEV)
                return 11;
        /* both addresses are there: adding either again is refused */
        lo_addr(&a, "127.0.0.2");
        lo_addr(&again, "127.0.0.3");
        r = netlink_call_many(fd, (NetlinkMessage *const[]){ &a }, 1);
        if (r != -EEXIST)
                return 12;
        if (netlink_call(fd, &again) != -EEXIST)
                return 13;
        safe_close(fd);
        return 0;
}

TEST(netlink_batch) {
        NetlinkMessage m, *many[NETLINK_BATCH_MAX + 1];
        char big[NETLINK_MESSAGE_MAX];
        int fd;

        ASSERT_OK(netlink_open(&fd));
        ASSERT_ERRNO(netlink_call_many(fd, NULL, 0), EINVAL);
        netlink_message_init(&m, RTM_NEWLINK, 0);
        for (size_t i = 0; i < ELEMENTSOF(many); i++)
                many[i] = &m;
        ASSERT_ERRNO(netlink_call_many(fd, many, ELEMENTSOF(many)), EINVAL);
        /* a request the builder refused: the batch is not sent */
        memset(big, 'x', sizeof big);
        netlink_attr(&m, IFLA_IFNAME, big, sizeof big);
        ASSERT_ERRNO(netlink_call_many(fd, many, 2), ENOBUFS);
        safe_close(fd);

        pid_t pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                alarm(10);
                _exit(batch_in_fresh_ns());
        }
        ASSERT_EQ(wait_child(pid), 0);
}

/* A fresh network namespace held by an fd only: a child unshares, the parent
 * opens /proc/<child>/ns/net, then the child exits. */
static int netns_new(int *ret_fd) {
        int ready[2], done[2];
        char c = 0;
        if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(done, O_CLOEXEC) < 0)
                return -errno;
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                close(ready[0]);
                close(done[1]);
                c = unshare(CLONE_NEWNET) < 0 ? 1 : 0;
                (void) !write(ready[1], &c, 1);
                (void) !read(done[0], &c, 1); /* until the parent closes */
                _exit(0);
        }
        close(ready[1]);
        close(done[0]);
        ssize_t n = read(ready[0], &c, 1);
        close(ready[0]);
        int fd = -EBADF;
        if (n == 1 && c == 0) {
                char p[64];
                snprintf(p, sizeof p, "/proc/%d/ns/net", (int) pid);
                fd = open(p, O_RDONLY | O_CLOEXEC);
        }
        int saved = errno;
        close(done[1]);
        (void) wait_child(pid);
        ASSERT_ERRNO(kill(pid, 0) < 0 ? -errno : 0, ESRCH);
        if (fd < 0)
                return n == 1 && c == 0 ? -saved : -EPERM;
        *ret_fd = fd;
        return 0;
}

typedef int (*ns_fn)(const void *arg);

/* Runs fn in a forked child inside the test namespace: its exit code. */
static int run_in_ns(ns_fn fn, const void *arg) {
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                alarm(10);
                if (setns(net_test.netns_fd, CLONE_NEWNET) < 0)
                        _exit(100);
                _exit(fn(arg));
        }
        return wait_child(pid);
}

typedef struct Probe {
        AddrPair pair;
        struct in_addr src; /* UDP: the source to send from (INADDR_ANY: own) */
        uint16_t port;
        const char *payload;
} Probe;

static int check_inside(const void *arg) {
        const Probe *p = arg;
        struct ifreq ifr = {};
        char buf[8] = {};
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return 1;
        strscpy(ifr.ifr_name, sizeof ifr.ifr_name, VETH_PEER_DEFAULT);
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0 || !(ifr.ifr_flags & IFF_UP))
                return 2;
        if (ioctl(fd, SIOCGIFADDR, &ifr) < 0 ||
            ((struct sockaddr_in *) &ifr.ifr_addr)->sin_addr.s_addr != p->pair.peer.s_addr)
                return 3;
        strscpy(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0 || !(ifr.ifr_flags & IFF_UP))
                return 4;
        /* the default route: connect() of UDP sends nothing, it only routes */
        struct sockaddr_in far = { .sin_family = AF_INET, .sin_port = htons(9), .sin_addr.s_addr = htonl(0x0AC8FFFEU) };
        struct sockaddr_in me;
        socklen_t len = sizeof me;
        if (connect(fd, (struct sockaddr *) &far, sizeof far) < 0 ||
            getsockname(fd, (struct sockaddr *) &me, &len) < 0 || me.sin_addr.s_addr != p->pair.peer.s_addr)
                return 5;
        int v6 = open("/proc/sys/net/ipv6/conf/all/disable_ipv6", O_RDONLY | O_CLOEXEC);
        if (v6 >= 0 && (read(v6, buf, sizeof buf - 1) < 1 || buf[0] != '1'))
                return 6;
        return 0;
}

/* 0: connected; 1: no answer within WAIT_MSEC; 2: refused or other error */
static int tcp_probe(const void *arg) {
        const Probe *p = arg;
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(p->port), .sin_addr = p->pair.host };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return 3;
        if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0 && errno != EINPROGRESS)
                return 2;
        struct pollfd pfd = { .fd = fd, .events = POLLOUT };
        if (poll(&pfd, 1, WAIT_MSEC) == 0)
                return 1;
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0)
                return 2;
        return 0;
}

static int udp_send(const void *arg) {
        const Probe *p = arg;
        int one = 1;
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return 1;
        if (p->src.s_addr != INADDR_ANY) {
                /* a forged source: root in the namespace can bind anything */
                struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr = p->src };
                if (setsockopt(fd, SOL_IP, IP_FREEBIND, &one, sizeof one) < 0 ||
                    setsockopt(fd, SOL_IP, IP_TRANSPARENT, &one, sizeof one) < 0 ||
                    bind(fd, (struct sockaddr *) &src, sizeof src) < 0)
                        return 2;
        }
        struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(p->port), .sin_addr = p->pair.host };
        if (sendto(fd, p->payload, strlen(p->payload), 0, (struct sockaddr *) &dst, sizeof dst) < 0)
                return 3;
        return 0;
}

static int listen_on(int type, struct in_addr addr, uint16_t *ret_port) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = addr };
        socklen_t len = sizeof sa;
        int fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(RET_NERRNO(bind(fd, (struct sockaddr *) &sa, sizeof sa)));
        if (type == SOCK_STREAM)
                ASSERT_OK(RET_NERRNO(listen(fd, 8)));
        ASSERT_OK(RET_NERRNO(getsockname(fd, (struct sockaddr *) &sa, &len)));
        *ret_port = ntohs(sa.sin_port);
        return fd;
}

/* Accepts one pending connection: true if there was one. */
static bool accepted(int lfd) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
                return false;
        close(fd);
        return true;
}

/* Accepts one pending connection and reads where it was going (conntrack):
 * true if there was one. */
static bool accepted_orig(int lfd, struct sockaddr_in *ret_orig) {
        socklen_t len = sizeof *ret_orig;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
                return false;
        if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, ret_orig, &len) < 0)
                memset(ret_orig, 0, sizeof *ret_orig);
        close(fd);
        return true;
}

/* Reads one datagram within WAIT_MSEC: its length, or -1 if none. */
static ssize_t udp_recv(int fd, char *buf, size_t n, struct in_addr *ret_src) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        struct sockaddr_in from;
        socklen_t len = sizeof from;
        if (poll(&pfd, 1, WAIT_MSEC) <= 0)
                return -1;
        ssize_t k = recvfrom(fd, buf, n - 1, 0, (struct sockaddr *) &from, &len);
        if (k < 0)
                return -1;
        buf[k] = '\0';
        *ret_src = from.sin_addr;
        return k;
}

TEST(sandbox_network) {
        char buf[64];
        struct in_addr src;
        uint16_t tcp_ok, tcp_no, udp_ok;
        int r;

        if (geteuid() != 0)
                test_skip("needs root");
        if (!net_test.registered) {
                atexit(net_test_cleanup);
                net_test.registered = true;
        }
        net_test_cleanup();

        /* own names and a slot of our own, so concurrent runs do not meet */
        unsigned id = (unsigned) getpid() % 100000;
        uint32_t slot = 30000 + (id % 1000) * 2;
        AddrPair pair = pair_of(slot), other = pair_of(slot + 1);
        char prefix[IFNAMSIZ];
        snprintf(prefix, sizeof prefix, "spt%u", id);
        r = netns_new(&net_test.netns_fd);
        if (r == -EPERM)
                test_skip("cannot create a network namespace");
        ASSERT_OK(r);

        snprintf(net_test.link, sizeof net_test.link, "%sh", prefix);
        ASSERT_OK(veth_create(net_test.link, VETH_PEER_DEFAULT, net_test.netns_fd));
        ASSERT_ERRNO(veth_create(net_test.link, VETH_PEER_DEFAULT, net_test.netns_fd), EEXIST);
        ASSERT_TRUE(if_nametoindex(net_test.link) > 0);
        ASSERT_OK(veth_configure_host(net_test.link, &pair));
        ASSERT_OK(veth_configure_peer(net_test.netns_fd, VETH_PEER_DEFAULT, &pair));
        ASSERT_ERRNO(veth_configure_peer(net_test.netns_fd, "nosuchlink", &pair), ENODEV);
        {
                /* the same without a fork, and back in our own namespace afterwards */
                _cleanup_close_ int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
                struct stat before, after;
                ASSERT_TRUE(self >= 0);
                ASSERT_OK(RET_NERRNO(fstat(self, &before)));
                ASSERT_OK(veth_configure_peer_here(net_test.netns_fd, self, VETH_PEER_DEFAULT, &pair));
                ASSERT_ERRNO(veth_configure_peer_here(net_test.netns_fd, self, "nosuchlink", &pair), ENODEV);
                ASSERT_OK(RET_NERRNO(stat("/proc/self/ns/net", &after)));
                ASSERT_EQ(before.st_ino, after.st_ino);
                ASSERT_TRUE(if_nametoindex(net_test.link) > 0);
        }

        Probe probe = { .pair = pair };
        ASSERT_EQ(run_in_ns(check_inside, &probe), 0);

        _cleanup_close_ int tok = listen_on(SOCK_STREAM, pair.host, &tcp_ok);
        _cleanup_close_ int tno = listen_on(SOCK_STREAM, pair.host, &tcp_no);
        _cleanup_close_ int uok = listen_on(SOCK_DGRAM, pair.host, &udp_ok);

        /* without the firewall both ports answer and a forged source gets
         * through: what follows is the firewall's doing, nothing else's */
        probe.port = tcp_no;
        ASSERT_EQ(run_in_ns(tcp_probe, &probe), 0);
        ASSERT_TRUE(accepted(tno));
        Probe spoof = { .pair = pair, .src = other.peer, .port = udp_ok, .payload = "forged" };
        ASSERT_EQ(run_in_ns(udp_send, &spoof), 0);
        ASSERT_TRUE(udp_recv(uok, buf, sizeof buf, &src) > 0);
        ASSERT_STREQ(buf, "forged");
        ASSERT_EQ(src.s_addr, other.peer.s_addr);

        /* the gateway's three ports: DNS (UDP and TCP on one number), proxy (tok), transparent (ttr) */
        uint16_t dns_port, tr_port, udp_no;
        _cleanup_close_ int dns_udp = listen_on(SOCK_DGRAM, pair.host, &dns_port);
        _cleanup_close_ int ttr = listen_on(SOCK_STREAM, pair.host, &tr_port);
        _cleanup_close_ int uno = listen_on(SOCK_DGRAM, pair.host, &udp_no);
        uint16_t udp_gw_port;
        _cleanup_close_ int udp_gw = listen_on(SOCK_DGRAM, pair.host, &udp_gw_port);
        int one = 1;
        ASSERT_OK(RET_NERRNO(setsockopt(udp_gw, SOL_SOCKET, 75 /* SO_RCVMARK */, &one, sizeof one)));
        bool have_rcvprio = setsockopt(udp_gw, SOL_SOCKET, 82 /* SO_RCVPRIORITY, Linux 6.14 */, &one, sizeof one) == 0;
        ASSERT_OK(firewall_new(&net_test.fw));
        snprintf(net_test.table, sizeof net_test.table, "spacetest%u", id);
        FirewallPorts ports = { .dns = dns_port, .proxy = tcp_ok, .transparent = tr_port, .udp = udp_gw_port, .n_udp = 1 };
        FirewallLink fl = { .link = net_test.link, .addr = pair.peer, .gateway = pair.host };
        ASSERT_EQ(firewall_table_exists(net_test.fw, net_test.table), 0);
        ASSERT_OK(firewall_setup(net_test.fw, net_test.table, prefix, &ports, NULL, 0));
        ASSERT_OK(firewall_setup(net_test.fw, net_test.table, prefix, &ports, &fl, 1)); /* rebuilt with the link */
        ASSERT_EQ(firewall_table_exists(net_test.fw, net_test.table), 1);
        ASSERT_OK(firewall_add_link(net_test.fw, net_test.table, &fl)); /* idempotent */

        /* the proxy port of the host end: straight through */
        probe.port = tcp_ok;
        ASSERT_EQ(run_in_ns(tcp_probe, &probe), 0);
        ASSERT_TRUE(accepted(tok));
        /* any other TCP port: redirected to the transparent port, the original destination kept */
        struct sockaddr_in orig;
        probe.port = tcp_no;
        ASSERT_EQ(run_in_ns(tcp_probe, &probe), 0);
        ASSERT_FALSE(accepted(tno));
        ASSERT_TRUE(accepted_orig(ttr, &orig));
        ASSERT_EQ(orig.sin_addr.s_addr, pair.host.s_addr);
        ASSERT_EQ(ntohs(orig.sin_port), tcp_no);

        /* UDP: port 53 goes to the DNS port; a forged source gets nothing; other ports nothing */
        Probe legit = { .pair = pair, .port = 53, .payload = "legit" };
        spoof.port = 53;
        ASSERT_EQ(run_in_ns(udp_send, &spoof), 0);
        ASSERT_EQ(run_in_ns(udp_send, &legit), 0);
        ASSERT_TRUE(udp_recv(dns_udp, buf, sizeof buf, &src) > 0);
        ASSERT_STREQ(buf, "legit");
        ASSERT_EQ(src.s_addr, pair.peer.s_addr);
        ASSERT_TRUE(udp_recv(dns_udp, buf, sizeof buf, &src) < 0); /* the forged one never came */
        /* any other UDP port: redirected to the gateway's UDP port, never to the port it was sent to,
         * with the original destination in the mark (address) and priority (ports) */
        legit.port = udp_no;
        ASSERT_EQ(run_in_ns(udp_send, &legit), 0);
        ASSERT_TRUE(udp_recv(uno, buf, sizeof buf, &src) < 0);
        {
                union {
                        struct cmsghdr align;
                        uint8_t b[256];
                } cm;
                struct pollfd pfd = { .fd = udp_gw, .events = POLLIN };
                struct sockaddr_in from;
                struct iovec iov = { .iov_base = buf, .iov_len = sizeof buf - 1 };
                struct msghdr mh = { .msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov, .msg_iovlen = 1,
                                     .msg_control = cm.b, .msg_controllen = sizeof cm.b };
                uint8_t mark[4] = {}, prio[4] = {};
                bool got_mark = false, got_prio = false;
                ASSERT_EQ(poll(&pfd, 1, WAIT_MSEC), 1);
                ssize_t k = recvmsg(udp_gw, &mh, 0);
                ASSERT_EQ(k, 5);
                ASSERT_EQ(memcmp(buf, "legit", 5), 0);
                ASSERT_EQ(from.sin_addr.s_addr, pair.peer.s_addr);
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_MARK)
                                memcpy(mark, CMSG_DATA(c), 4), got_mark = true;
                        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_PRIORITY)
                                memcpy(prio, CMSG_DATA(c), 4), got_prio = true;
                }
                ASSERT_TRUE(got_mark);
                ASSERT_EQ(memcmp(mark, &pair.host, 4), 0);
                if (have_rcvprio) {
                        uint16_t dport = htons(udp_no);
                        ASSERT_TRUE(got_prio);
                        ASSERT_EQ(memcmp(prio, &from.sin_port, 2), 0);
                        ASSERT_EQ(memcmp(prio + 2, &dport, 2), 0);
                }
        }
        spoof.port = udp_ok;
        ASSERT_EQ(run_in_ns(udp_send, &spoof), 0);
        ASSERT_TRUE(udp_recv(udp_gw, buf, sizeof buf, &src) < 0); /* a forged source gets nowhere */
        ASSERT_TRUE(udp_recv(uok, buf, sizeof buf, &src) < 0);

        /* without its element the link is still caught by the prefix rule */
        ASSERT_OK(firewall_remove_link(net_test.fw, net_test.table, &fl));
        ASSERT_OK(firewall_remove_link(net_test.fw, net_test.table, &fl)); /* idempotent */
        probe.port = tcp_ok;
        ASSERT_EQ(run_in_ns(tcp_probe, &probe), 1);
        ASSERT_FALSE(accepted(tok));
        /* the element added over nfnetlink alone works like the one nft wrote */
        ASSERT_OK(firewall_add_link(net_test.fw, net_test.table, &fl));
        ASSERT_EQ(run_in_ns(tcp_probe, &probe), 0);
        ASSERT_TRUE(accepted(tok));
        ASSERT_OK(firewall_remove_link(net_test.fw, net_test.table, &fl));
        ASSERT_EQ(run_in_ns(tcp_probe, &probe), 1);
        FirewallLink nolink = fl;
        nolink.link = "nosuchlink";
        ASSERT_OK(firewall_remove_link(net_test.fw, net_test.table, &nolink)); /* absent: fine */
        ASSERT_ERRNO(firewall_add_link(net_test.fw, "nosuchtable", &fl), ENOENT);
        snprintf(buf, sizeof buf, "list chain inet %s nosuchchain\n", net_test.table);
        ASSERT_ERRNO(firewall_run(net_test.fw, buf), EPROTO);
        ASSERT_TRUE(strlen(firewall_last_error(net_test.fw)) > 0);

        ASSERT_OK(firewall_teardown(net_test.fw, net_test.table));
        ASSERT_EQ(firewall_table_exists(net_test.fw, net_test.table), 0);
        ASSERT_OK(firewall_teardown(net_test.fw, net_test.table)); /* absent is fine */
        net_test.table[0] = '\0';

        /* by its index (a suspend's link, deleted later, when its name may be taken again) */
        unsigned idx = if_nametoindex(net_test.link);
        ASSERT_TRUE(idx > 0);
        ASSERT_OK(veth_delete_index((int) idx));
        ASSERT_EQ(if_nametoindex(net_test.link), 0);
        ASSERT_ERRNO(veth_delete(net_test.link), ENODEV);
        ASSERT_ERRNO(veth_delete_index((int) idx), ENODEV);
        net_test.link[0] = '\0';
        net_test_cleanup();
}

static bool is_tap(const char *name) {
        char p[96];
        _cleanup_free_ char *flags = NULL;
        if (snprintf(p, sizeof p, "/sys/class/net/%s/tun_flags", name) >= (int) sizeof p ||
            read_full_file(p, 64, &flags, NULL) < 0)
                return false;
        return (strtoul(flags, NULL, 16) & IFF_TAP) != 0;
}

static bool has_mac(const char *name, const char *want) {
        char p[96];
        _cleanup_free_ char *addr = NULL;
        if (snprintf(p, sizeof p, "/sys/class/net/%s/address", name) >= (int) sizeof p ||
            read_full_file(p, 64, &addr, NULL) < 0)
                return false;
        return strncmp(addr, want, strlen(want)) == 0;
}

TEST(tap_device) {
        _cleanup_close_ int nsfd = -EBADF;
        char name[IFNAMSIZ];
        uint8_t mac[6];
        int fd = -EBADF;

        tap_guest_mac(UINT64_C(0x123456), mac);
        ASSERT_TRUE(mac[0] == 0x52 && mac[1] == 0x54 && mac[2] == 0 && mac[3] == 0x12 && mac[4] == 0x34 &&
                    mac[5] == 0x56);
        tap_host_mac(UINT64_C(0x123456), mac);
        ASSERT_TRUE(mac[0] == 0x02 && mac[1] == 0x53 && mac[2] == 0 && mac[3] == 0x12 && mac[4] == 0x34 &&
                    mac[5] == 0x56);
        ASSERT_ERRNO(tap_create("bad name!", 1, &fd), EINVAL);
        ASSERT_ERRNO(tap_create("waytoolongname16", 1, &fd), EINVAL);
        if (geteuid() != 0)
                test_skip("needs root");
        if (access("/dev/net/tun", R_OK | W_OK) < 0)
                test_skip("no /dev/net/tun");

        /* a name of our own; the tap is not persistent, so a failed test leaves none */
        snprintf(name, sizeof name, "spv%ut", (unsigned) getpid() % 100000);
        ASSERT_OK(tap_create(name, UINT64_C(0x123456), &fd));
        ASSERT_TRUE(if_nametoindex(name) > 0);
        ASSERT_TRUE(is_tap(name));
        ASSERT_TRUE(has_mac(name, "02:53:00:12:34:56")); /* the slot's, every time */
        AddrPair pair = pair_of(31000 + (uint32_t) getpid() % 500);
        ASSERT_OK(veth_configure_host(name, &pair)); /* the host end, like a veth's */
        fd = safe_close(fd);
        ASSERT_EQ(if_nametoindex(name), 0U);   /* gone with its last fd */

        /* a leftover link of that name (a veth of an earlier life of the slot) is replaced */
        int r = netns_new(&nsfd);
        if (r == -EPERM)
                test_skip("cannot create a network namespace");
        ASSERT_OK(r);
        ASSERT_OK(veth_create(name, VETH_PEER_DEFAULT, nsfd));
        ASSERT_FALSE(is_tap(name));
        ASSERT_OK(tap_create(name, UINT64_C(0x123456), &fd));
        ASSERT_TRUE(is_tap(name));
        ASSERT_TRUE(has_mac(name, "02:53:00:12:34:56"));
        fd = safe_close(fd);
        ASSERT_EQ(if_nametoindex(name), 0U);
}
