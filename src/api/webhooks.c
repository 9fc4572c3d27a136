/* SPDX-License-Identifier: MIT */
/* /v1/webhooks: a tenant's lifecycle webhooks (create: the secret is shown
 * once; list, show, patch, delete, and a test delivery). Every key, admin
 * or not, sees its own tenant's only: another tenant's is a 404. The URL
 * is checked against the SSRF guard here and again at every delivery. The
 * E2B form (/events/webhooks) is the same with E2B's field names. */

#include <stdio.h>

#include "api-internal.h"
#include "cred-crypt.h"
#include "log.h"
#include "str-util.h"
#include "webhook-post.h"
#include "webhook.h"

#define WEBHOOK_ID_PREFIX "wh_"
#define WEBHOOK_ID_RANDOM_LEN 16U
#define WEBHOOKS_PER_TENANT_MAX 20U

typedef enum WebhookForm {
        FORM_SPACE,
        FORM_E2B,
} WebhookForm;

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

static void out_webhook(ApiRequest *r, JsonWriter *w, const Webhook *h, WebhookForm form, const char *secret) {
        char ts[JSON_OUT_TIME_MAX];

        json_out_time(h->created_usec, ts);
        json_w_object_begin(w);
        json_w_kv_string(w, "id", h->id);
        if (form == FORM_E2B) {
                json_w_kv_string(w, "teamID", api_tenant_name(r, h->tenant_id));
                json_w_kv_string(w, "name", h->name);
                json_w_kv_string(w, "createdAt", ts);
                json_w_kv_bool(w, "enabled", h->enabled);
                json_w_kv_string(w, "url", h->url);
                json_w_key(w, "events");
                json_w_raw(w, h->events_json);
                if (secret)
                        json_w_kv_string(w, "signatureSecret", secret);
                json_w_object_end(w);
                return;
        }
        json_w_kv_string(w, "tenant", api_tenant_name(r, h->tenant_id));
        json_w_kv_string(w, "name", h->name);
        json_w_kv_string(w, "url", h->url);
        json_w_key(w, "events");
        json_w_raw(w, h->events_json); /* written by us from checked patterns */
        json_w_kv_bool(w, "enabled", h->enabled);
        json_w_kv_string(w, "created_at", ts);
        if (secret)
                json_w_kv_string(w, "secret", secret);
        json_w_key(w, "delivery");
        json_w_object_begin(w);
        json_w_kv_int(w, "last_event_seq", h->last_seq);
        json_w_kv_int(w, "failures", (int64_t) h->failures);
        kv_time_or_null(w, "next_attempt_at", h->failures > 0 ? h->next_usec : 0);
        kv_time_or_null(w, "failing_since", h->failing_since_usec);
        json_w_kv_string(w, "last_error", h->last_error);
        json_w_object_end(w);
        json_w_object_end(w);
}

static bool webhook_id_valid(const char *id) {
        const char *rest = id ? startswith(id, WEBHOOK_ID_PREFIX) : NULL;

        if (!rest || strlen(rest) != WEBHOOK_ID_RANDOM_LEN)
                return false;
        for (const char *p = rest; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
                        return false;
        return true;
}

static int check_url(ApiRequest *r, const JsonValue *v, Webhook *h, ApiError *e) {
        const Config *c = api_config(r->api);
        struct sockaddr_storage ss;
        socklen_t len;
        char why[STORE_REASON_MAX];
        const char *bad = NULL, *s = json_string(v);
        WebhookGuard g;
        WebhookUrl u;
        int k;

        if (!s || memchr(s, 0, json_string_len(v)))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "url must be a string");
        if (webhook_url_parse(s, &u, &bad) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "%s", bad);
        if (webhook_guard_init(&g, c->webhook_allow_private, c->net_pool) < 0)
                (void) webhook_guard_init(&g, false, NULL);
        k = webhook_resolve(&g, &u, &ss, &len, why, sizeof why);
        if (k < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "url: %s", why);
        (void) strscpy(h->url, sizeof h->url, s);
        return 0;
}

static int check_events(const JsonValue *v, Webhook *h, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *out = NULL;
        size_t n = json_array_size(v), len = 0;
        int k;

        if (json_type(v) != JSON_ARRAY || n == 0 || n > WEBHOOK_PATTERNS_MAX)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "events must be an array of 1 to %u event types",
                                 WEBHOOK_PATTERNS_MAX);
        json_w_init(&w);
        json_w_array_begin(&w);
        for (size_t i = 0; i < n; i++) {
                const JsonValue *p = json_array_at(v, i);
                const char *s = json_string(p);

                if (!s || memchr(s, 0, json_string_len(p)) || !webhook_pattern_valid(s))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "events[%zu] must be \"*\", \"sandbox.*\", a sandbox event type "
                                         "(sandbox.created, ...) or an E2B one (sandbox.lifecycle.created, ...)",
                                         i);
                json_w_string(&w, s);
        }
        json_w_array_end(&w);
        k = json_w_finish(&w, &out, &len);
        if (k < 0)
                return api_error(e, k, API_INTERNAL, "out of memory");
        if (strscpy(h->events_json, sizeof h->events_json, out) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "events is too long");
        return 0;
}

static int check_name(const JsonValue *v, Webhook *h, ApiError *e) {
        const char *s = json_string(v);

        if (!s || json_string_len(v) > API_NAME_MAX || (json_string_len(v) > 0 && !api_key_name_valid(s)))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "name must be up to %u printable ASCII characters", API_NAME_MAX);
        (void) strscpy(h->name, sizeof h->name, s);
        return 0;
}

static int check_secret(const JsonValue *v, char ret[static WEBHOOK_SECRET_MAX + 1], ApiError *e) {
        const char *s = json_string(v);
        size_t n = json_string_len(v);

        if (!s || n < WEBHOOK_SECRET_MIN || n > WEBHOOK_SECRET_MAX)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "secret must be %u to %u printable ASCII characters",
                                 WEBHOOK_SECRET_MIN, WEBHOOK_SECRET_MAX);
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) s[i] <= 0x20 || (unsigned char) s[i] >= 0x7f)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "secret must be %u to %u printable ASCII characters", WEBHOOK_SECRET_MIN,
                                         WEBHOOK_SECRET_MAX);
        (void) strscpy(ret, WEBHOOK_SECRET_MAX + 1, s);
        return 0;
}

static int check_enabled(const JsonValue *v, Webhook *h, ApiError *e) {
        if (json_bool(v, &h->enabled) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "enabled must be true or false");
        return 0;
}

static void webhook_event(ApiRequest *r, const char *type, const Webhook *h) {
        char data[STORE_ID_MAX + 16];

        (void) snprintf(data, sizeof data, "{\"id\":\"%s\"}", h->id); /* our id alphabet */
        api_event(r, NULL, type, "", data);
}

static int webhook_create(ApiRequest *r, ApiError *e, WebhookForm form) {
        static const char *const allowed_space[] = { "url", "events", "secret", "name", "enabled", NULL };
        static const char *const allowed_e2b[] = { "url", "events", "signatureSecret", "name", "enabled", NULL };
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        const char *unknown = NULL, *secret_key = form == FORM_E2B ? "signatureSecret" : "secret";
        char secret[WEBHOOK_SECRET_MAX + 1] = "";
        Webhook h = { .enabled = true, .e2b = form == FORM_E2B };
        Webhook *list = NULL;
        size_t n = 0;
        JsonValue *v;
        int k;

        json_w_init(&w);
        k = api_read_json(r, &body, e);
        if (k < 0)
                return k;
        if (json_check_keys(body, form == FORM_E2B ? allowed_e2b : allowed_space, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));
        v = json_get(body, "url");
        if (!v)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "url is required");
        k = check_url(r, v, &h, e);
        if (k >= 0) {
                v = json_get(body, "events");
                if (v && !json_is_null(v))
                        k = check_events(v, &h, e);
                else
                        (void) strscpy(h.events_json, sizeof h.events_json,
                                       form == FORM_E2B ? "[\"sandbox.lifecycle.*\"]" : "[\"sandbox.*\"]");
        }
        if (k >= 0 && (v = json_get(body, "name")) && !json_is_null(v))
                k = check_name(v, &h, e);
        if (k >= 0 && (v = json_get(body, "enabled")) && !json_is_null(v))
                k = check_enabled(v, &h, e);
        if (k >= 0 && (v = json_get(body, secret_key)) && !json_is_null(v))
                k = check_secret(v, secret, e);
        if (k < 0)
                return k;
        if (secret[0] == 0) {
                k = webhook_secret_generate(secret);
                if (k < 0)
                        return api_error(e, k, API_INTERNAL, "cannot generate a secret: %s", strerror(-k));
        }
        (void) strscpy(h.tenant_id, sizeof h.tenant_id, r->key.tenant_id);

        k = store_webhook_list(r->store, r->key.tenant_id, &list, &n);
        free(list);
        if (k < 0)
                return api_store_error(e, k, "listing webhooks");
        if (n >= WEBHOOKS_PER_TENANT_MAX)
                return api_error(e, -EBUSY, API_CONFLICT, "a tenant may have at most %u webhooks",
                                 WEBHOOKS_PER_TENANT_MAX);
        memcpy(h.id, WEBHOOK_ID_PREFIX, STRLEN(WEBHOOK_ID_PREFIX));
        k = random_alnum(h.id + STRLEN(WEBHOOK_ID_PREFIX), WEBHOOK_ID_RANDOM_LEN);
        if (k < 0)
                return api_error(e, k, API_INTERNAL, "cannot generate an id: %s", strerror(-k));
        /* stored sealed under the master key, like a credential's value */
        {
                const CredKey *key = NULL;
                k = api_seal_key(r, &key, e);
                if (k < 0) {
                        explicit_bzero(secret, sizeof secret);
                        return k;
                }
                k = webhook_secret_seal(key, h.id, h.tenant_id, secret, h.secret);
                if (k < 0) {
                        explicit_bzero(secret, sizeof secret);
                        return api_error(e, k, API_INTERNAL, "cannot seal the secret: %s", strerror(-k));
                }
        }
        k = store_webhook_insert(r->store, &h);
        if (k < 0)
                return api_store_error(e, k, "recording the webhook");
        webhook_event(r, "webhook.created", &h);
        log_info("Created webhook %s", h.id);
        /* the secret is shown this once */
        out_webhook(r, &w, &h, form, secret);
        explicit_bzero(secret, sizeof secret);
        explicit_bzero(h.secret, sizeof h.secret);
        return api_reply_json(r, 201, &w);
}

static int webhook_lookup(ApiRequest *r, const char *id, Webhook *ret, ApiError *e) {
        int k;

        if (!webhook_id_valid(id))
                return api_error(e, -ENOENT, API_NOT_FOUND, "no webhook '%.64s'", strempty(id));
        k = store_webhook_get(r->store, r->key.tenant_id, id, ret);
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "no webhook '%s'", id);
        if (k < 0)
                return api_store_error(e, k, "looking up the webhook");
        return 0;
}

static int webhook_list(ApiRequest *r, ApiError *e, WebhookForm form) {
        _cleanup_(json_w_done) JsonWriter w = {};
        Webhook *list = NULL;
        size_t n = 0;
        int k;

        json_w_init(&w);
        k = store_webhook_list(r->store, r->key.tenant_id, &list, &n);
        if (k < 0)
                return api_store_error(e, k, "listing webhooks");
        if (form == FORM_SPACE) {
                json_w_object_begin(&w);
                json_w_key(&w, "webhooks");
        }
        json_w_array_begin(&w);
        for (size_t i = 0; i < n; i++)
                out_webhook(r, &w, &list[i], form, NULL);
        json_w_array_end(&w);
        if (form == FORM_SPACE)
                json_w_object_end(&w);
        for (size_t i = 0; i < n; i++)
                explicit_bzero(list[i].secret, sizeof list[i].secret);
        free(list);
        return api_reply_json(r, 200, &w);
}

static int webhook_show(ApiRequest *r, ApiError *e, WebhookForm form) {
        _cleanup_(json_w_done) JsonWriter w = {};
        Webhook h;
        int k;

        json_w_init(&w);
        k = webhook_lookup(r, r->params[0], &h, e);
        if (k < 0)
                return k;
        explicit_bzero(h.secret, sizeof h.secret);
        out_webhook(r, &w, &h, form, NULL);
        return api_reply_json(r, 200, &w);
}

static int webhook_patch(ApiRequest *r, ApiError *e, WebhookForm form) {
        static const char *const allowed_space[] = { "url", "events", "name", "enabled", NULL };
        static const char *const allowed_e2b[] = { "url", "events", "name", "enabled", NULL };
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        const char *unknown = NULL;
        Webhook h;
        JsonValue *v;
        int k;

        json_w_init(&w);
        k = webhook_lookup(r, r->params[0], &h, e);
        if (k < 0)
                return k;
        k = api_read_json(r, &body, e);
        if (k < 0)
                return k;
        if (json_check_keys(body, form == FORM_E2B ? allowed_e2b : allowed_space, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));
        if (json_object_size(body) == 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "nothing to change: give url, events, name or enabled");
        if ((v = json_get(body, "url")))
                k = check_url(r, v, &h, e);
        if (k >= 0 && (v = json_get(body, "events")))
                k = check_events(v, &h, e);
        if (k >= 0 && (v = json_get(body, "name")))
                k = check_name(v, &h, e);
        if (k >= 0 && (v = json_get(body, "enabled")))
                k = check_enabled(v, &h, e);
        if (k < 0)
                return k;
        k = store_webhook_update(r->store, &h);
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "no webhook '%s'", h.id);
        if (k < 0)
                return api_store_error(e, k, "updating the webhook");
        webhook_event(r, "webhook.updated", &h);
        k = store_webhook_get(r->store, r->key.tenant_id, h.id, &h);
        if (k < 0)
                return api_store_error(e, k, "looking up the webhook");
        explicit_bzero(h.secret, sizeof h.secret);
        out_webhook(r, &w, &h, form, NULL);
        return api_reply_json(r, 200, &w);
}

static int webhook_delete(ApiRequest *r, ApiError *e) {
        Webhook h;
        int k;

        k = webhook_lookup(r, r->params[0], &h, e);
        if (k < 0)
                return k;
        explicit_bzero(h.secret, sizeof h.secret);
        k = store_webhook_delete(r->store, r->key.tenant_id, h.id);
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "no webhook '%s'", h.id);
        if (k < 0)
                return api_store_error(e, k, "deleting the webhook");
        webhook_event(r, "webhook.deleted", &h);
        log_info("Deleted webhook %s", h.id);
        return api_reply_empty(r, 204);
}

int api_webhook_create(ApiRequest *r, ApiError *e) {
        return webhook_create(r, e, FORM_SPACE);
}

int api_webhook_list(ApiRequest *r, ApiError *e) {
        return webhook_list(r, e, FORM_SPACE);
}

int api_webhook_show(ApiRequest *r, ApiError *e) {
        return webhook_show(r, e, FORM_SPACE);
}

int api_webhook_patch(ApiRequest *r, ApiError *e) {
        return webhook_patch(r, e, FORM_SPACE);
}

int api_webhook_delete(ApiRequest *r, ApiError *e) {
        return webhook_delete(r, e);
}

int api_webhook_test(ApiRequest *r, ApiError *e) {
        const Config *c = api_config(r->api);
        _cleanup_(json_w_done) JsonWriter w = {}, body = {};
        _cleanup_free_ char *text = NULL;
        char why[STORE_REASON_MAX], ts[JSON_OUT_TIME_MAX], delivery[48];
        size_t len = 0;
        int64_t now = now_usec();
        WebhookGuard g;
        Webhook h;
        int k;

        json_w_init(&w);
        json_w_init(&body);
        k = webhook_lookup(r, r->params[0], &h, e);
        if (k < 0)
                return k;
        json_out_time(now, ts);
        json_w_object_begin(&body);
        json_w_kv_string(&body, "id", "test");
        json_w_kv_string(&body, "type", "webhook.test");
        json_w_kv_string(&body, "time", ts);
        json_w_key(&body, "sandbox_id");
        json_w_null(&body);
        json_w_kv_string(&body, "reason", "a test delivery");
        json_w_key(&body, "data");
        json_w_object_begin(&body);
        json_w_kv_string(&body, "webhook_id", h.id);
        json_w_object_end(&body);
        json_w_object_end(&body);
        k = json_w_finish(&body, &text, &len);
        if (k < 0)
                return api_error(e, k, API_INTERNAL, "out of memory");
        if (webhook_guard_init(&g, c->webhook_allow_private, c->net_pool) < 0)
                (void) webhook_guard_init(&g, false, NULL);
        (void) snprintf(delivery, sizeof delivery, "%s-test-%lld", h.id, (long long) now);
        {
                char plain[WEBHOOK_SECRET_MAX + 1];
                k = webhook_secret_open(r->api->cred_key, h.id, h.tenant_id, h.secret, plain);
                explicit_bzero(h.secret, sizeof h.secret);
                if (k < 0)
                        return api_error(e, k, k == -ENOKEY ? API_UNAVAILABLE : API_INTERNAL,
                                         "the webhook's secret does not open here (%s): is this server's "
                                         "master key the one it was sealed under?", strerror(-k));
                k = webhook_send(&g, h.url, plain, h.id, delivery, now, text, len, why, sizeof why);
                explicit_bzero(plain, sizeof plain);
        }
        if (k < 0)
                return api_error(e, k, API_BAD_GATEWAY, "the test delivery failed: %s", why);
        json_w_object_begin(&w);
        json_w_kv_bool(&w, "delivered", true);
        json_w_object_end(&w);
        return api_reply_json(r, 200, &w);
}

/* The E2B form: /events/webhooks. */
int api_e2b_webhook_create(ApiRequest *r, ApiError *e) {
        return webhook_create(r, e, FORM_E2B);
}

int api_e2b_webhook_list(ApiRequest *r, ApiError *e) {
        return webhook_list(r, e, FORM_E2B);
}

int api_e2b_webhook_show(ApiRequest *r, ApiError *e) {
        return webhook_show(r, e, FORM_E2B);
}

int api_e2b_webhook_patch(ApiRequest *r, ApiError *e) {
        return webhook_patch(r, e, FORM_E2B);
}
