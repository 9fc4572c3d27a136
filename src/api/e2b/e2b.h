/* SPDX-License-Identifier: MIT */
#pragma once

/* The E2B-compatible surface: the E2B SDKs (npm `e2b` 2.x; the Python SDK's
 * routes too) and the agents built on them work against spaced unchanged, with
 * E2B_API_URL and E2B_SANDBOX_URL both pointing at spaced's listener. The wire
 * contract is /work/shared/E2B-COMPAT.md; README.md says what is supported.
 *
 *   e2b-route.c       which requests are E2B's, X-API-KEY auth, envd access
 *                     tokens, the sandbox of an envd request, error replies
 *   e2b-rest.c        control plane: /v2/sandboxes, /sandboxes/{id}/...
 *   e2b-snapshots.c   snapshots and fork (space checkpoints and branch)
 *   e2b-envd.c        envd plain HTTP: /health, /files (upload, download)
 *   e2b-connect.c     Connect protocol: envelopes, codes, proto3-JSON helpers
 *   e2b-multipart.c   streaming multipart/form-data parser
 *   e2b-users.c       users of the sandbox (/etc/passwd), path resolution
 *   e2b-process.c     process.Process over the agent's EXEC/ATTACH/PS/...
 *   e2b-process-input.c  process.Process input: SendInput, CloseStdin, StreamInput
 *   e2b-filesystem.c  filesystem.Filesystem over the agent's FILE_* requests
 *
 * Control-plane requests carry X-API-KEY (a space API key; the tenant's
 * sandboxes are the same on both surfaces). envd requests carry no API key:
 * E2b-Sandbox-Id names the sandbox and X-Access-Token must be its
 * envdAccessToken, HMAC-SHA256(<state_dir>/e2b.secret, id), handed out by
 * create and connect. Nothing E2B-specific is stored. */

#include "api-internal.h"

#define E2B_ENVD_VERSION "0.6.13"          /* what the SDKs gate features on (>= 0.6.4 enables all) */
#define E2B_DEFAULT_USER "user"            /* E2B templates' user; root if the template has none */
#define E2B_DEFAULT_TIMEOUT_S 300U         /* sandbox timeout when create names none */
#define E2B_TOKEN_LEN 64U                  /* hex HMAC-SHA256 */
#define E2B_SECRET_LEN 32U
#define E2B_BODY_MAX (4U * 1024U * 1024U)  /* JSON and Connect request bodies */
#define E2B_FORK_MAX 100U /* children of one fork (made max_branch at a time) */
#define E2B_LIST_LIMIT_DEFAULT 100U
#define E2B_LIST_LIMIT_MAX 1000U
#define E2B_KEEPALIVE_DEFAULT_SEC 90U      /* envd's default without Keepalive-Ping-Interval */
#define E2B_KEEPALIVE_MAX_SEC 3600U
#define E2B_USER_NAME_MAX 64U

/* ---- e2b-route.c ---- */

/* True if the request belongs to the E2B surface (by path, or by E2b-Sandbox-Id). */
bool e2b_request_is_e2b(const HttpHead *head);
/* Serves an E2B request; always responds. Returns 0. */
int e2b_handle(ApiRequest *r);

/* The envdAccessToken of a sandbox (hex, NUL-terminated). */
int e2b_access_token(const Config *c, const char *sandbox_id, char ret[static E2B_TOKEN_LEN + 1]);
/* HMAC-SHA256 of msg under the server secret (hex): e2b_access_token() is that
 * of the id; other uses (ingress traffic tokens) prefix msg with a label of
 * their own, so that one token never stands for another. */
int e2b_secret_hmac(const Config *c, const char *msg, char ret[static E2B_TOKEN_LEN + 1]);

/* An envd request: its sandbox (running, token checked) and user. */
typedef struct E2bEnvd {
        ApiRequest *r;
        Sandbox sb;
        char user[E2B_USER_NAME_MAX + 1]; /* from "Authorization: Basic base64(user:)", or "" */
} E2bEnvd;

void e2b_envd_done(E2bEnvd *x);
/* Connects to the sandbox's agent; the envd error replies say 502 when it is gone. */
int e2b_envd_agent(E2bEnvd *x, int *ret_fd, ApiError *e);

/* Replies: control plane and envd HTTP: {"code":<status>,"message":"..."}. */
int e2b_reply(ApiRequest *r, int status, const char *content_type, const void *body, size_t n, const char *headers);
int e2b_reply_json(ApiRequest *r, int status, JsonWriter *w, const char *headers);
int e2b_reply_error(ApiRequest *r, const ApiError *e);
/* Logs why a request failed (warning for 5xx, else debug). */
void e2b_log_error(int status, const ApiError *e);
/* E2B's edge-proxy answer for a sandbox that is not running: 502 {"sandboxId","message","code":502}. */
int e2b_reply_gone(ApiRequest *r, const char *sandbox_id);
/* Reads a JSON object body (an empty one is {}) bounded by E2B_BODY_MAX. */
int e2b_read_json(ApiRequest *r, JsonValue **ret, ApiError *e);

/* ---- e2b-rest.c: control plane (authenticated) ---- */

int e2b_rest_handle(ApiRequest *r, char **segs, size_t n_segs);
/* e2b-volumes.c: /volumes[/{volumeID}] (segs from "volumes" on) */
int e2b_volumes_route(ApiRequest *r, char **segs, size_t n_segs, ApiError *e);
/* /volumecontent/{volumeID}/{file|path|dir}: authenticated by the volume's token, not a key */
int e2b_volume_content_route(ApiRequest *r, char **segs, size_t n_segs, ApiError *e);
#define E2B_VOLUME_TOKEN_MAX (STORE_ID_MAX + E2B_TOKEN_LEN + 2)
int e2b_volume_token(ApiRequest *r, const Volume *v, char ret[static E2B_VOLUME_TOKEN_MAX]);
/* The Sandbox object of create, connect and fork. */
int e2b_write_sandbox(ApiRequest *r, JsonWriter *w, const Sandbox *sb);
/* lifecycle.onTimeout 'pause' (autoPause): space's idle policy with pause
 * (suspend without memory) and no deleting timeout. */
bool e2b_auto_pause(const Sandbox *sb);
/* The lifecycle of a create body: autoPause → on_timeout pause (suspend with
 * autoPauseMemory false), else none (the timeout kills); autoResume.enabled. */
typedef struct E2bLifecycle {
        IdleAction on_timeout;
        bool auto_resume;
} E2bLifecycle;
int e2b_body_lifecycle(const JsonValue *in, E2bLifecycle *ret, ApiError *e);
/* e2b-network.c: allow_internet_access (internet) and the network object of a
 * create (create) or an update's body → a space egress policy's JSON in *ret,
 * NULL when nothing was asked and the deployment's default applies. */
int e2b_network_policy(const JsonValue *internet, const JsonValue *net, const Config *c, bool create, char **ret,
                       ApiError *e);
/* SandboxDetail's allowInternetAccess and network of sb: E2B's fields read back from an E2B-made policy
 * (allowInternetAccess null and no allowOut/denyOut for any other) */
void e2b_network_write_info(JsonWriter *w, const Sandbox *sb);
/* network.rules of net (header transforms naming ${e2b.secrets.NAME}) → a
 * JSON array of the space credentials that do them, to grant; *ret NULL
 * without rules. A transform no credential does is a 400. */
int e2b_network_credentials(ApiRequest *r, const JsonValue *net, char **ret, ApiError *e);
/* network.maskRequestHost, checked, into ret ("" if absent). */
int e2b_mask_host(const JsonValue *v, char ret[static STORE_INGRESS_HOST_MAX], ApiError *e);
/* PUT /sandboxes/{id}/network → 204 */
int e2b_network_update(ApiRequest *r, const char *id, ApiError *e);
/* Extends (only_extend) or sets the expiry, or an autoPause sandbox's idle window. */
int e2b_set_expiry(ApiRequest *r, const Sandbox *sb, uint64_t timeout_s, bool only_extend, ApiError *e);

/* ---- e2b-snapshots.c: snapshots and fork over checkpoints and branch ---- */

int e2b_snapshot_create(ApiRequest *r, const char *sandbox_id, ApiError *e);
int e2b_snapshot_list(ApiRequest *r, ApiError *e);
int e2b_snapshot_delete(ApiRequest *r, const char *snapshot_id, ApiError *e);
int e2b_fork(ApiRequest *r, const char *sandbox_id, ApiError *e);
/* GET /v2/sandboxes/{id}/logs (v1: the older /sandboxes/{id}/logs shape), from its events (e2b-logs.c). */
int e2b_sandbox_logs(ApiRequest *r, const char *id, bool v1, ApiError *e);
/* /secrets[/{id}]: space's credentials (e2b-secrets.c). */
/* e2b-templates.c: template builds (/v3/templates, /v2/templates/{id}/builds/{b}, /templates/{id}/files/{h},
 * /templates/{id}/builds/{b}/status); 1 for a path that is none of them. */
int e2b_templates_route(ApiRequest *r, char **segs, size_t n_segs, ApiError *e);
/* The signed upload of a COPY's files (PUT /templates/{id}/files/{hash}?signature=...): no API key. */
bool e2b_template_upload_request(const HttpHead *head);
int e2b_template_upload(ApiRequest *r);

int e2b_secrets_route(ApiRequest *r, char **segs, size_t n_segs, ApiError *e);
/* /templates/tags and /templates/{id}/tags (e2b-tags.c) */
int e2b_template_tags_route(ApiRequest *r, char **segs, size_t n_segs, ApiError *e);
/* e2b-metrics.c: GET /sandboxes/{id}/metrics (sb looked up) and GET /sandboxes/metrics?sandbox_ids= */
int e2b_metrics(ApiRequest *r, const Sandbox *sb, ApiError *e);
int e2b_metrics_many(ApiRequest *r, ApiError *e);
/* Create with a templateID that is a snapshot's id or name: 1 = done (replied), 0 = not a snapshot. */
int e2b_create_from_snapshot(ApiRequest *r, const char *ref, const JsonValue *in, ApiError *e);

/* ---- e2b-envd.c ---- */

int e2b_envd_health(E2bEnvd *x);
int e2b_envd_files_get(E2bEnvd *x);
int e2b_envd_files_post(E2bEnvd *x);
int e2b_envd_files_compose(E2bEnvd *x);

/* ---- e2b-connect.c ---- */

#define E2B_ENVELOPE_HEADER 5U
#define E2B_ENVELOPE_FLAG_COMPRESSED 0x01U
#define E2B_ENVELOPE_FLAG_END 0x02U

/* The 5-byte prefix of an envelope: flags, then the length big-endian. */
void e2b_envelope_header(uint8_t out[static E2B_ENVELOPE_HEADER], uint8_t flags, uint32_t len);
/* Decodes one envelope at the start of (p, n). Returns 1 with the flags, a view
 * of the message and the envelope's whole size; 0 if more bytes are needed;
 * -EBADMSG for a compressed or unknown flag; -EMSGSIZE if longer than max. */
int e2b_envelope_decode(const void *p, size_t n, size_t max, uint8_t *ret_flags, Slice *ret_msg, size_t *ret_size);
/* The body of a server-streaming request: exactly one envelope with flags 0. -EBADMSG otherwise. */
int e2b_envelope_request(const void *p, size_t n, Slice *ret_msg);

/* Connect code for an error ("not_found", ...) and its HTTP status. */
const char *e2b_connect_code(ApiErrorCode c);
int e2b_connect_status(ApiErrorCode c);

/* Unary replies (application/json). */
int e2b_unary_reply(ApiRequest *r, JsonWriter *w);
int e2b_unary_error(ApiRequest *r, const ApiError *e);
/* A unary method of an envd service (process.Process, filesystem.Filesystem). */
typedef struct E2bUnaryMethod {
        const char *name;
        int (*run)(E2bEnvd *x, ApiError *e);
} E2bUnaryMethod;
/* Runs the method of service named method from methods (n of them) and
 * replies for it where it failed: nothing more if it had responded already
 * (the connection closes), E2B's 502 if the sandbox's agent is gone, else
 * the Connect error; an unknown method is not_implemented. */
int e2b_unary_dispatch(E2bEnvd *x, const char *service, const E2bUnaryMethod *methods, size_t n,
                       const char *method);
/* Server streams (application/connect+json, always 200). end: NULL = success. */
int e2b_stream_begin(ApiRequest *r);
int e2b_stream_send(ApiRequest *r, JsonWriter *w);
int e2b_stream_end(ApiRequest *r, const ApiError *e);
/* The sandbox went away under a stream: the connection ends without the
 * end-of-stream message, as E2B's edge drops it when the sandbox dies. The
 * SDKs read that as a dropped connection, probe /health (502: gone) and say
 * "The sandbox was killed or reached its end of life while the request was
 * in flight" (JS: TimeoutError, newer Python: SandboxNotFoundException). */
int e2b_stream_abort(ApiRequest *r);
/* A stream that fails before its first message: 200 and the end-stream error. */
int e2b_stream_fail(ApiRequest *r, const ApiError *e);

/* proto3 JSON input: the field by its JSON (lowerCamel) or proto (snake) name; NULL if absent or null. */
const JsonValue *e2b_field(const JsonValue *obj, const char *json_name, const char *proto_name);
/* bytes: standard or URL-safe base64, padded or not. */
int e2b_bytes_decode(const JsonValue *v, void **ret, size_t *ret_len);
/* uint32 given as a number or a decimal string. */
int e2b_uint32(const JsonValue *v, uint32_t *ret);
/* An enum given by name (names[i] is value i, NULL for holes) or number. */
int e2b_enum(const JsonValue *v, const char *const *names, size_t n_names, int *ret);

#define E2B_TIME_MAX 40U
/* RFC 3339 with nanoseconds: "2024-01-02T03:04:05.123456789Z". */
void e2b_time_format(int64_t nsec, char buf[static E2B_TIME_MAX]);
#define E2B_MODE_STRING_MAX 16U
/* Go's FileMode.String() of a st_mode: "-rw-r--r--", "drwxr-xr-x", "Lrwxrwxrwx", "dtrwxrwxrwx". */
void e2b_mode_string(uint32_t st_mode, char buf[static E2B_MODE_STRING_MAX]);

/* ---- e2b-multipart.c ---- */

#define E2B_MULTIPART_BOUNDARY_MAX 70U
#define E2B_MULTIPART_HEADERS_MAX (8U * 1024U)  /* headers of one part */
#define E2B_MULTIPART_BUF (64U * 1024U)
#define E2B_MULTIPART_NAME_MAX 256U
#define E2B_MULTIPART_FILENAME_MAX 4096U

typedef enum E2bMultipartEvent {
        E2B_MULTIPART_PART_BEGIN, /* name, filename of the part are set */
        E2B_MULTIPART_DATA,
        E2B_MULTIPART_PART_END,
} E2bMultipartEvent;

typedef struct E2bMultipart E2bMultipart;
/* Returns < 0 to stop the parse (the error is passed back by feed). */
typedef int (*E2bMultipartCallback)(E2bMultipart *m, E2bMultipartEvent ev, const char *p, size_t n, void *userdata);

struct E2bMultipart {
        char delim[4 + E2B_MULTIPART_BOUNDARY_MAX + 1]; /* "\r\n--" boundary */
        size_t delim_len;
        int state;
        char *buf;          /* E2B_MULTIPART_BUF + E2B_MULTIPART_HEADERS_MAX bytes */
        size_t len;         /* bytes held in buf */
        size_t parts;
        char name[E2B_MULTIPART_NAME_MAX + 1];
        char filename[E2B_MULTIPART_FILENAME_MAX + 1];
        bool has_filename;
};

/* From a Content-Type "multipart/form-data; boundary=...": -EINVAL if it is not one. */
int e2b_multipart_init(E2bMultipart *m, const char *content_type);
void e2b_multipart_done(E2bMultipart *m);
/* Feeds body bytes; n == 0 means the body ended (-EBADMSG if the last part is
 * unfinished). Returns 1 once the closing delimiter was seen, 0 to go on,
 * -EBADMSG malformed, -E2BIG headers too long, or the callback's error. */
int e2b_multipart_feed(E2bMultipart *m, const char *p, size_t n, E2bMultipartCallback cb, void *userdata);

/* ---- e2b-users.c ---- */

typedef struct E2bUser {
        char name[E2B_USER_NAME_MAX + 1];
        uint32_t uid, gid;
        char home[API_PATH_MAX + 1];
} E2bUser;

/* The sandbox's /etc/passwd and /etc/group (bounded), read through the agent. */
typedef struct E2bAccounts {
        char *passwd, *group;
        size_t passwd_len, group_len;
} E2bAccounts;

#define E2B_ACCOUNTS_FILE_MAX (1024U * 1024U)

void e2b_accounts_done(E2bAccounts *a);
int e2b_accounts_load(int fd, bool with_groups, E2bAccounts *ret, ApiError *e);
/* Looks a user up by name in passwd text (p, n): 0 or -ENOENT. Pure. */
int e2b_passwd_find(const char *p, size_t n, const char *name, E2bUser *ret);
/* The name of an id in passwd or group text (p, n) (field 3); -ENOENT if none. Pure. */
int e2b_id_name(const char *p, size_t n, uint32_t id, char *buf, size_t size);
/* The request's user (default E2B_DEFAULT_USER, else root): 401 unauthenticated if named and unknown. */
int e2b_user_resolve(const E2bEnvd *x, const E2bAccounts *acc, E2bUser *ret, ApiError *e);
/* An absolute, normalised path inside the sandbox: "~" and relative paths
 * start at home, "." and ".." are resolved lexically, 400 for empty paths,
 * NULs or more than API_PATH_MAX bytes. Pure. */
int e2b_path_resolve(const char *p, size_t n, const char *home, char **ret, ApiError *e);
/* Reads a small file through the agent (at most max bytes; a longer one is cut). */
int e2b_agent_read_small(int fd, const char *path, size_t max, char **ret, size_t *ret_len, ApiError *e);

/* ---- e2b-procs.c ---- */

#define E2B_EXEC_ID_MAX 63U

/* Remembers what PS does not know of a started process; takes tag, cwd and envs_json (NULL or malloc'd). */
void e2b_procs_add(const char *sandbox, uint32_t pid, const char *exec_id, char *tag, char *cwd, char *envs_json);
void e2b_procs_forget(const char *sandbox, const char *exec_id);
/* The pid of a tagged process of the sandbox: 0 if none. */
uint32_t e2b_procs_pid_by_tag(const char *sandbox, const char *tag);
/* Writes "envs" and "cwd" of a known process into w; *ret_known, *ret_tag (malloc'd or NULL). */
void e2b_procs_write_config(JsonWriter *w, const char *sandbox, const char *exec_id, bool *ret_known, char **ret_tag);
/* Reads the agent connection fd (taken) to the process's exit, on a thread of its own. */
void e2b_drain_start(int fd, const char *sandbox, const char *exec_id);

/* ---- e2b-process.c, e2b-filesystem.c: /<service>/<Method> ---- */

int e2b_process_handle(E2bEnvd *x, const char *method);

/* A running process of the sandbox as the agent's PS shows it. */
typedef struct E2bProc {
        char exec_id[E2B_EXEC_ID_MAX + 1];
        uint32_t pid;
        bool pty;
} E2bProc;

/* ProcessSelector {"pid":N} | {"tag":"t"} → the running process (404 not_found if none). */
int e2b_proc_resolve(E2bEnvd *x, int fd, const JsonValue *sel, E2bProc *ret, ApiError *e);
/* ATTACH on the agent connection; without output it then carries STDIN/STDIN_EOF for the process. */
int e2b_proc_attach(int fd, const char *exec_id, bool output, ApiError *e);
/* Waits until the agent handled what was sent (PING → PONG), taking an ERROR it sent first. */
int e2b_proc_sync(int fd, ApiError *e);
/* The unary reply {}. */
int e2b_proc_empty_reply(E2bEnvd *x);

/* e2b-process-input.c: unary ones return < 0 with e set; StreamInput always responds. */
int e2b_process_send_input(E2bEnvd *x, ApiError *e);
int e2b_process_close_stdin(E2bEnvd *x, ApiError *e);
int e2b_process_stream_input(E2bEnvd *x);
int e2b_filesystem_handle(E2bEnvd *x, const char *method);
/* Connect-RPC plumbing shared by both: content type checks and the request message. */
int e2b_rpc_check_content(const ApiRequest *r, bool streaming, ApiError *e);
int e2b_rpc_read(E2bEnvd *x, bool streaming, JsonValue **ret, ApiError *e);
/* Keepalive-Ping-Interval (s) and Connect-Timeout-Ms of a streaming request; 0 = none. */
unsigned e2b_rpc_keepalive_sec(const ApiRequest *r);
uint64_t e2b_rpc_timeout_ms(const ApiRequest *r);
