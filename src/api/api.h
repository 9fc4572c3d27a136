/* SPDX-License-Identifier: MIT */
#pragma once

/* The /v1 API: routing, auth, and one file per resource. */

#include <pthread.h>
#include <stdatomic.h>

#include "api-error.h"
#include "config.h"
#include "http-server.h"
#include "json.h"
#include "store.h"
#include "worker-client.h"

#define API_BODY_JSON_MAX (1024U * 1024U)   /* JSON request bodies */
#define API_PARAMS_MAX 4U

typedef struct Api Api;

/* The local worker process as its supervisor sees it (role all: spaced's
 * supervise.c writes it, the API reads it for /healthz, /readyz, /metrics
 * and the Retry-After of a 503 worker_unavailable). */
typedef enum ApiWorkerPhase {
        API_WORKER_STARTING,    /* started, not serving yet */
        API_WORKER_UP,          /* serving */
        API_WORKER_DOWN,        /* died; started again at next_start_usec */
        API_WORKER_STOPPING,    /* spaced stops */
        _API_WORKER_PHASE_MAX,
        _API_WORKER_PHASE_INVALID = -EINVAL,
} ApiWorkerPhase;

typedef struct ApiWorkerStatus {
        atomic_int phase;                       /* ApiWorkerPhase */
        atomic_int pid;
        atomic_uint_fast64_t restarts;          /* starts after the first */
        atomic_int_fast64_t since_usec;         /* in this phase since (CLOCK_REALTIME, as now_usec()) */
        atomic_int_fast64_t next_start_usec;    /* down: the next start */
        pthread_mutex_t lock;                   /* for last_exit */
        char last_exit[128];                    /* how it last died, "" = never */
} ApiWorkerStatus;

const char *api_worker_phase_to_string(ApiWorkerPhase p);

typedef struct ApiRequest {
        HttpConn *conn;
        const HttpHead *head;
        Api *api;
        Store *store;           /* this thread's store handle */
        WorkerClient *worker;   /* this thread's worker client: NULL until api_get_worker() */
        ApiKey key;             /* the authenticated key */
        char req_id[24];        /* for logs: "r-xxxxxxxx" */
        char actor[STORE_NAME_MAX]; /* "key:<key id>" for events */
        const char *params[API_PARAMS_MAX]; /* path parameters, e.g. {id} */
        char tenant_name[STORE_NAME_MAX];   /* name of the key's tenant */
        char log_sandbox[STORE_ID_MAX];     /* the sandbox= field of this request's log lines */
        int status;             /* status sent (for logs and metrics); 0 until responded */
        bool body_read;         /* the request body was read to its end */
        const char *envd_sandbox; /* an envd request of this sandbox (the ingress's 49983-{id} host name) */
        Tenant *tenants;        /* lazily loaded name cache for admin views (api_tenant_name) */
        size_t n_tenants;
        int retry_after_s;      /* > 0: a 429 or 503 answer says Retry-After */
        bool limits_held;       /* counted in flight by api_limits_enter() */
        bool limits_stream;     /* ... as an open stream too */
        bool limited;           /* refused by api_limits_enter(): logged at debug (a flood must not flood the log) */
} ApiRequest;

/* A route handler. Returns >= 0 if it responded, < 0 with e filled otherwise
 * (the router then answers with the JSON error). */
typedef int (*ApiHandler)(ApiRequest *r, ApiError *e);

int api_new(const Config *config, Api **ret);
/* Role api: sandboxes live on the workers of a cluster, reached with this
 * token (copied) instead of the local worker. */
int api_set_cluster_token(Api *a, const char *token);
Api *api_free(Api *a);
DEFINE_TRIVIAL_CLEANUP_FUNC(Api *, api_free);
const Config *api_config(const Api *a);
/* Hands the credentials' master key (cred-crypt.h) to the API, which owns it
 * from then on. Without one, creating or rotating a credential is a 503. */
struct CredKey;
void api_set_cred_key(Api *a, struct CredKey *k);
/* Role all: the supervisor's view of the worker (borrowed; outlives the Api). */
void api_set_worker_status(Api *a, ApiWorkerStatus *s);
/* How the API reaches a TCP port of a sandbox of this host (the port
 * forward): a connected non-blocking socket in *ret_fd. Set by spaced on
 * role all (the network layer is below the API's reach); without one, a
 * forward is refused. wait false: 1 with the connect still under way on
 * the socket in *ret_fd (the caller waits for POLLOUT, at most
 * API_PORT_DIAL_TIMEOUT_MSEC, then reads SO_ERROR). */
#define API_PORT_DIAL_TIMEOUT_MSEC 5000 /* as NET_DIAL_TIMEOUT_MSEC */
typedef int (*ApiPortDialer)(void *userdata, uint32_t slot, uint16_t port, bool wait, int *ret_fd);
void api_set_port_dialer(Api *a, ApiPortDialer dial, void *userdata);
/* The HttpHandler to give to the http server (userdata = Api*). */
void api_handle(HttpConn *c, const HttpHead *head, void *userdata);
/* The same for an envd request the ingress routed by its host name
 * (49983-{id}.{domain}): as if it carried E2b-Sandbox-Id: sandbox_id. */
void api_handle_envd(HttpConn *c, const HttpHead *head, Api *a, const char *sandbox_id);
/* An HttpHeadHook (userdata: the Api): with debug_timing on, every response
 * says how long its request has waited on the store so far and in all:
 * "Server-Timing: store;dur=MS;desc=\"N calls\", total;dur=MS". */
void api_head_hook(char *buf, size_t size, void *userdata);
/* An HttpThreadHook (userdata: the Api): frees the calling connection
 * thread's store and worker handles, while the Api is certainly alive (the
 * thread-local destructor may run after api_free() deleted its key). */
void api_thread_done(void *userdata);

/* Helpers for handlers */
int api_read_json(ApiRequest *r, JsonValue **ret, ApiError *e);     /* body → JSON object (400/413/415 errors) */
int api_read_json_optional(ApiRequest *r, JsonValue **ret, ApiError *e); /* the same; an empty body is {} */
int api_reply_json(ApiRequest *r, int status, JsonWriter *w);       /* finishes w and sends it */
int api_reply_empty(ApiRequest *r, int status);                     /* e.g. 204 */
int api_reply_bytes(ApiRequest *r, int status, const char *content_type, const void *p, size_t n);
/* The whole body (at most max bytes, else 413) into *ret (malloc'd; may be NULL when empty). */
int api_read_body(ApiRequest *r, size_t max, char **ret, size_t *ret_len, ApiError *e);
int api_reply_error(HttpConn *c, const ApiError *e);
/* Records an event for the request's tenant; failures are logged, not returned. */
void api_event(ApiRequest *r, const char *sandbox_id, const char *type, const char *reason, const char *data_json);
/* Same, for another tenant ("" = system-wide). */
void api_event_tenant(ApiRequest *r, const char *tenant_id, const char *sandbox_id, const char *type,
                      const char *reason, const char *data_json);
/* The event api_event_tenant would record, for a store call that records it with other writes. */
void api_event_init(ApiRequest *r, const char *tenant_id, const char *sandbox_id, const char *type,
                    const char *reason, const char *data_json, Event *ret);
/* Adds sandbox=ID to this request's log lines. */
void api_log_sandbox(ApiRequest *r, const char *id);
/* Opens this thread's worker client if needed (503 if it cannot). */
int api_get_worker(ApiRequest *r, ApiError *e);
/* Maps a store failure to an ApiError: -ENOENT → 404 with what, everything else → 503. */
int api_store_error(ApiError *e, int r, const char *what);
/* Name of a tenant for output; falls back to the id. */
const char *api_tenant_name(ApiRequest *r, const char *tenant_id);

/* Query parameters: 0 if absent (*ret untouched/NULL), 1 if present, < 0 with a 400 in e. */
int api_query_string(ApiRequest *r, const char *key, char **ret, ApiError *e);
int api_query_bool(ApiRequest *r, const char *key, bool *ret, ApiError *e);
int api_query_u64(ApiRequest *r, const char *key, uint64_t min, uint64_t max, uint64_t *ret, ApiError *e);
