/* SPDX-License-Identifier: MIT */
/* The MCP protocol: initialize, ping, tools/list, tools/call and the resources
 * (see mcp-server.h); the tools are in mcp-tools.c. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc-util.h"
#include "mcp-schema.h"
#include "mcp-server.h"
#include "mcp-tools.h"
#include "space-build.h"
#include "str-util.h"

#define JSONRPC_PARSE_ERROR (-32700)
#define JSONRPC_INVALID_REQUEST (-32600)
#define JSONRPC_METHOD_NOT_FOUND (-32601)
#define JSONRPC_INVALID_PARAMS (-32602)
#define JSONRPC_INTERNAL (-32603)

static const char *const protocols[] = { "2025-06-18", "2025-03-26", "2024-11-05" };

static int send_writer(JsonWriter *w, McpSend send, void *ud) {
        _cleanup_free_ char *out = NULL;
        size_t n = 0;
        int r = json_w_finish(w, &out, &n);
        if (r < 0)
                return r;
        return send(ud, out, n);
}

/* {"jsonrpc":"2.0","id":<id>,"result": <raw>} */
static int send_result(const char *id_json, const char *result_json, McpSend send, void *ud) {
        JsonWriter w;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "jsonrpc", "2.0");
        json_w_key(&w, "id");
        json_w_raw(&w, id_json);
        json_w_key(&w, "result");
        json_w_raw(&w, result_json);
        json_w_object_end(&w);
        return send_writer(&w, send, ud);
}

static int send_error(const char *id_json, int code, const char *message, McpSend send, void *ud) {
        JsonWriter w;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "jsonrpc", "2.0");
        json_w_key(&w, "id");
        json_w_raw(&w, id_json ?: "null");
        json_w_key(&w, "error");
        json_w_object_begin(&w);
        json_w_kv_int(&w, "code", code);
        json_w_kv_string(&w, "message", message);
        json_w_object_end(&w);
        json_w_object_end(&w);
        return send_writer(&w, send, ud);
}

static char *writer_text(JsonWriter *w) {
        char *out = NULL;
        size_t n;
        return json_w_finish(w, &out, &n) < 0 ? NULL : out;
}

static char *initialize_result(McpServer *s, const JsonValue *params) {
        const char *want = json_string(json_get(params, "protocolVersion"));
        JsonWriter w;

        (void) strscpy(s->protocol, sizeof s->protocol, MCP_PROTOCOL_LATEST);
        for (size_t i = 0; want && i < ELEMENTSOF(protocols); i++)
                if (streq(want, protocols[i]))
                        (void) strscpy(s->protocol, sizeof s->protocol, want);
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "protocolVersion", s->protocol);
        json_w_key(&w, "capabilities");
        json_w_object_begin(&w);
        json_w_key(&w, "tools");
        json_w_object_begin(&w);
        json_w_kv_bool(&w, "listChanged", false);
        json_w_object_end(&w);
        json_w_key(&w, "resources");
        json_w_object_begin(&w);
        json_w_kv_bool(&w, "listChanged", false);
        json_w_kv_bool(&w, "subscribe", false);
        json_w_object_end(&w);
        json_w_object_end(&w);
        json_w_key(&w, "serverInfo");
        json_w_object_begin(&w);
        json_w_kv_string(&w, "name", "space");
        json_w_kv_string(&w, "title", "space sandboxes");
        json_w_kv_string(&w, "version", SPACE_VERSION);
        json_w_object_end(&w);
        json_w_kv_string(&w, "instructions",
                         "Each sandbox is a disposable Linux computer. Create one with create_sandbox, run commands "
                         "with run_command, move files with read_file/write_file/list_files, save and fork its "
                         "state with checkpoint/branch/restore, and delete it with delete_sandbox when done.");
        json_w_object_end(&w);
        return writer_text(&w);
}

static char *tools_list_result(void) {
        JsonWriter w;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "tools");
        json_w_array_begin(&w);
        for (size_t i = 0; i < mcp_tools_n; i++) {
                json_w_object_begin(&w);
                json_w_kv_string(&w, "name", mcp_tools[i].name);
                json_w_kv_string(&w, "title", mcp_tools[i].title);
                json_w_kv_string(&w, "description", mcp_tools[i].description);
                json_w_key(&w, "inputSchema");
                json_w_raw(&w, mcp_tools[i].input_schema);
                json_w_object_end(&w);
        }
        json_w_array_end(&w);
        json_w_object_end(&w);
        return writer_text(&w);
}

static int tools_call(McpServer *s, const char *id_json, const JsonValue *params, McpSend send, void *ud) {
        const char *name = json_string(json_get(params, "name"));
        const JsonValue *args = json_get(params, "arguments"), *meta = json_get(params, "_meta");
        _cleanup_json_ JsonValue *schema = NULL, *empty = NULL;
        _cleanup_free_ char *token = NULL, *result = NULL;
        const McpTool *tool = NULL;
        char err[512] = "";
        int r;

        for (size_t i = 0; name && i < mcp_tools_n; i++)
                if (streq(mcp_tools[i].name, name))
                        tool = &mcp_tools[i];
        if (!tool) {
                snprintf(err, sizeof err, "unknown tool '%.64s'", strempty(name));
                return send_error(id_json, JSONRPC_INVALID_PARAMS, err, send, ud);
        }
        if (!args || json_is_null(args)) {
                r = json_parse("{}", 2, &empty, NULL, 0);
                if (r < 0)
                        return send_error(id_json, JSONRPC_INTERNAL, "out of memory", send, ud);
                args = empty;
        }
        r = json_parse(tool->input_schema, strlen(tool->input_schema), &schema, NULL, 0);
        if (r < 0)
                return send_error(id_json, JSONRPC_INTERNAL, "a tool's schema does not parse", send, ud);
        if (mcp_schema_check(schema, args, err, sizeof err) < 0)
                return send_error(id_json, JSONRPC_INVALID_PARAMS, err, send, ud);
        if (json_get(meta, "progressToken") && json_serialize(json_get(meta, "progressToken"), &token, NULL) < 0)
                return send_error(id_json, JSONRPC_INTERNAL, "out of memory", send, ud);

        McpCall call = { .server = s, .args = args, .progress_token = token, .send = send, .userdata = ud };
        r = tool->run(&call, &result);
        if (r < 0 || !result)
                return send_error(id_json, JSONRPC_INTERNAL, "the tool failed", send, ud);
        return send_result(id_json, result, send, ud);
}

static int dispatch(McpServer *s, const char *method, const char *id_json, const JsonValue *params, McpSend send,
                    void *ud) {
        _cleanup_free_ char *result = NULL;
        char err[512];
        int r;

        if (streq(method, "initialize")) {
                result = initialize_result(s, params);
                s->initialized = true;
        } else if (streq(method, "ping"))
                result = strdup("{}");
        else if (streq(method, "tools/list"))
                result = tools_list_result();
        else if (streq(method, "tools/call"))
                return tools_call(s, id_json, params, send, ud);
        else if (streq(method, "resources/list") || streq(method, "resources/templates/list") ||
                 streq(method, "resources/read")) {
                r = mcp_resources(s, method, params, &result, err, sizeof err);
                if (r < 0)
                        return send_error(id_json, r == -ENOENT ? -32002 : JSONRPC_INVALID_PARAMS, err, send, ud);
        } else {
                snprintf(err, sizeof err, "method '%.64s' is not served", method);
                return send_error(id_json, JSONRPC_METHOD_NOT_FOUND, err, send, ud);
        }
        if (!result)
                return send_error(id_json, JSONRPC_INTERNAL, "out of memory", send, ud);
        return send_result(id_json, result, send, ud);
}

int mcp_server_handle(McpServer *s, const char *msg, size_t n, McpSend send, void *ud) {
        _cleanup_json_ JsonValue *v = NULL;
        _cleanup_free_ char *id_json = NULL;
        const JsonValue *id, *params;
        const char *method, *version;
        char err[256];
        int r;

        if (n > MCP_MESSAGE_MAX)
                return send_error(NULL, JSONRPC_INVALID_REQUEST, "message too large", send, ud) < 0 ? -EIO : 1;
        if (json_parse(msg, n, &v, err, sizeof err) < 0)
                return send_error(NULL, JSONRPC_PARSE_ERROR, err, send, ud) < 0 ? -EIO : 1;
        if (json_type(v) != JSON_OBJECT)
                return send_error(NULL, JSONRPC_INVALID_REQUEST, "a message is one JSON-RPC object (no batches)", send,
                                  ud) < 0 ? -EIO : 1;
        version = json_string(json_get(v, "jsonrpc"));
        method = json_string(json_get(v, "method"));
        id = json_get(v, "id");
        params = json_get(v, "params");
        if (id && json_type(id) != JSON_STRING && json_type(id) != JSON_NUMBER)
                return send_error(NULL, JSONRPC_INVALID_REQUEST, "id must be a string or a number", send, ud) < 0
                               ? -EIO : 1;
        if (id && json_serialize(id, &id_json, NULL) < 0)
                return -ENOMEM;
        if (!method) {
                /* a response or an error from the client (we send it no requests): nothing to do */
                if (json_get(v, "result") || json_get(v, "error"))
                        return 0;
                return send_error(id_json, JSONRPC_INVALID_REQUEST, "no method", send, ud) < 0 ? -EIO : 1;
        }
        if (!version || !streq(version, "2.0"))
                return id ? (send_error(id_json, JSONRPC_INVALID_REQUEST, "jsonrpc must be \"2.0\"", send, ud) < 0
                                     ? -EIO : 1)
                          : 0;
        if (params && json_type(params) != JSON_OBJECT && json_type(params) != JSON_ARRAY)
                return id ? (send_error(id_json, JSONRPC_INVALID_PARAMS, "params must be an object", send, ud) < 0
                                     ? -EIO : 1)
                          : 0;
        if (!id)
                return 0; /* notifications (initialized, cancelled, ...) ask for nothing */
        r = dispatch(s, method, id_json, params, send, ud);
        return r < 0 ? r : 1;
}

bool mcp_message_is_initialize(const char *msg, size_t n) {
        _cleanup_json_ JsonValue *v = NULL;
        const char *m;

        if (json_parse(msg, n, &v, NULL, 0) < 0)
                return false;
        m = json_string(json_get(v, "method"));
        return m && streq(m, "initialize");
}
