/* SPDX-License-Identifier: MIT */
/* Drives the real space-agent binary (an ordinary child process here, not PID 1)
 * over its unix socket. Each test starts its own agent in test_tmpdir(). */
#include <dirent.h>
#include <inttypes.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "json.h"
#include "proto.h"
#include "str-util.h"
#include "test.h"

#define RECV_TIMEOUT_SEC 20

static pid_t agent_pid;
static bool agent_is_pid1;
static char agent_sock[PATH_MAX];

static void agent_stop(void) {
        if (agent_pid > 0) {
                /* PID 1 of a pid namespace ignores SIGTERM; SIGKILL ends the namespace */
                (void) kill(agent_pid, agent_is_pid1 ? SIGKILL : SIGTERM);
                (void) waitpid(agent_pid, NULL, 0);
                agent_pid = 0;
        }
}

static void msleep(unsigned ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static int try_connect(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct timeval tv = { .tv_sec = RECV_TIMEOUT_SEC };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return -errno;
        (void) strscpy(sa.sun_path, sizeof sa.sun_path, agent_sock);
        if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        /* a broken agent fails the test instead of hanging it */
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        (void) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        return fd;
}

/* Starts the agent (stopping one a failed test left behind). clone_flags: run it
 * in new namespaces (CLONE_NEWPID makes it PID 1); tmpfs_dir: mount a 128 KiB
 * tmpfs there, visible only in the agent's own mount namespace. */
static void agent_start_ns(unsigned long clone_flags, const char *tmpfs_dir) {
        static bool atexit_done;
        char bin[PATH_MAX];
        pid_t pid;
        int fd = -1;

        agent_stop();
        if (!atexit_done) {
                atexit(agent_stop);
                atexit_done = true;
        }
        snprintf(bin, sizeof bin, "%s/src/agent/space-agent", test_build_dir());
        if (access(bin, X_OK) < 0)
                test_skip("space-agent is not built");
        snprintf(agent_sock, sizeof agent_sock, "%s/agent.sock", test_tmpdir());

        if (clone_flags != 0) {
                if (getuid() != 0)
                        test_skip("namespaces need root");
                pid = (pid_t) syscall(SYS_clone, clone_flags | SIGCHLD, NULL, NULL, NULL, 0);
                if (pid < 0 && (errno == EPERM || errno == EINVAL))
                        test_skip("cannot create namespaces here");
        } else
                pid = fork();
        ASSERT_OK(pid);
        if (pid == 0) {
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (clone_flags & CLONE_NEWNS) {
                        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                                _exit(126);
                        if (tmpfs_dir && mount("tmpfs", tmpfs_dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=128k") < 0)
                                _exit(126);
                }
                /* the runtime hands the sandbox's environment to the agent; here a small known one */
                char *const envp[] = { (char *) "PATH=/usr/local/bin:/usr/bin:/bin", (char *) "AGENT_MARKER=yes",
                                       (char *) "LANG=C", NULL };
                execle(bin, "space-agent", "--listen", agent_sock, (char *) NULL, envp);
                _exit(127);
        }
        agent_pid = pid;
        agent_is_pid1 = clone_flags & CLONE_NEWPID;
        for (int i = 0; i < 500; i++) {
                fd = try_connect();
                if (fd >= 0)
                        break;
                if (waitpid(pid, NULL, WNOHANG) == pid) {
                        agent_pid = 0;
                        test_fail(__FILE__, __LINE__, "the agent exited at start");
                }
                msleep(10);
        }
        ASSERT_OK(fd);
        close(fd);
}

static void agent_start(void) {
        agent_start_ns(0, NULL);
}

static void send_json(int fd, ProtoType type, uint32_t stream, const char *fmt, ...) _printf_(4, 5);
static void send_json(int fd, ProtoType type, uint32_t stream, const char *fmt, ...) {
        char buf[8192];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        ASSERT_OK(proto_send_json(fd, type, stream, buf));
}

static JsonValue *parse_payload(const ProtoFrame *f) {
        JsonValue *v = NULL;
        char err[128];
        if (json_parse(f->payload, f->len, &v, err, sizeof err) < 0)
                test_fail(__FILE__, __LINE__, "bad JSON from the agent (%s): %.200s", err, f->payload);
        return v;
}

static int64_t json_num(const JsonValue *obj, const char *key) {
        int64_t v;
        if (json_int64(json_get(obj, key), &v) < 0)
                test_fail(__FILE__, __LINE__, "missing number '%s'", key);
        return v;
}

/* Reads the next frame, which must be of this type and stream. Returns its JSON (or NULL for raw types). */
static JsonValue *expect(int fd, ProtoType type, uint32_t stream, ProtoFrame *ret) {
        ProtoFrame f = {};
        JsonValue *v = NULL;
        int r = proto_recv(fd, &f);

        if (r < 0)
                test_fail(__FILE__, __LINE__, "expected %s on stream %u: %s", proto_type_to_string(type), stream,
                          strerror(-r));
        if (f.type != type || f.stream != stream)
                test_fail(__FILE__, __LINE__, "expected %s on stream %u, got %s on %u: %.300s",
                          proto_type_to_string(type), stream, proto_type_to_string(f.type), f.stream, f.payload);
        if (proto_type_is_json(f.type))
                v = parse_payload(&f);
        if (ret)
                *ret = f;
        else
                proto_frame_done(&f);
        return v;
}

static int connect_agent(void) {
        int fd = try_connect();
        ASSERT_OK(fd);
        json_free(expect(fd, PROTO_HELLO, 0, NULL));
        return fd;
}

/* Expects ERROR on stream with this errno. */
static void expect_error(int fd, uint32_t stream, int err) {
        _cleanup_json_ JsonValue *v = expect(fd, PROTO_ERROR, stream, NULL);
        ASSERT_EQ(json_num(v, "errno"), err);
        ASSERT_STREQ(json_string(json_get(v, "code")), proto_errno_to_code(err));
        ASSERT_TRUE(!isempty(json_string(json_get(v, "message"))));
}

typedef struct ExecResult {
        char *out, *err;
        size_t out_n, err_n;
        JsonValue *exit;
        int64_t pid;
        char exec_id[32];
} ExecResult;

static void exec_result_done(ExecResult *r) {
        r->out = mfree(r->out);
        r->err = mfree(r->err);
        r->exit = json_free(r->exit);
}

static void append(char **buf, size_t *n, const char *p, size_t k) {
        char *b = realloc(*buf, *n + k + 1);
        ASSERT_NOT_NULL(b);
        memcpy(b + *n, p, k);
        *n += k;
        b[*n] = 0;
        *buf = b;
}

/* After STARTED: collects STDOUT/STDERR of stream until EXIT. */
static void collect(int fd, uint32_t stream, ExecResult *res) {
        for (;;) {
                ProtoFrame f = {};
                ASSERT_OK(proto_recv(fd, &f));
                if (f.stream != stream)
                        test_fail(__FILE__, __LINE__, "unexpected %s on stream %u", proto_type_to_string(f.type),
                                  f.stream);
                ASSERT_TRUE(f.len <= PROTO_DATA_CHUNK);
                if (f.type == PROTO_STDOUT)
                        append(&res->out, &res->out_n, f.payload, f.len);
                else if (f.type == PROTO_STDERR)
                        append(&res->err, &res->err_n, f.payload, f.len);
                else if (f.type == PROTO_EXIT) {
                        res->exit = parse_payload(&f);
                        proto_frame_done(&f);
                        return;
                } else
                        test_fail(__FILE__, __LINE__, "unexpected %s: %.200s", proto_type_to_string(f.type),
                                  f.payload);
                proto_frame_done(&f);
        }
}

static void started(int fd, uint32_t stream, ExecResult *res) {
        _cleanup_json_ JsonValue *v = expect(fd, PROTO_STARTED, stream, NULL);
        res->pid = json_num(v, "pid");
        ASSERT_TRUE(res->pid > 0);
        ASSERT_OK(strscpy(res->exec_id, sizeof res->exec_id, strempty(json_string(json_get(v, "exec_id")))));
        ASSERT_TRUE(res->exec_id[0] != 0);
}

/* EXEC, then everything up to EXIT. */
static void run(int fd, uint32_t stream, const char *request, ExecResult *res) {
        *res = (ExecResult){};
        ASSERT_OK(proto_send_json(fd, PROTO_EXEC, stream, request));
        started(fd, stream, res);
        collect(fd, stream, res);
}

static bool pid_gone(pid_t pid, unsigned timeout_ms) {
        for (unsigned i = 0; i < timeout_ms / 10; i++) {
                if (kill(pid, 0) < 0 && errno == ESRCH)
                        return true;
                msleep(10);
        }
        return false;
}

TEST(hello) {
        ProtoFrame f = {};
        _cleanup_json_ JsonValue *v = NULL;
        int fd;

        agent_start();
        fd = try_connect();
        ASSERT_OK(fd);
        v = expect(fd, PROTO_HELLO, 0, &f);
        ASSERT_EQ(json_num(v, "version"), PROTO_VERSION);
        ASSERT_EQ(json_num(v, "pid"), agent_pid);
        ASSERT_TRUE(startswith(strempty(json_string(json_get(v, "agent"))), "space-agent "));
        proto_frame_done(&f);

        send_json(fd, PROTO_PING, 3, "{}");
        json_free(expect(fd, PROTO_PONG, 3, NULL));
        ASSERT_OK(proto_send(fd, PROTO_PING, 4, NULL, 0)); /* an empty payload is {} */
        json_free(expect(fd, PROTO_PONG, 4, NULL));
        close(fd);
        agent_stop();
}

TEST(exec_output_and_code) {
        ExecResult r;
        int fd;

        agent_start();
        fd = connect_agent();

        run(fd, 1, "{\"argv\":[\"sh\",\"-c\",\"echo out; echo err >&2; exit 3\"]}", &r);
        ASSERT_STREQ(r.out, "out\n");
        ASSERT_STREQ(r.err, "err\n");
        ASSERT_EQ(json_num(r.exit, "code"), 3);
        ASSERT_NULL(json_get(r.exit, "signal"));
        exec_result_done(&r);

        run(fd, 2, "{\"shell\":\"printf '%s|' a b; printf E >&2; exit 3\"}", &r);
        ASSERT_STREQ(r.out, "a|b|");
        ASSERT_STREQ(r.err, "E");
        ASSERT_EQ(json_num(r.exit, "code"), 3);
        exec_result_done(&r);

        /* no fd of the agent leaks into a process (3 is ls's own directory fd) */
        run(fd, 4, "{\"argv\":[\"ls\",\"/proc/self/fd\"]}", &r);
        ASSERT_STREQ(r.out, "0\n1\n2\n3\n");
        exec_result_done(&r);

        /* PATH search, and the exec ids differ */
        run(fd, 3, "{\"argv\":[\"true\"]}", &r);
        ASSERT_EQ(json_num(r.exit, "code"), 0);
        ASSERT_NULL(r.out);
        exec_result_done(&r);
        close(fd);
        agent_stop();
}

TEST(exec_signal_exit) {
        ExecResult r;
        int fd;

        agent_start();
        fd = connect_agent();
        run(fd, 1, "{\"shell\":\"kill -TERM $$\"}", &r);
        ASSERT_STREQ(json_string(json_get(r.exit, "signal")), "SIGTERM");
        ASSERT_EQ(json_num(r.exit, "code"), 128 + SIGTERM);
        ASSERT_STREQ(json_string(json_get(r.exit, "reason")), "killed");
        exec_result_done(&r);

        /* SIGNAL on the exec's stream */
        r = (ExecResult){};
        send_json(fd, PROTO_EXEC, 2, "{\"argv\":[\"sleep\",\"100\"]}");
        started(fd, 2, &r);
        send_json(fd, PROTO_SIGNAL, 2, "{\"signal\":\"SIGINT\"}");
        collect(fd, 2, &r);
        ASSERT_STREQ(json_string(json_get(r.exit, "signal")), "SIGINT");
        ASSERT_EQ(json_num(r.exit, "code"), 128 + SIGINT);
        exec_result_done(&r);

        /* bad signal name */
        r = (ExecResult){};
        send_json(fd, PROTO_EXEC, 3, "{\"argv\":[\"sleep\",\"100\"]}");
        started(fd, 3, &r);
        send_json(fd, PROTO_SIGNAL, 3, "{\"signal\":\"SIGNOPE\"}");
        expect_error(fd, 3, EINVAL);
        send_json(fd, PROTO_SIGNAL, 3, "{\"signal\":9}");
        collect(fd, 3, &r);
        ASSERT_STREQ(json_string(json_get(r.exit, "signal")), "SIGKILL");
        exec_result_done(&r);
        close(fd);
        agent_stop();
}

TEST(exec_errors) {
        int fd;

        agent_start();
        fd = connect_agent();
        send_json(fd, PROTO_EXEC, 1, "{\"argv\":[\"no-such-binary-here\"]}");
        expect_error(fd, 1, ENOENT);
        send_json(fd, PROTO_EXEC, 2, "{\"argv\":[\"/nonexistent/bin\"]}");
        expect_error(fd, 2, ENOENT);
        send_json(fd, PROTO_EXEC, 3, "{\"argv\":[\"true\"],\"cwd\":\"/nonexistent-dir\"}");
        expect_error(fd, 3, ENOENT);
        send_json(fd, PROTO_EXEC, 4, "{\"argv\":[\"true\"],\"user\":\"no-such-user-x\"}");
        expect_error(fd, 4, ENOENT);
        send_json(fd, PROTO_EXEC, 5, "{\"argv\":[\"%s\"]}", test_tmpdir()); /* a directory */
        expect_error(fd, 5, EACCES);
        send_json(fd, PROTO_EXEC, 6, "{\"argv\":[]}");
        expect_error(fd, 6, EINVAL);
        send_json(fd, PROTO_EXEC, 7, "{\"argv\":[\"true\"],\"pty\":1}");
        expect_error(fd, 7, EINVAL);
        /* the stream of an error is free again */
        send_json(fd, PROTO_EXEC, 1, "{\"argv\":[\"true\"]}");
        json_free(expect(fd, PROTO_STARTED, 1, NULL));
        json_free(expect(fd, PROTO_EXIT, 1, NULL));
        close(fd);
        agent_stop();
}

TEST(exec_cwd_env_user) {
        ExecResult r;
        char req[PATH_MAX + 128];
        int fd;

        agent_start();
        fd = connect_agent();

        if (getuid() == 0 && access("/root", X_OK) == 0) { /* default: the user's home */
                run(fd, 6, "{\"argv\":[\"pwd\"]}", &r);
                ASSERT_STREQ(r.out, "/root\n");
                exec_result_done(&r);
        }
        snprintf(req, sizeof req, "{\"argv\":[\"pwd\"],\"cwd\":\"%s\"}", test_tmpdir());
        run(fd, 1, req, &r);
        ASSERT_TRUE(r.out && startswith(r.out, test_tmpdir()));
        exec_result_done(&r);

        run(fd, 2,
            "{\"shell\":\"echo $FOO,$HOME,$LANG,$USER; echo $PATH\",\"env\":{\"FOO\":\"bar baz\",\"LANG\":\"de_DE.UTF-8\"}}",
            &r);
        ASSERT_NOT_NULL(r.out);
        ASSERT_TRUE(startswith(r.out, "bar baz,"));
        ASSERT_NOT_NULL(strstr(r.out, ",de_DE.UTF-8,"));
        ASSERT_NOT_NULL(strstr(r.out, "/bin"));
        exec_result_done(&r);

        /* the environment is the agent's own plus defaults: HOME of the user, no TERM without a pty */
        run(fd, 3, "{\"shell\":\"echo $AGENT_MARKER,$LANG,$PATH,${TERM-unset},$HOME,$LOGNAME\"}", &r);
        ASSERT_TRUE(r.out && startswith(r.out, "yes,C,/usr/local/bin:/usr/bin:/bin,unset,"));
        if (getuid() == 0)
                ASSERT_STREQ(r.out, "yes,C,/usr/local/bin:/usr/bin:/bin,unset,/root,root\n");
        exec_result_done(&r);

        if (getuid() == 0) {
                struct passwd *pw = getpwnam("nobody");
                if (pw) {
                        char expect_id[64];
                        run(fd, 4, "{\"shell\":\"id -u; echo $USER $HOME; pwd\",\"user\":\"nobody\"}", &r);
                        snprintf(expect_id, sizeof expect_id, "%u\nnobody ", (unsigned) pw->pw_uid);
                        ASSERT_TRUE(r.out && startswith(r.out, expect_id));
                        ASSERT_EQ(json_num(r.exit, "code"), 0);
                        exec_result_done(&r);

                        run(fd, 5, "{\"argv\":[\"id\",\"-u\"],\"user\":12345}", &r);
                        ASSERT_STREQ(r.out, "12345\n");
                        exec_result_done(&r);
                }
        }
        close(fd);
        agent_stop();
}

TEST(exec_stdin) {
        ExecResult r = {};
        int fd;

        agent_start();
        fd = connect_agent();
        send_json(fd, PROTO_EXEC, 1, "{\"argv\":[\"cat\"],\"stdin\":true}");
        started(fd, 1, &r);
        ASSERT_OK(proto_send(fd, PROTO_STDIN, 1, "hello ", 6));
        ASSERT_OK(proto_send(fd, PROTO_STDIN, 1, "cat\n", 4));
        ASSERT_OK(proto_send(fd, PROTO_STDIN_EOF, 1, NULL, 0));
        collect(fd, 1, &r);
        ASSERT_STREQ(r.out, "hello cat\n");
        ASSERT_EQ(json_num(r.exit, "code"), 0);
        exec_result_done(&r);

        /* without stdin:true, stdin is /dev/null and STDIN is an error */
        r = (ExecResult){};
        send_json(fd, PROTO_EXEC, 2, "{\"shell\":\"cat; readlink /proc/self/fd/0; echo done\"}");
        started(fd, 2, &r);
        collect(fd, 2, &r);
        ASSERT_STREQ(r.out, "/dev/null\ndone\n");
        exec_result_done(&r);
        ASSERT_OK(proto_send(fd, PROTO_STDIN, 2, "x", 1));
        expect_error(fd, 2, EBADF); /* the stream ended with EXIT */
        close(fd);
        agent_stop();
}

TEST(exec_attach) {
        _cleanup_json_ JsonValue *v = NULL;
        ExecResult r = {}, r2 = {};
        char req[128];
        int a, b, c;

        agent_start();
        a = connect_agent();
        b = connect_agent();
        send_json(a, PROTO_EXEC, 1, "{\"argv\":[\"cat\"],\"stdin\":true}");
        started(a, 1, &r);

        /* a second connection binds its stream 9 to the process, writes stdin */
        snprintf(req, sizeof req, "{\"exec_id\":\"%s\",\"output\":true}", r.exec_id);
        ASSERT_OK(proto_send_json(b, PROTO_ATTACH, 9, req));
        v = expect(b, PROTO_STARTED, 9, NULL);
        ASSERT_EQ(json_num(v, "pid"), r.pid);
        ASSERT_OK(proto_send(b, PROTO_STDIN, 9, "from b\n", 7));
        ASSERT_OK(proto_send(b, PROTO_STDIN_EOF, 9, NULL, 0));
        collect(a, 1, &r);
        collect(b, 9, &r2);
        ASSERT_STREQ(r.out, "from b\n");
        ASSERT_STREQ(r2.out, "from b\n");
        ASSERT_EQ(json_num(r2.exit, "code"), 0);
        exec_result_done(&r);
        exec_result_done(&r2);

        /* attaching to something that does not exist */
        send_json(b, PROTO_ATTACH, 10, "{\"exec_id\":\"e999\"}");
        expect_error(b, 10, ESRCH);
        send_json(b, PROTO_ATTACH, 11, "{}");
        expect_error(b, 11, EINVAL);

        /* output:false gets no output; its STDIN and SIGNAL still work */
        r = (ExecResult){};
        send_json(a, PROTO_EXEC, 2, "{\"shell\":\"read x; echo got $x\",\"stdin\":true}");
        started(a, 2, &r);
        c = connect_agent();
        snprintf(req, sizeof req, "{\"exec_id\":\"%s\"}", r.exec_id);
        ASSERT_OK(proto_send_json(c, PROTO_ATTACH, 1, req));
        json_free(expect(c, PROTO_STARTED, 1, NULL));
        ASSERT_OK(proto_send(c, PROTO_STDIN, 1, "it\n", 3));
        collect(a, 2, &r);
        ASSERT_STREQ(r.out, "got it\n");
        exec_result_done(&r);
        send_json(c, PROTO_PING, 2, "{}");
        json_free(expect(c, PROTO_PONG, 2, NULL)); /* nothing else arrived on c */
        close(a);
        close(b);
        close(c);
        agent_stop();
}

TEST(exec_timeout) {
        ExecResult r;
        int fd;

        agent_start();
        fd = connect_agent();
        run(fd, 1, "{\"argv\":[\"sleep\",\"100\"],\"timeout_ms\":200}", &r);
        ASSERT_STREQ(json_string(json_get(r.exit, "signal")), "SIGKILL");
        ASSERT_EQ(json_num(r.exit, "code"), 137);
        ASSERT_STREQ(json_string(json_get(r.exit, "reason")), "timeout");
        ASSERT_TRUE(pid_gone((pid_t) r.pid, 2000));
        exec_result_done(&r);

        /* the whole process group goes */
        run(fd, 2, "{\"shell\":\"sleep 100 & echo $!; wait\",\"timeout_ms\":300}", &r);
        ASSERT_NOT_NULL(r.out);
        int64_t child;
        ASSERT_OK(safe_atoi64(strtok(r.out, "\n"), &child));
        ASSERT_TRUE(pid_gone((pid_t) child, 5000));
        ASSERT_STREQ(json_string(json_get(r.exit, "reason")), "timeout");
        exec_result_done(&r);

        /* a fast process is not bothered */
        run(fd, 3, "{\"argv\":[\"true\"],\"timeout_ms\":10000}", &r);
        ASSERT_EQ(json_num(r.exit, "code"), 0);
        exec_result_done(&r);
        close(fd);
        agent_stop();
}

TEST(exec_close_keeps_foreground) {
        ExecResult r = {}, bg = {}, k = {};
        int fd;

        agent_start();
        fd = connect_agent();
        send_json(fd, PROTO_EXEC, 1, "{\"argv\":[\"sleep\",\"100\"]}");
        started(fd, 1, &r);
        send_json(fd, PROTO_EXEC, 2, "{\"argv\":[\"sleep\",\"100\"],\"background\":true}");
        started(fd, 2, &bg);
        send_json(fd, PROTO_EXEC, 3, "{\"argv\":[\"sleep\",\"100\"],\"on_disconnect\":\"kill\"}");
        started(fd, 3, &k);
        ASSERT_EQ(kill((pid_t) r.pid, 0), 0);
        close(fd);
        /* on_disconnect kill goes with the connection; the default (keep) and a background one live on */
        ASSERT_TRUE(pid_gone((pid_t) k.pid, 5000));
        msleep(100);
        ASSERT_EQ(kill((pid_t) r.pid, 0), 0);
        ASSERT_EQ(kill((pid_t) bg.pid, 0), 0);
        fd = connect_agent();
        send_json(fd, PROTO_EXEC, 1, "{\"argv\":[\"true\"],\"on_disconnect\":\"sometimes\"}");
        expect_error(fd, 1, EINVAL);
        close(fd);
        agent_stop(); /* an ordinary agent takes its processes along */
        ASSERT_TRUE(pid_gone((pid_t) r.pid, 5000));
        ASSERT_TRUE(pid_gone((pid_t) bg.pid, 5000));
}

/* ATTACH with output from an offset: what the buffer holds from there, DROPPED for what it no longer holds, EXIT. */
static void attach_collect(int fd, uint32_t stream, const char *exec_id, int64_t from, ExecResult *res,
                           uint64_t *ret_dropped, int64_t *ret_offset) {
        _cleanup_json_ JsonValue *v = NULL;
        *res = (ExecResult){};
        *ret_dropped = 0;
        if (from >= 0)
                send_json(fd, PROTO_ATTACH, stream, "{\"exec_id\":\"%s\",\"output\":true,\"from\":%" PRIi64 "}",
                          exec_id, from);
        else
                send_json(fd, PROTO_ATTACH, stream, "{\"exec_id\":\"%s\",\"output\":true}", exec_id);
        v = expect(fd, PROTO_STARTED, stream, NULL);
        *ret_offset = json_num(v, "offset");
        for (;;) {
                ProtoFrame f = {};
                ASSERT_OK(proto_recv(fd, &f));
                ASSERT_EQ(f.stream, stream);
                if (f.type == PROTO_DROPPED) {
                        _cleanup_json_ JsonValue *d = parse_payload(&f);
                        ASSERT_EQ(res->out_n + res->err_n, 0); /* only first */
                        *ret_dropped += (uint64_t) json_num(d, "bytes");
                } else if (f.type == PROTO_STDOUT)
                        append(&res->out, &res->out_n, f.payload, f.len);
                else if (f.type == PROTO_STDERR)
                        append(&res->err, &res->err_n, f.payload, f.len);
                else if (f.type == PROTO_EXIT) {
                        res->exit = parse_payload(&f);
                        proto_frame_done(&f);
                        return;
                } else
                        test_fail(__FILE__, __LINE__, "unexpected %s: %.200s", proto_type_to_string(f.type), f.payload);
                proto_frame_done(&f);
        }
}

TEST(exec_reattach) {
        ExecResult r = {}, again = {};
        uint64_t dropped;
        int64_t offset;
        int fd, fd2;

        agent_start();
        fd = connect_agent();
        /* the client goes away at once; the process runs to its end and keeps its output */
        send_json(fd, PROTO_EXEC, 1, "{\"shell\":\"echo one; echo two >&2; sleep 0.3; echo three\",\"oom_base\":7}");
        started(fd, 1, &r);
        close(fd);
        fd2 = connect_agent();
        attach_collect(fd2, 5, r.exec_id, 0, &again, &dropped, &offset);
        ASSERT_EQ(dropped, 0);
        ASSERT_EQ(offset, 0);
        ASSERT_STREQ(again.out, "one\nthree\n");
        ASSERT_STREQ(again.err, "two\n");
        ASSERT_EQ(json_num(again.exit, "code"), 0);
        ASSERT_EQ(json_num(again.exit, "oom_base"), 7);
        exec_result_done(&again);
        /* a finished exec: from the middle, then from the end (only EXIT) */
        attach_collect(fd2, 6, r.exec_id, 4, &again, &dropped, &offset);
        ASSERT_EQ(offset, 4);
        ASSERT_EQ(again.out_n + again.err_n, 10U);
        exec_result_done(&again);
        attach_collect(fd2, 7, r.exec_id, -1, &again, &dropped, &offset);
        ASSERT_EQ(offset, 14);
        ASSERT_EQ(again.out_n + again.err_n, 0U);
        ASSERT_NOT_NULL(again.exit);
        exec_result_done(&again);
        /* past the end; not running for stdin */
        send_json(fd2, PROTO_ATTACH, 8, "{\"exec_id\":\"%s\",\"output\":true,\"from\":15}", r.exec_id);
        expect_error(fd2, 8, EINVAL);
        send_json(fd2, PROTO_ATTACH, 9, "{\"exec_id\":\"%s\"}", r.exec_id);
        expect_error(fd2, 9, ESRCH);

        /* overflow: 4 MiB into a 256 KiB buffer nobody reads; the tail is kept, the rest counted */
        r = (ExecResult){};
        send_json(fd2, PROTO_EXEC, 10,
                  "{\"shell\":\"head -c 4194304 /dev/zero | tr '\\\\0' a; printf END\",\"background\":true,"
                  "\"buffer_bytes\":262144}");
        started(fd2, 10, &r);
        for (int i = 0; i < 500; i++) { /* until it is gone from PS */
                _cleanup_json_ JsonValue *ps = NULL;
                send_json(fd2, PROTO_PS, 11, "{}");
                ps = expect(fd2, PROTO_RESULT, 11, NULL);
                if (json_array_size(json_get(ps, "processes")) == 0)
                        break;
                msleep(20);
        }
        attach_collect(fd2, 12, r.exec_id, 0, &again, &dropped, &offset);
        ASSERT_TRUE(dropped > 0);
        ASSERT_EQ(dropped + again.out_n, 4194304U + 3U);
        ASSERT_TRUE(again.out_n >= 128U * 1024U && again.out_n <= 320U * 1024U);
        ASSERT_TRUE(endswith(again.out, "aaaEND"));
        exec_result_done(&again);

        /* keep_ms 0: its own reader still gets the EXIT; then it is gone */
        run(fd2, 13, "{\"shell\":\"sleep 0.1; echo x\",\"keep_ms\":0}", &r);
        ASSERT_STREQ(r.out, "x\n");
        ASSERT_EQ(json_num(r.exit, "code"), 0);
        msleep(100);
        send_json(fd2, PROTO_ATTACH, 14, "{\"exec_id\":\"%s\",\"output\":true}", r.exec_id);
        expect_error(fd2, 14, ESRCH);
        exec_result_done(&r);
        close(fd2);
        agent_stop();
}

/* A reader that takes nothing does not hold the process up past stall_ms. */
TEST(exec_stalled_reader) {
        ExecResult r = {};
        int fd, fd2;
        bool gone = false;

        agent_start();
        fd = connect_agent();
        send_json(fd, PROTO_EXEC, 1,
                  "{\"shell\":\"head -c 16777216 /dev/zero; echo done > %s/stalled.done\",\"stall_ms\":300,"
                  "\"buffer_bytes\":262144}",
                  test_tmpdir());
        started(fd, 1, &r);
        /* fd is never read */
        fd2 = connect_agent();
        for (int i = 0; i < 1000 && !gone; i++) {
                char path[PATH_MAX];
                snprintf(path, sizeof path, "%s/stalled.done", test_tmpdir());
                gone = access(path, F_OK) >= 0;
                msleep(10);
        }
        ASSERT_TRUE(gone);
        /* reading on: what was queued, DROPPED with the count, the buffer's tail, EXIT; nothing else lost */
        {
                uint64_t got = 0, dropped = 0;
                unsigned n_dropped = 0;
                for (;;) {
                        ProtoFrame f = {};
                        ASSERT_OK(proto_recv(fd, &f));
                        ASSERT_EQ(f.stream, 1);
                        if (f.type == PROTO_EXIT) {
                                proto_frame_done(&f);
                                break;
                        }
                        if (f.type == PROTO_DROPPED) {
                                _cleanup_json_ JsonValue *d = parse_payload(&f);
                                dropped += (uint64_t) json_num(d, "bytes");
                                n_dropped++;
                        } else {
                                ASSERT_EQ(f.type, PROTO_STDOUT);
                                got += f.len;
                        }
                        proto_frame_done(&f);
                }
                ASSERT_EQ(n_dropped, 1U);
                ASSERT_EQ(got + dropped, 16777216U);
                ASSERT_TRUE(got >= 128U * 1024U);
        }
        close(fd);
        close(fd2);
        agent_stop();
}

TEST(exec_background_and_ps) {
        _cleanup_json_ JsonValue *ps = NULL, *ps2 = NULL, *res = NULL;
        ExecResult bg = {}, fg = {};
        const JsonValue *procs;
        char req[128];
        bool found_bg = false, found_fg = false;
        int fd, fd2;

        agent_start();
        fd = connect_agent();
        send_json(fd, PROTO_EXEC, 1, "{\"shell\":\"echo discarded; exec sleep 100\",\"background\":true}");
        started(fd, 1, &bg);
        send_json(fd, PROTO_EXEC, 2, "{\"argv\":[\"sleep\",\"100\"],\"pty\":true}");
        started(fd, 2, &fg);
        /* nothing else comes on stream 1: the next frame is the PONG */
        send_json(fd, PROTO_PING, 3, "{}");
        json_free(expect(fd, PROTO_PONG, 3, NULL));
        close(fd);
        ASSERT_TRUE(pid_gone((pid_t) fg.pid, 5000));

        fd2 = connect_agent();
        send_json(fd2, PROTO_PS, 4, "{}");
        ps = expect(fd2, PROTO_RESULT, 4, NULL);
        procs = json_get(ps, "processes");
        ASSERT_EQ(json_type(procs), JSON_ARRAY);
        for (size_t i = 0; i < json_array_size(procs); i++) {
                const JsonValue *p = json_array_at(procs, i);
                const char *id = json_string(json_get(p, "exec_id"));
                bool pty;
                if (streq(strempty(id), bg.exec_id)) {
                        found_bg = true;
                        ASSERT_EQ(json_num(p, "pid"), bg.pid);
                        ASSERT_STREQ(json_string(json_array_at(json_get(p, "argv"), 0)), "/bin/sh");
                        ASSERT_OK(json_bool(json_get(p, "pty"), &pty));
                        ASSERT_FALSE(pty);
                }
                if (streq(strempty(id), fg.exec_id))
                        found_fg = true;
        }
        ASSERT_TRUE(found_bg);
        ASSERT_FALSE(found_fg);

        /* SIGNAL by exec_id from another stream gets a RESULT */
        snprintf(req, sizeof req, "{\"signal\":\"SIGKILL\",\"exec_id\":\"%s\"}", bg.exec_id);
        ASSERT_OK(proto_send_json(fd2, PROTO_SIGNAL, 5, req));
        res = expect(fd2, PROTO_RESULT, 5, NULL);
        ASSERT_TRUE(pid_gone((pid_t) bg.pid, 5000));
        msleep(50);
        send_json(fd2, PROTO_PS, 6, "{}");
        ps2 = expect(fd2, PROTO_RESULT, 6, NULL);
        ASSERT_EQ(json_array_size(json_get(ps2, "processes")), 0);
        send_json(fd2, PROTO_SIGNAL, 7, "{\"signal\":\"SIGKILL\",\"exec_id\":\"e12345\"}");
        expect_error(fd2, 7, ESRCH);
        send_json(fd2, PROTO_SIGNAL, 8, "{\"signal\":\"SIGKILL\"}");
        expect_error(fd2, 8, EINVAL);
        close(fd2);
        agent_stop();
}

/* Reads STDOUT of stream until its accumulated text contains needle. */
static void read_until(int fd, uint32_t stream, ExecResult *r, const char *needle) {
        while (!r->out || !strstr(r->out, needle)) {
                ProtoFrame f = {};
                ASSERT_OK(proto_recv(fd, &f));
                if (f.type != PROTO_STDOUT || f.stream != stream)
                        test_fail(__FILE__, __LINE__, "waiting for '%s': got %s: %.200s", needle,
                                  proto_type_to_string(f.type), f.payload);
                append(&r->out, &r->out_n, f.payload, f.len);
                proto_frame_done(&f);
        }
}

TEST(exec_pty) {
        ExecResult r = {};
        int fd;

        agent_start();
        fd = connect_agent();
        send_json(fd, PROTO_EXEC, 1,
                  "{\"shell\":\"tty; stty size; echo T=$TERM; read x; stty size; echo x=$x\",\"pty\":true,"
                  "\"rows\":33,\"cols\":101}");
        started(fd, 1, &r);
        read_until(fd, 1, &r, "T=xterm-256color");
        ASSERT_NOT_NULL(strstr(r.out, "/dev/pts/"));
        ASSERT_NOT_NULL(strstr(r.out, "33 101\r\n"));
        send_json(fd, PROTO_RESIZE, 1, "{\"rows\":50,\"cols\":120}");
        ASSERT_OK(proto_send(fd, PROTO_STDIN, 1, "typed\n", 6));
        collect(fd, 1, &r);
        ASSERT_NOT_NULL(strstr(r.out, "50 120\r\n"));
        ASSERT_NOT_NULL(strstr(r.out, "x=typed"));
        ASSERT_TRUE(r.err == NULL); /* with a pty everything is STDOUT */
        ASSERT_EQ(json_num(r.exit, "code"), 0);
        exec_result_done(&r);

        /* RESIZE without a pty */
        r = (ExecResult){};
        send_json(fd, PROTO_EXEC, 2, "{\"argv\":[\"sleep\",\"100\"]}");
        started(fd, 2, &r);
        send_json(fd, PROTO_RESIZE, 2, "{\"rows\":5,\"cols\":5}");
        expect_error(fd, 2, ENOTTY);
        send_json(fd, PROTO_SIGNAL, 2, "{\"signal\":\"SIGKILL\"}");
        collect(fd, 2, &r);
        exec_result_done(&r);
        close(fd);
        agent_stop();
}

static size_t agent_rss_kb(void) {
        char path[64], *p;
        _cleanup_free_ char *s = NULL;
        uint64_t kb = 0;

        snprintf(path, sizeof path, "/proc/%d/status", (int) agent_pid);
        if (read_full_file(path, 65536, &s, NULL) < 0)
                return 0;
        p = strstr(s, "VmRSS:");
        if (!p)
                return 0;
        for (p += 6; *p == ' ' || *p == '\t'; p++)
                ;
        p[strcspn(p, " ")] = 0;
        (void) safe_atou64(p, &kb);
        return (size_t) kb;
}

TEST(exec_backpressure) {
        const size_t total = 8U * 1024U * 1024U;
        size_t got = 0, frames = 0, rss_max = 0, rss_start;
        ExecResult r = {};
        int fd;

        agent_start();
        fd = connect_agent();
        rss_start = agent_rss_kb();
        send_json(fd, PROTO_EXEC, 1, "{\"argv\":[\"head\",\"-c\",\"%zu\",\"/dev/zero\"]}", total);
        started(fd, 1, &r);
        for (;;) {
                ProtoFrame f = {};
                ASSERT_OK(proto_recv(fd, &f));
                ASSERT_EQ(f.stream, 1);
                if (f.type == PROTO_EXIT) {
                        r.exit = parse_payload(&f);
                        proto_frame_done(&f);
                        break;
                }
                ASSERT_EQ(f.type, PROTO_STDOUT);
                ASSERT_TRUE(f.len > 0 && f.len <= PROTO_DATA_CHUNK);
                for (size_t i = 0; i < f.len; i++)
                        ASSERT_EQ(f.payload[i], 0);
                got += f.len;
                frames++;
                proto_frame_done(&f);
                if (frames % 8 == 0) { /* a slow reader */
                        size_t rss = agent_rss_kb();
                        rss_max = MAX(rss_max, rss);
                        msleep(15);
                }
        }
        ASSERT_EQ(got, total);
        ASSERT_EQ(json_num(r.exit, "code"), 0);
        fprintf(stderr, "  rss start %zu KiB, max %zu KiB over %zu frames\n", rss_start, rss_max, frames);
        /* queued output is bounded by ~AGENT_OUT_HIGH, far below the 8 MiB produced */
        ASSERT_TRUE(rss_max < rss_start + 4096);
        exec_result_done(&r);
        close(fd);
        agent_stop();
}

/* Writes a file by FILE_WRITE in several DATA frames. */
static void write_file(int fd, uint32_t stream, const char *request, const char *const *parts, size_t expect_bytes) {
        _cleanup_json_ JsonValue *v = NULL;

        ASSERT_OK(proto_send_json(fd, PROTO_FILE_WRITE, stream, request));
        for (size_t i = 0; parts[i]; i++)
                ASSERT_OK(proto_send(fd, PROTO_DATA, stream, parts[i], strlen(parts[i])));
        ASSERT_OK(proto_send(fd, PROTO_DATA_END, stream, NULL, 0));
        v = expect(fd, PROTO_RESULT, stream, NULL);
        ASSERT_EQ(json_num(v, "bytes"), expect_bytes);
}

/* FILE_READ into a malloc'd string. */
static char *read_file(int fd, uint32_t stream, const char *request, int64_t *ret_size) {
        _cleanup_json_ JsonValue *info = NULL;
        char *buf = NULL;
        size_t n = 0;

        ASSERT_OK(proto_send_json(fd, PROTO_FILE_READ, stream, request));
        info = expect(fd, PROTO_FILE_INFO, stream, NULL);
        ASSERT_STREQ(json_string(json_get(info, "type")), "file");
        if (ret_size)
                *ret_size = json_num(info, "size");
        append(&buf, &n, "", 0);
        for (;;) {
                ProtoFrame f = {};
                ASSERT_OK(proto_recv(fd, &f));
                ASSERT_EQ(f.stream, stream);
                if (f.type == PROTO_DATA_END) {
                        proto_frame_done(&f);
                        return buf;
                }
                ASSERT_EQ(f.type, PROTO_DATA);
                ASSERT_TRUE(f.len <= PROTO_DATA_CHUNK);
                append(&buf, &n, f.payload, f.len);
                proto_frame_done(&f);
        }
}

TEST(files) {
        const char *dir = test_tmpdir();
        char req[PATH_MAX * 2 + 256], p[PATH_MAX];
        _cleanup_free_ char *big = NULL, *content = NULL, *part = NULL;
        _cleanup_json_ JsonValue *list = NULL, *list3 = NULL, *st = NULL, *lst = NULL, *mk = NULL, *mk2 = NULL;
        const JsonValue *entries;
        struct stat s;
        int64_t size;
        int fd;

        agent_start();
        fd = connect_agent();

        /* write in several frames, with parents and a mode */
        big = malloc(200001);
        ASSERT_NOT_NULL(big);
        memset(big, 'z', 200000);
        big[200000] = 0;
        snprintf(req, sizeof req, "{\"path\":\"%s/d1/d2/f.txt\",\"parents\":true,\"mode\":416}", dir);
        write_file(fd, 1, req, (const char *const[]){ "hello ", big, "world\n", NULL }, 200012);
        snprintf(p, sizeof p, "%s/d1/d2/f.txt", dir);
        ASSERT_OK(stat(p, &s));
        ASSERT_EQ(s.st_mode & 07777, 0640);
        ASSERT_EQ(s.st_size, 200012);

        /* read back, whole and a range */
        snprintf(req, sizeof req, "{\"path\":\"%s\"}", p);
        content = read_file(fd, 2, req, &size);
        ASSERT_EQ(size, 200012);
        ASSERT_EQ(strlen(content), 200012);
        ASSERT_TRUE(startswith(content, "hello zzz"));
        ASSERT_TRUE(endswith(content, "zzworld\n"));
        snprintf(req, sizeof req, "{\"path\":\"%s\",\"offset\":200006,\"length\":5}", p);
        part = read_file(fd, 3, req, NULL);
        ASSERT_STREQ(part, "world");

        /* replace: the temporary file is gone, the mode kept; append in place */
        snprintf(req, sizeof req, "{\"path\":\"%s\"}", p);
        write_file(fd, 4, req, (const char *const[]){ "new\n", NULL }, 4);
        snprintf(req, sizeof req, "{\"path\":\"%s\",\"append\":true}", p);
        write_file(fd, 5, req, (const char *const[]){ "more\n", NULL }, 5);
        free(content);
        snprintf(req, sizeof req, "{\"path\":\"%s\"}", p);
        content = read_file(fd, 6, req, NULL);
        ASSERT_STREQ(content, "new\nmore\n");
        ASSERT_OK(stat(p, &s));
        ASSERT_EQ(s.st_mode & 07777, 0640);

        /* list: depth 1 and 3; no temporary files left over */
        snprintf(p, sizeof p, "%s/d1/link", dir);
        ASSERT_OK(symlink("d2/f.txt", p));
        snprintf(req, sizeof req, "{\"path\":\"%s/d1\"}", dir);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_LIST, 7, req));
        list = expect(fd, PROTO_RESULT, 7, NULL);
        entries = json_get(list, "entries");
        ASSERT_EQ(json_array_size(entries), 2);
        ASSERT_STREQ(json_string(json_get(json_array_at(entries, 0), "name")), "d2");
        ASSERT_STREQ(json_string(json_get(json_array_at(entries, 0), "type")), "dir");
        ASSERT_STREQ(json_string(json_get(json_array_at(entries, 1), "name")), "link");
        ASSERT_STREQ(json_string(json_get(json_array_at(entries, 1), "type")), "symlink");
        ASSERT_STREQ(json_string(json_get(json_array_at(entries, 1), "target")), "d2/f.txt");
        snprintf(req, sizeof req, "{\"path\":\"%s\",\"depth\":3}", dir);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_LIST, 8, req));
        list3 = expect(fd, PROTO_RESULT, 8, NULL);
        entries = json_get(list3, "entries");
        ASSERT_EQ(json_array_size(entries), 5); /* agent.sock d1 d1/d2 d1/d2/f.txt d1/link */
        snprintf(p, sizeof p, "%s/d1/d2/f.txt", dir);
        bool found = false;
        for (size_t i = 0; i < json_array_size(entries); i++) {
                const JsonValue *e = json_array_at(entries, i);
                if (streq(strempty(json_string(json_get(e, "path"))), p)) {
                        found = true;
                        ASSERT_EQ(json_num(e, "size"), 9);
                        ASSERT_EQ(json_num(e, "mode"), 0640);
                        ASSERT_STREQ(json_string(json_get(e, "type")), "file");
                        ASSERT_TRUE(json_num(e, "mtime_ns") > 0);
                }
                ASSERT_FALSE(startswith(strempty(json_string(json_get(e, "name"))), ".#"));
        }
        ASSERT_TRUE(found);

        /* stat: lstat semantics */
        snprintf(req, sizeof req, "{\"path\":\"%s/d1/link\"}", dir);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_STAT, 9, req));
        lst = expect(fd, PROTO_RESULT, 9, NULL);
        ASSERT_STREQ(json_string(json_get(lst, "type")), "symlink");
        ASSERT_STREQ(json_string(json_get(lst, "name")), "link");
        snprintf(req, sizeof req, "{\"path\":\"%s/d1/d2\"}", dir);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_STAT, 10, req));
        st = expect(fd, PROTO_RESULT, 10, NULL);
        ASSERT_STREQ(json_string(json_get(st, "type")), "dir");

        /* mkdir with parents, twice */
        snprintf(req, sizeof req, "{\"path\":\"%s/m/n/o\",\"parents\":true,\"mode\":448}", dir);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_MKDIR, 11, req));
        mk = expect(fd, PROTO_RESULT, 11, NULL);
        bool created = false;
        ASSERT_OK(json_bool(json_get(mk, "created"), &created));
        ASSERT_TRUE(created);
        snprintf(p, sizeof p, "%s/m/n/o", dir);
        ASSERT_OK(stat(p, &s));
        ASSERT_TRUE(S_ISDIR(s.st_mode));
        ASSERT_EQ(s.st_mode & 07777, 0700);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_MKDIR, 12, req));
        mk2 = expect(fd, PROTO_RESULT, 12, NULL);
        ASSERT_OK(json_bool(json_get(mk2, "created"), &created));
        ASSERT_FALSE(created);
        snprintf(req, sizeof req, "{\"path\":\"%s/m/n/o\"}", dir);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_MKDIR, 13, req));
        expect_error(fd, 13, EEXIST);
        snprintf(req, sizeof req, "{\"path\":\"%s/x/y\"}", dir);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_MKDIR, 14, req));
        expect_error(fd, 14, ENOENT);

        /* rename */
        snprintf(req, sizeof req, "{\"from\":\"%s/m\",\"to\":\"%s/m2\"}", dir, dir);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_RENAME, 15, req));
        json_free(expect(fd, PROTO_RESULT, 15, NULL));
        snprintf(p, sizeof p, "%s/m2/n/o", dir);
        ASSERT_OK(stat(p, &s));
        snprintf(req, sizeof req, "{\"from\":\"%s/nope\",\"to\":\"%s/m3\"}", dir, dir);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_RENAME, 16, req));
        expect_error(fd, 16, ENOENT);

        /* remove: not empty, then recursive (the symlink's target survives) */
        snprintf(p, sizeof p, "%s/outside", dir);
        ASSERT_OK(mkdir(p, 0755));
        snprintf(p, sizeof p, "%s/m2/n/escape", dir);
        snprintf(req, sizeof req, "%s/outside", dir);
        ASSERT_OK(symlink(req, p));
        snprintf(req, sizeof req, "{\"path\":\"%s/m2\"}", dir);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_REMOVE, 17, req));
        expect_error(fd, 17, ENOTEMPTY);
        snprintf(req, sizeof req, "{\"path\":\"%s/m2\",\"recursive\":true}", dir);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_REMOVE, 18, req));
        json_free(expect(fd, PROTO_RESULT, 18, NULL));
        snprintf(p, sizeof p, "%s/m2", dir);
        ASSERT_ERRNO(RET_NERRNO(stat(p, &s)), ENOENT);
        snprintf(p, sizeof p, "%s/outside", dir);
        ASSERT_OK(stat(p, &s));
        snprintf(req, sizeof req, "{\"path\":\"%s/d1/d2/f.txt\"}", dir);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_REMOVE, 19, req));
        json_free(expect(fd, PROTO_RESULT, 19, NULL));
        send_json(fd, PROTO_FILE_REMOVE, 20, "{\"path\":\"/\",\"recursive\":true}");
        expect_error(fd, 20, EBUSY);

        /* errors: missing file, missing directory without parents, a directory */
        snprintf(req, sizeof req, "{\"path\":\"%s/missing\"}", dir);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_READ, 21, req));
        expect_error(fd, 21, ENOENT);
        snprintf(req, sizeof req, "{\"path\":\"%s\"}", dir);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_READ, 22, req));
        expect_error(fd, 22, EISDIR);
        snprintf(req, sizeof req, "{\"path\":\"%s/missing/x\"}", dir);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_WRITE, 23, req));
        ASSERT_OK(proto_send(fd, PROTO_DATA, 23, "abc", 3));
        ASSERT_OK(proto_send(fd, PROTO_DATA, 23, "def", 3));
        ASSERT_OK(proto_send(fd, PROTO_DATA_END, 23, NULL, 0));
        expect_error(fd, 23, ENOENT);
        snprintf(req, sizeof req, "{\"path\":\"%s/missing\"}", dir);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_LIST, 24, req));
        expect_error(fd, 24, ENOENT);
        snprintf(req, sizeof req, "{\"path\":\"%s/d1/link\"}", dir);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_LIST, 25, req));
        expect_error(fd, 25, ENOENT); /* the link's target is gone */
        ASSERT_OK(proto_send(fd, PROTO_DATA, 26, "x", 1));
        expect_error(fd, 26, EBADF); /* DATA without FILE_WRITE */
        /* only those errors came: the next frame answers the PING */
        send_json(fd, PROTO_PING, 27, "{}");
        json_free(expect(fd, PROTO_PONG, 27, NULL));
        close(fd);
        agent_stop();
}

TEST(file_read_large) {
        const size_t total = 5U * 1024U * 1024U + 123;
        _cleanup_free_ char *data = malloc(total), *back = NULL;
        char p[PATH_MAX], req[PATH_MAX + 64];
        int fd;

        ASSERT_NOT_NULL(data);
        for (size_t i = 0; i < total; i++)
                data[i] = (char) ('a' + i % 26);
        snprintf(p, sizeof p, "%s/large", test_tmpdir());
        ASSERT_OK(write_file_atomic(p, data, total, 0644));
        agent_start();
        fd = connect_agent();
        snprintf(req, sizeof req, "{\"path\":\"%s\"}", p);
        back = read_file(fd, 1, req, NULL);
        ASSERT_EQ(strlen(back), total);
        ASSERT_TRUE(memcmp(back, data, total) == 0);
        close(fd);
        agent_stop();
}

static void write_raw_header(int fd, uint32_t len, uint16_t type, uint16_t flags, uint32_t stream) {
        uint8_t h[PROTO_HEADER_SIZE];
        proto_header_encode(h, PROTO_PING, stream, len);
        h[4] = (uint8_t) type;
        h[5] = (uint8_t) (type >> 8);
        h[6] = (uint8_t) flags;
        h[7] = (uint8_t) (flags >> 8);
        ASSERT_OK(loop_write(fd, h, sizeof h));
}

/* After a broken frame: an ERROR (maybe), then the connection is closed. */
static void expect_closed(int fd, int err) {
        ProtoFrame f = {};
        int r = proto_recv(fd, &f);
        if (r >= 0) {
                _cleanup_json_ JsonValue *v = NULL;
                ASSERT_EQ(f.type, PROTO_ERROR);
                v = parse_payload(&f);
                ASSERT_EQ(json_num(v, "errno"), err);
                proto_frame_done(&f);
                r = proto_recv(fd, &f);
        }
        ASSERT_TRUE(r == -ECONNRESET || r == -EPIPE || r == -ECONNRESET);
}

TEST(malformed_frames) {
        _cleanup_free_ char *huge = NULL;
        int good, bad;

        agent_start();
        good = connect_agent();

        /* a bad request on a good frame: ERROR, the connection lives */
        ASSERT_OK(proto_send_json(good, PROTO_EXEC, 1, "{\"argv\":[\"true\",]}"));
        expect_error(good, 1, EINVAL);
        ASSERT_OK(proto_send_json(good, PROTO_EXEC, 2, "[1,2]"));
        expect_error(good, 2, EINVAL);
        ASSERT_OK(proto_send(good, PROTO_EXEC, 3, "\xff\xfe", 2));
        expect_error(good, 3, EINVAL);
        huge = malloc(PROTO_JSON_MAX + 2);
        ASSERT_NOT_NULL(huge);
        memset(huge, ' ', PROTO_JSON_MAX + 2);
        huge[0] = '{';
        huge[PROTO_JSON_MAX + 1] = '}';
        ASSERT_OK(proto_send(good, PROTO_EXEC, 4, huge, PROTO_JSON_MAX + 2));
        expect_error(good, 4, E2BIG);
        ASSERT_OK(proto_send_json(good, PROTO_STDOUT, 5, "x")); /* not a request */
        expect_error(good, 5, EINVAL);
        ASSERT_OK(proto_send_json(good, PROTO_RESULT, 6, "{}"));
        expect_error(good, 6, EINVAL);
        ASSERT_OK(proto_send(good, PROTO_STDIN, 7, "x", 1)); /* no such stream */
        expect_error(good, 7, EBADF);
        ASSERT_OK(proto_send(good, PROTO_STDIN_EOF, 8, "x", 1)); /* EOF with a payload */
        expect_error(good, 8, EINVAL);
        ASSERT_OK(proto_send_json(good, PROTO_PS, 9, "{\"all\":true}"));
        expect_error(good, 9, EINVAL);

        /* unknown type: ERROR, then closed */
        bad = connect_agent();
        write_raw_header(bad, 0, 0x77, 0, 5);
        expect_closed(bad, EBADMSG);
        close(bad);

        /* flags */
        bad = connect_agent();
        write_raw_header(bad, 2, PROTO_PING, 1, 5);
        expect_closed(bad, EBADMSG);
        close(bad);

        /* oversized length */
        bad = connect_agent();
        write_raw_header(bad, PROTO_PAYLOAD_MAX + 1, PROTO_DATA, 0, 5);
        expect_closed(bad, EMSGSIZE);
        close(bad);

        /* a frame cut off by the peer going away */
        bad = connect_agent();
        write_raw_header(bad, 100, PROTO_EXEC, 0, 5);
        ASSERT_OK(loop_write(bad, "{\"argv\"", 7));
        close(bad);

        /* pure garbage */
        bad = connect_agent();
        ASSERT_OK(loop_write(bad, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27));
        expect_closed(bad, EBADMSG);
        close(bad);

        /* the agent kept serving the good connection and takes new ones */
        ExecResult r;
        run(good, 10, "{\"argv\":[\"echo\",\"still here\"]}", &r);
        ASSERT_STREQ(r.out, "still here\n");
        exec_result_done(&r);
        bad = connect_agent();
        send_json(bad, PROTO_PING, 1, "{}");
        json_free(expect(bad, PROTO_PONG, 1, NULL));
        close(bad);
        close(good);
        ASSERT_EQ(waitpid(agent_pid, NULL, WNOHANG), 0); /* still running */
        agent_stop();
}

TEST(many_connections) {
        int fds[16];

        agent_start();
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                fds[i] = connect_agent();
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                send_json(fds[i], PROTO_EXEC, (uint32_t) i + 1, "{\"shell\":\"echo %zu\"}", i);
        for (size_t i = 0; i < ELEMENTSOF(fds); i++) {
                ExecResult r = {};
                char want[32];
                started(fds[i], (uint32_t) i + 1, &r);
                collect(fds[i], (uint32_t) i + 1, &r);
                snprintf(want, sizeof want, "%zu\n", i);
                ASSERT_STREQ(r.out, want);
                exec_result_done(&r);
                close(fds[i]);
        }
        agent_stop();
}

TEST(exec_stdin_backpressure) {
        const size_t total = 4U * 1024U * 1024U;
        _cleanup_free_ char *chunk = calloc(1, PROTO_DATA_CHUNK);
        size_t rss_start, rss_max = 0;
        ExecResult r = {};
        int fd;

        ASSERT_NOT_NULL(chunk);
        agent_start();
        fd = connect_agent();
        rss_start = agent_rss_kb();
        /* the process reads nothing for a while: the agent buffers a bounded amount,
         * then stops reading the connection until the pipe drains */
        send_json(fd, PROTO_EXEC, 1, "{\"shell\":\"sleep 0.5; wc -c\",\"stdin\":true}");
        started(fd, 1, &r);
        for (size_t sent = 0; sent < total; sent += PROTO_DATA_CHUNK) {
                ASSERT_OK(proto_send(fd, PROTO_STDIN, 1, chunk, PROTO_DATA_CHUNK));
                rss_max = MAX(rss_max, agent_rss_kb());
        }
        ASSERT_OK(proto_send(fd, PROTO_STDIN_EOF, 1, NULL, 0));
        collect(fd, 1, &r);
        ASSERT_NOT_NULL(r.out);
        ASSERT_EQ(strtoull(r.out, NULL, 10), total);
        fprintf(stderr, "  rss start %zu KiB, max %zu KiB\n", rss_start, rss_max);
        ASSERT_TRUE(rss_max < rss_start + 6144);
        exec_result_done(&r);
        close(fd);
        agent_stop();
}

TEST(exec_exit_with_pipes_held_open) {
        ExecResult r;
        int64_t child;
        int fd;

        agent_start();
        fd = connect_agent();
        /* a background descendant keeps stdout open; EXIT still comes */
        run(fd, 1, "{\"shell\":\"sleep 30 & echo $!\"}", &r);
        ASSERT_NOT_NULL(r.out);
        ASSERT_OK(safe_atoi64(strtok(r.out, "\n"), &child));
        ASSERT_EQ(json_num(r.exit, "code"), 0);
        ASSERT_OK(kill((pid_t) child, SIGKILL));
        ASSERT_TRUE(pid_gone((pid_t) child, 5000));
        exec_result_done(&r);
        close(fd);
        agent_stop();
}

TEST(file_write_aborted) {
        char p[PATH_MAX], req[PATH_MAX + 64];
        int fd;

        agent_start();
        fd = connect_agent();
        snprintf(p, sizeof p, "%s/up", test_tmpdir());
        ASSERT_OK(mkdir(p, 0755));
        snprintf(req, sizeof req, "{\"path\":\"%s/file\"}", p);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_WRITE, 1, req));
        ASSERT_OK(proto_send(fd, PROTO_DATA, 1, "partial", 7));
        send_json(fd, PROTO_PING, 2, "{}");
        json_free(expect(fd, PROTO_PONG, 2, NULL)); /* the DATA was written */
        close(fd);                                  /* ... and the upload never finished */

        /* the temporary file goes, the target never appears */
        for (int i = 0; i < 200; i++) {
                _cleanup_(strv_freep) char **names = NULL;
                DIR *d = opendir(p);
                struct dirent *de;
                ASSERT_NOT_NULL(d);
                while ((de = readdir(d)))
                        if (de->d_name[0] != '.' || startswith(de->d_name, ".#"))
                                ASSERT_OK(strv_extend(&names, de->d_name));
                closedir(d);
                if (strv_length(names) == 0)
                        break;
                ASSERT_TRUE(i < 199);
                msleep(10);
        }
        agent_stop();
}

TEST(file_write_enospc) {
        _cleanup_free_ char *chunk = calloc(1, PROTO_DATA_CHUNK);
        _cleanup_json_ JsonValue *list = NULL;
        char small[PATH_MAX], req[PATH_MAX + 64];
        int fd;

        ASSERT_NOT_NULL(chunk);
        snprintf(small, sizeof small, "%s/small", test_tmpdir());
        ASSERT_OK(mkdir(small, 0755));
        agent_start_ns(CLONE_NEWNS, small);
        fd = connect_agent();

        /* 512 KiB into 128 KiB: ENOSPC once, the rest is dropped, nothing is left behind */
        snprintf(req, sizeof req, "{\"path\":\"%s/f\"}", small);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_WRITE, 1, req));
        for (int i = 0; i < 8; i++)
                ASSERT_OK(proto_send(fd, PROTO_DATA, 1, chunk, PROTO_DATA_CHUNK));
        ASSERT_OK(proto_send(fd, PROTO_DATA_END, 1, NULL, 0));
        expect_error(fd, 1, ENOSPC);
        send_json(fd, PROTO_PING, 2, "{}");
        json_free(expect(fd, PROTO_PONG, 2, NULL));
        snprintf(req, sizeof req, "{\"path\":\"%s\"}", small);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_LIST, 3, req));
        list = expect(fd, PROTO_RESULT, 3, NULL);
        ASSERT_EQ(json_array_size(json_get(list, "entries")), 0);

        /* a small file still fits afterwards */
        snprintf(req, sizeof req, "{\"path\":\"%s/g\"}", small);
        write_file(fd, 4, req, (const char *const[]){ "fits", NULL }, 4);
        close(fd);
        agent_stop();
}

/* Processes whose parent is pid (zombies included). */
static unsigned count_children(pid_t pid) {
        DIR *d = opendir("/proc");
        struct dirent *de;
        unsigned n = 0;

        if (!d)
                return 0;
        while ((de = readdir(d))) {
                char path[300];
                _cleanup_free_ char *s = NULL;
                const char *p;
                if (de->d_name[0] < '0' || de->d_name[0] > '9')
                        continue;
                snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
                if (read_full_file(path, 4096, &s, NULL) < 0)
                        continue;
                p = strrchr(s, ')'); /* "pid (comm) S ppid ..." */
                if (p && (pid_t) strtol(p + 4, NULL, 10) == pid)
                        n++;
        }
        closedir(d);
        return n;
}

TEST(pid1) {
        _cleanup_json_ JsonValue *hello = NULL;
        ExecResult r;
        int fd;

        agent_start_ns(CLONE_NEWPID | CLONE_NEWNS, NULL);
        fd = try_connect();
        ASSERT_OK(fd);
        hello = expect(fd, PROTO_HELLO, 0, NULL);
        ASSERT_EQ(json_num(hello, "pid"), 1);

        /* nothing from inside stops PID 1 */
        run(fd, 1, "{\"shell\":\"kill -TERM 1; kill -INT 1; kill -HUP 1; echo $$\"}", &r);
        ASSERT_STREQ(r.out, "2\n");
        exec_result_done(&r);
        send_json(fd, PROTO_PING, 2, "{}");
        json_free(expect(fd, PROTO_PONG, 2, NULL));

        /* orphans are reparented to PID 1 and reaped */
        run(fd, 3, "{\"shell\":\"for i in 1 2 3; do (sleep 0.5 >/dev/null 2>&1 &); done; echo ok\"}", &r);
        ASSERT_STREQ(r.out, "ok\n");
        exec_result_done(&r);
        msleep(100);
        ASSERT_TRUE(count_children(agent_pid) > 0);
        for (int i = 0; i < 300 && count_children(agent_pid) > 0; i++)
                msleep(10);
        ASSERT_EQ(count_children(agent_pid), 0);
        close(fd);
        agent_stop();
}

TEST(file_list_truncated) {
        char dir[PATH_MAX], p[PATH_MAX + 200], req[PATH_MAX + 64];
        ProtoFrame f = {};
        _cleanup_json_ JsonValue *v = NULL;
        size_t n;
        bool truncated = false;
        int fd;

        /* 3000 entries of ~400 bytes each do not fit into one reply */
        snprintf(dir, sizeof dir, "%s/many", test_tmpdir());
        ASSERT_OK(mkdir(dir, 0755));
        for (int i = 0; i < 3000; i++) {
                snprintf(p, sizeof p, "%s/%04d-%0150d", dir, i, 0);
                int k = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                ASSERT_OK(k);
                close(k);
        }
        agent_start();
        fd = connect_agent();
        snprintf(req, sizeof req, "{\"path\":\"%s\"}", dir);
        ASSERT_OK(proto_send_json(fd, PROTO_FILE_LIST, 1, req));
        v = expect(fd, PROTO_RESULT, 1, &f);
        ASSERT_TRUE(f.len <= PROTO_JSON_MAX);
        n = json_array_size(json_get(v, "entries"));
        ASSERT_TRUE(n > 100 && n < 3000);
        ASSERT_OK(json_bool(json_get(v, "truncated"), &truncated));
        ASSERT_TRUE(truncated);
        /* sorted by name: the first ones come */
        ASSERT_TRUE(startswith(strempty(json_string(json_get(json_array_at(json_get(v, "entries"), 0), "name"))),
                               "0000-"));
        proto_frame_done(&f);
        close(fd);
        agent_stop();
}
