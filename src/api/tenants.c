/* SPDX-License-Identifier: MIT */
/* /v1/tenants: the quotas of a tenant (what its live sandboxes may hold
 * together, and the request limits of its keys together) and its usage.
 * Admin keys list every tenant and set any tenant's quotas; any key may
 * read its own tenant's. And the admission helpers the create, branch and
 * checkpoint paths share. */

#include <inttypes.h>
#include <stdio.h>

#include "api-internal.h"
#include "log.h"
#include "str-util.h"

#define API_QUOTA_VALUE_MAX (UINT64_C(1) << 40)
#define API_QUOTA_RETRY_AFTER_S 60 /* a quota frees only when the tenant deletes something */

/* The config default of each quota (0 = unlimited / no tenant-wide limit). */
static uint64_t quota_default(const Config *c, TenantQuota q) {
        switch (q) {
        case TENANT_QUOTA_SANDBOXES:
                return c->tenant_max_sandboxes;
        case TENANT_QUOTA_CPU_MILLIS:
                return c->tenant_max_cpu_millis;
        case TENANT_QUOTA_MEMORY_MB:
                return c->tenant_max_memory_mb;
        case TENANT_QUOTA_DISK_MB:
                return c->tenant_max_disk_mb;
        case TENANT_QUOTA_CHECKPOINTS:
                return c->tenant_max_checkpoints;
        case TENANT_QUOTA_RPS:
                return c->tenant_rps;
        case TENANT_QUOTA_STREAMS:
                return c->tenant_streams_max;
        default:
                return 0;
        }
}

/* The config item behind each default, for messages. */
static const char *quota_config_name(TenantQuota q) {
        static const char *const names[_TENANT_QUOTA_MAX] = {
                [TENANT_QUOTA_SANDBOXES] = "tenant_max_sandboxes",
                [TENANT_QUOTA_CPU_MILLIS] = "tenant_max_cpu_millis",
                [TENANT_QUOTA_MEMORY_MB] = "tenant_max_memory_mb",
                [TENANT_QUOTA_DISK_MB] = "tenant_max_disk_mb",
                [TENANT_QUOTA_CHECKPOINTS] = "tenant_max_checkpoints",
                [TENANT_QUOTA_RPS] = "tenant_rps",
                [TENANT_QUOTA_STREAMS] = "tenant_streams_max",
        };
        return q >= 0 && q < _TENANT_QUOTA_MAX ? names[q] : "?";
}

static uint64_t quota_effective(const Config *c, const TenantQuotas *q, TenantQuota i) {
        return q->value[i] >= 0 ? (uint64_t) q->value[i] : quota_default(c, i);
}

int api_tenant_admission(ApiRequest *r, const char *tenant_id, StoreAdmission *ret, ApiError *e) {
        TenantQuotas q;
        int k;

        *ret = (StoreAdmission){};
        k = store_tenant_quotas_or_defaults(r->store, tenant_id, &q);
        if (k == -ENOENT) /* not a tenant id at all (cannot be a key's): the host's defaults */
                for (size_t i = 0; i < _TENANT_QUOTA_MAX; i++)
                        q.value[i] = TENANT_QUOTA_DEFAULT;
        else if (k < 0)
                return api_store_error(e, k, "reading the tenant's quotas");
        for (size_t i = 0; i < TENANT_RESOURCES; i++)
                ret->limit[i] = quota_effective(api_config(r->api), &q, (TenantQuota) i);
        return 0;
}

int api_quota_error(ApiRequest *r, const StoreAdmission *a, const char *what, ApiError *e) {
        TenantQuota q = a->exceeded;
        const char *name = tenant_quota_to_string(q) ?: "?";

        r->retry_after_s = API_QUOTA_RETRY_AFTER_S;
        log_info("Refused %s for tenant %s: quota %s=%" PRIu64 ", %" PRIu64 " in use, %" PRIu64 " more asked",
                 what, r->tenant_name, name, a->limit[q], a->usage.used[q], a->need);
        return api_error(e, -EDQUOT, API_TOO_MANY_REQUESTS,
                         "tenant '%s' is at its quota %s=%" PRIu64 " (%" PRIu64 " in use; %s needs %" PRIu64
                         " more): delete some first, or ask an admin to raise it (space tenant set)",
                         r->tenant_name, name, a->limit[q], a->usage.used[q], what, a->need);
}

/* The tenant's settings besides quotas. */
typedef struct TenantSettings {
        char default_runtime[8]; /* "" = the host's */
} TenantSettings;

static void write_tenant(ApiRequest *r, JsonWriter *w, const Tenant *t, const TenantQuotas *q, const TenantUsage *u,
                         const TenantSettings *ts) {
        const Config *c = api_config(r->api);

        json_w_object_begin(w);
        json_w_kv_string(w, "id", t->id);
        json_w_kv_string(w, "name", t->name);
        json_w_key(w, "default_runtime");
        if (ts->default_runtime[0])
                json_w_string(w, ts->default_runtime);
        else
                json_w_null(w);
        json_w_key(w, "quotas");
        json_w_object_begin(w);
        for (size_t i = 0; i < _TENANT_QUOTA_MAX; i++) {
                json_w_key(w, tenant_quota_to_string((TenantQuota) i));
                json_w_uint(w, quota_effective(c, q, (TenantQuota) i));
        }
        json_w_object_end(w);
        json_w_key(w, "overrides");
        json_w_object_begin(w);
        for (size_t i = 0; i < _TENANT_QUOTA_MAX; i++)
                if (q->value[i] >= 0) {
                        json_w_key(w, tenant_quota_to_string((TenantQuota) i));
                        json_w_uint(w, (uint64_t) q->value[i]);
                }
        json_w_object_end(w);
        json_w_key(w, "usage");
        json_w_object_begin(w);
        for (size_t i = 0; i < TENANT_RESOURCES; i++) {
                json_w_key(w, tenant_quota_to_string((TenantQuota) i));
                json_w_uint(w, u->used[i]);
        }
        json_w_object_end(w);
        json_w_object_end(w);
}

int api_tenant_default_runtime(ApiRequest *r, const char *tenant_id, char *buf, size_t size, ApiError *e) {
        _cleanup_free_ ObjectSetting *list = NULL;
        const char *v;
        size_t n = 0;
        int k;

        k = store_object_settings_get(r->store, "tenant", tenant_id, NULL, NULL, &list, &n);
        if (k < 0)
                return api_store_error(e, k, "reading the tenant's settings");
        v = object_setting_find(list, n, "tenant", "default_runtime");
        (void) strscpy(buf, size, strempty(v));
        return 0;
}

static int tenant_settings_read(ApiRequest *r, const Tenant *t, TenantSettings *ret, ApiError *e) {
        *ret = (TenantSettings) {};
        return api_tenant_default_runtime(r, t->id, ret->default_runtime, sizeof ret->default_runtime, e);
}

static int tenant_read(ApiRequest *r, const Tenant *t, TenantQuotas *ret_q, TenantUsage *ret_u,
                       TenantSettings *ret_s, ApiError *e) {
        int k;

        k = tenant_settings_read(r, t, ret_s, e);
        if (k < 0)
                return k;
        k = store_tenant_quotas_get(r->store, t->id, ret_q);
        if (k < 0)
                return api_store_error(e, k, "reading the tenant's quotas");
        k = store_tenant_usage(r->store, t->id, ret_u);
        if (k < 0)
                return api_store_error(e, k, "counting the tenant's usage");
        return 0;
}

int api_tenants_list(ApiRequest *r, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_free_ Tenant *list = NULL;
        size_t n = 0;
        int k;

        json_w_init(&w);
        k = store_tenant_list(r->store, &list, &n);
        if (k < 0)
                return api_store_error(e, k, "listing tenants");
        json_w_object_begin(&w);
        json_w_key(&w, "tenants");
        json_w_array_begin(&w);
        for (size_t i = 0; i < n; i++) {
                TenantQuotas q;
                TenantUsage u;
                TenantSettings ts;

                k = tenant_read(r, &list[i], &q, &u, &ts, e);
                if (k < 0)
                        return k;
                write_tenant(r, &w, &list[i], &q, &u, &ts);
        }
        json_w_array_end(&w);
        json_w_object_end(&w);
        return api_reply_json(r, 200, &w);
}

/* The tenant of the path: any for an admin, only its own for another key (404 otherwise, as for a missing one). */
static int tenant_lookup(ApiRequest *r, const char *name, Tenant *ret, ApiError *e) {
        int k;

        if (!api_tenant_name_valid(name) || (!r->key.admin && !streq(name, r->tenant_name)))
                return api_error(e, -ENOENT, API_NOT_FOUND, "no tenant '%.64s'", name);
        k = store_tenant_get_by_name(r->store, name, ret);
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "no tenant '%s'", name);
        if (k < 0)
                return api_store_error(e, k, "looking up the tenant");
        return 0;
}

int api_tenant_show(ApiRequest *r, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w;
        TenantQuotas q;
        TenantUsage u;
        TenantSettings ts;
        Tenant t;
        int k;

        json_w_init(&w);
        k = tenant_lookup(r, r->params[0], &t, e);
        if (k < 0)
                return k;
        k = tenant_read(r, &t, &q, &u, &ts, e);
        if (k < 0)
                return k;
        write_tenant(r, &w, &t, &q, &u, &ts);
        return api_reply_json(r, 200, &w);
}

/* Each field of the body into q->value: an integer 0..max, or null for the host's default. */
static int parse_quotas(const JsonValue *body, TenantQuotas *q, ApiError *e) {
        size_t n = json_object_size(body);

        if (n == 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "give at least one quota (sandboxes, cpu_millis, memory_mb, disk_mb, checkpoints, "
                                 "rps, streams) or default_runtime");
        for (size_t i = 0; i < n; i++) {
                const char *key = json_object_key(body, i);
                JsonValue *v = json_object_value(body, i);
                TenantQuota which = tenant_quota_from_string(key);
                uint64_t u;

                if (streq(strempty(key), "default_runtime"))
                        continue; /* not a quota: parse_default_runtime */
                if (which < 0)
                        return api_error(e, -EINVAL, API_UNKNOWN_FIELD,
                                         "unknown field '%.64s' (quotas: sandboxes, cpu_millis, memory_mb, disk_mb, "
                                         "checkpoints, rps, streams)", strna(key));
                if (json_is_null(v)) {
                        q->value[which] = TENANT_QUOTA_DEFAULT;
                        continue;
                }
                if (json_type(v) != JSON_NUMBER || json_uint64(v, &u) < 0 || u > API_QUOTA_VALUE_MAX)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "%s must be an integer from 0 (unlimited) to %" PRIu64
                                         ", or null (the host's default %s)",
                                         key, API_QUOTA_VALUE_MAX, quota_config_name(which));
                q->value[which] = (int64_t) u;
        }
        return 0;
}

/* default_runtime of the body: 1 with *ret (NULL: back to the host's) if given, 0 if not. */
static int parse_default_runtime(const JsonValue *body, const char **ret, ApiError *e) {
        const JsonValue *v = json_get(body, "default_runtime");

        *ret = NULL;
        if (!v)
                return 0;
        if (json_is_null(v))
                return 1;
        if (!api_runtime_name_valid(json_string(v), true))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "default_runtime must be 'ns', 'vm', 'auto' or null (the host's default_runtime)");
        *ret = json_string(v);
        return 1;
}

int api_tenant_put(ApiRequest *r, ApiError *e) {
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_(json_w_done) JsonWriter w;
        const char *name = r->params[0];
        const char *runtime = NULL;
        char data[256];
        TenantQuotas q;
        TenantUsage u;
        TenantSettings ts;
        Tenant t;
        int k, set_runtime;
        bool set_quotas;

        json_w_init(&w);
        k = api_read_json(r, &body, e);
        if (k < 0)
                return k;
        if (json_type(body) != JSON_OBJECT)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "the body must be an object");
        set_runtime = parse_default_runtime(body, &runtime, e);
        if (set_runtime < 0)
                return set_runtime;
        set_quotas = json_object_size(body) > (size_t) set_runtime;
        if (!api_tenant_name_valid(name))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "a tenant name is [a-z0-9][a-z0-9-]{0,62}, not '%.64s'", name);
        /* a tenant may get its quotas before its first key */
        k = store_tenant_get_by_name(r->store, name, &t);
        if (k == -ENOENT) {
                k = store_tenant_create(r->store, name, &t);
                if (k == -EEXIST)
                        k = store_tenant_get_by_name(r->store, name, &t);
                if (k >= 0)
                        log_info("Created tenant %s", name);
        }
        if (k < 0)
                return api_store_error(e, k, "looking up the tenant");
        k = store_tenant_quotas_get(r->store, t.id, &q);
        if (k < 0)
                return api_store_error(e, k, "reading the tenant's quotas");
        if (set_quotas || json_object_size(body) == 0) {
                k = parse_quotas(body, &q, e);
                if (k < 0)
                        return k;
        }
        if (set_runtime) {
                k = store_object_setting_set(r->store, "tenant", t.id, "default_runtime", runtime);
                if (k < 0)
                        return api_store_error(e, k, "recording the tenant's default runtime");
                snprintf(data, sizeof data, "{\"tenant\":\"%s\",\"default_runtime\":%s%s%s}", t.name,
                         runtime ? "\"" : "", runtime ?: "null", runtime ? "\"" : ""); /* validated */
                api_event_tenant(r, t.id, NULL, "tenant.settings", "default runtime set by an admin", data);
                log_info("Set the default runtime of tenant %s to %s", t.name, runtime ?: "the host's");
        }
        if (set_quotas) {
                k = store_tenant_quotas_set(r->store, &q);
                if (k < 0)
                        return api_store_error(e, k, "recording the tenant's quotas");
                api_limits_set_tenant(r->api->limits, &q);

                snprintf(data, sizeof data,
                         "{\"tenant\":\"%s\",\"sandboxes\":%" PRId64 ",\"cpu_millis\":%" PRId64
                         ",\"memory_mb\":%" PRId64 ",\"disk_mb\":%" PRId64 ",\"checkpoints\":%" PRId64
                         ",\"rps\":%" PRId64 ",\"streams\":%" PRId64 "}",
                         t.name, q.value[0], q.value[1], q.value[2], q.value[3], q.value[4], q.value[5], q.value[6]);
                api_event_tenant(r, t.id, NULL, "tenant.quotas", "quotas set by an admin (-1 = the host's default)",
                                 data);
                log_info("Set the quotas of tenant %s", t.name);
        }

        k = store_tenant_usage(r->store, t.id, &u);
        if (k < 0)
                return api_store_error(e, k, "counting the tenant's usage");
        k = tenant_settings_read(r, &t, &ts, e);
        if (k < 0)
                return k;
        write_tenant(r, &w, &t, &q, &u, &ts);
        return api_reply_json(r, 200, &w);
}
