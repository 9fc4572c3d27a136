/* SPDX-License-Identifier: MIT */
/* The table of worker ops (worker-proto.h) and the decoder of a request line. */
#include <assert.h>
#include <stdio.h>

#include "macros.h"
#include "str-util.h"
#include "worker-proto.h"

#define SEC_MSEC 1000
#define MIN_MSEC (60 * SEC_MSEC)

/* Deadlines: what the op may take on a loaded host, not what it takes idle. A
 * vm create, start or restore boots a guest (up to two minutes on TCG, and a
 * first create of a template boots twice); a branch does that for each
 * child; a template import unpacks a tar; a checkpoint may save a machine's
 * memory. The rest is bookkeeping on the host: short, so that a stopped or
 * wedged worker is reported at once. */
static const WorkerOp ops[_WORKER_OP_MAX] = {
        [WORKER_OP_CREATE] = { "create", .relayed = true, .deferred = true, .deadline_msec = 5 * MIN_MSEC,
                               .object = "sandbox" },
        [WORKER_OP_DESTROY] = { "destroy", .relayed = true, .idempotent = true, .deadline_msec = 1 * MIN_MSEC,
                                .strings = { "id" } },
        [WORKER_OP_PAUSE] = { "pause", .relayed = true, .idempotent = true, .deadline_msec = 30 * SEC_MSEC,
                              .strings = { "id" } },
        /* a vm resumed from suspend loads its saved machine first: as long as a start */
        [WORKER_OP_RESUME] = { "resume", .relayed = true, .idempotent = true, .deadline_msec = 5 * MIN_MSEC,
                               .strings = { "id" } },
        [WORKER_OP_SUSPEND] = { "suspend", .relayed = true, .deadline_msec = 5 * MIN_MSEC, .strings = { "id" } },
        [WORKER_OP_START] = { "start", .relayed = true, .deferred = true, .deadline_msec = 5 * MIN_MSEC,
                              .object = "sandbox" },
        [WORKER_OP_CHECKPOINT] = { "checkpoint", .relayed = true, .deadline_msec = 10 * MIN_MSEC,
                                   .strings = { "id", "checkpoint" } },
        [WORKER_OP_CHECKPOINT_REMOVE] = { "checkpoint_remove", .relayed = true, .idempotent = true,
                                          .deadline_msec = 1 * MIN_MSEC, .strings = { "id", "checkpoint" } },
        [WORKER_OP_CHECKPOINT_SIZES] = { "checkpoint_sizes", .relayed = true, .idempotent = true,
                                         .deadline_msec = 30 * SEC_MSEC, .strings = { "id" } },
        [WORKER_OP_RESTORE] = { "restore", .relayed = true, .deferred = true, .deadline_msec = 5 * MIN_MSEC,
                                .strings = { "checkpoint" }, .object = "sandbox" },
        [WORKER_OP_BRANCH] = { "branch", .relayed = true, .deferred = true, .deadline_msec = 10 * MIN_MSEC,
                               .strings = { "source" }, .array = "sandboxes" },
        [WORKER_OP_SET_LIMITS] = { "set_limits", .relayed = true, .idempotent = true, .deadline_msec = 30 * SEC_MSEC,
                                   .object = "sandbox" },
        [WORKER_OP_SET_POLICY] = { "set_policy", .relayed = true, .idempotent = true, .deadline_msec = 30 * SEC_MSEC,
                                   .strings = { "id" } },
        [WORKER_OP_SET_CREDENTIALS] = { "set_credentials", .relayed = true, .idempotent = true,
                                        .deadline_msec = 30 * SEC_MSEC, .strings = { "id" } },
        [WORKER_OP_TAKE_WARM] = { "take_warm", .relayed = true, .idempotent = true, .deadline_msec = 30 * SEC_MSEC,
                                  .object = "sandbox" },
        /* how many processes the OOM killer ended in the sandbox so far (an exec's end) */
        [WORKER_OP_OOM_KILLS] = { "oom_kills", .relayed = true, .idempotent = true, .deadline_msec = 20 * SEC_MSEC,
                                  .strings = { "id" } },
        /* a sandbox's usage series since a time; the latest sample of every live sandbox (worker-metrics.c) */
        [WORKER_OP_METRICS] = { "metrics", .relayed = true, .idempotent = true, .deadline_msec = 20 * SEC_MSEC,
                                .strings = { "id" } },
        [WORKER_OP_METRICS_LIVE] = { "metrics_live", .relayed = true, .idempotent = true,
                                     .deadline_msec = 20 * SEC_MSEC },
        /* not relayed: its tar path would be a path on this host, chosen by the peer
         * (template_put brings the tar itself) */
        [WORKER_OP_TEMPLATE_IMPORT] = { "template_import", .deadline_msec = 10 * MIN_MSEC, .strings = { "name", "tar" } },
        [WORKER_OP_TEMPLATE_REMOVE] = { "template_remove", .relayed = true, .idempotent = true,
                                        .deadline_msec = 1 * MIN_MSEC, .strings = { "name" } },
        /* templates/<name> becomes its version name@vN; a host without the version drops its stale copy */
        [WORKER_OP_TEMPLATE_PROMOTE] = { "template_promote", .relayed = true, .idempotent = true,
                                         .deadline_msec = 1 * MIN_MSEC, .strings = { "name" } },
        /* a volume's subvolume on this host's pool (worker-volume.c); a create of an id made before fails */
        [WORKER_OP_VOLUME_CREATE] = { "volume_create", .relayed = true, .deadline_msec = 1 * MIN_MSEC,
                                      .strings = { "id" } },
        [WORKER_OP_VOLUME_REMOVE] = { "volume_remove", .relayed = true, .idempotent = true,
                                      .deadline_msec = 1 * MIN_MSEC, .strings = { "id" } },
        [WORKER_OP_VOLUME_USAGE] = { "volume_usage", .relayed = true, .idempotent = true,
                                     .deadline_msec = 20 * SEC_MSEC, .strings = { "id" } },
        /* a volume's files without a sandbox (worker-volume-files.c); a write replaces the whole file */
        [WORKER_OP_VOLUME_FILE_READ] = { "volume_file_read", .relayed = true, .idempotent = true,
                                         .deadline_msec = 30 * SEC_MSEC, .strings = { "id", "path" } },
        [WORKER_OP_VOLUME_FILE_WRITE] = { "volume_file_write", .relayed = true, .idempotent = true,
                                          .deadline_msec = 30 * SEC_MSEC, .strings = { "id", "path" } },
        [WORKER_OP_VOLUME_FILE_REMOVE] = { "volume_file_remove", .relayed = true, .deadline_msec = 30 * SEC_MSEC,
                                           .strings = { "id", "path" } },
        /* which of an image's layers (by cache key) the layer cache holds: a pull skips them */
        [WORKER_OP_LAYERS_CACHED] = { "layers_cached", .relayed = true, .idempotent = true, .deadline_msec = 20 * SEC_MSEC,
                                      .array = "keys" },
        /* a build's COPY --chown: the ids of user and group names in a layer's etc/passwd and etc/group */
        [WORKER_OP_LAYER_IDS] = { "layer_ids", .relayed = true, .idempotent = true, .deadline_msec = 20 * SEC_MSEC,
                                  .strings = { "key" } },
        /* a Dockerfile build's step and its template (build-layer.c); relayed without "tar" only
         * (a path on this host: the listener refuses it from a peer, whose files come with
         * build_layer_put) */
        [WORKER_OP_BUILD_LAYER] = { "build_layer", .relayed = true, .deadline_msec = 10 * MIN_MSEC,
                                    .strings = { "key", "from" } },
        [WORKER_OP_BUILD_PUBLISH] = { "build_publish", .relayed = true, .deadline_msec = 2 * MIN_MSEC,
                                      .strings = { "key", "name" } },
        [WORKER_OP_TEMPLATES] = { "templates", .relayed = true, .idempotent = true, .deadline_msec = 20 * SEC_MSEC },
        [WORKER_OP_INFO] = { "info", .relayed = true, .idempotent = true, .deadline_msec = 20 * SEC_MSEC },
        /* the local worker's parts, for /healthz and /readyz (which ask with a deadline of their own) */
        [WORKER_OP_HEALTH] = { "health", .relayed = true, .idempotent = true, .deadline_msec = 5 * SEC_MSEC },
        /* the first line of a connection to the listener (cluster-net.h) */
        [WORKER_OP_HELLO] = { "hello", .listener = true, .deadline_msec = 5 * SEC_MSEC, .strings = { "token" } },
        /* the connection becomes the sandbox agent's stream */
        [WORKER_OP_AGENT] = { "agent", .listener = true, .deadline_msec = 10 * SEC_MSEC, .strings = { "id" } },
        /* the connection becomes a TCP stream to a port of the sandbox (a forward or the ingress of an
         * API server elsewhere): {"id","slot","port"} */
        [WORKER_OP_PORT] = { "port", .listener = true, .deadline_msec = 10 * SEC_MSEC, .strings = { "id" } },
        /* this host sends one of its subvolumes to another (worker-ship.c) */
        [WORKER_OP_SHIP] = { "ship", .listener = true, .deadline_msec = 10 * MIN_MSEC },
        /* another host sends one: the connection is the stream */
        [WORKER_OP_RECEIVE] = { "receive", .listener = true, .deadline_msec = 10 * MIN_MSEC },
        /* a template's tar streamed by an API server, then imported here */
        [WORKER_OP_TEMPLATE_PUT] = { "template_put", .listener = true, .deadline_msec = 10 * MIN_MSEC,
                                     .strings = { "name" } },
        /* a build step's files (a tar) streamed by an API server, then its build_layer here */
        [WORKER_OP_BUILD_LAYER_PUT] = { "build_layer_put", .listener = true, .deadline_msec = 10 * MIN_MSEC,
                                        .strings = { "key", "from" } },
};

const char *worker_op_kind_to_string(WorkerOpKind k) {
        if (k < 0 || k >= _WORKER_OP_MAX)
                return NULL;
        return ops[k].name;
}

WorkerOpKind worker_op_kind_from_string(const char *s) {
        if (!s)
                return _WORKER_OP_INVALID;
        for (int i = 0; i < _WORKER_OP_MAX; i++)
                if (streq(ops[i].name, s))
                        return (WorkerOpKind) i;
        return _WORKER_OP_INVALID;
}

const WorkerOp *worker_op(WorkerOpKind k) {
        assert(k >= 0 && k < _WORKER_OP_MAX);
        return &ops[k];
}

/* The request has what op asks for. */
static int check_shape(const WorkerOp *op, const JsonValue *req, char *err, size_t err_size) {
        for (size_t i = 0; i < ELEMENTSOF(op->strings) && op->strings[i]; i++)
                if (json_type(json_get(req, op->strings[i])) != JSON_STRING) {
                        snprintf(err, err_size, "'%s' needs '%s' (a string)", op->name, op->strings[i]);
                        return -EBADMSG;
                }
        if (op->object && json_type(json_get(req, op->object)) != JSON_OBJECT) {
                snprintf(err, err_size, "'%s' needs '%s' (an object)", op->name, op->object);
                return -EBADMSG;
        }
        if (op->array && json_type(json_get(req, op->array)) != JSON_ARRAY) {
                snprintf(err, err_size, "'%s' needs '%s' (an array)", op->name, op->array);
                return -EBADMSG;
        }
        return 0;
}

int worker_request_decode(const char *line, size_t n, WorkerRequest *ret, char *err, size_t err_size) {
        _cleanup_json_ JsonValue *v = NULL;
        char why[128] = "";
        const JsonValue *op;
        WorkerOpKind k;
        int r;

        if (err_size > 0)
                err[0] = 0;
        if (n > WORKER_LINE_MAX) {
                snprintf(err, err_size, "the request is longer than %u bytes", WORKER_LINE_MAX);
                return -EBADMSG;
        }
        if (json_parse(line, n, &v, why, sizeof why) < 0) {
                snprintf(err, err_size, "not JSON: %s", why);
                return -EBADMSG;
        }
        if (json_type(v) != JSON_OBJECT) {
                snprintf(err, err_size, "not a JSON object");
                return -EBADMSG;
        }
        op = json_get(v, "op");
        if (json_type(op) != JSON_STRING) {
                snprintf(err, err_size, "no \"op\" string");
                return -EBADMSG;
        }
        k = worker_op_kind_from_string(json_string(op));
        if (k < 0 || strlen(json_string(op)) != json_string_len(op)) {
                snprintf(err, err_size, "unknown worker op '%.64s'", json_string(op));
                return -EOPNOTSUPP;
        }
        r = check_shape(&ops[k], v, err, err_size);
        if (r < 0)
                return r;
        *ret = (WorkerRequest){ .kind = k, .json = TAKE_PTR(v) };
        return 0;
}

void worker_request_done(WorkerRequest *r) {
        if (!r)
                return;
        r->json = json_free(r->json);
        r->kind = _WORKER_OP_INVALID;
}
