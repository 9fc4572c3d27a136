/* SPDX-License-Identifier: MIT */
/* An image's exec defaults (Env, WorkingDir, User of its config) applied to
 * an exec request that gives none. */

#include <errno.h>
#include <string.h>

#include "agent-image.h"
#include "alloc-util.h"
#include "fd-util.h"
#include "json.h"
#include "str-util.h"

static int user_apply(const char *u, ProtoExecRequest *req) {
        size_t n = strcspn(u, ":");
        uint64_t uid = 0;
        bool digits = n > 0;

        for (size_t i = 0; i < n; i++) {
                if (u[i] < '0' || u[i] > '9') {
                        digits = false;
                        break;
                }
                uid = uid * 10 + (uint64_t) (u[i] - '0');
                if (uid > UINT32_MAX - 1)
                        return -ERANGE;
        }
        if (n == 0)
                return 0;
        if (digits) {
                req->have_uid = true;
                req->uid = (uint32_t) uid;
                return 0;
        }
        req->user = strndup(u, n);
        return req->user ? 0 : -ENOMEM;
}

int agent_image_defaults_apply(const char *path, ProtoExecRequest *req) {
        _cleanup_free_ char *buf = NULL;
        _cleanup_json_ JsonValue *v = NULL;
        const JsonValue *env;
        const char *s;
        size_t n = 0;
        char **merged;
        size_t k = 0, nreq;
        int r;

        r = read_full_file(path, AGENT_IMAGE_DEFAULTS_MAX, &buf, &n);
        if (r < 0)
                return r == -ENOENT ? 0 : r;
        r = json_parse(buf, n, &v, NULL, 0);
        if (r < 0 || json_type(v) != JSON_OBJECT)
                return -EBADMSG;

        if (!req->user && !req->have_uid && (s = json_string(json_get(v, "user")))) {
                r = user_apply(s, req);
                if (r < 0)
                        return r;
        }
        if (!req->cwd && (s = json_string(json_get(v, "cwd"))) && s[0] == '/') {
                req->cwd = strdup(s);
                if (!req->cwd)
                        return -ENOMEM;
        }
        env = json_get(v, "env");
        if (json_type(env) != JSON_ARRAY || json_array_size(env) == 0)
                return 0;
        nreq = strv_length(req->env);
        merged = new0(char *, json_array_size(env) + nreq + 1);
        if (!merged)
                return -ENOMEM;
        for (size_t i = 0; i < json_array_size(env); i++) {
                const JsonValue *e = json_array_at(env, i);
                s = json_string(e);
                if (!s || strlen(s) != json_string_len(e) || !strchr(s, '=') || s[0] == '=')
                        continue;
                merged[k] = strdup(s);
                if (!merged[k]) {
                        strv_free(merged);
                        return -ENOMEM;
                }
                k++;
        }
        for (size_t i = 0; i < nreq; i++)
                merged[k++] = req->env[i];
        free(req->env); /* its strings moved */
        req->env = merged;
        return 0;
}
