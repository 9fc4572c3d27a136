/* SPDX-License-Identifier: MIT */
#pragma once

/* The JSON Schema subset the MCP tools declare their inputs with, and the
 * check of a tool call's arguments against it (arguments are untrusted: the
 * model writes them). Supported: type (object, string, integer, number,
 * boolean, array), properties, required, additionalProperties: false, items,
 * enum (of strings), minimum, maximum, minLength, maxLength, maxItems,
 * maxProperties and additionalProperties as a schema (for string maps). */

#include <stddef.h>

#include "json.h"

/* 0 if v satisfies schema; else -EINVAL with "where: why" in errbuf. */
int mcp_schema_check(const JsonValue *schema, const JsonValue *v, char *errbuf, size_t errbuf_size);
