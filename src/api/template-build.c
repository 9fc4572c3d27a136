/* SPDX-License-Identifier: MIT */
/* POST /v1/templates/{name}/build (admin): a Dockerfile build. The body is a
 * tar of the build context holding the Dockerfile (?dockerfile= names it;
 * ?build_args= a JSON object of ARG values; FROM a template, scratch, or an
 * image reference pulled like POST .../pull and keyed by its digest; ?network= the egress policy of
 * the RUN steps as a create's network, default none). The answer is an
 * NDJSON stream: a "step" line per instruction (with "cached" for the steps
 * that make a layer), "output" lines of each RUN, then one "result" or
 * "error" line.
 *
 * Every step that changes files (RUN, COPY, ADD, WORKDIR) is a read-only
 * layer (layers/<key>, build_layer) keyed by the sha256 of its parent's key,
 * the instruction as expanded and, for COPY and ADD, the files copied with
 * their owners (--chown names resolved in the parent layer's etc/passwd and
 * etc/group by the worker: layer_ids): an unchanged step is a cache hit, a
 * changed one rebuilds it and what follows.
 * A RUN executes in a sandbox (ns runtime, the configured default limits)
 * of a stage template (build-<random>, published from the parent layer and
 * removed at the end); its root becomes the step's layer. Only a build that
 * finishes publishes the template (build_publish): a failed or cancelled one
 * leaves the previous version in place. A client that goes away cancels the
 * build: the running sandbox is destroyed. */

#include <ctype.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <poll.h>
#include <stdio.h>
#include <sys/stat.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "dockerfile.h"
#include "fd-util.h"
#include "log.h"
#include "oci-image.h"
#include "oci-tar.h"
#include "passwd-util.h"
#include "proto.h"
#include "registry.h"
#include "sock-io.h"
#include "str-util.h"

#define BUILD_CONTEXT_ENTRIES_MAX 100000U
#define BUILD_STAGE_ATTEMPTS 8U

typedef struct CtxEntry {
        char *path; /* clean, relative */
        TarType type;
        uint32_t mode;
        uint64_t size, offset; /* of its data in the context tar */
        int64_t mtime;
        char *link;
        int fd; /* the context tar it is in */
} CtxEntry;

typedef struct Build {
        ApiRequest *r;
        char *ctx_path; /* the context tar (removed at the end) */
        int ctx_fd;
        int *ctx_fds;   /* more context tars (api_template_build_run), owned */
        size_t n_ctx_fds;
        const char *tenant_id; /* the published template's owner ("" = global) */
        unsigned force_from; /* the steps from this one on (1-based) are made again, not taken from the cache */
        ApiBuildLog log; /* set: progress goes to it, not to the response */
        void *log_data;
        CtxEntry *entries;
        size_t n_entries;
        char **ignore;
        Dockerfile df;
        char **vars;    /* ARG and ENV values for expansion ("K=V", the last wins) */
        char **env;     /* ENV only: the image's */
        char **args;    /* the ARG values in effect (for RUN's env) */
        char **labels;
        char **entrypoint, **cmd;
        char *entry_shell, *cmd_shell;
        char *workdir, *user;
        char *network;  /* the RUN sandboxes' egress policy (JSON) */
        JsonValue *build_args;
        char layer[65]; /* the last layer made */
        char stage[STORE_NAME_MAX];
        bool stage_row; /* the stage template's store row exists */
        char sandbox_id[STORE_ID_MAX];
        char worker[STORE_NAME_MAX]; /* a cluster: the worker the whole build runs on ("" = the local one) */
        char from_template[STORE_NAME_MAX]; /* FROM a template: its name (the shipped result's parent) */
        unsigned step, steps, cached, ran;
        bool gone; /* the client went away */
} Build;

static void unlink_freep(char **p) {
        if (*p) {
                (void) unlink(*p);
                free(*p);
        }
}

static void build_done(Build *b) {
        for (size_t i = 0; i < b->n_entries; i++) {
                free(b->entries[i].path);
                free(b->entries[i].link);
        }
        free(b->entries);
        safe_close(b->ctx_fd);
        for (size_t i = 0; i < b->n_ctx_fds; i++)
                safe_close(b->ctx_fds[i]);
        free(b->ctx_fds);
        if (b->ctx_path) {
                (void) unlink(b->ctx_path);
                free(b->ctx_path);
        }
        strv_free(b->ignore);
        dockerfile_done(&b->df);
        strv_free(b->vars);
        strv_free(b->env);
        strv_free(b->args);
        strv_free(b->labels);
        strv_free(b->entrypoint);
        strv_free(b->cmd);
        free(b->entry_shell);
        free(b->cmd_shell);
        free(b->workdir);
        free(b->user);
        free(b->network);
        json_free(b->build_args);
}

static void sha256_hex(const void *p, size_t n, char ret[static 65]) {
        unsigned char md[32];
        unsigned mdlen = 0;

        if (EVP_Digest(p, n, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
                memset(md, 0, sizeof md);
        hexencode(md, 32, ret);
        ret[64] = 0;
}

/* key = sha256("<parent>\n<what>\n<extra>") */
static int chain_key(const char *parent, const char *what, const char *extra, char ret[static 65]) {
        _cleanup_free_ char *s = strjoin(parent, "\n", what, "\n", strempty(extra));
        if (!s)
                return -ENOMEM;
        sha256_hex(s, strlen(s), ret);
        return 0;
}

/* ---- the context ---- */

static int ctx_index(Build *b, int *fd, ApiError *e) {
        TarStream s = tar_stream_of_fd(fd);
        char err[160] = "";
        int k;

        for (;;) {
                _cleanup_(tar_entry_done) TarEntry t = {};
                _cleanup_free_ char *clean = NULL;
                CtxEntry *grown;

                k = tar_next(&s, &t, err, sizeof err);
                if (k < 0)
                        return api_error(e, k, API_INVALID_ARGUMENT, "the context is not a valid tar: %s", err);
                if (k == 0)
                        break;
                if (oci_path_clean(t.path, &clean) < 0)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "the context holds a path outside it: '%.128s'", t.path);
                if (b->n_entries >= BUILD_CONTEXT_ENTRIES_MAX)
                        return api_error(e, -E2BIG, API_INVALID_ARGUMENT, "the context holds more than %u files",
                                         BUILD_CONTEXT_ENTRIES_MAX);
                if (t.type != TAR_FILE && t.type != TAR_DIR && t.type != TAR_SYMLINK && t.type != TAR_HARDLINK) {
                        k = tar_skip_data(&s);
                        if (k < 0)
                                return api_error(e, k, API_INVALID_ARGUMENT, "the context is not a valid tar");
                        continue; /* devices and fifos are not copied */
                }
                grown = reallocarray(b->entries, b->n_entries + 1, sizeof *grown);
                if (!grown)
                        return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                b->entries = grown;
                b->entries[b->n_entries++] = (CtxEntry){
                        .path = TAKE_PTR(clean), .type = t.type, .mode = t.mode & 07777, .size = t.size,
                        .offset = s.offset, .mtime = t.mtime, .link = t.link ? strdup(t.link) : NULL,
                        .fd = *fd,
                };
                k = tar_skip_data(&s);
                if (k < 0)
                        return api_error(e, k, API_INVALID_ARGUMENT, "the context is not a valid tar");
        }
        return 0;
}

static const CtxEntry *ctx_find(const Build *b, const char *path) {
        const CtxEntry *found = NULL;

        for (size_t i = 0; i < b->n_entries; i++)
                if (streq(b->entries[i].path, path))
                        found = &b->entries[i]; /* the last of a name wins, as in extraction */
        return found;
}

static int ctx_read_file(const Build *b, const CtxEntry *c, size_t max, char **ret, size_t *ret_len) {
        _cleanup_free_ char *buf = NULL;

        if (c->type != TAR_FILE || c->size > max)
                return -EFBIG;
        buf = malloc(c->size + 1);
        if (!buf)
                return -ENOMEM;
        (void) b;
        if (c->size > 0 && pread(c->fd, buf, c->size, (off_t) c->offset) != (ssize_t) c->size)
                return -EIO;
        buf[c->size] = 0;
        *ret = TAKE_PTR(buf);
        *ret_len = c->size;
        return 0;
}

/* ---- progress ---- */

static int emit(Build *b, JsonWriter *w) {
        if (b->log)
                return 0;
        if (b->gone)
                return -EPIPE;
        if (api_stream_line(b->r, w) < 0) {
                b->gone = true;
                return -EPIPE;
        }
        return 0;
}

static int emit_step(Build *b, const DockerfileStep *s, int cached) {
        _cleanup_(json_w_done) JsonWriter w = {};

        if (b->log) {
                _cleanup_free_ char *m = NULL;
                if (asprintf(&m, "[%u/%u] %s%s", b->step, b->steps, s->text, cached > 0 ? " (cached)" : "") < 0)
                        return -ENOMEM;
                b->log(b->log_data, "info", m);
                return 0;
        }

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "type", "step");
        json_w_kv_int(&w, "step", b->step);
        json_w_kv_int(&w, "steps", b->steps);
        json_w_kv_int(&w, "line", s->line);
        json_w_kv_string(&w, "instruction", s->text);
        if (cached >= 0)
                json_w_kv_bool(&w, "cached", cached > 0);
        json_w_object_end(&w);
        return emit(b, &w);
}

static int emit_error(Build *b, const DockerfileStep *s, const ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w = {};

        if (b->log) {
                b->log(b->log_data, "error", e->message);
                return 0;
        }

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "type", "error");
        json_w_kv_string(&w, "code", api_error_code_to_string(e->code) ?: "internal");
        json_w_kv_string(&w, "message", e->message);
        if (s) {
                json_w_kv_int(&w, "step", b->step);
                json_w_kv_int(&w, "line", s->line);
        }
        json_w_object_end(&w);
        return emit(b, &w);
}

/* ---- steps ---- */

static int var_set(char ***l, const char *name, const char *value) {
        return strv_push(l, strjoin(name, "=", value));
}

static int expand(Build *b, const DockerfileStep *s, const char *in, char **ret, ApiError *e) {
        char err[DOCKERFILE_ERR_MAX];
        int k = dockerfile_expand(in, b->vars, ret, err, sizeof err);

        if (k == -ENOMEM)
                return api_error(e, k, API_UNAVAILABLE, "out of memory");
        if (k < 0)
                return api_error(e, k, API_INVALID_ARGUMENT, "line %u: %s", s->line, err);
        return 0;
}

/* One side of --chown: root, a numeric id or a name to look up in the image (*ret_name, borrowed). */
static int chown_part(const DockerfileStep *s, const char *what, const char *v, uint64_t *ret_id,
                      const char **ret_name, ApiError *e) {
        *ret_name = NULL;
        if (streq(v, "root")) {
                *ret_id = 0;
                return 0;
        }
        if (v[0] && strspn(v, "0123456789") == strlen(v)) {
                if (safe_atou64(v, ret_id) < 0 || *ret_id > OCI_ID_MAX)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "line %u: --chown: the %s id %.32s is above %u (the ids a sandbox maps)",
                                         s->line, what, v, OCI_ID_MAX);
                return 0;
        }
        if (!passwd_name_valid(v))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "line %u: --chown: '%.64s' is not a %s name or id (a name is 1 to %u of "
                                 "[A-Za-z0-9_.-], not starting with '-')", s->line, v, what, PASSWD_NAME_MAX);
        *ret_name = v;
        return 0;
}

/* A resolved id of the image, in the range a sandbox maps. */
static int chown_id_check(const DockerfileStep *s, const char *what, const char *name, uint32_t id, ApiError *e) {
        if (id > OCI_ID_MAX)
                return api_error(e, -ERANGE, API_INVALID_ARGUMENT,
                                 "line %u: --chown: %s '%s' has id %" PRIu32 " in the image, above %u (the ids a "
                                 "sandbox maps)", s->line, what, name, id, OCI_ID_MAX);
        return 0;
}

/* "USER[:GROUP]", each root, a numeric id or a name resolved in the image as it is before the step (the
 * build's last layer, by the worker that holds it). A user without a group: a named user's primary group,
 * a numeric one's id again. */
static int parse_chown(Build *b, const DockerfileStep *s, const char *v, uint64_t *uid, uint64_t *gid,
                       ApiError *e) {
        _cleanup_free_ char *u = strdup(v);
        const char *user = NULL, *group = NULL;
        char *colon;
        int k;

        if (!u)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        colon = strchr(u, ':');
        if (colon)
                *colon++ = 0;
        k = chown_part(s, "user", u, uid, &user, e);
        if (k < 0)
                return k;
        *gid = *uid;
        if (colon) {
                k = chown_part(s, "group", colon, gid, &group, e);
                if (k < 0)
                        return k;
        }
        if (user || group) {
                ApiError we = {};
                uint32_t u_id = 0, u_gid = 0, g_id = 0;
                k = worker_layer_ids(b->r->worker, b->worker, b->layer, user, group, &u_id, &u_gid, &g_id, &we);
                if (k < 0)
                        return api_error(e, k, we.code, "line %u: --chown: %s", s->line, we.message);
                if (user) {
                        k = chown_id_check(s, "user", user, u_id, e);
                        if (k >= 0 && !colon)
                                k = chown_id_check(s, "the primary group of user", user, u_gid, e);
                        if (k < 0)
                                return k;
                        *uid = u_id;
                        if (!colon)
                                *gid = u_gid;
                }
                if (group) {
                        k = chown_id_check(s, "group", group, g_id, e);
                        if (k < 0)
                                return k;
                        *gid = g_id;
                }
        }
        return 0;
}

/* An absolute, clean path in the image from a WORKDIR or COPY destination. */
static int image_path(const Build *b, const char *in, char **ret) {
        _cleanup_free_ char *joined = NULL, *clean = NULL;

        joined = in[0] == '/' ? strdup(in) : strjoin(b->workdir ?: "/", "/", in);
        if (!joined)
                return -ENOMEM;
        /* ".." cannot leave the image's root: above it is the root again */
        if (dockerfile_context_path(joined, &clean) < 0) {
                free(clean);
                clean = strdup(".");
                if (!clean)
                        return -ENOMEM;
        }
        *ret = streq(clean, ".") ? strdup("/") : strjoin("/", clean);
        return *ret ? 0 : -ENOMEM;
}

/* ---- the tar of a COPY ---- */

static int put_octal(char *f, size_t n, uint64_t v) {
        char tmp[32];
        int l = snprintf(tmp, sizeof tmp, "%0*" PRIo64, (int) n - 1, v);
        if (l < 0 || (size_t) l >= n)
                return -E2BIG;
        memcpy(f, tmp, n);
        return 0;
}

static int tar_header(int fd, const char *name, char type, uint32_t mode, uint64_t uid, uint64_t gid, uint64_t size,
                      int64_t mtime, const char *link) {
        char h[512] = {};
        unsigned sum = 0;

        (void) strscpy(h, 100, name);
        if (put_octal(h + 100, 8, mode) < 0 || put_octal(h + 108, 8, uid) < 0 || put_octal(h + 116, 8, gid) < 0 ||
            put_octal(h + 124, 12, size) < 0 || put_octal(h + 136, 12, (uint64_t) MAX(mtime, (int64_t) 0)) < 0)
                return -E2BIG;
        memset(h + 148, ' ', 8);
        h[156] = type;
        if (link)
                (void) strscpy(h + 157, 100, link);
        memcpy(h + 257, "ustar", 6);
        memcpy(h + 263, "00", 2);
        for (size_t i = 0; i < 512; i++)
                sum += (unsigned char) h[i];
        snprintf(h + 148, 8, "%06o", sum);
        return loop_write(fd, h, 512);
}

static int tar_pad(int fd, uint64_t size) {
        static const char zero[512];
        return size % 512 ? loop_write(fd, zero, 512 - size % 512) : 0;
}

static int pax_record(char **buf, size_t *n, const char *key, const char *value) {
        size_t body = strlen(key) + strlen(value) + 3, len = body + 1;
        char *grown;

        while (len != body + (size_t) snprintf(NULL, 0, "%zu", len))
                len = body + (size_t) snprintf(NULL, 0, "%zu", len);
        grown = realloc(*buf, *n + len + 1);
        if (!grown)
                return -ENOMEM;
        *buf = grown;
        snprintf(*buf + *n, len + 1, "%zu %s=%s\n", len, key, value);
        *n += len;
        return 0;
}

static int tar_member(int fd, const char *name, char type, uint32_t mode, uint64_t uid, uint64_t gid, uint64_t size,
                      int64_t mtime, const char *link) {
        int k;

        if (strlen(name) >= 100 || (link && strlen(link) >= 100)) {
                _cleanup_free_ char *pax = NULL;
                size_t n = 0;
                if ((strlen(name) >= 100 && pax_record(&pax, &n, "path", name) < 0) ||
                    (link && strlen(link) >= 100 && pax_record(&pax, &n, "linkpath", link) < 0))
                        return -ENOMEM;
                k = tar_header(fd, "PaxHeader", 'x', 0644, 0, 0, n, 0, NULL);
                if (k >= 0)
                        k = loop_write(fd, pax, n);
                if (k >= 0)
                        k = tar_pad(fd, n);
                if (k < 0)
                        return k;
        }
        return tar_header(fd, name, type, mode, uid, gid, size, mtime, link);
}

static int copy_data(int in, int out, uint64_t offset, uint64_t size) {
        char buf[64 * 1024];

        while (size > 0) {
                size_t want = (size_t) MIN(size, (uint64_t) sizeof buf);
                ssize_t got = pread(in, buf, want, (off_t) offset);
                int k;
                if (got <= 0)
                        return got < 0 ? negative_errno() : -EIO;
                k = loop_write(out, buf, (size_t) got);
                if (k < 0)
                        return k;
                offset += (uint64_t) got;
                size -= (uint64_t) got;
        }
        return 0;
}

/* One context entry into the tar at target (relative to the image's root). */
static int copy_entry(const Build *b, int out, const CtxEntry *c, const char *target, uint64_t uid, uint64_t gid,
                      unsigned mode) {
        const CtxEntry *data = c;
        int k;

        if (c->type == TAR_HARDLINK) {
                _cleanup_free_ char *clean = NULL;
                if (!c->link || oci_path_clean(c->link, &clean) < 0 || !(data = ctx_find(b, clean)) ||
                    data->type != TAR_FILE)
                        return -EBADMSG;
        }
        switch (data->type) {
        case TAR_DIR:
                return tar_member(out, target, '5', mode ?: c->mode, uid, gid, 0, c->mtime, NULL);
        case TAR_SYMLINK:
                return tar_member(out, target, '2', 0777, uid, gid, 0, c->mtime, c->link ?: "");
        case TAR_FILE:
                k = tar_member(out, target, '0', mode ?: data->mode, uid, gid, data->size, data->mtime, NULL);
                if (k >= 0)
                        k = copy_data(data->fd, out, data->offset, data->size);
                if (k >= 0)
                        k = tar_pad(out, data->size);
                return k;
        default:
                return 0;
        }
}

static bool is_glob(const char *s) {
        return strpbrk(s, "*?[") != NULL;
}

/* Writes the files of a COPY/ADD into a new tar under <state_dir>/tmp: 1 with
 * its path, -errno (e). */
static int copy_tar(Build *b, const DockerfileStep *s, char **srcs, size_t n_srcs, const char *dest, char **ret,
                    ApiError *e) {
        const Config *c = api_config(b->r->api);
        _cleanup_(unlink_freep) char *path = strjoin(c->state_dir, "/tmp/build-copy-XXXXXX");
        _cleanup_free_ char *dst = NULL;
        _cleanup_close_ int fd = -EBADF;
        bool dest_dir = endswith(dest, "/") || n_srcs > 1;
        uint64_t uid = 0, gid = 0;
        size_t copied = 0;
        int k;

        if (!path)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        if (s->chown) {
                _cleanup_free_ char *v = NULL;
                k = expand(b, s, s->chown, &v, e);
                if (k >= 0)
                        k = parse_chown(b, s, v, &uid, &gid, e);
                if (k < 0)
                        return k;
        }
        k = image_path(b, dest, &dst);
        if (k < 0)
                return api_error(e, k, API_UNAVAILABLE, "out of memory");
        for (size_t i = 0; i < n_srcs && !dest_dir; i++) {
                const CtxEntry *x = ctx_find(b, srcs[i]);
                if (is_glob(srcs[i]) || !x || x->type == TAR_DIR)
                        dest_dir = true;
        }
        fd = mkostemp(path, O_CLOEXEC);
        if (fd < 0)
                return api_error(e, negative_errno(), API_INTERNAL, "cannot create a temporary file: %m");
        for (size_t i = 0; i < n_srcs; i++) {
                bool glob = is_glob(srcs[i]), any = false;
                for (size_t j = 0; j < b->n_entries; j++) {
                        const CtxEntry *x = &b->entries[j];
                        const char *rel = NULL, *base;
                        _cleanup_free_ char *target = NULL;

                        if (dockerignore_match(b->ignore, x->path))
                                continue;
                        if (streq(srcs[i], ".")) {
                                if (streq(x->path, "."))
                                        continue;
                                rel = x->path;
                        } else if (glob ? fnmatch(srcs[i], x->path, FNM_PATHNAME) == 0 : streq(x->path, srcs[i])) {
                                base = strrchr(x->path, '/');
                                base = base ? base + 1 : x->path;
                                if (x->type == TAR_DIR) {
                                        any = true;
                                        continue; /* a directory's contents are copied, not itself */
                                }
                                rel = dest_dir ? base : NULL;
                        } else {
                                const char *under = NULL;
                                if (glob) {
                                        /* under a directory the glob matches */
                                        _cleanup_free_ char *dir = strdup(x->path);
                                        for (char *slash; dir && (slash = strrchr(dir, '/'));) {
                                                *slash = 0;
                                                if (fnmatch(srcs[i], dir, FNM_PATHNAME) == 0) {
                                                        under = x->path + strlen(dir) + 1;
                                                        break;
                                                }
                                        }
                                } else
                                        under = startswith(x->path, srcs[i]);
                                if (!under || (!glob && under[0] != '/'))
                                        continue;
                                rel = glob ? under : under + 1;
                        }
                        any = true;
                        target = rel ? strjoin(dst[1] ? dst + 1 : "", dst[1] ? "/" : "", rel)
                                     : strdup(dst[1] ? dst + 1 : ".");
                        if (!target)
                                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                        k = copy_entry(b, fd, x, target, uid, gid, s->mode);
                        if (k == -EBADMSG)
                                return api_error(e, k, API_INVALID_ARGUMENT,
                                                 "line %u: '%.128s' is a hard link to a file not in the context",
                                                 s->line, x->path);
                        if (k < 0)
                                return api_error(e, k, k == -ENOSPC ? API_INSUFFICIENT_STORAGE : API_INTERNAL,
                                                 "writing the copied files failed: %s", strerror(-k));
                        copied++;
                }
                if (!any)
                        return api_error(e, -ENOENT, API_INVALID_ARGUMENT,
                                         "line %u: %s source '%.128s' is not in the context%s", s->line,
                                         dockerfile_kind_to_string(s->kind), srcs[i],
                                         ctx_find(b, srcs[i]) ? " (it is in .dockerignore)" : "");
        }
        {
                static const char end[1024];
                k = loop_write(fd, end, sizeof end);
                if (k < 0)
                        return api_error(e, k, API_INTERNAL, "writing the copied files failed: %s", strerror(-k));
        }
        *ret = TAKE_PTR(path);
        return 0;
}

static int file_sha256(const char *path, char ret[static 65]) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        EVP_MD_CTX *ctx;
        unsigned char md[32], buf[64 * 1024];
        unsigned mdlen = 0;
        ssize_t n;

        if (fd < 0)
                return negative_errno();
        ctx = EVP_MD_CTX_new();
        if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
                EVP_MD_CTX_free(ctx);
                return -ENOMEM;
        }
        while ((n = read(fd, buf, sizeof buf)) > 0)
                EVP_DigestUpdate(ctx, buf, (size_t) n);
        EVP_DigestFinal_ex(ctx, md, &mdlen);
        EVP_MD_CTX_free(ctx);
        if (n < 0)
                return negative_errno();
        hexencode(md, 32, ret);
        ret[64] = 0;
        return 0;
}

/* ---- RUN in a sandbox ---- */

static int stage_publish(Build *b, ApiError *e) {
        uint64_t size = 0;
        int k;

        if (!b->stage_row) {
                for (unsigned i = 0; i < BUILD_STAGE_ATTEMPTS; i++) {
                        char suffix[13];
                        Template t = { .state = TEMPLATE_IMPORTING, .created_usec = now_usec() };
                        k = random_alnum(suffix, 12);
                        if (k < 0)
                                return api_error(e, k, API_INTERNAL, "no randomness");
                        suffix[12] = 0;
                        for (char *p = suffix; *p; p++)
                                *p = (char) tolower((unsigned char) *p);
                        snprintf(b->stage, sizeof b->stage, "build-%s", suffix);
                        (void) strscpy(t.name, sizeof t.name, b->stage);
                        k = store_template_insert(b->r->store, &t);
                        if (k != -EEXIST)
                                break;
                }
                if (k < 0)
                        return api_store_error(e, k, "recording the build's stage template");
                b->stage_row = true;
        }
        k = worker_build_publish(b->r->worker, b->worker, b->layer, b->stage, &size, e);
        if (k < 0)
                return k;
        k = store_template_set_ready(b->r->store, b->stage, size);
        return k < 0 ? api_store_error(e, k, "marking the stage template ready") : 0;
}

static void sandbox_drop(Build *b) {
        ApiError ignored = {};

        if (!b->sandbox_id[0])
                return;
        if (api_sandbox_destroy(b->r, b->sandbox_id, "the build step ended", &ignored) < 0)
                log_warning("Destroying build sandbox %s failed: %s", b->sandbox_id, ignored.message);
        b->sandbox_id[0] = 0;
}

static void stage_drop(Build *b) {
        ApiError ignored = {};
        int k;

        sandbox_drop(b);
        if (!b->stage_row)
                return;
        k = store_template_delete(b->r->store, b->stage);
        if (k < 0 && k != -ENOENT)
                log_warning_errno(k, "Dropping the build's stage template %s failed: %m", b->stage);
        if (worker_template_remove(b->r->worker, b->stage, &ignored) < 0)
                log_warning("Removing the build's stage template %s failed: %s", b->stage, ignored.message);
        b->stage_row = false;
}

static int sandbox_make(Build *b, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_free_ char *text = NULL, *start = NULL;
        _cleanup_json_ JsonValue *body = NULL;
        Sandbox sb = {};
        int k;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "template", b->stage);
        json_w_kv_string(&w, "runtime", "ns");
        if (b->network) {
                json_w_key(&w, "network");
                json_w_raw(&w, b->network);
        }
        json_w_object_end(&w);
        if (json_w_finish(&w, &text, NULL) < 0 || json_parse(text, strlen(text), &body, NULL, 0) < 0)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        k = api_validate_sandbox_create(body, api_config(b->r->api), &sb, e);
        /* on the build's worker, which holds its stage template */
        if (k >= 0 && strscpy(sb.worker, sizeof sb.worker, b->worker) < 0)
                k = api_error(e, -ENAMETOOLONG, API_INTERNAL, "bad worker name");
        if (k >= 0)
                k = api_sandbox_create_with(b->r, &sb, NULL, 0, NULL, NULL, e);
        if (k >= 0)
                (void) strscpy(b->sandbox_id, sizeof b->sandbox_id, sb.id);
        sandbox_done(&sb);
        return k;
}

static int exec_body(Build *b, const DockerfileStep *s, JsonValue **ret) {
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_free_ char *text = NULL;

        json_w_init(&w);
        json_w_object_begin(&w);
        if (s->json) {
                json_w_key(&w, "cmd");
                json_w_array_begin(&w);
                for (char **a = s->args; *a; a++)
                        json_w_string(&w, *a);
                json_w_array_end(&w);
        } else
                json_w_kv_string(&w, "shell", s->shell);
        json_w_key(&w, "env");
        json_w_object_begin(&w);
        {
                /* ARG values then ENV values: a later value of a name wins, ENV over ARG */
                _cleanup_strv_free_ char **all = strv_copy(b->args);
                for (char **v = b->env; v && *v; v++)
                        if (strv_extend(&all, *v) < 0)
                                return -ENOMEM;
                for (char **v = all; v && *v; v++) {
                        size_t n = strcspn(*v, "=");
                        bool last = true;
                        for (char **u = v + 1; *u; u++)
                                if (strncmp(*u, *v, n + 1) == 0)
                                        last = false;
                        if (last) {
                                _cleanup_free_ char *name = strndup(*v, n);
                                if (!name)
                                        return -ENOMEM;
                                json_w_kv_string(&w, name, *v + n + 1);
                        }
                }
        }
        json_w_object_end(&w);
        if (b->workdir)
                json_w_kv_string(&w, "cwd", b->workdir);
        if (s->user || b->user)
                json_w_kv_string(&w, "user", s->user ?: b->user);
        json_w_kv_string(&w, "on_disconnect", "kill");
        json_w_object_end(&w);
        if (json_w_finish(&w, &text, NULL) < 0)
                return -ENOMEM;
        return json_parse(text, strlen(text), ret, NULL, 0);
}

/* Relays the RUN's output until it exits: 0 on exit 0, -errno (e). */
static int run_relay(Build *b, const DockerfileStep *s, int fd, ApiError *e) {
        int cfd = http_conn_fd(b->r->conn);

        for (;;) {
                /* a build answered already (b->log) runs on after its client went: only spaced shutting the
                 * connection down (POLLHUP) cancels it */
                struct pollfd p[2] = { { .fd = fd, .events = POLLIN },
                                       { .fd = cfd, .events = b->log ? 0 : POLLRDHUP } };
                _cleanup_(proto_frame_done) ProtoFrame f = {};
                int k = poll(p, 2, -1);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return api_error(e, -errno, API_INTERNAL, "poll failed: %m");
                if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
                        b->gone = true;
                        return api_error(e, -ECANCELED, API_CONFLICT, "the client went away: the build is cancelled");
                }
                if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
                        continue;
                k = proto_recv(fd, &f);
                if (k < 0)
                        return api_error(e, k, API_BAD_GATEWAY, "line %u: the agent lost the RUN command", s->line);
                if (f.stream != AGENT_STREAM)
                        continue;
                if ((f.type == PROTO_STDOUT || f.type == PROTO_STDERR) && b->log) {
                        _cleanup_free_ char *m = utf8_valid(f.payload, f.len) ? strndup(f.payload, f.len)
                                                                               : strdup("(binary output)");
                        if (m)
                                b->log(b->log_data, f.type == PROTO_STDOUT ? "info" : "warn", m);
                } else if (f.type == PROTO_STDOUT || f.type == PROTO_STDERR) {
                        _cleanup_(json_w_done) JsonWriter w;
                        json_w_init(&w);
                        json_w_object_begin(&w);
                        json_w_kv_string(&w, "type", "output");
                        json_w_kv_int(&w, "step", b->step);
                        json_w_kv_string(&w, "stream", f.type == PROTO_STDOUT ? "stdout" : "stderr");
                        if (utf8_valid(f.payload, f.len)) {
                                json_w_key(&w, "data");
                                json_w_string_n(&w, f.payload, f.len);
                        } else
                                json_w_kv_string(&w, "data", "(binary output)");
                        json_w_object_end(&w);
                        if (emit(b, &w) < 0)
                                return api_error(e, -ECANCELED, API_CONFLICT,
                                                 "the client went away: the build is cancelled");
                } else if (f.type == PROTO_EXIT) {
                        _cleanup_json_ JsonValue *v = NULL;
                        int64_t code = -1;
                        const char *sig = NULL;
                        if (agent_call_parse(&f, &v, NULL) >= 0) {
                                (void) json_int64(json_get(v, "code"), &code);
                                sig = json_string(json_get(v, "signal"));
                        }
                        if (!isempty(sig))
                                return api_error(e, -ECHILD, API_INVALID_ARGUMENT,
                                                 "line %u: RUN was killed (%.32s)%s", s->line, sig,
                                                 json_get(v, "oom") ? " (out of memory)" : "");
                        if (code != 0)
                                return api_error(e, -ECHILD, API_INVALID_ARGUMENT,
                                                 "line %u: RUN exited with code %" PRId64, s->line, code);
                        return 0;
                } else if (f.type == PROTO_ERROR)
                        return agent_call_error(&f, "RUN", e);
        }
}

static int step_run(Build *b, const DockerfileStep *s, const char *key, ApiError *e) {
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_close_ int fd = -EBADF;
        char exec_id[API_EXEC_ID_MAX + 1];
        Sandbox sb = {};
        int64_t pid = 0;
        int k;

        k = stage_publish(b, e);
        if (k >= 0)
                k = sandbox_make(b, e);
        if (k < 0)
                return k;
        if (exec_body(b, s, &body) < 0)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        k = api_sandbox_lookup(b->r, b->sandbox_id, true, &sb, e);
        if (k >= 0)
                k = api_exec_launch(b->r, &sb, body, &fd, exec_id, &pid, e);
        sandbox_done(&sb);
        if (k >= 0)
                k = run_relay(b, s, fd, e);
        fd = safe_close(fd);
        if (k >= 0)
                k = worker_build_layer(b->r->worker, b->worker, key, "sandbox", b->sandbox_id, NULL, NULL, NULL, e);
        sandbox_drop(b);
        return k;
}

/* ---- the instructions ---- */

static int strv_from_json_form(const DockerfileStep *s, char ***ret_argv, char **ret_shell) {
        strv_free(*ret_argv);
        free(*ret_shell);
        *ret_argv = NULL;
        *ret_shell = NULL;
        if (s->json) {
                *ret_argv = strv_copy(s->args);
                if (!*ret_argv)
                        *ret_argv = new0(char *, 1);
                return *ret_argv ? 0 : -ENOMEM;
        }
        *ret_shell = strdup(s->shell);
        return *ret_shell ? 0 : -ENOMEM;
}

static void write_argv(JsonWriter *w, const char *key, char **argv, const char *shell) {
        json_w_key(w, key);
        json_w_array_begin(w);
        if (shell) {
                json_w_string(w, "/bin/sh");
                json_w_string(w, "-c");
                json_w_string(w, shell);
        } else
                for (char **a = argv; a && *a; a++)
                        json_w_string(w, *a);
        json_w_array_end(w);
}

static int defaults_json(Build *b, char **ret) {
        _cleanup_(json_w_done) JsonWriter w;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "env");
        json_w_array_begin(&w);
        for (char **v = b->env; v && *v; v++) {
                size_t n = strcspn(*v, "=");
                bool last = true;
                for (char **u = v + 1; *u; u++)
                        if (strncmp(*u, *v, n + 1) == 0)
                                last = false;
                if (last)
                        json_w_string(&w, *v);
        }
        json_w_array_end(&w);
        if (b->workdir)
                json_w_kv_string(&w, "cwd", b->workdir);
        if (b->user)
                json_w_kv_string(&w, "user", b->user);
        if (b->entrypoint || b->entry_shell)
                write_argv(&w, "entrypoint", b->entrypoint, b->entry_shell);
        if (b->cmd || b->cmd_shell)
                write_argv(&w, "cmd", b->cmd, b->cmd_shell);
        json_w_object_end(&w);
        return json_w_finish(&w, ret, NULL);
}

/* One instruction after FROM: 0, -errno (e). key is the chain so far, updated. */
static int step_one(Build *b, const DockerfileStep *s, char key[static 65], ApiError *e) {
        _cleanup_free_ char *canon = NULL, *dir = NULL;
        _cleanup_(unlink_freep) char *tar = NULL;
        bool layer = false, cached[1] = { false };
        char next[65], keys[1][65];
        int k = 0;

        switch (s->kind) {
        case DOCKERFILE_ENV:
        case DOCKERFILE_ARG:
        case DOCKERFILE_LABEL: {
                _cleanup_strv_free_ char **out = NULL;
                for (char **kv = s->kv; kv && *kv; kv++) {
                        _cleanup_free_ char *name = strndup(*kv, strcspn(*kv, "=")), *value = NULL;
                        const char *eq = strchr(*kv, '=');
                        if (!name)
                                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                        if (s->kind == DOCKERFILE_ARG) {
                                const char *given = json_string(json_get(b->build_args, name));
                                if (given)
                                        value = strdup(given);
                                else if (eq)
                                        k = expand(b, s, eq + 1, &value, e);
                                else
                                        continue; /* declared without a value: unset */
                        } else
                                k = expand(b, s, eq + 1, &value, e);
                        if (!value)
                                return k < 0 ? k : api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                        if (var_set(s->kind == DOCKERFILE_ENV ? &b->env : s->kind == DOCKERFILE_ARG ? &b->args
                                                                                                  : &b->labels,
                                    name, value) < 0 ||
                            (s->kind != DOCKERFILE_LABEL && var_set(&b->vars, name, value) < 0) ||
                            var_set(&out, name, value) < 0)
                                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                }
                canon = strjoin(dockerfile_kind_to_string(s->kind), " ");
                for (char **o = out; canon && o && *o; o++) {
                        char *c = strjoin(canon, *o, "\x1f");
                        free(canon);
                        canon = c;
                }
                break;
        }
        case DOCKERFILE_USER: {
                _cleanup_free_ char *v = NULL;
                k = expand(b, s, s->args[0], &v, e);
                if (k < 0)
                        return k;
                free(b->user);
                b->user = TAKE_PTR(v);
                canon = strjoin("USER ", b->user);
                break;
        }
        case DOCKERFILE_WORKDIR: {
                _cleanup_free_ char *v = NULL, *p = NULL;
                k = expand(b, s, s->args[0], &v, e);
                if (k < 0)
                        return k;
                if (image_path(b, v, &p) < 0)
                        return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                free(b->workdir);
                b->workdir = TAKE_PTR(p);
                canon = strjoin("WORKDIR ", b->workdir);
                if (!streq(b->workdir, "/")) {
                        dir = strdup(b->workdir + 1);
                        layer = true;
                }
                break;
        }
        case DOCKERFILE_ENTRYPOINT:
        case DOCKERFILE_CMD:
                k = s->kind == DOCKERFILE_CMD ? strv_from_json_form(s, &b->cmd, &b->cmd_shell)
                                              : strv_from_json_form(s, &b->entrypoint, &b->entry_shell);
                if (k < 0)
                        return api_error(e, k, API_UNAVAILABLE, "out of memory");
                canon = strdup(s->text);
                break;
        case DOCKERFILE_RUN: {
                _cleanup_free_ char *body = NULL;
                _cleanup_json_ JsonValue *v = NULL;
                if (exec_body(b, s, &v) < 0 || json_serialize(v, &body, NULL) < 0)
                        return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                canon = strjoin("RUN ", body, "\x1f", strempty(b->network));
                layer = true;
                break;
        }
        case DOCKERFILE_COPY:
        case DOCKERFILE_ADD: {
                _cleanup_strv_free_ char **srcs = NULL;
                _cleanup_free_ char *dest = NULL;
                size_t n = strv_length(s->args);
                char sum[65];
                for (size_t i = 0; i + 1 < n; i++) {
                        _cleanup_free_ char *v = NULL, *clean = NULL;
                        k = expand(b, s, s->args[i], &v, e);
                        if (k < 0)
                                return k;
                        if (dockerfile_context_path(v, &clean) < 0)
                                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                                 "line %u: %s source '%.128s' is outside the build context", s->line,
                                                 dockerfile_kind_to_string(s->kind), v);
                        if (strv_push(&srcs, TAKE_PTR(clean)) < 0)
                                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                }
                k = expand(b, s, s->args[n - 1], &dest, e);
                if (k < 0)
                        return k;
                k = copy_tar(b, s, srcs, n - 1, dest, &tar, e);
                if (k < 0)
                        return k;
                k = file_sha256(tar, sum);
                if (k < 0)
                        return api_error(e, k, API_INTERNAL, "reading the copied files failed: %s", strerror(-k));
                canon = strjoin("COPY ", sum);
                layer = true;
                break;
        }
        default:
                return api_error(e, -EINVAL, API_INTERNAL, "line %u: unexpected instruction", s->line);
        }
        if (!canon)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        if (chain_key(key, canon, NULL, next) < 0)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        memcpy(key, next, 65);
        if (!layer) {
                if (tar)
                        (void) unlink(tar);
                return emit_step(b, s, -1) < 0 ? api_error(e, -ECANCELED, API_CONFLICT, "the client went away") : 0;
        }
        memcpy(keys[0], key, 65);
        k = worker_layers_cached(b->r->worker, b->worker, keys, 1, cached, e);
        if (b->force_from > 0 && b->step >= b->force_from)
                cached[0] = false;
        if (k < 0) {
                if (tar)
                        (void) unlink(tar);
                return k;
        }
        if (emit_step(b, s, cached[0]) < 0) {
                if (tar)
                        (void) unlink(tar);
                return api_error(e, -ECANCELED, API_CONFLICT, "the client went away");
        }
        if (cached[0])
                b->cached++;
        else {
                b->ran++;
                if (s->kind == DOCKERFILE_RUN)
                        k = step_run(b, s, key, e);
                else
                        k = worker_build_layer(b->r->worker, b->worker, key, "layer", b->layer, tar, dir, NULL, e);
        }
        if (tar)
                (void) unlink(tar);
        if (k < 0)
                return k;
        memcpy(b->layer, key, 65);
        return 0;
}

/* ---- the request ---- */

static int parse_query(ApiRequest *r, Build *b, char **ret_dockerfile, ApiError *e) {
        _cleanup_free_ char *args = NULL, *net = NULL;
        _cleanup_json_ JsonValue *v = NULL;
        int k;

        k = api_query_string(r, "dockerfile", ret_dockerfile, e);
        if (k < 0)
                return k;
        if (k == 0 && !(*ret_dockerfile = strdup("Dockerfile")))
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        k = api_query_string(r, "build_args", &args, e);
        if (k < 0)
                return k;
        if (k > 0) {
                if (json_parse(args, strlen(args), &b->build_args, NULL, 0) < 0 ||
                    json_type(b->build_args) != JSON_OBJECT)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "query parameter 'build_args' must be a JSON object of strings");
                for (size_t i = 0; i < json_object_size(b->build_args); i++)
                        if (!json_string(json_object_value(b->build_args, i)))
                                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                                 "build argument '%.64s' must be a string",
                                                 json_object_key(b->build_args, i));
        }
        k = api_query_string(r, "network", &net, e);
        if (k < 0)
                return k;
        if (k > 0) {
                if (json_parse(net, strlen(net), &v, NULL, 0) < 0 || json_type(v) != JSON_OBJECT)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "query parameter 'network' must be a JSON object (a create's network)");
                k = api_validate_network(v, api_config(r->api), &b->network, e);
                if (k < 0)
                        return k;
        }
        return 0;
}

/* FROM an image reference: pulled (its known layers skipped) and imported as a
 * stage template, the base layer made from it, the stage removed; keyed by
 * the manifest's digest. */
static int build_from_image(Build *b, const DockerfileStep *s, const RegistryRef *ref, char key[static 65],
                            ApiError *e) {
        const Config *c = api_config(b->r->api);
        RegistryOptions o;
        _cleanup_(unlink_freep) char *path = NULL;
        _cleanup_free_ char *tmpdir = strjoin(c->state_dir, "/tmp");
        char digest[72], stage[STORE_NAME_MAX], suffix[13];
        Template t = { .state = TEMPLATE_IMPORTING, .created_usec = now_usec() };
        ApiError ignored = {};
        uint64_t size = 0;
        int k;

        api_registry_options(b->r, &o);
        if (!tmpdir)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        k = registry_pull(ref, NULL, &o, tmpdir, &path, digest, e);
        if (k < 0) {
                char why[API_ERROR_MESSAGE_MAX];
                (void) strscpy(why, sizeof why, e->message);
                return api_error(e, k, e->code == API_OK ? API_BAD_GATEWAY : e->code, "line %u: FROM: %s", s->line,
                                 why);
        }
        if (chain_key("", "FROM image", digest, key) < 0)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        {
                char keys[1][65];
                bool cached[1] = { false };
                memcpy(keys[0], key, 65);
                if (worker_layers_cached(b->r->worker, b->worker, keys, 1, cached, e) >= 0 && cached[0]) {
                        memcpy(b->layer, key, 65);
                        return 0;
                }
        }
        k = random_alnum(suffix, 12);
        if (k < 0)
                return api_error(e, k, API_INTERNAL, "no randomness");
        suffix[12] = 0;
        for (char *p = suffix; *p; p++)
                *p = (char) tolower((unsigned char) *p);
        snprintf(stage, sizeof stage, "build-%s", suffix);
        (void) strscpy(t.name, sizeof t.name, stage);
        k = store_template_insert(b->r->store, &t);
        if (k < 0)
                return api_store_error(e, k, "recording the build's image");
        k = worker_template_import_on(b->r->worker, b->worker, stage, path, &size, e);
        if (k >= 0)
                k = worker_build_layer(b->r->worker, b->worker, key, "template", stage, NULL, NULL, NULL, e);
        (void) worker_template_remove(b->r->worker, stage, &ignored);
        (void) store_template_delete(b->r->store, stage);
        if (k < 0)
                return k;
        memcpy(b->layer, key, 65);
        return 0;
}

static int json_strv(const JsonValue *a, char ***ret) {
        _cleanup_strv_free_ char **l = new0(char *, 1);

        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < json_array_size(a); i++)
                if (json_string(json_array_at(a, i)) && strv_extend(&l, json_string(json_array_at(a, i))) < 0)
                        return -ENOMEM;
        strv_free(*ret);
        *ret = TAKE_PTR(l);
        return 0;
}

/* The base's exec defaults (an imported image's config, a built template's) are where the build starts:
 * its env, cwd, user, entrypoint and cmd. */
static int base_defaults(Build *b, ApiError *e) {
        _cleanup_free_ char *text = NULL;
        _cleanup_json_ JsonValue *v = NULL;
        const JsonValue *env;
        const char *s;
        int k;

        k = worker_build_layer_defaults(b->r->worker, b->worker, b->layer, "layer", b->layer, &text, e);
        if (k < 0)
                return k;
        if (!text || json_parse(text, strlen(text), &v, NULL, 0) < 0 || json_type(v) != JSON_OBJECT)
                return 0; /* none, or not ours to understand: the build starts from nothing */
        env = json_get(v, "env");
        for (size_t i = 0; i < json_array_size(env); i++) {
                const char *kv = json_string(json_array_at(env, i));
                if (!kv || !strchr(kv, '=') || kv[0] == '=')
                        continue;
                if (strv_extend(&b->env, kv) < 0 || strv_extend(&b->vars, kv) < 0)
                        return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        }
        if ((s = json_string(json_get(v, "cwd"))) && s[0] == '/' && !(b->workdir = strdup(s)))
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        if ((s = json_string(json_get(v, "user"))) && s[0] && !(b->user = strdup(s)))
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        if ((json_type(json_get(v, "entrypoint")) == JSON_ARRAY && json_strv(json_get(v, "entrypoint"), &b->entrypoint) < 0) ||
            (json_type(json_get(v, "cmd")) == JSON_ARRAY && json_strv(json_get(v, "cmd"), &b->cmd) < 0))
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        return 0;
}

/* The base: layers/<key> of the FROM, made from its template, an image or nothing. */
static int build_from(Build *b, const DockerfileStep *s, char key[static 65], ApiError *e) {
        _cleanup_free_ char *image = NULL, *what = NULL;
        Template t;
        int k;

        k = expand(b, s, s->args[0], &image, e);
        if (k < 0)
                return k;
        if (streq(image, "scratch")) {
                what = strdup("FROM scratch");
                if (!what || chain_key("", what, NULL, key) < 0)
                        return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                k = worker_build_layer(b->r->worker, b->worker, key, "scratch", NULL, NULL, NULL, NULL, e);
        } else if (api_template_name_valid(image)) {
                char stamp[64];
                k = store_template_get(b->r->store, image, &t);
                if (k == -ENOENT)
                        return api_error(e, k, API_NOT_FOUND, "line %u: no template '%s'", s->line, image);
                if (k < 0)
                        return api_store_error(e, k, "looking up the template");
                if (t.state != TEMPLATE_READY)
                        return api_error(e, -EBUSY, API_CONFLICT, "line %u: template '%s' is not ready", s->line,
                                         image);
                snprintf(stamp, sizeof stamp, "%" PRId64 " %" PRIu64, t.created_usec, t.size_bytes);
                what = strjoin("FROM template ", image);
                if (!what || chain_key("", what, stamp, key) < 0)
                        return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                k = worker_build_layer(b->r->worker, b->worker, key, "template", image, NULL, NULL, NULL, e);
                if (k >= 0)
                        (void) strscpy(b->from_template, sizeof b->from_template, image);
        } else {
                RegistryRef ref;
                char rerr[160] = "";
                if (registry_ref_parse(image, &ref, rerr, sizeof rerr) < 0)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "line %u: FROM '%.128s' is neither a template, scratch nor an image "
                                         "reference: %s", s->line, image, rerr);
                return build_from_image(b, s, &ref, key, e);
        }
        if (k < 0)
                return k;
        memcpy(b->layer, key, 65);
        return 0;
}

static int publish(Build *b, const char *name, uint64_t *ret_size, bool *ret_new, ApiError *e) {
        char pool_name[STORE_NAME_MAX];
        Template t = {};
        uint64_t version = 0;
        int k;

        k = store_template_get(b->r->store, name, &t);
        if (k >= 0 && !streq(t.tenant_id, strempty(b->tenant_id)))
                return api_error(e, -EEXIST, API_CONFLICT, "the name '%s' is taken by another template", name);
        if (k == -ENOENT) {
                (void) strscpy(t.name, sizeof t.name, name);
                (void) strscpy(t.tenant_id, sizeof t.tenant_id, strempty(b->tenant_id));
                t.state = TEMPLATE_IMPORTING;
                t.created_usec = now_usec();
                k = store_template_insert(b->r->store, &t);
                if (k == -EEXIST)
                        return api_error(e, k, API_CONFLICT, "template '%s' is being made by another request", name);
                if (k < 0)
                        return api_store_error(e, k, "recording the template");
                *ret_new = true;
        } else if (k < 0)
                return api_store_error(e, k, "looking up the template");
        else if (t.state != TEMPLATE_READY)
                return api_error(e, -EBUSY, API_CONFLICT, "template '%s' is being imported", name);
        k = api_template_version_begin(b->r, name, &version, pool_name, sizeof pool_name, e);
        if (k >= 0)
                k = worker_build_publish(b->r->worker, b->worker, b->layer, pool_name, ret_size, e);
        if (k >= 0) /* a cluster: the other workers get it before the name moves to it there */
                worker_template_spread(b->r->worker, b->worker, pool_name,
                                       b->from_template[0] ? b->from_template : NULL);
        if (k >= 0)
                k = api_template_version_commit(b->r, name, version, b->layer, *ret_size, e);
        if (k < 0) {
                if (*ret_new)
                        (void) store_template_delete(b->r->store, name);
                return k;
        }
        k = store_template_set_ready(b->r->store, name, *ret_size);
        return k < 0 ? api_store_error(e, k, "marking the template ready") : 0;
}

/* The steps of b->df from FROM to the published template: 0, or -errno (e) with *cur the step that
 * failed (NULL: none of them). */
static int build_steps(Build *b, const char *name, const DockerfileStep **cur, uint64_t *ret_size, ApiError *e) {
        _cleanup_free_ char *defaults = NULL;
        char key[65] = "", data[STORE_NAME_MAX + 160];
        bool created = false;
        int k;

        *cur = NULL;
        /* a cluster: one worker holds the build's layers, stages and sandboxes */
        k = worker_build_place(b->r->worker, name, b->worker, e);
        if (k < 0)
                return k;
        log_info("Building template %s: %u steps%s%s", name, b->steps, b->worker[0] ? " on worker " : "", b->worker);
        for (size_t i = 0; i < b->df.n; i++) {
                *cur = &b->df.steps[i];
                b->step = (unsigned) i + 1;
                if (i < b->df.from) { /* an ARG for the FROM */
                        k = step_one(b, *cur, key, e);
                } else if (i == b->df.from) {
                        k = emit_step(b, *cur, -1) < 0 ? api_error(e, -ECANCELED, API_CONFLICT, "the client went away")
                                                       : build_from(b, *cur, key, e);
                        /* ARGs before FROM are not in effect after it (Docker's rule) */
                        b->vars = strv_free(b->vars);
                        b->args = strv_free(b->args);
                        if (k >= 0)
                                k = base_defaults(b, e);
                } else
                        k = step_one(b, *cur, key, e);
                if (k < 0)
                        goto fail;
        }
        *cur = NULL;
        /* the image's exec defaults over the last layer */
        if (defaults_json(b, &defaults) < 0 || chain_key(key, "defaults", defaults, key) < 0) {
                k = api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                goto fail;
        }
        {
                char keys[1][65];
                bool cached[1] = { false };
                memcpy(keys[0], key, 65);
                k = worker_layers_cached(b->r->worker, b->worker, keys, 1, cached, e);
                if (k >= 0 && !cached[0])
                        k = worker_build_layer(b->r->worker, b->worker, key, "layer", b->layer, NULL, NULL, defaults, e);
                if (k < 0)
                        goto fail;
                memcpy(b->layer, key, 65);
        }
        stage_drop(b);
        k = publish(b, name, ret_size, &created, e);
        if (k < 0)
                goto fail;
        snprintf(data, sizeof data, "{\"name\":\"%s\",\"size_bytes\":%" PRIu64 ",\"steps\":%u,\"cached\":%u}", name,
                 *ret_size, b->steps, b->cached);
        api_event(b->r, NULL, "template.built", "", data);
        log_info("Built template %s: %u steps, %u from the cache, %u run", name, b->steps, b->cached, b->ran);
        return 0;

fail:
        stage_drop(b);
        log_warning("Building template %s failed: %s", name, e->message);
        return k;
}

int api_template_build(ApiRequest *r, ApiError *e) {
        const char *name = r->params[0], *ct = http_head_header(r->head, "Content-Type");
        _cleanup_(build_done) Build b = { .r = r, .ctx_fd = -EBADF };
        _cleanup_free_ char *dockerfile = NULL, *text = NULL, *clean = NULL;
        char err[DOCKERFILE_ERR_MAX];
        const DockerfileStep *cur = NULL;
        const CtxEntry *c;
        size_t len = 0;
        uint64_t size = 0;
        int64_t t0 = now_usec();
        int k;

        if (!api_template_name_valid(name) || startswith(name, "build-"))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "a template name is [a-z0-9][a-z0-9._-]{0,63} and not build-*, not '%.64s'", name);
        if (ct && strncasecmp(ct, "application/x-tar", 17) != 0 && strncasecmp(ct, "application/octet-stream", 24) != 0)
                return api_error(e, -EINVAL, API_UNSUPPORTED_MEDIA,
                                 "expected Content-Type: application/x-tar (the build context), got '%.64s'", ct);
        k = parse_query(r, &b, &dockerfile, e);
        if (k < 0)
                return k;
        if (dockerfile_context_path(dockerfile, &clean) < 0 || streq(clean, "."))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "the Dockerfile '%.128s' is outside the context",
                                 dockerfile);
        k = api_template_receive_tar(r, &b.ctx_path, e);
        if (k < 0)
                return k;
        b.ctx_fd = open(b.ctx_path, O_RDONLY | O_CLOEXEC);
        if (b.ctx_fd < 0)
                return api_error(e, negative_errno(), API_INTERNAL, "cannot open the context: %m");
        k = ctx_index(&b, &b.ctx_fd, e);
        if (k < 0)
                return k;
        c = ctx_find(&b, clean);
        if (!c)
                return api_error(e, -ENOENT, API_INVALID_ARGUMENT, "the context holds no '%s'", clean);
        k = ctx_read_file(&b, c, DOCKERFILE_MAX, &text, &len);
        if (k < 0)
                return api_error(e, k, API_INVALID_ARGUMENT, "'%s' is not a file of at most %u bytes", clean,
                                 DOCKERFILE_MAX);
        k = dockerfile_parse(text, len, &b.df, err, sizeof err);
        if (k < 0)
                return api_error(e, k, API_INVALID_ARGUMENT, "%s: %s", clean, err);
        c = ctx_find(&b, ".dockerignore");
        if (c) {
                _cleanup_free_ char *ig = NULL;
                size_t n = 0;
                if (ctx_read_file(&b, c, DOCKERFILE_MAX, &ig, &n) < 0 || dockerignore_parse(ig, n, &b.ignore) < 0)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, ".dockerignore is not a readable file");
        }
        /* the sources that leave the context, as written (without variables): refused before anything runs */
        for (size_t i = 0; i < b.df.n; i++) {
                const DockerfileStep *s = &b.df.steps[i];
                if (s->kind != DOCKERFILE_COPY && s->kind != DOCKERFILE_ADD)
                        continue;
                for (char **a = s->args; a[1]; a++) {
                        _cleanup_free_ char *cp = NULL;
                        if (!strchr(*a, '$') && dockerfile_context_path(*a, &cp) < 0)
                                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                                 "%s: line %u: %s source '%.128s' is outside the build context",
                                                 clean, s->line, dockerfile_kind_to_string(s->kind), *a);
                }
        }
        k = api_get_worker(r, e);
        if (k < 0)
                return k;

        b.steps = (unsigned) b.df.n;
        k = api_stream_begin(r, 200, "application/x-ndjson");
        if (k < 0)
                return 0;
        k = build_steps(&b, name, &cur, &size, e);
        if (k < 0)
                goto fail;
        {
                _cleanup_(json_w_done) JsonWriter w;
                Template t = {};
                json_w_init(&w);
                json_w_object_begin(&w);
                json_w_kv_string(&w, "type", "result");
                json_w_kv_int(&w, "steps", b.steps);
                json_w_kv_int(&w, "cached_steps", b.cached);
                json_w_kv_int(&w, "run", b.ran);
                json_w_kv_int(&w, "duration_ms", (now_usec() - t0) / 1000);
                json_w_kv_string(&w, "layer", b.layer);
                if (b.worker[0]) /* a cluster: where it ran (its layer cache) */
                        json_w_kv_string(&w, "worker", b.worker);
                if (store_template_get(r->store, name, &t) >= 0) {
                        json_w_key(&w, "template");
                        json_out_template(&w, &t, 0);
                }
                json_w_object_end(&w);
                (void) emit(&b, &w);
        }
        if (b.gone || http_conn_stream_end(r->conn) < 0)
                http_conn_set_close(r->conn);
        return 0;

fail:
        if (!b.gone)
                (void) emit_error(&b, cur, e);
        if (b.gone || http_conn_stream_end(r->conn) < 0)
                http_conn_set_close(r->conn);
        return 0;
}

int api_template_build_run(ApiRequest *r, ApiBuildSpec *spec, ApiError *e) {
        _cleanup_(build_done) Build b = {
                .r = r, .ctx_fd = -EBADF, .tenant_id = spec->tenant_id, .force_from = spec->force_from,
                .log = spec->log, .log_data = spec->userdata,
        };
        const DockerfileStep *cur = NULL;
        uint64_t size = 0;
        int k;

        spec->failed_step = 0;
        b.ctx_fds = new0(int, spec->n_contexts + 1);
        if (!b.ctx_fds)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        for (size_t i = 0; i < spec->n_contexts; i++) {
                int fd = open(spec->contexts[i], O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        return api_error(e, negative_errno(), API_INTERNAL, "cannot open the uploaded files: %m");
                b.ctx_fds[b.n_ctx_fds++] = fd;
                k = ctx_index(&b, &b.ctx_fds[b.n_ctx_fds - 1], e);
                if (k < 0)
                        return k;
        }
        k = api_get_worker(r, e);
        if (k < 0)
                return k;
        /* the steps are borrowed for the build */
        b.df = *spec->df;
        b.steps = (unsigned) b.df.n;
        k = build_steps(&b, spec->name, &cur, &size, e);
        if (k < 0 && cur)
                spec->failed_step = (unsigned) (cur - b.df.steps) + 1;
        if (k < 0)
                (void) emit_error(&b, cur, e);
        else {
                spec->workdir = b.workdir ? strdup(b.workdir) : NULL;
                spec->user = b.user ? strdup(b.user) : NULL;
        }
        b.df = (Dockerfile){};
        return k;
}
