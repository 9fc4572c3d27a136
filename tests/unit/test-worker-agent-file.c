/* SPDX-License-Identifier: MIT */
/* src/worker/worker-agent-file.c against a hostile agent: the replies are
 * queued on a socketpair before the call (the agent's side is only what it
 * sends). A file larger than asked, an error, a broken frame, a flood of
 * frames for other streams: each a clear -errno, nothing read past the
 * bound. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <pthread.h>
#include <unistd.h>

#include "fd-util.h"
#include "proto.h"
#include "test.h"
#include "time-util.h"
#include "worker-internal.h"

#define STREAM 1U

static void pair(int fds[2]) {
        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds));
}

/* our end of the exchange, due in msec (one at a time) */
static const AgentFile *af(int fd, int64_t msec) {
        static AgentFile a;

        a = (AgentFile){ .fd = fd, .deadline_msec = mono_msec() + msec };
        return &a;
}

TEST(read_bounded_and_errors) {
        int fds[2];
        char *data = NULL, big[300];
        size_t n = 0;

        /* a whole small file */
        pair(fds);
        ASSERT_OK(proto_send_json(fds[1], PROTO_FILE_INFO, STREAM, "{\"size\":5,\"mode\":420,\"type\":\"file\"}"));
        ASSERT_OK(proto_send(fds[1], PROTO_DATA, STREAM, "hello", 5));
        ASSERT_OK(proto_send(fds[1], PROTO_DATA_END, STREAM, NULL, 0));
        ASSERT_OK(worker_agent_file_read(af(fds[0], 10000), "/etc/x", 100, &data, &n));
        ASSERT_EQ(n, (size_t) 5);
        ASSERT_STREQ(data, "hello");
        free(data);
        data = NULL;
        safe_close(fds[0]);
        safe_close(fds[1]);

        /* more than the bound: refused, not grown */
        pair(fds);
        memset(big, 'a', sizeof big);
        ASSERT_OK(proto_send_json(fds[1], PROTO_FILE_INFO, STREAM, "{\"size\":300,\"mode\":420,\"type\":\"file\"}"));
        ASSERT_OK(proto_send(fds[1], PROTO_DATA, STREAM, big, sizeof big));
        ASSERT_ERRNO(worker_agent_file_read(af(fds[0], 10000), "/etc/x", 100, &data, &n), EFBIG);
        ASSERT_NULL(data);
        safe_close(fds[0]);
        safe_close(fds[1]);

        /* the agent's error, by its code */
        pair(fds);
        ASSERT_OK(proto_send_json(fds[1], PROTO_ERROR, STREAM, "{\"errno\":2,\"code\":\"ENOENT\",\"message\":\"no\"}"));
        ASSERT_ERRNO(worker_agent_file_read(af(fds[0], 10000), "/etc/x", 100, &data, &n), ENOENT);
        safe_close(fds[0]);
        safe_close(fds[1]);

        /* a broken frame header */
        pair(fds);
        ASSERT_TRUE(write(fds[1], "\xff\xff\xff\xff\xff\xff\x00\x00\x01\x00\x00\x00", 12) == 12);
        ASSERT_TRUE(worker_agent_file_read(af(fds[0], 10000), "/etc/x", 100, &data, &n) < 0);
        ASSERT_NULL(data);
        safe_close(fds[0]);
        safe_close(fds[1]);

        /* a flood of frames for other streams: given up on, bounded */
        pair(fds);
        for (unsigned i = 0; i < 100; i++)
                ASSERT_OK(proto_send(fds[1], PROTO_STDOUT, 7, "x", 1));
        ASSERT_ERRNO(worker_agent_file_read(af(fds[0], 10000), "/etc/x", 100, &data, &n), EBADMSG);
        safe_close(fds[0]);
        safe_close(fds[1]);

        /* the peer gone */
        pair(fds);
        safe_close(fds[1]);
        ASSERT_TRUE(worker_agent_file_read(af(fds[0], 10000), "/etc/x", 100, &data, &n) < 0);
        safe_close(fds[0]);
}

TEST(write_result_and_error) {
        ProtoFrame f = {};
        int fds[2];

        pair(fds);
        ASSERT_OK(proto_send_json(fds[1], PROTO_RESULT, STREAM, "{\"bytes\":3}"));
        ASSERT_OK(worker_agent_file_write(af(fds[0], 10000), "/etc/ssl/certs/x.pem", "abc", 3, 0644));
        /* what the agent got: FILE_WRITE, the data, DATA_END */
        ASSERT_OK(proto_recv(fds[1], &f));
        ASSERT_EQ(f.type, PROTO_FILE_WRITE);
        ASSERT_TRUE(strstr(f.payload, "\"path\":\"/etc/ssl/certs/x.pem\"") != NULL);
        ASSERT_TRUE(strstr(f.payload, "\"mode\":420") != NULL);
        proto_frame_done(&f);
        ASSERT_OK(proto_recv(fds[1], &f));
        ASSERT_EQ(f.type, PROTO_DATA);
        ASSERT_EQ(f.len, 3U);
        proto_frame_done(&f);
        ASSERT_OK(proto_recv(fds[1], &f));
        ASSERT_EQ(f.type, PROTO_DATA_END);
        proto_frame_done(&f);
        safe_close(fds[0]);
        safe_close(fds[1]);

        pair(fds);
        ASSERT_OK(proto_send_json(fds[1], PROTO_ERROR, STREAM, "{\"errno\":13,\"code\":\"EACCES\",\"message\":\"no\"}"));
        ASSERT_ERRNO(worker_agent_file_write(af(fds[0], 10000), "/etc/x", "abc", 3, 0644), EACCES);
        safe_close(fds[0]);
        safe_close(fds[1]);
}

/* A guest that trickles a frame a byte at a time, or never reads what it is
 * sent, holds the exchange only until its deadline: every wait is bounded by
 * it, not by a timeout per byte. */
static void *trickle(void *arg) {
        int fd = *(int *) arg;
        uint8_t hdr[PROTO_HEADER_SIZE];

        proto_header_encode(hdr, PROTO_FILE_INFO, STREAM, 64);
        for (size_t i = 0;; i++) {
                uint8_t b = i < sizeof hdr ? hdr[i] : '{';
                if (send(fd, &b, 1, MSG_NOSIGNAL) != 1)
                        return NULL; /* our end closed */
                usleep(5000);
        }
}

TEST(a_trickling_or_stalled_agent_holds_us_only_until_the_deadline) {
        char *data = NULL, *big;
        pthread_t t;
        int fds[2];
        size_t n = 0;

        pair(fds);
        ASSERT_OK(-pthread_create(&t, NULL, trickle, &fds[1]));
        ASSERT_ERRNO(worker_agent_file_read(af(fds[0], 200), "/etc/x", 100, &data, &n), ETIMEDOUT);
        ASSERT_NULL(data);
        safe_close(fds[0]);
        ASSERT_OK(-pthread_join(t, NULL));
        safe_close(fds[1]);

        /* it reads nothing: a write larger than the socket's buffers waits for room, until the deadline */
        pair(fds);
        big = calloc(1, 8U << 20);
        ASSERT_NOT_NULL(big);
        ASSERT_ERRNO(worker_agent_file_write(af(fds[0], 200), "/etc/x", big, 8U << 20, 0644),
                     ETIMEDOUT);
        free(big);
        safe_close(fds[0]);
        safe_close(fds[1]);

        /* it answers nothing */
        pair(fds);
        ASSERT_ERRNO(worker_agent_file_write(af(fds[0], 100), "/etc/x", "abc", 3, 0644), ETIMEDOUT);
        safe_close(fds[0]);
        safe_close(fds[1]);
}
