/* SPDX-License-Identifier: MIT */
/* The worker client's templates and shipped state: a template imported
 * (local: from a tar the worker reads; cluster: the tar streamed to one live
 * worker, which ships it to the others), removed, and a checkpoint's or
 * template's copy shipped from one worker to another (worker-ship.h). */
#include <fcntl.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "json.h"
#include "log.h"
#include "str-util.h"
#include "worker-client-internal.h"
#include "cluster-net.h"
#include "ship-stream.h"
#include "worker-placement.h"
#include "worker-proto.h"

/* Cluster: the request of call and then the file at in_fd as a ship stream,
 * on a fresh connection to the current target (an op the listener serves
 * itself: template_put, build_layer_put); its reply into *ret. */
static int put_stream(WorkerClient *w, WorkerCall *call, WorkerOpKind kind, int in_fd, JsonValue **ret, ApiError *e) {
        _cleanup_close_ int fd = -EBADF;
        char line[WORKER_HANDSHAKE_LINE_MAX];
        size_t len;
        int r;

        r = worker_client_open_connection(w, &fd);
        if (r < 0) {
                w->connect_failed = true;
                return api_error(e, r, API_UNAVAILABLE, "worker '%s' (%s) unavailable: %s", w->target,
                                 w->target_address, strerror(-r));
        }
        r = worker_client_send_request(fd, call);
        if (r >= 0)
                r = ship_stream_send(fd, in_fd, NULL, NULL, NULL, NULL);
        if (r >= 0)
                r = net_read_line(fd, line, sizeof line, worker_op(kind)->deadline_msec, &len);
        if (r < 0)
                return api_error(e, r, API_UNAVAILABLE, "sending the %s to worker '%s' failed: %s",
                                 kind == WORKER_OP_TEMPLATE_PUT ? "template" : "build step's files", w->target,
                                 strerror(-r));
        if (json_parse(line, len, ret, NULL, 0) < 0)
                return api_error(e, -EBADMSG, API_INTERNAL, "malformed worker reply");
        return worker_client_reply_check(*ret, e);
}

/* Cluster: {"op":"template_put"} and the tar on a fresh connection to the current target. */
static int template_put(WorkerClient *w, const char *name, int tar_fd, uint64_t *ret_size_bytes, ApiError *e) {
        _cleanup_json_ JsonValue *v = NULL;
        WorkerCall call;
        int r;

        worker_client_request_begin(&call, WORKER_OP_TEMPLATE_PUT);
        json_w_kv_string(&call.jw, "name", name);
        json_w_object_end(&call.jw);
        r = put_stream(w, &call, WORKER_OP_TEMPLATE_PUT, tar_fd, &v, e);
        if (r < 0)
                return r;
        if (json_uint64(json_get(v, "size_bytes"), ret_size_bytes) < 0)
                *ret_size_bytes = 0;
        return 0;
}

/* Template name, on worker holder, shipped to every other of nodes[0..n)
 * that is live (against template parent where the receiver holds it; NULL:
 * whole); one that is down gets it from the controller later. */
static void ship_to_others(WorkerClient *w, const WorkerNode *nodes, size_t n, const char *holder, const char *name,
                           const char *parent) {
        for (size_t i = 0; i < n; i++) {
                WorkerShipResult res;
                ApiError ignored = {};
                if (streq(nodes[i].name, holder) || worker_client_select_worker(w, nodes[i].name, &ignored) < 0)
                        continue;
                if (worker_ship(w, holder, nodes[i].name, NULL, name, parent, &res, &ignored) < 0)
                        log_warning("Shipping template %s to worker %s failed (the controller tries again): %s",
                                    name, nodes[i].name, ignored.message);
        }
}

/* Cluster: the tar goes to the first live worker that takes it, which then
 * ships the template to every other live worker. A worker that cannot be
 * reached now gets it from the controller (its template pass) later. */
static int template_import_cluster(WorkerClient *w, const char *name, const char *tar_path,
                                   uint64_t *ret_size_bytes, ApiError *e) {
        _cleanup_free_ WorkerNode *nodes = NULL;
        char holder[STORE_NAME_MAX] = "";
        size_t n = 0;
        int r;

        r = worker_client_list_workers(w, &nodes, &n, e);
        if (r < 0)
                return r;
        r = api_error(e, -EHOSTDOWN, API_UNAVAILABLE, "no live worker to import template '%s' on", name);
        for (size_t i = 0; i < n && !holder[0]; i++) {
                _cleanup_close_ int tar_fd = -EBADF;
                *e = (ApiError){};
                if (worker_client_select_worker(w, nodes[i].name, e) < 0)
                        continue;
                tar_fd = open(tar_path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (tar_fd < 0)
                        return api_error(e, negative_errno(), API_INTERNAL, "cannot open the archive: %m");
                w->connect_failed = false;
                r = template_put(w, name, tar_fd, ret_size_bytes, e);
                if (r >= 0)
                        (void) strscpy(holder, sizeof holder, nodes[i].name);
                else if (!w->connect_failed)
                        return r; /* the worker refused it (a bad archive, ...): so would the others */
        }
        if (!holder[0])
                return r;
        log_info("Template %s imported on worker %s; shipping it to the other workers", name, holder);
        ship_to_others(w, nodes, n, holder, name, NULL);
        *e = (ApiError){};
        return 0;
}

int worker_template_import(WorkerClient *w, const char *name, const char *tar_path, const char *tag,
                           uint64_t *ret_size_bytes, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        WorkerCall call;
        int r;

        if (w->store && tag)
                return api_error(e, -EOPNOTSUPP, API_INVALID_ARGUMENT,
                                 "a tag is not supported in a cluster: import an archive with one image");
        if (w->store)
                return template_import_cluster(w, name, tar_path, ret_size_bytes, e);

        worker_client_request_begin(&call, WORKER_OP_TEMPLATE_IMPORT);
        json_w_kv_string(&call.jw, "name", name);
        json_w_kv_string(&call.jw, "tar", tar_path);
        if (tag)
                json_w_kv_string(&call.jw, "tag", tag);
        json_w_object_end(&call.jw);
        r = worker_client_call(w, &call, &reply, e);
        if (r < 0)
                return r;
        if (json_uint64(json_get(reply, "size_bytes"), ret_size_bytes) < 0)
                *ret_size_bytes = 0;
        return 0;
}

/* A build's op goes to its worker: a cluster's build worker (worker_build_place), or the local one. */
static int build_target(WorkerClient *w, const char *worker, ApiError *e) {
        if (!w->store)
                return 0;
        if (isempty(worker))
                return api_error(e, -EINVAL, API_INTERNAL, "a build in a cluster names its worker");
        return worker_client_select_worker(w, worker, e);
}

static int build_layer_call(WorkerClient *w, const char *worker, const char *key, const char *from, const char *name,
                            const char *tar_path, const char *mkdir_path, const char *defaults,
                            char **ret_image_defaults, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        bool put = w->store && tar_path; /* a cluster: the files go with the request */
        WorkerCall call;
        int r;

        r = build_target(w, worker, e);
        if (r < 0)
                return r;
        worker_client_request_begin(&call, put ? WORKER_OP_BUILD_LAYER_PUT : WORKER_OP_BUILD_LAYER);
        json_w_kv_string(&call.jw, "key", key);
        json_w_kv_string(&call.jw, "from", from);
        if (name)
                json_w_kv_string(&call.jw, "name", name);
        if (tar_path && !put)
                json_w_kv_string(&call.jw, "tar", tar_path);
        if (mkdir_path)
                json_w_kv_string(&call.jw, "mkdir", mkdir_path);
        if (defaults)
                json_w_kv_string(&call.jw, "defaults", defaults);
        json_w_object_end(&call.jw);
        if (put) {
                _cleanup_close_ int fd = open(tar_path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (fd < 0)
                        return api_error(e, negative_errno(), API_INTERNAL, "cannot open the step's files: %m");
                r = put_stream(w, &call, WORKER_OP_BUILD_LAYER_PUT, fd, &reply, e);
        } else
                r = worker_client_call(w, &call, &reply, e);
        if (r >= 0 && ret_image_defaults && json_string(json_get(reply, "image_defaults"))) {
                *ret_image_defaults = strdup(json_string(json_get(reply, "image_defaults")));
                if (!*ret_image_defaults)
                        return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        }
        return r;
}

int worker_build_layer(WorkerClient *w, const char *worker, const char *key, const char *from, const char *name,
                       const char *tar_path, const char *mkdir_path, const char *defaults, ApiError *e) {
        return build_layer_call(w, worker, key, from, name, tar_path, mkdir_path, defaults, NULL, e);
}

int worker_build_layer_defaults(WorkerClient *w, const char *worker, const char *key, const char *from,
                                const char *name, char **ret_image_defaults, ApiError *e) {
        *ret_image_defaults = NULL;
        return build_layer_call(w, worker, key, from, name, NULL, NULL, NULL, ret_image_defaults, e);
}

int worker_build_publish(WorkerClient *w, const char *worker, const char *key, const char *name,
                         uint64_t *ret_size_bytes, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        WorkerCall call;
        int r;

        r = build_target(w, worker, e);
        if (r < 0)
                return r;
        worker_client_request_begin(&call, WORKER_OP_BUILD_PUBLISH);
        json_w_kv_string(&call.jw, "key", key);
        json_w_kv_string(&call.jw, "name", name);
        json_w_object_end(&call.jw);
        r = worker_client_call(w, &call, &reply, e);
        if (r < 0)
                return r;
        if (json_uint64(json_get(reply, "size_bytes"), ret_size_bytes) < 0)
                *ret_size_bytes = 0;
        return 0;
}

int worker_layers_cached(WorkerClient *w, const char *worker, char (*keys)[65], size_t n, bool *ret_cached,
                         ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        const JsonValue *cached;
        WorkerCall call;
        int r;

        for (size_t i = 0; i < n; i++)
                ret_cached[i] = false;
        if ((w->store && isempty(worker)) || n == 0)
                return 0;
        r = build_target(w, worker, e);
        if (r < 0)
                return r;
        worker_client_request_begin(&call, WORKER_OP_LAYERS_CACHED);
        json_w_key(&call.jw, "keys");
        json_w_array_begin(&call.jw);
        for (size_t i = 0; i < n; i++)
                json_w_string(&call.jw, keys[i]);
        json_w_array_end(&call.jw);
        json_w_object_end(&call.jw);
        r = worker_client_call(w, &call, &reply, e);
        if (r < 0)
                return r;
        cached = json_get(reply, "cached");
        for (size_t i = 0; i < n && i < json_array_size(cached); i++) {
                bool b = false;
                ret_cached[i] = json_bool(json_array_at(cached, i), &b) >= 0 && b;
        }
        return 0;
}

int worker_layer_ids(WorkerClient *w, const char *worker, const char *key, const char *user, const char *group,
                     uint32_t *ret_uid, uint32_t *ret_user_gid, uint32_t *ret_gid, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        uint64_t uid = 0, user_gid = 0, gid = 0;
        WorkerCall call;
        int r;

        r = build_target(w, worker, e);
        if (r < 0)
                return r;
        worker_client_request_begin(&call, WORKER_OP_LAYER_IDS);
        json_w_kv_string(&call.jw, "key", key);
        if (user)
                json_w_kv_string(&call.jw, "user", user);
        if (group)
                json_w_kv_string(&call.jw, "group", group);
        json_w_object_end(&call.jw);
        r = worker_client_call(w, &call, &reply, e);
        if (r < 0)
                return r;
        if ((user && (json_uint64(json_get(reply, "uid"), &uid) < 0 ||
                      json_uint64(json_get(reply, "user_gid"), &user_gid) < 0 || uid > UINT32_MAX ||
                      user_gid > UINT32_MAX)) ||
            (group && (json_uint64(json_get(reply, "gid"), &gid) < 0 || gid > UINT32_MAX)))
                return api_error(e, -EBADMSG, API_INTERNAL, "the worker's layer_ids reply lacks the ids");
        *ret_uid = (uint32_t) uid;
        *ret_user_gid = (uint32_t) user_gid;
        *ret_gid = (uint32_t) gid;
        return 0;
}

/* Rendezvous hashing (FNV-1a of the template's and the worker's names): the
 * same template's builds go to the same worker while it is there, so its
 * layer cache serves the rebuilds. */
static uint64_t build_affinity(const char *name, const char *worker) {
        uint64_t h = UINT64_C(14695981039346656037);

        for (const char *p = name; *p; p++)
                h = (h ^ (uint8_t) *p) * UINT64_C(1099511628211);
        h = (h ^ 0xff) * UINT64_C(1099511628211);
        for (const char *p = worker; *p; p++)
                h = (h ^ (uint8_t) *p) * UINT64_C(1099511628211);
        return h;
}

int worker_build_place(WorkerClient *w, const char *name, char ret_worker[static STORE_NAME_MAX], ApiError *e) {
        _cleanup_free_ WorkerNode *nodes = NULL;
        _cleanup_free_ size_t *order = NULL;
        Sandbox like = { .runtime = "ns" };
        size_t n = 0, n_order = 0, best = SIZE_MAX;
        int r;

        ret_worker[0] = 0;
        if (!w->store)
                return 0;
        r = worker_client_place(w, &like, &nodes, &n, &order, &n_order, e);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n_order; i++)
                if (best == SIZE_MAX ||
                    build_affinity(name, nodes[order[i]].name) > build_affinity(name, nodes[order[best]].name))
                        best = i;
        if (best == SIZE_MAX)
                return api_error(e, -EHOSTDOWN, API_UNAVAILABLE, "no live worker can run the build of template '%s'",
                                 name);
        return strscpy(ret_worker, STORE_NAME_MAX, nodes[order[best]].name) < 0 ? -ENAMETOOLONG : 0;
}

int worker_template_import_on(WorkerClient *w, const char *worker, const char *name, const char *tar_path,
                              uint64_t *ret_size_bytes, ApiError *e) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (!w->store)
                return worker_template_import(w, name, tar_path, NULL, ret_size_bytes, e);
        r = build_target(w, worker, e);
        if (r < 0)
                return r;
        fd = open(tar_path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return api_error(e, negative_errno(), API_INTERNAL, "cannot open the archive: %m");
        return template_put(w, name, fd, ret_size_bytes, e);
}

void worker_template_spread(WorkerClient *w, const char *holder, const char *name, const char *parent) {
        _cleanup_free_ WorkerNode *nodes = NULL;
        ApiError ignored = {};
        size_t n = 0;

        if (!w->store || isempty(holder) || worker_client_list_workers(w, &nodes, &n, &ignored) < 0)
                return;
        ship_to_others(w, nodes, n, holder, name, parent);
}

static int template_remove_one(WorkerClient *w, const char *name, ApiError *e) {
        WorkerCall call;

        worker_client_request_begin(&call, WORKER_OP_TEMPLATE_REMOVE);
        json_w_kv_string(&call.jw, "name", name);
        json_w_object_end(&call.jw);
        return worker_client_call(w, &call, NULL, e);
}

int worker_template_remove(WorkerClient *w, const char *name, ApiError *e) {
        _cleanup_free_ WorkerNode *nodes = NULL;
        size_t n = 0;
        int r;

        if (!w->store)
                return template_remove_one(w, name, e);
        /* from every live worker; one that is down removes it ... never: it keeps its copy */
        r = worker_client_list_workers(w, &nodes, &n, e);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                if (worker_client_select_worker(w, nodes[i].name, e) < 0) {
                        *e = (ApiError){};
                        continue;
                }
                r = template_remove_one(w, name, e);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int template_promote_one(WorkerClient *w, const char *name, uint64_t version, ApiError *e) {
        WorkerCall call;

        worker_client_request_begin(&call, WORKER_OP_TEMPLATE_PROMOTE);
        json_w_kv_string(&call.jw, "name", name);
        json_w_key(&call.jw, "version");
        json_w_uint(&call.jw, version);
        json_w_object_end(&call.jw);
        return worker_client_call(w, &call, NULL, e);
}

int worker_template_promote_on(WorkerClient *w, const char *worker, const char *name, uint64_t version,
                               ApiError *e) {
        int r = worker_client_select_worker(w, worker, e);

        return r < 0 ? r : template_promote_one(w, name, version, e);
}

/* On the selected worker (the one that published the version) first, then on
 * every other live one (they drop a stale copy of the name). */
int worker_template_promote(WorkerClient *w, const char *name, uint64_t version, ApiError *e) {
        _cleanup_free_ WorkerNode *nodes = NULL;
        char first[STORE_NAME_MAX] = "";
        size_t n = 0;
        int r;

        r = template_promote_one(w, name, version, e);
        if (r < 0 || !w->store)
                return r;
        (void) strscpy(first, sizeof first, w->target);
        r = worker_client_list_workers(w, &nodes, &n, e);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                if (streq(nodes[i].name, first) || worker_client_select_worker(w, nodes[i].name, e) < 0) {
                        *e = (ApiError){};
                        continue;
                }
                r = template_promote_one(w, name, version, e);
                if (r < 0)
                        return r;
        }
        if (first[0])
                (void) worker_client_select_worker(w, first, e);
        return 0;
}

int worker_ship(WorkerClient *w, const char *from, const char *to, const char *sandbox_id, const char *name,
                const char *template_name, WorkerShipResult *ret, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        char to_address[STORE_WORKER_ADDRESS_MAX];
        const char *sha, *parent;
        WorkerCall call;
        int r;

        if (!w->store)
                return api_error(e, -EOPNOTSUPP, API_NOT_IMPLEMENTED, "shipping needs a cluster");
        r = worker_client_select_worker(w, to, e);
        if (r < 0)
                return r;
        (void) strscpy(to_address, sizeof to_address, w->target_address);
        r = worker_client_select_worker(w, from, e);
        if (r < 0)
                return r;
        worker_client_request_begin(&call, WORKER_OP_SHIP);
        json_w_kv_string(&call.jw, "kind", sandbox_id ? "checkpoint" : "template");
        if (sandbox_id)
                json_w_kv_string(&call.jw, "sandbox", sandbox_id);
        json_w_kv_string(&call.jw, "name", name);
        if (template_name)
                json_w_kv_string(&call.jw, "template", template_name);
        json_w_kv_string(&call.jw, "to", to);
        json_w_kv_string(&call.jw, "address", to_address);
        json_w_object_end(&call.jw);
        r = worker_client_call(w, &call, &reply, e);
        if (r < 0)
                return r;
        *ret = (WorkerShipResult){};
        sha = json_string(json_get(reply, "sha256"));
        parent = json_string(json_get(reply, "parent"));
        (void) strscpy(ret->sha256, sizeof ret->sha256, strempty(sha));
        (void) strscpy(ret->parent, sizeof ret->parent, strempty(parent));
        (void) json_uint64(json_get(reply, "bytes"), &ret->bytes);
        (void) json_bool(json_get(reply, "complete"), &ret->complete);
        return 0;
}
