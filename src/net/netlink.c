/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <linux/netfilter/nfnetlink.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fd-util.h"
#include "netlink.h"

/* The ack of a request: an nlmsgerr, possibly with the request echoed and
 * extended-ack attributes; anything longer is truncated and still usable. */
#define NETLINK_REPLY_MAX 8192U

int netlink_open(int *ret_fd) {
        return netlink_open_protocol(NETLINK_ROUTE, ret_fd);
}

int netlink_open_protocol(int protocol, int *ret_fd) {
        _cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol);
        if (fd < 0)
                return -errno;
        struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
        if (bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

void netlink_message_init(NetlinkMessage *m, uint16_t type, uint16_t flags) {
        memset(m, 0, sizeof *m);
        m->hdr.nlmsg_len = NLMSG_LENGTH(0);
        m->hdr.nlmsg_type = type;
        m->hdr.nlmsg_flags = flags;
}

void netlink_message_append(NetlinkMessage *m, const void *data, size_t len) {
        size_t at = NLMSG_ALIGN(m->hdr.nlmsg_len);
        if (m->error < 0)
                return;
        if (len > sizeof m->buf || at + NLMSG_ALIGN(len) > sizeof m->buf) {
                m->error = -ENOBUFS;
                return;
        }
        memset(m->buf + at, 0, NLMSG_ALIGN(len));
        if (len > 0)
                memcpy(m->buf + at, data, len);
        m->hdr.nlmsg_len = (uint32_t) (at + NLMSG_ALIGN(len));
}

void netlink_attr(NetlinkMessage *m, uint16_t type, const void *data, size_t len) {
        size_t at = NLMSG_ALIGN(m->hdr.nlmsg_len);
        if (m->error < 0)
                return;
        if (len > UINT16_MAX - NLA_HDRLEN || at + NLA_ALIGN(NLA_HDRLEN + len) > sizeof m->buf) {
                m->error = -ENOBUFS;
                return;
        }
        struct nlattr *a = (struct nlattr *) (m->buf + at);
        memset(a, 0, NLA_ALIGN(NLA_HDRLEN + len));
        a->nla_type = type;
        a->nla_len = (uint16_t) (NLA_HDRLEN + len);
        if (len > 0)
                memcpy((uint8_t *) a + NLA_HDRLEN, data, len);
        m->hdr.nlmsg_len = (uint32_t) (at + NLA_ALIGN(NLA_HDRLEN + len));
}

void netlink_attr_u32(NetlinkMessage *m, uint16_t type, uint32_t v) {
        netlink_attr(m, type, &v, sizeof v);
}

void netlink_attr_string(NetlinkMessage *m, uint16_t type, const char *s) {
        netlink_attr(m, type, s, strlen(s) + 1);
}

void netlink_nest_begin(NetlinkMessage *m, uint16_t type) {
        if (m->error < 0)
                return;
        if (m->n_nests >= NETLINK_NEST_MAX) {
                m->error = -ENOBUFS;
                return;
        }
        size_t at = NLMSG_ALIGN(m->hdr.nlmsg_len);
        netlink_attr(m, type | NLA_F_NESTED, NULL, 0);
        if (m->error >= 0)
                m->nests[m->n_nests++] = at;
}

void netlink_nest_end(NetlinkMessage *m) {
        if (m->error < 0)
                return;
        if (m->n_nests == 0) {
                m->error = -EINVAL;
                return;
        }
        size_t at = m->nests[--m->n_nests];
        size_t len = m->hdr.nlmsg_len - at;
        if (len > UINT16_MAX) {
                m->error = -ENOBUFS;
                return;
        }
        ((struct nlattr *) (m->buf + at))->nla_len = (uint16_t) len;
}

static uint32_t netlink_seq;

/* Waits for the ack of seq: 0 or the kernel's -errno; an error for any
 * message of [lo, hi] (a batch's begin or end) ends the wait too. */
static int netlink_wait_ack(int fd, uint32_t seq, uint32_t lo, uint32_t hi) {
        uint8_t reply[NETLINK_REPLY_MAX] __attribute__((aligned(NLMSG_ALIGNTO)));
        ssize_t n;

        for (;;) {
                do
                        n = recv(fd, reply, sizeof reply, MSG_TRUNC);
                while (n < 0 && errno == EINTR);
                if (n < 0)
                        return -errno;
                size_t len = MIN((size_t) n, sizeof reply);
                for (struct nlmsghdr *h = (struct nlmsghdr *) reply; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
                        if (h->nlmsg_seq < lo || h->nlmsg_seq > hi)
                                continue;
                        if (h->nlmsg_type == NLMSG_ERROR) {
                                if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr)))
                                        return -EBADMSG;
                                const struct nlmsgerr *e = NLMSG_DATA(h);
                                if (h->nlmsg_seq != seq && e->error == 0)
                                        continue;
                                return e->error > 0 ? -EBADMSG : e->error;
                        }
                        if (h->nlmsg_seq != seq)
                                continue;
                        if (h->nlmsg_type == NLMSG_DONE)
                                return 0;
                }
        }
}

static int netlink_send(int fd, const void *buf, size_t len) {
        struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
        ssize_t n;
        do
                n = sendto(fd, buf, len, 0, (struct sockaddr *) &kernel, sizeof kernel);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        return (size_t) n == len ? 0 : -EIO;
}

int netlink_call(int fd, NetlinkMessage *m) {
        return netlink_call_many(fd, &m, 1);
}

int netlink_call_many(int fd, NetlinkMessage *const *msgs, size_t n) {
        uint8_t reply[NETLINK_REPLY_MAX] __attribute__((aligned(NLMSG_ALIGNTO)));
        struct iovec iov[NETLINK_BATCH_MAX];
        struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
        struct msghdr mh = { .msg_name = &kernel, .msg_namelen = sizeof kernel, .msg_iov = iov };
        int errors[NETLINK_BATCH_MAX] = {};
        bool acked[NETLINK_BATCH_MAX] = {};
        size_t n_acked = 0, total = 0;
        uint32_t lo;
        ssize_t k;

        if (n == 0 || n > NETLINK_BATCH_MAX)
                return -EINVAL;
        lo = netlink_seq + 1;
        for (size_t i = 0; i < n; i++) {
                NetlinkMessage *m = msgs[i];
                if (m->error < 0)
                        return m->error;
                if (m->n_nests != 0)
                        return -EINVAL;
                m->hdr.nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
                m->hdr.nlmsg_seq = ++netlink_seq;
                iov[i] = (struct iovec){ .iov_base = m->buf, .iov_len = NLMSG_ALIGN(m->hdr.nlmsg_len) };
                total += iov[i].iov_len;
        }
        mh.msg_iovlen = n;
        do
                k = sendmsg(fd, &mh, 0);
        while (k < 0 && errno == EINTR);
        if (k < 0)
                return -errno;
        if ((size_t) k != total)
                return -EIO;
        while (n_acked < n) {
                do
                        k = recv(fd, reply, sizeof reply, MSG_TRUNC);
                while (k < 0 && errno == EINTR);
                if (k < 0)
                        return -errno;
                size_t len = MIN((size_t) k, sizeof reply);
                for (struct nlmsghdr *h = (struct nlmsghdr *) reply; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
                        size_t i = h->nlmsg_seq - lo;
                        if (h->nlmsg_seq < lo || i >= n || h->nlmsg_type != NLMSG_ERROR || acked[i])
                                continue;
                        if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr)))
                                return -EBADMSG;
                        const struct nlmsgerr *e = NLMSG_DATA(h);
                        errors[i] = e->error > 0 ? -EBADMSG : e->error;
                        acked[i] = true;
                        n_acked++;
                }
        }
        for (size_t i = 0; i < n; i++)
                if (errors[i] < 0)
                        return errors[i];
        return 0;
}

/* One nfnetlink batch header (begin or end) at p. */
static size_t batch_marker(uint8_t *p, uint16_t type, uint32_t seq, uint16_t res_id) {
        struct nlmsghdr *h = (struct nlmsghdr *) p;
        struct nfgenmsg *g = NLMSG_DATA(h);
        memset(p, 0, NLMSG_SPACE(sizeof *g));
        h->nlmsg_len = NLMSG_LENGTH(sizeof *g);
        h->nlmsg_type = type;
        h->nlmsg_flags = NLM_F_REQUEST;
        h->nlmsg_seq = seq;
        g->nfgen_family = AF_UNSPEC;
        g->version = NFNETLINK_V0;
        g->res_id = htons(res_id);
        return NLMSG_SPACE(sizeof *g);
}

int netlink_call_batch(int fd, NetlinkMessage *m, uint16_t subsys) {
        uint8_t buf[NETLINK_MESSAGE_MAX + 2 * NLMSG_SPACE(sizeof(struct nfgenmsg))]
                __attribute__((aligned(NLMSG_ALIGNTO)));
        size_t at = 0;

        if (m->error < 0)
                return m->error;
        if (m->n_nests != 0)
                return -EINVAL;
        m->hdr.nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
        uint32_t lo = ++netlink_seq;
        at += batch_marker(buf, NFNL_MSG_BATCH_BEGIN, lo, subsys);
        m->hdr.nlmsg_seq = ++netlink_seq;
        memcpy(buf + at, m->buf, m->hdr.nlmsg_len);
        at += NLMSG_ALIGN(m->hdr.nlmsg_len);
        at += batch_marker(buf + at, NFNL_MSG_BATCH_END, ++netlink_seq, subsys);
        int r = netlink_send(fd, buf, at);
        if (r < 0)
                return r;
        return netlink_wait_ack(fd, m->hdr.nlmsg_seq, lo, netlink_seq);
}
