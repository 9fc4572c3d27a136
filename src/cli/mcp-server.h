/* SPDX-License-Identifier: MIT */
#pragma once

/* space's MCP server (Model Context Protocol, JSON-RPC 2.0): the protocol
 * and the tools, apart from the transports (stdio and streamable HTTP in
 * cli-mcp.c). Each tool is a call or a few of the space API, made with the
 * key the server holds; its arguments are checked against the tool's JSON
 * schema before anything is called. */

#include <stdbool.h>
#include <stddef.h>

#define MCP_MESSAGE_MAX (8U * 1024U * 1024U) /* one JSON-RPC message */
#define MCP_PROTOCOL_LATEST "2025-06-18"

/* Writes one JSON-RPC message (a notification or the response) to the client. */
typedef int (*McpSend)(void *userdata, const char *json, size_t n);

typedef struct McpServer {
        const char *api_url; /* the space API */
        const char *api_key; /* the key every call is made with (NULL: none) */
        bool initialized;
        char protocol[32];   /* the protocol version agreed at initialize */
} McpServer;

/* Handles one message from the client: a request is answered through send
 * (after any progress notifications); a notification gets nothing. Returns
 * 1 if a response was sent, 0 if none was due, negative if send failed. */
int mcp_server_handle(McpServer *s, const char *msg, size_t n, McpSend send, void *userdata);

/* True if the message is an initialize request (the HTTP transport starts a session then). */
bool mcp_message_is_initialize(const char *msg, size_t n);
