/* SPDX-License-Identifier: MIT */
/* The table of worker ops (worker-proto.h), its request decoder, and the
 * client's use of it against a scripted fake worker on a unix socket: a
 * connection that breaks after a non-idempotent request went out fails the
 * call (outcome unknown) and the request is never sent twice; an idempotent
 * one is sent again; a connection the worker closed since the last call is
 * replaced before anything is sent; a worker that never answers fails the
 * call at its deadline. */

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "json.h"
#include "str-util.h"
#include "test.h"
#include "worker-client.h"
#include "worker-proto.h"

TEST(op_table_names_round_trip_and_rows_are_consistent) {
        for (int k = 0; k < _WORKER_OP_MAX; k++) {
                const WorkerOp *op = worker_op(k);
                ASSERT_NOT_NULL(op->name);
                ASSERT_EQ(worker_op_kind_from_string(op->name), k);
                ASSERT_STREQ(worker_op_kind_to_string(k), op->name);
                ASSERT_TRUE(op->deadline_msec > 0);
                /* the listener serves its own ops: none is relayed to the worker process */
                ASSERT_FALSE(op->listener && op->relayed);
                /* every op the worker process serves is relayed, but the import of a tar path on the
                 * peer's host (build_layer is relayed: the listener refuses its "tar" from a peer) */
                if (!op->listener)
                        ASSERT_EQ(op->relayed, k != WORKER_OP_TEMPLATE_IMPORT);
                for (int j = 0; j < k; j++)
                        ASSERT_FALSE(streq(worker_op(j)->name, op->name));
        }
        ASSERT_EQ(worker_op_kind_from_string("nope"), _WORKER_OP_INVALID);
        ASSERT_EQ(worker_op_kind_from_string(NULL), _WORKER_OP_INVALID);
        ASSERT_NULL(worker_op_kind_to_string(_WORKER_OP_MAX));
        ASSERT_NULL(worker_op_kind_to_string(_WORKER_OP_INVALID));
        /* the ops whose reply a booting guest defers are the ones that start one */
        ASSERT_TRUE(worker_op(WORKER_OP_CREATE)->deferred && worker_op(WORKER_OP_BRANCH)->deferred);
        ASSERT_FALSE(worker_op(WORKER_OP_INFO)->deferred);
        /* warm-pool claims work in a cluster */
        ASSERT_TRUE(worker_op(WORKER_OP_TAKE_WARM)->relayed);
        /* a build runs on one worker of a cluster: its steps and its publish go there over the network,
         * a step's files with build_layer_put (served by the listener, which receives them) */
        ASSERT_TRUE(worker_op(WORKER_OP_BUILD_LAYER)->relayed && worker_op(WORKER_OP_BUILD_PUBLISH)->relayed);
        ASSERT_TRUE(worker_op(WORKER_OP_BUILD_LAYER_PUT)->listener);
        ASSERT_FALSE(worker_op(WORKER_OP_BUILD_LAYER)->idempotent);
        /* a build's name lookup only reads a layer: a peer may ask it, and ask it again */
        ASSERT_TRUE(worker_op(WORKER_OP_LAYER_IDS)->relayed && worker_op(WORKER_OP_LAYER_IDS)->idempotent);
        /* what creates must never run twice; what only reads or sets may */
        ASSERT_FALSE(worker_op(WORKER_OP_CREATE)->idempotent);
        ASSERT_FALSE(worker_op(WORKER_OP_BRANCH)->idempotent);
        ASSERT_FALSE(worker_op(WORKER_OP_CHECKPOINT)->idempotent);
        ASSERT_TRUE(worker_op(WORKER_OP_DESTROY)->idempotent);
        ASSERT_TRUE(worker_op(WORKER_OP_INFO)->idempotent);
        /* a long op waits longer than a question */
        ASSERT_TRUE(worker_op(WORKER_OP_CREATE)->deadline_msec > worker_op(WORKER_OP_INFO)->deadline_msec);
}

static int decode(const char *line, WorkerOpKind *ret_kind, char *err, size_t size) {
        _cleanup_(worker_request_done) WorkerRequest req = {};
        int r = worker_request_decode(line, strlen(line), &req, err, size);
        if (r >= 0) {
                ASSERT_EQ(json_type(req.json), JSON_OBJECT);
                *ret_kind = req.kind;
        }
        return r;
}

TEST(request_decoder_checks_op_and_shape) {
        WorkerOpKind k = _WORKER_OP_INVALID;
        char err[192];

        ASSERT_OK(decode("{\"op\":\"info\"}", &k, err, sizeof err));
        ASSERT_EQ(k, WORKER_OP_INFO);
        ASSERT_OK(decode("{\"op\":\"destroy\",\"id\":\"abc\"}", &k, err, sizeof err));
        ASSERT_EQ(k, WORKER_OP_DESTROY);
        ASSERT_OK(decode("{\"op\":\"take_warm\",\"sandbox\":{\"id\":\"x\"}}", &k, err, sizeof err));
        ASSERT_EQ(k, WORKER_OP_TAKE_WARM);
        ASSERT_OK(decode("{\"op\":\"branch\",\"source\":\"s\",\"sandboxes\":[]}", &k, err, sizeof err));
        ASSERT_OK(decode("{\"op\":\"layer_ids\",\"key\":\"k\",\"user\":\"app\"}", &k, err, sizeof err));
        ASSERT_EQ(k, WORKER_OP_LAYER_IDS);
        ASSERT_ERRNO(decode("{\"op\":\"layer_ids\",\"user\":\"app\"}", &k, err, sizeof err), EBADMSG);
        ASSERT_TRUE(strstr(err, "'layer_ids' needs 'key'"));

        ASSERT_ERRNO(decode("{\"op\":\"frobnicate\"}", &k, err, sizeof err), EOPNOTSUPP);
        ASSERT_TRUE(strstr(err, "unknown worker op 'frobnicate'"));
        ASSERT_ERRNO(decode("{\"op\":\"info\\u0000x\"}", &k, err, sizeof err), EOPNOTSUPP);
        ASSERT_ERRNO(decode("{\"op\":\"destroy\"}", &k, err, sizeof err), EBADMSG);
        ASSERT_TRUE(strstr(err, "'destroy' needs 'id'"));
        ASSERT_ERRNO(decode("{\"op\":\"destroy\",\"id\":7}", &k, err, sizeof err), EBADMSG);
        ASSERT_ERRNO(decode("{\"op\":\"create\",\"sandbox\":[]}", &k, err, sizeof err), EBADMSG);
        ASSERT_TRUE(strstr(err, "an object"));
        ASSERT_ERRNO(decode("{\"op\":\"branch\",\"source\":\"s\",\"sandboxes\":{}}", &k, err, sizeof err), EBADMSG);
        ASSERT_ERRNO(decode("{\"op\":5}", &k, err, sizeof err), EBADMSG);
        ASSERT_ERRNO(decode("[\"op\"]", &k, err, sizeof err), EBADMSG);
        ASSERT_ERRNO(decode("{\"op\":\"info\"", &k, err, sizeof err), EBADMSG);
        ASSERT_TRUE(startswith(err, "not JSON"));
        ASSERT_ERRNO(decode("", &k, err, sizeof err), EBADMSG);
}

/* ---- a scripted fake worker ---- */

typedef enum Act {
        ACT_REPLY,            /* answers {"ok":true,"pid":1,"starttime":2} */
        ACT_CLOSE,            /* reads the line, closes without an answer */
        ACT_REPLY_THEN_CLOSE, /* answers, then closes */
        ACT_SILENT,           /* reads the line, never answers (until the client goes) */
} Act;

typedef struct Fake {
        int listen_fd;
        char path[108];
        Act script[8];
        atomic_int next;       /* the script's next step */
        atomic_int lines;      /* request lines read */
        atomic_int creates;    /* of which "create" */
        atomic_int connections;
        int closed_fd[2];      /* a byte per connection closed by the fake */
        pthread_t thread;
} Fake;

static Act next_act(Fake *f) {
        int i = atomic_fetch_add(&f->next, 1);
        return i < (int) ELEMENTSOF(f->script) ? f->script[i] : ACT_REPLY;
}

/* Serves one connection: line by line, each by the script's next step. */
static void serve(Fake *f, int fd) {
        char buf[65536];
        size_t n = 0;

        for (;;) {
                char *nl;
                ssize_t k = read(fd, buf + n, sizeof buf - n);
                if (k <= 0)
                        return;
                n += (size_t) k;
                while ((nl = memchr(buf, '\n', n))) {
                        static const char reply[] = "{\"ok\":true,\"pid\":1,\"starttime\":2}\n";
                        size_t len = (size_t) (nl - buf) + 1;
                        Act a;

                        atomic_fetch_add(&f->lines, 1);
                        if (memmem(buf, len, "\"op\":\"create\"", 13))
                                atomic_fetch_add(&f->creates, 1);
                        memmove(buf, buf + len, n - len);
                        n -= len;
                        a = next_act(f);
                        if (a == ACT_CLOSE)
                                return;
                        if (a == ACT_SILENT)
                                continue;
                        (void) !write(fd, reply, sizeof reply - 1);
                        if (a == ACT_REPLY_THEN_CLOSE)
                                return;
                }
        }
}

static void *fake_thread(void *userdata) {
        Fake *f = userdata;

        for (;;) {
                int fd = accept4(f->listen_fd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0)
                        return NULL; /* the listener was shut down */
                atomic_fetch_add(&f->connections, 1);
                serve(f, fd);
                safe_close(fd);
                (void) !write(f->closed_fd[1], "x", 1);
        }
}

static void fake_start(Fake *f) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        *f = (Fake){ .listen_fd = -EBADF };
        snprintf(f->path, sizeof f->path, "%s/worker.sock", test_tmpdir());
        memcpy(sa.sun_path, f->path, strlen(f->path) + 1);
        f->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ASSERT_TRUE(f->listen_fd >= 0);
        ASSERT_OK(bind(f->listen_fd, (struct sockaddr *) &sa, sizeof sa));
        ASSERT_OK(listen(f->listen_fd, 16));
        ASSERT_OK(pipe2(f->closed_fd, O_CLOEXEC));
        ASSERT_EQ(pthread_create(&f->thread, NULL, fake_thread, f), 0);
}

static void fake_stop(Fake *f) {
        (void) shutdown(f->listen_fd, SHUT_RDWR);
        pthread_join(f->thread, NULL);
        safe_close(f->listen_fd);
        safe_close(f->closed_fd[0]);
        safe_close(f->closed_fd[1]);
}

static void fake_script(Fake *f, const Act *acts, size_t n) {
        for (size_t i = 0; i < ELEMENTSOF(f->script); i++)
                f->script[i] = i < n ? acts[i] : ACT_REPLY;
        atomic_store(&f->next, 0);
        atomic_store(&f->lines, 0);
        atomic_store(&f->creates, 0);
}

/* Waits until the fake has closed a connection. */
static void fake_wait_closed(Fake *f) {
        struct pollfd p = { .fd = f->closed_fd[0], .events = POLLIN };
        char c;
        ASSERT_EQ(poll(&p, 1, 10000), 1);
        ASSERT_EQ(read(f->closed_fd[0], &c, 1), 1);
}

static WorkerClient *fake_client(Fake *f) {
        char addr[128];
        WorkerClient *w = NULL;
        snprintf(addr, sizeof addr, "unix:%s", f->path);
        ASSERT_OK(worker_client_new(addr, test_tmpdir(), &w));
        return w;
}

static Sandbox sandbox(void) {
        Sandbox sb = { .cpu_millis = 1000, .memory_mb = 256, .disk_mb = 256, .pids_max = 64 };
        snprintf(sb.id, sizeof sb.id, "sbtest");
        snprintf(sb.template_name, sizeof sb.template_name, "base");
        return sb;
}

TEST(client_never_sends_a_create_twice_after_the_connection_broke) {
        _cleanup_(worker_client_freep) WorkerClient *w = NULL;
        static const Act acts[] = { ACT_CLOSE };
        Sandbox sb = sandbox();
        ApiError e = {};
        int64_t pid = 0;
        uint64_t st = 0;
        Fake f;

        fake_start(&f);
        w = fake_client(&f);
        fake_script(&f, acts, ELEMENTSOF(acts));
        ASSERT_TRUE(worker_sandbox_create(w, &sb, &pid, &st, &e) < 0);
        ASSERT_EQ(e.code, API_WORKER_UNAVAILABLE); /* the local worker: 503 with Retry-After */
        ASSERT_TRUE(strstr(e.message, "'create' was sent"));
        ASSERT_TRUE(strstr(e.message, "outcome is unknown"));
        /* the call has returned: the fake read all it will ever get of it */
        ASSERT_EQ(atomic_load(&f.creates), 1);
        ASSERT_EQ(atomic_load(&f.lines), 1);
        ASSERT_EQ(atomic_load(&f.connections), 1);

        /* and the next create works (a fresh connection) */
        fake_script(&f, NULL, 0);
        ASSERT_OK(worker_sandbox_create(w, &sb, &pid, &st, &e));
        ASSERT_EQ(pid, 1);
        ASSERT_EQ(atomic_load(&f.creates), 1);
        w = worker_client_free(w);
        fake_stop(&f);
}

TEST(client_sends_an_idempotent_op_again_after_the_connection_broke) {
        _cleanup_(worker_client_freep) WorkerClient *w = NULL;
        static const Act acts[] = { ACT_CLOSE, ACT_REPLY };
        ApiError e = {};
        Fake f;

        fake_start(&f);
        w = fake_client(&f);
        fake_script(&f, acts, ELEMENTSOF(acts));
        ASSERT_OK(worker_sandbox_destroy(w, "sbtest", &e));
        ASSERT_EQ(atomic_load(&f.lines), 2);
        ASSERT_EQ(atomic_load(&f.connections), 2);
        w = worker_client_free(w);
        fake_stop(&f);
}

TEST(client_replaces_a_connection_closed_since_the_last_call) {
        _cleanup_(worker_client_freep) WorkerClient *w = NULL;
        static const Act acts[] = { ACT_REPLY_THEN_CLOSE, ACT_REPLY };
        Sandbox sb = sandbox();
        ApiError e = {};
        int64_t pid = 0;
        uint64_t st = 0;
        Fake f;

        fake_start(&f);
        w = fake_client(&f);
        fake_script(&f, acts, ELEMENTSOF(acts));
        ASSERT_OK(worker_sandbox_pause(w, "sbtest", true, &e));
        fake_wait_closed(&f); /* as a worker that restarted between two calls */
        /* not idempotent, yet fine: nothing was sent on the closed connection (on a unix socket
         * the write fails; over TCP the check before the write sees it closed) */
        ASSERT_OK(worker_sandbox_create(w, &sb, &pid, &st, &e));
        ASSERT_EQ(atomic_load(&f.creates), 1);
        ASSERT_EQ(atomic_load(&f.lines), 2);
        ASSERT_EQ(atomic_load(&f.connections), 2);
        w = worker_client_free(w);
        fake_stop(&f);
}

TEST(client_call_fails_at_its_deadline) {
        _cleanup_(worker_client_freep) WorkerClient *w = NULL;
        static const Act acts[] = { ACT_SILENT };
        char runtimes[64], accels[64];
        ApiError e = {};
        Fake f;

        fake_start(&f);
        w = fake_client(&f);
        fake_script(&f, acts, ELEMENTSOF(acts));
        worker_client_set_reply_timeout(w, 300);
        ASSERT_ERRNO(worker_runtimes(w, runtimes, sizeof runtimes, accels, sizeof accels, &e), ETIMEDOUT);
        ASSERT_EQ(e.code, API_WORKER_UNAVAILABLE); /* the local worker: 503 with Retry-After */
        ASSERT_TRUE(strstr(e.message, "did not answer 'info'"));
        ASSERT_EQ(atomic_load(&f.lines), 1); /* a deadline passed: not sent again, even idempotent */
        w = worker_client_free(w);
        fake_stop(&f);
}

TEST(client_call_to_no_worker_is_unavailable_at_once) {
        _cleanup_(worker_client_freep) WorkerClient *w = NULL;
        char addr[PATH_MAX];
        Sandbox sb = sandbox();
        ApiError e = {};
        int64_t pid = 0;
        uint64_t st = 0;

        snprintf(addr, sizeof addr, "unix:%s/nobody.sock", test_tmpdir());
        ASSERT_OK(worker_client_new(addr, test_tmpdir(), &w));
        ASSERT_ERRNO(worker_sandbox_create(w, &sb, &pid, &st, &e), ENOENT);
        ASSERT_EQ(e.code, API_WORKER_UNAVAILABLE); /* the local worker: 503 with Retry-After */
        ASSERT_TRUE(strstr(e.message, "worker unavailable"));
        ASSERT_FALSE(strstr(e.message, "outcome"));
}
