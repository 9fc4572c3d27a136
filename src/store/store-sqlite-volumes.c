/* SPDX-License-Identifier: MIT */
/* The SQLite back end's volumes. store-volumes.c has checked every argument.
 * A mount and a delete decide against the mounts of live sandboxes inside
 * one transaction (BEGIN IMMEDIATE: no other writer meanwhile). */

#include "store-sqlite.h"

#define VOLUME_COLUMNS                                                                                \
        "v.id, v.tenant_id, v.name, v.size_mb, v.worker, v.created_usec, v.read_only, v.source, "     \
        "(SELECT COUNT(*) FROM volume_mounts m JOIN sandboxes s ON s.id = m.sandbox_id "               \
        "WHERE m.volume_id = v.id AND s.state <> 'deleted' AND m.read_only = 1), "                     \
        "(SELECT COUNT(*) FROM volume_mounts m JOIN sandboxes s ON s.id = m.sandbox_id "               \
        "WHERE m.volume_id = v.id AND s.state <> 'deleted' AND m.read_only = 0)"

/* (mounts of live sandboxes other than ?2, of which writers) */
#define LIVE_MOUNTS                                                                                   \
        "SELECT COUNT(*), COALESCE(SUM(m.read_only = 0), 0) FROM volume_mounts m "                     \
        "JOIN sandboxes s ON s.id = m.sandbox_id WHERE m.volume_id = ?1 AND s.state <> 'deleted' "     \
        "AND m.sandbox_id <> ?2"

static const char *const volume_sql[_SQL_VOL_STMT_MAX] = {
        [SQL_VOL_INSERT] = "INSERT INTO volumes (id, tenant_id, name, size_mb, worker, created_usec, read_only, source) "
                           "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        [SQL_VOL_GET] = "SELECT " VOLUME_COLUMNS " FROM volumes v WHERE v.tenant_id = ?1 AND v.name = ?2",
        [SQL_VOL_GET_BY_ID] = "SELECT " VOLUME_COLUMNS " FROM volumes v WHERE v.id = ?1",
        [SQL_VOL_LIST] = "SELECT " VOLUME_COLUMNS " FROM volumes v WHERE v.tenant_id = ?1 ORDER BY v.name",
        [SQL_VOL_ID] = "SELECT id FROM volumes WHERE tenant_id = ?1 AND name = ?2",
        [SQL_VOL_LIVE_MOUNTS] = LIVE_MOUNTS,
        [SQL_VOL_DELETE_MOUNTS] = "DELETE FROM volume_mounts WHERE volume_id = ?1",
        [SQL_VOL_DELETE] = "DELETE FROM volumes WHERE id = ?1",
        [SQL_VOL_EXISTS] = "SELECT 1 FROM volumes WHERE id = ?1",
        [SQL_VOL_MOUNT_INSERT] = "INSERT INTO volume_mounts (sandbox_id, volume_id, path, read_only) "
                                 "VALUES (?1, ?2, ?3, ?4)",
        [SQL_VOL_MOUNT_LIST] = "SELECT m.volume_id, v.name, m.sandbox_id, m.path, m.read_only FROM volume_mounts m "
                               "JOIN volumes v ON v.id = m.volume_id WHERE m.sandbox_id = ?1 ORDER BY m.path",
        [SQL_VOL_MOVE] = "UPDATE volumes SET worker = ?3 WHERE id = ?1 AND worker = ?2",
};

static int vol_stmt(SqliteStore *q, SqlVolumeStmt id, sqlite3_stmt **ret) {
        if (id < 0 || id >= _SQL_VOL_STMT_MAX)
                return -EINVAL;
        return sqlite_store_prepare(q, &q->volumes[id], volume_sql[id], ret);
}

static int volume_read(sqlite3_stmt *st, void *ret) {
        Volume v = {};

        CHECK(SQLITE_COL_STR(st, 0, v.id));
        CHECK(SQLITE_COL_STR(st, 1, v.tenant_id));
        CHECK(SQLITE_COL_STR(st, 2, v.name));
        CHECK(sqlite_col_u64(st, 3, &v.size_mb));
        CHECK(SQLITE_COL_STR(st, 4, v.worker));
        CHECK(sqlite_col_i64(st, 5, &v.created_usec));
        v.read_only = sqlite3_column_int64(st, 6) != 0;
        CHECK(SQLITE_COL_STR(st, 7, v.source));
        CHECK(sqlite_col_u32(st, 8, &v.readers));
        CHECK(sqlite_col_u32(st, 9, &v.writers));
        *(Volume *) ret = v;
        return 0;
}

static int mount_read(sqlite3_stmt *st, void *ret) {
        VolumeMount m = {};

        CHECK(SQLITE_COL_STR(st, 0, m.volume_id));
        CHECK(SQLITE_COL_STR(st, 1, m.volume_name));
        CHECK(SQLITE_COL_STR(st, 2, m.sandbox_id));
        CHECK(SQLITE_COL_STR(st, 3, m.path));
        m.read_only = sqlite3_column_int64(st, 4) != 0;
        *(VolumeMount *) ret = m;
        return 0;
}

int sqlite_op_volume_insert(Store *s, const Volume *v, StoreAdmission *adm) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_tx_ SqliteStore *tx = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        uint64_t add[TENANT_RESOURCES] = { [TENANT_QUOTA_DISK_MB] = v->size_mb };
        TenantUsage u;

        CHECK(sqlite_store_begin(q, &tx));
        if (adm) {
                CHECK(sqlite_op_tenant_usage(s, v->tenant_id, &u));
                CHECK(store_admission_check_add(adm, &u, add));
        }
        CHECK(vol_stmt(q, SQL_VOL_INSERT, &st));
        CHECK(sqlite_bind_text(q, st, 1, v->id));
        CHECK(sqlite_bind_text(q, st, 2, v->tenant_id));
        CHECK(sqlite_bind_text(q, st, 3, v->name));
        CHECK(sqlite_bind_int64(q, st, 4, (int64_t) v->size_mb));
        CHECK(sqlite_bind_text(q, st, 5, v->worker));
        CHECK(sqlite_bind_int64(q, st, 6, v->created_usec));
        CHECK(sqlite_bind_int64(q, st, 7, v->read_only));
        CHECK(sqlite_bind_text(q, st, 8, v->source));
        CHECK(sqlite_store_step_done(q, st));
        return sqlite_store_commit(&tx);
}

int sqlite_op_volume_get(Store *s, const char *tenant_id, const char *name, Volume *ret) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(vol_stmt(q, SQL_VOL_GET, &st));
        CHECK(sqlite_bind_text(q, st, 1, tenant_id));
        CHECK(sqlite_bind_text(q, st, 2, name));
        return sqlite_store_get_row(q, st, volume_read, ret);
}

int sqlite_op_volume_get_by_id(Store *s, const char *id, Volume *ret) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(vol_stmt(q, SQL_VOL_GET_BY_ID, &st));
        CHECK(sqlite_bind_text(q, st, 1, id));
        return sqlite_store_get_row(q, st, volume_read, ret);
}

int sqlite_op_volume_list(Store *s, const char *tenant_id, Volume **ret, size_t *ret_n) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(vol_stmt(q, SQL_VOL_LIST, &st));
        CHECK(sqlite_bind_text(q, st, 1, tenant_id));
        return sqlite_store_list_rows(q, st, sizeof(Volume), volume_read, NULL, (void **) ret, ret_n);
}

/* Mounts of volume_id by live sandboxes other than sandbox_id ("" = any). */
static int live_mounts(SqliteStore *q, const char *volume_id, const char *sandbox_id, uint64_t *ret_all,
                       uint64_t *ret_writers) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        CHECK(vol_stmt(q, SQL_VOL_LIVE_MOUNTS, &st));
        CHECK(sqlite_bind_text(q, st, 1, volume_id));
        CHECK(sqlite_bind_text(q, st, 2, sandbox_id));
        r = sqlite_store_step(q, st);
        if (r < 0)
                return r;
        if (r == 0)
                return -EBADMSG;
        CHECK(sqlite_col_u64(st, 0, ret_all));
        CHECK(sqlite_col_u64(st, 1, ret_writers));
        return 0;
}

/* 0 if the volume's row exists, else -ENOENT. */
static int volume_exists(SqliteStore *q, const char *volume_id) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        CHECK(vol_stmt(q, SQL_VOL_EXISTS, &st));
        CHECK(sqlite_bind_text(q, st, 1, volume_id));
        r = sqlite_store_step(q, st);
        return r < 0 ? r : r == 0 ? -ENOENT : 0;
}

static int by_id(SqliteStore *q, SqlVolumeStmt id, const char *volume_id) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(vol_stmt(q, id, &st));
        CHECK(sqlite_bind_text(q, st, 1, volume_id));
        return sqlite_store_step_done(q, st);
}

int sqlite_op_volume_delete(Store *s, const char *tenant_id, const char *name) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_tx_ SqliteStore *tx = NULL;
        char id[STORE_ID_MAX];
        uint64_t all, writers;
        int r;

        CHECK(sqlite_store_begin(q, &tx));
        {
                _cleanup_stmt_ sqlite3_stmt *st = NULL;

                CHECK(vol_stmt(q, SQL_VOL_ID, &st));
                CHECK(sqlite_bind_text(q, st, 1, tenant_id));
                CHECK(sqlite_bind_text(q, st, 2, name));
                r = sqlite_store_step(q, st);
                if (r < 0)
                        return r;
                if (r == 0)
                        return -ENOENT;
                CHECK(SQLITE_COL_STR(st, 0, id));
        }
        CHECK(live_mounts(q, id, "", &all, &writers));
        if (all > 0)
                return -EBUSY;
        CHECK(by_id(q, SQL_VOL_DELETE_MOUNTS, id));
        CHECK(by_id(q, SQL_VOL_DELETE, id));
        return sqlite_store_commit(&tx);
}

int sqlite_op_volume_move(Store *s, const char *volume_id, const char *sandbox_id, const char *from, const char *to) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_tx_ SqliteStore *tx = NULL;
        uint64_t all, writers;

        CHECK(sqlite_store_begin(q, &tx));
        CHECK(volume_exists(q, volume_id));
        CHECK(live_mounts(q, volume_id, sandbox_id, &all, &writers));
        if (all > 0)
                return -EBUSY;
        {
                _cleanup_stmt_ sqlite3_stmt *st = NULL;

                CHECK(vol_stmt(q, SQL_VOL_MOVE, &st));
                CHECK(sqlite_bind_text(q, st, 1, volume_id));
                CHECK(sqlite_bind_text(q, st, 2, from));
                CHECK(sqlite_bind_text(q, st, 3, to));
                CHECK(sqlite_store_step_done(q, st));
        }
        if (sqlite3_changes64(q->db) != 1)
                return -ESTALE;
        return sqlite_store_commit(&tx);
}

int sqlite_op_volume_mount(Store *s, const char *sandbox_id, const VolumeMount *m, size_t n) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_tx_ SqliteStore *tx = NULL;
        uint64_t all, writers;

        CHECK(sqlite_store_begin(q, &tx));
        for (size_t i = 0; i < n; i++) {
                CHECK(volume_exists(q, m[i].volume_id));
                CHECK(live_mounts(q, m[i].volume_id, sandbox_id, &all, &writers));
                if (m[i].read_only ? writers > 0 : all > 0)
                        return -EBUSY;
                {
                        _cleanup_stmt_ sqlite3_stmt *st = NULL;

                        CHECK(vol_stmt(q, SQL_VOL_MOUNT_INSERT, &st));
                        CHECK(sqlite_bind_text(q, st, 1, sandbox_id));
                        CHECK(sqlite_bind_text(q, st, 2, m[i].volume_id));
                        CHECK(sqlite_bind_text(q, st, 3, m[i].path));
                        CHECK(sqlite_bind_int64(q, st, 4, m[i].read_only ? 1 : 0));
                        CHECK(sqlite_store_step_done(q, st));
                }
        }
        return sqlite_store_commit(&tx);
}

int sqlite_op_volume_mounts(Store *s, const char *sandbox_id, VolumeMount **ret, size_t *ret_n) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(vol_stmt(q, SQL_VOL_MOUNT_LIST, &st));
        CHECK(sqlite_bind_text(q, st, 1, sandbox_id));
        return sqlite_store_list_rows(q, st, sizeof(VolumeMount), mount_read, NULL, (void **) ret, ret_n);
}
