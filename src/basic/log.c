/* SPDX-License-Identifier: MIT */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log.h"

static int max_level = LOG_INFO_;
static const char *prefix = NULL;
static _Thread_local const char *ctx_sandbox = NULL;
static _Thread_local const char *ctx_req = NULL;

void log_set_max_level(int level) {
        max_level = level;
}

int log_get_max_level(void) {
        return max_level;
}

void log_set_prefix(const char *component) {
        prefix = component;
}

void log_set_context(const char *sandbox, const char *req) {
        ctx_sandbox = sandbox;
        ctx_req = req;
}

int log_parse_level(const char *s) {
        if (!s)
                return -EINVAL;
        if (streq(s, "error") || streq(s, "err"))
                return LOG_ERR_;
        if (streq(s, "warning") || streq(s, "warn"))
                return LOG_WARNING_;
        if (streq(s, "info"))
                return LOG_INFO_;
        if (streq(s, "debug"))
                return LOG_DEBUG_;
        return -EINVAL;
}

static const char *level_name(int level) {
        switch (level) {
        case LOG_ERR_:
                return "error";
        case LOG_WARNING_:
                return "warning";
        case LOG_INFO_:
                return "info";
        default:
                return "debug";
        }
}

static bool json_format = false;

void log_set_json(bool json) {
        json_format = json;
}

bool log_is_json(void) {
        return json_format;
}

/* Writes s as a logfmt value (quoted, with " and \ and control bytes escaped) or as a JSON string. */
static void put_quoted(char *buf, size_t sz, size_t *n, const char *s) {
        if (*n < sz)
                buf[(*n)++] = '"';
        for (; *s && *n + 7 < sz; s++) {
                unsigned char c = (unsigned char) *s;
                if (c == '"' || c == '\\') {
                        buf[(*n)++] = '\\';
                        buf[(*n)++] = (char) c;
                } else if (c == '\n') {
                        buf[(*n)++] = '\\';
                        buf[(*n)++] = 'n';
                } else if (c < 0x20 || c == 0x7f) {
                        *n += (size_t) snprintf(buf + *n, sz - *n, json_format ? "\\u%04x" : "\\x%02x", c);
                } else
                        buf[(*n)++] = (char) c;
        }
        if (*n < sz)
                buf[(*n)++] = '"';
}

/* A logfmt value that needs no quotes: no space, quote, '=' or control byte, not empty. */
static bool bare_ok(const char *s) {
        if (!*s)
                return false;
        for (; *s; s++)
                if ((unsigned char) *s <= ' ' || *s == '"' || *s == '=' || *s == '\\' || (unsigned char) *s == 0x7f)
                        return false;
        return true;
}

/* Is s a JSON number as written (digits, one '.', a leading '-')? */
static bool is_number(const char *s) {
        bool digit = false, dot = false;
        if (*s == '-')
                s++;
        for (; *s; s++) {
                if (*s >= '0' && *s <= '9')
                        digit = true;
                else if (*s == '.' && !dot && digit)
                        dot = true;
                else
                        return false;
        }
        return digit;
}

/* One field: ` key=value` (logfmt) or `,"key":value` (JSON; the first without the comma). */
static void put_field(char *buf, size_t sz, size_t *n, const char *key, const char *value, bool first) {
        if (*n + strlen(key) + 8 >= sz)
                return;
        if (json_format) {
                if (!first)
                        buf[(*n)++] = ',';
                put_quoted(buf, sz, n, key);
                if (*n < sz)
                        buf[(*n)++] = ':';
                if (is_number(value) && *n + strlen(value) < sz) {
                        memcpy(buf + *n, value, strlen(value));
                        *n += strlen(value);
                } else
                        put_quoted(buf, sz, n, value);
                return;
        }
        *n += (size_t) snprintf(buf + *n, sz - *n, "%s%s=", first ? "" : " ", key);
        if (*n >= sz)
                return;
        if (bare_ok(value) && *n + strlen(value) < sz) {
                memcpy(buf + *n, value, strlen(value));
                *n += strlen(value);
        } else
                put_quoted(buf, sz, n, value);
}

static void emit(int level, const char *file, int line, const char *msg, const LogField *fields, size_t n_fields) {
        char out[4096], ts[64], when[80], src[320];
        struct timespec now;
        struct tm tm;
        size_t n = 0;

        clock_gettime(CLOCK_REALTIME, &now);
        gmtime_r(&now.tv_sec, &tm);
        strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(when, sizeof when, "%s.%03ldZ", ts, now.tv_nsec / 1000000);

        if (json_format)
                out[n++] = '{';
        put_field(out, sizeof out - 2, &n, "ts", when, true);
        put_field(out, sizeof out - 2, &n, "level", level_name(level), false);
        if (prefix)
                put_field(out, sizeof out - 2, &n, "component", prefix, false);
        put_field(out, sizeof out - 2, &n, "msg", msg, false);
        for (size_t i = 0; i < n_fields; i++)
                if (fields[i].key && fields[i].value)
                        put_field(out, sizeof out - 2, &n, fields[i].key, fields[i].value, false);
        if (ctx_sandbox)
                put_field(out, sizeof out - 2, &n, "sandbox", ctx_sandbox, false);
        if (ctx_req)
                put_field(out, sizeof out - 2, &n, "req", ctx_req, false);
        if (level == LOG_DEBUG_) {
                snprintf(src, sizeof src, "%s:%d", file, line);
                put_field(out, sizeof out - 2, &n, "src", src, false);
        }
        if (n > sizeof out - 3)
                n = sizeof out - 3;
        if (json_format)
                out[n++] = '}';
        out[n++] = '\n';
        (void) !write(STDERR_FILENO, out, n);
}

int log_internal(int level, int error, const char *file, int line, const char *fmt, ...) {
        char msg[2048];
        va_list ap;
        int saved = errno;

        if (error < 0)
                error = -error;
        if (level > max_level)
                return -error;

        errno = error; /* so that %m prints the error we were given */
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        emit(level, file, line, msg, NULL, 0);
        errno = saved;
        return -error;
}

void log_fields_internal(int level, const char *file, int line, const char *msg, const LogField *fields, size_t n) {
        int saved = errno;

        if (level > max_level)
                return;
        emit(level, file, line, msg, fields, n);
        errno = saved;
}
