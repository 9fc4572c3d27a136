/* SPDX-License-Identifier: MIT */
/* The E2B control plane over the space store and worker: create, connect
 * (resume), pause, setTimeout, getInfo, list, kill, metrics. The sandboxes are
 * the tenant's space sandboxes (the v1 API sees the same ones); state
 * transitions are recorded as the same events. */

#include <inttypes.h>
#include <stdio.h>

#include "alloc-util.h"
#include "e2b.h"
#include "ingress-auth.h"
#include "http-parse.h"
#include "log.h"
#include "str-util.h"

#define E2B_CLIENT_ID "space"                        /* clientID: required by the SDKs, otherwise unused */
#define E2B_NO_EXPIRY_USEC INT64_C(253402300799000)  /* 9999-12-31T23:59:59Z, as endAt of a sandbox without one */
#define E2B_LIST_SCAN_PAGE 500U                      /* store rows fetched per step while filtering a list */
#define E2B_LIST_SORT_MAX 100000U                    /* sandboxes one list sorts (a tenant's, in a cluster) */
#define E2B_METADATA_QUERY_MAX 8192U

/* ---- output ---- */

static const char *e2b_state(SandboxState s) {
        switch (s) {
        case SANDBOX_CREATING:
        case SANDBOX_RUNNING:
                return "running";
        case SANDBOX_PAUSED:
        case SANDBOX_SUSPENDED:
                return "paused";
        default:
                return NULL; /* not shown: deleting, deleted, error */
        }
}

static void kv_time(JsonWriter *w, const char *key, int64_t usec) {
        char buf[JSON_OUT_TIME_MAX];

        json_out_time(usec, buf);
        json_w_kv_string(w, key, buf);
}

/* E2B's lifecycle {onTimeout:'pause'} (autoPause) maps onto space's idle
 * policy: no timeout that deletes, and a pause after the E2B timeout without
 * exec or file calls (a sandbox in use is not frozen under its user); with
 * keepMemory false (autoPauseMemory) the idle action is a suspend. */
bool e2b_auto_pause(const Sandbox *sb) {
        return sb->timeout_s == 0 && sb->idle_s > 0 &&
               (sb->idle_action == IDLE_ACTION_PAUSE || sb->idle_action == IDLE_ACTION_SUSPEND);
}

/* E2B's endAt: the expiry, or when the idle policy pauses an autoPause sandbox. */
static int64_t end_at_usec(const Sandbox *sb) {
        if (e2b_auto_pause(sb))
                return MAX(sb->last_activity_usec, sb->created_usec) + (int64_t) sb->idle_s * 1000000;
        return sb->expires_usec > 0 ? sb->expires_usec : E2B_NO_EXPIRY_USEC * 1000;
}

/* E2B's templateID: what the sandbox was started from, the snapshot (a
 * checkpoint) where it came from one, else its template. */
static const char *template_id(const Sandbox *sb) {
        return sb->parent_checkpoint[0] ? sb->parent_checkpoint : sb->template_name;
}

/* "domain": where E2B's getHost(port) points, `${port}-${id}.${domain}`:
 * the ingress, when it is on; else null. */
static void kv_domain(ApiRequest *r, JsonWriter *w) {
        char domain[CONFIG_STR_MAX + 8];

        json_w_key(w, "domain");
        if (ingress_public_domain(api_config(r->api), domain, sizeof domain) >= 0)
                json_w_string(w, domain);
        else
                json_w_null(w);
}

/* The Sandbox object of create and connect. */
int e2b_write_sandbox(ApiRequest *r, JsonWriter *w, const Sandbox *sb) {
        char token[E2B_TOKEN_LEN + 1], traffic[INGRESS_TOKEN_LEN + 1];
        int k;

        k = e2b_access_token(api_config(r->api), sb->id, token);
        if (k < 0)
                return k;
        json_w_object_begin(w);
        json_w_kv_string(w, "sandboxID", sb->id);
        json_w_kv_string(w, "templateID", template_id(sb));
        json_w_kv_string(w, "alias", sb->template_name);
        json_w_kv_string(w, "clientID", E2B_CLIENT_ID);
        json_w_kv_string(w, "envdVersion", E2B_ENVD_VERSION);
        json_w_kv_string(w, "envdAccessToken", token);
        /* the ingress's traffic token (e2b-traffic-access-token), never the envd token */
        json_w_key(w, "trafficAccessToken");
        if (ingress_traffic_token(api_config(r->api), sb->id, traffic) >= 0)
                json_w_string(w, traffic);
        else
                json_w_null(w);
        kv_domain(r, w);
        json_w_object_end(w);
        explicit_bzero(token, sizeof token);
        explicit_bzero(traffic, sizeof traffic);
        return 0;
}

/* SandboxDetail (detail) or ListedSandbox. */
static int write_listed(ApiRequest *r, JsonWriter *w, const Sandbox *sb, bool detail) {
        uint64_t cpus = (sb->cpu_millis + 999U) / 1000U;

        json_w_object_begin(w);
        json_w_kv_string(w, "templateID", template_id(sb));
        json_w_kv_string(w, "alias", sb->template_name);
        json_w_kv_string(w, "sandboxID", sb->id);
        json_w_kv_string(w, "clientID", E2B_CLIENT_ID);
        kv_time(w, "startedAt", sb->created_usec);
        kv_time(w, "endAt", end_at_usec(sb));
        json_w_kv_string(w, "envdVersion", E2B_ENVD_VERSION);
        json_w_kv_int(w, "cpuCount", (int64_t) MAX(cpus, (uint64_t) 1));
        json_w_kv_int(w, "memoryMB", (int64_t) sb->memory_mb);
        json_w_kv_int(w, "diskSizeMB", (int64_t) sb->disk_mb);
        json_w_kv_string(w, "state", e2b_state(sb->state) ?: "running");
        json_w_key(w, "metadata");
        if (sb->metadata_json)
                json_w_raw(w, sb->metadata_json);
        else {
                json_w_object_begin(w);
                json_w_object_end(w);
        }
        if (detail) {
                char token[E2B_TOKEN_LEN + 1];
                int k = e2b_access_token(api_config(r->api), sb->id, token);
                if (k < 0)
                        return k;
                json_w_kv_string(w, "envdAccessToken", token);
                explicit_bzero(token, sizeof token);
                kv_domain(r, w);
                e2b_network_write_info(w, sb);
                json_w_key(w, "lifecycle");
                json_w_object_begin(w);
                json_w_kv_string(w, "onTimeout", e2b_auto_pause(sb) ? "pause" : "kill");
                json_w_kv_bool(w, "autoResume", sb->auto_resume);
                json_w_object_end(w);
        }
        json_w_object_end(w);
        return 0;
}

static int reply_sandbox(ApiRequest *r, int status, const char *id, ApiError *e) {
        _cleanup_sandbox_ Sandbox sb = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        int k;

        json_w_init(&w);
        k = store_sandbox_get(r->store, r->key.tenant_id, id, &sb);
        if (k < 0)
                return api_store_error(e, k, "reading the sandbox back");
        k = e2b_write_sandbox(r, &w, &sb);
        if (k < 0)
                return api_error(e, k, API_INTERNAL, "cannot make the sandbox's access token");
        return e2b_reply_json(r, status, &w, NULL);
}

/* A sandbox of the tenant the E2B API may show: 404 otherwise. */
static int lookup(ApiRequest *r, const char *id, Sandbox *ret, ApiError *e) {
        int k = api_sandbox_lookup(r, id, false, ret, e);

        if (k < 0) {
                if (e->code == API_NOT_FOUND)
                        (void) api_error(e, k, API_NOT_FOUND, "sandbox '%.64s' not found", id);
                return k;
        }
        return 0;
}

/* ---- create ---- */

/* E2B's create body → the v1 create body (validated there, with the deployment's defaults and bounds). */
static int create_body(ApiRequest *r, const JsonValue *in, JsonValue **ret, ApiError *e) {
        const Config *c = api_config(r->api);
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *text = NULL, *policy = NULL, *creds = NULL;
        const JsonValue *tmpl = json_get(in, "templateID"), *timeout = json_get(in, "timeout"),
                        *metadata = json_get(in, "metadata"), *env = json_get(in, "envVars"),
                        *network = json_get(in, "network");
        uint64_t t = E2B_DEFAULT_TIMEOUT_S;
        E2bLifecycle lc;
        size_t n;
        int k;

        if (tmpl && !json_is_null(tmpl) && json_type(tmpl) != JSON_STRING)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "templateID must be a string");
        if (timeout && !json_is_null(timeout) && json_uint64(timeout, &t) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "timeout must be a number of seconds (>= 0)");
        if (metadata && !json_is_null(metadata) && json_type(metadata) != JSON_OBJECT)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "metadata must be an object of strings");
        if (env && !json_is_null(env) && json_type(env) != JSON_OBJECT)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "envVars must be an object of strings");
        k = e2b_body_lifecycle(in, &lc, e);
        if (k >= 0)
                k = e2b_network_policy(json_get(in, "allow_internet_access"), network, c, true, &policy, e);
        if (k >= 0)
                k = e2b_network_credentials(r, network, &creds, e);
        if (k < 0)
                return k;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "template", tmpl && !json_is_null(tmpl) ? json_string(tmpl) : "base");
        json_w_key(&w, "timeout_s");
        json_w_uint(&w, lc.on_timeout != IDLE_ACTION_NONE ? 0 : t);
        if (lc.on_timeout != IDLE_ACTION_NONE) {
                json_w_key(&w, "idle_s");
                json_w_uint(&w, MAX(t, (uint64_t) 1));
                json_w_kv_string(&w, "idle_action", idle_action_to_string(lc.on_timeout));
        }
        json_w_kv_bool(&w, "auto_resume", lc.auto_resume);
        if (network && !json_is_null(network)) {
                const JsonValue *pub = json_get(network, "allowPublicTraffic");
                bool b = false;
                if (json_type(network) != JSON_OBJECT)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "network must be an object");
                if (pub && !json_is_null(pub) && json_bool(pub, &b) < 0)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "network.allowPublicTraffic must be a boolean");
                json_w_kv_bool(&w, "public_traffic", b);
        }
        if (policy) {
                json_w_key(&w, "network");
                json_w_raw(&w, policy);
        }
        if (creds) {
                json_w_key(&w, "credentials");
                json_w_raw(&w, creds);
        }
        if (metadata && !json_is_null(metadata)) {
                _cleanup_free_ char *m = NULL;
                if (json_serialize(metadata, &m, NULL) < 0)
                        return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                json_w_key(&w, "metadata");
                json_w_raw(&w, m);
        }
        if (env && !json_is_null(env)) {
                _cleanup_free_ char *m = NULL;
                if (json_serialize(env, &m, NULL) < 0)
                        return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                json_w_key(&w, "env");
                json_w_raw(&w, m);
        }
        json_w_object_end(&w);
        if (json_w_finish(&w, &text, &n) < 0)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        k = json_parse(text, n, ret, NULL, 0);
        if (k < 0)
                return api_error(e, k, API_INTERNAL, "cannot build the create request");
        return 0;
}

int e2b_body_lifecycle(const JsonValue *in, E2bLifecycle *ret, ApiError *e) {
        const JsonValue *v = json_get(in, "autoPause"), *mem = json_get(in, "autoPauseMemory"),
                        *ar = json_get(in, "autoResume");
        bool pause = false, memory = true, resume = false;

        if (v && !json_is_null(v) && json_bool(v, &pause) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "autoPause must be a boolean");
        if (mem && !json_is_null(mem) && json_bool(mem, &memory) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "autoPauseMemory must be a boolean");
        if (ar && !json_is_null(ar)) {
                const JsonValue *en = json_get(ar, "enabled");
                if (json_type(ar) != JSON_OBJECT || !en || json_bool(en, &resume) < 0)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "autoResume must be an object {\"enabled\": true|false}");
        }
        if (resume && pause && !memory)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "autoResume cannot be combined with autoPauseMemory false: a sandbox paused "
                                 "without its memory is resumed explicitly (connect)");
        *ret = (E2bLifecycle) {
                .on_timeout = !pause ? IDLE_ACTION_NONE : memory ? IDLE_ACTION_PAUSE : IDLE_ACTION_SUSPEND,
                .auto_resume = resume,
        };
        return 0;
}

static int rest_create(ApiRequest *r, ApiError *e) {
        const Config *c = api_config(r->api);
        _cleanup_json_ JsonValue *in = NULL, *body = NULL;
        _cleanup_sandbox_ Sandbox sb = {};
        _cleanup_free_ ApiVolumeMounts *vols = new0(ApiVolumeMounts, 1);
        _cleanup_free_ char *start = NULL;
        const JsonValue *tmpl;
        uint64_t live = 0;
        Template t;
        int k;

        if (!vols)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        k = e2b_read_json(r, &in, e);
        if (k < 0)
                return k;
        tmpl = json_get(in, "templateID");
        if (json_type(tmpl) == JSON_STRING) {
                /* a snapshot's id names what to start from, as in E2B */
                k = e2b_create_from_snapshot(r, json_string(tmpl), in, e);
                if (k != 0)
                        return k < 0 ? k : 0;
        }
        k = create_body(r, in, &body, e);
        if (k < 0)
                return k;
        k = api_validate_sandbox_create(body, c, &sb, e);
        if (k >= 0)
                k = api_sandbox_resolve_template(r, &sb, e); /* NAME:TAG, NAME@vN */
        if (k < 0)
                return k;
        k = api_volume_mounts_parse(r, json_get(in, "volumeMounts"), "readOnly", vols, e);
        if (k < 0)
                return k;
        k = api_sandbox_defaults(r, &sb, &start, e);
        if (k < 0)
                return k;
        {
                const JsonValue *net = json_get(in, "network");
                k = e2b_mask_host(json_type(net) == JSON_OBJECT ? json_get(net, "maskRequestHost") : NULL,
                                  sb.ingress_host, e);
                if (k < 0)
                        return k;
        }
        if (json_array_size(json_get(body, "credentials")) > 0) {
                /* network.rules: their credentials granted before the create answers (no warm sandbox) */
                Credential *creds = NULL;
                size_t n = 0;
                k = api_credentials_resolve_scoped(r, json_get(body, "credentials"), true, &creds, &n, e);
                if (k >= 0)
                        k = api_credentials_add_env(creds, n, &sb.env_json, e);
                if (k >= 0)
                        k = api_sandbox_create_with(r, &sb, creds, n, "e2b", vols, e);
                credential_array_free(creds, n);
                if (k >= 0)
                        k = api_sandbox_start_command(r, &sb, start, e);
                if (k < 0)
                        return k;
                return reply_sandbox(r, 201, sb.id, e);
        }
        k = store_template_get(r->store, sb.template_name, &t);
        if (k >= 0 && t.tenant_id[0] && !streq(t.tenant_id, r->key.tenant_id))
                k = -ENOENT; /* another tenant's template is none (as for GET /templates/aliases/{alias}) */
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "template '%s' not found", sb.template_name);
        if (k < 0)
                return api_store_error(e, k, "looking up the template");
        if (t.state != TEMPLATE_READY)
                return api_error(e, -EBUSY, API_CONFLICT, "template '%s' is still being imported", t.name);
        (void) strscpy(sb.tenant_id, sizeof sb.tenant_id, r->key.tenant_id);
        sb.created_usec = sb.updated_usec = now_usec();
        sb.expires_usec = sb.timeout_s > 0 ? sb.created_usec + (int64_t) sb.timeout_s * 1000000 : 0;
        /* a warm sandbox if the template has a pool and one is free: the request's limits, timeout, envs,
         * metadata and lifecycle are applied to it as to a new one */
        k = vols->n > 0 || sb.ingress_host[0] ? 0 : api_sandbox_create_warm(r, &sb, "e2b", e); /* a warm one has no mask */
        if (k > 0)
                k = api_sandbox_start_command(r, &sb, start, e) ?: 1;
        if (k < 0)
                return k;
        if (k > 0)
                return reply_sandbox(r, 201, sb.id, e);

        k = api_sandbox_count(r, NULL, &live, e);
        if (k < 0)
                return k;
        if (live >= c->max_sandboxes)
                return api_error(e, -EAGAIN, API_TOO_MANY_REQUESTS,
                                 "this host already runs its maximum of %" PRIu64 " sandboxes", c->max_sandboxes);
        k = api_sandbox_start_new(r, &sb, "e2b", vols, e);
        if (k >= 0)
                k = api_sandbox_start_command(r, &sb, start, e);
        if (k < 0)
                return k;
        return reply_sandbox(r, 201, sb.id, e);
}

/* ---- lifecycle ---- */

/* Extends (connect) or sets (setTimeout) the expiry; of an autoPause
 * sandbox, the idle window (which restarts now). */
int e2b_set_expiry(ApiRequest *r, const Sandbox *sb, uint64_t timeout_s, bool only_extend, ApiError *e) {
        int64_t want;
        int k;

        if (timeout_s > api_config(r->api)->max_timeout_s)
                return api_error(e, -ERANGE, API_INVALID_ARGUMENT, "timeout must be at most %" PRIu64 " s",
                                 api_config(r->api)->max_timeout_s);
        if (e2b_auto_pause(sb)) {
                SandboxPolicy p = { .idle_s = MAX(timeout_s, (uint64_t) 1), .idle_action = sb->idle_action,
                                    .checkpoint_every_s = sb->checkpoint_every_s, .auto_resume = sb->auto_resume };
                (void) store_sandbox_touch(r->store, sb->id);
                if (only_extend && p.idle_s <= sb->idle_s)
                        return 0;
                k = store_sandbox_set_policy(r->store, sb->id, &p);
                if (k < 0)
                        return api_store_error(e, k, "setting the idle window");
                return 0;
        }
        want = now_usec() + (int64_t) timeout_s * 1000000;
        if (only_extend && (sb->expires_usec == 0 || sb->expires_usec >= want))
                return 0;
        k = store_sandbox_set_expiry(r->store, sb->id, want);
        if (k < 0)
                return api_store_error(e, k, "setting the expiry");
        return 0;
}

static int body_timeout(const JsonValue *body, bool required, uint64_t *ret, ApiError *e) {
        const JsonValue *v = json_get(body, "timeout");

        if (!v || json_is_null(v)) {
                if (required)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "timeout (seconds) is required");
                return 0;
        }
        if (json_uint64(v, ret) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "timeout must be a number of seconds (>= 0)");
        return 1;
}

/* {"memory": false} (connect's onResume 'reboot', pause's keepMemory false): the processes' memory goes. */
static int body_memory(const JsonValue *body, bool *ret_keep, ApiError *e) {
        const JsonValue *v = json_get(body, "memory");

        *ret_keep = true;
        if (v && !json_is_null(v) && json_bool(v, ret_keep) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "memory must be a boolean");
        return 0;
}

/* Resumes a paused sandbox (201), or answers 200 for a running one; with
 * {"memory": false} a paused one restarts on its files (its processes end). */
static int rest_connect(ApiRequest *r, const char *id, ApiError *e) {
        _cleanup_sandbox_lock_ ApiSandboxLock *lock = NULL;
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_sandbox_ Sandbox sb = {};
        char reason[STORE_REASON_MAX];
        uint64_t timeout = 0;
        bool keep_memory;
        int k, have;

        k = e2b_read_json(r, &body, e);
        if (k < 0)
                return k;
        have = body_timeout(body, false, &timeout, e);
        if (have < 0)
                return have;
        k = body_memory(body, &keep_memory, e);
        if (k < 0)
                return k;
        lock = api_sandbox_lock(id);
        k = lookup(r, id, &sb, e);
        if (k < 0)
                return k;
        if (sb.state != SANDBOX_RUNNING && sb.state != SANDBOX_PAUSED && sb.state != SANDBOX_SUSPENDED)
                return api_error(e, -EBUSY, API_CONFLICT, "sandbox '%s' is %s and cannot be connected to", id,
                                 sandbox_state_to_string(sb.state));
        snprintf(reason, sizeof reason, "resumed by %s (E2B connect%s)", r->actor,
                 keep_memory ? "" : ", without memory");
        k = api_sandbox_wake_locked(r, &sb, !keep_memory, reason, e);
        if (k < 0)
                return k;
        have = e2b_set_expiry(r, &sb, have > 0 ? timeout : E2B_DEFAULT_TIMEOUT_S, true, e);
        if (have < 0)
                return have;
        return reply_sandbox(r, k > 0 ? 201 : 200, id, e);
}

/* Pauses (keeps memory) or, with {"memory": false}, suspends (ends the processes, keeps the files). */
static int rest_pause(ApiRequest *r, const char *id, ApiError *e) {
        _cleanup_sandbox_lock_ ApiSandboxLock *lock = NULL;
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_sandbox_ Sandbox sb = {};
        char reason[STORE_REASON_MAX];
        bool keep_memory;
        int k;

        k = e2b_read_json(r, &body, e);
        if (k < 0)
                return k;
        k = body_memory(body, &keep_memory, e);
        if (k < 0)
                return k;
        lock = api_sandbox_lock(id);
        k = lookup(r, id, &sb, e);
        if (k < 0)
                return k;
        if (sb.state == SANDBOX_PAUSED || sb.state == SANDBOX_SUSPENDED)
                return api_error(e, -EALREADY, API_CONFLICT, "sandbox '%s' is already paused", id);
        if (sb.state != SANDBOX_RUNNING)
                return api_error(e, -EBUSY, API_CONFLICT, "sandbox '%s' is %s and cannot be paused", id,
                                 sandbox_state_to_string(sb.state));
        snprintf(reason, sizeof reason, "paused by %s (E2B pause%s)", r->actor, keep_memory ? "" : ", without memory");
        k = keep_memory ? api_sandbox_pause_locked(r, &sb, reason, e) : api_sandbox_suspend_locked(r, &sb, reason, e);
        if (k < 0)
                return k;
        return e2b_reply(r, 204, NULL, NULL, 0, NULL);
}

static int rest_timeout(ApiRequest *r, const char *id, ApiError *e) {
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_sandbox_ Sandbox sb = {};
        uint64_t timeout = 0;
        int k;

        k = e2b_read_json(r, &body, e);
        if (k < 0)
                return k;
        k = body_timeout(body, true, &timeout, e);
        if (k < 0)
                return k;
        k = lookup(r, id, &sb, e);
        if (k < 0)
                return k;
        k = e2b_set_expiry(r, &sb, timeout, false, e);
        if (k < 0)
                return k;
        return e2b_reply(r, 204, NULL, NULL, 0, NULL);
}

static int rest_kill(ApiRequest *r, const char *id, ApiError *e) {
        _cleanup_sandbox_lock_ ApiSandboxLock *lock = NULL;
        _cleanup_sandbox_ Sandbox sb = {};
        char reason[STORE_REASON_MAX];
        int k;

        lock = api_sandbox_lock(id); /* after any lifecycle call in flight on it, as /v1 delete */
        k = lookup(r, id, &sb, e);
        if (k < 0)
                return k;
        snprintf(reason, sizeof reason, "deleted by %s (E2B kill)", r->actor);
        k = api_sandbox_destroy(r, id, reason, e);
        if (k == -ESTALE)
                return api_error(e, -ENOENT, API_NOT_FOUND, "sandbox '%s' not found", id);
        if (k < 0)
                return k;
        return e2b_reply(r, 204, NULL, NULL, 0, NULL);
}

static int rest_info(ApiRequest *r, const char *id, ApiError *e) {
        _cleanup_sandbox_ Sandbox sb = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        int k;

        json_w_init(&w);
        k = lookup(r, id, &sb, e);
        if (k < 0)
                return k;
        if (!e2b_state(sb.state))
                return api_error(e, -ENOENT, API_NOT_FOUND, "sandbox '%s' is %s: %s", id,
                                 sandbox_state_to_string(sb.state), sb.reason);
        k = write_listed(r, &w, &sb, true);
        if (k < 0)
                return api_error(e, k, API_INTERNAL, "cannot make the sandbox's access token");
        return e2b_reply_json(r, 200, &w, NULL);
}

static int rest_metrics(ApiRequest *r, const char *id, ApiError *e) {
        _cleanup_sandbox_ Sandbox sb = {};
        int k;

        k = lookup(r, id, &sb, e);
        if (k < 0)
                return k;
        return e2b_metrics(r, &sb, e);
}

/* ---- list ---- */

typedef struct ListQuery {
        bool states[_SANDBOX_STATE_MAX];
        char **meta;   /* k, v, k, v, ... */
        char *template_name;
        int64_t started_after_usec;
        uint64_t limit;
        bool ascending;         /* order=asc: oldest first; E2B's default is newest first */
        char *next;             /* the cursor: "<startedAt usec>_<id>" of the last one shown */
        int64_t next_usec;
        const char *next_id;    /* inside next */
} ListQuery;

static void list_query_done(ListQuery *q) {
        q->meta = strv_free(q->meta);
        q->template_name = mfree(q->template_name);
        q->next = mfree(q->next);
}

/* metadata=<urlencoded "k=v&k2=v2"> whose keys and values are themselves percent-encoded (twice). */
static int parse_metadata_query(const char *v, char ***ret, ApiError *e) {
        _cleanup_strv_free_ char **l = NULL;
        size_t n = strlen(v);

        if (n > E2B_METADATA_QUERY_MAX)
                return api_error(e, -E2BIG, API_INVALID_ARGUMENT, "metadata filter too long");
        for (const char *p = v; *p;) {
                size_t len = strcspn(p, "&");
                const char *eq = memchr(p, '=', len);
                for (int half = 0; half < 2; half++) {
                        const char *s = half == 0 ? p : eq + 1;
                        size_t sl = half == 0 ? (size_t) ((eq ?: p + len) - p) : (size_t) (p + len - (eq + 1));
                        _cleanup_free_ char *once = NULL, *twice = NULL;

                        if (!eq)
                                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                                 "metadata filter must be k=v pairs joined by '&'");
                        if (http_percent_decode(s, sl, true, &once) < 0)
                                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "metadata filter is badly encoded");
                        /* the JS SDK encodes keys and values once more; Python does not */
                        if (http_percent_decode(once, strlen(once), false, &twice) < 0)
                                twice = TAKE_PTR(once);
                        if (strv_push(&l, TAKE_PTR(twice)) < 0)
                                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                }
                p += len;
                if (*p == '&')
                        p++;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

/* Every "state" of the query: "state=running,paused" (JS) or "state=running&state=paused" (Python). */
static int parse_states(ApiRequest *r, ListQuery *q, bool *ret_any, ApiError *e) {
        const char *query = r->head->query;

        *ret_any = false;
        for (const char *p = query; p && *p;) {
                size_t len = strcspn(p, "&");
                _cleanup_free_ char *state = NULL;

                if (len > 6 && strncmp(p, "state=", 6) == 0) {
                        if (http_percent_decode(p + 6, len - 6, true, &state) < 0)
                                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "state is badly encoded");
                        *ret_any = true;
                        for (char *s = state; *s;) {
                                size_t n = strcspn(s, ",");
                                char one[16];
                                if (n == 0 || n >= sizeof one)
                                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                                         "state must be running, paused or both");
                                memcpy(one, s, n);
                                one[n] = 0;
                                if (streq(one, "running"))
                                        q->states[SANDBOX_RUNNING] = q->states[SANDBOX_CREATING] = true;
                                else if (streq(one, "paused"))
                                        q->states[SANDBOX_PAUSED] = q->states[SANDBOX_SUSPENDED] = true;
                                else
                                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                                         "state must be running, paused or both, not '%.16s'", one);
                                s += n;
                                if (*s == ',')
                                        s++;
                        }
                }
                p += len;
                if (*p == '&')
                        p++;
        }
        return 0;
}

/* A list's cursor: "<startedAt in usec>_<sandbox id>" of the last sandbox of
 * the page before, so that the next page starts after it in the list's order
 * even when that sandbox is gone by then. */
static int parse_cursor(const char *s, int64_t *ret_usec, const char **ret_id) {
        const char *sep = strchr(s, '_');
        int64_t usec = 0;

        if (!sep || sep == s || sep - s > 19 || !api_sandbox_id_valid(sep + 1))
                return -EINVAL;
        for (const char *p = s; p < sep; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                usec = usec * 10 + (*p - '0');
        }
        *ret_usec = usec;
        *ret_id = sep + 1;
        return 0;
}

static int parse_list_query(ApiRequest *r, ListQuery *q, ApiError *e) {
        _cleanup_free_ char *meta = NULL, *after = NULL, *order = NULL;
        bool any_state;
        int k;

        q->limit = E2B_LIST_LIMIT_DEFAULT;
        k = parse_states(r, q, &any_state, e);
        if (k < 0)
                return k;
        if (!any_state) /* running and paused */
                q->states[SANDBOX_RUNNING] = q->states[SANDBOX_CREATING] = q->states[SANDBOX_PAUSED] =
                        q->states[SANDBOX_SUSPENDED] = true;
        k = api_query_string(r, "metadata", &meta, e);
        if (k < 0)
                return k;
        if (meta) {
                k = parse_metadata_query(meta, &q->meta, e);
                if (k < 0)
                        return k;
        }
        k = api_query_string(r, "template", &q->template_name, e);
        if (k < 0)
                return k;
        k = api_query_string(r, "startedAfter", &after, e);
        if (k < 0)
                return k;
        if (after && api_parse_time(after, &q->started_after_usec) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "startedAfter must be an RFC 3339 time");
        k = api_query_string(r, "order", &order, e);
        if (k < 0)
                return k;
        if (order && !streq(order, "asc") && !streq(order, "desc"))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "order must be asc or desc");
        q->ascending = order && streq(order, "asc");
        k = api_query_u64(r, "limit", 1, E2B_LIST_LIMIT_MAX, &q->limit, e);
        if (k < 0)
                return k;
        k = api_query_string(r, "nextToken", &q->next, e);
        if (k < 0)
                return k;
        if (q->next && parse_cursor(q->next, &q->next_usec, &q->next_id) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "nextToken is not one this server handed out");
        return 0;
}

static bool metadata_matches(const Sandbox *sb, char **meta) {
        _cleanup_json_ JsonValue *m = NULL;

        if (strv_length(meta) == 0)
                return true;
        if (!sb->metadata_json || json_parse(sb->metadata_json, strlen(sb->metadata_json), &m, NULL, 0) < 0)
                return false;
        for (char **p = meta; p[0] && p[1]; p += 2) {
                const JsonValue *v = json_get(m, p[0]);
                if (json_type(v) != JSON_STRING || !streq(json_string(v), p[1]))
                        return false;
        }
        return true;
}

static bool list_matches(const ListQuery *q, const Sandbox *sb) {
        if (sb->state < 0 || sb->state >= _SANDBOX_STATE_MAX || !q->states[sb->state])
                return false;
        if (q->template_name && !streq(q->template_name, sb->template_name))
                return false;
        if (q->started_after_usec > 0 && sb->created_usec <= q->started_after_usec)
                return false;
        return metadata_matches(sb, q->meta);
}

/* Newest first (E2B's order by startedAt), ties by id; ascending reverses it. */
static int listed_cmp_desc(const void *a, const void *b) {
        const Sandbox *x = a, *y = b;

        if (x->created_usec != y->created_usec)
                return x->created_usec > y->created_usec ? -1 : 1;
        return -strcmp(x->id, y->id);
}

static int listed_cmp_asc(const void *a, const void *b) {
        return listed_cmp_desc(b, a);
}

/* True if sb comes after the cursor in the list's order. */
static bool after_cursor(const ListQuery *q, const Sandbox *sb) {
        Sandbox c = { .created_usec = q->next_usec };

        if (!q->next)
                return true;
        (void) strscpy(c.id, sizeof c.id, q->next_id);
        return (q->ascending ? listed_cmp_asc(&c, sb) : listed_cmp_desc(&c, sb)) < 0;
}

/* Every sandbox of the tenant that matches the query and comes after the
 * cursor, moved out of the store's pages into one array. */
static int collect_listed(ApiRequest *r, const ListQuery *q, Sandbox **ret, size_t *ret_n, ApiError *e) {
        char cursor[STORE_ID_MAX] = "";
        Sandbox *all = NULL;
        size_t n_all = 0, allocated = 0;

        for (;;) {
                SandboxFilter f = { .tenant_id = r->key.tenant_id, .state = -1, .limit = E2B_LIST_SCAN_PAGE };
                Sandbox *page = NULL;
                size_t n = 0;
                int k;

                f.after_id = cursor[0] ? cursor : NULL;
                k = store_sandbox_list(r->store, &f, &page, &n);
                if (k < 0) {
                        sandbox_array_free(all, n_all);
                        return api_store_error(e, k, "listing sandboxes");
                }
                for (size_t i = 0; i < n; i++) {
                        if (!list_matches(q, &page[i]) || !after_cursor(q, &page[i]))
                                continue;
                        if (n_all >= E2B_LIST_SORT_MAX || GREEDY_REALLOC(all, allocated, n_all + 1) < 0) {
                                sandbox_array_free(page, n);
                                sandbox_array_free(all, n_all);
                                return api_error(e, -ENOMEM, API_INTERNAL, "cannot list sandboxes");
                        }
                        all[n_all++] = page[i];
                        page[i] = (Sandbox){}; /* its members are all's now */
                }
                if (n > 0)
                        (void) strscpy(cursor, sizeof cursor, page[n - 1].id);
                sandbox_array_free(page, n);
                if (n < E2B_LIST_SCAN_PAGE)
                        break;
        }
        *ret = all;
        *ret_n = n_all;
        return 0;
}

static int rest_list(ApiRequest *r, ApiError *e) {
        _cleanup_(list_query_done) ListQuery q = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        char hdr[STORE_ID_MAX + 64] = "";
        Sandbox *all = NULL;
        size_t n = 0, shown;
        int k;

        json_w_init(&w);
        k = parse_list_query(r, &q, e);
        if (k < 0)
                return k;
        k = collect_listed(r, &q, &all, &n, e);
        if (k < 0)
                return k;
        if (n > 1)
                qsort(all, n, sizeof *all, q.ascending ? listed_cmp_asc : listed_cmp_desc);

        shown = MIN(n, (size_t) q.limit);
        json_w_array_begin(&w);
        for (size_t i = 0; i < shown; i++) {
                k = write_listed(r, &w, &all[i], false);
                if (k < 0) {
                        sandbox_array_free(all, n);
                        return api_error(e, k, API_INTERNAL, "cannot list sandboxes");
                }
        }
        json_w_array_end(&w);
        if (shown < n)
                snprintf(hdr, sizeof hdr, "X-Next-Token: %" PRId64 "_%s\r\n", all[shown - 1].created_usec,
                         all[shown - 1].id);
        sandbox_array_free(all, n);
        return e2b_reply_json(r, 200, &w, hdr);
}

/* ---- routing ---- */

static int method_not_allowed(ApiRequest *r, ApiError *e) {
        return api_error(e, -EINVAL, API_METHOD_NOT_ALLOWED, "%.16s is not allowed on %.200s", r->head->method,
                         r->head->path);
}

static int rest_refresh(ApiRequest *r, const char *id, ApiError *e) {
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_sandbox_ Sandbox sb = {};
        const JsonValue *v;
        uint64_t d = E2B_DEFAULT_TIMEOUT_S;
        int k;

        /* older SDKs keep a sandbox alive with {"duration": s} */
        k = e2b_read_json(r, &body, e);
        if (k < 0)
                return k;
        v = json_get(body, "duration");
        if (v && !json_is_null(v) && json_uint64(v, &d) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "duration must be a number of seconds");
        k = lookup(r, id, &sb, e);
        if (k < 0)
                return k;
        k = e2b_set_expiry(r, &sb, d, true, e);
        if (k < 0)
                return k;
        return e2b_reply(r, 204, NULL, NULL, 0, NULL);
}

/* GET /templates/aliases/{alias}: a template this tenant may start from
 * (global, or its own) → {templateID, public}; else 404, which the SDKs'
 * Template.exists() reads as "no such template" (another tenant's template is
 * not told apart from none). */
static int rest_template_alias(ApiRequest *r, const char *alias, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w = {};
        Template t;
        int k;

        k = store_template_get(r->store, alias, &t);
        if (k < 0 && k != -ENOENT)
                return api_store_error(e, k, "looking up the template");
        if (k < 0 || (t.tenant_id[0] && !streq(t.tenant_id, r->key.tenant_id)))
                return api_error(e, -ENOENT, API_NOT_FOUND, "template '%.64s' not found", alias);
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "templateID", t.name);
        json_w_kv_bool(&w, "public", t.tenant_id[0] == 0);
        json_w_object_end(&w);
        return e2b_reply_json(r, 200, &w, NULL);
}

static bool is(const char *method, const char *want) {
        return streq(method, want);
}

/* /events/webhooks[/{id}]: the lifecycle webhooks of webhooks.c in E2B's shape. */
static int rest_webhooks(ApiRequest *r, char **s, size_t n, ApiError *e) {
        const char *m = r->head->method;

        if (n == 2) {
                if (is(m, "GET"))
                        return api_e2b_webhook_list(r, e);
                if (is(m, "POST"))
                        return api_e2b_webhook_create(r, e);
                return method_not_allowed(r, e);
        }
        r->params[0] = s[2];
        if (is(m, "GET"))
                return api_e2b_webhook_show(r, e);
        if (is(m, "PATCH"))
                return api_e2b_webhook_patch(r, e);
        if (is(m, "DELETE"))
                return api_webhook_delete(r, e);
        return method_not_allowed(r, e);
}

static int route(ApiRequest *r, char **segs, size_t n, ApiError *e) {
        const char *m = r->head->method;
        bool v2 = n >= 2 && streq(segs[0], "v2") && streq(segs[1], "sandboxes");
        char **s = v2 ? segs + 1 : segs; /* from "sandboxes" on */
        size_t k = v2 ? n - 1 : n;

        if (!v2 && streq(s[0], "volumes"))
                return e2b_volumes_route(r, s, n, e);
        if (!v2 && streq(s[0], "volumecontent"))
                return e2b_volume_content_route(r, s, n, e);
        if (!v2 && n == 1 && streq(s[0], "snapshots"))
                return is(m, "GET") ? e2b_snapshot_list(r, e) : method_not_allowed(r, e);
        if (!v2 && n == 2 && streq(s[0], "templates") && !streq(s[1], "tags") && is(m, "DELETE"))
                return e2b_snapshot_delete(r, s[1], e);
        if (!v2 && n == 3 && streq(s[0], "templates") && streq(s[1], "aliases"))
                return is(m, "GET") ? rest_template_alias(r, s[2], e) : method_not_allowed(r, e);
        if (!v2 && n >= 2 && n <= 3 && streq(s[0], "events") && streq(s[1], "webhooks"))
                return rest_webhooks(r, s, n, e);
        if (!v2 && streq(s[0], "secrets"))
                return e2b_secrets_route(r, s, n, e);
        if (!v2 && streq(s[0], "templates") && ((n == 2 && streq(s[1], "tags")) || (n == 3 && streq(s[2], "tags"))))
                return e2b_template_tags_route(r, s, n, e);
        if (!v2 && (streq(s[0], "v2") || streq(s[0], "v3") || streq(s[0], "templates"))) {
                int q = e2b_templates_route(r, s, n, e);
                if (q <= 0)
                        return q;
        }
        if (!streq(s[0], "sandboxes"))
                /* a part of E2B's API that space does not serve (builds, tags, secrets, ...): 501, which no SDK
                 * reads as "there is none" (docs/e2b-compat.md) */
                return api_error(e, -EOPNOTSUPP, API_NOT_IMPLEMENTED, "%.200s is not supported by space's E2B API",
                                 r->head->path);
        if (k == 1) {
                if (is(m, "GET"))
                        return rest_list(r, e);
                if (is(m, "POST"))
                        return rest_create(r, e);
                return method_not_allowed(r, e);
        }
        if (k == 2 && !v2 && streq(s[1], "metrics"))
                return is(m, "GET") ? e2b_metrics_many(r, e) : method_not_allowed(r, e);
        if (k == 2 && !v2) {
                if (is(m, "GET"))
                        return rest_info(r, s[1], e);
                if (is(m, "DELETE"))
                        return rest_kill(r, s[1], e);
                return method_not_allowed(r, e);
        }
        if (k == 3) {
                const char *op = s[2], *id = s[1];
                if (streq(op, "connect") || (!v2 && streq(op, "resume")))
                        return is(m, "POST") ? rest_connect(r, id, e) : method_not_allowed(r, e);
                if (streq(op, "logs"))
                        return is(m, "GET") ? e2b_sandbox_logs(r, id, !v2, e) : method_not_allowed(r, e);
                if (v2)
                        return api_error(e, -ENOENT, API_NOT_FOUND, "no such endpoint");
                if (streq(op, "pause"))
                        return is(m, "POST") ? rest_pause(r, id, e) : method_not_allowed(r, e);
                if (streq(op, "timeout"))
                        return is(m, "POST") ? rest_timeout(r, id, e) : method_not_allowed(r, e);
                if (streq(op, "refreshes"))
                        return is(m, "POST") ? rest_refresh(r, id, e) : method_not_allowed(r, e);
                if (streq(op, "metrics"))
                        return is(m, "GET") ? rest_metrics(r, id, e) : method_not_allowed(r, e);
                if (streq(op, "snapshots"))
                        return is(m, "POST") ? e2b_snapshot_create(r, id, e) : method_not_allowed(r, e);
                if (streq(op, "fork"))
                        return is(m, "POST") ? e2b_fork(r, id, e) : method_not_allowed(r, e);
                if (streq(op, "network"))
                        return is(m, "PUT") ? e2b_network_update(r, id, e) : method_not_allowed(r, e);
        }
        return api_error(e, -ENOENT, API_NOT_FOUND, "no such endpoint");
}

int e2b_rest_handle(ApiRequest *r, char **segs, size_t n) {
        ApiError e = {};
        int k;

        k = route(r, segs, n, &e);
        if (k < 0 && !http_conn_responded(r->conn)) {
                if (e.code == API_OK)
                        (void) api_error(&e, k, API_INTERNAL, "internal error: %s", strerror(-k));
                return e2b_reply_error(r, &e);
        }
        if (k < 0)
                http_conn_set_close(r->conn);
        return 0;
}
