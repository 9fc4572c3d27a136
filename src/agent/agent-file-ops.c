/* SPDX-License-Identifier: MIT */
/* FILE_LIST, FILE_STAT, FILE_MKDIR, FILE_REMOVE, FILE_RENAME: one request, one reply. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "agent-user.h"
#include "agent.h"
#include "alloc-util.h"
#include "fd-util.h"
#include "proto-msg.h"
#include "str-util.h"

#define OPS_ERRBUF 512

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

int agent_path_resolve(const char *path, const char *user, char **ret) {
        _cleanup_(agent_user_done) AgentUser u = {};
        char *p;
        int r;

        if (isempty(path))
                return -EINVAL;
        if (path[0] == '/')
                p = strdup(path);
        else {
                r = agent_user_lookup(user, false, 0, &u);
                if (r < 0)
                        return r;
                p = strjoin(u.home, streq(u.home, "/") ? "" : "/", path);
        }
        if (!p)
                return -ENOMEM;
        if (strlen(p) > PROTO_PATH_MAX) {
                free(p);
                return -ENAMETOOLONG;
        }
        *ret = p;
        return 0;
}

static int mkdir_one(const char *path, mode_t mode, uid_t uid, gid_t gid, bool *ret_created) {
        struct stat st;

        if (mkdir(path, mode) >= 0) {
                /* the umask does not apply to what was asked for */
                if (chmod(path, mode) < 0)
                        return negative_errno();
                if ((uid != (uid_t) -1 || gid != (gid_t) -1) && lchown(path, uid, gid) < 0)
                        return negative_errno();
                *ret_created = true;
                return 0;
        }
        if (errno != EEXIST)
                return negative_errno();
        if (stat(path, &st) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        *ret_created = false;
        return 0;
}

int agent_mkdir_p(const char *path, mode_t mode, uid_t uid, gid_t gid, bool *ret_created) {
        char buf[PATH_MAX];
        size_t len = strlen(path);
        bool created = false;
        int r;

        if (len == 0 || len >= sizeof buf)
                return -ENAMETOOLONG;
        memcpy(buf, path, len + 1);
        while (len > 1 && buf[len - 1] == '/')
                buf[--len] = 0;
        for (char *p = buf + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = 0;
                r = mkdir_one(buf, 0755, uid, gid, &created);
                *p = '/';
                if (r < 0)
                        return r;
        }
        r = mkdir_one(buf, mode, uid, gid, &created);
        if (r < 0)
                return r;
        if (ret_created)
                *ret_created = created;
        return 0;
}

static const char *entry_type(mode_t m) {
        return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : "other";
}

/* "metadata": the entry's user.e2b.* xattrs (E2B's file metadata), read
 * without following a symlink; nothing if it has none or they cannot be read. */
static void write_metadata(JsonWriter *w, int dfd, const char *lname) {
        char path[PATH_MAX], names[4096];
        unsigned shown = 0;
        ssize_t n;

        if (dfd == AT_FDCWD) {
                if (strlen(lname) >= sizeof path)
                        return;
                (void) strscpy(path, sizeof path, lname);
        } else if ((size_t) snprintf(path, sizeof path, "/proc/self/fd/%d/%s", dfd, lname) >= sizeof path)
                return;
        n = llistxattr(path, names, sizeof names);
        if (n <= 0)
                return;
        for (const char *k = names; k < names + n && shown < PROTO_FILE_METADATA_MAX; k += strlen(k) + 1) {
                char value[PROTO_FILE_METADATA_VALUE_MAX];
                const char *key = startswith(k, PROTO_FILE_METADATA_XATTR_PREFIX);
                ssize_t l;

                if (!key || !proto_file_metadata_key_valid(key, strlen(key)))
                        continue;
                l = lgetxattr(path, k, value, sizeof value);
                if (l < 0 || memchr(value, 0, (size_t) l))
                        continue;
                if (shown++ == 0) {
                        json_w_key(w, "metadata");
                        json_w_object_begin(w);
                }
                json_w_key(w, key);
                json_w_string_n(w, value, (size_t) l);
        }
        if (shown > 0)
                json_w_object_end(w);
}

/* One entry object; dfd/lname locate it for readlinkat. */
static void write_entry(JsonWriter *w, const char *name, const char *path, const struct stat *st, int dfd,
                        const char *lname) {
        json_w_object_begin(w);
        json_w_kv_string(w, "name", name);
        json_w_kv_string(w, "path", path);
        json_w_kv_string(w, "type", entry_type(st->st_mode));
        json_w_kv_int(w, "size", st->st_size);
        json_w_kv_int(w, "mode", st->st_mode & 07777);
        json_w_kv_int(w, "mtime_ns", (int64_t) st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec);
        json_w_kv_int(w, "uid", st->st_uid);
        json_w_kv_int(w, "gid", st->st_gid);
        if (S_ISLNK(st->st_mode)) {
                char target[PATH_MAX];
                ssize_t k = readlinkat(dfd, lname, target, sizeof target - 1);
                if (k >= 0) {
                        json_w_key(w, "target");
                        json_w_string_n(w, target, (size_t) k);
                }
        } else
                write_metadata(w, dfd, lname);
        json_w_object_end(w);
}

/* Appends the entry to an array in w if the result stays within AGENT_RESULT_MAX; false if not. */
static bool append_entry(JsonWriter *w, const char *name, const char *path, const struct stat *st, int dfd,
                         const char *lname) {
        _cleanup_free_ char *s = NULL;
        JsonWriter ew;
        size_t n = 0;

        json_w_init(&ew);
        write_entry(&ew, name, path, st, dfd, lname);
        if (json_w_finish(&ew, &s, &n) < 0 || w->n + n + 64 > AGENT_RESULT_MAX)
                return false;
        json_w_raw(w, s);
        return true;
}

typedef struct ListState {
        JsonWriter *w;
        size_t entries;
        bool truncated;
} ListState;

static int cmp_names(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Lists dfd (taken) as path, depth levels deep, sorted by name, pre-order. */
static int list_dir(ListState *ls, int dfd, const char *path, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_strv_free_ char **names = NULL;
        size_t n = 0, allocated = 0;
        struct dirent *de;

        d = fdopendir(dfd);
        if (!d) {
                safe_close(dfd);
                return negative_errno();
        }
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (ls->entries + n >= AGENT_LIST_ENTRIES_MAX) {
                        ls->truncated = true;
                        break;
                }
                if (GREEDY_REALLOC(names, allocated, n + 2) < 0)
                        return -ENOMEM;
                names[n] = strdup(de->d_name);
                if (!names[n])
                        return -ENOMEM;
                names[++n] = NULL;
        }
        if (n > 1)
                qsort(names, n, sizeof *names, cmp_names);

        for (size_t i = 0; i < n; i++) {
                char child[PATH_MAX];
                struct stat st;

                if (ls->truncated || ls->entries >= AGENT_LIST_ENTRIES_MAX) {
                        ls->truncated = true;
                        break;
                }
                if (fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue; /* gone meanwhile */
                if ((size_t) snprintf(child, sizeof child, "%s/%s", streq(path, "/") ? "" : path, names[i]) >=
                    sizeof child)
                        continue;
                if (!append_entry(ls->w, names[i], child, &st, dirfd(d), names[i])) {
                        ls->truncated = true;
                        break;
                }
                ls->entries++;
                if (S_ISDIR(st.st_mode) && depth > 1) {
                        int sub = openat(dirfd(d), names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0)
                                (void) list_dir(ls, sub, child, depth - 1);
                }
        }
        return 0;
}

static void op_list(Conn *c, uint32_t stream, const char *path, unsigned depth) {
        JsonWriter w;
        ListState ls = { .w = &w };
        int fd, r;

        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                r = negative_errno();
                agent_conn_send_error(c, stream, r, "Failed to open directory '%.512s': %s", path, strerror(-r));
                return;
        }
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "entries");
        json_w_array_begin(&w);
        r = list_dir(&ls, fd, path, depth);
        if (r < 0) {
                json_w_done(&w);
                agent_conn_send_error(c, stream, r, "Failed to list '%.512s': %s", path, strerror(-r));
                return;
        }
        json_w_array_end(&w);
        if (ls.truncated)
                json_w_kv_bool(&w, "truncated", true);
        json_w_object_end(&w);
        (void) agent_conn_send_json(c, PROTO_RESULT, stream, &w);
}

static void op_stat(Conn *c, uint32_t stream, const char *path) {
        const char *slash = strrchr(path, '/');
        const char *name = slash && slash[1] ? slash + 1 : path;
        struct stat st;
        JsonWriter w;
        int r;

        if (lstat(path, &st) < 0) {
                r = negative_errno();
                agent_conn_send_error(c, stream, r, "Failed to stat '%.512s': %s", path, strerror(-r));
                return;
        }
        json_w_init(&w);
        write_entry(&w, name, path, &st, AT_FDCWD, path);
        (void) agent_conn_send_json(c, PROTO_RESULT, stream, &w);
}

static void op_mkdir(Conn *c, uint32_t stream, const ProtoFileRequest *req, const char *path) {
        mode_t mode = req->have_mode ? req->mode : 0755;
        uid_t uid = req->have_uid ? req->uid : (uid_t) -1;
        gid_t gid = req->have_gid ? req->gid : (gid_t) -1;
        bool created = false;
        JsonWriter w;
        int r;

        if (req->parents)
                r = agent_mkdir_p(path, mode, uid, gid, &created);
        else if (mkdir(path, mode) < 0)
                r = negative_errno();
        else {
                created = true;
                r = chmod(path, mode) < 0 ? negative_errno() : 0;
                if (r >= 0 && (uid != (uid_t) -1 || gid != (gid_t) -1) && lchown(path, uid, gid) < 0)
                        r = negative_errno();
        }
        if (r < 0) {
                agent_conn_send_error(c, stream, r, "Failed to create directory '%.512s': %s", path, strerror(-r));
                return;
        }
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_bool(&w, "created", created);
        json_w_object_end(&w);
        (void) agent_conn_send_json(c, PROTO_RESULT, stream, &w);
}

/* Removes what dfd (taken) contains; never follows symlinks nor enters another
 * file system. Returns the first error but removes what it can. */
static int rm_tree(int dfd, dev_t dev, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r = 0;

        d = fdopendir(dfd);
        if (!d) {
                safe_close(dfd);
                return negative_errno();
        }
        while ((de = readdir(d))) {
                struct stat st;
                int q = 0;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno != ENOENT && r == 0)
                                r = negative_errno();
                        continue;
                }
                if (S_ISDIR(st.st_mode)) {
                        int sub;

                        if (st.st_dev != dev)
                                q = -EXDEV; /* a mount point: leave it (and what holds it) */
                        else if (depth >= AGENT_TREE_DEPTH_MAX)
                                q = -ELOOP;
                        else if ((sub = openat(dirfd(d), de->d_name,
                                               O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                                q = negative_errno();
                        else {
                                q = rm_tree(sub, dev, depth + 1);
                                if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT && q == 0)
                                        q = negative_errno();
                        }
                } else if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT)
                        q = negative_errno();
                if (q < 0 && r == 0)
                        r = q;
        }
        return r;
}

static int remove_path(const char *path, bool recursive) {
        struct stat st;
        int fd, r;

        if (lstat(path, &st) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode))
                return unlink(path) < 0 ? negative_errno() : 0;
        if (recursive) {
                fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return negative_errno();
                r = rm_tree(fd, st.st_dev, 0);
                if (r < 0)
                        return r;
        }
        return rmdir(path) < 0 ? negative_errno() : 0;
}

static bool path_is_root(const char *path) {
        for (; *path; path++)
                if (*path != '/')
                        return false;
        return true;
}

void agent_file_op_request(Agent *a, Conn *c, ProtoType type, uint32_t stream, const JsonValue *v) {
        _cleanup_(proto_file_request_done) ProtoFileRequest req = {};
        _cleanup_free_ char *path = NULL, *to = NULL;
        char errbuf[OPS_ERRBUF] = "";
        int r;

        if (agent_conn_stream(c, stream)) {
                agent_conn_send_error(c, stream, EBUSY, "Stream %" PRIu32 " is in use", stream);
                return;
        }
        r = proto_file_request_parse(type, v, &req, errbuf, sizeof errbuf);
        if (r < 0) {
                agent_conn_send_error(c, stream, r, "Bad %s request: %s", proto_type_to_string(type),
                                      errbuf[0] ? errbuf : strerror(-r));
                return;
        }
        r = agent_path_resolve(req.path, req.user, &path);
        if (r >= 0 && req.to)
                r = agent_path_resolve(req.to, req.user, &to);
        if (r < 0) {
                agent_conn_send_error(c, stream, r, "Bad path: %s", strerror(-r));
                return;
        }

        switch (type) {
        case PROTO_FILE_LIST:
                op_list(c, stream, path, req.depth);
                return;
        case PROTO_FILE_STAT:
                op_stat(c, stream, path);
                return;
        case PROTO_FILE_MKDIR:
                op_mkdir(c, stream, &req, path);
                return;
        case PROTO_FILE_REMOVE:
                if (path_is_root(path)) {
                        agent_conn_send_error(c, stream, EBUSY, "Refusing to remove the root directory");
                        return;
                }
                r = remove_path(path, req.recursive);
                if (r < 0) {
                        agent_conn_send_error(c, stream, r, "Failed to remove '%.512s': %s", path, strerror(-r));
                        return;
                }
                break;
        case PROTO_FILE_RENAME:
                if (rename(path, to) < 0) {
                        r = negative_errno();
                        agent_conn_send_error(c, stream, r, "Failed to rename '%.512s' to '%.512s': %s", path, to,
                                              strerror(-r));
                        return;
                }
                break;
        default:
                agent_conn_send_error(c, stream, EINVAL, "Not a file operation");
                return;
        }
        (void) agent_conn_send_empty_result(c, stream);
}
