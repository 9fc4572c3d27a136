/* SPDX-License-Identifier: MIT */
/* The SQLite back end's template versions and tags. store-template-versions.c
 * has checked every argument. A version's delete decides (newest, tagged, in
 * use) in its own transaction, and a sandbox insert checks that its version
 * is there in its own (sqlite_template_version_hold): both BEGIN IMMEDIATE,
 * which takes the database's write lock at the BEGIN, so one runs whole
 * before the other: a delete after the insert sees its sandbox (-EBUSY), an
 * insert after the delete finds no row (-EIDRM). */

#include "store-sqlite.h"

/* Sandboxes made from version v of template n that still need it. */
#define VERSION_USERS(n, v)                                                                            \
        "(SELECT COUNT(*) FROM sandboxes s WHERE s.template_name = " n " AND s.template_version = " v  \
        " AND (s.state <> 'deleted' OR EXISTS (SELECT 1 FROM checkpoints c WHERE c.sandbox_id = s.id " \
        "AND c.restorable = 1)))"
#define VERSION_COLUMNS                                                                                \
        "tv.name, tv.version, tv.digest, tv.size_bytes, tv.created_usec, "                             \
        VERSION_USERS("tv.name", "tv.version") ", "                                                    \
        "COALESCE((SELECT group_concat(t.tag, ',') FROM template_tags t "                              \
        "WHERE t.name = tv.name AND t.version = tv.version), '')"

static const char *const version_sql[_SQL_TV_STMT_MAX] = {
        [SQL_TV_ADD] = "INSERT INTO template_versions (name, version, digest, size_bytes, created_usec) "
                       "VALUES (?1, ?2, ?3, ?4, ?5)",
        [SQL_TV_NEXT] = "SELECT COALESCE(MAX(version), 0) + 1 FROM template_versions WHERE name = ?1",
        [SQL_TV_GET] = "SELECT " VERSION_COLUMNS " FROM template_versions tv WHERE tv.name = ?1 AND tv.version = ?2",
        [SQL_TV_LIST] = "SELECT " VERSION_COLUMNS " FROM template_versions tv WHERE tv.name = ?1 "
                        "ORDER BY tv.version DESC",
        [SQL_TV_EXISTS] = "SELECT version FROM template_versions WHERE name = ?1 AND version = ?2",
        [SQL_TV_NEWEST] = "SELECT version FROM template_versions WHERE name = ?1 ORDER BY version DESC LIMIT 1",
        [SQL_TV_DELETE] = "DELETE FROM template_versions WHERE name = ?1 AND version = ?2 "
                          "AND version < (SELECT MAX(version) FROM template_versions WHERE name = ?1) "
                          "AND NOT EXISTS (SELECT 1 FROM template_tags t WHERE t.name = ?1 AND t.version = ?2) "
                          "AND " VERSION_USERS("?1", "?2") " = 0",
        [SQL_TV_DROP_TAGS] = "DELETE FROM template_tags WHERE name = ?1",
        [SQL_TV_DROP] = "DELETE FROM template_versions WHERE name = ?1",
        [SQL_TV_TAG_SET] = "INSERT INTO template_tags (name, tag, version) "
                           "SELECT ?1, ?2, ?3 FROM template_versions WHERE name = ?1 AND version = ?3 "
                           "ON CONFLICT (name, tag) DO UPDATE SET version = excluded.version",
        [SQL_TV_TAG_DELETE] = "DELETE FROM template_tags WHERE name = ?1 AND tag = ?2",
        [SQL_TV_TAG_GET] = "SELECT version FROM template_tags WHERE name = ?1 AND tag = ?2",
        [SQL_TV_TAG_LIST] = "SELECT name, tag, version FROM template_tags WHERE name = ?1 ORDER BY tag",
};

static int tv_stmt(SqliteStore *q, SqlTemplateVersionStmt id, sqlite3_stmt **ret) {
        if (id < 0 || id >= _SQL_TV_STMT_MAX)
                return -EINVAL;
        return sqlite_store_prepare(q, &q->template_versions[id], version_sql[id], ret);
}

static int version_read(sqlite3_stmt *st, void *ret) {
        TemplateVersion v = {};

        CHECK(SQLITE_COL_STR(st, 0, v.name));
        CHECK(sqlite_col_u64(st, 1, &v.version));
        CHECK(SQLITE_COL_STR(st, 2, v.digest));
        CHECK(sqlite_col_u64(st, 3, &v.size_bytes));
        CHECK(sqlite_col_i64(st, 4, &v.created_usec));
        CHECK(sqlite_col_u64(st, 5, &v.users));
        CHECK(SQLITE_COL_STR(st, 6, v.tags));
        *(TemplateVersion *) ret = v;
        return 0;
}

static int tag_read(sqlite3_stmt *st, void *ret) {
        TemplateTag t = {};

        CHECK(SQLITE_COL_STR(st, 0, t.name));
        CHECK(SQLITE_COL_STR(st, 1, t.tag));
        CHECK(sqlite_col_u64(st, 2, &t.version));
        *(TemplateTag *) ret = t;
        return 0;
}

static int version_read_u64(sqlite3_stmt *st, void *ret) {
        return sqlite_col_u64(st, 0, ret);
}

int sqlite_op_template_version_add(Store *s, const TemplateVersion *v) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(tv_stmt(q, SQL_TV_ADD, &st));
        CHECK(sqlite_bind_text(q, st, 1, v->name));
        CHECK(sqlite_bind_int64(q, st, 2, (int64_t) v->version));
        CHECK(sqlite_bind_text(q, st, 3, v->digest));
        CHECK(sqlite_bind_int64(q, st, 4, (int64_t) v->size_bytes));
        CHECK(sqlite_bind_int64(q, st, 5, v->created_usec));
        return sqlite_store_step_done(q, st);
}

int sqlite_op_template_version_next(Store *s, const char *name, uint64_t *ret) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(tv_stmt(q, SQL_TV_NEXT, &st));
        CHECK(sqlite_bind_text(q, st, 1, name));
        return sqlite_store_get_row(q, st, version_read_u64, ret);
}

int sqlite_op_template_version_get(Store *s, const char *name, uint64_t version, TemplateVersion *ret) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(tv_stmt(q, SQL_TV_GET, &st));
        CHECK(sqlite_bind_text(q, st, 1, name));
        CHECK(sqlite_bind_int64(q, st, 2, (int64_t) version));
        return sqlite_store_get_row(q, st, version_read, ret);
}

int sqlite_op_template_version_list(Store *s, const char *name, TemplateVersion **ret, size_t *ret_n) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(tv_stmt(q, SQL_TV_LIST, &st));
        CHECK(sqlite_bind_text(q, st, 1, name));
        return sqlite_store_list_rows(q, st, sizeof(TemplateVersion), version_read, NULL, (void **) ret, ret_n);
}

int sqlite_op_template_version_delete(Store *s, const char *name, uint64_t version) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_tx_ SqliteStore *tx = NULL;
        TemplateVersion v;

        CHECK(sqlite_store_begin(q, &tx));
        CHECK(sqlite_op_template_version_get(s, name, version, &v));
        {
                _cleanup_stmt_ sqlite3_stmt *st = NULL;
                int r;

                CHECK(tv_stmt(q, SQL_TV_DELETE, &st));
                CHECK(sqlite_bind_text(q, st, 1, name));
                CHECK(sqlite_bind_int64(q, st, 2, (int64_t) version));
                r = sqlite_store_step_changed(q, st);
                if (r == -ENOENT)
                        return -EBUSY;
                CHECK(r);
        }
        return sqlite_store_commit(&tx);
}

int sqlite_template_version_hold(SqliteStore *q, const char *name, bool newest, uint64_t *version) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        CHECK(tv_stmt(q, newest ? SQL_TV_NEWEST : SQL_TV_EXISTS, &st));
        CHECK(sqlite_bind_text(q, st, 1, name));
        if (!newest)
                CHECK(sqlite_bind_int64(q, st, 2, (int64_t) *version));
        r = sqlite_store_get_row(q, st, version_read_u64, version);
        return r == -ENOENT ? -EIDRM : r;
}

int sqlite_op_template_versions_drop(Store *s, const char *name) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_tx_ SqliteStore *tx = NULL;

        CHECK(sqlite_store_begin(q, &tx));
        {
                _cleanup_stmt_ sqlite3_stmt *st = NULL;
                CHECK(tv_stmt(q, SQL_TV_DROP_TAGS, &st));
                CHECK(sqlite_bind_text(q, st, 1, name));
                CHECK(sqlite_store_step_done(q, st));
        }
        {
                _cleanup_stmt_ sqlite3_stmt *st = NULL;
                CHECK(tv_stmt(q, SQL_TV_DROP, &st));
                CHECK(sqlite_bind_text(q, st, 1, name));
                CHECK(sqlite_store_step_done(q, st));
        }
        return sqlite_store_commit(&tx);
}

int sqlite_op_template_tag_set(Store *s, const char *name, const char *tag, uint64_t version) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(tv_stmt(q, SQL_TV_TAG_SET, &st));
        CHECK(sqlite_bind_text(q, st, 1, name));
        CHECK(sqlite_bind_text(q, st, 2, tag));
        CHECK(sqlite_bind_int64(q, st, 3, (int64_t) version));
        return sqlite_store_step_changed(q, st);
}

int sqlite_op_template_tag_delete(Store *s, const char *name, const char *tag) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(tv_stmt(q, SQL_TV_TAG_DELETE, &st));
        CHECK(sqlite_bind_text(q, st, 1, name));
        CHECK(sqlite_bind_text(q, st, 2, tag));
        return sqlite_store_step_changed(q, st);
}

int sqlite_op_template_tag_get(Store *s, const char *name, const char *tag, uint64_t *ret_version) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(tv_stmt(q, SQL_TV_TAG_GET, &st));
        CHECK(sqlite_bind_text(q, st, 1, name));
        CHECK(sqlite_bind_text(q, st, 2, tag));
        return sqlite_store_get_row(q, st, version_read_u64, ret_version);
}

int sqlite_op_template_tag_list(Store *s, const char *name, TemplateTag **ret, size_t *ret_n) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(tv_stmt(q, SQL_TV_TAG_LIST, &st));
        CHECK(sqlite_bind_text(q, st, 1, name));
        return sqlite_store_list_rows(q, st, sizeof(TemplateTag), tag_read, NULL, (void **) ret, ret_n);
}
