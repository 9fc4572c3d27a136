/* SPDX-License-Identifier: MIT */
#pragma once

/* Stream-socket plumbing with deadlines, for blocking and non-blocking
 * sockets alike: wait, send all, receive some, and a byte relay both ways
 * (the ingress's Upgrade relay, the API's port forward, the CLI's side of
 * it). Every wait is bounded; every return is 0/count or a -errno. */

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* A listening unix stream socket at path (CLOEXEC; flags may add SOCK_NONBLOCK),
 * mode 0600, in place of whatever socket was there (a stale one of an earlier
 * run); nothing is left at path on failure. */
int sock_listen_unix(const char *path, int flags, int backlog, int *ret_fd);

#define SOCK_FDS_MAX 4
/* One message of the n bytes data (whole, or -EMSGSIZE) carrying the n_fds
 * (at most SOCK_FDS_MAX) fds as SCM_RIGHTS; MSG_NOSIGNAL, EINTR retried. */
int sock_send_fds(int sock, const void *data, size_t n, const int *fds, size_t n_fds);

/* Waits until fd is ready for events (POLLIN/POLLOUT) or timeout_msec (< 0: forever) passed. */
int sock_wait(int fd, short events, int timeout_msec);
/* The same until deadline_msec on mono_msec()'s clock (< 0: forever): -ETIMEDOUT once it passed. */
int sock_wait_until(int fd, short events, int64_t deadline_msec);
/* A non-blocking connect's outcome once fd polled POLLOUT (or POLLERR): 0, or -ECONNREFUSED, ... (SO_ERROR). */
int sock_connect_result(int fd);
/* connect() on the non-blocking fd, waited for until deadline_msec (as
 * sock_wait_until): 0, -ETIMEDOUT, or the connect's -errno. */
int sock_connect_until(int fd, const struct sockaddr *sa, socklen_t len, int64_t deadline_msec);
/* Sends all n bytes (MSG_NOSIGNAL); each stall is bounded by timeout_msec. */
int sock_send_all(int fd, const void *p, size_t n, int timeout_msec);
/* Receives up to n bytes: the count (0 at the peer's end), or -ETIMEDOUT after timeout_msec. */
ssize_t sock_recv_some(int fd, void *buf, size_t n, int timeout_msec);

/* Relays bytes both ways between a and b, first sending what was read past
 * a protocol head on each side (a_pending goes to b, b_pending to a). Each
 * side's half-close is passed on (shutdown(SHUT_WR)); the relay ends when
 * both sides ended, when one hung up both ways (POLLHUP: closed, or shut
 * down by a server that stops), on an error, or when nothing moved for
 * idle_msec. One buffer of buffer_size per direction: a slow reader stalls
 * its writer. Returns 0 at a clean end of both sides, else a -errno. */
int sock_relay(int a, const void *a_pending, size_t a_pending_len, int b, const void *b_pending, size_t b_pending_len,
               size_t buffer_size, int idle_msec);
