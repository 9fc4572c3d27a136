/* SPDX-License-Identifier: MIT */
/* The pure parts of scale-out: placement of a create on a worker, the
 * cluster token file and its comparison, host:port parsing, and the byte
 * relay of proxied agent streams, the framed and checksummed streams of
 * shipping, cluster TLS sessions. (The store side is in test-store.c, the
 * whole in tests/e2e/test_scaleout.py.) */

#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "fd-util.h"
#include "store.h"
#include "test.h"
#include "cluster-net.h"
#include "cluster-tls.h"
#include "ship-stream.h"
#include "worker-placement.h"

#define NOW (INT64_C(1795914000) * 1000000)

static WorkerNode node(const char *name, uint64_t mem, uint32_t used_sandboxes, uint64_t used_mem,
                       const char *templates) {
        WorkerNode w = { .state = WORKER_LIVE, .cpu_millis = 4000, .memory_mb = mem, .disk_mb = 10000,
                         .heartbeat_usec = NOW, .sandboxes = used_sandboxes, .used_memory_mb = used_mem,
                         .used_cpu_millis = used_sandboxes * 1000 };
        snprintf(w.name, sizeof w.name, "%s", name);
        snprintf(w.runtimes, sizeof w.runtimes, "ns");
        snprintf(w.templates, sizeof w.templates, "%s", templates);
        return w;
}

static Sandbox request(uint64_t mem) {
        Sandbox sb = { .cpu_millis = 1000, .memory_mb = mem, .disk_mb = 100 };
        snprintf(sb.template_name, sizeof sb.template_name, "base");
        snprintf(sb.runtime, sizeof sb.runtime, "ns");
        return sb;
}

TEST(placement_spreads_prefers_locality_and_skips_the_dead_and_full) {
        WorkerNode w[5];
        size_t order[5], n;
        Sandbox sb = request(512);

        w[0] = node("a", 8192, 2, 1024, "base");
        w[1] = node("b", 8192, 0, 0, "base");
        w[2] = node("c", 8192, 0, 0, "other");          /* no template: after those that have it */
        w[3] = node("d", 8192, 0, 0, "base");
        w[3].heartbeat_usec = NOW - 60 * 1000000;        /* silent */
        w[4] = node("e", 1024, 1, 768, "base");          /* full: 768 + 512 > 1024 */
        worker_place(w, 5, &sb, NOW - 10 * 1000000, order, &n);
        ASSERT_EQ(n, 3U);
        ASSERT_STREQ(w[order[0]].name, "b");
        ASSERT_STREQ(w[order[1]].name, "a");
        ASSERT_STREQ(w[order[2]].name, "c");

        w[1].state = WORKER_SUSPECT;
        worker_place(w, 5, &sb, NOW - 10 * 1000000, order, &n);
        ASSERT_EQ(n, 2U);
        ASSERT_STREQ(w[order[0]].name, "a");

        /* equal load: fewest sandboxes, then the name */
        w[0] = node("x", 8192, 0, 0, "base");
        w[1] = node("m", 8192, 0, 0, "base");
        worker_place(w, 2, &sb, NOW - 10 * 1000000, order, &n);
        ASSERT_EQ(n, 2U);
        ASSERT_STREQ(w[order[0]].name, "m");

        /* a runtime it does not offer */
        snprintf(sb.runtime, sizeof sb.runtime, "vm");
        worker_place(w, 2, &sb, NOW - 10 * 1000000, order, &n);
        ASSERT_EQ(n, 0U);
        worker_place(NULL, 0, &sb, NOW, order, &n);
        ASSERT_EQ(n, 0U);
}

TEST(placement_prefers_the_exact_version) {
        WorkerNode w[2];
        size_t order[2], n;
        Sandbox sb = request(512);

        /* "a" holds the name with an older version's files (it was away); "b" the version asked for */
        w[0] = node("a", 8192, 0, 0, "base,base@v1");
        w[1] = node("b", 8192, 3, 3072, "base,base@v1,base@v2");
        snprintf(sb.template_pool, sizeof sb.template_pool, "base@v2");
        worker_place(w, 2, &sb, NOW - 10 * 1000000, order, &n);
        ASSERT_EQ(n, 2U);
        ASSERT_STREQ(w[order[0]].name, "b");  /* busier, but it holds the version */
        ASSERT_STREQ(w[order[1]].name, "a");
        /* without a pool name: the name alone, and then the load decides */
        sb.template_pool[0] = 0;
        worker_place(w, 2, &sb, NOW - 10 * 1000000, order, &n);
        ASSERT_STREQ(w[order[0]].name, "a");
}

TEST(placement_reserves_disk) {
        WorkerNode w[2];
        size_t order[2], n;
        Sandbox sb = request(512);

        w[0] = node("a", 8192, 0, 0, "base");
        w[1] = node("b", 8192, 0, 0, "base");
        w[0].used_disk_mb = 9950;                        /* 9950 + 100 > 10000 */
        w[1].used_disk_mb = 9900;                        /* exactly fits */
        worker_place(w, 2, &sb, NOW - 10 * 1000000, order, &n);
        ASSERT_EQ(n, 1U);
        ASSERT_STREQ(w[order[0]].name, "b");
        w[1].used_disk_mb = 9901;
        worker_place(w, 2, &sb, NOW - 10 * 1000000, order, &n);
        ASSERT_EQ(n, 0U);
        /* capacity 0: not limited */
        w[0].disk_mb = 0;
        worker_place(w, 2, &sb, NOW - 10 * 1000000, order, &n);
        ASSERT_EQ(n, 1U);
        ASSERT_STREQ(w[order[0]].name, "a");
}

TEST(list_has) {
        ASSERT_TRUE(worker_list_has("base,python", "python"));
        ASSERT_TRUE(worker_list_has("base", "base"));
        ASSERT_FALSE(worker_list_has("base,python", "pyth"));
        ASSERT_FALSE(worker_list_has("basement", "base"));
        ASSERT_FALSE(worker_list_has("", "base"));
        ASSERT_FALSE(worker_list_has("base", ""));
        ASSERT_FALSE(worker_list_has(NULL, "base"));
}

static int write_file(const char *path, const char *text, mode_t mode) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        if (fd < 0)
                return -errno;
        (void) fchmod(fd, mode);
        int r = loop_write(fd, text, strlen(text));
        close(fd);
        return r;
}

TEST(token_file) {
        char path[4096];
        char *t = NULL;

        snprintf(path, sizeof path, "%s/token", test_tmpdir());
        ASSERT_OK(write_file(path, "0123456789abcdef0123\n", 0600));
        ASSERT_OK(cluster_token_load(path, &t));
        ASSERT_STREQ(t, "0123456789abcdef0123");
        ASSERT_TRUE(cluster_token_equal(t, "0123456789abcdef0123"));
        ASSERT_FALSE(cluster_token_equal(t, "0123456789abcdef0124"));
        ASSERT_FALSE(cluster_token_equal(t, "0123456789abcdef012"));
        ASSERT_FALSE(cluster_token_equal(t, ""));
        ASSERT_FALSE(cluster_token_equal(t, NULL));
        t = cluster_token_free(t);

        ASSERT_OK(write_file(path, "0123456789abcdef0123\n", 0640)); /* others may read it */
        ASSERT_ERRNO(cluster_token_load(path, &t), EPERM);
        ASSERT_OK(write_file(path, "short\n", 0600));
        ASSERT_ERRNO(cluster_token_load(path, &t), EINVAL);
        ASSERT_OK(write_file(path, "0123456789 abcdef0123\n", 0600));
        ASSERT_ERRNO(cluster_token_load(path, &t), EINVAL);
        snprintf(path, sizeof path, "%s/none", test_tmpdir());
        ASSERT_ERRNO(cluster_token_load(path, &t), ENOENT);
        ASSERT_NULL(t);
}

/* the store keeps the cluster token's fingerprint: the first process records
 * it, one with another token is refused */
TEST(token_fingerprint_and_check) {
        char fp[CLUSTER_TOKEN_FINGERPRINT_HEX + 1], other[CLUSTER_TOKEN_FINGERPRINT_HEX + 1], url[4200];
        Store *s = NULL;

        /* HMAC-SHA256(token, label), first 16 bytes (computed independently) */
        ASSERT_OK(cluster_token_fingerprint("0123456789abcdef0123", fp));
        ASSERT_STREQ(fp, "a5c677b6ee874c7c4979842390d59d67");
        ASSERT_OK(cluster_token_fingerprint("0123456789abcdef0124", other));
        ASSERT_FALSE(streq(fp, other));
        ASSERT_ERRNO(cluster_token_fingerprint(NULL, fp), EINVAL);

        snprintf(url, sizeof url, "sqlite:%s/cluster.db", test_tmpdir());
        ASSERT_OK(store_open(url, &s));
        ASSERT_OK(cluster_token_check(s, "0123456789abcdef0123", "a"));
        ASSERT_OK(cluster_token_check(s, "0123456789abcdef0123", "a")); /* again: the same */
        ASSERT_ERRNO(cluster_token_check(s, "0123456789abcdef0124", "b"), EKEYREJECTED);
        ASSERT_OK(cluster_token_check(s, "0123456789abcdef0123", "a"));
        store_close(s);
}

TEST(host_port) {
        char h[64], p[8];

        ASSERT_OK(net_split_host_port("10.0.0.1:7071", h, sizeof h, p, sizeof p));
        ASSERT_STREQ(h, "10.0.0.1");
        ASSERT_STREQ(p, "7071");
        ASSERT_OK(net_split_host_port("[::1]:80", h, sizeof h, p, sizeof p));
        ASSERT_STREQ(h, "::1");
        ASSERT_OK(net_split_host_port(":80", h, sizeof h, p, sizeof p));
        ASSERT_STREQ(h, "");
        ASSERT_ERRNO(net_split_host_port("10.0.0.1", h, sizeof h, p, sizeof p), EINVAL);
        ASSERT_ERRNO(net_split_host_port("10.0.0.1:", h, sizeof h, p, sizeof p), EINVAL);
        ASSERT_ERRNO(net_split_host_port("10.0.0.1:7x", h, sizeof h, p, sizeof p), EINVAL);
        ASSERT_ERRNO(net_split_host_port("[::1]80", h, sizeof h, p, sizeof p), EINVAL);
        ASSERT_ERRNO(net_split_host_port("h:123456789", h, sizeof h, p, sizeof p), EINVAL);
}

TEST(connect_to_nothing_fails_fast) {
        int fd = -1, l = -1;
        char addr[64];
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;

        /* a port we bound and closed: refused at once */
        ASSERT_OK(net_listen("127.0.0.1:0", 1, &l));
        ASSERT_EQ(getsockname(l, (struct sockaddr *) &ss, &len), 0);
        snprintf(addr, sizeof addr, "127.0.0.1:%u", ntohs(((struct sockaddr_in *) &ss)->sin_port));
        close(l);
        ASSERT_ERRNO(net_connect(addr, 2000, &fd), ECONNREFUSED);
        ASSERT_TRUE(net_connect("not-an-address", 2000, &fd) < 0);
}

TEST(splice_relays_both_ways_with_eof) {
        int a[2], b[2];
        char buf[256 * 1024];
        pid_t pid;

        /* a[0] ⇄ relay ⇄ b[0]; the test writes on a[1] and reads on b[1] and back */
        ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, a), 0);
        ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, b), 0);
        pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                close(a[1]);
                close(b[1]);
                _exit(net_splice_both(a[0], b[0]) < 0 ? 1 : 0);
        }
        close(a[0]);
        close(b[0]);
        for (size_t i = 0; i < sizeof buf; i++)
                buf[i] = (char) (i * 7);
        pid_t w = fork();
        ASSERT_TRUE(w >= 0);
        if (w == 0) { /* writer: more than any socket buffer, then EOF */
                _exit(loop_write(a[1], buf, sizeof buf) < 0 || shutdown(a[1], SHUT_WR) < 0 ? 1 : 0);
        }
        size_t got = 0;
        for (;;) {
                char tmp[8192];
                ssize_t k = read(b[1], tmp, sizeof tmp);
                ASSERT_TRUE(k >= 0);
                if (k == 0)
                        break; /* the EOF came through */
                ASSERT_TRUE(got + (size_t) k <= sizeof buf);
                ASSERT_EQ(memcmp(tmp, buf + got, (size_t) k), 0);
                got += (size_t) k;
        }
        ASSERT_EQ(got, sizeof buf);
        int st;
        ASSERT_EQ(waitpid(w, &st, 0), w);
        ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        /* the other way still works after one direction ended */
        ASSERT_OK(loop_write(b[1], "back", 4));
        ASSERT_EQ(shutdown(b[1], SHUT_WR), 0);
        char back[8] = {};
        ASSERT_EQ(read(a[1], back, sizeof back), 4);
        ASSERT_STREQ(back, "back");
        ASSERT_EQ(read(a[1], back, sizeof back), 0);
        ASSERT_EQ(waitpid(pid, &st, 0), pid);
        ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        close(a[1]);
        close(b[1]);
}

/* scripts/cluster-certs.sh DIR WHAT [NAME] */
static void certs(const char *dir, const char *what, const char *name) {
        pid_t pid = fork();
        int st;

        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
                if (null < 0 || dup2(null, STDOUT_FILENO) < 0)
                        _exit(127);
                execl("/bin/sh", "sh", SPACE_SOURCE_ROOT "/scripts/cluster-certs.sh", dir, what, name, (char *) NULL);
                _exit(127);
        }
        ASSERT_EQ(waitpid(pid, &st, 0), pid);
        ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* One call over cluster TLS to the listener at addr as a client of worker:
 * its "hi", then our EOF and its; the handshake's result. */
static int tls_call(const char *addr, const char *worker, char *why, size_t why_size) {
        int fd = -EBADF, plain = -EBADF, r;
        char buf[8] = {};

        why[0] = 0;
        ASSERT_OK(net_connect(addr, 2000, &fd));
        r = cluster_tls_client(fd, worker, addr, &plain, why, why_size);
        if (r < 0)
                return r;
        ASSERT_EQ(net_read_line(plain, buf, sizeof buf, 5000, NULL), 0); /* the ticket came before it */
        ASSERT_STREQ(buf, "hi");
        ASSERT_EQ(shutdown(plain, SHUT_WR), 0);
        ASSERT_EQ(read(plain, buf, sizeof buf), 0);
        close(plain);
        return 0;
}

/* tls_call without asserting (in a thread): 0 or -errno. */
static int tls_call_quiet(const char *addr, const char *worker) {
        int fd = -EBADF, plain = -EBADF, r;
        char buf[8] = {}, why[320];

        r = net_connect(addr, 2000, &fd);
        if (r >= 0)
                r = cluster_tls_client(fd, worker, addr, &plain, why, sizeof why);
        if (r >= 0)
                r = net_read_line(plain, buf, sizeof buf, 5000, NULL);
        if (r >= 0 && !streq(buf, "hi"))
                r = -EBADMSG;
        if (r >= 0 && shutdown(plain, SHUT_WR) < 0)
                r = -errno;
        if (r >= 0 && read(plain, buf, sizeof buf) != 0)
                r = -EBADMSG;
        if (plain >= 0)
                close(plain);
        return r;
}

typedef struct Caller {
        const char *addr;
        int failed;
} Caller;

static void *caller_thread(void *userdata) {
        Caller *c = userdata;
        for (int i = 0; i < 20; i++)
                if (tls_call_quiet(c->addr, "w1") < 0)
                        c->failed++;
        return NULL;
}

/* The CA file written again, in place by rename (as cluster-certs.sh does). */
static void rewrite(const char *dir, const char *ca) {
        char copy[512], pem[8192];
        int in = open(ca, O_RDONLY | O_CLOEXEC), out;
        ssize_t n = read(in, pem, sizeof pem);

        ASSERT_TRUE(in >= 0 && n > 0);
        close(in);
        snprintf(copy, sizeof copy, "%s/ca.new", dir);
        out = open(copy, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ASSERT_TRUE(out >= 0);
        ASSERT_OK(loop_write(out, pem, (size_t) n));
        close(out);
        ASSERT_EQ(rename(copy, ca), 0);
}

/* The worker's side of one connection: "hi", then until the client's EOF. */
static void *serve_thread(void *userdata) {
        int c = (int) (intptr_t) userdata, plain = -EBADF;
        char tmp[64];

        if (cluster_tls_server(c, &plain, tmp, sizeof tmp) < 0)
                return NULL;
        (void) loop_write(plain, "hi\n", 3);
        while (read(plain, tmp, sizeof tmp) > 0)
                ;
        close(plain);
        return NULL;
}

/* A session is resumed only with the peer (name and address) it was made
 * with, and not past a rewritten CA file; a refused name costs the good
 * one nothing. The listener is a child of ours with the same files. */
TEST(tls_sessions_resumed_per_peer_and_ended_by_rotation) {
        const char *d = test_tmpdir();
        char cert[512], key[512], ca[512], addr[64], why[320];
        uint64_t full0, res0, full, res;
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int l = -EBADF, st;
        pid_t pid;

        certs(d, "ca", NULL);
        certs(d, "node", "w1");
        snprintf(cert, sizeof cert, "%s/w1.crt", d);
        snprintf(key, sizeof key, "%s/w1.key", d);
        snprintf(ca, sizeof ca, "%s/ca.crt", d);
        ASSERT_OK(cluster_tls_setup(cert, key, ca));
        ASSERT_OK(net_listen("127.0.0.1:0", 16, &l));
        ASSERT_EQ(getsockname(l, (struct sockaddr *) &ss, &len), 0);
        snprintf(addr, sizeof addr, "127.0.0.1:%u", ntohs(((struct sockaddr_in *) &ss)->sin_port));
        pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) { /* the worker's side, a thread per connection; ends with us */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() == 1)
                        _exit(1);
                for (;;) {
                        int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
                        pthread_t th;
                        if (c >= 0 && pthread_create(&th, NULL, serve_thread, (void *) (intptr_t) c) == 0)
                                (void) pthread_detach(th);
                        else if (c >= 0)
                                close(c);
                }
        }
        close(l);
        cluster_tls_handshakes(&full0, &res0);
        ASSERT_OK(tls_call(addr, "w1", why, sizeof why));
        ASSERT_OK(tls_call(addr, "w1", why, sizeof why));
        cluster_tls_handshakes(&full, &res);
        ASSERT_EQ(full - full0, 1);
        ASSERT_EQ(res - res0, 1);
        /* the same address under another name: w1's session is not offered, the name is checked */
        ASSERT_ERRNO(tls_call(addr, "w2", why, sizeof why), EPROTO);
        ASSERT_TRUE(strstr(why, "hostname mismatch"));
        cluster_tls_handshakes(&full, &res);
        ASSERT_EQ(res - res0, 1);
        ASSERT_OK(tls_call(addr, "w1", why, sizeof why));
        cluster_tls_handshakes(&full, &res);
        ASSERT_EQ(res - res0, 2);
        /* the CA file written again (the same CA): both sides make new contexts, a full handshake */
        rewrite(d, ca);
        ASSERT_OK(tls_call(addr, "w1", why, sizeof why));
        cluster_tls_handshakes(&full, &res);
        ASSERT_EQ(full - full0, 2);
        ASSERT_EQ(res - res0, 2);
        ASSERT_OK(tls_call(addr, "w1", why, sizeof why));
        cluster_tls_handshakes(&full, &res);
        ASSERT_EQ(res - res0, 3);
        /* threads calling while the files change: every call served, both contexts shared */
        {
                Caller callers[6];
                pthread_t th[6];
                for (size_t i = 0; i < 6; i++) {
                        callers[i] = (Caller){ .addr = addr };
                        ASSERT_EQ(pthread_create(&th[i], NULL, caller_thread, &callers[i]), 0);
                }
                for (int i = 0; i < 5; i++) {
                        usleep(20 * 1000);
                        rewrite(d, ca);
                }
                for (size_t i = 0; i < 6; i++) {
                        ASSERT_EQ(pthread_join(th[i], NULL), 0);
                        ASSERT_EQ(callers[i].failed, 0);
                }
        }
        cluster_tls_handshakes(&full, &res);
        ASSERT_TRUE(res - res0 > 3 && full - full0 > 2);
        kill(pid, SIGKILL);
        ASSERT_EQ(waitpid(pid, &st, 0), pid);
}

/* A memfd holding n bytes of a pattern. */
static int pattern_fd(size_t n) {
        int fd = memfd_create("pattern", MFD_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        for (size_t i = 0; i < n; i++) {
                uint8_t b = (uint8_t) (i * 7 + i / 251);
                ASSERT_EQ(write(fd, &b, 1), 1);
        }
        ASSERT_EQ(lseek(fd, 0, SEEK_SET), 0);
        return fd;
}

static int finish_fails(void *userdata) {
        return -EIO;
}

TEST(ship_stream_roundtrip_and_refusals) {
        char sha_out[SHIP_SHA256_HEX], sha_in[SHIP_SHA256_HEX];
        const char *why = NULL;
        uint64_t sent = 0, got = 0;
        int sp[2], in, out;

        /* a stream of several chunks arrives whole, with the sender's sha256 */
        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0 ? -errno : 0);
        in = pattern_fd(SHIP_CHUNK_MAX + 1000);
        out = memfd_create("out", MFD_CLOEXEC);
        /* more than a socket buffer: a child sends (its sha256 through a pipe) */
        int shp[2];
        ASSERT_OK(pipe2(shp, O_CLOEXEC) < 0 ? -errno : 0);
        pid_t pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                if (ship_stream_send(sp[0], in, NULL, NULL, sha_out, &sent) < 0 ||
                    write(shp[1], sha_out, sizeof sha_out) != (ssize_t) sizeof sha_out)
                        _exit(1);
                _exit(sent == (uint64_t) SHIP_CHUNK_MAX + 1000 ? 0 : 1);
        }
        close(shp[1]);
        ASSERT_OK(ship_stream_recv(sp[1], out, 0, sha_in, &got, &why));
        ASSERT_EQ(got, (uint64_t) SHIP_CHUNK_MAX + 1000);
        ASSERT_EQ(read(shp[0], sha_out, sizeof sha_out), (ssize_t) sizeof sha_out);
        ASSERT_STREQ(sha_in, sha_out);
        ASSERT_EQ(lseek(out, 0, SEEK_END), (off_t) got);
        int status = 0;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        close(shp[0]);
        close(sp[0]);
        close(sp[1]);
        /* ... but not past max_bytes (a small stream: it fits the socket's buffer) */
        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0 ? -errno : 0);
        close(in);
        in = pattern_fd(5000);
        ASSERT_OK(ship_stream_send(sp[0], in, NULL, NULL, NULL, &sent));
        ASSERT_ERRNO(ship_stream_recv(sp[1], out, 1000, NULL, NULL, &why), EFBIG);
        close(sp[0]);
        close(sp[1]);

        /* a producer that failed: no end of stream is sent, the receiver sees the cut */
        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0 ? -errno : 0);
        ASSERT_EQ(lseek(in, 0, SEEK_SET), 0);
        ASSERT_ERRNO(ship_stream_send(sp[0], in, finish_fails, NULL, NULL, NULL), EIO);
        close(sp[0]);
        ASSERT_ERRNO(ship_stream_recv(sp[1], out, 0, NULL, NULL, &why), ECONNRESET);
        close(sp[1]);

        /* hand-made frames: a flipped byte (the sha256 is the original's), a
         * wrong length, an oversized chunk, a malformed trailer */
        static const struct {
                const char *frames;
                size_t n;
                const char *why;
        } bad[] = {
                /* "abc": sha256 ba7816bf... */
                { "\0\0\0\3abd\0\0\0\0{\"sha256\":\"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\",\"bytes\":3}\n",
                  sizeof("\0\0\0\3abd\0\0\0\0{\"sha256\":\"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\",\"bytes\":3}\n") - 1, "sha256" },
                { "\0\0\0\3abc\0\0\0\0{\"sha256\":\"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\",\"bytes\":4}\n",
                  sizeof("\0\0\0\3abc\0\0\0\0{\"sha256\":\"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\",\"bytes\":4}\n") - 1, "length" },
                { "\x7f\0\0\0abc", 7, "chunk" },
                { "\0\0\0\3abc\0\0\0\0{\"sha\":1}\n", 7 + 4 + 10, "trailer" },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0 ? -errno : 0);
                ASSERT_OK(loop_write(sp[0], bad[i].frames, bad[i].n));
                close(sp[0]);
                why = NULL;
                ASSERT_ERRNO(ship_stream_recv(sp[1], out, 0, NULL, NULL, &why), EBADMSG);
                ASSERT_TRUE(why && strstr(why, bad[i].why));
                close(sp[1]);
        }
        /* the same frames, right: taken */
        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0 ? -errno : 0);
        ASSERT_OK(loop_write(sp[0], "\0\0\0\3abc\0\0\0\0{\"sha256\":\"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\",\"bytes\":3}\n",
                             7 + 4 + 88));
        ASSERT_OK(ship_stream_recv(sp[1], out, 0, sha_in, &got, &why));
        ASSERT_EQ(got, 3U);
        close(sp[0]);
        close(sp[1]);
        close(in);
        close(out);
}
