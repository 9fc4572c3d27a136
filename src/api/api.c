/* SPDX-License-Identifier: MIT */
/* The /v1 API: the route table, dispatch, auth hand-off, per-thread store and
 * worker handles, request ids, one log line per request, and the helpers the
 * resource files share. */

#include <inttypes.h>
#include <stdio.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "cred-crypt.h"
#include "e2b.h"
#include "log.h"
#include "metrics-hist.h"
#include "str-util.h"
#include "time-util.h"

#define API_PARAM_MAX 255U      /* one {param} path segment */
#define API_SEGMENTS_MAX 16U

typedef struct Route {
        const char *method;
        const char *pattern;    /* "/v1/sandboxes/{id}/exec"; "{...}" segments are parameters */
        ApiHandler handler;
        bool needs_auth;
        bool needs_admin;
        bool sandbox_param;     /* params[0] is a sandbox id (for the log context) */
        bool stream;            /* may stay open long (exec output, event follows, files): key_streams_max */
} Route;

static const Route routes[] = {
        { "POST", "/v1/sandboxes", api_sandbox_create, true, false, false },
        { "GET", "/v1/sandboxes", api_sandbox_list, true, false, false },
        { "GET", "/v1/sandboxes/{id}", api_sandbox_show, true, false, true },
        { "DELETE", "/v1/sandboxes/{id}", api_sandbox_delete, true, false, true },
        { "PATCH", "/v1/sandboxes/{id}", api_sandbox_patch, true, false, true },
        { "PUT", "/v1/sandboxes/{id}/policy", api_sandbox_policy_put, true, false, true },
        { "POST", "/v1/sandboxes/{id}/pause", api_sandbox_pause, true, false, true },
        { "POST", "/v1/sandboxes/{id}/resume", api_sandbox_resume, true, false, true },
        { "POST", "/v1/sandboxes/{id}/suspend", api_sandbox_suspend, true, false, true },
        { "POST", "/v1/sandboxes/{id}/checkpoints", api_checkpoint_create, true, false, true },
        { "GET", "/v1/sandboxes/{id}/checkpoints", api_checkpoint_list, true, false, true },
        { "DELETE", "/v1/sandboxes/{id}/checkpoints/{checkpoint}", api_checkpoint_delete, true, false, true },
        { "POST", "/v1/sandboxes/{id}/restore", api_sandbox_restore, true, false, true },
        { "POST", "/v1/sandboxes/{id}/branch", api_sandbox_branch, true, false, true },
        { "POST", "/v1/sandboxes/{id}/exec", api_exec, true, false, true, true },
        { "GET", "/v1/sandboxes/{id}/exec", api_exec_list, true, false, true },
        { "GET", "/v1/sandboxes/{id}/exec/{exec_id}/output", api_exec_output, true, false, true, true },
        { "POST", "/v1/sandboxes/{id}/exec/{exec_id}/stdin", api_exec_stdin, true, false, true },
        { "POST", "/v1/sandboxes/{id}/exec/{exec_id}/signal", api_exec_signal, true, false, true },
        { "POST", "/v1/sandboxes/{id}/exec/{exec_id}/resize", api_exec_resize, true, false, true },
        { "GET", "/v1/sandboxes/{id}/files", api_files_get, true, false, true, true },
        { "GET", "/v1/sandboxes/{id}/ports/{port}", api_sandbox_port, true, false, true, false },
        { "GET", "/v1/sandboxes/{id}/ports/{port}/connect", api_sandbox_port_connect, true, false, true, true },
        { "PUT", "/v1/sandboxes/{id}/files", api_files_put, true, false, true, true },
        { "DELETE", "/v1/sandboxes/{id}/files", api_files_delete, true, false, true },
        { "POST", "/v1/sandboxes/{id}/files/move", api_files_move, true, false, true },
        { "GET", "/v1/templates", api_templates_list, true, false, false },
        { "POST", "/v1/templates", api_template_import, true, true, false },
        { "DELETE", "/v1/templates/{name}", api_template_remove, true, true, false },
        { "PATCH", "/v1/templates/{name}", api_template_patch, true, true, false },
        { "GET", "/v1/templates/{name}/versions", api_template_versions, true, false, false },
        { "GET", "/v1/templates/{name}/tags", api_template_tags, true, false, false },
        { "POST", "/v1/templates/{name}/tags", api_template_tag_post, true, true, false },
        { "DELETE", "/v1/templates/{name}/tags/{tag}", api_template_tag_delete, true, true, false },
        { "GET", "/v1/volumes", api_volume_list, true, false, false },
        { "POST", "/v1/volumes", api_volume_create, true, false, false },
        { "GET", "/v1/volumes/{name}", api_volume_show, true, false, false },
        { "DELETE", "/v1/volumes/{name}", api_volume_delete, true, false, false },
        { "POST", "/v1/volumes/{name}/clone", api_volume_clone, true, false, false },
        { "POST", "/v1/volumes/{name}/snapshot", api_volume_snapshot, true, false, false },
        { "GET", "/v1/volumes/{name}/files", api_volume_files_get, true, false, false },
        { "PUT", "/v1/volumes/{name}/files", api_volume_files_put, true, false, false },
        { "DELETE", "/v1/volumes/{name}/files", api_volume_files_delete, true, false, false },
        { "GET", "/v1/sandboxes/{id}/volumes", api_sandbox_volumes, true, false, true },
        { "POST", "/v1/templates/{name}/pull", api_template_pull, true, true, false },
        { "POST", "/v1/templates/{name}/build", api_template_build, true, true, false, true },
        { "GET", "/v1/events", api_events_list, true, false, false, true },
        { "POST", "/v1/keys", api_keys_create, true, false, false },
        { "GET", "/v1/keys", api_keys_list, true, false, false },
        { "DELETE", "/v1/keys/{id}", api_keys_delete, true, false, false },
        { "POST", "/v1/credentials", api_credential_create, true, false, false },
        { "GET", "/v1/credentials", api_credential_list, true, false, false },
        { "GET", "/v1/credentials/{name}", api_credential_show, true, false, false },
        { "PATCH", "/v1/credentials/{name}", api_credential_patch, true, false, false },
        { "DELETE", "/v1/credentials/{name}", api_credential_delete, true, false, false },
        { "POST", "/v1/credentials/{name}/revoke", api_credential_revoke, true, false, false },
        { "GET", "/v1/sandboxes/{id}/metrics", api_sandbox_metrics, true, false, true },
        { "GET", "/v1/sandboxes/{id}/credentials", api_sandbox_credentials_list, true, false, true },
        { "POST", "/v1/sandboxes/{id}/credentials/{name}", api_sandbox_credential_grant, true, false, true },
        { "DELETE", "/v1/sandboxes/{id}/credentials/{name}", api_sandbox_credential_revoke, true, false, true },
        { "POST", "/v1/webhooks", api_webhook_create, true, false, false },
        { "GET", "/v1/webhooks", api_webhook_list, true, false, false },
        { "GET", "/v1/webhooks/{id}", api_webhook_show, true, false, false },
        { "PATCH", "/v1/webhooks/{id}", api_webhook_patch, true, false, false },
        { "DELETE", "/v1/webhooks/{id}", api_webhook_delete, true, false, false },
        { "POST", "/v1/webhooks/{id}/test", api_webhook_test, true, false, false },
        { "GET", "/v1/tenants", api_tenants_list, true, true, false },
        { "GET", "/v1/tenants/{name}", api_tenant_show, true, false, false },
        { "PUT", "/v1/tenants/{name}", api_tenant_put, true, true, false },
        { "GET", "/v1/info", api_info, true, false, false },
        { "GET", "/healthz", api_healthz, false, false, false },
        { "GET", "/readyz", api_readyz, false, false, false },
        { "GET", "/metrics", api_metrics, false, false, false },
};

size_t api_route_count(void) {
        return ELEMENTSOF(routes);
}

void api_route_get(size_t i, const char **ret_method, const char **ret_pattern) {
        *ret_method = i < ELEMENTSOF(routes) ? routes[i].method : NULL;
        *ret_pattern = i < ELEMENTSOF(routes) ? routes[i].pattern : NULL;
}

typedef struct ThreadHandles {
        Store *store;
        WorkerClient *worker;
} ThreadHandles;

static void thread_handles_free(void *p) {
        ThreadHandles *h = p;
        if (!h)
                return;
        worker_client_free(h->worker); /* it borrows the store */
        store_close(h->store);
        free(h);
}

int api_new(const Config *config, Api **ret) {
        _cleanup_free_ Api *a = NULL;
        int r;

        if (!config || !ret)
                return -EINVAL;
        a = new0(Api, 1);
        if (!a)
                return -ENOMEM;
        a->config = *config;
        memcpy(a->worker_address, "unix:", 5);
        r = worker_socket_path(config, a->worker_address + 5, sizeof a->worker_address - 5);
        if (r < 0)
                return r;
        r = worker_agent_dir(config, a->agent_dir, sizeof a->agent_dir);
        if (r < 0)
                return r;
        r = api_limits_new(&a->limits);
        if (r < 0)
                return r;
        r = pthread_key_create(&a->handles_key, thread_handles_free);
        if (r != 0) {
                a->limits = api_limits_free(a->limits);
                return -r;
        }
        *ret = TAKE_PTR(a);
        return 0;
}

int api_set_cluster_token(Api *a, const char *token) {
        char *t = strdup(token);
        if (!t)
                return -ENOMEM;
        free(a->cluster_token);
        a->cluster_token = t;
        return 0;
}

Api *api_free(Api *a) {
        if (!a)
                return NULL;
        if (a->cluster_token) {
                explicit_bzero(a->cluster_token, strlen(a->cluster_token));
                free(a->cluster_token);
        }
        /* Handles of threads that are still alive are freed by their exit; this thread's now. */
        thread_handles_free(pthread_getspecific(a->handles_key));
        (void) pthread_setspecific(a->handles_key, NULL);
        (void) pthread_key_delete(a->handles_key);
        cred_key_free(a->cred_key);
        api_limits_free(a->limits);
        free(a);
        return NULL;
}

void api_set_cred_key(Api *a, CredKey *k) {
        cred_key_free(a->cred_key);
        a->cred_key = k;
}

void api_set_port_dialer(Api *a, ApiPortDialer dial, void *userdata) {
        a->port_dialer = dial;
        a->port_dialer_userdata = userdata;
}

void api_set_worker_status(Api *a, ApiWorkerStatus *s) {
        a->worker_status = s;
}

const char *api_worker_phase_to_string(ApiWorkerPhase p) {
        static const char *const table[_API_WORKER_PHASE_MAX] = {
                [API_WORKER_STARTING] = "starting",
                [API_WORKER_UP] = "up",
                [API_WORKER_DOWN] = "down",
                [API_WORKER_STOPPING] = "stopping",
        };
        return p >= 0 && p < _API_WORKER_PHASE_MAX ? table[p] : NULL;
}

unsigned api_worker_retry_after_s(const Api *a) {
        int64_t next, now = now_usec();

        if (!a || !a->worker_status || atomic_load(&a->worker_status->phase) != API_WORKER_DOWN)
                return 1;
        next = atomic_load(&a->worker_status->next_start_usec);
        /* its next start, and a second for it to become ready */
        return next > now ? (unsigned) MIN((next - now + 999999) / 1000000 + 1, (int64_t) 60) : 1;
}

const Config *api_config(const Api *a) {
        return &a->config;
}

void api_thread_done(void *userdata) {
        Api *a = userdata;

        if (!a)
                return;
        thread_handles_free(pthread_getspecific(a->handles_key));
        (void) pthread_setspecific(a->handles_key, NULL);
}

static ThreadHandles *thread_handles(Api *a) {
        ThreadHandles *h = pthread_getspecific(a->handles_key);
        if (h)
                return h;
        h = new0(ThreadHandles, 1);
        if (!h)
                return NULL;
        if (pthread_setspecific(a->handles_key, h) != 0) {
                free(h);
                return NULL;
        }
        return h;
}

int api_get_store(ApiRequest *r, ApiError *e) {
        ThreadHandles *h = thread_handles(r->api);
        int k;

        if (!h)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        if (!h->store) {
                k = store_open(r->api->config.store_url, &h->store);
                if (k < 0)
                        return api_error(e, k, API_UNAVAILABLE, "the store is unavailable: %s", strerror(-k));
        }
        r->store = h->store;
        return 0;
}

int api_get_worker(ApiRequest *r, ApiError *e) {
        ThreadHandles *h;
        int k;

        if (r->worker)
                return 0;
        h = thread_handles(r->api);
        if (!h)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        if (!h->worker && r->api->cluster_token) {
                /* a cluster: the store says where each sandbox lives */
                k = api_get_store(r, e);
                if (k < 0)
                        return k;
                k = worker_client_new_cluster(h->store, r->api->cluster_token,
                                              r->api->config.worker_lost_timeout_s, &h->worker);
                if (k < 0)
                        return api_error(e, k, API_UNAVAILABLE, "the worker client failed: %s", strerror(-k));
        }
        if (!h->worker) {
                k = worker_client_new(r->api->worker_address, r->api->agent_dir, &h->worker);
                if (k < 0)
                        return api_error(e, k, API_UNAVAILABLE, "the worker is unavailable: %s", strerror(-k));
        }
        r->worker = h->worker;
        return 0;
}

int api_store_error(ApiError *e, int r, const char *what) {
        if (r == -ENOENT)
                return api_error(e, r, API_NOT_FOUND, "%s", what);
        if (r == -ENOMEM)
                return api_error(e, r, API_UNAVAILABLE, "out of memory");
        return api_error(e, r, API_UNAVAILABLE, "the store failed (%s): %s", what, strerror(-r));
}

const char *api_tenant_name(ApiRequest *r, const char *tenant_id) {
        if (isempty(tenant_id))
                return "";
        if (streq(tenant_id, r->key.tenant_id) && r->tenant_name[0])
                return r->tenant_name;
        if (!r->tenants && r->store)
                (void) store_tenant_list(r->store, &r->tenants, &r->n_tenants);
        for (size_t i = 0; i < r->n_tenants; i++)
                if (streq(r->tenants[i].id, tenant_id))
                        return r->tenants[i].name;
        return tenant_id;
}

void api_log_sandbox(ApiRequest *r, const char *id) {
        (void) strscpy(r->log_sandbox, sizeof r->log_sandbox, id);
        log_set_context(r->log_sandbox, r->req_id);
}

/* ---- responses ---- */

static void request_headers(ApiRequest *r, char *buf, size_t size, const char *more) {
        if (r->retry_after_s > 0)
                snprintf(buf, size, "X-Request-Id: %s\r\nRetry-After: %d\r\n%s", r->req_id, r->retry_after_s,
                         strempty(more));
        else
                snprintf(buf, size, "X-Request-Id: %s\r\n%s", r->req_id, strempty(more));
}

static void body_pending_close(ApiRequest *r) {
        /* A body we did not read would be parsed as the next request: drop the connection instead. */
        if (!r->body_read && (r->head->content_length > 0 || r->head->chunked))
                http_conn_set_close(r->conn);
}

/* the request this connection thread is serving started then (api_head_hook) */
static _Thread_local int64_t request_start_usec; /* mono_usec() */
/* ... is an exec whose start is not observed yet (its first response bytes are the command running) */
static _Thread_local bool exec_start_pending;

static int64_t elapsed_usec(int64_t start_usec) {
        return mono_usec() - start_usec;
}

static void exec_started(int status) {
        if (!exec_start_pending)
                return;
        exec_start_pending = false;
        if (status >= 200 && status < 300)
                api_hist_observe_phase(API_PHASE_EXEC_START, elapsed_usec(request_start_usec));
}

static int reply_raw(ApiRequest *r, int status, const char *content_type, const char *body, size_t n,
                     const char *more_headers) {
        char hdr[256];

        exec_started(status);

        body_pending_close(r);
        request_headers(r, hdr, sizeof hdr, more_headers);
        r->status = status;
        return http_conn_respond(r->conn, status, content_type, body, n, hdr);
}

int api_reply_json(ApiRequest *r, int status, JsonWriter *w) {
        _cleanup_free_ char *text = NULL;
        size_t n;
        int k;

        k = json_w_finish(w, &text, &n);
        if (k < 0) {
                static const char oom[] = "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
                (void) reply_raw(r, 500, "application/json", oom, STRLEN(oom), NULL);
                return 0; /* responded */
        }
        return reply_raw(r, status, "application/json", text, n, NULL);
}

int api_reply_bytes(ApiRequest *r, int status, const char *content_type, const void *p, size_t n) {
        return reply_raw(r, status, content_type, p, n, NULL);
}

int api_read_body(ApiRequest *r, size_t max, char **ret, size_t *ret_len, ApiError *e) {
        int k;

        if (r->head->content_length > (int64_t) max)
                return api_error(e, -EFBIG, API_PAYLOAD_TOO_LARGE, "this body is limited to %zu bytes", max);
        k = http_conn_read_body_all(r->conn, max, ret, ret_len);
        if (k == -EFBIG)
                return api_error(e, k, API_PAYLOAD_TOO_LARGE, "this body is limited to %zu bytes", max);
        if (k < 0)
                return api_error(e, k, API_BAD_REQUEST, "could not read the request body: %s", strerror(-k));
        r->body_read = true;
        return 0;
}

int api_reply_empty(ApiRequest *r, int status) {
        return reply_raw(r, status, NULL, NULL, 0, NULL);
}

static int reply_error_full(HttpConn *c, ApiRequest *r, const ApiError *e, const char *more_headers) {
        _cleanup_free_ char *text = NULL;
        char hdr[320], retry[48];
        JsonWriter w;
        size_t n;
        int status = api_error_code_to_status(e->code);

        json_w_init(&w);
        json_out_error(&w, e);
        if (json_w_finish(&w, &text, &n) < 0)
                return -ENOMEM;
        if (e->code == API_WORKER_UNAVAILABLE && !more_headers) {
                /* the worker is restarting: when to try again */
                snprintf(retry, sizeof retry, "Retry-After: %u\r\n", api_worker_retry_after_s(r ? r->api : NULL));
                more_headers = retry;
        }
        if (r) {
                body_pending_close(r);
                request_headers(r, hdr, sizeof hdr, more_headers);
                r->status = status;
        } else
                snprintf(hdr, sizeof hdr, "%s", strempty(more_headers));
        return http_conn_respond(c, status, "application/json", text, n, hdr);
}

int api_reply_error(HttpConn *c, const ApiError *e) {
        return reply_error_full(c, NULL, e, NULL);
}

int api_stream_begin(ApiRequest *r, int status, const char *content_type) {
        char hdr[128];

        request_headers(r, hdr, sizeof hdr, NULL);
        r->status = status;
        exec_started(status);
        return http_conn_stream_begin(r->conn, status, content_type, hdr);
}

int api_stream_line(ApiRequest *r, JsonWriter *w) {
        _cleanup_free_ char *text = NULL;
        size_t n;
        int k;

        k = json_w_finish(w, &text, &n);
        if (k < 0)
                return k;
        /* the buffer is NUL-terminated: replace the terminator by the newline */
        text[n] = '\n';
        return http_conn_stream_write(r->conn, text, n + 1);
}

/* ---- request body and query ---- */

static bool content_type_is(const char *value, const char *type) {
        size_t n = strlen(type);
        if (!value || strncasecmp(value, type, n) != 0)
                return false;
        return value[n] == 0 || value[n] == ';' || value[n] == ' ';
}

/* JSON bodies may carry secrets (credential values): wiped before they are freed. */
typedef struct BodyBuf {
        char *p;
        size_t n;
} BodyBuf;

static void body_buf_done(BodyBuf *b) {
        if (b->p) {
                explicit_bzero(b->p, b->n);
                free(b->p);
        }
}

static int read_json(ApiRequest *r, bool allow_empty, JsonValue **ret, ApiError *e) {
        _cleanup_(body_buf_done) BodyBuf body = {};
        const char *ct = http_head_header(r->head, "Content-Type");
        char errbuf[128] = "";
        int k;

        /* curl -d sends application/x-www-form-urlencoded unless told otherwise: a JSON body
         * sent that way is still taken as JSON, since no endpoint takes forms. */
        if (ct && !content_type_is(ct, "application/json") && !content_type_is(ct, "application/x-www-form-urlencoded"))
                return api_error(e, -EINVAL, API_UNSUPPORTED_MEDIA, "expected Content-Type: application/json, got '%.64s'",
                                 ct);
        if (r->head->content_length > (int64_t) API_BODY_JSON_MAX)
                return api_error(e, -EFBIG, API_PAYLOAD_TOO_LARGE, "JSON bodies are limited to %u bytes",
                                 API_BODY_JSON_MAX);
        k = http_conn_read_body_all(r->conn, API_BODY_JSON_MAX, &body.p, &body.n);
        if (k == -EFBIG)
                return api_error(e, k, API_PAYLOAD_TOO_LARGE, "JSON bodies are limited to %u bytes", API_BODY_JSON_MAX);
        if (k < 0)
                return api_error(e, k, API_BAD_REQUEST, "could not read the request body: %s", strerror(-k));
        r->body_read = true;

        if (body.n == 0 && !allow_empty)
                return api_error(e, -EINVAL, API_INVALID_JSON, "the body must be a JSON object, not empty");
        if (body.n == 0) /* no body: an empty object */
                k = json_parse("{}", 2, ret, NULL, 0);
        else
                k = json_parse(body.p, body.n, ret, errbuf, sizeof errbuf);
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

int api_read_json(ApiRequest *r, JsonValue **ret, ApiError *e) {
        return read_json(r, false, ret, e);
}

int api_read_json_optional(ApiRequest *r, JsonValue **ret, ApiError *e) {
        return read_json(r, true, ret, e);
}

int api_query_string(ApiRequest *r, const char *key, char **ret, ApiError *e) {
        char *v = NULL;
        int k;

        if (!r->head->query)
                return 0;
        k = http_query_get(r->head->query, key, &v);
        if (k == -ENOENT)
                return 0;
        if (k == -ENOMEM)
                return api_error(e, k, API_UNAVAILABLE, "out of memory");
        if (k < 0)
                return api_error(e, k, API_INVALID_ARGUMENT, "query parameter '%s' is badly encoded", key);
        free(*ret);
        *ret = v;
        return 1;
}

int api_query_bool(ApiRequest *r, const char *key, bool *ret, ApiError *e) {
        _cleanup_free_ char *v = NULL;
        int k = api_query_string(r, key, &v, e);

        if (k <= 0)
                return k;
        if (streq(v, "1") || streq(v, "true") || streq(v, "yes") || streq(v, ""))
                *ret = true;
        else if (streq(v, "0") || streq(v, "false") || streq(v, "no"))
                *ret = false;
        else
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "query parameter '%s' must be 1 or 0, not '%.32s'",
                                 key, v);
        return 1;
}

int api_query_u64(ApiRequest *r, const char *key, uint64_t min, uint64_t max, uint64_t *ret, ApiError *e) {
        _cleanup_free_ char *v = NULL;
        uint64_t u;
        int k = api_query_string(r, key, &v, e);

        if (k <= 0)
                return k;
        if (safe_atou64(v, &u) < 0 || u < min || u > max)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "query parameter '%s' must be an integer in [%" PRIu64 ", %" PRIu64 "], not '%.32s'",
                                 key, min, max, v);
        *ret = u;
        return 1;
}

/* ---- events ---- */

void api_event_init(ApiRequest *r, const char *tenant_id, const char *sandbox_id, const char *type,
                    const char *reason, const char *data_json, Event *ret) {
        *ret = (Event){};
        (void) strscpy(ret->tenant_id, sizeof ret->tenant_id, strempty(tenant_id));
        (void) strscpy(ret->sandbox_id, sizeof ret->sandbox_id, strempty(sandbox_id));
        (void) strscpy(ret->type, sizeof ret->type, type);
        (void) strscpy(ret->actor, sizeof ret->actor, r->actor[0] ? r->actor : "system");
        (void) strscpy(ret->reason, sizeof ret->reason, strempty(reason));
        ret->data_json = (char *) data_json; /* borrowed: not freed by the event */
}

void api_event_tenant(ApiRequest *r, const char *tenant_id, const char *sandbox_id, const char *type,
                      const char *reason, const char *data_json) {
        Event ev;
        int k;

        if (!r->store)
                return;
        api_event_init(r, tenant_id, sandbox_id, type, reason, data_json, &ev);
        k = store_event_append(r->store, &ev);
        if (k < 0)
                log_warning_errno(k, "Failed to record event %s: %m", type);
}

void api_event(ApiRequest *r, const char *sandbox_id, const char *type, const char *reason, const char *data_json) {
        api_event_tenant(r, r->key.tenant_id, sandbox_id, type, reason, data_json);
}

/* ---- routing ---- */

int api_split_path(char *buf, char **segs, size_t max) {
        size_t n = 0;
        char *p = buf;

        if (*p != '/')
                return -EINVAL;
        while (*p == '/') {
                *p++ = 0;
                if (n >= max)
                        return -E2BIG;
                segs[n++] = p;
                p += strcspn(p, "/");
                if (p == segs[n - 1])
                        return -EINVAL;
        }
        return (int) n;
}

/* Matches one route pattern against the segments; fills params. */
static bool route_match(const Route *rt, char *const *segs, size_t n_segs, const char *params[static API_PARAMS_MAX]) {
        const char *p = rt->pattern;
        size_t i = 0, n_params = 0;

        while (*p == '/') {
                const char *s = ++p;
                size_t len = strcspn(s, "/");
                p += len;
                if (i >= n_segs)
                        return false;
                if (s[0] == '{') {
                        if (n_params >= API_PARAMS_MAX || strlen(segs[i]) > API_PARAM_MAX)
                                return false;
                        params[n_params++] = segs[i];
                } else if (strlen(segs[i]) != len || strncmp(segs[i], s, len) != 0)
                        return false;
                i++;
        }
        return i == n_segs;
}

static double elapsed_msec(int64_t start_usec) {
        return (double) elapsed_usec(start_usec) / 1e3;
}

static int dispatch(ApiRequest *r, ApiError *e, const Route **ret_route) {
        _cleanup_free_ char *copy = NULL;
        char *segs[API_SEGMENTS_MAX];
        char allow[128] = "";
        const Route *found = NULL;
        int n, k;

        copy = strdup(r->head->path ? r->head->path : "");
        if (!copy)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        n = api_split_path(copy, segs, ELEMENTSOF(segs));
        if (n >= 0)
                for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
                        const char *params[API_PARAMS_MAX] = {};
                        if (!route_match(&routes[i], segs, (size_t) n, params))
                                continue;
                        if (!streq(routes[i].method, r->head->method)) {
                                size_t l = strlen(allow);
                                snprintf(allow + l, sizeof allow - l, "%s%s", l ? ", " : "", routes[i].method);
                                continue;
                        }
                        found = &routes[i];
                        memcpy(r->params, params, sizeof params);
                        break;
                }
        if (!found && allow[0]) {
                char hdr[160];
                ApiError e405 = {};
                snprintf(hdr, sizeof hdr, "Allow: %s\r\n", allow);
                (void) api_error(&e405, -EINVAL, API_METHOD_NOT_ALLOWED, "%.16s is not allowed here (allowed: %s)",
                                 r->head->method, allow);
                return reply_error_full(r->conn, r, &e405, hdr);
        }
        if (!found)
                return api_error(e, -ENOENT, API_NOT_FOUND, "no such endpoint");

        *ret_route = found;
        exec_start_pending = found->handler == api_exec;
        /* the params point into copy: keep it for the handler */
        if (found->needs_auth) {
                k = api_get_store(r, e);
                if (k < 0)
                        return k;
                k = api_auth(r, e);
                if (k == -EACCES) {
                        ApiError e401 = *e;
                        return reply_error_full(r->conn, r, &e401, "WWW-Authenticate: Bearer\r\n");
                }
                if (k < 0)
                        return k;
                k = api_limits_enter(r, found->stream, e);
                if (k < 0)
                        return k;
                if (found->needs_admin && !r->key.admin)
                        return api_error(e, -EPERM, API_FORBIDDEN, "this needs an admin key");
        }
        if (found->sandbox_param && api_sandbox_id_valid(r->params[0]))
                api_log_sandbox(r, r->params[0]);

        k = found->handler(r, e);
        /* params must not outlive copy */
        memset(r->params, 0, sizeof r->params);
        return k;
}

void api_head_hook(char *buf, size_t size, void *userdata) {
        Api *a = userdata;

        if (!a || !a->config.debug_timing || size == 0)
                return;
        (void) snprintf(buf, size, "Server-Timing: store;dur=%.3f;desc=\"%" PRIu64 " calls\", total;dur=%.3f\r\n",
                        (double) store_timing_usec() / 1000.0, store_timing_calls(), elapsed_msec(request_start_usec));
}

/* A static label for the method (the request's own string does not outlive it). */
static const char *method_label(const char *m) {
        static const char *const known[] = { "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS" };
        for (size_t i = 0; i < ELEMENTSOF(known); i++)
                if (streq(m, known[i]))
                        return known[i];
        return "other";
}

/* The route label of a request the table did not route (a static string: the histograms key on its address). */
static const char *route_label(const ApiRequest *r) {
        return api_ui_path(r->head->path) ? "/ui" : e2b_request_is_e2b(r->head) ? "e2b" : NULL;
}

static bool is_probe_path(const char *path) {
        return path && (streq(path, "/healthz") || streq(path, "/readyz") || streq(path, "/metrics"));
}

static void observe(ApiRequest *r, const Route *route, int64_t usec) {
        bool ok = r->status >= 200 && r->status < 300;

        exec_start_pending = false;
        api_hist_observe_route(route ? route->method : method_label(r->head->method),
                               route ? route->pattern : route_label(r) ?: "unmatched", usec);
        if (!route || !ok)
                return;
        if (route->handler == api_sandbox_create)
                api_hist_observe_phase(API_PHASE_CREATE, usec);
        else if (route->handler == api_checkpoint_create)
                api_hist_observe_phase(API_PHASE_CHECKPOINT, usec);
        else if (route->handler == api_sandbox_branch)
                api_hist_observe_phase(API_PHASE_BRANCH, usec);
}

/* One access line: the request's facts as fields of their own. Probes and scrapes are not
 * logged unless log_health_requests (or they failed). */
static void log_request(ApiRequest *r, const Route *route, int64_t start_usec, const ApiError *e) {
        char status[16], duration[32], store_ms[32];
        LogField f[10];
        size_t n = 0;

        if (r->status < 500 && !r->api->config.log_health_requests && is_probe_path(r->head->path))
                return;
        snprintf(status, sizeof status, "%d", r->status);
        snprintf(duration, sizeof duration, "%.1f", elapsed_msec(start_usec));
        snprintf(store_ms, sizeof store_ms, "%.1f", (double) store_timing_usec() / 1000.0);
        f[n++] = (LogField) { "method", r->head->method };
        f[n++] = (LogField) { "path", strna(r->head->path) };
        f[n++] = (LogField) { "route", route ? route->pattern : route_label(r) };
        f[n++] = (LogField) { "status", status };
        f[n++] = (LogField) { "duration_ms", duration };
        f[n++] = (LogField) { "store_ms", store_ms };
        f[n++] = (LogField) { "tenant", r->tenant_name[0] ? r->tenant_name : NULL };
        f[n++] = (LogField) { "key", r->key.id[0] ? r->key.id : NULL };
        f[n++] = (LogField) { "error", r->status >= 500 ? e->message : NULL };
        f[n++] = (LogField) { "limited", r->limited ? "1" : NULL };
        /* a request refused by a rate limit is logged at debug: a flood must not flood the log */
        log_fields(r->status >= 500 ? LOG_WARNING_ : r->limited ? LOG_DEBUG_ : LOG_INFO_, "request", f, n);
}

static void handle(HttpConn *c, const HttpHead *head, Api *a, const char *envd_sandbox) {
        ApiRequest r = {
                .conn = c,
                .head = head,
                .api = a,
                .envd_sandbox = envd_sandbox,
        };
        const Route *route = NULL;
        int64_t start_usec = mono_usec();
        ApiError e = {};
        char id[9];
        int k;

        request_start_usec = start_usec;
        store_timing_reset();
        atomic_fetch_add(&a->requests_in_flight, 1);
        if (random_alnum(id, 8) < 0)
                snprintf(id, sizeof id, "00000000");
        snprintf(r.req_id, sizeof r.req_id, "r-%s", id);
        log_set_context(NULL, r.req_id);

        /* the E2B-compatible surface (src/api/e2b/e2b.h) answers its own requests */
        k = envd_sandbox                     ? e2b_handle(&r)
            : api_ui_path(head->path)        ? api_ui_serve(&r)
            : e2b_request_is_e2b(head)       ? e2b_handle(&r)
                                             : dispatch(&r, &e, &route);
        if (k < 0) {
                if (e.code == API_OK)
                        (void) api_error(&e, k, API_INTERNAL, "internal error: %s", strerror(-k));
                if (!http_conn_responded(c))
                        (void) reply_error_full(c, &r, &e, NULL);
                else
                        /* the error came after the response began: nothing to say but hang up */
                        http_conn_set_close(c);
        } else if (!http_conn_responded(c)) {
                /* a handler that returned without answering is a bug: answer anyway */
                (void) api_error(&e, -EIO, API_INTERNAL, "the handler did not respond");
                (void) reply_error_full(c, &r, &e, NULL);
        }

        api_limits_leave(&r);
        if (r.status >= 100 && r.status < 600)
                atomic_fetch_add(&a->requests_by_class[r.status / 100], 1);
        atomic_fetch_sub(&a->requests_in_flight, 1);

        observe(&r, route, elapsed_usec(start_usec));
        log_request(&r, route, start_usec, &e);
        log_set_context(NULL, NULL);
        free(r.tenants);
}

void api_handle(HttpConn *c, const HttpHead *head, void *userdata) {
        handle(c, head, userdata, NULL);
}

void api_handle_envd(HttpConn *c, const HttpHead *head, Api *a, const char *sandbox_id) {
        handle(c, head, a, sandbox_id);
}
