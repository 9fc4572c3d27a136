/* SPDX-License-Identifier: MIT */
/* Small files in a running sandbox, through its agent (the vm runtime,
 * whose files are inside its disk image while the guest runs): one
 * connection to the agent's socket (the relay's, for a vm), FILE_READ and
 * FILE_WRITE of src/proto/proto.h. The worker's credentials put the
 * sandbox's CA into its trust store this way (worker-cred.c).
 *
 * Every frame from the agent is hostile: proto_recv_until() bounds the
 * frames, the reads are bounded by the caller's max, and the whole exchange
 * by one deadline (AGENT_FILE_TIMEOUT_MSEC from the open), however slowly
 * the guest trickles its bytes or reads ours. */
#include <stdio.h>
#include <sys/socket.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "json.h"
#include "proto.h"
#include "str-util.h"
#include "time-util.h"
#include "worker-internal.h"

#define AGENT_FILE_STREAM 1U
#define AGENT_FILE_TIMEOUT_MSEC 30000   /* the whole exchange: a guest under software emulation is slow */
#define AGENT_FILE_FOREIGN_MAX 64U      /* frames of other streams skipped before giving up */

static int recv_frame(const AgentFile *a, ProtoFrame *ret) {
        for (unsigned skipped = 0; skipped <= AGENT_FILE_FOREIGN_MAX; skipped++) {
                ProtoFrame f = {};
                int r = proto_recv_until(a->fd, a->deadline_msec, &f);

                if (r < 0)
                        return r;
                if (f.type == PROTO_HELLO || f.stream == AGENT_FILE_STREAM) {
                        *ret = f;
                        return 0;
                }
                proto_frame_done(&f);
        }
        return -EBADMSG;
}

/* The errno an ERROR frame carries (-EIO if it carries none we know). */
static int frame_errno(const ProtoFrame *f) {
        _cleanup_json_ JsonValue *v = NULL;
        const char *code;
        int r;

        if (f->type != PROTO_ERROR)
                return -EBADMSG;
        if (json_parse(f->payload, f->len, &v, NULL, 0) < 0)
                return -EBADMSG;
        code = json_string(json_get(v, "code"));
        r = proto_errno_from_code(code); /* the errno (positive), -EINVAL for a code we do not know */
        return r > 0 ? -r : -EIO;
}

void worker_agent_file_close(AgentFile *a) {
        a->fd = safe_close(a->fd);
}

int worker_agent_file_open(Worker *w, const char *id, AgentFile *ret) {
        _cleanup_(proto_frame_done) ProtoFrame hello = {};
        _cleanup_(worker_agent_file_close) AgentFile a = { .fd = -EBADF };
        char path[PATH_MAX];
        int r;

        r = worker_agent_socket(w, id, path, sizeof path);
        if (r < 0)
                return r;
        r = socket_connect_unix(path, &a.fd);
        if (r < 0)
                return r;
        a.deadline_msec = mono_msec() + AGENT_FILE_TIMEOUT_MSEC;
        r = recv_frame(&a, &hello);
        if (r < 0)
                return r;
        if (hello.type != PROTO_HELLO)
                return -EBADMSG;
        *ret = a;
        a.fd = -EBADF;
        return 0;
}

int worker_agent_file_read(const AgentFile *a, const char *path, size_t max, char **ret, size_t *ret_n) {
        _cleanup_(proto_frame_done) ProtoFrame info = {};
        _cleanup_(json_w_done) JsonWriter jw;
        _cleanup_free_ char *json = NULL, *buf = NULL;
        size_t n = 0;
        int r;

        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "path", path);
        json_w_kv_int(&jw, "offset", 0);
        json_w_kv_int(&jw, "length", (int64_t) max + 1); /* one more: a larger file is told apart */
        json_w_object_end(&jw);
        if (json_w_finish(&jw, &json, NULL) < 0)
                return -ENOMEM;
        r = proto_send_until(a->fd, a->deadline_msec, PROTO_FILE_READ, AGENT_FILE_STREAM, json, strlen(json));
        if (r < 0)
                return r;
        r = recv_frame(a, &info);
        if (r < 0)
                return r;
        if (info.type != PROTO_FILE_INFO)
                return frame_errno(&info);
        buf = malloc(max + 1);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                _cleanup_(proto_frame_done) ProtoFrame f = {};

                r = recv_frame(a, &f);
                if (r < 0)
                        return r;
                if (f.type == PROTO_DATA_END)
                        break;
                if (f.type != PROTO_DATA)
                        return frame_errno(&f);
                if (f.len > max - n)
                        return -EFBIG;
                memcpy(buf + n, f.payload, f.len);
                n += f.len;
        }
        buf[n] = 0;
        *ret = TAKE_PTR(buf);
        *ret_n = n;
        return 0;
}

int worker_agent_file_write(const AgentFile *a, const char *path, const void *data, size_t n, mode_t mode) {
        _cleanup_(proto_frame_done) ProtoFrame res = {};
        _cleanup_(json_w_done) JsonWriter jw;
        _cleanup_free_ char *json = NULL;
        int r;

        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "path", path);
        json_w_kv_int(&jw, "mode", (int64_t) mode);
        json_w_kv_bool(&jw, "parents", true);
        json_w_kv_int(&jw, "uid", 0);
        json_w_kv_int(&jw, "gid", 0);
        json_w_object_end(&jw);
        if (json_w_finish(&jw, &json, NULL) < 0)
                return -ENOMEM;
        r = proto_send_until(a->fd, a->deadline_msec, PROTO_FILE_WRITE, AGENT_FILE_STREAM, json, strlen(json));
        for (size_t off = 0; r >= 0 && off < n; off += MIN((size_t) PROTO_DATA_CHUNK, n - off))
                r = proto_send_until(a->fd, a->deadline_msec, PROTO_DATA, AGENT_FILE_STREAM, (const char *) data + off,
                                     MIN((size_t) PROTO_DATA_CHUNK, n - off));
        if (r >= 0)
                r = proto_send_until(a->fd, a->deadline_msec, PROTO_DATA_END, AGENT_FILE_STREAM, NULL, 0);
        if (r < 0)
                return r;
        r = recv_frame(a, &res);
        if (r < 0)
                return r;
        return res.type == PROTO_RESULT ? 0 : frame_errno(&res);
}
