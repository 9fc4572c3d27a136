/* SPDX-License-Identifier: MIT */
/* A volume's files without a sandbox: read (a file's bytes or a
 * directory's entries), write and remove, at a path inside the volume. The
 * files are the tenants' (a sandbox wrote them: hostile), so every path is
 * resolved with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS |
 * RESOLVE_NO_XDEV) from the volume's root: a symlink that leads out of the
 * volume (absolute, or ".." past its root) is refused by the kernel, and the
 * last component is never followed when written or removed. Files are
 * written as 0:0 on disk, the root of any sandbox that mounts the volume. */
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alloc-util.h"
#include "base64.h"
#include "fd-util.h"
#include "json.h"
#include "pool.h"
#include "str-util.h"
#include "worker-internal.h"

#define VOLUME_FILE_MAX (512U * 1024U) /* bytes of one file through the worker's line (base64 in JSON) */
#define VOLUME_DIR_ENTRIES_MAX 2000U /* names of up to 255 bytes: the reply stays within the worker's line */
#define VOLUME_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

static int beneath(int dfd, const char *rel, int flags, mode_t mode) {
        struct open_how how = { .flags = (uint64_t) flags | O_CLOEXEC, .mode = mode, .resolve = VOLUME_RESOLVE };
        int fd = (int) syscall(SYS_openat2, dfd, rel, &how, sizeof how);

        return fd < 0 ? negative_errno() : fd;
}

/* "a/b/c" relative, without "", "." or ".." components (the API checked it as well): else -EINVAL. */
static bool rel_valid(const char *p) {
        if (isempty(p) || p[0] == '/' || strlen(p) > PATH_MAX - 1)
                return false;
        for (const char *c = p; *c; ) {
                const char *e = strchrnul(c, '/');
                size_t n = (size_t) (e - c);
                if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                c = *e ? e + 1 : e;
        }
        return true;
}

/* The volume's root, and path ("" or "." = the root itself) checked. */
static int open_root(Worker *w, const JsonValue *req, const char **ret_path, int *ret_fd, ApiError *e) {
        const char *id = json_string(json_get(req, "id")), *path = json_string(json_get(req, "path"));
        int r;

        if (!path || (!isempty(path) && !streq(path, ".") && !rel_valid(path)))
                return api_error(e, -EINVAL, API_INVALID_PATH, "bad path in the volume");
        r = pool_volume_open(w->pool, id, ret_fd);
        if (r < 0)
                return api_error(e, r, r == -ENOENT ? API_NOT_FOUND : API_INTERNAL, "cannot open the volume: %s",
                                 strerror(-r));
        *ret_path = isempty(path) ? "." : path;
        return 0;
}

static int file_error(ApiError *e, int r, const char *what) {
        ApiErrorCode c = r == -ENOENT ? API_NOT_FOUND
                       : r == -EXDEV || r == -ELOOP || r == -EINVAL || r == -ENOTDIR || r == -EISDIR || r == -ENXIO ? API_INVALID_PATH
                       : r == -EDQUOT || r == -ENOSPC ? API_INSUFFICIENT_STORAGE
                       : r == -EFBIG ? API_PAYLOAD_TOO_LARGE
                       : r == -ENOTEMPTY || r == -EEXIST ? API_CONFLICT
                                                        : API_INTERNAL;
        if (r == -EXDEV || r == -ELOOP)
                return api_error(e, r, c, "%s: the path leads out of the volume (or through a symlink it may not)", what);
        return api_error(e, r, c, "%s: %s", what, strerror(-r));
}

/* Up to max bytes of fd (more: -EFBIG). */
static int read_all(int fd, size_t max, char **ret, size_t *ret_n) {
        _cleanup_free_ char *buf = malloc(max + 1);
        size_t n = 0;

        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t k = read(fd, buf + n, max + 1 - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return negative_errno();
                if (k == 0)
                        break;
                n += (size_t) k;
                if (n > max)
                        return -EFBIG;
        }
        *ret = TAKE_PTR(buf);
        *ret_n = n;
        return 0;
}

static const char *type_of(mode_t m) {
        return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : "other";
}

static uint64_t usec_of(const struct timespec *t) {
        return (uint64_t) t->tv_sec * 1000000 + (uint64_t) t->tv_nsec / 1000;
}

/* "type", "size", "mode" (permission bits), "uid", "gid" (as a sandbox sees them) and the times in usec */
static void write_stat(JsonWriter *jw, const struct stat *st) {
        json_w_kv_string(jw, "type", type_of(st->st_mode));
        json_w_key(jw, "size");
        json_w_uint(jw, (uint64_t) st->st_size);
        json_w_key(jw, "mode");
        json_w_uint(jw, st->st_mode & 07777);
        json_w_key(jw, "uid");
        json_w_uint(jw, st->st_uid);
        json_w_key(jw, "gid");
        json_w_uint(jw, st->st_gid);
        json_w_key(jw, "atime_usec");
        json_w_uint(jw, usec_of(&st->st_atim));
        json_w_key(jw, "mtime_usec");
        json_w_uint(jw, usec_of(&st->st_mtim));
        json_w_key(jw, "ctime_usec");
        json_w_uint(jw, usec_of(&st->st_ctim));
}

/* {"op":"volume_file_read","id":ID,"path":P[,"stat":true]} → with stat: the path's stat; a file: {"ok":true,"type":"file","size":N,"data_b64":...};
 * a directory: {"ok":true,"type":"dir","entries":[{"name","type","size"}]} */
void worker_op_volume_file_read(Worker *w, const JsonValue *req, JsonWriter *jw) {
        _cleanup_close_ int root = -EBADF, fd = -EBADF;
        _cleanup_free_ char *buf = NULL, *b64 = NULL;
        const char *path = NULL;
        ApiError e = {};
        struct stat st;
        size_t n = 0, b64_len = 0;
        int r;

        if (open_root(w, req, &path, &root, &e) < 0)
                return worker_reply_error(jw, &e);
        fd = beneath(root, path, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0);
        if (fd < 0 || fstat(fd, &st) < 0) {
                (void) file_error(&e, fd < 0 ? fd : negative_errno(), path);
                return worker_reply_error(jw, &e);
        }
        json_w_object_begin(jw);
        if (json_get(req, "stat")) { /* the path itself (a symlink as such: the last component is not followed) */
                struct stat ls;
                _cleanup_close_ int pfd = beneath(root, path, O_PATH | O_NOFOLLOW, 0);
                if (pfd < 0 || fstatat(pfd, "", &ls, AT_EMPTY_PATH) < 0) {
                        json_w_done(jw);
                        json_w_init(jw);
                        (void) file_error(&e, pfd < 0 ? pfd : negative_errno(), path);
                        return worker_reply_error(jw, &e);
                }
                json_w_kv_bool(jw, "ok", true);
                write_stat(jw, &ls);
                json_w_object_end(jw);
                return;
        }
        if (S_ISDIR(st.st_mode)) {
                _cleanup_(closedirp_) DIR *d = fdopendir(fd);
                struct dirent *de;
                size_t count = 0;

                if (!d) {
                        json_w_done(jw);
                        json_w_init(jw);
                        (void) file_error(&e, negative_errno(), path);
                        return worker_reply_error(jw, &e);
                }
                fd = -EBADF; /* the DIR holds it */
                json_w_kv_bool(jw, "ok", true);
                json_w_kv_string(jw, "type", "dir");
                json_w_key(jw, "entries");
                json_w_array_begin(jw);
                while ((de = readdir(d)) && count < VOLUME_DIR_ENTRIES_MAX) {
                        struct stat es;
                        if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                                continue;
                        if (fstatat(dirfd(d), de->d_name, &es, AT_SYMLINK_NOFOLLOW) < 0)
                                continue;
                        json_w_object_begin(jw);
                        json_w_kv_string(jw, "name", de->d_name);
                        write_stat(jw, &es);
                        json_w_object_end(jw);
                        count++;
                }
                json_w_array_end(jw);
                json_w_object_end(jw);
                return;
        }
        if (!S_ISREG(st.st_mode) || st.st_size > (off_t) VOLUME_FILE_MAX) {
                json_w_done(jw);
                json_w_init(jw);
                (void) file_error(&e, S_ISREG(st.st_mode) ? -EFBIG : -EINVAL, path);
                return worker_reply_error(jw, &e);
        }
        r = read_all(fd, VOLUME_FILE_MAX, &buf, &n);
        if (r >= 0)
                r = base64_encode(buf ?: "", n, &b64, &b64_len);
        if (r < 0) {
                json_w_done(jw);
                json_w_init(jw);
                (void) file_error(&e, r, path);
                return worker_reply_error(jw, &e);
        }
        json_w_kv_bool(jw, "ok", true);
        json_w_kv_string(jw, "type", "file");
        json_w_key(jw, "size");
        json_w_uint(jw, n);
        json_w_kv_string(jw, "data_b64", b64);
        json_w_object_end(jw);
}

/* The directory that holds path's last component (made below root if missing, 0755), and that component. */
static int open_parent(int root, const char *path, bool make, const char **ret_name) {
        _cleanup_close_ int dfd = fcntl(root, F_DUPFD_CLOEXEC, 3);
        const char *c = path;

        if (dfd < 0)
                return negative_errno();
        for (;;) {
                const char *slash = strchr(c, '/');
                _cleanup_free_ char *part = NULL;
                int fd;

                if (!slash) {
                        *ret_name = c;
                        return TAKE_FD(dfd);
                }
                part = strndup(c, (size_t) (slash - c));
                if (!part)
                        return -ENOMEM;
                if (make && mkdirat(dfd, part, 0755) < 0 && errno != EEXIST)
                        return negative_errno();
                fd = beneath(dfd, part, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
                if (fd < 0)
                        return fd;
                safe_close(dfd);
                dfd = fd;
                c = slash + 1;
        }
}

/* {"op":"volume_file_write","id":ID,"path":P,"data_b64":B}: parents made, the file replaced (never through a
 * symlink); with "dir":true a directory made instead. Replies the stat of what is there now. */
void worker_op_volume_file_write(Worker *w, const JsonValue *req, JsonWriter *jw) {
        _cleanup_close_ int root = -EBADF, dfd = -EBADF, fd = -EBADF;
        _cleanup_free_ void *data = NULL;
        const JsonValue *b64 = json_get(req, "data_b64");
        const char *path = NULL, *name = NULL;
        ApiError e = {};
        size_t n = 0;
        int r;

        if (open_root(w, req, &path, &root, &e) < 0)
                return worker_reply_error(jw, &e);
        if (streq(path, ".")) {
                api_error(&e, -EISDIR, API_INVALID_PATH, "the volume's root is a directory");
                return worker_reply_error(jw, &e);
        }
        if (json_get(req, "dir")) { /* a directory instead (its parents made; one that is there is fine) */
                struct stat st;
                dfd = open_parent(root, path, true, &name);
                r = dfd;
                if (r >= 0 && mkdirat(dfd, name, 0755) < 0 && errno != EEXIST)
                        r = negative_errno();
                if (r >= 0)
                        fd = beneath(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
                if (r >= 0 && (fd < 0 || fstat(fd, &st) < 0))
                        r = fd < 0 ? fd : negative_errno();
                if (r < 0) {
                        (void) file_error(&e, r, path);
                        return worker_reply_error(jw, &e);
                }
                json_w_object_begin(jw);
                json_w_kv_bool(jw, "ok", true);
                write_stat(jw, &st);
                json_w_object_end(jw);
                return;
        }
        if (json_type(b64) != JSON_STRING || base64_decode(json_string(b64), json_string_len(b64), &data, &n) < 0 ||
            n > VOLUME_FILE_MAX) {
                api_error(&e, -EINVAL, API_BAD_REQUEST, "bad file data");
                return worker_reply_error(jw, &e);
        }
        dfd = open_parent(root, path, true, &name);
        /* O_NONBLOCK: a FIFO the sandbox left there must not stall the worker (ENXIO without a reader) */
        if (dfd >= 0)
                fd = beneath(dfd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK, 0644);
        r = dfd < 0 ? dfd : fd < 0 ? fd : 0;
        if (r >= 0) {
                struct stat st;
                if (fstat(fd, &st) < 0)
                        r = negative_errno();
                else if (!S_ISREG(st.st_mode))
                        r = -EINVAL; /* only a regular file is replaced */
                else if (ftruncate(fd, 0) < 0)
                        r = negative_errno();
        }
        if (r >= 0 && n > 0)
                r = loop_write(fd, data, n);
        if (r >= 0 && fsync(fd) < 0) /* the quota speaks at the latest here */
                r = negative_errno();
        if (r < 0) {
                (void) file_error(&e, r, path);
                return worker_reply_error(jw, &e);
        }
        {
                struct stat st;
                if (fstat(fd, &st) < 0) {
                        (void) file_error(&e, negative_errno(), path);
                        return worker_reply_error(jw, &e);
                }
                json_w_object_begin(jw);
                json_w_kv_bool(jw, "ok", true);
                write_stat(jw, &st);
                json_w_object_end(jw);
        }
}

/* {"op":"volume_file_remove","id":ID,"path":P}: a file, symlink or empty directory (never followed) */
void worker_op_volume_file_remove(Worker *w, const JsonValue *req, JsonWriter *jw) {
        _cleanup_close_ int root = -EBADF, dfd = -EBADF;
        const char *path = NULL, *name = NULL;
        ApiError e = {};
        struct stat st;
        int r;

        if (open_root(w, req, &path, &root, &e) < 0)
                return worker_reply_error(jw, &e);
        if (streq(path, ".")) {
                api_error(&e, -EBUSY, API_INVALID_PATH, "the volume's root cannot be removed (delete the volume)");
                return worker_reply_error(jw, &e);
        }
        dfd = open_parent(root, path, false, &name);
        r = dfd;
        if (r >= 0)
                r = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ? negative_errno() : 0;
        if (r >= 0 && unlinkat(dfd, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
                r = negative_errno();
        if (r < 0) {
                (void) file_error(&e, r, path);
                return worker_reply_error(jw, &e);
        }
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_object_end(jw);
}
