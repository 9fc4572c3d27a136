/* SPDX-License-Identifier: MIT */
/* The SQLite back end's cluster operations: worker rows and leadership
 * (one host: the single process always leads). store-cluster.c has checked
 * every argument. */

#include <inttypes.h>
#include <stdio.h>

#include "alloc-util.h"
#include "store-sqlite.h"

#define WORKER_COLUMNS                                                                        \
        "w.name, w.address, w.instance, w.state, w.cpu_millis, w.memory_mb, w.disk_mb, "      \
        "w.runtimes, w.accelerators, w.templates, w.registered_usec, w.heartbeat_usec, "      \
        "COALESCE(SUM(s.cpu_millis), 0), COALESCE(SUM(s.memory_mb), 0), "                     \
        "COALESCE(SUM(s.disk_mb), 0), COUNT(s.id)"
#define WORKER_FROM                                                                           \
        " FROM workers w LEFT JOIN sandboxes s ON s.worker = w.name "                         \
        "AND s.state NOT IN ('deleted', 'error', 'unreachable')"

/* SQLite's own clock, in microseconds (julianday: milliseconds' precision). */
#define SQLITE_NOW_USEC "CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)"

#define COPY_COLUMNS "checkpoint_id, sandbox_id, worker, available, sha256, size_bytes, updated_usec"

static const char *const cluster_sql[_SQL_CL_STMT_MAX] = {
        [SQL_CL_WORKER_REGISTER] =
                "INSERT INTO workers (name, address, instance, state, cpu_millis, memory_mb, disk_mb, "
                "runtimes, accelerators, templates, registered_usec, heartbeat_usec) "
                "VALUES (?1, ?2, ?3, 'live', ?4, ?5, ?6, ?7, ?8, ?9, ?10, " SQLITE_NOW_USEC ") "
                "ON CONFLICT (name) DO UPDATE SET address = excluded.address, instance = excluded.instance, "
                "state = 'live', cpu_millis = excluded.cpu_millis, memory_mb = excluded.memory_mb, "
                "disk_mb = excluded.disk_mb, runtimes = excluded.runtimes, "
                "accelerators = excluded.accelerators, templates = excluded.templates, "
                "registered_usec = excluded.registered_usec, heartbeat_usec = excluded.heartbeat_usec "
                "WHERE workers.state <> 'live' OR workers.instance = excluded.instance "
                "OR workers.heartbeat_usec < ?11 "
                "RETURNING name",
        [SQL_CL_WORKER_HEARTBEAT] =
                "UPDATE workers SET heartbeat_usec = " SQLITE_NOW_USEC ", templates = ?3 "
                "WHERE name = ?1 AND instance = ?2 AND state = 'live'",
        [SQL_CL_WORKER_EXISTS] = "SELECT 1 FROM workers WHERE name = ?1",
        [SQL_CL_WORKER_STOP] =
                "UPDATE workers SET state = 'stopped' WHERE name = ?1 AND instance = ?2 AND state = 'live'",
        [SQL_CL_WORKER_GET] = "SELECT " WORKER_COLUMNS WORKER_FROM " WHERE w.name = ?1 GROUP BY w.name",
        [SQL_CL_WORKER_LIST] = "SELECT " WORKER_COLUMNS WORKER_FROM " GROUP BY w.name ORDER BY w.name",
        [SQL_CL_WORKER_SET_LOST] =
                "UPDATE workers SET state = 'suspect' WHERE name = ?1 AND state = 'live' AND heartbeat_usec < ?2",
        [SQL_CL_SANDBOXES_SET_LOST] =
                "UPDATE sandboxes SET state = 'unreachable', reason = ?2, updated_usec = ?3 "
                "WHERE worker = ?1 AND state NOT IN ('deleted', 'unreachable') RETURNING id, tenant_id",
        [SQL_CL_SETTING_INSERT] =
                "INSERT INTO cluster_settings (name, value) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING",
        [SQL_CL_SETTING_GET] = "SELECT value FROM cluster_settings WHERE name = ?1",
        [SQL_CL_COPY_SET] =
                "INSERT INTO checkpoint_copies (" COPY_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
                "ON CONFLICT (checkpoint_id, worker) DO UPDATE SET sandbox_id = excluded.sandbox_id, "
                "available = excluded.available, sha256 = excluded.sha256, size_bytes = excluded.size_bytes, "
                "updated_usec = excluded.updated_usec",
        [SQL_CL_COPY_LIST] =
                "SELECT " COPY_COLUMNS " FROM checkpoint_copies WHERE checkpoint_id = ?1 ORDER BY worker",
        [SQL_CL_COPY_LIST_ALL] = "SELECT " COPY_COLUMNS " FROM checkpoint_copies ORDER BY checkpoint_id, worker",
        [SQL_CL_COPY_DELETE] = "DELETE FROM checkpoint_copies WHERE checkpoint_id = ?1 AND worker = ?2",
        [SQL_CL_CLOCK] = "SELECT " SQLITE_NOW_USEC,
        [SQL_CL_LEASE_TAKE] =
                "UPDATE controller_lease SET holder = ?1, token = token + 1, "
                "expires_usec = " SQLITE_NOW_USEC " + ?2, acquired_usec = " SQLITE_NOW_USEC " "
                "WHERE id = 1 AND expires_usec <= " SQLITE_NOW_USEC " RETURNING token",
        [SQL_CL_LEASE_RENEW] =
                "UPDATE controller_lease SET expires_usec = " SQLITE_NOW_USEC " + ?3 "
                "WHERE id = 1 AND holder = ?1 AND token = ?2 AND expires_usec > " SQLITE_NOW_USEC,
        [SQL_CL_LEASE_RELEASE] =
                "UPDATE controller_lease SET expires_usec = 0 WHERE id = 1 AND holder = ?1 AND token = ?2",
        [SQL_CL_LEASE_GET] =
                "SELECT holder, token, expires_usec, " SQLITE_NOW_USEC " FROM controller_lease WHERE id = 1",
};

static int cl_stmt(SqliteStore *q, SqlClusterStmt id, sqlite3_stmt **ret) {
        if (id < 0 || id >= _SQL_CL_STMT_MAX)
                return -EINVAL;
        return sqlite_store_prepare(q, &q->cluster[id], cluster_sql[id], ret);
}

static int worker_exists(SqliteStore *q, const char *name) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(cl_stmt(q, SQL_CL_WORKER_EXISTS, &st));
        CHECK(sqlite_bind_text(q, st, 1, name));
        return sqlite_store_step(q, st); /* 1 = yes */
}

/* An UPDATE of one live worker whose bindings are done: 0 rows = -ESTALE
 * (another instance, or not live) or -ENOENT. */
static int worker_update(SqliteStore *q, sqlite3_stmt *st, const char *name) {
        return sqlite_store_step_cas(q, st, worker_exists, name);
}

int sqlite_op_worker_register(Store *s, const WorkerNode *w, int64_t stale_before_usec) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        CHECK(cl_stmt(q, SQL_CL_WORKER_REGISTER, &st));
        CHECK(sqlite_bind_text(q, st, 1, w->name));
        CHECK(sqlite_bind_text(q, st, 2, w->address));
        CHECK(sqlite_bind_text(q, st, 3, w->instance));
        CHECK(sqlite_bind_int64(q, st, 4, w->cpu_millis));
        CHECK(sqlite_bind_int64(q, st, 5, (int64_t) w->memory_mb));
        CHECK(sqlite_bind_int64(q, st, 6, (int64_t) w->disk_mb));
        CHECK(sqlite_bind_text(q, st, 7, w->runtimes));
        CHECK(sqlite_bind_text(q, st, 8, w->accelerators));
        CHECK(sqlite_bind_text(q, st, 9, w->templates));
        CHECK(sqlite_bind_int64(q, st, 10, w->registered_usec));
        CHECK(sqlite_bind_int64(q, st, 11, stale_before_usec));
        r = sqlite_store_step(q, st);
        if (r < 0)
                return r;
        if (r == 0)
                return -EEXIST; /* another live instance holds the name */
        return sqlite_store_step_done(q, st);
}

int sqlite_op_worker_heartbeat(Store *s, const char *name, const char *instance, const char *templates,
                                      int64_t now) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(cl_stmt(q, SQL_CL_WORKER_HEARTBEAT, &st));
        CHECK(sqlite_bind_text(q, st, 1, name));
        CHECK(sqlite_bind_text(q, st, 2, instance));
        (void) now; /* the store's clock, in the statement */
        CHECK(sqlite_bind_text(q, st, 3, templates));
        return worker_update(q, st, name);
}

int sqlite_op_worker_stop(Store *s, const char *name, const char *instance) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(cl_stmt(q, SQL_CL_WORKER_STOP, &st));
        CHECK(sqlite_bind_text(q, st, 1, name));
        CHECK(sqlite_bind_text(q, st, 2, instance));
        return worker_update(q, st, name);
}

static int worker_read(sqlite3_stmt *st, void *ret) {
        WorkerNode w = {};
        char state[16];

        CHECK(SQLITE_COL_STR(st, 0, w.name));
        CHECK(SQLITE_COL_STR(st, 1, w.address));
        CHECK(SQLITE_COL_STR(st, 2, w.instance));
        CHECK(SQLITE_COL_STR(st, 3, state));
        w.state = worker_state_from_string(state);
        if (w.state < 0)
                return -EBADMSG;
        CHECK(sqlite_col_u32(st, 4, &w.cpu_millis));
        CHECK(sqlite_col_u64(st, 5, &w.memory_mb));
        CHECK(sqlite_col_u64(st, 6, &w.disk_mb));
        CHECK(SQLITE_COL_STR(st, 7, w.runtimes));
        CHECK(SQLITE_COL_STR(st, 8, w.accelerators));
        CHECK(SQLITE_COL_STR(st, 9, w.templates));
        CHECK(sqlite_col_i64(st, 10, &w.registered_usec));
        CHECK(sqlite_col_i64(st, 11, &w.heartbeat_usec));
        CHECK(sqlite_col_u32(st, 12, &w.used_cpu_millis));
        CHECK(sqlite_col_u64(st, 13, &w.used_memory_mb));
        CHECK(sqlite_col_u64(st, 14, &w.used_disk_mb));
        CHECK(sqlite_col_u32(st, 15, &w.sandboxes));
        *(WorkerNode *) ret = w;
        return 0;
}

int sqlite_op_worker_get(Store *s, const char *name, WorkerNode *ret) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(cl_stmt(q, SQL_CL_WORKER_GET, &st));
        CHECK(sqlite_bind_text(q, st, 1, name));
        return sqlite_store_get_row(q, st, worker_read, ret);
}

int sqlite_op_worker_list(Store *s, WorkerNode **ret, size_t *ret_n) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(cl_stmt(q, SQL_CL_WORKER_LIST, &st));
        return sqlite_store_list_rows(q, st, sizeof(WorkerNode), worker_read, NULL, (void **) ret, ret_n);
}

static int ref_read(sqlite3_stmt *st, void *ret) {
        SandboxRef ref = {};

        CHECK(SQLITE_COL_STR(st, 0, ref.id));
        CHECK(SQLITE_COL_STR(st, 1, ref.tenant_id));
        *(SandboxRef *) ret = ref;
        return 0;
}

int sqlite_op_worker_mark_lost(Store *s, const char *name, int64_t stale_before_usec, const char *reason,
                                      int64_t now, SandboxRef **ret, size_t *ret_n) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_tx_ SqliteStore *tx = NULL;
        _cleanup_free_ SandboxRef *a = NULL;
        size_t n = 0;
        int r;

        CHECK(sqlite_store_begin(q, &tx));
        {
                _cleanup_stmt_ sqlite3_stmt *st = NULL;
                CHECK(cl_stmt(q, SQL_CL_WORKER_SET_LOST, &st));
                CHECK(sqlite_bind_text(q, st, 1, name));
                CHECK(sqlite_bind_int64(q, st, 2, stale_before_usec));
                r = sqlite_store_step_changes(q, st);
                if (r < 0)
                        return r;
                if (r == 0)
                        return -ESTALE;
        }
        {
                _cleanup_stmt_ sqlite3_stmt *st = NULL;
                CHECK(cl_stmt(q, SQL_CL_SANDBOXES_SET_LOST, &st));
                CHECK(sqlite_bind_text(q, st, 1, name));
                CHECK(sqlite_bind_text(q, st, 2, reason));
                CHECK(sqlite_bind_int64(q, st, 3, now));
                CHECK(sqlite_store_list_rows(q, st, sizeof(SandboxRef), ref_read, NULL, (void **) &a, &n));
        }
        CHECK(sqlite_store_commit(&tx));
        *ret = TAKE_PTR(a);
        *ret_n = n;
        return 0;
}

int sqlite_op_leader_try(Store *s, bool *ret_leader) {
        *ret_leader = true; /* one host, one process: it leads */
        return 0;
}

int sqlite_op_cluster_setting_claim(Store *s, const char *name, const char *value,
                                    char ret[static STORE_CLUSTER_SETTING_MAX]) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *ins = NULL, *get = NULL;
        int r;

        CHECK(cl_stmt(q, SQL_CL_SETTING_INSERT, &ins));
        CHECK(sqlite_bind_text(q, ins, 1, name));
        CHECK(sqlite_bind_text(q, ins, 2, value));
        CHECK(sqlite_store_step_done(q, ins));
        CHECK(cl_stmt(q, SQL_CL_SETTING_GET, &get));
        CHECK(sqlite_bind_text(q, get, 1, name));
        r = sqlite_store_step(q, get);
        if (r < 0)
                return r;
        if (r == 0)
                return -EIO; /* inserted or there: cannot be missing */
        return sqlite_col_str(get, 0, ret, STORE_CLUSTER_SETTING_MAX);
}

int sqlite_op_checkpoint_copy_set(Store *s, const CheckpointCopy *c) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(cl_stmt(q, SQL_CL_COPY_SET, &st));
        CHECK(sqlite_bind_text(q, st, 1, c->checkpoint_id));
        CHECK(sqlite_bind_text(q, st, 2, c->sandbox_id));
        CHECK(sqlite_bind_text(q, st, 3, c->worker));
        CHECK(sqlite_bind_int64(q, st, 4, c->available ? 1 : 0));
        CHECK(sqlite_bind_text(q, st, 5, c->sha256));
        CHECK(sqlite_bind_int64(q, st, 6, (int64_t) c->size_bytes));
        CHECK(sqlite_bind_int64(q, st, 7, c->updated_usec));
        return sqlite_store_step_done(q, st);
}

static int copy_read(sqlite3_stmt *st, void *ret) {
        CheckpointCopy c = {};
        uint32_t available = 0;

        CHECK(SQLITE_COL_STR(st, 0, c.checkpoint_id));
        CHECK(SQLITE_COL_STR(st, 1, c.sandbox_id));
        CHECK(SQLITE_COL_STR(st, 2, c.worker));
        CHECK(sqlite_col_u32(st, 3, &available));
        c.available = available != 0;
        CHECK(SQLITE_COL_STR(st, 4, c.sha256));
        CHECK(sqlite_col_u64(st, 5, &c.size_bytes));
        CHECK(sqlite_col_i64(st, 6, &c.updated_usec));
        *(CheckpointCopy *) ret = c;
        return 0;
}

int sqlite_op_checkpoint_copy_list(Store *s, const char *checkpoint_id, CheckpointCopy **ret, size_t *ret_n) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(cl_stmt(q, checkpoint_id ? SQL_CL_COPY_LIST : SQL_CL_COPY_LIST_ALL, &st));
        if (checkpoint_id)
                CHECK(sqlite_bind_text(q, st, 1, checkpoint_id));
        return sqlite_store_list_rows(q, st, sizeof(CheckpointCopy), copy_read, NULL, (void **) ret, ret_n);
}

int sqlite_op_checkpoint_copy_delete(Store *s, const char *checkpoint_id, const char *worker) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(cl_stmt(q, SQL_CL_COPY_DELETE, &st));
        CHECK(sqlite_bind_text(q, st, 1, checkpoint_id));
        CHECK(sqlite_bind_text(q, st, 2, worker));
        return sqlite_store_step_changed(q, st);
}

/* The lease (0020), every time by SQLite's clock. */

int sqlite_op_clock(Store *s, int64_t *ret_usec) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int64_t v;
        int r;

        CHECK(cl_stmt(q, SQL_CL_CLOCK, &st));
        r = sqlite_store_step(q, st);
        if (r < 0)
                return r;
        if (r == 0)
                return -EBADMSG;
        CHECK(sqlite_col_i64(st, 0, &v));
        CHECK(sqlite_store_step_done(q, st));
        *ret_usec = v;
        return 0;
}

int sqlite_op_lease_take(Store *s, const char *holder, uint64_t lease_usec, int64_t *ret_token) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int64_t token;
        int r;

        CHECK(cl_stmt(q, SQL_CL_LEASE_TAKE, &st));
        CHECK(sqlite_bind_text(q, st, 1, holder));
        CHECK(sqlite_bind_int64(q, st, 2, (int64_t) lease_usec));
        r = sqlite_store_step(q, st);
        if (r < 0)
                return r;
        if (r == 0)
                return -EBUSY;
        CHECK(sqlite_col_i64(st, 0, &token));
        CHECK(sqlite_store_step_done(q, st));
        *ret_token = token;
        return 0;
}

int sqlite_op_lease_renew(Store *s, const char *holder, int64_t token, uint64_t lease_usec) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        CHECK(cl_stmt(q, SQL_CL_LEASE_RENEW, &st));
        CHECK(sqlite_bind_text(q, st, 1, holder));
        CHECK(sqlite_bind_int64(q, st, 2, token));
        CHECK(sqlite_bind_int64(q, st, 3, (int64_t) lease_usec));
        r = sqlite_store_step_changes(q, st);
        if (r < 0)
                return r;
        return r == 0 ? -ESTALE : 0;
}

int sqlite_op_lease_release(Store *s, const char *holder, int64_t token) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        CHECK(cl_stmt(q, SQL_CL_LEASE_RELEASE, &st));
        CHECK(sqlite_bind_text(q, st, 1, holder));
        CHECK(sqlite_bind_int64(q, st, 2, token));
        r = sqlite_store_step_changes(q, st);
        if (r < 0)
                return r;
        return r == 0 ? -ESTALE : 0;
}

static int lease_read(sqlite3_stmt *st, void *ret) {
        ControllerLease l = {};

        CHECK(SQLITE_COL_STR(st, 0, l.holder));
        CHECK(sqlite_col_i64(st, 1, &l.token));
        CHECK(sqlite_col_i64(st, 2, &l.expires_usec));
        CHECK(sqlite_col_i64(st, 3, &l.now_usec));
        *(ControllerLease *) ret = l;
        return 0;
}

int sqlite_op_lease_get(Store *s, ControllerLease *ret) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(cl_stmt(q, SQL_CL_LEASE_GET, &st));
        return sqlite_store_get_row(q, st, lease_read, ret);
}

/* Fencing on SQLite: temporary triggers of this connection on every table
 * (before each insert, update and delete) that abort the statement unless
 * the token's lease is unexpired; the one database lock orders them with a
 * takeover. A fence of 0 drops them. */
static const char *const fenced_tables[] = {
        "tenants", "api_keys", "templates", "sandboxes", "events", "checkpoints",
        "credentials", "credential_grants", "workers", "cluster_settings",
        "checkpoint_copies", "tenant_quotas", "volumes", "volume_mounts",
        "webhooks", "object_settings",
};

int sqlite_op_fence(Store *s, int64_t token) {
        static const char *const ops[] = { "INSERT", "UPDATE", "DELETE" };
        SqliteStore *q = sqlite_store(s);
        char sql[640];
        int rc;

        for (size_t i = 0; i < ELEMENTSOF(fenced_tables); i++)
                for (size_t j = 0; j < ELEMENTSOF(ops); j++) {
                        snprintf(sql, sizeof sql, "DROP TRIGGER IF EXISTS temp.space_fence_%s_%s", fenced_tables[i],
                                 ops[j]);
                        rc = sqlite3_exec(q->db, sql, NULL, NULL, NULL);
                        if (rc != SQLITE_OK)
                                return sqlite_store_errno(q, rc);
                        if (token == 0)
                                continue;
                        snprintf(sql, sizeof sql,
                                 "CREATE TEMP TRIGGER space_fence_%s_%s BEFORE %s ON main.%s "
                                 "WHEN NOT EXISTS (SELECT 1 FROM main.controller_lease WHERE id = 1 AND token = %" PRIi64
                                 " AND expires_usec > " SQLITE_NOW_USEC ") "
                                 "BEGIN SELECT RAISE(ABORT, '" SQLITE_FENCED_MESSAGE "'); END",
                                 fenced_tables[i], ops[j], ops[j], fenced_tables[i], token);
                        rc = sqlite3_exec(q->db, sql, NULL, NULL, NULL);
                        if (rc != SQLITE_OK)
                                return sqlite_store_errno(q, rc);
                }
        return 0;
}
