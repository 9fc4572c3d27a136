/* SPDX-License-Identifier: MIT */
/* The PostgreSQL back end's cluster operations: worker rows, and controller
 * leadership as a session advisory lock. store-cluster.c has checked every
 * argument.
 *
 * Leadership: pg_try_advisory_lock on this handle's connection. PostgreSQL
 * releases it when the session ends (the process died, or its connection
 * broke), so a standby's next try takes it. A reconnect of this handle
 * (a new connection generation) means the lock is gone: the handle is no
 * longer leader until it takes the lock again. While held, each try checks
 * pg_locks, which also notices a connection that broke. */

#include <inttypes.h>
#include <stdio.h>

#include "alloc-util.h"
#include "store-postgres.h"

#define WORKER_COLUMNS                                                                        \
        "w.name, w.address, w.instance, w.state, w.cpu_millis, w.memory_mb, w.disk_mb, "      \
        "w.runtimes, w.accelerators, w.templates, w.registered_usec, w.heartbeat_usec, "      \
        "COALESCE(SUM(s.cpu_millis), 0), COALESCE(SUM(s.memory_mb), 0), "                     \
        "COALESCE(SUM(s.disk_mb), 0), COUNT(s.id)"
#define WORKER_FROM                                                                           \
        " FROM workers w LEFT JOIN sandboxes s ON s.worker = w.name "                         \
        "AND s.state NOT IN ('deleted', 'error', 'unreachable')"

#define COPY_COLUMNS "checkpoint_id, sandbox_id, worker, available, sha256, size_bytes, updated_usec"

static const char *const cluster_sql[_PG_CL_STMT_MAX] = {
        [PG_CL_WORKER_REGISTER] =
                "INSERT INTO workers (name, address, instance, state, cpu_millis, memory_mb, disk_mb, "
                "runtimes, accelerators, templates, registered_usec, heartbeat_usec) "
                "VALUES ($1, $2, $3, 'live', $4, $5, $6, $7, $8, $9, $10, space_now_usec()) "
                "ON CONFLICT (name) DO UPDATE SET address = EXCLUDED.address, instance = EXCLUDED.instance, "
                "state = 'live', cpu_millis = EXCLUDED.cpu_millis, memory_mb = EXCLUDED.memory_mb, "
                "disk_mb = EXCLUDED.disk_mb, runtimes = EXCLUDED.runtimes, "
                "accelerators = EXCLUDED.accelerators, templates = EXCLUDED.templates, "
                "registered_usec = EXCLUDED.registered_usec, heartbeat_usec = EXCLUDED.heartbeat_usec "
                "WHERE workers.state <> 'live' OR workers.instance = EXCLUDED.instance "
                "OR workers.heartbeat_usec < $11 "
                "RETURNING name",
        [PG_CL_WORKER_HEARTBEAT] =
                "WITH c AS (UPDATE workers SET heartbeat_usec = space_now_usec(), templates = $3 "
                "WHERE name = $1 AND instance = $2 AND state = 'live' RETURNING 1) "
                "SELECT (SELECT COUNT(*) FROM c), EXISTS (SELECT 1 FROM workers WHERE name = $1)",
        [PG_CL_WORKER_STOP] =
                "WITH c AS (UPDATE workers SET state = 'stopped' "
                "WHERE name = $1 AND instance = $2 AND state = 'live' RETURNING 1) "
                "SELECT (SELECT COUNT(*) FROM c), EXISTS (SELECT 1 FROM workers WHERE name = $1)",
        [PG_CL_WORKER_GET] = "SELECT " WORKER_COLUMNS WORKER_FROM " WHERE w.name = $1 GROUP BY w.name",
        [PG_CL_WORKER_LIST] = "SELECT " WORKER_COLUMNS WORKER_FROM " GROUP BY w.name ORDER BY w.name",
        [PG_CL_WORKER_SET_LOST] =
                "UPDATE workers SET state = 'suspect' WHERE name = $1 AND state = 'live' AND heartbeat_usec < $2",
        [PG_CL_SANDBOXES_SET_LOST] =
                "UPDATE sandboxes SET state = 'unreachable', reason = $2, updated_usec = $3 "
                "WHERE worker = $1 AND state NOT IN ('deleted', 'unreachable') RETURNING id, tenant_id",
        [PG_CL_LEADER_TRY] = "SELECT pg_try_advisory_lock(" PG_LOCK_CLASS ", " PG_LOCK_CONTROLLER ")",
        [PG_CL_LEADER_HELD] =
                "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = "
                PG_LOCK_CLASS " AND objid = " PG_LOCK_CONTROLLER " AND objsubid = 2 "
                "AND pid = pg_backend_pid() AND granted)",
        /* one statement: the row inserted now, or the one that was there */
        [PG_CL_SETTING_CLAIM] =
                "WITH i AS (INSERT INTO cluster_settings (name, value) VALUES ($1, $2) "
                "ON CONFLICT (name) DO NOTHING RETURNING value) "
                "SELECT value FROM i UNION ALL SELECT value FROM cluster_settings WHERE name = $1 LIMIT 1",
        [PG_CL_COPY_SET] =
                "INSERT INTO checkpoint_copies (" COPY_COLUMNS ") VALUES ($1, $2, $3, $4, $5, $6, $7) "
                "ON CONFLICT (checkpoint_id, worker) DO UPDATE SET sandbox_id = EXCLUDED.sandbox_id, "
                "available = EXCLUDED.available, sha256 = EXCLUDED.sha256, size_bytes = EXCLUDED.size_bytes, "
                "updated_usec = EXCLUDED.updated_usec",
        [PG_CL_COPY_LIST] =
                "SELECT " COPY_COLUMNS " FROM checkpoint_copies WHERE checkpoint_id = $1 ORDER BY worker",
        [PG_CL_COPY_LIST_ALL] = "SELECT " COPY_COLUMNS " FROM checkpoint_copies ORDER BY checkpoint_id, worker",
        [PG_CL_COPY_DELETE] = "DELETE FROM checkpoint_copies WHERE checkpoint_id = $1 AND worker = $2",
        [PG_CL_CLOCK] = "SELECT space_now_usec()",
        [PG_CL_LEASE_TAKE] =
                "UPDATE controller_lease SET holder = $1, token = token + 1, "
                "expires_usec = space_now_usec() + $2, acquired_usec = space_now_usec() "
                "WHERE id = 1 AND expires_usec <= space_now_usec() RETURNING token",
        [PG_CL_LEASE_RENEW] =
                "UPDATE controller_lease SET expires_usec = space_now_usec() + $3 "
                "WHERE id = 1 AND holder = $1 AND token = $2 AND expires_usec > space_now_usec()",
        [PG_CL_LEASE_RELEASE] =
                "UPDATE controller_lease SET expires_usec = 0 WHERE id = 1 AND holder = $1 AND token = $2",
        [PG_CL_LEASE_GET] = "SELECT holder, token, expires_usec, space_now_usec() FROM controller_lease WHERE id = 1",
        [PG_CL_FENCE] = "SELECT set_config('space.fence_token', $1, false)",
};

static int cl_exec(PgStore *q, PgClusterStmt id, const PgParams *p, PGresult **ret) {
        char name[16];

        if (id < 0 || id >= _PG_CL_STMT_MAX)
                return -EINVAL;
        (void) snprintf(name, sizeof name, "cl%d", (int) id);
        return pg_store_exec_slot(q, &q->cluster[id], name, cluster_sql[id], p, ret);
}

/* "(changed, exists)": 0, -ESTALE or -ENOENT. */
static int cl_exec_cas(PgStore *q, PgClusterStmt id, const PgParams *p) {
        _cleanup_pgresult_ PGresult *res = NULL;

        CHECK(cl_exec(q, id, p, &res));
        return pg_result_cas(res);
}

int pg_op_worker_register(Store *s, const WorkerNode *w, int64_t stale_before_usec) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, w->name);
        pg_param_text(&p, w->address);
        pg_param_text(&p, w->instance);
        pg_param_i64(&p, w->cpu_millis);
        pg_param_i64(&p, (int64_t) w->memory_mb);
        pg_param_i64(&p, (int64_t) w->disk_mb);
        pg_param_text(&p, w->runtimes);
        pg_param_text(&p, w->accelerators);
        pg_param_text(&p, w->templates);
        pg_param_i64(&p, w->registered_usec);
        pg_param_i64(&p, stale_before_usec);
        CHECK(cl_exec(pg_store(s), PG_CL_WORKER_REGISTER, &p, &res));
        return PQntuples(res) == 1 ? 0 : -EEXIST; /* another live instance holds the name */
}

int pg_op_worker_heartbeat(Store *s, const char *name, const char *instance, const char *templates, int64_t now) {
        PgParams p = {};

        (void) now; /* the store's clock, in the statement */
        pg_param_text(&p, name);
        pg_param_text(&p, instance);
        pg_param_text(&p, templates);
        return cl_exec_cas(pg_store(s), PG_CL_WORKER_HEARTBEAT, &p);
}

int pg_op_worker_stop(Store *s, const char *name, const char *instance) {
        PgParams p = {};

        pg_param_text(&p, name);
        pg_param_text(&p, instance);
        return cl_exec_cas(pg_store(s), PG_CL_WORKER_STOP, &p);
}

static int worker_read(const PGresult *res, int row, void *ret) {
        WorkerNode w = {};
        char state[16];

        CHECK(PG_COL_STR(res, row, 0, w.name));
        CHECK(PG_COL_STR(res, row, 1, w.address));
        CHECK(PG_COL_STR(res, row, 2, w.instance));
        CHECK(PG_COL_STR(res, row, 3, state));
        w.state = worker_state_from_string(state);
        if (w.state < 0)
                return -EBADMSG;
        CHECK(pg_col_u32(res, row, 4, &w.cpu_millis));
        CHECK(pg_col_u64(res, row, 5, &w.memory_mb));
        CHECK(pg_col_u64(res, row, 6, &w.disk_mb));
        CHECK(PG_COL_STR(res, row, 7, w.runtimes));
        CHECK(PG_COL_STR(res, row, 8, w.accelerators));
        CHECK(PG_COL_STR(res, row, 9, w.templates));
        CHECK(pg_col_i64(res, row, 10, &w.registered_usec));
        CHECK(pg_col_i64(res, row, 11, &w.heartbeat_usec));
        CHECK(pg_col_u32(res, row, 12, &w.used_cpu_millis));
        CHECK(pg_col_u64(res, row, 13, &w.used_memory_mb));
        CHECK(pg_col_u64(res, row, 14, &w.used_disk_mb));
        CHECK(pg_col_u32(res, row, 15, &w.sandboxes));
        *(WorkerNode *) ret = w;
        return 0;
}

int pg_op_worker_get(Store *s, const char *name, WorkerNode *ret) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, name);
        CHECK(cl_exec(pg_store(s), PG_CL_WORKER_GET, &p, &res));
        return pg_result_get_row(res, worker_read, ret);
}

int pg_op_worker_list(Store *s, WorkerNode **ret, size_t *ret_n) {
        _cleanup_pgresult_ PGresult *res = NULL;

        CHECK(cl_exec(pg_store(s), PG_CL_WORKER_LIST, NULL, &res));
        return pg_result_list_rows(res, sizeof(WorkerNode), worker_read, NULL, (void **) ret, ret_n);
}

typedef struct MarkLost {
        const char *name, *reason;
        int64_t stale_before_usec, now;
        SandboxRef *refs;
        size_t n;
} MarkLost;

static int ref_read(const PGresult *res, int row, void *ret) {
        SandboxRef ref = {};

        CHECK(PG_COL_STR(res, row, 0, ref.id));
        CHECK(PG_COL_STR(res, row, 1, ref.tenant_id));
        *(SandboxRef *) ret = ref;
        return 0;
}

static int mark_lost_tx(PgStore *q, void *userdata) {
        MarkLost *m = userdata;
        _cleanup_pgresult_ PGresult *res = NULL, *res2 = NULL;
        PgParams p = {}, p2 = {};

        m->refs = mfree(m->refs); /* a retried transaction starts over */
        m->n = 0;
        pg_param_text(&p, m->name);
        pg_param_i64(&p, m->stale_before_usec);
        CHECK(cl_exec(q, PG_CL_WORKER_SET_LOST, &p, &res));
        if (pg_result_changes(res) == 0)
                return -ESTALE;
        pg_param_text(&p2, m->name);
        pg_param_text(&p2, m->reason);
        pg_param_i64(&p2, m->now);
        CHECK(cl_exec(q, PG_CL_SANDBOXES_SET_LOST, &p2, &res2));
        return pg_result_list_rows(res2, sizeof(SandboxRef), ref_read, NULL, (void **) &m->refs, &m->n);
}

int pg_op_worker_mark_lost(Store *s, const char *name, int64_t stale_before_usec, const char *reason, int64_t now,
                           SandboxRef **ret, size_t *ret_n) {
        MarkLost m = { .name = name, .reason = reason, .stale_before_usec = stale_before_usec, .now = now };
        int r;

        r = pg_store_transact(pg_store(s), mark_lost_tx, &m);
        if (r < 0) {
                free(m.refs);
                return r;
        }
        *ret = m.refs;
        *ret_n = m.n;
        return 0;
}

int pg_op_leader_try(Store *s, bool *ret_leader) {
        PgStore *q = pg_store(s);
        _cleanup_pgresult_ PGresult *res = NULL;
        bool held = false;
        int r;

        if (q->leader_gen != 0 && q->leader_gen == q->gen) {
                r = cl_exec(q, PG_CL_LEADER_HELD, NULL, &res);
                if (r >= 0 && PQntuples(res) == 1)
                        r = pg_col_bool(res, 0, 0, &held);
                if (r >= 0 && held && q->leader_gen == q->gen) {
                        *ret_leader = true;
                        return 0;
                }
                q->leader_gen = 0; /* lost with the connection (or r < 0: we cannot tell; assume lost) */
                if (r < 0)
                        return r;
                PQclear(TAKE_PTR(res));
        }
        r = cl_exec(q, PG_CL_LEADER_TRY, NULL, &res);
        if (r < 0)
                return r;
        if (PQntuples(res) != 1)
                return -EBADMSG;
        CHECK(pg_col_bool(res, 0, 0, &held));
        q->leader_gen = held ? q->gen : 0;
        *ret_leader = held;
        return 0;
}

int pg_op_cluster_setting_claim(Store *s, const char *name, const char *value,
                                char ret[static STORE_CLUSTER_SETTING_MAX]) {
        PgParams p = {};

        pg_param_text(&p, name);
        pg_param_text(&p, value);
        /* no row: another process inserted it after this statement's snapshot
         * was taken (its insert waited for that one to commit); again sees it */
        for (unsigned attempt = 0; attempt < 3; attempt++) {
                _cleanup_pgresult_ PGresult *res = NULL;

                CHECK(cl_exec(pg_store(s), PG_CL_SETTING_CLAIM, &p, &res));
                if (PQntuples(res) == 1)
                        return pg_col_str(res, 0, 0, ret, STORE_CLUSTER_SETTING_MAX);
        }
        return -EIO;
}

int pg_op_checkpoint_copy_set(Store *s, const CheckpointCopy *c) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, c->checkpoint_id);
        pg_param_text(&p, c->sandbox_id);
        pg_param_text(&p, c->worker);
        pg_param_bool(&p, c->available);
        pg_param_text(&p, c->sha256);
        pg_param_i64(&p, (int64_t) c->size_bytes);
        pg_param_i64(&p, c->updated_usec);
        return cl_exec(pg_store(s), PG_CL_COPY_SET, &p, &res);
}

static int copy_read(const PGresult *res, int row, void *ret) {
        CheckpointCopy c = {};

        CHECK(PG_COL_STR(res, row, 0, c.checkpoint_id));
        CHECK(PG_COL_STR(res, row, 1, c.sandbox_id));
        CHECK(PG_COL_STR(res, row, 2, c.worker));
        CHECK(pg_col_bool(res, row, 3, &c.available));
        CHECK(PG_COL_STR(res, row, 4, c.sha256));
        CHECK(pg_col_u64(res, row, 5, &c.size_bytes));
        CHECK(pg_col_i64(res, row, 6, &c.updated_usec));
        *(CheckpointCopy *) ret = c;
        return 0;
}

int pg_op_checkpoint_copy_list(Store *s, const char *checkpoint_id, CheckpointCopy **ret, size_t *ret_n) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        if (checkpoint_id)
                pg_param_text(&p, checkpoint_id);
        CHECK(cl_exec(pg_store(s), checkpoint_id ? PG_CL_COPY_LIST : PG_CL_COPY_LIST_ALL, &p, &res));
        return pg_result_list_rows(res, sizeof(CheckpointCopy), copy_read, NULL, (void **) ret, ret_n);
}

int pg_op_checkpoint_copy_delete(Store *s, const char *checkpoint_id, const char *worker) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, checkpoint_id);
        pg_param_text(&p, worker);
        CHECK(cl_exec(pg_store(s), PG_CL_COPY_DELETE, &p, &res));
        return pg_result_changes(res) == 0 ? -ENOENT : 0;
}

/* The lease: one row, every time by space_now_usec() (0020). */

int pg_op_clock(Store *s, int64_t *ret_usec) {
        _cleanup_pgresult_ PGresult *res = NULL;

        CHECK(cl_exec(pg_store(s), PG_CL_CLOCK, NULL, &res));
        if (PQntuples(res) != 1)
                return -EBADMSG;
        return pg_col_i64(res, 0, 0, ret_usec);
}

int pg_op_lease_take(Store *s, const char *holder, uint64_t lease_usec, int64_t *ret_token) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, holder);
        pg_param_i64(&p, (int64_t) lease_usec);
        CHECK(cl_exec(pg_store(s), PG_CL_LEASE_TAKE, &p, &res));
        if (PQntuples(res) == 0)
                return -EBUSY;
        return pg_col_i64(res, 0, 0, ret_token);
}

int pg_op_lease_renew(Store *s, const char *holder, int64_t token, uint64_t lease_usec) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, holder);
        pg_param_i64(&p, token);
        pg_param_i64(&p, (int64_t) lease_usec);
        CHECK(cl_exec(pg_store(s), PG_CL_LEASE_RENEW, &p, &res));
        return pg_result_changes(res) == 0 ? -ESTALE : 0;
}

int pg_op_lease_release(Store *s, const char *holder, int64_t token) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, holder);
        pg_param_i64(&p, token);
        CHECK(cl_exec(pg_store(s), PG_CL_LEASE_RELEASE, &p, &res));
        return pg_result_changes(res) == 0 ? -ESTALE : 0;
}

static int lease_read(const PGresult *res, int row, void *ret) {
        ControllerLease l = {};

        CHECK(PG_COL_STR(res, row, 0, l.holder));
        CHECK(pg_col_i64(res, row, 1, &l.token));
        CHECK(pg_col_i64(res, row, 2, &l.expires_usec));
        CHECK(pg_col_i64(res, row, 3, &l.now_usec));
        *(ControllerLease *) ret = l;
        return 0;
}

int pg_op_lease_get(Store *s, ControllerLease *ret) {
        _cleanup_pgresult_ PGresult *res = NULL;

        CHECK(cl_exec(pg_store(s), PG_CL_LEASE_GET, NULL, &res));
        return pg_result_get_row(res, lease_read, ret);
}

/* The session setting the fence trigger reads (0020); set again on each new
 * connection (pg_store_fence_apply). */
int pg_store_fence_apply(PgStore *q) {
        _cleanup_pgresult_ PGresult *res = NULL;
        char v[24] = "";
        PgParams p = {};

        if (q->fence_token > 0)
                snprintf(v, sizeof v, "%" PRIi64, q->fence_token);
        pg_param_text(&p, v);
        CHECK(cl_exec(q, PG_CL_FENCE, &p, &res));
        q->fence_gen = q->gen;
        return 0;
}

int pg_op_fence(Store *s, int64_t token) {
        PgStore *q = pg_store(s);
        int r;

        q->fence_token = token;
        r = pg_store_fence_apply(q);
        if (r < 0)
                q->fence_gen = 0; /* the next call sets it before anything else */
        return r;
}
