/* SPDX-License-Identifier: MIT */
#pragma once

/* A minimal rtnetlink client: one request in a fixed buffer, sent on a
 * NETLINK_ROUTE socket with NLM_F_ACK, the kernel's ack read back as -errno.
 * No allocation, so it is usable in a forked child after setns(). */

#include <stddef.h>
#include <stdint.h>
#include <linux/netlink.h>

#define NETLINK_MESSAGE_MAX 2048U
#define NETLINK_NEST_MAX 4U

typedef struct NetlinkMessage {
        union {
                struct nlmsghdr hdr;
                uint8_t buf[NETLINK_MESSAGE_MAX];
        };
        size_t nests[NETLINK_NEST_MAX];
        size_t n_nests;
        int error; /* first builder error (-ENOBUFS), reported by netlink_call() */
} NetlinkMessage;

/* A NETLINK_ROUTE socket in the caller's current network namespace. */
int netlink_open(int *ret_fd);
/* The same for another netlink protocol (NETLINK_NETFILTER). */
int netlink_open_protocol(int protocol, int *ret_fd);

/* Starts a request of the given type; the family header (ifinfomsg, ifaddrmsg,
 * rtmsg) follows with netlink_message_append(). */
void netlink_message_init(NetlinkMessage *m, uint16_t type, uint16_t flags);
void netlink_message_append(NetlinkMessage *m, const void *data, size_t len);
void netlink_attr(NetlinkMessage *m, uint16_t type, const void *data, size_t len);
void netlink_attr_u32(NetlinkMessage *m, uint16_t type, uint32_t v);
void netlink_attr_string(NetlinkMessage *m, uint16_t type, const char *s);
void netlink_nest_begin(NetlinkMessage *m, uint16_t type);
void netlink_nest_end(NetlinkMessage *m);

/* Sends m with NLM_F_REQUEST|NLM_F_ACK and waits for the ack: 0 or the kernel's -errno. */
int netlink_call(int fd, NetlinkMessage *m);
/* Requests sent in one message (NETLINK_BATCH_MAX at most), each acked: the
 * kernel carries them out in order whatever the others' results; 0 or the
 * -errno of the first that failed. One system call instead of one per
 * request (a sandbox's link takes several). */
#define NETLINK_BATCH_MAX 8U
int netlink_call_many(int fd, NetlinkMessage *const *msgs, size_t n);
/* The same for nfnetlink transactions: m between a batch begin and end of
 * subsystem subsys (NFNL_SUBSYS_NFTABLES), one send, m's ack awaited. */
int netlink_call_batch(int fd, NetlinkMessage *m, uint16_t subsys);
