/* SPDX-License-Identifier: MIT */
/* FILE_WATCH: one inotify instance per watching stream. The watched directory
 * (and, if recursive, every directory below it, up to AGENT_WATCH_DIRS_MAX) gets
 * a watch; events become RESULT {"events":[{"name","op"}]} frames on the stream.
 * Nothing is queued here: while the connection is congested, events are read
 * and dropped and the next frame says "overflow":true, so memory stays bounded
 * whatever the peer does. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "agent.h"
#include "alloc-util.h"
#include "fd-util.h"
#include "log.h"
#include "proto-msg.h"
#include "str-util.h"

#define WATCH_MASK                                                                                          \
        (IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF |     \
         IN_MOVE_SELF | IN_DONT_FOLLOW | IN_ONLYDIR | IN_EXCL_UNLINK)
#define WATCH_READ_SIZE (64U * 1024U)     /* inotify bytes read per turn */
#define WATCH_COOKIES 16U                  /* renames of FILE_WRITE temporary files remembered */
#define WATCH_TMP_SUFFIX_LEN 12U           /* agent-file-io.c: ".#<name>.<12 random alnum>" */
#define WATCH_ERRBUF 512

typedef struct WatchDir {
        int wd;
        char *rel; /* "" for the watched directory itself, else "a/b" */
} WatchDir;

struct Watch {
        Source src;
        Conn *conn;
        uint32_t stream;
        bool recursive;
        bool overflow;   /* events were dropped since the last frame */
        bool incomplete; /* some directory could not be watched */
        bool stopped;
        char *root; /* the watched directory, absolute */
        WatchDir *dirs;
        size_t n_dirs, dirs_alloc;
        uint32_t cookies[WATCH_COOKIES]; /* of temporary files moved away (onto their target) */
        size_t next_cookie;
        Watch *next; /* in the list of stopped watches */
};

static unsigned n_watches;
static Watch *stopped_watches;

static void watch_free(Watch *w) {
        for (size_t i = 0; i < w->n_dirs; i++)
                free(w->dirs[i].rel);
        free(w->dirs);
        free(w->root);
        free(w);
}

void agent_watch_stop(Agent *a, Watch *w) {
        if (!w || w->stopped)
                return;
        w->stopped = true;
        agent_source_close(a, &w->src);
        n_watches--;
        w->next = stopped_watches;
        stopped_watches = w;
}

void agent_watch_collect(void) {
        while (stopped_watches) {
                Watch *w = stopped_watches;
                stopped_watches = w->next;
                watch_free(w);
        }
}

/* ".#<name>.<12 alnum>": a FILE_WRITE in progress (see agent-file-io.c). */
static bool is_tmp_name(const char *name) {
        size_t n = strlen(name);

        if (n < 2 + 1 + 1 + WATCH_TMP_SUFFIX_LEN || name[0] != '.' || name[1] != '#' ||
            name[n - WATCH_TMP_SUFFIX_LEN - 1] != '.')
                return false;
        for (size_t i = n - WATCH_TMP_SUFFIX_LEN; i < n; i++)
                if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9')))
                        return false;
        return true;
}

static WatchDir *dir_by_wd(Watch *w, int wd) {
        for (size_t i = 0; i < w->n_dirs; i++)
                if (w->dirs[i].wd == wd)
                        return &w->dirs[i];
        return NULL;
}

static void dir_remove(Watch *w, int wd) {
        WatchDir *d = dir_by_wd(w, wd);

        if (!d)
                return;
        free(d->rel);
        *d = w->dirs[--w->n_dirs];
}

/* Adds a watch on path (known to the peer as rel). An existing wd (the same
 * directory reached again) gets its name updated. */
static int dir_add(Watch *w, const char *path, const char *rel) {
        WatchDir *d;
        char *copy;
        int wd;

        if (w->n_dirs >= AGENT_WATCH_DIRS_MAX) {
                w->incomplete = true;
                return -ENOSPC;
        }
        wd = inotify_add_watch(w->src.fd, path, WATCH_MASK);
        if (wd < 0)
                return negative_errno();
        copy = strdup(rel);
        if (!copy) {
                (void) inotify_rm_watch(w->src.fd, wd);
                return -ENOMEM;
        }
        d = dir_by_wd(w, wd);
        if (d) {
                free(d->rel);
                d->rel = copy;
                return 0;
        }
        if (GREEDY_REALLOC(w->dirs, w->dirs_alloc, w->n_dirs + 1) < 0) {
                free(copy);
                (void) inotify_rm_watch(w->src.fd, wd);
                return -ENOMEM;
        }
        w->dirs[w->n_dirs++] = (WatchDir){ .wd = wd, .rel = copy };
        return 0;
}

/* Watches every directory below path (rel), depth-first, bounded. */
static void dir_add_tree(Watch *w, const char *path, const char *rel, unsigned depth) {
        _cleanup_(closedirp_) DIR *d = NULL;
        struct dirent *de;

        if (depth >= AGENT_TREE_DEPTH_MAX) {
                w->incomplete = true;
                return;
        }
        d = opendir(path);
        if (!d)
                return; /* gone meanwhile, or not readable */
        while ((de = readdir(d))) {
                char sub[PATH_MAX], subrel[PATH_MAX];
                struct stat st;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
                        continue;
                if ((size_t) snprintf(sub, sizeof sub, "%s/%s", streq(path, "/") ? "" : path, de->d_name) >=
                            sizeof sub ||
                    (size_t) snprintf(subrel, sizeof subrel, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name) >=
                            sizeof subrel) {
                        w->incomplete = true;
                        continue;
                }
                if (dir_add(w, sub, subrel) < 0) {
                        w->incomplete = true;
                        if (w->n_dirs >= AGENT_WATCH_DIRS_MAX)
                                return;
                        continue;
                }
                dir_add_tree(w, sub, subrel, depth + 1);
        }
}

void agent_watch_request(Agent *a, Conn *c, uint32_t stream, const JsonValue *v) {
        _cleanup_(proto_file_request_done) ProtoFileRequest req = {};
        _cleanup_free_ char *path = NULL;
        char errbuf[WATCH_ERRBUF] = "";
        struct stat st;
        JsonWriter jw;
        Stream *s;
        Watch *w;
        int fd, r;

        if (agent_conn_stream(c, stream)) {
                agent_conn_send_error(c, stream, EBUSY, "Stream %" PRIu32 " is in use", stream);
                return;
        }
        r = proto_file_request_parse(PROTO_FILE_WATCH, v, &req, errbuf, sizeof errbuf);
        if (r < 0) {
                agent_conn_send_error(c, stream, r, "Bad FILE_WATCH request: %s", errbuf[0] ? errbuf : strerror(-r));
                return;
        }
        r = agent_path_resolve(req.path, req.user, &path);
        if (r < 0) {
                agent_conn_send_error(c, stream, r, "Bad path '%.512s': %s", req.path, strerror(-r));
                return;
        }
        if (stat(path, &st) < 0) {
                r = negative_errno();
                agent_conn_send_error(c, stream, r, "Cannot watch '%.512s': %s", path, strerror(-r));
                return;
        }
        if (!S_ISDIR(st.st_mode)) {
                agent_conn_send_error(c, stream, ENOTDIR, "'%.512s' is not a directory", path);
                return;
        }
        if (n_watches >= AGENT_WATCHES_MAX) {
                agent_conn_send_error(c, stream, EMFILE, "Too many watches (%u)", AGENT_WATCHES_MAX);
                return;
        }

        fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        if (fd < 0) {
                r = negative_errno();
                agent_conn_send_error(c, stream, r, "Cannot watch '%.512s': %s", path, strerror(-r));
                return;
        }
        w = new0(Watch, 1);
        if (!w) {
                safe_close(fd);
                agent_conn_send_error(c, stream, ENOMEM, "Out of memory");
                return;
        }
        w->src = (Source){ .kind = SOURCE_WATCH, .obj = w, .fd = fd };
        w->conn = c;
        w->stream = stream;
        w->recursive = req.recursive;
        w->root = TAKE_PTR(path);
        r = dir_add(w, w->root, "");
        if (r >= 0 && w->recursive)
                dir_add_tree(w, w->root, "", 0);
        if (r >= 0)
                r = agent_source_set(a, &w->src, EPOLLIN);
        if (r >= 0)
                r = agent_conn_stream_add(c, stream, STREAM_WATCH, &s);
        if (r < 0) {
                agent_conn_send_error(c, stream, r, "Cannot watch '%.512s': %s", w->root, strerror(-r));
                agent_source_close(a, &w->src);
                watch_free(w);
                return;
        }
        s->watch = w;
        n_watches++;

        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "watching", w->root);
        if (w->incomplete)
                json_w_kv_bool(&jw, "incomplete", true);
        json_w_object_end(&jw);
        (void) agent_conn_send_json(c, PROTO_RESULT, stream, &jw);
        log_debug("watch on stream %" PRIu32 ": %s (%zu directories)", stream, w->root, w->n_dirs);
}

/* Collects event entries into one RESULT frame, sent when full and at the end. */
typedef struct Batch {
        Watch *w;
        JsonWriter jw;
        size_t n;
} Batch;

static void batch_flush(Batch *b) {
        Watch *w = b->w;

        if (b->n == 0 && !w->overflow && !w->incomplete)
                return;
        json_w_array_end(&b->jw);
        if (w->overflow)
                json_w_kv_bool(&b->jw, "overflow", true);
        if (w->incomplete)
                json_w_kv_bool(&b->jw, "incomplete", true);
        json_w_object_end(&b->jw);
        (void) agent_conn_send_json(w->conn, PROTO_RESULT, w->stream, &b->jw);
        w->overflow = w->incomplete = false;
        b->n = 0;
        json_w_init(&b->jw);
        json_w_object_begin(&b->jw);
        json_w_key(&b->jw, "events");
        json_w_array_begin(&b->jw);
}

static void batch_add(Batch *b, const char *rel, const char *name, const char *op) {
        char full[PATH_MAX];

        if ((size_t) snprintf(full, sizeof full, "%s%s%s", rel, rel[0] && name[0] ? "/" : "", name) >= sizeof full)
                return;
        if (b->jw.n + strlen(full) + 64 > AGENT_RESULT_MAX)
                batch_flush(b);
        json_w_object_begin(&b->jw);
        json_w_kv_string(&b->jw, "name", full);
        json_w_kv_string(&b->jw, "op", op);
        json_w_object_end(&b->jw);
        b->n++;
}

static bool cookie_take(Watch *w, uint32_t cookie) {
        for (size_t i = 0; i < WATCH_COOKIES; i++)
                if (cookie != 0 && w->cookies[i] == cookie) {
                        w->cookies[i] = 0;
                        return true;
                }
        return false;
}

/* One inotify event → zero or more entries; false once the watch ended. */
static bool watch_one(Agent *a, Batch *b, const struct inotify_event *ev) {
        Watch *w = b->w;
        const char *name = ev->len > 0 ? ev->name : "";
        WatchDir *d;
        char rel[PATH_MAX];

        if (ev->mask & IN_Q_OVERFLOW) {
                w->overflow = true;
                return true;
        }
        d = dir_by_wd(w, ev->wd);
        if (!d)
                return true; /* a watch removed meanwhile */
        if (strscpy(rel, sizeof rel, d->rel) < 0)
                return true;

        if (ev->mask & IN_IGNORED) {
                bool root = rel[0] == 0;
                dir_remove(w, ev->wd);
                if (root) {
                        /* the watched directory itself is gone: the watch ends */
                        batch_flush(b);
                        agent_conn_send_error(w->conn, w->stream, ENOENT, "The watched directory was removed");
                        agent_conn_stream_remove(w->conn, w->stream);
                        agent_watch_stop(a, w);
                        return false;
                }
                return true;
        }
        if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF))
                return true; /* reported by the parent's DELETE/MOVED_FROM; IN_IGNORED follows a delete */

        if (name[0] && is_tmp_name(name)) {
                /* a FILE_WRITE in progress: only its rename onto the target is news */
                if ((ev->mask & IN_MOVED_FROM) && ev->cookie != 0) {
                        w->cookies[w->next_cookie] = ev->cookie;
                        w->next_cookie = (w->next_cookie + 1) % WATCH_COOKIES;
                }
                return true;
        }

        /* ops in the order CREATE, RENAME, CHMOD, WRITE, REMOVE */
        if (ev->mask & IN_MOVED_TO && cookie_take(w, ev->cookie)) {
                /* what envd's write shows: it creates the file, chowns it to the user, then writes */
                batch_add(b, rel, name, "create");
                batch_add(b, rel, name, "chmod");
                batch_add(b, rel, name, "write");
                return true;
        }
        if (ev->mask & (IN_CREATE | IN_MOVED_TO)) {
                batch_add(b, rel, name, "create");
                if ((ev->mask & IN_ISDIR) && w->recursive && name[0]) {
                        /* follow the new directory, and what was made in it before the watch was there */
                        char path[PATH_MAX], sub[PATH_MAX];
                        if ((size_t) snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", name) < sizeof sub &&
                            (size_t) snprintf(path, sizeof path, "%s/%s", streq(w->root, "/") ? "" : w->root, sub) <
                                    sizeof path &&
                            dir_add(w, path, sub) >= 0)
                                dir_add_tree(w, path, sub, 1);
                        else
                                w->incomplete = true;
                }
        }
        if (ev->mask & IN_MOVED_FROM)
                batch_add(b, rel, name, "rename");
        if (ev->mask & IN_ATTRIB)
                batch_add(b, rel, name, "chmod");
        if (ev->mask & IN_MODIFY)
                batch_add(b, rel, name, "write");
        if (ev->mask & IN_DELETE)
                batch_add(b, rel, name, "remove");
        return true;
}

void agent_watch_event(Agent *a, Watch *w, uint32_t events) {
        static char buf[WATCH_READ_SIZE] __attribute__((aligned(__alignof__(struct inotify_event))));
        Batch b = { .w = w };
        ssize_t k;

        if (w->stopped || w->src.fd < 0)
                return;
        json_w_init(&b.jw);
        json_w_object_begin(&b.jw);
        json_w_key(&b.jw, "events");
        json_w_array_begin(&b.jw);

        do
                k = read(w->src.fd, buf, sizeof buf);
        while (k < 0 && errno == EINTR);
        if (k > 0 && agent_conn_congested(w->conn)) {
                /* the peer is behind: drop, and say so in the next frame */
                w->overflow = true;
                k = 0;
        }
        for (ssize_t off = 0; k > 0 && off + (ssize_t) sizeof(struct inotify_event) <= k;) {
                const struct inotify_event *ev = (const struct inotify_event *) (buf + off);
                if (off + (ssize_t) sizeof *ev + (ssize_t) ev->len > k)
                        break;
                off += (ssize_t) sizeof *ev + (ssize_t) ev->len;
                if (!watch_one(a, &b, ev)) {
                        json_w_done(&b.jw);
                        return;
                }
        }
        if (!agent_conn_congested(w->conn))
                batch_flush(&b);
        else if (b.n > 0)
                w->overflow = true; /* the peer fell behind while we sent: these are lost, say so later */
        json_w_done(&b.jw);
}
