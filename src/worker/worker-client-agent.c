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

/* Cluster: a fresh connection to the sandbox's worker that becomes the
 * agent stream (worker-net.h); the reply line is read byte by byte so that
 * nothing of the agent's first frame is consumed. */
static int agent_connect_remote(WorkerClient *w, const char *id, int *ret_fd, ApiError *e) {
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
        worker_client_request_begin(&call, WORKER_OP_AGENT);
        json_w_kv_string(&call.jw, "id", id);
        json_w_object_end(&call.jw);
        r = worker_client_send_request(fd, &call);
        if (r >= 0)
                r = net_read_line(fd, line, sizeof line, worker_op(WORKER_OP_AGENT)->deadline_msec, &len);
        if (r < 0)
                return api_error(e, r, API_BAD_GATEWAY, "worker '%s' did not open the agent stream: %s", w->target,
                                 strerror(-r));
        if (json_parse(line, len, &v, NULL, 0) < 0 || json_bool(json_get(v, "ok"), &ok) < 0)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "malformed worker reply");
        if (!ok)
                return api_error(e, -EIO, API_BAD_GATEWAY, "worker '%s': %s", w->target,
                                 strna(json_string(json_get(v, "message"))));
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int worker_agent_connect(WorkerClient *w, const char *id, int *ret_fd, ApiError *e) {
        _cleanup_close_ int fd = -EBADF;
        char path[PATH_MAX];
        ProtoFrame f = {};
        struct timeval tv = { .tv_sec = AGENT_HELLO_TIMEOUT_MSEC / 1000 };
        int r;

        if (w->store) {
                r = agent_connect_remote(w, id, &fd, e);
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
