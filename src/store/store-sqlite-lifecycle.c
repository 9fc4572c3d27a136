/* SPDX-License-Identifier: MIT */
/* The SQLite back end's lifecycle operations: activity, policies, the
 * timeout warning flag, warm-pool claims and checkpoints. store.c has
 * checked every argument. A claim runs under BEGIN IMMEDIATE, so it holds
 * the database's write lock from the choice of the row to its update: two
 * claims never get the same sandbox. */

#include "alloc-util.h"
#include "store-sqlite.h"

#define CHECKPOINT_COLUMNS "id, sandbox_id, tenant_id, name, created_usec, size_bytes, auto, restorable, memory"

static const char *const lifecycle_sql[_SQL_LC_STMT_MAX] = {
        [SQL_LC_SANDBOX_TOUCH] =
                "UPDATE sandboxes SET last_activity_usec = MAX(last_activity_usec, ?2) WHERE id = ?1",
        /* SET expressions see the old row: timeout_warned survives only an unchanged expiry */
        [SQL_LC_SANDBOX_SET_POLICY] =
                "UPDATE sandboxes SET timeout_s = ?2, "
                "timeout_warned = CASE WHEN expires_usec = ?3 THEN timeout_warned ELSE 0 END, "
                "expires_usec = ?3, idle_s = ?4, idle_action = ?5, checkpoint_every_s = ?6, updated_usec = ?7, auto_resume = ?8, "
                "disk_mb = CASE WHEN ?9 > 0 THEN ?9 ELSE disk_mb END "
                "WHERE id = ?1 AND state <> 'deleted'",
        [SQL_LC_SANDBOX_SET_TIMEOUT_WARNED] =
                "UPDATE sandboxes SET timeout_warned = 1, updated_usec = ?2 WHERE id = ?1 AND timeout_warned = 0",
        [SQL_LC_SANDBOX_SET_PRESERVED] =
                "UPDATE sandboxes SET processes_preserved = ?2, updated_usec = ?3 WHERE id = ?1",
        [SQL_LC_SANDBOX_SET_NETWORK] =
                "UPDATE sandboxes SET network_json = ?2, updated_usec = ?3 WHERE id = ?1 AND state <> 'deleted'",
        [SQL_LC_SANDBOX_CLAIM_WARM] =
                "UPDATE sandboxes SET tenant_id = ?4, warm_pool = '', cpu_millis = ?5, memory_mb = ?6, "
                "pids_max = ?7, io_weight = ?8, timeout_s = ?9, expires_usec = ?10, env_json = ?11, "
                "metadata_json = ?12, idle_s = ?13, idle_action = ?14, checkpoint_every_s = ?15, network_json = ?17, "
                "checkpoints_max = ?18, checkpoints_mb = ?19, auto_resume = ?20, public_traffic = ?21, "
                "created_usec = ?16, updated_usec = ?16, last_activity_usec = ?16, timeout_warned = 0 "
                "WHERE id = (SELECT id FROM sandboxes WHERE warm_pool = ?1 AND state = 'paused' "
                "AND runtime = ?2 AND disk_mb = ?3 AND template_version = ?22 ORDER BY created_usec, id LIMIT 1) "
                "RETURNING id",
        [SQL_LC_SANDBOX_WARM_COUNT] =
                "SELECT COALESCE(SUM(CASE WHEN state = 'paused' THEN 1 ELSE 0 END), 0), COUNT(*) "
                "FROM sandboxes WHERE warm_pool = ?1 AND state <> 'deleted'",

        [SQL_LC_CHECKPOINT_INSERT] =
                "INSERT INTO checkpoints (" CHECKPOINT_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        [SQL_LC_CHECKPOINT_GET] =
                "SELECT " CHECKPOINT_COLUMNS " FROM checkpoints WHERE id = ?1 AND (?2 IS NULL OR tenant_id = ?2)",
        [SQL_LC_CHECKPOINT_LIST] =
                "SELECT " CHECKPOINT_COLUMNS " FROM checkpoints WHERE sandbox_id = ?1 "
                "ORDER BY created_usec DESC, id DESC",
        [SQL_LC_CHECKPOINT_LIST_ALL] =
                "SELECT " CHECKPOINT_COLUMNS " FROM checkpoints ORDER BY created_usec DESC, id DESC",
        [SQL_LC_CHECKPOINT_UPDATE] = "UPDATE checkpoints SET restorable = ?2, size_bytes = ?3 WHERE id = ?1",
        [SQL_LC_CHECKPOINT_DELETE] = "DELETE FROM checkpoints WHERE id = ?1",
        [SQL_LC_CHECKPOINT_DELETE_ORPHANS] =
                "DELETE FROM checkpoints WHERE NOT EXISTS (SELECT 1 FROM sandboxes s "
                "WHERE s.id = checkpoints.sandbox_id AND s.state <> 'deleted')",
};

static int lc_stmt(SqliteStore *q, SqlLifecycleStmt id, sqlite3_stmt **ret) {
        if (id < 0 || id >= _SQL_LC_STMT_MAX)
                return -EINVAL;
        return sqlite_store_prepare(q, &q->lifecycle[id], lifecycle_sql[id], ret);
}

int sqlite_op_sandbox_touch(Store *s, const char *id, int64_t now) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(lc_stmt(q, SQL_LC_SANDBOX_TOUCH, &st));
        CHECK(sqlite_bind_text(q, st, 1, id));
        CHECK(sqlite_bind_int64(q, st, 2, now));
        return sqlite_sandbox_update(q, st, id);
}

int sqlite_op_sandbox_set_policy(Store *s, const char *id, const SandboxPolicy *p, int64_t now) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(lc_stmt(q, SQL_LC_SANDBOX_SET_POLICY, &st));
        CHECK(sqlite_bind_text(q, st, 1, id));
        CHECK(sqlite_bind_int64(q, st, 2, (int64_t) p->timeout_s));
        CHECK(sqlite_bind_int64(q, st, 3, p->expires_usec));
        CHECK(sqlite_bind_int64(q, st, 4, (int64_t) p->idle_s));
        CHECK(sqlite_bind_text(q, st, 5, idle_action_to_string(p->idle_action)));
        CHECK(sqlite_bind_int64(q, st, 6, (int64_t) p->checkpoint_every_s));
        CHECK(sqlite_bind_int64(q, st, 7, now));
        CHECK(sqlite_bind_int64(q, st, 8, p->auto_resume ? 1 : 0));
        CHECK(sqlite_bind_int64(q, st, 9, (int64_t) p->disk_mb));
        return sqlite_sandbox_update(q, st, id);
}

int sqlite_op_sandbox_set_timeout_warned(Store *s, const char *id, int64_t now) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(lc_stmt(q, SQL_LC_SANDBOX_SET_TIMEOUT_WARNED, &st));
        CHECK(sqlite_bind_text(q, st, 1, id));
        CHECK(sqlite_bind_int64(q, st, 2, now));
        return sqlite_sandbox_update(q, st, id);
}

int sqlite_op_sandbox_set_processes_preserved(Store *s, const char *id, bool preserved, int64_t now) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(lc_stmt(q, SQL_LC_SANDBOX_SET_PRESERVED, &st));
        CHECK(sqlite_bind_text(q, st, 1, id));
        CHECK(sqlite_bind_int64(q, st, 2, preserved ? 1 : 0));
        CHECK(sqlite_bind_int64(q, st, 3, now));
        return sqlite_sandbox_update(q, st, id);
}

int sqlite_op_sandbox_set_network(Store *s, const char *id, const char *network_json, int64_t now) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(lc_stmt(q, SQL_LC_SANDBOX_SET_NETWORK, &st));
        CHECK(sqlite_bind_text(q, st, 1, id));
        CHECK(sqlite_bind_text(q, st, 2, network_json));
        CHECK(sqlite_bind_int64(q, st, 3, now));
        return sqlite_sandbox_update(q, st, id);
}

/* The UPDATE of a claim; *ret_id is the claimed sandbox. -ENOENT if none. */
static int claim_row(SqliteStore *q, const char *template_name, const Sandbox *req, int64_t now,
                     char ret_id[static STORE_ID_MAX]) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        CHECK(lc_stmt(q, SQL_LC_SANDBOX_CLAIM_WARM, &st));
        CHECK(sqlite_bind_text(q, st, 1, template_name));
        CHECK(sqlite_bind_text(q, st, 2, req->runtime));
        CHECK(sqlite_bind_int64(q, st, 3, (int64_t) req->disk_mb));
        CHECK(sqlite_bind_text(q, st, 4, req->tenant_id));
        CHECK(sqlite_bind_int64(q, st, 5, req->cpu_millis));
        CHECK(sqlite_bind_int64(q, st, 6, (int64_t) req->memory_mb));
        CHECK(sqlite_bind_int64(q, st, 7, req->pids_max));
        CHECK(sqlite_bind_int64(q, st, 8, req->io_weight));
        CHECK(sqlite_bind_int64(q, st, 9, (int64_t) req->timeout_s));
        CHECK(sqlite_bind_int64(q, st, 10, req->expires_usec));
        CHECK(sqlite_bind_text(q, st, 11, req->env_json));
        CHECK(sqlite_bind_text(q, st, 12, req->metadata_json));
        CHECK(sqlite_bind_int64(q, st, 13, (int64_t) req->idle_s));
        CHECK(sqlite_bind_text(q, st, 14, idle_action_to_string(req->idle_action)));
        CHECK(sqlite_bind_int64(q, st, 15, (int64_t) req->checkpoint_every_s));
        CHECK(sqlite_bind_int64(q, st, 16, now));
        CHECK(sqlite_bind_text(q, st, 17, req->network_json));
        CHECK(sqlite_bind_int64(q, st, 18, (int64_t) req->checkpoints_max));
        CHECK(sqlite_bind_int64(q, st, 19, (int64_t) req->checkpoints_mb));
        CHECK(sqlite_bind_int64(q, st, 20, req->auto_resume ? 1 : 0));
        CHECK(sqlite_bind_int64(q, st, 21, req->public_traffic ? 1 : 0));
        CHECK(sqlite_bind_int64(q, st, 22, (int64_t) req->template_version));
        r = sqlite_store_step(q, st);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        CHECK(sqlite_col_str(st, 0, ret_id, STORE_ID_MAX));
        return sqlite_store_step_done(q, st);
}

int sqlite_op_sandbox_claim_warm(Store *s, const char *template_name, const Sandbox *req, StoreAdmission *adm,
                                 int64_t now, Sandbox *ret) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_tx_ SqliteStore *tx = NULL;
        _cleanup_(sandbox_done) Sandbox sb = {};
        char id[STORE_ID_MAX];

        CHECK(sqlite_store_begin(q, &tx));
        CHECK(sqlite_tenant_admit(q, req->tenant_id, adm, req)); /* the claim takes req's shape */
        CHECK(claim_row(q, template_name, req, now, id));
        CHECK(store_sqlite_ops.sandbox_get(s, NULL, id, &sb));
        CHECK(sqlite_store_commit(&tx));
        *ret = sb;
        sb = (Sandbox){}; /* handed over */
        return 0;
}

int sqlite_op_sandbox_warm_count(Store *s, const char *template_name, uint64_t *ret_ready, uint64_t *ret_total) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        uint64_t ready, total;
        int r;

        CHECK(lc_stmt(q, SQL_LC_SANDBOX_WARM_COUNT, &st));
        CHECK(sqlite_bind_text(q, st, 1, template_name));
        r = sqlite_store_step(q, st);
        if (r < 0)
                return r;
        if (r == 0)
                return -EBADMSG;
        CHECK(sqlite_col_u64(st, 0, &ready));
        CHECK(sqlite_col_u64(st, 1, &total));
        *ret_ready = ready;
        *ret_total = total;
        return 0;
}

/* Checkpoints */

static int checkpoint_read(sqlite3_stmt *st, void *ret) {
        Checkpoint c = {};

        CHECK(SQLITE_COL_STR(st, 0, c.id));
        CHECK(SQLITE_COL_STR(st, 1, c.sandbox_id));
        CHECK(SQLITE_COL_STR(st, 2, c.tenant_id));
        CHECK(SQLITE_COL_STR(st, 3, c.name));
        CHECK(sqlite_col_i64(st, 4, &c.created_usec));
        CHECK(sqlite_col_u64(st, 5, &c.size_bytes));
        c.automatic = sqlite3_column_int64(st, 6) != 0;
        c.restorable = sqlite3_column_int64(st, 7) != 0;
        c.memory = sqlite3_column_int64(st, 8) != 0;
        *(Checkpoint *) ret = c;
        return 0;
}

int sqlite_op_checkpoint_insert(Store *s, const Checkpoint *c, StoreAdmission *adm) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        _cleanup_tx_ SqliteStore *tx = NULL;

        CHECK(lc_stmt(q, SQL_LC_CHECKPOINT_INSERT, &st));
        CHECK(sqlite_bind_text(q, st, 1, c->id));
        CHECK(sqlite_bind_text(q, st, 2, c->sandbox_id));
        CHECK(sqlite_bind_text(q, st, 3, c->tenant_id));
        CHECK(sqlite_bind_text(q, st, 4, c->name));
        CHECK(sqlite_bind_int64(q, st, 5, c->created_usec));
        CHECK(sqlite_bind_int64(q, st, 6, (int64_t) c->size_bytes));
        CHECK(sqlite_bind_int64(q, st, 7, c->automatic ? 1 : 0));
        CHECK(sqlite_bind_int64(q, st, 8, c->restorable ? 1 : 0));
        CHECK(sqlite_bind_int64(q, st, 9, c->memory ? 1 : 0));
        if (!adm)
                return sqlite_store_step_done(q, st);
        CHECK(sqlite_store_begin(q, &tx));
        CHECK(sqlite_tenant_admit(q, c->tenant_id, adm, NULL));
        CHECK(sqlite_store_step_done(q, st));
        return sqlite_store_commit(&tx);
}

int sqlite_op_checkpoint_get(Store *s, const char *tenant_id, const char *id, Checkpoint *ret) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(lc_stmt(q, SQL_LC_CHECKPOINT_GET, &st));
        CHECK(sqlite_bind_text(q, st, 1, id));
        CHECK(sqlite_bind_text(q, st, 2, tenant_id));
        return sqlite_store_get_row(q, st, checkpoint_read, ret);
}

int sqlite_op_checkpoint_list(Store *s, const char *sandbox_id, Checkpoint **ret, size_t *ret_n) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(lc_stmt(q, sandbox_id ? SQL_LC_CHECKPOINT_LIST : SQL_LC_CHECKPOINT_LIST_ALL, &st));
        if (sandbox_id)
                CHECK(sqlite_bind_text(q, st, 1, sandbox_id));
        return sqlite_store_list_rows(q, st, sizeof(Checkpoint), checkpoint_read, NULL, (void **) ret, ret_n);
}

int sqlite_op_checkpoint_update(Store *s, const char *id, bool restorable, uint64_t size_bytes) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(lc_stmt(q, SQL_LC_CHECKPOINT_UPDATE, &st));
        CHECK(sqlite_bind_text(q, st, 1, id));
        CHECK(sqlite_bind_int64(q, st, 2, restorable ? 1 : 0));
        CHECK(sqlite_bind_int64(q, st, 3, (int64_t) size_bytes));
        return sqlite_store_step_changed(q, st);
}

int sqlite_op_checkpoint_delete(Store *s, const char *id) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(lc_stmt(q, SQL_LC_CHECKPOINT_DELETE, &st));
        CHECK(sqlite_bind_text(q, st, 1, id));
        return sqlite_store_step_changed(q, st);
}

int sqlite_op_checkpoint_delete_orphans(Store *s, uint64_t *ret) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(lc_stmt(q, SQL_LC_CHECKPOINT_DELETE_ORPHANS, &st));
        CHECK(sqlite_store_step_done(q, st));
        *ret = (uint64_t) sqlite3_changes64(q->db);
        return 0;
}
