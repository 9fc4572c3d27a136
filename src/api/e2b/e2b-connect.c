/* SPDX-License-Identifier: MIT */
/* The Connect protocol as the E2B SDKs speak it (JSON codec only): envelopes
 * of server streams, error codes, unary and streamed replies, and the
 * proto3-JSON details of input (camel/snake names, base64 bytes, enums) and
 * output (RFC 3339 timestamps, Go's file mode strings). */

#include <stdio.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "alloc-util.h"
#include "base64.h"
#include "e2b.h"
#include "str-util.h"

/* ---- envelopes ---- */

void e2b_envelope_header(uint8_t out[static E2B_ENVELOPE_HEADER], uint8_t flags, uint32_t len) {
        out[0] = flags;
        out[1] = (uint8_t) (len >> 24);
        out[2] = (uint8_t) (len >> 16);
        out[3] = (uint8_t) (len >> 8);
        out[4] = (uint8_t) len;
}

int e2b_envelope_decode(const void *p, size_t n, size_t max, uint8_t *ret_flags, Slice *ret_msg, size_t *ret_size) {
        const uint8_t *b = p;
        uint32_t len;

        if (n < E2B_ENVELOPE_HEADER)
                return 0;
        if (b[0] & ~(E2B_ENVELOPE_FLAG_END) & 0xffU)
                return -EBADMSG; /* compressed (we never offer compression) or unknown bits */
        len = ((uint32_t) b[1] << 24) | ((uint32_t) b[2] << 16) | ((uint32_t) b[3] << 8) | (uint32_t) b[4];
        if (len > max)
                return -EMSGSIZE;
        if (n - E2B_ENVELOPE_HEADER < len)
                return 0;
        *ret_flags = b[0];
        *ret_msg = (Slice){ (const char *) b + E2B_ENVELOPE_HEADER, len };
        *ret_size = E2B_ENVELOPE_HEADER + (size_t) len;
        return 1;
}

int e2b_envelope_request(const void *p, size_t n, Slice *ret_msg) {
        uint8_t flags = 0;
        size_t size = 0;
        Slice msg;
        int r;

        r = e2b_envelope_decode(p, n, E2B_BODY_MAX, &flags, &msg, &size);
        if (r < 0)
                return r;
        if (r == 0 || flags != 0 || size != n)
                return -EBADMSG; /* truncated, an end-stream envelope, or more than one message */
        *ret_msg = msg;
        return 0;
}

/* ---- codes ---- */

const char *e2b_connect_code(ApiErrorCode c) {
        switch (c) {
        case API_BAD_REQUEST:
        case API_INVALID_JSON:
        case API_UNKNOWN_FIELD:
        case API_INVALID_ARGUMENT:
        case API_INVALID_PATH:
        case API_UNSUPPORTED_MEDIA:
                return "invalid_argument";
        case API_UNAUTHORIZED:
                return "unauthenticated";
        case API_FORBIDDEN:
                return "permission_denied";
        case API_NOT_FOUND:
                return "not_found";
        case API_ALREADY_EXISTS:
                return "already_exists";
        case API_CONFLICT:
        case API_SANDBOX_NOT_RUNNING:
        case API_SANDBOX_PAUSED:
        case API_TEMPLATE_IN_USE:
                return "failed_precondition";
        case API_PAYLOAD_TOO_LARGE:
        case API_TOO_MANY_REQUESTS:
        case API_INSUFFICIENT_STORAGE:
                return "resource_exhausted";
        case API_METHOD_NOT_ALLOWED:
        case API_NOT_IMPLEMENTED:
                return "unimplemented";
        case API_BAD_GATEWAY:
        case API_UNAVAILABLE:
        case API_WORKER_UNAVAILABLE:
                return "unavailable";
        case API_TIMEOUT:
                return "deadline_exceeded";
        default:
                return "internal";
        }
}

int e2b_connect_status(ApiErrorCode c) {
        static const struct {
                const char *code;
                int status;
        } table[] = {
                { "invalid_argument", 400 },   { "failed_precondition", 400 }, { "unauthenticated", 401 },
                { "permission_denied", 403 },  { "not_found", 404 },           { "already_exists", 409 },
                { "resource_exhausted", 429 }, { "unimplemented", 501 },       { "unavailable", 503 },
                { "deadline_exceeded", 504 },
        };
        const char *code = e2b_connect_code(c);

        if (c == API_UNSUPPORTED_MEDIA)
                return 415;
        if (c == API_METHOD_NOT_ALLOWED)
                return 405;
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (streq(table[i].code, code))
                        return table[i].status;
        return 500;
}

static void write_error_object(JsonWriter *w, const ApiError *e) {
        json_w_object_begin(w);
        json_w_kv_string(w, "code", e2b_connect_code(e->code));
        json_w_kv_string(w, "message", e->message);
        json_w_object_end(w);
}

/* ---- replies ---- */

int e2b_unary_reply(ApiRequest *r, JsonWriter *w) {
        return e2b_reply_json(r, 200, w, NULL);
}

int e2b_unary_error(ApiRequest *r, const ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w = {};

        e2b_log_error(e2b_connect_status(e->code), e);
        json_w_init(&w);
        write_error_object(&w, e);
        return e2b_reply_json(r, e2b_connect_status(e->code), &w, NULL);
}

int e2b_unary_dispatch(E2bEnvd *x, const char *service, const E2bUnaryMethod *methods, size_t n,
                       const char *method) {
        ApiError e = {};
        int k = -ENOENT;
        bool found = false;

        for (size_t i = 0; i < n && !found; i++)
                if (streq(method, methods[i].name)) {
                        found = true;
                        k = methods[i].run(x, &e);
                }
        if (!found)
                k = api_error(&e, -ENOENT, API_NOT_IMPLEMENTED, "%s/%.64s does not exist", service, method);
        if (k >= 0)
                return 0;
        if (http_conn_responded(x->r->conn)) {
                http_conn_set_close(x->r->conn);
                return 0;
        }
        if (e.code == API_BAD_GATEWAY)
                return e2b_reply_gone(x->r, x->sb.id);
        return e2b_unary_error(x->r, &e);
}

int e2b_stream_begin(ApiRequest *r) {
        return api_stream_begin(r, 200, "application/connect+json");
}

static int stream_envelope(ApiRequest *r, uint8_t flags, const char *p, size_t n) {
        _cleanup_free_ char *buf = NULL;

        if (n > UINT32_MAX)
                return -EMSGSIZE;
        buf = malloc(E2B_ENVELOPE_HEADER + n);
        if (!buf)
                return -ENOMEM;
        e2b_envelope_header((uint8_t *) buf, flags, (uint32_t) n);
        memcpy(buf + E2B_ENVELOPE_HEADER, p, n);
        return http_conn_stream_write(r->conn, buf, E2B_ENVELOPE_HEADER + n);
}

int e2b_stream_send(ApiRequest *r, JsonWriter *w) {
        _cleanup_free_ char *text = NULL;
        size_t n;
        int k;

        k = json_w_finish(w, &text, &n);
        if (k < 0)
                return k;
        return stream_envelope(r, 0, text, n);
}

int e2b_stream_end(ApiRequest *r, const ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *text = NULL;
        size_t n;
        int k;

        json_w_init(&w);
        json_w_object_begin(&w);
        if (e) {
                e2b_log_error(e2b_connect_status(e->code), e);
                json_w_key(&w, "error");
                write_error_object(&w, e);
        }
        json_w_object_end(&w);
        k = json_w_finish(&w, &text, &n);
        if (k >= 0)
                k = stream_envelope(r, E2B_ENVELOPE_FLAG_END, text, n);
        if (k >= 0)
                k = http_conn_stream_end(r->conn);
        if (k < 0)
                http_conn_set_close(r->conn);
        return 0;
}

int e2b_stream_abort(ApiRequest *r) {
        http_conn_set_close(r->conn);
        return 0;
}

int e2b_stream_fail(ApiRequest *r, const ApiError *e) {
        if (e2b_stream_begin(r) < 0) {
                http_conn_set_close(r->conn);
                return 0;
        }
        return e2b_stream_end(r, e);
}

/* ---- proto3 JSON input ---- */

const JsonValue *e2b_field(const JsonValue *obj, const char *json_name, const char *proto_name) {
        const JsonValue *v;

        if (json_type(obj) != JSON_OBJECT)
                return NULL;
        v = json_get(obj, json_name);
        if (!v && proto_name)
                v = json_get(obj, proto_name);
        return v && !json_is_null(v) ? v : NULL;
}

int e2b_bytes_decode(const JsonValue *v, void **ret, size_t *ret_len) {
        _cleanup_free_ char *std = NULL;
        const char *s = json_string(v);
        size_t n;

        if (!s)
                return -EINVAL;
        n = json_string_len(v);
        std = memdup_suffix0(s, n);
        if (!std)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (std[i] == '-')
                        std[i] = '+';
                else if (std[i] == '_')
                        std[i] = '/';
        return base64_decode(std, n, ret, ret_len);
}

int e2b_uint32(const JsonValue *v, uint32_t *ret) {
        uint64_t u;

        if (json_type(v) == JSON_STRING) {
                if (json_string_len(v) != strlen(json_string(v)) || safe_atou64(json_string(v), &u) < 0)
                        return -EINVAL;
        } else if (json_uint64(v, &u) < 0)
                return -EINVAL;
        if (u > UINT32_MAX)
                return -ERANGE;
        *ret = (uint32_t) u;
        return 0;
}

int e2b_enum(const JsonValue *v, const char *const *names, size_t n_names, int *ret) {
        int64_t i;

        if (json_type(v) == JSON_STRING) {
                for (size_t k = 0; k < n_names; k++)
                        if (names[k] && streq(names[k], json_string(v))) {
                                *ret = (int) k;
                                return 0;
                        }
                return -EINVAL;
        }
        if (json_int64(v, &i) < 0 || i < 0 || (uint64_t) i >= n_names || !names[i])
                return -EINVAL;
        *ret = (int) i;
        return 0;
}

/* ---- output ---- */

void e2b_time_format(int64_t nsec, char buf[static E2B_TIME_MAX]) {
        time_t t = (time_t) (nsec / 1000000000);
        long frac = (long) (nsec % 1000000000);
        struct tm tm;

        if (frac < 0) {
                frac += 1000000000;
                t--;
        }
        if (!gmtime_r(&t, &tm)) {
                snprintf(buf, E2B_TIME_MAX, "1970-01-01T00:00:00Z");
                return;
        }
        snprintf(buf, E2B_TIME_MAX, "%04d-%02d-%02dT%02d:%02d:%02d.%09ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
}

void e2b_mode_string(uint32_t m, char buf[static E2B_MODE_STRING_MAX]) {
        static const char rwx[] = "rwxrwxrwx";
        size_t n = 0;

        /* Go: the type letters of "dalTLDpSugct?" that apply, else '-' */
        if (S_ISDIR(m))
                buf[n++] = 'd';
        if (S_ISLNK(m))
                buf[n++] = 'L';
        if (S_ISBLK(m) || S_ISCHR(m))
                buf[n++] = 'D';
        if (S_ISFIFO(m))
                buf[n++] = 'p';
        if (S_ISSOCK(m))
                buf[n++] = 'S';
        if (m & S_ISUID)
                buf[n++] = 'u';
        if (m & S_ISGID)
                buf[n++] = 'g';
        if (S_ISCHR(m))
                buf[n++] = 'c';
        if (m & S_ISVTX)
                buf[n++] = 't';
        if (n == 0)
                buf[n++] = '-';
        for (size_t i = 0; i < 9; i++)
                buf[n++] = (m & (1U << (8 - i))) ? rwx[i] : '-';
        buf[n] = 0;
}

/* ---- requests ---- */

static bool content_type_is(const char *value, const char *type) {
        size_t n = strlen(type);
        if (!value || strncasecmp(value, type, n) != 0)
                return false;
        return value[n] == 0 || value[n] == ';' || value[n] == ' ';
}

int e2b_rpc_check_content(const ApiRequest *r, bool streaming, ApiError *e) {
        const char *ct = http_head_header(r->head, "Content-Type");

        if (content_type_is(ct, "application/proto") || content_type_is(ct, "application/connect+proto"))
                return api_error(e, -EPROTONOSUPPORT, API_UNSUPPORTED_MEDIA,
                                 "binary protobuf is not supported: use the JSON codec");
        if (!content_type_is(ct, streaming ? "application/connect+json" : "application/json"))
                return api_error(e, -EINVAL, API_UNSUPPORTED_MEDIA, "this call takes Content-Type: %s, not '%.64s'",
                                 streaming ? "application/connect+json" : "application/json", strempty(ct));
        if (http_head_header(r->head, "Content-Encoding") &&
            strcasecmp(http_head_header(r->head, "Content-Encoding"), "identity") != 0)
                return api_error(e, -EINVAL, API_UNSUPPORTED_MEDIA, "compressed requests are not supported");
        return 0;
}

int e2b_rpc_read(E2bEnvd *x, bool streaming, JsonValue **ret, ApiError *e) {
        ApiRequest *r = x->r;
        _cleanup_free_ char *buf = NULL;
        char errbuf[128] = "";
        Slice msg;
        size_t n = 0;
        int k;

        k = e2b_rpc_check_content(r, streaming, e);
        if (k < 0)
                return k;
        if (r->head->content_length > (int64_t) E2B_BODY_MAX)
                return api_error(e, -EFBIG, API_PAYLOAD_TOO_LARGE, "request messages are limited to %u bytes",
                                 E2B_BODY_MAX);
        k = http_conn_read_body_all(r->conn, E2B_BODY_MAX + (streaming ? E2B_ENVELOPE_HEADER : 0), &buf, &n);
        if (k == -EFBIG)
                return api_error(e, k, API_PAYLOAD_TOO_LARGE, "request messages are limited to %u bytes", E2B_BODY_MAX);
        if (k < 0)
                return api_error(e, k, API_BAD_REQUEST, "could not read the request body: %s", strerror(-k));
        r->body_read = true;
        if (streaming) {
                k = e2b_envelope_request(buf, n, &msg);
                if (k < 0)
                        return api_error(e, k, API_INVALID_ARGUMENT,
                                         "the request must be exactly one uncompressed Connect envelope");
        } else
                msg = (Slice){ buf, n };
        k = msg.n == 0 ? json_parse("{}", 2, ret, NULL, 0) : json_parse(msg.p, msg.n, ret, errbuf, sizeof errbuf);
        if (k == -ENOMEM)
                return api_error(e, k, API_UNAVAILABLE, "out of memory");
        if (k < 0)
                return api_error(e, k, API_INVALID_ARGUMENT, "malformed JSON message: %s",
                                 errbuf[0] ? errbuf : strerror(-k));
        if (json_type(*ret) != JSON_OBJECT) {
                *ret = json_free(*ret);
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "the message must be a JSON object");
        }
        return 0;
}

unsigned e2b_rpc_keepalive_sec(const ApiRequest *r) {
        const char *h = http_head_header(r->head, "Keepalive-Ping-Interval");
        unsigned u;

        if (!h || safe_atou(h, &u) < 0 || u == 0)
                return E2B_KEEPALIVE_DEFAULT_SEC;
        return MIN(u, E2B_KEEPALIVE_MAX_SEC);
}

uint64_t e2b_rpc_timeout_ms(const ApiRequest *r) {
        const char *h = http_head_header(r->head, "Connect-Timeout-Ms");
        uint64_t u;

        /* Connect allows up to 10 digits; anything else means no deadline */
        if (!h || strlen(h) > 10 || safe_atou64(h, &u) < 0)
                return 0;
        return u;
}
