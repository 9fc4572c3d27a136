/* SPDX-License-Identifier: MIT */
/* The worker client's volumes: made, removed and measured on the worker
 * that holds them (a volume's row names it; "" is the local worker), and in
 * a cluster the worker a new one goes to. */
#include <inttypes.h>

#include "alloc-util.h"
#include "json.h"
#include "str-util.h"
#include "worker-client-internal.h"
#include "worker-placement.h"
#include "worker-proto.h"

static int call_volume(WorkerClient *w, WorkerOpKind op, const char *worker, const char *id, uint64_t size_mb,
                       const char *source, bool read_only, JsonValue **ret, ApiError *e) {
        WorkerCall call;
        int r = worker_client_select_worker(w, worker, e);

        if (r < 0)
                return r;
        worker_client_request_begin(&call, op);
        json_w_kv_string(&call.jw, "id", id);
        if (size_mb > 0) {
                json_w_key(&call.jw, "size_mb");
                json_w_uint(&call.jw, size_mb);
        }
        if (source)
                json_w_kv_string(&call.jw, "source", source);
        if (read_only)
                json_w_kv_bool(&call.jw, "read_only", true);
        json_w_object_end(&call.jw);
        return worker_client_call(w, &call, ret, e);
}

int worker_volume_place(WorkerClient *w, uint64_t size_mb, char ret_worker[static STORE_NAME_MAX], ApiError *e) {
        _cleanup_free_ WorkerNode *nodes = NULL;
        _cleanup_free_ size_t *order = NULL;
        size_t n = 0, n_order = 0;
        Sandbox like = { .runtime = "ns", .disk_mb = size_mb };
        int r;

        if (!w->store) {
                ret_worker[0] = 0;
                return 0;
        }
        r = worker_client_place(w, &like, &nodes, &n, &order, &n_order, e);
        if (r < 0)
                return r;
        if (n_order == 0)
                return api_error(e, -ENOSPC, API_INSUFFICIENT_STORAGE,
                                 "no live worker's storage pool has room for a volume of %" PRIu64 " MiB", size_mb);
        return strscpy(ret_worker, STORE_NAME_MAX, nodes[order[0]].name) < 0 ? -ENAMETOOLONG : 0;
}

int worker_volume_create(WorkerClient *w, const char *worker, const char *id, uint64_t size_mb, ApiError *e) {
        return call_volume(w, WORKER_OP_VOLUME_CREATE, worker, id, size_mb, NULL, false, NULL, e);
}

int worker_volume_clone(WorkerClient *w, const char *worker, const char *source_id, const char *id, uint64_t size_mb,
                        bool read_only, ApiError *e) {
        return call_volume(w, WORKER_OP_VOLUME_CREATE, worker, id, size_mb, source_id, read_only, NULL, e);
}

int worker_volume_remove(WorkerClient *w, const char *worker, const char *id, ApiError *e) {
        return call_volume(w, WORKER_OP_VOLUME_REMOVE, worker, id, 0, NULL, false, NULL, e);
}

int worker_volume_usage(WorkerClient *w, const char *worker, const char *id, uint64_t *ret_used_bytes, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        int r = call_volume(w, WORKER_OP_VOLUME_USAGE, worker, id, 0, NULL, false, &reply, e);

        if (r < 0)
                return r;
        if (json_uint64(json_get(reply, "used_bytes"), ret_used_bytes) < 0)
                return api_error(e, -EBADMSG, API_INTERNAL, "malformed worker reply");
        return 0;
}

static int call_file(WorkerClient *w, WorkerOpKind op, const char *worker, const char *id, const char *path,
                     const char *data_b64, const char *flag, JsonValue **ret, ApiError *e) {
        WorkerCall call;
        int r = worker_client_select_worker(w, worker, e);

        if (r < 0)
                return r;
        worker_client_request_begin(&call, op);
        json_w_kv_string(&call.jw, "id", id);
        json_w_kv_string(&call.jw, "path", path);
        if (data_b64)
                json_w_kv_string(&call.jw, "data_b64", data_b64);
        if (flag)
                json_w_kv_bool(&call.jw, flag, true);
        json_w_object_end(&call.jw);
        return worker_client_call(w, &call, ret, e);
}

int worker_volume_file_read(WorkerClient *w, const char *worker, const char *id, const char *path, JsonValue **ret,
                            ApiError *e) {
        return call_file(w, WORKER_OP_VOLUME_FILE_READ, worker, id, path, NULL, NULL, ret, e);
}

int worker_volume_file_stat(WorkerClient *w, const char *worker, const char *id, const char *path, JsonValue **ret,
                            ApiError *e) {
        return call_file(w, WORKER_OP_VOLUME_FILE_READ, worker, id, path, NULL, "stat", ret, e);
}

int worker_volume_mkdir(WorkerClient *w, const char *worker, const char *id, const char *path, JsonValue **ret,
                        ApiError *e) {
        return call_file(w, WORKER_OP_VOLUME_FILE_WRITE, worker, id, path, "", "dir", ret, e);
}

int worker_volume_file_write(WorkerClient *w, const char *worker, const char *id, const char *path,
                             const char *data_b64, JsonValue **ret, ApiError *e) {
        return call_file(w, WORKER_OP_VOLUME_FILE_WRITE, worker, id, path, data_b64, NULL, ret, e);
}

int worker_volume_file_remove(WorkerClient *w, const char *worker, const char *id, const char *path, ApiError *e) {
        return call_file(w, WORKER_OP_VOLUME_FILE_REMOVE, worker, id, path, NULL, NULL, NULL, e);
}
