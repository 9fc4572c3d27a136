/* SPDX-License-Identifier: MIT */
/* Shipping templates and checkpoints between worker hosts: both ends, run by
 * the internal listener's connection threads (never by the worker process,
 * which clones sandboxes and stays single-threaded). See worker-ship.h. */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/mman.h>

#include "alloc-util.h"
#include "cluster-net.h"
#include "fd-util.h"
#include "json.h"
#include "log.h"
#include "pool.h"
#include "ship-stream.h"
#include "spawn.h"
#include "str-util.h"
#include "worker-ship.h"

#define SHIP_PARENTS_MAX 32U           /* parent candidates one request names */
#define SHIP_REPLY_LINE_MAX 4096U
#define SHIP_ERR_MAX 512U              /* bytes of btrfs' messages kept */

static void reply_errorf(int fd, const char *code, const char *fmt, ...) _printf_(3, 4);
static void reply_errorf(int fd, const char *code, const char *fmt, ...) {
        char msg[1024];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        net_reply(fd, false, code, msg, NULL);
}

static int attach_pool(const Config *c, Pool **ret) {
        char path[PATH_MAX];

        if (!isempty(c->pool_path))
                return pool_attach(c->pool_path, ret);
        if ((size_t) snprintf(path, sizeof path, "%s/pool", c->state_dir) >= sizeof path)
                return -ENAMETOOLONG;
        return pool_attach(path, ret);
}

/* What a btrfs helper printed (bounded, one line). */
static void read_messages(int fd, char *buf, size_t size) {
        ssize_t k;

        buf[0] = 0;
        if (fd < 0 || lseek(fd, 0, SEEK_SET) < 0)
                return;
        k = read(fd, buf, size - 1);
        buf[k > 0 ? k : 0] = 0;
        for (char *p = buf; *p; p++)
                if (*p == '\n' || *p == '\r')
                        *p = ' ';
        for (size_t n = strlen(buf); n > 0 && buf[n - 1] == ' '; n--)
                buf[n - 1] = 0;
}

/* {"kind":"checkpoint","sandbox":SB,"name":CK} or {"kind":"template","name":T} */
static int parse_item(const JsonValue *v, PoolShipItem *ret) {
        const char *kind = json_string(json_get(v, "kind")), *name = json_string(json_get(v, "name"));

        if (!kind || !name)
                return -EINVAL;
        if (streq(kind, "template")) {
                if (!pool_template_name_valid(name))
                        return -EINVAL;
                *ret = (PoolShipItem){ .name = name };
                return 0;
        }
        if (streq(kind, "checkpoint")) {
                const char *sb = json_string(json_get(v, "sandbox"));
                if (!sb || !pool_sandbox_id_valid(sb) ||
                    !(pool_sandbox_id_valid(name) || pool_volume_copy_name_valid(name)))
                        return -EINVAL;
                *ret = (PoolShipItem){ .sandbox_id = sb, .name = name };
                return 0;
        }
        return -EINVAL;
}

static void write_item(JsonWriter *jw, const PoolShipItem *it, const char *ident) {
        json_w_object_begin(jw);
        json_w_kv_string(jw, "kind", it->sandbox_id ? "checkpoint" : "template");
        if (it->sandbox_id)
                json_w_kv_string(jw, "sandbox", it->sandbox_id);
        json_w_kv_string(jw, "name", it->name);
        json_w_kv_string(jw, "ident", ident);
        json_w_object_end(jw);
}

/* ---- the receiving end ---- */

void worker_ship_receive(const Config *config, int fd, const JsonValue *req) {
        _cleanup_(pool_freep) Pool *pool = NULL;
        _cleanup_close_ int err_fd = -EBADF, in_r = -EBADF, in_w = -EBADF;
        _cleanup_free_ char *out = NULL, *dir = NULL;
        const JsonValue *parents = json_get(req, "parents");
        const char *ident = json_string(json_get(req, "ident")), *why = NULL;
        char sha[SHIP_SHA256_HEX], msg[SHIP_ERR_MAX];
        PoolShipItem it;
        uint64_t bytes = 0;
        JsonWriter jw;
        size_t len;
        pid_t pid = 0;
        int r, k, p[2];

        if (parse_item(req, &it) < 0 || isempty(ident) || strlen(ident) >= POOL_UUID_STRING_MAX ||
            (parents && (json_type(parents) != JSON_ARRAY || json_array_size(parents) > SHIP_PARENTS_MAX)))
                return net_reply(fd, false, "bad_request", "bad receive request", NULL);
        r = attach_pool(config, &pool);
        if (r < 0)
                return reply_errorf(fd, "not_implemented", "this worker cannot receive: %s",
                                    r == -EMEDIUMTYPE ? "its pool is not btrfs" : strerror(-r));
        r = pool_ship_has(pool, &it, ident);
        if (r > 0) { /* a ship that ended before its sender heard: nothing to do */
                json_w_init(&jw);
                json_w_object_begin(&jw);
                json_w_kv_bool(&jw, "ok", true);
                json_w_kv_bool(&jw, "complete", true);
                json_w_object_end(&jw);
                goto send_reply;
        }
        if (it.sandbox_id ? pool_checkpoint_exists(pool, it.sandbox_id, it.name)
                          : pool_template_exists(pool, it.name))
                return reply_errorf(fd, "already_exists", "this worker has another %s '%s'",
                                    it.sandbox_id ? "checkpoint" : "template", it.name);

        /* which parents we hold, so the sender can send only the difference */
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_bool(&jw, "ok", true);
        json_w_key(&jw, "have");
        json_w_array_begin(&jw);
        for (size_t i = 0; parents && i < json_array_size(parents); i++) {
                const JsonValue *x = json_array_at(parents, i);
                PoolShipItem pi;
                if (parse_item(x, &pi) >= 0 && pool_ship_has(pool, &pi, json_string(json_get(x, "ident"))) > 0)
                        json_w_int(&jw, (int64_t) i);
        }
        json_w_array_end(&jw);
        json_w_object_end(&jw);
send_reply:
        if (json_w_finish(&jw, &out, &len) < 0 || loop_write(fd, out, len) < 0 || loop_write(fd, "\n", 1) < 0)
                return;
        if (r > 0)
                return;

        err_fd = memfd_create("btrfs-receive", MFD_CLOEXEC);
        if (err_fd < 0 || pipe2(p, O_CLOEXEC) < 0)
                return reply_errorf(fd, "internal", "cannot receive: %s", strerror(errno));
        in_r = p[0];
        in_w = p[1];
        r = pool_ship_receive_start(pool, in_r, err_fd, &dir, &pid);
        if (r < 0)
                return reply_errorf(fd, "internal", "cannot start btrfs receive: %s", strerror(-r));
        in_r = safe_close(in_r);
        r = ship_stream_recv(fd, in_w, 0, sha, &bytes, &why);
        in_w = safe_close(in_w); /* the end of the stream for btrfs receive */
        k = spawn_wait(pid);
        if ((r >= 0 || r == -EPIPE) && k < 0) { /* btrfs receive refused it (EPIPE: before its end) */
                read_messages(err_fd, msg, sizeof msg);
                why = msg[0] ? msg : "btrfs receive failed";
                r = -EBADMSG;
        }
        if (r >= 0) {
                r = pool_ship_receive_commit(pool, dir, &it);
                if (r < 0)
                        why = r == -EBADMSG ? "the stream did not make the subvolume it was to" : strerror(-r);
        } else {
                k = pool_ship_receive_abort(pool, dir);
                if (k < 0)
                        log_warning_errno(k, "Failed to remove the refused receive %s: %m", dir);
        }
        if (r < 0) {
                log_warning("Refused a %s '%s%s%s' shipped to us: %s", it.sandbox_id ? "checkpoint" : "template",
                            strempty(it.sandbox_id), it.sandbox_id ? "/" : "", it.name, why ?: strerror(-r));
                return reply_errorf(fd, r == -EBADMSG ? "bad_request" : "internal", "stream refused: %s",
                                    why ?: strerror(-r));
        }
        log_info("Received %s '%s%s%s' (%" PRIu64 " bytes, sha256 %s)", it.sandbox_id ? "checkpoint" : "template",
                 strempty(it.sandbox_id), it.sandbox_id ? "/" : "", it.name, bytes, sha);
        net_reply(fd, true, NULL, NULL, NULL);
}

/* ---- the sending end ---- */

typedef struct Candidate {
        PoolShipItem it;
        char *path;
        char ident[POOL_UUID_STRING_MAX];
        int64_t otime_usec;
        char name[MAX(POOL_TEMPLATE_NAME_MAX, 2U * POOL_SANDBOX_ID_MAX + 1U) + 1U]; /* a template, <ck>, <ck>.<volume> */
} Candidate;

typedef struct SendJob {
        pid_t pid;
        int err_fd;
} SendJob;

static int send_finished(void *userdata) {
        SendJob *j = userdata;
        int r = spawn_wait(j->pid);
        j->pid = 0;
        return r < 0 ? -EIO : 0;
}

/* Appends the sandbox's items of these names (but the item itself) to c[n..max): the new n. */
static size_t add_candidates(Pool *pool, const PoolShipItem *it, char **names, Candidate *c, size_t n, size_t max) {
        for (char **i = names; i && *i && n < max; i++) {
                if (streq(*i, it->name))
                        continue;
                (void) strscpy(c[n].name, sizeof c[n].name, *i);
                c[n].it = (PoolShipItem){ .sandbox_id = it->sandbox_id, .name = c[n].name };
                if (pool_ship_ident(pool, &c[n].it, &c[n].path, c[n].ident, &c[n].otime_usec) >= 0)
                        n++;
        }
        return n;
}

/* A volume's copy with a checkpoint (<ck>.<volume>): its copies with the
 * sandbox's other checkpoints. */
static size_t list_volume_candidates(Pool *pool, const PoolShipItem *it, Candidate *c, size_t max) {
        _cleanup_strv_free_ char **names = NULL;
        const char *vol = strchr(it->name, '.') + 1;

        if (pool_volume_copy_list(pool, it->sandbox_id, vol, &names) < 0)
                return 0;
        return add_candidates(pool, it, names, c, 0, max);
}

/* A template's version (NAME@vN): the other versions of NAME here, which a
 * receiver that got them shipped holds too (a rebuild's version is mostly
 * its predecessor's blocks). */
static size_t template_version_candidates(Pool *pool, const PoolShipItem *it, Candidate *c, size_t max) {
        _cleanup_strv_free_ char **names = NULL, **versions = NULL;
        const char *at = strstr(it->name, "@v");
        size_t len;

        if (!at || max == 0 || pool_template_list(pool, &names) < 0)
                return 0;
        len = (size_t) (at - it->name) + 2;
        for (char **i = names; i && *i; i++)
                if (strncmp(*i, it->name, len) == 0 && strv_extend(&versions, *i) < 0)
                        return 0;
        /* template items, not a sandbox's */
        return add_candidates(pool, &(PoolShipItem){ .name = it->name }, versions, c, 0, max);
}

/* The item's parent candidates in this pool: the sandbox's template and its
 * other checkpoints; for a volume's copy, its other copies; for a template,
 * the template it was built from (a build's FROM: its layers are snapshots
 * of it, so only what the build changed goes). */
static size_t list_candidates(Pool *pool, const PoolShipItem *it, const char *tpl, Candidate *c, size_t max) {
        _cleanup_strv_free_ char **ids = NULL;
        size_t n = 0;

        if (it->sandbox_id && pool_volume_copy_name_valid(it->name))
                return list_volume_candidates(pool, it, c, max);
        if (!isempty(tpl) && pool_template_name_valid(tpl) && !(!it->sandbox_id && streq(tpl, it->name)) &&
            n < max) {
                (void) strscpy(c[n].name, sizeof c[n].name, tpl);
                c[n].it = (PoolShipItem){ .name = c[n].name };
                if (pool_ship_ident(pool, &c[n].it, &c[n].path, c[n].ident, &c[n].otime_usec) >= 0)
                        n++;
        }
        if (!it->sandbox_id)
                return n + template_version_candidates(pool, it, c + n, max - n);
        if (pool_checkpoint_list(pool, it->sandbox_id, &ids) < 0)
                return n;
        return add_candidates(pool, it, ids, c, n, max);
}

/* The parent to send against among those the receiver has: the newest
 * checkpoint, else the template; -1: none (a full stream). */
static int pick_parent(const Candidate *c, size_t n, const JsonValue *have) {
        int best = -1;

        for (size_t i = 0; have && i < json_array_size(have); i++) {
                int64_t x;
                if (json_int64(json_array_at(have, i), &x) < 0 || x < 0 || (uint64_t) x >= n)
                        continue;
                if (best < 0 || (c[x].it.sandbox_id && !c[best].it.sandbox_id) ||
                    (!!c[x].it.sandbox_id == !!c[best].it.sandbox_id && c[x].otime_usec > c[best].otime_usec))
                        best = (int) x;
        }
        return best;
}

static int read_reply(int peer, char *line, size_t size, JsonValue **ret, char *why, size_t why_size) {
        _cleanup_json_ JsonValue *v = NULL;
        size_t len = 0;
        bool ok = false;
        int r;

        r = net_read_line(peer, line, size, SHIP_IDLE_TIMEOUT_MSEC, &len);
        if (r < 0) {
                snprintf(why, why_size, "no answer from the receiver: %s", strerror(-r));
                return r;
        }
        if (json_parse(line, len, &v, NULL, 0) < 0 || json_bool(json_get(v, "ok"), &ok) < 0) {
                snprintf(why, why_size, "a malformed answer from the receiver");
                return -EBADMSG;
        }
        if (!ok) {
                snprintf(why, why_size, "the receiver: %s", strna(json_string(json_get(v, "message"))));
                return -EREMOTEIO;
        }
        *ret = TAKE_PTR(v);
        return 0;
}

void worker_ship_send(const Config *config, const char *token, int fd, const JsonValue *req) {
        _cleanup_(pool_freep) Pool *pool = NULL;
        _cleanup_close_ int peer = -EBADF, out_r = -EBADF, out_w = -EBADF;
        _cleanup_json_ JsonValue *ans = NULL, *done = NULL;
        _cleanup_free_ char *path = NULL, *reqline = NULL, *out = NULL;
        const char *to = json_string(json_get(req, "to")), *address = json_string(json_get(req, "address"));
        const char *tpl = json_string(json_get(req, "template"));
        char ident[POOL_UUID_STRING_MAX], sha[SHIP_SHA256_HEX] = "", line[SHIP_REPLY_LINE_MAX], why[1024] = "";
        Candidate cand[SHIP_PARENTS_MAX] = {};
        SendJob job = { .err_fd = -EBADF };
        bool complete = false;
        PoolShipItem it;
        uint64_t bytes = 0;
        size_t n_cand, len;
        JsonWriter jw;
        int r, parent = -1, p[2];

        if (parse_item(req, &it) < 0 || isempty(to) || isempty(address))
                return net_reply(fd, false, "bad_request", "bad ship request", NULL);
        if (streq(to, config->worker_name))
                return net_reply(fd, false, "bad_request", "a worker does not ship to itself", NULL);
        r = attach_pool(config, &pool);
        if (r < 0)
                return reply_errorf(fd, "not_implemented", "this worker cannot ship: %s",
                                    r == -EMEDIUMTYPE ? "its pool is not btrfs" : strerror(-r));
        r = pool_ship_ident(pool, &it, &path, ident, NULL);
        if (r < 0)
                return reply_errorf(fd, r == -ENOENT ? "not_found" : "internal", "no %s '%s' to ship here: %s",
                                    it.sandbox_id ? "checkpoint" : "template", it.name, strerror(-r));
        n_cand = list_candidates(pool, &it, tpl, cand, ELEMENTSOF(cand));

        r = net_connect_worker(address, to, WORKER_CONNECT_TIMEOUT_MSEC, &peer, why, sizeof why);
        if (r >= 0)
                r = net_hello(peer, token, to, why, sizeof why);
        if (r < 0) {
                reply_errorf(fd, "unavailable", "worker '%s' (%s) unavailable: %s", to, address,
                             why[0] ? why : strerror(-r));
                goto finish;
        }
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", "receive");
        json_w_kv_string(&jw, "kind", it.sandbox_id ? "checkpoint" : "template");
        if (it.sandbox_id)
                json_w_kv_string(&jw, "sandbox", it.sandbox_id);
        json_w_kv_string(&jw, "name", it.name);
        json_w_kv_string(&jw, "ident", ident);
        json_w_key(&jw, "parents");
        json_w_array_begin(&jw);
        for (size_t i = 0; i < n_cand; i++)
                write_item(&jw, &cand[i].it, cand[i].ident);
        json_w_array_end(&jw);
        json_w_object_end(&jw);
        r = json_w_finish(&jw, &reqline, &len);
        if (r >= 0)
                r = loop_write(peer, reqline, len);
        if (r >= 0)
                r = loop_write(peer, "\n", 1);
        if (r >= 0)
                r = read_reply(peer, line, sizeof line, &ans, why, sizeof why);
        if (r < 0) {
                reply_errorf(fd, r == -EREMOTEIO ? "conflict" : "unavailable", "cannot ship to '%s': %s", to,
                             why[0] ? why : strerror(-r));
                goto finish;
        }
        (void) json_bool(json_get(ans, "complete"), &complete);
        if (!complete) {
                parent = pick_parent(cand, n_cand, json_get(ans, "have"));
                job.err_fd = memfd_create("btrfs-send", MFD_CLOEXEC);
                if (job.err_fd < 0 || pipe2(p, O_CLOEXEC) < 0) {
                        reply_errorf(fd, "internal", "cannot ship: %s", strerror(errno));
                        goto finish;
                }
                out_r = p[0];
                out_w = p[1];
                r = pool_ship_send_start(pool, path, parent >= 0 ? cand[parent].path : NULL, out_w, job.err_fd,
                                         &job.pid);
                out_w = safe_close(out_w);
                if (r < 0) {
                        reply_errorf(fd, "internal", "cannot start btrfs send: %s", strerror(-r));
                        goto finish;
                }
                r = ship_stream_send(peer, out_r, send_finished, &job, sha, &bytes);
                if (r < 0) {
                        char msg[SHIP_ERR_MAX];
                        read_messages(job.err_fd, msg, sizeof msg);
                        reply_errorf(fd, "internal", "shipping '%s' to '%s' failed: %s", it.name, to,
                                     msg[0] ? msg : strerror(-r));
                        goto finish;
                }
                r = read_reply(peer, line, sizeof line, &done, why, sizeof why);
                if (r < 0) {
                        reply_errorf(fd, r == -EREMOTEIO ? "bad_gateway" : "unavailable", "shipping '%s' to '%s': %s",
                                     it.name, to, why);
                        goto finish;
                }
        }
        log_info("Shipped %s '%s%s%s' to %s: %s%s, %" PRIu64 " bytes", it.sandbox_id ? "checkpoint" : "template",
                 strempty(it.sandbox_id), it.sandbox_id ? "/" : "", it.name, to,
                 complete ? "it had it already" : parent >= 0 ? "incremental against " : "full",
                 !complete && parent >= 0 ? cand[parent].name : "", bytes);
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_bool(&jw, "ok", true);
        json_w_kv_string(&jw, "sha256", sha);
        json_w_key(&jw, "bytes");
        json_w_uint(&jw, bytes);
        json_w_key(&jw, "parent");
        if (parent >= 0)
                json_w_string(&jw, cand[parent].name);
        else
                json_w_null(&jw);
        json_w_kv_bool(&jw, "complete", complete);
        json_w_object_end(&jw);
        if (json_w_finish(&jw, &out, &len) >= 0 && loop_write(fd, out, len) >= 0)
                (void) loop_write(fd, "\n", 1);
finish:
        out_r = safe_close(out_r); /* a send still writing gets EPIPE and ends */
        if (job.pid > 0) {
                (void) kill(job.pid, SIGTERM);
                (void) spawn_wait(job.pid);
        }
        safe_close(job.err_fd);
        for (size_t i = 0; i < ELEMENTSOF(cand); i++)
                free(cand[i].path);
}

/* ---- a template's tar from an API server ---- */

int worker_ship_upload(const Config *config, int fd, const char *what, const char *label, char **ret_path) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int out = -EBADF;
        const char *why = NULL;
        char suffix[13], sha[SHIP_SHA256_HEX];
        uint64_t bytes = 0;
        int r;

        r = random_alnum(suffix, sizeof suffix - 1);
        if (r < 0)
                return r;
        path = strjoin(config->state_dir, "/tmp/", what, "-", label, ".", suffix, ".tar");
        if (!path)
                return -ENOMEM;
        out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (out < 0) {
                r = negative_errno();
                reply_errorf(fd, "internal", "cannot store the upload: %s", strerror(-r));
                return r;
        }
        r = ship_stream_recv(fd, out, 0, sha, &bytes, &why);
        if (r < 0) {
                (void) unlink(path);
                reply_errorf(fd, r == -EBADMSG ? "bad_request" : "unavailable", "%s upload refused: %s", what,
                             why ?: strerror(-r));
                return r;
        }
        log_info("%s %s: %" PRIu64 " bytes received (sha256 %s)", what, label, bytes, sha);
        *ret_path = TAKE_PTR(path);
        return 0;
}

int worker_ship_template_put(const Config *config, int fd, const JsonValue *req, char **ret_path) {
        const char *name = json_string(json_get(req, "name"));

        if (!name || !pool_template_name_valid(name)) {
                net_reply(fd, false, "invalid_argument", "invalid template name", NULL);
                return -EINVAL;
        }
        return worker_ship_upload(config, fd, "template", name, ret_path);
}
