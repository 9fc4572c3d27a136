/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "macros.h"

/* Levelled logging, one logfmt line per event on stderr:
 *   ts=2026-11-30T01:02:03.123Z level=info msg="..." sandbox=... req=...
 * Library layers log at debug or not at all; the caller that decides logs once. */

enum {
        LOG_ERR_ = 3,
        LOG_WARNING_ = 4,
        LOG_INFO_ = 6,
        LOG_DEBUG_ = 7,
};

void log_set_max_level(int level);
int log_get_max_level(void);
int log_parse_level(const char *s); /* "error|warning|info|debug" → level or -EINVAL */
void log_set_prefix(const char *component); /* e.g. "spaced", "worker", "agent" */

/* Thread-local context fields appended to every line (may be NULL). */
void log_set_context(const char *sandbox, const char *req);

/* log_format=json: every line a JSON object with the same fields (ts, level, component, msg, the
 * fields given, sandbox, req); else logfmt. */
void log_set_json(bool json);
bool log_is_json(void);

/* A line whose fields are fields of their own (not folded into msg): key=value in logfmt (quoted
 * where needed), "key":value in JSON (a value that is a number as written is a JSON number). A
 * field whose value is NULL is left out. */
typedef struct LogField {
        const char *key;
        const char *value;
} LogField;
void log_fields_internal(int level, const char *file, int line, const char *msg, const LogField *fields, size_t n);
#define log_fields(level, msg, fields, n) log_fields_internal((level), __FILE__, __LINE__, (msg), (fields), (n))

/* Logs and returns -abs(error) (or 0 if error == 0). %m prints strerror(error). */
int log_internal(int level, int error, const char *file, int line, const char *fmt, ...) _printf_(5, 6);

#define log_full_errno(level, error, ...) log_internal((level), (error), __FILE__, __LINE__, __VA_ARGS__)
#define log_debug(...) log_full_errno(LOG_DEBUG_, 0, __VA_ARGS__)
#define log_info(...) log_full_errno(LOG_INFO_, 0, __VA_ARGS__)
#define log_warning(...) log_full_errno(LOG_WARNING_, 0, __VA_ARGS__)
#define log_error(...) log_full_errno(LOG_ERR_, 0, __VA_ARGS__)
#define log_debug_errno(e, ...) log_full_errno(LOG_DEBUG_, (e), __VA_ARGS__)
#define log_info_errno(e, ...) log_full_errno(LOG_INFO_, (e), __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING_, (e), __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_ERR_, (e), __VA_ARGS__)
