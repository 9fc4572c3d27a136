/* SPDX-License-Identifier: MIT */
/* The worker client's questions about the workers: what they offer (the
 * local worker's info; a cluster's workers from the store), the templates
 * the local worker holds and the runtimes and accelerators it can use. */
#include "alloc-util.h"
#include "json.h"
#include "log.h"
#include "str-util.h"
#include "worker-client-internal.h"

/* Cluster: what the store knows of the workers. */
static int cluster_info(WorkerClient *w, char **ret_json, ApiError *e) {
        _cleanup_free_ WorkerNode *nodes = NULL;
        JsonWriter jw;
        size_t n = 0, len;
        int r;

        r = worker_client_list_workers(w, &nodes, &n, e);
        if (r < 0)
                return r;
        int64_t now = store_now_usec(w->store); /* heartbeats are in the store's time */
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "worker", "cluster");
        json_w_key(&jw, "workers");
        json_w_array_begin(&jw);
        for (size_t i = 0; i < n; i++) {
                const WorkerNode *x = &nodes[i];
                bool fresh = x->heartbeat_usec >= now - w->lost_timeout_usec;
                json_w_object_begin(&jw);
                json_w_kv_string(&jw, "name", x->name);
                json_w_kv_string(&jw, "state",
                                 x->state == WORKER_LIVE && !fresh ? "silent" : worker_state_to_string(x->state));
                json_w_kv_string(&jw, "address", x->address);
                json_w_kv_int(&jw, "cpu_millis", x->cpu_millis);
                json_w_kv_int(&jw, "memory_mb", (int64_t) x->memory_mb);
                json_w_kv_int(&jw, "disk_mb", (int64_t) x->disk_mb);
                json_w_kv_string(&jw, "runtimes", x->runtimes);
                json_w_kv_string(&jw, "accelerators", x->accelerators);
                json_w_kv_string(&jw, "templates", x->templates);
                json_w_kv_int(&jw, "sandboxes", x->sandboxes);
                json_w_kv_int(&jw, "heartbeat_age_ms", (now - x->heartbeat_usec) / 1000);
                json_w_object_end(&jw);
        }
        json_w_array_end(&jw);
        json_w_object_end(&jw);
        r = json_w_finish(&jw, ret_json, &len);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "out of memory");
        return 0;
}

/* {"op":OP} to the local worker */
static int call_op(WorkerClient *w, WorkerOpKind op, JsonValue **ret, ApiError *e) {
        WorkerCall call;

        worker_client_request_begin(&call, op);
        json_w_object_end(&call.jw);
        return worker_client_call(w, &call, ret, e);
}

int worker_info(WorkerClient *w, char **ret_json, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        size_t len;
        int r;

        if (w->store)
                return cluster_info(w, ret_json, e);
        r = call_op(w, WORKER_OP_INFO, &reply, e);
        if (r < 0)
                return r;
        r = json_serialize(json_get(reply, "info"), ret_json, &len);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "malformed worker info");
        return 0;
}

static bool list_has(const char *list, const char *item) {
        size_t n = strlen(item);

        for (const char *p = list; p && *p;) {
                size_t l = strcspn(p, ",");
                if (l == n && strneq(p, item, n))
                        return true;
                p += l;
                if (*p == ',')
                        p++;
        }
        return false;
}

int worker_kvm_available(WorkerClient *w, bool *ret, ApiError *e) {
        char runtimes[STORE_WORKER_LIST_MAX], accels[STORE_WORKER_LIST_MAX];
        int r;

        *ret = false;
        if (w->store) {
                _cleanup_free_ WorkerNode *nodes = NULL;
                size_t n = 0;

                r = worker_client_list_workers(w, &nodes, &n, e);
                if (r < 0)
                        return r;
                int64_t now = store_now_usec(w->store);
                for (size_t i = 0; i < n && !*ret; i++)
                        *ret = nodes[i].state == WORKER_LIVE &&
                               nodes[i].heartbeat_usec >= now - w->lost_timeout_usec &&
                               list_has(nodes[i].runtimes, "vm") && list_has(nodes[i].accelerators, "kvm");
                return 0;
        }
        r = worker_runtimes(w, runtimes, sizeof runtimes, accels, sizeof accels, e);
        if (r < 0)
                return r;
        *ret = list_has(runtimes, "vm") && list_has(accels, "kvm");
        return 0;
}

/* Appends the strings of a JSON array to a comma-separated list (what does
 * not fit or is not a plain name is left out); returns how many did not fit. */
static size_t list_append(char *buf, size_t size, const JsonValue *arr) {
        size_t n = strlen(buf), left_out = 0;

        for (size_t i = 0; i < json_array_size(arr); i++) {
                const char *t = json_string(json_array_at(arr, i));
                size_t l = t ? strlen(t) : 0;
                if (l == 0 || strpbrk(t, ", "))
                        continue;
                if (n + l + 2 > size) {
                        left_out++;
                        continue;
                }
                if (n > 0)
                        buf[n++] = ',';
                memcpy(buf + n, t, l + 1);
                n += l;
        }
        return left_out;
}

int worker_templates(WorkerClient *w, char *buf, size_t size, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        static bool warned;
        const JsonValue *arr;
        size_t left_out;
        int r;

        r = call_op(w, WORKER_OP_TEMPLATES, &reply, e);
        if (r < 0)
                return r;
        arr = json_get(reply, "templates");
        if (json_type(arr) != JSON_ARRAY || size == 0)
                return api_error(e, -EBADMSG, API_INTERNAL, "malformed worker reply");
        buf[0] = 0;
        /* template names are plain ([a-z0-9-], @vN): none is left out for that; but one that does
         * not fit is missing from the heartbeat, and the controller ships it to this worker again */
        left_out = list_append(buf, size, arr);
        if (left_out > 0 && !warned) {
                log_warning("%zu of this worker's %zu templates and versions do not fit its heartbeat's list "
                            "(%zu bytes): placement does not see them here, and the controller offers them again",
                            left_out, json_array_size(arr), size);
                warned = true;
        }
        return 0;
}

int worker_runtimes(WorkerClient *w, char *runtimes, size_t runtimes_size, char *accelerators,
                    size_t accelerators_size, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        const JsonValue *info, *vm, *accels;
        bool available = false;
        int r;

        if (w->store || runtimes_size == 0 || accelerators_size == 0)
                return api_error(e, -EINVAL, API_INTERNAL, "worker_runtimes: the local worker only");
        r = call_op(w, WORKER_OP_INFO, &reply, e);
        if (r < 0)
                return r;
        info = json_get(reply, "info");
        if (json_type(json_get(info, "runtimes")) != JSON_ARRAY)
                return api_error(e, -EBADMSG, API_INTERNAL, "malformed worker info");
        runtimes[0] = accelerators[0] = 0;
        list_append(runtimes, runtimes_size, json_get(info, "runtimes"));
        /* hardware acceleration the vm runtime can use (tcg is emulation: not one) */
        vm = json_get(info, "vm");
        accels = json_get(vm, "accelerators");
        if (json_bool(json_get(vm, "available"), &available) >= 0 && available && json_type(accels) == JSON_ARRAY)
                for (size_t i = 0; i < json_array_size(accels); i++) {
                        const char *a = json_string(json_array_at(accels, i));
                        if (a && streq(a, "kvm"))
                                (void) strscpy(accelerators, accelerators_size, "kvm");
                }
        return 0;
}

int worker_health(WorkerClient *w, char **ret_json, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        size_t len;
        int r;

        if (w->store)
                return api_error(e, -EINVAL, API_INTERNAL, "worker_health: the local worker only");
        r = call_op(w, WORKER_OP_HEALTH, &reply, e);
        if (r < 0)
                return r;
        r = json_serialize(json_get(reply, "health"), ret_json, &len);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "malformed worker health");
        return 0;
}
