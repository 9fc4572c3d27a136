/* SPDX-License-Identifier: MIT */
/* Template versions and tags. Every publish of a template (import, pull,
 * build) is a new version, NAME@vN in the pool beside NAME, which is then
 * made a copy of it (template_promote): the name means its newest version,
 * and a failed publish leaves it where it was. A template reference is
 *   NAME          the newest version (also NAME:latest)
 *   NAME:TAG      the version the tag points at
 *   NAME@vN       version N
 * A sandbox records the version it was made from. An old version that has
 * no tag and no sandbox (one not deleted, or one with a restorable
 * checkpoint) is collected: its row goes, then its subvolume on every
 * worker; checked after each publish, tag change and sandbox delete. */

#include <inttypes.h>
#include <stdio.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "log.h"

bool api_template_tag_valid(const char *s) {
        size_t n;

        if (!s)
                return false;
        n = strnlen(s, API_TEMPLATE_TAG_MAX + 1);
        if (n == 0 || n > API_TEMPLATE_TAG_MAX || streq(s, "latest"))
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
                if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
                        return false;
        }
        return true;
}

int api_template_ref_parse(const char *ref, ApiTemplateRef *ret) {
        ApiTemplateRef t = {};
        const char *sep;
        size_t n;

        if (!ref)
                return -EINVAL;
        sep = strpbrk(ref, ":@");
        n = sep ? (size_t) (sep - ref) : strlen(ref);
        if (n == 0 || n >= sizeof t.name)
                return -EINVAL;
        memcpy(t.name, ref, n);
        t.name[n] = 0;
        if (!api_template_name_valid(t.name))
                return -EINVAL;
        if (sep && *sep == '@') {
                const char *d = sep + 1;
                if (*d++ != 'v' || !*d || *d == '0' || strlen(d) > 19)
                        return -EINVAL;
                for (const char *c = d; *c; c++)
                        if (*c < '0' || *c > '9')
                                return -EINVAL;
                t.version = strtoull(d, NULL, 10);
        } else if (sep) {
                if (!streq(sep + 1, "latest")) {
                        if (!api_template_tag_valid(sep + 1))
                                return -EINVAL;
                        (void) strscpy(t.tag, sizeof t.tag, sep + 1);
                }
        }
        *ret = t;
        return 0;
}

static int newest_version(ApiRequest *r, const char *name, uint64_t *ret, ApiError *e) {
        uint64_t next;
        int k = store_template_version_next(r->store, name, &next);

        if (k < 0)
                return api_store_error(e, k, "looking up the template's versions");
        *ret = next - 1; /* 0: none */
        return 0;
}

int api_template_resolve(ApiRequest *r, const char *ref, ApiTemplateRef *ret, ApiError *e) {
        ApiTemplateRef t;
        uint64_t newest;
        int k;

        if (api_template_ref_parse(ref, &t) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "template: '%.64s' is not a template reference (NAME, NAME:TAG or NAME@vN; a name "
                                 "is [a-z0-9][a-z0-9._-]{0,63})", strna(ref));
        k = newest_version(r, t.name, &newest, e);
        if (k < 0)
                return k;
        if (t.tag[0]) {
                k = store_template_tag_get(r->store, t.name, t.tag, &t.version);
                if (k == -ENOENT)
                        return api_error(e, k, API_NOT_FOUND, "template '%s' has no tag '%s'", t.name, t.tag);
                if (k < 0)
                        return api_store_error(e, k, "looking up the tag");
        } else if (t.version > 0) {
                TemplateVersion v;
                k = store_template_version_get(r->store, t.name, t.version, &v);
                if (k == -ENOENT)
                        return api_error(e, k, API_NOT_FOUND, "template '%s' has no version %" PRIu64, t.name,
                                         t.version);
                if (k < 0)
                        return api_store_error(e, k, "looking up the version");
        } else
                t.version = newest;
        t.newest = t.version == newest;
        *ret = t;
        return 0;
}

/* The pool's name of a version: NAME for the newest one (and for a template
 * without versions), else NAME@vN. */
void api_template_pool_name(const ApiTemplateRef *t, char *buf, size_t size) {
        if (t->newest || t->version == 0)
                (void) snprintf(buf, size, "%s", t->name);
        else
                (void) snprintf(buf, size, "%s@v%" PRIu64, t->name, t->version);
}

int api_template_version_begin(ApiRequest *r, const char *name, uint64_t *ret_version, char *pool_name, size_t size,
                               ApiError *e) {
        ApiError ignored = {};
        int k = store_template_version_next(r->store, name, ret_version);

        if (k < 0)
                return api_store_error(e, k, "numbering the template's version");
        (void) snprintf(pool_name, size, "%s@v%" PRIu64, name, *ret_version);
        /* a version made but never recorded (spaced stopped in between) would block the number */
        k = api_get_worker(r, e);
        if (k >= 0 && worker_template_remove(r->worker, pool_name, &ignored) < 0)
                log_debug("Removing a stale %s failed: %s", pool_name, ignored.message);
        return k;
}

int api_template_version_commit(ApiRequest *r, const char *name, uint64_t version, const char *digest,
                                uint64_t size_bytes, ApiError *e) {
        TemplateVersion v = { .version = version, .size_bytes = size_bytes };
        char pool_name[STORE_NAME_MAX];
        int k;

        (void) strscpy(v.name, sizeof v.name, name);
        (void) strscpy(v.digest, sizeof v.digest, strempty(digest));
        (void) snprintf(pool_name, sizeof pool_name, "%s@v%" PRIu64, name, version);
        /* the name moves first: a failure there leaves no row (the newest version's row could
         * not be taken back, collection never removes the newest) */
        k = worker_template_promote(r->worker, name, version, e);
        if (k < 0) {
                ApiError ignored = {};
                (void) worker_template_remove(r->worker, pool_name, &ignored);
                return k;
        }
        k = store_template_version_add(r->store, &v);
        if (k == -EEXIST)
                return api_error(e, k, API_CONFLICT, "template '%s' got version %" PRIu64 " from another request",
                                 name, version);
        if (k < 0)
                return api_store_error(e, k, "recording the template's version");
        api_template_gc(r, name);
        return 0;
}

void api_template_gc(ApiRequest *r, const char *name) {
        _cleanup_free_ TemplateVersion *list = NULL;
        size_t n = 0;
        int k;

        if (store_template_version_list(r->store, name, &list, &n) < 0 || n < 2)
                return;
        for (size_t i = 1; i < n; i++) { /* list[0] is the newest: it stays */
                char pool_name[STORE_NAME_MAX], data[STORE_NAME_MAX + 64];
                ApiError e = {};

                if (list[i].tags[0] || list[i].users > 0)
                        continue;
                k = store_template_version_delete(r->store, name, list[i].version);
                if (k < 0) {
                        if (k != -EBUSY && k != -ENOENT)
                                log_warning_errno(k, "Collecting version %" PRIu64 " of template %s failed: %m",
                                                  list[i].version, name);
                        continue;
                }
                (void) snprintf(pool_name, sizeof pool_name, "%s@v%" PRIu64, name, list[i].version);
                k = api_get_worker(r, &e);
                if (k >= 0)
                        k = worker_template_remove(r->worker, pool_name, &e);
                if (k < 0)
                        log_warning("Removing %s from the pool failed (its row is gone): %s", pool_name, e.message);
                (void) snprintf(data, sizeof data, "{\"name\":\"%s\",\"version\":%" PRIu64 "}", name, list[i].version);
                api_event(r, NULL, "template.version_collected", "", data);
                log_info("Collected version %" PRIu64 " of template %s", list[i].version, name);
        }
}

void api_template_gc_sandbox(ApiRequest *r, const char *sandbox_id) {
        _cleanup_sandbox_ Sandbox sb = {};

        if (store_sandbox_get(r->store, NULL, sandbox_id, &sb) >= 0 && sb.template_version > 0)
                api_template_gc(r, sb.template_name);
}

void api_template_versions_remove(ApiRequest *r, const char *name) {
        _cleanup_free_ TemplateVersion *list = NULL;
        size_t n = 0;
        int k;

        if (store_template_version_list(r->store, name, &list, &n) < 0)
                return;
        k = store_template_versions_drop(r->store, name);
        if (k < 0)
                log_warning_errno(k, "Dropping the versions of template %s failed: %m", name);
        for (size_t i = 0; i < n; i++) {
                char pool_name[STORE_NAME_MAX];
                ApiError e = {};

                (void) snprintf(pool_name, sizeof pool_name, "%s@v%" PRIu64, name, list[i].version);
                if (worker_template_remove(r->worker, pool_name, &e) < 0)
                        log_warning("Removing %s from the pool failed: %s", pool_name, e.message);
        }
}

static int template_lookup(ApiRequest *r, const char *name, ApiError *e) {
        Template t;
        int k;

        if (!api_template_name_valid(name))
                return api_error(e, -ENOENT, API_NOT_FOUND, "no template '%.64s'", name);
        k = store_template_get(r->store, name, &t);
        if (k >= 0 && t.tenant_id[0] && !r->key.admin && !streq(t.tenant_id, r->key.tenant_id))
                k = -ENOENT; /* another tenant's is not told apart from none */
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "no template '%s'", name);
        if (k < 0)
                return api_store_error(e, k, "looking up the template");
        return 0;
}

static void out_tags(JsonWriter *w, const char *tags) {
        json_w_key(w, "tags");
        json_w_array_begin(w);
        for (const char *p = tags; p && *p;) {
                const char *c = strchr(p, ',');
                size_t n = c ? (size_t) (c - p) : strlen(p);
                char tag[STORE_TAG_MAX];
                if (n < sizeof tag) {
                        memcpy(tag, p, n);
                        tag[n] = 0;
                        json_w_string(w, tag);
                }
                p = c ? c + 1 : p + n;
        }
        json_w_array_end(w);
}

/* GET /v1/templates/{name}/versions: newest first, with the sandboxes (of the
 * caller's tenant; every tenant's for an admin key) using each. */
int api_template_versions(ApiRequest *r, ApiError *e) {
        const char *name = r->params[0];
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_free_ TemplateVersion *list = NULL;
        SandboxFilter f = { .tenant_id = r->key.admin ? NULL : r->key.tenant_id, .state = -1, .limit = 10000 };
        Sandbox *sbs = NULL;
        size_t n = 0, n_sb = 0;
        int k;

        json_w_init(&w);
        k = template_lookup(r, name, e);
        if (k < 0)
                return k;
        k = store_template_version_list(r->store, name, &list, &n);
        if (k < 0)
                return api_store_error(e, k, "listing the template's versions");
        k = store_sandbox_list(r->store, &f, &sbs, &n_sb);
        if (k < 0)
                return api_store_error(e, k, "listing sandboxes");
        json_w_object_begin(&w);
        json_w_kv_string(&w, "name", name);
        json_w_key(&w, "versions");
        json_w_array_begin(&w);
        for (size_t i = 0; i < n; i++) {
                char when[JSON_OUT_TIME_MAX];
                json_w_object_begin(&w);
                json_w_key(&w, "version");
                json_w_uint(&w, list[i].version);
                json_w_kv_bool(&w, "latest", i == 0);
                json_w_kv_string(&w, "digest", list[i].digest);
                json_w_key(&w, "size_bytes");
                json_w_uint(&w, list[i].size_bytes);
                json_out_time(list[i].created_usec, when);
                json_w_kv_string(&w, "created_at", when);
                out_tags(&w, list[i].tags);
                /* what the storage shares: every version is a read-only snapshot of its own
                 * import or build (builds of the same last layer: snapshots of one subvolume),
                 * and the template's name a snapshot of the newest */
                json_w_key(&w, "shared_with");
                json_w_array_begin(&w);
                if (i == 0)
                        json_w_string(&w, name);
                for (size_t j = 0; j < n; j++)
                        if (j != i && list[i].digest[0] && !strchr(list[i].digest, ':') &&
                            streq(list[i].digest, list[j].digest)) {
                                char other[STORE_NAME_MAX + 24];
                                (void) snprintf(other, sizeof other, "%s@v%" PRIu64, name, list[j].version);
                                json_w_string(&w, other);
                        }
                json_w_array_end(&w);
                json_w_key(&w, "in_use");
                json_w_uint(&w, list[i].users);
                json_w_key(&w, "sandboxes");
                json_w_array_begin(&w);
                for (size_t j = 0; j < n_sb; j++)
                        if (streq(sbs[j].template_name, name) && sbs[j].template_version == list[i].version)
                                json_w_string(&w, sbs[j].id);
                json_w_array_end(&w);
                json_w_object_end(&w);
        }
        json_w_array_end(&w);
        json_w_object_end(&w);
        sandbox_array_free(sbs, n_sb);
        return api_reply_json(r, 200, &w);
}

static void out_tag(JsonWriter *w, const char *name, const char *tag, uint64_t version) {
        json_w_object_begin(w);
        json_w_kv_string(w, "name", name);
        json_w_kv_string(w, "tag", tag);
        json_w_key(w, "version");
        json_w_uint(w, version);
        json_w_object_end(w);
}

int api_template_tag_assign(ApiRequest *r, const char *name, const char *tag, uint64_t version, ApiError *e) {
        char data[STORE_NAME_MAX + STORE_TAG_MAX + 64];
        uint64_t newest;
        int k;

        k = template_lookup(r, name, e);
        if (k < 0)
                return k;
        if (!api_template_tag_valid(tag))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "a tag is [A-Za-z0-9][A-Za-z0-9._-]{0,%u} and not 'latest' (the newest version), "
                                 "not '%.64s'", API_TEMPLATE_TAG_MAX - 1, strna(tag));
        k = newest_version(r, name, &newest, e);
        if (k < 0)
                return k;
        if (version == 0)
                version = newest;
        if (version == 0)
                return api_error(e, -ENOENT, API_NOT_FOUND,
                                 "template '%s' has no versions (it was made before versions): publish it again",
                                 name);
        k = store_template_tag_set(r->store, name, tag, version);
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "template '%s' has no version %" PRIu64, name, version);
        if (k < 0)
                return api_store_error(e, k, "setting the tag");
        (void) snprintf(data, sizeof data, "{\"name\":\"%s\",\"tag\":\"%s\",\"version\":%" PRIu64 "}", name, tag,
                        version);
        api_event(r, NULL, "template.tagged", "", data);
        api_template_gc(r, name); /* a tag that moved may leave its old version unused */
        return 0;
}

int api_template_tag_remove(ApiRequest *r, const char *name, const char *tag, ApiError *e) {
        int k;

        k = template_lookup(r, name, e);
        if (k < 0)
                return k;
        k = api_template_tag_valid(tag) ? store_template_tag_delete(r->store, name, tag) : -ENOENT;
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "template '%s' has no tag '%.64s'", name, strna(tag));
        if (k < 0)
                return api_store_error(e, k, "removing the tag");
        api_template_gc(r, name);
        return 0;
}

/* POST /v1/templates/{name}/tags {"tag":T,"version":N (default: the newest)} */
int api_template_tag_post(ApiRequest *r, ApiError *e) {
        static const char *const allowed[] = { "tag", "version", NULL };
        const char *name = r->params[0], *tag, *unknown = NULL;
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_json_ JsonValue *body = NULL;
        uint64_t version = 0;
        int k;

        json_w_init(&w);
        k = api_read_json(r, &body, e);
        if (k < 0)
                return k;
        if (json_type(body) != JSON_OBJECT)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "the body must be a JSON object");
        if (json_check_keys(body, allowed, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));
        tag = json_string(json_get(body, "tag"));
        if (!tag)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "tag is required (a string)");
        if (json_get(body, "version") && !json_is_null(json_get(body, "version")) &&
            (json_uint64(json_get(body, "version"), &version) < 0 || version == 0))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "version must be a version number (1, 2, ...)");
        k = api_template_tag_assign(r, name, tag, version, e);
        if (k < 0)
                return k;
        k = store_template_tag_get(r->store, name, tag, &version);
        if (k < 0)
                return api_store_error(e, k, "reading the tag back");
        out_tag(&w, name, tag, version);
        return api_reply_json(r, 200, &w);
}

/* DELETE /v1/templates/{name}/tags/{tag} */
int api_template_tag_delete(ApiRequest *r, ApiError *e) {
        int k = api_template_tag_remove(r, r->params[0], r->params[1], e);

        return k < 0 ? k : api_reply_empty(r, 204);
}

/* GET /v1/templates/{name}/tags */
int api_template_tags(ApiRequest *r, ApiError *e) {
        const char *name = r->params[0];
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_free_ TemplateTag *tags = NULL;
        size_t n = 0;
        int k;

        json_w_init(&w);
        k = template_lookup(r, name, e);
        if (k < 0)
                return k;
        k = store_template_tag_list(r->store, name, &tags, &n);
        if (k < 0)
                return api_store_error(e, k, "listing the tags");
        json_w_object_begin(&w);
        json_w_key(&w, "tags");
        json_w_array_begin(&w);
        for (size_t i = 0; i < n; i++)
                out_tag(&w, name, tags[i].tag, tags[i].version);
        json_w_array_end(&w);
        json_w_object_end(&w);
        return api_reply_json(r, 200, &w);
}
