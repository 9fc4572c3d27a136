/* SPDX-License-Identifier: MIT */
#pragma once

/* Inside the worker client (worker-client*.c only): the client's state and
 * the request/response plumbing (worker-client.c) that the per-operation
 * files (worker-client-sandbox.c, -agent.c, -ship.c, -info.c) share. */

#include <limits.h>

#include "worker-client.h"
#include "worker-proto.h"


struct WorkerClient {
        char path[108];                 /* local: the worker's socket */
        char agent_dir[PATH_MAX];       /* local: where agents listen */
        Store *store;                   /* cluster: borrowed; NULL = local */
        char *token;                    /* cluster: the token */
        int64_t lost_timeout_usec;      /* cluster: a worker silent this long is not used */
        char target[STORE_NAME_MAX];    /* cluster: the worker the next call goes to */
        char target_address[STORE_WORKER_ADDRESS_MAX];
        bool connect_failed;            /* the last call did not reach the worker at all */
        int reply_timeout_msec;         /* > 0: a call without an answer this long fails (-ETIMEDOUT), whatever its op */
        int fd;
        char fd_worker[STORE_NAME_MAX]; /* whom fd talks to ("" = local) */
        char *buf;
        size_t n, allocated;
};

/* A fresh connection to the current target (cluster, after the hello of
 * cluster-net.h) or to the local worker's socket. */
int worker_client_open_connection(WorkerClient *w, int *ret_fd);

/* A request being written: {"op":NAME, ...} of an op of the table
 * (worker-proto.h), whose row says how long to wait and whether to retry. */
typedef struct WorkerCall {
        WorkerOpKind kind;
        JsonWriter jw;
} WorkerCall;

/* Starts a request {"op":NAME, ...}: the caller adds its keys to c->jw, ends
 * the object (json_w_object_end) and hands it to worker_client_call() or
 * worker_client_send_request(). */
void worker_client_request_begin(WorkerCall *c, WorkerOpKind kind);
/* Sends the request on the client's connection to the current target and
 * reads the reply line within the op's deadline (or the client's reply
 * timeout, if set); an error reply becomes *e. A connection that breaks
 * before the request went out is replaced and the request sent on the new
 * one; once it went out, only an idempotent op is sent again. A deadline
 * passed, or a connection lost after the request went out, is
 * API_UNAVAILABLE saying that the outcome is unknown. ret (may be NULL): the
 * reply. */
int worker_client_call(WorkerClient *w, WorkerCall *c, JsonValue **ret, ApiError *e);
/* Sends the request as one line on fd (a connection of its own: agent
 * stream, template upload). */
int worker_client_send_request(int fd, WorkerCall *c);
/* A reply line's verdict: 0 for {"ok":true}, its code and message as *e
 * otherwise. */
int worker_client_reply_check(const JsonValue *reply, ApiError *e);

/* Cluster: the next call goes to worker name, if it is live. -EHOSTDOWN if
 * it is not (lost, stopped, silent), -ENXIO if it is not registered. Local:
 * a no-op. */
int worker_client_select_worker(WorkerClient *w, const char *name, ApiError *e);
/* Cluster: the next call goes to the worker that holds sandbox id. */
int worker_client_select_sandbox(WorkerClient *w, const char *id, ApiError *e);
/* Cluster: the workers the store knows. */
int worker_client_list_workers(WorkerClient *w, WorkerNode **ret_nodes, size_t *ret_n, ApiError *e);
/* Cluster: the workers the store knows (*ret_nodes) and, best first, the
 * indexes of those that can take a sandbox like like now (*ret_order,
 * *ret_n_order; worker_place()). */
int worker_client_place(WorkerClient *w, const Sandbox *like, WorkerNode **ret_nodes, size_t *ret_n,
                        size_t **ret_order, size_t *ret_n_order, ApiError *e);
