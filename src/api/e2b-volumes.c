/* SPDX-License-Identifier: MIT */
/* The E2B volumes API on space's volumes: POST /volumes {name} (the default
 * size), GET /volumes ([{volumeID, name}]), GET and DELETE
 * /volumes/{volumeID}. A volume's E2B id is its space id; sandboxes mount
 * them by name (volumeMounts of a create, e2b-rest.c). The content API
 * (/volumecontent) is not served: the /v1 files API is its counterpart. */

#include "alloc-util.h"
#include "api-internal.h"
#include "e2b.h"
#include "str-util.h"

static void write_volume(JsonWriter *w, const Volume *v) {
        json_w_object_begin(w);
        json_w_kv_string(w, "volumeID", v->id);
        json_w_kv_string(w, "name", v->name);
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
        json_w_init(&w);
        write_volume(&w, &v);
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
                write_volume(&w, &vols[i]);
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
        json_w_init(&w);
        write_volume(&w, &v);
        return e2b_reply_json(r, 200, &w, NULL);
}
