/* SPDX-License-Identifier: MIT */
/* src/basic/log.c: logfmt and JSON lines, fields as fields, escaping of hostile values. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "log.h"
#include "test.h"

/* What one log call writes to stderr. */
static void capture(bool json, void (*fn)(void), char *buf, size_t size) {
        FILE *tmp = tmpfile();
        int saved = dup(STDERR_FILENO);
        ssize_t n;

        ASSERT_NOT_NULL(tmp);
        log_set_json(json);
        ASSERT_TRUE(dup2(fileno(tmp), STDERR_FILENO) >= 0);
        fn();
        ASSERT_TRUE(dup2(saved, STDERR_FILENO) >= 0);
        close(saved);
        log_set_json(false);
        rewind(tmp);
        n = (ssize_t) fread(buf, 1, size - 1, tmp);
        buf[n < 0 ? 0 : n] = 0;
        fclose(tmp);
}

static void request_line(void) {
        LogField f[] = {
                { "method", "GET" },
                { "path", "/v1/x?a=\"b\" c\n\x01" },
                { "status", "200" },
                { "duration_ms", "1.5" },
                { "tenant", NULL },
        };
        log_set_context("sb1", "r-1");
        log_fields(LOG_INFO_, "request", f, ELEMENTSOF(f));
        log_set_context(NULL, NULL);
}

static void plain_line(void) {
        log_info("Sandbox %s: \"quoted\" \\ %s", "x", "tab\there");
}

TEST(log_json_fields) {
        _cleanup_json_ JsonValue *v = NULL;
        char buf[4096];
        double d;
        int64_t st;

        capture(true, request_line, buf, sizeof buf);
        ASSERT_TRUE(strchr(buf, '\n') == buf + strlen(buf) - 1); /* one line */
        ASSERT_OK(json_parse(buf, strlen(buf) - 1, &v, NULL, 0));
        ASSERT_STREQ(json_string(json_get(v, "msg")), "request");
        ASSERT_STREQ(json_string(json_get(v, "level")), "info");
        ASSERT_STREQ(json_string(json_get(v, "method")), "GET");
        ASSERT_STREQ(json_string(json_get(v, "path")), "/v1/x?a=\"b\" c\n\x01");
        ASSERT_OK(json_int64(json_get(v, "status"), &st));
        ASSERT_EQ(st, 200);
        ASSERT_OK(json_double(json_get(v, "duration_ms"), &d));
        ASSERT_TRUE(d == 1.5);
        ASSERT_NULL(json_get(v, "tenant"));
        ASSERT_STREQ(json_string(json_get(v, "sandbox")), "sb1");
        ASSERT_STREQ(json_string(json_get(v, "req")), "r-1");
}

TEST(log_json_plain_line) {
        _cleanup_json_ JsonValue *v = NULL;
        char buf[4096];

        capture(true, plain_line, buf, sizeof buf);
        ASSERT_OK(json_parse(buf, strlen(buf) - 1, &v, NULL, 0));
        ASSERT_STREQ(json_string(json_get(v, "msg")), "Sandbox x: \"quoted\" \\ tab\there");
}

TEST(log_logfmt_fields) {
        char buf[4096];

        capture(false, request_line, buf, sizeof buf);
        ASSERT_TRUE(strstr(buf, " msg=request method=GET path=\"/v1/x?a=\\\"b\\\" c\\n\\x01\" status=200 "
                                "duration_ms=1.5 sandbox=sb1 req=r-1\n") != NULL);
        ASSERT_NULL(strstr(buf, "tenant="));
        ASSERT_TRUE(strncmp(buf, "ts=", 3) == 0);
}
