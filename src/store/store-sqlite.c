/* SPDX-License-Identifier: MIT */
/* The SQLite back end's handle: opening (WAL, synchronous=NORMAL, foreign
 * keys, busy timeout), schema migrations, the per-handle statement cache,
 * transactions, error mapping, and typed binding and column helpers. The
 * operations themselves are in store-sqlite-ops.c. */

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "log.h"
#include "store-migrations.h"
#include "store-sqlite.h"

#define SQLITE_DB_MODE 0600 /* keys' hashes, later credentials: not world-readable */
#define SQLITE_RETRY_SLEEP_NSEC (10 * 1000 * 1000)

static const char SQL_CREATE_MIGRATIONS[] =
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER NOT NULL PRIMARY KEY,"
        " name TEXT NOT NULL,"
        " applied_usec BIGINT NOT NULL)";

int sqlite_store_errno(SqliteStore *q, int rc) {
        int r;

        switch (rc & 0xff) {
        case SQLITE_CONSTRAINT:
                if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY)
                        r = -EEXIST;
                else if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
                        r = -ENOENT;
                else if (rc == SQLITE_CONSTRAINT_TRIGGER && q && q->db &&
                         strstr(sqlite3_errmsg(q->db), SQLITE_FENCED_MESSAGE))
                        r = -ESTALE; /* a fence trigger (sqlite_op_fence) */
                else
                        r = -EINVAL;
                break;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                r = -EAGAIN;
                break;
        case SQLITE_NOMEM:
                r = -ENOMEM;
                break;
        case SQLITE_FULL:
                r = -ENOSPC;
                break;
        case SQLITE_READONLY:
                r = -EROFS;
                break;
        case SQLITE_PERM:
        case SQLITE_AUTH:
                r = -EACCES;
                break;
        case SQLITE_TOOBIG:
                r = -E2BIG;
                break;
        case SQLITE_CANTOPEN: {
                int e = q && q->db ? sqlite3_system_errno(q->db) : 0;
                r = e > 0 ? -e : -EIO;
                break;
        }
        default:
                r = -EIO;
        }
        log_debug("store: sqlite error %d (%s): %s", rc, sqlite3_errstr(rc),
                  q && q->db ? sqlite3_errmsg(q->db) : "-");
        return r;
}

int sqlite_store_prepare(SqliteStore *q, sqlite3_stmt **slot, const char *sql, sqlite3_stmt **ret) {
        int rc;

        if (!*slot) {
                rc = sqlite3_prepare_v3(q->db, sql, -1, SQLITE_PREPARE_PERSISTENT, slot, NULL);
                if (rc != SQLITE_OK) {
                        *slot = NULL;
                        return sqlite_store_errno(q, rc);
                }
        }
        *ret = *slot;
        return 0;
}

int sqlite_store_stmt(SqliteStore *q, SqlStmt id, sqlite3_stmt **ret) {
        if (id < 0 || id >= _SQL_STMT_MAX)
                return -EINVAL;
        return sqlite_store_prepare(q, &q->stmts[id], sqlite_stmt_sql[id], ret);
}

int sqlite_store_step(SqliteStore *q, sqlite3_stmt *st) {
        STORE_TIMED;
        int rc = sqlite3_step(st);

        if (rc == SQLITE_ROW)
                return 1;
        if (rc == SQLITE_DONE)
                return 0;
        return sqlite_store_errno(q, rc);
}

int sqlite_store_get_row(SqliteStore *q, sqlite3_stmt *st, SqliteRowReader read, void *ret) {
        int r = sqlite_store_step(q, st);

        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        return read(st, ret);
}

int sqlite_store_list_rows(SqliteStore *q, sqlite3_stmt *st, size_t size, SqliteRowReader read,
                           StoreRowsFree free_rows, void **ret, size_t *ret_n) {
        void *a = NULL;
        size_t n = 0, allocated = 0;
        int r;

        while ((r = sqlite_store_step(q, st)) > 0) {
                r = greedy_realloc(&a, &allocated, n + 1, size);
                if (r < 0)
                        break;
                r = read(st, (uint8_t *) a + n * size);
                if (r < 0)
                        break;
                n++;
        }
        if (r < 0) {
                if (free_rows)
                        free_rows(a, n);
                else
                        free(a);
                return r;
        }
        *ret = a;
        *ret_n = n;
        return 0;
}

int sqlite_store_step_changes(SqliteStore *q, sqlite3_stmt *st) {
        int r = sqlite_store_step_done(q, st);
        if (r < 0)
                return r;
        return (int) MIN(sqlite3_changes64(q->db), (sqlite3_int64) INT32_MAX);
}

int sqlite_store_step_changed(SqliteStore *q, sqlite3_stmt *st) {
        int r = sqlite_store_step_changes(q, st);
        if (r < 0)
                return r;
        return r == 0 ? -ENOENT : 0;
}

int sqlite_store_step_cas(SqliteStore *q, sqlite3_stmt *st, int (*exists)(SqliteStore *q, const char *key),
                          const char *key) {
        int r = sqlite_store_step_changes(q, st);

        if (r != 0)
                return r < 0 ? r : 0;
        /* lost the compare-and-set, or there is no such row */
        r = exists(q, key);
        if (r < 0)
                return r;
        return r > 0 ? -ESTALE : -ENOENT;
}

int sqlite_store_step_done(SqliteStore *q, sqlite3_stmt *st) {
        int r;

        do
                r = sqlite_store_step(q, st);
        while (r > 0);
        return r;
}

int sqlite_store_exec(SqliteStore *q, SqlStmt id) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = sqlite_store_stmt(q, id, &st);
        if (r < 0)
                return r;
        return sqlite_store_step_done(q, st);
}

int sqlite_store_begin(SqliteStore *q, SqliteStore **ret_tx) {
        int r = sqlite_store_exec(q, q->batch ? SQL_SAVEPOINT : SQL_BEGIN_IMMEDIATE);
        if (r < 0)
                return r;
        *ret_tx = q;
        return 0;
}

int sqlite_store_commit(SqliteStore **tx) {
        SqliteStore *q = *tx;
        int r = sqlite_store_exec(q, q->batch ? SQL_RELEASE : SQL_COMMIT);
        if (r < 0)
                return r; /* *tx stays set: the cleanup rolls back */
        *tx = NULL;
        return 0;
}

void sqlite_store_rollbackp(SqliteStore **tx) {
        SqliteStore *q = *tx;

        if (!q)
                return;
        if (q->batch) {
                /* this operation only: the batch goes on */
                (void) sqlite_store_exec(q, SQL_ROLLBACK_TO);
                (void) sqlite_store_exec(q, SQL_RELEASE);
        } else if (!sqlite3_get_autocommit(q->db))
                (void) sqlite_store_exec(q, SQL_ROLLBACK);
        *tx = NULL;
}

int sqlite_store_batch_begin(Store *s) {
        SqliteStore *q = sqlite_store(s);
        int r;

        if (q->batch)
                return -EBUSY; /* batches do not nest */
        r = sqlite_store_exec(q, SQL_BEGIN_IMMEDIATE);
        if (r < 0)
                return r;
        q->batch = true;
        return 0;
}

int sqlite_store_batch_end(Store *s) {
        SqliteStore *q = sqlite_store(s);
        int r;

        if (!q->batch)
                return -EINVAL;
        q->batch = false;
        r = sqlite_store_exec(q, SQL_COMMIT);
        if (r < 0 && !sqlite3_get_autocommit(q->db))
                (void) sqlite_store_exec(q, SQL_ROLLBACK);
        return r;
}

int sqlite_bind_text(SqliteStore *q, sqlite3_stmt *st, int i, const char *s) {
        int rc = s ? sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC) : sqlite3_bind_null(st, i);
        return rc == SQLITE_OK ? 0 : sqlite_store_errno(q, rc);
}

int sqlite_bind_int64(SqliteStore *q, sqlite3_stmt *st, int i, int64_t v) {
        int rc = sqlite3_bind_int64(st, i, v);
        return rc == SQLITE_OK ? 0 : sqlite_store_errno(q, rc);
}

int sqlite_bind_text_named(SqliteStore *q, sqlite3_stmt *st, const char *name, const char *s) {
        int i = sqlite3_bind_parameter_index(st, name);
        return i > 0 ? sqlite_bind_text(q, st, i, s) : 0;
}

int sqlite_bind_int64_named(SqliteStore *q, sqlite3_stmt *st, const char *name, int64_t v) {
        int i = sqlite3_bind_parameter_index(st, name);
        return i > 0 ? sqlite_bind_int64(q, st, i, v) : 0;
}

int sqlite_col_str(sqlite3_stmt *st, int i, char *buf, size_t size) {
        const unsigned char *t = sqlite3_column_text(st, i);
        int n = sqlite3_column_bytes(st, i);

        if (!t) {
                if (sqlite3_column_type(st, i) != SQLITE_NULL)
                        return -ENOMEM;
                buf[0] = 0;
                return 0;
        }
        if (n < 0 || (size_t) n >= size || memchr(t, 0, (size_t) n))
                return -EBADMSG;
        memcpy(buf, t, (size_t) n);
        buf[n] = 0;
        return 0;
}

int sqlite_col_strdup(sqlite3_stmt *st, int i, char **ret) {
        const unsigned char *t;
        int n;

        if (sqlite3_column_type(st, i) == SQLITE_NULL) {
                *ret = NULL;
                return 0;
        }
        t = sqlite3_column_text(st, i);
        n = sqlite3_column_bytes(st, i);
        if (!t || n < 0)
                return -ENOMEM;
        if (memchr(t, 0, (size_t) n))
                return -EBADMSG;
        *ret = memdup_suffix0(t, (size_t) n);
        return *ret ? 0 : -ENOMEM;
}

int sqlite_col_i64(sqlite3_stmt *st, int i, int64_t *ret) {
        int64_t v;

        if (sqlite3_column_type(st, i) != SQLITE_INTEGER)
                return -EBADMSG;
        v = sqlite3_column_int64(st, i);
        if (v < 0)
                return -EBADMSG;
        *ret = v;
        return 0;
}

int sqlite_col_u64(sqlite3_stmt *st, int i, uint64_t *ret) {
        int64_t v;
        int r = sqlite_col_i64(st, i, &v);
        if (r < 0)
                return r;
        *ret = (uint64_t) v;
        return 0;
}

int sqlite_col_u32(sqlite3_stmt *st, int i, uint32_t *ret) {
        int64_t v;
        int r = sqlite_col_i64(st, i, &v);
        if (r < 0)
                return r;
        if (v > UINT32_MAX)
                return -EBADMSG;
        *ret = (uint32_t) v;
        return 0;
}

static void finalize_all(sqlite3_stmt **a, size_t n) {
        for (size_t i = 0; i < n; i++)
                a[i] = (sqlite3_finalize(a[i]), NULL);
}

void sqlite_store_close(Store *s) {
        SqliteStore *q = sqlite_store(s);

        if (!q)
                return;
        finalize_all(q->stmts, ELEMENTSOF(q->stmts));
        finalize_all(q->lifecycle, ELEMENTSOF(q->lifecycle));
        finalize_all(q->credentials, ELEMENTSOF(q->credentials));
        finalize_all(q->cluster, ELEMENTSOF(q->cluster));
        finalize_all(q->tenants, ELEMENTSOF(q->tenants));
        finalize_all(q->volumes, ELEMENTSOF(q->volumes));
        finalize_all(q->template_versions, ELEMENTSOF(q->template_versions));
        finalize_all(q->webhooks, ELEMENTSOF(q->webhooks));
        finalize_all(q->settings, ELEMENTSOF(q->settings));
        finalize_all(q->sandbox_list, ELEMENTSOF(q->sandbox_list));
        finalize_all(q->sandbox_count, ELEMENTSOF(q->sandbox_count));
        finalize_all(q->event_list, ELEMENTSOF(q->event_list));
        if (q->db)
                (void) sqlite3_close(q->db); /* every statement is finalized: cannot be BUSY */
        free(q);
}

static void sqlite_store_closep(SqliteStore **q) {
        if (*q)
                sqlite_store_close(&(*q)->base);
}

int sqlite_store_schema_version(Store *s) {
        SqliteStore *q = sqlite_store(s);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int64_t v;
        int r;

        r = sqlite_store_stmt(q, SQL_SCHEMA_VERSION, &st);
        if (r < 0)
                return r;
        r = sqlite_store_step(q, st);
        if (r < 0)
                return r;
        if (r == 0 || sqlite_col_i64(st, 0, &v) < 0 || v > INT32_MAX)
                return -EBADMSG;
        return (int) v;
}

static void sleep_retry(void) {
        struct timespec ts = { .tv_nsec = SQLITE_RETRY_SLEEP_NSEC };
        (void) nanosleep(&ts, NULL);
}

/* Switching to WAL needs an exclusive lock and does not always go through
 * the busy handler, so a concurrent opener retries here for the same time. */
static int sqlite_store_set_wal(SqliteStore *q, bool in_memory) {
        int64_t deadline = now_usec() + (int64_t) SQLITE_BUSY_TIMEOUT_MSEC * 1000;

        for (;;) {
                sqlite3_stmt *st = NULL;
                char mode[16] = "";
                int rc;

                rc = sqlite3_prepare_v2(q->db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
                if (rc == SQLITE_OK) {
                        rc = sqlite3_step(st);
                        if (rc == SQLITE_ROW) {
                                (void) sqlite_col_str(st, 0, mode, sizeof mode);
                                rc = SQLITE_OK;
                        }
                }
                (void) sqlite3_finalize(st);

                if (rc == SQLITE_OK) {
                        if (streq(mode, "wal") || (in_memory && streq(mode, "memory")))
                                return 0;
                        log_debug("store: journal_mode is '%s', not wal", mode);
                        return -EIO;
                }
                if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
                        return sqlite_store_errno(q, rc);
                if (now_usec() > deadline)
                        return sqlite_store_errno(q, rc);
                sleep_retry();
        }
}

static int sqlite_store_migration_applied(SqliteStore *q, int version) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = sqlite_store_stmt(q, SQL_MIGRATION_APPLIED, &st);
        if (r < 0)
                return r;
        r = sqlite_bind_int64(q, st, 1, version);
        if (r < 0)
                return r;
        return sqlite_store_step(q, st); /* 1 = applied */
}

static int sqlite_store_apply(SqliteStore *q, const StoreMigration *m) {
        _cleanup_tx_ SqliteStore *tx = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        char *err = NULL;
        int r, rc;

        /* The write lock first, then look again: another process may have
         * applied it while we waited. */
        r = sqlite_store_begin(q, &tx);
        if (r < 0)
                return r;
        r = sqlite_store_migration_applied(q, m->version);
        if (r != 0)
                return r < 0 ? r : 0; /* rolls back the empty transaction */

        rc = sqlite3_exec(q->db, m->sql, NULL, NULL, &err);
        if (rc != SQLITE_OK) {
                log_debug("store: migration %s failed: %s", m->name, strna(err));
                sqlite3_free(err);
                return sqlite_store_errno(q, rc);
        }

        r = sqlite_store_stmt(q, SQL_MIGRATION_RECORD, &st);
        if (r < 0)
                return r;
        if ((r = sqlite_bind_int64(q, st, 1, m->version)) < 0 ||
            (r = sqlite_bind_text(q, st, 2, m->name)) < 0 ||
            (r = sqlite_bind_int64(q, st, 3, now_usec())) < 0)
                return r;
        r = sqlite_store_step_done(q, st);
        if (r < 0)
                return r;
        sqlite_stmt_resetp(&st);
        st = NULL;

        r = sqlite_store_commit(&tx);
        if (r < 0)
                return r;
        log_debug("store: applied migration %s", m->name);
        return 0;
}

static int sqlite_store_migrate(SqliteStore *q) {
        int rc, current;

        rc = sqlite3_exec(q->db, SQL_CREATE_MIGRATIONS, NULL, NULL, NULL);
        if (rc != SQLITE_OK)
                return sqlite_store_errno(q, rc);

        current = sqlite_store_schema_version(&q->base);
        if (current < 0)
                return current;
        if (store_sqlite_migrations_count == 0 ||
            current > store_sqlite_migrations[store_sqlite_migrations_count - 1].version) {
                log_debug("store: database schema %d is newer than this program's", current);
                return -EPROTO;
        }

        /* every version not recorded yet, also below the highest one: versions
         * may have gaps that a later build fills (see embed-migrations.py) */
        for (size_t i = 0; i < store_sqlite_migrations_count; i++) {
                const StoreMigration *m = &store_sqlite_migrations[i];
                int r;

                r = sqlite_store_apply(q, m); /* skips what is recorded */
                if (r < 0)
                        return r;
        }
        return 0;
}

/* SQLite creates the file 0644; make it 0600 first (the WAL and shm files
 * inherit the database file's mode). Only a file that does not exist yet is
 * opened here: closing a descriptor of the database drops every POSIX lock
 * this process holds on it, those of the open connections of other threads
 * included, and then another process may take the WAL away from under them
 * (SQLite reports the database malformed). */
static int sqlite_store_create_file(const char *path) {
        _cleanup_close_ int fd = -EBADF;

        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, SQLITE_DB_MODE);
        if (fd < 0 && errno == EEXIST)
                return 0;
        if (fd < 0)
                return -errno;
        return 0;
}

int sqlite_store_open(const char *location, Store **ret) {
        _cleanup_(sqlite_store_closep) SqliteStore *q = NULL;
        bool in_memory = streq(location, ":memory:");
        int r, rc;

        if (!in_memory) {
                r = sqlite_store_create_file(location);
                if (r < 0)
                        return r;
        }

        q = new0(SqliteStore, 1);
        if (!q)
                return -ENOMEM;
        q->base.ops = &store_sqlite_ops;

        rc = sqlite3_open_v2(location, &q->db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX |
                             SQLITE_OPEN_EXRESCODE,
                             NULL);
        if (rc != SQLITE_OK)
                return q->db ? sqlite_store_errno(q, rc) : -ENOMEM;

        rc = sqlite3_busy_timeout(q->db, SQLITE_BUSY_TIMEOUT_MSEC);
        if (rc != SQLITE_OK)
                return sqlite_store_errno(q, rc);

        r = sqlite_store_set_wal(q, in_memory);
        if (r < 0)
                return r;

        rc = sqlite3_exec(q->db, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON", NULL, NULL, NULL);
        if (rc != SQLITE_OK)
                return sqlite_store_errno(q, rc);

        r = sqlite_store_migrate(q);
        if (r < 0)
                return r;

        *ret = &TAKE_PTR(q)->base;
        return 0;
}
