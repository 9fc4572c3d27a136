/* SPDX-License-Identifier: MIT */
/* The worker process's dispatcher: a request line decoded against the table
 * of ops (worker-proto.h) goes to its op's handler, which writes the reply
 * (or defers it: w->reply_deferred). The handlers of the host's own ops
 * (create, destroy, templates, info) are here; a sandbox's lifecycle ops are
 * in worker-lifecycle.c, credentials in worker-cred.c. */
#include <limits.h>
#include <stdio.h>

#include "alloc-util.h"
#include "cgroup.h"
#include "log.h"
#include "oci.h"
#include "str-util.h"
#include "worker-internal.h"
#include "worker-proto.h"

typedef void (*WorkerOpHandler)(Worker *w, const JsonValue *req, JsonWriter *jw);

const char *worker_req_id(const JsonValue *req, const char *key, ApiError *e) {
        const char *id = json_string(json_get(req, key));

        if (!id || !id_valid(id)) {
                api_error(e, -EINVAL, API_INVALID_ARGUMENT, "bad or missing '%s'", key);
                return NULL;
        }
        return id;
}

void worker_reply_error(JsonWriter *jw, const ApiError *e) {
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", false);
        json_w_kv_string(jw, "code", api_error_code_to_string(e->code) ?: "internal");
        json_w_kv_string(jw, "message", e->message);
        json_w_object_end(jw);
}

void worker_reply_ok(JsonWriter *jw) {
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_object_end(jw);
}

static void reply_result(JsonWriter *jw, int r, const ApiError *e) {
        if (r < 0)
                return worker_reply_error(jw, e);
        worker_reply_ok(jw);
}

static void op_pause(Worker *w, const JsonValue *req, JsonWriter *jw) {
        worker_op_pause(w, req, true, jw);
}

static void op_resume(Worker *w, const JsonValue *req, JsonWriter *jw) {
        worker_op_pause(w, req, false, jw);
}

/* {"op":"create","sandbox":{spec}} → {"ok":true,"pid":N,"starttime":N} */
static void op_create(Worker *w, const JsonValue *req, JsonWriter *jw) {
        ApiError e = { .code = API_INTERNAL };
        int64_t pid = 0;
        uint64_t st = 0;
        int r;

        r = worker_create_sandbox(w, json_get(req, "sandbox"), &pid, &st, &e);
        if (r < 0)
                return worker_reply_error(jw, &e);
        if (w->reply_deferred)
                return; /* the guest boots; worker-boot.c replies */
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_kv_int(jw, "pid", pid);
        json_w_key(jw, "starttime");
        json_w_uint(jw, st);
        json_w_object_end(jw);
}

/* {"op":"destroy","id":ID} */
static void op_destroy(Worker *w, const JsonValue *req, JsonWriter *jw) {
        ApiError e = { .code = API_INTERNAL };
        int r = worker_destroy_sandbox(w, json_string(json_get(req, "id")), &e);

        reply_result(jw, r, &e);
}

/* {"op":"template_import","name":NAME,"tar":PATH,"tag":TAG?} → {"ok":true,"size_bytes":N}
 * (the archive: a root fs tar, an OCI layout or a docker save archive) */
static void op_template_import(Worker *w, const JsonValue *req, JsonWriter *jw) {
        const char *name = json_string(json_get(req, "name")), *tar = json_string(json_get(req, "tar"));
        const char *tag = json_string(json_get(req, "tag"));
        ApiError e = {};
        uint64_t size = 0;
        int r;

        if (!pool_template_name_valid(name)) {
                api_error(&e, -EINVAL, API_INVALID_ARGUMENT, "invalid template name");
                return worker_reply_error(jw, &e);
        }
        r = worker_admit_template_import(w, name, tar, isempty(tag) ? NULL : tag, &size, &e); /* worker-admit.c */
        if (r < 0)
                return worker_reply_error(jw, &e);
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_key(jw, "size_bytes");
        json_w_uint(jw, size);
        json_w_object_end(jw);
}

/* {"op":"layers_cached","keys":[KEY...]} → {"ok":true,"cached":[bool...]} */
static void op_layers_cached(Worker *w, const JsonValue *req, JsonWriter *jw) {
        const JsonValue *keys = json_get(req, "keys");
        ApiError e = {};

        if (json_array_size(keys) > OCI_LAYERS_MAX) {
                api_error(&e, -E2BIG, API_INVALID_ARGUMENT, "at most %u keys", OCI_LAYERS_MAX);
                return worker_reply_error(jw, &e);
        }
        for (size_t i = 0; i < json_array_size(keys); i++) {
                const char *k = json_string(json_array_at(keys, i));
                if (!k || strlen(k) != 64 || strspn(k, "0123456789abcdef") != 64) {
                        api_error(&e, -EINVAL, API_INVALID_ARGUMENT, "a layer key is 64 hex digits");
                        return worker_reply_error(jw, &e);
                }
        }
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_key(jw, "cached");
        json_w_array_begin(jw);
        for (size_t i = 0; i < json_array_size(keys); i++)
                json_w_bool(jw, pool_layer_cached(w->pool, json_string(json_array_at(keys, i))) > 0);
        json_w_array_end(jw);
        json_w_object_end(jw);
}

/* {"op":"layer_ids","key":KEY,"user":NAME?,"group":NAME?} → {"ok":true,"uid":N?,"user_gid":N?,"gid":N?}:
 * the uid and primary gid of the user, the gid of the group, in layers/<key>'s etc/passwd and etc/group */
static void op_layer_ids(Worker *w, const JsonValue *req, JsonWriter *jw) {
        const JsonValue *user = json_get(req, "user"), *group = json_get(req, "group");
        PoolLayerIds ids = {};
        ApiError e = {};
        int r;

        if ((user && json_type(user) != JSON_STRING) || (group && json_type(group) != JSON_STRING) ||
            (user && strlen(json_string(user)) != json_string_len(user)) ||
            (group && strlen(json_string(group)) != json_string_len(group))) {
                api_error(&e, -EINVAL, API_INVALID_ARGUMENT, "user and group are names (strings)");
                return worker_reply_error(jw, &e);
        }
        r = pool_build_layer_ids(w->pool, json_string(json_get(req, "key")), json_string(user), json_string(group),
                                 &ids, &e);
        if (r < 0)
                return worker_reply_error(jw, &e);
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        if (user) {
                json_w_key(jw, "uid");
                json_w_uint(jw, ids.uid);
                json_w_key(jw, "user_gid");
                json_w_uint(jw, ids.user_gid);
        }
        if (group) {
                json_w_key(jw, "gid");
                json_w_uint(jw, ids.gid);
        }
        json_w_object_end(jw);
}

/* {"op":"build_layer","key":KEY,"from":"scratch|layer|template|sandbox","name":NAME?,"tar":PATH?,
 *  "mkdir":PATH?,"defaults":JSON?} → {"ok":true,"image_defaults":JSON?}: a Dockerfile build's step as
 * layers/<key>, with the exec defaults file it holds */
static void op_build_layer(Worker *w, const JsonValue *req, JsonWriter *jw) {
        static const char *const froms[_POOL_BUILD_FROM_MAX] = {
                [POOL_BUILD_FROM_SCRATCH] = "scratch", [POOL_BUILD_FROM_LAYER] = "layer",
                [POOL_BUILD_FROM_TEMPLATE] = "template", [POOL_BUILD_FROM_SANDBOX] = "sandbox",
        };
        const char *from = json_string(json_get(req, "from"));
        PoolBuildSource src = { .kind = _POOL_BUILD_FROM_INVALID, .name = json_string(json_get(req, "name")) };
        ApiError e = {};
        int r;

        for (int k = 0; k < _POOL_BUILD_FROM_MAX; k++)
                if (streq(from, froms[k]))
                        src.kind = (PoolBuildFrom) k;
        if (src.kind < 0 || (src.kind != POOL_BUILD_FROM_SCRATCH && !src.name)) {
                api_error(&e, -EINVAL, API_INVALID_ARGUMENT, "from is scratch, or layer, template or sandbox with a name");
                return worker_reply_error(jw, &e);
        }
        _cleanup_free_ char *defaults = NULL;

        r = pool_build_layer(w->pool, &src, json_string(json_get(req, "key")), json_string(json_get(req, "tar")),
                             json_string(json_get(req, "mkdir")), json_string(json_get(req, "defaults")), &e);
        if (r < 0)
                return worker_reply_error(jw, &e);
        (void) pool_build_layer_defaults(w->pool, json_string(json_get(req, "key")), &defaults);
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        if (defaults)
                json_w_kv_string(jw, "image_defaults", defaults);
        json_w_object_end(jw);
}

/* {"op":"build_publish","key":KEY,"name":NAME} → {"ok":true,"size_bytes":N} */
static void op_build_publish(Worker *w, const JsonValue *req, JsonWriter *jw) {
        ApiError e = {};
        uint64_t size = 0;
        int r;

        r = pool_build_publish(w->pool, json_string(json_get(req, "key")), json_string(json_get(req, "name")), &size,
                               &e);
        if (r < 0)
                return worker_reply_error(jw, &e);
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_key(jw, "size_bytes");
        json_w_uint(jw, size);
        json_w_object_end(jw);
}

/* {"op":"template_remove","name":NAME}: a template that is not here is fine */
static void op_template_remove(Worker *w, const JsonValue *req, JsonWriter *jw) {
        const char *name = json_string(json_get(req, "name"));
        ApiError e = { .code = API_INTERNAL };
        int r;

        r = pool_template_name_valid(name) ? pool_template_remove(w->pool, name) : -EINVAL;
        if (r < 0 && r != -ENOENT)
                api_error(&e, r, API_INTERNAL, "cannot remove template: %s", strerror(-r));
        else
                r = 0;
        reply_result(jw, r, &e);
}

/* {"op":"template_promote","name":NAME,"version":N}: templates/NAME becomes a copy of NAME@vN;
 * a host that lacks NAME@vN drops its copy of NAME (stale: it is shipped again when needed) */
static void op_template_promote(Worker *w, const JsonValue *req, JsonWriter *jw) {
        const char *name = json_string(json_get(req, "name"));
        ApiError e = { .code = API_INTERNAL };
        uint64_t version = 0;
        int r;

        if (!pool_template_name_valid(name) || strchr(name, '@') ||
            json_uint64(json_get(req, "version"), &version) < 0 || version == 0)
                r = -EINVAL;
        else
                r = pool_template_promote(w->pool, name, version);
        if (r == -ENOENT) {
                r = pool_template_remove(w->pool, name);
                if (r == -ENOENT)
                        r = 0;
        }
        if (r == -EBUSY)
                api_error(&e, r, API_TEMPLATE_IN_USE,
                          "a sandbox's root lies on template '%s' (an overlay pool keeps the newest version under "
                          "the name itself): delete its sandboxes first, or use a btrfs pool", name);
        else if (r < 0)
                api_error(&e, r, r == -EINVAL ? API_INVALID_ARGUMENT : API_INTERNAL, "cannot promote template: %s",
                          strerror(-r));
        reply_result(jw, r, &e);
}

/* {"op":"templates"} → {"ok":true,"templates":[NAME...]} */
static void op_templates(Worker *w, const JsonValue *req, JsonWriter *jw) {
        _cleanup_strv_free_ char **names = NULL;
        ApiError e = { .code = API_INTERNAL };
        int r;

        (void) req;
        r = pool_template_list(w->pool, &names);
        if (r < 0) {
                api_error(&e, r, API_INTERNAL, "cannot list templates: %s", strerror(-r));
                return worker_reply_error(jw, &e);
        }
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_key(jw, "templates");
        json_w_array_begin(jw);
        for (char **t = names; t && *t; t++)
                json_w_string(jw, *t);
        json_w_array_end(jw);
        json_w_object_end(jw);
}

/* "vm": the vm runtime's facts (accelerator, transport, kernel), or why it is
 * unavailable; where it is available, with the base snapshots it restores
 * creates from as a member "base_snapshots" of the same object. */
static void write_vm_info(Worker *w, JsonWriter *jw) {
        const RuntimeOps *rt = runtime_find("vm");
        _cleanup_free_ char *vm = rt->info_json ? rt->info_json() : NULL;
        _cleanup_free_ char *bases = NULL;
        _cleanup_json_ JsonValue *v = NULL;

        if (!vm)
                return;
        json_w_key(jw, "vm");
        if (!worker_runtime(w, "vm", &(ApiError){}) || json_parse(vm, strlen(vm), &v, NULL, 0) < 0 ||
            json_type(v) != JSON_OBJECT || pool_base_list_json(w->pool, &bases) < 0)
                return json_w_raw(jw, vm);
        json_w_object_begin(jw);
        for (size_t i = 0; i < json_object_size(v); i++) {
                _cleanup_free_ char *value = NULL;
                if (json_serialize(json_object_value(v, i), &value, NULL) < 0)
                        continue;
                json_w_key(jw, json_object_key(v, i));
                json_w_raw(jw, value);
        }
        json_w_key(jw, "base_snapshots");
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "enabled", w->config->vm_base_snapshots);
        json_w_key(jw, "snapshots");
        json_w_raw(jw, bases);
        json_w_object_end(jw);
        json_w_object_end(jw);
}

static void write_network_info(Worker *w, JsonWriter *jw) {
        json_w_key(jw, "network");
        json_w_object_begin(jw);
        json_w_kv_string(jw, "pool", w->config->net_pool);
        json_w_kv_int(jw, "links", (int64_t) addr_pool_slots(&w->net_pool));
        json_w_kv_string(jw, "nft_table", w->config->net_table);
        json_w_kv_string(jw, "link_prefix", w->config->net_link_prefix);
        json_w_kv_bool(jw, "ipv6", false);
        json_w_kv_string(jw, "default_egress", "none");
        json_w_kv_bool(jw, "gateway", w->gateway != NULL);
        json_w_key(jw, "gateway_ports");
        json_w_object_begin(jw);
        json_w_kv_int(jw, "dns", (int64_t) w->config->gateway_dns_port);
        json_w_kv_int(jw, "proxy", (int64_t) w->config->gateway_proxy_port);
        json_w_kv_int(jw, "transparent", (int64_t) w->config->gateway_transparent_port);
        json_w_kv_int(jw, "udp", (int64_t) w->config->gateway_udp_port);
        json_w_object_end(jw);
        json_w_object_end(jw);
}

/* {"op":"info"} → {"ok":true,"info":{"runtimes":[...],"vm":{...},"cgroup":...,"storage":{...},...}} */
static void op_info(Worker *w, const JsonValue *req, JsonWriter *jw) {
        _cleanup_free_ char *pool = NULL;
        ApiError e = { .code = API_INTERNAL };
        int r;

        (void) req;
        r = pool_info_json(w->pool, &pool);
        if (r < 0) {
                api_error(&e, r, API_INTERNAL, "pool info: %s", strerror(-r));
                return worker_reply_error(jw, &e);
        }
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_key(jw, "info");
        json_w_object_begin(jw);
        json_w_key(jw, "runtimes");
        json_w_array_begin(jw);
        for (size_t i = 0; i < RUNTIMES_MAX; i++)
                if (w->runtimes[i])
                        json_w_string(jw, w->runtimes[i]->name);
        json_w_array_end(jw);
        write_vm_info(w, jw);
        json_w_kv_string(jw, "cgroup", cgroup_mode_to_string(cgroup_mode()));
        /* this daemon's identity on the host and what it holds there (src/shared/instance.h) */
        json_w_key(jw, "instance");
        json_w_object_begin(jw);
        json_w_kv_string(jw, "name", w->config->instance);
        json_w_kv_string(jw, "state_dir", w->config->state_dir);
        json_w_kv_string(jw, "cgroup_root", w->config->cgroup_root);
        json_w_key(jw, "uid_base");
        json_w_uint(jw, w->config->uid_base);
        json_w_key(jw, "uid_count");
        json_w_uint(jw, w->config->slots_max * RUNTIME_ID_RANGE);
        json_w_object_end(jw);
        json_w_key(jw, "storage");
        json_w_raw(jw, pool);
        json_w_kv_int(jw, "sandboxes_running", (int64_t) w->n_live);
        write_network_info(w, jw);
        json_w_kv_string(jw, "worker", streq(w->config->role, "worker") ? w->config->worker_name : "local");
        json_w_object_end(jw);
        json_w_object_end(jw);
}

/* The handler of each op the worker process serves (the table's rows without
 * .listener); worker_dispatch_check() tells a row without its handler. */
static const WorkerOpHandler handlers[_WORKER_OP_MAX] = {
        [WORKER_OP_CREATE] = op_create,
        [WORKER_OP_DESTROY] = op_destroy,
        [WORKER_OP_PAUSE] = op_pause,
        [WORKER_OP_RESUME] = op_resume,
        [WORKER_OP_SUSPEND] = worker_op_suspend,
        [WORKER_OP_START] = worker_op_start,
        [WORKER_OP_CHECKPOINT] = worker_op_checkpoint,
        [WORKER_OP_CHECKPOINT_REMOVE] = worker_op_checkpoint_remove,
        [WORKER_OP_CHECKPOINT_SIZES] = worker_op_checkpoint_sizes,
        [WORKER_OP_RESTORE] = worker_op_restore,
        [WORKER_OP_BRANCH] = worker_op_branch,
        [WORKER_OP_SET_LIMITS] = worker_op_set_limits,
        [WORKER_OP_SET_POLICY] = worker_op_set_policy,
        [WORKER_OP_SET_CREDENTIALS] = worker_op_set_credentials,
        [WORKER_OP_TAKE_WARM] = worker_op_take_warm,
        [WORKER_OP_OOM_KILLS] = worker_op_oom_kills,
        [WORKER_OP_METRICS] = worker_op_metrics,
        [WORKER_OP_METRICS_LIVE] = worker_op_metrics_live,
        [WORKER_OP_TEMPLATE_IMPORT] = op_template_import,
        [WORKER_OP_TEMPLATE_REMOVE] = op_template_remove,
        [WORKER_OP_TEMPLATE_PROMOTE] = op_template_promote,
        [WORKER_OP_VOLUME_CREATE] = worker_op_volume_create,
        [WORKER_OP_VOLUME_REMOVE] = worker_op_volume_remove,
        [WORKER_OP_VOLUME_USAGE] = worker_op_volume_usage,
        [WORKER_OP_VOLUME_FILE_READ] = worker_op_volume_file_read,
        [WORKER_OP_VOLUME_FILE_WRITE] = worker_op_volume_file_write,
        [WORKER_OP_VOLUME_FILE_REMOVE] = worker_op_volume_file_remove,
        [WORKER_OP_LAYERS_CACHED] = op_layers_cached,
        [WORKER_OP_LAYER_IDS] = op_layer_ids,
        [WORKER_OP_BUILD_LAYER] = op_build_layer,
        [WORKER_OP_BUILD_PUBLISH] = op_build_publish,
        [WORKER_OP_TEMPLATES] = op_templates,
        [WORKER_OP_INFO] = op_info,
        [WORKER_OP_HEALTH] = worker_op_health,
};

int worker_dispatch_check(void) {
        int r = 0;

        for (int k = 0; k < _WORKER_OP_MAX; k++)
                if (!worker_op(k)->listener != (handlers[k] != NULL)) {
                        log_error("Worker op '%s' %s", worker_op(k)->name,
                                  handlers[k] ? "is the listener's but has a handler here" : "has no handler");
                        r = -EPROTO;
                }
        return r;
}

void worker_dispatch(Worker *w, const char *line, size_t n, JsonWriter *jw) {
        _cleanup_(worker_request_done) WorkerRequest req = { .kind = _WORKER_OP_INVALID };
        ApiError e = { .code = API_INTERNAL };
        char err[192];
        int r;

        r = worker_request_decode(line, n, &req, err, sizeof err);
        if (r == -EOPNOTSUPP || (r >= 0 && !handlers[req.kind])) {
                api_error(&e, -EINVAL, API_BAD_REQUEST, "%s",
                          r < 0 ? err : "this worker op is served by the cluster listener, not the worker");
                return worker_reply_error(jw, &e);
        }
        if (r < 0) {
                api_error(&e, r, API_BAD_REQUEST, "bad worker request: %s", err);
                return worker_reply_error(jw, &e);
        }
        worker_teardown_serving(w, true); /* the teardowns wait (bounded) meanwhile */
        handlers[req.kind](w, req.json, jw);
        worker_teardown_serving(w, false);
        if (w->reply_deferred && !worker_op(req.kind)->deferred)
                log_error("Worker op '%s' deferred its reply, which its row in the op table does not allow",
                          worker_op(req.kind)->name);
}
