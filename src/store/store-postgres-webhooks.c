/* SPDX-License-Identifier: MIT */
/* The PostgreSQL back end's webhooks. store-webhooks.c has checked every
 * argument. */

#include <stdio.h>

#include "store-postgres.h"
#include "str-util.h"

#define WH_COLUMNS                                                                                  \
        "id, tenant_id, name, url, events_json, secret, enabled, created_usec, last_seq, failures, " \
        "next_usec, failing_since_usec, last_error, format"

static const char *const webhook_sql[_PG_WH_STMT_MAX] = {
        [PG_WH_INSERT] =
                "INSERT INTO webhooks (" WH_COLUMNS ") "
                "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, (SELECT COALESCE(MAX(seq), 0) FROM events), 0, 0, 0, '', $9) "
                "RETURNING last_seq",
        [PG_WH_GET] = "SELECT " WH_COLUMNS " FROM webhooks WHERE tenant_id = $1 AND id = $2",
        [PG_WH_LIST] = "SELECT " WH_COLUMNS " FROM webhooks WHERE tenant_id = $1 ORDER BY created_usec, id",
        [PG_WH_LIST_ALL] = "SELECT " WH_COLUMNS " FROM webhooks ORDER BY created_usec, id",
        [PG_WH_UPDATE] =
                "UPDATE webhooks SET name = $3, url = $4, events_json = $5, "
                "failures = CASE WHEN $6::boolean AND NOT enabled THEN 0 ELSE failures END, "
                "next_usec = CASE WHEN $6::boolean AND NOT enabled THEN 0 ELSE next_usec END, "
                "failing_since_usec = CASE WHEN $6::boolean AND NOT enabled THEN 0 ELSE failing_since_usec END, "
                "enabled = $6::boolean WHERE tenant_id = $1 AND id = $2",
        [PG_WH_DELETE] = "DELETE FROM webhooks WHERE tenant_id = $1 AND id = $2",
        [PG_WH_SET_STATE] =
                "UPDATE webhooks SET last_seq = $2, failures = $3, next_usec = $4, failing_since_usec = $5, "
                "last_error = $6, enabled = CASE WHEN $7::boolean THEN FALSE ELSE enabled END WHERE id = $1",
        [PG_WH_SET_SECRET] = "UPDATE webhooks SET secret = $3 WHERE id = $1 AND secret = $2",
};

static int wh_exec(PgStore *q, PgWebhookStmt id, const PgParams *p, PGresult **ret) {
        char name[16];

        if (id < 0 || id >= _PG_WH_STMT_MAX)
                return -EINVAL;
        (void) snprintf(name, sizeof name, "wh%d", (int) id);
        return pg_store_exec_slot(q, &q->webhooks[id], name, webhook_sql[id], p, ret);
}

static int wh_read(const PGresult *res, int row, void *ret) {
        Webhook w = {};
        char format[8];

        CHECK(PG_COL_STR(res, row, 0, w.id));
        CHECK(PG_COL_STR(res, row, 1, w.tenant_id));
        CHECK(PG_COL_STR(res, row, 2, w.name));
        CHECK(PG_COL_STR(res, row, 3, w.url));
        CHECK(PG_COL_STR(res, row, 4, w.events_json));
        CHECK(PG_COL_STR(res, row, 5, w.secret));
        CHECK(pg_col_bool(res, row, 6, &w.enabled));
        CHECK(pg_col_i64(res, row, 7, &w.created_usec));
        CHECK(pg_col_i64(res, row, 8, &w.last_seq));
        CHECK(pg_col_u64(res, row, 9, &w.failures));
        CHECK(pg_col_i64(res, row, 10, &w.next_usec));
        CHECK(pg_col_i64(res, row, 11, &w.failing_since_usec));
        CHECK(PG_COL_STR(res, row, 12, w.last_error));
        CHECK(PG_COL_STR(res, row, 13, format));
        if (!streq(format, "space") && !streq(format, "e2b"))
                return -EBADMSG;
        w.e2b = streq(format, "e2b");
        if (w.created_usec < 0 || w.last_seq < 0 || w.next_usec < 0 || w.failing_since_usec < 0)
                return -EBADMSG;
        *(Webhook *) ret = w;
        return 0;
}

int pg_op_webhook_insert(Store *s, Webhook *w) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, w->id);
        pg_param_text(&p, w->tenant_id);
        pg_param_text(&p, w->name);
        pg_param_text(&p, w->url);
        pg_param_text(&p, w->events_json);
        pg_param_text(&p, w->secret);
        pg_param_bool(&p, w->enabled);
        pg_param_i64(&p, w->created_usec);
        pg_param_text(&p, w->e2b ? "e2b" : "space");
        CHECK(wh_exec(pg_store(s), PG_WH_INSERT, &p, &res));
        if (PQntuples(res) != 1)
                return -EBADMSG;
        CHECK(pg_col_i64(res, 0, 0, &w->last_seq));
        w->failures = 0;
        w->next_usec = w->failing_since_usec = 0;
        w->last_error[0] = 0;
        return 0;
}

int pg_op_webhook_get(Store *s, const char *tenant_id, const char *id, Webhook *ret) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, tenant_id);
        pg_param_text(&p, id);
        CHECK(wh_exec(pg_store(s), PG_WH_GET, &p, &res));
        return pg_result_get_row(res, wh_read, ret);
}

int pg_op_webhook_list(Store *s, const char *tenant_id, Webhook **ret, size_t *ret_n) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        if (tenant_id)
                pg_param_text(&p, tenant_id);
        CHECK(wh_exec(pg_store(s), tenant_id ? PG_WH_LIST : PG_WH_LIST_ALL, &p, &res));
        return pg_result_list_rows(res, sizeof(Webhook), wh_read, NULL, (void **) ret, ret_n);
}

int pg_op_webhook_update(Store *s, const Webhook *w) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, w->tenant_id);
        pg_param_text(&p, w->id);
        pg_param_text(&p, w->name);
        pg_param_text(&p, w->url);
        pg_param_text(&p, w->events_json);
        pg_param_bool(&p, w->enabled);
        CHECK(wh_exec(pg_store(s), PG_WH_UPDATE, &p, &res));
        return pg_result_changes(res) == 0 ? -ENOENT : 0;
}

int pg_op_webhook_delete(Store *s, const char *tenant_id, const char *id) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, tenant_id);
        pg_param_text(&p, id);
        CHECK(wh_exec(pg_store(s), PG_WH_DELETE, &p, &res));
        return pg_result_changes(res) == 0 ? -ENOENT : 0;
}

int pg_op_webhook_set_state(Store *s, const Webhook *w, bool disable) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, w->id);
        pg_param_i64(&p, w->last_seq);
        pg_param_i64(&p, (int64_t) w->failures);
        pg_param_i64(&p, w->next_usec);
        pg_param_i64(&p, w->failing_since_usec);
        pg_param_text(&p, w->last_error);
        pg_param_bool(&p, disable);
        CHECK(wh_exec(pg_store(s), PG_WH_SET_STATE, &p, &res));
        return pg_result_changes(res) == 0 ? -ENOENT : 0;
}

int pg_op_webhook_set_secret(Store *s, const char *id, const char *old, const char *secret) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, id);
        pg_param_text(&p, old);
        pg_param_text(&p, secret);
        CHECK(wh_exec(pg_store(s), PG_WH_SET_SECRET, &p, &res));
        return pg_result_changes(res) == 0 ? -ESTALE : 0;
}
