/* SPDX-License-Identifier: MIT */
/* The SQLite back end's tenant quotas: the rows admins set, and the usage
 * that admission counts inside a write's transaction (BEGIN IMMEDIATE holds
 * the write lock, so two admissions of a tenant never count the same room).
 * store-tenants.c has checked every argument. */

#include "store-sqlite.h"

#define QUOTA_COLUMNS "sandboxes, cpu_millis, memory_mb, disk_mb, checkpoints, rps, streams"

static const char *const tenant_sql[_SQL_TQ_STMT_MAX] = {
        [SQL_TQ_GET] = "SELECT tenant_id, " QUOTA_COLUMNS ", updated_usec FROM tenant_quotas WHERE tenant_id = ?1",
        [SQL_TQ_SET] =
                "INSERT INTO tenant_quotas (tenant_id, " QUOTA_COLUMNS ", updated_usec) "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
                "ON CONFLICT (tenant_id) DO UPDATE SET sandboxes = excluded.sandboxes, "
                "cpu_millis = excluded.cpu_millis, memory_mb = excluded.memory_mb, disk_mb = excluded.disk_mb, "
                "checkpoints = excluded.checkpoints, rps = excluded.rps, streams = excluded.streams, "
                "updated_usec = excluded.updated_usec",
        [SQL_TQ_USAGE] =
                "SELECT COUNT(*), COALESCE(SUM(cpu_millis), 0), COALESCE(SUM(memory_mb), 0), "
                "COALESCE(SUM(disk_mb), 0) + (SELECT COALESCE(SUM(size_mb), 0) FROM volumes WHERE tenant_id = ?1), "
                "(SELECT COUNT(*) FROM checkpoints c JOIN sandboxes s ON s.id = c.sandbox_id "
                "WHERE c.tenant_id = ?1 AND s.state <> 'deleted') "
                "FROM sandboxes WHERE tenant_id = ?1 AND state <> 'deleted'",
};

static int tq_stmt(SqliteStore *q, SqlTenantStmt id, sqlite3_stmt **ret) {
        if (id < 0 || id >= _SQL_TQ_STMT_MAX)
                return -EINVAL;
        return sqlite_store_prepare(q, &q->tenants[id], tenant_sql[id], ret);
}

static int quotas_read(sqlite3_stmt *st, void *ret) {
        TenantQuotas t = {};

        CHECK(SQLITE_COL_STR(st, 0, t.tenant_id));
        for (int i = 0; i < _TENANT_QUOTA_MAX; i++) {
                if (sqlite3_column_type(st, 1 + i) != SQLITE_INTEGER)
                        return -EBADMSG;
                t.value[i] = sqlite3_column_int64(st, 1 + i);
                if (t.value[i] < TENANT_QUOTA_DEFAULT)
                        return -EBADMSG;
        }
        CHECK(sqlite_col_i64(st, 1 + _TENANT_QUOTA_MAX, &t.updated_usec));
        *(TenantQuotas *) ret = t;
        return 0;
}

int sqlite_op_tenant_quotas_get(Store *s, const char *tenant_id, TenantQuotas *ret) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(tq_stmt(q, SQL_TQ_GET, &st));
        CHECK(sqlite_bind_text(q, st, 1, tenant_id));
        return sqlite_store_get_row(q, st, quotas_read, ret);
}

int sqlite_op_tenant_quotas_set(Store *s, const TenantQuotas *t) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(tq_stmt(q, SQL_TQ_SET, &st));
        CHECK(sqlite_bind_text(q, st, 1, t->tenant_id));
        for (int i = 0; i < _TENANT_QUOTA_MAX; i++)
                CHECK(sqlite_bind_int64(q, st, 2 + i, t->value[i]));
        CHECK(sqlite_bind_int64(q, st, 2 + _TENANT_QUOTA_MAX, t->updated_usec));
        return sqlite_store_step_done(q, st);
}

static int usage_read(sqlite3_stmt *st, void *ret) {
        TenantUsage u = {};

        for (int i = 0; i < TENANT_RESOURCES; i++)
                CHECK(sqlite_col_u64(st, i, &u.used[i]));
        *(TenantUsage *) ret = u;
        return 0;
}

int sqlite_op_tenant_usage(Store *s, const char *tenant_id, TenantUsage *ret) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(tq_stmt(q, SQL_TQ_USAGE, &st));
        CHECK(sqlite_bind_text(q, st, 1, tenant_id));
        return sqlite_store_get_row(q, st, usage_read, ret);
}

int sqlite_tenant_admit(SqliteStore *q, const char *tenant_id, StoreAdmission *adm, const Sandbox *sb) {
        TenantUsage u;

        if (!adm)
                return 0;
        CHECK(sqlite_op_tenant_usage(&q->base, tenant_id, &u));
        return store_admission_check(adm, &u, sb);
}
