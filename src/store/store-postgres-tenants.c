/* SPDX-License-Identifier: MIT */
/* The PostgreSQL back end's tenant quotas: the rows admins set, and the
 * usage that admission counts inside a write's transaction, under a
 * transaction lock of the tenant (every admitting write of a tenant takes
 * it, on every API server), so two admissions never count the same room.
 * store-tenants.c has checked every argument. */

#include <stdio.h>

#include "store-postgres.h"

#define QUOTA_COLUMNS "sandboxes, cpu_millis, memory_mb, disk_mb, checkpoints, rps, streams"

static const char *const tenant_sql[_PG_TQ_STMT_MAX] = {
        [PG_TQ_LOCK] = "SELECT pg_advisory_xact_lock(" PG_LOCK_TENANT_CLASS ", hashtext($1))",
        [PG_TQ_GET] = "SELECT tenant_id, " QUOTA_COLUMNS ", updated_usec FROM tenant_quotas WHERE tenant_id = $1",
        [PG_TQ_SET] =
                "INSERT INTO tenant_quotas (tenant_id, " QUOTA_COLUMNS ", updated_usec) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) "
                "ON CONFLICT (tenant_id) DO UPDATE SET sandboxes = excluded.sandboxes, "
                "cpu_millis = excluded.cpu_millis, memory_mb = excluded.memory_mb, disk_mb = excluded.disk_mb, "
                "checkpoints = excluded.checkpoints, rps = excluded.rps, streams = excluded.streams, "
                "updated_usec = excluded.updated_usec",
        [PG_TQ_USAGE] =
                "SELECT COUNT(*), COALESCE(SUM(cpu_millis), 0), COALESCE(SUM(memory_mb), 0), "
                "COALESCE(SUM(disk_mb), 0) + (SELECT COALESCE(SUM(size_mb), 0) FROM volumes WHERE tenant_id = $1), "
                "(SELECT COUNT(*) FROM checkpoints c JOIN sandboxes s ON s.id = c.sandbox_id "
                "WHERE c.tenant_id = $1 AND s.state <> 'deleted') "
                "FROM sandboxes WHERE tenant_id = $1 AND state <> 'deleted'",
};

static int tq_exec(PgStore *q, PgTenantStmt id, const PgParams *p, PGresult **ret) {
        char name[16];

        if (id < 0 || id >= _PG_TQ_STMT_MAX)
                return -EINVAL;
        (void) snprintf(name, sizeof name, "tq%d", (int) id);
        return pg_store_exec_slot(q, &q->tenants[id], name, tenant_sql[id], p, ret);
}

static int quotas_read(const PGresult *res, int row, void *ret) {
        TenantQuotas t = {};

        CHECK(PG_COL_STR(res, row, 0, t.tenant_id));
        for (int i = 0; i < _TENANT_QUOTA_MAX; i++) {
                CHECK(pg_col_i64(res, row, 1 + i, &t.value[i]));
                if (t.value[i] < TENANT_QUOTA_DEFAULT)
                        return -EBADMSG;
        }
        CHECK(pg_col_i64(res, row, 1 + _TENANT_QUOTA_MAX, &t.updated_usec));
        if (t.updated_usec < 0)
                return -EBADMSG;
        *(TenantQuotas *) ret = t;
        return 0;
}

int pg_op_tenant_quotas_get(Store *s, const char *tenant_id, TenantQuotas *ret) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, tenant_id);
        CHECK(tq_exec(pg_store(s), PG_TQ_GET, &p, &res));
        return pg_result_get_row(res, quotas_read, ret);
}

int pg_op_tenant_quotas_set(Store *s, const TenantQuotas *t) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, t->tenant_id);
        for (int i = 0; i < _TENANT_QUOTA_MAX; i++)
                pg_param_i64(&p, t->value[i]);
        pg_param_i64(&p, t->updated_usec);
        return tq_exec(pg_store(s), PG_TQ_SET, &p, &res);
}

static int usage_read(const PGresult *res, int row, void *ret) {
        TenantUsage u = {};

        for (int i = 0; i < TENANT_RESOURCES; i++)
                CHECK(pg_col_u64(res, row, i, &u.used[i]));
        *(TenantUsage *) ret = u;
        return 0;
}

static int usage_get(PgStore *q, const char *tenant_id, TenantUsage *ret) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, tenant_id);
        CHECK(tq_exec(q, PG_TQ_USAGE, &p, &res));
        return pg_result_get_row(res, usage_read, ret);
}

int pg_op_tenant_usage(Store *s, const char *tenant_id, TenantUsage *ret) {
        return usage_get(pg_store(s), tenant_id, ret);
}

static int admit_usage(PgStore *q, const char *tenant_id, TenantUsage *ret) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, tenant_id);
        /* a statement of its own: the count after it sees what the previous holder committed */
        CHECK(tq_exec(q, PG_TQ_LOCK, &p, &res));
        return usage_get(q, tenant_id, ret);
}

int pg_tenant_admit(PgStore *q, const char *tenant_id, StoreAdmission *adm, const Sandbox *sb) {
        TenantUsage u;

        if (!adm)
                return 0;
        CHECK(admit_usage(q, tenant_id, &u));
        return store_admission_check(adm, &u, sb);
}

int pg_tenant_admit_add(PgStore *q, const char *tenant_id, StoreAdmission *adm, const uint64_t add[static TENANT_RESOURCES]) {
        TenantUsage u;

        if (!adm)
                return 0;
        CHECK(admit_usage(q, tenant_id, &u));
        return store_admission_check_add(adm, &u, add);
}
