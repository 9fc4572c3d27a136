/* SPDX-License-Identifier: MIT */
/* src/basic and src/shared: strings, numbers, files, config table, error table. */
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

#include "alloc-util.h"
#include "api-error.h"
#include "config.h"
#include "fd-util.h"
#include "sock-io.h"
#include "str-util.h"
#include "test.h"
#include "time-util.h"

TEST(safe_atou64_strict) {
        uint64_t v;
        ASSERT_OK(safe_atou64("0", &v));
        ASSERT_EQ(v, 0);
        ASSERT_OK(safe_atou64("18446744073709551615", &v));
        ASSERT_TRUE(v == UINT64_MAX);
        ASSERT_ERRNO(safe_atou64("18446744073709551616", &v), ERANGE);
        ASSERT_ERRNO(safe_atou64("-1", &v), EINVAL);
        ASSERT_ERRNO(safe_atou64(" 1", &v), EINVAL);
        ASSERT_ERRNO(safe_atou64("1 ", &v), EINVAL);
        ASSERT_ERRNO(safe_atou64("", &v), EINVAL);
        ASSERT_ERRNO(safe_atou64("0x10", &v), EINVAL);
        ASSERT_ERRNO(safe_atou64(NULL, &v), EINVAL);
}

TEST(safe_atoi_ranges) {
        int i;
        unsigned u;
        ASSERT_OK(safe_atoi("-2147483648", &i));
        ASSERT_EQ(i, INT32_MIN);
        ASSERT_ERRNO(safe_atoi("2147483648", &i), ERANGE);
        ASSERT_ERRNO(safe_atou("4294967296", &u), ERANGE);
        ASSERT_OK(safe_atou("4294967295", &u));
        ASSERT_ERRNO(safe_atoi("12abc", &i), EINVAL);
}

TEST(slices) {
        Slice s = { "hello world", 5 };
        uint64_t v;
        ASSERT_TRUE(slice_eq(s, "hello"));
        ASSERT_FALSE(slice_eq(s, "hello world"));
        ASSERT_TRUE(slice_eq_ci(s, "HeLLo"));
        ASSERT_OK(slice_to_u64((Slice){ "1234xyz", 4 }, &v));
        ASSERT_EQ(v, 1234);
        ASSERT_ERRNO(slice_to_u64((Slice){ "", 0 }, &v), EINVAL);
        ASSERT_ERRNO(slice_to_u64((Slice){ "123456789012345678901234567890123", 33 }, &v), EINVAL);
}

TEST(string_helpers) {
        _cleanup_free_ char *j = strjoin("a", "/", "b");
        _cleanup_free_ char *p = strdup_printf("%d-%s", 7, "x");
        char small[4];
        ASSERT_STREQ(j, "a/b");
        ASSERT_STREQ(p, "7-x");
        ASSERT_STREQ(startswith("prefix-rest", "prefix-"), "rest");
        ASSERT_NULL(startswith("pre", "prefix"));
        ASSERT_STREQ(endswith("file.tar", ".tar"), ".tar");
        ASSERT_NULL(endswith("tar", ".tar"));
        ASSERT_ERRNO(strscpy(small, sizeof small, "toolong"), ENAMETOOLONG);
        ASSERT_STREQ(small, "too");
        ASSERT_OK(strscpy(small, sizeof small, "abc"));
}

TEST(strv) {
        _cleanup_strv_free_ char **l = NULL, **c = NULL;
        ASSERT_OK(strv_extend(&l, "a"));
        ASSERT_OK(strv_extend(&l, "b"));
        ASSERT_EQ(strv_length(l), 2);
        ASSERT_TRUE(strv_contains(l, "b"));
        ASSERT_FALSE(strv_contains(l, "c"));
        c = strv_copy(l);
        ASSERT_EQ(strv_length(c), 2);
        ASSERT_STREQ(c[1], "b");
        ASSERT_EQ(strv_length(NULL), 0);
}

TEST(random_ids) {
        char a[17], b[17];
        ASSERT_OK(random_alnum(a, 16));
        ASSERT_OK(random_alnum(b, 16));
        ASSERT_EQ(strlen(a), 16);
        ASSERT_TRUE(strcmp(a, b) != 0);
        for (size_t i = 0; i < 16; i++)
                ASSERT_TRUE((a[i] >= 'a' && a[i] <= 'z') || (a[i] >= '0' && a[i] <= '9'));
        ASSERT_ERRNO(random_alnum(a, 1000), EINVAL);
}

TEST(files) {
        char p[PATH_MAX], d[PATH_MAX];
        _cleanup_free_ char *text = NULL;
        size_t n;
        struct stat st;

        snprintf(p, sizeof p, "%s/f", test_tmpdir());
        ASSERT_OK(write_file_atomic(p, "secret\n", 7, 0600));
        ASSERT_OK(stat(p, &st));
        ASSERT_EQ(st.st_mode & 0777, 0600);
        ASSERT_OK(read_full_file(p, 100, &text, &n));
        ASSERT_EQ(n, 7);
        ASSERT_STREQ(text, "secret\n");
        free(TAKE_PTR(text));
        ASSERT_ERRNO(read_full_file(p, 3, &text, &n), EFBIG);
        snprintf(d, sizeof d, "%s/a/b/c", test_tmpdir());
        ASSERT_OK(mkdir_p(d, 0755));
        ASSERT_OK(mkdir_p(d, 0755));
        snprintf(d, sizeof d, "%s/a", test_tmpdir());
        ASSERT_OK(rm_rf(d));
        ASSERT_TRUE(access(d, F_OK) < 0);
        ASSERT_OK(rm_rf(d)); /* missing is fine */
}

TEST(greedy_realloc) {
        _cleanup_free_ int *a = NULL;
        size_t allocated = 0;
        ASSERT_OK(GREEDY_REALLOC(a, allocated, 10));
        ASSERT_TRUE(allocated >= 10);
        for (int i = 0; i < 10; i++)
                a[i] = i;
        ASSERT_ERRNO(GREEDY_REALLOC(a, allocated, SIZE_MAX / 2), ENOMEM);
        ASSERT_EQ(a[9], 9);
}

TEST(config_table) {
        Config c;
        char err[256];
        config_defaults(&c);
        ASSERT_STREQ(c.listen, "127.0.0.1:7070");
        ASSERT_STREQ(c.state_dir, "/var/lib/space");
        ASSERT_EQ(c.default_memory_mb, 512);
        ASSERT_OK(config_set(&c, "default_memory_mb", "256", err, sizeof err));
        ASSERT_EQ(c.default_memory_mb, 256);
        ASSERT_ERRNO(config_set(&c, "default_memory_mb", "1", err, sizeof err), ERANGE);
        ASSERT_NOT_NULL(strstr(err, "out of range"));
        ASSERT_ERRNO(config_set(&c, "default_memory_mb", "12x", err, sizeof err), EINVAL);
        ASSERT_ERRNO(config_set(&c, "no_such_key", "1", err, sizeof err), EINVAL);
        ASSERT_NOT_NULL(strstr(err, "unknown configuration key"));
        ASSERT_ERRNO(config_set(&c, "storage", "zfs", err, sizeof err), EINVAL);
        ASSERT_OK(config_set(&c, "storage", "overlay", err, sizeof err));
        ASSERT_OK(config_finish(&c, err, sizeof err));
        ASSERT_STREQ(c.store_url, "sqlite:/var/lib/space/space.db");
        ASSERT_OK(config_set(&c, "state_dir", "relative", err, sizeof err));
        ASSERT_ERRNO(config_finish(&c, err, sizeof err), EINVAL);
}

/* a worker registers the address others reach it at: a wildcard one is bad input */
TEST(config_worker_address) {
        static const char *const bad[] = { "0.0.0.0:7071", "[::]:7071", ":7071", "*:7071" };
        static const char *const good[] = { "10.0.0.5:7071", "[fd00::5]:7071", "worker-a.internal:7071" };
        Config c;
        char err[256];

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                config_defaults(&c);
                ASSERT_OK(config_set(&c, "role", "worker", err, sizeof err));
                ASSERT_OK(config_set(&c, "store_url", "postgres://h/db", err, sizeof err));
                ASSERT_OK(config_set(&c, "cluster_token_file", "/etc/space/cluster.token", err, sizeof err));
                ASSERT_OK(config_set(&c, "worker_name", "w1", err, sizeof err));
                ASSERT_OK(config_set(&c, "cluster_tls", "off", err, sizeof err));
                ASSERT_OK(config_set(&c, "worker_listen", bad[i], err, sizeof err));
                ASSERT_ERRNO(config_finish(&c, err, sizeof err), EINVAL);
                ASSERT_NOT_NULL(strstr(err, "wildcard"));
                /* listening on it is fine once the address others use is named */
                ASSERT_OK(config_set(&c, "worker_address", good[i % ELEMENTSOF(good)], err, sizeof err));
                ASSERT_OK(config_finish(&c, err, sizeof err));
        }
}

/* fail closed: a worker listens beyond loopback only over TLS or with cluster_tls=off */
TEST(config_cluster_tls) {
        static const struct {
                const char *listen, *tls, *cert, *key, *ca, *err;
        } cases[] = {
                { "10.0.0.5:7071", "on", "", "", "", "not a loopback address" },
                { "0.0.0.0:7071", "on", "", "", "", "not a loopback address" },
                { "127.0.0.1:7071", "on", "", "", "", NULL },
                { "localhost:7071", "on", "", "", "", NULL },
                { "[::1]:7071", "on", "", "", "", NULL },
                { "10.0.0.5:7071", "off", "", "", "", NULL },
                { "10.0.0.5:7071", "on", "/c.crt", "/c.key", "/ca.crt", NULL },
                { "10.0.0.5:7071", "on", "/c.crt", "", "/ca.crt", "needs all of" },
                { "10.0.0.5:7071", "off", "/c.crt", "/c.key", "/ca.crt", "choose one" },
        };
        Config c;
        char err[256];

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                config_defaults(&c);
                ASSERT_OK(config_set(&c, "role", "worker", err, sizeof err));
                ASSERT_OK(config_set(&c, "store_url", "postgres://h/db", err, sizeof err));
                ASSERT_OK(config_set(&c, "cluster_token_file", "/etc/space/cluster.token", err, sizeof err));
                ASSERT_OK(config_set(&c, "worker_name", "w1", err, sizeof err));
                ASSERT_OK(config_set(&c, "worker_address", "10.0.0.5:7071", err, sizeof err));
                ASSERT_OK(config_set(&c, "worker_listen", cases[i].listen, err, sizeof err));
                ASSERT_OK(config_set(&c, "cluster_tls", cases[i].tls, err, sizeof err));
                ASSERT_OK(config_set(&c, "cluster_tls_cert", cases[i].cert, err, sizeof err));
                ASSERT_OK(config_set(&c, "cluster_tls_key", cases[i].key, err, sizeof err));
                ASSERT_OK(config_set(&c, "cluster_tls_ca", cases[i].ca, err, sizeof err));
                if (!cases[i].err)
                        ASSERT_OK(config_finish(&c, err, sizeof err));
                else {
                        ASSERT_ERRNO(config_finish(&c, err, sizeof err), EINVAL);
                        ASSERT_NOT_NULL(strstr(err, cases[i].err));
                }
        }
        config_defaults(&c);
        ASSERT_ERRNO(config_set(&c, "cluster_tls", "maybe", err, sizeof err), EINVAL);
}

/* a worker's name goes into events and logs as it is: only safe characters */
TEST(config_worker_name) {
        static const char *const bad[] = { "w\"1", "-w1", ".w", "w 1", "w/1", "w1\\", "w{1}" };
        static const char *const good[] = { "w1", "worker-a.example", "W_2", "a" };
        Config c;
        char err[256];

        for (size_t i = 0; i < ELEMENTSOF(bad) + ELEMENTSOF(good); i++) {
                bool ok = i >= ELEMENTSOF(bad);
                config_defaults(&c);
                ASSERT_OK(config_set(&c, "role", "worker", err, sizeof err));
                ASSERT_OK(config_set(&c, "store_url", "postgres://h/db", err, sizeof err));
                ASSERT_OK(config_set(&c, "cluster_token_file", "/etc/space/cluster.token", err, sizeof err));
                ASSERT_OK(config_set(&c, "cluster_tls", "off", err, sizeof err));
                ASSERT_OK(config_set(&c, "worker_listen", "10.0.0.5:7071", err, sizeof err));
                ASSERT_OK(config_set(&c, "worker_name", ok ? good[i - ELEMENTSOF(bad)] : bad[i], err, sizeof err));
                if (ok)
                        ASSERT_OK(config_finish(&c, err, sizeof err));
                else {
                        ASSERT_ERRNO(config_finish(&c, err, sizeof err), EINVAL);
                        ASSERT_NOT_NULL(strstr(err, "worker_name"));
                }
        }
}

TEST(config_file) {
        Config c;
        char p[PATH_MAX], err[256];
        const char *text = "# comment\nlisten = 127.0.0.1:9999\n  default_cpu_millis=500\nstorage = \"btrfs\"\n";
        config_defaults(&c);
        snprintf(p, sizeof p, "%s/spaced.conf", test_tmpdir());
        ASSERT_OK(write_file_atomic(p, text, strlen(text), 0644));
        ASSERT_OK(config_load_file(&c, p, err, sizeof err));
        ASSERT_STREQ(c.listen, "127.0.0.1:9999");
        ASSERT_EQ(c.default_cpu_millis, 500);
        ASSERT_STREQ(c.storage, "btrfs");
        ASSERT_OK(write_file_atomic(p, "bogus = 1\n", 10, 0644));
        ASSERT_ERRNO(config_load_file(&c, p, err, sizeof err), EINVAL);
        ASSERT_NOT_NULL(strstr(err, ":1:"));
        ASSERT_OK(write_file_atomic(p, "no equals sign\n", 15, 0644));
        ASSERT_ERRNO(config_load_file(&c, p, err, sizeof err), EINVAL);
}

TEST(config_env) {
        Config c;
        char err[256];
        config_defaults(&c);
        setenv("SPACE_MAX_PIDS", "999", 1);
        ASSERT_OK(config_load_env(&c, err, sizeof err));
        ASSERT_EQ(c.max_pids, 999);
        setenv("SPACE_NOT_A_KEY", "1", 1);
        ASSERT_ERRNO(config_load_env(&c, err, sizeof err), EINVAL);
        unsetenv("SPACE_NOT_A_KEY");
        unsetenv("SPACE_MAX_PIDS");
}

TEST(api_error_table) {
        ApiError e = {};
        for (int i = 0; i < _API_ERROR_CODE_MAX; i++) {
                const char *s = api_error_code_to_string((ApiErrorCode) i);
                ASSERT_NOT_NULL(s);
                ASSERT_EQ(api_error_code_from_string(s), i);
                ASSERT_TRUE(api_error_code_to_status((ApiErrorCode) i) >= 200);
        }
        ASSERT_EQ(api_error_code_from_string("nope"), _API_ERROR_CODE_INVALID);
        ASSERT_EQ(api_error_code_to_status(API_NOT_FOUND), 404);
        ASSERT_EQ(api_error_code_to_status(API_INSUFFICIENT_STORAGE), 507);
        ASSERT_ERRNO(api_error(&e, -ENOENT, API_NOT_FOUND, "no sandbox '%s'", "x"), ENOENT);
        ASSERT_STREQ(e.message, "no sandbox 'x'");
        ASSERT_EQ(api_error_code_from_errno(-EDQUOT), API_INSUFFICIENT_STORAGE);
        ASSERT_EQ(api_error_code_from_errno(ELOOP), API_INVALID_PATH);
}

/* sock_relay between two socketpairs: a's and b's ends in the relay, the test holds the others. */
typedef struct RelayRun {
        int a, b;
        int r;
} RelayRun;

static void *relay_thread(void *p) {
        RelayRun *run = p;
        run->r = sock_relay(run->a, "ha", 2, run->b, "hb", 2, 4096, 10000);
        return NULL;
}

TEST(sock_relay_half_close_and_hang_up) {
        int x[2], y[2];
        char buf[16];
        pthread_t t;

        /* pending bytes first, then data both ways, then a half-close passed on */
        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, x));
        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, y));
        RelayRun run = { .a = x[1], .b = y[1] };
        ASSERT_EQ(pthread_create(&t, NULL, relay_thread, &run), 0);
        ASSERT_EQ(sock_recv_some(y[0], buf, 2, 5000), 2);
        ASSERT_TRUE(memcmp(buf, "ha", 2) == 0);
        ASSERT_EQ(sock_recv_some(x[0], buf, 2, 5000), 2);
        ASSERT_TRUE(memcmp(buf, "hb", 2) == 0);
        ASSERT_OK(sock_send_all(x[0], "ping", 4, 5000));
        ASSERT_EQ(sock_recv_some(y[0], buf, 4, 5000), 4);
        ASSERT_OK(shutdown(x[0], SHUT_WR));
        ASSERT_EQ(sock_recv_some(y[0], buf, sizeof buf, 5000), 0); /* b sees the end */
        ASSERT_OK(sock_send_all(y[0], "pong", 4, 5000));            /* and can still answer */
        ASSERT_EQ(sock_recv_some(x[0], buf, 4, 5000), 4);
        ASSERT_TRUE(memcmp(buf, "pong", 4) == 0);
        ASSERT_OK(shutdown(y[0], SHUT_WR));
        ASSERT_EQ(pthread_join(t, NULL), 0);
        ASSERT_EQ(run.r, 0);
        for (int i = 0; i < 2; i++) {
                safe_close(x[i]);
                safe_close(y[i]);
        }

        /* a side shut down both ways (a server that stops) ends the relay, though the other stays open */
        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, x));
        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, y));
        run = (RelayRun){ .a = x[1], .b = y[1] };
        ASSERT_EQ(pthread_create(&t, NULL, relay_thread, &run), 0);
        ASSERT_EQ(sock_recv_some(y[0], buf, 2, 5000), 2);
        ASSERT_EQ(sock_recv_some(x[0], buf, 2, 5000), 2); /* both pendings sent: it polls now */
        ASSERT_OK(shutdown(x[1], SHUT_RDWR));
        ASSERT_EQ(pthread_join(t, NULL), 0);
        ASSERT_EQ(run.r, 0);
        for (int i = 0; i < 2; i++) {
                safe_close(x[i]);
                safe_close(y[i]);
        }
}

/* A loopback listener on an ephemeral port, not accepting. */
static int listen_loopback(int backlog, struct sockaddr_in *ret) {
        socklen_t len = sizeof *ret;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        *ret = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        if (fd < 0 || bind(fd, (struct sockaddr *) ret, sizeof *ret) < 0 || listen(fd, backlog) < 0 ||
            getsockname(fd, (struct sockaddr *) ret, &len) < 0)
                return -1;
        return fd;
}

TEST(sock_connect_until_outcomes) {
        _cleanup_close_ int l = -EBADF, c = -EBADF, refused = -EBADF;
        struct sockaddr_in sa, closed;

        l = listen_loopback(8, &sa);
        ASSERT_TRUE(l >= 0);
        c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ASSERT_EQ(sock_connect_until(c, (struct sockaddr *) &sa, sizeof sa, mono_msec() + 5000), 0);

        /* a port nobody listens on: the listener's, once closed */
        ASSERT_TRUE((refused = listen_loopback(1, &closed)) >= 0);
        refused = safe_close(refused);
        refused = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ASSERT_EQ(sock_connect_until(refused, (struct sockaddr *) &closed, sizeof closed, mono_msec() + 5000),
                  -ECONNREFUSED);
}

TEST(sock_connect_until_deadline) {
        _cleanup_close_ int l = -EBADF;
        int fds[16];
        struct sockaddr_in sa;
        size_t n = 0;
        int r = 0;

        /* a listener that never accepts fills its queue; past it, SYNs are dropped
         * and a connect waits: the deadline ends the wait */
        l = listen_loopback(0, &sa);
        ASSERT_TRUE(l >= 0);
        for (; n < ELEMENTSOF(fds); n++) {
                fds[n] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                ASSERT_TRUE(fds[n] >= 0);
                r = sock_connect_until(fds[n], (struct sockaddr *) &sa, sizeof sa, mono_msec() + 200);
                if (r < 0) {
                        n++;
                        break;
                }
        }
        ASSERT_EQ(r, -ETIMEDOUT);
        /* a deadline already gone: no wait at all */
        ASSERT_EQ(sock_wait_until(l, POLLIN, mono_msec() - 1), -ETIMEDOUT);
        for (size_t i = 0; i < n; i++)
                safe_close(fds[i]);
}
