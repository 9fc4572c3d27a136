/* SPDX-License-Identifier: MIT */
/* /v1/sandboxes/{id}/files: download and upload streamed through the agent
 * (never the whole file in memory), list, stat, mkdir, remove, move. Paths
 * are checked here and resolved inside the sandbox by the agent. */

#include <inttypes.h>
#include <poll.h>
#include <stdio.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "fd-util.h"
#include "log.h"

#define FILE_WHAT_MAX 80U /* how much of a path goes into an error message */

typedef struct FileCall {
        char *path;
        char what[FILE_WHAT_MAX + 8]; /* "'/a/b'" for messages */
        int fd;
} FileCall;

static void file_call_done(FileCall *c) {
        c->path = mfree(c->path);
        c->fd = safe_close(c->fd);
}

/* Checks ?path=, the sandbox, and connects to its agent. */
static int file_call_begin(ApiRequest *r, const char *key, FileCall *c, ApiError *e) {
        _cleanup_sandbox_ Sandbox sb = {};
        int k;

        c->fd = -EBADF;
        k = api_query_string(r, key, &c->path, e);
        if (k < 0 && e->code == API_INVALID_ARGUMENT)
                return api_error(e, k, API_INVALID_PATH, "%s is badly encoded (a bad %%-escape or a NUL byte)", key);
        if (k < 0)
                return k;
        if (k == 0)
                return api_error(e, -EINVAL, API_INVALID_PATH, "query parameter '%s' is required", key);
        k = api_validate_path(c->path, strlen(c->path), "path", e);
        if (k < 0)
                return k;
        snprintf(c->what, sizeof c->what, "'%.*s%s'", (int) FILE_WHAT_MAX - 3, c->path,
                 strlen(c->path) > FILE_WHAT_MAX - 3 ? "..." : "");
        k = api_sandbox_lookup(r, r->params[0], true, &sb, e);
        if (k < 0)
                return k;
        return agent_call_connect(r, &sb, &c->fd, e);
}

static int finish_json(JsonWriter *w, char **ret, ApiError *e) {
        if (json_w_finish(w, ret, NULL) < 0)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        return 0;
}

/* {"path":P, extra...} → agent request → RESULT */
static int path_request(FileCall *c, ProtoType type, const char *bool_key, bool bool_value, int64_t mode,
                        JsonValue **ret, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_free_ char *json = NULL;
        int k;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "path", c->path);
        if (bool_key)
                json_w_kv_bool(&w, bool_key, bool_value);
        if (mode >= 0)
                json_w_kv_int(&w, "mode", mode);
        if (type == PROTO_FILE_LIST)
                json_w_kv_int(&w, "depth", 1);
        json_w_object_end(&w);
        k = finish_json(&w, &json, e);
        if (k < 0)
                return k;
        return agent_call_json(c->fd, type, json, c->what, ret, e);
}

/* ---- GET ---- */

static int files_list(ApiRequest *r, FileCall *c, ApiError *e) {
        _cleanup_json_ JsonValue *result = NULL;
        _cleanup_(json_w_done) JsonWriter w;
        int k;

        json_w_init(&w);
        k = path_request(c, PROTO_FILE_LIST, NULL, false, -1, &result, e);
        if (k < 0)
                return k;
        if (json_out_agent_list(&w, result, "entries", json_out_file_entry) < 0)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a malformed listing");
        return api_reply_json(r, 200, &w);
}

static int files_stat(ApiRequest *r, FileCall *c, ApiError *e) {
        _cleanup_json_ JsonValue *result = NULL;
        _cleanup_(json_w_done) JsonWriter w;
        int k;

        json_w_init(&w);
        k = path_request(c, PROTO_FILE_STAT, NULL, false, -1, &result, e);
        if (k < 0)
                return k;
        if (json_out_file_entry(&w, result) < 0)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a malformed file entry");
        return api_reply_json(r, 200, &w);
}

/* Ends a download that broke after its head went out: the client sees a short body. */
static int download_abort(ApiRequest *r, const char *why) {
        log_warning("Download aborted: %s", why);
        http_conn_set_close(r->conn);
        return 0;
}

static int files_download(ApiRequest *r, FileCall *c, ApiError *e) {
        _cleanup_(proto_frame_done) ProtoFrame info = {};
        _cleanup_json_ JsonValue *v = NULL;
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_free_ char *json = NULL;
        char hdr[64];
        uint64_t size, done = 0;
        JsonValue *type;
        int k;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "path", c->path);
        json_w_kv_int(&w, "offset", 0);
        json_w_kv_int(&w, "length", -1);
        json_w_object_end(&w);
        k = finish_json(&w, &json, e);
        if (k < 0)
                return k;
        k = proto_send_json(c->fd, PROTO_FILE_READ, AGENT_STREAM, json);
        if (k < 0)
                return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
        k = agent_call_recv(c->fd, AGENT_REPLY_TIMEOUT_MSEC, &info, e);
        if (k < 0)
                return k;
        if (info.type != PROTO_FILE_INFO) {
                k = agent_call_error(&info, c->what, e);
                if (k == -EISDIR)
                        (void) api_error(e, k, API_INVALID_PATH, "%s is a directory (use list=1)", c->what);
                return k;
        }
        k = agent_call_parse(&info, &v, e);
        if (k < 0)
                return k;
        if (json_uint64(json_get(v, "size"), &size) < 0 || size > INT64_MAX)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a malformed FILE_INFO payload");
        type = json_get(v, "type");
        if (type && json_type(type) == JSON_STRING && streq(json_string(type), "dir"))
                return api_error(e, -EISDIR, API_INVALID_PATH, "%s is a directory (use list=1)", c->what);

        snprintf(hdr, sizeof hdr, "X-Request-Id: %s\r\n", r->req_id);
        r->status = 200;
        k = http_conn_sized_begin(r->conn, 200, "application/octet-stream", size, hdr);
        if (k < 0)
                return download_abort(r, "the client went away");
        for (;;) {
                _cleanup_(proto_frame_done) ProtoFrame f = {};
                ApiError ae = {};

                k = agent_call_recv(c->fd, AGENT_REPLY_TIMEOUT_MSEC, &f, &ae);
                if (k < 0)
                        return download_abort(r, ae.message);
                if (f.type == PROTO_DATA_END) {
                        if (done != size)
                                return download_abort(r, "the agent sent fewer bytes than announced");
                        return 0;
                }
                if (f.type == PROTO_ERROR) {
                        (void) agent_call_error(&f, c->what, &ae);
                        return download_abort(r, ae.message);
                }
                if (f.type != PROTO_DATA)
                        return download_abort(r, "the agent sent an unexpected frame");
                if (f.len > size - done)
                        return download_abort(r, "the agent sent more bytes than announced");
                if (f.len > 0 && http_conn_sized_write(r->conn, f.payload, f.len) < 0)
                        return download_abort(r, "the client went away");
                done += f.len;
        }
}

int api_files_get(ApiRequest *r, ApiError *e) {
        _cleanup_(file_call_done) FileCall c = { .fd = -EBADF };
        bool list = false, stat = false;
        int k;

        k = api_query_bool(r, "list", &list, e);
        if (k < 0)
                return k;
        k = api_query_bool(r, "stat", &stat, e);
        if (k < 0)
                return k;
        if (list && stat)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "list=1 and stat=1 exclude each other");
        k = file_call_begin(r, "path", &c, e);
        if (k < 0)
                return k;
        if (list)
                return files_list(r, &c, e);
        if (stat)
                return files_stat(r, &c, e);
        return files_download(r, &c, e);
}

/* ---- PUT ---- */

static int parse_mode(ApiRequest *r, int64_t def, int64_t *ret, ApiError *e) {
        _cleanup_free_ char *s = NULL;
        int64_t m = 0;
        size_t n;
        int k;

        k = api_query_string(r, "mode", &s, e);
        if (k < 0)
                return k;
        if (k == 0) {
                *ret = def;
                return 0;
        }
        n = strlen(s);
        if (n == 0 || n > 5)
                goto bad;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '7')
                        goto bad;
                m = m * 8 + (s[i] - '0');
        }
        if (m > 07777)
                goto bad;
        *ret = m;
        return 0;
bad:
        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "mode must be an octal file mode such as 0644, not '%.16s'",
                         s);
}

static int reply_written(ApiRequest *r, const char *path, uint64_t size) {
        _cleanup_(json_w_done) JsonWriter w;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "path", path);
        json_w_key(&w, "size");
        json_w_uint(&w, size);
        json_w_object_end(&w);
        return api_reply_json(r, 201, &w);
}

static int files_mkdir(ApiRequest *r, FileCall *c, bool parents, int64_t mode, ApiError *e) {
        char probe[1];
        ssize_t n;
        int k;

        n = http_conn_read_body(r->conn, probe, sizeof probe);
        if (n > 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "type=dir takes an empty body");
        if (n < 0)
                return api_error(e, (int) n, API_BAD_REQUEST, "could not read the request body: %s", strerror((int) -n));
        r->body_read = true;
        k = path_request(c, PROTO_FILE_MKDIR, "parents", parents, mode, NULL, e);
        if (k < 0)
                return k;
        return reply_written(r, c->path, 0);
}

/* An ERROR the agent may send while we upload (quota, bad path): take it if one is waiting. */
static int upload_check_agent(FileCall *c, ApiError *e) {
        struct pollfd p = { .fd = c->fd, .events = POLLIN };
        _cleanup_(proto_frame_done) ProtoFrame f = {};
        int k;

        if (poll(&p, 1, 0) <= 0)
                return 0;
        k = agent_call_recv(c->fd, AGENT_REPLY_TIMEOUT_MSEC, &f, e);
        if (k < 0)
                return k;
        return agent_call_error(&f, c->what, e); /* any early frame is an error (RESULT comes after DATA_END) */
}

static int files_upload(ApiRequest *r, FileCall *c, bool parents, int64_t mode, ApiError *e) {
        const uint64_t max = api_config(r->api)->upload_max_mb * 1024 * 1024;
        _cleanup_json_ JsonValue *result = NULL;
        _cleanup_(proto_frame_done) ProtoFrame f = {};
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_free_ char *json = NULL, *buf = NULL;
        uint64_t total = 0;
        int k;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "path", c->path);
        json_w_kv_int(&w, "mode", mode);
        json_w_kv_bool(&w, "append", false);
        json_w_kv_bool(&w, "parents", parents);
        json_w_object_end(&w);
        k = finish_json(&w, &json, e);
        if (k < 0)
                return k;
        buf = malloc(PROTO_DATA_CHUNK);
        if (!buf)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");

        /* Returning early closes the agent connection without DATA_END: the agent drops the temporary file. */
        k = proto_send_json(c->fd, PROTO_FILE_WRITE, AGENT_STREAM, json);
        if (k < 0)
                return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
        for (;;) {
                ssize_t n = http_conn_read_body(r->conn, buf, PROTO_DATA_CHUNK);
                if (n < 0)
                        return api_error(e, (int) n, API_BAD_REQUEST, "could not read the request body: %s",
                                         strerror((int) -n));
                if (n == 0)
                        break;
                total += (uint64_t) n;
                if (total > max)
                        return api_error(e, -EFBIG, API_PAYLOAD_TOO_LARGE, "uploads are limited to %" PRIu64 " MiB",
                                         api_config(r->api)->upload_max_mb);
                k = upload_check_agent(c, e);
                if (k < 0)
                        return k;
                k = proto_send(c->fd, PROTO_DATA, AGENT_STREAM, buf, (size_t) n);
                if (k < 0) {
                        /* the agent may have said why before it hung up */
                        if (upload_check_agent(c, e) < 0)
                                return -EIO;
                        return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
                }
        }
        r->body_read = true;
        k = proto_send(c->fd, PROTO_DATA_END, AGENT_STREAM, NULL, 0);
        if (k < 0)
                return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
        /* the agent may need a while to fsync and rename a large file */
        k = agent_call_recv(c->fd, AGENT_REPLY_TIMEOUT_MSEC * 4, &f, e);
        if (k < 0)
                return k;
        if (f.type != PROTO_RESULT)
                return agent_call_error(&f, c->what, e);
        return reply_written(r, c->path, total);
}

int api_files_put(ApiRequest *r, ApiError *e) {
        _cleanup_(file_call_done) FileCall c = { .fd = -EBADF };
        _cleanup_free_ char *type = NULL;
        bool parents = false, dir;
        int64_t mode = 0;
        int k;

        k = api_query_string(r, "type", &type, e);
        if (k < 0)
                return k;
        if (type && !streq(type, "file") && !streq(type, "dir"))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "type must be 'file' or 'dir', not '%.16s'", type);
        dir = type && streq(type, "dir");
        k = api_query_bool(r, "parents", &parents, e);
        if (k < 0)
                return k;
        k = parse_mode(r, dir ? 0755 : 0644, &mode, e);
        if (k < 0)
                return k;
        if (!dir && r->head->content_length > 0 &&
            (uint64_t) r->head->content_length > api_config(r->api)->upload_max_mb * 1024 * 1024)
                return api_error(e, -EFBIG, API_PAYLOAD_TOO_LARGE, "uploads are limited to %" PRIu64 " MiB",
                                 api_config(r->api)->upload_max_mb);
        k = file_call_begin(r, "path", &c, e);
        if (k < 0)
                return k;
        if (dir)
                return files_mkdir(r, &c, parents, mode, e);
        return files_upload(r, &c, parents, mode, e);
}

/* ---- DELETE, move ---- */

int api_files_delete(ApiRequest *r, ApiError *e) {
        _cleanup_(file_call_done) FileCall c = { .fd = -EBADF };
        bool recursive = false;
        int k;

        k = api_query_bool(r, "recursive", &recursive, e);
        if (k < 0)
                return k;
        k = file_call_begin(r, "path", &c, e);
        if (k < 0)
                return k;
        k = path_request(&c, PROTO_FILE_REMOVE, "recursive", recursive, -1, NULL, e);
        if (k < 0)
                return k;
        return api_reply_empty(r, 204);
}

int api_files_move(ApiRequest *r, ApiError *e) {
        static const char *const allowed[] = { "from", "to", NULL };
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_sandbox_ Sandbox sb = {};
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_free_ char *json = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *unknown = NULL;
        JsonValue *from, *to;
        int k;

        json_w_init(&w);
        k = api_read_json(r, &body, e);
        if (k < 0)
                return k;
        if (json_check_keys(body, allowed, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));
        from = json_get(body, "from");
        to = json_get(body, "to");
        if (json_type(from) != JSON_STRING || json_type(to) != JSON_STRING)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "from and to (paths) are required");
        k = api_validate_path(json_string(from), json_string_len(from), "from", e);
        if (k < 0)
                return k;
        k = api_validate_path(json_string(to), json_string_len(to), "to", e);
        if (k < 0)
                return k;
        k = api_sandbox_lookup(r, r->params[0], true, &sb, e);
        if (k < 0)
                return k;
        k = agent_call_connect(r, &sb, &fd, e);
        if (k < 0)
                return k;
        json_w_object_begin(&w);
        json_w_kv_string(&w, "from", json_string(from));
        json_w_kv_string(&w, "to", json_string(to));
        json_w_object_end(&w);
        k = finish_json(&w, &json, e);
        if (k < 0)
                return k;
        k = agent_call_json(fd, PROTO_FILE_RENAME, json, "move", NULL, e);
        if (k < 0)
                return k;
        return api_reply_empty(r, 204);
}
