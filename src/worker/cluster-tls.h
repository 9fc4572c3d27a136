/* SPDX-License-Identifier: MIT */
#pragma once

/* cluster-tls: mutual TLS 1.3 under the worker protocol (cluster-net.h).
 * In the transport, not in its callers: a connection is handshaken, then a
 * relay thread of its own moves the bytes between the TLS connection and one
 * end of a socketpair, and the caller gets the other end. Everything above
 * the fd (hello, line requests, agent and ship streams, shutdown(SHUT_WR) as
 * the end of a stream) is unchanged.
 *
 * Both ends present a certificate signed by the cluster CA. A client checks
 * the worker's certificate names the worker it wants (subjectAltName DNS =
 * worker_name); the listener takes any certificate of the CA (API servers,
 * controllers, other workers). The cluster token stays as a second factor
 * inside the TLS connection.
 *
 * Each side keeps one context for the process, made again when one of the
 * three files changed (its inode, size, mtime or ctime; looked at for every
 * new connection, so a rotation needs no restart and no signal). A worker
 * issues one TLS 1.3 ticket per connection, under keys of that context (in
 * memory only); a client keeps the last ticket of each peer (worker name
 * and address, TLS_PEERS_MAX of them) and offers it on the next connection
 * to the same peer: a resumed handshake, no certificates sent again. Both
 * are dropped with their context: after a certificate or CA change every
 * handshake is a full one, verified against the files as they are now; so
 * is the first after an hour of resumptions from one full handshake. No
 * early data (0-RTT). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Once per process, before any connection: the files (NULL/"" = no TLS);
 * they are loaded once here to fail early (-errno, logged). */
int cluster_tls_setup(const char *cert, const char *key, const char *ca);
bool cluster_tls_enabled(void);
/* As a client of worker (its name; NULL/"" = the CA alone is checked) at
 * address (the session cache's key with the name; NULL: no resumption):
 * the handshake on fd (consumed, also on failure), *ret_fd the plaintext
 * end. -EPROTO on a refused handshake (why: in why). */
int cluster_tls_client(int fd, const char *worker, const char *address, int *ret_fd, char *why, size_t why_size);
/* As the listener: the same, a client certificate of the CA required. */
int cluster_tls_server(int fd, int *ret_fd, char *why, size_t why_size);
/* The client handshakes of this process so far: full ones, resumed ones. */
void cluster_tls_handshakes(uint64_t *ret_full, uint64_t *ret_resumed);
