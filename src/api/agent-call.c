/* SPDX-License-Identifier: MIT */
/* One request to a sandbox's agent over a fresh connection: connect through
 * the worker, send a request on AGENT_STREAM, read replies with timeouts.
 * Every frame from the agent is hostile: sizes are bounded by proto_recv(),
 * payloads are parsed strictly, and errors it reports are mapped, never
 * trusted for anything but a message. */

#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "api-internal.h"
#include "fd-util.h"
#include "log.h"

#define AGENT_MESSAGE_MAX 256U /* what we relay of an agent's error message */

int agent_call_connect(ApiRequest *r, const Sandbox *sb, int *ret_fd, ApiError *e) {
        struct timeval tv = { .tv_sec = AGENT_FRAME_TIMEOUT_SEC };
        int fd = -EBADF, k;

        k = api_get_worker(r, e);
        if (k < 0)
                return k;
        k = worker_agent_connect(r->worker, sb->id, &fd, e);
        if (k < 0) {
                if (e->code == API_OK)
                        (void) api_error(e, k, API_BAD_GATEWAY, "cannot reach the agent of sandbox '%s': %s", sb->id,
                                         strerror(-k));
                return k;
        }
        /* A frame that starts must finish in time; a peer that does not read must not block us forever. */
        if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0) {
                k = negative_errno();
                safe_close(fd);
                return api_error(e, k, API_BAD_GATEWAY, "cannot set up the agent connection: %s", strerror(-k));
        }
        *ret_fd = fd;
        return 0;
}

int agent_call_recv(int fd, int timeout_msec, ProtoFrame *ret, ApiError *e) {
        for (unsigned skipped = 0;; skipped++) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                ProtoFrame f = {};
                int k;

                k = poll(&p, 1, timeout_msec);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return api_error(e, negative_errno(), API_BAD_GATEWAY, "polling the agent failed: %m");
                if (k == 0)
                        return api_error(e, -ETIMEDOUT, API_BAD_GATEWAY, "the agent did not answer within %d ms",
                                         timeout_msec);
                k = proto_recv(fd, &f);
                if (k == -ECONNRESET)
                        return api_error(e, k, API_BAD_GATEWAY, "the agent closed the connection");
                if (k == -EBADMSG || k == -EMSGSIZE)
                        return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a malformed frame");
                if (k == -EAGAIN || k == -EWOULDBLOCK)
                        return api_error(e, -ETIMEDOUT, API_BAD_GATEWAY, "the agent stalled in the middle of a frame");
                if (k < 0)
                        return api_error(e, k, API_BAD_GATEWAY, "reading from the agent failed: %s", strerror(-k));
                if (f.stream == AGENT_STREAM) {
                        *ret = f;
                        return 0;
                }
                proto_frame_done(&f);
                if (skipped >= AGENT_FOREIGN_FRAMES_MAX)
                        return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent too many unexpected frames");
        }
}

int agent_call_parse(const ProtoFrame *f, JsonValue **ret, ApiError *e) {
        JsonValue *v = NULL;

        if (f->len > PROTO_JSON_MAX || json_parse(f->payload, f->len, &v, NULL, 0) < 0 ||
            json_type(v) != JSON_OBJECT) {
                json_free(v);
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a malformed %s payload",
                                 proto_type_to_string(f->type) ?: "?");
        }
        *ret = v;
        return 0;
}

ApiErrorCode agent_errno_to_code(int err) {
        switch (err < 0 ? -err : err) {
        case ENOENT:
        case ESRCH:
                return API_NOT_FOUND;
        case EISDIR:
        case ENOTDIR:
        case ELOOP:
        case ENAMETOOLONG:
        case EXDEV:
                return API_INVALID_PATH;
        case EEXIST:
                return API_ALREADY_EXISTS;
        case ENOTEMPTY:
        case EBUSY:
        case ETXTBSY:
                return API_CONFLICT;
        case EACCES:
        case EPERM:
        case EROFS:
                return API_FORBIDDEN;
        case ENOSPC:
        case EDQUOT:
                return API_INSUFFICIENT_STORAGE;
        case EINVAL:
        case E2BIG:
                return API_INVALID_ARGUMENT;
        case EFBIG:
                return API_PAYLOAD_TOO_LARGE;
        case ETIMEDOUT:
                return API_TIMEOUT;
        default:
                return API_INTERNAL;
        }
}

/* Keeps a relayed message printable and short. */
static void clean_message(const char *in, char *out, size_t size) {
        size_t j = 0;
        for (size_t i = 0; in && in[i] && j + 1 < size && i < AGENT_MESSAGE_MAX; i++)
                out[j++] = (unsigned char) in[i] < 0x20 ? ' ' : in[i];
        out[j] = 0;
}

int agent_call_error(const ProtoFrame *f, const char *what, ApiError *e) {
        _cleanup_json_ JsonValue *v = NULL;
        char msg[AGENT_MESSAGE_MAX + 1] = "";
        int err = EIO, k;
        int64_t n;
        JsonValue *x;

        if (f->type != PROTO_ERROR || agent_call_parse(f, &v, NULL) < 0)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent an unexpected %s frame",
                                 proto_type_to_string(f->type) ?: "unknown");
        /* the code string is portable across architectures; the number is a fallback */
        k = -EINVAL;
        if (json_type(json_get(v, "code")) == JSON_STRING)
                k = proto_errno_from_code(json_string(json_get(v, "code")));
        x = json_get(v, "errno");
        if (k != -EINVAL && k != 0)
                err = k < 0 ? -k : k;
        else if (x && json_int64(x, &n) >= 0 && n > 0 && n < 4096)
                err = (int) n;
        if (json_type(json_get(v, "message")) == JSON_STRING)
                clean_message(json_string(json_get(v, "message")), msg, sizeof msg);
        if (!msg[0])
                snprintf(msg, sizeof msg, "%s", strerror(err));
        /* the agent usually names the path or exec itself; else say what it was about */
        if (isempty(what) || strstr(msg, what))
                return api_error(e, -err, agent_errno_to_code(err), "%s", msg);
        return api_error(e, -err, agent_errno_to_code(err), "%s: %s", what, msg);
}

int agent_call_json(int fd, ProtoType type, const char *json, const char *what, JsonValue **ret, ApiError *e) {
        _cleanup_(proto_frame_done) ProtoFrame f = {};
        int k;

        k = proto_send_json(fd, type, AGENT_STREAM, json);
        if (k < 0)
                return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
        k = agent_call_recv(fd, AGENT_REPLY_TIMEOUT_MSEC, &f, e);
        if (k < 0)
                return k;
        if (f.type != PROTO_RESULT)
                return agent_call_error(&f, what, e);
        if (!ret)
                return 0;
        return agent_call_parse(&f, ret, e);
}
