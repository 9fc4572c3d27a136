/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "netlink.h"
#include "veth.h"

#define DISABLE_IPV6_ALL "/proc/sys/net/ipv6/conf/all/disable_ipv6"
#define DISABLE_IPV6_DEFAULT "/proc/sys/net/ipv6/conf/default/disable_ipv6"

bool veth_name_is_valid(const char *name) {
        size_t n = name ? strnlen(name, IFNAMSIZ) : 0;
        if (n == 0 || n >= IFNAMSIZ)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = name[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
                        return false;
        }
        return true;
}

int veth_create(const char *host_name, const char *peer_name, int netns_fd) {
        _cleanup_close_ int fd = -EBADF;
        NetlinkMessage m;
        struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
        int r;

        if (!veth_name_is_valid(host_name) || !veth_name_is_valid(peer_name) || netns_fd < 0)
                return -EINVAL;
        r = netlink_open(&fd);
        if (r < 0)
                return r;

        netlink_message_init(&m, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
        netlink_message_append(&m, &ifi, sizeof ifi);
        netlink_attr_string(&m, IFLA_IFNAME, host_name);
        netlink_nest_begin(&m, IFLA_LINKINFO);
        netlink_attr_string(&m, IFLA_INFO_KIND, "veth");
        netlink_nest_begin(&m, IFLA_INFO_DATA);
        netlink_nest_begin(&m, VETH_INFO_PEER);
        netlink_message_append(&m, &ifi, sizeof ifi);
        netlink_attr_string(&m, IFLA_IFNAME, peer_name);
        netlink_attr_u32(&m, IFLA_NET_NS_FD, (uint32_t) netns_fd);
        netlink_nest_end(&m);
        netlink_nest_end(&m);
        netlink_nest_end(&m);
        return netlink_call(fd, &m);
}

static void link_set_up(NetlinkMessage *m, unsigned ifindex) {
        struct ifinfomsg ifi = {
                .ifi_family = AF_UNSPEC,
                .ifi_index = (int) ifindex,
                .ifi_flags = IFF_UP,
                .ifi_change = IFF_UP,
        };
        netlink_message_init(m, RTM_NEWLINK, 0);
        netlink_message_append(m, &ifi, sizeof ifi);
}

static void addr_add(NetlinkMessage *m, unsigned ifindex, struct in_addr local, unsigned prefixlen) {
        struct ifaddrmsg ifa = {
                .ifa_family = AF_INET,
                .ifa_prefixlen = (uint8_t) prefixlen,
                .ifa_scope = RT_SCOPE_UNIVERSE,
                .ifa_index = ifindex,
        };
        netlink_message_init(m, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE);
        netlink_message_append(m, &ifa, sizeof ifa);
        netlink_attr(m, IFA_LOCAL, &local, sizeof local);
        netlink_attr(m, IFA_ADDRESS, &local, sizeof local);
}

static void route_add_default(NetlinkMessage *m, unsigned ifindex, struct in_addr gateway) {
        struct rtmsg rtm = {
                .rtm_family = AF_INET,
                .rtm_table = RT_TABLE_MAIN,
                .rtm_protocol = RTPROT_STATIC,
                .rtm_scope = RT_SCOPE_UNIVERSE,
                .rtm_type = RTN_UNICAST,
        };
        netlink_message_init(m, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE);
        netlink_message_append(m, &rtm, sizeof rtm);
        netlink_attr(m, RTA_GATEWAY, &gateway, sizeof gateway);
        netlink_attr_u32(m, RTA_OIF, ifindex);
}

static int sysctl_write_one(const char *path);

int veth_configure_host(const char *host_name, const AddrPair *pair) {
        _cleanup_close_ int fd = -EBADF;
        char v6[128];
        int r;

        if (!veth_name_is_valid(host_name) || pair->prefixlen != 31)
                return -EINVAL;
        unsigned ifindex = if_nametoindex(host_name);
        if (ifindex == 0)
                return -ENODEV;
        /* no IPv6 on the host end either: not even a link-local address */
        snprintf(v6, sizeof v6, "/proc/sys/net/ipv6/conf/%s/disable_ipv6", host_name);
        r = sysctl_write_one(v6);
        if (r < 0)
                return r;
        r = netlink_open(&fd);
        if (r < 0)
                return r;
        /* one send: the address, then the link up */
        NetlinkMessage addr, up;
        addr_add(&addr, ifindex, pair->host, pair->prefixlen);
        link_set_up(&up, ifindex);
        return netlink_call_many(fd, (NetlinkMessage *const[]){ &addr, &up }, 2);
}

/* Writes "1" to a sysctl file of the current network namespace; a kernel
 * without IPv6 has none of these files, which is as good as disabled. */
static int sysctl_write_one(const char *path) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        return loop_write(fd, "1", 1);
}

/* Runs inside the sandbox namespace (the caller has entered it): no allocation. */
static int configure_peer_entered(const char *peer_name, const AddrPair *pair) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        /* /proc/sys/net follows the namespace of the process that opens it. */
        r = sysctl_write_one(DISABLE_IPV6_ALL);
        if (r < 0)
                return r;
        r = sysctl_write_one(DISABLE_IPV6_DEFAULT);
        if (r < 0)
                return r;
        unsigned lo = if_nametoindex("lo"), ifindex = if_nametoindex(peer_name);
        if (lo == 0 || ifindex == 0)
                return -ENODEV;
        r = netlink_open(&fd);
        if (r < 0)
                return r;
        /* one send, carried out in this order (the default route needs the link up with its address) */
        NetlinkMessage lo_up, addr, up, route;
        link_set_up(&lo_up, lo);
        addr_add(&addr, ifindex, pair->peer, pair->prefixlen);
        link_set_up(&up, ifindex);
        route_add_default(&route, ifindex, pair->host);
        return netlink_call_many(fd, (NetlinkMessage *const[]){ &lo_up, &addr, &up, &route }, 4);
}

static int configure_peer_in_ns(int netns_fd, const char *peer_name, const AddrPair *pair) {
        if (setns(netns_fd, CLONE_NEWNET) < 0)
                return -errno;
        return configure_peer_entered(peer_name, pair);
}

int veth_configure_peer_here(int netns_fd, int self_netns_fd, const char *peer_name, const AddrPair *pair) {
        int r;

        if (!veth_name_is_valid(peer_name) || netns_fd < 0 || self_netns_fd < 0 || pair->prefixlen != 31)
                return -EINVAL;
        if (setns(netns_fd, CLONE_NEWNET) < 0)
                return -errno;
        r = configure_peer_entered(peer_name, pair);
        /* staying in a sandbox's namespace would put every later socket there */
        if (setns(self_netns_fd, CLONE_NEWNET) < 0)
                abort();
        return r;
}

int veth_configure_peer(int netns_fd, const char *peer_name, const AddrPair *pair) {
        int pipefd[2];
        if (!veth_name_is_valid(peer_name) || netns_fd < 0 || pair->prefixlen != 31)
                return -EINVAL;
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        _cleanup_close_ int rfd = pipefd[0], wfd = pipefd[1];

        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                int r = configure_peer_in_ns(netns_fd, peer_name, pair);
                (void) !write(wfd, &r, sizeof r);
                _exit(r < 0 ? 1 : 0);
        }
        wfd = safe_close(wfd);

        int r = 0, status;
        ssize_t n = loop_read(rfd, &r, sizeof r);
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (n != (ssize_t) sizeof r)
                return -EPROTO;
        if (r > 0)
                return -EPROTO;
        return r;
}

/* RTM_DELLINK of the link of index ifindex, or (ifindex 0) of name. */
static int dellink(int ifindex, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        NetlinkMessage m;
        struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC, .ifi_index = ifindex };
        int r;

        r = netlink_open(&fd);
        if (r < 0)
                return r;
        netlink_message_init(&m, RTM_DELLINK, 0);
        netlink_message_append(&m, &ifi, sizeof ifi);
        if (name)
                netlink_attr_string(&m, IFLA_IFNAME, name);
        return netlink_call(fd, &m);
}

int veth_delete_index(int ifindex) {
        if (ifindex <= 0)
                return -EINVAL;
        return dellink(ifindex, NULL);
}

int veth_delete(const char *host_name) {
        if (!veth_name_is_valid(host_name))
                return -EINVAL;
        return dellink(0, host_name);
}
