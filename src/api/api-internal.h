/* SPDX-License-Identifier: MIT */
#pragma once

/* What the files of src/api share: the Api object, the route handlers,
 * request validation, JSON output and the agent conversation helpers. */

#include <pthread.h>
#include <stdatomic.h>

#include "api.h"
#include "proto.h"
#include "sandbox-lock.h"

typedef struct CredKey CredKey;
typedef struct ApiLimits ApiLimits;
typedef struct ApiVolumeMounts ApiVolumeMounts;

struct Api {
        Config config;
        CredKey *cred_key;           /* the master key of credentials (owned), NULL = not loaded */
        pthread_key_t handles_key;   /* per-thread Store + WorkerClient */
        char worker_address[CONFIG_STR_MAX + 16];
        char agent_dir[CONFIG_STR_MAX + 16];
        char *cluster_token;         /* role api: workers are reached over the network with it */
        atomic_uint_fast64_t requests_by_class[6]; /* [1..5] = 1xx..5xx */
        atomic_uint_fast64_t requests_in_flight;
        ApiLimits *limits;           /* per key and tenant request limits (api-limits.c) */
        ApiWorkerStatus *worker_status; /* role all: the worker's supervisor's view; NULL otherwise */
        ApiPortDialer port_dialer;   /* role all: reaches a sandbox's port (api_set_port_dialer) */
        void *port_dialer_userdata;
};

/* ---- request limits (api-limits.c) ---- */
int api_limits_new(ApiLimits **ret);
ApiLimits *api_limits_free(ApiLimits *l);
/* After authentication: counts the request in flight (and as an open
 * stream) against its key's and tenant's limits and takes a token from
 * their buckets; a refusal fills e (429 naming the limit, or 503 for the
 * server-wide share) and r->retry_after_s. api_limits_leave() (done by
 * api_handle) gives it back. */
int api_limits_enter(ApiRequest *r, bool stream, ApiError *e);
void api_limits_leave(ApiRequest *r);
/* The tenant's rps and streams changed (PUT /v1/tenants): used at once. */
void api_limits_set_tenant(ApiLimits *l, const TenantQuotas *q);
uint64_t api_limits_refused(const ApiLimits *l);

/* ---- tenant quotas (tenants.c) ---- */
/* The tenant's effective resource limits (its row, else the config's
 * defaults; 0 = unlimited) for an admission. */
int api_tenant_admission(ApiRequest *r, const char *tenant_id, StoreAdmission *ret, ApiError *e);
/* The tenant's own default_runtime into buf ("" = none: the host's applies). */
int api_tenant_default_runtime(ApiRequest *r, const char *tenant_id, char *buf, size_t size, ApiError *e);
/* A -EDQUOT of a *_admit store call as the 429 naming the quota. what: "creating 1 sandbox" */
int api_quota_error(ApiRequest *r, const StoreAdmission *a, const char *what, ApiError *e);

/* Seconds a client should wait before it tries again while the worker is
 * unavailable (the Retry-After of 503 worker_unavailable). */
unsigned api_worker_retry_after_s(const Api *a);

/* The route table, for the test that keeps openapi.yaml in step with it. */
/* Splits an absolute path into at most max segments, in place: "/v1/a/b" →
 * {"v1","a","b"}; returns their number. Empty segments ("//", a trailing
 * "/") match no route: -EINVAL; more than max: -E2BIG. */
int api_split_path(char *buf, char **segs, size_t max);
size_t api_route_count(void);
void api_route_get(size_t i, const char **ret_method, const char **ret_pattern);

/* Opens this thread's store if needed (503 if it cannot); done by the router for authenticated routes. */
int api_get_store(ApiRequest *r, ApiError *e);

/* ---- validation (api-validate.c): pure functions ---- */

#define API_ID_LEN 16U                   /* sandbox ids: [a-z][a-z0-9]{15} */
#define API_PATH_MAX 4095U               /* paths inside a sandbox: what the agent takes (PATH_MAX - 1) */
#define API_NAME_MAX 64U                 /* template, tenant and key names */
#define API_ENV_ENTRIES_MAX 256U
#define API_ENV_NAME_MAX 256U
#define API_ENV_VALUE_MAX (32U * 1024U)
#define API_METADATA_ENTRIES_MAX 64U
#define API_METADATA_KEY_MAX 64U
#define API_METADATA_VALUE_MAX 1024U
#define API_ARGV_MAX 4096U               /* arguments of an exec */
#define API_ARG_MAX (128U * 1024U)       /* one argument or a shell string */
#define API_USER_MAX 32U
#define API_PTY_DIM_MAX 1000U            /* rows/cols of a pty */
#define API_SANDBOX_CPU_MILLIS_MIN 10U
#define API_SANDBOX_MEMORY_MB_MIN 16U
#define API_SANDBOX_VM_MEMORY_MB_MIN 128U /* a guest kernel and its agent need this much */
#define API_SANDBOX_DISK_MB_MIN 16U
#define API_SANDBOX_PIDS_MIN 8U
#define API_LIST_LIMIT_DEFAULT 100U
#define API_LIST_LIMIT_MAX 1000U

bool api_sandbox_id_valid(const char *id);
int api_sandbox_id_generate(char ret[static API_ID_LEN + 1]);
/* [a-z0-9][a-z0-9._-]{0,63} */
bool api_template_name_valid(const char *s);
/* [a-z0-9][a-z0-9-]{0,62} */
bool api_tenant_name_valid(const char *s);
/* Key names: 1..64 printable ASCII, no quotes or backslashes. */
bool api_key_name_valid(const char *s);
/* A path inside a sandbox: non-empty, no NUL, no '..' component, at most API_PATH_MAX bytes → else 400 invalid_path. */
int api_validate_path(const char *p, size_t n, const char *what, ApiError *e);

/* Fills template_name, runtime, cpu_millis, memory_mb, disk_mb, pids_max,
 * timeout_s, env_json and metadata_json of *sb from a create request body
 * (NULL = empty), with defaults and bounds from c. */
int api_validate_sandbox_create(const JsonValue *body, const Config *c, Sandbox *sb, ApiError *e);
/* body[key], an object of strings (env: variable names as keys), validated as
 * a create's env or metadata: 1 with it serialised in *ret, 0 if absent or null. */
int api_validate_string_map(const JsonValue *body, const char *key, bool env, char **ret, ApiError *e);

/* How exec output travels in the NDJSON events (exec-stream.c). */
typedef enum ExecOutput {
        EXEC_OUTPUT_TEXT,   /* "data" where the bytes are UTF-8, else "data_b64" */
        EXEC_OUTPUT_BASE64, /* always "data_b64" */
        EXEC_OUTPUT_FRAMES, /* application/vnd.space.exec-frames: raw bytes in length-prefixed frames */
        _EXEC_OUTPUT_MAX,
        _EXEC_OUTPUT_INVALID = -EINVAL,
} ExecOutput;
const char *exec_output_to_string(ExecOutput o);
ExecOutput exec_output_from_string(const char *s);
const char *exec_output_content_type(ExecOutput o);

/* The frames form: a 16-byte header (u8 kind, 3 zero bytes, u32 payload
 * length, u64 offset; big endian), then the payload: the raw bytes of
 * stdout (kind 1) or stderr (2) at that offset, or one event as JSON (3;
 * start, dropped, exit, error, exactly as the NDJSON lines). */
#define EXEC_FRAME_HEADER 16U
enum { EXEC_FRAME_STDOUT = 1, EXEC_FRAME_STDERR = 2, EXEC_FRAME_EVENT = 3 };
/* One event (a finished-to-be JsonWriter) in the stream's form. */
int exec_stream_event(ApiRequest *r, ExecOutput o, JsonWriter *w);

typedef struct ExecRequest {
        char *agent_json;       /* the EXEC payload for the agent */
        char *stdin_data;       /* stdin given as a string, or NULL */
        size_t stdin_len;
        bool keep_stdin;        /* stdin: true */
        bool background;
        ExecOutput output;
} ExecRequest;
void exec_request_done(ExecRequest *x);
int api_validate_exec(const JsonValue *body, const Config *c, ExecRequest *ret, ApiError *e);
/* Puts the sandbox's env (a JSON object of strings, or NULL) under the
 * request's env in x->agent_json: the request's values win. So a sandbox
 * whose agent started without its env (a warm one) still gives it to every
 * process. */
int api_exec_merge_env(ExecRequest *x, const char *sandbox_env_json, ApiError *e);
/* Starts the exec of body (a request object as POST .../exec takes) in sb,
 * with the sandbox's env and its credentials' placeholders: *ret_fd carries
 * its frames from here on (close it: a background or on_disconnect "keep"
 * exec lives on). An agent that refuses it is an error (e). */
#define API_EXEC_ID_MAX 64U
int api_exec_launch(ApiRequest *r, const Sandbox *sb, const JsonValue *body, int *ret_fd,
                    char ret_exec_id[static API_EXEC_ID_MAX + 1], int64_t *ret_pid, ApiError *e);
/* Writes an environment as a JSON object: base's string entries not in over, then over's. */
void api_json_write_merged_env(JsonWriter *w, const JsonValue *base, const JsonValue *over);

/* ---- lifecycle validation (lifecycle-validate.c): pure functions ---- */

#define API_CHECKPOINT_NAME_MAX 64U       /* [A-Za-z0-9][A-Za-z0-9._-]{0,63}; ids match it too */
#define API_CHECKPOINT_EVERY_MIN 1U       /* seconds between automatic checkpoints, at least */
#define API_CHECKPOINTS_MAX 256U          /* checkpoints one sandbox may hold */

bool api_checkpoint_name_valid(const char *s);
/* idle_s, idle_action, checkpoint_every_s of a create or PATCH body, into the
 * fields given (left as they are when absent). idle_s without idle_action
 * (and none set before) means pause. */
int api_validate_policy_fields(const JsonValue *body, const Config *c, uint64_t *idle_s, IdleAction *idle_action,
                               uint64_t *checkpoint_every_s, ApiError *e);
/* PATCH /v1/sandboxes/{id}: the policy of cur changed by body. A timeout_s
 * counts from now (0 = none). At least one field. */
int api_validate_sandbox_patch(const JsonValue *body, const Config *c, const Sandbox *cur, int64_t now,
                               SandboxPolicy *ret, ApiError *e);
/* {"name": optional}: ret_name "" if none. body NULL = {}. */
int api_validate_checkpoint_create(const JsonValue *body, char ret_name[static STORE_NAME_MAX], ApiError *e);
/* "with_memory" of a body (checkpoint, branch): *ret (may be NULL) 1, 0, or -1 when absent or null. */
int api_validate_with_memory(const JsonValue *body, int *ret, ApiError *e);
/* {"checkpoint": id or name}; *ret_checkpoint points into body. */
int api_validate_restore(const JsonValue *body, const char **ret_checkpoint, ApiError *e);
/* {"count": 1..max_branch (default 1), "from": checkpoint?, "with_memory": false}; *ret_from points into body
 * (NULL = the live state). with_memory true is refused (the ns runtime cannot). */
int api_validate_branch(const JsonValue *body, const Config *c, uint64_t *ret_count, const char **ret_from,
                        ApiError *e);

/* "SIGTERM" or "TERM" (case-sensitive) → canonical "SIGTERM"; NULL if not a signal one may send. */
const char *api_signal_name(const char *s);

/* RFC 3339 ("2026-11-30T01:02:03.456Z", "...+02:00") → microseconds since the epoch. */
int api_parse_time(const char *s, int64_t *ret_usec);

/* ---- JSON output (json-out.c): pure functions ---- */

#define JSON_OUT_TIME_MAX 32U

/* "2026-11-30T01:02:03.456Z" */
void json_out_time(int64_t usec, char buf[static JSON_OUT_TIME_MAX]);
void json_out_error(JsonWriter *w, const ApiError *e);
void json_out_sandbox(JsonWriter *w, const Sandbox *sb, const char *tenant_name);
void json_out_checkpoint(JsonWriter *w, const Checkpoint *c);
void json_out_template(JsonWriter *w, const Template *t, uint64_t in_use);
/* The same with the image reference and manifest digest a pull made it from. */
/* ... with the template's runtime and start settings (NULL: none set) */
void json_out_template_with(JsonWriter *w, const Template *t, uint64_t in_use, const char *ref, const char *digest,
                            const char *runtime, const char *start_json);
void json_out_template_pulled(JsonWriter *w, const Template *t, uint64_t in_use, const char *ref,
                              const char *digest);
void json_out_event(JsonWriter *w, const Event *ev, const char *tenant_name);
void json_out_key(JsonWriter *w, const ApiKey *k, const char *tenant_name);
/* Re-serialises one file entry of the agent (hostile) as the API's entry: -EBADMSG if malformed. */
int json_out_file_entry(JsonWriter *w, const JsonValue *entry);
/* Re-serialises one process of a PS result: -EBADMSG if malformed. */
int json_out_process(JsonWriter *w, const JsonValue *proc);
/* {"<key>":[...]}: the array result[key] of an agent's (hostile) answer, each
 * element re-serialised by out (json_out_process, json_out_file_entry);
 * -EBADMSG if the array or one element is malformed. */
int json_out_agent_list(JsonWriter *w, const JsonValue *result, const char *key,
                        int (*out)(JsonWriter *w, const JsonValue *v));
/* Re-serialises an EXIT payload as {"type":"exit",...}: -EBADMSG if malformed. */
int json_out_exit(JsonWriter *w, const JsonValue *exit_payload);
/* {"type":"stdout","data":"..."} or {"type":"stdout","data_b64":"..."} where not UTF-8. */
void json_out_exec_data(JsonWriter *w, const char *type, const char *p, size_t n);
/* Bytes at the end of (p, n) that start a UTF-8 sequence but do not finish it (0..3). */
size_t utf8_incomplete_tail(const char *p, size_t n);

/* ---- the agent conversation (agent-call.c) ---- */

#define AGENT_STREAM 1U                  /* our request's stream on a fresh connection */
#define AGENT_REPLY_TIMEOUT_MSEC 30000   /* for a reply to a request */
#define AGENT_FRAME_TIMEOUT_SEC 30       /* for the rest of a frame once it began (SO_RCVTIMEO) */
#define AGENT_FOREIGN_FRAMES_MAX 64U     /* frames on other streams we skip before giving up */

/* worker_agent_connect() with send/receive timeouts set. */
int agent_call_connect(ApiRequest *r, const Sandbox *sb, int *ret_fd, ApiError *e);
/* Waits up to timeout_msec (-1 = forever) for a frame on AGENT_STREAM; 502 on a bad frame or EOF. */
int agent_call_recv(int fd, int timeout_msec, ProtoFrame *ret, ApiError *e);
/* Parses a JSON payload into an object; -EBADMSG with a 502 if it is not one. */
int agent_call_parse(const ProtoFrame *f, JsonValue **ret, ApiError *e);
/* Maps an ERROR frame to e per API.md; returns the -errno. what: e.g. "'/a'". */
int agent_call_error(const ProtoFrame *f, const char *what, ApiError *e);
/* Maps an agent errno to an API error code (ENOENT → not_found, ...). */
ApiErrorCode agent_errno_to_code(int err);
/* Sends a JSON request on AGENT_STREAM and waits for RESULT (→ *ret) or ERROR. */
int agent_call_json(int fd, ProtoType type, const char *json, const char *what, JsonValue **ret, ApiError *e);

/* ---- auth.c ---- */

#define API_KEY_SECRET_LEN 43U   /* "sk_" + 40 */
#define API_KEY_ID_LEN 14U       /* "key_" + 10 */

int api_auth(ApiRequest *r, ApiError *e);
/* Authenticates the key (p, n) whatever header carried it (Bearer, X-API-KEY):
 * fills r->key, r->actor and r->tenant_name, or a 401/503 in e. */
int api_auth_token(ApiRequest *r, const char *p, size_t n, ApiError *e);
void api_key_hash(const char *secret, char ret[static 65]);
int api_key_generate(char ret_secret[static API_KEY_SECRET_LEN + 1], char ret_id[static API_KEY_ID_LEN + 1]);

/* ---- handlers ---- */

/* Looks up a sandbox of the request's tenant (404 otherwise); with running, 409 unless it runs (a paused
 * one is resumed instead if it has auto_resume, or with auto_resume_paused=1), and the call counts as
 * activity (idle policy). */
int api_sandbox_lookup(ApiRequest *r, const char *id, bool running, Sandbox *ret, ApiError *e);
/* Records a new sandbox (state creating) under a fresh id and a free slot,
 * admitted against its tenant's quotas as one of pending sandboxes of its
 * shape still to come (1, or a branch's children left): 429 over a quota. */
int api_sandbox_insert_new(ApiRequest *r, Sandbox *sb, uint64_t pending, ApiError *e);
/* The cold create shared by /v1 and the E2B surface: records sb (a new id and
 * slot), starts it on the worker, marks it running, records sandbox.created
 * (data names `via` if given); on failure unwinds, with an event. */
/* vols (NULL = none): the volumes it mounts, recorded before the worker starts it (which mounts them). */
int api_sandbox_start_new(ApiRequest *r, Sandbox *sb, const char *via, const ApiVolumeMounts *vols, ApiError *e);
/* Marks a sandbox whose create failed deleted, with an event. True if it was
 * no longer creating: a caller deleted it meanwhile. */
bool api_sandbox_create_failed(ApiRequest *r, const Sandbox *sb, const ApiError *e);
/* The delete shared by /v1 and the E2B surface, from any live state (a
 * deleting one too: a delete that failed half-way is retried): deleting,
 * the worker's destroy, deleted, the sandbox.deleted event; a failed destroy
 * leaves it in error, with an event. -ESTALE (e not filled: the caller says
 * it in its API's words) if no live sandbox has the id. */
int api_sandbox_destroy(ApiRequest *r, const char *id, const char *reason, ApiError *e);

/* ---- what a create takes from its template and tenant (sandbox-defaults.c) ---- */
/* ns | vm (and auto where allow_auto) */
bool api_runtime_name_valid(const char *s, bool allow_auto);
/* A runtime setting as a sandbox gets it: "auto" becomes vm or ns. */
const char *api_runtime_resolve(ApiRequest *r, const char *setting);
/* Fills sb->runtime if the request named none (template, tenant, host
 * default) and returns the template's start setting (JSON, or NULL). */
int api_sandbox_defaults(ApiRequest *r, Sandbox *sb, char **ret_start_json, ApiError *e);
/* Runs the start command (start_json NULL: nothing) in the new sandbox sb
 * and waits until it is ready; if it fails, sb is deleted. */
int api_sandbox_start_command(ApiRequest *r, const Sandbox *sb, const char *start_json, ApiError *e);
/* The template's start command again, in a sandbox started afresh on its
 * files (resumed from suspend, restored, branched without memory): a
 * failure is an event (sandbox.start_failed), the sandbox stays. */
void api_sandbox_restart_command(ApiRequest *r, const Sandbox *sb);

/* ---- a template's start command (template-start.c) ---- */
/* Validates a "start" object into its stored JSON (*ret_json). */
int api_template_start_parse(const JsonValue *v, char **ret_json, ApiError *e);
/* Starts the command of start_json in the running sandbox and waits for its
 * ready check: 502 if it exits first, 504 if it is not ready in time. */
int api_sandbox_run_start(ApiRequest *r, const char *sandbox_id, const char *start_json, ApiError *e);

/* ---- a template's settings (template-settings.c) ---- */
/* The template's runtime and start settings (each NULL: not set). */
int api_template_settings_get(ApiRequest *r, const char *name, char **ret_runtime, char **ret_start, ApiError *e);
int api_template_patch(ApiRequest *r, ApiError *e);
/* Counts live sandboxes by template (in_use) or overall. */
int api_sandbox_count(ApiRequest *r, const char *template_name, uint64_t *ret, ApiError *e);

int api_sandbox_create(ApiRequest *r, ApiError *e);
int api_sandbox_list(ApiRequest *r, ApiError *e);
int api_sandbox_show(ApiRequest *r, ApiError *e);
int api_sandbox_delete(ApiRequest *r, ApiError *e);
/* ports.c */
int api_sandbox_port(ApiRequest *r, ApiError *e);
/* "1".."65535" (no sign, no leading zero) → *ret; else a 400 in e. */
int api_parse_port(const char *s, uint16_t *ret, ApiError *e);
/* port-forward.c: a connected socket to port inside sb (running): dialled
 * here on role all, through its worker in a cluster; 502 if nothing answers,
 * 501 where neither is possible. */
int api_sandbox_dial(ApiRequest *r, const Sandbox *sb, uint16_t port, int *ret_fd, ApiError *e);
/* The same without waiting for a connect of this host's: 1 with it under
 * way on the non-blocking socket in *ret_fd (the caller polls POLLOUT for
 * at most API_PORT_DIAL_TIMEOUT_MSEC, then api_sandbox_dial_finish()), 0
 * connected (a worker's stream in a cluster: that one waits). */
int api_sandbox_dial_start(ApiRequest *r, const Sandbox *sb, uint16_t port, int *ret_fd, ApiError *e);
/* A started dial's outcome (timed_out: no POLLOUT in time): 0, or the same
 * 502 as api_sandbox_dial(). */
int api_sandbox_dial_finish(const char *id, uint16_t port, int fd, bool timed_out, ApiError *e);
/* GET .../ports/{port}/connect with Upgrade: tcp */
int api_sandbox_port_connect(ApiRequest *r, ApiError *e);

/* lifecycle.c */
/* With the sandbox's lock held (sb is its row; re-read on success): pause
 * (409 unless running), suspend (running or paused), and wake: a paused
 * sandbox is thawed, a suspended one starts again on its files, and with
 * reboot a paused one is suspended first (its processes end). wake returns 1
 * if it woke it, 0 if it was running; each records its event with reason. */
int api_sandbox_pause_locked(ApiRequest *r, Sandbox *sb, const char *reason, ApiError *e);
int api_sandbox_suspend_locked(ApiRequest *r, Sandbox *sb, const char *reason, ApiError *e);
/* vm sandboxes with volumes (virtiofs): their machine cannot be saved; refuse_save: 400 unsupported
 * naming what (a checkpoint with memory, ...) for one, else 0 */
bool api_vm_has_volumes(ApiRequest *r, const Sandbox *sb);
int api_vm_volumes_refuse_save(ApiRequest *r, const Sandbox *sb, const char *what, ApiError *e);
int api_sandbox_wake_locked(ApiRequest *r, Sandbox *sb, bool reboot, const char *why, ApiError *e);

int api_sandbox_pause(ApiRequest *r, ApiError *e);
int api_sandbox_resume(ApiRequest *r, ApiError *e);
int api_sandbox_suspend(ApiRequest *r, ApiError *e);
int api_sandbox_patch(ApiRequest *r, ApiError *e);
/* network.c: the egress policy. v NULL/null: the configured default. *ret: canonical JSON. */
int api_validate_network(const JsonValue *v, const Config *c, char **ret, ApiError *e);
int api_sandbox_policy_put(ApiRequest *r, ApiError *e);
/* Replaces sandbox id's egress policy with body (NULL: the configured
 * default), at once on its gateway if it runs; the caller replies. */
int api_sandbox_policy_apply(ApiRequest *r, const char *id, const JsonValue *body, ApiError *e);
int api_sandbox_restore(ApiRequest *r, ApiError *e);
int api_sandbox_branch(ApiRequest *r, ApiError *e);
/* The work of branch: count new running sandboxes from sandbox id (from: a
 * checkpoint id or name, or NULL for its current files); *ret_kids (malloc'd,
 * sandbox_done not needed: their JSON members are borrowed and cleared). */
/* with_memory: the children continue the source's machine (vm sandboxes only; 400 for ns).
 * ov (NULL: none): what the children get instead of the source's: metadata
 * (a JSON object, replacing it) and env (a JSON object laid over it). */
/* What a branch's children do with the volumes the source mounts (wire: "share_ro", "snapshot", "none"). */
typedef enum ApiBranchVolumes {
        API_BRANCH_VOLUMES_SHARE_RO, /* each mounts them read-only at the same paths (409 while one has a writer) */
        API_BRANCH_VOLUMES_SNAPSHOT, /* each gets a writable snapshot of each, a volume of its own */
        API_BRANCH_VOLUMES_NONE,
        _API_BRANCH_VOLUMES_MAX,
        _API_BRANCH_VOLUMES_INVALID = -EINVAL,
} ApiBranchVolumes;
ApiBranchVolumes api_branch_volumes_from_string(const char *s);

typedef struct BranchOverrides {
        const char *metadata_json;
        const char *env_json;
        ApiBranchVolumes volumes;
} BranchOverrides;
int api_sandbox_branch_do(ApiRequest *r, const char *id, uint64_t count, const char *from, bool with_memory,
                          const BranchOverrides *ov, Sandbox **ret_kids, size_t *ret_n, ApiError *e);
/* Thaws a paused sandbox and records it running (why: the event's reason); *sb is updated. */
int api_sandbox_resume_paused(ApiRequest *r, Sandbox *sb, const char *why, ApiError *e);
/* A create that a warm pool can serve: claims a warm sandbox of req's template,
 * gives it req's tenant, limits, timeout, env, metadata, lifecycle and policy,
 * resumes it and records it (event data names `via` if given); 1 with its id
 * in req->id (the caller answers), 0 if no warm sandbox was free or the one
 * taken failed (create one). Not for runtimes other than ns. */
int api_sandbox_create_warm(ApiRequest *r, Sandbox *req, const char *via, ApiError *e);

/* checkpoints.c */
int api_checkpoint_create(ApiRequest *r, ApiError *e);
/* The work of create and delete, for the E2B surface too: name (validated) may be NULL. */
/* with_memory: 1, 0, or -1 for the default (with memory for a vm sandbox whose machine runs or was saved). */
int api_checkpoint_take(ApiRequest *r, const char *sandbox_id, const char *name, int with_memory, Checkpoint *ret,
                        ApiError *e);
int api_checkpoint_remove(ApiRequest *r, const char *sandbox_id, const char *ref, ApiError *e);
int api_checkpoint_list(ApiRequest *r, ApiError *e);
int api_checkpoint_delete(ApiRequest *r, ApiError *e);
/* A checkpoint of sb by id or name; 404 if sb has none such (or it is not restorable). */
int api_checkpoint_find(ApiRequest *r, const Sandbox *sb, const char *ref, Checkpoint *ret, ApiError *e);

/* An agent's exec id (hostile: it comes back in PS results): 1..max of
 * [A-Za-z0-9_-]. */
bool api_exec_id_valid(const char *s, size_t max);
int api_exec(ApiRequest *r, ApiError *e);
int api_exec_output(ApiRequest *r, ApiError *e);

/* exec-stream.c: relays an agent stream (after STARTED) as NDJSON events
 * until the exec's end, which it always reports; ends the HTTP stream. */
typedef struct ExecRelay {
        ApiRequest *r;
        int fd;
        const char *sandbox_id;
        ExecOutput output;
        uint64_t offset;        /* of the next byte from the agent */
        char carry[4];          /* text: an incomplete UTF-8 sequence held back */
        size_t carry_n;
        bool carry_err;
} ExecRelay;
int exec_relay(ExecRelay *x);
/* {"type":"error","code":...,"message":...} as a stream event. */
int exec_stream_error(ApiRequest *r, ExecOutput o, const char *code, const char *message);
int api_exec_list(ApiRequest *r, ApiError *e);
int api_exec_stdin(ApiRequest *r, ApiError *e);
int api_exec_signal(ApiRequest *r, ApiError *e);
int api_exec_resize(ApiRequest *r, ApiError *e);

int api_files_get(ApiRequest *r, ApiError *e);
int api_files_put(ApiRequest *r, ApiError *e);
int api_files_delete(ApiRequest *r, ApiError *e);
int api_files_move(ApiRequest *r, ApiError *e);

int api_templates_list(ApiRequest *r, ApiError *e);
int api_template_import(ApiRequest *r, ApiError *e);
int api_template_remove(ApiRequest *r, ApiError *e);

/* Template versions and tags (template-versions.c). */
#define API_TEMPLATE_TAG_MAX 128U
typedef struct ApiTemplateRef {
        char name[STORE_NAME_MAX];
        char tag[STORE_TAG_MAX];        /* "" unless NAME:TAG */
        uint64_t version;               /* resolved; 0 = the template has no versions */
        bool newest;                    /* resolved: the newest version */
} ApiTemplateRef;
bool api_template_tag_valid(const char *s);
int api_sandbox_resolve_template(ApiRequest *r, Sandbox *sb, ApiError *e);
/* NAME, NAME:latest, NAME:TAG, NAME@vN: the syntax only (-EINVAL). */
int api_template_ref_parse(const char *ref, ApiTemplateRef *ret);
/* The syntax and the store: a tag or version that does not exist is API_NOT_FOUND. */
int api_template_resolve(ApiRequest *r, const char *ref, ApiTemplateRef *ret, ApiError *e);
void api_template_pool_name(const ApiTemplateRef *t, char *buf, size_t size);
/* A publish: the next version's number and its pool name (NAME@vN) to import into, then commit
 * (recorded, NAME made a copy of it on every worker, old ones collected). */
int api_template_version_begin(ApiRequest *r, const char *name, uint64_t *ret_version, char *pool_name, size_t size,
                               ApiError *e);
int api_template_version_commit(ApiRequest *r, const char *name, uint64_t version, const char *digest,
                                uint64_t size_bytes, ApiError *e);
void api_template_gc(ApiRequest *r, const char *name);
void api_template_gc_sandbox(ApiRequest *r, const char *sandbox_id);
void api_template_versions_remove(ApiRequest *r, const char *name);
int api_template_tag_assign(ApiRequest *r, const char *name, const char *tag, uint64_t version, ApiError *e);
int api_template_tag_remove(ApiRequest *r, const char *name, const char *tag, ApiError *e);
int api_template_versions(ApiRequest *r, ApiError *e);
int api_template_tags(ApiRequest *r, ApiError *e);
int api_template_tag_post(ApiRequest *r, ApiError *e);
int api_template_tag_delete(ApiRequest *r, ApiError *e);
int api_template_pull(ApiRequest *r, ApiError *e);
/* The registry client's options from the host's configuration (its layer
 * cache asked of r's worker). */
struct RegistryOptions;
void api_registry_options(ApiRequest *r, struct RegistryOptions *ret);
/* Streams the request body (a tar, within upload_max_mb) into a new file under <state_dir>/tmp. */
int api_template_receive_tar(ApiRequest *r, char **ret_path, ApiError *e);
/* template-build.c: POST /v1/templates/{name}/build, a Dockerfile build answered as NDJSON progress */
int api_template_build(ApiRequest *r, ApiError *e);
/* The same build of steps given parsed (E2B's template builds): df's steps (FROM first; borrowed) over
 * a context made of the entries of every tar in contexts (the last of a name wins), published as name
 * owned by tenant_id ("" = global; a template of that name owned by another is not replaced). Its
 * progress goes to log (level "info", "warn" for a RUN's stderr, "error"); a RUN's client is not
 * watched (only spaced stopping cancels it). 0 with the image's final workdir and user (NULL: none,
 * the caller frees them), or -errno (e) with failed_step the 1-based step that failed (0: none). */
typedef void (*ApiBuildLog)(void *userdata, const char *level, const char *message);
typedef struct Dockerfile Dockerfile;
typedef struct ApiBuildSpec {
        const char *name;
        const char *tenant_id;
        Dockerfile *df;
        char **contexts;
        size_t n_contexts;
        unsigned force_from; /* > 0: from this step (1-based) on, no layer comes from the cache */
        ApiBuildLog log;
        void *userdata;
        unsigned failed_step;
        char *workdir, *user;
} ApiBuildSpec;
int api_template_build_run(ApiRequest *r, ApiBuildSpec *spec, ApiError *e);

int api_events_list(ApiRequest *r, ApiError *e);

int api_keys_create(ApiRequest *r, ApiError *e);
int api_keys_list(ApiRequest *r, ApiError *e);
int api_keys_delete(ApiRequest *r, ApiError *e);

/* ---- credentials (credentials.c) ---- */
/* webhooks.c: /v1/webhooks and the E2B form /events/webhooks */
int api_webhook_create(ApiRequest *r, ApiError *e);
int api_webhook_list(ApiRequest *r, ApiError *e);
int api_webhook_show(ApiRequest *r, ApiError *e);
int api_webhook_patch(ApiRequest *r, ApiError *e);
int api_webhook_delete(ApiRequest *r, ApiError *e);
int api_webhook_test(ApiRequest *r, ApiError *e);
int api_e2b_webhook_create(ApiRequest *r, ApiError *e);
int api_e2b_webhook_list(ApiRequest *r, ApiError *e);
int api_e2b_webhook_show(ApiRequest *r, ApiError *e);
int api_e2b_webhook_patch(ApiRequest *r, ApiError *e);
int api_credential_create(ApiRequest *r, ApiError *e);
int api_credential_list(ApiRequest *r, ApiError *e);
int api_credential_show(ApiRequest *r, ApiError *e);
int api_credential_delete(ApiRequest *r, ApiError *e);
int api_credential_patch(ApiRequest *r, ApiError *e);
int api_credential_revoke(ApiRequest *r, ApiError *e);
int api_sandbox_credentials_list(ApiRequest *r, ApiError *e);
int api_sandbox_credential_grant(ApiRequest *r, ApiError *e);
int api_sandbox_credential_revoke(ApiRequest *r, ApiError *e);
/* The credentials named by a create request's "credentials" (NULL or null =
 * none): each must exist in the tenant and be active. */
int api_credentials_resolve(ApiRequest *r, const JsonValue *names, Credential **ret, size_t *ret_n, ApiError *e);
/* scopes: an item may also be {"name", "hosts", "header", "format"} (made by
 * e2b_network_credentials()): the credential granted to those hosts only, in
 * that header (Credential.grant_scoped). */
int api_credentials_resolve_scoped(ApiRequest *r, const JsonValue *names, bool scopes, Credential **ret,
                                   size_t *ret_n, ApiError *e);
/* For E2B's /secrets (e2b-secrets.c): seals the string v into c (id, tenant,
 * name set; v wiped), a new credential id, the credential.* event, and
 * whether c names no hosts of its own (a secret made by POST /secrets: it
 * applies only where a grant's scope says). */
int api_credential_seal(ApiRequest *r, const JsonValue *v, Credential *c, ApiError *e);
int api_credential_new_id(char ret[static STORE_ID_MAX], ApiError *e);
void api_credential_event(ApiRequest *r, const char *type, const Credential *c);
bool api_credential_hostless(const Credential *c);
/* The granted sandboxes' gateways learn the credential's new state; its
 * delete (grants too, and their gateways told). */
void api_credential_push(ApiRequest *r, const char *credential_id);
/* The master key to seal with now (the one the store names), as for credentials; webhook secrets too. */
struct CredKey;
int api_seal_key(ApiRequest *r, const struct CredKey **ret, ApiError *e);
int api_credential_remove(ApiRequest *r, const Credential *c, ApiError *e);
/* The rest of a valid create (sb from api_validate_sandbox_create): a warm
 * sandbox if there is one and nothing is granted, else a new one with creds
 * granted before it answers; via: "e2b" or NULL, for the events; vols (NULL =
 * none): the volumes it mounts (no warm sandbox then either). */
int api_sandbox_create_with(ApiRequest *r, Sandbox *sb, const Credential *creds, size_t n_creds, const char *via,
                            const ApiVolumeMounts *vols, ApiError *e);
/* Adds ENV=space-cred-<name> for each credential with an env name to the
 * JSON object *env_json (NULL = none), unless it names that variable already. */
/* A tenant's active basic credential by name, its value opened (to hand to a
 * registry; the caller frees both and never shows the value). */
struct CredSecret;
int api_credential_open_basic(ApiRequest *r, const char *name, Credential *ret, struct CredSecret **ret_value,
                              ApiError *e);
int api_credentials_add_env(const Credential *creds, size_t n, char **env_json, ApiError *e);
/* Records the grants of a new sandbox (and their events). */
int api_credentials_grant_all(ApiRequest *r, const char *sandbox_id, const Credential *creds, size_t n,
                              ApiError *e);
/* A branched child's grants: a copy of each of its parent's (grants, from
 * store_grant_list() of the parent) as rows of its own; _events records
 * them once the child runs; _undo takes them back from a child that was
 * not made. */
int api_credentials_inherit(ApiRequest *r, const Sandbox *parent, const char *child_id, const Credential *grants,
                            size_t n, ApiError *e);
void api_credentials_inherit_events(ApiRequest *r, const Sandbox *parent, const char *child_id,
                                    const Credential *grants, size_t n);
void api_credentials_inherit_undo(ApiRequest *r, const char *child_id, const Credential *grants, size_t n);
/* The placeholders of the sandbox's granted credentials as a JSON env object
 * (*ret NULL if none). */
int api_credentials_env_of(ApiRequest *r, const char *sandbox_id, char **ret_env_json, ApiError *e);

/* ---- volumes (volumes.c) ---- */
#define API_VOLUME_NAME_MAX 64U          /* [A-Za-z0-9][A-Za-z0-9._-]{0,63} */
#define API_VOLUME_PATH_MAX 256U         /* a mount path inside, with its NUL (RUNTIME_VOLUME_PATH_MAX) */
#define API_VOLUME_SIZE_MB_MIN 16U
#define API_VOLUME_SIZE_MB_DEFAULT 1024U
#define API_VOLUME_FILE_MAX (512U * 1024U)  /* a file through the files APIs (the worker's line holds it) */

struct ApiVolumeMounts {
        VolumeMount m[STORE_VOLUME_MOUNTS_MAX];
        size_t n;
        char worker[STORE_NAME_MAX];     /* the worker that holds them all ("" = the local one) */
};

bool api_volume_name_valid(const char *s);
/* A mount path: absolute, normalised (no empty, "." or ".." component), not
 * the root and not at or below /proc, /sys, /dev, /run or /etc → else 400 invalid_path. */
int api_volume_path_validate(const char *p, size_t n, ApiError *e);
/* The request tenant's volume of that name (404 otherwise, also for another tenant's). */
int api_volume_lookup(ApiRequest *r, const char *name, Volume *ret, ApiError *e);
/* A path relative to a volume's root has no empty and no "." component (".." is api_validate_path's): 400. */
int api_volume_path_components(const char *rel, ApiError *e);
/* The work of create and delete, for the E2B surface too. */
int api_volume_make(ApiRequest *r, const char *name, uint64_t size_mb, Volume *ret, ApiError *e);
int api_volume_remove(ApiRequest *r, const char *name, ApiError *e);
/* A new volume name of the tenant: a writable snapshot of source, its size (the E2B surface and /clone). */
int api_volume_clone_make(ApiRequest *r, const Volume *source, const char *name, Volume *ret, ApiError *e);
/* Records the volumes of a branch's new children (rows made, not started) from the source's mounts;
 * snapshot: the new volumes are made first (named <volume>-<child id>). */
int api_volume_branch(ApiRequest *r, const char *source_id, const Sandbox *kids, size_t n, ApiBranchVolumes mode,
                      ApiError *e);
int api_volume_clone(ApiRequest *r, ApiError *e);
int api_volume_snapshot(ApiRequest *r, ApiError *e);
/* 0, or 409 (-EROFS) for a read-only snapshot, whose files do not change. */
int api_volume_writable(const Volume *v, ApiError *e);
/* A create's volumes ([{name, path, <read_only_key>}], NULL or null = none): each the tenant's,
 * its path valid, none twice, all on one worker. */
int api_volume_mounts_parse(ApiRequest *r, const JsonValue *list, const char *read_only_key, ApiVolumeMounts *ret,
                            ApiError *e);
/* Records that the new sandbox mounts them (409 volume_in_use if the sharing rule says no). */
int api_volume_mounts_record(ApiRequest *r, const char *sandbox_id, const ApiVolumeMounts *vols, ApiError *e);
int api_volume_create(ApiRequest *r, ApiError *e);
int api_volume_list(ApiRequest *r, ApiError *e);
int api_volume_show(ApiRequest *r, ApiError *e);
int api_volume_delete(ApiRequest *r, ApiError *e);
int api_sandbox_volumes(ApiRequest *r, ApiError *e);
/* volume-files.c */
int api_volume_files_get(ApiRequest *r, ApiError *e);
int api_volume_files_put(ApiRequest *r, ApiError *e);
int api_volume_files_delete(ApiRequest *r, ApiError *e);

int api_tenants_list(ApiRequest *r, ApiError *e);
int api_tenant_show(ApiRequest *r, ApiError *e);
int api_tenant_put(ApiRequest *r, ApiError *e);

int api_info(ApiRequest *r, ApiError *e);
int api_healthz(ApiRequest *r, ApiError *e);
/* /ui and /ui/...: the dashboard's embedded files (ui.c); answers every such request itself. */
bool api_ui_path(const char *path);
int api_ui_serve(ApiRequest *r);
int api_readyz(ApiRequest *r, ApiError *e);
int api_metrics(ApiRequest *r, ApiError *e);
/* metrics-sandbox.c: GET /v1/sandboxes/{id}/metrics; a sandbox's samples since since_usec as its
 * worker keeps them (*ret NULL: none, it is not running) */
int api_sandbox_metrics(ApiRequest *r, ApiError *e);
/* metrics-prom.c: the per-sandbox families of /metrics */
void api_metrics_print_sandboxes(ApiRequest *r, FILE *f);
int api_metrics_series(ApiRequest *r, const Sandbox *sb, int64_t since_usec, JsonValue **ret, ApiError *e);

/* Records the status in r and streams; for handlers with streamed responses. */
int api_stream_begin(ApiRequest *r, int status, const char *content_type);
/* Writes one NDJSON line from w (finishes w). */
int api_stream_line(ApiRequest *r, JsonWriter *w);
