/* SPDX-License-Identifier: MIT */
/* E2B's template builds (Template.build(), buildInBackground(),
 * getBuildStatus() of the SDKs), on space's Dockerfile builder
 * (template-build.c, api_template_build_run):
 *
 *   POST /v3/templates                        {name} → a build of template <name> (the templateID), waiting
 *   GET  /templates/{id}/files/{hash}         {present, url}: url, signed for the tenant, the template and
 *                                             the hash and expiring, takes the tar(.gz) of a COPY's files
 *   PUT  /templates/{id}/files/{hash}?...     the upload (no key: the URL's signature is its right)
 *   POST /v2/templates/{id}/builds/{buildID}  the steps: answered 202 at once, the build runs on
 *   GET  /templates/{id}/builds/{buildID}/status?logsOffset=N
 *
 * A template an E2B key builds is its tenant's; a name another tenant's (or
 * a global) template has is refused. Steps: RUN (args [cmd, user?]), COPY
 * ([src, dest, user?, mode?] with filesHash), ENV ([k, v, ...]), WORKDIR,
 * USER; startCmd/readyCmd become the template's start command with its
 * ready check. fromTemplate names a template this tenant may start from;
 * fromImage an image reference (e2bdev/base: space's base template). Any
 * other step type, fromImageRegistry, or a COPY whose files were not
 * uploaded is refused before anything runs. Build records (status, log,
 * reason) are kept in memory: a restart forgets them (the templates stay). */

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "dockerfile.h"
#include "e2b-gzip.h"
#include "e2b.h"
#include "fd-util.h"
#include "log.h"
#include "oci-image.h"
#include "oci-tar.h"
#include "str-util.h"

#define E2B_BUILDS_MAX 64U
#define E2B_BUILDS_TENANT_MAX 8U /* waiting or building at once, of one tenant */
#define E2B_BUILD_WAIT_MAX_USEC (30 * 60 * (int64_t) 1000000) /* a build not started after this may go */
#define E2B_BUILD_LOG_LINES_MAX 20000U
#define E2B_BUILD_LOG_BYTES_MAX (1024U * 1024U) /* of one build's log kept */
#define E2B_BUILD_LOG_LINE_MAX 4096U
#define E2B_BUILD_ID_MAX 40U
#define E2B_UPLOAD_URL_TTL_S 3600
#define E2B_FILES_DIR "e2b-template-files"
#define E2B_UPLOAD_ENTRIES_MAX 100000U
#define E2B_FILES_PER_TENANT_MAX 1024U  /* uploads a tenant keeps; past it (or 4 × upload_max_mb) the least used go */

typedef enum E2bBuildStatus {
        E2B_BUILD_WAITING,
        E2B_BUILD_BUILDING,
        E2B_BUILD_READY,
        E2B_BUILD_ERROR,
} E2bBuildStatus;

static const char *const status_names[] = { "waiting", "building", "ready", "error" };

typedef struct E2bLogLine {
        int64_t usec;
        const char *level; /* static */
        char *message;
} E2bLogLine;

typedef struct E2bBuild {
        char template_id[STORE_NAME_MAX];
        char build_id[E2B_BUILD_ID_MAX];
        char tenant_id[STORE_ID_MAX];
        E2bBuildStatus status;
        E2bLogLine *lines;
        size_t n_lines, log_bytes;
        bool truncated;
        char *reason;
        char reason_step[16];
        int64_t created_usec;
} E2bBuild;

static pthread_mutex_t builds_lock = PTHREAD_MUTEX_INITIALIZER;
static E2bBuild *builds[E2B_BUILDS_MAX];

static void build_free(E2bBuild *b) {
        if (!b)
                return;
        for (size_t i = 0; i < b->n_lines; i++)
                free(b->lines[i].message);
        free(b->lines);
        free(b->reason);
        free(b);
}

/* Under builds_lock: the build of tenant, template and id, or NULL. */
static E2bBuild *build_find(const char *tenant, const char *template_id, const char *build_id) {
        for (size_t i = 0; i < E2B_BUILDS_MAX; i++)
                if (builds[i] && streq(builds[i]->tenant_id, tenant) && streq(builds[i]->template_id, template_id) &&
                    (!build_id || streq(builds[i]->build_id, build_id)))
                        return builds[i];
        return NULL;
}

/* Records a new waiting build: a free slot, else the oldest finished build's. */
static int build_add(E2bBuild *b) {
        size_t slot = SIZE_MAX, open = 0;
        int64_t oldest = INT64_MAX;

        pthread_mutex_lock(&builds_lock);
        for (size_t i = 0; i < E2B_BUILDS_MAX; i++)
                if (builds[i] && streq(builds[i]->tenant_id, b->tenant_id) &&
                    (builds[i]->status == E2B_BUILD_WAITING || builds[i]->status == E2B_BUILD_BUILDING) &&
                    builds[i]->created_usec >= now_usec() - E2B_BUILD_WAIT_MAX_USEC)
                        open++;
        if (open >= E2B_BUILDS_TENANT_MAX) {
                pthread_mutex_unlock(&builds_lock);
                return -EDQUOT;
        }
        for (size_t i = 0; i < E2B_BUILDS_MAX; i++) {
                if (!builds[i]) {
                        slot = i;
                        break;
                }
                /* finished, or not started in time */
                if ((builds[i]->status == E2B_BUILD_READY || builds[i]->status == E2B_BUILD_ERROR ||
                     (builds[i]->status == E2B_BUILD_WAITING &&
                      builds[i]->created_usec < now_usec() - E2B_BUILD_WAIT_MAX_USEC)) &&
                    builds[i]->created_usec < oldest) {
                        oldest = builds[i]->created_usec;
                        slot = i;
                }
        }
        if (slot == SIZE_MAX) {
                pthread_mutex_unlock(&builds_lock);
                return -EBUSY;
        }
        build_free(builds[slot]);
        builds[slot] = b;
        pthread_mutex_unlock(&builds_lock);
        return 0;
}

static void build_log(void *userdata, const char *level, const char *message) {
        E2bBuild *b = userdata;

        /* a RUN's output comes in pieces: one log entry per line */
        pthread_mutex_lock(&builds_lock);
        for (const char *p = message; *p && !b->truncated;) {
                size_t n = strcspn(p, "\n");
                bool full = b->n_lines + 1 >= E2B_BUILD_LOG_LINES_MAX || b->log_bytes + n > E2B_BUILD_LOG_BYTES_MAX;
                E2bLogLine *grown;
                char *m;

                if (full)
                        b->truncated = true;
                if (n > 0 || full) {
                        m = full ? strdup("(the rest of the build's log is not kept)")
                                 : strndup(p, MIN(n, (size_t) E2B_BUILD_LOG_LINE_MAX));
                        grown = m ? reallocarray(b->lines, b->n_lines + 1, sizeof *grown) : NULL;
                        if (!grown) {
                                free(m);
                                break;
                        }
                        b->lines = grown;
                        b->lines[b->n_lines++] = (E2bLogLine){ .usec = now_usec(), .level = full ? "warn" : level,
                                                               .message = m };
                        b->log_bytes += strlen(m);
                }
                p += n;
                if (*p == '\n')
                        p++;
        }
        pthread_mutex_unlock(&builds_lock);
}

static bool hash_valid(const char *s) {
        if (strlen(s) != 64)
                return false;
        for (const char *p = s; *p; p++)
                if (!isdigit((unsigned char) *p) && !(*p >= 'a' && *p <= 'f'))
                        return false;
        return true;
}

static bool tenant_id_safe(const char *s) {
        if (isempty(s))
                return false;
        for (const char *p = s; *p; p++)
                if (!isalnum((unsigned char) *p) && *p != '-' && *p != '_')
                        return false;
        return true;
}

/* <state_dir>/e2b-template-files/<tenant>[/<hash>.tar] */
static int files_path(ApiRequest *r, const char *tenant, const char *hash, char **ret) {
        const Config *c = api_config(r->api);

        if (!tenant_id_safe(tenant))
                return -EINVAL;
        *ret = hash ? strjoin(c->state_dir, "/" E2B_FILES_DIR "/", tenant, "/", hash, ".tar")
                    : strjoin(c->state_dir, "/" E2B_FILES_DIR "/", tenant);
        return *ret ? 0 : -ENOMEM;
}

/* A template this tenant may replace: none of that name yet, or its own. */
static int template_ours(ApiRequest *r, const char *name, bool *ret_exists, ApiError *e) {
        Template t;
        int k = store_template_get(r->store, name, &t);

        *ret_exists = false;
        if (k == -ENOENT)
                return 0;
        if (k < 0)
                return api_store_error(e, k, "looking up the template");
        if (!streq(t.tenant_id, r->key.tenant_id))
                return api_error(e, -EEXIST, API_CONFLICT, "the template name '%s' is taken", name);
        *ret_exists = true;
        return 0;
}

/* The template of a files or build request: one this tenant has a build of. */
static int template_of_tenant(ApiRequest *r, const char *template_id, ApiError *e) {
        E2bBuild *b;

        pthread_mutex_lock(&builds_lock);
        b = build_find(r->key.tenant_id, template_id, NULL);
        pthread_mutex_unlock(&builds_lock);
        if (!b)
                return api_error(e, -ENOENT, API_NOT_FOUND, "template '%.64s' not found", template_id);
        return 0;
}

/* ---- POST /v3/templates ---- */

static int request_build(ApiRequest *r, ApiError *e) {
        static const char *const allowed[] = { "name", "alias", "tags", "cpuCount", "memoryMB", "minFreeDiskMb",
                                               "teamID", NULL };
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *name = NULL;
        const JsonValue *tags;
        const char *n, *unknown = NULL, *colon;
        uint8_t rnd[16];
        E2bBuild *b;
        bool exists;
        int k;

        k = e2b_read_json(r, &body, e);
        if (k < 0)
                return k;
        if (json_check_keys(body, allowed, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));
        n = json_string(json_get(body, "name")) ?: json_string(json_get(body, "alias"));
        if (isempty(n))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "name is required");
        colon = strchr(n, ':');
        name = colon ? strndup(n, (size_t) (colon - n)) : strdup(n);
        if (!name)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        if (!api_template_name_valid(name) || startswith(name, "build-"))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "a template name is [a-z0-9][a-z0-9._-]{0,63} and not build-*, not '%.64s'", name);
        tags = json_get(body, "tags");
        if ((colon && !streq(colon + 1, "default")) || (tags && !json_is_null(tags) && json_array_size(tags) > 0))
                return api_error(e, -EOPNOTSUPP, API_NOT_IMPLEMENTED,
                                 "template tags are not supported by space's E2B API (build '%s' without one)", name);
        k = template_ours(r, name, &exists, e);
        if (k < 0)
                return k;
        b = new0(E2bBuild, 1);
        if (!b)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t) sizeof rnd) {
                free(b);
                return api_error(e, -EIO, API_INTERNAL, "no randomness");
        }
        rnd[6] = (uint8_t) ((rnd[6] & 0x0f) | 0x40);
        rnd[8] = (uint8_t) ((rnd[8] & 0x3f) | 0x80);
        snprintf(b->build_id, sizeof b->build_id,
                 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2],
                 rnd[3], rnd[4], rnd[5], rnd[6], rnd[7], rnd[8], rnd[9], rnd[10], rnd[11], rnd[12], rnd[13],
                 rnd[14], rnd[15]);
        (void) strscpy(b->template_id, sizeof b->template_id, name);
        (void) strscpy(b->tenant_id, sizeof b->tenant_id, r->key.tenant_id);
        b->created_usec = now_usec();
        b->status = E2B_BUILD_WAITING;
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "templateID", b->template_id);
        json_w_kv_string(&w, "buildID", b->build_id);
        json_w_kv_bool(&w, "public", false);
        json_w_key(&w, "names");
        json_w_array_begin(&w);
        json_w_string(&w, name);
        json_w_array_end(&w);
        json_w_key(&w, "aliases");
        json_w_array_begin(&w);
        json_w_string(&w, name);
        json_w_array_end(&w);
        json_w_key(&w, "tags");
        json_w_array_begin(&w);
        json_w_string(&w, "default");
        json_w_array_end(&w);
        json_w_object_end(&w);
        k = build_add(b);
        if (k < 0) {
                build_free(b);
                if (k == -EDQUOT)
                        return api_error(e, k, API_TOO_MANY_REQUESTS,
                                         "a tenant has at most %u template builds waiting or running",
                                         E2B_BUILDS_TENANT_MAX);
                return api_error(e, k, API_TOO_MANY_REQUESTS, "too many template builds are running");
        }
        log_info("E2B template build %s of %s requested", b->build_id, name);
        return e2b_reply_json(r, 202, &w, NULL);
}

/* ---- files ---- */

static int upload_signature(ApiRequest *r, const char *tenant, const char *template_id, const char *hash,
                            int64_t expires, char ret[static E2B_TOKEN_LEN + 1]) {
        _cleanup_free_ char *msg = NULL;

        if (asprintf(&msg, "e2b-template-files:%s:%s:%s:%" PRId64, tenant, template_id, hash, expires) < 0)
                return -ENOMEM;
        return e2b_secret_hmac(api_config(r->api), msg, ret);
}

static bool host_valid(const char *h) {
        if (isempty(h) || strlen(h) > 255)
                return false;
        for (const char *p = h; *p; p++)
                if (!isalnum((unsigned char) *p) && !strchr(".-:[]_", *p))
                        return false;
        return true;
}

/* GET /templates/{id}/files/{hash} */
static int files_link(ApiRequest *r, const char *template_id, const char *hash, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *path = NULL, *url = NULL;
        const char *host = http_head_header(r->head, "Host"),
                   *proto = http_head_header(r->head, "X-Forwarded-Proto");
        char sig[E2B_TOKEN_LEN + 1];
        int64_t expires = now_usec() / 1000000 + E2B_UPLOAD_URL_TTL_S;
        struct stat st;
        int k;

        if (!hash_valid(hash))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "a files hash is 64 lowercase hex digits");
        k = template_of_tenant(r, template_id, e);
        if (k < 0)
                return k;
        if (!host_valid(host))
                return api_error(e, -EINVAL, API_BAD_REQUEST, "the request has no usable Host header");
        if (files_path(r, r->key.tenant_id, hash, &path) < 0)
                return api_error(e, -EINVAL, API_INTERNAL, "the tenant id is not usable in a path");
        k = upload_signature(r, r->key.tenant_id, template_id, hash, expires, sig);
        if (k < 0)
                return api_error(e, k, API_INTERNAL, "cannot sign the upload URL");
        if (asprintf(&url, "%s://%s/templates/%s/files/%s?tenant=%s&expires=%" PRId64 "&signature=%s",
                     proto && streq(proto, "https") ? "https" : "http", host, template_id, hash, r->key.tenant_id,
                     expires, sig) < 0)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_bool(&w, "present", stat(path, &st) >= 0 && S_ISREG(st.st_mode));
        json_w_kv_string(&w, "url", url);
        json_w_object_end(&w);
        return e2b_reply_json(r, 200, &w, NULL);
}

bool e2b_template_upload_request(const HttpHead *head) {
        const char *p = head->path;

        /* PUT /templates/{id}/files/{hash}: the signed upload URL of files_link() */
        if (!p || !streq(head->method, "PUT") || !(p = startswith(p, "/templates/")))
                return false;
        p = strchr(p, '/');
        return p && startswith(p, "/files/") && !strchr(p + 7, '/');
}

typedef struct Gunzip {
        int fd;
        uint64_t total, max;
} Gunzip;

static int gunzip_sink(const char *p, size_t n, void *userdata) {
        Gunzip *g = userdata;

        g->total += n;
        if (g->total > g->max)
                return -EFBIG;
        return loop_write(g->fd, p, n);
}

/* The upload as a plain tar at path (gzip inflated). */
static int upload_unpack(ApiRequest *r, const char *in, const char *out, ApiError *e) {
        const Config *c = api_config(r->api);
        _cleanup_close_ int ifd = open(in, O_RDONLY | O_CLOEXEC), ofd = -EBADF;
        _cleanup_(e2b_gzip_done) E2bGzip g = {};
        Gunzip sink = { .max = c->upload_max_mb * 1024 * 1024 };
        uint8_t buf[64 * 1024];
        bool gz = false;
        ssize_t n;
        int k = 0;

        if (ifd < 0)
                return api_error(e, negative_errno(), API_INTERNAL, "cannot read the upload: %m");
        ofd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (ofd < 0)
                return api_error(e, negative_errno(), API_INTERNAL, "cannot store the upload: %m");
        sink.fd = ofd;
        n = pread(ifd, buf, 2, 0);
        gz = n == 2 && buf[0] == 0x1f && buf[1] == 0x8b;
        if (gz && e2b_gunzip_begin(&g) < 0)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        while ((n = read(ifd, buf, sizeof buf)) > 0) {
                k = gz ? e2b_gunzip_feed(&g, buf, (size_t) n, gunzip_sink, &sink) : loop_write(ofd, buf, (size_t) n);
                if (k < 0)
                        break;
        }
        if (n < 0)
                k = negative_errno();
        if (k >= 0 && gz)
                k = e2b_gunzip_end(&g);
        if (k == -EFBIG)
                return api_error(e, k, API_PAYLOAD_TOO_LARGE, "the files are limited to %" PRIu64 " MiB unpacked",
                                 c->upload_max_mb);
        if (k == -EBADMSG)
                return api_error(e, k, API_INVALID_ARGUMENT, "the upload is not a valid gzip stream");
        if (k < 0)
                return api_error(e, k, k == -ENOSPC ? API_INSUFFICIENT_STORAGE : API_INTERNAL,
                                 "cannot store the upload: %s", strerror(-k));
        /* a tar whose every path stays inside it */
        {
                int rfd = open(out, O_RDONLY | O_CLOEXEC);
                TarStream s = tar_stream_of_fd(&rfd);
                char err[160] = "";
                size_t entries = 0;
                for (k = 0;;) {
                        _cleanup_(tar_entry_done) TarEntry t = {};
                        _cleanup_free_ char *clean = NULL;
                        k = tar_next(&s, &t, err, sizeof err);
                        if (k <= 0)
                                break;
                        if (oci_path_clean(t.path, &clean) < 0 || ++entries > E2B_UPLOAD_ENTRIES_MAX) {
                                k = -EINVAL;
                                (void) snprintf(err, sizeof err, "'%.128s' is outside it (or too many files)", t.path);
                                break;
                        }
                        k = tar_skip_data(&s);
                        if (k < 0)
                                break;
                }
                safe_close(rfd);
                if (k < 0)
                        return api_error(e, k, API_INVALID_ARGUMENT, "the upload is not a valid tar: %s", err);
        }
        return 0;
}

/* Keeps a tenant's uploads within E2B_FILES_PER_TENANT_MAX files and 4 × upload_max_mb (room for adding
 * one of incoming bytes): the least recently used (mtime: an upload or a build that named it) go first. */
static void files_trim(ApiRequest *r, const char *dir, uint64_t incoming) {
        const uint64_t max = api_config(r->api)->upload_max_mb * 4 * 1024 * 1024;
        struct F {
                char name[80];
                int64_t mtime;
                uint64_t size;
        } *list = NULL;
        size_t n = 0;
        uint64_t total = incoming;
        DIR *d = opendir(dir);
        struct dirent *de;

        if (!d)
                return;
        while ((de = readdir(d))) {
                struct stat st;
                struct F *grown;
                if (!endswith(de->d_name, ".tar") || strlen(de->d_name) >= sizeof list->name ||
                    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        continue;
                grown = reallocarray(list, n + 1, sizeof *grown);
                if (!grown)
                        break;
                list = grown;
                (void) strscpy(list[n].name, sizeof list[n].name, de->d_name);
                list[n].mtime = (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
                list[n].size = (uint64_t) st.st_size;
                total += list[n].size;
                n++;
        }
        while (n > 0 && (n + 1 > E2B_FILES_PER_TENANT_MAX || total > max)) {
                size_t oldest = 0;
                for (size_t i = 1; i < n; i++)
                        if (list[i].mtime < list[oldest].mtime)
                                oldest = i;
                if (unlinkat(dirfd(d), list[oldest].name, 0) >= 0)
                        log_info("Dropped the least used E2B template files %s of %s", list[oldest].name, dir);
                total -= list[oldest].size;
                list[oldest] = list[--n];
        }
        closedir(d);
        free(list);
}

/* PUT /templates/{id}/files/{hash}?tenant=&expires=&signature= (no key: the signature) */
int e2b_template_upload(ApiRequest *r) {
        _cleanup_free_ char *copy = NULL, *tenant = NULL, *exp = NULL, *sig = NULL, *dir = NULL, *path = NULL,
                            *tmp = NULL, *body = NULL;
        char want[E2B_TOKEN_LEN + 1];
        const char *template_id, *hash;
        int64_t expires = 0;
        ApiError e = {};
        char *slash;
        int k;

        copy = strdup(r->head->path + strlen("/templates/"));
        if (!copy)
                return api_error(&e, -ENOMEM, API_UNAVAILABLE, "out of memory"), e2b_reply_error(r, &e);
        slash = strchr(copy, '/');
        *slash = 0;
        template_id = copy;
        hash = slash + strlen("/files/");
        if (api_query_string(r, "tenant", &tenant, &e) <= 0 || api_query_string(r, "expires", &exp, &e) <= 0 ||
            api_query_string(r, "signature", &sig, &e) <= 0) {
                if (e.code == API_OK)
                        (void) api_error(&e, -EACCES, API_UNAUTHORIZED,
                                         "an upload URL carries tenant, expires and signature");
                return e2b_reply_error(r, &e);
        }
        if (!hash_valid(hash) || !api_template_name_valid(template_id) || !tenant_id_safe(tenant) ||
            safe_atoi64(exp, &expires) < 0 || upload_signature(r, tenant, template_id, hash, expires, want) < 0 ||
            strlen(sig) != strlen(want) || CRYPTO_memcmp(sig, want, strlen(want)) != 0) {
                (void) api_error(&e, -EACCES, API_FORBIDDEN, "the signature of this upload URL is wrong");
                return e2b_reply_error(r, &e);
        }
        if (expires < now_usec() / 1000000) {
                (void) api_error(&e, -EACCES, API_FORBIDDEN, "this upload URL has expired");
                return e2b_reply_error(r, &e);
        }
        if (files_path(r, tenant, NULL, &dir) < 0 || files_path(r, tenant, hash, &path) < 0 ||
            asprintf(&tmp, "%s.%" PRId64 ".part", path, now_usec()) < 0) {
                (void) api_error(&e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                return e2b_reply_error(r, &e);
        }
        k = mkdir_p(dir, 0700);
        if (k < 0) {
                (void) api_error(&e, k, API_INTERNAL, "cannot create %s: %s", dir, strerror(-k));
                return e2b_reply_error(r, &e);
        }
        k = api_template_receive_tar(r, &body, &e);
        if (k >= 0)
                k = upload_unpack(r, body, tmp, &e);
        if (body)
                (void) unlink(body);
        if (k >= 0) {
                struct stat st;
                files_trim(r, dir, stat(tmp, &st) >= 0 ? (uint64_t) st.st_size : 0);
        }
        if (k >= 0 && rename(tmp, path) < 0)
                k = api_error(&e, negative_errno(), API_INTERNAL, "cannot store the upload: %m");
        if (k < 0) {
                (void) unlink(tmp);
                return e2b_reply_error(r, &e);
        }
        log_info("Stored the E2B template files %s of tenant %s", hash, tenant);
        return e2b_reply(r, 200, NULL, NULL, 0, NULL);
}

typedef struct HashEntry {
        char *path;
        TarType type;
        uint32_t mode;
        uint64_t size, offset;
        char *link;
} HashEntry;

static int hash_entry_cmp(const void *a, const void *b) {
        return strcmp(((const HashEntry *) a)->path, ((const HashEntry *) b)->path);
}

/* The SDK's filesHash of a COPY (calculateFilesHash): sha256 of "COPY <src> <dest>", then of each file in
 * path order its relative path, st_mode and st_size in decimal, and its contents (a symlink's target).
 * 1 if the upload at path has it, -EBADMSG if not, 0 if it cannot be told: a directory's st_size is in the
 * hash and in no tar. */
static int files_hash_check(const char *path, const char *src, const char *dest, const char *hash) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        TarStream s = tar_stream_of_fd(&fd);
        HashEntry *list = NULL;
        size_t n = 0;
        EVP_MD_CTX *ctx = NULL;
        unsigned char md[32];
        unsigned mdlen = 0;
        char hex[65], err[160];
        int k = 0;

        if (fd < 0)
                return negative_errno();
        for (;;) {
                _cleanup_(tar_entry_done) TarEntry t = {};
                _cleanup_free_ char *clean = NULL;
                HashEntry *grown;
                k = tar_next(&s, &t, err, sizeof err);
                if (k <= 0)
                        break;
                if (t.type == TAR_DIR) {
                        k = 0;
                        goto out;
                }
                if (oci_path_clean(t.path, &clean) < 0) {
                        k = -EBADMSG;
                        goto out;
                }
                grown = reallocarray(list, n + 1, sizeof *grown);
                if (!grown) {
                        k = -ENOMEM;
                        goto out;
                }
                list = grown;
                list[n++] = (HashEntry){ .path = TAKE_PTR(clean), .type = t.type, .mode = t.mode & 07777,
                                         .size = t.size, .offset = s.offset, .link = t.link ? strdup(t.link) : NULL };
                k = tar_skip_data(&s);
                if (k < 0)
                        goto out;
        }
        if (k < 0)
                goto out;
        qsort(list, n, sizeof *list, hash_entry_cmp);
        ctx = EVP_MD_CTX_new();
        if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
                k = -ENOMEM;
                goto out;
        }
        EVP_DigestUpdate(ctx, "COPY ", 5);
        EVP_DigestUpdate(ctx, src, strlen(src));
        EVP_DigestUpdate(ctx, " ", 1);
        EVP_DigestUpdate(ctx, dest, strlen(dest));
        for (size_t i = 0; i < n; i++) {
                char num[32];
                bool lnk = list[i].type == TAR_SYMLINK;
                uint64_t size = lnk ? strlen(strempty(list[i].link)) : list[i].size;
                if (list[i].type != TAR_FILE && !lnk) {
                        k = 0; /* hard links and the like: not told apart */
                        goto out;
                }
                EVP_DigestUpdate(ctx, list[i].path, strlen(list[i].path));
                snprintf(num, sizeof num, "%u", (lnk ? 0120000U : 0100000U) | list[i].mode);
                EVP_DigestUpdate(ctx, num, strlen(num));
                snprintf(num, sizeof num, "%" PRIu64, size);
                EVP_DigestUpdate(ctx, num, strlen(num));
                if (lnk)
                        EVP_DigestUpdate(ctx, strempty(list[i].link), size);
                else {
                        uint8_t buf[64 * 1024];
                        uint64_t left = list[i].size, off = list[i].offset;
                        while (left > 0) {
                                ssize_t got = pread(fd, buf, (size_t) MIN(left, (uint64_t) sizeof buf), (off_t) off);
                                if (got <= 0) {
                                        k = got < 0 ? negative_errno() : -EIO;
                                        goto out;
                                }
                                EVP_DigestUpdate(ctx, buf, (size_t) got);
                                left -= (uint64_t) got;
                                off += (uint64_t) got;
                        }
                }
        }
        EVP_DigestFinal_ex(ctx, md, &mdlen);
        hexencode(md, 32, hex);
        hex[64] = 0;
        k = streq(hex, hash) ? 1 : -EBADMSG;
out:
        EVP_MD_CTX_free(ctx);
        for (size_t i = 0; i < n; i++) {
                free(list[i].path);
                free(list[i].link);
        }
        free(list);
        return k;
}

/* ---- POST /v2/templates/{id}/builds/{buildID} ---- */

static int step_add(Dockerfile *df, DockerfileKind kind, unsigned line, char *text) {
        DockerfileStep *grown;

        if (!text)
                return -ENOMEM;
        grown = reallocarray(df->steps, df->n + 1, sizeof *grown);
        if (!grown) {
                free(text);
                return -ENOMEM;
        }
        df->steps = grown;
        df->steps[df->n++] = (DockerfileStep){ .kind = kind, .line = line, .text = text };
        return 0;
}

static bool is_true(const JsonValue *v) {
        bool b = false;
        return v && json_bool(v, &b) >= 0 && b;
}

/* [a] or [a, b] */
static char **strv_of(const char *a, const char *b) {
        _cleanup_strv_free_ char **l = NULL;

        if (strv_extend(&l, a) < 0 || (b && strv_extend(&l, b) < 0))
                return NULL;
        return TAKE_PTR(l);
}

static char *arg_at(const JsonValue *args, size_t i) {
        const char *s = json_string(json_array_at(args, i));
        return s ? strdup(s) : NULL;
}

/* The E2B steps as the builder's instructions: 0, or -errno (e). */
static int translate(ApiRequest *r, const JsonValue *body, Dockerfile *df, char ***contexts, unsigned *force_from,
                     ApiError *e) {
        const JsonValue *steps = json_get(body, "steps"), *reg = json_get(body, "fromImageRegistry");
        const char *from_t = json_string(json_get(body, "fromTemplate")),
                   *from_i = json_string(json_get(body, "fromImage"));
        _cleanup_free_ char *from = NULL;
        int k;

        if (reg && !json_is_null(reg))
                return api_error(e, -EOPNOTSUPP, API_NOT_IMPLEMENTED,
                                 "fromImageRegistry (registry credentials) is not supported by space's E2B API");
        if (from_t && from_i)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "fromTemplate and fromImage exclude each other");
        if (from_t) {
                Template t;
                if (!api_template_name_valid(from_t))
                        return api_error(e, -ENOENT, API_NOT_FOUND, "template '%.64s' not found", from_t);
                k = store_template_get(r->store, from_t, &t);
                if (k < 0 && k != -ENOENT)
                        return api_store_error(e, k, "looking up the template");
                if (k < 0 || (t.tenant_id[0] && !streq(t.tenant_id, r->key.tenant_id)))
                        return api_error(e, -ENOENT, API_NOT_FOUND, "template '%.64s' not found", from_t);
                from = strdup(from_t);
        } else if (!from_i || startswith(from_i, "e2bdev/base"))
                from = strdup("base"); /* E2B's base image: space's base template */
        else
                from = strdup(from_i);
        if (!from)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        if (step_add(df, DOCKERFILE_FROM, 0, strjoin("FROM ", from)) < 0 ||
            !(df->steps[0].args = strv_of(from, NULL)))
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        df->from = 0;
        if (steps && !json_is_null(steps) && json_type(steps) != JSON_ARRAY)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "steps must be an array");
        if (json_array_size(steps) >= DOCKERFILE_STEPS_MAX)
                return api_error(e, -E2BIG, API_INVALID_ARGUMENT, "a template has at most %u steps",
                                 DOCKERFILE_STEPS_MAX - 1);
        for (size_t i = 0; i < json_array_size(steps); i++) {
                const JsonValue *st = json_array_at(steps, i), *args = json_get(st, "args");
                const char *type = json_string(json_get(st, "type"));
                unsigned line = (unsigned) i + 1;
                size_t n = json_array_size(args);
                DockerfileStep *s;

                if (!type)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "step %u has no type", line);
                if (is_true(json_get(st, "force")) && *force_from == 0)
                        *force_from = line + 1; /* skipCache(): this layer and the ones after it */
                if (args && json_type(args) != JSON_ARRAY)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "step %u: args must be an array", line);
                for (size_t j = 0; j < n; j++)
                        if (!json_string(json_array_at(args, j)))
                                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                                 "step %u: args must be strings", line);
                if (streq(type, "RUN")) {
                        if (n < 1 || n > 2 || isempty(json_string(json_array_at(args, 0))))
                                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                                 "step %u: RUN takes [command, user?]", line);
                        if (step_add(df, DOCKERFILE_RUN, line,
                                     strjoin("RUN ", json_string(json_array_at(args, 0)))) < 0)
                                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                        s = &df->steps[df->n - 1];
                        s->shell = arg_at(args, 0);
                        if (n == 2 && !isempty(json_string(json_array_at(args, 1))))
                                s->user = arg_at(args, 1);
                        if (!s->shell || (n == 2 && !isempty(json_string(json_array_at(args, 1))) && !s->user))
                                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                } else if (streq(type, "COPY")) {
                        const char *hash = json_string(json_get(st, "filesHash")), *user, *mode;
                        _cleanup_free_ char *path = NULL, *src = NULL;
                        struct stat stt;
                        unsigned m = 0;
                        if (n < 2 || n > 4 || isempty(json_string(json_array_at(args, 0))) ||
                            isempty(json_string(json_array_at(args, 1))))
                                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                                 "step %u: COPY takes [src, dest, user?, mode?]", line);
                        if (!hash || !hash_valid(hash))
                                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                                 "step %u: COPY needs the filesHash of its files", line);
                        if (dockerfile_context_path(json_string(json_array_at(args, 0)), &src) < 0)
                                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                                 "step %u: COPY source '%.128s' is outside the context", line,
                                                 json_string(json_array_at(args, 0)));
                        if (files_path(r, r->key.tenant_id, hash, &path) < 0)
                                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                        if (stat(path, &stt) < 0 || !S_ISREG(stt.st_mode))
                                return api_error(e, -ENOENT, API_INVALID_ARGUMENT,
                                                 "step %u: the files %s of COPY were not uploaded", line, hash);
                        (void) utimensat(AT_FDCWD, path, NULL, 0); /* used: the last to go (files_trim) */
                        k = files_hash_check(path, json_string(json_array_at(args, 0)),
                                             json_string(json_array_at(args, 1)), hash);
                        if (k == -EBADMSG)
                                (void) unlink(path); /* not what it says: the next build uploads it again */
                        if (k == -EBADMSG)
                                return api_error(e, k, API_INVALID_ARGUMENT,
                                                 "step %u: the files uploaded as %s do not have that filesHash", line,
                                                 hash);
                        if (k < 0)
                                return api_error(e, k, API_INTERNAL, "step %u: cannot read the files %s: %s", line,
                                                 hash, strerror(-k));
                        user = n > 2 ? json_string(json_array_at(args, 2)) : NULL;
                        mode = n > 3 ? json_string(json_array_at(args, 3)) : NULL;
                        if (!isempty(mode)) {
                                char *end = NULL;
                                unsigned long v = strtoul(mode, &end, 8);
                                if (!end || *end || v == 0 || v > 07777)
                                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                                         "step %u: COPY mode must be octal, not '%.16s'", line, mode);
                                m = (unsigned) v;
                        }
                        if (step_add(df, DOCKERFILE_COPY, line,
                                     strjoin("COPY ", json_string(json_array_at(args, 0)), " ",
                                             json_string(json_array_at(args, 1)))) < 0)
                                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                        s = &df->steps[df->n - 1];
                        s->mode = m;
                        s->args = strv_of(src, json_string(json_array_at(args, 1)));
                        if (!s->args || (!isempty(user) && !(s->chown = strdup(user))) ||
                            strv_extend(contexts, path) < 0)
                                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                } else if (streq(type, "ENV")) {
                        if (n == 0 || n % 2)
                                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                                 "step %u: ENV takes [name, value, ...]", line);
                        if (step_add(df, DOCKERFILE_ENV, line, strdup("ENV")) < 0)
                                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                        s = &df->steps[df->n - 1];
                        for (size_t j = 0; j < n; j += 2) {
                                char *t = strjoin(s->text, " ", strempty(json_string(json_array_at(args, j))), "=",
                                                  json_string(json_array_at(args, j + 1)));
                                if (!t)
                                        return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                                free(s->text);
                                s->text = t;
                        }
                        for (size_t j = 0; j < n; j += 2) {
                                const char *name = json_string(json_array_at(args, j));
                                if (isempty(name) || strchr(name, '='))
                                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                                         "step %u: ENV name '%.64s' is not valid", line, name);
                                if (strv_push(&s->kv, strjoin(name, "=", json_string(json_array_at(args, j + 1)))) < 0)
                                        return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                        }
                } else if (streq(type, "WORKDIR") || streq(type, "USER")) {
                        if (n != 1 || isempty(json_string(json_array_at(args, 0))))
                                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "step %u: %s takes [value]", line,
                                                 type);
                        if (step_add(df, streq(type, "USER") ? DOCKERFILE_USER : DOCKERFILE_WORKDIR, line,
                                     strjoin(type, " ", json_string(json_array_at(args, 0)))) < 0)
                                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                        s = &df->steps[df->n - 1];
                        if (!(s->args = strv_of(json_string(json_array_at(args, 0)), NULL)))
                                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                } else
                        return api_error(e, -EOPNOTSUPP, API_INVALID_ARGUMENT,
                                         "step %u: the step type '%.32s' is not supported by space's template builds "
                                         "(RUN, COPY, ENV, WORKDIR and USER are)", line, type);
        }
        return 0;
}

/* startCmd and readyCmd as the template's start setting (NULL: none). */
static int start_setting(const JsonValue *body, const char *workdir, const char *user, char **ret, ApiError *e) {
        const char *start = json_string(json_get(body, "startCmd")), *ready = json_string(json_get(body, "readyCmd"));
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *text = NULL;
        _cleanup_json_ JsonValue *v = NULL;

        *ret = NULL;
        if (isempty(start)) {
                if (!isempty(ready))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "readyCmd needs a startCmd");
                return 0;
        }
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "command", start);
        if (workdir)
                json_w_kv_string(&w, "cwd", workdir);
        if (user)
                json_w_kv_string(&w, "user", user);
        if (!isempty(ready)) {
                json_w_key(&w, "ready");
                json_w_object_begin(&w);
                json_w_kv_string(&w, "command", ready);
                json_w_object_end(&w);
        }
        json_w_object_end(&w);
        if (json_w_finish(&w, &text, NULL) < 0 || json_parse(text, strlen(text), &v, NULL, 0) < 0)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        return api_template_start_parse(v, ret, e);
}

static int trigger_build(ApiRequest *r, const char *template_id, const char *build_id, ApiError *e) {
        static const char *const allowed[] = { "force", "fromImage", "fromImageRegistry", "fromTemplate", "readyCmd",
                                               "startCmd", "steps", NULL };
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_(dockerfile_done) Dockerfile df = {};
        _cleanup_strv_free_ char **contexts = NULL;
        _cleanup_free_ char *start = NULL;
        ApiBuildSpec spec = {};
        const char *unknown = NULL;
        unsigned force_from = 0;
        E2bBuild *b;
        bool exists;
        int k;

        k = e2b_read_json(r, &body, e);
        if (k < 0)
                return k;
        if (json_check_keys(body, allowed, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));
        pthread_mutex_lock(&builds_lock);
        b = build_find(r->key.tenant_id, template_id, build_id);
        if (b && b->status != E2B_BUILD_WAITING)
                k = api_error(e, -EBUSY, API_CONFLICT, "build %.40s was started already", build_id);
        pthread_mutex_unlock(&builds_lock);
        if (!b)
                return api_error(e, -ENOENT, API_NOT_FOUND, "build %.40s of template '%.64s' not found", build_id,
                                 template_id);
        if (k < 0)
                return k;
        /* all of it checked before the answer */
        k = template_ours(r, template_id, &exists, e);
        if (k >= 0)
                k = translate(r, body, &df, &contexts, &force_from, e);
        if (k >= 0 && is_true(json_get(body, "force")))
                force_from = 1; /* skipCache() before the from: every layer */
        if (k >= 0)
                k = start_setting(body, NULL, NULL, &start, e);
        if (k >= 0)
                k = api_get_worker(r, e);
        if (k < 0)
                return k;
        pthread_mutex_lock(&builds_lock);
        b = build_find(r->key.tenant_id, template_id, build_id); /* again: it may have gone meanwhile */
        if (!b)
                k = api_error(e, -ENOENT, API_NOT_FOUND, "build %.40s of template '%.64s' not found", build_id,
                              template_id);
        else if (b->status != E2B_BUILD_WAITING)
                k = api_error(e, -EBUSY, API_CONFLICT, "build %.40s was started already", build_id);
        else
                b->status = E2B_BUILD_BUILDING;
        pthread_mutex_unlock(&builds_lock);
        if (k < 0)
                return k;

        /* answered now; the build runs on in this connection's thread, which then closes it */
        http_conn_set_close(r->conn);
        (void) e2b_reply(r, 202, NULL, NULL, 0, NULL);
        log_info("E2B template build %s of %s: %zu steps", build_id, template_id, df.n);
        spec = (ApiBuildSpec){
                .name = template_id, .tenant_id = r->key.tenant_id, .df = &df, .contexts = contexts,
                .n_contexts = strv_length(contexts), .force_from = force_from, .log = build_log, .userdata = b,
        };
        k = api_template_build_run(r, &spec, e);
        if (k >= 0) {
                start = mfree(start);
                k = start_setting(body, spec.workdir, spec.user, &start, e);
        }
        if (k >= 0) {
                k = store_object_setting_set(r->store, "template", template_id, "start", start);
                if (k < 0)
                        k = api_store_error(e, k, "recording the template's start command");
        }
        free(spec.workdir);
        free(spec.user);
        if (k >= 0)
                build_log(b, "info", "Template is ready");
        pthread_mutex_lock(&builds_lock);
        if (k < 0) {
                b->status = E2B_BUILD_ERROR;
                b->reason = strdup(e->message);
                if (spec.failed_step == 1)
                        (void) strscpy(b->reason_step, sizeof b->reason_step, "base");
                else if (spec.failed_step > 1)
                        snprintf(b->reason_step, sizeof b->reason_step, "%u", spec.failed_step - 1);
        } else
                b->status = E2B_BUILD_READY;
        pthread_mutex_unlock(&builds_lock);
        return 0;
}

/* ---- GET /templates/{id}/builds/{buildID}/status ---- */

static void write_entry(JsonWriter *w, const E2bLogLine *l) {
        char ts[E2B_TIME_MAX];

        e2b_time_format(l->usec * 1000, ts);
        json_w_object_begin(w);
        json_w_kv_string(w, "timestamp", ts);
        json_w_kv_string(w, "level", l->level);
        json_w_kv_string(w, "message", l->message);
        json_w_object_end(w);
}

static int build_status(ApiRequest *r, const char *template_id, const char *build_id, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *off = NULL;
        uint64_t offset = 0;
        E2bBuild *b;
        int k;

        k = api_query_string(r, "logsOffset", &off, e);
        if (k < 0)
                return k;
        if (k > 0 && safe_atou64(off, &offset) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "logsOffset must be a number");
        json_w_init(&w);
        pthread_mutex_lock(&builds_lock);
        b = build_find(r->key.tenant_id, template_id, build_id);
        if (b) {
                json_w_object_begin(&w);
                json_w_kv_string(&w, "templateID", b->template_id);
                json_w_kv_string(&w, "buildID", b->build_id);
                json_w_kv_string(&w, "status", status_names[b->status]);
                json_w_key(&w, "logs");
                json_w_array_begin(&w);
                for (size_t i = offset; i < b->n_lines; i++) {
                        char ts[E2B_TIME_MAX];
                        _cleanup_free_ char *line = NULL;
                        e2b_time_format(b->lines[i].usec * 1000, ts);
                        if (asprintf(&line, "[%s] %s", ts, b->lines[i].message) >= 0)
                                json_w_string(&w, line);
                }
                json_w_array_end(&w);
                json_w_key(&w, "logEntries");
                json_w_array_begin(&w);
                for (size_t i = offset; i < b->n_lines; i++)
                        write_entry(&w, &b->lines[i]);
                json_w_array_end(&w);
                if (b->status == E2B_BUILD_ERROR) {
                        json_w_key(&w, "reason");
                        json_w_object_begin(&w);
                        json_w_kv_string(&w, "message", strempty(b->reason));
                        if (b->reason_step[0])
                                json_w_kv_string(&w, "step", b->reason_step);
                        json_w_key(&w, "logEntries");
                        json_w_array_begin(&w);
                        /* the lines of the failed step: its last ones */
                        for (size_t i = b->n_lines > 20 ? b->n_lines - 20 : 0; i < b->n_lines; i++)
                                write_entry(&w, &b->lines[i]);
                        json_w_array_end(&w);
                        json_w_object_end(&w);
                }
                json_w_object_end(&w);
        }
        pthread_mutex_unlock(&builds_lock);
        if (!b)
                return api_error(e, -ENOENT, API_NOT_FOUND, "build %.40s of template '%.64s' not found", build_id,
                                 template_id);
        return e2b_reply_json(r, 200, &w, NULL);
}

/* ---- routing: segs from "v2"/"v3"/"templates" on ---- */

int e2b_templates_route(ApiRequest *r, char **s, size_t n, ApiError *e) {
        const char *m = r->head->method;
        bool get = streq(m, "GET"), post = streq(m, "POST");

        if (n == 2 && streq(s[0], "v3") && streq(s[1], "templates"))
                return post ? request_build(r, e)
                            : api_error(e, -EINVAL, API_METHOD_NOT_ALLOWED, "%.16s is not allowed here", m);
        if (n == 5 && streq(s[0], "v2") && streq(s[1], "templates") && streq(s[3], "builds"))
                return post ? trigger_build(r, s[2], s[4], e)
                            : api_error(e, -EINVAL, API_METHOD_NOT_ALLOWED, "%.16s is not allowed here", m);
        if (n == 4 && streq(s[0], "templates") && streq(s[2], "files"))
                return get ? files_link(r, s[1], s[3], e)
                           : api_error(e, -EINVAL, API_METHOD_NOT_ALLOWED, "%.16s is not allowed here", m);
        if (n == 5 && streq(s[0], "templates") && streq(s[2], "builds") && streq(s[4], "status"))
                return get ? build_status(r, s[1], s[3], e)
                           : api_error(e, -EINVAL, API_METHOD_NOT_ALLOWED, "%.16s is not allowed here", m);
        return 1; /* not ours */
}
