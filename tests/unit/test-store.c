/* SPDX-License-Identifier: MIT */
/* The store against real databases: every STORE_TEST runs twice, on a fresh
 * SQLite file in a temporary directory and on a fresh PostgreSQL database.
 *
 * PostgreSQL: $SPACE_TEST_PG_URL names a server whose role may create
 * databases (one per test, dropped at the end); without it the test starts a
 * private server with tests/pg-test-server.sh (skipping the PostgreSQL half
 * only if the PostgreSQL binaries are missing) and stops it at exit, also
 * when a test fails or the test process dies: a guardian process holds the
 * URL and stops the server when our end of its pipe closes. */

#include <fcntl.h>
#include <libpq-fe.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "log.h"
#include "store-migrations.h"
#include "store-postgres.h"
#include "store.h"
#include "str-util.h"
#include "test.h"

#ifndef SPACE_SOURCE_ROOT
#error "SPACE_SOURCE_ROOT must be defined by the build"
#endif

#define CONCURRENT_PROCS 4
#define CONCURRENT_INSERTS 30

#define PG_SERVER_SCRIPT SPACE_SOURCE_ROOT "/tests/pg-test-server.sh"
#define PG_URL_MAX 1024
#define PG_DATABASES_MAX 128
#define PG_WAIT_MSEC 10000     /* for a lock wait to show up in pg_locks */
#define PG_PASSWORD_ROLE "space_pw"
#define PG_PASSWORD "S3cr3tPa55"

typedef enum Backend {
        BACKEND_SQLITE,
        BACKEND_POSTGRES,
} Backend;

static Backend backend; /* of the running test */

static struct {
        bool tried;                          /* setup ran (once per process) */
        char skip[256];                      /* why the PostgreSQL half is skipped */
        char url[PG_URL_MAX];                /* a maintenance database on the server */
        char own[PG_URL_MAX];                /* = url if we started the server, else "" */
        pid_t guardian;
        int guardian_fd;                     /* its pipe; closing it stops the server */
        PGconn *admin;
        char databases[PG_DATABASES_MAX][64]; /* created for tests */
        size_t n_databases;
} pg = { .guardian_fd = -EBADF };

static const char *db_path(const char *name) {
        static char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", test_tmpdir(), name);
        return p;
}

static Store *open_url(const char *url) {
        Store *s = NULL;

        ASSERT_OK(store_open(url, &s));
        ASSERT_NOT_NULL(s);
        return s;
}

static Store *open_db(const char *name) {
        char url[PATH_MAX + 16];

        snprintf(url, sizeof url, "sqlite:%s", db_path(name));
        return open_url(url);
}

static size_t migrations_count(void) {
        return backend == BACKEND_POSTGRES ? store_postgres_migrations_count : store_sqlite_migrations_count;
}

/* The highest version built in (versions may have gaps: 1, 2, 5, ...). */
static int latest_version(void) {
        const StoreMigration *m = backend == BACKEND_POSTGRES ? store_postgres_migrations : store_sqlite_migrations;
        return m[migrations_count() - 1].version;
}

/* Runs the server script with one or two arguments; its stdout (trimmed)
 * into out. Returns its exit status, or -1 if it did not run. */
static int run_script(const char *cmd, const char *arg, char *out, size_t size) {
        int fds[2], status;
        size_t n = 0;
        pid_t pid;

        if (pipe2(fds, O_CLOEXEC) < 0)
                return -1;
        pid = fork();
        if (pid < 0) {
                close(fds[0]);
                close(fds[1]);
                return -1;
        }
        if (pid == 0) {
                const char *argv[] = { "/bin/sh", PG_SERVER_SCRIPT, cmd, arg, NULL };
                if (dup2(fds[1], STDOUT_FILENO) < 0)
                        _exit(126);
                execv(argv[0], (char **) argv);
                _exit(127);
        }
        close(fds[1]);
        for (;;) {
                char buf[256];
                ssize_t k = read(fds[0], buf, sizeof buf);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                for (ssize_t i = 0; i < k && out && n + 1 < size; i++)
                        out[n++] = buf[i];
        }
        close(fds[0]);
        while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
                n--;
        if (out && size > 0)
                out[n] = 0;
        if (waitpid(pid, &status, 0) != pid)
                return -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The guardian: blocks until every write end of its pipe is closed (the test
 * process exited or died), then stops the server whose URL it was sent. It
 * leaves our session so a ^C or a timeout kill of the test does not reach it. */
static void guardian_main(int rfd) {
        char url[PG_URL_MAX];
        size_t n = 0;

        (void) setsid();
        (void) signal(SIGINT, SIG_IGN);
        (void) signal(SIGTERM, SIG_IGN);
        (void) signal(SIGHUP, SIG_IGN);
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
                (void) dup2(null, STDIN_FILENO);
                (void) dup2(null, STDOUT_FILENO);
        }
        for (;;) {
                ssize_t k = read(rfd, url + n, sizeof url - 1 - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                n += (size_t) k;
                if (n >= sizeof url - 1)
                        break;
        }
        url[n] = 0;
        if (n == 0)
                _exit(0);
        const char *argv[] = { "/bin/sh", PG_SERVER_SCRIPT, "stop", url, NULL };
        execv(argv[0], (char **) argv);
        _exit(127);
}

static void pg_teardown(void) {
        if (pg.admin) {
                /* databases on a server we did not start; ours goes whole */
                for (size_t i = 0; !pg.own[0] && i < pg.n_databases; i++) {
                        char sql[128];
                        snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS \"%s\" WITH (FORCE)", pg.databases[i]);
                        PQclear(PQexec(pg.admin, sql));
                }
                PQfinish(pg.admin);
                pg.admin = NULL;
        }
        if (pg.guardian > 0) {
                pg.guardian_fd = safe_close(pg.guardian_fd);
                (void) waitpid(pg.guardian, NULL, 0);
                pg.guardian = 0;
        }
}

static void pg_setup(void) {
        const char *env = secure_getenv("SPACE_TEST_PG_URL");
        int fds[2], r;

        atexit(pg_teardown);
        if (env && env[0]) {
                if (strlen(env) >= sizeof pg.url - 64) {
                        snprintf(pg.skip, sizeof pg.skip, "SPACE_TEST_PG_URL is too long");
                        return;
                }
                snprintf(pg.url, sizeof pg.url, "%s", env);
        } else {
                if (pipe2(fds, O_CLOEXEC) < 0)
                        return;
                pg.guardian = fork();
                if (pg.guardian < 0) {
                        close(fds[0]);
                        close(fds[1]);
                        return;
                }
                if (pg.guardian == 0) {
                        close(fds[1]);
                        guardian_main(fds[0]);
                }
                close(fds[0]);
                pg.guardian_fd = fds[1];

                r = run_script("start", NULL, pg.url, sizeof pg.url);
                if (r == 77) {
                        snprintf(pg.skip, sizeof pg.skip,
                                 "no PostgreSQL server binaries (initdb, pg_ctl; Debian: apt-get install postgresql)");
                        pg.url[0] = 0;
                        return;
                }
                if (r != 0 || !startswith(pg.url, "postgresql://")) {
                        fprintf(stderr, "  pg-test-server.sh start failed (%d)\n", r);
                        pg.url[0] = 0;
                        return;
                }
                snprintf(pg.own, sizeof pg.own, "%s", pg.url);
                (void) loop_write(pg.guardian_fd, pg.url, strlen(pg.url));
        }

        pg.admin = PQconnectdb(pg.url);
        if (PQstatus(pg.admin) != CONNECTION_OK) {
                fprintf(stderr, "  cannot connect to the test server: %s", PQerrorMessage(pg.admin));
                PQfinish(pg.admin);
                pg.admin = NULL;
                pg.url[0] = 0;
                return;
        }
        PQclear(PQexec(pg.admin, "SET client_min_messages = warning"));
}

/* Runs admin SQL; fails the test on error. */
static void pg_admin(const char *sql) {
        PGresult *res = PQexec(pg.admin, sql);
        ExecStatusType st = PQresultStatus(res);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
                fprintf(stderr, "  %s: %s", sql, PQresultErrorMessage(res));
                PQclear(res);
                test_fail(__FILE__, __LINE__, "admin SQL failed");
        }
        PQclear(res);
}

/* The first column of the first row of a query of the admin connection, as a number. */
static long pg_admin_number(const char *sql) {
        PGresult *res = PQexec(pg.admin, sql);
        long v = -1;

        if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) > 0)
                v = strtol(PQgetvalue(res, 0, 0), NULL, 10);
        PQclear(res);
        return v;
}

/* pg_terminate_backend() only signals: waits (bounded) until the store's
 * backends of db are gone, so the test does not race their exit. */
static void pg_wait_backends_gone(const char *db) {
        char sql[256];

        snprintf(sql, sizeof sql, "SELECT count(*) FROM pg_stat_activity WHERE datname = '%s' AND "
                 "application_name = 'space'", db);
        for (unsigned i = 0; i < 1000; i++) {
                if (pg_admin_number(sql) == 0)
                        return;
                usleep(10000);
        }
        test_fail(__FILE__, __LINE__, "the terminated backends of %s did not exit within 10 s", db);
}

static void use_backend(Backend b) {
        backend = b;
        if (b != BACKEND_POSTGRES)
                return;
        if (!pg.tried) {
                pg.tried = true;
                pg_setup();
        }
        if (pg.skip[0])
                test_skip(pg.skip);
        if (!pg.admin)
                test_fail(__FILE__, __LINE__, "no PostgreSQL test server");
}

/* A URL of a fresh, empty database of the running test's back end. */
static const char *fresh_url(void) {
        static char ring[8][PG_URL_MAX + 80];
        static unsigned next, counter;
        char *u = ring[next++ % ELEMENTSOF(ring)], sql[256];

        counter++;
        if (backend == BACKEND_SQLITE) {
                snprintf(u, sizeof ring[0], "sqlite:%s/db%u.db", test_tmpdir(), counter);
                return u;
        }
        ASSERT_TRUE(pg.n_databases < PG_DATABASES_MAX);
        char *name = pg.databases[pg.n_databases];
        snprintf(name, sizeof pg.databases[0], "space_test_%d_%u", (int) getpid(), counter);
        snprintf(sql, sizeof sql,
                 "CREATE DATABASE \"%s\" TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'", name);
        pg_admin(sql);
        pg.n_databases++;
        snprintf(u, sizeof ring[0], "%s%sdbname=%s", pg.url, strchr(pg.url, '?') ? "&" : "?", name);
        return u;
}

/* Runs one SQL statement on the database behind the store's back. */
static void raw_sql(const char *url, const char *sql) {
        if (backend == BACKEND_SQLITE) {
                sqlite3 *db = NULL;
                ASSERT_EQ(sqlite3_open(url + STRLEN("sqlite:"), &db), SQLITE_OK);
                sqlite3_busy_timeout(db, 5000);
                int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
                sqlite3_close(db);
                ASSERT_EQ(rc, SQLITE_OK);
                return;
        }
        PGconn *c = PQconnectdb(url);
        ASSERT_EQ(PQstatus(c), CONNECTION_OK);
        PGresult *res = PQexec(c, sql);
        ExecStatusType st = PQresultStatus(res);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
                fprintf(stderr, "  %s: %s", sql, PQresultErrorMessage(res));
        PQclear(res);
        PQfinish(c);
        ASSERT_TRUE(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK);
}

/* The first column of the first row of a query, as an integer. */
static int64_t raw_query_i64(const char *url, const char *sql) {
        int64_t v = 0;

        if (backend == BACKEND_SQLITE) {
                sqlite3 *db = NULL;
                sqlite3_stmt *st = NULL;
                ASSERT_EQ(sqlite3_open(url + STRLEN("sqlite:"), &db), SQLITE_OK);
                int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
                if (rc == SQLITE_OK)
                        rc = sqlite3_step(st);
                if (rc == SQLITE_ROW)
                        v = sqlite3_column_int64(st, 0);
                sqlite3_finalize(st);
                sqlite3_close(db);
                ASSERT_EQ(rc, SQLITE_ROW);
                return v;
        }
        PGconn *c = PQconnectdb(url);
        ASSERT_EQ(PQstatus(c), CONNECTION_OK);
        PGresult *res = PQexec(c, sql);
        bool ok = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) >= 1 &&
                safe_atoi64(PQgetvalue(res, 0, 0), &v) >= 0;
        if (!ok)
                fprintf(stderr, "  %s: %s", sql, PQresultErrorMessage(res));
        PQclear(res);
        PQfinish(c);
        ASSERT_TRUE(ok);
        return v;
}

/* A test body that takes the URL of a fresh database, run once per back end. */
#define STORE_TEST(name)                                 \
        static void name##_body(const char *url);         \
        TEST(name##_sqlite) {                             \
                use_backend(BACKEND_SQLITE);              \
                name##_body(fresh_url());                 \
        }                                                 \
        TEST(name##_postgres) {                           \
                use_backend(BACKEND_POSTGRES);            \
                name##_body(fresh_url());                 \
        }                                                 \
        static void name##_body(const char *url)

static void sandbox_init(Sandbox *sb, const char *id, const char *tenant, const char *tmpl) {
        *sb = (Sandbox){
                .state = SANDBOX_CREATING,
                .cpu_millis = 1000,
                .memory_mb = 512,
                .disk_mb = 2048,
                .pids_max = 1024,
        };
        ASSERT_OK(strscpy(sb->id, sizeof sb->id, id));
        ASSERT_OK(strscpy(sb->tenant_id, sizeof sb->tenant_id, tenant));
        ASSERT_OK(strscpy(sb->template_name, sizeof sb->template_name, tmpl));
        ASSERT_OK(strscpy(sb->runtime, sizeof sb->runtime, "ns"));
}

static uint32_t insert_sandbox(Store *s, const char *id, const char *tenant) {
        Sandbox sb;
        sandbox_init(&sb, id, tenant, "base");
        ASSERT_OK(store_sandbox_insert(s, &sb));
        return sb.slot;
}

static Event make_event(const char *tenant, const char *sandbox, const char *type) {
        Event e = {};
        (void) strscpy(e.tenant_id, sizeof e.tenant_id, tenant);
        (void) strscpy(e.sandbox_id, sizeof e.sandbox_id, sandbox);
        (void) strscpy(e.type, sizeof e.type, type);
        (void) strscpy(e.actor, sizeof e.actor, "system");
        return e;
}

TEST(string_tables) {
        for (int i = 0; i < _SANDBOX_STATE_MAX; i++) {
                const char *str = sandbox_state_to_string(i);
                ASSERT_NOT_NULL(str);
                ASSERT_EQ(sandbox_state_from_string(str), i);
        }
        for (int i = 0; i < _TEMPLATE_STATE_MAX; i++) {
                const char *str = template_state_to_string(i);
                ASSERT_NOT_NULL(str);
                ASSERT_EQ(template_state_from_string(str), i);
        }
        ASSERT_NULL(sandbox_state_to_string(_SANDBOX_STATE_MAX));
        ASSERT_NULL(sandbox_state_to_string(-1));
        ASSERT_NULL(template_state_to_string(_TEMPLATE_STATE_MAX));
        ASSERT_ERRNO(sandbox_state_from_string("Running"), EINVAL);
        ASSERT_ERRNO(sandbox_state_from_string(""), EINVAL);
        ASSERT_ERRNO(sandbox_state_from_string(NULL), EINVAL);
        ASSERT_ERRNO(template_state_from_string("gone"), EINVAL);
        ASSERT_STREQ(sandbox_state_to_string(SANDBOX_RUNNING), "running");
        /* store-sqlite-ops.c and the partial index spell this literally */
        ASSERT_STREQ(sandbox_state_to_string(SANDBOX_DELETED), "deleted");
        ASSERT_STREQ(template_state_to_string(TEMPLATE_READY), "ready");
}

TEST(now_usec) {
        int64_t a = now_usec(), b = now_usec();
        ASSERT_TRUE(a > 1600000000LL * 1000000);
        ASSERT_TRUE(b >= a);
}

TEST(open_urls) {
        char url[PATH_MAX + 16];
        Store *s = NULL;

        snprintf(url, sizeof url, "%s", db_path("plain.db"));
        ASSERT_OK(store_open(url, &s));
        ASSERT_STREQ(store_backend_name(s), "sqlite");
        s = store_close(s);
        ASSERT_NULL(s);

        snprintf(url, sizeof url, "sqlite://%s", db_path("slashes.db"));
        ASSERT_OK(store_open(url, &s));
        s = store_close(s);
        ASSERT_EQ(access(db_path("slashes.db"), F_OK), 0);

        ASSERT_OK(store_open("sqlite::memory:", &s));
        ASSERT_EQ(store_schema_version(s), store_sqlite_migrations[store_sqlite_migrations_count - 1].version);
        s = store_close(s);

        /* PostgreSQL URLs reach libpq (nothing listens on port 1) */
        ASSERT_ERRNO(store_open("postgresql://127.0.0.1:1/space", &s), ECONNREFUSED);
        ASSERT_ERRNO(store_open("postgres://user@127.0.0.1:1/space", &s), ECONNREFUSED);
        ASSERT_ERRNO(store_open("postgres:nothing", &s), EINVAL);
        ASSERT_ERRNO(store_open("mysql://localhost/space", &s), EPROTONOSUPPORT);
        ASSERT_ERRNO(store_open("", &s), EINVAL);
        ASSERT_ERRNO(store_open("sqlite:", &s), EINVAL);
        ASSERT_ERRNO(store_open(NULL, &s), EINVAL);
        ASSERT_ERRNO(store_open("x.db", NULL), EINVAL);
        snprintf(url, sizeof url, "sqlite:%s/no/such/dir/x.db", test_tmpdir());
        ASSERT_ERRNO(store_open(url, &s), ENOENT);
        ASSERT_NULL(s);

        _cleanup_free_ char *huge = malloc(STORE_URL_MAX + 1);
        ASSERT_NOT_NULL(huge);
        memset(huge, 'a', STORE_URL_MAX);
        huge[STORE_URL_MAX] = 0;
        ASSERT_ERRNO(store_open(huge, &s), ENAMETOOLONG);

        /* NULL handles are refused, not dereferenced */
        ASSERT_NULL(store_close(NULL));
        ASSERT_NULL(store_backend_name(NULL));
        ASSERT_ERRNO(store_schema_version(NULL), EINVAL);
}

TEST(open_refuses_garbage_file) {
        static const char junk[] = "this is not an sqlite database, not at all, no. padding padding padding";
        _cleanup_close_ int fd = open(db_path("junk.db"), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        Store *s = NULL;

        ASSERT_TRUE(fd >= 0);
        ASSERT_EQ(write(fd, junk, sizeof junk), (ssize_t) sizeof junk);
        ASSERT_ERRNO(store_open(db_path("junk.db"), &s), EIO);
        ASSERT_NULL(s);
}

/* Checks that every descriptor of ours whose target starts with prefix is
 * close-on-exec; returns how many there are. */
static unsigned check_cloexec_fds(const char *prefix) {
        _cleanup_(closedirp_) DIR *d = opendir("/proc/self/fd");
        unsigned seen = 0;

        ASSERT_NOT_NULL(d);
        for (struct dirent *de; (de = readdir(d));) {
                char link[64], target[PATH_MAX];
                int fd;
                if (safe_atoi(de->d_name, &fd) < 0)
                        continue;
                snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
                ssize_t n = readlink(link, target, sizeof target - 1);
                if (n <= 0)
                        continue;
                target[n] = 0;
                if (!startswith(target, prefix))
                        continue;
                int flags = fcntl(fd, F_GETFD);
                ASSERT_TRUE(flags >= 0);
                ASSERT_TRUE(flags & FD_CLOEXEC);
                seen++;
        }
        return seen;
}

TEST(database_is_private_and_cloexec) {
        _cleanup_(store_closep) Store *s = open_db("private.db");
        Tenant t;
        struct stat st;
        unsigned seen;

        ASSERT_OK(store_tenant_create(s, "acme", &t)); /* creates the -wal file */
        ASSERT_EQ(stat(db_path("private.db"), &st), 0);
        ASSERT_EQ(st.st_mode & 0777, 0600);
        ASSERT_EQ(stat(db_path("private.db-wal"), &st), 0);
        ASSERT_EQ(st.st_mode & 0777, 0600);

        /* every descriptor SQLite holds on our files is close-on-exec */
        seen = check_cloexec_fds(test_tmpdir());
        ASSERT_TRUE(seen >= 2); /* the database and its WAL */
}

/* A second open in the same process must not drop the locks the first
 * handle holds (closing any descriptor of the file would): else another
 * process that opens and closes the database believes it is the last one,
 * checkpoints and deletes the WAL under the first handle. The other process
 * is this binary again (a forked child would share SQLite's lock bookkeeping
 * with us), told by LOCKS_HELPER_ENV to open, read and close. */
#define LOCKS_HELPER_ENV "SPACE_TEST_STORE_LOCKS_DB"
#define LOCKS_TEST "second_open_keeps_the_first_handles_locks"

TEST(second_open_keeps_the_first_handles_locks) {
        const char *helper = secure_getenv(LOCKS_HELPER_ENV);
        char url[PATH_MAX + 16], wal[PATH_MAX + 8], env[PATH_MAX + 64];
        Store *a, *b;
        Sandbox *list = NULL;
        size_t n;
        int status;
        pid_t pid;

        if (helper) {
                sqlite3 *db = NULL;
                int rc = sqlite3_open(helper, &db);
                if (rc == SQLITE_OK)
                        rc = sqlite3_exec(db, "SELECT COUNT(*) FROM sandboxes", NULL, NULL, NULL);
                sqlite3_close(db);
                _exit(rc == SQLITE_OK ? 0 : 1);
        }

        snprintf(url, sizeof url, "sqlite:%s", db_path("locks.db"));
        snprintf(wal, sizeof wal, "%s-wal", db_path("locks.db"));
        snprintf(env, sizeof env, "%s=%s", LOCKS_HELPER_ENV, db_path("locks.db"));
        a = open_url(url);
        insert_sandbox(a, "one", "tn_a");
        b = open_url(url);
        insert_sandbox(b, "two", "tn_a");

        pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                char *argv[] = { (char *) "/proc/self/exe", (char *) LOCKS_TEST, NULL };
                char *envp[] = { env, NULL };
                execve(argv[0], argv, envp);
                _exit(127);
        }
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        /* the other process did not take the WAL away */
        ASSERT_EQ(access(wal, F_OK), 0);
        insert_sandbox(a, "three", "tn_a");
        ASSERT_OK(store_sandbox_list(b, NULL, &list, &n));
        ASSERT_EQ(n, 3);
        sandbox_array_free(list, n);
        store_close(b);
        store_close(a);
}

STORE_TEST(migrations_idempotent) {
        Store *s = open_url(url);
        ASSERT_EQ(store_schema_version(s), latest_version());
        ASSERT_TRUE(migrations_count() >= 1);
        s = store_close(s);

        /* twice more: nothing re-applied, same version */
        for (int i = 0; i < 2; i++) {
                s = open_url(url);
                ASSERT_EQ(store_schema_version(s), latest_version());
                s = store_close(s);
        }

        ASSERT_EQ(raw_query_i64(url, "SELECT COUNT(*) FROM schema_migrations"), (long long) migrations_count());
        ASSERT_EQ(raw_query_i64(url, "SELECT MIN(version) FROM schema_migrations"), 1);
        ASSERT_TRUE(raw_query_i64(url, "SELECT MIN(applied_usec) FROM schema_migrations") > 0);
        if (backend == BACKEND_SQLITE) {
                /* the pragma that persists in the file */
                sqlite3 *db = NULL;
                sqlite3_stmt *st = NULL;
                char mode[16];
                ASSERT_EQ(sqlite3_open(url + STRLEN("sqlite:"), &db), SQLITE_OK);
                ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
                ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
                snprintf(mode, sizeof mode, "%s", (const char *) sqlite3_column_text(st, 0));
                sqlite3_finalize(st);
                sqlite3_close(db);
                ASSERT_STREQ(mode, "wal");
        }
}

STORE_TEST(migrations_refuse_newer_schema) {
        Store *s = open_url(url);
        s = store_close(s);
        raw_sql(url, "INSERT INTO schema_migrations (version, name, applied_usec) VALUES (999, 'future', 1)");
        ASSERT_ERRNO(store_open(url, &s), EPROTO);
        ASSERT_NULL(s);
}

/* Children block on the pipe until the parent closes it, so all start at once. */
static pid_t fork_gated(int gate[2], int (*fn)(const char *path, int idx), const char *path, int idx) {
        pid_t pid = fork();
        if (pid == 0) {
                char c;
                close(gate[1]); /* else the read never sees EOF */
                if (read(gate[0], &c, 1) < 0)
                        _exit(100);
                _exit(fn(path, idx));
        }
        return pid;
}

static void release_and_reap(int gate[2], const pid_t *pids, size_t n) {
        bool ok = true;
        close(gate[0]);
        close(gate[1]);
        for (size_t i = 0; i < n; i++) {
                int status;
                if (pids[i] <= 0) {
                        ok = false;
                        continue;
                }
                if (waitpid(pids[i], &status, 0) != pids[i] || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                        fprintf(stderr, "  child %zu: status 0x%x\n", i, status);
                        ok = false;
                }
        }
        ASSERT_TRUE(ok);
}

static int child_open(const char *path, int idx) {
        Store *s = NULL;
        int r = store_open(path, &s);
        if (r < 0) {
                fprintf(stderr, "  child %d: store_open: %s\n", idx, strerror(-r));
                return 1;
        }
        r = store_schema_version(s);
        store_close(s);
        return r == latest_version() ? 0 : 2;
}

STORE_TEST(concurrent_open_migrates_once) {
        for (int round = 0; round < 5; round++) {
                const char *u = round == 0 ? url : fresh_url();
                int gate[2];
                pid_t pids[CONCURRENT_PROCS];

                ASSERT_EQ(pipe2(gate, O_CLOEXEC), 0);
                for (size_t i = 0; i < ELEMENTSOF(pids); i++)
                        pids[i] = fork_gated(gate, child_open, u, (int) i);
                release_and_reap(gate, pids, ELEMENTSOF(pids));

                Store *s = open_url(u);
                ASSERT_EQ(store_schema_version(s), latest_version());
                store_close(s);
                ASSERT_EQ(raw_query_i64(u, "SELECT COUNT(*) FROM schema_migrations"), (long long) migrations_count());
        }
}

STORE_TEST(tenants) {
        _cleanup_(store_closep) Store *s = open_url(url);
        Tenant a, b, got;

        ASSERT_OK(store_tenant_create(s, "zeta", &a));
        ASSERT_TRUE(startswith(a.id, "tn_") != NULL);
        ASSERT_EQ(strlen(a.id), 15);
        for (const char *p = a.id + 3; *p; p++)
                ASSERT_TRUE((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9'));
        ASSERT_STREQ(a.name, "zeta");
        ASSERT_TRUE(a.created_usec > 0);
        ASSERT_OK(store_tenant_create(s, "alpha", &b));
        ASSERT_TRUE(!streq(a.id, b.id));
        ASSERT_OK(store_tenant_create(s, "no-ret", NULL));

        ASSERT_OK(store_tenant_get(s, a.id, &got));
        ASSERT_STREQ(got.name, "zeta");
        ASSERT_EQ(got.created_usec, a.created_usec);
        ASSERT_OK(store_tenant_get_by_name(s, "alpha", &got));
        ASSERT_STREQ(got.id, b.id);

        ASSERT_ERRNO(store_tenant_create(s, "zeta", &got), EEXIST);
        ASSERT_ERRNO(store_tenant_get(s, "tn_nosuchtenant", &got), ENOENT);
        ASSERT_ERRNO(store_tenant_get_by_name(s, "nobody", &got), ENOENT);
        ASSERT_ERRNO(store_tenant_get(s, "", &got), ENOENT);

        char longname[STORE_NAME_MAX + 1];
        memset(longname, 'n', sizeof longname - 1);
        longname[sizeof longname - 1] = 0;
        ASSERT_ERRNO(store_tenant_create(s, longname, &got), ENAMETOOLONG);
        ASSERT_ERRNO(store_tenant_get_by_name(s, longname, &got), ENOENT);
        longname[STORE_NAME_MAX - 1] = 0; /* exactly the largest that fits */
        ASSERT_OK(store_tenant_create(s, longname, &got));
        ASSERT_EQ(strlen(got.name), STORE_NAME_MAX - 1);
        ASSERT_ERRNO(store_tenant_create(s, "", &got), EINVAL);
        ASSERT_ERRNO(store_tenant_create(s, NULL, &got), EINVAL);
        ASSERT_ERRNO(store_tenant_create(NULL, "x", &got), EINVAL);
        ASSERT_ERRNO(store_tenant_get(s, NULL, &got), EINVAL);

        _cleanup_free_ Tenant *list = NULL;
        size_t n;
        ASSERT_OK(store_tenant_list(s, &list, &n));
        ASSERT_EQ(n, 4);
        ASSERT_STREQ(list[0].name, "alpha"); /* sorted by name */
        ASSERT_STREQ(list[2].name, "no-ret");
        ASSERT_STREQ(list[3].name, "zeta");
}

STORE_TEST(tenant_row_too_long_is_refused_not_truncated) {
        _cleanup_(store_closep) Store *s = open_url(url);
        Tenant t, got;

        ASSERT_OK(store_tenant_create(s, "short", &t));
        /* a row written by something else with a name longer than the buffer */
        char sql[512], longname[201];
        memset(longname, 'x', sizeof longname - 1);
        longname[sizeof longname - 1] = 0;
        snprintf(sql, sizeof sql, "UPDATE tenants SET name = '%s' WHERE id = '%s'", longname, t.id);
        raw_sql(url, sql);
        ASSERT_ERRNO(store_tenant_get(s, t.id, &got), EBADMSG);
        ASSERT_ERRNO(store_tenant_get_by_name(s, "short", &got), ENOENT);
}

static ApiKey make_key(const char *id, const char *tenant, const char *hash, bool admin) {
        ApiKey k = { .admin = admin };
        (void) strscpy(k.id, sizeof k.id, id);
        (void) strscpy(k.tenant_id, sizeof k.tenant_id, tenant);
        (void) strscpy(k.hash, sizeof k.hash, hash);
        (void) strscpy(k.name, sizeof k.name, "ci");
        return k;
}

STORE_TEST(keys) {
        _cleanup_(store_closep) Store *s = open_url(url);
        Tenant a, b;
        ApiKey k, got;
        uint64_t count;
        char hash1[65], hash2[65], hash3[65];

        memset(hash1, '1', 64), hash1[64] = 0;
        memset(hash2, '2', 64), hash2[64] = 0;
        memset(hash3, '3', 64), hash3[64] = 0;
        ASSERT_OK(store_tenant_create(s, "a", &a));
        ASSERT_OK(store_tenant_create(s, "b", &b));

        ASSERT_OK(store_key_count(s, &count));
        ASSERT_EQ(count, 0);

        k = make_key("key_a1", a.id, hash1, true);
        ASSERT_OK(store_key_insert(s, &k));
        k = make_key("key_a2", a.id, hash2, false);
        k.created_usec = 42;
        ASSERT_OK(store_key_insert(s, &k));
        k = make_key("key_b1", b.id, hash3, false);
        ASSERT_OK(store_key_insert(s, &k));

        /* unknown tenant (foreign key), taken id, taken hash */
        k = make_key("key_x", "tn_nosuchtenant", "ffff", false);
        ASSERT_ERRNO(store_key_insert(s, &k), ENOENT);
        k = make_key("key_a1", a.id, "eeee", false);
        ASSERT_ERRNO(store_key_insert(s, &k), EEXIST);
        k = make_key("key_new", a.id, hash1, false);
        ASSERT_ERRNO(store_key_insert(s, &k), EEXIST);
        /* bad records */
        k = make_key("", a.id, "dddd", false);
        ASSERT_ERRNO(store_key_insert(s, &k), EINVAL);
        k = make_key("key_y", a.id, "", false);
        ASSERT_ERRNO(store_key_insert(s, &k), EINVAL);
        k = make_key("key_z", a.id, "cccc", false);
        memset(k.name, 'x', sizeof k.name); /* not NUL-terminated */
        ASSERT_ERRNO(store_key_insert(s, &k), ENAMETOOLONG);
        k = make_key("key_z", a.id, "cccc", false);
        k.created_usec = -1;
        ASSERT_ERRNO(store_key_insert(s, &k), EINVAL);
        ASSERT_ERRNO(store_key_insert(s, NULL), EINVAL);

        ASSERT_OK(store_key_get_by_hash(s, hash1, &got));
        ASSERT_STREQ(got.id, "key_a1");
        ASSERT_STREQ(got.tenant_id, a.id);
        ASSERT_STREQ(got.hash, hash1);
        ASSERT_STREQ(got.name, "ci");
        ASSERT_TRUE(got.admin);
        ASSERT_TRUE(got.created_usec > 0);
        ASSERT_OK(store_key_get_by_hash(s, hash2, &got));
        ASSERT_FALSE(got.admin);
        ASSERT_EQ(got.created_usec, 42);
        ASSERT_ERRNO(store_key_get_by_hash(s, "0000", &got), ENOENT);

        ApiKey *list = NULL;
        size_t n;
        ASSERT_OK(store_key_list(s, NULL, &list, &n));
        ASSERT_EQ(n, 3);
        ASSERT_STREQ(list[0].id, "key_a2"); /* oldest first */
        free(list);
        ASSERT_OK(store_key_list(s, a.id, &list, &n));
        ASSERT_EQ(n, 2);
        for (size_t i = 0; i < n; i++)
                ASSERT_STREQ(list[i].tenant_id, a.id);
        free(list);
        ASSERT_OK(store_key_list(s, "tn_nosuchtenant", &list, &n));
        ASSERT_EQ(n, 0);
        free(list);

        ASSERT_OK(store_key_count(s, &count));
        ASSERT_EQ(count, 3);

        /* another tenant's key cannot be deleted through that tenant */
        ASSERT_ERRNO(store_key_delete(s, b.id, "key_a1"), ENOENT);
        ASSERT_OK(store_key_delete(s, a.id, "key_a1"));
        ASSERT_ERRNO(store_key_delete(s, a.id, "key_a1"), ENOENT);
        ASSERT_OK(store_key_delete(s, NULL, "key_b1"));
        ASSERT_ERRNO(store_key_delete(s, NULL, "key_nope"), ENOENT);
        ASSERT_ERRNO(store_key_get_by_hash(s, hash1, &got), ENOENT);
        ASSERT_OK(store_key_count(s, &count));
        ASSERT_EQ(count, 1);
}

static Template make_template(const char *name, TemplateState state) {
        Template t = { .state = state };
        (void) strscpy(t.name, sizeof t.name, name);
        return t;
}

STORE_TEST(templates) {
        _cleanup_(store_closep) Store *s = open_url(url);
        Template t, got;
        uint64_t users;

        t = make_template("ubuntu", TEMPLATE_IMPORTING);
        ASSERT_OK(store_template_insert(s, &t));
        t = make_template("base", TEMPLATE_READY);
        t.size_bytes = 1ULL << 40;
        t.created_usec = 7;
        ASSERT_OK(strscpy(t.tenant_id, sizeof t.tenant_id, "tn_owner"));
        ASSERT_OK(store_template_insert(s, &t));
        ASSERT_ERRNO(store_template_insert(s, &t), EEXIST);

        t = make_template("bad", (TemplateState) 7);
        ASSERT_ERRNO(store_template_insert(s, &t), EINVAL);
        t = make_template("bad", TEMPLATE_READY);
        t.size_bytes = UINT64_MAX;
        ASSERT_ERRNO(store_template_insert(s, &t), ERANGE);
        t = make_template("", TEMPLATE_READY);
        ASSERT_ERRNO(store_template_insert(s, &t), EINVAL);
        memset(t.name, 'a', sizeof t.name);
        ASSERT_ERRNO(store_template_insert(s, &t), ENAMETOOLONG);

        ASSERT_OK(store_template_get(s, "base", &got));
        ASSERT_EQ(got.state, TEMPLATE_READY);
        ASSERT_EQ(got.size_bytes, 1ULL << 40);
        ASSERT_EQ(got.created_usec, 7);
        ASSERT_STREQ(got.tenant_id, "tn_owner");
        ASSERT_OK(store_template_get(s, "ubuntu", &got));
        ASSERT_EQ(got.state, TEMPLATE_IMPORTING);
        ASSERT_STREQ(got.tenant_id, "");
        ASSERT_TRUE(got.created_usec > 0);
        ASSERT_ERRNO(store_template_get(s, "nope", &got), ENOENT);

        ASSERT_OK(store_template_set_ready(s, "ubuntu", 12345));
        ASSERT_OK(store_template_get(s, "ubuntu", &got));
        ASSERT_EQ(got.state, TEMPLATE_READY);
        ASSERT_EQ(got.size_bytes, 12345);
        ASSERT_ERRNO(store_template_set_ready(s, "nope", 1), ENOENT);
        ASSERT_ERRNO(store_template_set_ready(s, "ubuntu", UINT64_MAX), ERANGE);

        _cleanup_free_ Template *list = NULL;
        size_t n;
        ASSERT_OK(store_template_list(s, &list, &n));
        ASSERT_EQ(n, 2);
        ASSERT_STREQ(list[0].name, "base");
        ASSERT_STREQ(list[1].name, "ubuntu");

        /* in use by a live sandbox: -EBUSY and nothing deleted */
        insert_sandbox(s, "sb1", "tn_a");
        ASSERT_OK(store_template_in_use(s, "base", &users));
        ASSERT_EQ(users, 1);
        ASSERT_OK(store_template_in_use(s, "ubuntu", &users));
        ASSERT_EQ(users, 0);
        ASSERT_OK(store_template_in_use(s, "nope", &users));
        ASSERT_EQ(users, 0);
        ASSERT_ERRNO(store_template_delete(s, "base"), EBUSY);
        ASSERT_OK(store_template_get(s, "base", &got));

        /* any live state counts; deleted does not */
        ASSERT_OK(store_sandbox_set_state(s, "sb1", SANDBOX_CREATING, SANDBOX_ERROR, "boom"));
        ASSERT_ERRNO(store_template_delete(s, "base"), EBUSY);
        ASSERT_OK(store_sandbox_set_state(s, "sb1", -1, SANDBOX_DELETED, NULL));
        ASSERT_OK(store_template_in_use(s, "base", &users));
        ASSERT_EQ(users, 0);
        ASSERT_OK(store_template_delete(s, "base"));
        ASSERT_ERRNO(store_template_get(s, "base", &got), ENOENT);
        ASSERT_ERRNO(store_template_delete(s, "base"), ENOENT);
        ASSERT_ERRNO(store_template_delete(s, NULL), EINVAL);
}

static TemplateVersion make_version(const char *name, uint64_t version, const char *digest, uint64_t size) {
        TemplateVersion v = { .version = version, .size_bytes = size };
        (void) strscpy(v.name, sizeof v.name, name);
        (void) strscpy(v.digest, sizeof v.digest, digest);
        return v;
}

STORE_TEST(template_versions) {
        _cleanup_(store_closep) Store *s = open_url(url);
        _cleanup_(sandbox_done) Sandbox got_sb = {};
        _cleanup_free_ TemplateVersion *list = NULL;
        _cleanup_free_ TemplateTag *tags = NULL;
        TemplateVersion v, got;
        Sandbox sb;
        uint64_t next, ver;
        size_t n;

        ASSERT_OK(store_template_version_next(s, "py", &next));
        ASSERT_EQ(next, 1);
        v = make_version("py", 1, "sha256:aa", 100);
        ASSERT_OK(store_template_version_add(s, &v));
        ASSERT_ERRNO(store_template_version_add(s, &v), EEXIST);
        v = make_version("py", 2, "", 200);
        v.created_usec = 9;
        ASSERT_OK(store_template_version_add(s, &v));
        v = make_version("other", 1, "", 5);
        ASSERT_OK(store_template_version_add(s, &v));
        ASSERT_OK(store_template_version_next(s, "py", &next));
        ASSERT_EQ(next, 3);
        ASSERT_OK(store_template_version_next(s, "none", &next));
        ASSERT_EQ(next, 1);

        /* bad input */
        v = make_version("py", 0, "", 1);
        ASSERT_ERRNO(store_template_version_add(s, &v), EINVAL);
        v = make_version("", 1, "", 1);
        ASSERT_ERRNO(store_template_version_add(s, &v), EINVAL);
        v = make_version("py", 9, "", UINT64_MAX);
        ASSERT_ERRNO(store_template_version_add(s, &v), ERANGE);
        ASSERT_ERRNO(store_template_version_add(s, NULL), EINVAL);

        ASSERT_OK(store_template_version_get(s, "py", 1, &got));
        ASSERT_STREQ(got.digest, "sha256:aa");
        ASSERT_EQ(got.size_bytes, 100);
        ASSERT_TRUE(got.created_usec > 0);
        ASSERT_EQ(got.users, 0);
        ASSERT_STREQ(got.tags, "");
        ASSERT_ERRNO(store_template_version_get(s, "py", 7, &got), ENOENT);
        ASSERT_ERRNO(store_template_version_get(s, "py", 0, &got), ENOENT);
        ASSERT_ERRNO(store_template_version_get(s, "nope", 1, &got), ENOENT);

        ASSERT_OK(store_template_version_list(s, "py", &list, &n));
        ASSERT_EQ(n, 2);
        ASSERT_EQ(list[0].version, 2); /* newest first */
        ASSERT_EQ(list[0].created_usec, 9);
        ASSERT_EQ(list[1].version, 1);
        list = mfree(list);

        /* tags: set, move, get, list; a version that does not exist is refused */
        ASSERT_OK(store_template_tag_set(s, "py", "stable", 1));
        ASSERT_OK(store_template_tag_set(s, "py", "beta", 2));
        ASSERT_OK(store_template_tag_get(s, "py", "stable", &ver));
        ASSERT_EQ(ver, 1);
        ASSERT_OK(store_template_tag_set(s, "py", "beta", 1)); /* moves */
        ASSERT_OK(store_template_tag_get(s, "py", "beta", &ver));
        ASSERT_EQ(ver, 1);
        ASSERT_ERRNO(store_template_tag_set(s, "py", "x", 5), ENOENT);
        ASSERT_ERRNO(store_template_tag_set(s, "nope", "x", 1), ENOENT);
        ASSERT_ERRNO(store_template_tag_set(s, "py", "", 1), EINVAL);
        ASSERT_ERRNO(store_template_tag_set(s, "py", "x", 0), EINVAL);
        ASSERT_ERRNO(store_template_tag_get(s, "py", "x", &ver), ENOENT);
        ASSERT_OK(store_template_tag_list(s, "py", &tags, &n));
        ASSERT_EQ(n, 2);
        ASSERT_STREQ(tags[0].tag, "beta");
        ASSERT_STREQ(tags[1].tag, "stable");
        ASSERT_EQ(tags[1].version, 1);
        tags = mfree(tags);
        ASSERT_OK(store_template_version_get(s, "py", 1, &got));
        ASSERT_TRUE(streq(got.tags, "beta,stable") || streq(got.tags, "stable,beta"));

        /* delete: the newest and a tagged one stay */
        ASSERT_ERRNO(store_template_version_delete(s, "py", 2), EBUSY);
        ASSERT_ERRNO(store_template_version_delete(s, "py", 1), EBUSY);
        ASSERT_OK(store_template_tag_delete(s, "py", "beta"));
        ASSERT_ERRNO(store_template_tag_delete(s, "py", "beta"), ENOENT);
        ASSERT_OK(store_template_tag_delete(s, "py", "stable"));

        /* a sandbox records its version, and keeps it in use */
        sandbox_init(&sb, "sbv1", "tn_a", "py");
        sb.template_version = 1;
        ASSERT_OK(store_sandbox_insert(s, &sb));
        ASSERT_OK(store_sandbox_get(s, NULL, "sbv1", &got_sb));
        ASSERT_EQ(got_sb.template_version, 1);
        ASSERT_OK(store_template_version_get(s, "py", 1, &got));
        ASSERT_EQ(got.users, 1);
        ASSERT_ERRNO(store_template_version_delete(s, "py", 1), EBUSY);
        ASSERT_OK(store_sandbox_set_state(s, "sbv1", -1, SANDBOX_DELETED, NULL));
        ASSERT_OK(store_template_version_get(s, "py", 1, &got));
        ASSERT_EQ(got.users, 0);
        ASSERT_OK(store_template_version_delete(s, "py", 1));
        ASSERT_ERRNO(store_template_version_delete(s, "py", 1), ENOENT);
        ASSERT_ERRNO(store_template_version_delete(s, "py", 0), ENOENT);
        ASSERT_ERRNO(store_template_version_get(s, "py", 1, &got), ENOENT);
        /* numbers stay monotonic while the newest lives */
        ASSERT_OK(store_template_version_next(s, "py", &next));
        ASSERT_EQ(next, 3);

        /* drop: every version and tag of the name, others untouched */
        ASSERT_OK(store_template_tag_set(s, "py", "stable", 2));
        ASSERT_OK(store_template_versions_drop(s, "py"));
        ASSERT_OK(store_template_version_list(s, "py", &list, &n));
        ASSERT_EQ(n, 0);
        list = mfree(list);
        ASSERT_OK(store_template_tag_list(s, "py", &tags, &n));
        ASSERT_EQ(n, 0);
        ASSERT_OK(store_template_version_get(s, "other", 1, &got));
}

static void version_sandbox(Sandbox *sb, const char *id, uint64_t version) {
        sandbox_init(sb, id, "tn_a", "py");
        sb->template_version = version;
}

/* A sandbox made from a template version needs the version's row in the
 * insert's transaction: one collected after the create resolved it is
 * refused (-EIDRM), not recorded as using what is gone. */
STORE_TEST(template_version_insert_needs_the_version) {
        _cleanup_(store_closep) Store *s = open_url(url);
        _cleanup_(sandbox_done) Sandbox got = {};
        TemplateVersion v;
        Sandbox sb;

        for (uint64_t i = 1; i <= 3; i++) {
                v = make_version("py", i, "", 10);
                ASSERT_OK(store_template_version_add(s, &v));
        }
        v = make_version("other", 1, "", 10);
        ASSERT_OK(store_template_version_add(s, &v));

        /* collected first: the insert is refused and leaves no row */
        ASSERT_OK(store_template_version_delete(s, "py", 1));
        version_sandbox(&sb, "sbgone", 1);
        ASSERT_ERRNO(store_sandbox_insert(s, &sb), EIDRM);
        ASSERT_ERRNO(store_sandbox_get(s, NULL, "sbgone", &got), ENOENT);
        /* never recorded; another template's version 1 is not this one's */
        version_sandbox(&sb, "sbnever", 9);
        ASSERT_ERRNO(store_sandbox_insert(s, &sb), EIDRM);
        ASSERT_OK(store_template_version_delete(s, "py", 2));
        version_sandbox(&sb, "sbother", 2);
        ASSERT_ERRNO(store_sandbox_insert(s, &sb), EIDRM);
        /* in a batch (a branch's rows) the refusal undoes only its own insert */
        ASSERT_OK(store_batch_begin(s));
        version_sandbox(&sb, "sbin", 3);
        ASSERT_OK(store_sandbox_insert(s, &sb));
        version_sandbox(&sb, "sbout", 1);
        ASSERT_ERRNO(store_sandbox_insert(s, &sb), EIDRM);
        ASSERT_OK(store_batch_end(s));
        ASSERT_OK(store_sandbox_get(s, NULL, "sbin", &got));
        ASSERT_ERRNO(store_sandbox_get(s, NULL, "sbout", &got), ENOENT);

        /* a branch copies its parent's files, not the version's: no check */
        version_sandbox(&sb, "sbbranch", 1);
        ASSERT_OK(strscpy(sb.parent_id, sizeof sb.parent_id, "sbin"));
        ASSERT_OK(store_sandbox_insert(s, &sb));
        /* nor for one made before versions */
        version_sandbox(&sb, "sbold", 0);
        ASSERT_OK(store_sandbox_insert(s, &sb));

        /* one made from whichever version is newest takes the newest in the
         * insert, whatever it was resolved to */
        version_sandbox(&sb, "sbnew", 1);
        sb.template_newest = true;
        ASSERT_OK(store_sandbox_insert(s, &sb));
        ASSERT_EQ(sb.template_version, 3);
        ASSERT_OK(store_sandbox_get(s, NULL, "sbnew", &got));
        ASSERT_EQ(got.template_version, 3);
        ASSERT_OK(store_template_version_get(s, "py", 3, &v));
        ASSERT_EQ(v.users, 2);
        v = make_version("py", 4, "", 10);
        ASSERT_OK(store_template_version_add(s, &v));
        version_sandbox(&sb, "sbnew4", 3);
        sb.template_newest = true;
        ASSERT_OK(store_sandbox_insert(s, &sb));
        ASSERT_EQ(sb.template_version, 4);
        /* ... and is refused once the name has none (the template was removed) */
        ASSERT_OK(store_template_versions_drop(s, "py"));
        version_sandbox(&sb, "sbnone", 4);
        sb.template_newest = true;
        ASSERT_ERRNO(store_sandbox_insert(s, &sb), EIDRM);
        ASSERT_EQ(sb.template_version, 4);
        ASSERT_ERRNO(store_sandbox_get(s, NULL, "sbnone", &got), ENOENT);
}

typedef struct VersionRacer {
        Store *s;
        Sandbox sb;      /* insert this, or ... */
        uint64_t delete; /* ... collect this version of "py" */
        int r;
} VersionRacer;

static void *version_racer(void *arg) {
        VersionRacer *a = arg;

        a->r = a->delete > 0 ? store_template_version_delete(a->s, "py", a->delete) : store_sandbox_insert(a->s, &a->sb);
        return NULL;
}

static void version_racer_start(VersionRacer *a, pthread_t *th) {
        ASSERT_EQ(pthread_create(th, NULL, version_racer, a), 0);
}

static int version_racer_join(VersionRacer *a, pthread_t th) {
        ASSERT_EQ(pthread_join(th, NULL), 0);
        return a->r;
}

/* Waits (bounded) until n backends of database db wait for a lock. */
static void pg_wait_lock_waiters(const char *db, long n) {
        char sql[256];

        snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = '%s' AND "
                 "wait_event_type = 'Lock'", db);
        for (int waited = 0; waited < PG_WAIT_MSEC; waited += 10) {
                if (pg_admin_number(sql) >= n)
                        return;
                (void) nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
        }
        test_fail(__FILE__, __LINE__, "%ld backends of %s did not wait for a lock within 10 s", n, db);
}

static PGresult *pg_exec_ok(PGconn *c, const char *sql) {
        PGresult *res = PQexec(c, sql);
        ExecStatusType st = PQresultStatus(res);

        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
                fprintf(stderr, "  %s: %s", sql, PQresultErrorMessage(res));
                PQclear(res);
                test_fail(__FILE__, __LINE__, "SQL failed");
        }
        return res;
}

/* PostgreSQL, READ COMMITTED: a create's insert and a collection of its
 * version on two connections, in both orders, each step waiting for the
 * other's lock (not for time). */
TEST(template_version_insert_and_collection_take_turns_postgres) {
        use_backend(BACKEND_POSTGRES);
        const char *url = fresh_url();
        char db[64];
        _cleanup_(store_closep) Store *a = open_url(url);
        _cleanup_(store_closep) Store *b = open_url(url);
        _cleanup_(sandbox_done) Sandbox got = {};
        VersionRacer ins = { .s = a }, del = { .s = b, .delete = 1 };
        pthread_t ti, td;
        TemplateVersion v;
        PGconn *c;

        ASSERT_OK(strscpy(db, sizeof db, pg.databases[pg.n_databases - 1]));
        for (uint64_t i = 1; i <= 2; i++) {
                v = make_version("py", i, "", 10);
                ASSERT_OK(store_template_version_add(a, &v));
        }
        c = PQconnectdb(url);
        ASSERT_EQ(PQstatus(c), CONNECTION_OK);

        /* the insert first: it holds version 1 and waits for the slots lock
         * (held here); the collection waits for the insert, then sees its
         * sandbox: -EBUSY, and the version stays */
        PQclear(pg_exec_ok(c, "BEGIN"));
        PQclear(pg_exec_ok(c, "SELECT pg_advisory_xact_lock(" PG_LOCK_CLASS ", " PG_LOCK_SLOTS ")"));
        version_sandbox(&ins.sb, "sbfirst", 1);
        version_racer_start(&ins, &ti);
        pg_wait_lock_waiters(db, 1);
        version_racer_start(&del, &td);
        pg_wait_lock_waiters(db, 2);
        PQclear(pg_exec_ok(c, "COMMIT"));
        ASSERT_EQ(version_racer_join(&ins, ti), 0);
        ASSERT_EQ(version_racer_join(&del, td), -EBUSY);
        ASSERT_OK(store_template_version_get(b, "py", 1, &v));
        ASSERT_EQ(v.users, 1);

        /* the collection first (its DELETE done, not committed): the insert
         * waits for it, then finds no row: -EIDRM, and no sandbox row */
        ASSERT_OK(store_sandbox_set_state(a, "sbfirst", -1, SANDBOX_DELETED, NULL));
        PQclear(pg_exec_ok(c, "BEGIN"));
        PGresult *res = pg_exec_ok(c, "DELETE FROM template_versions WHERE name = 'py' AND version = 1");
        ASSERT_STREQ(PQcmdTuples(res), "1");
        PQclear(res);
        version_sandbox(&ins.sb, "sbsecond", 1);
        version_racer_start(&ins, &ti);
        pg_wait_lock_waiters(db, 1);
        PQclear(pg_exec_ok(c, "COMMIT"));
        ASSERT_EQ(version_racer_join(&ins, ti), -EIDRM);
        ASSERT_ERRNO(store_sandbox_get(a, NULL, "sbsecond", &got), ENOENT);
        PQfinish(c);
}

/* SQLite: the insert and the delete each run in one BEGIN IMMEDIATE
 * transaction (here: a batch holds it open on one handle), so one runs whole
 * before the other, whichever the other thread reached first. */
TEST(template_version_insert_and_collection_take_turns_sqlite) {
        use_backend(BACKEND_SQLITE);
        const char *url = fresh_url();
        _cleanup_(store_closep) Store *a = open_url(url);
        _cleanup_(store_closep) Store *b = open_url(url);
        _cleanup_(sandbox_done) Sandbox got = {};
        VersionRacer ins = { .s = a }, del = { .s = b, .delete = 1 };
        pthread_t ti, td;
        TemplateVersion v;

        for (uint64_t i = 1; i <= 2; i++) {
                v = make_version("py", i, "", 10);
                ASSERT_OK(store_template_version_add(a, &v));
        }

        /* the insert's transaction first: the delete then sees its sandbox */
        ASSERT_OK(store_batch_begin(a));
        version_sandbox(&ins.sb, "sbfirst", 1);
        ASSERT_OK(store_sandbox_insert(a, &ins.sb));
        version_racer_start(&del, &td);
        ASSERT_OK(store_batch_end(a));
        ASSERT_EQ(version_racer_join(&del, td), -EBUSY);
        ASSERT_OK(store_template_version_get(b, "py", 1, &v));
        ASSERT_EQ(v.users, 1);

        /* the delete's first: the insert then finds no row */
        ASSERT_OK(store_sandbox_set_state(a, "sbfirst", -1, SANDBOX_DELETED, NULL));
        ASSERT_OK(store_batch_begin(b));
        ASSERT_OK(store_template_version_delete(b, "py", 1));
        version_sandbox(&ins.sb, "sbsecond", 1);
        version_racer_start(&ins, &ti);
        ASSERT_OK(store_batch_end(b));
        ASSERT_EQ(version_racer_join(&ins, ti), -EIDRM);
        ASSERT_ERRNO(store_sandbox_get(a, NULL, "sbsecond", &got), ENOENT);
}

STORE_TEST(sandbox_roundtrip) {
        _cleanup_(store_closep) Store *s = open_url(url);
        _cleanup_(sandbox_done) Sandbox got = {};
        Sandbox sb;

        sandbox_init(&sb, "s3k9x0a1b2c3d4e5", "tn_acme", "base");
        sb.state = SANDBOX_RUNNING;
        ASSERT_OK(strscpy(sb.worker, sizeof sb.worker, "local"));
        ASSERT_OK(strscpy(sb.reason, sizeof sb.reason, "started"));
        ASSERT_OK(strscpy(sb.parent_id, sizeof sb.parent_id, "s0parent"));
        sb.cpu_millis = 500;
        sb.memory_mb = 1ULL << 33;
        sb.disk_mb = 4096;
        sb.pids_max = 77;
        sb.timeout_s = 3600;
        sb.expires_usec = 1234567;
        sb.pid = 4242;
        sb.pid_starttime = 987654321;
        sb.env_json = (char *) "{\"K\":\"V\"}";
        sb.metadata_json = (char *) "{\"owner\":\"\xc3\xa9l\xc3\xa8ve\"}";
        sb.slot = 999; /* ignored: the store assigns it */
        ASSERT_OK(store_sandbox_insert(s, &sb));
        ASSERT_EQ(sb.slot, 0);
        ASSERT_TRUE(sb.created_usec > 0);
        ASSERT_EQ(sb.updated_usec, sb.created_usec);

        ASSERT_OK(store_sandbox_get(s, NULL, sb.id, &got));
        ASSERT_STREQ(got.id, sb.id);
        ASSERT_STREQ(got.tenant_id, "tn_acme");
        ASSERT_STREQ(got.template_name, "base");
        ASSERT_STREQ(got.runtime, "ns");
        ASSERT_STREQ(got.worker, "local");
        ASSERT_EQ(got.state, SANDBOX_RUNNING);
        ASSERT_STREQ(got.reason, "started");
        ASSERT_EQ(got.cpu_millis, 500);
        ASSERT_EQ(got.memory_mb, 1ULL << 33);
        ASSERT_EQ(got.disk_mb, 4096);
        ASSERT_EQ(got.pids_max, 77);
        ASSERT_EQ(got.timeout_s, 3600);
        ASSERT_EQ(got.created_usec, sb.created_usec);
        ASSERT_EQ(got.updated_usec, sb.updated_usec);
        ASSERT_EQ(got.expires_usec, 1234567);
        ASSERT_EQ(got.slot, 0);
        ASSERT_EQ(got.pid, 4242);
        ASSERT_EQ(got.pid_starttime, 987654321);
        ASSERT_STREQ(got.env_json, "{\"K\":\"V\"}");
        ASSERT_STREQ(got.metadata_json, sb.metadata_json);
        ASSERT_STREQ(got.parent_id, "s0parent");
        sandbox_done(&got);
        ASSERT_NULL(got.env_json);

        /* NULL JSON stays NULL; explicit times are kept */
        sandbox_init(&sb, "second", "tn_acme", "base");
        sb.created_usec = 100;
        sb.updated_usec = 200;
        ASSERT_OK(store_sandbox_insert(s, &sb));
        ASSERT_EQ(sb.slot, 1);
        ASSERT_OK(store_sandbox_get(s, "tn_acme", "second", &got));
        ASSERT_NULL(got.env_json);
        ASSERT_NULL(got.metadata_json);
        ASSERT_EQ(got.created_usec, 100);
        ASSERT_EQ(got.updated_usec, 200);
        ASSERT_STREQ(got.worker, "");
        ASSERT_STREQ(got.parent_id, "");

        /* taken id: -EEXIST, and the slot is not consumed */
        ASSERT_ERRNO(store_sandbox_insert(s, &sb), EEXIST);
        ASSERT_EQ(insert_sandbox(s, "third", "tn_acme"), 2);
        ASSERT_ERRNO(store_sandbox_get(s, NULL, "nope", &got), ENOENT);
}

STORE_TEST(sandbox_bad_input) {
        _cleanup_(store_closep) Store *s = open_url(url);
        Sandbox sb;

        sandbox_init(&sb, "x", "tn_a", "base");
        memset(sb.id, 'i', sizeof sb.id); /* unterminated */
        ASSERT_ERRNO(store_sandbox_insert(s, &sb), ENAMETOOLONG);
        sandbox_init(&sb, "x", "tn_a", "base");
        memset(sb.reason, 'r', sizeof sb.reason);
        ASSERT_ERRNO(store_sandbox_insert(s, &sb), ENAMETOOLONG);
        sandbox_init(&sb, "x", "tn_a", "base");
        memset(sb.runtime, 'r', sizeof sb.runtime);
        ASSERT_ERRNO(store_sandbox_insert(s, &sb), ENAMETOOLONG);
        sandbox_init(&sb, "x", "", "base");
        ASSERT_ERRNO(store_sandbox_insert(s, &sb), EINVAL);
        sandbox_init(&sb, "x", "tn_a", "");
        ASSERT_ERRNO(store_sandbox_insert(s, &sb), EINVAL);
        sandbox_init(&sb, "x", "tn_a", "base");
        sb.state = _SANDBOX_STATE_MAX;
        ASSERT_ERRNO(store_sandbox_insert(s, &sb), EINVAL);
        sandbox_init(&sb, "x", "tn_a", "base");
        sb.memory_mb = (uint64_t) INT64_MAX + 1;
        ASSERT_ERRNO(store_sandbox_insert(s, &sb), ERANGE);
        sandbox_init(&sb, "x", "tn_a", "base");
        sb.pid = -5;
        ASSERT_ERRNO(store_sandbox_insert(s, &sb), EINVAL);
        ASSERT_ERRNO(store_sandbox_insert(s, NULL), EINVAL);
        ASSERT_ERRNO(store_sandbox_insert(NULL, &sb), EINVAL);

        /* nothing was written */
        uint64_t n;
        ASSERT_OK(store_sandbox_count(s, &(SandboxFilter){ .state = -1, .include_deleted = true }, &n));
        ASSERT_EQ(n, 0);

        Sandbox got;
        char longid[STORE_ID_MAX + 10];
        memset(longid, 'a', sizeof longid - 1);
        longid[sizeof longid - 1] = 0;
        ASSERT_ERRNO(store_sandbox_get(s, NULL, longid, &got), ENOENT);
        ASSERT_ERRNO(store_sandbox_get(s, NULL, NULL, &got), EINVAL);
        ASSERT_ERRNO(store_sandbox_set_state(s, longid, -1, SANDBOX_RUNNING, NULL), ENOENT);
}

STORE_TEST(sandbox_tenant_isolation) {
        _cleanup_(store_closep) Store *s = open_url(url);
        _cleanup_(sandbox_done) Sandbox got = {};
        Sandbox *list = NULL;
        size_t n;

        insert_sandbox(s, "sa1", "tn_a");
        insert_sandbox(s, "sa2", "tn_a");
        insert_sandbox(s, "sb1", "tn_b");

        ASSERT_OK(store_sandbox_get(s, "tn_a", "sa1", &got));
        sandbox_done(&got);
        ASSERT_ERRNO(store_sandbox_get(s, "tn_b", "sa1", &got), ENOENT);
        ASSERT_ERRNO(store_sandbox_get(s, "tn_a", "sb1", &got), ENOENT);
        ASSERT_OK(store_sandbox_get(s, NULL, "sb1", &got));
        ASSERT_STREQ(got.tenant_id, "tn_b");

        ASSERT_OK(store_sandbox_list(s, &(SandboxFilter){ .tenant_id = "tn_b", .state = -1 }, &list, &n));
        ASSERT_EQ(n, 1);
        ASSERT_STREQ(list[0].id, "sb1");
        sandbox_array_free(list, n);
        ASSERT_OK(store_sandbox_list(s, &(SandboxFilter){ .tenant_id = "tn_a", .state = -1 }, &list, &n));
        ASSERT_EQ(n, 2);
        ASSERT_STREQ(list[0].id, "sa1");
        ASSERT_STREQ(list[1].id, "sa2");
        sandbox_array_free(list, n);
        ASSERT_OK(store_sandbox_list(s, &(SandboxFilter){ .tenant_id = "tn_c", .state = -1 }, &list, &n));
        ASSERT_EQ(n, 0);
        sandbox_array_free(list, n);
        ASSERT_OK(store_sandbox_list(s, NULL, &list, &n)); /* NULL filter: all tenants, live */
        ASSERT_EQ(n, 3);
        sandbox_array_free(list, n);
}

STORE_TEST(slots_lowest_free_and_reused) {
        _cleanup_(store_closep) Store *s = open_url(url);
        Sandbox sb;

        for (int i = 0; i < 5; i++) {
                char id[16];
                snprintf(id, sizeof id, "s%d", i);
                ASSERT_EQ(insert_sandbox(s, id, "tn_a"), i);
        }
        /* free 1 and 3: the next inserts take 1, then 3, then 5 */
        ASSERT_OK(store_sandbox_set_state(s, "s3", -1, SANDBOX_DELETED, "gone"));
        ASSERT_OK(store_sandbox_set_state(s, "s1", SANDBOX_CREATING, SANDBOX_DELETED, "gone"));
        ASSERT_EQ(insert_sandbox(s, "n1", "tn_a"), 1);
        ASSERT_EQ(insert_sandbox(s, "n2", "tn_b"), 3);
        ASSERT_EQ(insert_sandbox(s, "n3", "tn_a"), 5);

        /* slot 0 freed and purged: reused */
        ASSERT_OK(store_sandbox_set_state(s, "s0", -1, SANDBOX_DELETED, NULL));
        ASSERT_OK(store_sandbox_purge(s, "s0"));
        ASSERT_EQ(insert_sandbox(s, "n4", "tn_a"), 0);

        /* a bounded insert: slots 0..5 live, so max 6 is full */
        sandbox_init(&sb, "full", "tn_a", "base");
        ASSERT_ERRNO(store_sandbox_insert_max(s, &sb, 6), ENOSPC);
        ASSERT_ERRNO(store_sandbox_insert_max(s, &sb, 0), ENOSPC);
        ASSERT_OK(store_sandbox_insert_max(s, &sb, 7));
        ASSERT_EQ(sb.slot, 6);

        /* reviving a deleted sandbox whose slot was reused breaks the
         * unique live slot: refused */
        ASSERT_ERRNO(store_sandbox_set_state(s, "s1", SANDBOX_DELETED, SANDBOX_RUNNING, NULL), EEXIST);

        /* the live slots are unique, checked directly */
        Sandbox *list = NULL;
        size_t n;
        ASSERT_OK(store_sandbox_list(s, NULL, &list, &n));
        ASSERT_EQ(n, 7);
        bool seen[7] = {};
        for (size_t i = 0; i < n; i++) {
                ASSERT_TRUE(list[i].slot < 7);
                ASSERT_FALSE(seen[list[i].slot]);
                seen[list[i].slot] = true;
        }
        sandbox_array_free(list, n);
}

/* A deleted sandbox whose teardown runs on holds its slot until it is released. */
STORE_TEST(slots_held_by_teardowns) {
        _cleanup_(store_closep) Store *s = open_url(url);
        Sandbox sb;

        ASSERT_EQ(insert_sandbox(s, "a", "tn_a"), 0);
        ASSERT_EQ(insert_sandbox(s, "b", "tn_a"), 1);
        ASSERT_OK(store_sandbox_hold_slot(s, "a", true));
        ASSERT_OK(store_sandbox_set_state(s, "a", -1, SANDBOX_DELETED, "gone"));
        /* not reused while held, and the row is not purged */
        ASSERT_EQ(insert_sandbox(s, "c", "tn_a"), 2);
        ASSERT_ERRNO(store_sandbox_purge(s, "a"), ESTALE);
        /* only held slots free: -EAGAIN (worth waiting for), not -ENOSPC */
        sandbox_init(&sb, "d", "tn_a", "base");
        ASSERT_ERRNO(store_sandbox_insert_max(s, &sb, 3), EAGAIN);
        ASSERT_OK(store_sandbox_hold_slot(s, "a", false));
        ASSERT_OK(store_sandbox_insert_max(s, &sb, 3));
        ASSERT_EQ(sb.slot, 0);
        /* the start's release frees every held slot (of one worker, or all) */
        ASSERT_OK(store_sandbox_hold_slot(s, "b", true));
        ASSERT_OK(store_sandbox_set_state(s, "b", -1, SANDBOX_DELETED, "gone"));
        ASSERT_EQ(store_sandbox_release_slots(s, "elsewhere"), 0);
        ASSERT_EQ(insert_sandbox(s, "e", "tn_a"), 3);
        ASSERT_EQ(store_sandbox_release_slots(s, NULL), 1);
        ASSERT_EQ(insert_sandbox(s, "f", "tn_a"), 1);
        ASSERT_ERRNO(store_sandbox_hold_slot(s, "nosuch", true), ENOENT);
        ASSERT_OK(store_sandbox_purge(s, "b"));
}

static int child_insert(const char *path, int idx) {
        Store *s = NULL;
        int r = store_open(path, &s);
        if (r < 0)
                return 1;
        for (int i = 0; i < CONCURRENT_INSERTS; i++) {
                Sandbox sb = { .state = SANDBOX_RUNNING, .cpu_millis = 1, .memory_mb = 1, .pids_max = 1 };
                snprintf(sb.id, sizeof sb.id, "p%d-%03d", idx, i);
                snprintf(sb.tenant_id, sizeof sb.tenant_id, "tn_%d", idx);
                snprintf(sb.template_name, sizeof sb.template_name, "base");
                snprintf(sb.runtime, sizeof sb.runtime, "ns");
                r = store_sandbox_insert(s, &sb);
                if (r < 0) {
                        fprintf(stderr, "  child %d: insert %d: %s\n", idx, i, strerror(-r));
                        store_close(s);
                        return 2;
                }
                /* free every third one again, so slots are reused under contention */
                if (i % 3 == 2) {
                        r = store_sandbox_set_state(s, sb.id, -1, SANDBOX_DELETED, NULL);
                        if (r < 0) {
                                store_close(s);
                                return 3;
                        }
                }
        }
        store_close(s);
        return 0;
}

/* CONCURRENT_PROCS processes insert (and delete) through child_url at once. */
static void slots_race(const char *url, const char *child_url) {
        Store *s = open_url(url); /* migrated before the race */
        store_close(s);

        int gate[2];
        pid_t pids[CONCURRENT_PROCS];
        ASSERT_EQ(pipe2(gate, O_CLOEXEC), 0);
        for (size_t i = 0; i < ELEMENTSOF(pids); i++)
                pids[i] = fork_gated(gate, child_insert, child_url, (int) i);
        release_and_reap(gate, pids, ELEMENTSOF(pids));

        s = open_url(url);
        Sandbox *list = NULL;
        size_t n, live = CONCURRENT_PROCS * (CONCURRENT_INSERTS - CONCURRENT_INSERTS / 3);
        ASSERT_OK(store_sandbox_list(s, &(SandboxFilter){ .state = -1, .limit = 10000 }, &list, &n));
        ASSERT_EQ(n, live);
        /* unique and, since only deletes made holes and inserts fill the
         * lowest, within the total number ever live at once */
        _cleanup_free_ bool *seen = calloc(CONCURRENT_PROCS * CONCURRENT_INSERTS, sizeof(bool));
        ASSERT_NOT_NULL(seen);
        for (size_t i = 0; i < n; i++) {
                ASSERT_TRUE(list[i].slot < CONCURRENT_PROCS * CONCURRENT_INSERTS);
                ASSERT_FALSE(seen[list[i].slot]);
                seen[list[i].slot] = true;
        }
        sandbox_array_free(list, n);
        uint64_t all;
        ASSERT_OK(store_sandbox_count(s, &(SandboxFilter){ .state = -1, .include_deleted = true }, &all));
        ASSERT_EQ(all, CONCURRENT_PROCS * CONCURRENT_INSERTS);
        store_close(s);
}

STORE_TEST(slots_unique_across_processes) {
        slots_race(url, url);
}

STORE_TEST(sandbox_set_state_cas) {
        _cleanup_(store_closep) Store *s = open_url(url);
        _cleanup_(sandbox_done) Sandbox got = {};

        insert_sandbox(s, "x", "tn_a");
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        int64_t before = got.updated_usec;
        sandbox_done(&got);

        ASSERT_OK(store_sandbox_set_state(s, "x", SANDBOX_CREATING, SANDBOX_RUNNING, "ready"));
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        ASSERT_EQ(got.state, SANDBOX_RUNNING);
        ASSERT_STREQ(got.reason, "ready");
        ASSERT_TRUE(got.updated_usec >= before);
        sandbox_done(&got);

        /* lost compare-and-set: state stays */
        ASSERT_ERRNO(store_sandbox_set_state(s, "x", SANDBOX_CREATING, SANDBOX_ERROR, "late"), ESTALE);
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        ASSERT_EQ(got.state, SANDBOX_RUNNING);
        ASSERT_STREQ(got.reason, "ready");
        sandbox_done(&got);

        ASSERT_OK(store_sandbox_set_state(s, "x", -1, SANDBOX_PAUSED, NULL));
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        ASSERT_EQ(got.state, SANDBOX_PAUSED);
        ASSERT_STREQ(got.reason, ""); /* NULL reason clears it */
        sandbox_done(&got);

        ASSERT_OK(store_sandbox_set_state(s, "x", -1, SANDBOX_DELETED, "deleted by user"));
        /* "any" does not include deleted */
        ASSERT_ERRNO(store_sandbox_set_state(s, "x", -1, SANDBOX_RUNNING, NULL), ESTALE);
        ASSERT_ERRNO(store_sandbox_set_state(s, "missing", -1, SANDBOX_RUNNING, NULL), ENOENT);
        ASSERT_ERRNO(store_sandbox_set_state(s, "missing", SANDBOX_RUNNING, SANDBOX_PAUSED, NULL), ENOENT);
        ASSERT_ERRNO(store_sandbox_set_state(s, "x", SANDBOX_DELETED, (SandboxState) 99, NULL), EINVAL);
        ASSERT_ERRNO(store_sandbox_set_state(s, "x", 99, SANDBOX_RUNNING, NULL), EINVAL);

        char reason[STORE_REASON_MAX + 1];
        memset(reason, 'r', sizeof reason - 1);
        reason[sizeof reason - 1] = 0;
        ASSERT_ERRNO(store_sandbox_set_state(s, "x", SANDBOX_DELETED, SANDBOX_DELETED, reason), ENAMETOOLONG);
        reason[STORE_REASON_MAX - 1] = 0;
        ASSERT_OK(store_sandbox_set_state(s, "x", SANDBOX_DELETED, SANDBOX_DELETED, reason));
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        ASSERT_EQ(strlen(got.reason), STORE_REASON_MAX - 1);
}

/* The owner of a lost sandbox: its worker coming back and a recovery elsewhere race in one CAS. */
STORE_TEST(sandbox_take_over) {
        _cleanup_(store_closep) Store *s = open_url(url);
        _cleanup_(sandbox_done) Sandbox got = {};

        insert_sandbox(s, "x", "tn_a");
        ASSERT_OK(store_sandbox_set_runtime(s, "x", 10, 11, "w1"));
        ASSERT_OK(store_sandbox_set_state(s, "x", -1, SANDBOX_UNREACHABLE, "worker w1 sent no heartbeat"));
        /* a recovery places it on w2 (still lost) */
        ASSERT_OK(store_sandbox_take_over(s, "x", SANDBOX_UNREACHABLE, "w1", SANDBOX_UNREACHABLE, 0, 0, "w2", "recovering"));
        /* w1 came back meanwhile: it cannot take it */
        ASSERT_ERRNO(store_sandbox_take_over(s, "x", SANDBOX_UNREACHABLE, "w1", SANDBOX_RUNNING, 10, 11, "w1", "found"),
                     ESTALE);
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        ASSERT_EQ(got.state, SANDBOX_UNREACHABLE);
        ASSERT_STREQ(got.worker, "w2");
        ASSERT_EQ(got.pid, 0);
        sandbox_done(&got);
        /* the recovery fails: home again; then w1 takes it back, running, with its pid */
        ASSERT_OK(store_sandbox_take_over(s, "x", SANDBOX_UNREACHABLE, "w2", SANDBOX_UNREACHABLE, 0, 0, "w1", "back"));
        ASSERT_OK(store_sandbox_take_over(s, "x", SANDBOX_UNREACHABLE, "w1", SANDBOX_RUNNING, 10, 11, "w1", "found"));
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        ASSERT_EQ(got.state, SANDBOX_RUNNING);
        ASSERT_STREQ(got.worker, "w1");
        ASSERT_EQ(got.pid, 10);
        ASSERT_EQ(got.pid_starttime, 11);
        ASSERT_STREQ(got.reason, "found");
        sandbox_done(&got);
        /* a recovery that comes second finds it running: refused */
        ASSERT_ERRNO(store_sandbox_take_over(s, "x", SANDBOX_UNREACHABLE, "w1", SANDBOX_UNREACHABLE, 0, 0, "w2", "late"), ESTALE);
        ASSERT_ERRNO(store_sandbox_take_over(s, "nope", SANDBOX_UNREACHABLE, "w1", SANDBOX_RUNNING, 1, 1, "w1", NULL),
                     ENOENT);
        ASSERT_ERRNO(store_sandbox_take_over(s, "x", SANDBOX_UNREACHABLE, NULL, SANDBOX_RUNNING, 1, 1, "w1", NULL), EINVAL);
        ASSERT_ERRNO(store_sandbox_take_over(s, "x", SANDBOX_UNREACHABLE, "w1", SANDBOX_RUNNING, -1, 1, "w1", NULL), EINVAL);
        ASSERT_ERRNO(store_sandbox_take_over(s, "x", (SandboxState) 99, "w1", SANDBOX_RUNNING, 1, 1, "w1", NULL),
                     EINVAL);
}

/* A create's end: running, its pid and its event in one transaction; nothing once it is not creating. */
STORE_TEST(sandbox_set_running_with_its_event) {
        _cleanup_(store_closep) Store *s = open_url(url);
        _cleanup_(sandbox_done) Sandbox got = {};
        EventFilter f = { .sandbox_id = "x" };
        Event *list = NULL, e;
        size_t n = 0;

        insert_sandbox(s, "x", "tn_a");
        ASSERT_OK(store_sandbox_set_runtime(s, "x", 0, 0, "w1")); /* placed */
        e = make_event("tn_a", "ignored", "sandbox.created");
        e.data_json = (char *) "{\"template\":\"base\"}";
        ASSERT_OK(store_sandbox_set_running(s, "x", 4321, 8765, &e));
        ASSERT_TRUE(e.seq > 0 && e.time_usec > 0);
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        ASSERT_EQ(got.state, SANDBOX_RUNNING);
        ASSERT_EQ(got.pid, 4321);
        ASSERT_EQ(got.pid_starttime, 8765);
        ASSERT_STREQ(got.worker, "w1");
        ASSERT_STREQ(got.reason, "");
        sandbox_done(&got);
        ASSERT_OK(store_event_list(s, &f, &list, &n));
        ASSERT_EQ(n, 1U);
        ASSERT_EQ(list[0].seq, e.seq);
        ASSERT_STREQ(list[0].sandbox_id, "x"); /* the sandbox's, whatever the event said */
        ASSERT_STREQ(list[0].type, "sandbox.created");
        ASSERT_STREQ(list[0].data_json, "{\"template\":\"base\"}");
        event_array_free(list, n);

        /* no longer creating (running now; deleted meanwhile): nothing written, no event */
        e = make_event("tn_a", "x", "sandbox.created");
        ASSERT_ERRNO(store_sandbox_set_running(s, "x", 1, 1, &e), ESTALE);
        insert_sandbox(s, "y", "tn_a");
        ASSERT_OK(store_sandbox_set_state(s, "y", SANDBOX_CREATING, SANDBOX_DELETED, "deleted by user"));
        ASSERT_ERRNO(store_sandbox_set_running(s, "y", 1, 1, &e), ESTALE);
        ASSERT_OK(store_sandbox_get(s, NULL, "y", &got));
        ASSERT_EQ(got.state, SANDBOX_DELETED);
        ASSERT_EQ(got.pid, 0);
        sandbox_done(&got);
        f.sandbox_id = "y";
        ASSERT_OK(store_event_list(s, &f, &list, &n));
        ASSERT_EQ(n, 0U);
        event_array_free(list, n);
        ASSERT_ERRNO(store_sandbox_set_running(s, "nope", 1, 1, &e), ENOENT);
        /* bad input */
        ASSERT_ERRNO(store_sandbox_set_running(s, "x", -1, 1, &e), EINVAL);
        ASSERT_ERRNO(store_sandbox_set_running(s, "x", 1, 1, NULL), EINVAL);
        e = make_event("tn_a", "x", "");
        ASSERT_ERRNO(store_sandbox_set_running(s, "x", 1, 1, &e), EINVAL);
}

STORE_TEST(sandbox_runtime_expiry_purge) {
        _cleanup_(store_closep) Store *s = open_url(url);
        _cleanup_(sandbox_done) Sandbox got = {};

        insert_sandbox(s, "x", "tn_a");
        ASSERT_OK(store_sandbox_set_runtime(s, "x", 1234, 5678, "host-1"));
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        ASSERT_EQ(got.pid, 1234);
        ASSERT_EQ(got.pid_starttime, 5678);
        ASSERT_STREQ(got.worker, "host-1");
        sandbox_done(&got);

        /* NULL worker: unchanged */
        ASSERT_OK(store_sandbox_set_runtime(s, "x", 0, 0, NULL));
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        ASSERT_EQ(got.pid, 0);
        ASSERT_STREQ(got.worker, "host-1");
        sandbox_done(&got);

        ASSERT_ERRNO(store_sandbox_set_runtime(s, "nope", 1, 1, "h"), ENOENT);
        ASSERT_ERRNO(store_sandbox_set_runtime(s, "x", -1, 1, "h"), EINVAL);
        char worker[STORE_NAME_MAX + 1];
        memset(worker, 'w', sizeof worker - 1);
        worker[sizeof worker - 1] = 0;
        ASSERT_ERRNO(store_sandbox_set_runtime(s, "x", 1, 1, worker), ENAMETOOLONG);

        ASSERT_OK(store_sandbox_set_expiry(s, "x", 99999));
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        ASSERT_EQ(got.expires_usec, 99999);
        sandbox_done(&got);
        ASSERT_ERRNO(store_sandbox_set_expiry(s, "nope", 1), ENOENT);
        ASSERT_ERRNO(store_sandbox_set_expiry(s, "x", -1), EINVAL);

        /* purge only what is deleted */
        ASSERT_ERRNO(store_sandbox_purge(s, "x"), ESTALE);
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        sandbox_done(&got);
        ASSERT_OK(store_sandbox_set_state(s, "x", -1, SANDBOX_DELETED, NULL));
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got)); /* deleted rows are still readable */
        ASSERT_EQ(got.state, SANDBOX_DELETED);
        sandbox_done(&got);
        ASSERT_OK(store_sandbox_purge(s, "x"));
        ASSERT_ERRNO(store_sandbox_get(s, NULL, "x", &got), ENOENT);
        ASSERT_ERRNO(store_sandbox_purge(s, "x"), ENOENT);
}

STORE_TEST(sandbox_list_pagination_and_filters) {
        _cleanup_(store_closep) Store *s = open_url(url);
        Sandbox *list = NULL;
        size_t n;
        uint64_t count;

        /* inserted out of order; ids sort ascending */
        for (int i = 0; i < 25; i++) {
                char id[16];
                snprintf(id, sizeof id, "sb-%02d", (i * 7) % 25);
                insert_sandbox(s, id, "tn_a");
        }
        insert_sandbox(s, "other", "tn_b");
        ASSERT_OK(store_sandbox_set_state(s, "sb-03", -1, SANDBOX_DELETED, NULL));
        ASSERT_OK(store_sandbox_set_state(s, "sb-10", -1, SANDBOX_RUNNING, NULL));
        ASSERT_OK(store_sandbox_set_state(s, "sb-20", -1, SANDBOX_RUNNING, NULL));

        /* pages of 10 over the 24 live ones of tn_a */
        char after[STORE_ID_MAX] = "";
        size_t total = 0;
        for (int page = 0; page < 4; page++) {
                SandboxFilter f = { .tenant_id = "tn_a", .state = -1, .limit = 10,
                                    .after_id = after[0] ? after : NULL };
                ASSERT_OK(store_sandbox_list(s, &f, &list, &n));
                ASSERT_EQ(n, page < 2 ? 10 : page == 2 ? 4 : 0);
                for (size_t i = 0; i < n; i++) {
                        ASSERT_TRUE(strcmp(list[i].id, after) > 0);
                        ASSERT_TRUE(!streq(list[i].id, "sb-03"));
                        if (i > 0)
                                ASSERT_TRUE(strcmp(list[i - 1].id, list[i].id) < 0);
                }
                if (n > 0)
                        snprintf(after, sizeof after, "%s", list[n - 1].id);
                total += n;
                sandbox_array_free(list, n);
        }
        ASSERT_EQ(total, 24);

        ASSERT_OK(store_sandbox_list(s, &(SandboxFilter){ .tenant_id = "tn_a", .state = -1, .include_deleted = true },
                                     &list, &n));
        ASSERT_EQ(n, 25);
        ASSERT_STREQ(list[3].id, "sb-03");
        ASSERT_EQ(list[3].state, SANDBOX_DELETED);
        sandbox_array_free(list, n);

        ASSERT_OK(store_sandbox_list(s, &(SandboxFilter){ .state = SANDBOX_RUNNING }, &list, &n));
        ASSERT_EQ(n, 2);
        ASSERT_STREQ(list[0].id, "sb-10");
        ASSERT_STREQ(list[1].id, "sb-20");
        sandbox_array_free(list, n);

        /* state deleted without include_deleted: nothing */
        ASSERT_OK(store_sandbox_list(s, &(SandboxFilter){ .state = SANDBOX_DELETED }, &list, &n));
        ASSERT_EQ(n, 0);
        sandbox_array_free(list, n);
        ASSERT_OK(store_sandbox_list(s, &(SandboxFilter){ .state = SANDBOX_DELETED, .include_deleted = true },
                                     &list, &n));
        ASSERT_EQ(n, 1);
        sandbox_array_free(list, n);
        ASSERT_ERRNO(store_sandbox_list(s, &(SandboxFilter){ .state = 42 }, &list, &n), EINVAL);

        ASSERT_OK(store_sandbox_count(s, &(SandboxFilter){ .state = -1 }, &count));
        ASSERT_EQ(count, 25);
        ASSERT_OK(store_sandbox_count(s, &(SandboxFilter){ .tenant_id = "tn_a", .state = -1, .limit = 3,
                                                          .after_id = "sb-20" }, &count));
        ASSERT_EQ(count, 24); /* after_id and limit do not apply */
        ASSERT_OK(store_sandbox_count(s, &(SandboxFilter){ .state = SANDBOX_RUNNING }, &count));
        ASSERT_EQ(count, 2);
        ASSERT_OK(store_sandbox_count(s, NULL, &count));
        ASSERT_EQ(count, 25);
}

STORE_TEST(events) {
        _cleanup_(store_closep) Store *s = open_url(url);
        Event *list = NULL, e;
        size_t n;

        e = make_event("tn_a", "sb1", "sandbox.created");
        e.data_json = (char *) "{\"template\":\"base\"}";
        ASSERT_OK(store_event_append(s, &e));
        ASSERT_TRUE(e.seq > 0);
        ASSERT_TRUE(e.time_usec > 0);
        int64_t first = e.seq;

        e = make_event("tn_a", "sb1", "sandbox.state");
        e.time_usec = 1000; /* kept as given */
        ASSERT_OK(strscpy(e.reason, sizeof e.reason, "paused by user"));
        ASSERT_OK(store_event_append(s, &e));
        ASSERT_EQ(e.seq, first + 1);
        ASSERT_EQ(e.time_usec, 1000);
        e = make_event("tn_b", "sb2", "sandbox.created");
        ASSERT_OK(store_event_append(s, &e));
        e = make_event("", "", "template.imported");
        ASSERT_OK(store_event_append(s, &e));
        e = make_event("tn_a", "", "key.created");
        ASSERT_OK(store_event_append(s, &e));
        e = make_event("tn_a", "sb1", "sandboxes.other"); /* not under "sandbox." */
        ASSERT_OK(store_event_append(s, &e));

        /* bad records */
        e = make_event("tn_a", "sb1", "");
        ASSERT_ERRNO(store_event_append(s, &e), EINVAL);
        e = make_event("tn_a", "sb1", "x");
        memset(e.type, 't', sizeof e.type);
        ASSERT_ERRNO(store_event_append(s, &e), ENAMETOOLONG);
        e = make_event("tn_a", "sb1", "x");
        memset(e.reason, 'r', sizeof e.reason);
        ASSERT_ERRNO(store_event_append(s, &e), ENAMETOOLONG);
        e = make_event("tn_a", "sb1", "x");
        e.time_usec = -1;
        ASSERT_ERRNO(store_event_append(s, &e), EINVAL);

        /* all, ascending */
        ASSERT_OK(store_event_list(s, NULL, &list, &n));
        ASSERT_EQ(n, 6);
        for (size_t i = 1; i < n; i++)
                ASSERT_TRUE(list[i].seq > list[i - 1].seq);
        ASSERT_STREQ(list[0].type, "sandbox.created");
        ASSERT_STREQ(list[0].data_json, "{\"template\":\"base\"}");
        ASSERT_STREQ(list[0].actor, "system");
        ASSERT_NULL(list[1].data_json);
        ASSERT_STREQ(list[1].reason, "paused by user");
        event_array_free(list, n);

        /* tenant */
        ASSERT_OK(store_event_list(s, &(EventFilter){ .tenant_id = "tn_a" }, &list, &n));
        ASSERT_EQ(n, 4);
        event_array_free(list, n);
        ASSERT_OK(store_event_list(s, &(EventFilter){ .tenant_id = "" }, &list, &n)); /* system-wide */
        ASSERT_EQ(n, 1);
        ASSERT_STREQ(list[0].type, "template.imported");
        event_array_free(list, n);

        /* sandbox */
        ASSERT_OK(store_event_list(s, &(EventFilter){ .sandbox_id = "sb1" }, &list, &n));
        ASSERT_EQ(n, 3);
        event_array_free(list, n);
        ASSERT_OK(store_event_list(s, &(EventFilter){ .tenant_id = "tn_b", .sandbox_id = "sb1" }, &list, &n));
        ASSERT_EQ(n, 0);
        event_array_free(list, n);

        /* type: exact, prefix */
        ASSERT_OK(store_event_list(s, &(EventFilter){ .type = "sandbox.created" }, &list, &n));
        ASSERT_EQ(n, 2);
        event_array_free(list, n);
        ASSERT_OK(store_event_list(s, &(EventFilter){ .type = "sandbox." }, &list, &n));
        ASSERT_EQ(n, 3);
        for (size_t i = 0; i < n; i++)
                ASSERT_TRUE(startswith(list[i].type, "sandbox.") != NULL);
        event_array_free(list, n);
        ASSERT_OK(store_event_list(s, &(EventFilter){ .type = "sandbox" }, &list, &n)); /* exact: none */
        ASSERT_EQ(n, 0);
        event_array_free(list, n);
        ASSERT_OK(store_event_list(s, &(EventFilter){ .type = "sandbox.", .tenant_id = "tn_a" }, &list, &n));
        ASSERT_EQ(n, 2);
        event_array_free(list, n);

        /* after_seq, since_usec, limit */
        ASSERT_OK(store_event_list(s, &(EventFilter){ .after_seq = first + 3 }, &list, &n));
        ASSERT_EQ(n, 2);
        ASSERT_EQ(list[0].seq, first + 4);
        event_array_free(list, n);
        ASSERT_OK(store_event_list(s, &(EventFilter){ .since_usec = 2000 }, &list, &n));
        ASSERT_EQ(n, 5); /* all but the one at time 1000 */
        event_array_free(list, n);
        ASSERT_OK(store_event_list(s, &(EventFilter){ .limit = 2, .after_seq = first }, &list, &n));
        ASSERT_EQ(n, 2);
        ASSERT_EQ(list[0].seq, first + 1);
        ASSERT_EQ(list[1].seq, first + 2);
        event_array_free(list, n);
        ASSERT_OK(store_event_list(s, &(EventFilter){ .sandbox_id = "sb1", .type = "sandbox.", .since_usec = 2000,
                                                      .tenant_id = "tn_a", .after_seq = 0, .limit = 5 },
                                   &list, &n));
        ASSERT_EQ(n, 1);
        ASSERT_EQ(list[0].seq, first);
        event_array_free(list, n);

        /* retention: seq keeps increasing after a delete */
        uint64_t removed;
        ASSERT_OK(store_event_delete_before(s, 2000, &removed));
        ASSERT_EQ(removed, 1);
        ASSERT_OK(store_event_delete_before(s, 0, &removed));
        ASSERT_EQ(removed, 0);
        ASSERT_OK(store_event_list(s, NULL, &list, &n));
        ASSERT_EQ(n, 5);
        int64_t last = list[n - 1].seq;
        event_array_free(list, n);
        ASSERT_OK(store_event_delete_before(s, INT64_MAX, NULL));
        e = make_event("tn_a", "sb9", "sandbox.created");
        ASSERT_OK(store_event_append(s, &e));
        ASSERT_TRUE(e.seq > last);
}

STORE_TEST(two_handles_share_one_database) {
        Store *w = open_url(url);
        Store *r = open_url(url);
        _cleanup_(sandbox_done) Sandbox got = {};
        Tenant t, tg;
        Event e = make_event("tn_a", "s1", "sandbox.created");

        ASSERT_OK(store_tenant_create(w, "acme", &t));
        insert_sandbox(w, "s1", t.id);
        ASSERT_OK(store_event_append(w, &e));

        /* visible to the other handle at once */
        ASSERT_OK(store_tenant_get(r, t.id, &tg));
        ASSERT_STREQ(tg.name, "acme");
        ASSERT_OK(store_sandbox_get(r, t.id, "s1", &got));
        sandbox_done(&got);
        /* the other handle writes too; slots stay unique across handles */
        ASSERT_EQ(insert_sandbox(r, "s2", t.id), 1);
        ASSERT_EQ(insert_sandbox(w, "s3", t.id), 2);
        ASSERT_ERRNO(store_tenant_create(r, "acme", &tg), EEXIST);
        ASSERT_OK(store_sandbox_set_state(r, "s1", SANDBOX_CREATING, SANDBOX_RUNNING, NULL));
        ASSERT_ERRNO(store_sandbox_set_state(w, "s1", SANDBOX_CREATING, SANDBOX_ERROR, NULL), ESTALE);
        store_close(w);
        store_close(r);

        /* and after both are closed */
        Store *again = open_url(url);
        Event *list = NULL;
        size_t n;
        ASSERT_OK(store_sandbox_get(again, NULL, "s1", &got));
        ASSERT_EQ(got.state, SANDBOX_RUNNING);
        ASSERT_OK(store_event_list(again, NULL, &list, &n));
        ASSERT_EQ(n, 1);
        ASSERT_EQ(list[0].seq, e.seq);
        event_array_free(list, n);
        store_close(again);
}

/* Lifecycle: policies, activity, warm pools, checkpoints */

#define WARM_SANDBOXES 12
#define WARM_CLAIMS_PER_PROC 6

TEST(idle_action_strings) {
        ASSERT_STREQ(idle_action_to_string(IDLE_ACTION_NONE), "");
        ASSERT_STREQ(idle_action_to_string(IDLE_ACTION_PAUSE), "pause");
        ASSERT_STREQ(idle_action_to_string(IDLE_ACTION_SUSPEND), "suspend");
        ASSERT_NULL(idle_action_to_string(_IDLE_ACTION_MAX));
        ASSERT_NULL(idle_action_to_string(_IDLE_ACTION_INVALID));
        ASSERT_EQ(idle_action_from_string("suspend"), IDLE_ACTION_SUSPEND);
        ASSERT_EQ(idle_action_from_string(""), IDLE_ACTION_NONE);
        ASSERT_EQ(idle_action_from_string("Pause"), _IDLE_ACTION_INVALID);
        ASSERT_EQ(idle_action_from_string(NULL), _IDLE_ACTION_INVALID);
}

STORE_TEST(sandbox_lifecycle_fields_roundtrip) {
        _cleanup_(store_closep) Store *s = open_url(url);
        _cleanup_(sandbox_done) Sandbox got = {};
        Sandbox sb;

        sandbox_init(&sb, "child1", "tn_a", "base");
        ASSERT_OK(strscpy(sb.parent_id, sizeof sb.parent_id, "parent1"));
        ASSERT_OK(strscpy(sb.parent_checkpoint, sizeof sb.parent_checkpoint, "ck1"));
        ASSERT_OK(strscpy(sb.warm_pool, sizeof sb.warm_pool, "base"));
        sb.processes_preserved = true;
        sb.idle_s = 30;
        sb.idle_action = IDLE_ACTION_SUSPEND;
        sb.io_weight = 250;
        sb.checkpoint_every_s = 600;
        sb.timeout_warned = true;
        sb.checkpoints_max = 12;
        sb.checkpoints_mb = 3000;
        sb.checkpoints = 77; /* read only: ignored */
        sb.network_json = (char *) "{\"allow\":[],\"deny\":[{\"cidr\":\"10.0.0.0/8\"}]}";
        ASSERT_OK(store_sandbox_insert(s, &sb));
        sb.network_json = NULL;
        ASSERT_EQ(sb.last_activity_usec, sb.created_usec); /* 0 = created */

        ASSERT_OK(store_sandbox_get(s, NULL, "child1", &got));
        ASSERT_STREQ(got.network_json, "{\"allow\":[],\"deny\":[{\"cidr\":\"10.0.0.0/8\"}]}");
        ASSERT_STREQ(got.parent_id, "parent1");
        ASSERT_STREQ(got.parent_checkpoint, "ck1");
        ASSERT_STREQ(got.warm_pool, "base");
        ASSERT_TRUE(got.processes_preserved);
        ASSERT_EQ(got.idle_s, 30);
        ASSERT_EQ(got.idle_action, IDLE_ACTION_SUSPEND);
        ASSERT_EQ(got.last_activity_usec, sb.created_usec);
        ASSERT_EQ(got.io_weight, 250);
        ASSERT_EQ(got.checkpoint_every_s, 600);
        ASSERT_TRUE(got.timeout_warned);
        ASSERT_EQ(got.checkpoints_max, 12);
        ASSERT_EQ(got.checkpoints_mb, 3000);
        ASSERT_EQ(got.checkpoints, 0);
        sandbox_done(&got);

        /* explicit activity time kept; zeroed fields read back as zero */
        sandbox_init(&sb, "plain", "tn_a", "base");
        sb.last_activity_usec = 42;
        ASSERT_OK(store_sandbox_insert(s, &sb));
        ASSERT_OK(store_sandbox_get(s, NULL, "plain", &got));
        ASSERT_EQ(got.last_activity_usec, 42);
        ASSERT_FALSE(got.processes_preserved);
        ASSERT_EQ(got.idle_action, IDLE_ACTION_NONE);
        ASSERT_STREQ(got.warm_pool, "");
        ASSERT_STREQ(got.parent_checkpoint, "");
        sandbox_done(&got);

        /* a row written without the new columns gets their defaults */
        raw_sql(url, "INSERT INTO sandboxes (id, tenant_id, template_name, runtime, state, cpu_millis, memory_mb, "
                     "disk_mb, pids_max, created_usec, updated_usec, slot) "
                     "VALUES ('old', 'tn_a', 'base', 'ns', 'running', 1000, 512, 1024, 64, 5, 6, 50)");
        ASSERT_OK(store_sandbox_get(s, NULL, "old", &got));
        ASSERT_TRUE(got.processes_preserved);
        ASSERT_EQ(got.idle_s, 0);
        ASSERT_EQ(got.idle_action, IDLE_ACTION_NONE);
        ASSERT_FALSE(got.timeout_warned);
        ASSERT_EQ(got.checkpoint_every_s, 0);
        ASSERT_EQ(got.checkpoints_max, 0);
        ASSERT_EQ(got.checkpoints_mb, 0);
        sandbox_done(&got);

        /* bad input is refused before anything is written */
        sandbox_init(&sb, "bad", "tn_a", "base");
        sb.idle_action = (IdleAction) 7;
        ASSERT_ERRNO(store_sandbox_insert(s, &sb), EINVAL);
        sandbox_init(&sb, "bad", "tn_a", "base");
        memset(sb.warm_pool, 'w', sizeof sb.warm_pool);
        ASSERT_ERRNO(store_sandbox_insert(s, &sb), ENAMETOOLONG);
        sandbox_init(&sb, "bad", "tn_a", "base");
        memset(sb.parent_checkpoint, 'c', sizeof sb.parent_checkpoint);
        ASSERT_ERRNO(store_sandbox_insert(s, &sb), ENAMETOOLONG);
        sandbox_init(&sb, "bad", "tn_a", "base");
        sb.idle_s = (uint64_t) INT64_MAX + 1;
        ASSERT_ERRNO(store_sandbox_insert(s, &sb), ERANGE);
        sandbox_init(&sb, "bad", "tn_a", "base");
        sb.last_activity_usec = -1;
        ASSERT_ERRNO(store_sandbox_insert(s, &sb), EINVAL);
        ASSERT_ERRNO(store_sandbox_get(s, NULL, "bad", &got), ENOENT);
}

STORE_TEST(sandbox_touch_and_policy) {
        _cleanup_(store_closep) Store *s = open_url(url);
        _cleanup_(sandbox_done) Sandbox got = {};
        Sandbox sb;

        sandbox_init(&sb, "x", "tn_a", "base");
        sb.last_activity_usec = 1000;
        sb.expires_usec = 5000;
        ASSERT_OK(store_sandbox_insert(s, &sb));

        int64_t before = now_usec();
        ASSERT_OK(store_sandbox_touch(s, "x"));
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        ASSERT_TRUE(got.last_activity_usec >= before);
        int64_t touched = got.last_activity_usec;
        sandbox_done(&got);
        /* only grows: a row with a later time keeps it */
        raw_sql(url, "UPDATE sandboxes SET last_activity_usec = 9000000000000000 WHERE id = 'x'");
        ASSERT_OK(store_sandbox_touch(s, "x"));
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        ASSERT_EQ(got.last_activity_usec, 9000000000000000LL);
        ASSERT_TRUE(touched > 0);
        sandbox_done(&got);
        ASSERT_ERRNO(store_sandbox_touch(s, "nope"), ENOENT);
        ASSERT_ERRNO(store_sandbox_touch(s, NULL), EINVAL);

        /* the timeout warning: once */
        ASSERT_OK(store_sandbox_set_timeout_warned(s, "x"));
        ASSERT_ERRNO(store_sandbox_set_timeout_warned(s, "x"), ESTALE);
        ASSERT_ERRNO(store_sandbox_set_timeout_warned(s, "nope"), ENOENT);

        /* a policy with the same expiry keeps the warning ... */
        SandboxPolicy p = { .timeout_s = 60, .expires_usec = 5000, .idle_s = 2, .idle_action = IDLE_ACTION_PAUSE,
                            .checkpoint_every_s = 300 };
        ASSERT_OK(store_sandbox_set_policy(s, "x", &p));
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        ASSERT_EQ(got.timeout_s, 60);
        ASSERT_EQ(got.expires_usec, 5000);
        ASSERT_EQ(got.idle_s, 2);
        ASSERT_EQ(got.idle_action, IDLE_ACTION_PAUSE);
        ASSERT_EQ(got.checkpoint_every_s, 300);
        ASSERT_TRUE(got.timeout_warned);
        sandbox_done(&got);
        /* ... a new one clears it, so the next timeout is warned about again */
        p.expires_usec = 7000;
        p.idle_action = IDLE_ACTION_NONE;
        p.idle_s = 0;
        ASSERT_OK(store_sandbox_set_policy(s, "x", &p));
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        ASSERT_EQ(got.expires_usec, 7000);
        ASSERT_EQ(got.idle_action, IDLE_ACTION_NONE);
        ASSERT_FALSE(got.timeout_warned);
        sandbox_done(&got);
        ASSERT_OK(store_sandbox_set_timeout_warned(s, "x"));

        /* processes_preserved */
        ASSERT_OK(store_sandbox_set_processes_preserved(s, "x", true));
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        ASSERT_TRUE(got.processes_preserved);
        sandbox_done(&got);
        ASSERT_OK(store_sandbox_set_processes_preserved(s, "x", false));
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        ASSERT_FALSE(got.processes_preserved);
        sandbox_done(&got);
        ASSERT_ERRNO(store_sandbox_set_processes_preserved(s, "nope", true), ENOENT);

        /* the egress policy (network_json): none at insert here, then set and replaced */
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        ASSERT_NULL(got.network_json);
        sandbox_done(&got);
        ASSERT_OK(store_sandbox_set_network(s, "x", "{\"allow\":[{\"host\":\"pypi.org\",\"ports\":[443]}],\"deny\":[]}"));
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        ASSERT_STREQ(got.network_json, "{\"allow\":[{\"host\":\"pypi.org\",\"ports\":[443]}],\"deny\":[]}");
        sandbox_done(&got);
        ASSERT_OK(store_sandbox_set_network(s, "x", "{\"allow\":[],\"deny\":[]}"));
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        ASSERT_STREQ(got.network_json, "{\"allow\":[],\"deny\":[]}");
        sandbox_done(&got);
        ASSERT_ERRNO(store_sandbox_set_network(s, "nope", "{}"), ENOENT);
        ASSERT_ERRNO(store_sandbox_set_network(s, "x", NULL), EINVAL);

        /* bad policies */
        p.idle_action = (IdleAction) 9;
        ASSERT_ERRNO(store_sandbox_set_policy(s, "x", &p), EINVAL);
        p.idle_action = IDLE_ACTION_SUSPEND;
        p.expires_usec = -1;
        ASSERT_ERRNO(store_sandbox_set_policy(s, "x", &p), EINVAL);
        p.expires_usec = 0;
        p.timeout_s = (uint64_t) INT64_MAX + 1;
        ASSERT_ERRNO(store_sandbox_set_policy(s, "x", &p), ERANGE);
        p.timeout_s = 0;
        ASSERT_ERRNO(store_sandbox_set_policy(s, "x", NULL), EINVAL);
        ASSERT_ERRNO(store_sandbox_set_policy(s, "nope", &p), ENOENT);
        /* a deleted sandbox has no policy to change */
        ASSERT_OK(store_sandbox_set_state(s, "x", -1, SANDBOX_DELETED, NULL));
        ASSERT_ERRNO(store_sandbox_set_policy(s, "x", &p), ESTALE);
        ASSERT_ERRNO(store_sandbox_set_network(s, "x", "{\"allow\":[\"a.example\"]}"), ESTALE);
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        ASSERT_EQ(got.idle_action, IDLE_ACTION_NONE); /* unchanged */
        ASSERT_STREQ(got.network_json, "{\"allow\":[],\"deny\":[]}");
}

static void insert_warm(Store *s, const char *id, const char *tmpl, SandboxState state, uint64_t disk_mb,
                        int64_t created) {
        Sandbox sb;
        sandbox_init(&sb, id, STORE_SYSTEM_TENANT_ID, tmpl);
        ASSERT_OK(strscpy(sb.warm_pool, sizeof sb.warm_pool, tmpl));
        sb.state = state;
        sb.disk_mb = disk_mb;
        sb.created_usec = created;
        sb.processes_preserved = true;
        sb.env_json = (char *) "{\"WARM\":\"1\"}";
        ASSERT_OK(store_sandbox_insert(s, &sb));
}

static Sandbox claim_request(const char *tenant) {
        Sandbox req;
        sandbox_init(&req, "unused", tenant, "base");
        req.cpu_millis = 250;
        req.memory_mb = 256;
        req.pids_max = 99;
        req.io_weight = 500;
        req.timeout_s = 120;
        req.expires_usec = 123456789;
        req.idle_s = 10;
        req.idle_action = IDLE_ACTION_SUSPEND;
        req.checkpoint_every_s = 60;
        req.checkpoints_max = 7;
        req.checkpoints_mb = 700;
        req.env_json = (char *) "{\"USER_ENV\":\"yes\"}";
        req.metadata_json = (char *) "{\"who\":\"me\"}";
        req.network_json = (char *) "{\"allow\":[{\"host\":\"claimed.example\",\"ports\":[443]}],\"deny\":[]}";
        return req;
}

STORE_TEST(warm_pool_claim) {
        _cleanup_(store_closep) Store *s = open_url(url);
        _cleanup_(sandbox_done) Sandbox got = {};
        uint64_t ready, total;

        insert_warm(s, "w2", "base", SANDBOX_PAUSED, 2048, 200);
        insert_warm(s, "w1", "base", SANDBOX_PAUSED, 2048, 100);
        insert_warm(s, "w3", "base", SANDBOX_CREATING, 2048, 50);  /* not ready */
        insert_warm(s, "w4", "base", SANDBOX_PAUSED, 4096, 10);    /* other disk */
        insert_warm(s, "w5", "debian", SANDBOX_PAUSED, 2048, 10);  /* other template */
        insert_warm(s, "w6", "base", SANDBOX_DELETED, 2048, 1);    /* gone */

        ASSERT_OK(store_sandbox_warm_count(s, "base", &ready, &total));
        ASSERT_EQ(ready, 3);
        ASSERT_EQ(total, 4);
        ASSERT_OK(store_sandbox_warm_count(s, "nothing", &ready, &total));
        ASSERT_EQ(ready, 0);
        ASSERT_EQ(total, 0);

        Sandbox req = claim_request("tn_a");
        int64_t before = now_usec();
        ASSERT_OK(store_sandbox_claim_warm(s, "base", &req, &got));
        ASSERT_STREQ(got.id, "w1"); /* the oldest ready one */
        ASSERT_STREQ(got.tenant_id, "tn_a");
        ASSERT_STREQ(got.warm_pool, "");
        ASSERT_EQ(got.state, SANDBOX_PAUSED); /* the caller resumes it */
        ASSERT_EQ(got.cpu_millis, 250);
        ASSERT_EQ(got.memory_mb, 256);
        ASSERT_EQ(got.disk_mb, 2048);
        ASSERT_EQ(got.pids_max, 99);
        ASSERT_EQ(got.io_weight, 500);
        ASSERT_EQ(got.timeout_s, 120);
        ASSERT_EQ(got.expires_usec, 123456789);
        ASSERT_EQ(got.idle_s, 10);
        ASSERT_EQ(got.idle_action, IDLE_ACTION_SUSPEND);
        ASSERT_EQ(got.checkpoint_every_s, 60);
        ASSERT_EQ(got.checkpoints_max, 7);
        ASSERT_EQ(got.checkpoints_mb, 700);
        ASSERT_STREQ(got.env_json, "{\"USER_ENV\":\"yes\"}");
        ASSERT_STREQ(got.metadata_json, "{\"who\":\"me\"}");
        ASSERT_STREQ(got.network_json, "{\"allow\":[{\"host\":\"claimed.example\",\"ports\":[443]}],\"deny\":[]}");
        ASSERT_TRUE(got.created_usec >= before);
        ASSERT_EQ(got.last_activity_usec, got.created_usec);
        ASSERT_FALSE(got.timeout_warned);
        ASSERT_TRUE(got.processes_preserved);
        sandbox_done(&got);
        /* the tenant sees it now */
        ASSERT_OK(store_sandbox_get(s, "tn_a", "w1", &got));
        sandbox_done(&got);

        /* no match on disk or runtime: none */
        req.disk_mb = 999;
        ASSERT_ERRNO(store_sandbox_claim_warm(s, "base", &req, &got), ENOENT);
        req.disk_mb = 4096;
        ASSERT_OK(store_sandbox_claim_warm(s, "base", &req, &got));
        ASSERT_STREQ(got.id, "w4");
        sandbox_done(&got);
        req.disk_mb = 2048;
        ASSERT_OK(strscpy(req.runtime, sizeof req.runtime, "vm"));
        ASSERT_ERRNO(store_sandbox_claim_warm(s, "base", &req, &got), ENOENT);
        ASSERT_OK(strscpy(req.runtime, sizeof req.runtime, "ns"));

        req.env_json = NULL; /* NULL JSON is written as NULL */
        ASSERT_OK(store_sandbox_claim_warm(s, "base", &req, &got));
        ASSERT_STREQ(got.id, "w2");
        ASSERT_NULL(got.env_json);
        sandbox_done(&got);
        /* w3 is still creating: nothing is ready */
        ASSERT_ERRNO(store_sandbox_claim_warm(s, "base", &req, &got), ENOENT);
        ASSERT_OK(store_sandbox_warm_count(s, "base", &ready, &total));
        ASSERT_EQ(ready, 0);
        ASSERT_EQ(total, 1);

        /* bad input */
        Sandbox sys = claim_request(STORE_SYSTEM_TENANT_ID);
        ASSERT_ERRNO(store_sandbox_claim_warm(s, "debian", &sys, &got), EINVAL);
        req.idle_action = (IdleAction) 5;
        ASSERT_ERRNO(store_sandbox_claim_warm(s, "debian", &req, &got), EINVAL);
        req = claim_request("");
        ASSERT_ERRNO(store_sandbox_claim_warm(s, "debian", &req, &got), EINVAL);
        req = claim_request("tn_a");
        ASSERT_ERRNO(store_sandbox_claim_warm(s, NULL, &req, &got), EINVAL);
        ASSERT_ERRNO(store_sandbox_claim_warm(s, "", &req, &got), ENOENT);
        ASSERT_ERRNO(store_sandbox_warm_count(s, NULL, &ready, &total), EINVAL);
        /* the debian one is untouched */
        ASSERT_OK(store_sandbox_get(s, NULL, "w5", &got));
        ASSERT_STREQ(got.tenant_id, STORE_SYSTEM_TENANT_ID);
        ASSERT_STREQ(got.warm_pool, "debian");
}

static int child_claim(const char *path, int idx) {
        Store *s = NULL;
        char tenant[32];
        int claimed = 0;

        if (store_open(path, &s) < 0)
                return 100;
        snprintf(tenant, sizeof tenant, "tn_claimer%d", idx);
        for (int i = 0; i < WARM_CLAIMS_PER_PROC; i++) {
                Sandbox req = claim_request(tenant), got = {};
                int r = store_sandbox_claim_warm(s, "base", &req, &got);
                if (r == -ENOENT)
                        continue;
                if (r < 0) {
                        fprintf(stderr, "  child %d: claim: %s\n", idx, strerror(-r));
                        store_close(s);
                        return 101;
                }
                if (!streq(got.tenant_id, tenant)) {
                        sandbox_done(&got);
                        store_close(s);
                        return 102;
                }
                sandbox_done(&got);
                claimed++;
        }
        store_close(s);
        return claimed;
}

/* A claim takes only a warm sandbox of the version asked for (the newest, for a create from the name). */
STORE_TEST(warm_pool_claim_takes_the_version_asked_for) {
        _cleanup_(store_closep) Store *s = open_url(url);
        _cleanup_(sandbox_done) Sandbox got = {};
        TemplateVersion v;
        Sandbox sb;

        for (uint64_t i = 1; i <= 2; i++) {
                v = make_version("vt", i, "", 10);
                ASSERT_OK(store_template_version_add(s, &v));
        }
        sandbox_init(&sb, "old", STORE_SYSTEM_TENANT_ID, "vt");
        ASSERT_OK(strscpy(sb.warm_pool, sizeof sb.warm_pool, "vt"));
        sb.state = SANDBOX_PAUSED;
        sb.disk_mb = 2048;
        sb.template_version = 1;
        ASSERT_OK(store_sandbox_insert(s, &sb));

        Sandbox req = claim_request("tn_a");
        ASSERT_OK(strscpy(req.template_name, sizeof req.template_name, "vt"));
        req.disk_mb = 2048;
        req.template_version = 2;
        ASSERT_ERRNO(store_sandbox_claim_warm(s, "vt", &req, &got), ENOENT); /* version 1's: not for 2 */
        req.template_version = 1;
        ASSERT_OK(store_sandbox_claim_warm(s, "vt", &req, &got));
        ASSERT_STREQ(got.id, "old");
        ASSERT_EQ(got.template_version, 1U);
}

STORE_TEST(warm_pool_claims_are_exclusive_across_processes) {
        Store *s = open_url(url);
        for (int i = 0; i < WARM_SANDBOXES; i++) {
                char id[16];
                snprintf(id, sizeof id, "warm%02d", i);
                insert_warm(s, id, "base", SANDBOX_PAUSED, 2048, 100 + i);
        }
        store_close(s);

        int gate[2], total = 0;
        pid_t pids[CONCURRENT_PROCS];
        ASSERT_EQ(pipe2(gate, O_CLOEXEC), 0);
        for (size_t i = 0; i < ELEMENTSOF(pids); i++)
                pids[i] = fork_gated(gate, child_claim, url, (int) i);
        close(gate[0]);
        close(gate[1]);
        for (size_t i = 0; i < ELEMENTSOF(pids); i++) {
                int status;
                ASSERT_TRUE(pids[i] > 0);
                ASSERT_EQ(waitpid(pids[i], &status, 0), pids[i]);
                ASSERT_TRUE(WIFEXITED(status));
                ASSERT_TRUE(WEXITSTATUS(status) <= WARM_CLAIMS_PER_PROC);
                total += WEXITSTATUS(status);
        }
        /* 4 × 6 claims for 12 sandboxes: every one claimed exactly once */
        ASSERT_EQ(total, WARM_SANDBOXES);

        s = open_url(url);
        uint64_t ready, all, sum = 0;
        ASSERT_OK(store_sandbox_warm_count(s, "base", &ready, &all));
        ASSERT_EQ(all, 0);
        for (int i = 0; i < CONCURRENT_PROCS; i++) {
                char tenant[32];
                uint64_t n;
                snprintf(tenant, sizeof tenant, "tn_claimer%d", i);
                ASSERT_OK(store_sandbox_count(s, &(SandboxFilter){ .tenant_id = tenant, .state = -1 }, &n));
                sum += n;
        }
        ASSERT_EQ(sum, WARM_SANDBOXES);
        store_close(s);
}

static Checkpoint make_checkpoint(const char *id, const char *sandbox, const char *tenant, const char *name,
                                  int64_t created) {
        Checkpoint c = { .created_usec = created, .restorable = true };
        ASSERT_OK(strscpy(c.id, sizeof c.id, id));
        ASSERT_OK(strscpy(c.sandbox_id, sizeof c.sandbox_id, sandbox));
        ASSERT_OK(strscpy(c.tenant_id, sizeof c.tenant_id, tenant));
        ASSERT_OK(strscpy(c.name, sizeof c.name, name));
        return c;
}

/* Batches: one commit for several operations; a failed one inside does not
 * end the batch or undo the others. */
STORE_TEST(batches) {
        _cleanup_(store_closep) Store *s = open_url(url), *other = open_url(url);
        _cleanup_(sandbox_done) Sandbox got = {};
        bool sqlite = streq(store_backend_name(s), "sqlite");
        Checkpoint c;
        Event ev;

        insert_sandbox(s, "base1", "tn_a");
        ASSERT_OK(store_batch_begin(s));
        if (sqlite)
                ASSERT_ERRNO(store_batch_begin(s), EBUSY); /* no nesting */
        insert_sandbox(s, "bat1", "tn_a");
        c = make_checkpoint("ckb1", "base1", "tn_a", "", 1);
        ASSERT_OK(store_checkpoint_insert(s, &c));
        ASSERT_ERRNO(store_checkpoint_insert(s, &c), EEXIST); /* fails alone */
        ASSERT_OK(store_sandbox_set_state(s, "bat1", SANDBOX_CREATING, SANDBOX_RUNNING, ""));
        ASSERT_ERRNO(store_sandbox_set_state(s, "bat1", SANDBOX_CREATING, SANDBOX_RUNNING, ""), ESTALE);
        ev = make_event("tn_a", "bat1", "sandbox.created");
        ASSERT_OK(store_event_append(s, &ev));
        ASSERT_OK(store_sandbox_get(s, NULL, "bat1", &got)); /* the batch sees its own writes */
        ASSERT_EQ(got.state, SANDBOX_RUNNING);
        sandbox_done(&got);
        if (sqlite) /* nobody else sees them before the commit */
                ASSERT_ERRNO(store_sandbox_get(other, NULL, "bat1", &got), ENOENT);
        ASSERT_OK(store_batch_end(s));
        if (sqlite)
                ASSERT_ERRNO(store_batch_end(s), EINVAL); /* none open */

        ASSERT_OK(store_sandbox_get(other, NULL, "bat1", &got));
        ASSERT_EQ(got.state, SANDBOX_RUNNING);
        ASSERT_OK(store_checkpoint_get(other, NULL, "ckb1", &c));
        /* and the handle works on its own again: a failure rolls back only itself */
        ASSERT_ERRNO(store_checkpoint_insert(s, &c), EEXIST);
        insert_sandbox(s, "bat2", "tn_a");
        sandbox_done(&got);
        ASSERT_OK(store_sandbox_get(other, NULL, "bat2", &got));
        ASSERT_ERRNO(store_batch_begin(NULL), EINVAL);
        ASSERT_ERRNO(store_batch_end(NULL), EINVAL);
}

STORE_TEST(checkpoints) {
        _cleanup_(store_closep) Store *s = open_url(url);
        _cleanup_(sandbox_done) Sandbox sb = {};
        Checkpoint c, got, *list = NULL;
        size_t n;
        uint64_t removed;

        insert_sandbox(s, "sa", "tn_a");
        insert_sandbox(s, "sb", "tn_b");

        c = make_checkpoint("ck1", "sa", "tn_a", "before-upgrade", 100);
        c.size_bytes = 4096;
        ASSERT_OK(store_checkpoint_insert(s, &c));
        c = make_checkpoint("ck2", "sa", "tn_a", "", 300);
        c.automatic = true;
        ASSERT_OK(store_checkpoint_insert(s, &c));
        c = make_checkpoint("ck3", "sa", "tn_a", "", 200); /* a second unnamed one is fine */
        c.restorable = false;
        ASSERT_OK(store_checkpoint_insert(s, &c));
        c = make_checkpoint("ck4", "sb", "tn_b", "before-upgrade", 0); /* names are per sandbox */
        ASSERT_OK(store_checkpoint_insert(s, &c));
        ASSERT_TRUE(c.created_usec == 0); /* the argument is not changed */

        /* taken id, taken name */
        c = make_checkpoint("ck1", "sb", "tn_b", "", 1);
        ASSERT_ERRNO(store_checkpoint_insert(s, &c), EEXIST);
        c = make_checkpoint("ck5", "sa", "tn_a", "before-upgrade", 1);
        ASSERT_ERRNO(store_checkpoint_insert(s, &c), EEXIST);

        ASSERT_OK(store_checkpoint_get(s, NULL, "ck1", &got));
        ASSERT_STREQ(got.sandbox_id, "sa");
        ASSERT_STREQ(got.tenant_id, "tn_a");
        ASSERT_STREQ(got.name, "before-upgrade");
        ASSERT_EQ(got.created_usec, 100);
        ASSERT_EQ(got.size_bytes, 4096);
        ASSERT_FALSE(got.automatic);
        ASSERT_TRUE(got.restorable);
        ASSERT_OK(store_checkpoint_get(s, "tn_b", "ck4", &got));
        ASSERT_TRUE(got.created_usec > 0); /* 0 = now */
        /* another tenant's checkpoint does not exist for you */
        ASSERT_ERRNO(store_checkpoint_get(s, "tn_b", "ck1", &got), ENOENT);
        ASSERT_ERRNO(store_checkpoint_get(s, NULL, "nope", &got), ENOENT);

        /* newest first */
        ASSERT_OK(store_checkpoint_list(s, "sa", &list, &n));
        ASSERT_EQ(n, 3);
        ASSERT_STREQ(list[0].id, "ck2");
        ASSERT_TRUE(list[0].automatic);
        ASSERT_STREQ(list[1].id, "ck3");
        ASSERT_FALSE(list[1].restorable);
        ASSERT_STREQ(list[2].id, "ck1");
        free(list);
        ASSERT_OK(store_checkpoint_list(s, NULL, &list, &n));
        ASSERT_EQ(n, 4);
        ASSERT_STREQ(list[0].id, "ck4");
        free(list);
        ASSERT_OK(store_checkpoint_list(s, "nobody", &list, &n));
        ASSERT_EQ(n, 0);
        free(list);

        /* the sandbox counts its restorable ones, in get and list */
        ASSERT_OK(store_sandbox_get(s, NULL, "sa", &sb));
        ASSERT_EQ(sb.checkpoints, 2);
        sandbox_done(&sb);
        Sandbox *sbs = NULL;
        ASSERT_OK(store_sandbox_list(s, &(SandboxFilter){ .tenant_id = "tn_a", .state = -1 }, &sbs, &n));
        ASSERT_EQ(n, 1);
        ASSERT_EQ(sbs[0].checkpoints, 2);
        sandbox_array_free(sbs, n);

        ASSERT_OK(store_checkpoint_update(s, "ck3", true, 1 << 20));
        ASSERT_OK(store_checkpoint_get(s, NULL, "ck3", &got));
        ASSERT_TRUE(got.restorable);
        ASSERT_EQ(got.size_bytes, 1 << 20);
        ASSERT_OK(store_sandbox_get(s, NULL, "sa", &sb));
        ASSERT_EQ(sb.checkpoints, 3);
        sandbox_done(&sb);
        ASSERT_ERRNO(store_checkpoint_update(s, "nope", true, 0), ENOENT);
        ASSERT_ERRNO(store_checkpoint_update(s, "ck3", true, (uint64_t) INT64_MAX + 1), ERANGE);

        ASSERT_OK(store_checkpoint_delete(s, "ck3"));
        ASSERT_ERRNO(store_checkpoint_delete(s, "ck3"), ENOENT);
        ASSERT_ERRNO(store_checkpoint_get(s, NULL, "ck3", &got), ENOENT);

        /* bad input */
        c = make_checkpoint("ck9", "sa", "tn_a", "", 1);
        c.created_usec = -1;
        ASSERT_ERRNO(store_checkpoint_insert(s, &c), EINVAL);
        c = make_checkpoint("ck9", "sa", "", "", 1);
        ASSERT_ERRNO(store_checkpoint_insert(s, &c), EINVAL);
        c = make_checkpoint("ck9", "sa", "tn_a", "", 1);
        memset(c.name, 'n', sizeof c.name);
        ASSERT_ERRNO(store_checkpoint_insert(s, &c), ENAMETOOLONG);
        c = make_checkpoint("ck9", "sa", "tn_a", "", 1);
        c.size_bytes = (uint64_t) INT64_MAX + 1;
        ASSERT_ERRNO(store_checkpoint_insert(s, &c), ERANGE);
        ASSERT_ERRNO(store_checkpoint_insert(s, NULL), EINVAL);
        ASSERT_ERRNO(store_checkpoint_get(s, NULL, NULL, &got), EINVAL);
        ASSERT_ERRNO(store_checkpoint_list(s, "sa", NULL, &n), EINVAL);

        /* rows of deleted (or purged) sandboxes go with the orphan sweep */
        ASSERT_OK(store_checkpoint_delete_orphans(s, &removed));
        ASSERT_EQ(removed, 0);
        ASSERT_OK(store_sandbox_set_state(s, "sa", -1, SANDBOX_DELETED, NULL));
        ASSERT_OK(store_checkpoint_delete_orphans(s, &removed));
        ASSERT_EQ(removed, 2);
        ASSERT_OK(store_sandbox_set_state(s, "sb", -1, SANDBOX_DELETED, NULL));
        ASSERT_OK(store_sandbox_purge(s, "sb"));
        ASSERT_OK(store_checkpoint_delete_orphans(s, NULL));
        ASSERT_OK(store_checkpoint_list(s, NULL, &list, &n));
        ASSERT_EQ(n, 0);
        free(list);
}

/* PostgreSQL only */

TEST(postgres_url_secrets_and_sqlstates) {
        char *secrets[PG_SECRETS_MAX] = {};
        _cleanup_free_ char *clean = NULL;

        /* user info (raw and decoded) and password= parameters, longest first */
        ASSERT_OK(pg_url_secrets("postgresql://u:S3%63ret@h/db?password=qp&port=1", secrets, ELEMENTSOF(secrets)));
        ASSERT_STREQ(secrets[0], "S3%63ret");
        ASSERT_STREQ(secrets[1], "S3cret");
        ASSERT_STREQ(secrets[2], "qp");
        ASSERT_NULL(secrets[3]);
        clean = pg_scrub("a S3%63ret b S3cret c qp d", secrets);
        ASSERT_STREQ(clean, "a *** b *** c *** d");
        for (size_t i = 0; i < ELEMENTSOF(secrets); i++)
                secrets[i] = mfree(secrets[i]);

        /* an encoded key, no user info, a port that is not a password */
        ASSERT_OK(pg_url_secrets("postgresql://h:5432/db?pass%77ord=zz", secrets, ELEMENTSOF(secrets)));
        ASSERT_STREQ(secrets[0], "zz");
        ASSERT_NULL(secrets[1]);
        secrets[0] = mfree(secrets[0]);
        ASSERT_OK(pg_url_secrets("postgresql://user@h/db?host=/tmp/x", secrets, ELEMENTSOF(secrets)));
        ASSERT_NULL(secrets[0]);
        ASSERT_OK(pg_url_secrets("postgresql://u:@h/db", secrets, ELEMENTSOF(secrets)));
        ASSERT_NULL(secrets[0]);
        /* more spellings than fit: refused rather than half scrubbed */
        ASSERT_ERRNO(pg_url_secrets("postgresql://u:p%41@h/db?password=a%41&password=b%41&password=c%41",
                                    secrets, ELEMENTSOF(secrets)), E2BIG);
        for (size_t i = 0; i < ELEMENTSOF(secrets); i++)
                secrets[i] = mfree(secrets[i]);
        ASSERT_ERRNO(store_open("postgresql://u:p%41@h/db?password=a%41&password=b%41&password=c%41", &(Store *){ NULL }),
                     EINVAL);

        free(clean);
        clean = pg_scrub("nothing secret", NULL);
        ASSERT_STREQ(clean, "nothing secret");

        ASSERT_EQ(pg_sqlstate_errno("23505"), -EEXIST);
        ASSERT_EQ(pg_sqlstate_errno("23503"), -ENOENT);
        ASSERT_EQ(pg_sqlstate_errno("23502"), -EINVAL);
        ASSERT_EQ(pg_sqlstate_errno("40001"), -EAGAIN);
        ASSERT_EQ(pg_sqlstate_errno("40P01"), -EAGAIN);
        ASSERT_EQ(pg_sqlstate_errno("08006"), -EIO);
        ASSERT_EQ(pg_sqlstate_errno("57P01"), -EIO);
        ASSERT_EQ(pg_sqlstate_errno("28P01"), -EACCES);
        ASSERT_EQ(pg_sqlstate_errno("3D000"), -ENOENT);
        ASSERT_EQ(pg_sqlstate_errno("22021"), -EINVAL);
        ASSERT_EQ(pg_sqlstate_errno("XX000"), -EIO);
        ASSERT_EQ(pg_sqlstate_errno("2350"), -EIO);
        ASSERT_EQ(pg_sqlstate_errno(NULL), -EIO);
}

/* stderr (where the log goes) into a file, at debug level, and back. */
typedef struct Capture {
        int saved_fd;
        int saved_level;
} Capture;

static Capture capture_begin(const char *path) {
        Capture c = { .saved_level = log_get_max_level() };
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        ASSERT_TRUE(fd >= 0);
        fflush(stderr);
        c.saved_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
        ASSERT_TRUE(c.saved_fd >= 0);
        ASSERT_TRUE(dup2(fd, STDERR_FILENO) == STDERR_FILENO);
        close(fd);
        log_set_max_level(LOG_DEBUG_);
        return c;
}

static void capture_end(Capture *c) {
        fflush(stderr);
        (void) dup2(c->saved_fd, STDERR_FILENO);
        close(c->saved_fd);
        log_set_max_level(c->saved_level);
}

static char *read_file(const char *path) {
        char *text = NULL;
        size_t n;
        ASSERT_OK(read_full_file(path, 1 << 20, &text, &n));
        return text;
}

/* The TCP port of the server we started, or 0. */
static unsigned own_port(void) {
        const char *p = strstr(pg.own, "port=");
        unsigned port = 0;
        char buf[8] = "";

        if (!p)
                return 0;
        p += STRLEN("port=");
        for (size_t i = 0; i + 1 < sizeof buf && p[i] >= '0' && p[i] <= '9'; i++)
                buf[i] = p[i];
        return safe_atou(buf, &port) < 0 ? 0 : port;
}

TEST(postgres_open_errors_keep_the_password_out_of_logs) {
        use_backend(BACKEND_POSTGRES);
        (void) fresh_url(); /* made the database db */
        const char *db = pg.databases[pg.n_databases - 1];
        char u[PG_URL_MAX + 128], log_path[PATH_MAX];
        unsigned port = own_port();
        Store *s = NULL;

        snprintf(u, sizeof u, "%s%sdbname=space_no_such_db", pg.url, strchr(pg.url, '?') ? "&" : "?");
        ASSERT_ERRNO(store_open(u, &s), ENOENT);
        ASSERT_ERRNO(store_open("postgresql:///x?host=/tmp/space-no-such-dir&port=5", &s), ECONNREFUSED);
        ASSERT_ERRNO(store_open("postgresql://h/db?no_such_parameter=1", &s), EINVAL);
        ASSERT_NULL(s);

        if (port > 0) {
                char sql[256];
                snprintf(sql, sizeof sql, "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '%s') "
                         "THEN CREATE ROLE %s LOGIN PASSWORD '%s'; END IF; END $$",
                         PG_PASSWORD_ROLE, PG_PASSWORD_ROLE, PG_PASSWORD);
                pg_admin(sql);
                snprintf(sql, sizeof sql, "ALTER DATABASE \"%s\" OWNER TO %s", db, PG_PASSWORD_ROLE);
                pg_admin(sql);
        }

        snprintf(log_path, sizeof log_path, "%s/log", test_tmpdir());
        Capture cap = capture_begin(log_path);
        int r_pct = store_open("postgresql://u:" PG_PASSWORD "%zz@127.0.0.1/db", &s);
        int r_v6 = store_open("postgresql://u:" PG_PASSWORD "@[::1/db", &s);
        int r_param = store_open("postgresql://u@[::1/db?password=" PG_PASSWORD, &s);
        int r_wrong = 0, r_none = 0, r_ok = 0, r_use = 0;
        if (port > 0) {
                snprintf(u, sizeof u, "postgresql://%s:wrong%s@127.0.0.1:%u/%s", PG_PASSWORD_ROLE, PG_PASSWORD, port, db);
                r_wrong = store_open(u, &s);
                snprintf(u, sizeof u, "postgresql://%s@127.0.0.1:%u/%s?passfile=%s/no-pgpass", PG_PASSWORD_ROLE, port,
                         db, test_tmpdir());
                r_none = store_open(u, &s);
                snprintf(u, sizeof u, "postgresql://%s:%s@127.0.0.1:%u/%s", PG_PASSWORD_ROLE, PG_PASSWORD, port, db);
                r_ok = store_open(u, &s);
                if (r_ok >= 0) {
                        Tenant t;
                        r_use = store_tenant_create(s, "via-tcp", &t);
                        /* an error with the password in the URL: still scrubbed */
                        if (r_use >= 0 && store_tenant_create(s, "via-tcp", &t) != -EEXIST)
                                r_use = -EBADE;
                        s = store_close(s);
                }
        }
        capture_end(&cap);

        ASSERT_EQ(r_pct, -EINVAL);
        ASSERT_EQ(r_v6, -EINVAL);
        ASSERT_EQ(r_param, -EINVAL);
        char *log = read_file(log_path);
        bool leaked = strstr(log, PG_PASSWORD), scrubbed = strstr(log, "***"),
             told = strstr(log, "invalid percent-encoded token"), unique = strstr(log, "23505");
        free(log);
        ASSERT_FALSE(leaked);
        ASSERT_TRUE(scrubbed); /* the messages were there, scrubbed */
        ASSERT_TRUE(told);
        if (port == 0)
                test_skip("no password login tests on a server this test did not start");
        ASSERT_EQ(r_wrong, -EACCES);
        ASSERT_EQ(r_none, -EACCES);
        ASSERT_OK(r_ok);
        ASSERT_OK(r_use);
        ASSERT_TRUE(unique); /* an error through the password URL: scrubbed too */
}

TEST(postgres_sockets_are_cloexec) {
        use_backend(BACKEND_POSTGRES);
        _cleanup_(store_closep) Store *s = open_url(fresh_url());
        unsigned seen;

        ASSERT_STREQ(store_backend_name(s), "postgres");

        seen = check_cloexec_fds("socket:");
        ASSERT_TRUE(seen >= 1);
}

TEST(postgres_reconnects_after_backend_killed) {
        use_backend(BACKEND_POSTGRES);
        const char *url = fresh_url(), *db = pg.databases[pg.n_databases - 1];
        _cleanup_(store_closep) Store *s = open_url(url);
        Tenant t, got;
        char sql[256];
        int r;

        ASSERT_OK(store_tenant_create(s, "acme", &t));
        ASSERT_EQ(insert_sandbox(s, "a", t.id), 0);
        snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                 "WHERE datname = '%s' AND application_name = 'space'", db);
        pg_admin(sql);
        pg_wait_backends_gone(db);

        /* What is guaranteed: at most one call fails (-EIO), then the store has reconnected. The
         * next call works if the goodbye the killed backend left on the idle connection was read
         * before it (then it reconnects first); if the goodbye was still on its way, that call
         * finds the connection gone and fails, and the one after it reconnects. */
        r = store_tenant_get(s, t.id, &got);
        if (r < 0) {
                ASSERT_ERRNO(r, EIO);
                ASSERT_OK(store_tenant_get(s, t.id, &got));
        }
        ASSERT_STREQ(got.name, "acme");
        ASSERT_EQ(insert_sandbox(s, "b", t.id), 1); /* its slot: the next after a's */
        ASSERT_OK(store_sandbox_set_state(s, "a", SANDBOX_CREATING, SANDBOX_RUNNING, NULL));
}

TEST(postgres_reconnects_after_server_restart) {
        use_backend(BACKEND_POSTGRES);
        if (!pg.own[0])
                test_skip("SPACE_TEST_PG_URL is set: the test restarts only a server it started");
        _cleanup_(store_closep) Store *s = open_url(fresh_url());
        _cleanup_(sandbox_done) Sandbox got = {};
        Tenant t, tg;
        Event e = make_event("tn_a", "a", "sandbox.created");

        ASSERT_OK(store_tenant_create(s, "acme", &t));
        ASSERT_EQ(insert_sandbox(s, "a", t.id), 0);
        ASSERT_OK(store_event_append(s, &e));

        ASSERT_EQ(run_script("restart", pg.own, NULL, 0), 0);
        PQreset(pg.admin); /* ours went too */
        ASSERT_EQ(PQstatus(pg.admin), CONNECTION_OK);

        /* the server's goodbye is read before the next statement is sent:
         * the very first call after the restart works */
        ASSERT_OK(store_tenant_get(s, t.id, &tg));
        ASSERT_STREQ(tg.name, "acme");
        ASSERT_OK(store_sandbox_get(s, t.id, "a", &got));
        ASSERT_EQ(insert_sandbox(s, "b", t.id), 1);
        Event e2 = make_event("tn_a", "b", "sandbox.created");
        ASSERT_OK(store_event_append(s, &e2));
        ASSERT_TRUE(e2.seq > e.seq);
}

/* Runs fn(url) in a child (debug log into log_path) while the raw
 * connection c holds a lock the child needs; once the child waits for it,
 * runs release on c (then COMMIT if still in a transaction). Returns the
 * child's exit code. */
static int run_against_lock(const char *url, PGconn *c, int (*fn)(const char *url), const char *release,
                            const char *log_path) {
        int status;
        pid_t pid = fork();

        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (fd < 0 || dup2(fd, STDERR_FILENO) < 0)
                        _exit(100);
                log_set_max_level(LOG_DEBUG_);
                _exit(fn(url));
        }

        for (int waited = 0; waited < PG_WAIT_MSEC; waited += 10) {
                PGresult *res = PQexec(pg.admin, "SELECT COUNT(*) FROM pg_locks WHERE NOT granted");
                bool blocked = PQresultStatus(res) == PGRES_TUPLES_OK && !streq(PQgetvalue(res, 0, 0), "0");
                PQclear(res);
                if (blocked)
                        break;
                (void) nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
        }
        PQclear(PQexec(c, release));
        if (PQtransactionStatus(c) != PQTRANS_IDLE)
                PQclear(PQexec(c, "COMMIT"));

        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status));
        return WEXITSTATUS(status);
}

static int child_set_state(const char *url) {
        Store *s = NULL;
        int r = store_open(url, &s);
        if (r >= 0)
                r = store_sandbox_set_state(s, "x", SANDBOX_CREATING, SANDBOX_RUNNING, "child");
        store_close(s);
        return r < 0 ? 10 : 0;
}

TEST(postgres_serialization_failure_is_retried) {
        use_backend(BACKEND_POSTGRES);
        const char *url = fresh_url();
        _cleanup_(store_closep) Store *s = open_url(url);
        _cleanup_(sandbox_done) Sandbox got = {};
        char serializable[PG_URL_MAX + 160], log_path[PATH_MAX];

        insert_sandbox(s, "x", "tn_a");
        /* the child's statements run serializable: a concurrent update of its
         * row is a serialization failure (40001), which it retries */
        snprintf(serializable, sizeof serializable, "%s&options=-c%%20default_transaction_isolation%%3Dserializable",
                 url);
        snprintf(log_path, sizeof log_path, "%s/child.log", test_tmpdir());
        PGconn *c = PQconnectdb(url);
        ASSERT_EQ(PQstatus(c), CONNECTION_OK);
        PQclear(PQexec(c, "BEGIN"));
        PQclear(PQexec(c, "UPDATE sandboxes SET reason = 'raw' WHERE id = 'x'"));
        int code = run_against_lock(serializable, c, child_set_state, "COMMIT", log_path);
        PQfinish(c);

        _cleanup_free_ char *log = read_file(log_path);
        if (code != 0)
                fprintf(stderr, "%s", log);
        ASSERT_EQ(code, 0);
        ASSERT_TRUE(strstr(log, "40001") != NULL); /* it failed once, then made it */
        ASSERT_OK(store_sandbox_get(s, NULL, "x", &got));
        ASSERT_EQ(got.state, SANDBOX_RUNNING);
        ASSERT_STREQ(got.reason, "child");
}

static int child_template_delete(const char *url) {
        Store *s = NULL;
        int r = store_open(url, &s);
        if (r >= 0)
                r = store_template_delete(s, "t");
        store_close(s);
        return r < 0 ? 10 : 0;
}

TEST(postgres_deadlock_is_retried) {
        use_backend(BACKEND_POSTGRES);
        const char *url = fresh_url();
        _cleanup_(store_closep) Store *s = open_url(url);
        Template t = { .state = TEMPLATE_READY }, got;
        char log_path[PATH_MAX];

        ASSERT_OK(strscpy(t.name, sizeof t.name, "t"));
        ASSERT_OK(store_template_insert(s, &t));
        snprintf(log_path, sizeof log_path, "%s/child.log", test_tmpdir());

        /* c holds the template row; the child's delete takes the slot lock,
         * then waits for the row; c then asks for the slot lock: a deadlock.
         * c waits longer before looking for deadlocks, so the child is the
         * one aborted (40P01), and its transaction runs again. */
        PGconn *c = PQconnectdb(url);
        ASSERT_EQ(PQstatus(c), CONNECTION_OK);
        PGresult *res = PQexec(c, "SET deadlock_timeout = '30s'");
        bool superuser = PQresultStatus(res) == PGRES_COMMAND_OK;
        PQclear(res);
        if (!superuser) {
                PQfinish(c);
                test_skip("setting deadlock_timeout needs a superuser");
        }
        PQclear(PQexec(c, "BEGIN"));
        PQclear(PQexec(c, "UPDATE templates SET size_bytes = 1 WHERE name = 't'"));
        int code = run_against_lock(url, c, child_template_delete,
                                    "SELECT pg_advisory_xact_lock(" PG_LOCK_CLASS ", " PG_LOCK_SLOTS ")", log_path);
        PQfinish(c);

        _cleanup_free_ char *log = read_file(log_path);
        if (code != 0)
                fprintf(stderr, "%s", log);
        ASSERT_EQ(code, 0);
        ASSERT_TRUE(strstr(log, "40P01") != NULL);
        ASSERT_ERRNO(store_template_get(s, "t", &got), ENOENT);
}

/* The store's transactions choose READ COMMITTED themselves: under a
 * database default of REPEATABLE READ the snapshot would predate the slot
 * lock, and two inserts would pick the same slot. */
TEST(postgres_slots_unique_under_repeatable_read) {
        use_backend(BACKEND_POSTGRES);
        const char *url = fresh_url();
        char rr[PG_URL_MAX + 160];

        snprintf(rr, sizeof rr, "%s&options=-c%%20default_transaction_isolation%%3Drepeatable%%5C%%20read", url);
        Store *s = open_url(rr);
        ASSERT_EQ(raw_query_i64(rr, "SELECT (current_setting('transaction_isolation') = 'repeatable read')::int"), 1);
        store_close(s);
        slots_race(url, rr);
}

/* Where the back ends differ on purpose: a UTF8 database refuses bytes that
 * are not UTF-8 (SQLite stores them); the API hands the store UTF-8 only. */
TEST(postgres_refuses_invalid_utf8) {
        use_backend(BACKEND_POSTGRES);
        _cleanup_(store_closep) Store *s = open_url(fresh_url());
        Tenant t;

        ASSERT_ERRNO(store_tenant_create(s, "bad\xff", &t), EINVAL);
        ASSERT_OK(store_tenant_create(s, "caf\xc3\xa9", &t));
        ASSERT_OK(store_tenant_get_by_name(s, "caf\xc3\xa9", &t));
}

/* Credentials and grants */

static Credential make_cred(const char *id, const char *tenant, const char *name) {
        Credential c = { .apply = CRED_APPLY_HEADER };
        ASSERT_OK(strscpy(c.id, sizeof c.id, id));
        ASSERT_OK(strscpy(c.tenant_id, sizeof c.tenant_id, tenant));
        ASSERT_OK(strscpy(c.name, sizeof c.name, name));
        ASSERT_OK(strscpy(c.header_name, sizeof c.header_name, "Authorization"));
        ASSERT_OK(strscpy(c.header_format, sizeof c.header_format, "Bearer {value}"));
        ASSERT_OK(strscpy(c.env_name, sizeof c.env_name, "OPENAI_API_KEY"));
        ASSERT_OK(strscpy(c.nonce, sizeof c.nonce, "AAAAAAAAAAAAAAAA"));
        ASSERT_OK(strscpy(c.key_id, sizeof c.key_id, "0011223344556677"));
        c.hosts_json = (char *) "[\"api.openai.com\"]";
        c.ciphertext = (char *) "c2VhbGVk";
        return c;
}

STORE_TEST(credential_crud) {
        _cleanup_(store_closep) Store *s = open_url(url);
        Credential c = make_cred("cr_1", "tn_a", "openai"), got = {};
        Credential *list = NULL;
        size_t n = 0;
        uint64_t v = 0;

        ASSERT_TRUE(store_schema_version(s) >= 4);
        ASSERT_OK(store_credential_insert(s, &c));
        /* the name is unique per tenant, not across tenants */
        Credential dup = make_cred("cr_2", "tn_a", "openai");
        ASSERT_ERRNO(store_credential_insert(s, &dup), EEXIST);
        Credential other = make_cred("cr_3", "tn_b", "openai");
        ASSERT_OK(store_credential_insert(s, &other));

        ASSERT_OK(store_credential_get(s, "tn_a", "openai", &got));
        ASSERT_STREQ(got.id, "cr_1");
        ASSERT_STREQ(got.hosts_json, "[\"api.openai.com\"]");
        ASSERT_STREQ(got.ciphertext, "c2VhbGVk");
        ASSERT_STREQ(got.header_format, "Bearer {value}");
        ASSERT_EQ(got.apply, CRED_APPLY_HEADER);
        ASSERT_EQ(got.version, 1u);
        ASSERT_TRUE(got.created_usec > 0 && got.updated_usec == got.created_usec);
        ASSERT_EQ(got.revoked_usec, 0);
        /* another tenant's name is not found */
        Credential none;
        ASSERT_ERRNO(store_credential_get(s, "tn_c", "openai", &none), ENOENT);
        ASSERT_ERRNO(store_credential_get(s, "tn_a", "nope", &none), ENOENT);

        /* update: compare-and-set on the version */
        free(got.ciphertext);
        got.ciphertext = strdup("bmV3");
        got.revoked_usec = 5;
        got.apply = CRED_APPLY_BASIC;
        ASSERT_OK(strscpy(got.basic_user, sizeof got.basic_user, "bob"));
        ASSERT_OK(store_credential_update(s, &got, &v));
        ASSERT_EQ(v, 2u);
        ASSERT_ERRNO(store_credential_update(s, &got, NULL), ESTALE); /* still says version 1 */
        Credential gone = make_cred("cr_9", "tn_a", "gone");
        gone.version = 1;
        ASSERT_ERRNO(store_credential_update(s, &gone, NULL), ENOENT);
        credential_done(&got);
        ASSERT_OK(store_credential_get(s, "tn_a", "openai", &got));
        ASSERT_STREQ(got.ciphertext, "bmV3");
        ASSERT_EQ(got.revoked_usec, 5);
        ASSERT_EQ(got.version, 2u);
        ASSERT_EQ(got.apply, CRED_APPLY_BASIC);
        ASSERT_STREQ(got.basic_user, "bob");
        credential_done(&got);

        Credential second = make_cred("cr_4", "tn_a", "anthropic");
        ASSERT_OK(store_credential_insert(s, &second));
        ASSERT_OK(store_credential_list(s, "tn_a", &list, &n));
        ASSERT_EQ(n, 2u);
        ASSERT_STREQ(list[0].name, "anthropic");
        ASSERT_STREQ(list[1].name, "openai");
        credential_array_free(list, n);

        ASSERT_OK(store_credential_delete(s, "tn_a", "openai"));
        ASSERT_ERRNO(store_credential_delete(s, "tn_a", "openai"), ENOENT);
        ASSERT_ERRNO(store_credential_delete(s, "tn_c", "anthropic"), ENOENT);
        ASSERT_OK(store_credential_get(s, "tn_b", "openai", &got));
        credential_done(&got);
}

STORE_TEST(credential_grants) {
        _cleanup_(store_closep) Store *s = open_url(url);
        Credential a = make_cred("cr_a", "tn_a", "a"), b = make_cred("cr_b", "tn_a", "b");
        Credential *list = NULL;
        size_t n = 0;

        ASSERT_OK(store_credential_insert(s, &a));
        ASSERT_OK(store_credential_insert(s, &b));
        ASSERT_OK(store_grant_insert(s, "tn_a", "sb_1", "cr_b"));
        ASSERT_OK(store_grant_insert(s, "tn_a", "sb_1", "cr_a"));
        ASSERT_ERRNO(store_grant_insert(s, "tn_a", "sb_1", "cr_a"), EEXIST);
        ASSERT_OK(store_grant_insert(s, "tn_a", "sb_2", "cr_a"));
        /* a grant recorded under another tenant than the credential's gives nothing */
        ASSERT_OK(store_grant_insert(s, "tn_x", "sb_3", "cr_a"));

        ASSERT_OK(store_grant_list(s, "sb_1", &list, &n));
        ASSERT_EQ(n, 2u);
        ASSERT_STREQ(list[0].name, "a");
        ASSERT_STREQ(list[1].name, "b");
        ASSERT_STREQ(list[1].ciphertext, "c2VhbGVk");
        ASSERT_FALSE(list[0].grant_scoped);
        credential_array_free(list, n);
        ASSERT_OK(store_grant_list(s, "sb_3", &list, &n));
        ASSERT_EQ(n, 0u);
        credential_array_free(list, n);

        /* a scoped grant: its hosts and header instead of the credential's, as a header */
        ASSERT_ERRNO(store_grant_insert_scoped(s, "tn_a", "sb_4", "cr_b", "[\"x.example\"]", NULL, "{value}"), EINVAL);
        ASSERT_ERRNO(store_grant_insert_scoped(s, "tn_a", "sb_4", "cr_b", "x", "X-Key", "{value}"), EINVAL);
        ASSERT_OK(store_grant_insert_scoped(s, "tn_a", "sb_4", "cr_b", "[\"x.example\"]", "X-Key", "k={value}"));
        ASSERT_OK(store_grant_insert_scoped(s, "tn_a", "sb_4", "cr_a", NULL, "ignored", "ignored"));
        ASSERT_OK(store_grant_list(s, "sb_4", &list, &n));
        ASSERT_EQ(n, 2u);
        ASSERT_STREQ(list[0].name, "a");
        ASSERT_FALSE(list[0].grant_scoped);
        ASSERT_STREQ(list[0].hosts_json, a.hosts_json);
        ASSERT_STREQ(list[0].header_name, a.header_name);
        ASSERT_STREQ(list[1].name, "b");
        ASSERT_TRUE(list[1].grant_scoped);
        ASSERT_STREQ(list[1].hosts_json, "[\"x.example\"]");
        ASSERT_EQ(list[1].apply, CRED_APPLY_HEADER);
        ASSERT_STREQ(list[1].header_name, "X-Key");
        ASSERT_STREQ(list[1].header_format, "k={value}");
        ASSERT_STREQ(list[1].basic_user, "");
        credential_array_free(list, n);
        /* the credential itself is as it was */
        Credential got = {};
        ASSERT_OK(store_credential_get(s, "tn_a", "b", &got));
        ASSERT_STREQ(got.hosts_json, b.hosts_json);
        ASSERT_FALSE(got.grant_scoped);
        credential_done(&got);

        ASSERT_OK(store_grant_delete(s, "sb_1", "cr_b"));
        ASSERT_ERRNO(store_grant_delete(s, "sb_1", "cr_b"), ENOENT);
        ASSERT_OK(store_grant_list(s, "sb_1", &list, &n));
        ASSERT_EQ(n, 1u);
        credential_array_free(list, n);

        /* deleting the credential drops its grants; a new one of the same name is not granted */
        ASSERT_OK(store_credential_delete(s, "tn_a", "a"));
        ASSERT_EQ(raw_query_i64(url, "SELECT COUNT(*) FROM credential_grants WHERE credential_id = 'cr_a'"), 0);
        Credential again = make_cred("cr_a2", "tn_a", "a");
        ASSERT_OK(store_credential_insert(s, &again));
        ASSERT_OK(store_grant_list(s, "sb_2", &list, &n));
        ASSERT_EQ(n, 0u);
        credential_array_free(list, n);
}

/* A master key rotation's transaction: every row through the callback, the
 * settings written, all or nothing. */
typedef struct ResealTest {
        int fail_begin;         /* < 0: begin fails so */
        size_t fail_at;         /* row index (1-based) that fails; 0 = none */
        bool break_row;         /* leave an invalid row (empty key_id) */
        size_t calls;
        char order[3][16];
        char seen_fp[64];
        bool seen_prev_null;
        int fail_end;           /* < 0: end fails so */
        bool bad_event;         /* end leaves an event without a type */
        char event_data[64];
} ResealTest;

/* The audit record a rotation commits with its rows. */
static int reseal_end(uint64_t changed, uint64_t total, Event *ret, void *userdata) {
        ResealTest *t = userdata;

        if (t->fail_end < 0)
                return t->fail_end;
        snprintf(ret->type, sizeof ret->type, "%s", t->bad_event ? "" : "credential.master_key_rotated");
        snprintf(ret->actor, sizeof ret->actor, "rotate-master-key");
        snprintf(t->event_data, sizeof t->event_data, "{\"resealed\":%" PRIu64 ",\"credentials\":%" PRIu64 "}",
                 changed, total);
        ret->data_json = t->event_data;
        return 0;
}

static size_t rotated_events(Store *s, Event **ret) {
        Event *list = NULL;
        size_t n = 0;

        ASSERT_OK(store_event_list(s, &(EventFilter){ .type = "credential.master_key_rotated" }, &list, &n));
        if (ret)
                *ret = list;
        else
                event_array_free(list, n);
        return n;
}

static int reseal_begin(char *const *current, void *userdata) {
        ResealTest *t = userdata;

        t->calls = 0;
        snprintf(t->seen_fp, sizeof t->seen_fp, "%s", current[0] ? current[0] : "(null)");
        t->seen_prev_null = current[1] == NULL;
        return t->fail_begin;
}

static int reseal_row(Credential *c, void *userdata) {
        ResealTest *t = userdata;

        if (t->calls < ELEMENTSOF(t->order))
                snprintf(t->order[t->calls], sizeof t->order[0], "%s", c->name);
        t->calls++;
        if (t->fail_at == t->calls)
                return -EBADMSG;
        if (streq(c->name, "z"))
                return 0; /* left as it is */
        free(c->ciphertext);
        c->ciphertext = strdup("bmV3");
        ASSERT_NOT_NULL(c->ciphertext);
        snprintf(c->key_id, sizeof c->key_id, "%s", t->break_row ? "" : "8899aabbccddeeff");
        snprintf(c->nonce, sizeof c->nonce, "BBBBBBBBBBBBBBBB");
        return 1;
}

static void assert_unresealed(Store *s) {
        static const char *const rows[][2] = { { "tn_a", "x" }, { "tn_b", "y" }, { "tn_a", "z" } };
        char v[STORE_CLUSTER_SETTING_MAX];

        for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
                Credential got = {};
                ASSERT_OK(store_credential_get(s, rows[i][0], rows[i][1], &got));
                ASSERT_STREQ(got.ciphertext, "c2VhbGVk");
                ASSERT_STREQ(got.key_id, "0011223344556677");
                ASSERT_EQ(got.version, 1u);
                credential_done(&got);
        }
        ASSERT_OK(store_cluster_setting_get(s, "master_key_fingerprint", v));
        ASSERT_STREQ(v, "fpold");
        ASSERT_ERRNO(store_cluster_setting_get(s, "master_key_previous_fingerprint", v), ENOENT);
}

STORE_TEST(credentials_reseal_all_or_nothing) {
        _cleanup_(store_closep) Store *s = open_url(url);
        Credential x = make_cred("cr_1", "tn_a", "x"), y = make_cred("cr_2", "tn_b", "y"), z = make_cred("cr_3", "tn_a", "z");
        const StoreSetting settings[] = { { "master_key_fingerprint", "fpnew" },
                                          { "master_key_previous_fingerprint", "fpold" } };
        ResealTest t = {};
        StoreReseal rs = { .begin = reseal_begin, .row = reseal_row, .settings = settings, .n_settings = 2,
                           .end = reseal_end, .userdata = &t };
        char v[STORE_CLUSTER_SETTING_MAX];
        uint64_t changed = 99, total = 99;
        Credential got = {};
        Event *evs = NULL;

        ASSERT_OK(store_credential_insert(s, &x));
        ASSERT_OK(store_credential_insert(s, &y));
        ASSERT_OK(store_credential_insert(s, &z));
        ASSERT_ERRNO(store_cluster_setting_get(s, "master_key_fingerprint", v), ENOENT);
        ASSERT_OK(store_cluster_setting_claim(s, "master_key_fingerprint", "fpold", v));
        ASSERT_OK(store_cluster_setting_get(s, "master_key_fingerprint", v));
        ASSERT_STREQ(v, "fpold");

        /* a failure at the second row: the first one's re-seal is rolled back */
        t.fail_at = 2;
        ASSERT_ERRNO(store_credentials_reseal(s, &rs, &changed, &total), EBADMSG);
        ASSERT_EQ(changed, 99u);
        assert_unresealed(s);
        /* begin refuses: nothing read, nothing written */
        t = (ResealTest){ .fail_begin = -ESTALE };
        ASSERT_ERRNO(store_credentials_reseal(s, &rs, NULL, NULL), ESTALE);
        ASSERT_EQ(t.calls, 0u);
        assert_unresealed(s);
        /* a row left invalid is refused by the store, the rest rolled back */
        t = (ResealTest){ .break_row = true };
        ASSERT_ERRNO(store_credentials_reseal(s, &rs, NULL, NULL), EINVAL);
        assert_unresealed(s);
        /* bad settings */
        rs.n_settings = 0;
        ASSERT_ERRNO(store_credentials_reseal(s, &rs, NULL, NULL), EINVAL);
        rs.n_settings = STORE_RESEAL_SETTINGS_MAX + 1;
        ASSERT_ERRNO(store_credentials_reseal(s, &rs, NULL, NULL), EINVAL);
        rs.n_settings = 2;
        /* the event cannot be made, or is not valid: the rows and settings are rolled back with it */
        t = (ResealTest){ .fail_end = -ENOMEM };
        ASSERT_ERRNO(store_credentials_reseal(s, &rs, NULL, NULL), ENOMEM);
        assert_unresealed(s);
        t = (ResealTest){ .bad_event = true };
        ASSERT_ERRNO(store_credentials_reseal(s, &rs, NULL, NULL), EINVAL);
        assert_unresealed(s);
        ASSERT_EQ(rotated_events(s, NULL), 0u); /* none of the failures left one */

        t = (ResealTest){};
        ASSERT_OK(store_credentials_reseal(s, &rs, &changed, &total));
        ASSERT_EQ(changed, 2u);
        ASSERT_EQ(total, 3u);
        ASSERT_EQ(rotated_events(s, &evs), 1u); /* committed with the rows: system-wide, the counts */
        ASSERT_STREQ(evs[0].tenant_id, "");
        ASSERT_STREQ(evs[0].sandbox_id, "");
        ASSERT_STREQ(evs[0].actor, "rotate-master-key");
        ASSERT_STREQ(evs[0].data_json, "{\"resealed\":2,\"credentials\":3}");
        ASSERT_TRUE(evs[0].time_usec > 0);
        event_array_free(evs, 1);
        ASSERT_STREQ(t.seen_fp, "fpold");
        ASSERT_TRUE(t.seen_prev_null);
        /* every tenant's rows, by tenant and name */
        ASSERT_STREQ(t.order[0], "x");
        ASSERT_STREQ(t.order[1], "z");
        ASSERT_STREQ(t.order[2], "y");
        ASSERT_OK(store_credential_get(s, "tn_b", "y", &got));
        ASSERT_STREQ(got.ciphertext, "bmV3");
        ASSERT_STREQ(got.key_id, "8899aabbccddeeff");
        ASSERT_STREQ(got.nonce, "BBBBBBBBBBBBBBBB");
        ASSERT_EQ(got.version, 2u); /* an update that read version 1 now gets -ESTALE */
        y.version = 1;
        ASSERT_ERRNO(store_credential_update(s, &y, NULL), ESTALE);
        credential_done(&got);
        ASSERT_OK(store_credential_get(s, "tn_a", "z", &got));
        ASSERT_STREQ(got.ciphertext, "c2VhbGVk");
        ASSERT_EQ(got.version, 1u);
        credential_done(&got);
        ASSERT_OK(store_cluster_setting_get(s, "master_key_fingerprint", v));
        ASSERT_STREQ(v, "fpnew");
        ASSERT_OK(store_cluster_setting_get(s, "master_key_previous_fingerprint", v));
        ASSERT_STREQ(v, "fpold");

        /* again (a second rotation): the settings are replaced, not duplicated */
        const StoreSetting again[] = { { "master_key_fingerprint", "fpthird" },
                                       { "master_key_previous_fingerprint", "fpnew" } };
        rs.settings = again;
        t = (ResealTest){};
        ASSERT_OK(store_credentials_reseal(s, &rs, &changed, &total));
        ASSERT_STREQ(t.seen_fp, "fpnew");
        ASSERT_FALSE(t.seen_prev_null);
        ASSERT_OK(store_cluster_setting_get(s, "master_key_fingerprint", v));
        ASSERT_STREQ(v, "fpthird");
        ASSERT_EQ(raw_query_i64(url, "SELECT COUNT(*) FROM cluster_settings WHERE name LIKE 'master_key%'"), 2);
        ASSERT_OK(store_credential_get(s, "tn_a", "x", &got));
        ASSERT_EQ(got.version, 3u);
        credential_done(&got);
}

/* After a rotation recorded the master key's id, a credential sealed under
 * another key (a rotation committed while it was being sealed) is refused. */
STORE_TEST(credential_insert_only_under_the_rotated_key) {
        _cleanup_(store_closep) Store *s = open_url(url);
        Credential a = make_cred("cr_1", "tn_a", "a"), b = make_cred("cr_2", "tn_a", "b");
        char v[STORE_CLUSTER_SETTING_MAX];
        Credential got = {};

        ASSERT_OK(store_credential_insert(s, &a)); /* no key recorded yet: any */
        ASSERT_OK(store_cluster_setting_claim(s, "master_key_id", "8899aabbccddeeff", v));
        ASSERT_ERRNO(store_credential_insert(s, &b), EKEYEXPIRED);
        ASSERT_ERRNO(store_credential_get(s, "tn_a", "b", &got), ENOENT);
        ASSERT_OK(strscpy(b.key_id, sizeof b.key_id, "8899aabbccddeeff"));
        ASSERT_OK(store_credential_insert(s, &b));
        ASSERT_OK(store_credential_get(s, "tn_a", "b", &got));
        ASSERT_STREQ(got.key_id, "8899aabbccddeeff");
        ASSERT_EQ(got.version, 1u);
        ASSERT_EQ(got.expires_usec, 0);
        credential_done(&got);
        ASSERT_ERRNO(store_credential_insert(s, &b), EEXIST);
}

STORE_TEST(credential_bad_arguments) {
        _cleanup_(store_closep) Store *s = open_url(url);
        Credential c = make_cred("cr_1", "tn_a", "x");

        c.ciphertext = NULL;
        ASSERT_ERRNO(store_credential_insert(s, &c), EINVAL);
        c = make_cred("cr_1", "tn_a", "");
        ASSERT_ERRNO(store_credential_insert(s, &c), EINVAL);
        c = make_cred("cr_1", "tn_a", "x");
        c.apply = _CRED_APPLY_MAX;
        ASSERT_ERRNO(store_credential_insert(s, &c), EINVAL);
        c = make_cred("cr_1", "tn_a", "x");
        c.version = 0;
        ASSERT_ERRNO(store_credential_update(s, &c, NULL), EINVAL);
        ASSERT_ERRNO(store_grant_insert(s, "tn_a", "", "cr_1"), EINVAL);
        for (int i = 0; i < _CRED_APPLY_MAX; i++)
                ASSERT_EQ(cred_apply_from_string(cred_apply_to_string(i)), i);
        ASSERT_ERRNO(cred_apply_from_string("bearer"), EINVAL);
}

/* ---- cluster: workers and leadership ---- */

static void worker_init(WorkerNode *w, const char *name, const char *instance) {
        *w = (WorkerNode){ .cpu_millis = 4000, .memory_mb = 8192, .disk_mb = 65536 };
        ASSERT_OK(strscpy(w->name, sizeof w->name, name));
        ASSERT_OK(strscpy(w->instance, sizeof w->instance, instance));
        ASSERT_OK(strscpy(w->address, sizeof w->address, "10.0.0.1:7071"));
        ASSERT_OK(strscpy(w->runtimes, sizeof w->runtimes, "ns"));
        ASSERT_OK(strscpy(w->templates, sizeof w->templates, "base"));
}

STORE_TEST(migration_missing_below_the_highest_is_applied) {
        Store *s = open_url(url);
        s = store_close(s);
        /* as if 0003 had landed after 0006 (branches in flight): not recorded,
         * its column absent, while 5 is; the runner must still apply it */
        ASSERT_TRUE(latest_version() >= 6);
        raw_sql(url, "ALTER TABLE sandboxes DROP COLUMN network_json");
        raw_sql(url, "DELETE FROM schema_migrations WHERE version = 3");
        s = open_url(url);
        ASSERT_EQ(raw_query_i64(url, "SELECT COUNT(*) FROM schema_migrations WHERE version = 3"), 1);
        ASSERT_EQ(raw_query_i64(url, "SELECT COUNT(*) FROM sandboxes WHERE network_json IS NULL"), 0);
        WorkerNode w;
        worker_init(&w, "w1", "i1");
        ASSERT_OK(store_worker_register(s, &w, now_usec() - 1000000));
        store_close(s);
}

STORE_TEST(workers_register_heartbeat_duplicate_lost) {
        _cleanup_(store_closep) Store *s = open_url(url);
        WorkerNode w, got, *list = NULL;
        SandboxRef *refs = NULL;
        size_t n = 0;
        Sandbox sb;
        int64_t t0;

        ASSERT_OK(store_clock(s, &t0)); /* heartbeats are stamped by the store's clock */
        ASSERT_OK(store_tenant_create(s, "t", &(Tenant){}));
        worker_init(&w, "w1", "inst-a");
        ASSERT_OK(store_worker_register(s, &w, t0 - 10000000));
        ASSERT_OK(store_worker_get(s, "w1", &got));
        ASSERT_EQ(got.state, WORKER_LIVE);
        ASSERT_STREQ(got.address, "10.0.0.1:7071");
        ASSERT_EQ(got.cpu_millis, 4000U);
        ASSERT_EQ(got.memory_mb, 8192U);
        ASSERT_STREQ(got.templates, "base");
        ASSERT_TRUE(got.heartbeat_usec >= t0);
        ASSERT_EQ(got.sandboxes, 0U);

        /* the same name from another instance while live and fresh: refused */
        worker_init(&w, "w1", "inst-b");
        ASSERT_ERRNO(store_worker_register(s, &w, t0 - 10000000), EEXIST);
        /* the same instance re-registers fine */
        worker_init(&w, "w1", "inst-a");
        ASSERT_OK(store_worker_register(s, &w, t0 - 10000000));
        /* a stale row is taken over */
        worker_init(&w, "w1", "inst-b");
        ASSERT_OK(store_worker_register(s, &w, now_usec() + 1000000));
        ASSERT_OK(store_worker_get(s, "w1", &got));
        ASSERT_STREQ(got.instance, "inst-b");
        /* the old instance's heartbeat no longer counts */
        ASSERT_ERRNO(store_worker_heartbeat(s, "w1", "inst-a", "base"), ESTALE);
        ASSERT_ERRNO(store_worker_heartbeat(s, "nope", "inst-a", "base"), ENOENT);
        ASSERT_OK(store_worker_heartbeat(s, "w1", "inst-b", "base,python"));
        ASSERT_OK(store_worker_get(s, "w1", &got));
        ASSERT_STREQ(got.templates, "base,python");
        ASSERT_ERRNO(store_worker_get(s, "nope", &got), ENOENT);

        /* usage of its sandboxes */
        Tenant t;
        ASSERT_OK(store_tenant_get_by_name(s, "t", &t));
        sandbox_init(&sb, "sb_1", t.id, "base");
        ASSERT_OK(strscpy(sb.worker, sizeof sb.worker, "w1"));
        ASSERT_OK(store_sandbox_insert(s, &sb));
        sandbox_init(&sb, "sb_2", t.id, "base");
        ASSERT_OK(strscpy(sb.worker, sizeof sb.worker, "w1"));
        ASSERT_OK(store_sandbox_insert(s, &sb));
        ASSERT_OK(store_sandbox_set_state(s, "sb_2", -1, SANDBOX_DELETED, ""));
        worker_init(&w, "w2", "inst-c");
        ASSERT_OK(store_worker_register(s, &w, t0));
        ASSERT_OK(store_worker_list(s, &list, &n));
        ASSERT_EQ(n, 2U);
        ASSERT_STREQ(list[0].name, "w1");
        ASSERT_EQ(list[0].sandboxes, 1U);
        ASSERT_EQ(list[0].used_cpu_millis, 1000U);
        ASSERT_EQ(list[0].used_memory_mb, 512U);
        ASSERT_EQ(list[1].sandboxes, 0U);
        free(list);

        /* lost: only when stale; its live sandboxes become lost, once */
        ASSERT_ERRNO(store_worker_mark_lost(s, "w1", t0 - 1, "no heartbeat", &refs, &n), ESTALE);
        ASSERT_OK(store_worker_mark_lost(s, "w1", now_usec() + 1000000, "no heartbeat", &refs, &n));
        ASSERT_EQ(n, 1U);
        ASSERT_STREQ(refs[0].id, "sb_1");
        ASSERT_STREQ(refs[0].tenant_id, t.id);
        free(refs);
        ASSERT_OK(store_sandbox_get(s, NULL, "sb_1", &sb));
        ASSERT_EQ(sb.state, SANDBOX_UNREACHABLE);
        ASSERT_STREQ(sb.reason, "no heartbeat");
        sandbox_done(&sb);
        ASSERT_OK(store_sandbox_get(s, NULL, "sb_2", &sb));
        ASSERT_EQ(sb.state, SANDBOX_DELETED);
        sandbox_done(&sb);
        ASSERT_ERRNO(store_worker_mark_lost(s, "w1", now_usec() + 1000000, "again", &refs, &n), ESTALE);
        ASSERT_OK(store_worker_get(s, "w1", &got));
        ASSERT_EQ(got.state, WORKER_SUSPECT);
        ASSERT_ERRNO(store_worker_heartbeat(s, "w1", "inst-b", ""), ESTALE);
        /* a lost worker may come back (any instance) */
        worker_init(&w, "w1", "inst-d");
        ASSERT_OK(store_worker_register(s, &w, t0));
        ASSERT_OK(store_worker_stop(s, "w1", "inst-d"));
        ASSERT_OK(store_worker_get(s, "w1", &got));
        ASSERT_EQ(got.state, WORKER_STOPPED);
        ASSERT_ERRNO(store_worker_stop(s, "w1", "inst-d"), ESTALE);

        /* bad input */
        worker_init(&w, "", "i");
        ASSERT_ERRNO(store_worker_register(s, &w, t0), EINVAL);
        worker_init(&w, "w3", "i");
        w.address[0] = 0;
        ASSERT_ERRNO(store_worker_register(s, &w, t0), EINVAL);
        ASSERT_ERRNO(store_worker_heartbeat(s, NULL, "i", ""), EINVAL);
        ASSERT_ERRNO(store_worker_list(s, NULL, &n), EINVAL);
}

STORE_TEST(checkpoint_copies) {
        _cleanup_(store_closep) Store *s = open_url(url);
        CheckpointCopy c = { .available = false }, *list = NULL;
        size_t n = 0;

        (void) strscpy(c.checkpoint_id, sizeof c.checkpoint_id, "ck_1");
        (void) strscpy(c.sandbox_id, sizeof c.sandbox_id, "sb_1");
        (void) strscpy(c.worker, sizeof c.worker, "w2");
        ASSERT_OK(store_checkpoint_copy_set(s, &c)); /* receiving */
        (void) strscpy(c.worker, sizeof c.worker, "w1");
        c.available = true; /* the origin's */
        ASSERT_OK(store_checkpoint_copy_set(s, &c));
        (void) strscpy(c.checkpoint_id, sizeof c.checkpoint_id, "ck_2");
        ASSERT_OK(store_checkpoint_copy_set(s, &c));

        ASSERT_OK(store_checkpoint_copy_list(s, "ck_1", &list, &n));
        ASSERT_EQ(n, 2U);
        ASSERT_STREQ(list[0].worker, "w1");
        ASSERT_TRUE(list[0].available);
        ASSERT_STREQ(list[1].worker, "w2");
        ASSERT_FALSE(list[1].available);
        ASSERT_STREQ(list[1].sandbox_id, "sb_1");
        ASSERT_TRUE(list[1].updated_usec > 0);
        list = mfree(list);

        /* verified: the same row, available, with the stream's checksum and size */
        (void) strscpy(c.checkpoint_id, sizeof c.checkpoint_id, "ck_1");
        (void) strscpy(c.worker, sizeof c.worker, "w2");
        (void) strscpy(c.sha256, sizeof c.sha256, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
        c.size_bytes = 12345;
        ASSERT_OK(store_checkpoint_copy_set(s, &c));
        ASSERT_OK(store_checkpoint_copy_list(s, NULL, &list, &n));
        ASSERT_EQ(n, 3U);
        ASSERT_STREQ(list[1].checkpoint_id, "ck_1");
        ASSERT_STREQ(list[1].worker, "w2");
        ASSERT_TRUE(list[1].available);
        ASSERT_EQ(list[1].size_bytes, 12345U);
        ASSERT_STREQ(list[1].sha256, c.sha256);
        list = mfree(list);

        ASSERT_OK(store_checkpoint_copy_delete(s, "ck_1", "w2"));
        ASSERT_ERRNO(store_checkpoint_copy_delete(s, "ck_1", "w2"), ENOENT);
        ASSERT_OK(store_checkpoint_copy_list(s, "ck_1", &list, &n));
        ASSERT_EQ(n, 1U);
        list = mfree(list);
        ASSERT_OK(store_checkpoint_copy_list(s, "nothing", &list, &n));
        ASSERT_EQ(n, 0U);
        list = mfree(list);

        /* bad input: a checksum that is not 64 hex digits, missing names */
        (void) strscpy(c.sha256, sizeof c.sha256, "xyz");
        ASSERT_ERRNO(store_checkpoint_copy_set(s, &c), EINVAL);
        c.sha256[0] = 0;
        c.worker[0] = 0;
        ASSERT_ERRNO(store_checkpoint_copy_set(s, &c), EINVAL);
        ASSERT_ERRNO(store_checkpoint_copy_set(s, NULL), EINVAL);
        ASSERT_ERRNO(store_checkpoint_copy_delete(s, "ck_1", NULL), EINVAL);
        ASSERT_ERRNO(store_checkpoint_copy_list(s, NULL, NULL, &n), EINVAL);
}

STORE_TEST(leader_one_at_a_time) {
        Store *a = open_url(url), *b = open_url(url);
        bool la = false, lb = true;

        ASSERT_OK(store_leader_try(a, &la));
        ASSERT_TRUE(la);
        ASSERT_OK(store_leader_try(a, &la)); /* still */
        ASSERT_TRUE(la);
        ASSERT_OK(store_leader_try(b, &lb));
        if (backend == BACKEND_SQLITE) {
                ASSERT_TRUE(lb); /* one host: every handle leads */
        } else {
                ASSERT_FALSE(lb);
                a = store_close(a); /* the leader's session ends ... */
                /* ... and its backend lets go of the lock once it sees that */
                for (int i = 0; i < 500 && !lb; i++) {
                        ASSERT_OK(store_leader_try(b, &lb));
                        if (!lb)
                                (void) nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
                }
                ASSERT_TRUE(lb);
                ASSERT_OK(store_leader_try(b, &lb)); /* and keeps it */
                ASSERT_TRUE(lb);
        }
        store_close(a);
        store_close(b);
}

static void sleep_msec(unsigned ms) {
        (void) nanosleep(&(struct timespec){ .tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000 }, NULL);
}

STORE_TEST(store_clock_is_the_heartbeats_clock) {
        _cleanup_(store_closep) Store *s = open_url(url);
        WorkerNode w, got;
        int64_t before, after;

        ASSERT_OK(store_clock(s, &before));
        ASSERT_TRUE(before > now_usec() - 5000000 && before < now_usec() + 5000000); /* one host here */
        worker_init(&w, "w1", "i1");
        ASSERT_OK(store_worker_register(s, &w, before - 1000000));
        ASSERT_OK(store_worker_heartbeat(s, "w1", "i1", "base"));
        ASSERT_OK(store_clock(s, &after));
        ASSERT_OK(store_worker_get(s, "w1", &got));
        ASSERT_TRUE(got.heartbeat_usec >= before && got.heartbeat_usec <= after);
        /* a stamp from a host whose clock is hours off would have been judged by that clock: the
         * store's is the one; the worker's registered_usec is its own (informational) */
        raw_sql(url, "UPDATE workers SET heartbeat_usec = heartbeat_usec - 3600000000");
        ASSERT_OK(store_worker_heartbeat(s, "w1", "i1", "base"));
        ASSERT_OK(store_worker_get(s, "w1", &got));
        ASSERT_TRUE(got.heartbeat_usec >= after);
        ASSERT_ERRNO(store_clock(s, NULL), EINVAL);
        ASSERT_TRUE(store_now_usec(NULL) > 0);
}

STORE_TEST(controller_lease_takeover_and_fencing) {
        _cleanup_(store_closep) Store *a = open_url(url);
        _cleanup_(store_closep) Store *b = open_url(url);
        ControllerLease l;
        int64_t ta = 0, tb = 0, t = 0;
        Tenant tn;

        ASSERT_OK(store_lease_get(a, &l));
        ASSERT_EQ(l.token, 0);
        ASSERT_TRUE(l.expires_usec <= l.now_usec); /* free */
        ASSERT_OK(store_lease_take(a, "ctl-a", 300000, &ta));
        ASSERT_EQ(ta, 1);
        /* held: nobody takes it, not even its holder again (a renewal keeps the token) */
        ASSERT_ERRNO(store_lease_take(b, "ctl-b", 300000, &t), EBUSY);
        ASSERT_ERRNO(store_lease_take(a, "ctl-a", 300000, &t), EBUSY);
        ASSERT_OK(store_lease_renew(a, "ctl-a", ta, 300000));
        ASSERT_ERRNO(store_lease_renew(b, "ctl-b", ta, 300000), ESTALE); /* not its holder */
        ASSERT_ERRNO(store_lease_renew(a, "ctl-a", ta + 1, 300000), ESTALE); /* not its token */
        ASSERT_OK(store_lease_get(b, &l));
        ASSERT_STREQ(l.holder, "ctl-a");
        ASSERT_EQ(l.token, ta);
        ASSERT_TRUE(l.expires_usec > l.now_usec && l.expires_usec <= l.now_usec + 300000);

        /* the leader's handle, fenced by its token, writes while the lease runs */
        ASSERT_OK(store_fence(a, ta));
        ASSERT_OK(store_tenant_create(a, "t1", &tn));

        /* it stalls past its lease: the other takes over, with the next token */
        sleep_msec(350);
        ASSERT_OK(store_lease_take(b, "ctl-b", 10000000, &tb));
        ASSERT_EQ(tb, ta + 1);
        /* the old leader wakes: its renewal is refused, and its handle writes nothing */
        ASSERT_ERRNO(store_lease_renew(a, "ctl-a", ta, 300000), ESTALE);
        ASSERT_ERRNO(store_tenant_create(a, "t2", &tn), ESTALE);
        ASSERT_ERRNO(store_tenant_get_by_name(b, "t2", &tn), ENOENT);
        ASSERT_OK(store_tenant_get_by_name(a, "t1", &tn)); /* reads still work */
        /* an expired lease fences even when nobody took over */
        ASSERT_OK(store_fence(b, tb));
        ASSERT_OK(store_tenant_create(b, "t3", &tn));
        /* an unfenced handle (an API server's) is not concerned */
        ASSERT_OK(store_fence(a, 0));
        ASSERT_OK(store_tenant_create(a, "t4", &tn));

        if (backend == BACKEND_POSTGRES) {
                /* a fenced handle that reconnects is fenced again before any statement */
                const char *db = pg.databases[pg.n_databases - 1];
                char sql[256];
                int r;

                ASSERT_OK(store_fence(a, ta));
                snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = '%s' AND application_name = 'space' AND pid <> %ld", db,
                         (long) 0);
                pg_admin(sql);
                pg_wait_backends_gone(db);
                r = store_tenant_create(a, "t5", &tn);
                if (r == -EIO)
                        r = store_tenant_create(a, "t5", &tn);
                ASSERT_ERRNO(r, ESTALE);
                ASSERT_ERRNO(store_tenant_get_by_name(a, "t5", &tn), ENOENT);
                /* b reconnects too, and is still the leader */
                r = store_tenant_create(b, "t6", &tn);
                if (r == -EIO)
                        r = store_tenant_create(b, "t6", &tn);
                ASSERT_OK(r);
        }

        /* a graceful stop releases it: the standby takes over at once, b is fenced */
        ASSERT_OK(store_lease_release(b, "ctl-b", tb));
        ASSERT_OK(store_lease_take(a, "ctl-a", 10000000, &ta));
        ASSERT_EQ(ta, tb + 1);
        ASSERT_ERRNO(store_lease_release(b, "ctl-b", tb), ESTALE);
        ASSERT_ERRNO(store_tenant_create(b, "t7", &tn), ESTALE);
        ASSERT_OK(store_lease_get(b, &l));
        ASSERT_STREQ(l.holder, "ctl-a");
        ASSERT_EQ(l.token, ta);

        /* bad input */
        ASSERT_ERRNO(store_lease_take(a, "", 1, &t), EINVAL);
        ASSERT_ERRNO(store_lease_take(a, NULL, 1, &t), EINVAL);
        ASSERT_ERRNO(store_lease_take(a, "x", 0, &t), EINVAL);
        ASSERT_ERRNO(store_lease_take(a, "x", UINT64_MAX, &t), ERANGE);
        ASSERT_ERRNO(store_lease_take(a, "x", 1, NULL), EINVAL);
        ASSERT_ERRNO(store_lease_renew(a, "ctl-a", 0, 1), EINVAL);
        ASSERT_ERRNO(store_lease_renew(a, "ctl-a", ta, 0), EINVAL);
        ASSERT_ERRNO(store_lease_release(a, "ctl-a", -1), EINVAL);
        ASSERT_ERRNO(store_lease_get(a, NULL), EINVAL);
        ASSERT_ERRNO(store_fence(a, -1), EINVAL);
        char big[STORE_NAME_MAX + 1];
        memset(big, 'h', sizeof big - 1);
        big[sizeof big - 1] = 0;
        ASSERT_ERRNO(store_lease_take(a, big, 1, &t), ENAMETOOLONG);
}

STORE_TEST(cluster_setting_first_claim_wins) {
        _cleanup_(store_closep) Store *a = open_url(url);
        _cleanup_(store_closep) Store *b = open_url(url);
        char got[STORE_CLUSTER_SETTING_MAX];

        ASSERT_OK(store_cluster_setting_claim(a, "token_fingerprint", "aaaa", got));
        ASSERT_STREQ(got, "aaaa");
        /* another process with another value: the first one stays, and is told */
        ASSERT_OK(store_cluster_setting_claim(b, "token_fingerprint", "bbbb", got));
        ASSERT_STREQ(got, "aaaa");
        ASSERT_OK(store_cluster_setting_claim(a, "token_fingerprint", "aaaa", got));
        ASSERT_STREQ(got, "aaaa");
        ASSERT_OK(store_cluster_setting_claim(b, "other", "x", got));
        ASSERT_STREQ(got, "x");
        /* bad input */
        ASSERT_ERRNO(store_cluster_setting_claim(a, "", "x", got), EINVAL);
        ASSERT_ERRNO(store_cluster_setting_claim(a, "n", "", got), EINVAL);
        char big[STORE_CLUSTER_SETTING_MAX + 1];
        memset(big, 'v', sizeof big - 1);
        big[sizeof big - 1] = 0;
        ASSERT_ERRNO(store_cluster_setting_claim(a, "n", big, got), ENAMETOOLONG);
}

STORE_TEST(timing_counts_round_trips_of_this_thread) {
        _cleanup_(store_closep) Store *s = open_url(url);
        Tenant t;

        store_timing_reset();
        ASSERT_EQ(store_timing_calls(), 0U);
        ASSERT_EQ(store_timing_usec(), 0U);
        ASSERT_OK(store_tenant_create(s, "timed", &t));
        ASSERT_OK(store_tenant_get_by_name(s, "timed", &t));
        ASSERT_TRUE(store_timing_calls() >= 2);
        ASSERT_TRUE(store_timing_usec() > 0);
        store_timing_reset();
        ASSERT_EQ(store_timing_calls(), 0U);
}

/* ---- tenant quotas ---- */

TEST(tenant_quota_strings) {
        ASSERT_STREQ(tenant_quota_to_string(TENANT_QUOTA_SANDBOXES), "sandboxes");
        ASSERT_STREQ(tenant_quota_to_string(TENANT_QUOTA_STREAMS), "streams");
        ASSERT_NULL(tenant_quota_to_string(_TENANT_QUOTA_MAX));
        ASSERT_EQ(tenant_quota_from_string("cpu_millis"), TENANT_QUOTA_CPU_MILLIS);
        ASSERT_EQ(tenant_quota_from_string("volumes"), _TENANT_QUOTA_INVALID);
        ASSERT_EQ(tenant_quota_from_string(NULL), _TENANT_QUOTA_INVALID);
}

TEST(admission_check_decides_each_quota) {
        StoreAdmission a = { .limit = { [TENANT_QUOTA_SANDBOXES] = 3, [TENANT_QUOTA_CPU_MILLIS] = 2500 } };
        TenantUsage u = { .used = { [TENANT_QUOTA_SANDBOXES] = 1, [TENANT_QUOTA_CPU_MILLIS] = 1000 } };
        Sandbox sb;

        sandbox_init(&sb, "x", "tn_a", "base"); /* 1000 millis */
        ASSERT_OK(store_admission_check(&a, &u, &sb));
        a.count = 2; /* two more of 1000: 3000 > 2500 */
        ASSERT_ERRNO(store_admission_check(&a, &u, &sb), EDQUOT);
        ASSERT_EQ(a.exceeded, TENANT_QUOTA_CPU_MILLIS);
        ASSERT_EQ(a.need, 2000U);
        ASSERT_EQ(a.usage.used[TENANT_QUOTA_CPU_MILLIS], 1000U);
        /* a checkpoint asks nothing of the sandbox quotas, even over them */
        u.used[TENANT_QUOTA_SANDBOXES] = 9;
        ASSERT_OK(store_admission_check(&a, &u, NULL));
        a.limit[TENANT_QUOTA_CHECKPOINTS] = 1;
        u.used[TENANT_QUOTA_CHECKPOINTS] = 1;
        ASSERT_ERRNO(store_admission_check(&a, &u, NULL), EDQUOT);
        ASSERT_EQ(a.exceeded, TENANT_QUOTA_CHECKPOINTS);
        /* 0 = unlimited; sums saturate instead of wrapping */
        StoreAdmission b = { .limit = { [TENANT_QUOTA_MEMORY_MB] = UINT64_MAX - 1 }, .count = UINT64_MAX };
        ASSERT_ERRNO(store_admission_check(&b, &u, &sb), EDQUOT);
        ASSERT_ERRNO(store_admission_check(NULL, &u, &sb), EINVAL);
}

STORE_TEST(tenant_quotas_roundtrip) {
        _cleanup_(store_closep) Store *s = open_url(url);
        TenantQuotas q, got;
        Tenant t;

        ASSERT_OK(store_tenant_create(s, "quota", &t));
        /* no row: every value the default */
        ASSERT_OK(store_tenant_quotas_get(s, t.id, &got));
        ASSERT_STREQ(got.tenant_id, t.id);
        ASSERT_EQ(got.updated_usec, 0);
        for (size_t i = 0; i < _TENANT_QUOTA_MAX; i++)
                ASSERT_EQ(got.value[i], TENANT_QUOTA_DEFAULT);
        q = got;
        q.value[TENANT_QUOTA_SANDBOXES] = 4;
        q.value[TENANT_QUOTA_RPS] = 0;
        q.value[TENANT_QUOTA_DISK_MB] = INT64_C(1) << 40;
        ASSERT_OK(store_tenant_quotas_set(s, &q));
        ASSERT_OK(store_tenant_quotas_get(s, t.id, &got));
        ASSERT_EQ(got.value[TENANT_QUOTA_SANDBOXES], 4);
        ASSERT_EQ(got.value[TENANT_QUOTA_RPS], 0);
        ASSERT_EQ(got.value[TENANT_QUOTA_DISK_MB], INT64_C(1) << 40);
        ASSERT_EQ(got.value[TENANT_QUOTA_STREAMS], TENANT_QUOTA_DEFAULT);
        ASSERT_TRUE(got.updated_usec > 0);
        /* replaced, not added */
        q.value[TENANT_QUOTA_SANDBOXES] = TENANT_QUOTA_DEFAULT;
        ASSERT_OK(store_tenant_quotas_set(s, &q));
        ASSERT_OK(store_tenant_quotas_get(s, t.id, &got));
        ASSERT_EQ(got.value[TENANT_QUOTA_SANDBOXES], TENANT_QUOTA_DEFAULT);
        /* bad values and unknown tenants */
        q.value[TENANT_QUOTA_CPU_MILLIS] = -2;
        ASSERT_ERRNO(store_tenant_quotas_set(s, &q), EINVAL);
        q.value[TENANT_QUOTA_CPU_MILLIS] = 1;
        ASSERT_OK(strscpy(q.tenant_id, sizeof q.tenant_id, "tn_nobody"));
        ASSERT_ERRNO(store_tenant_quotas_set(s, &q), ENOENT);
        ASSERT_ERRNO(store_tenant_quotas_get(s, "tn_nobody", &got), ENOENT);
        /* a create's admission: no tenant check, the defaults; a row is read like above */
        ASSERT_OK(store_tenant_quotas_or_defaults(s, "tn_nobody", &got));
        ASSERT_STREQ(got.tenant_id, "tn_nobody");
        for (size_t i = 0; i < _TENANT_QUOTA_MAX; i++)
                ASSERT_EQ(got.value[i], TENANT_QUOTA_DEFAULT);
        q.value[TENANT_QUOTA_SANDBOXES] = 7;
        ASSERT_OK(strscpy(q.tenant_id, sizeof q.tenant_id, t.id));
        ASSERT_OK(store_tenant_quotas_set(s, &q));
        ASSERT_OK(store_tenant_quotas_or_defaults(s, t.id, &got));
        ASSERT_EQ(got.value[TENANT_QUOTA_SANDBOXES], 7);
        ASSERT_ERRNO(store_tenant_quotas_or_defaults(s, "", &got), ENOENT);
}

STORE_TEST(tenant_usage_and_admitted_inserts) {
        _cleanup_(store_closep) Store *s = open_url(url);
        _cleanup_(sandbox_done) Sandbox got = {};
        StoreAdmission a = { .limit = { [TENANT_QUOTA_SANDBOXES] = 2, [TENANT_QUOTA_CHECKPOINTS] = 1 } };
        TenantUsage u;
        Checkpoint c = {};
        Sandbox sb;

        insert_sandbox(s, "a1", "tn_a");
        insert_sandbox(s, "b1", "tn_b"); /* another tenant's */
        insert_sandbox(s, "a2", "tn_a");
        ASSERT_OK(store_sandbox_set_state(s, "a2", -1, SANDBOX_DELETED, "")); /* not live */
        ASSERT_OK(store_tenant_usage(s, "tn_a", &u));
        ASSERT_EQ(u.used[TENANT_QUOTA_SANDBOXES], 1U);
        ASSERT_EQ(u.used[TENANT_QUOTA_CPU_MILLIS], 1000U);
        ASSERT_EQ(u.used[TENANT_QUOTA_MEMORY_MB], 512U);
        ASSERT_EQ(u.used[TENANT_QUOTA_DISK_MB], 2048U);
        ASSERT_EQ(u.used[TENANT_QUOTA_CHECKPOINTS], 0U);

        sandbox_init(&sb, "a3", "tn_a", "base");
        ASSERT_OK(store_sandbox_insert_admit(s, &sb, UINT32_MAX, &a));
        sandbox_init(&sb, "a4", "tn_a", "base");
        ASSERT_ERRNO(store_sandbox_insert_admit(s, &sb, UINT32_MAX, &a), EDQUOT);
        ASSERT_EQ(a.exceeded, TENANT_QUOTA_SANDBOXES);
        ASSERT_EQ(a.usage.used[TENANT_QUOTA_SANDBOXES], 2U);
        ASSERT_ERRNO(store_sandbox_get(s, NULL, "a4", &got), ENOENT); /* nothing written */
        /* the other tenant is not counted against this one */
        sandbox_init(&sb, "b2", "tn_b", "base");
        ASSERT_OK(store_sandbox_insert_admit(s, &sb, UINT32_MAX, &a));

        /* checkpoints of live sandboxes count */
        ASSERT_OK(strscpy(c.id, sizeof c.id, "ck1"));
        ASSERT_OK(strscpy(c.sandbox_id, sizeof c.sandbox_id, "a1"));
        ASSERT_OK(strscpy(c.tenant_id, sizeof c.tenant_id, "tn_a"));
        ASSERT_OK(store_checkpoint_insert_admit(s, &c, &a));
        ASSERT_OK(strscpy(c.id, sizeof c.id, "ck2"));
        ASSERT_ERRNO(store_checkpoint_insert_admit(s, &c, &a), EDQUOT);
        ASSERT_EQ(a.exceeded, TENANT_QUOTA_CHECKPOINTS);
        ASSERT_ERRNO(store_checkpoint_get(s, NULL, "ck2", &c), ENOENT);
        ASSERT_OK(store_tenant_usage(s, "tn_a", &u));
        ASSERT_EQ(u.used[TENANT_QUOTA_CHECKPOINTS], 1U);

        /* a warm claim is admitted too (it gives the tenant a sandbox) */
        insert_warm(s, "w1", "base", SANDBOX_PAUSED, 2048, 100);
        Sandbox req = claim_request("tn_a");
        ASSERT_ERRNO(store_sandbox_claim_warm_admit(s, "base", &req, &a, &got), EDQUOT);
        a.limit[TENANT_QUOTA_SANDBOXES] = 3;
        ASSERT_OK(store_sandbox_claim_warm_admit(s, "base", &req, &a, &got));
        ASSERT_STREQ(got.id, "w1");
        ASSERT_OK(store_tenant_usage(s, "tn_a", &u));
        ASSERT_EQ(u.used[TENANT_QUOTA_SANDBOXES], 3U);
        ASSERT_EQ(u.used[TENANT_QUOTA_CPU_MILLIS], 2250U);
}

/* Admissions on separate handles at once (separate connections on
 * PostgreSQL): the tenant's quota holds whoever races. */
#define RACE_THREADS 4
#define RACE_INSERTS 5
#define RACE_LIMIT 7

typedef struct AdmitRacer {
        const char *url;
        unsigned n;
        int made, refused, failed;
} AdmitRacer;

static void *admit_racer(void *arg) {
        AdmitRacer *a = arg;
        Store *s = NULL;

        if (store_open(a->url, &s) < 0) {
                a->failed = RACE_INSERTS;
                return NULL;
        }
        for (unsigned i = 0; i < RACE_INSERTS; i++) {
                StoreAdmission adm = { .limit = { [TENANT_QUOTA_SANDBOXES] = RACE_LIMIT } };
                Sandbox sb = {
                        .state = SANDBOX_CREATING, .cpu_millis = 1000, .memory_mb = 512, .disk_mb = 2048,
                        .pids_max = 1024,
                };
                int r;

                (void) snprintf(sb.id, sizeof sb.id, "r%u-%u", a->n, i);
                (void) strscpy(sb.tenant_id, sizeof sb.tenant_id, "tn_race");
                (void) strscpy(sb.template_name, sizeof sb.template_name, "base");
                (void) strscpy(sb.runtime, sizeof sb.runtime, "ns");
                r = store_sandbox_insert_admit(s, &sb, UINT32_MAX, &adm);
                if (r >= 0)
                        a->made++;
                else if (r == -EDQUOT)
                        a->refused++;
                else
                        a->failed++;
        }
        store_close(s);
        return NULL;
}

STORE_TEST(concurrent_admissions_hold_the_quota) {
        _cleanup_(store_closep) Store *s = open_url(url); /* migrated before the racers open theirs */
        AdmitRacer racers[RACE_THREADS] = {};
        pthread_t th[RACE_THREADS];
        TenantUsage u;
        int made = 0, refused = 0;

        for (unsigned i = 0; i < RACE_THREADS; i++) {
                racers[i] = (AdmitRacer){ .url = url, .n = i };
                ASSERT_EQ(pthread_create(&th[i], NULL, admit_racer, &racers[i]), 0);
        }
        for (unsigned i = 0; i < RACE_THREADS; i++) {
                ASSERT_EQ(pthread_join(th[i], NULL), 0);
                ASSERT_EQ(racers[i].failed, 0);
                made += racers[i].made;
                refused += racers[i].refused;
        }
        ASSERT_EQ(made, RACE_LIMIT);
        ASSERT_EQ(refused, RACE_THREADS * RACE_INSERTS - RACE_LIMIT);
        ASSERT_OK(store_tenant_usage(s, "tn_race", &u));
        ASSERT_EQ(u.used[TENANT_QUOTA_SANDBOXES], (uint64_t) RACE_LIMIT);
}

static void webhook_init(Webhook *w, const char *id, const char *tenant) {
        *w = (Webhook){ .enabled = true };
        ASSERT_OK(strscpy(w->id, sizeof w->id, id));
        ASSERT_OK(strscpy(w->tenant_id, sizeof w->tenant_id, tenant));
        ASSERT_OK(strscpy(w->url, sizeof w->url, "https://example.com/hook"));
        ASSERT_OK(strscpy(w->events_json, sizeof w->events_json, "[\"sandbox.*\"]"));
        ASSERT_OK(strscpy(w->secret, sizeof w->secret, "whsec_0123456789abcdef"));
}

STORE_TEST(webhooks_roundtrip) {
        _cleanup_(store_closep) Store *s = open_url(url);
        Webhook w, got, *list = NULL;
        size_t n = 0;
        Event ev = {};

        /* a new webhook starts after the newest event */
        ASSERT_OK(strscpy(ev.tenant_id, sizeof ev.tenant_id, "tn_a"));
        ASSERT_OK(strscpy(ev.type, sizeof ev.type, "sandbox.created"));
        ASSERT_OK(store_event_append(s, &ev));
        webhook_init(&w, "wh_a", "tn_a");
        ASSERT_OK(store_webhook_insert(s, &w));
        ASSERT_EQ(w.last_seq, ev.seq);
        ASSERT_TRUE(w.created_usec > 0);
        webhook_init(&got, "wh_b", "tn_b");
        got.e2b = true;
        ASSERT_OK(store_webhook_insert(s, &got));
        ASSERT_OK(store_webhook_get(s, "tn_b", "wh_b", &got));
        ASSERT_TRUE(got.e2b);
        ASSERT_ERRNO(store_webhook_insert(s, &got), EEXIST);

        ASSERT_OK(store_webhook_get(s, "tn_a", "wh_a", &got));
        ASSERT_STREQ(got.url, "https://example.com/hook");
        ASSERT_STREQ(got.secret, "whsec_0123456789abcdef");
        ASSERT_TRUE(got.enabled);
        ASSERT_FALSE(got.e2b);
        ASSERT_EQ(got.last_seq, ev.seq);
        /* another tenant's is not there */
        ASSERT_ERRNO(store_webhook_get(s, "tn_b", "wh_a", &got), ENOENT);
        ASSERT_ERRNO(store_webhook_delete(s, "tn_b", "wh_a"), ENOENT);
        ASSERT_OK(store_webhook_list(s, "tn_a", &list, &n));
        ASSERT_EQ(n, 1U);
        ASSERT_STREQ(list[0].id, "wh_a");
        free(list);
        ASSERT_OK(store_webhook_list(s, NULL, &list, &n));
        ASSERT_EQ(n, 2U);
        free(list);

        /* delivery state, then a failure that disables it */
        w.last_seq = ev.seq + 5;
        w.failures = 3;
        w.next_usec = 123;
        w.failing_since_usec = 100;
        ASSERT_OK(strscpy(w.last_error, sizeof w.last_error, "HTTP 500"));
        ASSERT_OK(store_webhook_set_state(s, &w, true));
        ASSERT_OK(store_webhook_get(s, "tn_a", "wh_a", &got));
        ASSERT_EQ(got.last_seq, ev.seq + 5);
        ASSERT_EQ(got.failures, 3U);
        ASSERT_EQ(got.next_usec, 123);
        ASSERT_EQ(got.failing_since_usec, 100);
        ASSERT_STREQ(got.last_error, "HTTP 500");
        ASSERT_FALSE(got.enabled);
        /* enabling again clears the failures; the position stays */
        got.enabled = true;
        ASSERT_OK(strscpy(got.url, sizeof got.url, "http://example.org/"));
        ASSERT_OK(store_webhook_update(s, &got));
        ASSERT_OK(store_webhook_get(s, "tn_a", "wh_a", &got));
        ASSERT_TRUE(got.enabled);
        ASSERT_EQ(got.failures, 0U);
        ASSERT_EQ(got.next_usec, 0);
        ASSERT_EQ(got.failing_since_usec, 0);
        ASSERT_EQ(got.last_seq, ev.seq + 5);
        ASSERT_STREQ(got.url, "http://example.org/");
        /* a state write without disable leaves enabled alone */
        ASSERT_OK(store_webhook_set_state(s, &got, false));
        ASSERT_OK(store_webhook_get(s, "tn_a", "wh_a", &got));
        ASSERT_TRUE(got.enabled);

        /* bad arguments */
        webhook_init(&got, "wh_c", "tn_a");
        got.url[0] = 0;
        ASSERT_ERRNO(store_webhook_insert(s, &got), EINVAL);
        webhook_init(&got, "wh_c", "tn_a");
        got.secret[0] = 0;
        ASSERT_ERRNO(store_webhook_insert(s, &got), EINVAL);

        ASSERT_OK(store_webhook_delete(s, "tn_a", "wh_a"));
        ASSERT_ERRNO(store_webhook_delete(s, "tn_a", "wh_a"), ENOENT);
        ASSERT_ERRNO(store_webhook_set_state(s, &w, false), ENOENT);
        ASSERT_ERRNO(store_webhook_update(s, &w), ENOENT);
}

static void volume_init(Volume *v, const char *id, const char *tenant, const char *name) {
        *v = (Volume){ .size_mb = 64 };
        ASSERT_OK(strscpy(v->id, sizeof v->id, id));
        ASSERT_OK(strscpy(v->tenant_id, sizeof v->tenant_id, tenant));
        ASSERT_OK(strscpy(v->name, sizeof v->name, name));
}

static VolumeMount volume_mount_of(const char *volume_id, const char *path, bool read_only) {
        VolumeMount m = { .read_only = read_only };
        ASSERT_OK(strscpy(m.volume_id, sizeof m.volume_id, volume_id));
        ASSERT_OK(strscpy(m.path, sizeof m.path, path));
        return m;
}

STORE_TEST(volumes) {
        _cleanup_(store_closep) Store *s = open_url(url);
        Tenant a, b;
        Volume v, got, *list = NULL;
        VolumeMount m[2], *mounts = NULL;
        size_t n;

        ASSERT_OK(store_tenant_create(s, "vol-a", &a));
        ASSERT_OK(store_tenant_create(s, "vol-b", &b));
        volume_init(&v, "vol_1", a.id, "data");
        ASSERT_OK(store_volume_insert(s, &v, NULL));
        volume_init(&v, "vol_2", a.id, "data");
        ASSERT_ERRNO(store_volume_insert(s, &v, NULL), EEXIST);      /* the name within the tenant */
        volume_init(&v, "vol_2", b.id, "data");
        ASSERT_OK(store_volume_insert(s, &v, NULL));                  /* another tenant's name */
        volume_init(&v, "vol_3", a.id, "cache");
        v.size_mb = 0;
        ASSERT_ERRNO(store_volume_insert(s, &v, NULL), EINVAL);
        v.size_mb = 10;
        ASSERT_OK(store_volume_insert(s, &v, NULL));

        ASSERT_OK(store_volume_get(s, a.id, "data", &got));
        ASSERT_STREQ(got.id, "vol_1");
        ASSERT_EQ(got.size_mb, 64);
        ASSERT_TRUE(got.created_usec > 0);
        ASSERT_FALSE(got.read_only);
        ASSERT_STREQ(got.source, "");
        /* a read-only snapshot, and what it was made from */
        volume_init(&v, "vol_4", a.id, "data-snap");
        v.read_only = true;
        (void) strscpy(v.source, sizeof v.source, "data");
        ASSERT_OK(store_volume_insert(s, &v, NULL));
        ASSERT_OK(store_volume_get(s, a.id, "data-snap", &got));
        ASSERT_TRUE(got.read_only);
        ASSERT_STREQ(got.source, "data");
        ASSERT_OK(store_volume_delete(s, a.id, "data-snap"));
        ASSERT_ERRNO(store_volume_get(s, b.id, "cache", &got), ENOENT); /* not b's */
        ASSERT_OK(store_volume_list(s, a.id, &list, &n));
        ASSERT_EQ(n, 2);
        ASSERT_STREQ(list[0].name, "cache");
        ASSERT_STREQ(list[1].name, "data");
        list = mfree(list);

        /* one writer, or many readers */
        insert_sandbox(s, "sb_w1", a.id);
        insert_sandbox(s, "sb_w2", a.id);
        insert_sandbox(s, "sb_r1", a.id);
        insert_sandbox(s, "sb_r2", a.id);
        m[0] = volume_mount_of("vol_1", "/data", false);
        m[1] = volume_mount_of("vol_3", "/cache", false);
        ASSERT_OK(store_volume_mount(s, "sb_w1", m, 2));
        ASSERT_ERRNO(store_volume_mount(s, "sb_w2", m, 1), EBUSY);
        m[0].read_only = true;
        ASSERT_ERRNO(store_volume_mount(s, "sb_r1", m, 1), EBUSY);
        ASSERT_OK(store_volume_get(s, a.id, "data", &got));
        ASSERT_EQ(got.writers, 1);
        ASSERT_EQ(got.readers, 0);
        ASSERT_ERRNO(store_volume_delete(s, a.id, "data"), EBUSY);
        ASSERT_OK(store_volume_mounts(s, "sb_w1", &mounts, &n));
        ASSERT_EQ(n, 2);
        ASSERT_STREQ(mounts[0].path, "/cache");
        ASSERT_STREQ(mounts[0].volume_name, "cache");
        ASSERT_STREQ(mounts[1].volume_id, "vol_1");
        ASSERT_FALSE(mounts[1].read_only);
        mounts = mfree(mounts);

        /* the writer's sandbox deleted: readers share */
        ASSERT_OK(store_sandbox_set_state(s, "sb_w1", -1, SANDBOX_DELETED, NULL));
        ASSERT_OK(store_volume_mount(s, "sb_r1", m, 1));
        ASSERT_OK(store_volume_mount(s, "sb_r2", m, 1));
        m[0].read_only = false;
        ASSERT_ERRNO(store_volume_mount(s, "sb_w2", m, 1), EBUSY);
        /* all or none: the second refused, so the first is not recorded either */
        m[1] = volume_mount_of("vol_3", "/cache", false);
        m[0] = volume_mount_of("vol_1", "/data", true);
        ASSERT_OK(store_volume_mount(s, "sb_w2", &m[1], 1));
        m[1].read_only = false;
        ASSERT_OK(store_volume_mounts(s, "sb_w2", &mounts, &n));
        ASSERT_EQ(n, 1);
        mounts = mfree(mounts);
        ASSERT_OK(store_volume_get(s, a.id, "data", &got));
        ASSERT_EQ(got.readers, 2);
        ASSERT_EQ(got.writers, 0);
        /* a restore elsewhere moves a volume only with its one sandbox, from the worker it names */
        ASSERT_ERRNO(store_volume_move(s, "vol_1", "sb_r1", "", "w2"), EBUSY); /* sb_r2 mounts it too */
        ASSERT_ERRNO(store_volume_move(s, "vol_3", "sb_w2", "w9", "w2"), ESTALE);
        ASSERT_OK(store_volume_move(s, "vol_3", "sb_w2", "", "w2"));
        ASSERT_OK(store_volume_get(s, a.id, "cache", &got));
        ASSERT_STREQ(got.worker, "w2");
        ASSERT_ERRNO(store_volume_move(s, "vol_3", "sb_w2", "", "w3"), ESTALE); /* moved already */
        ASSERT_ERRNO(store_volume_move(s, "vol_3", "sb_r1", "w2", "w3"), EBUSY); /* sb_w2 mounts it */
        ASSERT_ERRNO(store_volume_move(s, "vol_nosuch", "sb_w2", "", "w2"), ENOENT);
        ASSERT_ERRNO(store_volume_move(s, "vol_3", "sb_w2", "w2", ""), EINVAL);
        /* by id, whatever the tenant: what a worker asks of the volumes its pool holds */
        got = (Volume){};
        ASSERT_OK(store_volume_get_by_id(s, "vol_3", &got));
        ASSERT_STREQ(got.name, "cache");
        ASSERT_STREQ(got.tenant_id, a.id);
        ASSERT_STREQ(got.worker, "w2");
        ASSERT_ERRNO(store_volume_get_by_id(s, "vol_nosuch", &got), ENOENT);
        ASSERT_ERRNO(store_volume_get_by_id(s, NULL, &got), EINVAL);
        /* a duplicate within one request */
        m[1] = m[0];
        ASSERT_ERRNO(store_volume_mount(s, "sb_w2", m, 2), EEXIST);
        m[0] = volume_mount_of("vol_nosuch", "/x", true);
        ASSERT_ERRNO(store_volume_mount(s, "sb_w2", m, 1), ENOENT);

        ASSERT_OK(store_sandbox_set_state(s, "sb_r1", -1, SANDBOX_DELETED, NULL));
        ASSERT_OK(store_sandbox_set_state(s, "sb_r2", -1, SANDBOX_DELETED, NULL));
        ASSERT_ERRNO(store_volume_delete(s, b.id, "cache"), ENOENT);
        ASSERT_OK(store_volume_delete(s, a.id, "data"));
        ASSERT_ERRNO(store_volume_get(s, a.id, "data", &got), ENOENT);
        ASSERT_ERRNO(store_volume_delete(s, a.id, "data"), ENOENT);
        ASSERT_OK(store_volume_get(s, b.id, "data", &got));     /* b's of that name stays */
}

STORE_TEST(object_settings) {
        _cleanup_(store_closep) Store *s = open_url(url);
        _cleanup_free_ ObjectSetting *list = NULL;
        size_t n = 0;
        char big[STORE_SETTING_VALUE_MAX + 1];

        /* nothing set: an empty list, not an error */
        ASSERT_OK(store_object_settings_get(s, "template", "py", "tenant", "tn_a", &list, &n));
        ASSERT_EQ(n, 0);
        list = mfree(list);
        ASSERT_OK(store_object_setting_set(s, "template", "py", "runtime", "vm"));
        ASSERT_OK(store_object_setting_set(s, "template", "py", "start", "{\"command\":\"x\"}"));
        ASSERT_OK(store_object_setting_set(s, "template", "other", "runtime", "ns"));
        ASSERT_OK(store_object_setting_set(s, "tenant", "tn_a", "default_runtime", "auto"));
        /* replaced, not added */
        ASSERT_OK(store_object_setting_set(s, "template", "py", "runtime", "ns"));
        ASSERT_OK(store_object_settings_get(s, "template", "py", "tenant", "tn_a", &list, &n));
        ASSERT_EQ(n, 3);
        ASSERT_STREQ(object_setting_find(list, n, "template", "runtime"), "ns");
        ASSERT_STREQ(object_setting_find(list, n, "template", "start"), "{\"command\":\"x\"}");
        ASSERT_STREQ(object_setting_find(list, n, "tenant", "default_runtime"), "auto");
        ASSERT_NULL(object_setting_find(list, n, "tenant", "runtime"));
        list = mfree(list);
        /* one object alone; a name that cannot be one has none */
        ASSERT_OK(store_object_settings_get(s, "template", "other", NULL, NULL, &list, &n));
        ASSERT_EQ(n, 1);
        list = mfree(list);
        ASSERT_OK(store_object_settings_get(s, "template", "", NULL, NULL, &list, &n));
        ASSERT_EQ(n, 0);
        list = mfree(list);
        /* a removed key, then every key of an object */
        ASSERT_OK(store_object_setting_set(s, "template", "py", "runtime", NULL));
        ASSERT_OK(store_object_settings_get(s, "template", "py", NULL, NULL, &list, &n));
        ASSERT_EQ(n, 1);
        list = mfree(list);
        ASSERT_OK(store_object_settings_remove(s, "template", "py"));
        ASSERT_OK(store_object_settings_get(s, "template", "py", "tenant", "tn_a", &list, &n));
        ASSERT_EQ(n, 1);
        ASSERT_STREQ(list[0].kind, "tenant");
        list = mfree(list);
        /* unknown kinds and keys, empty and oversized values */
        ASSERT_ERRNO(store_object_setting_set(s, "template", "py", "colour", "red"), EINVAL);
        ASSERT_ERRNO(store_object_setting_set(s, "volume", "py", "runtime", "vm"), EINVAL);
        ASSERT_ERRNO(store_object_settings_get(s, "volume", "py", NULL, NULL, &list, &n), EINVAL);
        ASSERT_ERRNO(store_object_setting_set(s, "template", "py", "runtime", ""), EINVAL);
        memset(big, 'a', sizeof big - 1);
        big[sizeof big - 1] = 0;
        ASSERT_ERRNO(store_object_setting_set(s, "template", "py", "start", big), ENAMETOOLONG);
}

STORE_TEST(volumes_count_in_the_tenants_disk_quota) {
        _cleanup_(store_closep) Store *s = open_url(url);
        StoreAdmission adm = {};
        TenantUsage u;
        Tenant a;
        Volume v;
        Sandbox sb;

        ASSERT_OK(store_tenant_create(s, "volq", &a));
        adm.limit[TENANT_QUOTA_DISK_MB] = 100;
        volume_init(&v, "vol_q1", a.id, "one");
        v.size_mb = 60;
        ASSERT_OK(store_volume_insert(s, &v, &adm));
        ASSERT_OK(store_tenant_usage(s, a.id, &u));
        ASSERT_EQ(u.used[TENANT_QUOTA_DISK_MB], 60);
        /* 60 + 50 > 100: refused, and the row is not there */
        volume_init(&v, "vol_q2", a.id, "two");
        v.size_mb = 50;
        ASSERT_ERRNO(store_volume_insert(s, &v, &adm), EDQUOT);
        ASSERT_EQ(adm.exceeded, TENANT_QUOTA_DISK_MB);
        ASSERT_EQ(adm.need, 50);
        ASSERT_ERRNO(store_volume_get(s, a.id, "two", &v), ENOENT);
        /* a sandbox's disk meets the volume's in the same quota */
        sandbox_init(&sb, "sb_volq", a.id, "base");
        sb.disk_mb = 50;
        ASSERT_ERRNO(store_sandbox_insert_admit(s, &sb, 1024, &adm), EDQUOT);
        sb.disk_mb = 40;
        ASSERT_OK(store_sandbox_insert_admit(s, &sb, 1024, &adm));
        ASSERT_OK(store_tenant_usage(s, a.id, &u));
        ASSERT_EQ(u.used[TENANT_QUOTA_DISK_MB], 100);
        /* no admission (a row put back after a failed delete): not counted against anything */
        ASSERT_OK(store_volume_insert(s, &v, NULL));
}
