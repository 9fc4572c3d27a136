/* SPDX-License-Identifier: MIT */
/* E2B's template tags onto space's (template-versions.c):
 *   POST /templates/tags {"target":"NAME[:TAG|@vN]","tags":[...]} → 201 {"buildID","tags"}
 *   DELETE /templates/tags {"name":NAME,"tags":[...]} → 204
 *   GET /templates/{templateID}/tags → 200 [{"tag","buildID","createdAt"}]
 * A build there is a version here; its buildID is the version written as a
 * UUID (00000000-0000-0000-0000-<N in hex>), so the SDKs' types hold. The
 * list has "latest" (the newest version) first, then the tags. Assigning and
 * removing take an admin key, as the v1 API's tags do. */

#include <inttypes.h>
#include <stdio.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "e2b.h"

#define E2B_TAGS_MAX 64U

static void build_id(uint64_t version, char buf[static 40]) {
        (void) snprintf(buf, 40, "00000000-0000-0000-0000-%012" PRIx64, (uint64_t) (version & 0xffffffffffffULL));
}

static int tags_array(const JsonValue *in, const char *key, const JsonValue **ret, ApiError *e) {
        const JsonValue *tags = json_get(in, key);

        if (json_type(tags) != JSON_ARRAY || json_array_size(tags) == 0 || json_array_size(tags) > E2B_TAGS_MAX)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "%s must be an array of 1..%u tags", key,
                                 E2B_TAGS_MAX);
        for (size_t i = 0; i < json_array_size(tags); i++) {
                const char *t = json_string(json_array_at(tags, i));
                if (!api_template_tag_valid(t))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "tag '%.64s': a tag is [A-Za-z0-9][A-Za-z0-9._-]{0,127} and not 'latest'",
                                         strna(t));
        }
        *ret = tags;
        return 0;
}

static int need_admin(ApiRequest *r, ApiError *e) {
        return r->key.admin ? 0 : api_error(e, -EPERM, API_FORBIDDEN, "changing template tags needs an admin key");
}

static int tags_assign(ApiRequest *r, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_json_ JsonValue *in = NULL;
        const JsonValue *tags;
        ApiTemplateRef t;
        char id[40];
        int k;

        k = need_admin(r, e);
        if (k >= 0)
                k = e2b_read_json(r, &in, e);
        if (k < 0)
                return k;
        if (!json_string(json_get(in, "target")))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "target must be a string: \"name:tag\"");
        k = tags_array(in, "tags", &tags, e);
        if (k >= 0)
                k = api_template_resolve(r, json_string(json_get(in, "target")), &t, e);
        if (k < 0)
                return k;
        if (t.version == 0)
                return api_error(e, -ENOENT, API_NOT_FOUND,
                                 "template '%s' has no versions (it was made before versions): publish it again",
                                 t.name);
        for (size_t i = 0; i < json_array_size(tags); i++) {
                k = api_template_tag_assign(r, t.name, json_string(json_array_at(tags, i)), t.version, e);
                if (k < 0)
                        return k;
        }
        build_id(t.version, id);
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "buildID", id);
        json_w_key(&w, "tags");
        json_w_array_begin(&w);
        for (size_t i = 0; i < json_array_size(tags); i++)
                json_w_string(&w, json_string(json_array_at(tags, i)));
        json_w_array_end(&w);
        json_w_object_end(&w);
        return e2b_reply_json(r, 201, &w, NULL);
}

static int tags_remove(ApiRequest *r, ApiError *e) {
        _cleanup_json_ JsonValue *in = NULL;
        const JsonValue *tags;
        ApiTemplateRef t;
        int k;

        k = need_admin(r, e);
        if (k >= 0)
                k = e2b_read_json(r, &in, e);
        if (k < 0)
                return k;
        if (api_template_ref_parse(json_string(json_get(in, "name")), &t) < 0 || t.tag[0] || t.version)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "name must be a template's name");
        k = tags_array(in, "tags", &tags, e);
        if (k < 0)
                return k;
        for (size_t i = 0; i < json_array_size(tags); i++) {
                k = api_template_tag_remove(r, t.name, json_string(json_array_at(tags, i)), e);
                if (k < 0)
                        return k;
        }
        return e2b_reply(r, 204, NULL, NULL, 0, NULL);
}

static void tag_json(JsonWriter *w, const char *tag, uint64_t version, int64_t created_usec) {
        char id[40], ts[JSON_OUT_TIME_MAX];

        build_id(version, id);
        json_out_time(created_usec, ts);
        json_w_object_begin(w);
        json_w_kv_string(w, "tag", tag);
        json_w_kv_string(w, "buildID", id);
        json_w_kv_string(w, "createdAt", ts);
        json_w_object_end(w);
}

static int tags_list(ApiRequest *r, const char *id, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ TemplateVersion *vs = NULL;
        _cleanup_free_ TemplateTag *tags = NULL;
        size_t n_vs = 0, n = 0;
        Template tp;
        int k;

        k = api_template_name_valid(id) ? store_template_get(r->store, id, &tp) : -ENOENT;
        if (k >= 0 && tp.tenant_id[0] && !streq(tp.tenant_id, r->key.tenant_id))
                k = -ENOENT;
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "template '%.64s' not found", id);
        if (k < 0)
                return api_store_error(e, k, "looking up the template");
        k = store_template_version_list(r->store, id, &vs, &n_vs);
        if (k >= 0)
                k = store_template_tag_list(r->store, id, &tags, &n);
        if (k < 0)
                return api_store_error(e, k, "listing the tags");
        json_w_init(&w);
        json_w_array_begin(&w);
        if (n_vs > 0)
                tag_json(&w, "latest", vs[0].version, vs[0].created_usec);
        for (size_t i = 0; i < n; i++) {
                int64_t created = 0;
                for (size_t j = 0; j < n_vs; j++)
                        if (vs[j].version == tags[i].version)
                                created = vs[j].created_usec;
                tag_json(&w, tags[i].tag, tags[i].version, created);
        }
        json_w_array_end(&w);
        return e2b_reply_json(r, 200, &w, NULL);
}

int e2b_template_tags_route(ApiRequest *r, char **s, size_t n, ApiError *e) {
        const char *m = r->head->method;

        if (n == 2 && streq(m, "POST"))
                return tags_assign(r, e);
        if (n == 2 && streq(m, "DELETE"))
                return tags_remove(r, e);
        if (n == 3 && streq(m, "GET"))
                return tags_list(r, s[1], e);
        return api_error(e, -EINVAL, API_METHOD_NOT_ALLOWED, "%.16s is not allowed on %.200s", m, r->head->path);
}
