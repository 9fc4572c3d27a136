/* SPDX-License-Identifier: MIT */
/* The JSON Schema subset of mcp-schema.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mcp-schema.h"
#include "str-util.h"

#define MCP_SCHEMA_DEPTH_MAX 16

static int fail(char *errbuf, size_t n, const char *where, const char *why) {
        snprintf(errbuf, n, "%s: %s", where[0] ? where : "arguments", why);
        return -EINVAL;
}

static int number_of(const JsonValue *v, double *ret) {
        return json_type(v) == JSON_NUMBER && json_double(v, ret) >= 0 ? 0 : -EINVAL;
}

static bool type_is(const JsonValue *v, const char *t) {
        int64_t i;

        if (streq(t, "object"))
                return json_type(v) == JSON_OBJECT;
        if (streq(t, "array"))
                return json_type(v) == JSON_ARRAY;
        if (streq(t, "string"))
                return json_type(v) == JSON_STRING;
        if (streq(t, "boolean"))
                return json_type(v) == JSON_BOOL;
        if (streq(t, "number"))
                return json_type(v) == JSON_NUMBER;
        if (streq(t, "integer"))
                return json_type(v) == JSON_NUMBER && json_int64(v, &i) >= 0;
        return false;
}

static int check(const JsonValue *s, const JsonValue *v, const char *where, unsigned depth, char *errbuf,
                 size_t n) {
        const char *type = json_string(json_get(s, "type"));
        const JsonValue *x;
        char sub[256];
        double d, bound;

        if (depth > MCP_SCHEMA_DEPTH_MAX)
                return fail(errbuf, n, where, "nested too deep");
        if (type && !type_is(v, type)) {
                snprintf(sub, sizeof sub, "must be %s %s", streq(type, "integer") || streq(type, "array") ||
                         streq(type, "object") ? "an" : "a", type);
                return fail(errbuf, n, where, sub);
        }
        if ((x = json_get(s, "enum"))) {
                bool found = false;
                for (size_t i = 0; i < json_array_size(x) && !found; i++)
                        found = json_type(v) == JSON_STRING && streq(json_string(v), json_string(json_array_at(x, i)));
                if (!found)
                        return fail(errbuf, n, where, "is not one of the allowed values");
        }
        if (json_type(v) == JSON_NUMBER && number_of(v, &d) >= 0) {
                if (number_of(json_get(s, "minimum"), &bound) >= 0 && d < bound)
                        return snprintf(sub, sizeof sub, "must be at least %g", bound), fail(errbuf, n, where, sub);
                if (number_of(json_get(s, "maximum"), &bound) >= 0 && d > bound)
                        return snprintf(sub, sizeof sub, "must be at most %g", bound), fail(errbuf, n, where, sub);
        }
        if (json_type(v) == JSON_STRING) {
                if (number_of(json_get(s, "minLength"), &bound) >= 0 && (double) json_string_len(v) < bound)
                        return fail(errbuf, n, where, "is too short");
                if (number_of(json_get(s, "maxLength"), &bound) >= 0 && (double) json_string_len(v) > bound)
                        return snprintf(sub, sizeof sub, "is longer than %g bytes", bound), fail(errbuf, n, where, sub);
                if (memchr(json_string(v), 0, json_string_len(v)))
                        return fail(errbuf, n, where, "contains a NUL byte");
        }
        if (json_type(v) == JSON_ARRAY) {
                if (number_of(json_get(s, "maxItems"), &bound) >= 0 && (double) json_array_size(v) > bound)
                        return snprintf(sub, sizeof sub, "has more than %g items", bound), fail(errbuf, n, where, sub);
                if ((x = json_get(s, "items")))
                        for (size_t i = 0; i < json_array_size(v); i++) {
                                int r;
                                snprintf(sub, sizeof sub, "%s[%zu]", where, i);
                                r = check(x, json_array_at(v, i), sub, depth + 1, errbuf, n);
                                if (r < 0)
                                        return r;
                        }
        }
        if (json_type(v) == JSON_OBJECT) {
                const JsonValue *props = json_get(s, "properties"), *req = json_get(s, "required"),
                                *extra = json_get(s, "additionalProperties");
                if (number_of(json_get(s, "maxProperties"), &bound) >= 0 && (double) json_object_size(v) > bound)
                        return snprintf(sub, sizeof sub, "has more than %g entries", bound),
                               fail(errbuf, n, where, sub);
                for (size_t i = 0; i < json_array_size(req); i++) {
                        const char *k = json_string(json_array_at(req, i));
                        if (k && !json_get(v, k)) {
                                snprintf(sub, sizeof sub, "'%s' is required", k);
                                return fail(errbuf, n, where, sub);
                        }
                }
                for (size_t i = 0; i < json_object_size(v); i++) {
                        const char *k = json_object_key(v, i);
                        const JsonValue *ps = json_get(props, k);
                        int r;
                        snprintf(sub, sizeof sub, "%s%s%.64s", where, where[0] ? "." : "", k);
                        if (!ps && json_type(extra) == JSON_BOOL) {
                                bool allowed = true;
                                (void) json_bool(extra, &allowed);
                                if (!allowed)
                                        return fail(errbuf, n, sub, "is not a known argument");
                        }
                        if (!ps && json_type(extra) == JSON_OBJECT)
                                ps = extra;
                        if (ps) {
                                r = check(ps, json_object_value(v, i), sub, depth + 1, errbuf, n);
                                if (r < 0)
                                        return r;
                        }
                }
        }
        return 0;
}

int mcp_schema_check(const JsonValue *schema, const JsonValue *v, char *errbuf, size_t errbuf_size) {
        return check(schema, v, "", 0, errbuf, errbuf_size);
}
