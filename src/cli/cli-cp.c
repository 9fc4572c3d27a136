/* SPDX-License-Identifier: MIT */
/* space cp [-r] SRC DST: exactly one side is ID:/path.
 * Upload: PUT .../files?path=&mode= with a chunked body streamed from the file
 * (or stdin for '-'). Download: GET .../files?path= streamed into a temporary
 * file beside the destination, renamed into place at the end (or to stdout
 * for '-'). Neither direction holds the file in memory.
 * Directories (-r) travel as a tar stream between a local tar and the
 * sandbox's own tar run by an exec (stdin or stdout of the exec): modes,
 * symlinks and empty directories are kept, owners are not (files belong to
 * the user who extracts: root in the sandbox, the caller here). */

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>

#include "cli-child.h"
#include "cli-common.h"
#include "cli-exec.h"
#include "cli-progress.h"
#include "cli-verbs.h"
#include "fd-util.h"

#define CLI_ID_MAX 128

/* "ID:/path" → id and path. Returns 1 if s names a sandbox path, 0 if it is
 * local (no colon, or something before it that cannot be an id, e.g. "./a:b"). */
static int parse_remote(const char *s, char **ret_id, const char **ret_path) {
        const char *colon = strchr(s, ':');
        size_t n;

        if (!colon || colon == s)
                return 0;
        n = (size_t) (colon - s);
        if (n > CLI_ID_MAX)
                return 0;
        for (const char *c = s; c < colon; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
                      *c == '-' || *c == '.'))
                        return 0;
        if (colon[1] == 0)
                return cli_usage_error("'%s': missing the path after '%.*s:'", s, (int) n, s);
        *ret_id = memdup_suffix0(s, n);
        if (!*ret_id)
                return cli_error_errno(-ENOMEM, "out of memory");
        *ret_path = colon + 1;
        return 1;
}

static char *files_target(const char *id, const char *path, const char *extra) {
        _cleanup_free_ char *eid = cli_escape(id), *epath = cli_escape(path);
        if (!eid || !epath)
                return NULL;
        return strjoin("/v1/sandboxes/", eid, "/files?path=", epath, strempty(extra));
}

/* Stat of a path in the sandbox: 1 and the entry, 0 if there is none (or no
 * such sandbox: *ret holds the 404 answer), < 0 on other errors (printed). */
static int remote_stat(const char *id, const char *path, CliResponse *ret) {
        _cleanup_free_ char *target = files_target(id, path, "&stat=1");
        int r;

        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = cli_call_quiet_404("GET", target, NULL, ret);
        if (r == -ENOENT)
                return 0;
        return r < 0 ? r : 1;
}

static bool entry_is_dir(const JsonValue *entry) {
        const char *type = json_string(json_get(entry, "type"));
        return type && streq(type, "dir");
}

static int cp_upload(const char *src, const char *id, const char *rpath) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_free_ char *path = NULL, *target = NULL;
        _cleanup_close_ int fd = -EBADF;
        bool from_stdin = streq(src, "-");
        char mode_arg[64] = "";
        struct stat st;
        int r;

        if (from_stdin)
                fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
        else
                fd = open(src, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return cli_error_errno(negative_errno(), "%s: %m", from_stdin ? "stdin" : src);
        if (fstat(fd, &st) < 0)
                return cli_error_errno(negative_errno(), "%s: %m", src);
        if (S_ISDIR(st.st_mode))
                return cli_usage_error("'%s' is a directory: copy it with -r", src);
        /* The mode bits travel along; missing parent directories are created. */
        if (from_stdin)
                snprintf(mode_arg, sizeof mode_arg, "&parents=1");
        else
                snprintf(mode_arg, sizeof mode_arg, "&mode=0%03o&parents=1", (unsigned) (st.st_mode & 07777));

        /* Into a directory: keep the file's name. */
        if (endswith(rpath, "/")) {
                if (from_stdin)
                        return cli_error("'%s' is a directory: name the file to write stdin to", rpath);
                path = strjoin(rpath, cli_basename(src));
        } else {
                _cleanup_(cli_response_done) CliResponse st_resp = {};
                r = remote_stat(id, rpath, &st_resp);
                if (r < 0)
                        return r;
                if (r > 0 && entry_is_dir(st_resp.json)) {
                        if (from_stdin)
                                return cli_error("'%s' is a directory: name the file to write stdin to", rpath);
                        path = cli_path_join(rpath, cli_basename(src));
                } else
                        path = strdup(rpath);
        }
        if (!path)
                return cli_error_errno(-ENOMEM, "out of memory");

        target = files_target(id, path, mode_arg);
        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");

        r = cli_connect(&c);
        if (r < 0)
                return r;
        r = cli_start(c, "PUT", target, "application/octet-stream", NULL, SIZE_MAX, NULL);
        if (r < 0)
                return r;
        CliProgress progress = {};
        cli_progress_begin(&progress, cli_basename(path),
                           S_ISREG(st.st_mode) ? (uint64_t) st.st_size : CLI_PROGRESS_UNKNOWN);
        r = cli_upload_fd_progress(c, fd, src, cli_progress_callback, &progress);
        cli_progress_end(&progress);
        if (r < 0)
                return r;
        r = cli_finish_upload(c, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        return 0;
}

static mode_t entry_mode(const JsonValue *entry) {
        const JsonValue *m = json_get(entry, "mode");
        uint64_t u;

        if (json_uint64(m, &u) >= 0)
                return (mode_t) (u & 07777);
        if (json_string(m)) {
                char *end = NULL;
                unsigned long v = strtoul(json_string(m), &end, 8);
                if (end && *end == 0)
                        return (mode_t) (v & 07777);
        }
        return 0644;
}

/* A temporary file that is removed unless renamed into place. */
typedef struct TempFile {
        char *path;
        int fd;
} TempFile;

static void temp_file_done(TempFile *t) {
        t->fd = safe_close(t->fd);
        if (t->path) {
                (void) unlink(t->path);
                t->path = mfree(t->path);
        }
}

static int stream_body(HttpClient *c, int fd, const char *what, CliProgress *progress, uint64_t *ret_total) {
        _cleanup_free_ char *buf = malloc(CLI_IO_BUFFER);
        uint64_t total = 0;

        if (!buf)
                return cli_error_errno(-ENOMEM, "out of memory");
        for (;;) {
                ssize_t n = http_client_read_body(c, buf, CLI_IO_BUFFER);
                if (n < 0)
                        return cli_error_errno((int) n, "download failed: %m");
                if (n == 0)
                        break;
                int r = loop_write(fd, buf, (size_t) n);
                if (r == -EPIPE && fd == STDOUT_FILENO)
                        return r;
                if (r < 0)
                        return cli_error_errno(r, "writing %s failed: %m", what);
                total += (uint64_t) n;
                cli_progress_add(progress, (uint64_t) n);
        }
        *ret_total = total;
        return 0;
}

static int cp_download(const char *id, const char *rpath, const char *dst) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        _cleanup_(cli_response_done) CliResponse st_resp = {};
        _cleanup_(temp_file_done) TempFile tmp = { .fd = -EBADF };
        _cleanup_free_ char *target = NULL, *path = NULL, *dir = NULL;
        const HttpHead *h = NULL;
        uint64_t total = 0;
        int64_t expected;
        mode_t mode, mask;
        struct stat st;
        int r;

        r = remote_stat(id, rpath, &st_resp);
        if (r < 0)
                return r;
        if (r == 0)
                return cli_report_response(st_resp.status, st_resp.body, st_resp.body_len);
        if (entry_is_dir(st_resp.json))
                return cli_usage_error("'%s:%s' is a directory: copy it with -r", id, rpath);
        mode = entry_mode(st_resp.json);

        target = files_target(id, rpath, NULL);
        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = cli_connect(&c);
        if (r < 0)
                return r;
        r = cli_start(c, "GET", target, NULL, NULL, 0, &h);
        if (r < 0)
                return r;
        expected = h->content_length;
        _cleanup_(cli_progress_end) CliProgress progress = {};
        cli_progress_begin(&progress, cli_basename(rpath), expected >= 0 ? (uint64_t) expected : CLI_PROGRESS_UNKNOWN);

        if (streq(dst, "-")) {
                r = stream_body(c, STDOUT_FILENO, "stdout", &progress, &total);
                if (r == -EPIPE)
                        return 141;
                if (r < 0)
                        return r;
                if (expected >= 0 && total != (uint64_t) expected)
                        return cli_error("download truncated: %" PRIu64 " of %" PRId64 " bytes", total, expected);
                return 0;
        }

        if (stat(dst, &st) >= 0 && S_ISDIR(st.st_mode)) {
                const char *base = cli_basename(rpath);
                if (isempty(base) || streq(base, ".") || streq(base, ".."))
                        return cli_error("'%s': cannot name the local file", rpath);
                path = cli_path_join(dst, base);
        } else
                path = strdup(dst);
        if (!path)
                return cli_error_errno(-ENOMEM, "out of memory");

        /* The temporary file lives beside the destination so that rename() is atomic. */
        const char *slash = strrchr(path, '/');
        dir = slash ? memdup_suffix0(path, (size_t) (slash - path) + 1) : strdup("");
        tmp.path = dir ? strjoin(dir, ".", cli_basename(path), ".space-XXXXXX") : NULL;
        if (!tmp.path)
                return cli_error_errno(-ENOMEM, "out of memory");
        tmp.fd = mkostemp(tmp.path, O_CLOEXEC);
        if (tmp.fd < 0) {
                r = negative_errno();
                tmp.path = mfree(tmp.path); /* nothing was created */
                return cli_error_errno(r, "cannot create a file beside %s: %m", path);
        }

        r = stream_body(c, tmp.fd, path, &progress, &total);
        if (r < 0)
                return r;
        if (expected >= 0 && total != (uint64_t) expected)
                return cli_error("download truncated: %" PRIu64 " of %" PRId64 " bytes", total, expected);

        mask = umask(0);
        umask(mask);
        if (fchmod(tmp.fd, mode & ~mask) < 0)
                return cli_error_errno(negative_errno(), "cannot set the mode of %s: %m", path);
        r = close(TAKE_FD(tmp.fd));
        if (r < 0)
                return cli_error_errno(negative_errno(), "writing %s failed: %m", path);
        if (rename(tmp.path, path) < 0)
                return cli_error_errno(negative_errno(), "cannot rename into %s: %m", path);
        tmp.path = mfree(tmp.path); /* renamed: nothing left to remove */
        return 0;
}

/* The exec of the sandbox's tar, joined to a local fd; its exit code checked. */
static int remote_tar(const char *id, char **cmd, int in_fd, int out_fd, CliProgress *progress) {
        CliExecOptions o = {
                .cmd = cmd,
                .plain = true,
                .interactive = in_fd >= 0,
                .in_fd = in_fd,
                .out_fd = out_fd,
                .on_output = progress && out_fd >= 0 ? cli_progress_callback : NULL,
                .on_input = progress && in_fd >= 0 ? cli_progress_callback : NULL,
                .userdata = progress,
        };
        int code = 0, r;

        r = cli_exec_run(id, &o, &code);
        if (r < 0)
                return r;
        if (code != 0)
                return cli_error("tar in sandbox %s failed with exit code %d", id, code);
        return 0;
}

/* "a/b/" → "b"; "/" or "." → NULL (no name of its own). */
static char *dir_name_of(const char *p) {
        size_t n = strlen(p);
        const char *b;

        while (n > 1 && p[n - 1] == '/')
                n--;
        _cleanup_free_ char *s = memdup_suffix0(p, n);
        if (!s)
                return NULL;
        b = cli_basename(s);
        if (isempty(b) || streq(b, ".") || streq(b, ".."))
                return strdup("");
        return strdup(b);
}

static int cp_upload_dir(const char *src, const char *id, const char *rpath) {
        _cleanup_(cli_response_done) CliResponse st_resp = {};
        _cleanup_(cli_child_done) CliChild tar = { .name = "tar" };
        _cleanup_free_ char *name = dir_name_of(src), *dest = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (!name)
                return cli_error_errno(-ENOMEM, "out of memory");
        /* Like cp -r: into an existing directory under the source's name, else as DST. */
        r = remote_stat(id, rpath, &st_resp);
        if (r < 0)
                return r;
        if (r > 0 && entry_is_dir(st_resp.json) && !isempty(name))
                dest = cli_path_join(rpath, name);
        else if (r > 0 && !entry_is_dir(st_resp.json))
                return cli_fail(CLI_EXIT_CONFLICT, "conflict", -EEXIST, "'%s:%s' exists and is not a directory", id,
                                rpath);
        else
                dest = strdup(rpath);
        if (!dest)
                return cli_error_errno(-ENOMEM, "out of memory");

        char *const local[] = { (char *) "tar", (char *) "-C", (char *) src, (char *) "--numeric-owner",
                                (char *) "-cf", (char *) "-", (char *) ".", NULL };
        r = cli_child_spawn(local, false, &tar, &fd);
        if (r < 0)
                return r;
        char *remote[] = { (char *) "/bin/sh", (char *) "-c",
                           (char *) "mkdir -p -- \"$1\" && exec tar -x -o -f - -C \"$1\"", (char *) "sh", dest,
                           NULL };
        CliProgress progress = {};
        cli_progress_begin(&progress, cli_basename(dest), CLI_PROGRESS_UNKNOWN);
        r = remote_tar(id, remote, fd, -1, &progress);
        cli_progress_end(&progress);
        if (r < 0)
                return r;
        r = cli_child_wait(&tar);
        if (r < 0)
                return r;
        if (arg_json) {
                _cleanup_(json_w_done) JsonWriter w = {};
                _cleanup_free_ char *out = NULL;
                size_t n = 0;
                json_w_init(&w);
                json_w_object_begin(&w);
                json_w_kv_string(&w, "path", dest);
                json_w_object_end(&w);
                if (json_w_finish(&w, &out, &n) < 0)
                        return cli_error_errno(-ENOMEM, "out of memory");
                return cli_print_raw(out, n);
        }
        return 0;
}

static int cp_download_dir(const char *id, const char *rpath, const char *dst) {
        _cleanup_(cli_child_done) CliChild tar = { .name = "tar" };
        _cleanup_free_ char *name = dir_name_of(rpath), *dest = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        if (!name)
                return cli_error_errno(-ENOMEM, "out of memory");
        if (stat(dst, &st) >= 0) {
                if (!S_ISDIR(st.st_mode))
                        return cli_fail(CLI_EXIT_CONFLICT, "conflict", -EEXIST, "'%s' exists and is not a directory",
                                        dst);
                dest = isempty(name) ? strdup(dst) : cli_path_join(dst, name);
        } else
                dest = strdup(dst);
        if (!dest)
                return cli_error_errno(-ENOMEM, "out of memory");
        if (mkdir(dest, 0777) < 0 && errno != EEXIST)
                return cli_error_errno(negative_errno(), "cannot create %s: %m", dest);

        char *const local[] = { (char *) "tar", (char *) "-C", dest, (char *) "--no-same-owner", (char *) "-xf",
                                (char *) "-", NULL };
        r = cli_child_spawn(local, true, &tar, &fd);
        if (r < 0)
                return r;
        char *remote[] = { (char *) "tar", (char *) "-c", (char *) "-f", (char *) "-", (char *) "-C", (char *) rpath,
                           (char *) ".", NULL };
        CliProgress progress = {};
        cli_progress_begin(&progress, cli_basename(dest), CLI_PROGRESS_UNKNOWN);
        r = remote_tar(id, remote, -1, fd, &progress);
        cli_progress_end(&progress);
        fd = safe_close(fd); /* the local tar's end of input */
        if (r < 0)
                return r;
        return cli_child_wait(&tar);
}

int cli_cp(int argc, char **argv) {
        static const CliOption cp_options[] = { { "recursive", 'r', false, 1 }, {} };
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_free_ char *src_id = NULL, *dst_id = NULL;
        const char *src_path = NULL, *dst_path = NULL, *arg = NULL;
        bool recursive = false;
        int r, src_remote, dst_remote;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, cp_options, &arg)) > 0)
                recursive = true;
        r = cli_parser_end(&p, r, 2, 2);
        if (r <= 0)
                return r;

        src_remote = parse_remote(p.pos[0], &src_id, &src_path);
        if (src_remote < 0)
                return src_remote;
        dst_remote = parse_remote(p.pos[1], &dst_id, &dst_path);
        if (dst_remote < 0)
                return dst_remote;
        if (src_remote && dst_remote)
                return cli_usage_error("exactly one of SRC and DST must be ID:/path, not both");
        if (!src_remote && !dst_remote)
                return cli_usage_error("exactly one of SRC and DST must be ID:/path");

        if (recursive && dst_remote) {
                struct stat st;
                if (stat(p.pos[0], &st) < 0)
                        return cli_error_errno(negative_errno(), "%s: %m", p.pos[0]);
                if (S_ISDIR(st.st_mode))
                        return cp_upload_dir(p.pos[0], dst_id, dst_path);
        }
        if (recursive && src_remote && !streq(p.pos[1], "-")) {
                _cleanup_(cli_response_done) CliResponse st_resp = {};
                r = remote_stat(src_id, src_path, &st_resp);
                if (r < 0)
                        return r;
                if (r == 0)
                        return cli_report_response(st_resp.status, st_resp.body, st_resp.body_len);
                if (entry_is_dir(st_resp.json))
                        return cp_download_dir(src_id, src_path, p.pos[1]);
        }
        if (dst_remote)
                return cp_upload(p.pos[0], dst_id, dst_path);
        return cp_download(src_id, src_path, p.pos[1]);
}
