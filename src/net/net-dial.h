/* SPDX-License-Identifier: MIT */
#pragma once

/* A connection to a TCP port of a sandbox of this host: to its own address
 * on its link (the slot's peer address, nothing a caller names: never the
 * host, never another sandbox), marked so that the firewall lets the answer
 * through (firewall.h; needs CAP_NET_ADMIN). The ingress's requests and the
 * port forwards, local or through a worker's cluster listener, come this way. */

#include <stdint.h>

#include "addr-pool.h"

#define NET_DIAL_TIMEOUT_MSEC 5000

/* A connected non-blocking socket in *ret_fd, or -ECONNREFUSED, -ETIMEDOUT, ... */
int net_dial_sandbox(const AddrPool *pool, uint32_t slot, uint16_t port, int *ret_fd);
/* The same without waiting: 0 connected, 1 with the connect under way on
 * the non-blocking socket in *ret_fd (wait for POLLOUT, at most
 * NET_DIAL_TIMEOUT_MSEC, then sock_connect_result()). */
int net_dial_sandbox_start(const AddrPool *pool, uint32_t slot, uint16_t port, int *ret_fd);
