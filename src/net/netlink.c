/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fd-util.h"
#include "netlink.h"

/* The ack of a request: an nlmsgerr, possibly with the request echoed and
 * extended-ack attributes; anything longer is truncated and still usable. */
#define NETLINK_REPLY_MAX 8192U

int netlink_open(int *ret_fd) {
        _cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
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

int netlink_call(int fd, NetlinkMessage *m) {
        static uint32_t seq;
        uint8_t reply[NETLINK_REPLY_MAX] __attribute__((aligned(NLMSG_ALIGNTO)));

        if (m->error < 0)
                return m->error;
        if (m->n_nests != 0)
                return -EINVAL;
        m->hdr.nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
        m->hdr.nlmsg_seq = ++seq;

        struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
        ssize_t n;
        do
                n = sendto(fd, m->buf, m->hdr.nlmsg_len, 0, (struct sockaddr *) &kernel, sizeof kernel);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        if ((size_t) n != m->hdr.nlmsg_len)
                return -EIO;

        for (;;) {
                do
                        n = recv(fd, reply, sizeof reply, MSG_TRUNC);
                while (n < 0 && errno == EINTR);
                if (n < 0)
                        return -errno;
                size_t len = MIN((size_t) n, sizeof reply);
                for (struct nlmsghdr *h = (struct nlmsghdr *) reply; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
                        if (h->nlmsg_seq != m->hdr.nlmsg_seq)
                                continue;
                        if (h->nlmsg_type == NLMSG_ERROR) {
                                if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr)))
                                        return -EBADMSG;
                                const struct nlmsgerr *e = NLMSG_DATA(h);
                                return e->error > 0 ? -EBADMSG : e->error;
                        }
                        if (h->nlmsg_type == NLMSG_DONE)
                                return 0;
                }
        }
}
