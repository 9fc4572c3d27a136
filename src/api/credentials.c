/* SPDX-License-Identifier: MIT */
/* /v1/credentials: create, list, show, change (rotate the value, hosts, how
 * it applies, expiry), revoke, delete; and grants of credentials to
 * sandboxes (/v1/sandboxes/{id}/credentials/{name}, and "credentials" in a
 * create request).
 *
 * The value is write-only: it is sealed (src/shared/cred-crypt.h) as soon as
 * the request is parsed, the plaintext copies we own are wiped, and no
 * response, event, log line or error message ever carries it. Names are per
 * tenant: another tenant's credential is 404 like a missing one. */

#include <inttypes.h>
#include <openssl/crypto.h>
#include <stdio.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "cred-crypt.h"
#include "cred-rules.h"
#include "log.h"
#include "str-util.h"

#define CRED_ID_PREFIX "cr_"
#define CRED_ID_RANDOM_LEN 16
#define CRED_DEFAULT_HEADER "Authorization: Bearer {value}"

static void credential_donep(Credential *c) {
        credential_done(c);
}
#define _cleanup_credential_ _cleanup_(credential_donep)

/* Wipes a string of the parsed request in place (the JSON tree owns it). */
static void wipe_json_string(const JsonValue *v) {
        if (v && json_type(v) == JSON_STRING && json_string_len(v) > 0)
                OPENSSL_cleanse((char *) json_string(v), json_string_len(v));
}

static int no_key(ApiError *e) {
        return api_error(e, -ENOKEY, API_UNAVAILABLE,
                         "the credential store's master key is not loaded (a cluster's API servers and workers "
                         "need master_key_file)");
}

/* ---- output ---- */

static const char *cred_state(const Credential *c, int64_t now) {
        if (c->revoked_usec > 0)
                return "revoked";
        if (c->expires_usec > 0 && c->expires_usec <= now)
                return "expired";
        return "active";
}

static void kv_time_or_null(JsonWriter *w, const char *key, int64_t usec) {
        char ts[JSON_OUT_TIME_MAX];

        json_w_key(w, key);
        if (usec <= 0) {
                json_w_null(w);
                return;
        }
        json_out_time(usec, ts);
        json_w_string(w, ts);
}

static void json_out_credential(JsonWriter *w, const Credential *c, int64_t now) {
        char header[STORE_CRED_HEADER_MAX + STORE_CRED_FORMAT_MAX + 4], ph[CRED_PLACEHOLDER_MAX];

        json_w_object_begin(w);
        json_w_kv_string(w, "id", c->id);
        json_w_kv_string(w, "name", c->name);
        json_w_key(w, "hosts");
        json_w_raw(w, c->hosts_json); /* written by us from validated strings */
        json_w_kv_string(w, "apply", cred_apply_to_string(c->apply));
        json_w_key(w, "header");
        if (c->apply == CRED_APPLY_HEADER) {
                snprintf(header, sizeof header, "%s: %s", c->header_name, c->header_format);
                json_w_string(w, header);
        } else
                json_w_null(w);
        json_w_key(w, "basic_user");
        json_w_string(w, c->apply == CRED_APPLY_BASIC ? c->basic_user : NULL);
        json_w_key(w, "env");
        json_w_string(w, isempty(c->env_name) ? NULL : c->env_name);
        if (cred_placeholder(c->name, ph, sizeof ph) < 0)
                ph[0] = 0;
        json_w_kv_string(w, "placeholder", ph);
        json_w_kv_string(w, "state", cred_state(c, now));
        json_w_key(w, "version");
        json_w_uint(w, c->version);
        kv_time_or_null(w, "created_at", c->created_usec);
        kv_time_or_null(w, "updated_at", c->updated_usec);
        kv_time_or_null(w, "expires_at", c->expires_usec);
        kv_time_or_null(w, "revoked_at", c->revoked_usec);
        json_w_object_end(w);
}

static int reply_credential(ApiRequest *r, int status, const Credential *c) {
        _cleanup_(json_w_done) JsonWriter w;

        json_w_init(&w);
        json_out_credential(&w, c, now_usec());
        return api_reply_json(r, status, &w);
}

/* ---- validation of the fields ---- */

static int parse_hosts(const JsonValue *v, char **ret_json, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w;
        char err[512];
        size_t n;
        int k;

        json_w_init(&w);
        if (!v || json_type(v) != JSON_ARRAY)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "hosts must be an array of host names");
        n = json_array_size(v);
        if (n == 0 || n > CRED_HOSTS_MAX)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "hosts must name 1 to %d hosts",
                                 CRED_HOSTS_MAX);
        json_w_array_begin(&w);
        for (size_t i = 0; i < n; i++) {
                const JsonValue *h = json_array_at(v, i);
                const char *s = json_string(h);

                if (!s || strlen(s) != json_string_len(h))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "hosts[%zu] must be a string", i);
                k = cred_host_pattern_check(s, json_string_len(h), err, sizeof err);
                if (k < 0)
                        return api_error(e, k, API_INVALID_ARGUMENT, "hosts[%zu]: %s", i, err);
                for (size_t j = 0; j < i; j++)
                        if (streq(s, json_string(json_array_at(v, j))))
                                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "hosts[%zu]: '%s' is listed twice",
                                                 i, s);
                json_w_string(&w, s);
        }
        json_w_array_end(&w);
        k = json_w_finish(&w, ret_json, NULL);
        if (k < 0)
                return api_error(e, k, API_UNAVAILABLE, "out of memory");
        return 0;
}

/* "Name: format" */
static int parse_header(const JsonValue *v, Credential *c, ApiError *e) {
        const char *s = json_string(v), *colon, *fmt;
        char err[256];
        size_t n;
        int k;

        if (!s || strlen(s) != json_string_len(v))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "header must be a string such as 'Authorization: Bearer {value}'");
        n = strlen(s);
        colon = memchr(s, ':', n);
        if (!colon)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "header must be 'Name: format', such as 'Authorization: Bearer {value}'");
        k = cred_header_name_check(s, (size_t) (colon - s), err, sizeof err);
        if (k < 0)
                return api_error(e, k, API_INVALID_ARGUMENT, "header: %s", err);
        fmt = colon + 1;
        while (*fmt == ' ')
                fmt++;
        k = cred_header_format_check(fmt, strlen(fmt), err, sizeof err);
        if (k < 0)
                return api_error(e, k, API_INVALID_ARGUMENT, "header: %s", err);
        memcpy(c->header_name, s, (size_t) (colon - s));
        c->header_name[colon - s] = 0;
        (void) strscpy(c->header_format, sizeof c->header_format, fmt);
        c->apply = CRED_APPLY_HEADER;
        c->basic_user[0] = 0;
        return 0;
}

static int parse_basic_user(const JsonValue *v, Credential *c, ApiError *e) {
        const char *s = json_string(v);
        char err[256];
        int k;

        if (!s || strlen(s) != json_string_len(v))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "basic_user must be a string");
        k = cred_basic_user_check(s, strlen(s), err, sizeof err);
        if (k < 0)
                return api_error(e, k, API_INVALID_ARGUMENT, "basic_user: %s", err);
        (void) strscpy(c->basic_user, sizeof c->basic_user, s);
        c->apply = CRED_APPLY_BASIC;
        c->header_name[0] = c->header_format[0] = 0;
        return 0;
}

static int parse_env(const JsonValue *v, Credential *c, ApiError *e) {
        const char *s;
        char err[256];
        int k;

        if (json_is_null(v)) {
                c->env_name[0] = 0;
                return 0;
        }
        s = json_string(v);
        if (!s || strlen(s) != json_string_len(v))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "env must be a variable name or null");
        k = cred_env_name_check(s, strlen(s), err, sizeof err);
        if (k < 0)
                return api_error(e, k, API_INVALID_ARGUMENT, "env: %s", err);
        (void) strscpy(c->env_name, sizeof c->env_name, s);
        return 0;
}

static int parse_expires(const JsonValue *v, int64_t now, Credential *c, ApiError *e) {
        int64_t t;

        if (json_is_null(v)) {
                c->expires_usec = 0;
                return 0;
        }
        if (!json_string(v) || api_parse_time(json_string(v), &t) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "expires_at must be an RFC 3339 time such as 2026-12-31T00:00:00Z, or null");
        if (t <= now)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "expires_at must be in the future");
        c->expires_usec = t;
        return 0;
}

/* The key to seal with: the one of this server's ring (master_key_file and
 * master_key_previous_file) that the store names as the credentials' key
 * now. Read at every seal, so a rotation (spaced rotate-master-key) takes
 * effect at its commit on a server that holds the new key, and a server
 * that does not hold it seals nothing the others cannot open. */
static int seal_key(ApiRequest *r, const CredKey **ret, ApiError *e) {
        char fp[STORE_CLUSTER_SETTING_MAX];
        const CredKey *key;
        int k;

        if (!r->api->cred_key)
                return no_key(e);
        k = store_cluster_setting_get(r->store, CRED_KEY_FINGERPRINT_SETTING, fp);
        if (k == -ENOENT) {
                *ret = r->api->cred_key; /* none recorded (removed by hand): ours */
                return 0;
        }
        if (k < 0)
                return api_store_error(e, k, "reading the master key's fingerprint");
        key = cred_key_by_fingerprint(r->api->cred_key, fp);
        if (!key) {
                log_error("The store's credentials are sealed under a master key this API server does not hold "
                          "(fingerprint %s; rotated by spaced rotate-master-key?): restart it with the new "
                          "master_key_file", fp);
                return api_error(e, -EKEYREJECTED, API_UNAVAILABLE,
                                 "this API server does not hold the master key the credentials are sealed under "
                                 "now (it was rotated); it must be restarted with the new master_key_file");
        }
        *ret = key;
        return 0;
}

int api_seal_key(ApiRequest *r, const CredKey **ret, ApiError *e) {
        return seal_key(r, ret, e);
}

/* Seals the request's value into c (c->id, tenant and name set) and wipes it. */
static int seal_value(ApiRequest *r, const JsonValue *v, Credential *c, ApiError *e) {
        const CredKey *key = NULL;
        _cleanup_free_ char *ct = NULL;
        char err[256];
        int k;

        if (!v || json_type(v) != JSON_STRING)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "value must be a string");
        k = cred_value_check(json_string(v), json_string_len(v), err, sizeof err);
        if (k < 0) {
                wipe_json_string(v);
                return api_error(e, k, API_INVALID_ARGUMENT, "value: %s", err);
        }
        k = seal_key(r, &key, e);
        if (k < 0) {
                wipe_json_string(v);
                return k;
        }
        k = cred_seal(key, c->id, c->tenant_id, c->name, json_string(v), json_string_len(v), &ct, c->nonce,
                      c->key_id);
        wipe_json_string(v);
        if (k < 0)
                return api_error(e, k, API_INTERNAL, "cannot seal the value: %s", strerror(-k));
        free(c->ciphertext);
        c->ciphertext = TAKE_PTR(ct);
        return 0;
}

int api_credential_seal(ApiRequest *r, const JsonValue *v, Credential *c, ApiError *e) {
        return seal_value(r, v, c, e);
}

int api_credential_new_id(char ret[static STORE_ID_MAX], ApiError *e) {
        int k;

        memcpy(ret, CRED_ID_PREFIX, STRLEN(CRED_ID_PREFIX));
        k = random_alnum(ret + STRLEN(CRED_ID_PREFIX), CRED_ID_RANDOM_LEN);
        if (k < 0)
                return api_error(e, k, API_INTERNAL, "cannot generate an id: %s", strerror(-k));
        ret[STRLEN(CRED_ID_PREFIX) + CRED_ID_RANDOM_LEN] = 0;
        return 0;
}

bool api_credential_hostless(const Credential *c) {
        return c && c->hosts_json && streq(c->hosts_json, "[]");
}

static int lookup(ApiRequest *r, const char *name, Credential *ret, ApiError *e) {
        int k;

        if (!name || !cred_name_valid(name, strlen(name)))
                return api_error(e, -ENOENT, API_NOT_FOUND, "no credential '%.64s'", strempty(name));
        k = store_credential_get(r->store, r->key.tenant_id, name, ret);
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "no credential '%s'", name);
        if (k < 0)
                return api_store_error(e, k, "looking up the credential");
        return 0;
}

static void cred_event(ApiRequest *r, const char *sandbox_id, const char *type, const Credential *c) {
        char data[STORE_NAME_MAX + 64];

        /* names are [A-Za-z0-9_.-]: nothing to escape */
        snprintf(data, sizeof data, "{\"credential\":\"%s\",\"version\":%" PRIu64 "}", c->name, c->version);
        api_event(r, sandbox_id, type, "", data);
}

void api_credential_event(ApiRequest *r, const char *type, const Credential *c) {
        cred_event(r, NULL, type, c);
}

/* ---- the gateways of running sandboxes ---- */

static bool sandbox_live(const Sandbox *sb) {
        return sb->state == SANDBOX_RUNNING || sb->state == SANDBOX_PAUSED;
}

/* The running (or paused) sandboxes of the tenant that hold credential_id. */
static int holders(ApiRequest *r, const char *credential_id, Sandbox **ret, size_t *ret_n, ApiError *e) {
        SandboxFilter f = { .tenant_id = r->key.tenant_id, .state = -1, .limit = 100000 };
        Sandbox *all = NULL, *out = NULL;
        size_t n = 0, m = 0;
        int k;

        k = store_sandbox_list(r->store, &f, &all, &n);
        if (k < 0)
                return api_store_error(e, k, "listing the sandboxes");
        out = new0(Sandbox, n ?: 1);
        if (!out) {
                sandbox_array_free(all, n);
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        }
        for (size_t i = 0; i < n; i++) {
                Credential *list = NULL;
                size_t ln = 0;
                bool has = false;

                if (!sandbox_live(&all[i]) || store_grant_list(r->store, all[i].id, &list, &ln) < 0)
                        continue;
                for (size_t j = 0; j < ln && !has; j++)
                        has = streq(list[j].id, credential_id);
                credential_array_free(list, ln);
                if (has) {
                        out[m++] = all[i];
                        all[i] = (Sandbox){};
                }
        }
        sandbox_array_free(all, n);
        *ret = out;
        *ret_n = m;
        return 0;
}

/* Tells each sandbox's gateway its credentials again. A failure is logged
 * and recorded on the sandbox (the change itself is in the store; the
 * sandbox's next start applies it). */
static void push_all(ApiRequest *r, Sandbox *list, size_t n) {
        for (size_t i = 0; i < n; i++) {
                ApiError e = {};
                if (api_get_worker(r, &e) < 0 || worker_sandbox_set_credentials(r->worker, &list[i], &e) < 0) {
                        log_warning("Sandbox %s: the credential change is not applied yet: %s", list[i].id, e.message);
                        api_event(r, list[i].id, "credential.unavailable", e.message, NULL);
                }
        }
}

/* ---- handlers ---- */

int api_credential_create(ApiRequest *r, ApiError *e) {
        static const char *const allowed[] = { "name", "value", "hosts", "header", "basic_user", "env",
                                               "expires_at", NULL };
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_credential_ Credential c = {};
        const char *unknown = NULL, *name;
        JsonValue *v, *value;
        int64_t now = now_usec();
        int k;

        k = api_read_json(r, &body, e);
        if (k < 0)
                return k;
        value = json_get(body, "value");
        if (json_check_keys(body, allowed, &unknown) < 0) {
                wipe_json_string(value);
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));
        }
        k = -EINVAL;
        v = json_get(body, "name");
        name = json_string(v);
        if (!name || !cred_name_valid(name, json_string_len(v)))
                k = api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                              "name must be 1 to %d characters [A-Za-z0-9_.-], starting with a letter or digit",
                              CRED_NAME_MAX);
        else if (!value)
                k = api_error(e, -EINVAL, API_INVALID_ARGUMENT, "value is required (it is never shown again)");
        else if (json_get(body, "header") && json_get(body, "basic_user"))
                k = api_error(e, -EINVAL, API_INVALID_ARGUMENT, "give header or basic_user, not both");
        else {
                (void) strscpy(c.name, sizeof c.name, name);
                (void) strscpy(c.tenant_id, sizeof c.tenant_id, r->key.tenant_id);
                k = parse_hosts(json_get(body, "hosts"), &c.hosts_json, e);
                if (k >= 0 && (v = json_get(body, "basic_user")))
                        k = parse_basic_user(v, &c, e);
                else if (k >= 0) {
                        v = json_get(body, "header");
                        if (v)
                                k = parse_header(v, &c, e);
                        else {
                                (void) strscpy(c.header_name, sizeof c.header_name, "Authorization");
                                (void) strscpy(c.header_format, sizeof c.header_format, "Bearer {value}");
                                c.apply = CRED_APPLY_HEADER;
                        }
                }
                if (k >= 0 && (v = json_get(body, "env")))
                        k = parse_env(v, &c, e);
                if (k >= 0 && (v = json_get(body, "expires_at")))
                        k = parse_expires(v, now, &c, e);
        }
        if (k < 0) {
                wipe_json_string(value);
                return k;
        }

        memcpy(c.id, CRED_ID_PREFIX, STRLEN(CRED_ID_PREFIX));
        k = random_alnum(c.id + STRLEN(CRED_ID_PREFIX), CRED_ID_RANDOM_LEN);
        if (k < 0) {
                wipe_json_string(value);
                return api_error(e, k, API_INTERNAL, "cannot generate an id: %s", strerror(-k));
        }
        c.id[STRLEN(CRED_ID_PREFIX) + CRED_ID_RANDOM_LEN] = 0;
        k = seal_value(r, value, &c, e);
        if (k < 0)
                return k;
        c.created_usec = now;
        k = store_credential_insert(r->store, &c);
        if (k == -EEXIST)
                return api_error(e, k, API_ALREADY_EXISTS, "a credential named '%s' already exists", c.name);
        if (k == -EKEYEXPIRED)
                return api_error(e, k, API_CONFLICT,
                                 "the credentials' master key was rotated while this request ran; try again");
        if (k < 0)
                return api_store_error(e, k, "recording the credential");
        c.updated_usec = c.created_usec;
        c.version = 1;
        cred_event(r, NULL, "credential.created", &c);
        log_info("Created credential %s (%s) for tenant %s", c.name, c.id, r->tenant_name);
        return reply_credential(r, 201, &c);
}

/* {"credentials":[...]} of list (freed), 200. */
static int reply_credential_list(ApiRequest *r, Credential *list, size_t n) {
        _cleanup_(json_w_done) JsonWriter w;
        int64_t now = now_usec();

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "credentials");
        json_w_array_begin(&w);
        for (size_t i = 0; i < n; i++)
                json_out_credential(&w, &list[i], now);
        json_w_array_end(&w);
        json_w_object_end(&w);
        credential_array_free(list, n);
        return api_reply_json(r, 200, &w);
}

int api_credential_list(ApiRequest *r, ApiError *e) {
        Credential *list = NULL;
        size_t n = 0;
        int k;

        k = store_credential_list(r->store, r->key.tenant_id, &list, &n);
        if (k < 0)
                return api_store_error(e, k, "listing credentials");
        return reply_credential_list(r, list, n);
}

int api_credential_show(ApiRequest *r, ApiError *e) {
        _cleanup_credential_ Credential c = {};
        int k;

        k = lookup(r, r->params[0], &c, e);
        if (k < 0)
                return k;
        return reply_credential(r, 200, &c);
}

int api_credential_delete(ApiRequest *r, ApiError *e) {
        _cleanup_credential_ Credential c = {};
        int k;

        k = lookup(r, r->params[0], &c, e);
        if (k < 0)
                return k;
        k = api_credential_remove(r, &c, e);
        if (k < 0)
                return k;
        return api_reply_empty(r, 204);
}

void api_credential_push(ApiRequest *r, const char *credential_id) {
        Sandbox *affected = NULL;
        size_t n_affected = 0;
        ApiError e = {};

        if (holders(r, credential_id, &affected, &n_affected, &e) >= 0) {
                push_all(r, affected, n_affected);
                sandbox_array_free(affected, n_affected);
        }
}

int api_credential_remove(ApiRequest *r, const Credential *cred, ApiError *e) {
        const Credential c = *cred;
        int k;
        Sandbox *affected = NULL;
        size_t n_affected = 0;
        k = holders(r, c.id, &affected, &n_affected, e);
        if (k < 0)
                return k;
        k = store_credential_delete(r->store, r->key.tenant_id, c.name);
        if (k < 0)
                sandbox_array_free(affected, n_affected);
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "no credential '%s'", c.name);
        if (k < 0)
                return api_store_error(e, k, "deleting the credential");
        push_all(r, affected, n_affected);
        sandbox_array_free(affected, n_affected);
        cred_event(r, NULL, "credential.deleted", &c);
        log_info("Deleted credential %s (%s)", c.name, c.id);
        return 0;
}

/* Writes c back (compare-and-set on its version) and answers with it. */
static int update_and_reply(ApiRequest *r, Credential *c, const char *event, ApiError *e) {
        uint64_t v;
        int k;

        k = store_credential_update(r->store, c, &v);
        if (k == -ESTALE)
                return api_error(e, k, API_CONFLICT, "credential '%s' changed meanwhile; try again", c->name);
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "no credential '%s'", c->name);
        if (k < 0)
                return api_store_error(e, k, "updating the credential");
        c->version = v;
        c->updated_usec = now_usec();
        {
                Sandbox *affected = NULL;
                size_t n_affected = 0;
                if (holders(r, c->id, &affected, &n_affected, e) >= 0) {
                        push_all(r, affected, n_affected); /* rotation, revocation: the next request */
                        sandbox_array_free(affected, n_affected);
                }
        }
        cred_event(r, NULL, event, c);
        log_info("Credential %s: %s (version %" PRIu64 ")", c->name, event, v);
        return reply_credential(r, 200, c);
}

int api_credential_patch(ApiRequest *r, ApiError *e) {
        static const char *const allowed[] = { "value", "hosts", "header", "basic_user", "env", "expires_at",
                                               NULL };
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_credential_ Credential c = {};
        const char *unknown = NULL;
        JsonValue *v, *value;
        int64_t now = now_usec();
        int k;

        k = api_read_json(r, &body, e);
        if (k < 0)
                return k;
        value = json_get(body, "value");
        if (json_check_keys(body, allowed, &unknown) < 0)
                k = api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));
        else if (json_object_size(body) == 0)
                k = api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                              "give at least one of value, hosts, header, basic_user, env, expires_at");
        else if (json_get(body, "header") && json_get(body, "basic_user"))
                k = api_error(e, -EINVAL, API_INVALID_ARGUMENT, "give header or basic_user, not both");
        else
                k = lookup(r, r->params[0], &c, e);
        if (k >= 0 && c.revoked_usec > 0)
                k = api_error(e, -EPERM, API_CONFLICT, "credential '%s' is revoked; create a new one", c.name);
        if (k >= 0 && (v = json_get(body, "hosts"))) {
                c.hosts_json = mfree(c.hosts_json);
                k = parse_hosts(v, &c.hosts_json, e);
        }
        if (k >= 0 && (v = json_get(body, "header")))
                k = parse_header(v, &c, e);
        if (k >= 0 && (v = json_get(body, "basic_user")))
                k = parse_basic_user(v, &c, e);
        if (k >= 0 && (v = json_get(body, "env")))
                k = parse_env(v, &c, e);
        if (k >= 0 && (v = json_get(body, "expires_at")))
                k = parse_expires(v, now, &c, e);
        if (k >= 0 && value)
                k = seal_value(r, value, &c, e);
        wipe_json_string(value);
        if (k < 0)
                return k;
        return update_and_reply(r, &c, value ? "credential.rotated" : "credential.updated", e);
}

int api_credential_revoke(ApiRequest *r, ApiError *e) {
        _cleanup_credential_ Credential c = {};
        int k;

        k = lookup(r, r->params[0], &c, e);
        if (k < 0)
                return k;
        if (c.revoked_usec > 0)
                return reply_credential(r, 200, &c); /* already: nothing changes */
        c.revoked_usec = now_usec();
        return update_and_reply(r, &c, "credential.revoked", e);
}

/* ---- grants ---- */

/* {"name", "hosts": [...], "header": "H", "format": "F"} of e2b_network_credentials(): the credential granted
 * only to those hosts, in that header. */
static int resolve_scoped(ApiRequest *r, const JsonValue *o, size_t i, Credential *c, ApiError *e) {
        const JsonValue *hosts = json_get(o, "hosts");
        const char *name = json_string(json_get(o, "name")), *h = json_string(json_get(o, "header")),
                   *f = json_string(json_get(o, "format"));
        char err[256];
        int k;

        if (!name || !h || !f || json_type(hosts) != JSON_ARRAY)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "credentials[%zu] must be a name", i);
        k = lookup(r, name, c, e);
        if (k < 0)
                return k;
        if (cred_header_name_check(h, strlen(h), err, sizeof err) < 0 ||
            cred_header_format_check(f, strlen(f), err, sizeof err) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "credential '%s': header: %s", name, err);
        free(c->hosts_json);
        c->hosts_json = NULL;
        k = parse_hosts(hosts, &c->hosts_json, e);
        if (k < 0)
                return k;
        c->apply = CRED_APPLY_HEADER;
        (void) strscpy(c->header_name, sizeof c->header_name, h);
        (void) strscpy(c->header_format, sizeof c->header_format, f);
        c->basic_user[0] = 0;
        c->grant_scoped = true;
        return 0;
}

int api_credentials_resolve(ApiRequest *r, const JsonValue *names, Credential **ret, size_t *ret_n, ApiError *e) {
        return api_credentials_resolve_scoped(r, names, false, ret, ret_n, e);
}

int api_credentials_resolve_scoped(ApiRequest *r, const JsonValue *names, bool scopes, Credential **ret,
                                   size_t *ret_n, ApiError *e) {
        Credential *a = NULL;
        size_t n, i;
        int64_t now = now_usec();
        int k = 0;

        if (!names || json_is_null(names)) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        if (json_type(names) != JSON_ARRAY)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "credentials must be an array of names");
        n = json_array_size(names);
        if (n > CRED_GRANTS_MAX)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "a sandbox may be granted at most %d credentials",
                                 CRED_GRANTS_MAX);
        a = new0(Credential, n + 1);
        if (!a)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        for (i = 0; i < n && k >= 0; i++) {
                const JsonValue *item = json_array_at(names, i);
                const char *name = json_type(item) == JSON_OBJECT && scopes ? json_string(json_get(item, "name"))
                                                                             : json_string(item);

                if (!name) {
                        k = api_error(e, -EINVAL, API_INVALID_ARGUMENT, "credentials[%zu] must be a name", i);
                        break;
                }
                for (size_t j = 0; j < i && k >= 0; j++)
                        if (streq(a[j].name, name))
                                k = api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                              "credentials[%zu]: '%s' is listed twice", i, name);
                if (k < 0)
                        break;
                k = json_type(item) == JSON_OBJECT ? resolve_scoped(r, item, i, &a[i], e) : lookup(r, name, &a[i], e);
                if (k < 0)
                        break;
                if (!a[i].grant_scoped && api_credential_hostless(&a[i]))
                        k = api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                      "credential '%s' names no hosts (an E2B secret): grant it through an E2B "
                                      "sandbox's network.rules, or give it hosts (PATCH /v1/credentials/%s)", name,
                                      name);
                else if (!streq(cred_state(&a[i], now), "active"))
                        k = api_error(e, -EPERM, API_CONFLICT, "credential '%s' is %s", name, cred_state(&a[i], now));
        }
        if (k < 0) {
                credential_array_free(a, n); /* entries not filled are zero */
                return k;
        }
        *ret = a;
        *ret_n = n;
        return 0;
}

int api_credential_open_basic(ApiRequest *r, const char *name, Credential *ret, CredSecret **ret_value,
                              ApiError *e) {
        _cleanup_credential_ Credential c = {};
        int64_t now = now_usec();
        int k;

        k = lookup(r, name, &c, e);
        if (k < 0)
                return k;
        if (!streq(cred_state(&c, now), "active"))
                return api_error(e, -EPERM, API_CONFLICT, "credential '%s' is %s", name, cred_state(&c, now));
        if (c.apply != CRED_APPLY_BASIC || !c.basic_user[0])
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "credential '%s' is not a basic credential (a registry takes a user and password: "
                                 "space cred add NAME --basic-user USER --host REGISTRY)", name);
        if (!r->api->cred_key)
                return no_key(e);
        k = cred_open(r->api->cred_key, c.id, c.tenant_id, c.name, c.ciphertext, c.nonce, c.key_id, ret_value);
        if (k == -EKEYREJECTED)
                return api_error(e, k, API_UNAVAILABLE,
                                 "credential '%s' was sealed under another master key than this server's", name);
        if (k < 0)
                return api_error(e, k, API_INTERNAL, "credential '%s' does not open (its sealed value is damaged)",
                                 name);
        *ret = c;
        c = (Credential){};
        return 0;
}

#define TRUST_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
static const char *const ca_env[][2] = {
        { "SSL_CERT_FILE", TRUST_BUNDLE },      { "REQUESTS_CA_BUNDLE", TRUST_BUNDLE },
        { "CURL_CA_BUNDLE", TRUST_BUNDLE },     { "GIT_SSL_CAINFO", TRUST_BUNDLE },
        { "NODE_EXTRA_CA_CERTS", "/etc/ssl/certs/space-sandbox-ca.pem" },
};

int api_credentials_add_env(const Credential *creds, size_t n, char **env_json, ApiError *e) {
        _cleanup_json_ JsonValue *env = NULL;
        _cleanup_(json_w_done) JsonWriter w;
        char ph[CRED_PLACEHOLDER_MAX];
        bool any = false;
        int k;

        json_w_init(&w);
        any = n > 0; /* the CA variables, at least */
        if (!any)
                return 0;
        if (*env_json && json_parse(*env_json, strlen(*env_json), &env, NULL, 0) < 0)
                return api_error(e, -EIO, API_INTERNAL, "the sandbox's env is not JSON");
        json_w_object_begin(&w);
        for (size_t i = 0; env && i < json_object_size(env); i++) {
                json_w_key(&w, json_object_key(env, i));
                json_w_string_n(&w, json_string(json_object_value(env, i)),
                                json_string_len(json_object_value(env, i)));
        }
        for (size_t i = 0; i < n; i++) {
                if (isempty(creds[i].env_name) || json_get(env, creds[i].env_name))
                        continue; /* the request's own env wins */
                if (cred_placeholder(creds[i].name, ph, sizeof ph) < 0)
                        continue;
                json_w_kv_string(&w, creds[i].env_name, ph);
        }
        /* the sandbox's CA (installed by its worker, see worker-cred.c) for
         * clients that do not read the system bundle by default */
        for (size_t i = 0; i < ELEMENTSOF(ca_env); i++)
                if (!json_get(env, ca_env[i][0]))
                        json_w_kv_string(&w, ca_env[i][0], ca_env[i][1]);
        json_w_object_end(&w);
        free(*env_json);
        *env_json = NULL;
        k = json_w_finish(&w, env_json, NULL);
        if (k < 0)
                return api_error(e, k, API_UNAVAILABLE, "out of memory");
        return 0;
}

int api_credentials_grant_all(ApiRequest *r, const char *sandbox_id, const Credential *creds, size_t n,
                              ApiError *e) {
        int k;

        for (size_t i = 0; i < n; i++) {
                const Credential *c = &creds[i];
                k = store_grant_insert_scoped(r->store, r->key.tenant_id, sandbox_id, c->id,
                                              c->grant_scoped ? c->hosts_json : NULL, c->header_name,
                                              c->header_format);
                if (k < 0 && k != -EEXIST)
                        return api_store_error(e, k, "recording the credential grants");
                cred_event(r, sandbox_id, "credential.granted", &creds[i]);
        }
        return 0;
}

int api_credentials_inherit(ApiRequest *r, const Sandbox *parent, const char *child_id, const Credential *grants,
                            size_t n, ApiError *e) {
        int k;

        /* rows of its own: revoking one on the child (or deleting the
         * parent) leaves the other sandbox's grant as it was */
        for (size_t i = 0; i < n; i++) {
                const Credential *c = &grants[i];
                k = store_grant_insert_scoped(r->store, parent->tenant_id, child_id, c->id,
                                              c->grant_scoped ? c->hosts_json : NULL, c->header_name,
                                              c->header_format);
                if (k < 0 && k != -EEXIST)
                        return api_store_error(e, k, "copying the credential grants");
        }
        return 0;
}

void api_credentials_inherit_events(ApiRequest *r, const Sandbox *parent, const char *child_id,
                                    const Credential *grants, size_t n) {
        char reason[STORE_REASON_MAX], data[STORE_NAME_MAX + 64];

        snprintf(reason, sizeof reason, "inherited from %s", parent->id);
        for (size_t i = 0; i < n; i++) {
                snprintf(data, sizeof data, "{\"credential\":\"%s\",\"version\":%" PRIu64 "}", grants[i].name,
                         grants[i].version);
                api_event_tenant(r, parent->tenant_id, child_id, "credential.granted", reason, data);
        }
}

void api_credentials_inherit_undo(ApiRequest *r, const char *child_id, const Credential *grants, size_t n) {
        for (size_t i = 0; i < n; i++)
                (void) store_grant_delete(r->store, child_id, grants[i].id);
}

int api_credentials_env_of(ApiRequest *r, const char *sandbox_id, char **ret_env_json, ApiError *e) {
        Credential *list = NULL;
        size_t n = 0;
        int k;

        *ret_env_json = NULL;
        k = store_grant_list(r->store, sandbox_id, &list, &n);
        if (k < 0)
                return api_store_error(e, k, "listing the sandbox's credentials");
        k = api_credentials_add_env(list, n, ret_env_json, e);
        credential_array_free(list, n);
        return k;
}

int api_sandbox_credentials_list(ApiRequest *r, ApiError *e) {
        Sandbox sb = {};
        Credential *list = NULL;
        size_t n = 0;
        int k;

        k = api_sandbox_lookup(r, r->params[0], false, &sb, e);
        if (k < 0)
                return k;
        sandbox_done(&sb);
        k = store_grant_list(r->store, r->params[0], &list, &n);
        if (k < 0)
                return api_store_error(e, k, "listing the sandbox's credentials");
        return reply_credential_list(r, list, n);
}

int api_sandbox_credential_grant(ApiRequest *r, ApiError *e) {
        _cleanup_credential_ Credential c = {};
        Sandbox sb = {};
        int64_t now = now_usec();
        Credential *list = NULL;
        size_t n = 0;
        int k;

        k = api_sandbox_lookup(r, r->params[0], false, &sb, e);
        if (k < 0)
                return k;
        k = lookup(r, r->params[1], &c, e);
        if (k < 0)
                goto finish;
        if (api_credential_hostless(&c))
                k = api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                              "credential '%s' names no hosts (an E2B secret): grant it through an E2B sandbox's "
                              "network.rules, or give it hosts (PATCH /v1/credentials/%s)", c.name, c.name);
        else if (!streq(cred_state(&c, now), "active"))
                k = api_error(e, -EPERM, API_CONFLICT, "credential '%s' is %s", c.name, cred_state(&c, now));
        if (k < 0)
                goto finish;
        k = store_grant_list(r->store, r->params[0], &list, &n);
        credential_array_free(list, n);
        if (k < 0) {
                k = api_store_error(e, k, "listing the sandbox's credentials");
                goto finish;
        }
        if (n >= CRED_GRANTS_MAX) {
                k = api_error(e, -E2BIG, API_CONFLICT, "a sandbox may be granted at most %d credentials",
                              CRED_GRANTS_MAX);
                goto finish;
        }
        k = store_grant_insert(r->store, r->key.tenant_id, r->params[0], c.id);
        if (k == -EEXIST)
                k = api_error(e, k, API_ALREADY_EXISTS, "sandbox '%s' already has credential '%s'", r->params[0],
                              c.name);
        else if (k < 0)
                k = api_store_error(e, k, "recording the grant");
        if (k < 0)
                goto finish;
        /* a running sandbox's gateway applies it from the next request on; if
         * it cannot, the grant is taken back (nothing changed) */
        if (sandbox_live(&sb)) {
                k = api_get_worker(r, e);
                if (k >= 0)
                        k = worker_sandbox_set_credentials(r->worker, &sb, e);
                if (k < 0) {
                        (void) store_grant_delete(r->store, r->params[0], c.id);
                        goto finish;
                }
        }
        cred_event(r, r->params[0], "credential.granted", &c);
        log_info("Granted credential %s to sandbox %s", c.name, r->params[0]);
        k = reply_credential(r, 201, &c);
finish:
        sandbox_done(&sb);
        return k;
}

int api_sandbox_credential_revoke(ApiRequest *r, ApiError *e) {
        _cleanup_credential_ Credential c = {};
        Sandbox sb = {};
        int k;

        k = api_sandbox_lookup(r, r->params[0], false, &sb, e);
        if (k < 0)
                return k;
        k = lookup(r, r->params[1], &c, e);
        if (k >= 0) {
                k = store_grant_delete(r->store, r->params[0], c.id);
                if (k == -ENOENT)
                        k = api_error(e, k, API_NOT_FOUND, "sandbox '%s' has no credential '%s'", r->params[0],
                                      c.name);
                else if (k < 0)
                        k = api_store_error(e, k, "removing the grant");
        }
        if (k >= 0 && sandbox_live(&sb))
                push_all(r, &sb, 1); /* at once: the next request goes without it */
        sandbox_done(&sb);
        if (k < 0)
                return k;
        cred_event(r, r->params[0], "credential.ungranted", &c);
        log_info("Removed credential %s from sandbox %s", c.name, r->params[0]);
        return api_reply_empty(r, 204);
}
