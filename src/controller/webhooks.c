/* SPDX-License-Identifier: MIT */
/* Webhook deliveries (see webhooks.h). Run by the active controller only:
 * one process sends, so a webhook's events go out one at a time, in order. */

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc-util.h"
#include "json.h"
#include "log.h"
#include "str-util.h"
#include "time-util.h"
#include "cred-crypt.h"
#include "webhook-post.h"
#include "webhook.h"
#include "webhooks.h"

int64_t webhook_backoff_usec(uint64_t failures) {
        int64_t d = WEBHOOK_BACKOFF_MIN_USEC;

        for (uint64_t i = 1; i < failures && d < WEBHOOK_BACKOFF_MAX_USEC; i++)
                d *= 2;
        return MIN(d, WEBHOOK_BACKOFF_MAX_USEC);
}

static void time_rfc3339(int64_t usec, char buf[static 32]) {
        time_t t = (time_t) (usec / 1000000);
        struct tm tm;

        if (!gmtime_r(&t, &tm)) {
                (void) snprintf(buf, 32, "1970-01-01T00:00:00.000Z");
                return;
        }
        (void) snprintf(buf, 32, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                        tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int) ((usec / 1000) % 1000));
}

int webhook_event_body(const Event *ev, char **ret, size_t *ret_len) {
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_json_ JsonValue *data = NULL;
        const char *e2b = webhook_e2b_type(ev->type);
        char id[24], ts[32];

        json_w_init(&w);
        (void) snprintf(id, sizeof id, "%lld", (long long) ev->seq);
        time_rfc3339(ev->time_usec, ts);
        if (ev->data_json && json_parse(ev->data_json, strlen(ev->data_json), &data, NULL, 0) < 0)
                data = NULL;
        json_w_object_begin(&w);
        json_w_kv_string(&w, "id", id);
        json_w_kv_string(&w, "type", ev->type);
        if (e2b)
                json_w_kv_string(&w, "e2b_type", e2b);
        json_w_kv_string(&w, "time", ts);
        json_w_key(&w, "sandbox_id");
        json_w_string(&w, isempty(ev->sandbox_id) ? NULL : ev->sandbox_id);
        json_w_kv_string(&w, "reason", ev->reason);
        json_w_key(&w, "data");
        if (data && json_type(data) == JSON_OBJECT)
                json_w_raw(&w, ev->data_json);
        else
                json_w_null(&w);
        json_w_object_end(&w);
        return json_w_finish(&w, ret, ret_len);
}

int webhook_event_body_e2b(const Event *ev, const Sandbox *sb, char **ret, size_t *ret_len) {
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_json_ JsonValue *meta = NULL;
        const char *e2b = webhook_e2b_type(ev->type);
        char id[24], ts[32];

        json_w_init(&w);
        (void) snprintf(id, sizeof id, "%lld", (long long) ev->seq);
        time_rfc3339(ev->time_usec, ts);
        if (sb && sb->metadata_json && json_parse(sb->metadata_json, strlen(sb->metadata_json), &meta, NULL, 0) < 0)
                meta = NULL;
        json_w_object_begin(&w);
        json_w_kv_string(&w, "version", "v2");
        json_w_kv_string(&w, "id", id);
        json_w_kv_string(&w, "type", e2b ?: ev->type);
        json_w_key(&w, "eventData");
        json_w_object_begin(&w);
        json_w_key(&w, "sandbox_metadata");
        if (meta && json_type(meta) == JSON_OBJECT)
                json_w_raw(&w, sb->metadata_json);
        else {
                json_w_object_begin(&w);
                json_w_object_end(&w);
        }
        if (sb && e2b && (streq(e2b, "sandbox.lifecycle.killed") || streq(e2b, "sandbox.lifecycle.paused"))) {
                char started[32];

                time_rfc3339(sb->created_usec, started);
                json_w_key(&w, "execution");
                json_w_object_begin(&w);
                json_w_kv_string(&w, "started_at", started);
                json_w_kv_int(&w, "vcpu_count", (int64_t) MAX(1U, (sb->cpu_millis + 999) / 1000));
                json_w_kv_int(&w, "memory_mb", (int64_t) sb->memory_mb);
                json_w_kv_int(&w, "execution_time", MAX(INT64_C(0), (ev->time_usec - sb->created_usec) / 1000));
                json_w_object_end(&w);
        }
        json_w_object_end(&w);
        json_w_kv_string(&w, "sandboxBuildId", "");
        json_w_kv_string(&w, "sandboxExecutionId", ev->sandbox_id);
        json_w_kv_string(&w, "sandboxId", ev->sandbox_id);
        json_w_kv_string(&w, "sandboxTeamId", ev->tenant_id);
        json_w_kv_string(&w, "sandboxTemplateId", sb ? sb->template_name : "");
        json_w_kv_string(&w, "timestamp", ts);
        json_w_object_end(&w);
        return json_w_finish(&w, ret, ret_len);
}

bool webhook_wants(const Webhook *w, const char *type) {
        _cleanup_json_ JsonValue *v = NULL;

        if (json_parse(w->events_json, strlen(w->events_json), &v, NULL, 0) < 0 || json_type(v) != JSON_ARRAY)
                return false;
        for (size_t i = 0; i < json_array_size(v); i++)
                if (webhook_pattern_match(json_string(json_array_at(v, i)), type))
                        return true;
        return false;
}

typedef struct Budget {
        unsigned left;
        int64_t start_msec; /* mono_msec() */
} Budget;

static bool budget_spent(const Budget *b) {
        return b->left == 0 || mono_msec() - b->start_msec >= WEBHOOK_ROUND_BUDGET_MSEC;
}

static void disabled_event(Store *s, const Webhook *w) {
        char data[STORE_ID_MAX + 16];
        Event ev = {};

        (void) strscpy(ev.tenant_id, sizeof ev.tenant_id, w->tenant_id);
        (void) strscpy(ev.type, sizeof ev.type, "webhook.disabled");
        (void) strscpy(ev.actor, sizeof ev.actor, "controller");
        (void) snprintf(ev.reason, sizeof ev.reason, "deliveries failed since too long: %s", w->last_error);
        (void) snprintf(data, sizeof data, "{\"id\":\"%s\"}", w->id); /* our id alphabet */
        ev.data_json = data;
        if (store_event_append(s, &ev) < 0)
                log_warning("Failed to record webhook.disabled for %s", w->id);
}

/* The webhook's pending events, in order, until one fails or the budget is spent. */
static int deliver_some(Store *s, const WebhookGuard *g, const Config *c, const CredKey *key, Webhook *w,
                        int64_t now, int64_t settle, Budget *b) {
        EventFilter f = { .tenant_id = w->tenant_id, .after_seq = w->last_seq, .limit = 100 };
        Event *list = NULL;
        size_t n = 0;
        bool changed = false, disable = false, claimed = false;
        int r, delivered = 0;

        r = store_event_list(s, &f, &list, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                Event *ev = &list[i];
                _cleanup_free_ char *body = NULL;
                char why[STORE_REASON_MAX], delivery[48];
                size_t len = 0;

                if (settle > 0 && ev->time_usec > now - settle)
                        break; /* and every later one: in order */
                if (!webhook_wants(w, ev->type)) {
                        w->last_seq = ev->seq;
                        changed = true;
                        continue;
                }
                if (budget_spent(b))
                        break;
                b->left--;
                if (w->e2b) {
                        _cleanup_(sandbox_done) Sandbox sb = {};
                        bool known = !isempty(ev->sandbox_id) &&
                                     store_sandbox_get(s, w->tenant_id, ev->sandbox_id, &sb) >= 0;

                        r = webhook_event_body_e2b(ev, known ? &sb : NULL, &body, &len);
                } else
                        r = webhook_event_body(ev, &body, &len);
                if (r < 0)
                        break;
                /* the claim: a write of the webhook's state (as it is) before its first POST of
                 * the round, so that a controller fenced meanwhile (its lease taken over:
                 * the write fails) posts nothing the new leader posts too */
                if (!claimed) {
                        r = store_webhook_set_state(s, w, false);
                        if (r < 0) {
                                if (r == -ESTALE)
                                        log_info("Webhook %s: not delivering, this controller is fenced", w->id);
                                break;
                        }
                        claimed = true;
                }
                (void) snprintf(delivery, sizeof delivery, "%s-%lld-%llu", w->id, (long long) ev->seq,
                                (unsigned long long) w->failures);
                {
                        char plain[WEBHOOK_SECRET_MAX + 1];
                        r = webhook_secret_open(key, w->id, w->tenant_id, w->secret, plain);
                        if (r < 0)
                                (void) snprintf(why, sizeof why, "the webhook's secret does not open in this "
                                                "controller (%s): it needs the master key it was sealed under",
                                                strerror(-r));
                        else
                                r = webhook_send(g, w->url, plain, w->id, delivery, now_usec(), body, len, why,
                                                 sizeof why);
                        explicit_bzero(plain, sizeof plain);
                }
                changed = true;
                if (r >= 0) {
                        w->last_seq = ev->seq;
                        w->failures = 0;
                        w->next_usec = w->failing_since_usec = 0;
                        w->last_error[0] = 0;
                        delivered++;
                        continue;
                }
                w->failures++;
                if (w->failing_since_usec == 0)
                        w->failing_since_usec = now;
                w->next_usec = now + webhook_backoff_usec(w->failures);
                (void) snprintf(w->last_error, sizeof w->last_error, "event %lld: %s", (long long) ev->seq, why);
                log_debug("Webhook %s: delivery of event %lld failed (%llu times): %s", w->id, (long long) ev->seq,
                          (unsigned long long) w->failures, why);
                if (now - w->failing_since_usec >= (int64_t) c->webhook_give_up_s * 1000000) {
                        disable = true;
                        log_warning("Webhook %s disabled: deliveries of event %lld failed for %llu s: %s", w->id,
                                    (long long) ev->seq, (unsigned long long) c->webhook_give_up_s, why);
                }
                break;
        }
        event_array_free(list, n);
        if (changed) {
                r = store_webhook_set_state(s, w, disable);
                if (r < 0 && r != -ENOENT)
                        log_warning_errno(r, "Cannot record the delivery state of webhook %s: %m", w->id);
                if (r >= 0 && disable)
                        disabled_event(s, w);
        }
        return delivered;
}

int webhooks_seal_stored(Store *store, const CredKey *key, uint64_t *ret_sealed) {
        Webhook *list = NULL;
        size_t n = 0;
        uint64_t sealed = 0;
        int r;

        if (ret_sealed)
                *ret_sealed = 0;
        if (!key)
                return 0;
        r = store_webhook_list(store, NULL, &list, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n && r >= 0; i++) {
                char s[WEBHOOK_SEALED_MAX];
                if (webhook_secret_sealed(list[i].secret))
                        continue;
                r = webhook_secret_seal(key, list[i].id, list[i].tenant_id, list[i].secret, s);
                if (r >= 0) {
                        r = store_webhook_set_secret(store, list[i].id, list[i].secret, s);
                        if (r == -ESTALE) /* changed or deleted meanwhile: another process sealed it */
                                r = 0;
                        else if (r >= 0)
                                sealed++;
                }
                explicit_bzero(s, sizeof s);
        }
        for (size_t i = 0; i < n; i++)
                explicit_bzero(list[i].secret, sizeof list[i].secret);
        free(list);
        if (ret_sealed)
                *ret_sealed = sealed;
        return r;
}

int webhooks_run_once(Store *store, const Config *config, const CredKey *key, int64_t now) {
        static size_t rotate = 0; /* where the last round began: every webhook gets its turn */
        Budget b = { .left = WEBHOOK_ROUND_DELIVERIES };
        WebhookGuard g;
        Webhook *list = NULL;
        size_t n = 0;
        int64_t settle = streq(store_backend_name(store), "postgres") ? WEBHOOK_SETTLE_USEC : 0;
        int r, total = 0;

        r = webhook_guard_init(&g, config->webhook_allow_private, config->net_pool);
        if (r < 0) /* a net_pool the config checks let through: keep the private ranges refused */
                (void) webhook_guard_init(&g, false, NULL);
        r = store_webhook_list(store, NULL, &list, &n);
        if (r < 0)
                return r;
        b.start_msec = mono_msec();
        for (size_t k = 0; k < n && !budget_spent(&b); k++) {
                Webhook *w = &list[(rotate + k) % n];

                if (!w->enabled || w->next_usec > now)
                        continue;
                r = deliver_some(store, &g, config, key, w, now, settle, &b);
                if (r > 0)
                        total += r;
        }
        if (n > 0)
                rotate = (rotate + 1) % n;
        free(list);
        return total;
}
