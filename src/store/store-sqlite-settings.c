/* SPDX-License-Identifier: MIT */
/* The SQLite back end's object settings. store-settings.c has checked every
 * argument. */

#include "store-sqlite.h"

static const char *const setting_sql[_SQL_SET_STMT_MAX] = {
        [SQL_SET_UPSERT] = "INSERT INTO object_settings (kind, name, key, value, updated_usec) "
                           "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (kind, name, key) "
                           "DO UPDATE SET value = excluded.value, updated_usec = excluded.updated_usec",
        [SQL_SET_REMOVE] = "DELETE FROM object_settings WHERE kind = ?1 AND name = ?2 AND key = ?3",
        [SQL_SET_REMOVE_ALL] = "DELETE FROM object_settings WHERE kind = ?1 AND name = ?2",
        [SQL_SET_GET] = "SELECT kind, name, key, value, updated_usec FROM object_settings "
                        "WHERE (kind = ?1 AND name = ?2) OR (kind = ?3 AND name = ?4) ORDER BY kind, name, key",
};

static int set_stmt(SqliteStore *q, SqlSettingStmt id, sqlite3_stmt **ret) {
        if (id < 0 || id >= _SQL_SET_STMT_MAX)
                return -EINVAL;
        return sqlite_store_prepare(q, &q->settings[id], setting_sql[id], ret);
}

static int setting_read(sqlite3_stmt *st, void *ret) {
        ObjectSetting *v = ret;

        *v = (ObjectSetting) {};
        CHECK(SQLITE_COL_STR(st, 0, v->kind));
        CHECK(SQLITE_COL_STR(st, 1, v->name));
        CHECK(SQLITE_COL_STR(st, 2, v->key));
        CHECK(SQLITE_COL_STR(st, 3, v->value));
        return sqlite_col_i64(st, 4, &v->updated_usec);
}

int sqlite_op_setting_set(Store *s, const ObjectSetting *v) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(set_stmt(q, SQL_SET_UPSERT, &st));
        CHECK(sqlite_bind_text(q, st, 1, v->kind));
        CHECK(sqlite_bind_text(q, st, 2, v->name));
        CHECK(sqlite_bind_text(q, st, 3, v->key));
        CHECK(sqlite_bind_text(q, st, 4, v->value));
        CHECK(sqlite_bind_int64(q, st, 5, v->updated_usec));
        return sqlite_store_step_done(q, st);
}

int sqlite_op_setting_remove(Store *s, const char *kind, const char *name, const char *key) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(set_stmt(q, key ? SQL_SET_REMOVE : SQL_SET_REMOVE_ALL, &st));
        CHECK(sqlite_bind_text(q, st, 1, kind));
        CHECK(sqlite_bind_text(q, st, 2, name));
        if (key)
                CHECK(sqlite_bind_text(q, st, 3, key));
        return sqlite_store_step_done(q, st);
}

int sqlite_op_settings_get(Store *s, const char *a_kind, const char *a_name, const char *b_kind, const char *b_name,
                           ObjectSetting **ret, size_t *ret_n) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(set_stmt(q, SQL_SET_GET, &st));
        CHECK(sqlite_bind_text(q, st, 1, a_kind));
        CHECK(sqlite_bind_text(q, st, 2, a_name));
        CHECK(sqlite_bind_text(q, st, 3, b_kind));
        CHECK(sqlite_bind_text(q, st, 4, b_name));
        return sqlite_store_list_rows(q, st, sizeof(ObjectSetting), setting_read, NULL, (void **) ret, ret_n);
}
