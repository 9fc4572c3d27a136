/* SPDX-License-Identifier: MIT */
/* The SQLite back end's operations. store.c has checked every argument. The
 * SQL sticks to what PostgreSQL also takes (RETURNING, partial indexes,
 * COALESCE, substr) so the PostgreSQL back end can reuse it; what is not
 * portable is only the '?N' / ':name' parameter syntax.
 *
 * "state <> 'deleted'" is spelled literally where the partial unique index
 * sandboxes_live_slot must match it; the unit test checks that it agrees with
 * sandbox_state_to_string(SANDBOX_DELETED). */

#include "alloc-util.h"
#include "store-sqlite.h"

#define SQL_LIVE "state <> 'deleted'"

#define TENANT_COLUMNS "id, name, created_usec"
#define KEY_COLUMNS "id, tenant_id, hash, name, admin, created_usec"
#define TEMPLATE_COLUMNS "name, tenant_id, state, size_bytes, created_usec"
#define SANDBOX_COLUMNS                                                                        \
        "id, tenant_id, template_name, runtime, worker, state, reason, cpu_millis, memory_mb, " \
        "disk_mb, pids_max, timeout_s, created_usec, updated_usec, expires_usec, slot, pid, "   \
        "pid_starttime, env_json, metadata_json, parent_id, parent_checkpoint, processes_preserved, "   \
        "idle_s, idle_action, last_activity_usec, warm_pool, io_weight, checkpoint_every_s, timeout_warned, network_json, " \
        "checkpoints_max, checkpoints_mb, auto_resume, public_traffic, ingress_host, template_version"
/* What a read adds: the number of restorable checkpoints. */
#define SANDBOX_SELECT \
        SANDBOX_COLUMNS ", (SELECT COUNT(*) FROM checkpoints c WHERE c.sandbox_id = sandboxes.id AND c.restorable = 1)"
#define EVENT_COLUMNS "seq, time_usec, tenant_id, sandbox_id, type, actor, reason, data_json"

const char *const sqlite_stmt_sql[_SQL_STMT_MAX] = {
        [SQL_BEGIN_IMMEDIATE] = "BEGIN IMMEDIATE",
        [SQL_COMMIT] = "COMMIT",
        [SQL_ROLLBACK] = "ROLLBACK",
        [SQL_SAVEPOINT] = "SAVEPOINT op",
        [SQL_RELEASE] = "RELEASE op",
        [SQL_ROLLBACK_TO] = "ROLLBACK TO op",
        [SQL_SCHEMA_VERSION] = "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
        [SQL_MIGRATION_APPLIED] = "SELECT 1 FROM schema_migrations WHERE version = ?1",
        [SQL_MIGRATION_RECORD] = "INSERT INTO schema_migrations (version, name, applied_usec) VALUES (?1, ?2, ?3)",

        [SQL_TENANT_INSERT] = "INSERT INTO tenants (" TENANT_COLUMNS ") VALUES (?1, ?2, ?3)",
        [SQL_TENANT_GET] = "SELECT " TENANT_COLUMNS " FROM tenants WHERE id = ?1",
        [SQL_TENANT_GET_BY_NAME] = "SELECT " TENANT_COLUMNS " FROM tenants WHERE name = ?1",
        [SQL_TENANT_LIST] = "SELECT " TENANT_COLUMNS " FROM tenants ORDER BY name",

        [SQL_KEY_INSERT] = "INSERT INTO api_keys (" KEY_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        [SQL_KEY_GET_BY_HASH] = "SELECT " KEY_COLUMNS " FROM api_keys WHERE hash = ?1",
        [SQL_KEY_LIST] = "SELECT " KEY_COLUMNS " FROM api_keys WHERE (?1 IS NULL OR tenant_id = ?1) "
                         "ORDER BY created_usec, id",
        [SQL_KEY_DELETE] = "DELETE FROM api_keys WHERE id = ?1 AND (?2 IS NULL OR tenant_id = ?2)",
        [SQL_KEY_COUNT] = "SELECT COUNT(*) FROM api_keys",

        [SQL_TEMPLATE_INSERT] = "INSERT INTO templates (" TEMPLATE_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5)",
        [SQL_TEMPLATE_GET] = "SELECT " TEMPLATE_COLUMNS " FROM templates WHERE name = ?1",
        [SQL_TEMPLATE_LIST] = "SELECT " TEMPLATE_COLUMNS " FROM templates ORDER BY name",
        [SQL_TEMPLATE_SET_STATE] = "UPDATE templates SET state = ?2, size_bytes = ?3 WHERE name = ?1",
        [SQL_TEMPLATE_DELETE] = "DELETE FROM templates WHERE name = ?1",
        [SQL_TEMPLATE_IN_USE] = "SELECT COUNT(*) FROM sandboxes WHERE template_name = ?1 AND " SQL_LIVE,

        /* The lowest slot no live sandbox holds: 0 if free, else one past the
         * first live slot whose successor is free. */
        [SQL_SANDBOX_FREE_SLOT] =
                "WITH t(slot) AS (SELECT slot FROM sandboxes WHERE " SQL_LIVE " UNION "
                "SELECT slot FROM sandboxes WHERE slot_held <> 0) "
                "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM t WHERE slot = 0) THEN 0 "
                "ELSE (SELECT MIN(a.slot) + 1 FROM t a WHERE NOT EXISTS (SELECT 1 FROM t b WHERE b.slot = a.slot + 1)) END",
        /* The same without the held slots: whether waiting for teardowns would free one. */
        [SQL_SANDBOX_FREE_SLOT_LIVE] =
                "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM sandboxes WHERE slot = 0 AND " SQL_LIVE ") THEN 0 "
                "ELSE (SELECT MIN(a.slot) + 1 FROM sandboxes a WHERE a." SQL_LIVE " AND NOT EXISTS "
                "(SELECT 1 FROM sandboxes b WHERE b.slot = a.slot + 1 AND b." SQL_LIVE ")) END",
        [SQL_SANDBOX_INSERT] =
                "INSERT INTO sandboxes (" SANDBOX_COLUMNS ") VALUES "
                "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, "
                "?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33, ?34, ?35, ?36, ?37)",
        [SQL_SANDBOX_GET] = "SELECT " SANDBOX_SELECT " FROM sandboxes WHERE id = ?1 AND (?2 IS NULL OR tenant_id = ?2)",
        [SQL_SANDBOX_EXISTS] = "SELECT 1 FROM sandboxes WHERE id = ?1",
        [SQL_SANDBOX_SET_STATE_FROM] =
                "UPDATE sandboxes SET state = ?2, reason = ?3, updated_usec = ?4 WHERE id = ?1 AND state = ?5",
        [SQL_SANDBOX_SET_STATE_LIVE] =
                "UPDATE sandboxes SET state = ?2, reason = ?3, updated_usec = ?4 WHERE id = ?1 AND " SQL_LIVE,
        [SQL_SANDBOX_SET_RUNTIME] =
                "UPDATE sandboxes SET pid = ?2, pid_starttime = ?3, worker = COALESCE(?4, worker), "
                "updated_usec = ?5 WHERE id = ?1",
        [SQL_SANDBOX_SET_RUNNING] =
                "UPDATE sandboxes SET pid = ?2, pid_starttime = ?3, state = 'running', reason = '', "
                "updated_usec = ?4 WHERE id = ?1 AND state = 'creating'",
        [SQL_SANDBOX_TAKE_OVER] =
                "UPDATE sandboxes SET state = ?2, reason = ?3, updated_usec = ?4, pid = ?5, pid_starttime = ?6, "
                "worker = ?7 WHERE id = ?1 AND state = ?8 AND worker = ?9",
        [SQL_SANDBOX_HOLD_SLOT] = "UPDATE sandboxes SET slot_held = ?2 WHERE id = ?1",
        [SQL_SANDBOX_RELEASE_SLOTS] =
                "UPDATE sandboxes SET slot_held = 0 WHERE slot_held <> 0 AND (?1 IS NULL OR worker = ?1)",
        [SQL_SANDBOX_SET_EXPIRY] = "UPDATE sandboxes SET expires_usec = ?2, updated_usec = ?3 WHERE id = ?1",
        [SQL_SANDBOX_PURGE] = "DELETE FROM sandboxes WHERE id = ?1 AND state = 'deleted' AND slot_held = 0",

        [SQL_EVENT_APPEND] =
                "INSERT INTO events (time_usec, tenant_id, sandbox_id, type, actor, reason, data_json) "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING seq",
        [SQL_EVENT_DELETE_BEFORE] = "DELETE FROM events WHERE time_usec < ?1",
};

/* Runs a one-row query that yields one non-negative integer. */
static int query_u64(SqliteStore *q, sqlite3_stmt *st, uint64_t *ret) {
        int r = sqlite_store_step(q, st);
        if (r < 0)
                return r;
        if (r == 0)
                return -EBADMSG;
        return sqlite_col_u64(st, 0, ret);
}

/* Returns 1 if the sandbox row exists, 0 if not. */
static int sandbox_exists(SqliteStore *q, const char *id) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_SANDBOX_EXISTS, &st));
        CHECK(sqlite_bind_text(q, st, 1, id));
        return sqlite_store_step(q, st);
}

int sqlite_sandbox_update(SqliteStore *q, sqlite3_stmt *st, const char *id) {
        return sqlite_store_step_cas(q, st, sandbox_exists, id);
}

/* Tenants */

static int tenant_read(sqlite3_stmt *st, void *ret) {
        Tenant t = {};

        CHECK(SQLITE_COL_STR(st, 0, t.id));
        CHECK(SQLITE_COL_STR(st, 1, t.name));
        t.created_usec = sqlite3_column_int64(st, 2);
        *(Tenant *) ret = t;
        return 0;
}

static int op_tenant_insert(Store *s, const Tenant *t) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_TENANT_INSERT, &st));
        CHECK(sqlite_bind_text(q, st, 1, t->id));
        CHECK(sqlite_bind_text(q, st, 2, t->name));
        CHECK(sqlite_bind_int64(q, st, 3, t->created_usec));
        return sqlite_store_step_done(q, st);
}

static int tenant_get_by(SqliteStore *q, SqlStmt id, const char *key, Tenant *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, id, &st));
        CHECK(sqlite_bind_text(q, st, 1, key));
        return sqlite_store_get_row(q, st, tenant_read, ret);
}

static int op_tenant_get(Store *s, const char *id, Tenant *ret) {
        return tenant_get_by(sqlite_store(s), SQL_TENANT_GET, id, ret);
}

static int op_tenant_get_by_name(Store *s, const char *name, Tenant *ret) {
        return tenant_get_by(sqlite_store(s), SQL_TENANT_GET_BY_NAME, name, ret);
}

static int op_tenant_list(Store *s, Tenant **ret, size_t *ret_n) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_TENANT_LIST, &st));
        return sqlite_store_list_rows(q, st, sizeof(Tenant), tenant_read, NULL, (void **) ret, ret_n);
}

/* API keys */

static int key_read(sqlite3_stmt *st, void *ret) {
        ApiKey k = {};

        CHECK(SQLITE_COL_STR(st, 0, k.id));
        CHECK(SQLITE_COL_STR(st, 1, k.tenant_id));
        CHECK(SQLITE_COL_STR(st, 2, k.hash));
        CHECK(SQLITE_COL_STR(st, 3, k.name));
        k.admin = sqlite3_column_int64(st, 4) != 0;
        k.created_usec = sqlite3_column_int64(st, 5);
        *(ApiKey *) ret = k;
        return 0;
}

static int op_key_insert(Store *s, const ApiKey *k) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_KEY_INSERT, &st));
        CHECK(sqlite_bind_text(q, st, 1, k->id));
        CHECK(sqlite_bind_text(q, st, 2, k->tenant_id));
        CHECK(sqlite_bind_text(q, st, 3, k->hash));
        CHECK(sqlite_bind_text(q, st, 4, k->name));
        CHECK(sqlite_bind_int64(q, st, 5, k->admin ? 1 : 0));
        CHECK(sqlite_bind_int64(q, st, 6, k->created_usec));
        return sqlite_store_step_done(q, st);
}

static int op_key_get_by_hash(Store *s, const char *hash, ApiKey *ret) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_KEY_GET_BY_HASH, &st));
        CHECK(sqlite_bind_text(q, st, 1, hash));
        return sqlite_store_get_row(q, st, key_read, ret);
}

static int op_key_list(Store *s, const char *tenant_id, ApiKey **ret, size_t *ret_n) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_KEY_LIST, &st));
        CHECK(sqlite_bind_text(q, st, 1, tenant_id));
        return sqlite_store_list_rows(q, st, sizeof(ApiKey), key_read, NULL, (void **) ret, ret_n);
}

static int op_key_delete(Store *s, const char *tenant_id, const char *id) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_KEY_DELETE, &st));
        CHECK(sqlite_bind_text(q, st, 1, id));
        CHECK(sqlite_bind_text(q, st, 2, tenant_id));
        return sqlite_store_step_changed(q, st);
}

static int op_key_count(Store *s, uint64_t *ret) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_KEY_COUNT, &st));
        return query_u64(q, st, ret);
}

/* Templates */

static int template_read(sqlite3_stmt *st, void *ret) {
        Template t = {};
        char state[32];

        CHECK(SQLITE_COL_STR(st, 0, t.name));
        CHECK(SQLITE_COL_STR(st, 1, t.tenant_id));
        CHECK(SQLITE_COL_STR(st, 2, state));
        t.state = template_state_from_string(state);
        if (t.state < 0)
                return -EBADMSG;
        CHECK(sqlite_col_u64(st, 3, &t.size_bytes));
        t.created_usec = sqlite3_column_int64(st, 4);
        *(Template *) ret = t;
        return 0;
}

static int op_template_insert(Store *s, const Template *t) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_TEMPLATE_INSERT, &st));
        CHECK(sqlite_bind_text(q, st, 1, t->name));
        CHECK(sqlite_bind_text(q, st, 2, t->tenant_id));
        CHECK(sqlite_bind_text(q, st, 3, template_state_to_string(t->state)));
        CHECK(sqlite_bind_int64(q, st, 4, (int64_t) t->size_bytes));
        CHECK(sqlite_bind_int64(q, st, 5, t->created_usec));
        return sqlite_store_step_done(q, st);
}

static int op_template_get(Store *s, const char *name, Template *ret) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_TEMPLATE_GET, &st));
        CHECK(sqlite_bind_text(q, st, 1, name));
        return sqlite_store_get_row(q, st, template_read, ret);
}

static int op_template_list(Store *s, Template **ret, size_t *ret_n) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_TEMPLATE_LIST, &st));
        return sqlite_store_list_rows(q, st, sizeof(Template), template_read, NULL, (void **) ret, ret_n);
}

static int op_template_set_ready(Store *s, const char *name, uint64_t size_bytes) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_TEMPLATE_SET_STATE, &st));
        CHECK(sqlite_bind_text(q, st, 1, name));
        CHECK(sqlite_bind_text(q, st, 2, template_state_to_string(TEMPLATE_READY)));
        CHECK(sqlite_bind_int64(q, st, 3, (int64_t) size_bytes));
        return sqlite_store_step_changed(q, st);
}

static int op_template_in_use(Store *s, const char *name, uint64_t *ret) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_TEMPLATE_IN_USE, &st));
        CHECK(sqlite_bind_text(q, st, 1, name));
        return query_u64(q, st, ret);
}

static int template_delete_row(SqliteStore *q, const char *name) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_TEMPLATE_DELETE, &st));
        CHECK(sqlite_bind_text(q, st, 1, name));
        return sqlite_store_step_changed(q, st);
}

static int op_template_delete(Store *s, const char *name) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_tx_ SqliteStore *tx = NULL;
        uint64_t users;

        /* Check and delete under the write lock, so no sandbox can start using
         * it in between (its insert waits for us). */
        CHECK(sqlite_store_begin(q, &tx));
        CHECK(template_delete_row(q, name));
        CHECK(op_template_in_use(s, name, &users));
        if (users > 0)
                return -EBUSY; /* rolls back the delete */
        return sqlite_store_commit(&tx);
}

/* Sandboxes */

static int sandbox_read(sqlite3_stmt *st, void *ret) {
        _cleanup_(sandbox_done) Sandbox sb = {};
        char state[32], idle_action[16];

        CHECK(SQLITE_COL_STR(st, 0, sb.id));
        CHECK(SQLITE_COL_STR(st, 1, sb.tenant_id));
        CHECK(SQLITE_COL_STR(st, 2, sb.template_name));
        CHECK(SQLITE_COL_STR(st, 3, sb.runtime));
        CHECK(SQLITE_COL_STR(st, 4, sb.worker));
        CHECK(SQLITE_COL_STR(st, 5, state));
        sb.state = sandbox_state_from_string(state);
        if (sb.state < 0)
                return -EBADMSG;
        CHECK(SQLITE_COL_STR(st, 6, sb.reason));
        CHECK(sqlite_col_u32(st, 7, &sb.cpu_millis));
        CHECK(sqlite_col_u64(st, 8, &sb.memory_mb));
        CHECK(sqlite_col_u64(st, 9, &sb.disk_mb));
        CHECK(sqlite_col_u32(st, 10, &sb.pids_max));
        CHECK(sqlite_col_u64(st, 11, &sb.timeout_s));
        CHECK(sqlite_col_i64(st, 12, &sb.created_usec));
        CHECK(sqlite_col_i64(st, 13, &sb.updated_usec));
        CHECK(sqlite_col_i64(st, 14, &sb.expires_usec));
        CHECK(sqlite_col_u32(st, 15, &sb.slot));
        CHECK(sqlite_col_i64(st, 16, &sb.pid));
        CHECK(sqlite_col_u64(st, 17, &sb.pid_starttime));
        CHECK(sqlite_col_strdup(st, 18, &sb.env_json));
        CHECK(sqlite_col_strdup(st, 19, &sb.metadata_json));
        CHECK(SQLITE_COL_STR(st, 20, sb.parent_id));
        CHECK(SQLITE_COL_STR(st, 21, sb.parent_checkpoint));
        sb.processes_preserved = sqlite3_column_int64(st, 22) != 0;
        CHECK(sqlite_col_u64(st, 23, &sb.idle_s));
        CHECK(SQLITE_COL_STR(st, 24, idle_action));
        sb.idle_action = idle_action_from_string(idle_action);
        if (sb.idle_action < 0)
                return -EBADMSG;
        CHECK(sqlite_col_i64(st, 25, &sb.last_activity_usec));
        CHECK(SQLITE_COL_STR(st, 26, sb.warm_pool));
        CHECK(sqlite_col_u32(st, 27, &sb.io_weight));
        CHECK(sqlite_col_u64(st, 28, &sb.checkpoint_every_s));
        sb.timeout_warned = sqlite3_column_int64(st, 29) != 0;
        CHECK(sqlite_col_strdup(st, 30, &sb.network_json));
        CHECK(sqlite_col_u64(st, 31, &sb.checkpoints_max));
        CHECK(sqlite_col_u64(st, 32, &sb.checkpoints_mb));
        sb.auto_resume = sqlite3_column_int64(st, 33) != 0;
        sb.public_traffic = sqlite3_column_int64(st, 34) != 0;
        CHECK(SQLITE_COL_STR(st, 35, sb.ingress_host));
        CHECK(sqlite_col_u64(st, 36, &sb.template_version));
        CHECK(sqlite_col_u32(st, 37, &sb.checkpoints));
        *(Sandbox *) ret = sb;
        sb.env_json = sb.metadata_json = sb.network_json = NULL; /* handed over */
        return 0;
}

static int sandbox_free_slot(SqliteStore *q, uint32_t slots_max, uint32_t *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        uint64_t slot;

        CHECK(sqlite_store_stmt(q, SQL_SANDBOX_FREE_SLOT, &st));
        CHECK(query_u64(q, st, &slot));
        if (slot >= slots_max) {
                /* -EAGAIN: a slot is free once a teardown still holding it ends */
                _cleanup_stmt_ sqlite3_stmt *live = NULL;
                CHECK(sqlite_store_stmt(q, SQL_SANDBOX_FREE_SLOT_LIVE, &live));
                CHECK(query_u64(q, live, &slot));
                return slot < slots_max ? -EAGAIN : -ENOSPC;
        }
        *ret = (uint32_t) slot;
        return 0;
}

static int sandbox_insert_row(SqliteStore *q, const Sandbox *sb) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_SANDBOX_INSERT, &st));
        CHECK(sqlite_bind_text(q, st, 1, sb->id));
        CHECK(sqlite_bind_text(q, st, 2, sb->tenant_id));
        CHECK(sqlite_bind_text(q, st, 3, sb->template_name));
        CHECK(sqlite_bind_text(q, st, 4, sb->runtime));
        CHECK(sqlite_bind_text(q, st, 5, sb->worker));
        CHECK(sqlite_bind_text(q, st, 6, sandbox_state_to_string(sb->state)));
        CHECK(sqlite_bind_text(q, st, 7, sb->reason));
        CHECK(sqlite_bind_int64(q, st, 8, sb->cpu_millis));
        CHECK(sqlite_bind_int64(q, st, 9, (int64_t) sb->memory_mb));
        CHECK(sqlite_bind_int64(q, st, 10, (int64_t) sb->disk_mb));
        CHECK(sqlite_bind_int64(q, st, 11, sb->pids_max));
        CHECK(sqlite_bind_int64(q, st, 12, (int64_t) sb->timeout_s));
        CHECK(sqlite_bind_int64(q, st, 13, sb->created_usec));
        CHECK(sqlite_bind_int64(q, st, 14, sb->updated_usec));
        CHECK(sqlite_bind_int64(q, st, 15, sb->expires_usec));
        CHECK(sqlite_bind_int64(q, st, 16, sb->slot));
        CHECK(sqlite_bind_int64(q, st, 17, sb->pid));
        CHECK(sqlite_bind_int64(q, st, 18, (int64_t) sb->pid_starttime));
        CHECK(sqlite_bind_text(q, st, 19, sb->env_json));
        CHECK(sqlite_bind_text(q, st, 20, sb->metadata_json));
        CHECK(sqlite_bind_text(q, st, 21, sb->parent_id));
        CHECK(sqlite_bind_text(q, st, 22, sb->parent_checkpoint));
        CHECK(sqlite_bind_int64(q, st, 23, sb->processes_preserved ? 1 : 0));
        CHECK(sqlite_bind_int64(q, st, 24, (int64_t) sb->idle_s));
        CHECK(sqlite_bind_text(q, st, 25, idle_action_to_string(sb->idle_action)));
        CHECK(sqlite_bind_int64(q, st, 26, sb->last_activity_usec));
        CHECK(sqlite_bind_text(q, st, 27, sb->warm_pool));
        CHECK(sqlite_bind_int64(q, st, 28, sb->io_weight));
        CHECK(sqlite_bind_int64(q, st, 29, (int64_t) sb->checkpoint_every_s));
        CHECK(sqlite_bind_int64(q, st, 30, sb->timeout_warned ? 1 : 0));
        CHECK(sqlite_bind_text(q, st, 31, sb->network_json));
        CHECK(sqlite_bind_int64(q, st, 32, (int64_t) sb->checkpoints_max));
        CHECK(sqlite_bind_int64(q, st, 33, (int64_t) sb->checkpoints_mb));
        CHECK(sqlite_bind_int64(q, st, 34, sb->auto_resume ? 1 : 0));
        CHECK(sqlite_bind_int64(q, st, 35, sb->public_traffic ? 1 : 0));
        CHECK(sqlite_bind_text(q, st, 36, sb->ingress_host));
        CHECK(sqlite_bind_int64(q, st, 37, (int64_t) sb->template_version));
        return sqlite_store_step_done(q, st);
}

static int op_sandbox_insert(Store *s, Sandbox *sb, uint32_t slots_max, StoreAdmission *adm) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_tx_ SqliteStore *tx = NULL;
        Sandbox row = *sb;

        /* Deleted sandboxes hold no slot, so a row inserted as deleted gets
         * one too (unused); the partial unique index is the last word. */
        CHECK(sqlite_store_begin(q, &tx));
        /* one made from a template version (not a branch: that copies its
         * parent) needs the version still there (or takes the newest) */
        if (sb->template_version > 0 && !sb->parent_id[0])
                CHECK(sqlite_template_version_hold(q, sb->template_name, sb->template_newest,
                                                   &row.template_version));
        CHECK(sqlite_tenant_admit(q, sb->tenant_id, adm, sb));
        CHECK(sandbox_free_slot(q, slots_max, &row.slot));
        CHECK(sandbox_insert_row(q, &row));
        CHECK(sqlite_store_commit(&tx));
        sb->slot = row.slot;
        sb->template_version = row.template_version;
        return 0;
}

static int op_sandbox_get(Store *s, const char *tenant_id, const char *id, Sandbox *ret) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_SANDBOX_GET, &st));
        CHECK(sqlite_bind_text(q, st, 1, id));
        CHECK(sqlite_bind_text(q, st, 2, tenant_id));
        return sqlite_store_get_row(q, st, sandbox_read, ret);
}

enum {
        SB_F_TENANT = 1 << 0,
        SB_F_STATE = 1 << 1,
        SB_F_LIVE = 1 << 2,
        SB_F_AFTER = 1 << 3,
};

static unsigned sandbox_filter_mask(const SandboxFilter *f) {
        return (f->tenant_id ? SB_F_TENANT : 0) | (f->state >= 0 ? SB_F_STATE : 0) |
                (!f->include_deleted ? SB_F_LIVE : 0) | (f->after_id ? SB_F_AFTER : 0);
}

static int sandbox_filter_stmt(SqliteStore *q, const SandboxFilter *f, bool count, sqlite3_stmt **ret) {
        unsigned mask = sandbox_filter_mask(f);
        sqlite3_stmt **slot;
        char sql[1024];
        int k;

        if (count) {
                mask &= ~(unsigned) SB_F_AFTER;
                slot = &q->sandbox_count[mask];
        } else
                slot = &q->sandbox_list[mask];
        if (*slot) {
                *ret = *slot;
                return 0;
        }

        k = snprintf(sql, sizeof sql, "SELECT %s FROM sandboxes WHERE 1 = 1%s%s%s%s%s",
                     count ? "COUNT(*)" : SANDBOX_SELECT,
                     mask & SB_F_TENANT ? " AND tenant_id = :tenant" : "",
                     mask & SB_F_STATE ? " AND state = :state" : "",
                     mask & SB_F_LIVE ? " AND " SQL_LIVE : "",
                     mask & SB_F_AFTER ? " AND id > :after" : "",
                     count ? "" : " ORDER BY id LIMIT :limit");
        if (k < 0 || (size_t) k >= sizeof sql)
                return -ENOBUFS;
        return sqlite_store_prepare(q, slot, sql, ret);
}

static int sandbox_filter_bind(SqliteStore *q, sqlite3_stmt *st, const SandboxFilter *f) {
        CHECK(sqlite_bind_text_named(q, st, ":tenant", f->tenant_id));
        if (f->state >= 0)
                CHECK(sqlite_bind_text_named(q, st, ":state", sandbox_state_to_string(f->state)));
        CHECK(sqlite_bind_text_named(q, st, ":after", f->after_id));
        CHECK(sqlite_bind_int64_named(q, st, ":limit", (int64_t) f->limit));
        return 0;
}

static void sandbox_rows_free(void *rows, size_t n) {
        sandbox_array_free(rows, n);
}

static int op_sandbox_list(Store *s, const SandboxFilter *f, Sandbox **ret, size_t *ret_n) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sandbox_filter_stmt(q, f, false, &st));
        CHECK(sandbox_filter_bind(q, st, f));
        return sqlite_store_list_rows(q, st, sizeof(Sandbox), sandbox_read, sandbox_rows_free, (void **) ret, ret_n);
}

static int op_sandbox_count(Store *s, const SandboxFilter *f, uint64_t *ret) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sandbox_filter_stmt(q, f, true, &st));
        CHECK(sandbox_filter_bind(q, st, f));
        return query_u64(q, st, ret);
}

static int sandbox_update_state(SqliteStore *q, const char *id, int from, SandboxState to,
                                const char *reason, int64_t now) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, from < 0 ? SQL_SANDBOX_SET_STATE_LIVE : SQL_SANDBOX_SET_STATE_FROM, &st));
        CHECK(sqlite_bind_text(q, st, 1, id));
        CHECK(sqlite_bind_text(q, st, 2, sandbox_state_to_string(to)));
        CHECK(sqlite_bind_text(q, st, 3, reason));
        CHECK(sqlite_bind_int64(q, st, 4, now));
        if (from >= 0)
                CHECK(sqlite_bind_text(q, st, 5, sandbox_state_to_string(from)));
        return sqlite_sandbox_update(q, st, id);
}

static int op_sandbox_set_state(Store *s, const char *id, int from, SandboxState to, const char *reason,
                                int64_t now) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_tx_ SqliteStore *tx = NULL;
        int r;

        CHECK(sqlite_store_begin(q, &tx));
        r = sandbox_update_state(q, id, from, to, reason, now);
        if (r < 0)
                return r;
        return sqlite_store_commit(&tx);
}

static int op_sandbox_take_over(Store *s, const char *id, SandboxState from, const char *from_worker,
                                SandboxState to, int64_t pid, uint64_t pid_starttime, const char *to_worker,
                                const char *reason, int64_t now) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_tx_ SqliteStore *tx = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        CHECK(sqlite_store_begin(q, &tx));
        CHECK(sqlite_store_stmt(q, SQL_SANDBOX_TAKE_OVER, &st));
        CHECK(sqlite_bind_text(q, st, 1, id));
        CHECK(sqlite_bind_text(q, st, 2, sandbox_state_to_string(to)));
        CHECK(sqlite_bind_text(q, st, 3, reason));
        CHECK(sqlite_bind_int64(q, st, 4, now));
        CHECK(sqlite_bind_int64(q, st, 5, pid));
        CHECK(sqlite_bind_int64(q, st, 6, (int64_t) pid_starttime));
        CHECK(sqlite_bind_text(q, st, 7, to_worker));
        CHECK(sqlite_bind_text(q, st, 8, sandbox_state_to_string(from)));
        CHECK(sqlite_bind_text(q, st, 9, from_worker));
        r = sqlite_sandbox_update(q, st, id);
        if (r < 0)
                return r;
        return sqlite_store_commit(&tx);
}

static int op_sandbox_set_runtime(Store *s, const char *id, int64_t pid, uint64_t pid_starttime,
                                  const char *worker, int64_t now) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_SANDBOX_SET_RUNTIME, &st));
        CHECK(sqlite_bind_text(q, st, 1, id));
        CHECK(sqlite_bind_int64(q, st, 2, pid));
        CHECK(sqlite_bind_int64(q, st, 3, (int64_t) pid_starttime));
        CHECK(sqlite_bind_text(q, st, 4, worker));
        CHECK(sqlite_bind_int64(q, st, 5, now));
        return sqlite_store_step_changed(q, st);
}

static int op_sandbox_set_expiry(Store *s, const char *id, int64_t expires_usec, int64_t now) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_SANDBOX_SET_EXPIRY, &st));
        CHECK(sqlite_bind_text(q, st, 1, id));
        CHECK(sqlite_bind_int64(q, st, 2, expires_usec));
        CHECK(sqlite_bind_int64(q, st, 3, now));
        return sqlite_store_step_changed(q, st);
}

static int op_event_append(Store *s, Event *e);

static int op_sandbox_set_running(Store *s, const char *id, int64_t pid, uint64_t pid_starttime, Event *ev,
                                  int64_t now) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_tx_ SqliteStore *tx = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        CHECK(sqlite_store_begin(q, &tx));
        CHECK(sqlite_store_stmt(q, SQL_SANDBOX_SET_RUNNING, &st));
        CHECK(sqlite_bind_text(q, st, 1, id));
        CHECK(sqlite_bind_int64(q, st, 2, pid));
        CHECK(sqlite_bind_int64(q, st, 3, (int64_t) pid_starttime));
        CHECK(sqlite_bind_int64(q, st, 4, now));
        r = sqlite_sandbox_update(q, st, id);
        if (r < 0)
                return r;
        CHECK(op_event_append(s, ev));
        return sqlite_store_commit(&tx);
}

static int op_sandbox_hold_slot(Store *s, const char *id, bool held) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_SANDBOX_HOLD_SLOT, &st));
        CHECK(sqlite_bind_text(q, st, 1, id));
        CHECK(sqlite_bind_int64(q, st, 2, held));
        return sqlite_store_step_changed(q, st);
}

static int op_sandbox_release_slots(Store *s, const char *worker) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_SANDBOX_RELEASE_SLOTS, &st));
        CHECK(sqlite_bind_text(q, st, 1, worker));
        return sqlite_store_step_changes(q, st);
}

static int sandbox_purge_row(SqliteStore *q, const char *id) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_SANDBOX_PURGE, &st));
        CHECK(sqlite_bind_text(q, st, 1, id));
        return sqlite_sandbox_update(q, st, id); /* -ESTALE: it exists but is not deleted */
}

static int op_sandbox_purge(Store *s, const char *id) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_tx_ SqliteStore *tx = NULL;
        int r;

        CHECK(sqlite_store_begin(q, &tx));
        r = sandbox_purge_row(q, id);
        if (r < 0)
                return r;
        return sqlite_store_commit(&tx);
}

/* Events */

static int event_read(sqlite3_stmt *st, void *ret) {
        Event e = {};

        e.seq = sqlite3_column_int64(st, 0);
        e.time_usec = sqlite3_column_int64(st, 1);
        CHECK(SQLITE_COL_STR(st, 2, e.tenant_id));
        CHECK(SQLITE_COL_STR(st, 3, e.sandbox_id));
        CHECK(SQLITE_COL_STR(st, 4, e.type));
        CHECK(SQLITE_COL_STR(st, 5, e.actor));
        CHECK(SQLITE_COL_STR(st, 6, e.reason));
        CHECK(sqlite_col_strdup(st, 7, &e.data_json));
        *(Event *) ret = e;
        return 0;
}

static int op_event_append(Store *s, Event *e) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int64_t seq;
        int r;

        CHECK(sqlite_store_stmt(q, SQL_EVENT_APPEND, &st));
        CHECK(sqlite_bind_int64(q, st, 1, e->time_usec));
        CHECK(sqlite_bind_text(q, st, 2, e->tenant_id));
        CHECK(sqlite_bind_text(q, st, 3, e->sandbox_id));
        CHECK(sqlite_bind_text(q, st, 4, e->type));
        CHECK(sqlite_bind_text(q, st, 5, e->actor));
        CHECK(sqlite_bind_text(q, st, 6, e->reason));
        CHECK(sqlite_bind_text(q, st, 7, e->data_json));
        r = sqlite_store_step(q, st);
        if (r < 0)
                return r;
        if (r == 0)
                return -EBADMSG;
        seq = sqlite3_column_int64(st, 0);
        CHECK(sqlite_store_step_done(q, st));
        e->seq = seq;
        return 0;
}

enum {
        EV_F_TENANT = 1 << 0,
        EV_F_SANDBOX = 1 << 1,
        EV_F_TYPE = 1 << 2,
        EV_F_TYPE_PREFIX = 1 << 3,
        EV_F_SINCE = 1 << 4,
};

static bool event_type_is_prefix(const char *type) {
        size_t n = strlen(type);
        return n > 0 && type[n - 1] == '.';
}

/* substr() counts characters, not bytes: count UTF-8 lead bytes. */
static int64_t utf8_chars(const char *s) {
        int64_t n = 0;
        for (; *s; s++)
                if (((unsigned char) *s & 0xc0) != 0x80)
                        n++;
        return n;
}

static int event_filter_stmt(SqliteStore *q, const EventFilter *f, sqlite3_stmt **ret) {
        unsigned mask = (f->tenant_id ? EV_F_TENANT : 0) | (f->sandbox_id ? EV_F_SANDBOX : 0) |
                (f->since_usec > 0 ? EV_F_SINCE : 0);
        char sql[1024];
        int k;

        if (f->type)
                mask |= event_type_is_prefix(f->type) ? EV_F_TYPE_PREFIX : EV_F_TYPE;
        if (q->event_list[mask]) {
                *ret = q->event_list[mask];
                return 0;
        }

        k = snprintf(sql, sizeof sql,
                     "SELECT " EVENT_COLUMNS " FROM events WHERE seq > :after%s%s%s%s%s ORDER BY seq LIMIT :limit",
                     mask & EV_F_TENANT ? " AND tenant_id = :tenant" : "",
                     mask & EV_F_SANDBOX ? " AND sandbox_id = :sandbox" : "",
                     mask & EV_F_TYPE ? " AND type = :type" : "",
                     mask & EV_F_TYPE_PREFIX ? " AND substr(type, 1, :type_len) = :type" : "",
                     mask & EV_F_SINCE ? " AND time_usec >= :since" : "");
        if (k < 0 || (size_t) k >= sizeof sql)
                return -ENOBUFS;
        return sqlite_store_prepare(q, &q->event_list[mask], sql, ret);
}

static void event_rows_free(void *rows, size_t n) {
        event_array_free(rows, n);
}

static int op_event_list(Store *s, const EventFilter *f, Event **ret, size_t *ret_n) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(event_filter_stmt(q, f, &st));
        CHECK(sqlite_bind_int64_named(q, st, ":after", f->after_seq));
        CHECK(sqlite_bind_text_named(q, st, ":tenant", f->tenant_id));
        CHECK(sqlite_bind_text_named(q, st, ":sandbox", f->sandbox_id));
        CHECK(sqlite_bind_text_named(q, st, ":type", f->type));
        if (f->type)
                CHECK(sqlite_bind_int64_named(q, st, ":type_len", utf8_chars(f->type)));
        CHECK(sqlite_bind_int64_named(q, st, ":since", f->since_usec));
        CHECK(sqlite_bind_int64_named(q, st, ":limit", (int64_t) f->limit));
        return sqlite_store_list_rows(q, st, sizeof(Event), event_read, event_rows_free, (void **) ret, ret_n);
}

static int op_event_delete_before(Store *s, int64_t before_usec, uint64_t *ret) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(sqlite_store_stmt(q, SQL_EVENT_DELETE_BEFORE, &st));
        CHECK(sqlite_bind_int64(q, st, 1, before_usec));
        CHECK(sqlite_store_step_done(q, st));
        *ret = (uint64_t) sqlite3_changes64(q->db);
        return 0;
}

const StoreOps store_sqlite_ops = {
        .name = "sqlite",
        .open = sqlite_store_open,
        .close = sqlite_store_close,
        .schema_version = sqlite_store_schema_version,
        .batch_begin = sqlite_store_batch_begin,
        .batch_end = sqlite_store_batch_end,
        .tenant_insert = op_tenant_insert,
        .tenant_get = op_tenant_get,
        .tenant_get_by_name = op_tenant_get_by_name,
        .tenant_list = op_tenant_list,
        .key_insert = op_key_insert,
        .key_get_by_hash = op_key_get_by_hash,
        .key_list = op_key_list,
        .key_delete = op_key_delete,
        .key_count = op_key_count,
        .template_insert = op_template_insert,
        .template_get = op_template_get,
        .template_list = op_template_list,
        .template_set_ready = op_template_set_ready,
        .template_delete = op_template_delete,
        .template_in_use = op_template_in_use,
        .sandbox_insert = op_sandbox_insert,
        .sandbox_get = op_sandbox_get,
        .sandbox_list = op_sandbox_list,
        .sandbox_count = op_sandbox_count,
        .sandbox_set_state = op_sandbox_set_state,
        .sandbox_set_runtime = op_sandbox_set_runtime,
        .sandbox_set_running = op_sandbox_set_running,
        .sandbox_take_over = op_sandbox_take_over,
        .sandbox_set_expiry = op_sandbox_set_expiry,
        .sandbox_purge = op_sandbox_purge,
        .sandbox_hold_slot = op_sandbox_hold_slot,
        .sandbox_release_slots = op_sandbox_release_slots,
        .sandbox_touch = sqlite_op_sandbox_touch,
        .sandbox_set_policy = sqlite_op_sandbox_set_policy,
        .sandbox_set_timeout_warned = sqlite_op_sandbox_set_timeout_warned,
        .sandbox_set_processes_preserved = sqlite_op_sandbox_set_processes_preserved,
        .sandbox_set_network = sqlite_op_sandbox_set_network,
        .sandbox_claim_warm = sqlite_op_sandbox_claim_warm,
        .sandbox_warm_count = sqlite_op_sandbox_warm_count,
        .checkpoint_insert = sqlite_op_checkpoint_insert,
        .checkpoint_get = sqlite_op_checkpoint_get,
        .checkpoint_list = sqlite_op_checkpoint_list,
        .checkpoint_update = sqlite_op_checkpoint_update,
        .checkpoint_delete = sqlite_op_checkpoint_delete,
        .checkpoint_delete_orphans = sqlite_op_checkpoint_delete_orphans,
        .credential_insert = sqlite_op_credential_insert,
        .credential_get = sqlite_op_credential_get,
        .credential_list = sqlite_op_credential_list,
        .credential_update = sqlite_op_credential_update,
        .credential_delete = sqlite_op_credential_delete,
        .grant_insert = sqlite_op_grant_insert,
        .grant_delete = sqlite_op_grant_delete,
        .grant_list = sqlite_op_grant_list,
        .credentials_reseal = sqlite_op_credentials_reseal,
        .event_append = op_event_append,
        .event_list = op_event_list,
        .event_delete_before = op_event_delete_before,
        .worker_register = sqlite_op_worker_register,
        .worker_heartbeat = sqlite_op_worker_heartbeat,
        .worker_stop = sqlite_op_worker_stop,
        .worker_get = sqlite_op_worker_get,
        .worker_list = sqlite_op_worker_list,
        .worker_mark_lost = sqlite_op_worker_mark_lost,
        .leader_try = sqlite_op_leader_try,
        .clock = sqlite_op_clock,
        .lease_take = sqlite_op_lease_take,
        .lease_renew = sqlite_op_lease_renew,
        .lease_release = sqlite_op_lease_release,
        .lease_get = sqlite_op_lease_get,
        .fence = sqlite_op_fence,
        .cluster_setting_claim = sqlite_op_cluster_setting_claim,
        .cluster_setting_get = sqlite_op_cluster_setting_get,
        .checkpoint_copy_set = sqlite_op_checkpoint_copy_set,
        .checkpoint_copy_list = sqlite_op_checkpoint_copy_list,
        .checkpoint_copy_delete = sqlite_op_checkpoint_copy_delete,
        .tenant_quotas_get = sqlite_op_tenant_quotas_get,
        .tenant_quotas_set = sqlite_op_tenant_quotas_set,
        .tenant_usage = sqlite_op_tenant_usage,
        .template_version_add = sqlite_op_template_version_add,
        .template_version_next = sqlite_op_template_version_next,
        .template_version_get = sqlite_op_template_version_get,
        .template_version_list = sqlite_op_template_version_list,
        .template_version_delete = sqlite_op_template_version_delete,
        .template_versions_drop = sqlite_op_template_versions_drop,
        .template_tag_set = sqlite_op_template_tag_set,
        .template_tag_delete = sqlite_op_template_tag_delete,
        .template_tag_get = sqlite_op_template_tag_get,
        .template_tag_list = sqlite_op_template_tag_list,
        .volume_insert = sqlite_op_volume_insert,
        .volume_get = sqlite_op_volume_get,
        .volume_get_by_id = sqlite_op_volume_get_by_id,
        .volume_list = sqlite_op_volume_list,
        .volume_delete = sqlite_op_volume_delete,
        .volume_move = sqlite_op_volume_move,
        .volume_mount = sqlite_op_volume_mount,
        .volume_mounts = sqlite_op_volume_mounts,
        .webhook_insert = sqlite_op_webhook_insert,
        .webhook_get = sqlite_op_webhook_get,
        .webhook_list = sqlite_op_webhook_list,
        .webhook_update = sqlite_op_webhook_update,
        .webhook_delete = sqlite_op_webhook_delete,
        .webhook_set_state = sqlite_op_webhook_set_state,
        .webhook_set_secret = sqlite_op_webhook_set_secret,
        .setting_set = sqlite_op_setting_set,
        .setting_remove = sqlite_op_setting_remove,
        .settings_get = sqlite_op_settings_get,
};
