/* SPDX-License-Identifier: MIT */
/* /v1/volumes/{name}/files?path=: a volume's files without a sandbox. GET
 * a file's bytes (or, for a directory or with list=1, its entries), PUT a
 * file's bytes (parents made), DELETE a file or an empty directory. The
 * worker that holds the volume resolves the path beneath its root
 * (worker-volume-files.c: no symlink out of it is followed); here the path
 * is checked the way a sandbox path is, and a file is at most
 * API_VOLUME_FILE_MAX bytes. */

#include "alloc-util.h"
#include "api-internal.h"
#include "base64.h"
#include "str-util.h"


int api_volume_path_components(const char *rel, ApiError *e) {
        for (const char *c = rel; *c; ) {
                const char *end = strchrnul(c, '/');
                if (end == c || (end - c == 1 && c[0] == '.'))
                        return api_error(e, -EINVAL, API_INVALID_PATH, "path has an empty or '.' component");
                c = *end ? end + 1 : end;
        }
        return 0;
}

/* ?path= as a path relative to the volume's root ("" = the root) */
static int file_path(ApiRequest *r, char **ret_q, const char **ret_rel, ApiError *e) {
        _cleanup_free_ char *q = NULL;
        const char *rel;
        int k;

        k = api_query_string(r, "path", &q, e);
        if (k < 0)
                return k;
        if (!q)
                return api_error(e, -EINVAL, API_INVALID_PATH, "path is required (?path=/in/the/volume)");
        k = api_validate_path(q, strlen(q), "path", e);
        if (k < 0)
                return k;
        if (q[0] != '/')
                return api_error(e, -EINVAL, API_INVALID_PATH, "path must be absolute (from the volume's root)");
        rel = q + 1; /* "/" is the root; "//b" keeps an empty component, refused below */
        /* "." components, "//" and a trailing "/" are refused too: one spelling per file */
        if (*rel && rel[strlen(rel) - 1] == '/')
                return api_error(e, -EINVAL, API_INVALID_PATH, "path ends in '/'");
        k = api_volume_path_components(rel, e);
        if (k < 0)
                return k;
        *ret_rel = rel;
        *ret_q = TAKE_PTR(q);
        return 0;
}

static int begin(ApiRequest *r, Volume *v, char **q, const char **rel, ApiError *e) {
        int k = api_volume_lookup(r, r->params[0], v, e);

        if (k >= 0)
                k = file_path(r, q, rel, e);
        if (k >= 0)
                k = api_get_worker(r, e);
        return k;
}

int api_volume_files_get(ApiRequest *r, ApiError *e) {
        _cleanup_json_ JsonValue *reply = NULL;
        _cleanup_free_ char *q = NULL;
        _cleanup_free_ void *data = NULL;
        _cleanup_(json_w_done) JsonWriter w;
        const JsonValue *entries, *b64;
        const char *rel = NULL;
        bool list = false;
        size_t n = 0;
        Volume v;
        int k;

        json_w_init(&w);
        k = api_query_bool(r, "list", &list, e);
        if (k >= 0)
                k = begin(r, &v, &q, &rel, e);
        if (k >= 0)
                k = worker_volume_file_read(r->worker, v.worker, v.id, rel, &reply, e);
        if (k < 0)
                return k;
        if (streq(strempty(json_string(json_get(reply, "type"))), "dir")) {
                entries = json_get(reply, "entries");
                if (json_type(entries) != JSON_ARRAY)
                        return api_error(e, -EBADMSG, API_INTERNAL, "malformed worker reply");
                json_w_object_begin(&w);
                json_w_key(&w, "entries");
                json_w_array_begin(&w);
                for (size_t i = 0; i < json_array_size(entries); i++) {
                        const JsonValue *en = json_array_at(entries, i);
                        uint64_t size = 0;
                        json_w_object_begin(&w);
                        json_w_kv_string(&w, "name", json_string(json_get(en, "name")));
                        json_w_kv_string(&w, "type", json_string(json_get(en, "type")));
                        (void) json_uint64(json_get(en, "size"), &size);
                        json_w_key(&w, "size");
                        json_w_uint(&w, size);
                        json_w_object_end(&w);
                }
                json_w_array_end(&w);
                json_w_object_end(&w);
                return api_reply_json(r, 200, &w);
        }
        if (list)
                return api_error(e, -ENOTDIR, API_INVALID_PATH, "%s is not a directory", q);
        b64 = json_get(reply, "data_b64");
        if (json_type(b64) != JSON_STRING || base64_decode(json_string(b64), json_string_len(b64), &data, &n) < 0)
                return api_error(e, -EBADMSG, API_INTERNAL, "malformed worker reply");
        return api_reply_bytes(r, 200, "application/octet-stream", data, n);
}

int api_volume_files_put(ApiRequest *r, ApiError *e) {
        _cleanup_free_ char *q = NULL, *body = NULL, *b64 = NULL;
        const char *rel = NULL;
        size_t n = 0, b64_len = 0;
        Volume v;
        int k;

        k = begin(r, &v, &q, &rel, e);
        if (k >= 0)
                k = api_volume_writable(&v, e);
        if (k < 0)
                return k;
        if (isempty(rel))
                return api_error(e, -EISDIR, API_INVALID_PATH, "the volume's root is a directory");
        k = api_read_body(r, API_VOLUME_FILE_MAX, &body, &n, e);
        if (k < 0)
                return k;
        k = base64_encode(body ?: "", n, &b64, &b64_len);
        if (k < 0)
                return api_error(e, k, API_UNAVAILABLE, "out of memory");
        k = worker_volume_file_write(r->worker, v.worker, v.id, rel, b64, NULL, e);
        if (k < 0)
                return k;
        return api_reply_empty(r, 204);
}

int api_volume_files_delete(ApiRequest *r, ApiError *e) {
        _cleanup_free_ char *q = NULL;
        const char *rel = NULL;
        Volume v;
        int k;

        k = begin(r, &v, &q, &rel, e);
        if (k >= 0)
                k = api_volume_writable(&v, e);
        if (k < 0)
                return k;
        if (isempty(rel))
                return api_error(e, -EBUSY, API_INVALID_PATH, "the volume's root cannot be removed (delete the volume)");
        k = worker_volume_file_remove(r->worker, v.worker, v.id, rel, e);
        if (k < 0)
                return k;
        return api_reply_empty(r, 204);
}
