/* SPDX-License-Identifier: MIT */
/* The generic half of the store's credentials and grants: argument checks,
 * the CredApply string table, destructors, dispatch through the ops table.
 * The store never sees a credential's value, only its sealed form. */

#include <openssl/crypto.h>

#include "alloc-util.h"
#include "store-backend.h"
#include "str-util.h"

static const char *const cred_apply_table[_CRED_APPLY_MAX] = {
        [CRED_APPLY_HEADER] = "header",
        [CRED_APPLY_BASIC] = "basic",
};

const char *cred_apply_to_string(CredApply a) {
        if (a < 0 || a >= _CRED_APPLY_MAX)
                return NULL;
        return cred_apply_table[a];
}

CredApply cred_apply_from_string(const char *s) {
        if (!s)
                return _CRED_APPLY_INVALID;
        for (size_t i = 0; i < ELEMENTSOF(cred_apply_table); i++)
                if (streq(cred_apply_table[i], s))
                        return (CredApply) i;
        return _CRED_APPLY_INVALID;
}

void credential_done(Credential *c) {
        if (!c)
                return;
        c->hosts_json = mfree(c->hosts_json);
        if (c->ciphertext) {
                OPENSSL_cleanse(c->ciphertext, strlen(c->ciphertext));
                c->ciphertext = mfree(c->ciphertext);
        }
}

void credential_array_free(Credential *a, size_t n) {
        if (!a)
                return;
        for (size_t i = 0; i < n; i++)
                credential_done(a + i);
        free(a);
}

static int credential_check(const Credential *c) {
        CHECK(CHECK_FIELD(c->id, true));
        CHECK(CHECK_FIELD(c->tenant_id, true));
        CHECK(CHECK_FIELD(c->name, true));
        CHECK(CHECK_FIELD(c->header_name, false));
        CHECK(CHECK_FIELD(c->header_format, false));
        CHECK(CHECK_FIELD(c->basic_user, false));
        CHECK(CHECK_FIELD(c->env_name, false));
        CHECK(CHECK_FIELD(c->nonce, true));
        CHECK(CHECK_FIELD(c->key_id, true));
        if (!cred_apply_to_string(c->apply))
                return -EINVAL;
        if (isempty(c->hosts_json) || isempty(c->ciphertext))
                return -EINVAL;
        if (c->created_usec < 0 || c->updated_usec < 0 || c->expires_usec < 0 || c->revoked_usec < 0)
                return -EINVAL;
        CHECK(check_u64(c->version));
        return 0;
}

int store_credential_insert(Store *s, const Credential *c) {
        Credential copy;

        if (!s || !c)
                return -EINVAL;
        CHECK(credential_check(c));
        copy = *c;
        if (copy.created_usec == 0)
                copy.created_usec = now_usec();
        copy.updated_usec = copy.created_usec;
        copy.version = 1;
        return s->ops->credential_insert(s, &copy);
}

int store_credential_get(Store *s, const char *tenant_id, const char *name, Credential *ret) {
        if (!s || !ret)
                return -EINVAL;
        CHECK(check_lookup(tenant_id, STORE_ID_MAX));
        CHECK(check_lookup(name, STORE_NAME_MAX));
        return s->ops->credential_get(s, tenant_id, name, ret);
}

int store_credential_list(Store *s, const char *tenant_id, Credential **ret, size_t *ret_n) {
        if (!s || !ret || !ret_n || !tenant_id)
                return -EINVAL;
        if (check_lookup(tenant_id, STORE_ID_MAX) < 0) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        return s->ops->credential_list(s, tenant_id, ret, ret_n);
}

int store_credential_update(Store *s, const Credential *c, uint64_t *ret_version) {
        uint64_t v;
        int r;

        if (!s || !c)
                return -EINVAL;
        CHECK(credential_check(c));
        if (c->version == 0 || c->version >= (uint64_t) INT64_MAX)
                return -EINVAL;
        r = s->ops->credential_update(s, c, now_usec(), &v);
        if (r < 0)
                return r;
        if (ret_version)
                *ret_version = v;
        return 0;
}

int store_credential_delete(Store *s, const char *tenant_id, const char *name) {
        if (!s)
                return -EINVAL;
        CHECK(check_lookup(tenant_id, STORE_ID_MAX));
        CHECK(check_lookup(name, STORE_NAME_MAX));
        return s->ops->credential_delete(s, tenant_id, name);
}

int store_grant_insert(Store *s, const char *tenant_id, const char *sandbox_id, const char *credential_id) {
        return store_grant_insert_scoped(s, tenant_id, sandbox_id, credential_id, NULL, NULL, NULL);
}

int store_grant_insert_scoped(Store *s, const char *tenant_id, const char *sandbox_id, const char *credential_id,
                              const char *hosts_json, const char *header_name, const char *header_format) {
        if (!s)
                return -EINVAL;
        CHECK(check_arg(tenant_id, STORE_ID_MAX, true));
        CHECK(check_arg(sandbox_id, STORE_ID_MAX, true));
        CHECK(check_arg(credential_id, STORE_ID_MAX, true));
        if (hosts_json) {
                CHECK(check_arg(header_name, STORE_CRED_HEADER_MAX, true));
                CHECK(check_arg(header_format, STORE_CRED_FORMAT_MAX, true));
                if (isempty(hosts_json) || hosts_json[0] != '[')
                        return -EINVAL;
        } else
                header_name = header_format = NULL;
        return s->ops->grant_insert(s, tenant_id, sandbox_id, credential_id, hosts_json, header_name, header_format,
                                    now_usec());
}

int store_grant_delete(Store *s, const char *sandbox_id, const char *credential_id) {
        if (!s)
                return -EINVAL;
        CHECK(check_lookup(sandbox_id, STORE_ID_MAX));
        CHECK(check_lookup(credential_id, STORE_ID_MAX));
        return s->ops->grant_delete(s, sandbox_id, credential_id);
}

int store_credentials_reseal(Store *s, const StoreReseal *rs, uint64_t *ret_changed, uint64_t *ret_total) {
        uint64_t changed = 0, total = 0;
        int r;

        if (!s || !rs || !rs->begin || !rs->row || !rs->settings || rs->n_settings == 0 ||
            rs->n_settings > STORE_RESEAL_SETTINGS_MAX)
                return -EINVAL;
        for (size_t i = 0; i < rs->n_settings; i++) {
                CHECK(check_arg(rs->settings[i].name, STORE_NAME_MAX, true));
                CHECK(check_arg(rs->settings[i].value, STORE_CLUSTER_SETTING_MAX, true));
        }
        r = s->ops->credentials_reseal(s, rs, &changed, &total);
        if (r < 0)
                return r;
        if (ret_changed)
                *ret_changed = changed;
        if (ret_total)
                *ret_total = total;
        return 0;
}

int store_reseal_event(Store *s, const StoreReseal *rs, uint64_t changed, uint64_t total) {
        Event ev = {};

        if (!rs->end)
                return 0;
        CHECK(rs->end(changed, total, &ev, rs->userdata));
        CHECK(store_event_check(&ev));
        return s->ops->event_append(s, &ev);
}

/* What row() left in c must still be a sealed value the columns hold. */
int store_reseal_row_check(const Credential *c) {
        return credential_check(c);
}

int store_grant_list(Store *s, const char *sandbox_id, Credential **ret, size_t *ret_n) {
        if (!s || !ret || !ret_n || !sandbox_id)
                return -EINVAL;
        if (check_lookup(sandbox_id, STORE_ID_MAX) < 0) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        return s->ops->grant_list(s, sandbox_id, ret, ret_n);
}
