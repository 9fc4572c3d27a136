/* SPDX-License-Identifier: MIT */
/* The PostgreSQL back end's handle: connecting (libpq, synchronous, one
 * connection per Store), schema migrations under an advisory lock, prepared
 * statements per connection, transactions with retry, reconnecting after a
 * lost connection, error mapping, text-format parameters and columns, and
 * keeping the password out of every message. The operations are in
 * store-postgres-ops.c. */

#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <time.h>

#include "alloc-util.h"
#include "log.h"
#include "store-postgres.h"
#include "str-util.h"

#define PG_SERVER_VERSION_MIN 110000 /* starts_with(), data-modifying CTEs with RETURNING */
#define PG_REDACTED "***"
#define PG_IDLE_READS_MAX 4 /* reads of an idle connection before a statement: its goodbye, then EOF */

static const char SQL_CREATE_MIGRATIONS[] =
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER NOT NULL PRIMARY KEY,"
        " name TEXT NOT NULL,"
        " applied_usec BIGINT NOT NULL)";
static const char SQL_LOCK_MIGRATIONS[] = "SELECT pg_advisory_lock(" PG_LOCK_CLASS ", " PG_LOCK_MIGRATIONS ")";
static const char SQL_UNLOCK_MIGRATIONS[] = "SELECT pg_advisory_unlock(" PG_LOCK_CLASS ", " PG_LOCK_MIGRATIONS ")";

/* Parameters */

void pg_param_text(PgParams *p, const char *s) {
        if (p->n >= PG_PARAMS_MAX) {
                p->overflow = true;
                return;
        }
        p->values[p->n++] = s;
}

void pg_param_i64(PgParams *p, int64_t v) {
        if (p->n >= PG_PARAMS_MAX) {
                p->overflow = true;
                return;
        }
        (void) snprintf(p->ints[p->n], sizeof p->ints[p->n], "%" PRId64, v);
        p->values[p->n] = p->ints[p->n];
        p->n++;
}

void pg_param_bool(PgParams *p, bool b) {
        pg_param_text(p, b ? "true" : "false");
}

/* Secrets */

static int hexval(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* Percent-decodes (p, n) as libpq does; a bad escape is kept as it is. */
static char *pct_decode(const char *p, size_t n) {
        char *out = malloc(n + 1);
        size_t k = 0;

        if (!out)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                int hi, lo;
                if (p[i] == '%' && i + 2 < n && (hi = hexval(p[i + 1])) >= 0 &&
                    (lo = hexval(p[i + 2])) >= 0 && (hi || lo)) {
                        out[k++] = (char) (hi * 16 + lo);
                        i += 2;
                } else
                        out[k++] = p[i];
        }
        out[k] = 0;
        return out;
}

static int secret_add(char **secrets, size_t max, const char *p, size_t n) {
        size_t k = 0;
        char *raw, *dec;

        if (n == 0)
                return 0;
        raw = memdup_suffix0(p, n);
        dec = pct_decode(p, n);
        if (!raw || !dec) {
                free(raw);
                free(dec);
                return -ENOMEM;
        }
        while (k < max && secrets[k])
                k++;
        /* keep one NULL at the end; two spellings per password at most */
        if (k + 2 >= max) {
                free(raw);
                free(dec);
                return -E2BIG;
        }
        secrets[k++] = raw;
        if (!streq(raw, dec) && dec[0])
                secrets[k++] = dec;
        else
                free(dec);
        return 0;
}

int pg_url_secrets(const char *url, char **secrets, size_t max) {
        const char *rest = strstr(url, "://"), *p, *query;
        int r;

        for (size_t i = 0; i < max; i++)
                secrets[i] = NULL;
        if (rest) {
                /* user info ends at '@'; libpq stops looking at the first '/' */
                rest += 3;
                for (p = rest; *p && *p != '@' && *p != '/'; p++)
                        ;
                if (*p == '@') {
                        const char *colon = memchr(rest, ':', (size_t) (p - rest));
                        if (colon) {
                                r = secret_add(secrets, max, colon + 1, (size_t) (p - colon - 1));
                                if (r < 0)
                                        return r;
                        }
                }
        }

        query = strchr(url, '?');
        for (p = query; p && *p;) {
                const char *start = p + 1, *end = strchrnul(start, '&'), *eq;
                _cleanup_free_ char *key = NULL;

                eq = memchr(start, '=', (size_t) (end - start));
                if (eq) {
                        key = pct_decode(start, (size_t) (eq - start));
                        if (!key)
                                return -ENOMEM;
                        if (streq(key, "password")) {
                                r = secret_add(secrets, max, eq + 1, (size_t) (end - eq - 1));
                                if (r < 0)
                                        return r;
                        }
                }
                p = *end ? end : NULL;
        }

        /* longest first, so a spelling that contains another is replaced whole */
        for (size_t i = 0; i < max && secrets[i]; i++)
                for (size_t j = i + 1; j < max && secrets[j]; j++)
                        if (strlen(secrets[j]) > strlen(secrets[i])) {
                                char *t = secrets[i];
                                secrets[i] = secrets[j];
                                secrets[j] = t;
                        }
        return 0;
}

static char *replace_all(const char *s, const char *needle, const char *with) {
        size_t nn = strlen(needle), nw = strlen(with), count = 0, len;
        const char *p;
        char *out, *o;

        for (p = s; (p = strstr(p, needle)); p += nn)
                count++;
        len = strlen(s);
        if (nw > nn && count > (SIZE_MAX - len - 1) / (nw - nn))
                return NULL;
        out = malloc(len - count * nn + count * nw + 1); /* the hits do not overlap: len >= count * nn */
        if (!out)
                return NULL;
        for (o = out, p = s;;) {
                const char *hit = strstr(p, needle);
                size_t k = hit ? (size_t) (hit - p) : strlen(p);
                memcpy(o, p, k);
                o += k;
                if (!hit)
                        break;
                memcpy(o, with, nw);
                o += nw;
                p = hit + nn;
        }
        *o = 0;
        return out;
}

char *pg_scrub(const char *msg, char *const *secrets) {
        char *cur = strdup(msg ?: "");

        for (size_t i = 0; cur && secrets && secrets[i]; i++) {
                char *next = replace_all(cur, secrets[i], PG_REDACTED);
                free(cur);
                cur = next;
        }
        return cur;
}

static void secrets_free(char **secrets, size_t max) {
        for (size_t i = 0; i < max; i++)
                secrets[i] = mfree(secrets[i]);
}

/* Logs a libpq message at debug, scrubbed, without its trailing newline. */
static void pg_log_message(PgStore *q, const char *what, const char *msg) {
        _cleanup_free_ char *clean = NULL;
        size_t n;

        if (log_get_max_level() < LOG_DEBUG_)
                return;
        clean = pg_scrub(msg, q->secrets);
        if (!clean)
                return;
        n = strlen(clean);
        while (n > 0 && (clean[n - 1] == '\n' || clean[n - 1] == ' '))
                clean[--n] = 0;
        log_debug("store: postgres %s (%s): %s", what, strna(q->where), clean);
}

/* Errors */

int pg_sqlstate_errno(const char *st) {
        static const struct {
                const char *code; /* a whole SQLSTATE, or a class of two characters */
                int err;
        } table[] = {
                { "SPF01", ESTALE },       /* the fence trigger (0020): this handle's lease is gone */
                { "23505", EEXIST },       /* unique_violation */
                { "23503", ENOENT },       /* foreign_key_violation */
                { "23", EINVAL },          /* other integrity constraints (not null, check) */
                { "40001", EAGAIN },       /* serialization_failure: retried */
                { "40P01", EAGAIN },       /* deadlock_detected: retried */
                { "55P03", EAGAIN },       /* lock_not_available */
                { "08", EIO },             /* connection exceptions */
                { "57P01", EIO },          /* admin_shutdown */
                { "57P02", EIO },          /* crash_shutdown */
                { "57P03", EIO },          /* cannot_connect_now */
                { "28", EACCES },          /* invalid authorization */
                { "42501", EACCES },       /* insufficient_privilege */
                { "3D000", ENOENT },       /* invalid_catalog_name: no such database */
                { "25006", EROFS },        /* read_only_sql_transaction (a standby) */
                { "53100", ENOSPC },       /* disk_full */
                { "53200", ENOMEM },       /* out_of_memory */
                { "53300", EUSERS },       /* too_many_connections */
                { "54", E2BIG },           /* program_limit_exceeded */
                { "22", EINVAL },          /* data exceptions (bad encoding, out of range) */
        };

        if (!st || strlen(st) != 5)
                return -EIO;
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (strneq(st, table[i].code, strlen(table[i].code)))
                        return -table[i].err;
        return -EIO;
}

/* A failed call: a lost connection is -EIO (the next call reconnects), else
 * the SQLSTATE decides. */
static int pg_result_errno(PgStore *q, const PGresult *res) {
        int r;

        if (PQstatus(q->conn) != CONNECTION_OK)
                r = -EIO;
        else if (!res)
                r = -EIO;
        else
                r = pg_sqlstate_errno(PQresultErrorField(res, PG_DIAG_SQLSTATE));
        pg_log_message(q, res ? strna(PQresultErrorField(res, PG_DIAG_SQLSTATE)) : "error",
                       res ? PQresultErrorMessage(res) : PQerrorMessage(q->conn));
        return r;
}

/* Why a connection attempt failed. libpq has no code for it, only a message,
 * whose system parts come from strerror() in the C locale. */
static int pg_connect_errno(PGconn *conn) {
        const char *msg;

        if (!conn)
                return -ENOMEM;
        if (PQconnectionNeedsPassword(conn))
                return -EACCES;
        msg = PQerrorMessage(conn);
        if (strstr(msg, "Connection refused") || strstr(msg, "No such file or directory"))
                return -ECONNREFUSED;
        if (strstr(msg, "authentication failed"))
                return -EACCES;
        if (strstr(msg, "timeout expired"))
                return -ETIMEDOUT;
        if (strstr(msg, "database \"") && strstr(msg, "\" does not exist"))
                return -ENOENT;
        return -EIO;
}

static void pg_notice(void *userdata, const char *message) {
        PgStore *q = userdata;
        pg_log_message(q, "notice", message);
}

/* Connection */

/* Reads what an idle connection has pending, up to its EOF: libpq sees a
 * closed socket only on a read that returns 0, after the data before it. */
static void pg_store_read_idle(PgStore *q) {
        for (unsigned i = 0; i < PG_IDLE_READS_MAX && PQstatus(q->conn) == CONNECTION_OK; i++) {
                struct pollfd p = { .fd = PQsocket(q->conn), .events = POLLIN };

                if (p.fd < 0 || poll(&p, 1, 0) <= 0)
                        return;
                if (!PQconsumeInput(q->conn))
                        return;
        }
}

/* A broken connection is reset before the next call; never inside a
 * transaction, which died with the connection. Outside a transaction, what
 * the server sent while the connection sat idle is read first: a server that
 * restarted has already said goodbye (FATAL 57P01, then EOF), so the
 * connection is found broken and reset here, before a statement is sent,
 * rather than failing the caller's next statement. (A statement is never sent
 * twice: whether one that failed in flight ran is unknown.) */
static int pg_store_simple(PgStore *q, const char *sql);

/* A fenced handle's session carries its token before any statement: a new
 * connection sets it first, else nothing runs (fails closed). */
static int pg_store_fence_ensure(PgStore *q) {
        char sql[96];
        int r;

        if (q->fence_token <= 0 || q->fence_gen == q->gen || q->in_tx)
                return 0;
        snprintf(sql, sizeof sql, "SELECT set_config('space.fence_token', '%" PRIi64 "', false)", q->fence_token);
        r = pg_store_simple(q, sql);
        if (r < 0)
                return r;
        q->fence_gen = q->gen;
        return 0;
}

static int pg_store_ensure(PgStore *q) {
        if (!q->in_tx)
                pg_store_read_idle(q);
        if (PQstatus(q->conn) == CONNECTION_OK)
                return pg_store_fence_ensure(q);
        if (q->in_tx)
                return -EIO;
        PQreset(q->conn);
        if (PQstatus(q->conn) != CONNECTION_OK) {
                int r = pg_connect_errno(q->conn);
                pg_log_message(q, "reconnect failed", PQerrorMessage(q->conn));
                return r;
        }
        q->gen++; /* the new session has no prepared statements */
        if (q->gen == 0)
                q->gen = 1;
        log_debug("store: postgres (%s): reconnected", strna(q->where));
        return pg_store_fence_ensure(q);
}

static void sleep_retry(unsigned attempt) {
        struct timespec ts = { .tv_nsec = PG_RETRY_SLEEP_NSEC * (long) (attempt + 1) };
        (void) nanosleep(&ts, NULL);
}

/* Runs a statement without parameters through the simple protocol. */
static int pg_store_simple(PgStore *q, const char *sql) {
        STORE_TIMED;
        _cleanup_pgresult_ PGresult *res = NULL;
        ExecStatusType st;

        res = PQexec(q->conn, sql);
        st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
                return pg_result_errno(q, res);
        return 0;
}

int pg_store_exec_slot(PgStore *q, PgSlot *slot, const char *name, const char *sql, const PgParams *p,
                       PGresult **ret) {
        STORE_TIMED;
        if (p && p->overflow)
                return -E2BIG;

        for (unsigned attempt = 0;; attempt++) {
                _cleanup_pgresult_ PGresult *res = NULL;
                ExecStatusType st;
                int r;

                r = pg_store_ensure(q);
                if (r < 0)
                        return r;

                if (slot->gen != q->gen) {
                        res = PQprepare(q->conn, name, sql, 0, NULL);
                        if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
                                return pg_result_errno(q, res);
                        PQclear(TAKE_PTR(res));
                        slot->gen = q->gen;
                }

                res = PQexecPrepared(q->conn, name, p ? p->n : 0, p ? p->values : NULL, NULL, NULL, 0);
                st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
                if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
                        *ret = TAKE_PTR(res);
                        return 0;
                }
                r = pg_result_errno(q, res);
                if (r == -EAGAIN && !q->in_tx && attempt + 1 < PG_TX_TRIES) {
                        sleep_retry(attempt);
                        continue;
                }
                return r;
        }
}

int pg_store_exec(PgStore *q, PgStmt id, const PgParams *p, PGresult **ret) {
        char name[16];

        if (id < 0 || id >= _PG_STMT_MAX)
                return -EINVAL;
        (void) snprintf(name, sizeof name, "s%d", (int) id);
        return pg_store_exec_slot(q, &q->stmts[id], name, pg_stmt_sql[id], p, ret);
}

int pg_result_cas(const PGresult *res) {
        uint64_t changed;
        bool exists;
        int r;

        if (PQntuples(res) != 1)
                return -EBADMSG;
        r = pg_col_u64(res, 0, 0, &changed);
        if (r >= 0)
                r = pg_col_bool(res, 0, 1, &exists);
        if (r < 0)
                return r;
        if (changed > 0)
                return 0;
        return exists ? -ESTALE : -ENOENT;
}

int pg_result_get_row(const PGresult *res, PgRowReader read, void *ret) {
        if (PQntuples(res) == 0)
                return -ENOENT;
        return read(res, 0, ret);
}

int pg_result_list_rows(const PGresult *res, size_t size, PgRowReader read, StoreRowsFree free_rows, void **ret,
                        size_t *ret_n) {
        int n = PQntuples(res), r;
        uint8_t *a = calloc((size_t) n + 1, size);

        if (!a)
                return -ENOMEM;
        for (int i = 0; i < n; i++) {
                r = read(res, i, a + (size_t) i * size);
                if (r < 0) {
                        if (free_rows)
                                free_rows(a, (size_t) i + 1); /* the failed row is zeroed or partly read */
                        else
                                free(a);
                        return r;
                }
        }
        *ret = a;
        *ret_n = (size_t) n;
        return 0;
}

uint64_t pg_result_changes(PGresult *res) {
        uint64_t n = 0;
        const char *t = PQcmdTuples(res);

        if (!t || safe_atou64(t, &n) < 0)
                return 0;
        return n;
}

int pg_store_transact(PgStore *q, PgTxFn fn, void *userdata) {
        STORE_TIMED;

        for (unsigned attempt = 0;; attempt++) {
                int r;

                r = pg_store_ensure(q);
                if (r < 0)
                        return r;
                /* Per-statement snapshots, whatever the database's default:
                 * a statement after a lock sees what the holder committed. */
                r = pg_store_simple(q, "BEGIN ISOLATION LEVEL READ COMMITTED");
                if (r < 0)
                        return r;
                q->in_tx = true;
                r = fn(q, userdata);
                if (r >= 0)
                        r = pg_store_simple(q, "COMMIT");
                if (r < 0 && PQstatus(q->conn) == CONNECTION_OK && PQtransactionStatus(q->conn) != PQTRANS_IDLE)
                        (void) pg_store_simple(q, "ROLLBACK");
                q->in_tx = false;
                if (r == -EAGAIN && attempt + 1 < PG_TX_TRIES) {
                        sleep_retry(attempt);
                        continue;
                }
                return r < 0 ? r : 0;
        }
}

/* Columns */

static const char *pg_value(const PGresult *res, int row, int col) {
        if (row < 0 || row >= PQntuples(res) || col < 0 || col >= PQnfields(res))
                return NULL;
        return PQgetvalue(res, row, col);
}

int pg_col_str(const PGresult *res, int row, int col, char *buf, size_t size) {
        const char *v = pg_value(res, row, col);
        int n;

        if (!v)
                return -EBADMSG;
        if (PQgetisnull(res, row, col)) {
                buf[0] = 0;
                return 0;
        }
        n = PQgetlength(res, row, col);
        if (n < 0 || (size_t) n >= size || memchr(v, 0, (size_t) n))
                return -EBADMSG;
        memcpy(buf, v, (size_t) n);
        buf[n] = 0;
        return 0;
}

int pg_col_strdup(const PGresult *res, int row, int col, char **ret) {
        const char *v = pg_value(res, row, col);
        int n;

        if (!v)
                return -EBADMSG;
        if (PQgetisnull(res, row, col)) {
                *ret = NULL;
                return 0;
        }
        n = PQgetlength(res, row, col);
        if (n < 0 || memchr(v, 0, (size_t) n))
                return -EBADMSG;
        *ret = memdup_suffix0(v, (size_t) n);
        return *ret ? 0 : -ENOMEM;
}

int pg_col_i64(const PGresult *res, int row, int col, int64_t *ret) {
        const char *v = pg_value(res, row, col);

        if (!v || PQgetisnull(res, row, col))
                return -EBADMSG;
        return safe_atoi64(v, ret) < 0 ? -EBADMSG : 0;
}

int pg_col_u64(const PGresult *res, int row, int col, uint64_t *ret) {
        int64_t v;
        int r = pg_col_i64(res, row, col, &v);
        if (r < 0)
                return r;
        if (v < 0)
                return -EBADMSG;
        *ret = (uint64_t) v;
        return 0;
}

int pg_col_u32(const PGresult *res, int row, int col, uint32_t *ret) {
        uint64_t v;
        int r = pg_col_u64(res, row, col, &v);
        if (r < 0)
                return r;
        if (v > UINT32_MAX)
                return -EBADMSG;
        *ret = (uint32_t) v;
        return 0;
}

int pg_col_bool(const PGresult *res, int row, int col, bool *ret) {
        const char *v = pg_value(res, row, col);

        if (!v || PQgetisnull(res, row, col))
                return -EBADMSG;
        if (streq(v, "t"))
                *ret = true;
        else if (streq(v, "f"))
                *ret = false;
        else
                return -EBADMSG;
        return 0;
}

/* Migrations */

int pg_store_schema_version(Store *s) {
        PgStore *q = pg_store(s);
        _cleanup_pgresult_ PGresult *res = NULL;
        uint64_t v;
        int r;

        r = pg_store_exec(q, PG_SCHEMA_VERSION, NULL, &res);
        if (r < 0)
                return r;
        if (pg_col_u64(res, 0, 0, &v) < 0 || v > INT32_MAX)
                return -EBADMSG;
        return (int) v;
}

static int pg_store_apply(PgStore *q, void *userdata) {
        const StoreMigration *m = userdata;
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};
        int r;

        r = pg_store_simple(q, m->sql); /* one or more statements */
        if (r < 0) {
                log_debug("store: postgres migration %s failed", m->name);
                return r;
        }
        pg_param_i64(&p, m->version);
        pg_param_text(&p, m->name);
        pg_param_i64(&p, now_usec());
        return pg_store_exec(q, PG_MIGRATION_RECORD, &p, &res);
}

/* 1 if the version is recorded, 0 if not. (Under the migrations lock.) */
static int pg_store_migration_applied(PgStore *q, int version) {
        _cleanup_pgresult_ PGresult *res = NULL;
        PgParams p = {};
        int r;

        pg_param_i64(&p, version);
        r = pg_store_exec(q, PG_MIGRATION_APPLIED, &p, &res);
        if (r < 0)
                return r;
        return PQntuples(res) > 0;
}

static int pg_store_migrate_locked(PgStore *q) {
        int r, current;

        r = pg_store_simple(q, SQL_CREATE_MIGRATIONS);
        if (r < 0)
                return r;
        current = pg_store_schema_version(&q->base);
        if (current < 0)
                return current;
        if (store_postgres_migrations_count == 0 ||
            current > store_postgres_migrations[store_postgres_migrations_count - 1].version) {
                log_debug("store: database schema %d is newer than this program's", current);
                return -EPROTO;
        }

        /* every version not recorded yet, also below the highest one: versions
         * may have gaps that a later build fills (see embed-migrations.py) */
        for (size_t i = 0; i < store_postgres_migrations_count; i++) {
                const StoreMigration *m = &store_postgres_migrations[i];

                r = pg_store_migration_applied(q, m->version);
                if (r < 0)
                        return r;
                if (r > 0)
                        continue;
                r = pg_store_transact(q, pg_store_apply, (void *) m);
                if (r < 0)
                        return r;
                log_debug("store: applied migration %s", m->name);
        }
        return 0;
}

/* Concurrent openers queue on a session advisory lock, then see what the
 * one before them applied. */
static int pg_store_migrate(PgStore *q) {
        int r;

        r = pg_store_simple(q, SQL_LOCK_MIGRATIONS);
        if (r < 0)
                return r;
        r = pg_store_migrate_locked(q);
        if (PQstatus(q->conn) == CONNECTION_OK)
                (void) pg_store_simple(q, SQL_UNLOCK_MIGRATIONS);
        return r;
}

/* The handle */

void pg_store_close(Store *s) {
        PgStore *q = pg_store(s);

        if (!q)
                return;
        if (q->conn)
                PQfinish(q->conn);
        secrets_free(q->secrets, ELEMENTSOF(q->secrets));
        free(q->where);
        free(q);
}

static void pg_store_closep(PgStore **q) {
        if (*q)
                pg_store_close(&(*q)->base);
}

/* Refuses what libpq cannot parse, before connecting (its message may quote
 * the URL: scrubbed). */
static int pg_url_check(PgStore *q, const char *url) {
        PQconninfoOption *opts;
        char *err = NULL;

        opts = PQconninfoParse(url, &err);
        if (!opts) {
                if (!err)
                        return -ENOMEM;
                pg_log_message(q, "bad URL", err);
                PQfreemem(err);
                return -EINVAL;
        }
        PQconninfoFree(opts);
        return 0;
}

int pg_store_open(const char *url, Store **ret) {
        _cleanup_(pg_store_closep) PgStore *q = NULL;
        /* Later entries win: the URL overrides the defaults before it, but
         * the client encoding is always ours. */
        const char *const keywords[] = { "connect_timeout", "application_name", "dbname", "client_encoding", NULL };
        const char *const values[] = { PG_CONNECT_TIMEOUT_SEC, PG_APPLICATION_NAME, url, "UTF8", NULL };
        int r;

        q = new0(PgStore, 1);
        if (!q)
                return -ENOMEM;
        q->base.ops = &store_postgres_ops;
        q->gen = 1;

        r = pg_url_secrets(url, q->secrets, ELEMENTSOF(q->secrets));
        if (r < 0)
                return r == -E2BIG ? -EINVAL : r;
        q->where = pg_scrub(url, q->secrets);
        if (!q->where)
                return -ENOMEM;
        r = pg_url_check(q, url);
        if (r < 0)
                return r;

        q->conn = PQconnectdbParams(keywords, values, 1);
        if (!q->conn)
                return -ENOMEM;
        if (PQstatus(q->conn) != CONNECTION_OK) {
                r = pg_connect_errno(q->conn);
                pg_log_message(q, "connect failed", PQerrorMessage(q->conn));
                return r;
        }
        (void) PQsetNoticeProcessor(q->conn, pg_notice, q);
        if (PQserverVersion(q->conn) < PG_SERVER_VERSION_MIN) {
                log_debug("store: postgres (%s): server version %d is older than %d",
                          q->where, PQserverVersion(q->conn), PG_SERVER_VERSION_MIN);
                return -EPROTONOSUPPORT;
        }

        r = pg_store_migrate(q);
        if (r < 0)
                return r;

        *ret = &TAKE_PTR(q)->base;
        return 0;
}
