/* SPDX-License-Identifier: MIT */
/* The PostgreSQL back end's operations, with the semantics of the SQLite
 * ones (the same unit tests run against both). store.c has checked every
 * argument.
 *
 * Several API servers may share the database, so what SQLite gets from its
 * single writer is spelled out here: a sandbox insert picks its slot under
 * the transaction advisory lock PG_LOCK_SLOTS (and the partial unique index
 * sandboxes_live_slot is the last word); a template delete takes the same
 * lock, so no sandbox starts using the template between the check and the
 * delete; state changes are compare-and-set in one statement (UPDATE ...
 * WHERE state = $from), whose row count and a look at the row tell -ESTALE
 * from -ENOENT. "state <> 'deleted'" is spelled literally where the partial
 * index must match it, as in the SQLite back end. */

#include <stdarg.h>
#include <stdio.h>

#include "alloc-util.h"
#include "store-postgres.h"

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
        SANDBOX_COLUMNS ", (SELECT COUNT(*) FROM checkpoints c WHERE c.sandbox_id = sandboxes.id AND c.restorable)"
#define EVENT_COLUMNS "seq, time_usec, tenant_id, sandbox_id, type, actor, reason, data_json"

/* "(changed rows, whether the row exists)" of a data-modifying CTE named c. */
#define SQL_CHANGED_AND_EXISTS(c) "SELECT (SELECT COUNT(*) FROM " c "), EXISTS (SELECT 1 FROM sandboxes WHERE id = $1)"

const char *const pg_stmt_sql[_PG_STMT_MAX] = {
        [PG_SCHEMA_VERSION] = "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
        [PG_MIGRATION_APPLIED] = "SELECT 1 FROM schema_migrations WHERE version = $1",
        [PG_MIGRATION_RECORD] = "INSERT INTO schema_migrations (version, name, applied_usec) VALUES ($1, $2, $3)",

        [PG_TENANT_INSERT] = "INSERT INTO tenants (" TENANT_COLUMNS ") VALUES ($1, $2, $3)",
        [PG_TENANT_GET] = "SELECT " TENANT_COLUMNS " FROM tenants WHERE id = $1",
        [PG_TENANT_GET_BY_NAME] = "SELECT " TENANT_COLUMNS " FROM tenants WHERE name = $1",
        [PG_TENANT_LIST] = "SELECT " TENANT_COLUMNS " FROM tenants ORDER BY name",

        [PG_KEY_INSERT] = "INSERT INTO api_keys (" KEY_COLUMNS ") VALUES ($1, $2, $3, $4, $5, $6)",
        [PG_KEY_GET_BY_HASH] = "SELECT " KEY_COLUMNS " FROM api_keys WHERE hash = $1",
        [PG_KEY_LIST] = "SELECT " KEY_COLUMNS " FROM api_keys WHERE ($1::text IS NULL OR tenant_id = $1) "
                        "ORDER BY created_usec, id",
        [PG_KEY_DELETE] = "DELETE FROM api_keys WHERE id = $1 AND ($2::text IS NULL OR tenant_id = $2)",
        [PG_KEY_COUNT] = "SELECT COUNT(*) FROM api_keys",

        [PG_TEMPLATE_INSERT] = "INSERT INTO templates (" TEMPLATE_COLUMNS ") VALUES ($1, $2, $3, $4, $5)",
        [PG_TEMPLATE_GET] = "SELECT " TEMPLATE_COLUMNS " FROM templates WHERE name = $1",
        [PG_TEMPLATE_LIST] = "SELECT " TEMPLATE_COLUMNS " FROM templates ORDER BY name",
        [PG_TEMPLATE_SET_STATE] = "UPDATE templates SET state = $2, size_bytes = $3 WHERE name = $1",
        [PG_TEMPLATE_DELETE] = "DELETE FROM templates WHERE name = $1",
        [PG_TEMPLATE_IN_USE] = "SELECT COUNT(*) FROM sandboxes WHERE template_name = $1 AND " SQL_LIVE,

        [PG_LOCK_SLOTS_XACT] = "SELECT pg_advisory_xact_lock(" PG_LOCK_CLASS ", " PG_LOCK_SLOTS ")",
        /* The lowest slot no live sandbox holds: 0 if free, else one past the
         * first live slot whose successor is free. Run under the lock, in a
         * statement of its own, so its snapshot sees the previous holder's
         * commit. */
        [PG_SANDBOX_FREE_SLOT] =
                "WITH t(slot) AS (SELECT slot FROM sandboxes WHERE " SQL_LIVE " UNION "
                "SELECT slot FROM sandboxes WHERE slot_held <> false) "
                "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM t WHERE slot = 0) THEN 0 "
                "ELSE (SELECT MIN(a.slot) + 1 FROM t a WHERE NOT EXISTS (SELECT 1 FROM t b WHERE b.slot = a.slot + 1)) END",
        /* The same without the held slots: whether waiting for teardowns would free one. */
        [PG_SANDBOX_FREE_SLOT_LIVE] =
                "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM sandboxes WHERE slot = 0 AND " SQL_LIVE ") THEN 0 "
                "ELSE (SELECT MIN(a.slot) + 1 FROM sandboxes a WHERE a." SQL_LIVE " AND NOT EXISTS "
                "(SELECT 1 FROM sandboxes b WHERE b.slot = a.slot + 1 AND b." SQL_LIVE ")) END",
        [PG_SANDBOX_INSERT] =
                "INSERT INTO sandboxes (" SANDBOX_COLUMNS ") VALUES "
                "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, "
                "$22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37)",
        [PG_SANDBOX_GET] = "SELECT " SANDBOX_SELECT " FROM sandboxes WHERE id = $1 AND ($2::text IS NULL OR tenant_id = $2)",
        [PG_SANDBOX_SET_STATE_FROM] =
                "WITH c AS (UPDATE sandboxes SET state = $2, reason = $3, updated_usec = $4 "
                "WHERE id = $1 AND state = $5 RETURNING 1) " SQL_CHANGED_AND_EXISTS("c"),
        [PG_SANDBOX_SET_STATE_LIVE] =
                "WITH c AS (UPDATE sandboxes SET state = $2, reason = $3, updated_usec = $4 "
                "WHERE id = $1 AND " SQL_LIVE " RETURNING 1) " SQL_CHANGED_AND_EXISTS("c"),
        [PG_SANDBOX_SET_RUNTIME] =
                "UPDATE sandboxes SET pid = $2, pid_starttime = $3, worker = COALESCE($4, worker), "
                "updated_usec = $5 WHERE id = $1",
        /* one round trip: the event is appended only if the row changed */
        [PG_SANDBOX_SET_RUNNING] =
                "WITH c AS (UPDATE sandboxes SET pid = $2, pid_starttime = $3, state = 'running', reason = '', "
                "updated_usec = $4 WHERE id = $1 AND state = 'creating' RETURNING tenant_id), "
                "e AS (INSERT INTO events (time_usec, tenant_id, sandbox_id, type, actor, reason, data_json) "
                "SELECT $5, $6, $1, $7, $8, $9, $10 FROM c RETURNING seq) "
                "SELECT (SELECT seq FROM e), EXISTS (SELECT 1 FROM sandboxes WHERE id = $1)",
        [PG_SANDBOX_TAKE_OVER] =
                "WITH c AS (UPDATE sandboxes SET state = $2, reason = $3, updated_usec = $4, pid = $5, "
                "pid_starttime = $6, worker = $7 WHERE id = $1 AND state = $8 AND worker = $9 RETURNING 1) "
                SQL_CHANGED_AND_EXISTS("c"),
        [PG_SANDBOX_HOLD_SLOT] = "UPDATE sandboxes SET slot_held = $2 WHERE id = $1",
        [PG_SANDBOX_RELEASE_SLOTS] =
                "UPDATE sandboxes SET slot_held = false WHERE slot_held <> false AND ($1::text IS NULL OR worker = $1)",
        [PG_SANDBOX_SET_EXPIRY] = "UPDATE sandboxes SET expires_usec = $2, updated_usec = $3 WHERE id = $1",
        [PG_SANDBOX_PURGE] =
                "WITH c AS (DELETE FROM sandboxes WHERE id = $1 AND state = 'deleted' AND slot_held = false RETURNING 1) "
                SQL_CHANGED_AND_EXISTS("c"),

        [PG_EVENT_APPEND] =
                "INSERT INTO events (time_usec, tenant_id, sandbox_id, type, actor, reason, data_json) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING seq",
        [PG_EVENT_DELETE_BEFORE] = "DELETE FROM events WHERE time_usec < $1",
};

/* A one-row query that yields one non-negative integer. */
static int query_u64(PgStore *q, PgStmt id, const PgParams *p, uint64_t *ret) {
        _cleanup_pgresult_ PGresult *res = NULL;

        CHECK(pg_store_exec(q, id, p, &res));
        if (PQntuples(res) != 1)
                return -EBADMSG;
        return pg_col_u64(res, 0, 0, ret);
}

/* A statement whose row count decides: 0 rows = -ENOENT. */
static int exec_changes_or_enoent(PgStore *q, PgStmt id, const PgParams *p) {
        _cleanup_pgresult_ PGresult *res = NULL;

        CHECK(pg_store_exec(q, id, p, &res));
        return pg_result_changes(res) == 0 ? -ENOENT : 0;
}

/* A compare-and-set written as SQL_CHANGED_AND_EXISTS: changed = OK, else
 * -ESTALE if the row exists, -ENOENT if not. */
static int exec_cas(PgStore *q, PgStmt id, const PgParams *p) {
        _cleanup_pgresult_ PGresult *res = NULL;

        CHECK(pg_store_exec(q, id, p, &res));
        return pg_result_cas(res);
}

/* Tenants */

static int tenant_read(const PGresult *res, int row, void *ret) {
        Tenant t = {};

        CHECK(PG_COL_STR(res, row, 0, t.id));
        CHECK(PG_COL_STR(res, row, 1, t.name));
        CHECK(pg_col_i64(res, row, 2, &t.created_usec));
        *(Tenant *) ret = t;
        return 0;
}

static int op_tenant_insert(Store *s, const Tenant *t) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, t->id);
        pg_param_text(&p, t->name);
        pg_param_i64(&p, t->created_usec);
        return pg_store_exec(pg_store(s), PG_TENANT_INSERT, &p, &res);
}

static int tenant_get_by(PgStore *q, PgStmt id, const char *key, Tenant *ret) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, key);
        CHECK(pg_store_exec(q, id, &p, &res));
        return pg_result_get_row(res, tenant_read, ret);
}

static int op_tenant_get(Store *s, const char *id, Tenant *ret) {
        return tenant_get_by(pg_store(s), PG_TENANT_GET, id, ret);
}

static int op_tenant_get_by_name(Store *s, const char *name, Tenant *ret) {
        return tenant_get_by(pg_store(s), PG_TENANT_GET_BY_NAME, name, ret);
}

static int op_tenant_list(Store *s, Tenant **ret, size_t *ret_n) {
        _cleanup_pgresult_ PGresult *res = NULL;

        CHECK(pg_store_exec(pg_store(s), PG_TENANT_LIST, NULL, &res));
        return pg_result_list_rows(res, sizeof(Tenant), tenant_read, NULL, (void **) ret, ret_n);
}

/* API keys */

static int key_read(const PGresult *res, int row, void *ret) {
        ApiKey k = {};

        CHECK(PG_COL_STR(res, row, 0, k.id));
        CHECK(PG_COL_STR(res, row, 1, k.tenant_id));
        CHECK(PG_COL_STR(res, row, 2, k.hash));
        CHECK(PG_COL_STR(res, row, 3, k.name));
        CHECK(pg_col_bool(res, row, 4, &k.admin));
        CHECK(pg_col_i64(res, row, 5, &k.created_usec));
        *(ApiKey *) ret = k;
        return 0;
}

static int op_key_insert(Store *s, const ApiKey *k) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, k->id);
        pg_param_text(&p, k->tenant_id);
        pg_param_text(&p, k->hash);
        pg_param_text(&p, k->name);
        pg_param_bool(&p, k->admin);
        pg_param_i64(&p, k->created_usec);
        return pg_store_exec(pg_store(s), PG_KEY_INSERT, &p, &res);
}

static int op_key_get_by_hash(Store *s, const char *hash, ApiKey *ret) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, hash);
        CHECK(pg_store_exec(pg_store(s), PG_KEY_GET_BY_HASH, &p, &res));
        return pg_result_get_row(res, key_read, ret);
}

static int op_key_list(Store *s, const char *tenant_id, ApiKey **ret, size_t *ret_n) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, tenant_id);
        CHECK(pg_store_exec(pg_store(s), PG_KEY_LIST, &p, &res));
        return pg_result_list_rows(res, sizeof(ApiKey), key_read, NULL, (void **) ret, ret_n);
}

static int op_key_delete(Store *s, const char *tenant_id, const char *id) {
        PgParams p = {};

        pg_param_text(&p, id);
        pg_param_text(&p, tenant_id);
        return exec_changes_or_enoent(pg_store(s), PG_KEY_DELETE, &p);
}

static int op_key_count(Store *s, uint64_t *ret) {
        return query_u64(pg_store(s), PG_KEY_COUNT, NULL, ret);
}

/* Templates */

static int template_read(const PGresult *res, int row, void *ret) {
        Template t = {};
        char state[32];

        CHECK(PG_COL_STR(res, row, 0, t.name));
        CHECK(PG_COL_STR(res, row, 1, t.tenant_id));
        CHECK(PG_COL_STR(res, row, 2, state));
        t.state = template_state_from_string(state);
        if (t.state < 0)
                return -EBADMSG;
        CHECK(pg_col_u64(res, row, 3, &t.size_bytes));
        CHECK(pg_col_i64(res, row, 4, &t.created_usec));
        *(Template *) ret = t;
        return 0;
}

static int op_template_insert(Store *s, const Template *t) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, t->name);
        pg_param_text(&p, t->tenant_id);
        pg_param_text(&p, template_state_to_string(t->state));
        pg_param_i64(&p, (int64_t) t->size_bytes);
        pg_param_i64(&p, t->created_usec);
        return pg_store_exec(pg_store(s), PG_TEMPLATE_INSERT, &p, &res);
}

static int op_template_get(Store *s, const char *name, Template *ret) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, name);
        CHECK(pg_store_exec(pg_store(s), PG_TEMPLATE_GET, &p, &res));
        return pg_result_get_row(res, template_read, ret);
}

static int op_template_list(Store *s, Template **ret, size_t *ret_n) {
        _cleanup_pgresult_ PGresult *res = NULL;

        CHECK(pg_store_exec(pg_store(s), PG_TEMPLATE_LIST, NULL, &res));
        return pg_result_list_rows(res, sizeof(Template), template_read, NULL, (void **) ret, ret_n);
}

static int op_template_set_ready(Store *s, const char *name, uint64_t size_bytes) {
        PgParams p = {};

        pg_param_text(&p, name);
        pg_param_text(&p, template_state_to_string(TEMPLATE_READY));
        pg_param_i64(&p, (int64_t) size_bytes);
        return exec_changes_or_enoent(pg_store(s), PG_TEMPLATE_SET_STATE, &p);
}

static int op_template_in_use(Store *s, const char *name, uint64_t *ret) {
        PgParams p = {};

        pg_param_text(&p, name);
        return query_u64(pg_store(s), PG_TEMPLATE_IN_USE, &p, ret);
}

static int lock_slots(PgStore *q) {
        _cleanup_pgresult_ PGresult *res = NULL;
        return pg_store_exec(q, PG_LOCK_SLOTS_XACT, NULL, &res);
}

static int template_delete_tx(PgStore *q, void *userdata) {
        const char *name = userdata;
        PgParams p = {};
        uint64_t users;

        /* Under the lock sandbox inserts take, so none starts using the
         * template in between. */
        CHECK(lock_slots(q));
        pg_param_text(&p, name);
        CHECK(exec_changes_or_enoent(q, PG_TEMPLATE_DELETE, &p));
        CHECK(query_u64(q, PG_TEMPLATE_IN_USE, &p, &users));
        return users > 0 ? -EBUSY : 0; /* -EBUSY rolls the delete back */
}

static int op_template_delete(Store *s, const char *name) {
        return pg_store_transact(pg_store(s), template_delete_tx, (void *) name);
}

/* Sandboxes */

static int sandbox_read(const PGresult *res, int row, void *ret) {
        _cleanup_(sandbox_done) Sandbox sb = {};
        char state[32], idle_action[16];

        CHECK(PG_COL_STR(res, row, 0, sb.id));
        CHECK(PG_COL_STR(res, row, 1, sb.tenant_id));
        CHECK(PG_COL_STR(res, row, 2, sb.template_name));
        CHECK(PG_COL_STR(res, row, 3, sb.runtime));
        CHECK(PG_COL_STR(res, row, 4, sb.worker));
        CHECK(PG_COL_STR(res, row, 5, state));
        sb.state = sandbox_state_from_string(state);
        if (sb.state < 0)
                return -EBADMSG;
        CHECK(PG_COL_STR(res, row, 6, sb.reason));
        CHECK(pg_col_u32(res, row, 7, &sb.cpu_millis));
        CHECK(pg_col_u64(res, row, 8, &sb.memory_mb));
        CHECK(pg_col_u64(res, row, 9, &sb.disk_mb));
        CHECK(pg_col_u32(res, row, 10, &sb.pids_max));
        CHECK(pg_col_u64(res, row, 11, &sb.timeout_s));
        CHECK(pg_col_i64(res, row, 12, &sb.created_usec));
        CHECK(pg_col_i64(res, row, 13, &sb.updated_usec));
        CHECK(pg_col_i64(res, row, 14, &sb.expires_usec));
        CHECK(pg_col_u32(res, row, 15, &sb.slot));
        CHECK(pg_col_i64(res, row, 16, &sb.pid));
        CHECK(pg_col_u64(res, row, 17, &sb.pid_starttime));
        CHECK(pg_col_strdup(res, row, 18, &sb.env_json));
        CHECK(pg_col_strdup(res, row, 19, &sb.metadata_json));
        CHECK(PG_COL_STR(res, row, 20, sb.parent_id));
        CHECK(PG_COL_STR(res, row, 21, sb.parent_checkpoint));
        CHECK(pg_col_bool(res, row, 22, &sb.processes_preserved));
        CHECK(pg_col_u64(res, row, 23, &sb.idle_s));
        CHECK(PG_COL_STR(res, row, 24, idle_action));
        sb.idle_action = idle_action_from_string(idle_action);
        if (sb.idle_action < 0)
                return -EBADMSG;
        CHECK(pg_col_i64(res, row, 25, &sb.last_activity_usec));
        CHECK(PG_COL_STR(res, row, 26, sb.warm_pool));
        CHECK(pg_col_u32(res, row, 27, &sb.io_weight));
        CHECK(pg_col_u64(res, row, 28, &sb.checkpoint_every_s));
        CHECK(pg_col_bool(res, row, 29, &sb.timeout_warned));
        CHECK(pg_col_strdup(res, row, 30, &sb.network_json));
        CHECK(pg_col_u64(res, row, 31, &sb.checkpoints_max));
        CHECK(pg_col_u64(res, row, 32, &sb.checkpoints_mb));
        CHECK(pg_col_bool(res, row, 33, &sb.auto_resume));
        CHECK(pg_col_bool(res, row, 34, &sb.public_traffic));
        CHECK(PG_COL_STR(res, row, 35, sb.ingress_host));
        CHECK(pg_col_u64(res, row, 36, &sb.template_version));
        CHECK(pg_col_u32(res, row, 37, &sb.checkpoints));
        if (sb.created_usec < 0 || sb.updated_usec < 0 || sb.expires_usec < 0 || sb.pid < 0 ||
            sb.last_activity_usec < 0)
                return -EBADMSG;
        *(Sandbox *) ret = sb;
        sb.env_json = sb.metadata_json = sb.network_json = NULL; /* handed over */
        return 0;
}

typedef struct SandboxInsert {
        Sandbox *sb;
        uint32_t slots_max;
        StoreAdmission *adm;
} SandboxInsert;

static int sandbox_insert_tx(PgStore *q, void *userdata) {
        SandboxInsert *in = userdata;
        const Sandbox *sb = in->sb;
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};
        uint64_t slot;

        /* One made from a template version (not a branch: that copies its
         * parent) holds the version's row until the commit: a collection of
         * it waits, then sees this sandbox. First, before the slots lock: a
         * version that is gone fails fast, and a collection never takes the
         * slots lock, so the two locks cannot deadlock. */
        if (sb->template_version > 0 && !sb->parent_id[0])
                CHECK(pg_template_version_hold(q, sb->template_name, sb->template_newest,
                                               &in->sb->template_version));
        /* Deleted sandboxes hold no slot, so a row inserted as deleted gets
         * one too (unused). */
        CHECK(lock_slots(q));
        CHECK(pg_tenant_admit(q, sb->tenant_id, in->adm, sb));
        CHECK(query_u64(q, PG_SANDBOX_FREE_SLOT, NULL, &slot));
        if (slot >= in->slots_max) {
                /* -EAGAIN: a slot is free once a teardown still holding it ends */
                CHECK(query_u64(q, PG_SANDBOX_FREE_SLOT_LIVE, NULL, &slot));
                return slot < in->slots_max ? -EAGAIN : -ENOSPC;
        }

        pg_param_text(&p, sb->id);
        pg_param_text(&p, sb->tenant_id);
        pg_param_text(&p, sb->template_name);
        pg_param_text(&p, sb->runtime);
        pg_param_text(&p, sb->worker);
        pg_param_text(&p, sandbox_state_to_string(sb->state));
        pg_param_text(&p, sb->reason);
        pg_param_i64(&p, sb->cpu_millis);
        pg_param_i64(&p, (int64_t) sb->memory_mb);
        pg_param_i64(&p, (int64_t) sb->disk_mb);
        pg_param_i64(&p, sb->pids_max);
        pg_param_i64(&p, (int64_t) sb->timeout_s);
        pg_param_i64(&p, sb->created_usec);
        pg_param_i64(&p, sb->updated_usec);
        pg_param_i64(&p, sb->expires_usec);
        pg_param_i64(&p, (int64_t) slot);
        pg_param_i64(&p, sb->pid);
        pg_param_i64(&p, (int64_t) sb->pid_starttime);
        pg_param_text(&p, sb->env_json);
        pg_param_text(&p, sb->metadata_json);
        pg_param_text(&p, sb->parent_id);
        pg_param_text(&p, sb->parent_checkpoint);
        pg_param_bool(&p, sb->processes_preserved);
        pg_param_i64(&p, (int64_t) sb->idle_s);
        pg_param_text(&p, idle_action_to_string(sb->idle_action));
        pg_param_i64(&p, sb->last_activity_usec);
        pg_param_text(&p, sb->warm_pool);
        pg_param_i64(&p, sb->io_weight);
        pg_param_i64(&p, (int64_t) sb->checkpoint_every_s);
        pg_param_bool(&p, sb->timeout_warned);
        pg_param_text(&p, sb->network_json);
        pg_param_i64(&p, (int64_t) sb->checkpoints_max);
        pg_param_i64(&p, (int64_t) sb->checkpoints_mb);
        pg_param_bool(&p, sb->auto_resume);
        pg_param_bool(&p, sb->public_traffic);
        pg_param_text(&p, sb->ingress_host);
        pg_param_i64(&p, (int64_t) sb->template_version);
        CHECK(pg_store_exec(q, PG_SANDBOX_INSERT, &p, &res));
        in->sb->slot = (uint32_t) slot;
        return 0;
}

static int op_sandbox_insert(Store *s, Sandbox *sb, uint32_t slots_max, StoreAdmission *adm) {
        Sandbox row = *sb;
        SandboxInsert in = { .sb = &row, .slots_max = slots_max, .adm = adm };

        CHECK(pg_store_transact(pg_store(s), sandbox_insert_tx, &in));
        sb->slot = row.slot;
        sb->template_version = row.template_version;
        return 0;
}

static int op_sandbox_get(Store *s, const char *tenant_id, const char *id, Sandbox *ret) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, id);
        pg_param_text(&p, tenant_id);
        CHECK(pg_store_exec(pg_store(s), PG_SANDBOX_GET, &p, &res));
        return pg_result_get_row(res, sandbox_read, ret);
}

/* Appends to a statement being built; -ENOBUFS if it does not fit. */
static int sql_append(char *buf, size_t size, size_t *len, const char *fmt, ...) _printf_(4, 5);
static int sql_append(char *buf, size_t size, size_t *len, const char *fmt, ...) {
        va_list ap;
        int k;

        va_start(ap, fmt);
        k = vsnprintf(buf + *len, size - *len, fmt, ap);
        va_end(ap);
        if (k < 0 || (size_t) k >= size - *len)
                return -ENOBUFS;
        *len += (size_t) k;
        return 0;
}

enum {
        SB_F_TENANT = 1 << 0,
        SB_F_STATE = 1 << 1,
        SB_F_LIVE = 1 << 2,
        SB_F_AFTER = 1 << 3,
};

typedef struct PgQuery {
        char sql[1024];
        char name[16];
        PgSlot *slot;
        PgParams params;
} PgQuery;

/* The statement for a filter and its parameters, numbered in clause order
 * (so one combination of clauses is always the same prepared statement). */
static int sandbox_filter_query(PgStore *q, const SandboxFilter *f, bool count, PgQuery *ret) {
        unsigned mask = (f->tenant_id ? SB_F_TENANT : 0) | (f->state >= 0 ? SB_F_STATE : 0) |
                (!f->include_deleted ? SB_F_LIVE : 0) | (f->after_id ? SB_F_AFTER : 0);
        PgParams *p = &ret->params;
        size_t len = 0;

        if (count) {
                mask &= ~(unsigned) SB_F_AFTER;
                ret->slot = &q->sandbox_count[mask];
        } else
                ret->slot = &q->sandbox_list[mask];
        (void) snprintf(ret->name, sizeof ret->name, "%s%u", count ? "sc" : "sl", mask);

        CHECK(sql_append(ret->sql, sizeof ret->sql, &len, "SELECT %s FROM sandboxes WHERE true",
                       count ? "COUNT(*)" : SANDBOX_SELECT));
        if (mask & SB_F_TENANT) {
                pg_param_text(p, f->tenant_id);
                CHECK(sql_append(ret->sql, sizeof ret->sql, &len, " AND tenant_id = $%d", p->n));
        }
        if (mask & SB_F_STATE) {
                pg_param_text(p, sandbox_state_to_string(f->state));
                CHECK(sql_append(ret->sql, sizeof ret->sql, &len, " AND state = $%d", p->n));
        }
        if (mask & SB_F_LIVE)
                CHECK(sql_append(ret->sql, sizeof ret->sql, &len, " AND " SQL_LIVE));
        if (mask & SB_F_AFTER) {
                pg_param_text(p, f->after_id);
                CHECK(sql_append(ret->sql, sizeof ret->sql, &len, " AND id > $%d", p->n));
        }
        if (!count) {
                pg_param_i64(p, (int64_t) f->limit);
                CHECK(sql_append(ret->sql, sizeof ret->sql, &len, " ORDER BY id LIMIT $%d", p->n));
        }
        return 0;
}

static void sandbox_rows_free(void *rows, size_t n) {
        sandbox_array_free(rows, n);
}

static int op_sandbox_list(Store *s, const SandboxFilter *f, Sandbox **ret, size_t *ret_n) {
        PgStore *q = pg_store(s);
        _cleanup_pgresult_ PGresult *res = NULL;
        PgQuery query = {};

        CHECK(sandbox_filter_query(q, f, false, &query));
        CHECK(pg_store_exec_slot(q, query.slot, query.name, query.sql, &query.params, &res));
        return pg_result_list_rows(res, sizeof(Sandbox), sandbox_read, sandbox_rows_free, (void **) ret, ret_n);
}

static int op_sandbox_count(Store *s, const SandboxFilter *f, uint64_t *ret) {
        PgStore *q = pg_store(s);
        _cleanup_pgresult_ PGresult *res = NULL;
        PgQuery query = {};

        CHECK(sandbox_filter_query(q, f, true, &query));
        CHECK(pg_store_exec_slot(q, query.slot, query.name, query.sql, &query.params, &res));
        if (PQntuples(res) != 1)
                return -EBADMSG;
        return pg_col_u64(res, 0, 0, ret);
}

static int op_sandbox_set_state(Store *s, const char *id, int from, SandboxState to, const char *reason,
                                int64_t now) {
        PgParams p = {};

        pg_param_text(&p, id);
        pg_param_text(&p, sandbox_state_to_string(to));
        pg_param_text(&p, reason);
        pg_param_i64(&p, now);
        if (from >= 0)
                pg_param_text(&p, sandbox_state_to_string(from));
        return exec_cas(pg_store(s), from < 0 ? PG_SANDBOX_SET_STATE_LIVE : PG_SANDBOX_SET_STATE_FROM, &p);
}

static int op_sandbox_take_over(Store *s, const char *id, SandboxState from, const char *from_worker,
                                SandboxState to, int64_t pid, uint64_t pid_starttime, const char *to_worker,
                                const char *reason, int64_t now) {
        PgParams p = {};

        pg_param_text(&p, id);
        pg_param_text(&p, sandbox_state_to_string(to));
        pg_param_text(&p, reason);
        pg_param_i64(&p, now);
        pg_param_i64(&p, pid);
        pg_param_i64(&p, (int64_t) pid_starttime);
        pg_param_text(&p, to_worker);
        pg_param_text(&p, sandbox_state_to_string(from));
        pg_param_text(&p, from_worker);
        return exec_cas(pg_store(s), PG_SANDBOX_TAKE_OVER, &p);
}

static int op_sandbox_set_runtime(Store *s, const char *id, int64_t pid, uint64_t pid_starttime,
                                  const char *worker, int64_t now) {
        PgParams p = {};

        pg_param_text(&p, id);
        pg_param_i64(&p, pid);
        pg_param_i64(&p, (int64_t) pid_starttime);
        pg_param_text(&p, worker);
        pg_param_i64(&p, now);
        return exec_changes_or_enoent(pg_store(s), PG_SANDBOX_SET_RUNTIME, &p);
}

static int op_sandbox_set_expiry(Store *s, const char *id, int64_t expires_usec, int64_t now) {
        PgParams p = {};

        pg_param_text(&p, id);
        pg_param_i64(&p, expires_usec);
        pg_param_i64(&p, now);
        return exec_changes_or_enoent(pg_store(s), PG_SANDBOX_SET_EXPIRY, &p);
}

static int op_sandbox_set_running(Store *s, const char *id, int64_t pid, uint64_t pid_starttime, Event *ev,
                                  int64_t now) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};
        bool exists = false;

        pg_param_text(&p, id);
        pg_param_i64(&p, pid);
        pg_param_i64(&p, (int64_t) pid_starttime);
        pg_param_i64(&p, now);
        pg_param_i64(&p, ev->time_usec);
        pg_param_text(&p, ev->tenant_id);
        pg_param_text(&p, ev->type);
        pg_param_text(&p, ev->actor);
        pg_param_text(&p, ev->reason);
        pg_param_text(&p, ev->data_json);
        CHECK(pg_store_exec(pg_store(s), PG_SANDBOX_SET_RUNNING, &p, &res));
        if (PQntuples(res) != 1)
                return -EBADMSG;
        if (PQgetisnull(res, 0, 0)) {
                CHECK(pg_col_bool(res, 0, 1, &exists));
                return exists ? -ESTALE : -ENOENT;
        }
        return pg_col_i64(res, 0, 0, &ev->seq);
}

static int op_sandbox_hold_slot(Store *s, const char *id, bool held) {
        PgParams p = {};

        pg_param_text(&p, id);
        pg_param_bool(&p, held);
        return exec_changes_or_enoent(pg_store(s), PG_SANDBOX_HOLD_SLOT, &p);
}

static int op_sandbox_release_slots(Store *s, const char *worker) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, worker);
        CHECK(pg_store_exec(pg_store(s), PG_SANDBOX_RELEASE_SLOTS, &p, &res));
        return (int) MIN(pg_result_changes(res), (uint64_t) 1000000000);
}

static int op_sandbox_purge(Store *s, const char *id) {
        PgParams p = {};

        pg_param_text(&p, id);
        return exec_cas(pg_store(s), PG_SANDBOX_PURGE, &p); /* -ESTALE: exists but not deleted */
}

/* Events */

static int event_read(const PGresult *res, int row, void *ret) {
        Event e = {};

        CHECK(pg_col_i64(res, row, 0, &e.seq));
        CHECK(pg_col_i64(res, row, 1, &e.time_usec));
        CHECK(PG_COL_STR(res, row, 2, e.tenant_id));
        CHECK(PG_COL_STR(res, row, 3, e.sandbox_id));
        CHECK(PG_COL_STR(res, row, 4, e.type));
        CHECK(PG_COL_STR(res, row, 5, e.actor));
        CHECK(PG_COL_STR(res, row, 6, e.reason));
        CHECK(pg_col_strdup(res, row, 7, &e.data_json));
        *(Event *) ret = e;
        return 0;
}

static int op_event_append(Store *s, Event *e) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};
        int64_t seq;

        pg_param_i64(&p, e->time_usec);
        pg_param_text(&p, e->tenant_id);
        pg_param_text(&p, e->sandbox_id);
        pg_param_text(&p, e->type);
        pg_param_text(&p, e->actor);
        pg_param_text(&p, e->reason);
        pg_param_text(&p, e->data_json);
        CHECK(pg_store_exec(pg_store(s), PG_EVENT_APPEND, &p, &res));
        if (PQntuples(res) != 1)
                return -EBADMSG;
        CHECK(pg_col_i64(res, 0, 0, &seq));
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

static int event_filter_query(PgStore *q, const EventFilter *f, PgQuery *ret) {
        unsigned mask = (f->tenant_id ? EV_F_TENANT : 0) | (f->sandbox_id ? EV_F_SANDBOX : 0) |
                (f->since_usec > 0 ? EV_F_SINCE : 0);
        PgParams *p = &ret->params;
        size_t len = 0;

        if (f->type)
                mask |= event_type_is_prefix(f->type) ? EV_F_TYPE_PREFIX : EV_F_TYPE;
        ret->slot = &q->event_list[mask];
        (void) snprintf(ret->name, sizeof ret->name, "el%u", mask);

        pg_param_i64(p, f->after_seq);
        CHECK(sql_append(ret->sql, sizeof ret->sql, &len, "SELECT " EVENT_COLUMNS " FROM events WHERE seq > $%d", p->n));
        if (mask & EV_F_TENANT) {
                pg_param_text(p, f->tenant_id);
                CHECK(sql_append(ret->sql, sizeof ret->sql, &len, " AND tenant_id = $%d", p->n));
        }
        if (mask & EV_F_SANDBOX) {
                pg_param_text(p, f->sandbox_id);
                CHECK(sql_append(ret->sql, sizeof ret->sql, &len, " AND sandbox_id = $%d", p->n));
        }
        if (mask & (EV_F_TYPE | EV_F_TYPE_PREFIX)) {
                pg_param_text(p, f->type);
                CHECK(sql_append(ret->sql, sizeof ret->sql, &len,
                               mask & EV_F_TYPE ? " AND type = $%d" : " AND starts_with(type, $%d)", p->n));
        }
        if (mask & EV_F_SINCE) {
                pg_param_i64(p, f->since_usec);
                CHECK(sql_append(ret->sql, sizeof ret->sql, &len, " AND time_usec >= $%d", p->n));
        }
        pg_param_i64(p, (int64_t) f->limit);
        return sql_append(ret->sql, sizeof ret->sql, &len, " ORDER BY seq LIMIT $%d", p->n);
}

static void event_rows_free(void *rows, size_t n) {
        event_array_free(rows, n);
}

static int op_event_list(Store *s, const EventFilter *f, Event **ret, size_t *ret_n) {
        PgStore *q = pg_store(s);
        _cleanup_pgresult_ PGresult *res = NULL;
        PgQuery query = {};

        CHECK(event_filter_query(q, f, &query));
        CHECK(pg_store_exec_slot(q, query.slot, query.name, query.sql, &query.params, &res));
        return pg_result_list_rows(res, sizeof(Event), event_read, event_rows_free, (void **) ret, ret_n);
}

static int op_event_delete_before(Store *s, int64_t before_usec, uint64_t *ret) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_i64(&p, before_usec);
        CHECK(pg_store_exec(pg_store(s), PG_EVENT_DELETE_BEFORE, &p, &res));
        *ret = pg_result_changes(res);
        return 0;
}

const StoreOps store_postgres_ops = {
        .name = "postgres",
        .open = pg_store_open,
        .close = pg_store_close,
        .schema_version = pg_store_schema_version,
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
        .sandbox_touch = pg_op_sandbox_touch,
        .sandbox_set_policy = pg_op_sandbox_set_policy,
        .sandbox_set_timeout_warned = pg_op_sandbox_set_timeout_warned,
        .sandbox_set_processes_preserved = pg_op_sandbox_set_processes_preserved,
        .sandbox_set_network = pg_op_sandbox_set_network,
        .sandbox_claim_warm = pg_op_sandbox_claim_warm,
        .sandbox_warm_count = pg_op_sandbox_warm_count,
        .checkpoint_insert = pg_op_checkpoint_insert,
        .checkpoint_get = pg_op_checkpoint_get,
        .checkpoint_list = pg_op_checkpoint_list,
        .checkpoint_update = pg_op_checkpoint_update,
        .checkpoint_delete = pg_op_checkpoint_delete,
        .checkpoint_delete_orphans = pg_op_checkpoint_delete_orphans,
        .credential_insert = pg_op_credential_insert,
        .credential_get = pg_op_credential_get,
        .credential_list = pg_op_credential_list,
        .credential_update = pg_op_credential_update,
        .credential_delete = pg_op_credential_delete,
        .grant_insert = pg_op_grant_insert,
        .grant_delete = pg_op_grant_delete,
        .grant_list = pg_op_grant_list,
        .credentials_reseal = pg_op_credentials_reseal,
        .event_append = op_event_append,
        .event_list = op_event_list,
        .event_delete_before = op_event_delete_before,
        .worker_register = pg_op_worker_register,
        .worker_heartbeat = pg_op_worker_heartbeat,
        .worker_stop = pg_op_worker_stop,
        .worker_get = pg_op_worker_get,
        .worker_list = pg_op_worker_list,
        .worker_mark_lost = pg_op_worker_mark_lost,
        .leader_try = pg_op_leader_try,
        .clock = pg_op_clock,
        .lease_take = pg_op_lease_take,
        .lease_renew = pg_op_lease_renew,
        .lease_release = pg_op_lease_release,
        .lease_get = pg_op_lease_get,
        .fence = pg_op_fence,
        .cluster_setting_claim = pg_op_cluster_setting_claim,
        .cluster_setting_get = pg_op_cluster_setting_get,
        .checkpoint_copy_set = pg_op_checkpoint_copy_set,
        .checkpoint_copy_list = pg_op_checkpoint_copy_list,
        .checkpoint_copy_delete = pg_op_checkpoint_copy_delete,
        .tenant_quotas_get = pg_op_tenant_quotas_get,
        .tenant_quotas_set = pg_op_tenant_quotas_set,
        .tenant_usage = pg_op_tenant_usage,
        .template_version_add = pg_op_template_version_add,
        .template_version_next = pg_op_template_version_next,
        .template_version_get = pg_op_template_version_get,
        .template_version_list = pg_op_template_version_list,
        .template_version_delete = pg_op_template_version_delete,
        .template_versions_drop = pg_op_template_versions_drop,
        .template_tag_set = pg_op_template_tag_set,
        .template_tag_delete = pg_op_template_tag_delete,
        .template_tag_get = pg_op_template_tag_get,
        .template_tag_list = pg_op_template_tag_list,
        .volume_insert = pg_op_volume_insert,
        .volume_get = pg_op_volume_get,
        .volume_get_by_id = pg_op_volume_get_by_id,
        .volume_list = pg_op_volume_list,
        .volume_delete = pg_op_volume_delete,
        .volume_move = pg_op_volume_move,
        .volume_mount = pg_op_volume_mount,
        .volume_mounts = pg_op_volume_mounts,
        .webhook_insert = pg_op_webhook_insert,
        .webhook_get = pg_op_webhook_get,
        .webhook_list = pg_op_webhook_list,
        .webhook_update = pg_op_webhook_update,
        .webhook_delete = pg_op_webhook_delete,
        .webhook_set_state = pg_op_webhook_set_state,
        .webhook_set_secret = pg_op_webhook_set_secret,
        .setting_set = pg_op_setting_set,
        .setting_remove = pg_op_setting_remove,
        .settings_get = pg_op_settings_get,
};
