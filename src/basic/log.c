/* SPDX-License-Identifier: MIT */
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

/* Writes s as a logfmt value: quoted, with " and \ and control bytes escaped. */
static void put_quoted(char *buf, size_t sz, size_t *n, const char *s) {
        if (*n < sz)
                buf[(*n)++] = '"';
        for (; *s && *n + 5 < sz; s++) {
                unsigned char c = (unsigned char) *s;
                if (c == '"' || c == '\\') {
                        buf[(*n)++] = '\\';
                        buf[(*n)++] = (char) c;
                } else if (c == '\n') {
                        buf[(*n)++] = '\\';
                        buf[(*n)++] = 'n';
                } else if (c < 0x20 || c == 0x7f) {
                        *n += (size_t) snprintf(buf + *n, sz - *n, "\\x%02x", c);
                } else
                        buf[(*n)++] = (char) c;
        }
        if (*n < sz)
                buf[(*n)++] = '"';
}

int log_internal(int level, int error, const char *file, int line, const char *fmt, ...) {
        char msg[2048], out[4096], ts[64];
        struct timespec now;
        struct tm tm;
        size_t n = 0;
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

        clock_gettime(CLOCK_REALTIME, &now);
        gmtime_r(&now.tv_sec, &tm);
        strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);

        n += (size_t) snprintf(out + n, sizeof out - n, "ts=%s.%03ldZ level=%s", ts, now.tv_nsec / 1000000,
                               level_name(level));
        if (prefix)
                n += (size_t) snprintf(out + n, sizeof out - n, " component=%s", prefix);
        if (n < sizeof out - 6) {
                memcpy(out + n, " msg=", 5);
                n += 5;
                put_quoted(out, sizeof out, &n, msg);
        }
        if (ctx_sandbox && n < sizeof out)
                n += (size_t) snprintf(out + n, sizeof out - n, " sandbox=%s", ctx_sandbox);
        if (ctx_req && n < sizeof out)
                n += (size_t) snprintf(out + n, sizeof out - n, " req=%s", ctx_req);
        if (level == LOG_DEBUG_ && n < sizeof out)
                n += (size_t) snprintf(out + n, sizeof out - n, " src=%s:%d", file, line);
        if (n >= sizeof out - 1)
                n = sizeof out - 2;
        out[n++] = '\n';
        (void) !write(STDERR_FILENO, out, n);

        errno = saved;
        return -error;
}
