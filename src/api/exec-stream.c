/* SPDX-License-Identifier: MIT */
/* The NDJSON event stream of an exec, relayed from the agent: output events
 * with the offset of their first byte (stdout and stderr counted together),
 * `dropped` where the agent's buffer lost bytes this reader had not read,
 * and one end for every way an exec ends: `exit` (code, signal, reason
 * timeout|killed|oom) or `error` (sandbox_gone when the sandbox was deleted
 * or stopped under it, exec_expired, bad_gateway). Used by POST .../exec and
 * by GET .../exec/{exec_id}/output (reattach). */

#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <time.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "base64.h"
#include "log.h"

#define EXEC_ACTIVITY_MSEC 1000       /* a running exec records activity this often */
#define EXEC_GONE_POLLS 30            /* store looks for the sandbox's fate once the agent went away ... */
#define EXEC_GONE_POLL_MSEC 100       /* ... this far apart */

static const char *const exec_output_table[_EXEC_OUTPUT_MAX] = {
        [EXEC_OUTPUT_TEXT] = "text",
        [EXEC_OUTPUT_BASE64] = "base64",
        [EXEC_OUTPUT_FRAMES] = "frames",
};

const char *exec_output_content_type(ExecOutput o) {
        return o == EXEC_OUTPUT_FRAMES ? "application/vnd.space.exec-frames" : "application/x-ndjson";
}

static int write_frame(ApiRequest *r, uint8_t kind, uint64_t offset, const char *p, size_t n) {
        uint8_t h[EXEC_FRAME_HEADER] = { kind };
        int k;

        if (n > UINT32_MAX)
                return -EMSGSIZE;
        for (int i = 0; i < 4; i++)
                h[4 + i] = (uint8_t) (n >> (24 - 8 * i));
        for (int i = 0; i < 8; i++)
                h[8 + i] = (uint8_t) (offset >> (56 - 8 * i));
        k = http_conn_stream_write(r->conn, h, sizeof h);
        if (k >= 0 && n > 0)
                k = http_conn_stream_write(r->conn, p, n);
        return k;
}

int exec_stream_event(ApiRequest *r, ExecOutput o, JsonWriter *w) {
        _cleanup_free_ char *text = NULL;
        size_t n;
        int k;

        if (o != EXEC_OUTPUT_FRAMES)
                return api_stream_line(r, w);
        k = json_w_finish(w, &text, &n);
        if (k < 0)
                return k;
        return write_frame(r, EXEC_FRAME_EVENT, 0, text, n);
}

const char *exec_output_to_string(ExecOutput o) {
        return o >= 0 && o < _EXEC_OUTPUT_MAX ? exec_output_table[o] : NULL;
}

ExecOutput exec_output_from_string(const char *s) {
        for (size_t i = 0; s && i < _EXEC_OUTPUT_MAX; i++)
                if (streq(exec_output_table[i], s))
                        return (ExecOutput) i;
        return _EXEC_OUTPUT_INVALID;
}

int exec_stream_error(ApiRequest *r, ExecOutput o, const char *code, const char *message) {
        _cleanup_(json_w_done) JsonWriter w;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "type", "error");
        json_w_kv_string(&w, "code", code);
        json_w_kv_string(&w, "message", message);
        json_w_object_end(&w);
        return exec_stream_event(r, o, &w);
}

/* Ends a stream that went wrong after it began: an error line, then the end. */
static int relay_abort(ExecRelay *x, const char *code, const char *message) {
        log_warning("Exec stream ended: %s: %s", code, message);
        if (exec_stream_error(x->r, x->output, code, message) < 0 || http_conn_stream_end(x->r->conn) < 0)
                http_conn_set_close(x->r->conn);
        return 0;
}

static void kv_u64(JsonWriter *w, const char *key, uint64_t v) {
        json_w_key(w, key);
        json_w_uint(w, v);
}

static int emit(ExecRelay *x, bool err, uint64_t offset, const char *p, size_t n) {
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_free_ char *b64 = NULL;

        json_w_init(&w);
        if (x->output == EXEC_OUTPUT_FRAMES)
                return write_frame(x->r, err ? EXEC_FRAME_STDERR : EXEC_FRAME_STDOUT, offset, p, n);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "type", err ? "stderr" : "stdout");
        kv_u64(&w, "offset", offset);
        if (x->output == EXEC_OUTPUT_TEXT && utf8_valid(p, n)) {
                json_w_key(&w, "data");
                json_w_string_n(&w, p, n);
        } else {
                if (base64_encode(p, n, &b64, NULL) < 0)
                        return -ENOMEM;
                json_w_kv_string(&w, "data_b64", b64);
        }
        json_w_object_end(&w);
        return api_stream_line(x->r, &w);
}

static int flush_carry(ExecRelay *x) {
        size_t n = x->carry_n;

        x->carry_n = 0;
        return n > 0 ? emit(x, x->carry_err, x->offset - n, x->carry, n) : 0;
}

/* Text: an incomplete UTF-8 sequence at the end of a chunk is held back for
 * the next chunk of the same stream, so characters split between frames stay
 * text; anything else in between sends it first. Events stay in offset order. */
static int on_output(ExecRelay *x, bool err, const char *p, size_t n) {
        _cleanup_free_ char *joined = NULL;
        const char *q = p;
        size_t m = n, tail;
        uint64_t start;
        int k;

        if (x->output != EXEC_OUTPUT_TEXT) {
                k = emit(x, err, x->offset, p, n);
                x->offset += n;
                return k;
        }
        if (x->carry_n > 0 && x->carry_err != err) {
                k = flush_carry(x);
                if (k < 0)
                        return k;
        }
        start = x->offset - x->carry_n;
        if (x->carry_n > 0) {
                joined = malloc(x->carry_n + n);
                if (!joined)
                        return -ENOMEM;
                memcpy(joined, x->carry, x->carry_n);
                memcpy(joined + x->carry_n, p, n);
                q = joined;
                m = x->carry_n + n;
                x->carry_n = 0;
        }
        x->offset += n;
        tail = utf8_incomplete_tail(q, m);
        if (tail > 0 && tail < sizeof x->carry && utf8_valid(q, m - tail)) {
                memcpy(x->carry, q + m - tail, tail);
                x->carry_n = tail;
                x->carry_err = err;
                m -= tail;
        }
        return m > 0 ? emit(x, err, start, q, m) : 0;
}

static int on_dropped(ExecRelay *x, const ProtoFrame *f) {
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_json_ JsonValue *v = NULL;
        uint64_t bytes;
        int k;

        if (agent_call_parse(f, &v, NULL) < 0 || json_uint64(json_get(v, "bytes"), &bytes) < 0 || bytes == 0 ||
            bytes > UINT64_MAX - x->offset)
                return -EBADMSG;
        k = flush_carry(x);
        if (k < 0)
                return k;
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "type", "dropped");
        kv_u64(&w, "offset", x->offset);
        kv_u64(&w, "bytes", bytes);
        json_w_object_end(&w);
        x->offset += bytes;
        return exec_stream_event(x->r, x->output, &w);
}

static void msleep(unsigned ms);

/* The agent tells an OOM kill itself (a SIGKILL while its sandbox's OOM
 * count grew): reason "oom" in EXIT, so an exec never waits on the worker. */
static bool exit_was_oom(const JsonValue *v) {
        return streq(strempty(json_string(json_get(v, "reason"))), "oom");
}

static int on_exit_frame(ExecRelay *x, const ProtoFrame *f) {
        _cleanup_(json_w_done) JsonWriter check, w;
        _cleanup_json_ JsonValue *v = NULL;
        int64_t code = 0;
        bool oom;

        json_w_init(&check);
        json_w_init(&w);
        if (agent_call_parse(f, &v, NULL) < 0 || json_out_exit(&check, v) < 0)
                return -EBADMSG;
        (void) json_int64(json_get(v, "code"), &code);
        oom = exit_was_oom(v);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "type", "exit");
        json_w_kv_int(&w, "code", code);
        if (json_type(json_get(v, "signal")) == JSON_STRING)
                json_w_kv_string(&w, "signal", json_string(json_get(v, "signal")));
        if (oom)
                json_w_kv_string(&w, "reason", "oom");
        else if (json_type(json_get(v, "reason")) == JSON_STRING)
                json_w_kv_string(&w, "reason", json_string(json_get(v, "reason")));
        kv_u64(&w, "offset", x->offset);
        json_w_object_end(&w);
        if (oom)
                log_info("Exec of sandbox %s was killed by the kernel's OOM killer", x->sandbox_id);
        if (flush_carry(x) < 0 || exec_stream_event(x->r, x->output, &w) < 0 || http_conn_stream_end(x->r->conn) < 0)
                http_conn_set_close(x->r->conn);
        return 0;
}

static void msleep(unsigned ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* The agent went away before the exit: was it the sandbox (deleted, stopped,
 * suspended)? The store says so once the lifecycle call that did it marked it. */
static bool sandbox_gone(ExecRelay *x, char *why, size_t size) {
        for (unsigned i = 0; i < EXEC_GONE_POLLS; i++) {
                Sandbox sb = {};
                int k = store_sandbox_get(x->r->store, NULL, x->sandbox_id, &sb);

                if (k == -ENOENT) {
                        snprintf(why, size, "the sandbox was deleted while the command ran");
                        return true;
                }
                if (k >= 0 && sb.state != SANDBOX_RUNNING && sb.state != SANDBOX_PAUSED) {
                        snprintf(why, size, "the sandbox is %s: the command ended with it",
                                 sb.state == SANDBOX_DELETING ? "being deleted"
                                                               : sandbox_state_to_string(sb.state) ?: "gone");
                        sandbox_done(&sb);
                        return true;
                }
                if (k >= 0)
                        sandbox_done(&sb);
                msleep(EXEC_GONE_POLL_MSEC);
        }
        return false;
}

static int agent_lost(ExecRelay *x, const char *what) {
        char why[160];

        (void) flush_carry(x);
        if (sandbox_gone(x, why, sizeof why))
                return relay_abort(x, "sandbox_gone", why);
        return relay_abort(x, "bad_gateway", what);
}

int exec_relay(ExecRelay *x) {
        ApiRequest *r = x->r;
        unsigned foreign = 0;
        int64_t touched = now_usec();

        for (;;) {
                _cleanup_(proto_frame_done) ProtoFrame f = {};
                struct pollfd p[2] = {
                        { .fd = x->fd, .events = POLLIN },
                        { .fd = http_conn_fd(r->conn), .events = POLLRDHUP },
                };
                ApiError ae = {};
                int k;

                if (now_usec() - touched >= EXEC_ACTIVITY_MSEC * 1000) {
                        (void) store_sandbox_touch(r->store, x->sandbox_id);
                        touched = now_usec();
                }
                k = poll(p, 2, EXEC_ACTIVITY_MSEC);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return relay_abort(x, "internal", "poll failed");
                if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) {
                        /* the exec lives on (unless on_disconnect says otherwise): it can be reattached */
                        log_info("Client went away during exec: closing the agent connection");
                        http_conn_set_close(r->conn);
                        return 0;
                }
                if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
                        continue;

                k = proto_recv(x->fd, &f);
                if (k == -ECONNRESET)
                        return agent_lost(x, "the agent closed the connection before the exit");
                if (k < 0)
                        return agent_lost(x, "the agent sent a malformed frame");
                if (f.stream != AGENT_STREAM) {
                        if (++foreign > AGENT_FOREIGN_FRAMES_MAX)
                                return relay_abort(x, "bad_gateway", "the agent sent too many unexpected frames");
                        continue;
                }

                switch (f.type) {
                case PROTO_STDOUT:
                case PROTO_STDERR:
                        if (f.len == 0)
                                break;
                        k = on_output(x, f.type == PROTO_STDERR, f.payload, f.len);
                        if (k < 0) {
                                /* a client that stopped reading (http_stall_s) or left: the exec lives on */
                                log_info_errno(k, "Writing exec output to the client failed, detaching: %m");
                                http_conn_set_close(r->conn);
                                return 0;
                        }
                        break;
                case PROTO_DROPPED:
                        k = on_dropped(x, &f);
                        if (k == -EBADMSG)
                                return relay_abort(x, "bad_gateway", "the agent sent a malformed DROPPED payload");
                        if (k < 0) {
                                http_conn_set_close(r->conn);
                                return 0;
                        }
                        break;
                case PROTO_EXIT:
                        if (on_exit_frame(x, &f) < 0)
                                return relay_abort(x, "bad_gateway", "the agent sent a malformed EXIT payload");
                        return 0;
                case PROTO_ERROR:
                        k = agent_call_error(&f, NULL, &ae);
                        (void) flush_carry(x);
                        if (k == -ESRCH)
                                return relay_abort(x, "exec_expired", ae.message);
                        return relay_abort(x, "exec_failed", ae.message);
                default:
                        return relay_abort(x, "bad_gateway", "the agent sent an unexpected frame");
                }
        }
}
