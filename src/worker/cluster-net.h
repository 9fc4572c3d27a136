/* SPDX-License-Identifier: MIT */
#pragma once

/* cluster-net: the network side of the API ↔ worker boundary, shared by the client
 * (worker-client*.c) and the worker's listener (cluster-listener.c,
 * worker-ship.c): the cluster token, TCP connections with a deadline,
 * bounded line reads and the one-line answers.
 *
 * A connection to a worker's internal listener starts with
 *     {"op":"hello","token":"<cluster token>","worker":"<name expected>"}
 * answered {"ok":true,"worker":"<its name>"} (or an error, then close). Then
 * requests of the ops worker-proto.c marks relayed, one per line; or the
 * listener's own: {"op":"agent","id":"<sandbox>"},
 * answered {"ok":true} after which the connection carries the agent
 * protocol (src/proto) both ways, byte for byte. With cluster TLS
 * (cluster-tls.h) all of it runs inside a mutual TLS 1.3 connection. */

#include "macros.h"
#include "store.h"
#include "cred-crypt.h"

#define CLUSTER_TOKEN_MIN 16U           /* bytes: a token shorter than this is refused */
#define CLUSTER_TOKEN_MAX 1024U
#define WORKER_CONNECT_TIMEOUT_MSEC 2000 /* a dead worker costs a create at most this */
#define WORKER_HELLO_TIMEOUT_MSEC 5000
#define WORKER_HANDSHAKE_LINE_MAX 4096U  /* a hello or agent reply */

/* Reads the token from path: a regular file owned by root (or us), mode 0600
 * or stricter (-EPERM otherwise), printable ASCII without spaces, trailing
 * newline stripped, CLUSTER_TOKEN_MIN..MAX bytes (-EINVAL). Logs why. */
int cluster_token_load(const char *path, char **ret);
/* In time independent of where the two differ (both are hashed first). */
bool cluster_token_equal(const char *a, const char *b);
/* The token's fingerprint: HMAC-SHA256 of a fixed label under the token,
 * its first 16 bytes in hex. The store keeps the cluster's (it tells a
 * process with another token and reveals nothing of the token). */
#define CLUSTER_TOKEN_FINGERPRINT_HEX 32U
int cluster_token_fingerprint(const char *token, char buf[static CLUSTER_TOKEN_FINGERPRINT_HEX + 1]);
/* Records the token's fingerprint as the cluster's if the store has none
 * yet, else compares: -EKEYREJECTED (logged, both fingerprints) if this
 * process's token is not the cluster's; other -errno: the store failed. */
int cluster_token_check(Store *s, const char *token, const char *path);
/* The same for the credentials' master key (cred-crypt.h): its fingerprint
 * is recorded as the store's by the first process that loads one, and a
 * process with another key is refused (-EKEYREJECTED, logged: path and both
 * fingerprints): it would seal values the others cannot open. Accepted too:
 * k's previous key (master_key_previous_file) is the store's (a process
 * ready for a rotation that has not run yet). A process whose key is the
 * one before the store's last rotation is told so. */
int cluster_master_key_check(Store *s, const CredKey *k, const char *path);
/* Frees and wipes. */
char *cluster_token_free(char *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(char *, cluster_token_free);

/* The hello above on a fresh connection, as a client of worker (its name;
 * NULL/"" = whoever listens). -EACCES if refused (*ret_message, may be
 * NULL: why), -EBADMSG for a malformed answer. */
int net_hello(int fd, const char *token, const char *worker, char *ret_message, size_t message_size);
/* Splits "host:port" or "[v6]:port". */
int net_split_host_port(const char *address, char *host, size_t host_size, char *port, size_t port_size);
/* Connects to address within timeout_msec; the fd is blocking, CLOEXEC, TCP_NODELAY. */
int net_connect(const char *address, int timeout_msec, int *ret_fd);
/* net_connect, then (cluster-tls.h, when set up) the TLS handshake with
 * worker (its certificate must name it): the fd returned is the plaintext
 * end. why (may be NULL): a refused handshake's reason. */
int net_connect_worker(const char *address, const char *worker, int timeout_msec, int *ret_fd, char *why,
                       size_t why_size);
/* Listens on address (host:port; host "" or "*" = any). */
int net_listen(const char *address, int backlog, int *ret_fd);
/* Reads up to and excluding '\n', one byte at a time (so nothing after the
 * line is consumed), within timeout_msec. buf is NUL-terminated; -EMSGSIZE
 * if the line does not fit, -ECONNRESET on EOF. */
int net_read_line(int fd, char *buf, size_t size, int timeout_msec, size_t *ret_len);
/* Answers one line {"ok":OK[,"code":...][,"message":...][,"worker":...]}
 * (NULL members are left out); best effort: the peer may be gone. */
void net_reply(int fd, bool ok, const char *code, const char *message, const char *worker);
/* Copies both ways between a and b until both directions ended (EOF is
 * passed on as a shutdown(SHUT_WR)), with a fixed buffer per direction:
 * nothing is buffered beyond it, so a slow reader slows the writer. */
int net_splice_both(int a, int b);
