/* SPDX-License-Identifier: MIT */
/* Validation of the lifecycle bodies: policies (create and PATCH),
 * checkpoint names, restore and branch requests; and the exec environment
 * (the sandbox's env under the request's). Pure functions, tested in
 * tests/unit/test-api-json.c. */

#include <inttypes.h>
#include <stdio.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "str-util.h"

bool api_checkpoint_name_valid(const char *s) {
        size_t n = s ? strlen(s) : 0;

        if (n == 0 || n > API_CHECKPOINT_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
                if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
                        return false;
        }
        return true;
}

static int policy_u64(const JsonValue *body, const char *key, uint64_t min, uint64_t max, uint64_t *ret,
                      ApiError *e) {
        JsonValue *v = json_get(body, key);
        uint64_t u;

        if (!v || json_is_null(v))
                return 0;
        if (json_type(v) != JSON_NUMBER || json_uint64(v, &u) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "%s must be a non-negative integer", key);
        if (u != 0 && (u < min || u > max))
                return api_error(e, -ERANGE, API_INVALID_ARGUMENT,
                                 "%s must be 0 (off) or between %" PRIu64 " and %" PRIu64 ", not %" PRIu64, key, min,
                                 max, u);
        *ret = u;
        return 1;
}

int api_validate_policy_fields(const JsonValue *body, const Config *c, uint64_t *idle_s, IdleAction *idle_action,
                               uint64_t *checkpoint_every_s, ApiError *e) {
        JsonValue *v;
        int r, idle_given;

        idle_given = r = policy_u64(body, "idle_s", 1, c->max_timeout_s, idle_s, e);
        if (r < 0)
                return r;
        v = json_get(body, "idle_action");
        if (v && !json_is_null(v)) {
                IdleAction a = json_type(v) == JSON_STRING ? idle_action_from_string(json_string(v))
                                                           : _IDLE_ACTION_INVALID;
                if (a < 0)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "idle_action must be \"pause\", \"suspend\" or \"\" (nothing)");
                *idle_action = a;
        } else if (v) /* null: nothing */
                *idle_action = IDLE_ACTION_NONE;
        else if (idle_given > 0 && *idle_s > 0 && *idle_action == IDLE_ACTION_NONE)
                *idle_action = IDLE_ACTION_PAUSE; /* idle_s alone means: pause */
        r = policy_u64(body, "checkpoint_every_s", API_CHECKPOINT_EVERY_MIN, c->max_timeout_s, checkpoint_every_s, e);
        if (r < 0)
                return r;
        return 0;
}

int api_validate_sandbox_patch(const JsonValue *body, const Config *c, const Sandbox *cur, int64_t now,
                               SandboxPolicy *ret, ApiError *e) {
        static const char *const allowed[] = { "timeout_s", "idle_s", "idle_action", "checkpoint_every_s",
                                               "auto_resume", "disk_mb", NULL };
        SandboxPolicy p = {
                .timeout_s = cur->timeout_s,
                .expires_usec = cur->expires_usec,
                .idle_s = cur->idle_s,
                .idle_action = cur->idle_action,
                .checkpoint_every_s = cur->checkpoint_every_s,
                .auto_resume = cur->auto_resume,
        };
        const char *unknown = NULL;
        JsonValue *v;
        int r;

        if (json_check_keys(body, allowed, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));
        if (json_object_size(body) == 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "give at least one of timeout_s, idle_s, idle_action, checkpoint_every_s, "
                                 "auto_resume, disk_mb");

        v = json_get(body, "timeout_s");
        if (v && !json_is_null(v)) {
                uint64_t t;
                if (json_type(v) != JSON_NUMBER || json_uint64(v, &t) < 0)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "timeout_s must be a non-negative integer");
                if (t > c->max_timeout_s)
                        return api_error(e, -ERANGE, API_INVALID_ARGUMENT,
                                         "timeout_s must be at most %" PRIu64 ", not %" PRIu64, c->max_timeout_s, t);
                /* from now: PATCH extends (or shortens) the life of a sandbox */
                p.timeout_s = t;
                p.expires_usec = t > 0 ? now + (int64_t) t * 1000000 : 0;
        }
        v = json_get(body, "auto_resume");
        if (v && !json_is_null(v) && json_bool(v, &p.auto_resume) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "auto_resume must be a boolean");
        r = api_validate_policy_fields(body, c, &p.idle_s, &p.idle_action, &p.checkpoint_every_s, e);
        if (r < 0)
                return r;
        v = json_get(body, "disk_mb");
        if (v && !json_is_null(v)) {
                uint64_t mb;
                if (json_type(v) != JSON_NUMBER || json_uint64(v, &mb) < 0)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "disk_mb must be a non-negative integer");
                if (mb < API_SANDBOX_DISK_MB_MIN || mb > c->max_disk_mb)
                        return api_error(e, -ERANGE, API_INVALID_ARGUMENT,
                                         "disk_mb must be between %u and %" PRIu64 ", not %" PRIu64,
                                         API_SANDBOX_DISK_MB_MIN, c->max_disk_mb, mb);
                p.disk_mb = mb == cur->disk_mb ? 0 : mb; /* 0: unchanged */
        }
        *ret = p;
        return 0;
}

int api_validate_checkpoint_create(const JsonValue *body, char ret_name[static STORE_NAME_MAX], ApiError *e) {
        static const char *const allowed[] = { "name", "with_memory", NULL };
        const char *unknown = NULL;
        JsonValue *v;
        int r;

        ret_name[0] = 0;
        if (!body)
                return 0;
        if (json_check_keys(body, allowed, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));
        r = api_validate_with_memory(body, NULL, e);
        if (r < 0)
                return r;
        v = json_get(body, "name");
        if (!v || json_is_null(v))
                return 0;
        if (json_type(v) != JSON_STRING || !api_checkpoint_name_valid(json_string(v)) ||
            strlen(json_string(v)) != json_string_len(v))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "name must match [A-Za-z0-9][A-Za-z0-9._-]{0,%u}", API_CHECKPOINT_NAME_MAX - 1);
        (void) strscpy(ret_name, STORE_NAME_MAX, json_string(v)); /* API_CHECKPOINT_NAME_MAX < STORE_NAME_MAX */
        return 0;
}

/* A checkpoint reference: its id or its name. */
static int checkpoint_ref(const JsonValue *v, const char *key, bool required, const char **ret, ApiError *e) {
        if (!v || json_is_null(v)) {
                if (required)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "%s (a checkpoint id or name) is required",
                                         key);
                *ret = NULL;
                return 0;
        }
        if (json_type(v) != JSON_STRING || !api_checkpoint_name_valid(json_string(v)) ||
            strlen(json_string(v)) != json_string_len(v))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "%s must be a checkpoint id or name", key);
        *ret = json_string(v);
        return 0;
}

int api_validate_with_memory(const JsonValue *body, int *ret, ApiError *e) {
        JsonValue *v = json_get(body, "with_memory");
        bool b = false;

        if (v && !json_is_null(v) && json_bool(v, &b) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "with_memory must be true or false");
        if (ret)
                *ret = v && !json_is_null(v) ? b : -1;
        return 0;
}

int api_validate_restore(const JsonValue *body, const char **ret_checkpoint, ApiError *e) {
        static const char *const allowed[] = { "checkpoint", NULL };
        const char *unknown = NULL;

        if (json_check_keys(body, allowed, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));
        return checkpoint_ref(json_get(body, "checkpoint"), "checkpoint", true, ret_checkpoint, e);
}

int api_validate_branch(const JsonValue *body, const Config *c, uint64_t *ret_count, const char **ret_from,
                        ApiError *e) {
        static const char *const allowed[] = { "count", "from", "with_memory", "volumes", NULL };
        const char *unknown = NULL, *from = NULL;
        uint64_t count = 1;
        JsonValue *v;
        int r;

        if (json_check_keys(body, allowed, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));
        r = api_validate_with_memory(body, NULL, e);
        if (r < 0)
                return r;
        v = json_get(body, "count");
        if (v && !json_is_null(v)) {
                if (json_type(v) != JSON_NUMBER || json_uint64(v, &count) < 0)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "count must be a positive integer");
                if (count < 1 || count > c->max_branch)
                        return api_error(e, -ERANGE, API_INVALID_ARGUMENT,
                                         "count must be between 1 and %" PRIu64 " (max_branch), not %" PRIu64,
                                         c->max_branch, count);
        }
        r = checkpoint_ref(json_get(body, "from"), "from", false, &from, e);
        if (r < 0)
                return r;
        *ret_count = count;
        *ret_from = from;
        return 0;
}

/* ---- the exec environment ---- */

void api_json_write_merged_env(JsonWriter *w, const JsonValue *base, const JsonValue *over) {
        json_w_object_begin(w);
        for (size_t i = 0; i < json_object_size(base); i++) {
                const char *k = json_object_key(base, i);
                const JsonValue *v = json_object_value(base, i);
                if (json_type(v) != JSON_STRING || (over && json_get(over, k)))
                        continue;
                json_w_key(w, k);
                json_w_string_n(w, json_string(v), json_string_len(v));
        }
        for (size_t i = 0; i < json_object_size(over); i++) {
                const JsonValue *v = json_object_value(over, i);
                if (json_type(v) != JSON_STRING)
                        continue;
                json_w_key(w, json_object_key(over, i));
                json_w_string_n(w, json_string(v), json_string_len(v));
        }
        json_w_object_end(w);
}

int api_exec_merge_env(ExecRequest *x, const char *sandbox_env_json, ApiError *e) {
        _cleanup_json_ JsonValue *req = NULL, *base = NULL;
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_free_ char *text = NULL;
        bool wrote_env = false;

        json_w_init(&w);
        if (isempty(sandbox_env_json))
                return 0;
        /* both were validated when they were stored or received: a failure here is ours */
        if (json_parse(sandbox_env_json, strlen(sandbox_env_json), &base, NULL, 0) < 0 ||
            json_type(base) != JSON_OBJECT)
                return api_error(e, -EBADMSG, API_INTERNAL, "the sandbox's stored env is not a JSON object");
        if (json_object_size(base) == 0)
                return 0;
        if (json_parse(x->agent_json, strlen(x->agent_json), &req, NULL, 0) < 0 || json_type(req) != JSON_OBJECT)
                return api_error(e, -EBADMSG, API_INTERNAL, "the exec request is not a JSON object");

        json_w_object_begin(&w);
        for (size_t i = 0; i < json_object_size(req); i++) {
                const char *k = json_object_key(req, i);
                const JsonValue *v = json_object_value(req, i);
                json_w_key(&w, k);
                if (streq(k, "env")) {
                        api_json_write_merged_env(&w, base, v);
                        wrote_env = true;
                } else {
                        _cleanup_free_ char *raw = NULL;
                        if (json_serialize(v, &raw, NULL) < 0)
                                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                        json_w_raw(&w, raw);
                }
        }
        if (!wrote_env) {
                json_w_key(&w, "env");
                api_json_write_merged_env(&w, base, NULL);
        }
        json_w_object_end(&w);
        if (json_w_finish(&w, &text, NULL) < 0)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        free(x->agent_json);
        x->agent_json = TAKE_PTR(text);
        return 0;
}
