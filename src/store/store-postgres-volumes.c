/* SPDX-License-Identifier: MIT */
/* The PostgreSQL back end's volumes, with the semantics of the SQLite ones
 * (store-sqlite-volumes.c). store-volumes.c has checked every argument. A
 * mount and a delete lock the volume's row first (FOR UPDATE), so two
 * servers deciding the sharing rule for one volume take turns; each then
 * counts the mounts that the previous holder committed (READ COMMITTED). */

#include <stdio.h>

#include "store-postgres.h"

#define VOLUME_COLUMNS                                                                                \
        "v.id, v.tenant_id, v.name, v.size_mb, v.worker, v.created_usec, v.read_only, v.source, "     \
        "(SELECT COUNT(*) FROM volume_mounts m JOIN sandboxes s ON s.id = m.sandbox_id "               \
        "WHERE m.volume_id = v.id AND s.state <> 'deleted' AND m.read_only), "                         \
        "(SELECT COUNT(*) FROM volume_mounts m JOIN sandboxes s ON s.id = m.sandbox_id "               \
        "WHERE m.volume_id = v.id AND s.state <> 'deleted' AND NOT m.read_only)"

static const char *const volume_sql[_PG_VOL_STMT_MAX] = {
        [PG_VOL_INSERT] = "INSERT INTO volumes (id, tenant_id, name, size_mb, worker, created_usec, read_only, source) "
                          "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        [PG_VOL_GET] = "SELECT " VOLUME_COLUMNS " FROM volumes v WHERE v.tenant_id = $1 AND v.name = $2",
        [PG_VOL_GET_BY_ID] = "SELECT " VOLUME_COLUMNS " FROM volumes v WHERE v.id = $1",
        [PG_VOL_LIST] = "SELECT " VOLUME_COLUMNS " FROM volumes v WHERE v.tenant_id = $1 ORDER BY v.name",
        [PG_VOL_LOCK_BY_NAME] = "SELECT id FROM volumes WHERE tenant_id = $1 AND name = $2 FOR UPDATE",
        [PG_VOL_LOCK_BY_ID] = "SELECT id FROM volumes WHERE id = $1 FOR UPDATE",
        [PG_VOL_LIVE_MOUNTS] =
                "SELECT COUNT(*), COUNT(*) FILTER (WHERE NOT m.read_only) FROM volume_mounts m "
                "JOIN sandboxes s ON s.id = m.sandbox_id WHERE m.volume_id = $1 AND s.state <> 'deleted' "
                "AND m.sandbox_id <> $2",
        [PG_VOL_DELETE] = "WITH m AS (DELETE FROM volume_mounts WHERE volume_id = $1) "
                          "DELETE FROM volumes WHERE id = $1",
        [PG_VOL_MOUNT_INSERT] = "INSERT INTO volume_mounts (sandbox_id, volume_id, path, read_only) "
                                "VALUES ($1, $2, $3, $4)",
        [PG_VOL_MOUNT_LIST] = "SELECT m.volume_id, v.name, m.sandbox_id, m.path, m.read_only FROM volume_mounts m "
                              "JOIN volumes v ON v.id = m.volume_id WHERE m.sandbox_id = $1 ORDER BY m.path",
        [PG_VOL_MOVE] = "UPDATE volumes SET worker = $3 WHERE id = $1 AND worker = $2 RETURNING id",
};

static int vol_exec(PgStore *q, PgVolumeStmt id, const PgParams *p, PGresult **ret) {
        char name[16];

        if (id < 0 || id >= _PG_VOL_STMT_MAX)
                return -EINVAL;
        (void) snprintf(name, sizeof name, "vol%d", (int) id);
        return pg_store_exec_slot(q, &q->volumes[id], name, volume_sql[id], p, ret);
}

static int volume_read(const PGresult *res, int row, void *ret) {
        Volume v = {};

        CHECK(PG_COL_STR(res, row, 0, v.id));
        CHECK(PG_COL_STR(res, row, 1, v.tenant_id));
        CHECK(PG_COL_STR(res, row, 2, v.name));
        CHECK(pg_col_u64(res, row, 3, &v.size_mb));
        CHECK(PG_COL_STR(res, row, 4, v.worker));
        CHECK(pg_col_i64(res, row, 5, &v.created_usec));
        CHECK(pg_col_bool(res, row, 6, &v.read_only));
        CHECK(PG_COL_STR(res, row, 7, v.source));
        CHECK(pg_col_u32(res, row, 8, &v.readers));
        CHECK(pg_col_u32(res, row, 9, &v.writers));
        *(Volume *) ret = v;
        return 0;
}

static int mount_read(const PGresult *res, int row, void *ret) {
        VolumeMount m = {};

        CHECK(PG_COL_STR(res, row, 0, m.volume_id));
        CHECK(PG_COL_STR(res, row, 1, m.volume_name));
        CHECK(PG_COL_STR(res, row, 2, m.sandbox_id));
        CHECK(PG_COL_STR(res, row, 3, m.path));
        CHECK(pg_col_bool(res, row, 4, &m.read_only));
        *(VolumeMount *) ret = m;
        return 0;
}

typedef struct VolumeInsert {
        const Volume *v;
        StoreAdmission *adm;
} VolumeInsert;

static int volume_insert_tx(PgStore *q, void *userdata) {
        const VolumeInsert *in = userdata;
        const Volume *v = in->v;
        uint64_t add[TENANT_RESOURCES] = { [TENANT_QUOTA_DISK_MB] = v->size_mb };
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        CHECK(pg_tenant_admit_add(q, v->tenant_id, in->adm, add));
        pg_param_text(&p, v->id);
        pg_param_text(&p, v->tenant_id);
        pg_param_text(&p, v->name);
        pg_param_i64(&p, (int64_t) v->size_mb);
        pg_param_text(&p, v->worker);
        pg_param_i64(&p, v->created_usec);
        pg_param_bool(&p, v->read_only);
        pg_param_text(&p, v->source);
        return vol_exec(q, PG_VOL_INSERT, &p, &res);
}

int pg_op_volume_insert(Store *s, const Volume *v, StoreAdmission *adm) {
        VolumeInsert in = { .v = v, .adm = adm };

        return pg_store_transact(pg_store(s), volume_insert_tx, &in);
}

int pg_op_volume_get(Store *s, const char *tenant_id, const char *name, Volume *ret) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, tenant_id);
        pg_param_text(&p, name);
        CHECK(vol_exec(pg_store(s), PG_VOL_GET, &p, &res));
        return pg_result_get_row(res, volume_read, ret);
}

int pg_op_volume_get_by_id(Store *s, const char *id, Volume *ret) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, id);
        CHECK(vol_exec(pg_store(s), PG_VOL_GET_BY_ID, &p, &res));
        return pg_result_get_row(res, volume_read, ret);
}

int pg_op_volume_list(Store *s, const char *tenant_id, Volume **ret, size_t *ret_n) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, tenant_id);
        CHECK(vol_exec(pg_store(s), PG_VOL_LIST, &p, &res));
        return pg_result_list_rows(res, sizeof(Volume), volume_read, NULL, (void **) ret, ret_n);
}

/* The volume's row locked by this transaction (its id into id_out if not NULL); -ENOENT if none. */
static int lock_volume(PgStore *q, PgVolumeStmt stmt, const char *a, const char *b, char id_out[static STORE_ID_MAX]) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, a);
        if (b)
                pg_param_text(&p, b);
        CHECK(vol_exec(q, stmt, &p, &res));
        if (PQntuples(res) == 0)
                return -ENOENT;
        return pg_col_str(res, 0, 0, id_out, STORE_ID_MAX);
}

static int live_mounts(PgStore *q, const char *volume_id, const char *sandbox_id, uint64_t *ret_all,
                       uint64_t *ret_writers) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, volume_id);
        pg_param_text(&p, sandbox_id);
        CHECK(vol_exec(q, PG_VOL_LIVE_MOUNTS, &p, &res));
        if (PQntuples(res) != 1)
                return -EBADMSG;
        CHECK(pg_col_u64(res, 0, 0, ret_all));
        return pg_col_u64(res, 0, 1, ret_writers);
}

typedef struct VolumeDelete {
        const char *tenant_id, *name;
} VolumeDelete;

static int delete_tx(PgStore *q, void *userdata) {
        const VolumeDelete *d = userdata;
        _cleanup_pgresult_ PGresult *res = NULL;
        char id[STORE_ID_MAX];
        uint64_t all, writers;
        PgParams p = {};

        CHECK(lock_volume(q, PG_VOL_LOCK_BY_NAME, d->tenant_id, d->name, id));
        CHECK(live_mounts(q, id, "", &all, &writers));
        if (all > 0)
                return -EBUSY;
        pg_param_text(&p, id);
        return vol_exec(q, PG_VOL_DELETE, &p, &res);
}

int pg_op_volume_delete(Store *s, const char *tenant_id, const char *name) {
        VolumeDelete d = { tenant_id, name };

        return pg_store_transact(pg_store(s), delete_tx, &d);
}

typedef struct VolumeMove {
        const char *volume_id, *sandbox_id, *from, *to;
} VolumeMove;

static int move_tx(PgStore *q, void *userdata) {
        const VolumeMove *m = userdata;
        _cleanup_pgresult_ PGresult *res = NULL;
        char id[STORE_ID_MAX];
        uint64_t all, writers;
        PgParams p = {};

        CHECK(lock_volume(q, PG_VOL_LOCK_BY_ID, m->volume_id, NULL, id));
        CHECK(live_mounts(q, id, m->sandbox_id, &all, &writers));
        if (all > 0)
                return -EBUSY;
        pg_param_text(&p, id);
        pg_param_text(&p, m->from);
        pg_param_text(&p, m->to);
        CHECK(vol_exec(q, PG_VOL_MOVE, &p, &res));
        return PQntuples(res) == 1 ? 0 : -ESTALE;
}

int pg_op_volume_move(Store *s, const char *volume_id, const char *sandbox_id, const char *from, const char *to) {
        VolumeMove m = { volume_id, sandbox_id, from, to };

        return pg_store_transact(pg_store(s), move_tx, &m);
}

typedef struct VolumeMountTx {
        const char *sandbox_id;
        const VolumeMount *m;
        size_t n;
} VolumeMountTx;

static int mount_tx(PgStore *q, void *userdata) {
        const VolumeMountTx *x = userdata;

        for (size_t i = 0; i < x->n; i++) {
                _cleanup_pgresult_ PGresult *res = NULL;
                char id[STORE_ID_MAX];
                uint64_t all, writers;
                PgParams p = {};

                CHECK(lock_volume(q, PG_VOL_LOCK_BY_ID, x->m[i].volume_id, NULL, id));
                CHECK(live_mounts(q, id, x->sandbox_id, &all, &writers));
                if (x->m[i].read_only ? writers > 0 : all > 0)
                        return -EBUSY;
                pg_param_text(&p, x->sandbox_id);
                pg_param_text(&p, id);
                pg_param_text(&p, x->m[i].path);
                pg_param_bool(&p, x->m[i].read_only);
                CHECK(vol_exec(q, PG_VOL_MOUNT_INSERT, &p, &res));
        }
        return 0;
}

int pg_op_volume_mount(Store *s, const char *sandbox_id, const VolumeMount *m, size_t n) {
        VolumeMountTx x = { sandbox_id, m, n };

        return pg_store_transact(pg_store(s), mount_tx, &x);
}

int pg_op_volume_mounts(Store *s, const char *sandbox_id, VolumeMount **ret, size_t *ret_n) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, sandbox_id);
        CHECK(vol_exec(pg_store(s), PG_VOL_MOUNT_LIST, &p, &res));
        return pg_result_list_rows(res, sizeof(VolumeMount), mount_read, NULL, (void **) ret, ret_n);
}
