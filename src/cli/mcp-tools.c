/* SPDX-License-Identifier: MIT */
/* The MCP tools and resources (mcp-tools.h): each a call or a few of the
 * space API with the server's key. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc-util.h"
#include "base64.h"
#include "cli-common.h"
#include "http-client.h"
#include "mcp-tools.h"

#define MCP_READ_MAX (16U * 1024U * 1024U)   /* read_file's bound */
#define MCP_OUTPUT_MAX (1024U * 1024U)       /* run_command's output kept per stream */
#define MCP_PROGRESS_TEXT_MAX 1000U          /* of one progress message */
#define MCP_API_BODY_MAX (64U * 1024U * 1024U)
#define MCP_TIMEOUT_MSEC (10 * 60 * 1000)

/* ---- the space API, quietly (errors go to the model, not stderr) ---- */

typedef struct ApiAnswer {
        int status;
        char *body;
        size_t len;
        JsonValue *json;
        char error[600]; /* "404 not_found: no sandbox 'x'", or a connection failure */
} ApiAnswer;

static void api_answer_done(ApiAnswer *a) {
        a->body = mfree(a->body);
        a->json = json_free(a->json);
}

static int api_open(McpServer *s, const char *method, const char *target, const char *content_type,
                    const void *body, size_t len, HttpClient **ret_c, const HttpHead **ret_head, ApiAnswer *a) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        _cleanup_free_ char *headers = NULL;
        int r;

        headers = strjoin(s->api_key ? "Authorization: Bearer " : "", strempty(s->api_key), s->api_key ? "\r\n" : "",
                          content_type ? "Content-Type: " : "", strempty(content_type), content_type ? "\r\n" : "");
        if (!headers)
                return -ENOMEM;
        r = http_client_new(s->api_url, &c);
        if (r < 0) {
                snprintf(a->error, sizeof a->error, "cannot reach the space API at %s: %s", s->api_url, strerror(-r));
                return r;
        }
        http_client_set_timeout(c, MCP_TIMEOUT_MSEC);
        r = http_client_request(c, method, target, headers, body, len);
        if (r >= 0)
                r = http_client_response(c, ret_head);
        if (r < 0) {
                snprintf(a->error, sizeof a->error, "the space API at %s did not answer: %s", s->api_url,
                         strerror(-r));
                return r;
        }
        a->status = (*ret_head)->status;
        *ret_c = TAKE_PTR(c);
        return 0;
}

/* Fills a->error from an error answer (status >= 400) and returns -EIO. */
static int api_error_of(ApiAnswer *a) {
        _cleanup_json_ JsonValue *v = NULL;
        const JsonValue *e;

        if (a->body && json_parse(a->body, a->len, &v, NULL, 0) >= 0 && (e = json_get(v, "error")))
                snprintf(a->error, sizeof a->error, "%d %s: %s", a->status, strempty(json_string(json_get(e, "code"))),
                         strempty(json_string(json_get(e, "message"))));
        else
                snprintf(a->error, sizeof a->error, "the space API answered %d", a->status);
        return -EIO;
}

static int api_call(McpServer *s, const char *method, const char *target, const char *content_type,
                    const void *body, size_t len, ApiAnswer *a) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        const HttpHead *h;
        int r;

        r = api_open(s, method, target, content_type, body, len, &c, &h, a);
        if (r < 0)
                return r;
        r = http_client_read_body_all(c, MCP_API_BODY_MAX, &a->body, &a->len);
        if (r < 0) {
                snprintf(a->error, sizeof a->error, "the space API's answer broke off: %s", strerror(-r));
                return r;
        }
        if (a->status >= 400)
                return api_error_of(a);
        if (a->len > 0)
                (void) json_parse(a->body, a->len, &a->json, NULL, 0);
        return 0;
}

static int api_json(McpServer *s, const char *method, const char *target, JsonWriter *body, ApiAnswer *a) {
        _cleanup_free_ char *text = NULL;
        size_t n = 0;

        if (body && json_w_finish(body, &text, &n) < 0)
                return -ENOMEM;
        return api_call(s, method, target, text ? "application/json" : NULL, text, n, a);
}

/* ---- results ---- */

/* A CallToolResult: one text content, the structured content (JSON) if any. */
static int result(const char *text, size_t text_len, const char *structured, bool is_error, char **ret) {
        JsonWriter w;
        size_t n;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "content");
        json_w_array_begin(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "type", "text");
        json_w_key(&w, "text");
        json_w_string_n(&w, text, text_len);
        json_w_object_end(&w);
        json_w_array_end(&w);
        if (structured) {
                json_w_key(&w, "structuredContent");
                json_w_raw(&w, structured);
        }
        json_w_kv_bool(&w, "isError", is_error);
        json_w_object_end(&w);
        return json_w_finish(&w, ret, &n);
}

static int result_text(const char *text, const char *structured, bool is_error, char **ret) {
        return result(text, strlen(text), structured, is_error, ret);
}

static int result_api_error(const ApiAnswer *a, char **ret) {
        return result_text(a->error[0] ? a->error : "the space API call failed", NULL, true, ret);
}

static const char *arg_str(const McpCall *c, const char *k) {
        return json_string(json_get(c->args, k));
}

/* target with the sandbox id (escaped) and a suffix */
static char *sandbox_target(const char *id, const char *suffix) {
        _cleanup_free_ char *e = cli_escape(id);
        return e ? strjoin("/v1/sandboxes/", e, strempty(suffix)) : NULL;
}

static void copy_arg(JsonWriter *w, const McpCall *c, const char *from, const char *to) {
        const JsonValue *v = json_get(c->args, from);
        _cleanup_free_ char *text = NULL;

        if (v && !json_is_null(v) && json_serialize(v, &text, NULL) >= 0) {
                json_w_key(w, to);
                json_w_raw(w, text);
        }
}

/* ---- tools ---- */

static int tool_create(McpCall *c, char **ret) {
        _cleanup_(api_answer_done) ApiAnswer a = {};
        _cleanup_free_ char *text = NULL;
        const JsonValue *allow = json_get(c->args, "allow");
        JsonWriter w;

        json_w_init(&w);
        json_w_object_begin(&w);
        copy_arg(&w, c, "template", "template");
        copy_arg(&w, c, "cpu", "cpu");
        copy_arg(&w, c, "memory_mb", "memory_mb");
        copy_arg(&w, c, "disk_mb", "disk_mb");
        copy_arg(&w, c, "timeout_s", "timeout_s");
        copy_arg(&w, c, "env", "env");
        copy_arg(&w, c, "metadata", "metadata");
        copy_arg(&w, c, "credentials", "credentials");
        if (allow) {
                json_w_key(&w, "network");
                json_w_object_begin(&w);
                copy_arg(&w, c, "allow", "allow");
                copy_arg(&w, c, "deny", "deny");
                json_w_object_end(&w);
        }
        json_w_object_end(&w);
        if (api_json(c->server, "POST", "/v1/sandboxes", &w, &a) < 0)
                return result_api_error(&a, ret);
        text = strjoin("Created sandbox ", strempty(json_string(json_get(a.json, "id"))), " from template ",
                       strempty(json_string(json_get(a.json, "template"))), " (", strempty(json_string(json_get(
                       a.json, "state"))), ").");
        return text ? result_text(text, a.body, false, ret) : -ENOMEM;
}

static int tool_list(McpCall *c, char **ret) {
        _cleanup_(api_answer_done) ApiAnswer a = {};
        _cleanup_free_ char *text = NULL;
        const JsonValue *l;
        size_t n = 0;
        FILE *f;

        if (api_call(c->server, "GET", "/v1/sandboxes", NULL, NULL, 0, &a) < 0)
                return result_api_error(&a, ret);
        l = json_get(a.json, "sandboxes");
        f = open_memstream(&text, &n);
        if (!f)
                return -ENOMEM;
        fprintf(f, "%zu sandboxes\n", json_array_size(l));
        for (size_t i = 0; i < json_array_size(l); i++) {
                const JsonValue *s = json_array_at(l, i);
                fprintf(f, "%s %s %s\n", strempty(json_string(json_get(s, "id"))),
                        strempty(json_string(json_get(s, "state"))), strempty(json_string(json_get(s, "template"))));
        }
        if (fclose(f) != 0)
                return -ENOMEM;
        return result_text(text, a.body, false, ret);
}

static int tool_delete(McpCall *c, char **ret) {
        _cleanup_(api_answer_done) ApiAnswer a = {};
        _cleanup_free_ char *t = sandbox_target(arg_str(c, "sandbox_id"), NULL), *text = NULL;

        if (!t)
                return -ENOMEM;
        if (api_call(c->server, "DELETE", t, NULL, NULL, 0, &a) < 0)
                return result_api_error(&a, ret);
        text = strjoin("Deleted sandbox ", arg_str(c, "sandbox_id"), ".");
        return text ? result_text(text, NULL, false, ret) : -ENOMEM;
}

typedef struct RunState {
        char *out, *err;
        size_t out_n, err_n;
        bool truncated;
        uint64_t progress;
} RunState;

static void keep(char **buf, size_t *n, const char *p, size_t len, bool *truncated) {
        size_t take = MIN(len, MCP_OUTPUT_MAX - MIN(*n, (size_t) MCP_OUTPUT_MAX));
        char *nb;

        if (take < len)
                *truncated = true;
        if (take == 0 || !(nb = realloc(*buf, *n + take + 1)))
                return;
        memcpy(nb + *n, p, take);
        *n += take;
        nb[*n] = 0;
        *buf = nb;
}

static void progress(McpCall *c, RunState *st, const char *p, size_t n) {
        JsonWriter w;
        _cleanup_free_ char *out = NULL;
        size_t len;

        if (!c->progress_token)
                return;
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "jsonrpc", "2.0");
        json_w_kv_string(&w, "method", "notifications/progress");
        json_w_key(&w, "params");
        json_w_object_begin(&w);
        json_w_key(&w, "progressToken");
        json_w_raw(&w, c->progress_token);
        json_w_key(&w, "progress");
        json_w_uint(&w, ++st->progress);
        json_w_key(&w, "message");
        json_w_string_n(&w, p, MIN(n, (size_t) MCP_PROGRESS_TEXT_MAX));
        json_w_object_end(&w);
        json_w_object_end(&w);
        if (json_w_finish(&w, &out, &len) >= 0)
                (void) c->send(c->userdata, out, len);
}

/* One exec event: output kept (and reported as progress), the end noted. */
static void run_event(McpCall *c, RunState *st, const JsonValue *ev, JsonWriter *end) {
        const char *type = json_string(json_get(ev, "type"));
        _cleanup_free_ void *bytes = NULL;
        const char *p = json_string(json_get(ev, "data"));
        size_t n = json_string_len(json_get(ev, "data"));
        const char *b64 = json_string(json_get(ev, "data_b64"));

        if (!type)
                return;
        if (b64 && base64_decode(b64, strlen(b64), &bytes, &n) >= 0)
                p = bytes;
        if (p && (streq(type, "stdout") || streq(type, "stderr"))) {
                if (streq(type, "stdout"))
                        keep(&st->out, &st->out_n, p, n, &st->truncated);
                else
                        keep(&st->err, &st->err_n, p, n, &st->truncated);
                progress(c, st, p, n);
        } else if (streq(type, "exit") || streq(type, "error")) {
                for (size_t i = 0; i < json_object_size(ev); i++) {
                        const char *k = json_object_key(ev, i);
                        _cleanup_free_ char *v = NULL;
                        if (streq(k, "type") || json_serialize(json_object_value(ev, i), &v, NULL) < 0)
                                continue;
                        json_w_key(end, streq(type, "error") && streq(k, "code") ? "error_code" :
                                        streq(type, "error") && streq(k, "message") ? "error" :
                                        streq(k, "code") ? "exit_code" : k);
                        json_w_raw(end, v);
                }
        }
}

static int tool_run(McpCall *c, char **ret) {
        _cleanup_(api_answer_done) ApiAnswer a = {};
        _cleanup_(http_client_freep) HttpClient *hc = NULL;
        _cleanup_free_ char *t = sandbox_target(arg_str(c, "sandbox_id"), "/exec"), *body = NULL, *structured = NULL,
                            *text = NULL, *line = NULL;
        RunState st = {};
        JsonWriter w, end;
        const HttpHead *h;
        size_t n = 0, line_n = 0, text_n = 0;
        FILE *f;
        int r;

        if (!t)
                return -ENOMEM;
        if (!json_get(c->args, "command") == !json_get(c->args, "argv"))
                return result_text("give either command (a shell string) or argv (a list of strings)", NULL, true,
                                   ret);
        json_w_init(&w);
        json_w_object_begin(&w);
        copy_arg(&w, c, "command", "shell");
        copy_arg(&w, c, "argv", "cmd");
        copy_arg(&w, c, "cwd", "cwd");
        copy_arg(&w, c, "env", "env");
        copy_arg(&w, c, "user", "user");
        copy_arg(&w, c, "stdin", "stdin");
        copy_arg(&w, c, "timeout_s", "timeout_s");
        json_w_object_end(&w);
        if (json_w_finish(&w, &body, &n) < 0)
                return -ENOMEM;
        r = api_open(c->server, "POST", t, "application/json", body, n, &hc, &h, &a);
        if (r < 0)
                return result_api_error(&a, ret);
        if (a.status >= 400) {
                (void) http_client_read_body_all(hc, MCP_API_BODY_MAX, &a.body, &a.len);
                (void) api_error_of(&a);
                return result_api_error(&a, ret);
        }
        json_w_init(&end);
        json_w_object_begin(&end);
        for (;;) {
                char buf[65536];
                ssize_t k = http_client_read_body(hc, buf, sizeof buf);
                char *nl;
                if (k < 0) {
                        json_w_done(&end);
                        free(st.out);
                        free(st.err);
                        snprintf(a.error, sizeof a.error, "the command's stream broke off: %s", strerror((int) -k));
                        return result_api_error(&a, ret);
                }
                if (k > 0) {
                        char *nb = realloc(line, line_n + (size_t) k + 1);
                        if (!nb)
                                break;
                        line = nb;
                        memcpy(line + line_n, buf, (size_t) k);
                        line_n += (size_t) k;
                }
                while ((nl = memchr(line, '\n', line_n))) {
                        _cleanup_json_ JsonValue *ev = NULL;
                        size_t len = (size_t) (nl - line);
                        if (json_parse(line, len, &ev, NULL, 0) >= 0)
                                run_event(c, &st, ev, &end);
                        memmove(line, nl + 1, line_n - len - 1);
                        line_n -= len + 1;
                }
                if (k == 0)
                        break;
        }
        json_w_key(&end, "stdout");
        json_w_string_n(&end, strempty(st.out), st.out_n);
        json_w_key(&end, "stderr");
        json_w_string_n(&end, strempty(st.err), st.err_n);
        json_w_kv_bool(&end, "truncated", st.truncated);
        json_w_object_end(&end);
        r = json_w_finish(&end, &structured, &n);
        if (r < 0)
                return r;

        f = open_memstream(&text, &text_n);
        if (!f)
                return -ENOMEM;
        if (st.out_n)
                fwrite(st.out, 1, st.out_n, f);
        if (st.err_n)
                fprintf(f, "%s[stderr]\n%.*s", st.out_n && st.out[st.out_n - 1] != '\n' ? "\n" : "", (int) st.err_n,
                        st.err);
        {
                _cleanup_json_ JsonValue *s = NULL;
                const char *sig = NULL, *reason = NULL, *error = NULL;
                int64_t exit_code = -1;
                if (json_parse(structured, n, &s, NULL, 0) >= 0) {
                        (void) json_int64(json_get(s, "exit_code"), &exit_code);
                        sig = json_string(json_get(s, "signal"));
                        reason = json_string(json_get(s, "reason"));
                        error = json_string(json_get(s, "error"));
                }
                if ((st.out_n || st.err_n) && ((st.err_n ? st.err[st.err_n - 1] : st.out[st.out_n - 1]) != '\n'))
                        fputc('\n', f);
                if (error)
                        fprintf(f, "[error: %s]\n", error);
                fprintf(f, "[exit code %" PRIi64 "%s%s%s%s]%s", exit_code, sig ? ", " : "", strempty(sig),
                        reason ? ", " : "", strempty(reason), st.truncated ? " (output truncated)" : "");
        }
        if (fclose(f) != 0)
                return -ENOMEM;
        free(st.out);
        free(st.err);
        return result(text, text_n, structured, false, ret);
}

static int tool_read(McpCall *c, char **ret) {
        _cleanup_(api_answer_done) ApiAnswer a = {};
        _cleanup_(http_client_freep) HttpClient *hc = NULL;
        _cleanup_free_ char *path = cli_escape(strempty(arg_str(c, "path"))), *sb = NULL, *t = NULL, *data = NULL,
                            *b64 = NULL, *structured = NULL;
        uint64_t max = MCP_READ_MAX;
        const HttpHead *h;
        size_t n = 0, bn = 0;
        JsonWriter w;
        bool more = false;
        int r;

        if (json_get(c->args, "max_bytes"))
                (void) json_uint64(json_get(c->args, "max_bytes"), &max);
        sb = sandbox_target(arg_str(c, "sandbox_id"), "/files?path=");
        t = path && sb ? strjoin(sb, path) : NULL;
        if (!t)
                return -ENOMEM;
        r = api_open(c->server, "GET", t, NULL, NULL, 0, &hc, &h, &a);
        if (r < 0)
                return result_api_error(&a, ret);
        if (a.status >= 400) {
                (void) http_client_read_body_all(hc, MCP_API_BODY_MAX, &a.body, &a.len);
                (void) api_error_of(&a);
                return result_api_error(&a, ret);
        }
        data = malloc(max + 1);
        if (!data)
                return -ENOMEM;
        while (n < max) {
                ssize_t k = http_client_read_body(hc, data + n, max - n);
                if (k < 0) {
                        snprintf(a.error, sizeof a.error, "the file's download broke off: %s", strerror((int) -k));
                        return result_api_error(&a, ret);
                }
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        if (n == max) {
                char probe;
                more = http_client_read_body(hc, &probe, 1) > 0;
        }
        data[n] = 0;
        if (utf8_valid(data, n) && !memchr(data, 0, n)) {
                json_w_init(&w);
                json_w_object_begin(&w);
                json_w_kv_string(&w, "path", arg_str(c, "path"));
                json_w_key(&w, "size");
                json_w_uint(&w, n);
                json_w_kv_bool(&w, "truncated", more);
                json_w_kv_string(&w, "encoding", "utf-8");
                json_w_object_end(&w);
                if (json_w_finish(&w, &structured, &bn) < 0)
                        return -ENOMEM;
                return result(data, n, structured, false, ret);
        }
        if (base64_encode(data, n, &b64, &bn) < 0)
                return -ENOMEM;
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "path", arg_str(c, "path"));
        json_w_key(&w, "size");
        json_w_uint(&w, n);
        json_w_kv_bool(&w, "truncated", more);
        json_w_kv_string(&w, "encoding", "base64");
        json_w_kv_string(&w, "content", b64);
        json_w_object_end(&w);
        if (json_w_finish(&w, &structured, &bn) < 0)
                return -ENOMEM;
        return result_text("The file is binary: its bytes are base64 in structuredContent.content.", structured,
                           false, ret);
}

static int tool_write(McpCall *c, char **ret) {
        _cleanup_(api_answer_done) ApiAnswer a = {};
        _cleanup_free_ char *path = cli_escape(strempty(arg_str(c, "path"))), *sb = NULL, *t = NULL, *text = NULL;
        _cleanup_free_ void *bytes = NULL;
        const JsonValue *content = json_get(c->args, "content");
        const char *enc = arg_str(c, "encoding");
        const void *p = json_string(content);
        size_t n = json_string_len(content);

        if (enc && streq(enc, "base64")) {
                if (base64_decode(json_string(content), json_string_len(content), &bytes, &n) < 0)
                        return result_text("content is not valid base64", NULL, true, ret);
                p = bytes;
        }
        sb = sandbox_target(arg_str(c, "sandbox_id"), "/files?parents=1&path=");
        t = path && sb ? strjoin(sb, path) : NULL;
        if (!t)
                return -ENOMEM;
        if (api_call(c->server, "PUT", t, "application/octet-stream", p, n, &a) < 0)
                return result_api_error(&a, ret);
        if (asprintf(&text, "Wrote %zu bytes to %s.", n, arg_str(c, "path")) < 0)
                return -ENOMEM;
        return result_text(text, a.body, false, ret);
}

static int tool_ls(McpCall *c, char **ret) {
        _cleanup_(api_answer_done) ApiAnswer a = {};
        _cleanup_free_ char *path = cli_escape(strempty(arg_str(c, "path"))), *sb = NULL, *t = NULL, *text = NULL;
        const JsonValue *l;
        size_t n = 0;
        FILE *f;

        sb = sandbox_target(arg_str(c, "sandbox_id"), "/files?list=1&path=");
        t = path && sb ? strjoin(sb, path) : NULL;
        if (!t)
                return -ENOMEM;
        if (api_call(c->server, "GET", t, NULL, NULL, 0, &a) < 0)
                return result_api_error(&a, ret);
        l = json_get(a.json, "entries");
        f = open_memstream(&text, &n);
        if (!f)
                return -ENOMEM;
        for (size_t i = 0; i < json_array_size(l); i++) {
                const JsonValue *e = json_array_at(l, i);
                uint64_t size = 0;
                (void) json_uint64(json_get(e, "size"), &size);
                fprintf(f, "%-7s %10" PRIu64 " %s\n", strempty(json_string(json_get(e, "type"))), size,
                        strempty(json_string(json_get(e, "name"))));
        }
        if (json_array_size(l) == 0)
                fputs("(empty directory)\n", f);
        if (fclose(f) != 0)
                return -ENOMEM;
        return result_text(text, a.body, false, ret);
}

/* The ingress URL of a port of the sandbox, its traffic token and a one-time link for a browser. */
static int tool_port(McpCall *c, char **ret) {
        _cleanup_(api_answer_done) ApiAnswer a = {};
        _cleanup_free_ char *suffix = NULL, *t = NULL, *text = NULL;
        uint64_t port = 0;

        if (json_uint64(json_get(c->args, "port"), &port) < 0)
                return result_text("port must be an integer in [1, 65535]", NULL, true, ret);
        suffix = strdup_printf("/ports/%" PRIu64, port);
        t = suffix ? sandbox_target(arg_str(c, "sandbox_id"), suffix) : NULL;
        if (!t)
                return -ENOMEM;
        if (api_call(c->server, "GET", t, NULL, NULL, 0, &a) < 0)
                return result_api_error(&a, ret);
        text = strdup_printf("Port %" PRIu64 " of sandbox %s is reachable at %s with the header %s: %s; "
                             "a browser opens %s once (it sets a cookie; expires %s).",
                             port, arg_str(c, "sandbox_id"), strempty(json_string(json_get(a.json, "url"))),
                             strempty(json_string(json_get(a.json, "token_header"))),
                             strempty(json_string(json_get(a.json, "token"))),
                             strempty(json_string(json_get(a.json, "link"))),
                             strempty(json_string(json_get(a.json, "link_expires_at"))));
        return text ? result_text(text, a.body, false, ret) : -ENOMEM;
}

typedef struct ArgMap {
        const char *from, *to; /* the tool's argument, the API's field */
} ArgMap;

/* POST /v1/sandboxes/{sandbox_id}SUFFIX with the call's arguments as the
 * JSON body (each present one of args, renamed): -ENOMEM, or the API's
 * answer in *a (api_json's return: < 0 for an error answer). */
static int post_to_sandbox(McpCall *c, const char *suffix, const ArgMap *args, size_t n, ApiAnswer *a) {
        _cleanup_free_ char *t = sandbox_target(arg_str(c, "sandbox_id"), suffix);
        JsonWriter w;
        int r;

        if (!t)
                return -ENOMEM;
        json_w_init(&w);
        json_w_object_begin(&w);
        for (size_t i = 0; i < n; i++)
                copy_arg(&w, c, args[i].from, args[i].to);
        json_w_object_end(&w);
        r = api_json(c->server, "POST", t, &w, a);
        return r == -ENOMEM ? r : r < 0 ? -EIO : 0;
}

static int tool_checkpoint(McpCall *c, char **ret) {
        static const ArgMap args[] = { { "name", "name" } };
        _cleanup_(api_answer_done) ApiAnswer a = {};
        _cleanup_free_ char *text = NULL;
        int r = post_to_sandbox(c, "/checkpoints", args, ELEMENTSOF(args), &a);

        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return result_api_error(&a, ret);
        text = strjoin("Checkpoint ", strempty(json_string(json_get(a.json, "id"))), " of sandbox ",
                       arg_str(c, "sandbox_id"), " taken.");
        return text ? result_text(text, a.body, false, ret) : -ENOMEM;
}

static int tool_branch(McpCall *c, char **ret) {
        static const ArgMap args[] = { { "count", "count" }, { "from_checkpoint", "from" } };
        _cleanup_(api_answer_done) ApiAnswer a = {};
        _cleanup_free_ char *text = NULL;
        const JsonValue *l;
        size_t n = 0;
        FILE *f;
        int r = post_to_sandbox(c, "/branch", args, ELEMENTSOF(args), &a);

        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return result_api_error(&a, ret);
        l = json_get(a.json, "sandboxes");
        f = open_memstream(&text, &n);
        if (!f)
                return -ENOMEM;
        fprintf(f, "Branched sandbox %s into %zu:", arg_str(c, "sandbox_id"), json_array_size(l));
        for (size_t i = 0; i < json_array_size(l); i++)
                fprintf(f, " %s", strempty(json_string(json_get(json_array_at(l, i), "id"))));
        if (fclose(f) != 0)
                return -ENOMEM;
        return result_text(text, a.body, false, ret);
}

static int tool_restore(McpCall *c, char **ret) {
        static const ArgMap args[] = { { "checkpoint", "checkpoint" } };
        _cleanup_(api_answer_done) ApiAnswer a = {};
        _cleanup_free_ char *text = NULL;
        int r = post_to_sandbox(c, "/restore", args, ELEMENTSOF(args), &a);

        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return result_api_error(&a, ret);
        text = strjoin("Sandbox ", arg_str(c, "sandbox_id"), " restored to checkpoint ", arg_str(c, "checkpoint"),
                       " (its processes started afresh).");
        return text ? result_text(text, a.body, false, ret) : -ENOMEM;
}

#define ID_SCHEMA "\"sandbox_id\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,\"description\":\"the sandbox's id\"}"
#define STRMAP_SCHEMA(what) \
        "{\"type\":\"object\",\"maxProperties\":128,\"additionalProperties\":{\"type\":\"string\",\"maxLength\":65536}," \
        "\"description\":\"" what "\"}"
#define PATH_SCHEMA "\"path\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4095,\"description\":\"an absolute path inside the sandbox\"}"

const McpTool mcp_tools[] = {
        { "create_sandbox", "Create a sandbox",
          "Creates a new, isolated Linux sandbox and returns its id. Network egress is off unless 'allow' names "
          "hosts (example.com, *.example.com) or CIDRs.",
          "{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
          "\"template\":{\"type\":\"string\",\"maxLength\":64},"
          "\"cpu\":{\"type\":\"number\",\"minimum\":0.01,\"maximum\":1024},"
          "\"memory_mb\":{\"type\":\"integer\",\"minimum\":16},"
          "\"disk_mb\":{\"type\":\"integer\",\"minimum\":16},"
          "\"timeout_s\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"delete it after this long (0: never)\"},"
          "\"env\":" STRMAP_SCHEMA("environment of every process") ","
          "\"metadata\":" STRMAP_SCHEMA("labels") ","
          "\"allow\":{\"type\":\"array\",\"maxItems\":256,\"items\":{\"type\":\"string\",\"maxLength\":300}},"
          "\"deny\":{\"type\":\"array\",\"maxItems\":256,\"items\":{\"type\":\"string\",\"maxLength\":300}},"
          "\"credentials\":{\"type\":\"array\",\"maxItems\":64,\"items\":{\"type\":\"string\",\"maxLength\":64}}}}",
          tool_create },
        { "list_sandboxes", "List sandboxes", "Lists the sandboxes of this key's tenant with their state.",
          "{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{}}", tool_list },
        { "run_command", "Run a command",
          "Runs a command in a sandbox to its end and returns its output and exit code; output is also sent as "
          "progress notifications while it runs. Give 'command' (run by /bin/sh -c) or 'argv'.",
          "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\"],\"properties\":{" ID_SCHEMA ","
          "\"command\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":131072},"
          "\"argv\":{\"type\":\"array\",\"maxItems\":4096,\"items\":{\"type\":\"string\",\"maxLength\":131072}},"
          "\"cwd\":{\"type\":\"string\",\"maxLength\":4095},"
          "\"user\":{\"type\":\"string\",\"maxLength\":64},"
          "\"stdin\":{\"type\":\"string\",\"maxLength\":1048576},"
          "\"timeout_s\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":86400},"
          "\"env\":" STRMAP_SCHEMA("extra environment") "}}",
          tool_run },
        { "read_file", "Read a file", "Reads a file of a sandbox (text as text, binary as base64).",
          "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\",\"path\"],\"properties\":{"
          ID_SCHEMA "," PATH_SCHEMA ",\"max_bytes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":16777216}}}",
          tool_read },
        { "write_file", "Write a file",
          "Writes a file in a sandbox (parent directories are made), replacing it whole.",
          "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\",\"path\",\"content\"],"
          "\"properties\":{" ID_SCHEMA "," PATH_SCHEMA ",\"content\":{\"type\":\"string\",\"maxLength\":33554432},"
          "\"encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\",\"base64\"]}}}",
          tool_write },
        { "list_files", "List a directory", "Lists a directory of a sandbox: type, size and name of each entry.",
          "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\",\"path\"],\"properties\":{"
          ID_SCHEMA "," PATH_SCHEMA "}}",
          tool_ls },
        { "checkpoint", "Checkpoint a sandbox", "Takes a copy-on-write checkpoint of a sandbox's files (O(1)).",
          "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\"],\"properties\":{" ID_SCHEMA
          ",\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64}}}",
          tool_checkpoint },
        { "branch", "Branch a sandbox",
          "Makes count new sandboxes from a sandbox's current files or from one of its checkpoints, to try "
          "several approaches in parallel.",
          "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\"],\"properties\":{" ID_SCHEMA
          ",\"count\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":64},"
          "\"from_checkpoint\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64}}}",
          tool_branch },
        { "restore", "Restore a checkpoint", "Puts a sandbox's files back to a checkpoint (its processes restart).",
          "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\",\"checkpoint\"],"
          "\"properties\":{" ID_SCHEMA ",\"checkpoint\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64}}}",
          tool_restore },
        { "expose_port", "Expose a port",
          "Gives the URL of a TCP port inside a sandbox (a server started there, e.g. on 8000) through the "
          "ingress, with the traffic token to send and a one-time link for a browser.",
          "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\",\"port\"],"
          "\"properties\":{" ID_SCHEMA ",\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535}}}",
          tool_port },
        { "delete_sandbox", "Delete a sandbox", "Deletes a sandbox and everything in it.",
          "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"sandbox_id\"],\"properties\":{" ID_SCHEMA "}}",
          tool_delete },
};
const size_t mcp_tools_n = ELEMENTSOF(mcp_tools);

/* ---- resources ---- */

#define URI_PREFIX "space://sandboxes/"

static int resources_list(McpServer *s, char **ret, char *errbuf, size_t n) {
        _cleanup_(api_answer_done) ApiAnswer a = {};
        const JsonValue *l;
        JsonWriter w;
        size_t len;

        if (api_call(s, "GET", "/v1/sandboxes", NULL, NULL, 0, &a) < 0)
                return snprintf(errbuf, n, "%s", a.error), -EIO;
        l = json_get(a.json, "sandboxes");
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "resources");
        json_w_array_begin(&w);
        for (size_t i = 0; i < json_array_size(l); i++) {
                const char *id = json_string(json_get(json_array_at(l, i), "id"));
                _cleanup_free_ char *uri = id ? strjoin(URI_PREFIX, id, "/events") : NULL,
                                    *name = id ? strjoin("events of sandbox ", id) : NULL;
                if (!uri || !name)
                        continue;
                json_w_object_begin(&w);
                json_w_kv_string(&w, "uri", uri);
                json_w_kv_string(&w, "name", name);
                json_w_kv_string(&w, "mimeType", "application/json");
                json_w_object_end(&w);
        }
        json_w_array_end(&w);
        json_w_object_end(&w);
        return json_w_finish(&w, ret, &len);
}

static int resource_templates(char **ret) {
        *ret = strdup("{\"resourceTemplates\":["
                      "{\"uriTemplate\":\"" URI_PREFIX "{sandbox_id}/files/{+path}\",\"name\":\"a file in a sandbox\","
                      "\"mimeType\":\"application/octet-stream\"},"
                      "{\"uriTemplate\":\"" URI_PREFIX "{sandbox_id}/events\",\"name\":\"a sandbox's events\","
                      "\"mimeType\":\"application/json\"}]}");
        return *ret ? 0 : -ENOMEM;
}

/* space://sandboxes/ID/files/PATH (PATH as given, absolute) or .../ID/events */
static int resource_read(McpServer *s, const char *uri, char **ret, char *errbuf, size_t n) {
        _cleanup_(api_answer_done) ApiAnswer a = {};
        _cleanup_free_ char *id = NULL, *t = NULL, *path = NULL, *b64 = NULL;
        const char *rest = startswith(uri, URI_PREFIX), *slash, *what;
        JsonWriter w;
        size_t len;

        if (!rest || !(slash = strchr(rest, '/')) || slash == rest || slash - rest > 64)
                return snprintf(errbuf, n, "no such resource: %.200s", uri), -ENOENT;
        id = strndup(rest, (size_t) (slash - rest));
        if (!id)
                return -ENOMEM;
        what = slash + 1;
        if (streq(what, "events")) {
                _cleanup_free_ char *e = cli_escape(id);
                t = e ? strjoin("/v1/events?limit=100&sandbox=", e) : NULL;
        } else if (startswith(what, "files/")) {
                _cleanup_free_ char *p = NULL, *sb = sandbox_target(id, "/files?path=");
                path = strjoin("/", what + strlen("files/"));
                p = path ? cli_escape(path) : NULL;
                t = p && sb ? strjoin(sb, p) : NULL;
        } else
                return snprintf(errbuf, n, "no such resource: %.200s", uri), -ENOENT;
        if (!t)
                return -ENOMEM;
        if (api_call(s, "GET", t, NULL, NULL, 0, &a) < 0)
                return snprintf(errbuf, n, "%s", a.error), a.status == 404 ? -ENOENT : -EIO;
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "contents");
        json_w_array_begin(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "uri", uri);
        if (!path || (utf8_valid(strempty(a.body), a.len) && !memchr(strempty(a.body), 0, a.len))) {
                json_w_kv_string(&w, "mimeType", path ? "text/plain" : "application/json");
                json_w_key(&w, "text");
                json_w_string_n(&w, strempty(a.body), a.len);
        } else {
                if (base64_encode(a.body, a.len, &b64, &len) < 0) {
                        json_w_done(&w);
                        return -ENOMEM;
                }
                json_w_kv_string(&w, "mimeType", "application/octet-stream");
                json_w_kv_string(&w, "blob", b64);
        }
        json_w_object_end(&w);
        json_w_array_end(&w);
        json_w_object_end(&w);
        return json_w_finish(&w, ret, &len);
}

int mcp_resources(McpServer *s, const char *method, const JsonValue *params, char **ret, char *errbuf,
                  size_t errbuf_size) {
        const char *uri;

        if (streq(method, "resources/list"))
                return resources_list(s, ret, errbuf, errbuf_size);
        if (streq(method, "resources/templates/list"))
                return resource_templates(ret);
        uri = json_string(json_get(params, "uri"));
        if (!uri)
                return snprintf(errbuf, errbuf_size, "resources/read needs a uri"), -EINVAL;
        return resource_read(s, uri, ret, errbuf, errbuf_size);
}
