/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>

#include "alloc-util.h"
#include "proto-msg.h"
#include "str-util.h"

_printf_(3, 4) static int fail(char *errbuf, size_t errbuf_size, const char *fmt, ...) {
        va_list ap;

        if (errbuf && errbuf_size > 0) {
                va_start(ap, fmt);
                vsnprintf(errbuf, errbuf_size, fmt, ap);
                va_end(ap);
        }
        return -EINVAL;
}

/* The value of key, or NULL if absent or JSON null. */
static const JsonValue *field(const JsonValue *obj, const char *key) {
        const JsonValue *v = obj ? json_get(obj, key) : NULL;
        return v && !json_is_null(v) ? v : NULL;
}

static int check_object(const JsonValue *obj, const char *const *allowed, char *errbuf, size_t errbuf_size) {
        const char *unknown = NULL;

        if (!obj)
                return 0; /* an empty payload is an empty object */
        if (json_type(obj) != JSON_OBJECT)
                return fail(errbuf, errbuf_size, "request must be a JSON object");
        if (json_check_keys(obj, allowed, &unknown) < 0)
                return fail(errbuf, errbuf_size, "unknown field '%.64s'", strna(unknown));
        return 0;
}

/* A string without NULs of 1..max bytes. */
static int string_valid(const JsonValue *v, size_t max, const char **ret) {
        const char *s = json_string(v);
        size_t n;

        if (!s)
                return -EINVAL;
        n = json_string_len(v);
        if (n == 0 || n > max || strlen(s) != n)
                return -EINVAL;
        *ret = s;
        return 0;
}

/* Returns 0 absent, 1 present, -EINVAL/-ENOMEM. */
static int get_string(const JsonValue *obj, const char *key, size_t max, char **ret, char *errbuf,
                      size_t errbuf_size) {
        const JsonValue *v = field(obj, key);
        const char *s;

        if (!v)
                return 0;
        if (string_valid(v, max, &s) < 0)
                return fail(errbuf, errbuf_size, "'%s' must be a non-empty string of at most %zu bytes without NUL",
                            key, max);
        *ret = strdup(s);
        return *ret ? 1 : -ENOMEM;
}

static int get_bool(const JsonValue *obj, const char *key, bool *ret, char *errbuf, size_t errbuf_size) {
        const JsonValue *v = field(obj, key);

        if (!v)
                return 0;
        if (json_bool(v, ret) < 0)
                return fail(errbuf, errbuf_size, "'%s' must be a boolean", key);
        return 1;
}

static int get_uint(const JsonValue *obj, const char *key, uint64_t lo, uint64_t hi, uint64_t *ret, char *errbuf,
                    size_t errbuf_size) {
        const JsonValue *v = field(obj, key);
        uint64_t u = 0;

        if (!v)
                return 0;
        if (json_uint64(v, &u) < 0 || u < lo || u > hi)
                return fail(errbuf, errbuf_size, "'%s' must be an integer in %" PRIu64 "..%" PRIu64, key, lo, hi);
        *ret = u;
        return 1;
}

static int get_user(const JsonValue *obj, char **ret_name, bool *ret_have_uid, uint32_t *ret_uid, char *errbuf,
                    size_t errbuf_size) {
        const JsonValue *v = field(obj, "user");
        uint64_t u = 0;

        if (!v)
                return 0;
        if (json_type(v) == JSON_NUMBER) {
                if (json_uint64(v, &u) < 0 || u >= PROTO_ID_MAX)
                        return fail(errbuf, errbuf_size, "'user' must be a name or a uid below %u", PROTO_ID_MAX);
                *ret_have_uid = true;
                *ret_uid = (uint32_t) u;
                return 1;
        }
        return get_string(obj, "user", PROTO_NAME_MAX, ret_name, errbuf, errbuf_size);
}

static int get_winsize(const JsonValue *obj, bool required, uint16_t *rows, uint16_t *cols, char *errbuf,
                       size_t errbuf_size) {
        uint64_t u = 0;
        int r;

        r = get_uint(obj, "rows", 1, PROTO_WINSIZE_MAX, &u, errbuf, errbuf_size);
        if (r < 0)
                return r;
        if (r > 0)
                *rows = (uint16_t) u;
        else if (required)
                return fail(errbuf, errbuf_size, "'rows' is required");
        r = get_uint(obj, "cols", 1, PROTO_WINSIZE_MAX, &u, errbuf, errbuf_size);
        if (r < 0)
                return r;
        if (r > 0)
                *cols = (uint16_t) u;
        else if (required)
                return fail(errbuf, errbuf_size, "'cols' is required");
        return 0;
}

static int parse_argv(const JsonValue *obj, char ***ret, char *errbuf, size_t errbuf_size) {
        const JsonValue *argv = field(obj, "argv"), *shell = field(obj, "shell");
        _cleanup_strv_free_ char **l = NULL;
        const char *s;
        size_t n;

        if (!!argv == !!shell)
                return fail(errbuf, errbuf_size, "exactly one of 'argv' and 'shell' is required");
        if (shell) {
                if (string_valid(shell, PROTO_JSON_MAX, &s) < 0)
                        return fail(errbuf, errbuf_size, "'shell' must be a non-empty string without NUL");
                if (strv_extend(&l, "/bin/sh") < 0 || strv_extend(&l, "-c") < 0 || strv_extend(&l, s) < 0)
                        return -ENOMEM;
                *ret = TAKE_PTR(l);
                return 0;
        }
        if (json_type(argv) != JSON_ARRAY)
                return fail(errbuf, errbuf_size, "'argv' must be an array of strings");
        n = json_array_size(argv);
        if (n == 0 || n > PROTO_ARGV_MAX)
                return fail(errbuf, errbuf_size, "'argv' must have 1..%u entries", PROTO_ARGV_MAX);
        l = new0(char *, n + 1);
        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const JsonValue *e = json_array_at(argv, i);
                const char *str = json_string(e);
                /* argv entries may be empty strings (but not argv[0]) and never contain NUL */
                if (!str || strlen(str) != json_string_len(e) || (i == 0 && str[0] == 0))
                        return fail(errbuf, errbuf_size, "'argv[%zu]' must be a string without NUL%s", i,
                                    i == 0 ? ", not empty" : "");
                l[i] = strdup(str);
                if (!l[i])
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

static int parse_env(const JsonValue *obj, char ***ret, char *errbuf, size_t errbuf_size) {
        const JsonValue *env = field(obj, "env");
        _cleanup_strv_free_ char **l = NULL;
        size_t n;

        if (!env)
                return 0;
        if (json_type(env) != JSON_OBJECT)
                return fail(errbuf, errbuf_size, "'env' must be an object of strings");
        n = json_object_size(env);
        if (n > PROTO_ENV_MAX)
                return fail(errbuf, errbuf_size, "'env' has more than %u entries", PROTO_ENV_MAX);
        l = new0(char *, n + 1);
        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const char *k = json_object_key(env, i);
                const JsonValue *v = json_object_value(env, i);
                const char *s = json_string(v);

                if (!k || !k[0] || strchr(k, '='))
                        return fail(errbuf, errbuf_size, "'env' keys must be non-empty and without '='");
                if (!s || strlen(s) != json_string_len(v))
                        return fail(errbuf, errbuf_size, "'env.%.64s' must be a string without NUL", k);
                l[i] = strjoin(k, "=", s);
                if (!l[i])
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

void proto_exec_request_done(ProtoExecRequest *r) {
        if (!r)
                return;
        r->argv = strv_free(r->argv);
        r->env = strv_free(r->env);
        r->cwd = mfree(r->cwd);
        r->user = mfree(r->user);
}

int proto_exec_request_parse(const JsonValue *obj, ProtoExecRequest *ret, char *errbuf, size_t errbuf_size) {
        static const char *const allowed[] = { "argv",       "shell",        "env",      "cwd",     "user",
                                               "stdin",      "pty",          "rows",     "cols",    "timeout_ms",
                                               "background", "buffer_bytes", "stall_ms", "keep_ms", "oom_base",
                                               "on_disconnect", NULL };
        _cleanup_(proto_exec_request_done) ProtoExecRequest req = {
                .rows = 24,
                .cols = 80,
                .buffer_bytes = PROTO_EXEC_BUFFER_DEFAULT,
                .stall_ms = PROTO_EXEC_STALL_MS_DEFAULT,
                .keep_ms = PROTO_EXEC_KEEP_MS_DEFAULT,
                .on_disconnect = _PROTO_DISCONNECT_INVALID, /* by pty, below */
        };
        _cleanup_free_ char *on_disconnect = NULL;
        uint64_t u = 0;
        int r;

        if (!ret)
                return -EINVAL;
        r = check_object(obj, allowed, errbuf, errbuf_size);
        if (r < 0)
                return r;
        r = parse_argv(obj, &req.argv, errbuf, errbuf_size);
        if (r < 0)
                return r;
        r = parse_env(obj, &req.env, errbuf, errbuf_size);
        if (r < 0)
                return r;
        r = get_string(obj, "cwd", PROTO_PATH_MAX, &req.cwd, errbuf, errbuf_size);
        if (r < 0)
                return r;
        r = get_user(obj, &req.user, &req.have_uid, &req.uid, errbuf, errbuf_size);
        if (r < 0)
                return r;
        if ((r = get_bool(obj, "stdin", &req.stdin_open, errbuf, errbuf_size)) < 0 ||
            (r = get_bool(obj, "pty", &req.pty, errbuf, errbuf_size)) < 0 ||
            (r = get_bool(obj, "background", &req.background, errbuf, errbuf_size)) < 0)
                return r;
        r = get_winsize(obj, false, &req.rows, &req.cols, errbuf, errbuf_size);
        if (r < 0)
                return r;
        r = get_uint(obj, "timeout_ms", 0, PROTO_TIMEOUT_MS_MAX, &u, errbuf, errbuf_size);
        if (r < 0)
                return r;
        if (r > 0)
                req.timeout_ms = u;
        if ((r = get_uint(obj, "buffer_bytes", PROTO_EXEC_BUFFER_MIN, PROTO_EXEC_BUFFER_MAX, &req.buffer_bytes,
                          errbuf, errbuf_size)) < 0 ||
            (r = get_uint(obj, "stall_ms", 0, PROTO_TIMEOUT_MS_MAX, &req.stall_ms, errbuf, errbuf_size)) < 0 ||
            (r = get_uint(obj, "keep_ms", 0, PROTO_EXEC_KEEP_MS_MAX, &req.keep_ms, errbuf, errbuf_size)) < 0)
                return r;
        r = get_uint(obj, "oom_base", 0, UINT64_MAX, &req.oom_base, errbuf, errbuf_size);
        if (r < 0)
                return r;
        req.have_oom_base = r > 0;
        r = get_string(obj, "on_disconnect", PROTO_NAME_MAX, &on_disconnect, errbuf, errbuf_size);
        if (r < 0)
                return r;
        if (on_disconnect) {
                req.on_disconnect = proto_disconnect_from_string(on_disconnect);
                if (req.on_disconnect < 0)
                        return fail(errbuf, errbuf_size, "'on_disconnect' must be keep, hangup or kill");
        } else
                req.on_disconnect = req.pty ? PROTO_DISCONNECT_HANGUP : PROTO_DISCONNECT_KEEP;

        *ret = req;
        req = (ProtoExecRequest){};
        return 0;
}

static const char *const disconnect_table[_PROTO_DISCONNECT_MAX] = {
        [PROTO_DISCONNECT_KEEP] = "keep",
        [PROTO_DISCONNECT_HANGUP] = "hangup",
        [PROTO_DISCONNECT_KILL] = "kill",
};

const char *proto_disconnect_to_string(ProtoDisconnect d) {
        return d >= 0 && d < _PROTO_DISCONNECT_MAX ? disconnect_table[d] : NULL;
}

ProtoDisconnect proto_disconnect_from_string(const char *s) {
        for (size_t i = 0; s && i < _PROTO_DISCONNECT_MAX; i++)
                if (streq(disconnect_table[i], s))
                        return (ProtoDisconnect) i;
        return _PROTO_DISCONNECT_INVALID;
}

void proto_file_request_done(ProtoFileRequest *r) {
        if (!r)
                return;
        r->path = mfree(r->path);
        r->to = mfree(r->to);
        r->user = mfree(r->user);
        r->metadata = strv_free(r->metadata);
}

bool proto_file_metadata_key_valid(const char *key, size_t n) {
        if (n == 0 || n > PROTO_FILE_METADATA_KEY_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((key[i] >= 'a' && key[i] <= 'z') || (key[i] >= '0' && key[i] <= '9') || key[i] == '-' ||
                      key[i] == '_' || key[i] == '.'))
                        return false;
        return true;
}

/* "metadata": {key: value, ...} of FILE_WRITE → key, value, ... */
static int get_metadata(const JsonValue *obj, char ***ret, char *errbuf, size_t errbuf_size) {
        const JsonValue *v = field(obj, "metadata");
        _cleanup_strv_free_ char **l = NULL;
        size_t n;

        if (!v)
                return 0;
        if (json_type(v) != JSON_OBJECT)
                return fail(errbuf, errbuf_size, "'metadata' must be an object of strings");
        n = json_object_size(v);
        if (n > PROTO_FILE_METADATA_MAX)
                return fail(errbuf, errbuf_size, "'metadata' has more than %u entries", PROTO_FILE_METADATA_MAX);
        for (size_t i = 0; i < n; i++) {
                const char *k = json_object_key(v, i);
                const JsonValue *val = json_object_value(v, i);

                if (!proto_file_metadata_key_valid(k, strlen(k)))
                        return fail(errbuf, errbuf_size,
                                    "metadata key '%.64s' is not 1-%u lower-case letters, digits, '-', '_' or '.'", k,
                                    PROTO_FILE_METADATA_KEY_MAX);
                if (json_type(val) != JSON_STRING || json_string_len(val) > PROTO_FILE_METADATA_VALUE_MAX ||
                    memchr(json_string(val), 0, json_string_len(val)))
                        return fail(errbuf, errbuf_size, "metadata '%.64s' must be a string of at most %u bytes", k,
                                    PROTO_FILE_METADATA_VALUE_MAX);
                if (strv_extend(&l, k) < 0 || strv_extend(&l, json_string(val)) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 1;
}

int proto_file_request_parse(ProtoType type, const JsonValue *obj, ProtoFileRequest *ret, char *errbuf,
                             size_t errbuf_size) {
        static const char *const read_keys[] = { "path", "offset", "length", "user", NULL };
        static const char *const write_keys[] = { "path", "mode", "append", "parents", "uid", "gid", "user",
                                                  "metadata", NULL };
        static const char *const list_keys[] = { "path", "depth", "user", NULL };
        static const char *const stat_keys[] = { "path", "user", NULL };
        static const char *const mkdir_keys[] = { "path", "parents", "mode", "uid", "gid", "user", NULL };
        static const char *const remove_keys[] = { "path", "recursive", "user", NULL };
        static const char *const rename_keys[] = { "from", "to", "user", NULL };
        static const char *const watch_keys[] = { "path", "recursive", "user", NULL };
        _cleanup_(proto_file_request_done) ProtoFileRequest req = { .type = type, .length = -1, .depth = 1 };
        const char *const *allowed;
        bool have_uid_unused = false;
        uint32_t uid_unused = 0;
        uint64_t u = 0;
        int r;

        if (!ret)
                return -EINVAL;
        switch (type) {
        case PROTO_FILE_READ:
                allowed = read_keys;
                break;
        case PROTO_FILE_WRITE:
                allowed = write_keys;
                break;
        case PROTO_FILE_LIST:
                allowed = list_keys;
                break;
        case PROTO_FILE_STAT:
                allowed = stat_keys;
                break;
        case PROTO_FILE_MKDIR:
                allowed = mkdir_keys;
                break;
        case PROTO_FILE_REMOVE:
                allowed = remove_keys;
                break;
        case PROTO_FILE_RENAME:
                allowed = rename_keys;
                break;
        case PROTO_FILE_WATCH:
                allowed = watch_keys;
                break;
        default:
                return fail(errbuf, errbuf_size, "not a file request");
        }
        r = check_object(obj, allowed, errbuf, errbuf_size);
        if (r < 0)
                return r;

        if (type == PROTO_FILE_RENAME) {
                r = get_string(obj, "from", PROTO_PATH_MAX, &req.path, errbuf, errbuf_size);
                if (r == 0)
                        return fail(errbuf, errbuf_size, "'from' is required");
                if (r < 0)
                        return r;
                r = get_string(obj, "to", PROTO_PATH_MAX, &req.to, errbuf, errbuf_size);
                if (r == 0)
                        return fail(errbuf, errbuf_size, "'to' is required");
        } else {
                r = get_string(obj, "path", PROTO_PATH_MAX, &req.path, errbuf, errbuf_size);
                if (r == 0)
                        return fail(errbuf, errbuf_size, "'path' is required");
        }
        if (r < 0)
                return r;

        /* "user" is a name or uid; a numeric one is only good for uid 0 (root's home). */
        r = get_user(obj, &req.user, &have_uid_unused, &uid_unused, errbuf, errbuf_size);
        if (r < 0)
                return r;
        if (have_uid_unused) {
                req.user = strdup_printf("%" PRIu32, uid_unused);
                if (!req.user)
                        return -ENOMEM;
        }

        r = get_uint(obj, "offset", 0, INT64_MAX, &req.offset, errbuf, errbuf_size);
        if (r < 0)
                return r;
        {
                const JsonValue *v = field(obj, "length");
                int64_t l;
                if (v) {
                        if (json_int64(v, &l) < 0 || l < -1)
                                return fail(errbuf, errbuf_size, "'length' must be an integer >= -1");
                        req.length = l;
                }
        }
        r = get_uint(obj, "mode", 0, 07777, &u, errbuf, errbuf_size);
        if (r < 0)
                return r;
        if (r > 0) {
                req.have_mode = true;
                req.mode = (uint32_t) u;
        }
        if ((r = get_bool(obj, "append", &req.append, errbuf, errbuf_size)) < 0 ||
            (r = get_bool(obj, "parents", &req.parents, errbuf, errbuf_size)) < 0 ||
            (r = get_bool(obj, "recursive", &req.recursive, errbuf, errbuf_size)) < 0)
                return r;
        r = get_uint(obj, "uid", 0, PROTO_ID_MAX - 1, &u, errbuf, errbuf_size);
        if (r < 0)
                return r;
        if (r > 0) {
                req.have_uid = true;
                req.uid = (uint32_t) u;
        }
        r = get_uint(obj, "gid", 0, PROTO_ID_MAX - 1, &u, errbuf, errbuf_size);
        if (r < 0)
                return r;
        if (r > 0) {
                req.have_gid = true;
                req.gid = (uint32_t) u;
        }
        r = get_uint(obj, "depth", 1, PROTO_LIST_DEPTH_MAX, &u, errbuf, errbuf_size);
        if (r < 0)
                return r;
        if (r > 0)
                req.depth = (unsigned) u;
        r = get_metadata(obj, &req.metadata, errbuf, errbuf_size);
        if (r < 0)
                return r;

        *ret = req;
        req = (ProtoFileRequest){};
        return 0;
}

void proto_control_request_done(ProtoControlRequest *r) {
        if (!r)
                return;
        r->exec_id = mfree(r->exec_id);
}

int proto_control_request_parse(ProtoType type, const JsonValue *obj, ProtoControlRequest *ret, char *errbuf,
                                size_t errbuf_size) {
        static const char *const signal_keys[] = { "signal", "exec_id", NULL };
        static const char *const resize_keys[] = { "rows", "cols", "exec_id", NULL };
        static const char *const attach_keys[] = { "exec_id", "output", "from", NULL };
        static const char *const no_keys[] = { NULL };
        _cleanup_(proto_control_request_done) ProtoControlRequest req = { .type = type };
        const char *const *allowed;
        int r;

        if (!ret)
                return -EINVAL;
        switch (type) {
        case PROTO_SIGNAL:
                allowed = signal_keys;
                break;
        case PROTO_RESIZE:
                allowed = resize_keys;
                break;
        case PROTO_ATTACH:
                allowed = attach_keys;
                break;
        case PROTO_PS:
        case PROTO_PING:
                allowed = no_keys;
                break;
        default:
                return fail(errbuf, errbuf_size, "not a control request");
        }
        r = check_object(obj, allowed, errbuf, errbuf_size);
        if (r < 0)
                return r;

        r = get_string(obj, "exec_id", PROTO_NAME_MAX, &req.exec_id, errbuf, errbuf_size);
        if (r < 0)
                return r;
        if (type == PROTO_ATTACH && !req.exec_id)
                return fail(errbuf, errbuf_size, "'exec_id' is required");

        if (type == PROTO_SIGNAL) {
                const JsonValue *v = field(obj, "signal");
                uint64_t u;
                const char *s;

                if (!v)
                        return fail(errbuf, errbuf_size, "'signal' is required");
                if (json_type(v) == JSON_NUMBER) {
                        if (json_uint64(v, &u) < 0 || u < 1 || u > 64)
                                return fail(errbuf, errbuf_size, "'signal' must be 1..64");
                        req.signal = (int) u;
                } else {
                        if (string_valid(v, PROTO_NAME_MAX, &s) < 0 || (req.signal = proto_signal_from_string(s)) < 0)
                                return fail(errbuf, errbuf_size, "'signal' must be a signal name such as \"SIGTERM\"");
                }
        }
        if (type == PROTO_RESIZE) {
                r = get_winsize(obj, true, &req.rows, &req.cols, errbuf, errbuf_size);
                if (r < 0)
                        return r;
        }
        r = get_bool(obj, "output", &req.output, errbuf, errbuf_size);
        if (r < 0)
                return r;
        r = get_uint(obj, "from", 0, UINT64_MAX, &req.from, errbuf, errbuf_size);
        if (r < 0)
                return r;
        req.have_from = r > 0;

        *ret = req;
        req = (ProtoControlRequest){};
        return 0;
}

static const char *const signal_table[] = {
        [SIGHUP] = "SIGHUP",       [SIGINT] = "SIGINT",       [SIGQUIT] = "SIGQUIT",   [SIGILL] = "SIGILL",
        [SIGTRAP] = "SIGTRAP",     [SIGABRT] = "SIGABRT",     [SIGBUS] = "SIGBUS",     [SIGFPE] = "SIGFPE",
        [SIGKILL] = "SIGKILL",     [SIGUSR1] = "SIGUSR1",     [SIGSEGV] = "SIGSEGV",   [SIGUSR2] = "SIGUSR2",
        [SIGPIPE] = "SIGPIPE",     [SIGALRM] = "SIGALRM",     [SIGTERM] = "SIGTERM",   [SIGSTKFLT] = "SIGSTKFLT",
        [SIGCHLD] = "SIGCHLD",     [SIGCONT] = "SIGCONT",     [SIGSTOP] = "SIGSTOP",   [SIGTSTP] = "SIGTSTP",
        [SIGTTIN] = "SIGTTIN",     [SIGTTOU] = "SIGTTOU",     [SIGURG] = "SIGURG",     [SIGXCPU] = "SIGXCPU",
        [SIGXFSZ] = "SIGXFSZ",     [SIGVTALRM] = "SIGVTALRM", [SIGPROF] = "SIGPROF",   [SIGWINCH] = "SIGWINCH",
        [SIGIO] = "SIGIO",         [SIGPWR] = "SIGPWR",       [SIGSYS] = "SIGSYS",
};

const char *proto_signal_to_string(int sig) {
        if (sig <= 0 || (size_t) sig >= ELEMENTSOF(signal_table))
                return NULL;
        return signal_table[sig];
}

int proto_signal_from_string(const char *s) {
        const char *n;
        unsigned u;

        if (!s || !*s)
                return -EINVAL;
        n = startswith(s, "SIG") ?: s;
        for (size_t i = 1; i < ELEMENTSOF(signal_table); i++)
                if (signal_table[i] && streq(signal_table[i] + 3, n))
                        return (int) i;
        /* numbers: "15" or "SIG40" (what the agent writes for unnamed signals) */
        if (*n >= '0' && *n <= '9' && safe_atou(n, &u) >= 0 && u >= 1 && u <= 64)
                return (int) u;
        return -EINVAL;
}

int proto_error_json(int err, const char *message, char **ret) {
        JsonWriter w;

        if (err < 0)
                err = -err;
        if (err == 0)
                err = EIO;
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_int(&w, "errno", err);
        json_w_kv_string(&w, "code", proto_errno_to_code(err));
        json_w_kv_string(&w, "message", message ?: strerror(err));
        json_w_object_end(&w);
        return json_w_finish(&w, ret, NULL);
}
