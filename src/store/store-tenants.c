/* SPDX-License-Identifier: MIT */
/* The generic half of tenant quotas: the string table, argument checks,
 * and the admission decision the back ends make inside their writes'
 * transactions. */

#include "store-backend.h"
#include "str-util.h"

static const char *const tenant_quota_table[_TENANT_QUOTA_MAX] = {
        [TENANT_QUOTA_SANDBOXES] = "sandboxes",
        [TENANT_QUOTA_CPU_MILLIS] = "cpu_millis",
        [TENANT_QUOTA_MEMORY_MB] = "memory_mb",
        [TENANT_QUOTA_DISK_MB] = "disk_mb",
        [TENANT_QUOTA_CHECKPOINTS] = "checkpoints",
        [TENANT_QUOTA_RPS] = "rps",
        [TENANT_QUOTA_STREAMS] = "streams",
};

const char *tenant_quota_to_string(TenantQuota q) {
        if (q < 0 || q >= _TENANT_QUOTA_MAX)
                return NULL;
        return tenant_quota_table[q];
}

TenantQuota tenant_quota_from_string(const char *s) {
        if (!s)
                return _TENANT_QUOTA_INVALID;
        for (size_t i = 0; i < ELEMENTSOF(tenant_quota_table); i++)
                if (streq(tenant_quota_table[i], s))
                        return (TenantQuota) i;
        return _TENANT_QUOTA_INVALID;
}

static int tenant_quotas_read(Store *s, const char *tenant_id, bool tenant_checked, TenantQuotas *ret) {
        TenantQuotas q = {};
        Tenant t;
        int r;

        if (!s || !ret)
                return -EINVAL;
        CHECK(check_lookup(tenant_id, STORE_ID_MAX));
        r = s->ops->tenant_quotas_get(s, tenant_id, &q);
        if (r == -ENOENT) {
                /* no row: the defaults, if the tenant is there */
                if (tenant_checked) {
                        r = s->ops->tenant_get(s, tenant_id, &t);
                        if (r < 0)
                                return r;
                }
                q = (TenantQuotas){};
                (void) strscpy(q.tenant_id, sizeof q.tenant_id, tenant_id);
                for (size_t i = 0; i < _TENANT_QUOTA_MAX; i++)
                        q.value[i] = TENANT_QUOTA_DEFAULT;
        } else if (r < 0)
                return r;
        *ret = q;
        return 0;
}

int store_tenant_quotas_get(Store *s, const char *tenant_id, TenantQuotas *ret) {
        return tenant_quotas_read(s, tenant_id, true, ret);
}

int store_tenant_quotas_or_defaults(Store *s, const char *tenant_id, TenantQuotas *ret) {
        return tenant_quotas_read(s, tenant_id, false, ret);
}

int store_tenant_quotas_set(Store *s, const TenantQuotas *q) {
        TenantQuotas copy;
        Tenant t;

        if (!s || !q)
                return -EINVAL;
        CHECK(CHECK_FIELD(q->tenant_id, true));
        for (size_t i = 0; i < _TENANT_QUOTA_MAX; i++)
                if (q->value[i] < TENANT_QUOTA_DEFAULT)
                        return -EINVAL;
        CHECK(s->ops->tenant_get(s, q->tenant_id, &t));
        copy = *q;
        copy.updated_usec = now_usec();
        return s->ops->tenant_quotas_set(s, &copy);
}

int store_tenant_usage(Store *s, const char *tenant_id, TenantUsage *ret) {
        if (!s || !ret)
                return -EINVAL;
        if (!tenant_id)
                return -EINVAL;
        if (check_lookup(tenant_id, STORE_ID_MAX) < 0) {
                *ret = (TenantUsage){}; /* no tenant of that id holds anything */
                return 0;
        }
        return s->ops->tenant_usage(s, tenant_id, ret);
}

/* a + b * n, saturating */
static uint64_t add_mul(uint64_t a, uint64_t b, uint64_t n) {
        uint64_t m;

        if (__builtin_mul_overflow(b, n, &m) || __builtin_add_overflow(a, m, &m))
                return UINT64_MAX;
        return m;
}

int store_admission_check(StoreAdmission *a, const TenantUsage *u, const Sandbox *sb) {
        uint64_t add[TENANT_RESOURCES] = {};

        if (sb) {
                add[TENANT_QUOTA_SANDBOXES] = 1;
                add[TENANT_QUOTA_CPU_MILLIS] = sb->cpu_millis;
                add[TENANT_QUOTA_MEMORY_MB] = sb->memory_mb;
                add[TENANT_QUOTA_DISK_MB] = sb->disk_mb;
        } else
                add[TENANT_QUOTA_CHECKPOINTS] = 1;
        return store_admission_check_add(a, u, add);
}

int store_admission_check_add(StoreAdmission *a, const TenantUsage *u, const uint64_t add[static TENANT_RESOURCES]) {
        uint64_t n;

        if (!a || !u)
                return -EINVAL;
        n = a->count ?: 1;
        for (size_t i = 0; i < TENANT_RESOURCES; i++) {
                if (a->limit[i] == 0 || add[i] == 0)
                        continue;
                if (add_mul(u->used[i], add[i], n) > a->limit[i]) {
                        a->exceeded = (TenantQuota) i;
                        a->need = add_mul(0, add[i], n);
                        a->usage = *u;
                        return -EDQUOT;
                }
        }
        return 0;
}
