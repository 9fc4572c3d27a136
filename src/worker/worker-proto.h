/* SPDX-License-Identifier: MIT */
#pragma once

/* The worker protocol (API → worker): one JSON object per line both ways,
 * over the local worker's unix socket or, in a cluster, over the worker
 * host's internal listener (cluster-listener.c, after the hello of
 * cluster-net.h). A request is {"op":"<name>", ...}; its reply is
 * {"ok":true, ...} or {"ok":false,"code":"<api error code>","message":"..."}.
 *
 * The ops are the table in worker-proto.c, the only list of them: their
 * names, who serves each (the worker process or the listener itself),
 * whether a peer may ask for it over the network, whether its reply may be
 * deferred, whether sending it twice is harmless and how long a client
 * waits for its reply. The worker's dispatcher (worker-dispatch.c), the
 * listener's allow-list and the client (worker-client.c) read it. */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "json.h"

#define WORKER_LINE_MAX (1024U * 1024U)

typedef enum WorkerOpKind {
        /* a sandbox's life, served by the worker process */
        WORKER_OP_CREATE,
        WORKER_OP_DESTROY,
        WORKER_OP_PAUSE,
        WORKER_OP_RESUME,
        WORKER_OP_SUSPEND,
        WORKER_OP_START,
        WORKER_OP_CHECKPOINT,
        WORKER_OP_CHECKPOINT_REMOVE,
        WORKER_OP_CHECKPOINT_SIZES,
        WORKER_OP_RESTORE,
        WORKER_OP_BRANCH,
        WORKER_OP_SET_LIMITS,
        WORKER_OP_SET_POLICY,
        WORKER_OP_SET_CREDENTIALS,
        WORKER_OP_TAKE_WARM,
        WORKER_OP_OOM_KILLS,
        WORKER_OP_METRICS,
        WORKER_OP_METRICS_LIVE,
        /* the host's templates and what it offers, served by the worker process */
        WORKER_OP_TEMPLATE_IMPORT,
        WORKER_OP_TEMPLATE_REMOVE,
        WORKER_OP_TEMPLATE_PROMOTE,
        WORKER_OP_VOLUME_CREATE,
        WORKER_OP_VOLUME_REMOVE,
        WORKER_OP_VOLUME_USAGE,
        WORKER_OP_VOLUME_FILE_READ,
        WORKER_OP_VOLUME_FILE_WRITE,
        WORKER_OP_VOLUME_FILE_REMOVE,
        WORKER_OP_LAYERS_CACHED,
        WORKER_OP_LAYER_IDS,
        WORKER_OP_BUILD_LAYER,
        WORKER_OP_BUILD_PUBLISH,
        WORKER_OP_TEMPLATES,
        WORKER_OP_INFO,
        WORKER_OP_HEALTH,
        /* served by the cluster listener itself (cluster-listener.c, worker-ship.c) */
        WORKER_OP_HELLO,
        WORKER_OP_AGENT,
        WORKER_OP_PORT,
        WORKER_OP_SHIP,
        WORKER_OP_RECEIVE,
        WORKER_OP_TEMPLATE_PUT,
        WORKER_OP_BUILD_LAYER_PUT,
        _WORKER_OP_MAX,
        _WORKER_OP_INVALID = -EINVAL,
} WorkerOpKind;

/* What a request must carry besides "op" (its basic shape; the handler
 * validates the values). */
#define WORKER_OP_STRINGS_MAX 2

typedef struct WorkerOp {
        const char *name;
        bool listener;     /* served by the cluster listener, never by the worker process */
        bool relayed;      /* a peer may ask for it over the network: relayed to the worker process */
        bool deferred;     /* its reply may come after later events (a guest that boots) */
        bool idempotent;   /* executing it twice is as once: a client may send it again */
        int deadline_msec; /* a client waits this long for the reply, then fails (503) */
        const char *strings[WORKER_OP_STRINGS_MAX]; /* keys that must be strings */
        const char *object; /* a key that must be an object (NULL: none) */
        const char *array;  /* a key that must be an array (NULL: none) */
} WorkerOp;

const char *worker_op_kind_to_string(WorkerOpKind k);
WorkerOpKind worker_op_kind_from_string(const char *s);
/* The table's row of k (k must be valid). */
const WorkerOp *worker_op(WorkerOpKind k);

/* One decoded request line. */
typedef struct WorkerRequest {
        WorkerOpKind kind;
        JsonValue *json; /* the whole request object */
} WorkerRequest;

/* Decodes a request line (n bytes, no NUL needed): a JSON object whose "op"
 * names an op of the table and that has the keys the op's row asks for.
 * -EBADMSG if the line is not that (err: why), -EOPNOTSUPP for an op that is
 * not in the table (err names it). */
int worker_request_decode(const char *line, size_t n, WorkerRequest *ret, char *err, size_t err_size);
void worker_request_done(WorkerRequest *r);
