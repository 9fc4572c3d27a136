/* SPDX-License-Identifier: MIT */
/* /v1/volumes: a tenant's named persistent volumes (create with a size, list,
 * show, delete: refused while a sandbox mounts it), and the "volumes" of a
 * sandbox create: which volumes it mounts where, read-only or not. The
 * sharing rule (one writer or many readers) is the store's, decided with
 * the mount; another tenant's volume is a 404 like one that does not exist. */

#include <inttypes.h>
#include <stdio.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "log.h"
#include "str-util.h"

/* Where a volume may not go: the root, and what the sandbox's setup and its
 * agent mount or read there (/proc, /sys, /dev, /run: its own mounts; /etc:
 * the users, machine id and resolver the agent reads and writes). */
static const char *const reserved[] = { "/proc", "/sys", "/dev", "/run", "/etc" };

bool api_volume_name_valid(const char *s) {
        size_t n;

        if (!s || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= '0' && s[0] <= '9')))
                return false;
        n = strnlen(s, API_VOLUME_NAME_MAX + 1);
        if (n > API_VOLUME_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '_' || c == '-'))
                        return false;
        }
        return true;
}

int api_volume_path_validate(const char *p, size_t n, ApiError *e) {
        if (!p || n == 0 || p[0] != '/')
                return api_error(e, -EINVAL, API_INVALID_PATH, "a volume's path must be absolute");
        if (n >= API_VOLUME_PATH_MAX)
                return api_error(e, -EINVAL, API_INVALID_PATH, "a volume's path must be at most %u bytes",
                                 API_VOLUME_PATH_MAX - 1);
        if (memchr(p, 0, n))
                return api_error(e, -EINVAL, API_INVALID_PATH, "a volume's path has a NUL byte");
        if (n == 1)
                return api_error(e, -EINVAL, API_INVALID_PATH, "a volume cannot be mounted at the root");
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) p[i];
                if (c < 0x20 || c == 0x7f)
                        return api_error(e, -EINVAL, API_INVALID_PATH, "a volume's path has a control character");
        }
        /* components: none empty ("//", a trailing "/"), none "." or ".." */
        for (size_t i = 1; i <= n; ) {
                size_t j = i;
                while (j < n && p[j] != '/')
                        j++;
                if (j == i || (j - i == 1 && p[i] == '.') || (j - i == 2 && p[i] == '.' && p[i + 1] == '.'))
                        return api_error(e, -EINVAL, API_INVALID_PATH,
                                         "a volume's path has an empty, '.' or '..' component");
                i = j + 1;
        }
        for (size_t i = 0; i < ELEMENTSOF(reserved); i++) {
                size_t k = strlen(reserved[i]);
                if (n >= k && memcmp(p, reserved[i], k) == 0 && (n == k || p[k] == '/'))
                        return api_error(e, -EINVAL, API_INVALID_PATH,
                                         "a volume cannot be mounted at or below %s (the sandbox's own)", reserved[i]);
        }
        return 0;
}

static void json_out_volume(JsonWriter *w, const Volume *v, int64_t used_bytes) {
        char t[JSON_OUT_TIME_MAX];

        json_w_object_begin(w);
        json_w_kv_string(w, "name", v->name);
        json_w_kv_string(w, "id", v->id);
        json_w_key(w, "size_mb");
        json_w_uint(w, v->size_mb);
        if (used_bytes >= 0) {
                json_w_key(w, "used_bytes");
                json_w_uint(w, (uint64_t) used_bytes);
        }
        json_out_time(v->created_usec, t);
        json_w_kv_string(w, "created_at", t);
        json_w_kv_string(w, "worker", isempty(v->worker) ? "local" : v->worker);
        json_w_kv_bool(w, "read_only", v->read_only);
        json_w_key(w, "source");
        if (isempty(v->source))
                json_w_null(w);
        else
                json_w_string(w, v->source);
        json_w_key(w, "readers");
        json_w_uint(w, v->readers);
        json_w_key(w, "writers");
        json_w_uint(w, v->writers);
        json_w_object_end(w);
}

static void volume_event(ApiRequest *r, const char *type, const Volume *v) {
        char data[STORE_NAME_MAX + STORE_ID_MAX + 64];

        /* validated name and id: no escaping needed */
        snprintf(data, sizeof data, "{\"volume\":\"%s\",\"id\":\"%s\",\"size_mb\":%" PRIu64 "}", v->name, v->id,
                 v->size_mb);
        api_event(r, NULL, type, "", data);
}

int api_volume_lookup(ApiRequest *r, const char *name, Volume *ret, ApiError *e) {
        int k;

        if (!api_volume_name_valid(name))
                return api_error(e, -ENOENT, API_NOT_FOUND, "no volume '%.64s'", strna(name));
        k = store_volume_get(r->store, r->key.tenant_id, name, ret);
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "no volume '%s'", name);
        if (k < 0)
                return api_store_error(e, k, "looking up the volume");
        return 0;
}

int api_volume_writable(const Volume *v, ApiError *e) {
        if (!v->read_only)
                return 0;
        return api_error(e, -EROFS, API_CONFLICT,
                         "volume '%s' is a read-only snapshot%s%s: clone it to change its files", v->name,
                         isempty(v->source) ? "" : " of ", v->source);
}

/* source (NULL: an empty one): a snapshot of it, read_only or writable */
static int volume_make(ApiRequest *r, const char *name, uint64_t size_mb, const Volume *source, bool read_only,
                       Volume *ret, ApiError *e) {
        const Config *c = api_config(r->api);
        Volume v = { .size_mb = size_mb, .read_only = read_only };
        StoreAdmission adm;
        int k;

        if (!api_volume_name_valid(name))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "name must be 1 to %u characters [A-Za-z0-9._-], starting with a letter or digit",
                                 API_VOLUME_NAME_MAX);
        if (size_mb < API_VOLUME_SIZE_MB_MIN || size_mb > c->max_disk_mb)
                return api_error(e, -ERANGE, API_INVALID_ARGUMENT, "size_mb must be %u to %" PRIu64,
                                 API_VOLUME_SIZE_MB_MIN, c->max_disk_mb);
        (void) strscpy(v.name, sizeof v.name, name);
        (void) strscpy(v.tenant_id, sizeof v.tenant_id, r->key.tenant_id);
        k = api_sandbox_id_generate(v.id);
        if (k < 0)
                return api_error(e, k, API_INTERNAL, "cannot generate an id: %s", strerror(-k));
        if (source)
                (void) strscpy(v.source, sizeof v.source, source->name);
        k = api_get_worker(r, e);
        if (k >= 0 && source) /* a snapshot is made where its source is */
                (void) strscpy(v.worker, sizeof v.worker, source->worker);
        else if (k >= 0)
                k = worker_volume_place(r->worker, size_mb, v.worker, e);
        if (k < 0)
                return k;
        v.created_usec = now_usec();
        /* the tenant's disk quota counts its volumes: decided in the insert's transaction */
        k = api_tenant_admission(r, v.tenant_id, &adm, e);
        if (k < 0)
                return k;
        /* the row first: the name is taken (two creates of one name: one wins), then the subvolume */
        k = store_volume_insert(r->store, &v, &adm);
        if (k == -EDQUOT)
                return api_quota_error(r, &adm, read_only ? "this snapshot" : source ? "this clone" : "this volume", e);
        if (k == -EEXIST)
                return api_error(e, k, API_ALREADY_EXISTS, "a volume named '%s' already exists", name);
        if (k < 0)
                return api_store_error(e, k, "recording the volume");
        k = source ? worker_volume_clone(r->worker, v.worker, source->id, v.id, size_mb, read_only, e)
                   : worker_volume_create(r->worker, v.worker, v.id, size_mb, e);
        if (k < 0) {
                int q = store_volume_delete(r->store, v.tenant_id, v.name);
                if (q < 0)
                        log_error_errno(q, "Failed to remove the row of volume %s after a failed create: %m", v.id);
                if (e->code == API_OK)
                        (void) api_error(e, k, API_UNAVAILABLE, "the worker failed: %s", strerror(-k));
                return k;
        }
        volume_event(r, read_only ? "volume.snapshotted" : source ? "volume.cloned" : "volume.created", &v);
        log_info("Created volume %s (%s, %" PRIu64 " MiB%s%s) for tenant %s", v.name, v.id, size_mb,
                 read_only ? ", a read-only snapshot of " : source ? ", a clone of " : "", source ? source->name : "",
                 r->tenant_name);
        *ret = v;
        return 0;
}

int api_volume_make(ApiRequest *r, const char *name, uint64_t size_mb, Volume *ret, ApiError *e) {
        return volume_make(r, name, size_mb, NULL, false, ret, e);
}

int api_volume_clone_make(ApiRequest *r, const Volume *source, const char *name, Volume *ret, ApiError *e) {
        return volume_make(r, name, source->size_mb, source, false, ret, e);
}

int api_volume_remove(ApiRequest *r, const char *name, ApiError *e) {
        Volume v;
        int k;

        k = api_volume_lookup(r, name, &v, e);
        if (k < 0)
                return k;
        /* the store refuses it atomically while a live sandbox mounts it; only then do the files go */
        k = store_volume_delete(r->store, r->key.tenant_id, v.name);
        if (k == -EBUSY)
                return api_error(e, k, API_VOLUME_IN_USE, "volume '%s' is mounted by %" PRIu32 " sandbox%s", v.name,
                                 v.readers + v.writers, v.readers + v.writers == 1 ? "" : "es");
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "no volume '%s'", v.name);
        if (k < 0)
                return api_store_error(e, k, "deleting the volume");
        k = api_get_worker(r, e);
        if (k >= 0)
                k = worker_volume_remove(r->worker, v.worker, v.id, e);
        if (k < 0) {
                /* keep it visible, so that the delete can be retried */
                int q = store_volume_insert(r->store, &v, NULL);
                if (q < 0)
                        log_error_errno(q, "Failed to restore the row of volume %s after a failed delete: %m", v.id);
                if (e->code == API_OK)
                        (void) api_error(e, k, API_UNAVAILABLE, "the worker failed: %s", strerror(-k));
                return k;
        }
        volume_event(r, "volume.deleted", &v);
        log_info("Deleted volume %s (%s)", v.name, v.id);
        return 0;
}

int api_volume_create(ApiRequest *r, ApiError *e) {
        static const char *const allowed[] = { "name", "size_mb", NULL };
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_(json_w_done) JsonWriter w;
        const char *unknown = NULL;
        uint64_t size_mb = API_VOLUME_SIZE_MB_DEFAULT;
        const JsonValue *v;
        Volume vol;
        int k;

        json_w_init(&w);
        k = api_read_json(r, &body, e);
        if (k < 0)
                return k;
        if (json_check_keys(body, allowed, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));
        v = json_get(body, "name");
        if (json_type(v) != JSON_STRING)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "name is required (a string)");
        if ((v = json_get(body, "size_mb")) && !json_is_null(v) && json_uint64(v, &size_mb) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "size_mb must be a positive integer");
        k = api_volume_make(r, json_string(json_get(body, "name")), size_mb, &vol, e);
        if (k < 0)
                return k;
        json_out_volume(&w, &vol, 0);
        return api_reply_json(r, 201, &w);
}

/* POST /v1/volumes/{name}/clone or /snapshot {"name": NEW}: a writable or a
 * read-only snapshot (O(1)); the source may be in use */
static int volume_copy(ApiRequest *r, bool read_only, ApiError *e) {
        static const char *const allowed[] = { "name", NULL };
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_(json_w_done) JsonWriter w;
        const char *unknown = NULL;
        Volume src, vol;
        int k;

        json_w_init(&w);
        k = api_volume_lookup(r, r->params[0], &src, e);
        if (k < 0)
                return k;
        k = api_read_json(r, &body, e);
        if (k < 0)
                return k;
        if (json_check_keys(body, allowed, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));
        if (json_type(json_get(body, "name")) != JSON_STRING)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "name is required (a string)");
        k = volume_make(r, json_string(json_get(body, "name")), src.size_mb, &src, read_only, &vol, e);
        if (k < 0)
                return k;
        json_out_volume(&w, &vol, 0);
        return api_reply_json(r, 201, &w);
}

int api_volume_clone(ApiRequest *r, ApiError *e) {
        return volume_copy(r, false, e);
}

int api_volume_snapshot(ApiRequest *r, ApiError *e) {
        return volume_copy(r, true, e);
}

int api_volume_list(ApiRequest *r, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_free_ Volume *list = NULL;
        size_t n = 0;
        int k;

        json_w_init(&w);
        k = store_volume_list(r->store, r->key.tenant_id, &list, &n);
        if (k < 0)
                return api_store_error(e, k, "listing volumes");
        json_w_object_begin(&w);
        json_w_key(&w, "volumes");
        json_w_array_begin(&w);
        for (size_t i = 0; i < n; i++)
                json_out_volume(&w, &list[i], -1);
        json_w_array_end(&w);
        json_w_object_end(&w);
        return api_reply_json(r, 200, &w);
}

/* The usage is the worker's to tell; a worker that cannot answer now (lost,
 * restarting, partitioned) leaves it out rather than hiding the volume, whose
 * record is the store's. */
static bool usage_unknowable(const ApiError *e) {
        return e->code == API_UNAVAILABLE || e->code == API_WORKER_UNAVAILABLE || e->code == API_TIMEOUT ||
               e->code == API_BAD_GATEWAY;
}

int api_volume_show(ApiRequest *r, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w;
        ApiError usage_error = {};
        uint64_t used = 0;
        int64_t shown;
        Volume v;
        int k;

        json_w_init(&w);
        k = api_volume_lookup(r, r->params[0], &v, e);
        if (k < 0)
                return k;
        k = api_get_worker(r, &usage_error);
        if (k >= 0)
                k = worker_volume_usage(r->worker, v.worker, v.id, &used, &usage_error);
        shown = (int64_t) used;
        if (k < 0) {
                if (!usage_unknowable(&usage_error)) {
                        *e = usage_error;
                        return k;
                }
                log_debug("Volume %s: usage unknown, its worker did not answer: %s", v.id, usage_error.message);
                shown = -1;
        }
        json_out_volume(&w, &v, shown);
        return api_reply_json(r, 200, &w);
}

int api_volume_delete(ApiRequest *r, ApiError *e) {
        int k = api_volume_remove(r, r->params[0], e);

        if (k < 0)
                return k;
        return api_reply_empty(r, 204);
}

/* ---- the volumes of a sandbox create ---- */

int api_volume_mounts_parse(ApiRequest *r, const JsonValue *list, const char *read_only_key, ApiVolumeMounts *ret,
                            ApiError *e) {
        static const char *const allowed[] = { "name", "path", "read_only", "readOnly", NULL };
        size_t n;
        int k;

        *ret = (ApiVolumeMounts){};
        if (!list || json_is_null(list))
                return 0;
        if (json_type(list) != JSON_ARRAY)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "volumes must be an array of {\"name\", \"path\", \"read_only\"}");
        n = json_array_size(list);
        if (n > STORE_VOLUME_MOUNTS_MAX)
                return api_error(e, -E2BIG, API_INVALID_ARGUMENT, "at most %d volumes", STORE_VOLUME_MOUNTS_MAX);
        for (size_t i = 0; i < n; i++) {
                const JsonValue *m = json_array_at(list, i), *name = json_get(m, "name"), *path = json_get(m, "path"),
                                *ro = read_only_key ? json_get(m, read_only_key) : NULL;
                const char *unknown = NULL;
                VolumeMount *out = &ret->m[i];
                bool read_only = false;
                Volume v;

                if (json_type(m) != JSON_OBJECT)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "volumes[%zu] must be an object", i);
                if (json_check_keys(m, allowed, &unknown) < 0)
                        return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field 'volumes[%zu].%.64s'", i,
                                         strna(unknown));
                if (json_type(name) != JSON_STRING || json_type(path) != JSON_STRING)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "volumes[%zu] needs a name and a path (strings)", i);
                if (ro && !json_is_null(ro) && json_bool(ro, &read_only) < 0)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "volumes[%zu].%s must be a boolean", i,
                                         read_only_key);
                k = api_volume_path_validate(json_string(path), json_string_len(path), e);
                if (k < 0)
                        return k;
                k = api_volume_lookup(r, json_string(name), &v, e);
                if (k < 0)
                        return k;
                if (v.read_only && !read_only)
                        return api_error(e, -EROFS, API_CONFLICT,
                                         "volume '%s' is a read-only snapshot: mount it read-only (volumes[%zu].%s)",
                                         v.name, i, read_only_key ? read_only_key : "read_only");
                for (size_t j = 0; j < i; j++) {
                        if (streq(ret->m[j].volume_id, v.id))
                                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "volume '%s' is named twice",
                                                 v.name);
                        if (streq(ret->m[j].path, json_string(path)))
                                return api_error(e, -EINVAL, API_INVALID_PATH, "two volumes at %s",
                                                 json_string(path));
                }
                /* a cluster: a volume lives on one worker, and the sandbox goes there */
                if (i > 0 && !streq(ret->worker, v.worker))
                        return api_error(e, -EXDEV, API_CONFLICT,
                                         "volumes '%s' and '%s' live on different workers: one sandbox cannot mount both",
                                         ret->m[0].volume_name, v.name);
                (void) strscpy(ret->worker, sizeof ret->worker, v.worker);
                (void) strscpy(out->volume_id, sizeof out->volume_id, v.id);
                (void) strscpy(out->volume_name, sizeof out->volume_name, v.name);
                (void) strscpy(out->path, sizeof out->path, json_string(path));
                out->read_only = read_only;
                ret->n = i + 1;
        }
        return 0;
}

int api_volume_mounts_record(ApiRequest *r, const char *sandbox_id, const ApiVolumeMounts *vols, ApiError *e) {
        int k;

        if (!vols || vols->n == 0)
                return 0;
        k = store_volume_mount(r->store, sandbox_id, vols->m, vols->n);
        if (k == -EBUSY) {
                /* which one: the first whose rule the others break */
                for (size_t i = 0; i < vols->n; i++) {
                        Volume v;
                        if (store_volume_get(r->store, r->key.tenant_id, vols->m[i].volume_name, &v) < 0)
                                continue;
                        if (v.writers > 0 || (!vols->m[i].read_only && v.readers > 0))
                                return api_error(e, k, API_VOLUME_IN_USE,
                                                 "volume '%s' is mounted by another sandbox %s", v.name,
                                                 v.writers > 0 ? "that writes to it (one writer or many readers)"
                                                               : "(a writer needs it alone)");
                }
                return api_error(e, k, API_VOLUME_IN_USE, "a volume is in use by another sandbox");
        }
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "a volume was deleted meanwhile");
        if (k < 0)
                return api_store_error(e, k, "recording the sandbox's volumes");
        return 0;
}

/* {"volumes":[{"name","path","read_only"}]} of a sandbox (GET /v1/sandboxes/{id}/volumes) */
int api_sandbox_volumes(ApiRequest *r, ApiError *e) {
        _cleanup_sandbox_ Sandbox sb = {};
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_free_ VolumeMount *m = NULL;
        size_t n = 0;
        int k;

        json_w_init(&w);
        k = api_sandbox_lookup(r, r->params[0], false, &sb, e);
        if (k < 0)
                return k;
        k = store_volume_mounts(r->store, sb.id, &m, &n);
        if (k < 0)
                return api_store_error(e, k, "listing the sandbox's volumes");
        json_w_object_begin(&w);
        json_w_key(&w, "volumes");
        json_w_array_begin(&w);
        for (size_t i = 0; i < n; i++) {
                json_w_object_begin(&w);
                json_w_kv_string(&w, "name", m[i].volume_name);
                json_w_kv_string(&w, "path", m[i].path);
                json_w_kv_bool(&w, "read_only", m[i].read_only);
                json_w_object_end(&w);
        }
        json_w_array_end(&w);
        json_w_object_end(&w);
        return api_reply_json(r, 200, &w);
}

/* ---- branch ---- */

static const char *const branch_volumes_table[_API_BRANCH_VOLUMES_MAX] = {
        [API_BRANCH_VOLUMES_SHARE_RO] = "share_ro",
        [API_BRANCH_VOLUMES_SNAPSHOT] = "snapshot",
        [API_BRANCH_VOLUMES_NONE] = "none",
};

ApiBranchVolumes api_branch_volumes_from_string(const char *s) {
        for (size_t i = 0; s && i < ELEMENTSOF(branch_volumes_table); i++)
                if (streq(branch_volumes_table[i], s))
                        return (ApiBranchVolumes) i;
        return _API_BRANCH_VOLUMES_INVALID;
}

int api_volume_branch(ApiRequest *r, const char *source_id, const Sandbox *kids, size_t n, ApiBranchVolumes mode,
                      ApiError *e) {
        _cleanup_free_ VolumeMount *src = NULL;
        _cleanup_free_ ApiVolumeMounts *vols = new0(ApiVolumeMounts, 1);
        size_t n_src = 0;
        int k;

        if (!vols)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        k = store_volume_mounts(r->store, source_id, &src, &n_src);
        if (k < 0)
                return api_store_error(e, k, "listing the sandbox's volumes");
        if (n_src == 0 || mode == API_BRANCH_VOLUMES_NONE)
                return 0;
        for (size_t i = 0; i < n; i++) {
                vols->n = n_src;
                for (size_t j = 0; j < n_src; j++) {
                        vols->m[j] = src[j];
                        if (mode == API_BRANCH_VOLUMES_SHARE_RO) {
                                vols->m[j].read_only = true;
                                continue;
                        }
                        /* its own snapshot, named after the volume and the child */
                        char name[API_VOLUME_NAME_MAX + 1];
                        Volume from, made;
                        k = api_volume_lookup(r, src[j].volume_name, &from, e);
                        if (k < 0)
                                return k;
                        snprintf(name, sizeof name, "%.*s-%s", (int) (API_VOLUME_NAME_MAX - API_ID_LEN - 1),
                                 src[j].volume_name, kids[i].id);
                        k = api_volume_clone_make(r, &from, name, &made, e);
                        if (k < 0)
                                return k;
                        (void) strscpy(vols->m[j].volume_id, sizeof vols->m[j].volume_id, made.id);
                        (void) strscpy(vols->m[j].volume_name, sizeof vols->m[j].volume_name, made.name);
                }
                k = api_volume_mounts_record(r, kids[i].id, vols, e);
                if (k < 0)
                        return k;
        }
        return 0;
}
