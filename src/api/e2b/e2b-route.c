/* SPDX-License-Identifier: MIT */
/* The E2B surface's front door: which requests are E2B's (control plane by
 * path; envd by E2b-Sandbox-Id or its own paths), X-API-KEY authentication
 * against the space key store, the envd access token of a sandbox, and the
 * error shapes E2B clients expect. */

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc-util.h"
#include "base64.h"
#include "e2b.h"
#include "fd-util.h"
#include "log.h"
#include "str-util.h"

#define E2B_SEGMENTS_MAX 8U
#define E2B_SECRET_FILE "e2b.secret"

/* ---- which requests are ours ---- */

/* First path segments of the E2B control plane (the SDKs' API paths). */
static const char *const rest_prefixes[] = { "sandboxes", "v2", "v3", "templates", "snapshots", "volumes",
                                             "volumecontent", "secrets", "teams", "events" };
/* envd's plain HTTP paths (those that do not collide with space's own). */
static const char *const envd_paths[] = { "/health", "/files", "/files/compose", "/envs", "/init" };

static bool first_segment_is(const char *path, const char *seg) {
        size_t n = strlen(seg);
        return path[0] == '/' && strncmp(path + 1, seg, n) == 0 && (path[1 + n] == 0 || path[1 + n] == '/');
}

static bool path_is_envd(const char *path) {
        for (size_t i = 0; i < ELEMENTSOF(envd_paths); i++)
                if (streq(path, envd_paths[i]))
                        return true;
        return startswith(path, "/process.Process/") || startswith(path, "/filesystem.Filesystem/");
}

bool e2b_request_is_e2b(const HttpHead *head) {
        const char *path = head->path;

        if (!path)
                return false;
        if (http_head_header(head, "E2b-Sandbox-Id"))
                return true;
        if (path_is_envd(path))
                return true;
        /* the volume content API carries the volume's token as Bearer (no /v1 path starts so) */
        if (first_segment_is(path, "volumecontent"))
                return true;
        /* the E2B control plane carries X-API-KEY; a space client (Bearer) on these paths gets the v1 answer */
        if (!http_head_header(head, "X-API-KEY") && http_head_header(head, "Authorization"))
                return false;
        for (size_t i = 0; i < ELEMENTSOF(rest_prefixes); i++)
                if (first_segment_is(path, rest_prefixes[i]))
                        return true;
        return false;
}

/* ---- replies ---- */

int e2b_reply(ApiRequest *r, int status, const char *content_type, const void *body, size_t n, const char *headers) {
        char hdr[512];

        /* a body we did not read would be taken for the next request: close instead */
        if (!r->body_read && (r->head->content_length > 0 || r->head->chunked))
                http_conn_set_close(r->conn);
        if (r->retry_after_s > 0 && (status == 429 || status == 503))
                snprintf(hdr, sizeof hdr, "X-Request-Id: %s\r\nRetry-After: %d\r\n%s", r->req_id, r->retry_after_s,
                         strempty(headers));
        else
                snprintf(hdr, sizeof hdr, "X-Request-Id: %s\r\n%s", r->req_id, strempty(headers));
        r->status = status;
        return http_conn_respond(r->conn, status, content_type, body, n, hdr);
}

int e2b_reply_json(ApiRequest *r, int status, JsonWriter *w, const char *headers) {
        _cleanup_free_ char *text = NULL;
        size_t n;

        if (json_w_finish(w, &text, &n) < 0) {
                static const char oom[] = "{\"code\":500,\"message\":\"out of memory\"}";
                return e2b_reply(r, 500, "application/json", oom, STRLEN(oom), NULL);
        }
        return e2b_reply(r, status, "application/json", text, n, headers);
}

void e2b_log_error(int status, const ApiError *e) {
        /* the request line says the status; this says why */
        log_full_errno(status >= 500 ? LOG_WARNING_ : LOG_DEBUG_, 0, "E2B error %d (%s): %s", status,
                       api_error_code_to_string(e->code) ?: "?", e->message);
}

int e2b_reply_error(ApiRequest *r, const ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w = {};
        int status = api_error_code_to_status(e->code);

        e2b_log_error(status, e);
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_int(&w, "code", status);
        json_w_kv_string(&w, "message", e->message);
        json_w_object_end(&w);
        return e2b_reply_json(r, status, &w, NULL);
}

int e2b_reply_gone(ApiRequest *r, const char *sandbox_id) {
        _cleanup_(json_w_done) JsonWriter w = {};

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "sandboxId", sandbox_id);
        json_w_kv_string(&w, "message", "The sandbox was not found");
        json_w_kv_int(&w, "code", 502);
        json_w_object_end(&w);
        return e2b_reply_json(r, 502, &w, NULL);
}

int e2b_read_json(ApiRequest *r, JsonValue **ret, ApiError *e) {
        _cleanup_free_ char *buf = NULL;
        char errbuf[128] = "";
        size_t n = 0;
        int k;

        if (r->head->content_length > (int64_t) E2B_BODY_MAX)
                return api_error(e, -EFBIG, API_PAYLOAD_TOO_LARGE, "request bodies are limited to %u bytes",
                                 E2B_BODY_MAX);
        k = http_conn_read_body_all(r->conn, E2B_BODY_MAX, &buf, &n);
        if (k == -EFBIG)
                return api_error(e, k, API_PAYLOAD_TOO_LARGE, "request bodies are limited to %u bytes", E2B_BODY_MAX);
        if (k < 0)
                return api_error(e, k, API_BAD_REQUEST, "could not read the request body: %s", strerror(-k));
        r->body_read = true;
        k = n == 0 ? json_parse("{}", 2, ret, NULL, 0) : json_parse(buf, n, ret, errbuf, sizeof errbuf);
        if (k == -ENOMEM)
                return api_error(e, k, API_UNAVAILABLE, "out of memory");
        if (k < 0)
                return api_error(e, k, API_INVALID_JSON, "malformed JSON: %s", errbuf[0] ? errbuf : strerror(-k));
        if (json_type(*ret) != JSON_OBJECT) {
                *ret = json_free(*ret);
                return api_error(e, -EINVAL, API_INVALID_JSON, "the body must be a JSON object");
        }
        return 0;
}

/* ---- the server secret and access tokens ---- */

static pthread_mutex_t secret_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t secret[E2B_SECRET_LEN];
static char secret_dir[CONFIG_STR_MAX];

static int secret_read(const char *path) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        ssize_t k;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode) || st.st_size != E2B_SECRET_LEN || (st.st_mode & 077))
                return -EBADMSG;
        k = loop_read(fd, secret, E2B_SECRET_LEN);
        if (k < 0)
                return (int) k;
        return k == E2B_SECRET_LEN ? 0 : -EBADMSG;
}

/* Creates the secret once (a temporary file linked into place: a racing
 * creator's secret wins, never a half-written one), then reads it. */
static int secret_load(const char *state_dir) {
        uint8_t fresh[E2B_SECRET_LEN];
        char path[CONFIG_STR_MAX + 32], tmp[CONFIG_STR_MAX + 48], rnd[9];
        _cleanup_close_ int fd = -EBADF;
        int r;

        snprintf(path, sizeof path, "%s/%s", state_dir, E2B_SECRET_FILE);
        r = secret_read(path);
        if (r != -ENOENT)
                return r;
        r = random_alnum(rnd, 8);
        if (r < 0)
                return r;
        rnd[8] = 0;
        snprintf(tmp, sizeof tmp, "%s/.%s.%s", state_dir, E2B_SECRET_FILE, rnd);
        r = random_bytes(fresh, sizeof fresh);
        if (r < 0)
                return r;
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return negative_errno();
        r = loop_write(fd, fresh, sizeof fresh);
        if (r >= 0 && fsync(fd) < 0)
                r = negative_errno();
        explicit_bzero(fresh, sizeof fresh);
        if (r >= 0 && link(tmp, path) < 0 && errno != EEXIST)
                r = negative_errno();
        (void) unlink(tmp);
        if (r < 0)
                return r;
        return secret_read(path);
}

int e2b_access_token(const Config *c, const char *sandbox_id, char ret[static E2B_TOKEN_LEN + 1]) {
        return e2b_secret_hmac(c, sandbox_id, ret);
}

int e2b_secret_hmac(const Config *c, const char *msg, char ret[static E2B_TOKEN_LEN + 1]) {
        const char *sandbox_id = msg;
        uint8_t md[EVP_MAX_MD_SIZE];
        unsigned md_len = 0;
        int r = 0;

        pthread_mutex_lock(&secret_lock);
        if (!streq(secret_dir, c->state_dir)) {
                r = secret_load(c->state_dir);
                if (r >= 0)
                        (void) strscpy(secret_dir, sizeof secret_dir, c->state_dir);
                else
                        secret_dir[0] = 0;
        }
        if (r >= 0 && (!HMAC(EVP_sha256(), secret, sizeof secret, (const uint8_t *) sandbox_id, strlen(sandbox_id),
                             md, &md_len) ||
                       md_len != 32))
                r = -EIO;
        pthread_mutex_unlock(&secret_lock);
        if (r == -EBADMSG)
                return log_error_errno(r, "Refusing %s/%s: it must be a regular file of %u bytes that only its "
                                       "owner can read (mode 0600); delete it to make a new one (this rotates "
                                       "every envdAccessToken)", c->state_dir, E2B_SECRET_FILE, E2B_SECRET_LEN);
        if (r < 0)
                return log_error_errno(r, "Failed to use %s/%s: %m", c->state_dir, E2B_SECRET_FILE);
        hexencode(md, 32, ret);
        explicit_bzero(md, sizeof md);
        return 0;
}

/* ---- control-plane auth: X-API-KEY is a space API key ---- */

static int e2b_auth(ApiRequest *r, ApiError *e) {
        const char *h = http_head_header(r->head, "X-API-KEY");
        size_t n;
        int k;

        if (!h)
                return api_error(e, -EACCES, API_UNAUTHORIZED, "missing 'X-API-KEY: <space api key>' header");
        n = strlen(h);
        while (n > 0 && h[n - 1] == ' ')
                n--;
        k = api_auth_token(r, h, n, e);
        if (k < 0)
                return k;
        return api_limits_enter(r, false, e);
}

/* ---- envd requests ---- */

void e2b_envd_done(E2bEnvd *x) {
        sandbox_done(&x->sb);
}

/* "Basic base64(user:)" → user; empty if absent. */
static int parse_basic_user(const char *h, char *out, size_t size, ApiError *e) {
        _cleanup_free_ void *dec = NULL;
        size_t n = 0, l;
        const char *colon;

        out[0] = 0;
        if (!h)
                return 0;
        if (strncasecmp(h, "Basic ", 6) != 0)
                return api_error(e, -EINVAL, API_UNAUTHORIZED, "the Authorization header must be 'Basic <user:>'");
        h += 6;
        h += strspn(h, " ");
        l = strcspn(h, " ");
        if (l == 0 || l > 4 * E2B_USER_NAME_MAX || base64_decode(h, l, &dec, &n) < 0)
                return api_error(e, -EINVAL, API_UNAUTHORIZED, "malformed Basic credentials");
        colon = memchr(dec, ':', n);
        l = colon ? (size_t) (colon - (const char *) dec) : n;
        if (l == 0 || l >= size)
                return api_error(e, -EINVAL, API_UNAUTHORIZED, "malformed user name in the Basic credentials");
        for (size_t i = 0; i < l; i++) {
                char c = ((const char *) dec)[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                      c == '-' || c == '.'))
                        return api_error(e, -EINVAL, API_UNAUTHORIZED, "malformed user name in the Basic credentials");
        }
        memcpy(out, dec, l);
        out[l] = 0;
        return 0;
}

/* A /files request without X-Access-Token may carry E2B's signature
 * instead (downloadUrl/uploadUrl): signature=v1_<base64(sha256(
 * "<path>:<read|write>:<username>:<envd token>[:<expiration>]")), '='
 * stripped>, with signature_expiration=<unix s> if it expires. 1 if it
 * is there and right, 0 if there is none, -EACCES if wrong or expired. */
static int files_signature_check(ApiRequest *r, const char *token) {
        _cleanup_free_ char *sig = NULL, *path = NULL, *user = NULL, *exp = NULL, *raw = NULL, *b64 = NULL;
        uint8_t md[SHA256_DIGEST_LENGTH];
        const char *op;
        size_t n = 0;
        int k;

        if (!r->head->query || http_query_get(r->head->query, "signature", &sig) < 0)
                return 0;
        if (!streq(r->head->path, "/files"))
                return -EACCES;
        op = streq(r->head->method, "POST") ? "write" : (streq(r->head->method, "GET") || streq(r->head->method, "HEAD")) ? "read" : NULL;
        if (!op || !startswith(sig, "v1_"))
                return -EACCES;
        (void) http_query_get(r->head->query, "path", &path);
        (void) http_query_get(r->head->query, "username", &user);
        k = http_query_get(r->head->query, "signature_expiration", &exp);
        if (k >= 0) {
                uint64_t e = 0;
                if (isempty(exp) || strlen(exp) > 19 || strspn(exp, "0123456789") != strlen(exp))
                        return -EACCES;
                e = strtoull(exp, NULL, 10);
                if (e < (uint64_t) time(NULL))
                        return -EACCES;
        }
        raw = exp ? strdup_printf("%s:%s:%s:%s:%s", strempty(path), op, strempty(user), token, exp)
                  : strdup_printf("%s:%s:%s:%s", strempty(path), op, strempty(user), token);
        if (!raw)
                return -ENOMEM;
        SHA256((const uint8_t *) raw, strlen(raw), md);
        explicit_bzero(raw, strlen(raw));
        k = base64_encode(md, sizeof md, &b64, &n);
        if (k < 0)
                return k;
        while (n > 0 && b64[n - 1] == '=')
                n--;
        if (strlen(sig + 3) != n || CRYPTO_memcmp(sig + 3, b64, n) != 0)
                return -EACCES;
        return 1;
}

/* Returns 1 if the request may go on with x filled, 0 if answered already.
 * activity: the request counts as use of the sandbox for its idle policy
 * (everything but a health probe: an SDK's isRunning() must not keep a
 * sandbox from its autoPause). */
static int envd_begin(ApiRequest *r, E2bEnvd *x, bool rpc, bool activity) {
        const char *id = r->envd_sandbox ?: http_head_header(r->head, "E2b-Sandbox-Id");
        const char *token = http_head_header(r->head, "X-Access-Token");
        char want[E2B_TOKEN_LEN + 1];
        ApiError e = {};
        int k;

        x->r = r;
        if (!id) {
                (void) api_error(&e, -EINVAL, API_BAD_REQUEST,
                                 "missing E2b-Sandbox-Id header (set E2B_SANDBOX_URL to this server)");
                return rpc ? e2b_unary_error(r, &e) : e2b_reply_error(r, &e), 0;
        }
        if (!api_sandbox_id_valid(id))
                return e2b_reply_gone(r, id), 0;
        /* the token depends on the id alone: check it before anything about the sandbox is revealed */
        k = e2b_access_token(api_config(r->api), id, want);
        if (k < 0) {
                (void) api_error(&e, k, API_INTERNAL, "access tokens are unavailable");
                return rpc ? e2b_unary_error(r, &e) : e2b_reply_error(r, &e), 0;
        }
        if (!token && (k = files_signature_check(r, want)) != 0) {
                if (k < 0) {
                        explicit_bzero(want, sizeof want);
                        (void) api_error(&e, -EACCES, API_UNAUTHORIZED,
                                         "the signature of this URL is wrong or has expired");
                        return rpc ? e2b_unary_error(r, &e) : e2b_reply_error(r, &e), 0;
                }
                token = want; /* signed: as good as the token for this one request */
        }
        if (!token || strlen(token) != E2B_TOKEN_LEN || CRYPTO_memcmp(token, want, E2B_TOKEN_LEN) != 0) {
                explicit_bzero(want, sizeof want);
                (void) api_error(&e, -EACCES, API_UNAUTHORIZED,
                                 "missing or wrong X-Access-Token (the envdAccessToken of the sandbox)");
                return rpc ? e2b_unary_error(r, &e) : e2b_reply_error(r, &e), 0;
        }
        explicit_bzero(want, sizeof want);

        k = api_get_store(r, &e);
        if (k >= 0)
                k = store_sandbox_get(r->store, NULL, id, &x->sb);
        if (k == -ENOENT)
                return e2b_reply_gone(r, id), 0;
        if (k < 0) {
                if (e.code == API_OK)
                        (void) api_store_error(&e, k, "looking up the sandbox");
                return rpc ? e2b_unary_error(r, &e) : e2b_reply_error(r, &e), 0;
        }
        api_log_sandbox(r, x->sb.id);
        /* the request acts for the sandbox's tenant (events, logs) */
        (void) strscpy(r->key.tenant_id, sizeof r->key.tenant_id, x->sb.tenant_id);
        snprintf(r->actor, sizeof r->actor, "envd:%s", x->sb.id);
        /* autoResume: a request that reaches a paused sandbox wakes it (as E2B's edge proxy does) */
        if (x->sb.state == SANDBOX_PAUSED && (x->sb.auto_resume || api_config(r->api)->auto_resume_paused)) {
                k = api_sandbox_resume_paused(r, &x->sb, "resumed by an envd request (autoResume)", &e);
                if (k < 0 && e.code != API_SANDBOX_NOT_RUNNING)
                        return rpc ? e2b_unary_error(r, &e) : e2b_reply_error(r, &e), 0;
        }
        if (x->sb.state != SANDBOX_RUNNING)
                return e2b_reply_gone(r, id), 0;
        if (activity && x->sb.idle_s > 0) /* for the idle policy (autoPause); a store write only when it counts */
                (void) store_sandbox_touch(r->store, x->sb.id);
        k = parse_basic_user(http_head_header(r->head, "Authorization"), x->user, sizeof x->user, &e);
        if (k < 0)
                return rpc ? e2b_unary_error(r, &e) : e2b_reply_error(r, &e), 0;
        return 1;
}

int e2b_envd_agent(E2bEnvd *x, int *ret_fd, ApiError *e) {
        return agent_call_connect(x->r, &x->sb, ret_fd, e);
}

static int envd_handle(ApiRequest *r) {
        _cleanup_(e2b_envd_done) E2bEnvd x = {};
        const char *path = r->head->path, *m = r->head->method, *method;
        bool rpc = false;
        ApiError e = {};

        if ((method = startswith(path, "/process.Process/")) || (method = startswith(path, "/filesystem.Filesystem/")))
                rpc = true;
        if (rpc && !streq(m, "POST")) {
                (void) api_error(&e, -EINVAL, API_METHOD_NOT_ALLOWED, "Connect calls are POST requests");
                return e2b_unary_error(r, &e);
        }
        if (envd_begin(r, &x, rpc, rpc || !streq(path, "/health")) <= 0)
                return 0;
        if (rpc)
                return startswith(path, "/process.Process/") ? e2b_process_handle(&x, method)
                                                               : e2b_filesystem_handle(&x, method);
        if (streq(path, "/health") && (streq(m, "GET") || streq(m, "HEAD")))
                return e2b_envd_health(&x);
        if (streq(path, "/files") && (streq(m, "GET") || streq(m, "HEAD")))
                return e2b_envd_files_get(&x);
        if (streq(path, "/files") && streq(m, "POST"))
                return e2b_envd_files_post(&x);
        if (streq(path, "/files/compose") && streq(m, "POST"))
                return e2b_envd_files_compose(&x);
        if (streq(path, "/health") || streq(path, "/files") || streq(path, "/files/compose")) {
                (void) api_error(&e, -EINVAL, API_METHOD_NOT_ALLOWED, "%.16s is not allowed on %s", m, path);
                return e2b_reply_error(r, &e);
        }
        (void) api_error(&e, -ENOENT, API_NOT_FOUND, "%s is not supported by space's envd", path);
        return e2b_reply_error(r, &e);
}

static int rest_handle(ApiRequest *r) {
        _cleanup_free_ char *copy = NULL;
        char *segs[E2B_SEGMENTS_MAX];
        ApiError e = {};
        int n, k;

        bool content = first_segment_is(r->head->path, "volumecontent"); /* its own auth (e2b-volumes.c) */

        k = api_get_store(r, &e);
        if (k >= 0 && !content && e2b_template_upload_request(r->head))
                return e2b_template_upload(r); /* its URL's signature is its right (e2b-templates.c) */
        if (k >= 0 && !content)
                k = e2b_auth(r, &e);
        if (k < 0)
                return e2b_reply_error(r, &e);
        copy = strdup(r->head->path);
        if (!copy) {
                (void) api_error(&e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                return e2b_reply_error(r, &e);
        }
        n = api_split_path(copy, segs, ELEMENTSOF(segs));
        if (n <= 0) {
                (void) api_error(&e, -ENOENT, API_NOT_FOUND, "no such endpoint");
                return e2b_reply_error(r, &e);
        }
        return e2b_rest_handle(r, segs, (size_t) n);
}

int e2b_handle(ApiRequest *r) {
        if (r->envd_sandbox || http_head_header(r->head, "E2b-Sandbox-Id") || path_is_envd(r->head->path))
                (void) envd_handle(r);
        else
                (void) rest_handle(r);
        if (!http_conn_responded(r->conn)) {
                ApiError e = {};
                (void) api_error(&e, -EIO, API_INTERNAL, "the handler did not respond");
                (void) e2b_reply_error(r, &e);
        }
        return 0;
}
