/* SPDX-License-Identifier: MIT */
/* The worker client's agent streams: a connection that speaks the agent
 * protocol to a sandbox's agent, directly (local) or through the sandbox's
 * worker (cluster, worker-net.h). */
#include <stdio.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "fd-util.h"
#include "json.h"
#include "proto.h"
#include "str-util.h"
#include "worker-client-internal.h"
#include "cluster-net.h"
#include "worker-proto.h"

#define AGENT_HELLO_TIMEOUT_MSEC 10000

/* Cluster: a fresh connection to the sandbox's worker that becomes a stream
 * (op: agent or port; worker-net.h); the reply line is read byte by byte so
 * that nothing of the stream's first bytes is consumed. */
static int stream_connect_remote(WorkerClient *w, const char *id, WorkerOpKind op, int64_t slot, int port,
                                 int *ret_fd, ApiError *e) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_json_ JsonValue *v = NULL;
        char line[WORKER_HANDSHAKE_LINE_MAX];
        WorkerCall call;
        bool ok = false;
        size_t len;
        int r;

        r = worker_client_select_sandbox(w, id, e);
        if (r < 0)
                return r;
        r = worker_client_open_connection(w, &fd);
        if (r < 0)
                return api_error(e, r, API_UNAVAILABLE, "worker '%s' (%s) unavailable: %s", w->target,
                                 w->target_address, strerror(-r));
        worker_client_request_begin(&call, op);
        json_w_kv_string(&call.jw, "id", id);
        if (op == WORKER_OP_PORT) {
                json_w_kv_int(&call.jw, "slot", slot);
                json_w_kv_int(&call.jw, "port", port);
        }
        json_w_object_end(&call.jw);
        r = worker_client_send_request(fd, &call);
        if (r >= 0)
                r = net_read_line(fd, line, sizeof line, worker_op(op)->deadline_msec, &len);
        if (r < 0)
                return api_error(e, r, API_BAD_GATEWAY, "worker '%s' did not open the %s stream: %s", w->target,
                                 op == WORKER_OP_PORT ? "port" : "agent", strerror(-r));
        if (json_parse(line, len, &v, NULL, 0) < 0 || json_bool(json_get(v, "ok"), &ok) < 0)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "malformed worker reply");
        if (!ok) {
                ApiErrorCode code = api_error_code_from_string(strempty(json_string(json_get(v, "code"))));
                return api_error(e, -EIO, code == API_NOT_FOUND ? API_NOT_FOUND : API_BAD_GATEWAY, "%s",
                                 strna(json_string(json_get(v, "message"))));
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int worker_port_connect(WorkerClient *w, const Sandbox *sb, uint16_t port, int *ret_fd, ApiError *e) {
        if (!w->store)
                return api_error(e, -EOPNOTSUPP, API_NOT_IMPLEMENTED, "the local worker serves no port streams");
        return stream_connect_remote(w, sb->id, WORKER_OP_PORT, (int64_t) sb->slot, port, ret_fd, e);
}

int worker_agent_connect(WorkerClient *w, const char *id, int *ret_fd, ApiError *e) {
        _cleanup_close_ int fd = -EBADF;
        char path[PATH_MAX];
        ProtoFrame f = {};
        struct timeval tv = { .tv_sec = AGENT_HELLO_TIMEOUT_MSEC / 1000 };
        int r;

        if (w->store) {
                r = stream_connect_remote(w, id, WORKER_OP_AGENT, 0, 0, &fd, e);
                if (r < 0)
                        return r;
        } else {
                if ((size_t) snprintf(path, sizeof path, "%s/%s/agent.sock", w->agent_dir, id) >= sizeof path)
                        return api_error(e, -ENAMETOOLONG, API_INTERNAL, "agent path too long");
                r = socket_connect_unix(path, &fd);
                if (r < 0)
                        return api_error(e, r, API_BAD_GATEWAY, "cannot reach the sandbox's agent: %s",
                                         strerror(-r));
        }
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        r = proto_recv(fd, &f);
        if (r < 0 || f.type != PROTO_HELLO) {
                proto_frame_done(&f);
                return api_error(e, r < 0 ? r : -EBADMSG, API_BAD_GATEWAY, "the sandbox's agent did not greet: %s",
                                 r < 0 ? strerror(-r) : "unexpected frame");
        }
        proto_frame_done(&f);
        tv.tv_sec = 0;
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        *ret_fd = TAKE_FD(fd);
        return 0;
}
