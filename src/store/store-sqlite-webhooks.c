/* SPDX-License-Identifier: MIT */
/* The SQLite back end's webhooks. store-webhooks.c has checked every
 * argument. */

#include "store-sqlite.h"
#include "str-util.h"

#define WH_COLUMNS                                                                                  \
        "id, tenant_id, name, url, events_json, secret, enabled, created_usec, last_seq, failures, " \
        "next_usec, failing_since_usec, last_error, format"

static const char *const webhook_sql[_SQL_WH_STMT_MAX] = {
        [SQL_WH_INSERT] =
                "INSERT INTO webhooks (" WH_COLUMNS ") "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, (SELECT COALESCE(MAX(seq), 0) FROM events), 0, 0, 0, '', ?9) "
                "RETURNING last_seq",
        [SQL_WH_GET] = "SELECT " WH_COLUMNS " FROM webhooks WHERE tenant_id = ?1 AND id = ?2",
        [SQL_WH_LIST] = "SELECT " WH_COLUMNS " FROM webhooks WHERE tenant_id = ?1 ORDER BY created_usec, id",
        [SQL_WH_LIST_ALL] = "SELECT " WH_COLUMNS " FROM webhooks ORDER BY created_usec, id",
        [SQL_WH_UPDATE] =
                "UPDATE webhooks SET name = ?3, url = ?4, events_json = ?5, "
                "failures = CASE WHEN ?6 = 1 AND enabled = 0 THEN 0 ELSE failures END, "
                "next_usec = CASE WHEN ?6 = 1 AND enabled = 0 THEN 0 ELSE next_usec END, "
                "failing_since_usec = CASE WHEN ?6 = 1 AND enabled = 0 THEN 0 ELSE failing_since_usec END, "
                "enabled = ?6 WHERE tenant_id = ?1 AND id = ?2",
        [SQL_WH_DELETE] = "DELETE FROM webhooks WHERE tenant_id = ?1 AND id = ?2",
        [SQL_WH_SET_STATE] =
                "UPDATE webhooks SET last_seq = ?2, failures = ?3, next_usec = ?4, failing_since_usec = ?5, "
                "last_error = ?6, enabled = CASE WHEN ?7 = 1 THEN 0 ELSE enabled END WHERE id = ?1",
        [SQL_WH_SET_SECRET] = "UPDATE webhooks SET secret = ?3 WHERE id = ?1 AND secret = ?2",
};

static int wh_stmt(SqliteStore *q, SqlWebhookStmt id, sqlite3_stmt **ret) {
        if (id < 0 || id >= _SQL_WH_STMT_MAX)
                return -EINVAL;
        return sqlite_store_prepare(q, &q->webhooks[id], webhook_sql[id], ret);
}

static int wh_read(sqlite3_stmt *st, void *ret) {
        Webhook w = {};
        char format[8];

        CHECK(SQLITE_COL_STR(st, 0, w.id));
        CHECK(SQLITE_COL_STR(st, 1, w.tenant_id));
        CHECK(SQLITE_COL_STR(st, 2, w.name));
        CHECK(SQLITE_COL_STR(st, 3, w.url));
        CHECK(SQLITE_COL_STR(st, 4, w.events_json));
        CHECK(SQLITE_COL_STR(st, 5, w.secret));
        w.enabled = sqlite3_column_int64(st, 6) != 0;
        CHECK(sqlite_col_i64(st, 7, &w.created_usec));
        CHECK(sqlite_col_i64(st, 8, &w.last_seq));
        CHECK(sqlite_col_u64(st, 9, &w.failures));
        CHECK(sqlite_col_i64(st, 10, &w.next_usec));
        CHECK(sqlite_col_i64(st, 11, &w.failing_since_usec));
        CHECK(SQLITE_COL_STR(st, 12, w.last_error));
        CHECK(SQLITE_COL_STR(st, 13, format));
        if (!streq(format, "space") && !streq(format, "e2b"))
                return -EBADMSG;
        w.e2b = streq(format, "e2b");
        *(Webhook *) ret = w;
        return 0;
}

int sqlite_op_webhook_insert(Store *s, Webhook *w) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        CHECK(wh_stmt(q, SQL_WH_INSERT, &st));
        CHECK(sqlite_bind_text(q, st, 1, w->id));
        CHECK(sqlite_bind_text(q, st, 2, w->tenant_id));
        CHECK(sqlite_bind_text(q, st, 3, w->name));
        CHECK(sqlite_bind_text(q, st, 4, w->url));
        CHECK(sqlite_bind_text(q, st, 5, w->events_json));
        CHECK(sqlite_bind_text(q, st, 6, w->secret));
        CHECK(sqlite_bind_int64(q, st, 7, w->enabled ? 1 : 0));
        CHECK(sqlite_bind_int64(q, st, 8, w->created_usec));
        CHECK(sqlite_bind_text(q, st, 9, w->e2b ? "e2b" : "space"));
        r = sqlite_store_step(q, st);
        if (r < 0)
                return r;
        if (r == 0)
                return -EIO;
        CHECK(sqlite_col_i64(st, 0, &w->last_seq));
        w->failures = 0;
        w->next_usec = w->failing_since_usec = 0;
        w->last_error[0] = 0;
        return sqlite_store_step_done(q, st);
}

int sqlite_op_webhook_get(Store *s, const char *tenant_id, const char *id, Webhook *ret) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(wh_stmt(q, SQL_WH_GET, &st));
        CHECK(sqlite_bind_text(q, st, 1, tenant_id));
        CHECK(sqlite_bind_text(q, st, 2, id));
        return sqlite_store_get_row(q, st, wh_read, ret);
}

int sqlite_op_webhook_list(Store *s, const char *tenant_id, Webhook **ret, size_t *ret_n) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(wh_stmt(q, tenant_id ? SQL_WH_LIST : SQL_WH_LIST_ALL, &st));
        if (tenant_id)
                CHECK(sqlite_bind_text(q, st, 1, tenant_id));
        return sqlite_store_list_rows(q, st, sizeof(Webhook), wh_read, NULL, (void **) ret, ret_n);
}

int sqlite_op_webhook_update(Store *s, const Webhook *w) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(wh_stmt(q, SQL_WH_UPDATE, &st));
        CHECK(sqlite_bind_text(q, st, 1, w->tenant_id));
        CHECK(sqlite_bind_text(q, st, 2, w->id));
        CHECK(sqlite_bind_text(q, st, 3, w->name));
        CHECK(sqlite_bind_text(q, st, 4, w->url));
        CHECK(sqlite_bind_text(q, st, 5, w->events_json));
        CHECK(sqlite_bind_int64(q, st, 6, w->enabled ? 1 : 0));
        CHECK(sqlite_store_step_done(q, st));
        return sqlite3_changes64(q->db) == 0 ? -ENOENT : 0;
}

int sqlite_op_webhook_delete(Store *s, const char *tenant_id, const char *id) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(wh_stmt(q, SQL_WH_DELETE, &st));
        CHECK(sqlite_bind_text(q, st, 1, tenant_id));
        CHECK(sqlite_bind_text(q, st, 2, id));
        CHECK(sqlite_store_step_done(q, st));
        return sqlite3_changes64(q->db) == 0 ? -ENOENT : 0;
}

int sqlite_op_webhook_set_state(Store *s, const Webhook *w, bool disable) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(wh_stmt(q, SQL_WH_SET_STATE, &st));
        CHECK(sqlite_bind_text(q, st, 1, w->id));
        CHECK(sqlite_bind_int64(q, st, 2, w->last_seq));
        CHECK(sqlite_bind_int64(q, st, 3, (int64_t) w->failures));
        CHECK(sqlite_bind_int64(q, st, 4, w->next_usec));
        CHECK(sqlite_bind_int64(q, st, 5, w->failing_since_usec));
        CHECK(sqlite_bind_text(q, st, 6, w->last_error));
        CHECK(sqlite_bind_int64(q, st, 7, disable ? 1 : 0));
        CHECK(sqlite_store_step_done(q, st));
        return sqlite3_changes64(q->db) == 0 ? -ENOENT : 0;
}

int sqlite_op_webhook_set_secret(Store *s, const char *id, const char *old, const char *secret) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(wh_stmt(q, SQL_WH_SET_SECRET, &st));
        CHECK(sqlite_bind_text(q, st, 1, id));
        CHECK(sqlite_bind_text(q, st, 2, old));
        CHECK(sqlite_bind_text(q, st, 3, secret));
        CHECK(sqlite_store_step_done(q, st));
        return sqlite3_changes64(q->db) == 0 ? -ESTALE : 0;
}
