/* SPDX-License-Identifier: MIT */
/* /v1/keys: create (the secret is shown once), list, delete. A key acts in
 * its own tenant; an admin key may create keys for other (new) tenants and
 * admin keys, and sees every tenant's keys. */

#include <stdio.h>

#include "api-internal.h"
#include "log.h"
#include "str-util.h"

static int resolve_tenant(ApiRequest *r, const char *name, Tenant *ret, ApiError *e) {
        int k;

        k = store_tenant_get_by_name(r->store, name, ret);
        if (k == -ENOENT) {
                k = store_tenant_create(r->store, name, ret);
                if (k == -EEXIST) /* created concurrently */
                        k = store_tenant_get_by_name(r->store, name, ret);
                if (k >= 0)
                        log_info("Created tenant %s", name);
        }
        if (k < 0)
                return api_store_error(e, k, "looking up the tenant");
        return 0;
}

int api_keys_create(ApiRequest *r, ApiError *e) {
        static const char *const allowed[] = { "name", "tenant", "admin", NULL };
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_(json_w_done) JsonWriter w;
        char secret[API_KEY_SECRET_LEN + 1];
        const char *unknown = NULL, *name = "", *tenant_name = r->tenant_name;
        char data[STORE_ID_MAX + 32];
        ApiKey key = {};
        Tenant t = {};
        bool admin = false;
        JsonValue *v;
        int k;

        json_w_init(&w);
        k = api_read_json(r, &body, e);
        if (k < 0)
                return k;
        if (json_check_keys(body, allowed, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));
        v = json_get(body, "name");
        if (v && !json_is_null(v)) {
                name = json_string(v);
                if (!name || !api_key_name_valid(name))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "name must be 1 to %u printable ASCII characters", API_NAME_MAX);
        }
        v = json_get(body, "tenant");
        if (v && !json_is_null(v)) {
                tenant_name = json_string(v);
                if (!tenant_name || !api_tenant_name_valid(tenant_name))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "tenant must be a tenant name ([a-z0-9][a-z0-9-]{0,62})");
        }
        v = json_get(body, "admin");
        if (v && !json_is_null(v) && json_bool(v, &admin) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "admin must be true or false");

        if (!r->key.admin && !streq(tenant_name, r->tenant_name))
                return api_error(e, -EPERM, API_FORBIDDEN, "only an admin key may create keys for another tenant");
        if (!r->key.admin && admin)
                return api_error(e, -EPERM, API_FORBIDDEN, "only an admin key may create admin keys");

        if (streq(tenant_name, r->tenant_name))
                (void) strscpy(t.id, sizeof t.id, r->key.tenant_id);
        else {
                k = resolve_tenant(r, tenant_name, &t, e);
                if (k < 0)
                        return k;
        }

        k = api_key_generate(secret, key.id);
        if (k < 0)
                return api_error(e, k, API_INTERNAL, "cannot generate a key: %s", strerror(-k));
        api_key_hash(secret, key.hash);
        (void) strscpy(key.tenant_id, sizeof key.tenant_id, t.id);
        (void) strscpy(key.name, sizeof key.name, name);
        key.admin = admin;
        key.created_usec = now_usec();
        k = store_key_insert(r->store, &key);
        if (k < 0) {
                explicit_bzero(secret, sizeof secret);
                return api_store_error(e, k, "recording the key");
        }
        snprintf(data, sizeof data, "{\"id\":\"%s\",\"admin\":%s}", key.id, admin ? "true" : "false");
        api_event_tenant(r, key.tenant_id, NULL, "key.created", "", data);
        log_info("Created %skey %s for tenant %s", admin ? "admin " : "", key.id, tenant_name);

        json_w_object_begin(&w);
        json_w_kv_string(&w, "id", key.id);
        json_w_kv_string(&w, "key", secret);
        json_w_kv_string(&w, "tenant", tenant_name);
        json_w_kv_string(&w, "name", key.name);
        json_w_kv_bool(&w, "admin", key.admin);
        {
                char ts[JSON_OUT_TIME_MAX];
                json_out_time(key.created_usec, ts);
                json_w_kv_string(&w, "created_at", ts);
        }
        json_w_object_end(&w);
        explicit_bzero(secret, sizeof secret);
        k = api_reply_json(r, 201, &w);
        return k;
}

int api_keys_list(ApiRequest *r, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w;
        ApiKey *list = NULL;
        size_t n = 0;
        int k;

        json_w_init(&w);
        k = store_key_list(r->store, r->key.admin ? NULL : r->key.tenant_id, &list, &n);
        if (k < 0)
                return api_store_error(e, k, "listing keys");
        json_w_object_begin(&w);
        json_w_key(&w, "keys");
        json_w_array_begin(&w);
        for (size_t i = 0; i < n; i++)
                json_out_key(&w, &list[i], api_tenant_name(r, list[i].tenant_id));
        json_w_array_end(&w);
        json_w_object_end(&w);
        free(list);
        return api_reply_json(r, 200, &w);
}

static bool key_id_valid(const char *id) {
        const char *rest = id ? startswith(id, "key_") : NULL;
        size_t n = rest ? strlen(rest) : 0;

        if (n == 0 || n > 32)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((rest[i] >= 'a' && rest[i] <= 'z') || (rest[i] >= '0' && rest[i] <= '9') || rest[i] == '_'))
                        return false;
        return true;
}

int api_keys_delete(ApiRequest *r, ApiError *e) {
        const char *id = r->params[0];
        char tenant[STORE_ID_MAX] = "", data[STORE_ID_MAX + 16];
        ApiKey *list = NULL;
        size_t n = 0, admins = 0;
        bool found = false, target_admin = false;
        int k;

        if (!key_id_valid(id))
                return api_error(e, -ENOENT, API_NOT_FOUND, "no key '%.64s'", strempty(id));
        /* every key, to find the target within what this key may see and to count admins */
        k = store_key_list(r->store, NULL, &list, &n);
        if (k < 0)
                return api_store_error(e, k, "listing keys");
        for (size_t i = 0; i < n; i++) {
                admins += list[i].admin;
                if (streq(list[i].id, id) && (r->key.admin || streq(list[i].tenant_id, r->key.tenant_id))) {
                        found = true;
                        target_admin = list[i].admin;
                        (void) strscpy(tenant, sizeof tenant, list[i].tenant_id);
                }
        }
        free(list);
        if (!found)
                return api_error(e, -ENOENT, API_NOT_FOUND, "no key '%s'", id);
        if (target_admin && !r->key.admin)
                return api_error(e, -EPERM, API_FORBIDDEN, "only an admin key may delete an admin key");
        /* nobody could manage the deployment any more */
        if (target_admin && admins <= 1)
                return api_error(e, -EBUSY, API_CONFLICT, "key '%s' is the last admin key", id);

        k = store_key_delete(r->store, r->key.admin ? NULL : r->key.tenant_id, id);
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "no key '%s'", id);
        if (k < 0)
                return api_store_error(e, k, "deleting the key");
        snprintf(data, sizeof data, "{\"id\":\"%s\"}", id); /* checked above: key_ and our id alphabet */
        api_event_tenant(r, tenant, NULL, "key.deleted", "", data);
        log_info("Deleted key %s", id);
        return api_reply_empty(r, 204);
}
