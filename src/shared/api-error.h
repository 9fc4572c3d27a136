/* SPDX-License-Identifier: MIT */
#pragma once

/* Errors a user sees: a code string from one table, which also fixes the HTTP
 * status and is the enum of the OpenAPI spec's Error.code. */

#include "macros.h"

typedef enum ApiErrorCode {
        API_OK = 0,
        API_BAD_REQUEST,        /* 400 malformed input */
        API_INVALID_JSON,       /* 400 */
        API_UNKNOWN_FIELD,      /* 400 */
        API_INVALID_ARGUMENT,   /* 400 value out of range / wrong type */
        API_INVALID_PATH,       /* 400 */
        API_UNAUTHORIZED,       /* 401 missing or wrong key */
        API_FORBIDDEN,          /* 403 key lacks the right (admin) */
        API_NOT_FOUND,          /* 404 (also: another tenant's object) */
        API_METHOD_NOT_ALLOWED, /* 405 */
        API_CONFLICT,           /* 409 */
        API_SANDBOX_NOT_RUNNING,/* 409 */
        API_SANDBOX_PAUSED,     /* 409 */
        API_TEMPLATE_IN_USE,    /* 409 */
        API_ALREADY_EXISTS,     /* 409 */
        API_PAYLOAD_TOO_LARGE,  /* 413 */
        API_UNSUPPORTED_MEDIA,  /* 415 */
        API_TOO_MANY_REQUESTS,  /* 429 */
        API_INTERNAL,           /* 500 */
        API_NOT_IMPLEMENTED,    /* 501 */
        API_BAD_GATEWAY,        /* 502 the sandbox's agent did not answer */
        API_UNAVAILABLE,        /* 503 store or worker unavailable, capacity */
        API_TIMEOUT,            /* 504 */
        API_INSUFFICIENT_STORAGE, /* 507 disk quota reached */
        API_URI_TOO_LONG,       /* 414 */
        API_HEADERS_TOO_LARGE,  /* 431 */
        API_WORKER_UNAVAILABLE, /* 503 the local worker is down or restarting (Retry-After) */
        API_VOLUME_IN_USE,      /* 409 a volume a sandbox mounts (delete), or its writer (mount) */
        API_UNSUPPORTED,        /* 400 what this runtime or pool cannot do */
        _API_ERROR_CODE_MAX,
        _API_ERROR_CODE_INVALID = -EINVAL,
} ApiErrorCode;

#define API_ERROR_MESSAGE_MAX 512

typedef struct ApiError {
        ApiErrorCode code;
        char message[API_ERROR_MESSAGE_MAX];
} ApiError;

const char *api_error_code_to_string(ApiErrorCode c);
ApiErrorCode api_error_code_from_string(const char *s);
int api_error_code_to_status(ApiErrorCode c);

/* Fills *e (if e != NULL) and returns ret (a -errno), for "return api_error(e, r, API_X, ...)". */
int api_error(ApiError *e, int ret, ApiErrorCode code, const char *fmt, ...) _printf_(4, 5);
/* Maps an errno to a plausible code (ENOENT → not_found, EEXIST → already_exists, ...). */
ApiErrorCode api_error_code_from_errno(int err);
