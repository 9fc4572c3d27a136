/* SPDX-License-Identifier: MIT */
/* The PostgreSQL back end's template versions and tags, with the semantics
 * of the SQLite ones (store-sqlite-template-versions.c). A version's delete
 * locks its row first (FOR UPDATE), so two servers collecting it take turns;
 * a sandbox insert holds the row FOR KEY SHARE (pg_template_version_hold),
 * so a delete and an insert of a sandbox using the version take turns too:
 * under READ COMMITTED the delete's next statement, once the lock is its,
 * sees the committed sandbox (-EBUSY), and an insert that waited for a
 * delete finds no row (-EIDRM). */

#include <stdio.h>

#include "store-postgres.h"

#define VERSION_USERS(n, v)                                                                            \
        "(SELECT COUNT(*) FROM sandboxes s WHERE s.template_name = " n " AND s.template_version = " v  \
        " AND (s.state <> 'deleted' OR EXISTS (SELECT 1 FROM checkpoints c WHERE c.sandbox_id = s.id " \
        "AND c.restorable)))"
#define VERSION_COLUMNS                                                                                \
        "tv.name, tv.version, tv.digest, tv.size_bytes, tv.created_usec, "                             \
        VERSION_USERS("tv.name", "tv.version") ", "                                                    \
        "COALESCE((SELECT string_agg(t.tag, ',' ORDER BY t.tag) FROM template_tags t "                 \
        "WHERE t.name = tv.name AND t.version = tv.version), '')"

static const char *const version_sql[_PG_TV_STMT_MAX] = {
        [PG_TV_ADD] = "INSERT INTO template_versions (name, version, digest, size_bytes, created_usec) "
                      "VALUES ($1, $2, $3, $4, $5)",
        [PG_TV_NEXT] = "SELECT COALESCE(MAX(version), 0) + 1 FROM template_versions WHERE name = $1",
        [PG_TV_GET] = "SELECT " VERSION_COLUMNS " FROM template_versions tv WHERE tv.name = $1 AND tv.version = $2",
        [PG_TV_LIST] = "SELECT " VERSION_COLUMNS " FROM template_versions tv WHERE tv.name = $1 "
                       "ORDER BY tv.version DESC",
        [PG_TV_LOCK] = "SELECT version FROM template_versions WHERE name = $1 AND version = $2 FOR UPDATE",
        [PG_TV_HOLD] = "SELECT version FROM template_versions WHERE name = $1 AND version = $2 FOR KEY SHARE",
        /* a row deleted while this waited for it is skipped: then none (the name's versions were dropped) */
        [PG_TV_HOLD_NEWEST] = "SELECT version FROM template_versions WHERE name = $1 "
                              "ORDER BY version DESC LIMIT 1 FOR KEY SHARE",
        [PG_TV_DELETE] = "DELETE FROM template_versions WHERE name = $1 AND version = $2 "
                         "AND version < (SELECT MAX(version) FROM template_versions WHERE name = $1) "
                         "AND NOT EXISTS (SELECT 1 FROM template_tags t WHERE t.name = $1 AND t.version = $2) "
                         "AND " VERSION_USERS("$1", "$2") " = 0",
        [PG_TV_DROP] = "WITH t AS (DELETE FROM template_tags WHERE name = $1) "
                       "DELETE FROM template_versions WHERE name = $1",
        [PG_TV_TAG_SET] = "INSERT INTO template_tags (name, tag, version) "
                          "SELECT $1, $2, $3 FROM template_versions WHERE name = $1 AND version = $3 "
                          "ON CONFLICT (name, tag) DO UPDATE SET version = excluded.version",
        [PG_TV_TAG_DELETE] = "DELETE FROM template_tags WHERE name = $1 AND tag = $2",
        [PG_TV_TAG_GET] = "SELECT version FROM template_tags WHERE name = $1 AND tag = $2",
        [PG_TV_TAG_LIST] = "SELECT name, tag, version FROM template_tags WHERE name = $1 ORDER BY tag",
};

static int tv_exec(PgStore *q, PgTemplateVersionStmt id, const PgParams *p, PGresult **ret) {
        char name[16];

        if (id < 0 || id >= _PG_TV_STMT_MAX)
                return -EINVAL;
        (void) snprintf(name, sizeof name, "tv%d", (int) id);
        return pg_store_exec_slot(q, &q->template_versions[id], name, version_sql[id], p, ret);
}

static int version_read(const PGresult *res, int row, void *ret) {
        TemplateVersion v = {};

        CHECK(PG_COL_STR(res, row, 0, v.name));
        CHECK(pg_col_u64(res, row, 1, &v.version));
        CHECK(PG_COL_STR(res, row, 2, v.digest));
        CHECK(pg_col_u64(res, row, 3, &v.size_bytes));
        CHECK(pg_col_i64(res, row, 4, &v.created_usec));
        CHECK(pg_col_u64(res, row, 5, &v.users));
        CHECK(PG_COL_STR(res, row, 6, v.tags));
        *(TemplateVersion *) ret = v;
        return 0;
}

static int tag_read(const PGresult *res, int row, void *ret) {
        TemplateTag t = {};

        CHECK(PG_COL_STR(res, row, 0, t.name));
        CHECK(PG_COL_STR(res, row, 1, t.tag));
        CHECK(pg_col_u64(res, row, 2, &t.version));
        *(TemplateTag *) ret = t;
        return 0;
}

static int u64_read(const PGresult *res, int row, void *ret) {
        return pg_col_u64(res, row, 0, ret);
}

int pg_op_template_version_add(Store *s, const TemplateVersion *v) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, v->name);
        pg_param_i64(&p, (int64_t) v->version);
        pg_param_text(&p, v->digest);
        pg_param_i64(&p, (int64_t) v->size_bytes);
        pg_param_i64(&p, v->created_usec);
        return tv_exec(pg_store(s), PG_TV_ADD, &p, &res);
}

int pg_op_template_version_next(Store *s, const char *name, uint64_t *ret) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, name);
        CHECK(tv_exec(pg_store(s), PG_TV_NEXT, &p, &res));
        return pg_result_get_row(res, u64_read, ret);
}

int pg_op_template_version_get(Store *s, const char *name, uint64_t version, TemplateVersion *ret) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, name);
        pg_param_i64(&p, (int64_t) version);
        CHECK(tv_exec(pg_store(s), PG_TV_GET, &p, &res));
        return pg_result_get_row(res, version_read, ret);
}

int pg_op_template_version_list(Store *s, const char *name, TemplateVersion **ret, size_t *ret_n) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, name);
        CHECK(tv_exec(pg_store(s), PG_TV_LIST, &p, &res));
        return pg_result_list_rows(res, sizeof(TemplateVersion), version_read, NULL, (void **) ret, ret_n);
}

typedef struct VersionKey {
        const char *name;
        uint64_t version;
} VersionKey;

static int version_delete_tx(PgStore *q, void *userdata) {
        const VersionKey *k = userdata;
        PgParams p = {};

        pg_param_text(&p, k->name);
        pg_param_i64(&p, (int64_t) k->version);
        {
                _cleanup_pgresult_ PGresult *res = NULL;
                CHECK(tv_exec(q, PG_TV_LOCK, &p, &res));
                if (PQntuples(res) == 0)
                        return -ENOENT;
        }
        {
                _cleanup_pgresult_ PGresult *res = NULL;
                CHECK(tv_exec(q, PG_TV_DELETE, &p, &res));
                return pg_result_changes(res) > 0 ? 0 : -EBUSY;
        }
}

int pg_op_template_version_delete(Store *s, const char *name, uint64_t version) {
        VersionKey k = { name, version };

        return pg_store_transact(pg_store(s), version_delete_tx, &k);
}

int pg_template_version_hold(PgStore *q, const char *name, bool newest, uint64_t *version) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, name);
        if (!newest)
                pg_param_i64(&p, (int64_t) *version);
        CHECK(tv_exec(q, newest ? PG_TV_HOLD_NEWEST : PG_TV_HOLD, &p, &res));
        if (PQntuples(res) == 0)
                return -EIDRM;
        return pg_result_get_row(res, u64_read, version);
}

int pg_op_template_versions_drop(Store *s, const char *name) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, name);
        return tv_exec(pg_store(s), PG_TV_DROP, &p, &res);
}

int pg_op_template_tag_set(Store *s, const char *name, const char *tag, uint64_t version) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, name);
        pg_param_text(&p, tag);
        pg_param_i64(&p, (int64_t) version);
        CHECK(tv_exec(pg_store(s), PG_TV_TAG_SET, &p, &res));
        return pg_result_changes(res) > 0 ? 0 : -ENOENT;
}

int pg_op_template_tag_delete(Store *s, const char *name, const char *tag) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, name);
        pg_param_text(&p, tag);
        CHECK(tv_exec(pg_store(s), PG_TV_TAG_DELETE, &p, &res));
        return pg_result_changes(res) > 0 ? 0 : -ENOENT;
}

int pg_op_template_tag_get(Store *s, const char *name, const char *tag, uint64_t *ret_version) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, name);
        pg_param_text(&p, tag);
        CHECK(tv_exec(pg_store(s), PG_TV_TAG_GET, &p, &res));
        return pg_result_get_row(res, u64_read, ret_version);
}

int pg_op_template_tag_list(Store *s, const char *name, TemplateTag **ret, size_t *ret_n) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, name);
        CHECK(tv_exec(pg_store(s), PG_TV_TAG_LIST, &p, &res));
        return pg_result_list_rows(res, sizeof(TemplateTag), tag_read, NULL, (void **) ret, ret_n);
}
