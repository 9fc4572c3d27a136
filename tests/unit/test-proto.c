/* SPDX-License-Identifier: MIT */
#include <signal.h>
#include <limits.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "proto-msg.h"
#include "proto.h"
#include "str-util.h"
#include "test.h"
#include "vmux.h"

static void make_header(uint8_t h[PROTO_HEADER_SIZE], uint32_t len, uint16_t type, uint16_t flags, uint32_t stream) {
        proto_header_encode(h, PROTO_PING, stream, len);
        h[4] = (uint8_t) type;
        h[5] = (uint8_t) (type >> 8);
        h[6] = (uint8_t) flags;
        h[7] = (uint8_t) (flags >> 8);
}

TEST(disconnect_strings) {
        for (int i = 0; i < _PROTO_DISCONNECT_MAX; i++)
                ASSERT_EQ(proto_disconnect_from_string(proto_disconnect_to_string(i)), i);
        ASSERT_EQ(proto_disconnect_from_string("KEEP"), _PROTO_DISCONNECT_INVALID);
        ASSERT_EQ(proto_disconnect_from_string(NULL), _PROTO_DISCONNECT_INVALID);
        ASSERT_NULL(proto_disconnect_to_string(_PROTO_DISCONNECT_MAX));
}

TEST(type_strings) {
        for (int t = 1; t < _PROTO_TYPE_MAX; t++) {
                const char *s = proto_type_to_string((ProtoType) t);
                ASSERT_NOT_NULL(s);
                ASSERT_EQ(proto_type_from_string(s), t);
        }
        ASSERT_STREQ(proto_type_to_string(PROTO_FILE_WRITE), "FILE_WRITE");
        ASSERT_NULL(proto_type_to_string(0));
        ASSERT_NULL(proto_type_to_string(_PROTO_TYPE_MAX));
        ASSERT_NULL(proto_type_to_string(_PROTO_TYPE_INVALID));
        ASSERT_EQ(proto_type_from_string("NOPE"), -EINVAL);
        ASSERT_EQ(proto_type_from_string("ping"), -EINVAL);
        ASSERT_EQ(proto_type_from_string(NULL), -EINVAL);

        ASSERT_TRUE(proto_type_is_json(PROTO_EXEC));
        ASSERT_TRUE(proto_type_is_json(PROTO_HELLO));
        ASSERT_TRUE(proto_type_is_json(PROTO_ERROR));
        ASSERT_FALSE(proto_type_is_json(PROTO_STDIN));
        ASSERT_FALSE(proto_type_is_json(PROTO_STDIN_EOF));
        ASSERT_FALSE(proto_type_is_json(PROTO_STDOUT));
        ASSERT_FALSE(proto_type_is_json(PROTO_STDERR));
        ASSERT_FALSE(proto_type_is_json(PROTO_DATA));
        ASSERT_FALSE(proto_type_is_json(PROTO_DATA_END));
        ASSERT_FALSE(proto_type_is_json(_PROTO_TYPE_MAX));
}

TEST(header_round_trip) {
        uint8_t h[PROTO_HEADER_SIZE];
        ProtoType t;
        uint32_t stream, len;

        proto_header_encode(h, PROTO_STDOUT, 0x01020304, 0x000a0b0c);
        /* little endian on the wire: length, type, flags, stream */
        ASSERT_EQ(h[0], 0x0c);
        ASSERT_EQ(h[1], 0x0b);
        ASSERT_EQ(h[2], 0x0a);
        ASSERT_EQ(h[3], 0x00);
        ASSERT_EQ(h[4], PROTO_STDOUT);
        ASSERT_EQ(h[5], 0);
        ASSERT_EQ(h[6], 0);
        ASSERT_EQ(h[7], 0);
        ASSERT_EQ(h[8], 0x04);
        ASSERT_EQ(h[11], 0x01);
        ASSERT_OK(proto_header_decode(h, &t, &stream, &len));
        ASSERT_EQ(t, PROTO_STDOUT);
        ASSERT_EQ(stream, 0x01020304);
        ASSERT_EQ(len, 0x000a0b0c);

        for (int type = 1; type < _PROTO_TYPE_MAX; type++) {
                proto_header_encode(h, (ProtoType) type, UINT32_MAX, PROTO_PAYLOAD_MAX);
                ASSERT_OK(proto_header_decode(h, &t, &stream, &len));
                ASSERT_EQ(t, type);
                ASSERT_EQ(stream, UINT32_MAX);
                ASSERT_EQ(len, PROTO_PAYLOAD_MAX);
        }
}

TEST(header_rejections) {
        uint8_t h[PROTO_HEADER_SIZE];
        ProtoType t = PROTO_PING;
        uint32_t stream = 7, len = 7;

        make_header(h, 0, 0, 0, 1);
        ASSERT_ERRNO(proto_header_decode(h, &t, &stream, &len), EBADMSG);
        make_header(h, 0, _PROTO_TYPE_MAX, 0, 1);
        ASSERT_ERRNO(proto_header_decode(h, &t, &stream, &len), EBADMSG);
        make_header(h, 0, 0xffff, 0, 1);
        ASSERT_ERRNO(proto_header_decode(h, &t, &stream, &len), EBADMSG);
        make_header(h, 0, PROTO_PING, 1, 1);
        ASSERT_ERRNO(proto_header_decode(h, &t, &stream, &len), EBADMSG);
        make_header(h, 0, PROTO_PING, 0x8000, 1);
        ASSERT_ERRNO(proto_header_decode(h, &t, &stream, &len), EBADMSG);
        make_header(h, PROTO_PAYLOAD_MAX + 1, PROTO_DATA, 0, 1);
        ASSERT_ERRNO(proto_header_decode(h, &t, &stream, &len), EMSGSIZE);
        make_header(h, UINT32_MAX, PROTO_DATA, 0, 1);
        ASSERT_ERRNO(proto_header_decode(h, &t, &stream, &len), EMSGSIZE);
        /* outputs untouched on failure */
        ASSERT_EQ(t, PROTO_PING);
        ASSERT_EQ(stream, 7);
        ASSERT_EQ(len, 7);
}

TEST(send_recv) {
        _cleanup_close_ int a = -EBADF, b = -EBADF;
        ProtoFrame f = {};
        int sv[2];

        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
        a = sv[0];
        b = sv[1];

        ASSERT_OK(proto_send_json(a, PROTO_EXEC, 3, "{\"argv\":[\"true\"]}"));
        ASSERT_OK(proto_send(a, PROTO_STDIN_EOF, 3, NULL, 0));
        ASSERT_OK(proto_send(a, PROTO_STDIN, 9, "a\0b", 3));

        ASSERT_OK(proto_recv(b, &f));
        ASSERT_EQ(f.type, PROTO_EXEC);
        ASSERT_EQ(f.stream, 3);
        ASSERT_STREQ(f.payload, "{\"argv\":[\"true\"]}");
        proto_frame_done(&f);
        ASSERT_NULL(f.payload);

        ASSERT_OK(proto_recv(b, &f));
        ASSERT_EQ(f.type, PROTO_STDIN_EOF);
        ASSERT_EQ(f.len, 0);
        ASSERT_NOT_NULL(f.payload);
        ASSERT_EQ(f.payload[0], 0);
        proto_frame_done(&f);

        ASSERT_OK(proto_recv(b, &f));
        ASSERT_EQ(f.type, PROTO_STDIN);
        ASSERT_EQ(f.stream, 9);
        ASSERT_EQ(f.len, 3);
        ASSERT_TRUE(memcmp(f.payload, "a\0b", 4) == 0);
        proto_frame_done(&f);

        /* sender-side checks */
        ASSERT_ERRNO(proto_send(a, 0, 1, NULL, 0), EINVAL);
        ASSERT_ERRNO(proto_send(a, _PROTO_TYPE_MAX, 1, NULL, 0), EINVAL);
        ASSERT_ERRNO(proto_send(a, PROTO_DATA, 1, "x", PROTO_PAYLOAD_MAX + 1), EMSGSIZE);
        ASSERT_ERRNO(proto_send(a, PROTO_DATA, 1, NULL, 5), EINVAL);
        ASSERT_ERRNO(proto_send_json(a, PROTO_PING, 1, NULL), EINVAL);

        /* EOF at a frame boundary */
        a = safe_close(a);
        ASSERT_ERRNO(proto_recv(b, &f), ECONNRESET);
}

static void recv_raw(const void *bytes, size_t n, int expect) {
        _cleanup_close_ int a = -EBADF, b = -EBADF;
        ProtoFrame f = {};
        int sv[2];

        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
        a = sv[0];
        b = sv[1];
        ASSERT_OK(loop_write(a, bytes, n));
        a = safe_close(a);
        ASSERT_ERRNO(proto_recv(b, &f), expect);
        ASSERT_NULL(f.payload);
}

TEST(recv_rejections) {
        uint8_t h[PROTO_HEADER_SIZE + 4];

        make_header(h, 4, PROTO_DATA, 0, 1);
        recv_raw(h, 5, EBADMSG);                         /* truncated header */
        recv_raw(h, PROTO_HEADER_SIZE, EBADMSG);         /* header, no payload */
        recv_raw(h, PROTO_HEADER_SIZE + 2, EBADMSG);     /* truncated payload */
        make_header(h, 0, 77, 0, 1);
        recv_raw(h, PROTO_HEADER_SIZE, EBADMSG);         /* unknown type */
        make_header(h, 0, PROTO_PING, 2, 1);
        recv_raw(h, PROTO_HEADER_SIZE, EBADMSG);         /* flags */
        make_header(h, PROTO_PAYLOAD_MAX + 1, PROTO_DATA, 0, 1);
        recv_raw(h, PROTO_HEADER_SIZE, EMSGSIZE);        /* oversized */
}

TEST(send_recv_max_frame) {
        _cleanup_close_ int a = -EBADF, b = -EBADF;
        _cleanup_free_ char *big = malloc(PROTO_PAYLOAD_MAX);
        ProtoFrame f = {};
        int sv[2], status;
        pid_t pid;

        ASSERT_NOT_NULL(big);
        for (size_t i = 0; i < PROTO_PAYLOAD_MAX; i++)
                big[i] = (char) (i * 7);
        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
        a = sv[0];
        b = sv[1];
        /* the frame is bigger than the socket buffer: the sender runs in a child */
        pid = fork();
        ASSERT_OK(pid);
        if (pid == 0) {
                int r = proto_send(a, PROTO_DATA, 42, big, PROTO_PAYLOAD_MAX);
                _exit(r < 0 ? 1 : 0);
        }
        ASSERT_OK(proto_recv(b, &f));
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        ASSERT_EQ(f.type, PROTO_DATA);
        ASSERT_EQ(f.stream, 42);
        ASSERT_EQ(f.len, PROTO_PAYLOAD_MAX);
        ASSERT_TRUE(memcmp(f.payload, big, PROTO_PAYLOAD_MAX) == 0);
        ASSERT_EQ(f.payload[PROTO_PAYLOAD_MAX], 0);
        proto_frame_done(&f);
}

/* Three frames back to back. */
static size_t build_frames(uint8_t *buf) {
        size_t n = 0;
        proto_header_encode(buf + n, PROTO_EXEC, 1, 2);
        n += PROTO_HEADER_SIZE;
        memcpy(buf + n, "{}", 2);
        n += 2;
        proto_header_encode(buf + n, PROTO_STDIN_EOF, 2, 0);
        n += PROTO_HEADER_SIZE;
        proto_header_encode(buf + n, PROTO_DATA, 3, 5);
        n += PROTO_HEADER_SIZE;
        memcpy(buf + n, "hello", 5);
        n += 5;
        return n;
}

static void check_frames(ProtoFrame *f, size_t n) {
        ASSERT_EQ(n, 3);
        ASSERT_EQ(f[0].type, PROTO_EXEC);
        ASSERT_EQ(f[0].stream, 1);
        ASSERT_STREQ(f[0].payload, "{}");
        ASSERT_EQ(f[1].type, PROTO_STDIN_EOF);
        ASSERT_EQ(f[1].len, 0);
        ASSERT_EQ(f[2].type, PROTO_DATA);
        ASSERT_EQ(f[2].stream, 3);
        ASSERT_EQ(f[2].len, 5);
        ASSERT_STREQ(f[2].payload, "hello");
}

TEST(reader_byte_by_byte) {
        uint8_t buf[128];
        size_t n = build_frames(buf), got = 0;
        ProtoFrame frames[4] = {};
        ProtoReader r;

        proto_reader_init(&r);
        for (size_t i = 0; i < n; i++) {
                size_t used = 0;
                int k = proto_reader_feed(&r, buf + i, 1, &used, &frames[got]);
                ASSERT_OK(k);
                ASSERT_EQ(used, 1);
                if (k == 1)
                        got++;
                ASSERT_TRUE(got < ELEMENTSOF(frames));
        }
        check_frames(frames, got);
        for (size_t i = 0; i < got; i++)
                proto_frame_done(&frames[i]);
        proto_reader_done(&r);
}

TEST(reader_whole_buffer) {
        uint8_t buf[128];
        size_t n = build_frames(buf), got = 0, off = 0;
        ProtoFrame frames[4] = {};
        ProtoReader r;

        proto_reader_init(&r);
        while (off < n) {
                size_t used = 0;
                int k = proto_reader_feed(&r, buf + off, n - off, &used, &frames[got]);
                ASSERT_OK(k);
                ASSERT_TRUE(used > 0);
                off += used;
                if (k == 1)
                        got++;
                ASSERT_TRUE(got < ELEMENTSOF(frames));
        }
        check_frames(frames, got);
        for (size_t i = 0; i < got; i++)
                proto_frame_done(&frames[i]);

        /* nothing to feed: needs more */
        size_t used = 1;
        ProtoFrame f = {};
        ASSERT_EQ(proto_reader_feed(&r, NULL, 0, &used, &f), 0);
        ASSERT_EQ(used, 0);
        ASSERT_ERRNO(proto_reader_feed(&r, NULL, 3, &used, &f), EINVAL);
        proto_reader_done(&r);
}

TEST(reader_rejections) {
        uint8_t h[PROTO_HEADER_SIZE];
        ProtoFrame f = {};
        ProtoReader r;
        size_t used;

        proto_reader_init(&r);
        make_header(h, 0, 0x55, 0, 1);
        ASSERT_ERRNO(proto_reader_feed(&r, h, sizeof h, &used, &f), EBADMSG);
        ASSERT_EQ(used, PROTO_HEADER_SIZE);
        proto_reader_done(&r);

        proto_reader_init(&r);
        make_header(h, 0, PROTO_PING, 4, 1);
        ASSERT_ERRNO(proto_reader_feed(&r, h, sizeof h, &used, &f), EBADMSG);
        proto_reader_done(&r);

        /* an oversized length is refused before anything is allocated, byte by byte too */
        proto_reader_init(&r);
        make_header(h, PROTO_PAYLOAD_MAX + 1, PROTO_DATA, 0, 1);
        for (size_t i = 0; i < sizeof h - 1; i++)
                ASSERT_EQ(proto_reader_feed(&r, h + i, 1, &used, &f), 0);
        ASSERT_ERRNO(proto_reader_feed(&r, h + sizeof h - 1, 1, &used, &f), EMSGSIZE);
        ASSERT_NULL(r.cur.payload);
        proto_reader_done(&r);

        /* a frame cut short stays pending, and done() frees it */
        proto_reader_init(&r);
        make_header(h, 100, PROTO_DATA, 0, 1);
        ASSERT_EQ(proto_reader_feed(&r, h, sizeof h, &used, &f), 0);
        ASSERT_EQ(proto_reader_feed(&r, "abc", 3, &used, &f), 0);
        ASSERT_EQ(used, 3);
        proto_reader_done(&r);
}

TEST(reader_max_frame) {
        _cleanup_free_ uint8_t *buf = malloc(PROTO_HEADER_SIZE + PROTO_PAYLOAD_MAX);
        ProtoFrame f = {};
        ProtoReader r;
        size_t off = 0, used;
        int k = 0;

        ASSERT_NOT_NULL(buf);
        proto_header_encode(buf, PROTO_STDOUT, 5, PROTO_PAYLOAD_MAX);
        memset(buf + PROTO_HEADER_SIZE, 'x', PROTO_PAYLOAD_MAX);
        proto_reader_init(&r);
        while (off < PROTO_HEADER_SIZE + PROTO_PAYLOAD_MAX) { /* in odd-sized pieces */
                size_t n = MIN((size_t) 4099, PROTO_HEADER_SIZE + PROTO_PAYLOAD_MAX - off);
                k = proto_reader_feed(&r, buf + off, n, &used, &f);
                ASSERT_OK(k);
                off += used;
        }
        ASSERT_EQ(k, 1);
        ASSERT_EQ(f.len, PROTO_PAYLOAD_MAX);
        ASSERT_EQ(f.payload[PROTO_PAYLOAD_MAX - 1], 'x');
        ASSERT_EQ(f.payload[PROTO_PAYLOAD_MAX], 0);
        proto_frame_done(&f);
        proto_reader_done(&r);
}

TEST(errno_codes) {
        static const int required[] = { ENOENT, EEXIST,  EACCES, EPERM,     ENOTDIR,   EISDIR, ELOOP,
                                        ENAMETOOLONG, ENOSPC, EDQUOT, EINVAL, EBADF, EIO, ENOEXEC,
                                        E2BIG,  ETIMEDOUT, ENOTEMPTY, EXDEV, EMFILE, ENOMEM, EROFS, EFBIG };
        for (size_t i = 0; i < ELEMENTSOF(required); i++) {
                const char *code = proto_errno_to_code(required[i]);
                ASSERT_NOT_NULL(code);
                ASSERT_EQ(proto_errno_from_code(code), required[i]);
                ASSERT_STREQ(proto_errno_to_code(-required[i]), code); /* either sign */
        }
        ASSERT_STREQ(proto_errno_to_code(ENOENT), "ENOENT");
        ASSERT_STREQ(proto_errno_to_code(EDQUOT), "EDQUOT");
        ASSERT_STREQ(proto_errno_to_code(0), "EIO");
        ASSERT_STREQ(proto_errno_to_code(100000), "EIO");
        ASSERT_EQ(proto_errno_from_code("ENOPE"), -EINVAL);
        ASSERT_EQ(proto_errno_from_code("enoent"), -EINVAL);
        ASSERT_EQ(proto_errno_from_code(""), -EINVAL);
        ASSERT_EQ(proto_errno_from_code(NULL), -EINVAL);
}

static int parse_exec(const char *json, ProtoExecRequest *req, char *err, size_t errsz) {
        _cleanup_json_ JsonValue *v = NULL;
        int r = json_parse(json, strlen(json), &v, NULL, 0);
        if (r < 0)
                return r;
        return proto_exec_request_parse(v, req, err, errsz);
}

TEST(exec_request) {
        ProtoExecRequest req = {};
        char err[256];

        ASSERT_OK(parse_exec("{\"argv\":[\"ls\",\"-l\",\"\"],\"env\":{\"A\":\"1\",\"B\":\"\"},\"cwd\":\"/tmp\","
                             "\"user\":\"nobody\",\"stdin\":true,\"pty\":true,\"rows\":50,\"cols\":132,"
                             "\"timeout_ms\":1500,\"background\":false}",
                             &req, err, sizeof err));
        ASSERT_EQ(strv_length(req.argv), 3);
        ASSERT_STREQ(req.argv[0], "ls");
        ASSERT_STREQ(req.argv[2], "");
        ASSERT_STREQ(req.env[0], "A=1");
        ASSERT_STREQ(req.env[1], "B=");
        ASSERT_NULL(req.env[2]);
        ASSERT_STREQ(req.cwd, "/tmp");
        ASSERT_STREQ(req.user, "nobody");
        ASSERT_FALSE(req.have_uid);
        ASSERT_TRUE(req.stdin_open && req.pty && !req.background);
        ASSERT_EQ(req.rows, 50);
        ASSERT_EQ(req.cols, 132);
        ASSERT_EQ(req.timeout_ms, 1500);
        ASSERT_EQ(req.on_disconnect, PROTO_DISCONNECT_HANGUP); /* with a pty, by default */
        ASSERT_EQ(req.buffer_bytes, PROTO_EXEC_BUFFER_DEFAULT);
        ASSERT_EQ(req.stall_ms, PROTO_EXEC_STALL_MS_DEFAULT);
        ASSERT_EQ(req.keep_ms, PROTO_EXEC_KEEP_MS_DEFAULT);
        ASSERT_FALSE(req.have_oom_base);
        proto_exec_request_done(&req);

        ASSERT_OK(parse_exec("{\"argv\":[\"a\"],\"buffer_bytes\":262144,\"stall_ms\":0,\"keep_ms\":0,"
                             "\"oom_base\":18446744073709551615,\"on_disconnect\":\"kill\"}",
                             &req, err, sizeof err));
        ASSERT_EQ(req.buffer_bytes, 262144U);
        ASSERT_EQ(req.stall_ms, 0U);
        ASSERT_EQ(req.keep_ms, 0U);
        ASSERT_TRUE(req.have_oom_base && req.oom_base == UINT64_MAX);
        ASSERT_EQ(req.on_disconnect, PROTO_DISCONNECT_KILL);
        proto_exec_request_done(&req);

        ASSERT_OK(parse_exec("{\"shell\":\"echo hi\",\"user\":1000,\"cwd\":null}", &req, err, sizeof err));
        ASSERT_STREQ(req.argv[0], "/bin/sh");
        ASSERT_STREQ(req.argv[1], "-c");
        ASSERT_STREQ(req.argv[2], "echo hi");
        ASSERT_TRUE(req.have_uid);
        ASSERT_EQ(req.uid, 1000);
        ASSERT_NULL(req.cwd);
        ASSERT_EQ(req.rows, 24);
        ASSERT_EQ(req.cols, 80);
        ASSERT_EQ(req.timeout_ms, 0);
        ASSERT_EQ(req.on_disconnect, PROTO_DISCONNECT_KEEP);
        proto_exec_request_done(&req);

        static const char *const bad[] = {
                "{}",
                "{\"argv\":[\"a\"],\"shell\":\"b\"}",
                "{\"argv\":[]}",
                "{\"argv\":\"ls\"}",
                "{\"argv\":[\"\"]}",
                "{\"argv\":[1]}",
                "{\"argv\":[\"a\\u0000b\"]}",
                "{\"shell\":\"\"}",
                "{\"shell\":5}",
                "{\"argv\":[\"a\"],\"env\":{\"A=B\":\"c\"}}",
                "{\"argv\":[\"a\"],\"env\":{\"\":\"c\"}}",
                "{\"argv\":[\"a\"],\"env\":{\"A\":1}}",
                "{\"argv\":[\"a\"],\"env\":[\"A=1\"]}",
                "{\"argv\":[\"a\"],\"cwd\":\"\"}",
                "{\"argv\":[\"a\"],\"user\":-1}",
                "{\"argv\":[\"a\"],\"user\":4294967295}",
                "{\"argv\":[\"a\"],\"user\":true}",
                "{\"argv\":[\"a\"],\"stdin\":\"yes\"}",
                "{\"argv\":[\"a\"],\"rows\":0}",
                "{\"argv\":[\"a\"],\"cols\":100000}",
                "{\"argv\":[\"a\"],\"timeout_ms\":-5}",
                "{\"argv\":[\"a\"],\"timeout_ms\":1.5}",
                "{\"argv\":[\"a\"],\"timeout_ms\":1e300}",
                "{\"argv\":[\"a\"],\"unknown\":1}",
                "{\"argv\":[\"a\"],\"buffer_bytes\":1024}",
                "{\"argv\":[\"a\"],\"buffer_bytes\":1099511627776}",
                "{\"argv\":[\"a\"],\"keep_ms\":-1}",
                "{\"argv\":[\"a\"],\"on_disconnect\":\"stay\"}",
                "{\"argv\":[\"a\"],\"on_disconnect\":1}",
                "[\"a\"]",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                err[0] = 0;
                ASSERT_ERRNO(parse_exec(bad[i], &req, err, sizeof err), EINVAL);
                ASSERT_TRUE(err[0] != 0);
        }
        ASSERT_ERRNO(proto_exec_request_parse(NULL, &req, err, sizeof err), EINVAL); /* argv missing */
}

static int parse_file(ProtoType t, const char *json, ProtoFileRequest *req) {
        _cleanup_json_ JsonValue *v = NULL;
        char err[256];
        int r = json_parse(json, strlen(json), &v, NULL, 0);
        if (r < 0)
                return r;
        return proto_file_request_parse(t, v, req, err, sizeof err);
}

TEST(file_write_metadata) {
        ProtoFileRequest req = {};

        ASSERT_OK(parse_file(PROTO_FILE_WRITE, "{\"path\":\"/a\",\"metadata\":{\"owner\":\"al ice\",\"v.1_x-y\":\"\"}}",
                             &req));
        ASSERT_EQ(strv_length(req.metadata), 4U);
        ASSERT_STREQ(req.metadata[0], "owner");
        ASSERT_STREQ(req.metadata[1], "al ice");
        ASSERT_STREQ(req.metadata[2], "v.1_x-y");
        ASSERT_STREQ(req.metadata[3], "");
        proto_file_request_done(&req);
        ASSERT_NULL(req.metadata);

        /* keys the xattr name and E2B's lower-cased headers allow only; strings; bounded */
        ASSERT_ERRNO(parse_file(PROTO_FILE_WRITE, "{\"path\":\"/a\",\"metadata\":{\"Owner\":\"x\"}}", &req), EINVAL);
        ASSERT_ERRNO(parse_file(PROTO_FILE_WRITE, "{\"path\":\"/a\",\"metadata\":{\"a/b\":\"x\"}}", &req), EINVAL);
        ASSERT_ERRNO(parse_file(PROTO_FILE_WRITE, "{\"path\":\"/a\",\"metadata\":{\"\":\"x\"}}", &req), EINVAL);
        ASSERT_ERRNO(parse_file(PROTO_FILE_WRITE, "{\"path\":\"/a\",\"metadata\":{\"k\":1}}", &req), EINVAL);
        ASSERT_ERRNO(parse_file(PROTO_FILE_WRITE, "{\"path\":\"/a\",\"metadata\":[]}", &req), EINVAL);
        ASSERT_ERRNO(parse_file(PROTO_FILE_WRITE, "{\"path\":\"/a\",\"metadata\":{\"k\":\"a\\u0000b\"}}", &req),
                     EINVAL);
        {
                char body[8192];
                size_t n = (size_t) snprintf(body, sizeof body, "{\"path\":\"/a\",\"metadata\":{");
                for (unsigned i = 0; i <= PROTO_FILE_METADATA_MAX; i++)
                        n += (size_t) snprintf(body + n, sizeof body - n, "%s\"k%u\":\"v\"", i ? "," : "", i);
                snprintf(body + n, sizeof body - n, "}}");
                ASSERT_ERRNO(parse_file(PROTO_FILE_WRITE, body, &req), EINVAL);
        }
        /* only FILE_WRITE takes it */
        ASSERT_ERRNO(parse_file(PROTO_FILE_LIST, "{\"path\":\"/a\",\"metadata\":{}}", &req), EINVAL);
}

TEST(file_requests) {
        ProtoFileRequest req = {};

        ASSERT_OK(parse_file(PROTO_FILE_READ, "{\"path\":\"/a\",\"offset\":10,\"length\":-1}", &req));
        ASSERT_STREQ(req.path, "/a");
        ASSERT_EQ(req.offset, 10);
        ASSERT_EQ(req.length, -1);
        proto_file_request_done(&req);

        ASSERT_OK(parse_file(PROTO_FILE_WRITE,
                             "{\"path\":\"rel/b\",\"mode\":420,\"append\":true,\"parents\":true,\"uid\":5,\"gid\":6}",
                             &req));
        ASSERT_EQ(req.mode, 0644);
        ASSERT_TRUE(req.have_mode && req.append && req.parents && req.have_uid && req.have_gid);
        ASSERT_EQ(req.uid, 5);
        ASSERT_EQ(req.gid, 6);
        proto_file_request_done(&req);

        ASSERT_OK(parse_file(PROTO_FILE_LIST, "{\"path\":\"/d\"}", &req));
        ASSERT_EQ(req.depth, 1);
        proto_file_request_done(&req);

        ASSERT_OK(parse_file(PROTO_FILE_RENAME, "{\"from\":\"/a\",\"to\":\"/b\"}", &req));
        ASSERT_STREQ(req.path, "/a");
        ASSERT_STREQ(req.to, "/b");
        proto_file_request_done(&req);

        ASSERT_OK(parse_file(PROTO_FILE_STAT, "{\"path\":\"x\",\"user\":0}", &req));
        ASSERT_STREQ(req.user, "0");
        proto_file_request_done(&req);

        ASSERT_ERRNO(parse_file(PROTO_FILE_READ, "{}", &req), EINVAL);
        ASSERT_ERRNO(parse_file(PROTO_FILE_READ, "{\"path\":\"\"}", &req), EINVAL);
        ASSERT_ERRNO(parse_file(PROTO_FILE_READ, "{\"path\":\"/a\\u0000b\"}", &req), EINVAL);
        ASSERT_ERRNO(parse_file(PROTO_FILE_READ, "{\"path\":\"/a\",\"length\":-2}", &req), EINVAL);
        ASSERT_ERRNO(parse_file(PROTO_FILE_READ, "{\"path\":\"/a\",\"offset\":-1}", &req), EINVAL);
        ASSERT_ERRNO(parse_file(PROTO_FILE_READ, "{\"path\":\"/a\",\"mode\":1}", &req), EINVAL); /* not a read key */
        ASSERT_ERRNO(parse_file(PROTO_FILE_WRITE, "{\"path\":\"/a\",\"mode\":4096}", &req), EINVAL);
        ASSERT_ERRNO(parse_file(PROTO_FILE_WRITE, "{\"path\":\"/a\",\"uid\":-1}", &req), EINVAL);
        ASSERT_ERRNO(parse_file(PROTO_FILE_LIST, "{\"path\":\"/a\",\"depth\":0}", &req), EINVAL);
        ASSERT_ERRNO(parse_file(PROTO_FILE_LIST, "{\"path\":\"/a\",\"depth\":1000}", &req), EINVAL);
        ASSERT_ERRNO(parse_file(PROTO_FILE_RENAME, "{\"from\":\"/a\"}", &req), EINVAL);
        ASSERT_ERRNO(parse_file(PROTO_FILE_RENAME, "{\"path\":\"/a\",\"to\":\"/b\"}", &req), EINVAL);
        ASSERT_ERRNO(parse_file(PROTO_EXEC, "{\"path\":\"/a\"}", &req), EINVAL);

        char *long_path = malloc(PROTO_PATH_MAX + 32);
        ASSERT_NOT_NULL(long_path);
        memcpy(long_path, "{\"path\":\"/", 10);
        memset(long_path + 10, 'a', PROTO_PATH_MAX);
        memcpy(long_path + 10 + PROTO_PATH_MAX, "\"}", 3);
        int r = parse_file(PROTO_FILE_STAT, long_path, &req);
        free(long_path);
        ASSERT_ERRNO(r, EINVAL);
}

static int parse_control(ProtoType t, const char *json, ProtoControlRequest *req) {
        _cleanup_json_ JsonValue *v = NULL;
        char err[256];
        int r = json_parse(json, strlen(json), &v, NULL, 0);
        if (r < 0)
                return r;
        return proto_control_request_parse(t, v, req, err, sizeof err);
}

TEST(control_requests) {
        ProtoControlRequest req = {};

        ASSERT_OK(parse_control(PROTO_SIGNAL, "{\"signal\":\"SIGTERM\"}", &req));
        ASSERT_EQ(req.signal, SIGTERM);
        ASSERT_NULL(req.exec_id);
        proto_control_request_done(&req);
        ASSERT_OK(parse_control(PROTO_SIGNAL, "{\"signal\":\"INT\",\"exec_id\":\"e4\"}", &req));
        ASSERT_EQ(req.signal, SIGINT);
        ASSERT_STREQ(req.exec_id, "e4");
        proto_control_request_done(&req);
        ASSERT_OK(parse_control(PROTO_SIGNAL, "{\"signal\":9}", &req));
        ASSERT_EQ(req.signal, SIGKILL);
        proto_control_request_done(&req);
        ASSERT_OK(parse_control(PROTO_RESIZE, "{\"rows\":10,\"cols\":20}", &req));
        ASSERT_EQ(req.rows, 10);
        ASSERT_EQ(req.cols, 20);
        proto_control_request_done(&req);
        ASSERT_OK(parse_control(PROTO_ATTACH, "{\"exec_id\":\"e1\",\"output\":true}", &req));
        ASSERT_TRUE(req.output);
        ASSERT_FALSE(req.have_from);
        proto_control_request_done(&req);
        ASSERT_OK(parse_control(PROTO_ATTACH, "{\"exec_id\":\"e1\",\"output\":true,\"from\":12}", &req));
        ASSERT_TRUE(req.have_from && req.from == 12);
        proto_control_request_done(&req);
        ASSERT_ERRNO(parse_control(PROTO_ATTACH, "{\"exec_id\":\"e1\",\"from\":-1}", &req), EINVAL);
        ASSERT_ERRNO(parse_control(PROTO_ATTACH, "{\"exec_id\":\"e1\",\"from\":\"0\"}", &req), EINVAL);
        ASSERT_OK(parse_control(PROTO_PS, "{}", &req));
        proto_control_request_done(&req);
        ASSERT_OK(proto_control_request_parse(PROTO_PS, NULL, &req, NULL, 0));
        proto_control_request_done(&req);

        ASSERT_ERRNO(parse_control(PROTO_SIGNAL, "{}", &req), EINVAL);
        ASSERT_ERRNO(parse_control(PROTO_SIGNAL, "{\"signal\":\"SIGNOPE\"}", &req), EINVAL);
        ASSERT_ERRNO(parse_control(PROTO_SIGNAL, "{\"signal\":0}", &req), EINVAL);
        ASSERT_ERRNO(parse_control(PROTO_SIGNAL, "{\"signal\":65}", &req), EINVAL);
        ASSERT_ERRNO(parse_control(PROTO_RESIZE, "{\"rows\":10}", &req), EINVAL);
        ASSERT_ERRNO(parse_control(PROTO_RESIZE, "{\"rows\":0,\"cols\":1}", &req), EINVAL);
        ASSERT_ERRNO(parse_control(PROTO_ATTACH, "{}", &req), EINVAL);
        ASSERT_ERRNO(parse_control(PROTO_ATTACH, "{\"exec_id\":7}", &req), EINVAL);
        ASSERT_ERRNO(parse_control(PROTO_PS, "{\"x\":1}", &req), EINVAL);
        ASSERT_ERRNO(parse_control(PROTO_EXEC, "{}", &req), EINVAL);
}

TEST(signal_names) {
        ASSERT_EQ(proto_signal_from_string("SIGKILL"), SIGKILL);
        ASSERT_EQ(proto_signal_from_string("KILL"), SIGKILL);
        ASSERT_EQ(proto_signal_from_string("15"), SIGTERM);
        ASSERT_EQ(proto_signal_from_string("SIG40"), 40);
        ASSERT_EQ(proto_signal_from_string("SIGWINCH"), SIGWINCH);
        ASSERT_EQ(proto_signal_from_string("sigterm"), -EINVAL);
        ASSERT_EQ(proto_signal_from_string(""), -EINVAL);
        ASSERT_EQ(proto_signal_from_string("SIG"), -EINVAL);
        ASSERT_EQ(proto_signal_from_string("0"), -EINVAL);
        ASSERT_EQ(proto_signal_from_string("99"), -EINVAL);
        ASSERT_EQ(proto_signal_from_string(NULL), -EINVAL);
        ASSERT_STREQ(proto_signal_to_string(SIGTERM), "SIGTERM");
        ASSERT_STREQ(proto_signal_to_string(SIGSYS), "SIGSYS");
        ASSERT_NULL(proto_signal_to_string(0));
        ASSERT_NULL(proto_signal_to_string(40));
        for (int sig = 1; sig < 32; sig++) {
                const char *s = proto_signal_to_string(sig);
                if (s)
                        ASSERT_EQ(proto_signal_from_string(s), sig);
        }
}

TEST(error_json) {
        _cleanup_free_ char *s = NULL, *t = NULL;
        _cleanup_json_ JsonValue *v = NULL;
        int64_t e;

        ASSERT_OK(proto_error_json(-ENOENT, "no \"such\" file", &s));
        ASSERT_OK(json_parse(s, strlen(s), &v, NULL, 0));
        ASSERT_OK(json_int64(json_get(v, "errno"), &e));
        ASSERT_EQ(e, ENOENT);
        ASSERT_STREQ(json_string(json_get(v, "code")), "ENOENT");
        ASSERT_STREQ(json_string(json_get(v, "message")), "no \"such\" file");
        ASSERT_OK(proto_error_json(EDQUOT, NULL, &t));
        ASSERT_TRUE(strstr(t, "\"EDQUOT\"") != NULL);
}

/* vmux: frames from a guest are hostile input */

TEST(vmux_header_rejections) {
        uint8_t h[VMUX_HEADER_SIZE];
        uint32_t c, t, l;

        vmux_header_put(h, 7, VMUX_DATA, VMUX_DATA_MAX);
        ASSERT_OK(vmux_header_get(h, sizeof h, &c, &t, &l));
        ASSERT_EQ(c, 7U);
        ASSERT_EQ(t, (uint32_t) VMUX_DATA);
        ASSERT_EQ(l, VMUX_DATA_MAX);
        ASSERT_ERRNO(vmux_header_get(h, sizeof h - 1, &c, &t, &l), EAGAIN);
        vmux_header_put(h, 7, VMUX_DATA, VMUX_DATA_MAX + 1);
        ASSERT_ERRNO(vmux_header_get(h, sizeof h, &c, &t, &l), EBADMSG);
        vmux_header_put(h, 7, 0, 0);
        ASSERT_ERRNO(vmux_header_get(h, sizeof h, &c, &t, &l), EBADMSG);
        vmux_header_put(h, 7, _VMUX_TYPE_MAX, 0);
        ASSERT_ERRNO(vmux_header_get(h, sizeof h, &c, &t, &l), EBADMSG);
        vmux_header_put(h, 7, VMUX_CREDIT, 3);
        ASSERT_ERRNO(vmux_header_get(h, sizeof h, &c, &t, &l), EBADMSG);
        vmux_header_put(h, 7, VMUX_OPEN, 1);
        ASSERT_ERRNO(vmux_header_get(h, sizeof h, &c, &t, &l), EBADMSG);
        vmux_header_put(h, 0, VMUX_HELLO, 0);
        ASSERT_OK(vmux_header_get(h, sizeof h, &c, &t, &l));
}

/* The host side of a link whose guest end sends the bytes given, then
 * closes: what vmux_run returns (run in a child, as it blocks). */
static int vmux_host_against(const uint8_t *bytes, size_t n) {
        char path[PATH_MAX];
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int sv[2], lfd, status;
        pid_t pid;

        (void) snprintf(path, sizeof path, "%s/agent.sock", test_tmpdir());
        (void) unlink(path);
        ASSERT_TRUE(strlen(path) < sizeof sa.sun_path);
        memcpy(sa.sun_path, path, strlen(path));
        lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ASSERT_TRUE(lfd >= 0);
        ASSERT_OK(bind(lfd, (struct sockaddr *) &sa, sizeof sa));
        ASSERT_OK(listen(lfd, 4));
        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
        pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                VmuxConfig cfg = { .role = VMUX_ROLE_HOST, .link_fd = sv[0], .listen_fd = lfd, .ready_fd = -1 };
                safe_close(sv[1]);
                _exit(-vmux_run(&cfg) & 0xff);
        }
        safe_close(sv[0]);
        safe_close(lfd);
        ASSERT_TRUE(write(sv[1], bytes, n) == (ssize_t) n);
        ASSERT_OK(shutdown(sv[1], SHUT_WR));
        ASSERT_TRUE(waitpid(pid, &status, 0) == pid);
        safe_close(sv[1]);
        ASSERT_TRUE(WIFEXITED(status));
        return -WEXITSTATUS(status);
}

TEST(vmux_hostile_guest_resets_the_link) {
        uint8_t b[2 * VMUX_HEADER_SIZE];

        /* a guest that says hello and goes away: a clean end */
        vmux_header_put(b, 0, VMUX_HELLO, 0);
        ASSERT_EQ(vmux_host_against(b, VMUX_HEADER_SIZE), 0);
        /* an unknown frame type, an oversized frame, a credit of the wrong size */
        vmux_header_put(b + VMUX_HEADER_SIZE, 1, 99, 0);
        ASSERT_EQ(vmux_host_against(b, sizeof b), -EPROTO);
        vmux_header_put(b + VMUX_HEADER_SIZE, 1, VMUX_DATA, UINT32_MAX);
        ASSERT_EQ(vmux_host_against(b, sizeof b), -EPROTO);
        vmux_header_put(b + VMUX_HEADER_SIZE, 1, VMUX_CREDIT, 5);
        ASSERT_EQ(vmux_host_against(b, sizeof b), -EPROTO);
}
