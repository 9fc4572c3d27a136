/* SPDX-License-Identifier: MIT */
/* The SQLite back end's credentials and grants. store-credentials.c has
 * checked every argument. An update is a compare-and-set on the version; a
 * delete removes the grants in the same transaction; a master key rotation
 * re-seals every row and sets the key's settings in one transaction
 * (BEGIN IMMEDIATE: no other writer meanwhile). */

#include "alloc-util.h"
#include "cred-crypt.h"
#include "store-sqlite.h"
#include "str-util.h"

#define CRED_COLUMNS                                                                          \
        "c.id, c.tenant_id, c.name, c.hosts_json, c.apply, c.header_name, c.header_format, "  \
        "c.basic_user, c.env_name, c.ciphertext, c.nonce, c.key_id, c.created_usec, "         \
        "c.updated_usec, c.expires_usec, c.revoked_usec, c.version"

#define GRANT_COLUMNS                                                                                  \
        "c.id, c.tenant_id, c.name, COALESCE(g.hosts_json, c.hosts_json), "                            \
        "CASE WHEN g.hosts_json IS NULL THEN c.apply ELSE 'header' END, "                              \
        "COALESCE(g.header_name, c.header_name), COALESCE(g.header_format, c.header_format), "         \
        "CASE WHEN g.hosts_json IS NULL THEN c.basic_user ELSE '' END, c.env_name, c.ciphertext, "     \
        "c.nonce, c.key_id, c.created_usec, c.updated_usec, c.expires_usec, c.revoked_usec, c.version, " \
        "CASE WHEN g.hosts_json IS NULL THEN 0 ELSE 1 END"

static const char *const cred_sql[_SQL_CRED_STMT_MAX] = {
        /* only under the master key the store names (once a rotation named one):
         * a value sealed just before a rotation committed is refused, not kept */
        [SQL_CRED_INSERT] =
                "INSERT INTO credentials (id, tenant_id, name, hosts_json, apply, header_name, header_format, "
                "basic_user, env_name, ciphertext, nonce, key_id, created_usec, updated_usec, expires_usec, "
                "revoked_usec, version) "
                "SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17 "
                "WHERE NOT EXISTS (SELECT 1 FROM cluster_settings WHERE name = '" CRED_KEY_ID_SETTING "' "
                "AND value <> ?12)",
        [SQL_CRED_GET] = "SELECT " CRED_COLUMNS " FROM credentials c WHERE c.tenant_id = ?1 AND c.name = ?2",
        [SQL_CRED_LIST] = "SELECT " CRED_COLUMNS " FROM credentials c WHERE c.tenant_id = ?1 ORDER BY c.name",
        [SQL_CRED_UPDATE] =
                "UPDATE credentials SET hosts_json = ?4, apply = ?5, header_name = ?6, header_format = ?7, "
                "basic_user = ?8, env_name = ?9, ciphertext = ?10, nonce = ?11, key_id = ?12, "
                "expires_usec = ?13, revoked_usec = ?14, updated_usec = ?15, version = version + 1 "
                "WHERE tenant_id = ?1 AND name = ?2 AND version = ?3 RETURNING version",
        [SQL_CRED_DELETE] = "DELETE FROM credentials WHERE tenant_id = ?1 AND name = ?2 RETURNING id",
        [SQL_CRED_DELETE_GRANTS] = "DELETE FROM credential_grants WHERE credential_id = ?1",
        [SQL_CRED_EXISTS] = "SELECT 1 FROM credentials WHERE tenant_id = ?1 AND name = ?2",
        [SQL_GRANT_INSERT] =
                "INSERT INTO credential_grants (sandbox_id, credential_id, tenant_id, created_usec, hosts_json, "
                "header_name, header_format) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        [SQL_GRANT_DELETE] = "DELETE FROM credential_grants WHERE sandbox_id = ?1 AND credential_id = ?2",
        [SQL_GRANT_LIST] =
                "SELECT " GRANT_COLUMNS " FROM credential_grants g JOIN credentials c ON c.id = g.credential_id "
                "WHERE g.sandbox_id = ?1 AND c.tenant_id = g.tenant_id ORDER BY c.name",
        [SQL_CRED_ALL] = "SELECT " CRED_COLUMNS " FROM credentials c ORDER BY c.tenant_id, c.name",
        [SQL_CRED_RESEAL] = "UPDATE credentials SET ciphertext = ?2, nonce = ?3, key_id = ?4, version = version + 1 "
                            "WHERE id = ?1",
        [SQL_CRED_SETTING_GET] = "SELECT value FROM cluster_settings WHERE name = ?1",
        [SQL_CRED_SETTING_SET] = "INSERT INTO cluster_settings (name, value) VALUES (?1, ?2) "
                                 "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
};

static int cred_stmt(SqliteStore *q, SqlCredStmt id, sqlite3_stmt **ret) {
        if (id < 0 || id >= _SQL_CRED_STMT_MAX)
                return -EINVAL;
        return sqlite_store_prepare(q, &q->credentials[id], cred_sql[id], ret);
}

static int cred_read(sqlite3_stmt *st, void *ret) {
        _cleanup_(credential_done) Credential c = {};
        char apply[16];
        int r;

        CHECK(SQLITE_COL_STR(st, 0, c.id));
        CHECK(SQLITE_COL_STR(st, 1, c.tenant_id));
        CHECK(SQLITE_COL_STR(st, 2, c.name));
        CHECK(sqlite_col_strdup(st, 3, &c.hosts_json));
        CHECK(SQLITE_COL_STR(st, 4, apply));
        r = cred_apply_from_string(apply);
        if (r < 0)
                return -EBADMSG;
        c.apply = (CredApply) r;
        CHECK(SQLITE_COL_STR(st, 5, c.header_name));
        CHECK(SQLITE_COL_STR(st, 6, c.header_format));
        CHECK(SQLITE_COL_STR(st, 7, c.basic_user));
        CHECK(SQLITE_COL_STR(st, 8, c.env_name));
        CHECK(sqlite_col_strdup(st, 9, &c.ciphertext));
        CHECK(SQLITE_COL_STR(st, 10, c.nonce));
        CHECK(SQLITE_COL_STR(st, 11, c.key_id));
        CHECK(sqlite_col_i64(st, 12, &c.created_usec));
        CHECK(sqlite_col_i64(st, 13, &c.updated_usec));
        CHECK(sqlite_col_i64(st, 14, &c.expires_usec));
        CHECK(sqlite_col_i64(st, 15, &c.revoked_usec));
        CHECK(sqlite_col_u64(st, 16, &c.version));
        if (!c.hosts_json || !c.ciphertext)
                return -EBADMSG;
        *(Credential *) ret = c;
        c = (Credential) {};
        return 0;
}

static void cred_rows_free(void *rows, size_t n) {
        credential_array_free(rows, n);
}

static int grant_read(sqlite3_stmt *st, void *ret) {
        int64_t scoped = 0;

        CHECK(sqlite_col_i64(st, 17, &scoped));
        CHECK(cred_read(st, ret));
        ((Credential *) ret)->grant_scoped = scoped != 0;
        return 0;
}

static int cred_read_all(SqliteStore *q, sqlite3_stmt *st, Credential **ret, size_t *ret_n) {
        return sqlite_store_list_rows(q, st, sizeof(Credential), cred_read, cred_rows_free, (void **) ret, ret_n);
}

/* Parameters 4-12 of the insert and the update: what a credential says and its sealed value. */
static int cred_bind_fields(SqliteStore *q, sqlite3_stmt *st, const Credential *c) {
        CHECK(sqlite_bind_text(q, st, 4, c->hosts_json));
        CHECK(sqlite_bind_text(q, st, 5, cred_apply_to_string(c->apply)));
        CHECK(sqlite_bind_text(q, st, 6, c->header_name));
        CHECK(sqlite_bind_text(q, st, 7, c->header_format));
        CHECK(sqlite_bind_text(q, st, 8, c->basic_user));
        CHECK(sqlite_bind_text(q, st, 9, c->env_name));
        CHECK(sqlite_bind_text(q, st, 10, c->ciphertext));
        CHECK(sqlite_bind_text(q, st, 11, c->nonce));
        CHECK(sqlite_bind_text(q, st, 12, c->key_id));
        return 0;
}

int sqlite_op_credential_insert(Store *s, const Credential *c) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(cred_stmt(q, SQL_CRED_INSERT, &st));
        CHECK(sqlite_bind_text(q, st, 1, c->id));
        CHECK(sqlite_bind_text(q, st, 2, c->tenant_id));
        CHECK(sqlite_bind_text(q, st, 3, c->name));
        CHECK(cred_bind_fields(q, st, c));
        CHECK(sqlite_bind_int64(q, st, 13, c->created_usec));
        CHECK(sqlite_bind_int64(q, st, 14, c->updated_usec));
        CHECK(sqlite_bind_int64(q, st, 15, c->expires_usec));
        CHECK(sqlite_bind_int64(q, st, 16, c->revoked_usec));
        CHECK(sqlite_bind_int64(q, st, 17, (int64_t) c->version));
        CHECK(sqlite_store_step_done(q, st));
        return sqlite3_changes64(q->db) == 1 ? 0 : -EKEYEXPIRED;
}

int sqlite_op_credential_get(Store *s, const char *tenant_id, const char *name, Credential *ret) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(cred_stmt(q, SQL_CRED_GET, &st));
        CHECK(sqlite_bind_text(q, st, 1, tenant_id));
        CHECK(sqlite_bind_text(q, st, 2, name));
        return sqlite_store_get_row(q, st, cred_read, ret);
}

int sqlite_op_credential_list(Store *s, const char *tenant_id, Credential **ret, size_t *ret_n) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(cred_stmt(q, SQL_CRED_LIST, &st));
        CHECK(sqlite_bind_text(q, st, 1, tenant_id));
        return cred_read_all(q, st, ret, ret_n);
}

static int cred_exists(SqliteStore *q, const char *tenant_id, const char *name) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(cred_stmt(q, SQL_CRED_EXISTS, &st));
        CHECK(sqlite_bind_text(q, st, 1, tenant_id));
        CHECK(sqlite_bind_text(q, st, 2, name));
        return sqlite_store_step(q, st);
}

int sqlite_op_credential_update(Store *s, const Credential *c, int64_t now, uint64_t *ret_version) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        uint64_t v;
        int r;

        CHECK(cred_stmt(q, SQL_CRED_UPDATE, &st));
        CHECK(sqlite_bind_text(q, st, 1, c->tenant_id));
        CHECK(sqlite_bind_text(q, st, 2, c->name));
        CHECK(sqlite_bind_int64(q, st, 3, (int64_t) c->version));
        CHECK(cred_bind_fields(q, st, c));
        CHECK(sqlite_bind_int64(q, st, 13, c->expires_usec));
        CHECK(sqlite_bind_int64(q, st, 14, c->revoked_usec));
        CHECK(sqlite_bind_int64(q, st, 15, now));
        r = sqlite_store_step(q, st);
        if (r < 0)
                return r;
        if (r == 0) {
                sqlite_stmt_resetp(&st);
                r = cred_exists(q, c->tenant_id, c->name);
                if (r < 0)
                        return r;
                return r > 0 ? -ESTALE : -ENOENT;
        }
        CHECK(sqlite_col_u64(st, 0, &v));
        CHECK(sqlite_store_step_done(q, st));
        *ret_version = v;
        return 0;
}

int sqlite_op_credential_delete(Store *s, const char *tenant_id, const char *name) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_tx_ SqliteStore *tx = NULL;
        char id[STORE_ID_MAX];
        int r;

        CHECK(sqlite_store_begin(q, &tx));
        {
                _cleanup_stmt_ sqlite3_stmt *st = NULL;

                CHECK(cred_stmt(q, SQL_CRED_DELETE, &st));
                CHECK(sqlite_bind_text(q, st, 1, tenant_id));
                CHECK(sqlite_bind_text(q, st, 2, name));
                r = sqlite_store_step(q, st);
                if (r < 0)
                        return r;
                if (r == 0)
                        return -ENOENT;
                CHECK(SQLITE_COL_STR(st, 0, id));
                CHECK(sqlite_store_step_done(q, st));
        }
        {
                _cleanup_stmt_ sqlite3_stmt *st = NULL;

                CHECK(cred_stmt(q, SQL_CRED_DELETE_GRANTS, &st));
                CHECK(sqlite_bind_text(q, st, 1, id));
                CHECK(sqlite_store_step_done(q, st));
        }
        return sqlite_store_commit(&tx);
}

int sqlite_op_grant_insert(Store *s, const char *tenant_id, const char *sandbox_id, const char *credential_id,
                           const char *hosts_json, const char *header_name, const char *header_format, int64_t now) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(cred_stmt(q, SQL_GRANT_INSERT, &st));
        CHECK(sqlite_bind_text(q, st, 1, sandbox_id));
        CHECK(sqlite_bind_text(q, st, 2, credential_id));
        CHECK(sqlite_bind_text(q, st, 3, tenant_id));
        CHECK(sqlite_bind_int64(q, st, 4, now));
        CHECK(sqlite_bind_text(q, st, 5, hosts_json));
        CHECK(sqlite_bind_text(q, st, 6, header_name));
        CHECK(sqlite_bind_text(q, st, 7, header_format));
        return sqlite_store_step_done(q, st);
}

int sqlite_op_grant_delete(Store *s, const char *sandbox_id, const char *credential_id) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(cred_stmt(q, SQL_GRANT_DELETE, &st));
        CHECK(sqlite_bind_text(q, st, 1, sandbox_id));
        CHECK(sqlite_bind_text(q, st, 2, credential_id));
        CHECK(sqlite_store_step_done(q, st));
        return sqlite3_changes64(q->db) == 0 ? -ENOENT : 0;
}

int sqlite_op_grant_list(Store *s, const char *sandbox_id, Credential **ret, size_t *ret_n) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(cred_stmt(q, SQL_GRANT_LIST, &st));
        CHECK(sqlite_bind_text(q, st, 1, sandbox_id));
        return sqlite_store_list_rows(q, st, sizeof(Credential), grant_read, cred_rows_free, (void **) ret, ret_n);
}

static int setting_get(SqliteStore *q, const char *name, char **ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        CHECK(cred_stmt(q, SQL_CRED_SETTING_GET, &st));
        CHECK(sqlite_bind_text(q, st, 1, name));
        r = sqlite_store_step(q, st);
        if (r < 0)
                return r;
        *ret = NULL;
        if (r == 0)
                return 0;
        return sqlite_col_strdup(st, 0, ret);
}

static int cred_reseal_write(SqliteStore *q, const Credential *c) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;

        CHECK(cred_stmt(q, SQL_CRED_RESEAL, &st));
        CHECK(sqlite_bind_text(q, st, 1, c->id));
        CHECK(sqlite_bind_text(q, st, 2, c->ciphertext));
        CHECK(sqlite_bind_text(q, st, 3, c->nonce));
        CHECK(sqlite_bind_text(q, st, 4, c->key_id));
        CHECK(sqlite_store_step_done(q, st));
        return sqlite3_changes64(q->db) == 1 ? 0 : -EIO;
}

int sqlite_op_credentials_reseal(Store *s, const StoreReseal *rs, uint64_t *ret_changed, uint64_t *ret_total) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_tx_ SqliteStore *tx = NULL;
        char *current[STORE_RESEAL_SETTINGS_MAX] = {};
        Credential *list = NULL;
        size_t n = 0;
        uint64_t changed = 0;
        int r;

        CHECK(sqlite_store_begin(q, &tx));
        for (size_t i = 0; i < rs->n_settings; i++) {
                r = setting_get(q, rs->settings[i].name, &current[i]);
                if (r < 0)
                        goto finish;
        }
        r = rs->begin(current, rs->userdata);
        if (r < 0)
                goto finish;
        {
                _cleanup_stmt_ sqlite3_stmt *st = NULL;
                r = cred_stmt(q, SQL_CRED_ALL, &st);
                if (r >= 0)
                        r = cred_read_all(q, st, &list, &n);
                if (r < 0)
                        goto finish;
        }
        for (size_t i = 0; i < n; i++) {
                r = rs->row(&list[i], rs->userdata);
                if (r < 0)
                        goto finish;
                if (r == 0)
                        continue;
                r = store_reseal_row_check(&list[i]);
                if (r >= 0)
                        r = cred_reseal_write(q, &list[i]);
                if (r < 0)
                        goto finish;
                changed++;
        }
        for (size_t i = 0; i < rs->n_settings; i++) {
                _cleanup_stmt_ sqlite3_stmt *st = NULL;
                r = cred_stmt(q, SQL_CRED_SETTING_SET, &st);
                if (r >= 0)
                        r = sqlite_bind_text(q, st, 1, rs->settings[i].name);
                if (r >= 0)
                        r = sqlite_bind_text(q, st, 2, rs->settings[i].value);
                if (r >= 0)
                        r = sqlite_store_step_done(q, st);
                if (r < 0)
                        goto finish;
        }
        r = store_reseal_event(s, rs, changed, n);
        if (r < 0)
                goto finish;
        r = sqlite_store_commit(&tx);
        if (r >= 0) {
                *ret_changed = changed;
                *ret_total = n;
        }
finish:
        for (size_t i = 0; i < ELEMENTSOF(current); i++)
                free(current[i]);
        credential_array_free(list, n);
        return r < 0 ? r : 0;
}

int sqlite_op_cluster_setting_get(Store *s, const char *name, char ret[static STORE_CLUSTER_SETTING_MAX]) {
        _cleanup_free_ char *v = NULL;
        int r = setting_get(sqlite_store(s), name, &v);

        if (r < 0)
                return r;
        if (!v)
                return -ENOENT;
        return strscpy(ret, STORE_CLUSTER_SETTING_MAX, v) < 0 ? -EBADMSG : 0;
}
