/* SPDX-License-Identifier: MIT */
/* filesystem.Filesystem over the agent's FILE_* requests: Stat, ListDir,
 * MakeDir, Move, Remove, WatchDir (FILE_WATCH, streamed) and the polling
 * watchers (CreateWatcher, GetWatcherEvents, RemoveWatcher). Paths are
 * resolved here against the request user's home ("~", relative paths, "."
 * and ".."), then inside the sandbox by the agent. Entries from the agent are
 * hostile and re-serialised field by field as envd's EntryInfo. */

#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include "alloc-util.h"
#include "e2b.h"
#include "proto-msg.h"
#include "fd-util.h"
#include "log.h"
#include "str-util.h"
#include "time-util.h"

#define E2B_LIST_DEPTH_MAX 64U
#define E2B_NAME_OUT_MAX 256U

typedef struct FsCall {
        int fd;
        E2bAccounts acc;
        E2bUser user;
} FsCall;

static void fs_call_done(FsCall *c) {
        c->fd = safe_close(c->fd);
        e2b_accounts_done(&c->acc);
}

/* Connects to the agent and learns the request's user. */
static int fs_begin(E2bEnvd *x, FsCall *c, ApiError *e) {
        int k;

        c->fd = -EBADF;
        k = e2b_envd_agent(x, &c->fd, e);
        if (k < 0)
                return k;
        k = e2b_accounts_load(c->fd, true, &c->acc, e);
        if (k < 0)
                return k;
        return e2b_user_resolve(x, &c->acc, &c->user, e);
}

/* The message's path field, resolved. */
static int fs_path(const FsCall *c, const JsonValue *req, const char *json_name, char **ret, ApiError *e) {
        const JsonValue *v = e2b_field(req, json_name, NULL);

        if (json_type(v) != JSON_STRING)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "%s (a path) is required", json_name);
        return e2b_path_resolve(json_string(v), json_string_len(v), c->user.home, ret, e);
}

/* The start of most calls: the request read into *req (the caller frees it),
 * the agent connection, the path the request names under json_name. */
static int fs_begin_path(E2bEnvd *x, FsCall *c, JsonValue **req, const char *json_name, char **ret_path,
                         ApiError *e) {
        int k = e2b_rpc_read(x, false, req, e);
        if (k >= 0)
                k = fs_begin(x, c, e);
        if (k >= 0)
                k = fs_path(c, *req, json_name, ret_path, e);
        return k;
}

/* Agent errors, said the way envd says them. */
static int fs_agent_error(int k, const char *path, ApiError *e) {
        if (e->code == API_NOT_FOUND)
                return api_error(e, k, API_NOT_FOUND, "path '%.512s' does not exist", path);
        if (e->code == API_INVALID_PATH && k == -ENOTDIR)
                return api_error(e, k, API_INVALID_ARGUMENT, "path '%.512s' is not a directory", path);
        return k;
}

static int fs_request(FsCall *c, ProtoType type, JsonWriter *w, const char *path, JsonValue **ret, ApiError *e) {
        _cleanup_free_ char *json = NULL;
        int k;

        if (json_w_finish(w, &json, NULL) < 0)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        k = agent_call_json(c->fd, type, json, NULL, ret, e);
        if (k < 0)
                return fs_agent_error(k, path, e);
        return 0;
}

/* ---- EntryInfo ---- */

static void write_id_name(JsonWriter *w, const char *key, const char *text, size_t n, uint64_t id) {
        char name[E2B_NAME_OUT_MAX];

        if (id > UINT32_MAX || e2b_id_name(text, n, (uint32_t) id, name, sizeof name) < 0)
                snprintf(name, sizeof name, "%" PRIu64, id);
        json_w_kv_string(w, key, name);
}

/* An entry's "metadata" from the agent (hostile): within the limits the
 * agent itself keeps, an object of strings with valid keys. */
static bool metadata_valid(const JsonValue *m) {
        if (json_type(m) != JSON_OBJECT || json_object_size(m) > PROTO_FILE_METADATA_MAX)
                return false;
        for (size_t i = 0; i < json_object_size(m); i++) {
                const char *k = json_object_key(m, i);
                const JsonValue *v = json_object_value(m, i);
                if (!proto_file_metadata_key_valid(k, strlen(k)) || json_type(v) != JSON_STRING ||
                    json_string_len(v) > PROTO_FILE_METADATA_VALUE_MAX)
                        return false;
        }
        return true;
}

/* One agent entry (hostile) → EntryInfo. -EBADMSG if malformed. */
static int write_entry(JsonWriter *w, const FsCall *c, const JsonValue *entry) {
        const JsonValue *name = json_get(entry, "name"), *path = json_get(entry, "path"),
                        *type = json_get(entry, "type"), *target = json_get(entry, "target");
        uint64_t size, mode, uid, gid;
        int64_t mtime_ns;
        char modestr[E2B_MODE_STRING_MAX], tbuf[E2B_TIME_MAX], sizebuf[24];
        const char *t, *ftype;
        uint32_t st_mode;

        const JsonValue *metadata = json_get(entry, "metadata");

        if (metadata && !metadata_valid(metadata))
                return -EBADMSG;
        if (json_type(name) != JSON_STRING || json_type(path) != JSON_STRING || json_type(type) != JSON_STRING ||
            json_uint64(json_get(entry, "size"), &size) < 0 || json_uint64(json_get(entry, "mode"), &mode) < 0 ||
            mode > 07777 || json_int64(json_get(entry, "mtime_ns"), &mtime_ns) < 0 ||
            json_uint64(json_get(entry, "uid"), &uid) < 0 || json_uint64(json_get(entry, "gid"), &gid) < 0 ||
            (target && json_type(target) != JSON_STRING))
                return -EBADMSG;
        t = json_string(type);
        if (streq(t, "file")) {
                ftype = "FILE_TYPE_FILE";
                st_mode = S_IFREG;
        } else if (streq(t, "dir")) {
                ftype = "FILE_TYPE_DIRECTORY";
                st_mode = S_IFDIR;
        } else if (streq(t, "symlink")) {
                ftype = "FILE_TYPE_SYMLINK";
                st_mode = S_IFLNK;
        } else {
                ftype = "FILE_TYPE_UNSPECIFIED";
                st_mode = 0;
        }
        st_mode |= (uint32_t) mode;
        e2b_mode_string(st_mode, modestr);
        e2b_time_format(mtime_ns, tbuf);
        snprintf(sizebuf, sizeof sizebuf, "%" PRIu64, size);

        json_w_object_begin(w);
        json_w_key(w, "name");
        json_w_string_n(w, json_string(name), json_string_len(name));
        json_w_kv_string(w, "type", ftype);
        json_w_key(w, "path");
        json_w_string_n(w, json_string(path), json_string_len(path));
        json_w_kv_string(w, "size", sizebuf);
        json_w_kv_int(w, "mode", (int64_t) (mode & 0777));
        json_w_kv_string(w, "permissions", modestr);
        write_id_name(w, "owner", c->acc.passwd, c->acc.passwd_len, uid);
        write_id_name(w, "group", c->acc.group, c->acc.group_len, gid);
        json_w_kv_string(w, "modifiedTime", tbuf);
        if (metadata) {
                json_w_key(w, "metadata");
                json_w_object_begin(w);
                for (size_t i = 0; i < json_object_size(metadata); i++) {
                        const JsonValue *v = json_object_value(metadata, i);
                        json_w_key(w, json_object_key(metadata, i));
                        json_w_string_n(w, json_string(v), json_string_len(v));
                }
                json_w_object_end(w);
        }
        if (target) {
                const char *tg = json_string(target), *p = json_string(path), *slash = strrchr(p, '/');
                _cleanup_free_ char *abs = NULL;
                ApiError ignored = {};

                /* envd reports the target as an absolute path */
                if (tg[0] != '/' && slash && slash > p) {
                        _cleanup_free_ char *dir = memdup_suffix0(p, (size_t) (slash - p));
                        if (dir)
                                (void) e2b_path_resolve(tg, strlen(tg), dir, &abs, &ignored);
                } else if (tg[0] != '/')
                        (void) e2b_path_resolve(tg, strlen(tg), "/", &abs, &ignored);
                json_w_kv_string(w, "symlinkTarget", abs ?: tg);
        }
        json_w_object_end(w);
        return 0;
}

static int stat_entry(FsCall *c, const char *path, JsonValue **ret, ApiError *e) {
        JsonWriter w;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "path", path);
        json_w_object_end(&w);
        return fs_request(c, PROTO_FILE_STAT, &w, path, ret, e);
}

/* {"entry": EntryInfo of path} */
static int reply_entry(E2bEnvd *x, FsCall *c, const char *path, ApiError *e) {
        _cleanup_json_ JsonValue *entry = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        int k;

        k = stat_entry(c, path, &entry, e);
        if (k < 0)
                return k;
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "entry");
        if (write_entry(&w, c, entry) < 0)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a malformed file entry");
        json_w_object_end(&w);
        return e2b_unary_reply(x->r, &w);
}

/* ---- unary calls ---- */

static int fs_stat(E2bEnvd *x, ApiError *e) {
        _cleanup_(fs_call_done) FsCall c = { .fd = -EBADF };
        _cleanup_json_ JsonValue *req = NULL;
        _cleanup_free_ char *path = NULL;
        int k;

        k = fs_begin_path(x, &c, &req, "path", &path, e);
        if (k < 0)
                return k;
        return reply_entry(x, &c, path, e);
}

static int fs_list(E2bEnvd *x, ApiError *e) {
        _cleanup_(fs_call_done) FsCall c = { .fd = -EBADF };
        _cleanup_json_ JsonValue *req = NULL, *result = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *path = NULL;
        const JsonValue *v, *entries;
        uint32_t depth = 1;
        int k;

        json_w_init(&w);
        k = e2b_rpc_read(x, false, &req, e);
        if (k < 0)
                return k;
        v = e2b_field(req, "depth", NULL);
        if (v && e2b_uint32(v, &depth) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "depth must be an unsigned integer");
        depth = MIN(MAX(depth, 1U), E2B_LIST_DEPTH_MAX);
        k = fs_begin(x, &c, e);
        if (k >= 0)
                k = fs_path(&c, req, "path", &path, e);
        if (k < 0)
                return k;
        json_w_object_begin(&w);
        json_w_kv_string(&w, "path", path);
        json_w_kv_int(&w, "depth", depth);
        json_w_object_end(&w);
        k = fs_request(&c, PROTO_FILE_LIST, &w, path, &result, e);
        if (k < 0)
                return k;
        entries = json_get(result, "entries");
        if (json_type(entries) != JSON_ARRAY)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a malformed listing");
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "entries");
        json_w_array_begin(&w);
        for (size_t i = 0; i < json_array_size(entries); i++)
                if (write_entry(&w, &c, json_array_at(entries, i)) < 0)
                        return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a malformed directory entry");
        json_w_array_end(&w);
        json_w_object_end(&w);
        return e2b_unary_reply(x->r, &w);
}

static int mkdir_as_user(FsCall *c, const char *path, bool *ret_created, ApiError *e) {
        _cleanup_json_ JsonValue *result = NULL;
        JsonWriter w;
        int k;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "path", path);
        json_w_kv_bool(&w, "parents", true);
        json_w_kv_int(&w, "mode", 0755);
        json_w_kv_int(&w, "uid", c->user.uid);
        json_w_kv_int(&w, "gid", c->user.gid);
        json_w_object_end(&w);
        k = fs_request(c, PROTO_FILE_MKDIR, &w, path, &result, e);
        if (k < 0) {
                if (k == -ENOTDIR || k == -EEXIST)
                        return api_error(e, k, API_INVALID_ARGUMENT, "path '%.512s' exists and is not a directory",
                                         path);
                return k;
        }
        if (ret_created && json_bool(json_get(result, "created"), ret_created) < 0)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a malformed MKDIR result");
        return 0;
}

static int fs_mkdir(E2bEnvd *x, ApiError *e) {
        _cleanup_(fs_call_done) FsCall c = { .fd = -EBADF };
        _cleanup_json_ JsonValue *req = NULL;
        _cleanup_free_ char *path = NULL;
        bool created = false;
        int k;

        k = fs_begin_path(x, &c, &req, "path", &path, e);
        if (k >= 0)
                k = mkdir_as_user(&c, path, &created, e);
        if (k < 0)
                return k;
        if (!created)
                return api_error(e, -EEXIST, API_ALREADY_EXISTS, "directory '%.512s' already exists", path);
        return reply_entry(x, &c, path, e);
}

static int fs_move(E2bEnvd *x, ApiError *e) {
        _cleanup_(fs_call_done) FsCall c = { .fd = -EBADF };
        _cleanup_json_ JsonValue *req = NULL;
        _cleanup_free_ char *from = NULL, *to = NULL;
        JsonWriter w;
        char *slash;
        int k;

        k = fs_begin_path(x, &c, &req, "source", &from, e);
        if (k >= 0)
                k = fs_path(&c, req, "destination", &to, e);
        if (k < 0)
                return k;
        slash = strrchr(to, '/');
        if (slash && slash > to) {
                *slash = 0;
                k = mkdir_as_user(&c, to, NULL, e);
                *slash = '/';
                if (k < 0)
                        return k;
        }
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "from", from);
        json_w_kv_string(&w, "to", to);
        json_w_object_end(&w);
        k = fs_request(&c, PROTO_FILE_RENAME, &w, from, NULL, e);
        if (k < 0)
                return k;
        return reply_entry(x, &c, to, e);
}

static int fs_remove(E2bEnvd *x, ApiError *e) {
        _cleanup_(fs_call_done) FsCall c = { .fd = -EBADF };
        _cleanup_json_ JsonValue *req = NULL;
        _cleanup_free_ char *path = NULL;
        JsonWriter w;
        int k;

        k = fs_begin_path(x, &c, &req, "path", &path, e);
        if (k < 0)
                return k;
        if (streq(path, "/"))
                return api_error(e, -EBUSY, API_INVALID_ARGUMENT, "refusing to remove '/'");
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "path", path);
        json_w_kv_bool(&w, "recursive", true);
        json_w_object_end(&w);
        k = fs_request(&c, PROTO_FILE_REMOVE, &w, path, NULL, e);
        if (k < 0 && e->code != API_NOT_FOUND) /* rm -rf: a missing path is fine */
                return k;
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_object_end(&w);
        k = e2b_unary_reply(x->r, &w);
        json_w_done(&w);
        return k;
}

/* ---- WatchDir ---- */

static const char *event_type(const char *op) {
        static const struct {
                const char *op, *type;
        } table[] = {
                { "create", "EVENT_TYPE_CREATE" }, { "write", "EVENT_TYPE_WRITE" },   { "remove", "EVENT_TYPE_REMOVE" },
                { "rename", "EVENT_TYPE_RENAME" }, { "chmod", "EVENT_TYPE_CHMOD" },
        };
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (streq(table[i].op, op))
                        return table[i].type;
        return NULL;
}

static int send_simple(ApiRequest *r, const char *json) {
        JsonWriter w;

        json_w_init(&w);
        json_w_raw(&w, json);
        return e2b_stream_send(r, &w);
}

/* Events whose path still names something envd shows the entry of (includeEntry). */
static bool event_has_entry(const char *op) {
        return streq(op, "create") || streq(op, "write") || streq(op, "chmod");
}

/* The agent's entry for an event's name below root, on the connection stat;
 * NULL when it is gone already (removed again before we looked). */
static void event_entry(FsCall *stat, const char *root, const char *name, JsonValue **ret) {
        _cleanup_free_ char *path = NULL;

        *ret = NULL;
        if (stat->fd < 0)
                return;
        path = strdup_printf("%s/%s", streq(root, "/") ? "" : root, name);
        if (path)
                (void) stat_entry(stat, path, ret, &(ApiError){});
}

typedef struct Watching {
        E2bEnvd *x;
        FsCall *c;        /* the watch's agent connection (users, names) */
        FsCall stat;      /* a second connection for entries (includeEntry), opened when first needed */
        const char *root;
        bool include_entry;
} Watching;

/* One event of a RESULT {"events":[...]} (hostile) → a filesystem message. */
static int send_event(Watching *wt, const JsonValue *ev) {
        const JsonValue *name = json_get(ev, "name"), *op = json_get(ev, "op");
        _cleanup_json_ JsonValue *entry = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        const char *type;

        if (json_type(name) != JSON_STRING || json_type(op) != JSON_STRING || !(type = event_type(json_string(op))))
                return 0; /* a malformed event from the agent is dropped */
        if (wt->include_entry && event_has_entry(json_string(op))) {
                if (wt->stat.fd < 0 && e2b_envd_agent(wt->x, &wt->stat.fd, &(ApiError){}) < 0)
                        wt->stat.fd = -EBADF;
                event_entry(&wt->stat, wt->root, json_string(name), &entry);
        }
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "filesystem");
        json_w_object_begin(&w);
        json_w_key(&w, "name");
        json_w_string_n(&w, json_string(name), json_string_len(name));
        json_w_kv_string(&w, "type", type);
        if (entry) {
                json_w_key(&w, "entry");
                if (write_entry(&w, wt->c, entry) < 0)
                        json_w_null(&w);
        }
        json_w_object_end(&w);
        json_w_object_end(&w);
        return e2b_stream_send(wt->x->r, &w);
}

static int fs_watch(E2bEnvd *x) {
        _cleanup_(fs_call_done) FsCall c = { .fd = -EBADF };
        _cleanup_json_ JsonValue *req = NULL;
        _cleanup_free_ char *path = NULL;
        ApiRequest *r = x->r;
        uint64_t timeout = e2b_rpc_timeout_ms(r), deadline, keepalive, last;
        Watching wt = { .x = x, .c = &c, .stat = { .fd = -EBADF } };
        const JsonValue *v;
        bool recursive = false;
        JsonWriter w;
        ApiError e = {};
        int k;

        k = e2b_rpc_read(x, true, &req, &e);
        if (k >= 0)
                k = fs_begin(x, &c, &e);
        if (k < 0 && e.code == API_BAD_GATEWAY)
                return e2b_reply_gone(r, x->sb.id);
        if (k >= 0)
                k = fs_path(&c, req, "path", &path, &e);
        if (k >= 0 && (v = e2b_field(req, "recursive", NULL)) && json_bool(v, &recursive) < 0)
                k = api_error(&e, -EINVAL, API_INVALID_ARGUMENT, "recursive must be a boolean");
        if (k >= 0 && (v = e2b_field(req, "includeEntry", "include_entry")) && json_bool(v, &wt.include_entry) < 0)
                k = api_error(&e, -EINVAL, API_INVALID_ARGUMENT, "includeEntry must be a boolean");
        if (k >= 0) {
                json_w_init(&w);
                json_w_object_begin(&w);
                json_w_kv_string(&w, "path", path);
                json_w_kv_bool(&w, "recursive", recursive);
                json_w_object_end(&w);
                k = fs_request(&c, PROTO_FILE_WATCH, &w, path, NULL, &e);
        }
        if (k < 0)
                return e2b_stream_fail(r, &e);
        wt.root = path;

        if (e2b_stream_begin(r) < 0 || send_simple(r, "{\"start\":{}}") < 0) {
                http_conn_set_close(r->conn);
                fs_call_done(&wt.stat);
                return 0;
        }
        keepalive = (uint64_t) e2b_rpc_keepalive_sec(r) * 1000U;
        last = mono_msec();
        deadline = timeout > 0 ? last + timeout : 0;
        for (;;) {
                _cleanup_(proto_frame_done) ProtoFrame f = {};
                _cleanup_json_ JsonValue *res = NULL;
                struct pollfd p[2] = {
                        { .fd = c.fd, .events = POLLIN },
                        { .fd = http_conn_fd(r->conn), .events = POLLRDHUP },
                };
                uint64_t now = mono_msec(), wake = last + keepalive;
                const JsonValue *events;
                ApiError fe = {};

                if (deadline > 0 && now >= deadline) {
                        (void) api_error(&e, -ETIMEDOUT, API_TIMEOUT, "the deadline (Connect-Timeout-Ms) passed");
                        k = e2b_stream_end(r, &e);
                        break;
                }
                if (deadline > 0)
                        wake = MIN(wake, deadline);
                k = poll(p, 2, wake > now ? (int) MIN(wake - now, (uint64_t) INT32_MAX) : 0);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 || (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) {
                        /* the client stopped watching: closing the agent connection ends the watch */
                        http_conn_set_close(r->conn);
                        break;
                }
                if (k == 0) {
                        if ((uint64_t) mono_msec() >= last + keepalive) {
                                if (send_simple(r, "{\"keepalive\":{}}") < 0) {
                                        http_conn_set_close(r->conn);
                                        break;
                                }
                                last = mono_msec();
                        }
                        continue;
                }
                k = proto_recv(c.fd, &f);
                if (k < 0 || f.stream != AGENT_STREAM) {
                        if (k == -ECONNRESET) {
                                k = e2b_stream_abort(r);
                                break;
                        }
                        (void) api_error(&e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a bad frame");
                        k = e2b_stream_end(r, &e);
                        break;
                }
                if (f.type == PROTO_ERROR) {
                        k = agent_call_error(&f, NULL, &e);
                        (void) fs_agent_error(k, path, &e);
                        k = e2b_stream_end(r, &e);
                        break;
                }
                if (f.type != PROTO_RESULT || agent_call_parse(&f, &res, &fe) < 0 ||
                    json_type(events = json_get(res, "events")) != JSON_ARRAY) {
                        (void) api_error(&e, -EBADMSG, API_BAD_GATEWAY, "the agent sent a malformed watch event");
                        k = e2b_stream_end(r, &e);
                        break;
                }
                k = 0;
                for (size_t i = 0; i < json_array_size(events) && k >= 0; i++)
                        k = send_event(&wt, json_array_at(events, i));
                if (k < 0) {
                        http_conn_set_close(r->conn); /* the client stopped reading */
                        break;
                }
                last = mono_msec();
        }
        fs_call_done(&wt.stat);
        return 0;
}

/* ---- polling watchers: CreateWatcher, GetWatcherEvents, RemoveWatcher ----
 * A watcher is a FILE_WATCH on an agent connection kept here between polls;
 * events wait in the agent (bounded: it drops them and says "overflow" when
 * the connection is behind) until GetWatcherEvents reads what is there. A
 * watcher nobody polled for E2B_WATCHER_IDLE_SEC is closed. */

#define E2B_WATCHERS_MAX 64U
#define E2B_WATCHER_IDLE_SEC 600
#define E2B_WATCHER_ID_LEN 20U
#define E2B_WATCHER_EVENTS_MAX 10000U

typedef struct Watcher {
        char id[E2B_WATCHER_ID_LEN + 1];
        char sandbox[STORE_ID_MAX];
        int fd;
        bool busy;
        bool include_entry; /* each event carries the entry it names (envd's include_entry) */
        char *root;         /* the watched directory, resolved (for the entries' paths) */
        uint64_t last_used_msec;
} Watcher;

static void watcher_clear(Watcher *w) {
        safe_close(w->fd);
        free(w->root);
        *w = (Watcher){};
}

static pthread_mutex_t watchers_lock = PTHREAD_MUTEX_INITIALIZER;
static Watcher watchers[E2B_WATCHERS_MAX];

/* Closes idle watchers; called with the lock held. */
static void watchers_expire_locked(uint64_t now) {
        for (size_t i = 0; i < E2B_WATCHERS_MAX; i++)
                if (watchers[i].id[0] && !watchers[i].busy &&
                    now > watchers[i].last_used_msec + E2B_WATCHER_IDLE_SEC * 1000ULL)
                        watcher_clear(&watchers[i]);
}

/* Takes the watcher for this request (busy) or fails with 404. */
static Watcher *watcher_take(E2bEnvd *x, const JsonValue *req, ApiError *e) {
        const JsonValue *v = e2b_field(req, "watcherId", "watcher_id");
        Watcher *w = NULL;

        if (json_type(v) != JSON_STRING)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "watcherId is required"), NULL;
        pthread_mutex_lock(&watchers_lock);
        watchers_expire_locked(mono_msec());
        for (size_t i = 0; i < E2B_WATCHERS_MAX && !w; i++)
                if (watchers[i].id[0] && streq(watchers[i].id, json_string(v)) &&
                    streq(watchers[i].sandbox, x->sb.id) && !watchers[i].busy)
                        w = &watchers[i];
        if (w)
                w->busy = true;
        pthread_mutex_unlock(&watchers_lock);
        if (!w)
                (void) api_error(e, -ENOENT, API_NOT_FOUND, "watcher '%.32s' not found", json_string(v));
        return w;
}

static void watcher_release(Watcher *w, bool remove) {
        pthread_mutex_lock(&watchers_lock);
        if (remove)
                watcher_clear(w);
        else {
                w->busy = false;
                w->last_used_msec = mono_msec();
        }
        pthread_mutex_unlock(&watchers_lock);
}

static int fs_watcher_create(E2bEnvd *x, ApiError *e) {
        _cleanup_(fs_call_done) FsCall c = { .fd = -EBADF };
        _cleanup_json_ JsonValue *req = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *path = NULL;
        const JsonValue *v;
        char id[E2B_WATCHER_ID_LEN + 1] = "w";
        bool recursive = false, include_entry = false;
        Watcher *slot = NULL;
        int k;

        k = fs_begin_path(x, &c, &req, "path", &path, e);
        if (k >= 0 && (v = e2b_field(req, "recursive", NULL)) && json_bool(v, &recursive) < 0)
                k = api_error(e, -EINVAL, API_INVALID_ARGUMENT, "recursive must be a boolean");
        if (k >= 0 && (v = e2b_field(req, "includeEntry", "include_entry")) && json_bool(v, &include_entry) < 0)
                k = api_error(e, -EINVAL, API_INVALID_ARGUMENT, "includeEntry must be a boolean");
        if (k >= 0)
                k = random_alnum(id + 1, E2B_WATCHER_ID_LEN - 1);
        if (k < 0)
                return e->code == API_OK ? api_error(e, k, API_INTERNAL, "cannot make a watcher id") : k;
        id[E2B_WATCHER_ID_LEN] = 0;
        json_w_object_begin(&w);
        json_w_kv_string(&w, "path", path);
        json_w_kv_bool(&w, "recursive", recursive);
        json_w_object_end(&w);
        k = fs_request(&c, PROTO_FILE_WATCH, &w, path, NULL, e);
        if (k < 0)
                return k;

        pthread_mutex_lock(&watchers_lock);
        watchers_expire_locked(mono_msec());
        for (size_t i = 0; i < E2B_WATCHERS_MAX && !slot; i++)
                if (!watchers[i].id[0])
                        slot = &watchers[i];
        if (slot) {
                *slot = (Watcher){ .fd = TAKE_FD(c.fd), .include_entry = include_entry, .root = TAKE_PTR(path),
                                   .last_used_msec = mono_msec() };
                memcpy(slot->id, id, sizeof id);
                (void) strscpy(slot->sandbox, sizeof slot->sandbox, x->sb.id);
        }
        pthread_mutex_unlock(&watchers_lock);
        if (!slot)
                return api_error(e, -EMFILE, API_TOO_MANY_REQUESTS, "too many watchers (%u); remove some",
                                 E2B_WATCHERS_MAX);
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "watcherId", id);
        json_w_object_end(&w);
        return e2b_unary_reply(x->r, &w);
}

static int fs_watcher_events(E2bEnvd *x, ApiError *e) {
        _cleanup_(fs_call_done) FsCall stat = { .fd = -EBADF };
        _cleanup_json_ JsonValue *req = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        size_t n = 0;
        bool dead = false, stat_tried = false;
        Watcher *wt;
        int k;

        k = e2b_rpc_read(x, false, &req, e);
        if (k < 0)
                return k;
        wt = watcher_take(x, req, e);
        if (!wt)
                return -ENOENT;
        json_w_object_begin(&w);
        json_w_key(&w, "events");
        json_w_array_begin(&w);
        while (n < E2B_WATCHER_EVENTS_MAX) {
                _cleanup_(proto_frame_done) ProtoFrame f = {};
                _cleanup_json_ JsonValue *res = NULL;
                struct pollfd p = { .fd = wt->fd, .events = POLLIN };
                const JsonValue *events;
                ApiError ignored = {};

                if (poll(&p, 1, 0) <= 0)
                        break;
                if (proto_recv(wt->fd, &f) < 0 || f.stream != AGENT_STREAM || f.type != PROTO_RESULT ||
                    agent_call_parse(&f, &res, &ignored) < 0 ||
                    json_type(events = json_get(res, "events")) != JSON_ARRAY) {
                        dead = true; /* the sandbox went away, or the directory did */
                        break;
                }
                for (size_t i = 0; i < json_array_size(events); i++) {
                        const JsonValue *ev = json_array_at(events, i), *name = json_get(ev, "name"),
                                        *op = json_get(ev, "op");
                        _cleanup_json_ JsonValue *entry = NULL;
                        const char *type;
                        if (json_type(name) != JSON_STRING || json_type(op) != JSON_STRING ||
                            !(type = event_type(json_string(op))))
                                continue;
                        if (wt->include_entry && event_has_entry(json_string(op))) {
                                /* a second agent connection with the accounts, for the entries' owners */
                                if (!stat_tried && fs_begin(x, &stat, &ignored) < 0)
                                        stat.fd = safe_close(stat.fd);
                                stat_tried = true;
                                event_entry(&stat, wt->root, json_string(name), &entry);
                        }
                        json_w_object_begin(&w);
                        json_w_key(&w, "name");
                        json_w_string_n(&w, json_string(name), json_string_len(name));
                        json_w_kv_string(&w, "type", type);
                        if (entry) {
                                json_w_key(&w, "entry");
                                if (write_entry(&w, &stat, entry) < 0)
                                        json_w_null(&w);
                        }
                        json_w_object_end(&w);
                        n++;
                }
        }
        json_w_array_end(&w);
        json_w_object_end(&w);
        watcher_release(wt, dead && n == 0);
        if (dead && n == 0)
                return api_error(e, -ENOENT, API_NOT_FOUND, "the watcher ended (its directory or sandbox is gone)");
        return e2b_unary_reply(x->r, &w);
}

static int fs_watcher_remove(E2bEnvd *x, ApiError *e) {
        _cleanup_json_ JsonValue *req = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        Watcher *wt;
        int k;

        k = e2b_rpc_read(x, false, &req, e);
        if (k < 0)
                return k;
        wt = watcher_take(x, req, e);
        if (!wt)
                return -ENOENT;
        watcher_release(wt, true);
        json_w_object_begin(&w);
        json_w_object_end(&w);
        return e2b_unary_reply(x->r, &w);
}

int e2b_filesystem_handle(E2bEnvd *x, const char *method) {
        static const E2bUnaryMethod methods[] = {
                { "Stat", fs_stat },
                { "ListDir", fs_list },
                { "MakeDir", fs_mkdir },
                { "Move", fs_move },
                { "Remove", fs_remove },
                { "CreateWatcher", fs_watcher_create },
                { "GetWatcherEvents", fs_watcher_events },
                { "RemoveWatcher", fs_watcher_remove },
        };

        if (streq(method, "WatchDir"))
                return fs_watch(x);
        return e2b_unary_dispatch(x, "filesystem.Filesystem", methods, ELEMENTSOF(methods), method);
}
