/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>

#include "api-error.h"

static const struct {
        const char *name;
        int status;
} table[_API_ERROR_CODE_MAX] = {
        [API_OK] = { "ok", 200 },
        [API_BAD_REQUEST] = { "bad_request", 400 },
        [API_INVALID_JSON] = { "invalid_json", 400 },
        [API_UNKNOWN_FIELD] = { "unknown_field", 400 },
        [API_INVALID_ARGUMENT] = { "invalid_argument", 400 },
        [API_INVALID_PATH] = { "invalid_path", 400 },
        [API_UNAUTHORIZED] = { "unauthorized", 401 },
        [API_FORBIDDEN] = { "forbidden", 403 },
        [API_NOT_FOUND] = { "not_found", 404 },
        [API_METHOD_NOT_ALLOWED] = { "method_not_allowed", 405 },
        [API_CONFLICT] = { "conflict", 409 },
        [API_SANDBOX_NOT_RUNNING] = { "sandbox_not_running", 409 },
        [API_SANDBOX_PAUSED] = { "sandbox_paused", 409 },
        [API_TEMPLATE_IN_USE] = { "template_in_use", 409 },
        [API_ALREADY_EXISTS] = { "already_exists", 409 },
        [API_PAYLOAD_TOO_LARGE] = { "payload_too_large", 413 },
        [API_UNSUPPORTED_MEDIA] = { "unsupported_media_type", 415 },
        [API_TOO_MANY_REQUESTS] = { "too_many_requests", 429 },
        [API_INTERNAL] = { "internal", 500 },
        [API_NOT_IMPLEMENTED] = { "not_implemented", 501 },
        [API_BAD_GATEWAY] = { "bad_gateway", 502 },
        [API_UNAVAILABLE] = { "unavailable", 503 },
        [API_TIMEOUT] = { "timeout", 504 },
        [API_INSUFFICIENT_STORAGE] = { "insufficient_storage", 507 },
        [API_URI_TOO_LONG] = { "uri_too_long", 414 },
        [API_HEADERS_TOO_LARGE] = { "headers_too_large", 431 },
        [API_WORKER_UNAVAILABLE] = { "worker_unavailable", 503 },
        [API_VOLUME_IN_USE] = { "volume_in_use", 409 },
        [API_UNSUPPORTED] = { "unsupported", 400 },
};

const char *api_error_code_to_string(ApiErrorCode c) {
        if (c < 0 || c >= _API_ERROR_CODE_MAX)
                return NULL;
        return table[c].name;
}

ApiErrorCode api_error_code_from_string(const char *s) {
        for (int i = 0; i < _API_ERROR_CODE_MAX; i++)
                if (s && streq(table[i].name, s))
                        return (ApiErrorCode) i;
        return _API_ERROR_CODE_INVALID;
}

int api_error_code_to_status(ApiErrorCode c) {
        if (c < 0 || c >= _API_ERROR_CODE_MAX)
                return 500;
        return table[c].status;
}

int api_error(ApiError *e, int ret, ApiErrorCode code, const char *fmt, ...) {
        if (e) {
                va_list ap;
                e->code = code;
                va_start(ap, fmt);
                vsnprintf(e->message, sizeof e->message, fmt, ap);
                va_end(ap);
        }
        return ret < 0 ? ret : -EINVAL;
}

ApiErrorCode api_error_code_from_errno(int err) {
        switch (err < 0 ? -err : err) {
        case ENOENT:
        case ESRCH:
                return API_NOT_FOUND;
        case EEXIST:
                return API_ALREADY_EXISTS;
        case EINVAL:
                return API_INVALID_ARGUMENT;
        case ENAMETOOLONG:
        case ENOTDIR:
        case EISDIR:
        case ELOOP:
                return API_INVALID_PATH;
        case EACCES:
        case EPERM:
                return API_FORBIDDEN;
        case EBUSY:
        case ENOTEMPTY:
        case ESTALE:
                return API_CONFLICT;
        case EFBIG:
        case E2BIG:
        case EMSGSIZE:
                return API_PAYLOAD_TOO_LARGE;
        case ENOSPC:
        case EDQUOT:
                return API_INSUFFICIENT_STORAGE;
        case ETIMEDOUT:
                return API_TIMEOUT;
        case ECONNREFUSED:
        case ECONNRESET:
        case EPIPE:
        case EBADMSG:
                return API_BAD_GATEWAY;
        case EAGAIN:
        case ENOMEM:
                return API_UNAVAILABLE;
        case EOPNOTSUPP:
                return API_NOT_IMPLEMENTED;
        default:
                return API_INTERNAL;
        }
}
