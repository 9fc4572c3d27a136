/* SPDX-License-Identifier: MIT */
/* E2B's /secrets onto space's credentials: a secret is a credential of the
 * tenant that names no hosts of its own ("hosts": [], applying nowhere by
 * itself); a sandbox's network.rules grant it scoped to the hosts and the
 * header they name (e2b-network.c), and the gateway puts the value on those
 * requests only. The value is sealed as the request is parsed and never
 * returned; the ${e2b.secrets.NAME} marker of the rules is resolved at
 * egress, never inside the sandbox. Every credential of the tenant is a
 * secret here (its metadata only); ids are the credentials' (cr_...),
 * names lower-cased as E2B does. */

#include <inttypes.h>
#include <stdio.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "cred-rules.h"
#include "e2b.h"
#include "str-util.h"

static void write_time(JsonWriter *w, const char *key, int64_t usec) {
        char ts[JSON_OUT_TIME_MAX];

        json_out_time(usec, ts);
        json_w_kv_string(w, key, ts);
}

static void secret_json(JsonWriter *w, const Credential *c) {
        json_w_object_begin(w);
        json_w_kv_string(w, "secretID", c->id);
        json_w_kv_string(w, "name", c->name);
        json_w_key(w, "currentVersion");
        json_w_uint(w, c->version);
        json_w_key(w, "metadata");
        json_w_object_begin(w);
        json_w_object_end(w);
        write_time(w, "createdAt", c->created_usec);
        write_time(w, "updatedAt", c->updated_usec ?: c->created_usec);
        json_w_object_end(w);
}

static int reply_secret(ApiRequest *r, int status, const Credential *c) {
        _cleanup_(json_w_done) JsonWriter w = {};

        json_w_init(&w);
        secret_json(&w, c);
        return e2b_reply_json(r, status, &w, NULL);
}

/* E2B's name rules are looser than a credential's: lower-cased, it must be one. */
static int secret_name(const JsonValue *v, char ret[static STORE_NAME_MAX], ApiError *e) {
        const char *s = json_string(v);
        size_t n;

        if (!v)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "name is required");
        if (!s || strlen(s) != json_string_len(v))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "name must be a string");
        n = strlen(s);
        if (n >= STORE_NAME_MAX || !cred_name_valid(s, n))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "name '%.64s': a secret name is 1 to %d characters [a-z0-9_.-], starting with a "
                                 "letter or digit", s, CRED_NAME_MAX);
        if (startswith(s, "sec_") || startswith(s, "cr_"))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "name '%.64s': the prefixes sec_ and cr_ are reserved for secret ids", s);
        for (size_t i = 0; i <= n; i++)
                ret[i] = s[i] >= 'A' && s[i] <= 'Z' ? (char) (s[i] - 'A' + 'a') : s[i];
        return 0;
}

/* metadata: E2B's secrets carry it, space's credentials do not; an empty one is fine. */
static int no_metadata(const JsonValue *body, ApiError *e) {
        const JsonValue *m = json_get(body, "metadata");

        if (!m || json_is_null(m) || (json_type(m) == JSON_OBJECT && json_object_size(m) == 0))
                return 0;
        if (json_type(m) != JSON_OBJECT)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "metadata must be an object of strings");
        return api_error(e, -EOPNOTSUPP, API_INVALID_ARGUMENT,
                         "metadata is not supported on secrets (space's credentials carry none)");
}

static void wipe_value(const JsonValue *v) {
        if (v && json_type(v) == JSON_STRING && json_string_len(v) > 0)
                explicit_bzero((char *) json_string(v), json_string_len(v));
}

/* By id (cr_...) or by name; -ENOENT as E2B's 404. */
static int secret_find(ApiRequest *r, const char *ref, Credential *ret, ApiError *e) {
        char name[STORE_NAME_MAX];
        int k;

        if (startswith(ref, "cr_")) {
                Credential *all = NULL;
                size_t n = 0;
                k = store_credential_list(r->store, r->key.tenant_id, &all, &n);
                if (k < 0)
                        return api_store_error(e, k, "listing the secrets");
                k = -ENOENT;
                for (size_t i = 0; i < n && k == -ENOENT; i++)
                        if (streq(all[i].id, ref)) {
                                *ret = all[i];
                                all[i] = (Credential) {};
                                k = 0;
                        }
                credential_array_free(all, n);
        } else if (strlen(ref) >= sizeof name || !cred_name_valid(ref, strlen(ref)))
                k = -ENOENT;
        else {
                for (size_t i = 0; i <= strlen(ref); i++)
                        name[i] = ref[i] >= 'A' && ref[i] <= 'Z' ? (char) (ref[i] - 'A' + 'a') : ref[i];
                k = store_credential_get(r->store, r->key.tenant_id, name, ret);
                if (k < 0 && k != -ENOENT)
                        return api_store_error(e, k, "looking up the secret");
        }
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "secret '%.64s' not found", ref);
        return 0;
}

/* Reads a create's or an update's body (its keys in allowed): *ret_value
 * its value, a non-empty string or absent (an error). On failure the value
 * is wiped. */
static int secret_body(ApiRequest *r, const char *const *allowed, JsonValue **ret_body, JsonValue **ret_value,
                       ApiError *e) {
        _cleanup_json_ JsonValue *body = NULL;
        const char *unknown = NULL;
        JsonValue *value;
        int k;

        k = e2b_read_json(r, &body, e);
        if (k < 0)
                return k;
        value = json_get(body, "value");
        if (json_check_keys(body, allowed, &unknown) < 0)
                k = api_error(e, -EINVAL, API_INVALID_ARGUMENT, "unknown field '%.64s'", strna(unknown));
        if (k >= 0 && !value)
                k = api_error(e, -EINVAL, API_INVALID_ARGUMENT, "value is required (it is never shown again)");
        if (k >= 0 && json_string_len(value) == 0 && json_type(value) == JSON_STRING)
                k = api_error(e, -EINVAL, API_INVALID_ARGUMENT, "value must not be empty");
        if (k >= 0)
                k = no_metadata(body, e);
        if (k < 0) {
                wipe_value(value);
                return k;
        }
        *ret_value = value;
        *ret_body = TAKE_PTR(body);
        return 0;
}

static int secret_create(ApiRequest *r, ApiError *e) {
        static const char *const allowed[] = { "name", "value", "metadata", NULL };
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_(credential_done) Credential c = {};
        JsonValue *value = NULL;
        int k;

        k = secret_body(r, allowed, &body, &value, e);
        if (k < 0)
                return k;
        k = secret_name(json_get(body, "name"), c.name, e);
        if (k >= 0)
                k = api_credential_new_id(c.id, e);
        if (k < 0) {
                wipe_value(value);
                return k;
        }
        (void) strscpy(c.tenant_id, sizeof c.tenant_id, r->key.tenant_id);
        c.hosts_json = strdup("[]");
        if (!c.hosts_json) {
                wipe_value(value);
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        }
        c.apply = CRED_APPLY_HEADER;
        (void) strscpy(c.header_name, sizeof c.header_name, "Authorization");
        (void) strscpy(c.header_format, sizeof c.header_format, "Bearer {value}");
        k = api_credential_seal(r, value, &c, e); /* wipes the value */
        if (k < 0)
                return k;
        c.created_usec = now_usec();
        k = store_credential_insert(r->store, &c);
        if (k == -EEXIST)
                return api_error(e, k, API_CONFLICT, "a secret named '%s' already exists", c.name);
        if (k == -EKEYEXPIRED)
                return api_error(e, k, API_CONFLICT,
                                 "the credentials' master key was rotated while this request ran; try again");
        if (k < 0)
                return api_store_error(e, k, "recording the secret");
        c.updated_usec = c.created_usec;
        c.version = 1;
        api_credential_event(r, "credential.created", &c);
        return reply_secret(r, 201, &c);
}

static int secret_list(ApiRequest *r, ApiError *e) {
        _cleanup_free_ char *next = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        char hdr[STORE_NAME_MAX + 32] = "";
        uint64_t limit = E2B_LIST_LIMIT_DEFAULT, shown = 0;
        Credential *all = NULL;
        size_t n = 0, i = 0;
        int k;

        k = api_query_string(r, "nextToken", &next, e);
        if (k >= 0)
                k = api_query_u64(r, "limit", 1, E2B_LIST_LIMIT_MAX, &limit, e);
        if (k < 0)
                return k;
        if (next && !cred_name_valid(next, strlen(next)))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "nextToken is not one this server handed out");
        k = store_credential_list(r->store, r->key.tenant_id, &all, &n);
        if (k < 0)
                return api_store_error(e, k, "listing the secrets");
        json_w_init(&w);
        json_w_array_begin(&w);
        if (next) /* by name */
                while (i < n && strcmp(all[i].name, next) <= 0)
                        i++;
        for (; i < n; i++) {
                if (shown == limit) {
                        snprintf(hdr, sizeof hdr, "X-Next-Token: %s\r\n", all[i - 1].name);
                        break;
                }
                secret_json(&w, &all[i]);
                shown++;
        }
        json_w_array_end(&w);
        credential_array_free(all, n);
        return e2b_reply_json(r, 200, &w, hdr[0] ? hdr : NULL);
}

static int secret_update(ApiRequest *r, const char *ref, ApiError *e) {
        static const char *const allowed[] = { "value", "metadata", NULL };
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_(credential_done) Credential c = {};
        JsonValue *value = NULL;
        uint64_t v = 0;
        int k;

        k = secret_body(r, allowed, &body, &value, e);
        if (k < 0)
                return k;
        k = secret_find(r, ref, &c, e);
        if (k < 0) {
                wipe_value(value);
                return k;
        }
        k = api_credential_seal(r, value, &c, e);
        if (k < 0)
                return k;
        k = store_credential_update(r->store, &c, &v);
        if (k == -ESTALE || k == -EKEYEXPIRED)
                return api_error(e, k, API_CONFLICT, "the secret changed while this request ran; try again");
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "secret '%.64s' not found", ref);
        if (k < 0)
                return api_store_error(e, k, "updating the secret");
        c.version = v;
        c.updated_usec = now_usec();
        api_credential_event(r, "credential.updated", &c);
        /* the granted sandboxes' gateways learn the new value */
        api_credential_push(r, c.id);
        return reply_secret(r, 200, &c);
}

static int secret_delete(ApiRequest *r, const char *ref, ApiError *e) {
        _cleanup_(credential_done) Credential c = {};
        int k;

        k = secret_find(r, ref, &c, e);
        if (k < 0)
                return k;
        k = api_credential_remove(r, &c, e);
        if (k < 0)
                return k;
        return e2b_reply(r, 204, NULL, NULL, 0, NULL);
}

int e2b_secrets_route(ApiRequest *r, char **s, size_t n, ApiError *e) {
        const char *m = r->head->method;

        if (n == 1) {
                if (streq(m, "GET"))
                        return secret_list(r, e);
                if (streq(m, "POST"))
                        return secret_create(r, e);
        } else if (n == 2) {
                if (streq(m, "GET")) {
                        _cleanup_(credential_done) Credential c = {};
                        int k = secret_find(r, s[1], &c, e);
                        return k < 0 ? k : reply_secret(r, 200, &c);
                }
                if (streq(m, "POST"))
                        return secret_update(r, s[1], e);
                if (streq(m, "DELETE"))
                        return secret_delete(r, s[1], e);
        } else
                return api_error(e, -ENOENT, API_NOT_FOUND, "no such endpoint");
        return api_error(e, -EINVAL, API_METHOD_NOT_ALLOWED, "%.16s is not allowed on %.200s", m, r->head->path);
}
