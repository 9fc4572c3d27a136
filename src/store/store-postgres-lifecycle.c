/* SPDX-License-Identifier: MIT */
/* The PostgreSQL back end's lifecycle operations, with the semantics of the
 * SQLite ones (store-sqlite-lifecycle.c). store.c has checked every
 * argument.
 *
 * A warm-pool claim picks its row with FOR UPDATE SKIP LOCKED: concurrent
 * claims (on this server or another) each lock a different row, and one
 * that finds its row claimed meanwhile (re-checked under the lock) moves on
 * to the next. Updates of one sandbox tell -ESTALE from -ENOENT in the same
 * statement, as the state compare-and-set does. */

#include "alloc-util.h"
#include "store-postgres.h"

#define CHECKPOINT_COLUMNS "id, sandbox_id, tenant_id, name, created_usec, size_bytes, auto, restorable, memory"

/* "(changed rows, whether the sandbox exists)" of a data-modifying CTE named c. */
#define CHANGED_AND_EXISTS(c) "SELECT (SELECT COUNT(*) FROM " c "), EXISTS (SELECT 1 FROM sandboxes WHERE id = $1)"

static const char *const lifecycle_sql[_PG_LC_STMT_MAX] = {
        [PG_LC_SANDBOX_TOUCH] =
                "WITH c AS (UPDATE sandboxes SET last_activity_usec = GREATEST(last_activity_usec, $2) "
                "WHERE id = $1 RETURNING 1) " CHANGED_AND_EXISTS("c"),
        /* SET expressions see the old row: timeout_warned survives only an unchanged expiry */
        [PG_LC_SANDBOX_SET_POLICY] =
                "WITH c AS (UPDATE sandboxes SET timeout_s = $2, "
                "timeout_warned = CASE WHEN expires_usec = $3 THEN timeout_warned ELSE false END, "
                "expires_usec = $3, idle_s = $4, idle_action = $5, checkpoint_every_s = $6, updated_usec = $7, auto_resume = $8, "
                "disk_mb = CASE WHEN $9::bigint > 0 THEN $9::bigint ELSE disk_mb END "
                "WHERE id = $1 AND state <> 'deleted' RETURNING 1) " CHANGED_AND_EXISTS("c"),
        [PG_LC_SANDBOX_SET_TIMEOUT_WARNED] =
                "WITH c AS (UPDATE sandboxes SET timeout_warned = true, updated_usec = $2 "
                "WHERE id = $1 AND NOT timeout_warned RETURNING 1) " CHANGED_AND_EXISTS("c"),
        [PG_LC_SANDBOX_SET_PRESERVED] =
                "WITH c AS (UPDATE sandboxes SET processes_preserved = $2, updated_usec = $3 "
                "WHERE id = $1 RETURNING 1) " CHANGED_AND_EXISTS("c"),
        [PG_LC_SANDBOX_SET_NETWORK] =
                "WITH c AS (UPDATE sandboxes SET network_json = $2, updated_usec = $3 "
                "WHERE id = $1 AND state <> 'deleted' RETURNING 1) " CHANGED_AND_EXISTS("c"),
        [PG_LC_SANDBOX_CLAIM_WARM] =
                "UPDATE sandboxes SET tenant_id = $4, warm_pool = '', cpu_millis = $5, memory_mb = $6, "
                "pids_max = $7, io_weight = $8, timeout_s = $9, expires_usec = $10, env_json = $11, "
                "metadata_json = $12, idle_s = $13, idle_action = $14, checkpoint_every_s = $15, network_json = $17, "
                "checkpoints_max = $18, checkpoints_mb = $19, auto_resume = $20, public_traffic = $21, "
                "created_usec = $16, updated_usec = $16, last_activity_usec = $16, timeout_warned = false "
                "WHERE id = (SELECT id FROM sandboxes WHERE warm_pool = $1 AND state = 'paused' "
                "AND runtime = $2 AND disk_mb = $3 AND template_version = $22 ORDER BY created_usec, id LIMIT 1 "
                "FOR UPDATE SKIP LOCKED) "
                "AND warm_pool = $1 AND state = 'paused' RETURNING id",
        [PG_LC_SANDBOX_WARM_COUNT] =
                "SELECT COALESCE(SUM(CASE WHEN state = 'paused' THEN 1 ELSE 0 END), 0), COUNT(*) "
                "FROM sandboxes WHERE warm_pool = $1 AND state <> 'deleted'",

        [PG_LC_CHECKPOINT_INSERT] =
                "INSERT INTO checkpoints (" CHECKPOINT_COLUMNS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        [PG_LC_CHECKPOINT_GET] =
                "SELECT " CHECKPOINT_COLUMNS " FROM checkpoints WHERE id = $1 AND ($2::text IS NULL OR tenant_id = $2)",
        [PG_LC_CHECKPOINT_LIST] =
                "SELECT " CHECKPOINT_COLUMNS " FROM checkpoints WHERE sandbox_id = $1 "
                "ORDER BY created_usec DESC, id DESC",
        [PG_LC_CHECKPOINT_LIST_ALL] =
                "SELECT " CHECKPOINT_COLUMNS " FROM checkpoints ORDER BY created_usec DESC, id DESC",
        [PG_LC_CHECKPOINT_UPDATE] = "UPDATE checkpoints SET restorable = $2, size_bytes = $3 WHERE id = $1",
        [PG_LC_CHECKPOINT_DELETE] = "DELETE FROM checkpoints WHERE id = $1",
        [PG_LC_CHECKPOINT_DELETE_ORPHANS] =
                "DELETE FROM checkpoints WHERE NOT EXISTS (SELECT 1 FROM sandboxes s "
                "WHERE s.id = checkpoints.sandbox_id AND s.state <> 'deleted')",
};

static int lc_exec(PgStore *q, PgLifecycleStmt id, const PgParams *p, PGresult **ret) {
        char name[16];

        if (id < 0 || id >= _PG_LC_STMT_MAX)
                return -EINVAL;
        (void) snprintf(name, sizeof name, "lc%d", (int) id);
        return pg_store_exec_slot(q, &q->lifecycle[id], name, lifecycle_sql[id], p, ret);
}

/* A statement written as CHANGED_AND_EXISTS: changed = OK, else -ESTALE if
 * the sandbox exists, -ENOENT if not. */
static int lc_exec_cas(PgStore *q, PgLifecycleStmt id, const PgParams *p) {
        _cleanup_pgresult_ PGresult *res = NULL;

        CHECK(lc_exec(q, id, p, &res));
        return pg_result_cas(res);
}

/* A statement whose row count decides: 0 rows = -ENOENT. */
static int lc_exec_changes_or_enoent(PgStore *q, PgLifecycleStmt id, const PgParams *p) {
        _cleanup_pgresult_ PGresult *res = NULL;

        CHECK(lc_exec(q, id, p, &res));
        return pg_result_changes(res) == 0 ? -ENOENT : 0;
}

int pg_op_sandbox_touch(Store *s, const char *id, int64_t now) {
        PgParams p = {};

        pg_param_text(&p, id);
        pg_param_i64(&p, now);
        return lc_exec_cas(pg_store(s), PG_LC_SANDBOX_TOUCH, &p);
}

int pg_op_sandbox_set_policy(Store *s, const char *id, const SandboxPolicy *pol, int64_t now) {
        PgParams p = {};

        pg_param_text(&p, id);
        pg_param_i64(&p, (int64_t) pol->timeout_s);
        pg_param_i64(&p, pol->expires_usec);
        pg_param_i64(&p, (int64_t) pol->idle_s);
        pg_param_text(&p, idle_action_to_string(pol->idle_action));
        pg_param_i64(&p, (int64_t) pol->checkpoint_every_s);
        pg_param_i64(&p, now);
        pg_param_bool(&p, pol->auto_resume);
        pg_param_i64(&p, (int64_t) pol->disk_mb);
        return lc_exec_cas(pg_store(s), PG_LC_SANDBOX_SET_POLICY, &p);
}

int pg_op_sandbox_set_timeout_warned(Store *s, const char *id, int64_t now) {
        PgParams p = {};

        pg_param_text(&p, id);
        pg_param_i64(&p, now);
        return lc_exec_cas(pg_store(s), PG_LC_SANDBOX_SET_TIMEOUT_WARNED, &p);
}

int pg_op_sandbox_set_processes_preserved(Store *s, const char *id, bool preserved, int64_t now) {
        PgParams p = {};

        pg_param_text(&p, id);
        pg_param_bool(&p, preserved);
        pg_param_i64(&p, now);
        return lc_exec_cas(pg_store(s), PG_LC_SANDBOX_SET_PRESERVED, &p);
}

int pg_op_sandbox_set_network(Store *s, const char *id, const char *network_json, int64_t now) {
        PgParams p = {};

        pg_param_text(&p, id);
        pg_param_text(&p, network_json);
        pg_param_i64(&p, now);
        return lc_exec_cas(pg_store(s), PG_LC_SANDBOX_SET_NETWORK, &p);
}

typedef struct Claim {
        Store *store;
        const char *template_name;
        const Sandbox *req;
        StoreAdmission *adm;
        int64_t now;
        Sandbox *ret;
} Claim;

static int claim_tx(PgStore *q, void *userdata) {
        Claim *c = userdata;
        const Sandbox *req = c->req;
        _cleanup_pgresult_ PGresult *res = NULL;
        char id[STORE_ID_MAX];
        PgParams p = {};

        CHECK(pg_tenant_admit(q, req->tenant_id, c->adm, req)); /* the claim takes req's shape */
        pg_param_text(&p, c->template_name);
        pg_param_text(&p, req->runtime);
        pg_param_i64(&p, (int64_t) req->disk_mb);
        pg_param_text(&p, req->tenant_id);
        pg_param_i64(&p, req->cpu_millis);
        pg_param_i64(&p, (int64_t) req->memory_mb);
        pg_param_i64(&p, req->pids_max);
        pg_param_i64(&p, req->io_weight);
        pg_param_i64(&p, (int64_t) req->timeout_s);
        pg_param_i64(&p, req->expires_usec);
        pg_param_text(&p, req->env_json);
        pg_param_text(&p, req->metadata_json);
        pg_param_i64(&p, (int64_t) req->idle_s);
        pg_param_text(&p, idle_action_to_string(req->idle_action));
        pg_param_i64(&p, (int64_t) req->checkpoint_every_s);
        pg_param_i64(&p, c->now);
        pg_param_text(&p, req->network_json);
        pg_param_i64(&p, (int64_t) req->checkpoints_max);
        pg_param_i64(&p, (int64_t) req->checkpoints_mb);
        pg_param_bool(&p, req->auto_resume);
        pg_param_bool(&p, req->public_traffic);
        pg_param_i64(&p, (int64_t) req->template_version);
        CHECK(lc_exec(q, PG_LC_SANDBOX_CLAIM_WARM, &p, &res));
        if (PQntuples(res) == 0)
                return -ENOENT;
        CHECK(PG_COL_STR(res, 0, 0, id));
        /* the transaction may run again: a row read by an earlier try is dropped first */
        sandbox_done(c->ret);
        *c->ret = (Sandbox){};
        return store_postgres_ops.sandbox_get(c->store, NULL, id, c->ret);
}

int pg_op_sandbox_claim_warm(Store *s, const char *template_name, const Sandbox *req, StoreAdmission *adm, int64_t now,
                             Sandbox *ret) {
        _cleanup_(sandbox_done) Sandbox sb = {};
        Claim c = { .store = s, .template_name = template_name, .req = req, .adm = adm, .now = now, .ret = &sb };

        CHECK(pg_store_transact(pg_store(s), claim_tx, &c));
        *ret = sb;
        sb = (Sandbox){}; /* handed over */
        return 0;
}

int pg_op_sandbox_warm_count(Store *s, const char *template_name, uint64_t *ret_ready, uint64_t *ret_total) {
        _cleanup_pgresult_ PGresult *res = NULL;
        uint64_t ready, total;
        PgParams p = {};

        pg_param_text(&p, template_name);
        CHECK(lc_exec(pg_store(s), PG_LC_SANDBOX_WARM_COUNT, &p, &res));
        if (PQntuples(res) != 1)
                return -EBADMSG;
        CHECK(pg_col_u64(res, 0, 0, &ready));
        CHECK(pg_col_u64(res, 0, 1, &total));
        *ret_ready = ready;
        *ret_total = total;
        return 0;
}

/* Checkpoints */

static int checkpoint_read(const PGresult *res, int row, void *ret) {
        Checkpoint c = {};

        CHECK(PG_COL_STR(res, row, 0, c.id));
        CHECK(PG_COL_STR(res, row, 1, c.sandbox_id));
        CHECK(PG_COL_STR(res, row, 2, c.tenant_id));
        CHECK(PG_COL_STR(res, row, 3, c.name));
        CHECK(pg_col_i64(res, row, 4, &c.created_usec));
        CHECK(pg_col_u64(res, row, 5, &c.size_bytes));
        CHECK(pg_col_bool(res, row, 6, &c.automatic));
        CHECK(pg_col_bool(res, row, 7, &c.restorable));
        CHECK(pg_col_bool(res, row, 8, &c.memory));
        if (c.created_usec < 0)
                return -EBADMSG;
        *(Checkpoint *) ret = c;
        return 0;
}

typedef struct CheckpointInsert {
        const Checkpoint *c;
        StoreAdmission *adm;
} CheckpointInsert;

static int checkpoint_insert_row(PgStore *q, const Checkpoint *c) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, c->id);
        pg_param_text(&p, c->sandbox_id);
        pg_param_text(&p, c->tenant_id);
        pg_param_text(&p, c->name);
        pg_param_i64(&p, c->created_usec);
        pg_param_i64(&p, (int64_t) c->size_bytes);
        pg_param_bool(&p, c->automatic);
        pg_param_bool(&p, c->restorable);
        pg_param_bool(&p, c->memory);
        return lc_exec(q, PG_LC_CHECKPOINT_INSERT, &p, &res);
}

static int checkpoint_insert_tx(PgStore *q, void *userdata) {
        CheckpointInsert *in = userdata;

        CHECK(pg_tenant_admit(q, in->c->tenant_id, in->adm, NULL));
        return checkpoint_insert_row(q, in->c);
}

int pg_op_checkpoint_insert(Store *s, const Checkpoint *c, StoreAdmission *adm) {
        CheckpointInsert in = { .c = c, .adm = adm };

        if (!adm)
                return checkpoint_insert_row(pg_store(s), c);
        return pg_store_transact(pg_store(s), checkpoint_insert_tx, &in);
}

int pg_op_checkpoint_get(Store *s, const char *tenant_id, const char *id, Checkpoint *ret) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, id);
        pg_param_text(&p, tenant_id);
        CHECK(lc_exec(pg_store(s), PG_LC_CHECKPOINT_GET, &p, &res));
        return pg_result_get_row(res, checkpoint_read, ret);
}

int pg_op_checkpoint_list(Store *s, const char *sandbox_id, Checkpoint **ret, size_t *ret_n) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        if (sandbox_id)
                pg_param_text(&p, sandbox_id);
        CHECK(lc_exec(pg_store(s), sandbox_id ? PG_LC_CHECKPOINT_LIST : PG_LC_CHECKPOINT_LIST_ALL, &p, &res));
        return pg_result_list_rows(res, sizeof(Checkpoint), checkpoint_read, NULL, (void **) ret, ret_n);
}

int pg_op_checkpoint_update(Store *s, const char *id, bool restorable, uint64_t size_bytes) {
        PgParams p = {};

        pg_param_text(&p, id);
        pg_param_bool(&p, restorable);
        pg_param_i64(&p, (int64_t) size_bytes);
        return lc_exec_changes_or_enoent(pg_store(s), PG_LC_CHECKPOINT_UPDATE, &p);
}

int pg_op_checkpoint_delete(Store *s, const char *id) {
        PgParams p = {};

        pg_param_text(&p, id);
        return lc_exec_changes_or_enoent(pg_store(s), PG_LC_CHECKPOINT_DELETE, &p);
}

int pg_op_checkpoint_delete_orphans(Store *s, uint64_t *ret) {
        _cleanup_pgresult_ PGresult *res = NULL;

        CHECK(lc_exec(pg_store(s), PG_LC_CHECKPOINT_DELETE_ORPHANS, NULL, &res));
        *ret = pg_result_changes(res);
        return 0;
}
