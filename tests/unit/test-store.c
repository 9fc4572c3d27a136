/* SPDX-License-Identifier: MIT */
/* The store against real SQLite databases in a temporary directory. */

#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "store-migrations.h"
#include "store.h"
#include "str-util.h"
#include "test.h"

#define CONCURRENT_PROCS 4
#define CONCURRENT_INSERTS 30

static const char *db_path(const char *name) {
        static char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", test_tmpdir(), name);
        return p;
}

static Store *open_db(const char *name) {
        char url[PATH_MAX + 16];
        Store *s = NULL;

        snprintf(url, sizeof url, "sqlite:%s", db_path(name));
        ASSERT_OK(store_open(url, &s));
        ASSERT_NOT_NULL(s);
        return s;
}

/* Runs one SQL statement on the database file behind the store's back. */
static void raw_sql(const char *name, const char *sql) {
        sqlite3 *db = NULL;
        ASSERT_EQ(sqlite3_open(db_path(name), &db), SQLITE_OK);
        sqlite3_busy_timeout(db, 5000);
        int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        sqlite3_close(db);
        ASSERT_EQ(rc, SQLITE_OK);
}

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
        ASSERT_EQ(store_schema_version(s), (int) store_sqlite_migrations_count);
        s = store_close(s);

        ASSERT_ERRNO(store_open("postgres://user@localhost/space", &s), EPROTONOSUPPORT);
        ASSERT_ERRNO(store_open("postgresql://localhost/space", &s), EPROTONOSUPPORT);
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

TEST(database_is_private_and_cloexec) {
        _cleanup_(store_closep) Store *s = open_db("private.db");
        Tenant t;
        struct stat st;
        unsigned seen = 0;

        ASSERT_OK(store_tenant_create(s, "acme", &t)); /* creates the -wal file */
        ASSERT_EQ(stat(db_path("private.db"), &st), 0);
        ASSERT_EQ(st.st_mode & 0777, 0600);
        ASSERT_EQ(stat(db_path("private.db-wal"), &st), 0);
        ASSERT_EQ(st.st_mode & 0777, 0600);

        /* every descriptor SQLite holds on our files is close-on-exec */
        _cleanup_(closedirp_) DIR *d = opendir("/proc/self/fd");
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
                if (!startswith(target, test_tmpdir()))
                        continue;
                int flags = fcntl(fd, F_GETFD);
                ASSERT_TRUE(flags >= 0);
                ASSERT_TRUE(flags & FD_CLOEXEC);
                seen++;
        }
        ASSERT_TRUE(seen >= 2); /* the database and its WAL */
}

TEST(migrations_idempotent) {
        Store *s = open_db("m.db");
        ASSERT_EQ(store_schema_version(s), (int) store_sqlite_migrations_count);
        ASSERT_TRUE(store_sqlite_migrations_count >= 1);
        s = store_close(s);

        /* twice more: nothing re-applied, same version */
        for (int i = 0; i < 2; i++) {
                s = open_db("m.db");
                ASSERT_EQ(store_schema_version(s), (int) store_sqlite_migrations_count);
                s = store_close(s);
        }

        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        ASSERT_EQ(sqlite3_open(db_path("m.db"), &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT COUNT(*), MIN(version), MIN(applied_usec) FROM schema_migrations",
                                     -1, &st, NULL), SQLITE_OK);
        ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
        int64_t rows = sqlite3_column_int64(st, 0), minv = sqlite3_column_int64(st, 1),
                applied = sqlite3_column_int64(st, 2);
        sqlite3_finalize(st);
        /* the pragmas that persist in the file */
        ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
        ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
        char mode[16];
        snprintf(mode, sizeof mode, "%s", (const char *) sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
        sqlite3_close(db);
        ASSERT_EQ(rows, (long long) store_sqlite_migrations_count);
        ASSERT_EQ(minv, 1);
        ASSERT_TRUE(applied > 0);
        ASSERT_STREQ(mode, "wal");
}

TEST(migrations_refuse_newer_schema) {
        Store *s = open_db("new.db");
        s = store_close(s);
        raw_sql("new.db", "INSERT INTO schema_migrations (version, name, applied_usec) VALUES (999, 'future', 1)");
        char url[PATH_MAX + 16];
        snprintf(url, sizeof url, "sqlite:%s", db_path("new.db"));
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
        return r == (int) store_sqlite_migrations_count ? 0 : 2;
}

TEST(concurrent_open_migrates_once) {
        for (int round = 0; round < 5; round++) {
                char name[32];
                int gate[2];
                pid_t pids[CONCURRENT_PROCS];

                snprintf(name, sizeof name, "race%d.db", round);
                ASSERT_EQ(pipe2(gate, O_CLOEXEC), 0);
                for (size_t i = 0; i < ELEMENTSOF(pids); i++)
                        pids[i] = fork_gated(gate, child_open, db_path(name), (int) i);
                release_and_reap(gate, pids, ELEMENTSOF(pids));

                Store *s = open_db(name);
                ASSERT_EQ(store_schema_version(s), (int) store_sqlite_migrations_count);
                store_close(s);
        }
}

TEST(tenants) {
        _cleanup_(store_closep) Store *s = open_db("t.db");
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

TEST(tenant_row_too_long_is_refused_not_truncated) {
        _cleanup_(store_closep) Store *s = open_db("long.db");
        Tenant t, got;

        ASSERT_OK(store_tenant_create(s, "short", &t));
        /* a row written by something else with a name longer than the buffer */
        char sql[512];
        snprintf(sql, sizeof sql, "UPDATE tenants SET name = printf('%%.200c', 'x') WHERE id = '%s'", t.id);
        raw_sql("long.db", sql);
        ASSERT_ERRNO(store_tenant_get(s, t.id, &got), EBADMSG);
}

static ApiKey make_key(const char *id, const char *tenant, const char *hash, bool admin) {
        ApiKey k = { .admin = admin };
        (void) strscpy(k.id, sizeof k.id, id);
        (void) strscpy(k.tenant_id, sizeof k.tenant_id, tenant);
        (void) strscpy(k.hash, sizeof k.hash, hash);
        (void) strscpy(k.name, sizeof k.name, "ci");
        return k;
}

TEST(keys) {
        _cleanup_(store_closep) Store *s = open_db("k.db");
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

TEST(templates) {
        _cleanup_(store_closep) Store *s = open_db("tpl.db");
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

TEST(sandbox_roundtrip) {
        _cleanup_(store_closep) Store *s = open_db("sb.db");
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

TEST(sandbox_bad_input) {
        _cleanup_(store_closep) Store *s = open_db("bad.db");
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

TEST(sandbox_tenant_isolation) {
        _cleanup_(store_closep) Store *s = open_db("iso.db");
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

TEST(slots_lowest_free_and_reused) {
        _cleanup_(store_closep) Store *s = open_db("slots.db");
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

TEST(slots_unique_across_processes) {
        Store *s = open_db("conc.db"); /* migrated before the race */
        store_close(s);

        int gate[2];
        pid_t pids[CONCURRENT_PROCS];
        ASSERT_EQ(pipe2(gate, O_CLOEXEC), 0);
        for (size_t i = 0; i < ELEMENTSOF(pids); i++)
                pids[i] = fork_gated(gate, child_insert, db_path("conc.db"), (int) i);
        release_and_reap(gate, pids, ELEMENTSOF(pids));

        s = open_db("conc.db");
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

TEST(sandbox_set_state_cas) {
        _cleanup_(store_closep) Store *s = open_db("cas.db");
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

TEST(sandbox_runtime_expiry_purge) {
        _cleanup_(store_closep) Store *s = open_db("rt.db");
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

TEST(sandbox_list_pagination_and_filters) {
        _cleanup_(store_closep) Store *s = open_db("page.db");
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

TEST(events) {
        _cleanup_(store_closep) Store *s = open_db("ev.db");
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

TEST(two_handles_share_one_database) {
        Store *w = open_db("shared.db");
        Store *r = open_db("shared.db");
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
        Store *again = open_db("shared.db");
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
