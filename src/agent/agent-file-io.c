/* SPDX-License-Identifier: MIT */
/* FILE_READ (FILE_INFO, DATA..., DATA_END; paced by the connection's output
 * queue) and FILE_WRITE (DATA... DATA_END into a temporary file beside the
 * target, renamed over it at the end; append mode writes in place). */
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "agent.h"
#include "alloc-util.h"
#include "fd-util.h"
#include "proto-msg.h"
#include "str-util.h"

#define FILE_ERRBUF 512
#define TMP_SUFFIX_LEN 12
#define TMP_BASE_MAX 200

struct FileJob {
        int fd;
        /* FILE_READ */
        uint64_t offset;
        int64_t remaining; /* -1: to the end */
        /* FILE_WRITE */
        bool failed; /* an error was reported: swallow DATA until DATA_END */
        bool append;
        int dir_fd;
        char *tmp_name; /* in dir_fd; NULL in append mode */
        char *name;
        uint64_t bytes;
        mode_t mode;
        bool set_mode;
        uid_t uid; /* (uid_t) -1: leave */
        gid_t gid;
        char **metadata; /* key, value, ...: set as user.e2b.<key> before the file is committed */
};

static FileJob *file_job_new(void) {
        FileJob *j = new0(FileJob, 1);
        if (!j)
                return NULL;
        j->fd = j->dir_fd = -EBADF;
        j->uid = (uid_t) -1;
        j->gid = (gid_t) -1;
        return j;
}

/* Drops a pending upload: the temporary file is removed. */
static void file_job_abort(FileJob *j) {
        j->fd = safe_close(j->fd);
        if (j->tmp_name && j->dir_fd >= 0)
                (void) unlinkat(j->dir_fd, j->tmp_name, 0);
        j->tmp_name = mfree(j->tmp_name);
        j->dir_fd = safe_close(j->dir_fd);
}

void agent_file_job_free(FileJob *j) {
        if (!j)
                return;
        file_job_abort(j);
        free(j->name);
        strv_free(j->metadata);
        free(j);
}

void agent_file_read_request(Agent *a, Conn *c, uint32_t stream, const JsonValue *v) {
        _cleanup_(proto_file_request_done) ProtoFileRequest req = {};
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        char errbuf[FILE_ERRBUF] = "";
        struct stat st;
        JsonWriter w;
        FileJob *j;
        Stream *s;
        int r;

        if (agent_conn_stream(c, stream)) {
                agent_conn_send_error(c, stream, EBUSY, "Stream %" PRIu32 " is in use", stream);
                return;
        }
        r = proto_file_request_parse(PROTO_FILE_READ, v, &req, errbuf, sizeof errbuf);
        if (r < 0) {
                agent_conn_send_error(c, stream, r, "Bad FILE_READ request: %s", errbuf[0] ? errbuf : strerror(-r));
                return;
        }
        r = agent_path_resolve(req.path, req.user, &path);
        if (r < 0) {
                agent_conn_send_error(c, stream, r, "Bad path '%.512s': %s", req.path, strerror(-r));
                return;
        }
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0 || fstat(fd, &st) < 0) {
                r = negative_errno();
                agent_conn_send_error(c, stream, r, "Failed to open '%.512s': %s", path, strerror(-r));
                return;
        }
        if (S_ISDIR(st.st_mode)) {
                agent_conn_send_error(c, stream, EISDIR, "'%.512s' is a directory", path);
                return;
        }
        if (!S_ISREG(st.st_mode)) {
                agent_conn_send_error(c, stream, EINVAL, "'%.512s' is not a regular file", path);
                return;
        }
        j = file_job_new();
        if (!j || agent_conn_stream_add(c, stream, STREAM_FILE_READ, &s) < 0) {
                free(j);
                agent_conn_send_error(c, stream, ENOMEM, "Failed to start the read");
                return;
        }
        j->fd = TAKE_FD(fd);
        j->offset = req.offset;
        j->remaining = req.length;
        s->job = j;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_int(&w, "size", st.st_size);
        json_w_kv_int(&w, "mode", st.st_mode & 07777);
        json_w_kv_string(&w, "type", "file");
        json_w_object_end(&w);
        (void) agent_conn_send_json(c, PROTO_FILE_INFO, stream, &w);
        /* DATA follows from agent_file_pump() as the connection drains. */
}

bool agent_file_pump(Agent *a, Conn *c, Stream *s) {
        static char buf[PROTO_DATA_CHUNK];
        FileJob *j = s->job;

        while (!agent_conn_congested(c)) {
                size_t want = j->remaining < 0 ? sizeof buf : (size_t) MIN((int64_t) sizeof buf, j->remaining);
                ssize_t k;

                if (want == 0)
                        break;
                k = pread(j->fd, buf, want, (off_t) j->offset);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        int r = negative_errno();
                        agent_conn_send_error(c, s->id, r, "Failed to read: %s", strerror(-r));
                        return false;
                }
                if (k == 0)
                        break;
                (void) agent_conn_send(c, PROTO_DATA, s->id, buf, (size_t) k);
                j->offset += (uint64_t) k;
                if (j->remaining > 0)
                        j->remaining -= k;
                if (j->offset > INT64_MAX - sizeof buf)
                        break;
        }
        if (agent_conn_congested(c))
                return true;
        (void) agent_conn_send(c, PROTO_DATA_END, s->id, NULL, 0);
        return false;
}

/* Splits an absolute path into its directory and last component. */
static int split_path(const char *path, char **ret_dir, char **ret_base) {
        const char *slash = strrchr(path, '/');
        _cleanup_free_ char *dir = NULL, *base = NULL;

        if (!slash || slash[1] == 0)
                return -EISDIR; /* "/" or "dir/" names a directory */
        base = strdup(slash + 1);
        dir = slash == path ? strdup("/") : memdup_suffix0(path, (size_t) (slash - path));
        if (!base || !dir)
                return -ENOMEM;
        if (streq(base, ".") || streq(base, ".."))
                return -EISDIR;
        *ret_dir = TAKE_PTR(dir);
        *ret_base = TAKE_PTR(base);
        return 0;
}

/* Opens the target (append) or a new temporary file beside it. */
static int file_write_open(FileJob *j, const ProtoFileRequest *req, const char *path, char *errbuf, size_t errsz) {
        _cleanup_free_ char *dir = NULL, *base = NULL;
        struct stat st;
        bool exists;
        int r;

        r = split_path(path, &dir, &base);
        if (r < 0)
                return snprintf(errbuf, errsz, "'%.512s' names a directory", path), r;
        if (req->parents) {
                r = agent_mkdir_p(dir, 0755, req->have_uid ? req->uid : (uid_t) -1,
                                  req->have_gid ? req->gid : (gid_t) -1, NULL);
                if (r < 0)
                        return snprintf(errbuf, errsz, "Failed to create '%.512s': %s", dir, strerror(-r)), r;
        }
        j->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (j->dir_fd < 0) {
                r = negative_errno();
                return snprintf(errbuf, errsz, "Failed to open directory '%.512s': %s", dir, strerror(-r)), r;
        }
        exists = fstatat(j->dir_fd, base, &st, 0) >= 0;
        if (exists && S_ISDIR(st.st_mode))
                return snprintf(errbuf, errsz, "'%.512s' is a directory", path), -EISDIR;

        j->set_mode = req->have_mode || !req->append || !exists;
        j->mode = req->have_mode ? req->mode : exists ? (st.st_mode & 07777) : 0644;
        if (req->have_uid || req->have_gid) {
                j->uid = req->have_uid ? req->uid : (uid_t) -1;
                j->gid = req->have_gid ? req->gid : (gid_t) -1;
        } else if (exists && !req->append) { /* a replaced file keeps its owner */
                j->uid = st.st_uid;
                j->gid = st.st_gid;
        }
        j->append = req->append;
        j->name = TAKE_PTR(base);
        j->metadata = strv_copy(req->metadata);
        if (req->metadata && !j->metadata)
                return -ENOMEM;

        if (req->append) {
                /* O_NONBLOCK: a FIFO without a reader must not hang the agent */
                j->fd = openat(j->dir_fd, j->name, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
                               j->mode);
                if (j->fd < 0 || fstat(j->fd, &st) < 0) {
                        r = negative_errno();
                        return snprintf(errbuf, errsz, "Failed to open '%.512s': %s", path, strerror(-r)), r;
                }
                if (!S_ISREG(st.st_mode))
                        return snprintf(errbuf, errsz, "'%.512s' is not a regular file", path), -EINVAL;
                return fd_nonblock(j->fd, false);
        }
        for (unsigned attempt = 0; attempt < 16; attempt++) {
                char suffix[TMP_SUFFIX_LEN + 1];
                r = random_alnum(suffix, TMP_SUFFIX_LEN);
                if (r < 0)
                        return snprintf(errbuf, errsz, "Failed to get random bytes"), r;
                suffix[TMP_SUFFIX_LEN] = 0;
                free(j->tmp_name);
                j->tmp_name = strdup_printf(".#%.*s.%s", TMP_BASE_MAX, j->name, suffix);
                if (!j->tmp_name)
                        return -ENOMEM;
                j->fd = openat(j->dir_fd, j->tmp_name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY,
                               0600);
                if (j->fd >= 0)
                        return 0;
                if (errno != EEXIST)
                        break;
        }
        r = negative_errno();
        j->tmp_name = mfree(j->tmp_name);
        return snprintf(errbuf, errsz, "Failed to create a file in '%.512s': %s", dir, strerror(-r)), r;
}

void agent_file_write_request(Agent *a, Conn *c, uint32_t stream, const JsonValue *v) {
        _cleanup_(proto_file_request_done) ProtoFileRequest req = {};
        _cleanup_free_ char *path = NULL;
        char errbuf[FILE_ERRBUF] = "";
        FileJob *j;
        Stream *s;
        int r;

        if (agent_conn_stream(c, stream)) {
                agent_conn_send_error(c, stream, EBUSY, "Stream %" PRIu32 " is in use", stream);
                return;
        }
        j = file_job_new();
        if (!j) {
                agent_conn_send_error(c, stream, ENOMEM, "Out of memory");
                return;
        }
        r = agent_conn_stream_add(c, stream, STREAM_FILE_WRITE, &s);
        if (r < 0) {
                free(j);
                agent_conn_send_error(c, stream, r, "Failed to bind stream %" PRIu32, stream);
                return;
        }
        s->job = j;

        /* From here on a failure is reported once; the DATA that follows is dropped. */
        r = proto_file_request_parse(PROTO_FILE_WRITE, v, &req, errbuf, sizeof errbuf);
        if (r < 0) {
                agent_conn_send_error(c, stream, r, "Bad FILE_WRITE request: %s", errbuf[0] ? errbuf : strerror(-r));
                j->failed = true;
                return;
        }
        r = agent_path_resolve(req.path, req.user, &path);
        if (r >= 0)
                r = file_write_open(j, &req, path, errbuf, sizeof errbuf);
        else
                snprintf(errbuf, sizeof errbuf, "Bad path '%.512s': %s", req.path, strerror(-r));
        if (r < 0) {
                agent_conn_send_error(c, stream, r, "%s", errbuf[0] ? errbuf : strerror(-r));
                file_job_abort(j);
                j->failed = true;
        }
}

/* The file's metadata as user.e2b.<key> xattrs (a filesystem without user
 * xattrs fails the write: metadata asked for is never dropped silently). */
static int file_write_metadata(FileJob *j) {
        for (char **p = j->metadata; p && p[0] && p[1]; p += 2) {
                char name[sizeof PROTO_FILE_METADATA_XATTR_PREFIX + PROTO_FILE_METADATA_KEY_MAX];
                snprintf(name, sizeof name, PROTO_FILE_METADATA_XATTR_PREFIX "%s", p[0]);
                if (fsetxattr(j->fd, name, p[1], strlen(p[1]), 0) < 0)
                        return negative_errno();
        }
        return 0;
}

static int file_write_commit(FileJob *j) {
        int r;

        r = file_write_metadata(j);
        if (r < 0)
                return r;
        if (j->set_mode && fchmod(j->fd, j->mode) < 0)
                return negative_errno();
        if ((j->uid != (uid_t) -1 || j->gid != (gid_t) -1) && fchown(j->fd, j->uid, j->gid) < 0)
                return negative_errno();
        if (j->set_mode && (j->mode & 07000) && fchmod(j->fd, j->mode) < 0) /* chown clears setuid/setgid */
                return negative_errno();
        r = close(TAKE_FD(j->fd)); /* delayed allocation errors (ENOSPC, EDQUOT) may surface here */
        if (r < 0 && errno != EINTR)
                return negative_errno();
        if (j->tmp_name) {
                if (renameat(j->dir_fd, j->tmp_name, j->dir_fd, j->name) < 0)
                        return negative_errno();
                j->tmp_name = mfree(j->tmp_name);
        }
        return 0;
}

void agent_file_data(Agent *a, Conn *c, ProtoType type, uint32_t stream, const void *data, size_t n) {
        Stream *s = agent_conn_stream(c, stream);
        FileJob *j;
        JsonWriter w;
        int r;

        if (!s || s->kind != STREAM_FILE_WRITE) {
                agent_conn_send_error(c, stream, EBADF, "No FILE_WRITE on stream %" PRIu32, stream);
                return;
        }
        j = s->job;
        if (type == PROTO_DATA) {
                if (j->failed || n == 0)
                        return;
                r = loop_write(j->fd, data, n);
                if (r < 0) {
                        agent_conn_send_error(c, stream, r, "Failed to write '%.512s': %s", j->name, strerror(-r));
                        file_job_abort(j);
                        j->failed = true;
                        return;
                }
                j->bytes += n;
                return;
        }

        /* DATA_END */
        if (!j->failed) {
                r = file_write_commit(j);
                if (r < 0) {
                        agent_conn_send_error(c, stream, r, "Failed to write '%.512s': %s", j->name, strerror(-r));
                } else {
                        json_w_init(&w);
                        json_w_object_begin(&w);
                        json_w_kv_int(&w, "bytes", (int64_t) j->bytes);
                        json_w_object_end(&w);
                        (void) agent_conn_send_json(c, PROTO_RESULT, stream, &w);
                }
        }
        agent_file_job_free(j);
        agent_conn_stream_remove(c, stream);
}
