/* SPDX-License-Identifier: MIT */
/* The worker client's questions about sandboxes' usage (worker-metrics.c). */
#include <inttypes.h>
#include <stdio.h>

#include "alloc-util.h"
#include "cluster-tls.h"
#include "json.h"
#include "str-util.h"
#include "worker-client-internal.h"

int worker_sandbox_metrics(WorkerClient *w, const char *id, int64_t since_usec, JsonValue **ret, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        WorkerCall call;
        int r;

        r = worker_client_select_sandbox(w, id, e);
        if (r < 0)
                return r;
        worker_client_request_begin(&call, WORKER_OP_METRICS);
        json_w_kv_string(&call.jw, "id", id);
        json_w_kv_int(&call.jw, "since_usec", since_usec);
        json_w_object_end(&call.jw);
        r = worker_client_call(w, &call, &reply, e);
        if (r < 0)
                return r;
        if (json_type(json_get(reply, "samples")) != JSON_ARRAY)
                return api_error(e, -EBADMSG, API_INTERNAL, "the worker sent no samples");
        *ret = TAKE_PTR(reply);
        return 0;
}

static int live_of_current(WorkerClient *w, JsonValue **ret, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        WorkerCall call;
        int r;

        worker_client_request_begin(&call, WORKER_OP_METRICS_LIVE);
        json_w_object_end(&call.jw);
        r = worker_client_call(w, &call, &reply, e);
        if (r < 0)
                return r;
        if (json_type(json_get(reply, "sandboxes")) != JSON_ARRAY)
                return api_error(e, -EBADMSG, API_INTERNAL, "the worker sent no sandboxes");
        *ret = TAKE_PTR(reply);
        return 0;
}

int worker_metrics_live(WorkerClient *w, JsonValue ***ret, size_t *ret_n, ApiError *e) {
        _cleanup_free_ WorkerNode *nodes = NULL;
        JsonValue **replies = NULL;
        size_t n = 0, n_replies = 0;
        int r;

        if (!w->store) { /* local: the one worker */
                replies = new0(JsonValue *, 1);
                if (!replies)
                        return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                r = live_of_current(w, &replies[0], e);
                if (r < 0) {
                        free(replies);
                        return r;
                }
                *ret = replies;
                *ret_n = 1;
                return 0;
        }
        r = worker_client_list_workers(w, &nodes, &n, e);
        if (r < 0)
                return r;
        replies = new0(JsonValue *, n + 1);
        if (!replies)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        for (size_t i = 0; i < n; i++) {
                ApiError ignored = {};
                /* a worker that cannot answer has no live sandboxes to show */
                if (worker_client_select_worker(w, nodes[i].name, &ignored) < 0 ||
                    live_of_current(w, &replies[n_replies], &ignored) < 0)
                        continue;
                n_replies++;
        }
        *ret = replies;
        *ret_n = n_replies;
        return 0;
}

bool worker_client_tls_handshakes(uint64_t *ret_full, uint64_t *ret_resumed) {
        if (!cluster_tls_enabled())
                return false;
        cluster_tls_handshakes(ret_full, ret_resumed);
        return true;
}

int worker_client_tls_metrics(char *buf, size_t size) {
        uint64_t full = 0, resumed = 0;
        int k;

        if (size == 0)
                return -ENOBUFS;
        buf[0] = 0;
        if (!worker_client_tls_handshakes(&full, &resumed))
                return 0;
        k = snprintf(buf, size,
                     "# HELP space_cluster_tls_handshakes_total TLS handshakes of this process with workers, "
                     "by whether a session was resumed.\n"
                     "# TYPE space_cluster_tls_handshakes_total counter\n"
                     "space_cluster_tls_handshakes_total{resumed=\"false\"} %" PRIu64 "\n"
                     "space_cluster_tls_handshakes_total{resumed=\"true\"} %" PRIu64 "\n",
                     full, resumed);
        if (k < 0 || (size_t) k >= size) {
                buf[0] = 0;
                return -ENOBUFS;
        }
        return 0;
}
