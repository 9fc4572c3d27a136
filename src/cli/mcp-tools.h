/* SPDX-License-Identifier: MIT */
#pragma once

/* The MCP tools and resources: each tool a name, a JSON schema for its
 * arguments, and a function that calls the space API and builds the
 * CallToolResult. A failure of the API is a result with isError (the model
 * reads why); only a failure to answer at all is a negative return. */

#include "json.h"
#include "mcp-server.h"

typedef struct McpCall {
        McpServer *server;
        const JsonValue *args;      /* checked against the tool's schema */
        const char *progress_token; /* JSON of _meta.progressToken, or NULL */
        McpSend send;               /* for progress notifications */
        void *userdata;
} McpCall;

typedef struct McpTool {
        const char *name;
        const char *title;
        const char *description;
        const char *input_schema; /* JSON */
        int (*run)(McpCall *c, char **ret_result);
} McpTool;

extern const McpTool mcp_tools[];
extern const size_t mcp_tools_n;

/* resources/list, resources/templates/list, resources/read: the result JSON,
 * or negative with errbuf (-ENOENT: no such resource). */
int mcp_resources(McpServer *s, const char *method, const JsonValue *params, char **ret, char *errbuf,
                  size_t errbuf_size);
