/* SPDX-License-Identifier: MIT */
/* The generic half of the store's volumes: argument checks and dispatch
 * through the ops table. The sharing rule (one writer or many readers) is
 * decided by the back ends inside the mount's transaction. */

#include "store-backend.h"
#include "str-util.h"


static int volume_check(const Volume *v) {
        CHECK(CHECK_FIELD(v->id, true));
        CHECK(CHECK_FIELD(v->tenant_id, true));
        CHECK(CHECK_FIELD(v->name, true));
        CHECK(CHECK_FIELD(v->worker, false));
        CHECK(CHECK_FIELD(v->source, false));
        if (v->size_mb == 0 || v->created_usec < 0)
                return -EINVAL;
        return check_u64(v->size_mb);
}

int store_volume_insert(Store *s, const Volume *v, StoreAdmission *adm) {
        Volume copy;

        if (!s || !v)
                return -EINVAL;
        CHECK(volume_check(v));
        copy = *v;
        if (copy.created_usec == 0)
                copy.created_usec = now_usec();
        return s->ops->volume_insert(s, &copy, adm);
}

int store_volume_get(Store *s, const char *tenant_id, const char *name, Volume *ret) {
        if (!s || !ret)
                return -EINVAL;
        CHECK(check_lookup(tenant_id, STORE_ID_MAX));
        CHECK(check_lookup(name, STORE_NAME_MAX));
        return s->ops->volume_get(s, tenant_id, name, ret);
}

int store_volume_get_by_id(Store *s, const char *id, Volume *ret) {
        if (!s || !ret)
                return -EINVAL;
        CHECK(check_lookup(id, STORE_ID_MAX));
        return s->ops->volume_get_by_id(s, id, ret);
}

int store_volume_list(Store *s, const char *tenant_id, Volume **ret, size_t *ret_n) {
        if (!s || !tenant_id || !ret || !ret_n)
                return -EINVAL;
        if (check_lookup(tenant_id, STORE_ID_MAX) < 0) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        return s->ops->volume_list(s, tenant_id, ret, ret_n);
}

int store_volume_delete(Store *s, const char *tenant_id, const char *name) {
        if (!s)
                return -EINVAL;
        CHECK(check_lookup(tenant_id, STORE_ID_MAX));
        CHECK(check_lookup(name, STORE_NAME_MAX));
        return s->ops->volume_delete(s, tenant_id, name);
}

int store_volume_move(Store *s, const char *volume_id, const char *sandbox_id, const char *from, const char *to) {
        if (!s || !from || !to)
                return -EINVAL;
        CHECK(check_lookup(volume_id, STORE_ID_MAX));
        CHECK(check_lookup(sandbox_id, STORE_ID_MAX));
        if (strlen(from) >= STORE_NAME_MAX || isempty(to) || strlen(to) >= STORE_NAME_MAX)
                return -EINVAL;
        return s->ops->volume_move(s, volume_id, sandbox_id, from, to);
}

int store_volume_mount(Store *s, const char *sandbox_id, const VolumeMount *m, size_t n) {
        if (!s || (!m && n > 0) || n > STORE_VOLUME_MOUNTS_MAX)
                return -EINVAL;
        CHECK(check_arg(sandbox_id, STORE_ID_MAX, true));
        for (size_t i = 0; i < n; i++) {
                CHECK(CHECK_FIELD(m[i].volume_id, true));
                CHECK(CHECK_FIELD(m[i].path, true));
                for (size_t j = 0; j < i; j++)
                        if (streq(m[i].volume_id, m[j].volume_id))
                                return -EEXIST;
        }
        if (n == 0)
                return 0;
        return s->ops->volume_mount(s, sandbox_id, m, n);
}

int store_volume_mounts(Store *s, const char *sandbox_id, VolumeMount **ret, size_t *ret_n) {
        if (!s || !ret || !ret_n)
                return -EINVAL;
        if (check_lookup(sandbox_id, STORE_ID_MAX) < 0) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        return s->ops->volume_mounts(s, sandbox_id, ret, ret_n);
}
