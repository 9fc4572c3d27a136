/* SPDX-License-Identifier: MIT */
/* The PostgreSQL back end's credentials and grants, with the semantics of
 * the SQLite ones (store-sqlite-credentials.c). store-credentials.c has
 * checked every argument. The compare-and-set update and the delete (with
 * its grants) are single statements, so they are atomic without an explicit
 * transaction; a master key rotation is one transaction that locks the
 * credentials (and the settings) against writes first. */

#include "alloc-util.h"
#include "cred-crypt.h"
#include "store-postgres.h"

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

static const char *const cred_sql[_PG_CRED_STMT_MAX] = {
        /* only under the master key the store names (once a rotation named one):
         * an insert that waited for a rotation's lock sees its commit */
        [PG_CRED_INSERT] =
                "INSERT INTO credentials (id, tenant_id, name, hosts_json, apply, header_name, header_format, "
                "basic_user, env_name, ciphertext, nonce, key_id, created_usec, updated_usec, expires_usec, "
                "revoked_usec, version) "
                "SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::text, $9::text, "
                "$10::text, $11::text, $12::text, $13::bigint, $14::bigint, $15::bigint, $16::bigint, $17::bigint "
                "WHERE NOT EXISTS (SELECT 1 FROM cluster_settings WHERE name = '" CRED_KEY_ID_SETTING "' "
                "AND value <> $12::text)",
        [PG_CRED_GET] = "SELECT " CRED_COLUMNS " FROM credentials c WHERE c.tenant_id = $1 AND c.name = $2",
        [PG_CRED_LIST] = "SELECT " CRED_COLUMNS " FROM credentials c WHERE c.tenant_id = $1 ORDER BY c.name",
        /* (new version or 0, whether the row exists) */
        [PG_CRED_UPDATE] =
                "WITH u AS (UPDATE credentials SET hosts_json = $4, apply = $5, header_name = $6, "
                "header_format = $7, basic_user = $8, env_name = $9, ciphertext = $10, nonce = $11, "
                "key_id = $12, expires_usec = $13, revoked_usec = $14, updated_usec = $15, "
                "version = version + 1 WHERE tenant_id = $1 AND name = $2 AND version = $3 RETURNING version) "
                "SELECT COALESCE((SELECT version FROM u), 0), "
                "EXISTS (SELECT 1 FROM credentials WHERE tenant_id = $1 AND name = $2)",
        [PG_CRED_DELETE] =
                "WITH d AS (DELETE FROM credentials WHERE tenant_id = $1 AND name = $2 RETURNING id), "
                "g AS (DELETE FROM credential_grants WHERE credential_id IN (SELECT id FROM d)) "
                "SELECT COUNT(*) FROM d",
        [PG_GRANT_INSERT] =
                "INSERT INTO credential_grants (sandbox_id, credential_id, tenant_id, created_usec, hosts_json, "
                "header_name, header_format) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        [PG_GRANT_DELETE] = "DELETE FROM credential_grants WHERE sandbox_id = $1 AND credential_id = $2",
        [PG_GRANT_LIST] =
                "SELECT " GRANT_COLUMNS " FROM credential_grants g JOIN credentials c ON c.id = g.credential_id "
                "WHERE g.sandbox_id = $1 AND c.tenant_id = g.tenant_id ORDER BY c.name",
        /* a rotation: credential writes wait (reads go on) until it commits */
        [PG_CRED_LOCK] = "LOCK TABLE credentials, cluster_settings IN EXCLUSIVE MODE",
        [PG_CRED_ALL] = "SELECT " CRED_COLUMNS " FROM credentials c ORDER BY c.tenant_id, c.name",
        [PG_CRED_RESEAL] = "UPDATE credentials SET ciphertext = $2, nonce = $3, key_id = $4, version = version + 1 "
                           "WHERE id = $1",
        [PG_CRED_SETTING_GET] = "SELECT value FROM cluster_settings WHERE name = $1",
        [PG_CRED_SETTING_SET] = "INSERT INTO cluster_settings (name, value) VALUES ($1, $2) "
                                "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
};

static int cred_exec(PgStore *q, PgCredStmt id, const PgParams *p, PGresult **ret) {
        char name[16];

        if (id < 0 || id >= _PG_CRED_STMT_MAX)
                return -EINVAL;
        (void) snprintf(name, sizeof name, "cred%d", (int) id);
        return pg_store_exec_slot(q, &q->credentials[id], name, cred_sql[id], p, ret);
}

static int cred_read(const PGresult *res, int row, void *ret) {
        _cleanup_(credential_done) Credential c = {};
        char apply[16];
        int r;

        CHECK(PG_COL_STR(res, row, 0, c.id));
        CHECK(PG_COL_STR(res, row, 1, c.tenant_id));
        CHECK(PG_COL_STR(res, row, 2, c.name));
        CHECK(pg_col_strdup(res, row, 3, &c.hosts_json));
        CHECK(PG_COL_STR(res, row, 4, apply));
        r = cred_apply_from_string(apply);
        if (r < 0)
                return -EBADMSG;
        c.apply = (CredApply) r;
        CHECK(PG_COL_STR(res, row, 5, c.header_name));
        CHECK(PG_COL_STR(res, row, 6, c.header_format));
        CHECK(PG_COL_STR(res, row, 7, c.basic_user));
        CHECK(PG_COL_STR(res, row, 8, c.env_name));
        CHECK(pg_col_strdup(res, row, 9, &c.ciphertext));
        CHECK(PG_COL_STR(res, row, 10, c.nonce));
        CHECK(PG_COL_STR(res, row, 11, c.key_id));
        CHECK(pg_col_i64(res, row, 12, &c.created_usec));
        CHECK(pg_col_i64(res, row, 13, &c.updated_usec));
        CHECK(pg_col_i64(res, row, 14, &c.expires_usec));
        CHECK(pg_col_i64(res, row, 15, &c.revoked_usec));
        CHECK(pg_col_u64(res, row, 16, &c.version));
        if (!c.hosts_json || !c.ciphertext || c.created_usec < 0 || c.updated_usec < 0 || c.expires_usec < 0 ||
            c.revoked_usec < 0)
                return -EBADMSG;
        *(Credential *) ret = c;
        c = (Credential) {};
        return 0;
}

static void cred_rows_free(void *rows, size_t n) {
        credential_array_free(rows, n);
}

static int grant_read(const PGresult *res, int row, void *ret) {
        int64_t scoped = 0;

        CHECK(pg_col_i64(res, row, 17, &scoped));
        CHECK(cred_read(res, row, ret));
        ((Credential *) ret)->grant_scoped = scoped != 0;
        return 0;
}

static int cred_read_all(const PGresult *res, Credential **ret, size_t *ret_n) {
        return pg_result_list_rows(res, sizeof(Credential), cred_read, cred_rows_free, (void **) ret, ret_n);
}

static void cred_params(PgParams *p, const Credential *c) {
        pg_param_text(p, c->hosts_json);
        pg_param_text(p, cred_apply_to_string(c->apply));
        pg_param_text(p, c->header_name);
        pg_param_text(p, c->header_format);
        pg_param_text(p, c->basic_user);
        pg_param_text(p, c->env_name);
        pg_param_text(p, c->ciphertext);
        pg_param_text(p, c->nonce);
        pg_param_text(p, c->key_id);
}

int pg_op_credential_insert(Store *s, const Credential *c) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, c->id);
        pg_param_text(&p, c->tenant_id);
        pg_param_text(&p, c->name);
        cred_params(&p, c);
        pg_param_i64(&p, c->created_usec);
        pg_param_i64(&p, c->updated_usec);
        pg_param_i64(&p, c->expires_usec);
        pg_param_i64(&p, c->revoked_usec);
        pg_param_i64(&p, (int64_t) c->version);
        CHECK(cred_exec(pg_store(s), PG_CRED_INSERT, &p, &res));
        return pg_result_changes(res) == 1 ? 0 : -EKEYEXPIRED;
}

int pg_op_credential_get(Store *s, const char *tenant_id, const char *name, Credential *ret) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, tenant_id);
        pg_param_text(&p, name);
        CHECK(cred_exec(pg_store(s), PG_CRED_GET, &p, &res));
        return pg_result_get_row(res, cred_read, ret);
}

int pg_op_credential_list(Store *s, const char *tenant_id, Credential **ret, size_t *ret_n) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, tenant_id);
        CHECK(cred_exec(pg_store(s), PG_CRED_LIST, &p, &res));
        return cred_read_all(res, ret, ret_n);
}

int pg_op_credential_update(Store *s, const Credential *c, int64_t now, uint64_t *ret_version) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};
        uint64_t v;
        bool exists;

        pg_param_text(&p, c->tenant_id);
        pg_param_text(&p, c->name);
        pg_param_i64(&p, (int64_t) c->version);
        cred_params(&p, c);
        pg_param_i64(&p, c->expires_usec);
        pg_param_i64(&p, c->revoked_usec);
        pg_param_i64(&p, now);
        CHECK(cred_exec(pg_store(s), PG_CRED_UPDATE, &p, &res));
        if (PQntuples(res) != 1)
                return -EBADMSG;
        CHECK(pg_col_u64(res, 0, 0, &v));
        CHECK(pg_col_bool(res, 0, 1, &exists));
        if (v == 0)
                return exists ? -ESTALE : -ENOENT;
        *ret_version = v;
        return 0;
}

int pg_op_credential_delete(Store *s, const char *tenant_id, const char *name) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};
        uint64_t n;

        pg_param_text(&p, tenant_id);
        pg_param_text(&p, name);
        CHECK(cred_exec(pg_store(s), PG_CRED_DELETE, &p, &res));
        if (PQntuples(res) != 1)
                return -EBADMSG;
        CHECK(pg_col_u64(res, 0, 0, &n));
        return n == 0 ? -ENOENT : 0;
}

int pg_op_grant_insert(Store *s, const char *tenant_id, const char *sandbox_id, const char *credential_id,
                       const char *hosts_json, const char *header_name, const char *header_format, int64_t now) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, sandbox_id);
        pg_param_text(&p, credential_id);
        pg_param_text(&p, tenant_id);
        pg_param_i64(&p, now);
        pg_param_text(&p, hosts_json);
        pg_param_text(&p, header_name);
        pg_param_text(&p, header_format);
        return cred_exec(pg_store(s), PG_GRANT_INSERT, &p, &res);
}

int pg_op_grant_delete(Store *s, const char *sandbox_id, const char *credential_id) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, sandbox_id);
        pg_param_text(&p, credential_id);
        CHECK(cred_exec(pg_store(s), PG_GRANT_DELETE, &p, &res));
        return pg_result_changes(res) == 0 ? -ENOENT : 0;
}

int pg_op_grant_list(Store *s, const char *sandbox_id, Credential **ret, size_t *ret_n) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, sandbox_id);
        CHECK(cred_exec(pg_store(s), PG_GRANT_LIST, &p, &res));
        return pg_result_list_rows(res, sizeof(Credential), grant_read, cred_rows_free, (void **) ret, ret_n);
}

static int setting_get(PgStore *q, const char *name, char **ret) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, name);
        CHECK(cred_exec(q, PG_CRED_SETTING_GET, &p, &res));
        *ret = NULL;
        if (PQntuples(res) == 0)
                return 0;
        return pg_col_strdup(res, 0, 0, ret);
}

typedef struct Reseal {
        Store *s;
        const StoreReseal *rs;
        uint64_t changed, total;
} Reseal;

static int reseal_tx(PgStore *q, void *userdata) {
        Reseal *x = userdata;
        const StoreReseal *rs = x->rs;
        char *current[STORE_RESEAL_SETTINGS_MAX] = {};
        Credential *list = NULL;
        size_t n = 0;
        int r;

        x->changed = x->total = 0; /* a retried transaction starts over */
        {
                _cleanup_pgresult_ PGresult *res = NULL;
                r = cred_exec(q, PG_CRED_LOCK, NULL, &res);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < rs->n_settings; i++) {
                r = setting_get(q, rs->settings[i].name, &current[i]);
                if (r < 0)
                        goto finish;
        }
        r = rs->begin(current, rs->userdata);
        if (r < 0)
                goto finish;
        {
                _cleanup_pgresult_ PGresult *res = NULL;
                r = cred_exec(q, PG_CRED_ALL, NULL, &res);
                if (r >= 0)
                        r = cred_read_all(res, &list, &n);
                if (r < 0)
                        goto finish;
        }
        for (size_t i = 0; i < n; i++) {
                _cleanup_pgresult_ PGresult *res = NULL;
                PgParams p = {};

                r = rs->row(&list[i], rs->userdata);
                if (r < 0)
                        goto finish;
                if (r == 0)
                        continue;
                r = store_reseal_row_check(&list[i]);
                if (r < 0)
                        goto finish;
                pg_param_text(&p, list[i].id);
                pg_param_text(&p, list[i].ciphertext);
                pg_param_text(&p, list[i].nonce);
                pg_param_text(&p, list[i].key_id);
                r = cred_exec(q, PG_CRED_RESEAL, &p, &res);
                if (r >= 0 && pg_result_changes(res) != 1)
                        r = -EIO;
                if (r < 0)
                        goto finish;
                x->changed++;
        }
        for (size_t i = 0; i < rs->n_settings; i++) {
                _cleanup_pgresult_ PGresult *res = NULL;
                PgParams p = {};

                pg_param_text(&p, rs->settings[i].name);
                pg_param_text(&p, rs->settings[i].value);
                r = cred_exec(q, PG_CRED_SETTING_SET, &p, &res);
                if (r < 0)
                        goto finish;
        }
        r = store_reseal_event(x->s, rs, x->changed, n);
        if (r < 0)
                goto finish;
        x->total = n;
        r = 0;
finish:
        for (size_t i = 0; i < ELEMENTSOF(current); i++)
                free(current[i]);
        credential_array_free(list, n);
        return r;
}

int pg_op_credentials_reseal(Store *s, const StoreReseal *rs, uint64_t *ret_changed, uint64_t *ret_total) {
        Reseal x = { .s = s, .rs = rs };

        CHECK(pg_store_transact(pg_store(s), reseal_tx, &x));
        *ret_changed = x.changed;
        *ret_total = x.total;
        return 0;
}

int pg_op_cluster_setting_get(Store *s, const char *name, char ret[static STORE_CLUSTER_SETTING_MAX]) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};

        pg_param_text(&p, name);
        CHECK(cred_exec(pg_store(s), PG_CRED_SETTING_GET, &p, &res));
        if (PQntuples(res) == 0)
                return -ENOENT;
        return pg_col_str(res, 0, 0, ret, STORE_CLUSTER_SETTING_MAX);
}
