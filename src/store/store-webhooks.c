/* SPDX-License-Identifier: MIT */
/* The generic half of webhooks: argument checks and dispatch through the
 * ops table. */

#include "store-backend.h"
#include "str-util.h"

static int webhook_check(const Webhook *w) {
        CHECK(CHECK_FIELD(w->id, true));
        CHECK(CHECK_FIELD(w->tenant_id, true));
        CHECK(CHECK_FIELD(w->name, false));
        CHECK(CHECK_FIELD(w->url, true));
        CHECK(CHECK_FIELD(w->events_json, true));
        CHECK(CHECK_FIELD(w->secret, true));
        CHECK(CHECK_FIELD(w->last_error, false));
        if (w->created_usec < 0 || w->last_seq < 0 || w->next_usec < 0 || w->failing_since_usec < 0)
                return -EINVAL;
        CHECK(check_u64(w->failures));
        return 0;
}

int store_webhook_insert(Store *s, Webhook *w) {
        if (!s || !w)
                return -EINVAL;
        CHECK(webhook_check(w));
        if (w->created_usec == 0)
                w->created_usec = now_usec();
        return s->ops->webhook_insert(s, w);
}

int store_webhook_get(Store *s, const char *tenant_id, const char *id, Webhook *ret) {
        if (!s || !ret)
                return -EINVAL;
        CHECK(check_lookup(tenant_id, STORE_ID_MAX));
        CHECK(check_lookup(id, STORE_ID_MAX));
        return s->ops->webhook_get(s, tenant_id, id, ret);
}

int store_webhook_list(Store *s, const char *tenant_id, Webhook **ret, size_t *ret_n) {
        if (!s || !ret || !ret_n)
                return -EINVAL;
        if (tenant_id && check_lookup(tenant_id, STORE_ID_MAX) < 0) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        return s->ops->webhook_list(s, tenant_id, ret, ret_n);
}

int store_webhook_update(Store *s, const Webhook *w) {
        if (!s || !w)
                return -EINVAL;
        CHECK(webhook_check(w));
        return s->ops->webhook_update(s, w);
}

int store_webhook_delete(Store *s, const char *tenant_id, const char *id) {
        if (!s)
                return -EINVAL;
        CHECK(check_lookup(tenant_id, STORE_ID_MAX));
        CHECK(check_lookup(id, STORE_ID_MAX));
        return s->ops->webhook_delete(s, tenant_id, id);
}

int store_webhook_set_state(Store *s, const Webhook *w, bool disable) {
        if (!s || !w)
                return -EINVAL;
        CHECK(webhook_check(w));
        return s->ops->webhook_set_state(s, w, disable);
}

int store_webhook_set_secret(Store *s, const char *id, const char *old, const char *secret) {
        if (!s)
                return -EINVAL;
        CHECK(check_arg(id, STORE_ID_MAX, true));
        CHECK(check_arg(old, STORE_WEBHOOK_SECRET_MAX, true));
        CHECK(check_arg(secret, STORE_WEBHOOK_SECRET_MAX, true));
        return s->ops->webhook_set_secret(s, id, old, secret);
}
