/* SPDX-License-Identifier: MIT */
/* The PostgreSQL back end's object settings. store-settings.c has checked
 * every argument. */

#include <stdio.h>

#include "store-postgres.h"

static const char *const setting_sql[_PG_SET_STMT_MAX] = {
        [PG_SET_UPSERT] = "INSERT INTO object_settings (kind, name, key, value, updated_usec) "
                          "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (kind, name, key) "
                          "DO UPDATE SET value = excluded.value, updated_usec = excluded.updated_usec",
        [PG_SET_REMOVE] = "DELETE FROM object_settings WHERE kind = $1 AND name = $2 AND key = $3",
        [PG_SET_REMOVE_ALL] = "DELETE FROM object_settings WHERE kind = $1 AND name = $2",
        [PG_SET_GET] = "SELECT kind, name, key, value, updated_usec FROM object_settings "
                       "WHERE (kind = $1 AND name = $2) OR (kind = $3 AND name = $4) ORDER BY kind, name, key",
};

static int set_exec(PgStore *q, PgSettingStmt id, const PgParams *p, PGresult **ret) {
        char name[16];

        if (id < 0 || id >= _PG_SET_STMT_MAX)
                return -EINVAL;
        (void) snprintf(name, sizeof name, "set%d", (int) id);
        return pg_store_exec_slot(q, &q->settings[id], name, setting_sql[id], p, ret);
}

static int setting_read(const PGresult *res, int row, void *ret) {
        ObjectSetting *v = ret;

        *v = (ObjectSetting) {};
        CHECK(PG_COL_STR(res, row, 0, v->kind));
        CHECK(PG_COL_STR(res, row, 1, v->name));
        CHECK(PG_COL_STR(res, row, 2, v->key));
        CHECK(PG_COL_STR(res, row, 3, v->value));
        return pg_col_i64(res, row, 4, &v->updated_usec);
}

int pg_op_setting_set(Store *s, const ObjectSetting *v) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, v->kind);
        pg_param_text(&p, v->name);
        pg_param_text(&p, v->key);
        pg_param_text(&p, v->value);
        pg_param_i64(&p, v->updated_usec);
        return set_exec(pg_store(s), PG_SET_UPSERT, &p, &res);
}

int pg_op_setting_remove(Store *s, const char *kind, const char *name, const char *key) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, kind);
        pg_param_text(&p, name);
        if (key)
                pg_param_text(&p, key);
        return set_exec(pg_store(s), key ? PG_SET_REMOVE : PG_SET_REMOVE_ALL, &p, &res);
}

int pg_op_settings_get(Store *s, const char *a_kind, const char *a_name, const char *b_kind, const char *b_name,
                       ObjectSetting **ret, size_t *ret_n) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, a_kind);
        pg_param_text(&p, a_name);
        pg_param_text(&p, b_kind);
        pg_param_text(&p, b_name);
        CHECK(set_exec(pg_store(s), PG_SET_GET, &p, &res));
        return pg_result_list_rows(res, sizeof(ObjectSetting), setting_read, NULL, (void **) ret, ret_n);
}
