/* SPDX-License-Identifier: MIT */
/* The E2B volumes API on space's volumes: POST /volumes {name} (the default
 * size), GET /volumes ([{volumeID, name}]), GET and DELETE
 * /volumes/{volumeID}. A volume's E2B id is its space id; sandboxes mount
 * them by name (volumeMounts of a create, e2b-rest.c). The content API
 * (/volumecontent/{volumeID}/file|path|dir) takes the volume's token (its
 * "token" here) instead of a key, and works on the worker's volume files ops
 * (worker-volume-files.c) as the /v1 files API does; a file is at most
 * API_VOLUME_FILE_MAX bytes; owner and mode changes (PATCH) are refused. */

#include <openssl/crypto.h>
#include <stdio.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "base64.h"
#include "e2b.h"
#include "str-util.h"

static void write_volume(JsonWriter *w, const Volume *v, const char *token) {
        json_w_object_begin(w);
        json_w_kv_string(w, "volumeID", v->id);
        json_w_kv_string(w, "name", v->name);
        if (token)
                json_w_kv_string(w, "token", token);
        json_w_object_end(w);
}

/* The tenant's volume of that id: 404 (E2B's VolumeNotFoundError) otherwise. */
static int find_by_id(ApiRequest *r, const char *id, Volume *ret, ApiError *e) {
        _cleanup_free_ Volume *list = NULL;
        size_t n = 0;
        int k;

        k = store_volume_list(r->store, r->key.tenant_id, &list, &n);
        if (k < 0)
                return api_store_error(e, k, "listing volumes");
        for (size_t i = 0; i < n; i++)
                if (streq(list[i].id, id)) {
                        *ret = list[i];
                        return 0;
                }
        return api_error(e, -ENOENT, API_NOT_FOUND, "volume %.64s not found", id);
}

static int create(ApiRequest *r, ApiError *e) {
        _cleanup_json_ JsonValue *in = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        const JsonValue *name;
        char token[E2B_VOLUME_TOKEN_MAX];
        Volume v;
        int k;

        k = e2b_read_json(r, &in, e);
        if (k < 0)
                return k;
        name = json_get(in, "name");
        if (json_type(name) != JSON_STRING)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "name is required (a string)");
        k = api_volume_make(r, json_string(name), API_VOLUME_SIZE_MB_DEFAULT, &v, e);
        if (k < 0)
                return k;
        k = e2b_volume_token(r, &v, token);
        if (k < 0)
                return api_error(e, k, API_UNAVAILABLE, "cannot make the volume's token");
        json_w_init(&w);
        write_volume(&w, &v, token);
        return e2b_reply_json(r, 201, &w, NULL);
}

static int list(ApiRequest *r, ApiError *e) {
        _cleanup_free_ Volume *vols = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        size_t n = 0;
        int k;

        k = store_volume_list(r->store, r->key.tenant_id, &vols, &n);
        if (k < 0)
                return api_store_error(e, k, "listing volumes");
        json_w_init(&w);
        json_w_array_begin(&w);
        for (size_t i = 0; i < n; i++)
                write_volume(&w, &vols[i], NULL);
        json_w_array_end(&w);
        return e2b_reply_json(r, 200, &w, NULL);
}

int e2b_volumes_route(ApiRequest *r, char **s, size_t n, ApiError *e) {
        const char *m = r->head->method;
        _cleanup_(json_w_done) JsonWriter w = {};
        Volume v;
        int k;

        if (n == 1 && streq(m, "GET"))
                return list(r, e);
        if (n == 1 && streq(m, "POST"))
                return create(r, e);
        if (n != 2 || (!streq(m, "GET") && !streq(m, "DELETE")))
                return api_error(e, -ENOENT, API_NOT_FOUND, "no such endpoint");
        k = find_by_id(r, s[1], &v, e);
        if (k < 0)
                return k;
        if (streq(m, "DELETE")) {
                k = api_volume_remove(r, v.name, e);
                if (k < 0)
                        return k;
                return api_reply_empty(r, 204);
        }
        {
                char token[E2B_VOLUME_TOKEN_MAX];
                k = e2b_volume_token(r, &v, token);
                if (k < 0)
                        return api_error(e, k, API_UNAVAILABLE, "cannot make the volume's token");
                json_w_init(&w);
                write_volume(&w, &v, token);
        }
        return e2b_reply_json(r, 200, &w, NULL);
}

/* ---- /volumecontent: a volume's files, with the volume's token ---- */

/* A volume's token: "<tenant id>.<hex HMAC of 'volume:<tenant>:<volume id>'>" under the E2B secret. It opens
 * that volume's content only; deleting the volume ends it (a new volume gets a new id). */
int e2b_volume_token(ApiRequest *r, const Volume *v, char ret[static E2B_VOLUME_TOKEN_MAX]) {
        char msg[STORE_ID_MAX * 2 + 16], mac[E2B_TOKEN_LEN + 1];
        int k;

        snprintf(msg, sizeof msg, "volume:%s:%s", v->tenant_id, v->id);
        k = e2b_secret_hmac(api_config(r->api), msg, mac);
        if (k < 0)
                return k;
        snprintf(ret, E2B_VOLUME_TOKEN_MAX, "%s.%s", v->tenant_id, mac);
        explicit_bzero(mac, sizeof mac);
        return 0;
}

/* The request's Bearer token opens volume id: its tenant becomes the request's (as a key's would). */
static int volume_auth(ApiRequest *r, const char *id, Volume *ret, ApiError *e) {
        const char *h = http_head_header(r->head, "Authorization");
        char tenant[STORE_ID_MAX], want[E2B_VOLUME_TOKEN_MAX];
        const char *tok, *dot;
        Tenant t;
        int k;

        if (!h || !startswith(h, "Bearer "))
                return api_error(e, -EACCES, API_UNAUTHORIZED, "missing 'Authorization: Bearer <volume token>'");
        tok = h + STRLEN("Bearer ");
        dot = strchr(tok, '.');
        if (!dot || (size_t) (dot - tok) >= sizeof tenant)
                return api_error(e, -EACCES, API_UNAUTHORIZED, "not a volume token");
        memcpy(tenant, tok, (size_t) (dot - tok));
        tenant[dot - tok] = 0;
        (void) strscpy(r->key.tenant_id, sizeof r->key.tenant_id, tenant);
        k = find_by_id(r, id, ret, e); /* 404 for another tenant's id, as for none */
        if (k < 0) {
                r->key = (ApiKey) {};
                return api_error(e, -EACCES, API_UNAUTHORIZED, "the token does not open volume %.64s", id);
        }
        k = e2b_volume_token(r, ret, want);
        if (k < 0)
                return api_error(e, k, API_UNAVAILABLE, "cannot check the token");
        if (strlen(tok) != strlen(want) || CRYPTO_memcmp(tok, want, strlen(want)) != 0) {
                explicit_bzero(want, sizeof want);
                r->key = (ApiKey) {};
                return api_error(e, -EACCES, API_UNAUTHORIZED, "the token does not open volume %.64s", id);
        }
        explicit_bzero(want, sizeof want);
        if (store_tenant_get(r->store, tenant, &t) >= 0)
                (void) strscpy(r->tenant_name, sizeof r->tenant_name, t.name);
        /* its own request limits, as a key's: the volume id names its bucket */
        (void) strscpy(r->key.id, sizeof r->key.id, ret->id);
        snprintf(r->actor, sizeof r->actor, "volume:%s", ret->id);
        return api_limits_enter(r, false, e);
}

/* E2B's VolumeEntryStat of a worker stat reply */
static int write_entry(JsonWriter *w, const char *path, const char *name, const JsonValue *st) {
        const char *type = json_string(json_get(st, "type"));
        uint64_t size = 0, mode = 0, uid = 0, gid = 0, at = 0, mt = 0, ct = 0;
        char a[JSON_OUT_TIME_MAX], m[JSON_OUT_TIME_MAX], c[JSON_OUT_TIME_MAX];

        if (!type || json_uint64(json_get(st, "size"), &size) < 0 || json_uint64(json_get(st, "mode"), &mode) < 0 ||
            json_uint64(json_get(st, "uid"), &uid) < 0 || json_uint64(json_get(st, "gid"), &gid) < 0 ||
            json_uint64(json_get(st, "atime_usec"), &at) < 0 || json_uint64(json_get(st, "mtime_usec"), &mt) < 0 ||
            json_uint64(json_get(st, "ctime_usec"), &ct) < 0 || at > INT64_MAX || mt > INT64_MAX || ct > INT64_MAX)
                return -EBADMSG;
        json_out_time((int64_t) at, a);
        json_out_time((int64_t) mt, m);
        json_out_time((int64_t) ct, c);
        json_w_object_begin(w);
        json_w_kv_string(w, "name", name);
        json_w_kv_string(w, "path", path);
        json_w_kv_string(w, "type", streq(type, "dir") ? "directory" : streq(type, "file") ? "file"
                                    : streq(type, "symlink") ? "symlink" : "unknown");
        json_w_key(w, "size");
        json_w_uint(w, size);
        json_w_key(w, "mode");
        json_w_uint(w, mode);
        json_w_key(w, "uid");
        json_w_uint(w, uid);
        json_w_key(w, "gid");
        json_w_uint(w, gid);
        json_w_kv_string(w, "atime", a);
        json_w_kv_string(w, "mtime", m);
        json_w_kv_string(w, "ctime", c);
        json_w_object_end(w);
        return 0;
}

/* ?path= of a content call: "/a/b" or "a/b" → "a/b" ("" = the root); the same checks as the /v1 files API */
static int content_path(ApiRequest *r, char **ret_q, const char **ret_rel, ApiError *e) {
        _cleanup_free_ char *q = NULL;
        const char *rel;
        int k;

        k = api_query_string(r, "path", &q, e);
        if (k < 0)
                return k;
        if (!q)
                return api_error(e, -EINVAL, API_INVALID_PATH, "path is required");
        k = api_validate_path(q, strlen(q), "path", e);
        if (k < 0)
                return k;
        rel = q[0] == '/' ? q + 1 : q;
        k = api_volume_path_components(rel, e);
        if (k < 0)
                return k;
        *ret_rel = rel;
        *ret_q = TAKE_PTR(q);
        return 0;
}

static const char *base_name(const char *rel) {
        const char *s = strrchr(rel, '/');
        return s ? s + 1 : rel;
}

static int reply_entry(ApiRequest *r, int status, const char *rel, const JsonValue *st, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w = {};
        char path[API_PATH_MAX + 2];

        snprintf(path, sizeof path, "/%s", rel);
        json_w_init(&w);
        if (write_entry(&w, path, *rel ? base_name(rel) : "", st) < 0)
                return api_error(e, -EBADMSG, API_INTERNAL, "malformed worker reply");
        return e2b_reply_json(r, status, &w, NULL);
}

int e2b_volume_content_route(ApiRequest *r, char **s, size_t n, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        _cleanup_free_ char *q = NULL, *body = NULL, *b64 = NULL;
        _cleanup_free_ void *data = NULL;
        const char *m = r->head->method, *rel = NULL, *what;
        size_t len = 0, b64_len = 0;
        Volume v;
        int k;

        if (n != 3)
                return api_error(e, -ENOENT, API_NOT_FOUND, "no such endpoint");
        what = s[2];
        k = volume_auth(r, s[1], &v, e);
        if (k >= 0)
                k = content_path(r, &q, &rel, e);
        if (k >= 0)
                k = api_get_worker(r, e);
        if (k >= 0 && !streq(m, "GET"))
                k = api_volume_writable(&v, e);
        if (k < 0)
                return k;

        if (streq(what, "file") && streq(m, "GET")) {
                const JsonValue *d;
                k = worker_volume_file_read(r->worker, v.worker, v.id, rel, &reply, e);
                if (k < 0)
                        return k;
                d = json_get(reply, "data_b64");
                if (json_type(d) != JSON_STRING)
                        return api_error(e, -EISDIR, API_INVALID_PATH, "%s is not a file", q);
                if (base64_decode(json_string(d), json_string_len(d), &data, &len) < 0)
                        return api_error(e, -EBADMSG, API_INTERNAL, "malformed worker reply");
                return e2b_reply(r, 200, "application/octet-stream", data, len, NULL);
        }
        if (streq(what, "file") && streq(m, "PUT")) {
                if (isempty(rel))
                        return api_error(e, -EISDIR, API_INVALID_PATH, "the volume's root is a directory");
                k = api_read_body(r, API_VOLUME_FILE_MAX, &body, &len, e);
                if (k >= 0 && base64_encode(body ?: "", len, &b64, &b64_len) < 0)
                        k = api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                if (k >= 0)
                        k = worker_volume_file_write(r->worker, v.worker, v.id, rel, b64, &reply, e);
                if (k < 0)
                        return k;
                return reply_entry(r, 200, rel, reply, e);
        }
        if (streq(what, "path") && streq(m, "GET")) {
                k = worker_volume_file_stat(r->worker, v.worker, v.id, rel, &reply, e);
                if (k < 0)
                        return k;
                return reply_entry(r, 200, rel, reply, e);
        }
        if (streq(what, "path") && streq(m, "DELETE")) {
                if (isempty(rel))
                        return api_error(e, -EBUSY, API_INVALID_PATH, "the volume's root cannot be removed");
                k = worker_volume_file_remove(r->worker, v.worker, v.id, rel, e);
                if (k < 0)
                        return k;
                return api_reply_empty(r, 204);
        }
        if (streq(what, "dir") && streq(m, "POST")) {
                if (isempty(rel))
                        return api_error(e, -EEXIST, API_CONFLICT, "the volume's root exists");
                k = worker_volume_mkdir(r->worker, v.worker, v.id, rel, &reply, e);
                if (k < 0)
                        return k;
                return reply_entry(r, 201, rel, reply, e);
        }
        if (streq(what, "dir") && streq(m, "GET")) {
                _cleanup_(json_w_done) JsonWriter w = {};
                const JsonValue *entries;
                k = worker_volume_file_read(r->worker, v.worker, v.id, rel, &reply, e);
                if (k < 0)
                        return k;
                entries = json_get(reply, "entries");
                if (json_type(entries) != JSON_ARRAY)
                        return api_error(e, -ENOTDIR, API_INVALID_PATH, "%s is not a directory", q);
                json_w_init(&w);
                json_w_array_begin(&w);
                for (size_t i = 0; i < json_array_size(entries); i++) {
                        const JsonValue *en = json_array_at(entries, i);
                        const char *name = json_string(json_get(en, "name"));
                        char path[API_PATH_MAX + 2];
                        if (!name)
                                return api_error(e, -EBADMSG, API_INTERNAL, "malformed worker reply");
                        snprintf(path, sizeof path, "%s%s/%s", *rel ? "/" : "", rel, name);
                        if (write_entry(&w, path, name, en) < 0)
                                return api_error(e, -EBADMSG, API_INTERNAL, "malformed worker reply");
                }
                json_w_array_end(&w);
                return e2b_reply_json(r, 200, &w, NULL);
        }
        if (streq(what, "path") && streq(m, "PATCH"))
                return api_error(e, -EOPNOTSUPP, API_NOT_IMPLEMENTED,
                                 "changing a volume entry's owner or mode is not supported by space's E2B API");
        return api_error(e, -ENOENT, API_NOT_FOUND, "no such endpoint");
}
