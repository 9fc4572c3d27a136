/* SPDX-License-Identifier: MIT */
#pragma once

/* The veth pair of a sandbox: the host end ("sp-<id-prefix>") stays in the
 * host namespace, the peer is created directly inside the sandbox's network
 * namespace; each end gets one address of a /31, the sandbox's default route
 * goes via the host end, and IPv6 is off inside. */

#include <net/if.h>
#include <stdbool.h>

#include "addr-pool.h"

#define VETH_HOST_PREFIX "sp-"
#define VETH_PEER_DEFAULT "eth0"

/* A link name the kernel accepts and that is safe to quote in an nft script:
 * 1..15 bytes of [A-Za-z0-9_-]. */
bool veth_name_is_valid(const char *name);

/* Creates host_name in the current namespace and its peer peer_name inside
 * the namespace netns_fd, both down and without addresses: -EINVAL on a bad
 * name, -EEXIST if host_name exists. */
int veth_create(const char *host_name, const char *peer_name, int netns_fd);
/* Adds pair->host/31 to host_name, disables IPv6 on it and sets it up. */
int veth_configure_host(const char *host_name, const AddrPair *pair);
/* Inside netns_fd (from a forked child): lo and peer_name up, pair->peer/31 on
 * peer_name, default route via pair->host, IPv6 disabled. */
int veth_configure_peer(int netns_fd, const char *peer_name, const AddrPair *pair);
/* The same without a fork, for a single-threaded caller: enters netns_fd,
 * configures, and returns to self_netns_fd (the caller's own namespace; not
 * getting back aborts, as every later socket would open in the sandbox's). */
int veth_configure_peer_here(int netns_fd, int self_netns_fd, const char *peer_name, const AddrPair *pair);
/* Deletes the pair by its host end (that removes both): -ENODEV if absent. */
int veth_delete(const char *host_name);
/* The same by the host end's index (a name may be taken by a newer link meanwhile; an index is not
 * given again soon): -ENODEV if absent. */
int veth_delete_index(int ifindex);
