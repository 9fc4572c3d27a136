/* SPDX-License-Identifier: MIT */
/* The /v1 request validators (src/api/api-validate.c, lifecycle-validate.c)
 * on hostile bytes. For every input:
 *  - as a JSON body: create-sandbox, exec, PATCH, checkpoint, restore and
 *    branch validation. A failure must carry an error code and a message; a
 *    create that passes must leave bounded names and env/metadata that are
 *    JSON objects; an exec that passes must give the agent a request its own
 *    parser (proto_exec_request_parse) accepts, also after merging a sandbox
 *    env into it;
 *  - as a path inside a sandbox: a path that passes has no NUL, no ".."
 *    component and at most API_PATH_MAX bytes;
 *  - as a query value (up to the first NUL): names, ids, signals and RFC 3339
 *    times; a time that parses formats back to itself (to the millisecond). */
#include <stdio.h>

#include "fuzz-check.h"
#include "alloc-util.h"
#include "api-internal.h"
#include "proto-msg.h"

#define FUZZ_INPUT_MAX (256U * 1024U)
#define FUZZ_TIME_USEC_MAX 253402300799999999LL /* 9999-12-31T23:59:59.999999Z */

static void check_error(int r, const ApiError *e) {
        CHECK(r < 0);
        CHECK(e->code != API_OK);
        CHECK(e->message[0]);
        CHECK(strnlen(e->message, sizeof e->message) < sizeof e->message);
}

static void check_object_of_strings(const char *json) {
        _cleanup_json_ JsonValue *v = NULL;

        if (!json)
                return;
        CHECK(json_parse(json, strlen(json), &v, NULL, 0) == 0);
        CHECK(json_type(v) == JSON_OBJECT);
        for (size_t i = 0; i < json_object_size(v); i++)
                CHECK(json_type(json_object_value(v, i)) == JSON_STRING);
}

/* The agent must accept what the API hands it. */
static void check_agent_accepts(const char *agent_json) {
        _cleanup_json_ JsonValue *v = NULL;
        ProtoExecRequest req = {};
        char err[256] = "";
        int r;

        CHECK(json_parse(agent_json, strlen(agent_json), &v, NULL, 0) == 0);
        r = proto_exec_request_parse(v, &req, err, sizeof err);
        if (r < 0) {
                fprintf(stderr, "the agent refuses %.512s: %s\n", agent_json, err);
                abort();
        }
        CHECK(req.argv && req.argv[0]);
        proto_exec_request_done(&req);
}

static void fuzz_bodies(const JsonValue *body, const Config *c) {
        ApiError e = {};
        Sandbox sb = {};
        int r;

        if (json_type(body) != JSON_OBJECT)
                return; /* the router refuses other bodies before validation */
        r = api_validate_sandbox_create(body, c, &sb, &e);
        if (r < 0)
                check_error(r, &e);
        else {
                CHECK(api_template_name_valid(sb.template_name));
                CHECK(isempty(sb.runtime) || streq(sb.runtime, "ns") || streq(sb.runtime, "vm"));
                CHECK(sb.cpu_millis >= API_SANDBOX_CPU_MILLIS_MIN && sb.cpu_millis <= c->max_cpu_millis);
                CHECK(sb.memory_mb >= API_SANDBOX_MEMORY_MB_MIN && sb.memory_mb <= c->max_memory_mb);
                CHECK(sb.disk_mb >= API_SANDBOX_DISK_MB_MIN && sb.disk_mb <= c->max_disk_mb);
                CHECK(sb.pids_max >= API_SANDBOX_PIDS_MIN && sb.pids_max <= c->max_pids);
                CHECK(sb.timeout_s <= c->max_timeout_s);
                check_object_of_strings(sb.env_json);
                check_object_of_strings(sb.metadata_json);
        }

        {
                ExecRequest x = {};

                e = (ApiError){};
                r = api_validate_exec(body, c, &x, &e);
                if (r < 0)
                        check_error(r, &e);
                else {
                        CHECK(x.agent_json);
                        CHECK(!x.stdin_data || strlen(x.stdin_data) <= x.stdin_len);
                        check_agent_accepts(x.agent_json);
                        /* the sandbox's env under the request's: its own env_json, or a fixed one */
                        r = api_exec_merge_env(&x, sb.env_json ?: "{\"PATH\":\"/bin\",\"HOME\":\"/root\"}", &e);
                        CHECK(r == 0);
                        check_agent_accepts(x.agent_json);
                }
                exec_request_done(&x);
        }
        sandbox_done(&sb);

        {
                Sandbox cur = { .timeout_s = 60, .idle_s = 0, .idle_action = IDLE_ACTION_NONE };
                SandboxPolicy pol = {};
                char name[STORE_NAME_MAX];
                const char *ref = NULL;
                uint64_t count = 0;

                e = (ApiError){};
                r = api_validate_sandbox_patch(body, c, &cur, 1000000, &pol, &e);
                if (r < 0)
                        check_error(r, &e);
                else
                        CHECK(pol.timeout_s <= c->max_timeout_s);

                e = (ApiError){};
                r = api_validate_checkpoint_create(body, name, &e);
                if (r < 0)
                        check_error(r, &e);
                else
                        CHECK(name[0] == 0 || api_checkpoint_name_valid(name));

                e = (ApiError){};
                r = api_validate_restore(body, &ref, &e);
                if (r < 0)
                        check_error(r, &e);
                else
                        CHECK(ref);

                e = (ApiError){};
                ref = NULL;
                r = api_validate_branch(body, c, &count, &ref, &e);
                if (r < 0)
                        check_error(r, &e);
                else
                        CHECK(count >= 1);
        }
}

static bool has_dotdot_component(const char *p, size_t n) {
        for (size_t i = 0; i < n;) {
                const char *s = memchr(p + i, '/', n - i);
                size_t j = s ? (size_t) (s - p) : n;
                if (j - i == 2 && p[i] == '.' && p[i + 1] == '.')
                        return true;
                i = j + 1;
        }
        return false;
}

static void fuzz_path(const char *p, size_t n) {
        ApiError e = {};
        int r = api_validate_path(p, n, "path", &e);

        if (r < 0) {
                check_error(r, &e);
                CHECK(e.code == API_INVALID_PATH);
                return;
        }
        CHECK(n > 0 && n <= API_PATH_MAX);
        CHECK(!memchr(p, 0, n));
        CHECK(!has_dotdot_component(p, n));
}

static void fuzz_query_value(const char *s) {
        const char *sig;
        int64_t usec;

        (void) api_sandbox_id_valid(s);
        if (api_template_name_valid(s))
                CHECK(strlen(s) >= 1 && strlen(s) <= API_NAME_MAX);
        if (api_tenant_name_valid(s))
                CHECK(strlen(s) >= 1 && strlen(s) < API_NAME_MAX);
        if (api_key_name_valid(s))
                CHECK(strlen(s) >= 1 && strlen(s) <= API_NAME_MAX && !strpbrk(s, "\"\\"));
        if (api_checkpoint_name_valid(s))
                CHECK(strlen(s) >= 1 && strlen(s) <= API_CHECKPOINT_NAME_MAX);
        sig = api_signal_name(s);
        if (sig)
                CHECK(startswith(sig, "SIG") && streq(api_signal_name(sig), sig));

        if (api_parse_time(s, &usec) == 0 && usec >= 0 && usec <= FUZZ_TIME_USEC_MAX) {
                char buf[JSON_OUT_TIME_MAX];
                int64_t again;

                json_out_time(usec, buf);
                if (api_parse_time(buf, &again) != 0 || again != usec - usec % 1000) {
                        fprintf(stderr, "'%s' → %lld → '%s' does not parse back\n", s, (long long) usec, buf);
                        abort();
                }
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static Config c;
        static bool init;
        _cleanup_json_ JsonValue *v = NULL;
        _cleanup_free_ char *s = NULL;

        if (size > FUZZ_INPUT_MAX)
                return 0;
        if (!init) {
                config_defaults(&c);
                init = true;
        }

        if (json_parse((const char *) data, size, &v, NULL, 0) >= 0)
                fuzz_bodies(v, &c);
        fuzz_path((const char *) data, size);
        s = memdup_suffix0(data, size);
        CHECK(s);
        fuzz_query_value(s);
        return 0;
}
