/* SPDX-License-Identifier: MIT */
#pragma once

/* The /v1 API: routing, auth, and one file per resource. */

#include "api-error.h"
#include "config.h"
#include "http-server.h"
#include "json.h"
#include "store.h"
#include "worker-client.h"

#define API_BODY_JSON_MAX (1024U * 1024U)   /* JSON request bodies */

typedef struct Api Api;

typedef struct ApiRequest {
        HttpConn *conn;
        const HttpHead *head;
        Api *api;
        Store *store;           /* this thread's store handle */
        WorkerClient *worker;   /* this thread's worker client */
        ApiKey key;             /* the authenticated key */
        char req_id[24];        /* for logs: "r-xxxxxxxx" */
        char actor[STORE_NAME_MAX]; /* "key:<key id>" for events */
        const char *params[4];  /* path parameters, e.g. {id} */
} ApiRequest;

/* A route handler. Returns >= 0 if it responded, < 0 with e filled otherwise
 * (the router then answers with the JSON error). */
typedef int (*ApiHandler)(ApiRequest *r, ApiError *e);

int api_new(const Config *config, Api **ret);
Api *api_free(Api *a);
const Config *api_config(const Api *a);
/* The HttpHandler to give to the http server (userdata = Api*). */
void api_handle(HttpConn *c, const HttpHead *head, void *userdata);

/* Helpers for handlers */
int api_read_json(ApiRequest *r, JsonValue **ret, ApiError *e);     /* body → JSON object (400/413/415 errors) */
int api_reply_json(ApiRequest *r, int status, JsonWriter *w);       /* finishes w and sends it */
int api_reply_error(HttpConn *c, const ApiError *e);
/* Records an event for the request's tenant; failures are logged, not returned. */
void api_event(ApiRequest *r, const char *sandbox_id, const char *type, const char *reason, const char *data_json);
