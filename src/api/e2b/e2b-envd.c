/* SPDX-License-Identifier: MIT */
/* envd's plain HTTP endpoints: GET /health, GET /files (download, streamed
 * from the agent) and POST /files (multipart/form-data or a raw
 * application/octet-stream body, streamed to the agent part by part, never
 * whole in memory). Files are written as the request's user, parents made. */

#include <ctype.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <strings.h>

#include "alloc-util.h"
#include "e2b-gzip.h"
#include "e2b.h"
#include "fd-util.h"
#include "http-parse.h"
#include "log.h"
#include "proto-msg.h"
#include "str-util.h"

#define E2B_UPLOAD_FILES_MAX 1024U /* parts written by one request */

int e2b_envd_health(E2bEnvd *x) {
        _cleanup_(proto_frame_done) ProtoFrame f = {};
        _cleanup_close_ int fd = -EBADF;
        ApiError e = {};
        int k;

        k = e2b_envd_agent(x, &fd, &e);
        if (k >= 0) {
                k = proto_send_json(fd, PROTO_PING, AGENT_STREAM, "{}");
                if (k >= 0)
                        k = agent_call_recv(fd, AGENT_REPLY_TIMEOUT_MSEC, &f, &e);
        }
        if (k < 0 || f.type != PROTO_PONG)
                return e2b_reply_gone(x->r, x->sb.id);
        return e2b_reply(x->r, 204, NULL, NULL, 0, NULL);
}

/* The user of a /files request: ?username= (what the SDKs send), else Authorization. */
static int files_user(E2bEnvd *x, ApiError *e) {
        _cleanup_free_ char *u = NULL;
        int k;

        k = api_query_string(x->r, "username", &u, e);
        if (k <= 0)
                return k;
        if (isempty(u))
                return 0;
        if (strlen(u) > E2B_USER_NAME_MAX)
                return api_error(e, -EINVAL, API_UNAUTHORIZED, "user name too long");
        for (const char *p = u; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
                      *p == '-' || *p == '.'))
                        return api_error(e, -EINVAL, API_UNAUTHORIZED, "malformed user name");
        (void) strscpy(x->user, sizeof x->user, u);
        return 0;
}

typedef struct FilesCall {
        int fd;
        E2bAccounts acc;
        E2bUser user;
} FilesCall;

static void files_call_done(FilesCall *c) {
        c->fd = safe_close(c->fd);
        e2b_accounts_done(&c->acc);
}

static int files_begin(E2bEnvd *x, FilesCall *c, ApiError *e) {
        int k;

        c->fd = -EBADF;
        k = files_user(x, e);
        if (k >= 0)
                k = e2b_envd_agent(x, &c->fd, e);
        if (k >= 0)
                k = e2b_accounts_load(c->fd, false, &c->acc, e);
        if (k >= 0)
                k = e2b_user_resolve(x, &c->acc, &c->user, e);
        return k;
}

static int reply_failure(E2bEnvd *x, const ApiError *e) {
        if (e->code == API_BAD_GATEWAY)
                return e2b_reply_gone(x->r, x->sb.id);
        return e2b_reply_error(x->r, e);
}

/* ---- download ---- */

static int download_abort(E2bEnvd *x, const char *why) {
        log_warning("Download aborted: %s", why);
        http_conn_set_close(x->r->conn);
        return 0;
}

static int stream_sink(const char *p, size_t n, void *userdata) {
        return http_conn_stream_write(userdata, p, n);
}

/* The file's bytes from the agent, deflated as they come (a client that
 * accepts gzip): a chunked response, so its length is not promised. */
static int download_gzip(E2bEnvd *x, FilesCall *c, const char *hdr, uint64_t size) {
        _cleanup_(e2b_gzip_done) E2bGzip gz = {};
        char headers[640];
        uint64_t done = 0;
        int k;

        if (e2b_gzip_begin(&gz) < 0) {
                ApiError e = {};
                (void) api_error(&e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                return reply_failure(x, &e);
        }
        snprintf(headers, sizeof headers, "%sContent-Encoding: gzip\r\nVary: Accept-Encoding\r\n", hdr);
        if (http_conn_stream_begin(x->r->conn, 200, "application/octet-stream", headers) < 0)
                return download_abort(x, "the client went away");
        for (;;) {
                _cleanup_(proto_frame_done) ProtoFrame f = {};
                ApiError ae = {};

                k = agent_call_recv(c->fd, AGENT_REPLY_TIMEOUT_MSEC, &f, &ae);
                if (k < 0)
                        return download_abort(x, ae.message);
                if (f.type == PROTO_DATA_END) {
                        if (done != size)
                                return download_abort(x, "the file shrank while it was read");
                        if (e2b_gzip_feed(&gz, NULL, 0, true, stream_sink, x->r->conn) < 0 ||
                            http_conn_stream_end(x->r->conn) < 0)
                                return download_abort(x, "the client went away");
                        return 0;
                }
                if (f.type != PROTO_DATA)
                        return download_abort(x, "the agent sent an unexpected frame");
                if (f.len > size - done)
                        return download_abort(x, "the agent sent more bytes than announced");
                if (f.len > 0 && e2b_gzip_feed(&gz, f.payload, f.len, false, stream_sink, x->r->conn) < 0)
                        return download_abort(x, "the client went away");
                done += f.len;
        }
}

int e2b_envd_files_get(E2bEnvd *x) {
        _cleanup_(files_call_done) FilesCall c = { .fd = -EBADF };
        _cleanup_(proto_frame_done) ProtoFrame info = {};
        _cleanup_json_ JsonValue *v = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *q = NULL, *path = NULL, *json = NULL;
        char hdr[512];
        const char *base;
        uint64_t size, done = 0;
        ApiError e = {};
        int k;

        json_w_init(&w);
        k = files_begin(x, &c, &e);
        if (k >= 0)
                k = api_query_string(x->r, "path", &q, &e);
        if (k == 0)
                k = api_error(&e, -EINVAL, API_INVALID_PATH, "query parameter 'path' is required");
        if (k >= 0)
                k = e2b_path_resolve(q, strlen(q), c.user.home, &path, &e);
        if (k < 0)
                return reply_failure(x, &e);

        json_w_object_begin(&w);
        json_w_kv_string(&w, "path", path);
        json_w_kv_int(&w, "offset", 0);
        json_w_kv_int(&w, "length", -1);
        json_w_object_end(&w);
        if (json_w_finish(&w, &json, NULL) < 0) {
                (void) api_error(&e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                return reply_failure(x, &e);
        }
        k = proto_send_json(c.fd, PROTO_FILE_READ, AGENT_STREAM, json);
        if (k < 0)
                return e2b_reply_gone(x->r, x->sb.id);
        k = agent_call_recv(c.fd, AGENT_REPLY_TIMEOUT_MSEC, &info, &e);
        if (k < 0)
                return reply_failure(x, &e);
        if (info.type != PROTO_FILE_INFO) {
                k = agent_call_error(&info, NULL, &e);
                if (e.code == API_NOT_FOUND)
                        (void) api_error(&e, k, API_NOT_FOUND, "path '%.512s' does not exist", path);
                else if (k == -EISDIR)
                        (void) api_error(&e, k, API_INVALID_ARGUMENT, "path '%.512s' is a directory", path);
                return reply_failure(x, &e);
        }
        if (agent_call_parse(&info, &v, &e) < 0 || json_uint64(json_get(v, "size"), &size) < 0 || size > INT64_MAX) {
                (void) api_error(&e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a malformed FILE_INFO payload");
                return reply_failure(x, &e);
        }

        base = strrchr(path, '/') + 1;
        snprintf(hdr, sizeof hdr, "X-Request-Id: %s\r\nContent-Disposition: inline; filename=\"%s\"\r\n",
                 x->r->req_id, strpbrk(base, "\"\\\r\n") || strlen(base) > 255 ? "file" : base);
        x->r->status = 200;
        if (streq(x->r->head->method, "GET") && e2b_gzip_accepted(http_head_header(x->r->head, "Accept-Encoding")))
                return download_gzip(x, &c, hdr, size);
        k = http_conn_sized_begin(x->r->conn, 200, "application/octet-stream", size, hdr);
        if (k < 0)
                return download_abort(x, "the client went away");
        for (;;) {
                _cleanup_(proto_frame_done) ProtoFrame f = {};
                ApiError ae = {};

                k = agent_call_recv(c.fd, AGENT_REPLY_TIMEOUT_MSEC, &f, &ae);
                if (k < 0)
                        return download_abort(x, ae.message);
                if (f.type == PROTO_DATA_END)
                        return done == size ? 0 : download_abort(x, "the file shrank while it was read");
                if (f.type != PROTO_DATA)
                        return download_abort(x, "the agent sent an unexpected frame");
                if (f.len > size - done)
                        return download_abort(x, "the agent sent more bytes than announced");
                if (f.len > 0 && http_conn_sized_write(x->r->conn, f.payload, f.len) < 0)
                        return download_abort(x, "the client went away");
                done += f.len;
        }
}

/* ---- upload ---- */

typedef struct Upload {
        E2bEnvd *x;
        FilesCall *c;
        char *query_path;  /* ?path=, resolved: every part goes there */
        char **written;    /* resolved paths, in order */
        bool in_part;      /* a FILE_WRITE is open on the agent */
        bool skip;         /* the current part is not a file */
        uint64_t total, max;      /* bytes written (after any gzip), and the limit */
        E2bMultipart *mp;         /* NULL: the body is the file */
        char *metadata;           /* X-Metadata-*, as a JSON object for each FILE_WRITE; NULL: none */
        bool multipart_done;      /* its closing delimiter came */
        ApiError e;
} Upload;

static void upload_done(Upload *u) {
        u->metadata = mfree(u->metadata);
        u->query_path = mfree(u->query_path);
        u->written = strv_free(u->written);
}

/* An ERROR the agent may send while we upload (quota, bad path): take it if one is waiting. */
static int upload_check_agent(Upload *u, bool wait) {
        struct pollfd p = { .fd = u->c->fd, .events = POLLIN };
        _cleanup_(proto_frame_done) ProtoFrame f = {};
        const char *path = u->written[strv_length(u->written) - 1];
        int k;

        if (!wait && poll(&p, 1, 0) <= 0)
                return 0;
        k = agent_call_recv(u->c->fd, AGENT_REPLY_TIMEOUT_MSEC * 4, &f, &u->e);
        if (k < 0)
                return k;
        if (wait && f.type == PROTO_RESULT)
                return 0;
        k = agent_call_error(&f, NULL, &u->e);
        if (k == -EISDIR)
                (void) api_error(&u->e, k, API_INVALID_ARGUMENT, "path '%.512s' is a directory", path);
        else if (u->e.code == API_INVALID_PATH)
                (void) api_error(&u->e, k, API_INVALID_ARGUMENT, "cannot write '%.512s': %s", path, strerror(-k));
        return k < 0 ? k : -EIO;
}

static int part_begin(Upload *u, const char *dest) {
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *path = NULL, *json = NULL;
        int k;

        if (u->query_path) {
                path = strdup(u->query_path);
                if (!path)
                        return api_error(&u->e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        } else if (dest && dest[0]) {
                k = e2b_path_resolve(dest, strlen(dest), u->c->user.home, &path, &u->e);
                if (k < 0)
                        return k;
        } else
                return api_error(&u->e, -EINVAL, API_INVALID_PATH,
                                 "a file part needs a filename (its path) when ?path= is not given");
        if (strv_contains(u->written, path))
                return api_error(&u->e, -EEXIST, API_INVALID_ARGUMENT, "two files of the upload go to '%.512s'", path);
        if (strv_length(u->written) >= E2B_UPLOAD_FILES_MAX)
                return api_error(&u->e, -E2BIG, API_INVALID_ARGUMENT, "an upload writes at most %u files",
                                 E2B_UPLOAD_FILES_MAX);

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "path", path);
        json_w_kv_bool(&w, "parents", true);
        json_w_kv_int(&w, "uid", u->c->user.uid);
        json_w_kv_int(&w, "gid", u->c->user.gid);
        if (u->metadata) {
                json_w_key(&w, "metadata");
                json_w_raw(&w, u->metadata);
        }
        json_w_object_end(&w);
        if (json_w_finish(&w, &json, NULL) < 0 || strv_push(&u->written, TAKE_PTR(path)) < 0)
                return api_error(&u->e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        /* returning early closes the agent connection without DATA_END: the agent drops the temporary file */
        k = proto_send_json(u->c->fd, PROTO_FILE_WRITE, AGENT_STREAM, json);
        if (k < 0)
                return api_error(&u->e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
        u->in_part = true;
        return 0;
}

static int part_data(Upload *u, const char *p, size_t n) {
        int k;

        u->total += n;
        if (u->total > u->max)
                return api_error(&u->e, -EFBIG, API_PAYLOAD_TOO_LARGE, "uploads are limited to %" PRIu64 " MiB",
                                 u->max / (1024 * 1024));
        k = upload_check_agent(u, false);
        if (k < 0)
                return k;
        for (size_t off = 0; off < n;) {
                size_t chunk = MIN(n - off, (size_t) PROTO_DATA_CHUNK);
                k = proto_send(u->c->fd, PROTO_DATA, AGENT_STREAM, p + off, chunk);
                if (k < 0) {
                        if (upload_check_agent(u, false) < 0) /* it may have said why before it hung up */
                                return -EIO;
                        return api_error(&u->e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
                }
                off += chunk;
        }
        return 0;
}

static int part_end(Upload *u) {
        int k;

        u->in_part = false;
        k = proto_send(u->c->fd, PROTO_DATA_END, AGENT_STREAM, NULL, 0);
        if (k < 0)
                return api_error(&u->e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
        /* the agent may need a while to fsync and rename a large file */
        return upload_check_agent(u, true);
}

static int multipart_cb(E2bMultipart *m, E2bMultipartEvent ev, const char *p, size_t n, void *userdata) {
        Upload *u = userdata;

        switch (ev) {
        case E2B_MULTIPART_PART_BEGIN:
                u->skip = !streq(m->name, "file");
                return u->skip ? 0 : part_begin(u, m->has_filename ? m->filename : NULL);
        case E2B_MULTIPART_DATA:
                return u->skip ? 0 : part_data(u, p, n);
        case E2B_MULTIPART_PART_END:
                return u->skip ? 0 : part_end(u);
        }
        return 0;
}

/* The body's bytes (inflated, if it was gzip): a multipart body, or the file
 * itself; n == 0 is the end of the body. */
static int upload_feed(const char *p, size_t n, void *userdata) {
        Upload *u = userdata;
        int k;

        if (!u->mp)
                return n > 0 ? part_data(u, p, n) : part_end(u);
        if (u->multipart_done)
                return 0; /* the epilogue */
        k = e2b_multipart_feed(u->mp, p, n, multipart_cb, u); /* 1: its closing delimiter came */
        if (k == 1)
                u->multipart_done = true;
        return k < 0 ? k : 0;
}

static int reply_written(E2bEnvd *x, char **written, const char *metadata) {
        _cleanup_(json_w_done) JsonWriter w = {};

        json_w_init(&w);
        json_w_array_begin(&w);
        for (char **p = written; p && *p; p++) {
                const char *slash = strrchr(*p, '/');
                json_w_object_begin(&w);
                json_w_kv_string(&w, "path", *p);
                json_w_kv_string(&w, "name", slash ? slash + 1 : *p);
                json_w_kv_string(&w, "type", "file");
                if (metadata) {
                        json_w_key(&w, "metadata");
                        json_w_raw(&w, metadata);
                }
                json_w_object_end(&w);
        }
        json_w_array_end(&w);
        return e2b_reply_json(x->r, 200, &w, NULL);
}

/* X-Metadata-<key>: <value> headers (E2B's file metadata, envd >= 0.6.2):
 * keys lower-cased, each file of the upload gets them as user.e2b.<key>
 * xattrs. 0 with *ret NULL if there are none. */
static int upload_metadata(const HttpHead *h, char **ret, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w = {};
        unsigned n = 0;

        json_w_init(&w);
        json_w_object_begin(&w);
        for (size_t i = 0; i < h->n_headers; i++) {
                char key[PROTO_FILE_METADATA_KEY_MAX + 1];
                const char *k = h->headers[i].name, *v = h->headers[i].value;
                size_t l;

                if (strncasecmp(k, "X-Metadata-", 11) != 0)
                        continue;
                k += 11;
                l = strlen(k);
                for (size_t j = 0; j < l && j < sizeof key - 1; j++)
                        key[j] = (char) tolower((unsigned char) k[j]);
                key[MIN(l, sizeof key - 1)] = 0;
                if (!proto_file_metadata_key_valid(key, l))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "X-Metadata-%.64s: a key is 1-%u letters, digits, '-', '_' or '.'", k,
                                         PROTO_FILE_METADATA_KEY_MAX);
                if (strlen(v) > PROTO_FILE_METADATA_VALUE_MAX)
                        return api_error(e, -E2BIG, API_INVALID_ARGUMENT, "X-Metadata-%s: longer than %u bytes", key,
                                         PROTO_FILE_METADATA_VALUE_MAX);
                if (++n > PROTO_FILE_METADATA_MAX)
                        return api_error(e, -E2BIG, API_INVALID_ARGUMENT, "more than %u X-Metadata-* headers",
                                         PROTO_FILE_METADATA_MAX);
                json_w_kv_string(&w, key, v);
        }
        json_w_object_end(&w);
        if (n == 0)
                return 0;
        if (json_w_finish(&w, ret, NULL) < 0)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        return 0;
}

int e2b_envd_files_post(E2bEnvd *x) {
        _cleanup_(files_call_done) FilesCall c = { .fd = -EBADF };
        _cleanup_(e2b_multipart_done) E2bMultipart mp = {};
        _cleanup_(upload_done) Upload u = { .x = x, .c = &c };
        _cleanup_(e2b_gzip_done) E2bGzip gz = {};
        _cleanup_free_ char *q = NULL, *buf = NULL;
        const char *ct = http_head_header(x->r->head, "Content-Type"),
                   *ce = http_head_header(x->r->head, "Content-Encoding");
        bool multipart;
        int k, gzip;

        u.max = api_config(x->r->api)->upload_max_mb * 1024 * 1024;
        if (upload_metadata(x->r->head, &u.metadata, &u.e) < 0)
                return e2b_reply_error(x->r, &u.e);
        gzip = e2b_gzip_content_encoding(ce);
        if (gzip < 0) {
                (void) api_error(&u.e, -EOPNOTSUPP, API_INVALID_ARGUMENT,
                                 "Content-Encoding '%.32s' is not supported (gzip or identity)", ce);
                return e2b_reply_error(x->r, &u.e);
        }
        if (gzip && e2b_gunzip_begin(&gz) < 0) {
                (void) api_error(&u.e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                return e2b_reply_error(x->r, &u.e);
        }
        multipart = ct && strncasecmp(ct, "multipart/", 10) == 0;
        u.mp = multipart ? &mp : NULL;
        if (multipart && e2b_multipart_init(&mp, ct) < 0) {
                (void) api_error(&u.e, -EINVAL, API_INVALID_ARGUMENT,
                                 "expected multipart/form-data with a boundary, not '%.64s'", ct);
                return e2b_reply_error(x->r, &u.e);
        }
        if (!multipart && !(ct && strncasecmp(ct, "application/octet-stream", 24) == 0)) {
                (void) api_error(&u.e, -EINVAL, API_INVALID_ARGUMENT,
                                 "uploads are multipart/form-data or application/octet-stream, not '%.64s'",
                                 strempty(ct));
                return e2b_reply_error(x->r, &u.e);
        }
        if (x->r->head->content_length > 0 && (uint64_t) x->r->head->content_length > u.max + 64 * 1024) {
                (void) api_error(&u.e, -EFBIG, API_PAYLOAD_TOO_LARGE, "uploads are limited to %" PRIu64 " MiB",
                                 u.max / (1024 * 1024));
                return e2b_reply_error(x->r, &u.e);
        }
        k = files_begin(x, &c, &u.e);
        if (k >= 0)
                k = api_query_string(x->r, "path", &q, &u.e);
        if (k > 0 && !isempty(q))
                k = e2b_path_resolve(q, strlen(q), c.user.home, &u.query_path, &u.e);
        if (k >= 0 && !multipart && !u.query_path)
                k = api_error(&u.e, -EINVAL, API_INVALID_PATH, "an application/octet-stream upload needs ?path=");
        if (k < 0)
                return reply_failure(x, &u.e);

        buf = malloc(PROTO_DATA_CHUNK);
        if (!buf) {
                (void) api_error(&u.e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                return reply_failure(x, &u.e);
        }
        if (!multipart) {
                k = part_begin(&u, NULL);
                if (k < 0)
                        return reply_failure(x, &u.e);
        }
        for (;;) {
                ssize_t n = http_conn_read_body(x->r->conn, buf, PROTO_DATA_CHUNK);
                if (n < 0) {
                        (void) api_error(&u.e, (int) n, API_BAD_REQUEST, "could not read the request body: %s",
                                         strerror((int) -n));
                        return reply_failure(x, &u.e);
                }
                if (!gzip)
                        k = upload_feed(buf, (size_t) n, &u);
                else if (n > 0)
                        k = e2b_gunzip_feed(&gz, buf, (size_t) n, upload_feed, &u);
                else {
                        k = e2b_gunzip_end(&gz);
                        if (k >= 0)
                                k = upload_feed(NULL, 0, &u);
                }
                if (k < 0) {
                        if (u.e.code == API_OK) {
                                if (k == -E2BIG)
                                        (void) api_error(&u.e, k, API_INVALID_ARGUMENT,
                                                         "a part's headers exceed %u bytes", E2B_MULTIPART_HEADERS_MAX);
                                else if (gzip && k == -EBADMSG)
                                        (void) api_error(&u.e, k, API_INVALID_ARGUMENT,
                                                         "the body is not valid gzip (Content-Encoding: gzip)");
                                else
                                        (void) api_error(&u.e, k, API_INVALID_ARGUMENT, "malformed multipart body");
                        }
                        return reply_failure(x, &u.e);
                }
                if (n == 0 || (multipart && u.multipart_done))
                        break;
        }
        /* the epilogue after the closing delimiter is read and dropped */
        while (multipart) {
                ssize_t n = http_conn_read_body(x->r->conn, buf, PROTO_DATA_CHUNK);
                if (n <= 0)
                        break;
        }
        x->r->body_read = true;
        if (strv_length(u.written) == 0) {
                (void) api_error(&u.e, -EINVAL, API_INVALID_ARGUMENT, "the upload has no part named 'file'");
                return e2b_reply_error(x->r, &u.e);
        }
        return reply_written(x, u.written, u.metadata);
}

/* ---- compose ---- */

#define E2B_COMPOSE_SOURCES_MAX 1000U

/* One source of a compose: FILE_READ on rfd, its bytes relayed as DATA to wfd. */
static int compose_relay(int rfd, int wfd, const char *path, ApiError *e) {
        _cleanup_(proto_frame_done) ProtoFrame info = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *json = NULL;
        int k;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "path", path);
        json_w_kv_int(&w, "offset", 0);
        json_w_kv_int(&w, "length", -1);
        json_w_object_end(&w);
        if (json_w_finish(&w, &json, NULL) < 0)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        k = proto_send_json(rfd, PROTO_FILE_READ, AGENT_STREAM, json);
        if (k < 0)
                return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
        k = agent_call_recv(rfd, AGENT_REPLY_TIMEOUT_MSEC, &info, e);
        if (k < 0)
                return k;
        if (info.type != PROTO_FILE_INFO) {
                k = agent_call_error(&info, NULL, e);
                if (e->code == API_NOT_FOUND)
                        return api_error(e, k, API_NOT_FOUND, "path '%.512s' does not exist", path);
                if (k == -EISDIR)
                        return api_error(e, k, API_INVALID_ARGUMENT, "path '%.512s' is a directory", path);
                return k;
        }
        for (;;) {
                _cleanup_(proto_frame_done) ProtoFrame f = {};

                k = agent_call_recv(rfd, AGENT_REPLY_TIMEOUT_MSEC, &f, e);
                if (k < 0)
                        return k;
                if (f.type == PROTO_DATA_END)
                        return 0;
                if (f.type != PROTO_DATA)
                        return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent an unexpected frame");
                if (f.len > 0 && (k = proto_send(wfd, PROTO_DATA, AGENT_STREAM, f.payload, f.len)) < 0)
                        return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
        }
}

/* POST /files/compose {destination, source_paths, username?} (envd): the
 * sources concatenated in order into destination (written whole or not at
 * all: a temporary file renamed into place), then the sources removed;
 * the destination's EntryInfo. */
int e2b_envd_files_compose(E2bEnvd *x) {
        static const char *const allowed[] = { "destination", "source_paths", "username", NULL };
        _cleanup_(files_call_done) FilesCall c = { .fd = -EBADF };
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *dest = NULL, *json = NULL;
        _cleanup_strv_free_ char **src = NULL;
        _cleanup_close_ int rfd = -EBADF;
        const JsonValue *d, *list, *user;
        const char *unknown = NULL, *slash;
        ApiError e = {};
        int k;

        k = e2b_read_json(x->r, &body, &e);
        if (k < 0)
                return e2b_reply_error(x->r, &e);
        d = json_get(body, "destination");
        list = json_get(body, "source_paths");
        user = json_get(body, "username");
        if (json_check_keys(body, allowed, &unknown) < 0)
                k = api_error(&e, -EINVAL, API_INVALID_ARGUMENT, "unknown field '%.64s'", strna(unknown));
        else if (!json_string(d) || json_string_len(d) == 0)
                k = api_error(&e, -EINVAL, API_INVALID_PATH, "destination (a path) is required");
        else if (json_type(list) != JSON_ARRAY || json_array_size(list) == 0)
                k = api_error(&e, -EINVAL, API_INVALID_ARGUMENT, "source_paths must be a non-empty array of paths");
        else if (json_array_size(list) > E2B_COMPOSE_SOURCES_MAX)
                k = api_error(&e, -E2BIG, API_INVALID_ARGUMENT, "a compose takes at most %u sources",
                              E2B_COMPOSE_SOURCES_MAX);
        else if (user && !json_is_null(user) && json_type(user) != JSON_STRING)
                k = api_error(&e, -EINVAL, API_INVALID_ARGUMENT, "username must be a string");
        if (k >= 0 && json_string(user) && !isempty(json_string(user))) {
                const char *u = json_string(user);
                if (strlen(u) > E2B_USER_NAME_MAX || strspn(u, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                               "0123456789_-.") != strlen(u))
                        k = api_error(&e, -EINVAL, API_UNAUTHORIZED, "malformed user name");
                else
                        (void) strscpy(x->user, sizeof x->user, u);
        }
        c.fd = -EBADF;
        if (k >= 0)
                k = e2b_envd_agent(x, &c.fd, &e);
        if (k >= 0)
                k = e2b_accounts_load(c.fd, false, &c.acc, &e);
        if (k >= 0)
                k = e2b_user_resolve(x, &c.acc, &c.user, &e);
        if (k >= 0)
                k = e2b_path_resolve(json_string(d), json_string_len(d), c.user.home, &dest, &e);
        for (size_t i = 0; k >= 0 && i < json_array_size(list); i++) {
                const JsonValue *s = json_array_at(list, i);
                char *p = NULL;
                if (!json_string(s) || json_string_len(s) == 0) {
                        k = api_error(&e, -EINVAL, API_INVALID_PATH, "source_paths[%zu] must be a path", i);
                        break;
                }
                k = e2b_path_resolve(json_string(s), json_string_len(s), c.user.home, &p, &e);
                if (k >= 0 && streq(p, dest))
                        k = api_error(&e, -EINVAL, API_INVALID_ARGUMENT,
                                      "source_paths[%zu] is the destination '%.512s'", i, dest);
                if (k >= 0 && strv_contains(src, p))
                        k = api_error(&e, -EINVAL, API_INVALID_ARGUMENT, "source_paths[%zu]: '%.512s' is listed twice",
                                      i, p);
                if (k >= 0 && strv_push(&src, p) < 0)
                        k = api_error(&e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                if (k < 0)
                        free(p);
        }
        if (k >= 0)
                k = e2b_envd_agent(x, &rfd, &e); /* reads on their own connection while the write is open */
        if (k < 0)
                return reply_failure(x, &e);

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "path", dest);
        json_w_kv_bool(&w, "parents", true);
        json_w_kv_int(&w, "uid", c.user.uid);
        json_w_kv_int(&w, "gid", c.user.gid);
        json_w_object_end(&w);
        if (json_w_finish(&w, &json, NULL) < 0) {
                (void) api_error(&e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                return reply_failure(x, &e);
        }
        /* an early return closes c.fd without DATA_END: the agent drops the temporary file */
        k = proto_send_json(c.fd, PROTO_FILE_WRITE, AGENT_STREAM, json);
        if (k < 0)
                return e2b_reply_gone(x->r, x->sb.id);
        for (char **p = src; *p; p++) {
                k = compose_relay(rfd, c.fd, *p, &e);
                if (k < 0)
                        return reply_failure(x, &e);
        }
        k = proto_send(c.fd, PROTO_DATA_END, AGENT_STREAM, NULL, 0);
        if (k < 0)
                return e2b_reply_gone(x->r, x->sb.id);
        {
                _cleanup_(proto_frame_done) ProtoFrame f = {};
                k = agent_call_recv(c.fd, AGENT_REPLY_TIMEOUT_MSEC * 4, &f, &e);
                if (k >= 0 && f.type != PROTO_RESULT) {
                        k = agent_call_error(&f, NULL, &e);
                        if (k == -EISDIR)
                                (void) api_error(&e, k, API_INVALID_ARGUMENT, "path '%.512s' is a directory", dest);
                        else if (e.code == API_INVALID_PATH)
                                (void) api_error(&e, k, API_INVALID_ARGUMENT, "cannot write '%.512s': %s", dest,
                                                 strerror(-k));
                        if (k >= 0)
                                k = -EIO;
                }
                if (k < 0)
                        return reply_failure(x, &e);
        }
        for (char **p = src; *p; p++) {
                _cleanup_(proto_frame_done) ProtoFrame f = {};
                _cleanup_(json_w_done) JsonWriter rm = {};
                _cleanup_free_ char *rj = NULL;
                ApiError re = {};

                json_w_init(&rm);
                json_w_object_begin(&rm);
                json_w_kv_string(&rm, "path", *p);
                json_w_kv_bool(&rm, "recursive", false);
                json_w_object_end(&rm);
                if (json_w_finish(&rm, &rj, NULL) < 0 || proto_send_json(rfd, PROTO_FILE_REMOVE, AGENT_STREAM, rj) < 0 ||
                    agent_call_recv(rfd, AGENT_REPLY_TIMEOUT_MSEC, &f, &re) < 0 ||
                    (f.type != PROTO_RESULT && agent_call_error(&f, NULL, &re) < 0))
                        log_warning("Compose into %s: cannot remove the source %s: %s", dest, *p,
                                    re.message[0] ? re.message : "the agent did not answer");
        }
        json_w_done(&w);
        json_w_init(&w);
        slash = strrchr(dest, '/');
        json_w_object_begin(&w);
        json_w_kv_string(&w, "path", dest);
        json_w_kv_string(&w, "name", slash ? slash + 1 : dest);
        json_w_kv_string(&w, "type", "file");
        json_w_object_end(&w);
        return e2b_reply_json(x->r, 200, &w, NULL);
}
