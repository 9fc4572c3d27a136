/* SPDX-License-Identifier: MIT */
/* src/gateway/gateway-client: the worker's side. Forks a real gateway,
 * registers a sandbox on a random loopback /31 (ports above the defaults, so
 * nothing clashes with a running daemon), checks replies and errors, and sees
 * a denied DNS query come back as an event through dispatch. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dns-wire.h"
#include "fd-util.h"
#include "gateway-client.h"
#include "str-util.h"
#include "test.h"

typedef struct Seen {
        unsigned n, n_other_tenant;
        char type[64], sandbox[64], tenant[64], reason[512];
        const char *want_tenant; /* events of another tenant are counted in n_other_tenant */
} Seen;

static void on_event(void *userdata, const char *type, const char *sandbox, const char *tenant, const char *reason,
                     const char *data_json) {
        Seen *s = userdata;
        s->n++;
        snprintf(s->type, sizeof s->type, "%s", strna(type));
        snprintf(s->sandbox, sizeof s->sandbox, "%s", strna(sandbox));
        snprintf(s->reason, sizeof s->reason, "%s", strna(reason));
        snprintf(s->tenant, sizeof s->tenant, "%s", strna(tenant));
        if (s->want_tenant && !streq(strna(tenant), s->want_tenant))
                s->n_other_tenant++;
}

TEST(register_policy_events_unregister) {
        GatewayConfig c;
        _cleanup_(gateway_client_freep) GatewayClient *g = NULL;
        char err[256] = "";
        uint8_t rnd[2];
        struct in_addr host, sb, other;
        Seen seen = {};
        pid_t pid;

        ASSERT_OK(random_bytes(rnd, sizeof rnd));
        host.s_addr = htonl(0x7F000000U | (uint32_t) rnd[0] << 16 | (uint32_t) (rnd[1] & 0xFE) << 8);
        sb.s_addr = htonl(ntohl(host.s_addr) + 1);
        other.s_addr = htonl(ntohl(host.s_addr) + 2);
        ASSERT_OK(gateway_config_default(&c));
        c.dns_port = 20053;
        c.proxy_port = 20080;
        c.transparent_port = 20081;
        ASSERT_OK(gateway_parse_upstream("127.0.0.1:9", &c.upstream_dns));
        ASSERT_OK(gateway_client_start(&c, on_event, &seen, &g));
        pid = gateway_client_pid(g);
        ASSERT_TRUE(pid > 0);

        /* started by root, it runs as nobody, without new privileges */
        if (geteuid() == 0) {
                char path[64], want_uid[64], want_nnp[32];
                _cleanup_free_ char *status = NULL;
                snprintf(path, sizeof path, "/proc/%d/status", (int) pid);
                snprintf(want_uid, sizeof want_uid, "\nUid:\t%u\t%u\t%u\t%u\n", GATEWAY_RUN_AS_DEFAULT,
                         GATEWAY_RUN_AS_DEFAULT, GATEWAY_RUN_AS_DEFAULT, GATEWAY_RUN_AS_DEFAULT);
                snprintf(want_nnp, sizeof want_nnp, "\nNoNewPrivs:\t1\n");
                /* the drop happens in the child right after fork: wait for it */
                for (int i = 0; i < 100; i++) {
                        status = mfree(status);
                        ASSERT_OK(read_full_file(path, 64 * 1024, &status, NULL));
                        if (strstr(status, want_uid))
                                break;
                        usleep(10000);
                }
                ASSERT_TRUE(strstr(status, want_uid) != NULL);
                ASSERT_TRUE(strstr(status, want_nnp) != NULL);
                ASSERT_TRUE(strstr(status, "\nCapEff:\t0000000000000000\n") != NULL);
                /* room for many connections: the fd limit was raised */
                _cleanup_free_ char *limits = NULL;
                snprintf(path, sizeof path, "/proc/%d/limits", (int) pid);
                ASSERT_OK(read_full_file(path, 64 * 1024, &limits, NULL));
                const char *l = strstr(limits, "Max open files");
                ASSERT_NOT_NULL(l);
                char *end = NULL;
                unsigned long soft = strtoul(l + strlen("Max open files"), &end, 10);
                unsigned long hard = strtoul(end, NULL, 10);
                ASSERT_TRUE(soft == hard && soft > 1024); /* the soft limit is the (possibly raised) hard one */
        }

        ASSERT_OK(gateway_client_register(g, "sb-1", "tenant-1", sb, host, "{\"allow\":[\"example.com\"]}", err, sizeof err));
        ASSERT_ERRNO(gateway_client_register(g, "sb-1", "tenant-1", sb, host, NULL, err, sizeof err), EEXIST);
        ASSERT_TRUE(strstr(err, "already registered") != NULL);
        ASSERT_ERRNO(gateway_client_register(g, "sb-2", "tenant-1", other, host, NULL, err, sizeof err), EEXIST);
        /* the same registration again (a retry after the new gateway's sweep took it): awaited, taken as it is */
        int64_t again = 0;
        ASSERT_OK(gateway_client_send_register_again(g, "sb-1", "tenant-1", sb, host, "{\"allow\":[\"example.com\"]}",
                                                     &again));
        ASSERT_TRUE(again > 0);
        ASSERT_OK(gateway_client_wait(g, again, err, sizeof err));
        ASSERT_ERRNO(gateway_client_send_register_again(g, "sb-1", "tenant-1", sb, host, "{not json", &again), EINVAL);
        ASSERT_ERRNO(gateway_client_set_policy(g, "sb-1", "{\"allow\":[\"*.com\"]}", err, sizeof err), EINVAL);
        ASSERT_TRUE(strstr(err, "top-level") != NULL);
        ASSERT_ERRNO(gateway_client_set_policy(g, "sb-1", "{not json", err, sizeof err), EINVAL);
        ASSERT_ERRNO(gateway_client_set_policy(g, "nope", NULL, err, sizeof err), ENOENT);
        ASSERT_OK(gateway_client_set_policy(g, "sb-1", "{\"allow\":[\"example.org\"]}", err, sizeof err));

        /* a denied query from the sandbox's address: NXDOMAIN, and an event */
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr = sb };
        struct sockaddr_in dst = { .sin_family = AF_INET, .sin_addr = host, .sin_port = htons(c.dns_port) };
        uint8_t q[DNS_UDP_MAX], a[DNS_UDP_MAX];
        int len = dns_query_build("example.com", 0x4242, DNS_TYPE_A, q, sizeof q);
        ASSERT_OK(len);
        ASSERT_OK(bind(fd, (struct sockaddr *) &src, sizeof src));
        ASSERT_EQ(sendto(fd, q, (size_t) len, 0, (struct sockaddr *) &dst, sizeof dst), len);
        struct pollfd p = { .fd = fd, .events = POLLIN };
        ASSERT_EQ(poll(&p, 1, 5000), 1);
        ssize_t n = recv(fd, a, sizeof a, 0);
        ASSERT_TRUE(n >= 12);
        ASSERT_EQ(a[3] & 0xF, DNS_RCODE_NXDOMAIN);
        for (int i = 0; i < 50 && seen.n == 0; i++) {
                struct pollfd e = { .fd = gateway_client_fd(g), .events = POLLIN };
                (void) poll(&e, 1, 100);
                ASSERT_OK(gateway_client_dispatch(g));
        }
        ASSERT_EQ(seen.n, 1);
        ASSERT_STREQ(seen.type, "network.deny");
        ASSERT_STREQ(seen.sandbox, "sb-1");
        ASSERT_TRUE(strstr(seen.reason, "example.com") != NULL);

        ASSERT_OK(gateway_client_unregister(g, "sb-1"));
        ASSERT_ERRNO(gateway_client_unregister(g, "sb-1"), ENOENT);
        /* the listener is gone */
        ASSERT_OK(connect(fd, (struct sockaddr *) &dst, sizeof dst));
        ASSERT_EQ(send(fd, q, (size_t) len, 0), len);
        ASSERT_EQ(poll(&p, 1, 5000), 1); /* ICMP port unreachable */
        ASSERT_TRUE(recv(fd, a, sizeof a, 0) < 0);

        g = gateway_client_free(g);
        /* reaped: the pid is no child any more */
        ASSERT_TRUE(waitpid(pid, NULL, WNOHANG) < 0 && errno == ECHILD);
}

static int connect_tcp(struct in_addr addr, uint16_t port) {
        _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = addr, .sin_port = htons(port) };
        if (fd < 0)
                return -errno;
        return connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0 ? -errno : 0;
}

/* Registrations sent ahead (a create's, a branch's children): the gateway
 * answers them in order, replies are matched to their requests whatever the
 * order they are awaited in (and survive a dispatch in between), and until
 * the gateway has taken a registration nothing listens on the host end: a
 * connection is refused there, never let through. */
TEST(registrations_sent_ahead) {
        GatewayConfig c;
        _cleanup_(gateway_client_freep) GatewayClient *g = NULL;
        char err[256] = "";
        uint8_t rnd[2];
        struct in_addr host_a, sb_a, host_b, sb_b, host_c, sb_c;
        int64_t seq_a = 0, seq_b = 0, seq_c = 0;
        Seen seen = {};
        pid_t pid;

        ASSERT_OK(random_bytes(rnd, sizeof rnd));
        host_a.s_addr = htonl(0x7F000000U | (uint32_t) rnd[0] << 16 | (uint32_t) (rnd[1] & 0xF8) << 8);
        sb_a.s_addr = htonl(ntohl(host_a.s_addr) + 1);
        host_b.s_addr = htonl(ntohl(host_a.s_addr) + 2);
        sb_b.s_addr = htonl(ntohl(host_a.s_addr) + 3);
        host_c.s_addr = htonl(ntohl(host_a.s_addr) + 4);
        sb_c.s_addr = htonl(ntohl(host_a.s_addr) + 5);
        ASSERT_OK(gateway_config_default(&c));
        c.dns_port = 20153;
        c.proxy_port = 20180;
        c.transparent_port = 20181;
        ASSERT_OK(gateway_parse_upstream("127.0.0.1:9", &c.upstream_dns));
        ASSERT_OK(gateway_client_start(&c, on_event, &seen, &g));
        pid = gateway_client_pid(g);
        ASSERT_OK(gateway_client_register(g, "warm-up", "t", sb_c, host_c, NULL, err, sizeof err));
        ASSERT_OK(gateway_client_unregister(g, "warm-up"));

        /* the gateway cannot run: the registrations wait in its socket */
        ASSERT_OK(kill(pid, SIGSTOP));
        ASSERT_OK(gateway_client_send_register(g, "sb-a", "t", sb_a, host_a, "{\"allow\":[\"example.com\"]}", &seq_a));
        ASSERT_OK(gateway_client_send_register(g, "sb-b", "t", sb_b, host_b, "{\"allow\":[\"*.com\"]}", &seq_b));
        ASSERT_OK(gateway_client_send_register(g, "sb-c", "t", sb_c, host_c, NULL, &seq_c));
        ASSERT_TRUE(seq_a > 0 && seq_b > seq_a && seq_c > seq_b);
        ASSERT_ERRNO(connect_tcp(host_a, c.proxy_port), ECONNREFUSED);
        ASSERT_ERRNO(connect_tcp(host_a, c.transparent_port), ECONNREFUSED);
        ASSERT_OK(kill(pid, SIGCONT));

        /* replies read by a dispatch are kept for their waiters */
        struct pollfd p = { .fd = gateway_client_fd(g), .events = POLLIN };
        ASSERT_EQ(poll(&p, 1, 5000), 1);
        ASSERT_OK(gateway_client_dispatch(g));
        ASSERT_OK(gateway_client_wait(g, seq_c, err, sizeof err));
        ASSERT_ERRNO(gateway_client_wait(g, seq_b, err, sizeof err), EINVAL);
        ASSERT_TRUE(strstr(err, "top-level") != NULL);
        ASSERT_OK(gateway_client_wait(g, seq_a, err, sizeof err));
        ASSERT_EQ(seen.n, 0U);

        /* registered: its listeners are there; the refused one has none */
        ASSERT_OK(connect_tcp(host_a, c.proxy_port));
        ASSERT_OK(connect_tcp(host_c, c.transparent_port));
        ASSERT_ERRNO(connect_tcp(host_b, c.proxy_port), ECONNREFUSED);
        ASSERT_ERRNO(gateway_client_wait(g, seq_c + 1, err, sizeof err), EINVAL); /* never sent */
        ASSERT_OK(gateway_client_unregister(g, "sb-a"));
        ASSERT_ERRNO(gateway_client_unregister(g, "sb-b"), ENOENT);
        ASSERT_OK(gateway_client_unregister(g, "sb-c"));
}

static void dispatch_until(GatewayClient *g, Seen *seen, unsigned n) {
        for (int i = 0; i < 50 && seen->n < n; i++) {
                struct pollfd e = { .fd = gateway_client_fd(g), .events = POLLIN };
                (void) poll(&e, 1, 100);
                ASSERT_OK(gateway_client_dispatch(g));
        }
}

/* A warm sandbox's new owner: the registration is replaced in place, sent and
 * never awaited, and whatever the sandbox sends after it was written is
 * decided under it even when the gateway had the sandbox's socket ready
 * before it read the control line. Forced here: the gateway is stopped, a
 * query from the sandbox waits in its DNS socket, then the new registration
 * is written, then an allowed query: both are decided under the new one (the
 * allowed name goes to the upstream resolver, the refused one is the new
 * tenant's event). A replacement the gateway refuses removes the sandbox
 * (nothing listens for it any more) and comes as an event. */
TEST(replace_is_applied_before_the_next_decision) {
        GatewayConfig c;
        _cleanup_(gateway_client_freep) GatewayClient *g = NULL;
        _cleanup_close_ int up = -EBADF, fd = -EBADF;
        char err[256] = "";
        uint8_t rnd[2], q[DNS_UDP_MAX], buf[DNS_MSG_MAX];
        struct in_addr host, sb, host2, sb2;
        struct sockaddr_in upa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t ul = sizeof upa;
        Seen seen = { .want_tenant = "taker" };
        int64_t seq;
        pid_t pid;
        int len;

        ASSERT_OK(random_bytes(rnd, sizeof rnd));
        host.s_addr = htonl(0x7F000000U | (uint32_t) rnd[0] << 16 | (uint32_t) (rnd[1] & 0xFC) << 8);
        sb.s_addr = htonl(ntohl(host.s_addr) + 1);
        host2.s_addr = htonl(ntohl(host.s_addr) + 2);
        sb2.s_addr = htonl(ntohl(host.s_addr) + 3);
        /* the upstream resolver: the test's own socket, which sees what the gateway lets through */
        up = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ASSERT_TRUE(up >= 0);
        ASSERT_OK(bind(up, (struct sockaddr *) &upa, sizeof upa));
        ASSERT_OK(getsockname(up, (struct sockaddr *) &upa, &ul));
        ASSERT_OK(gateway_config_default(&c));
        c.dns_port = 20253;
        c.proxy_port = 20280;
        c.transparent_port = 20281;
        c.upstream_dns = upa;
        ASSERT_OK(gateway_client_start(&c, on_event, &seen, &g));
        pid = gateway_client_pid(g);
        ASSERT_OK(gateway_client_register(g, "sb-w", "pool", sb, host, NULL, err, sizeof err));

        fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr = sb };
        struct sockaddr_in dst = { .sin_family = AF_INET, .sin_addr = host, .sin_port = htons(c.dns_port) };
        ASSERT_OK(bind(fd, (struct sockaddr *) &src, sizeof src));

        ASSERT_OK(kill(pid, SIGSTOP));
        len = dns_query_build("first.example.org", 0x1111, DNS_TYPE_A, q, sizeof q);
        ASSERT_OK(len);
        ASSERT_EQ(sendto(fd, q, (size_t) len, 0, (struct sockaddr *) &dst, sizeof dst), len);
        ASSERT_OK(gateway_client_send_replace(g, "sb-w", "taker", sb, host, "{\"allow\":[\"example.com\"]}"));
        len = dns_query_build("example.com", 0x2222, DNS_TYPE_A, q, sizeof q);
        ASSERT_OK(len);
        ASSERT_EQ(sendto(fd, q, (size_t) len, 0, (struct sockaddr *) &dst, sizeof dst), len);
        ASSERT_OK(kill(pid, SIGCONT));

        /* the allowed query reaches the upstream resolver */
        struct pollfd p = { .fd = up, .events = POLLIN };
        ASSERT_EQ(poll(&p, 1, 5000), 1);
        ssize_t n = recv(up, buf, sizeof buf, 0);
        ASSERT_TRUE(n > 12 && memmem(buf, (size_t) n, "\007example\003com\000", 13));
        /* the refused one is the new tenant's */
        dispatch_until(g, &seen, 1);
        ASSERT_EQ(seen.n, 1U);
        ASSERT_STREQ(seen.type, "network.deny");
        ASSERT_TRUE(strstr(seen.reason, "first.example.org") != NULL);
        ASSERT_EQ(seen.n_other_tenant, 0U);
        /* a request awaited after it is matched as before (the unawaited reply was dropped) */
        ASSERT_OK(gateway_client_send_register(g, "sb-2", "taker", sb2, host2, NULL, &seq));
        ASSERT_OK(gateway_client_wait(g, seq, err, sizeof err));

        /* not registered: it is registered afresh */
        ASSERT_OK(gateway_client_unregister(g, "sb-2"));
        ASSERT_OK(gateway_client_send_replace(g, "sb-2", "taker", sb2, host2, NULL));
        ASSERT_OK(gateway_client_set_policy(g, "sb-2", NULL, err, sizeof err)); /* in order: it is there */
        ASSERT_OK(connect_tcp(host2, c.proxy_port));

        /* refused by the gateway: the sandbox is removed, with an event */
        seen.want_tenant = NULL;
        ASSERT_OK(gateway_client_send_replace(g, "sb-w", "taker", sb, host, "{\"allow\":[\"*.com\"]}"));
        dispatch_until(g, &seen, 2);
        ASSERT_EQ(seen.n, 2U);
        ASSERT_STREQ(seen.type, "network.error");
        ASSERT_STREQ(seen.sandbox, "sb-w");
        ASSERT_STREQ(seen.tenant, "taker");
        ASSERT_TRUE(strstr(seen.reason, "no egress") != NULL);
        ASSERT_ERRNO(connect_tcp(host, c.proxy_port), ECONNREFUSED);
        ASSERT_ERRNO(gateway_client_unregister(g, "sb-w"), ENOENT);
        ASSERT_OK(gateway_client_unregister(g, "sb-2"));
}
