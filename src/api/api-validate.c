/* SPDX-License-Identifier: MIT */
/* Validation of what clients send: ids, names, paths inside a sandbox, the
 * bodies of create and exec requests, signals and times. Pure functions:
 * everything here is tested in tests/unit/test-api-json.c. */

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "str-util.h"

static bool is_lower_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool api_sandbox_id_valid(const char *id) {
        if (!id || strlen(id) != API_ID_LEN || !(id[0] >= 'a' && id[0] <= 'z'))
                return false;
        for (size_t i = 1; i < API_ID_LEN; i++)
                if (!is_lower_alnum(id[i]))
                        return false;
        return true;
}

int api_sandbox_id_generate(char ret[static API_ID_LEN + 1]) {
        uint8_t first;
        int r;

        r = random_bytes(&first, 1);
        if (r < 0)
                return r;
        r = random_alnum(ret + 1, API_ID_LEN - 1);
        if (r < 0)
                return r;
        ret[0] = (char) ('a' + first % 26);
        return 0;
}

static bool name_valid(const char *s, size_t max, const char *extra) {
        size_t n;

        if (!s || !is_lower_alnum(s[0]))
                return false;
        n = strlen(s);
        if (n > max)
                return false;
        for (size_t i = 1; i < n; i++)
                if (!is_lower_alnum(s[i]) && !strchr(extra, s[i]))
                        return false;
        return true;
}

bool api_template_name_valid(const char *s) {
        return name_valid(s, API_NAME_MAX, "._-");
}

bool api_tenant_name_valid(const char *s) {
        return name_valid(s, API_NAME_MAX - 1, "-");
}

bool api_key_name_valid(const char *s) {
        size_t n;

        if (!s)
                return false;
        n = strlen(s);
        if (n < 1 || n > API_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] < 0x20 || s[i] > 0x7e || s[i] == '"' || s[i] == '\\')
                        return false;
        return true;
}

int api_validate_path(const char *p, size_t n, const char *what, ApiError *e) {
        if (!p || n == 0)
                return api_error(e, -EINVAL, API_INVALID_PATH, "%s must not be empty", what);
        if (n > API_PATH_MAX)
                return api_error(e, -ENAMETOOLONG, API_INVALID_PATH, "%s is longer than %u bytes", what, API_PATH_MAX);
        if (memchr(p, 0, n))
                return api_error(e, -EINVAL, API_INVALID_PATH, "%s contains a NUL byte", what);
        if (!utf8_valid(p, n))
                return api_error(e, -EINVAL, API_INVALID_PATH, "%s is not valid UTF-8", what);
        for (size_t i = 0; i < n;) {
                size_t j = i;
                while (j < n && p[j] != '/')
                        j++;
                if (j - i == 2 && p[i] == '.' && p[i + 1] == '.')
                        return api_error(e, -EINVAL, API_INVALID_PATH, "%s must not contain a '..' component", what);
                i = j + 1;
        }
        return 0;
}

/* ---- fields of request bodies ---- */

static int field_u64(const JsonValue *body, const char *key, uint64_t min, uint64_t max, uint64_t *ret, ApiError *e) {
        JsonValue *v = json_get(body, key);
        uint64_t u;

        if (!v || json_is_null(v))
                return 0;
        if (json_type(v) != JSON_NUMBER || json_uint64(v, &u) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "%s must be a non-negative integer", key);
        if (u < min || u > max)
                return api_error(e, -ERANGE, API_INVALID_ARGUMENT,
                                 "%s must be between %" PRIu64 " and %" PRIu64 ", not %" PRIu64, key, min, max, u);
        *ret = u;
        return 1;
}

static bool env_name_valid(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > API_ENV_NAME_MAX || (s[0] >= '0' && s[0] <= '9'))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
                      s[i] == '_'))
                        return false;
        return true;
}

/* An object of strings, for env (env names) or metadata (free keys). */
static int validate_string_map(const JsonValue *v, const char *what, bool env, ApiError *e) {
        size_t n, max_entries = env ? API_ENV_ENTRIES_MAX : API_METADATA_ENTRIES_MAX;
        size_t max_value = env ? API_ENV_VALUE_MAX : API_METADATA_VALUE_MAX;

        if (json_type(v) != JSON_OBJECT)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "%s must be an object of strings", what);
        n = json_object_size(v);
        if (n > max_entries)
                return api_error(e, -E2BIG, API_INVALID_ARGUMENT, "%s has more than %zu entries", what, max_entries);
        for (size_t i = 0; i < n; i++) {
                const char *k = json_object_key(v, i);
                JsonValue *val = json_object_value(v, i);

                if (env && !env_name_valid(k))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "%s: '%.64s' is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)", what, k);
                if (!env && (strlen(k) == 0 || strlen(k) > API_METADATA_KEY_MAX))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "%s: keys must be 1 to %u bytes long", what,
                                         API_METADATA_KEY_MAX);
                if (json_type(val) != JSON_STRING)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "%s: the value of '%.64s' must be a string",
                                         what, k);
                if (json_string_len(val) > max_value)
                        return api_error(e, -E2BIG, API_INVALID_ARGUMENT,
                                         "%s: the value of '%.64s' is longer than %zu bytes", what, k, max_value);
                if (memchr(json_string(val), 0, json_string_len(val)))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "%s: the value of '%.64s' contains a NUL byte", what, k);
        }
        return 0;
}

int api_validate_string_map(const JsonValue *body, const char *key, bool env, char **ret, ApiError *e) {
        JsonValue *v = json_get(body, key);
        int r;

        if (!v || json_is_null(v))
                return 0;
        r = validate_string_map(v, key, env, e);
        if (r < 0)
                return r;
        r = json_serialize(v, ret, NULL);
        if (r < 0)
                return api_error(e, r, API_UNAVAILABLE, "out of memory");
        return 1;
}

int api_validate_sandbox_create(const JsonValue *body, const Config *c, Sandbox *sb, ApiError *e) {
        static const char *const allowed[] = { "template", "runtime", "cpu", "memory_mb", "disk_mb", "pids_max",
                                               "io_weight", "timeout_s", "env", "metadata", "idle_s",
                                               "idle_action", "checkpoint_every_s", "network", "credentials",
                                               "checkpoints_max", "checkpoints_mb", "auto_resume", "public_traffic",
                                               "volumes", NULL };
        const char *unknown = NULL, *tmpl = c->default_template;
        bool auto_resume = false, public_traffic = false;
        uint64_t cpu_millis = c->default_cpu_millis, memory_mb = c->default_memory_mb, disk_mb = c->default_disk_mb,
                 pids = c->default_pids_max, timeout_s = c->default_timeout_s, idle_s = 0, checkpoint_every_s = 0,
                 io_weight = 0, ckpt_max, ckpt_mb;
        IdleAction idle_action = IDLE_ACTION_NONE;
        _cleanup_free_ char *env = NULL, *metadata = NULL, *network = NULL;
        JsonValue *v;
        int r;

        if (body && json_check_keys(body, allowed, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));

        v = json_get(body, "template");
        if (v && !json_is_null(v)) {
                if (json_type(v) != JSON_STRING)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "template must be a string");
                tmpl = json_string(v);
                ApiTemplateRef ref;
                if (api_template_ref_parse(tmpl, &ref) < 0)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "template: '%.64s' is not a template reference (NAME, NAME:TAG or NAME@vN; "
                                         "a name is [a-z0-9][a-z0-9._-]{0,63})", tmpl);
        }

        v = json_get(body, "runtime");
        if (v && !json_is_null(v)) {
                const char *rt = json_string(v);
                if (!rt)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "runtime must be a string");
                if (!streq(rt, "ns") && !streq(rt, "vm"))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "runtime must be 'ns' or 'vm', not '%.32s'",
                                         rt);
        }

        v = json_get(body, "cpu");
        if (v && !json_is_null(v)) {
                double cpu;
                if (json_type(v) != JSON_NUMBER || json_double(v, &cpu) < 0 || !isfinite(cpu) || cpu <= 0)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "cpu must be a number of CPUs greater than 0 (e.g. 0.5)");
                if (cpu * 1000.0 > (double) c->max_cpu_millis + 0.5)
                        return api_error(e, -ERANGE, API_INVALID_ARGUMENT, "cpu must be at most %g",
                                         (double) c->max_cpu_millis / 1000.0);
                cpu_millis = (uint64_t) llround(cpu * 1000.0);
                if (cpu_millis < API_SANDBOX_CPU_MILLIS_MIN)
                        return api_error(e, -ERANGE, API_INVALID_ARGUMENT, "cpu must be at least %g",
                                         API_SANDBOX_CPU_MILLIS_MIN / 1000.0);
        }

        r = field_u64(body, "memory_mb", API_SANDBOX_MEMORY_MB_MIN, c->max_memory_mb, &memory_mb, e);
        if (r < 0)
                return r;
        v = json_get(body, "runtime");
        if (v && json_string(v) && streq(json_string(v), "vm") && memory_mb < API_SANDBOX_VM_MEMORY_MB_MIN)
                return api_error(e, -ERANGE, API_INVALID_ARGUMENT,
                                 "memory_mb must be at least %u for runtime 'vm' (the guest kernel's minimum)",
                                 API_SANDBOX_VM_MEMORY_MB_MIN);
        r = field_u64(body, "disk_mb", API_SANDBOX_DISK_MB_MIN, c->max_disk_mb, &disk_mb, e);
        if (r < 0)
                return r;
        r = field_u64(body, "pids_max", API_SANDBOX_PIDS_MIN, c->max_pids, &pids, e);
        if (r < 0)
                return r;
        r = field_u64(body, "io_weight", 1, 10000, &io_weight, e);
        if (r < 0)
                return r;
        r = field_u64(body, "timeout_s", 0, c->max_timeout_s, &timeout_s, e);
        if (r < 0)
                return r;
        /* the host's caps are the defaults and the most one may ask for */
        config_checkpoint_caps(c, 0, 0, disk_mb, &ckpt_max, &ckpt_mb);
        r = field_u64(body, "checkpoints_max", 1, ckpt_max, &ckpt_max, e);
        if (r < 0)
                return r;
        r = field_u64(body, "checkpoints_mb", 1, ckpt_mb, &ckpt_mb, e);
        if (r < 0)
                return r;
        v = json_get(body, "auto_resume");
        if (v && !json_is_null(v) && json_bool(v, &auto_resume) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "auto_resume must be a boolean");
        v = json_get(body, "public_traffic");
        if (v && !json_is_null(v) && json_bool(v, &public_traffic) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "public_traffic must be a boolean");
        r = api_validate_string_map(body, "env", true, &env, e);
        if (r < 0)
                return r;
        r = api_validate_string_map(body, "metadata", false, &metadata, e);
        if (r < 0)
                return r;
        if (body) {
                r = api_validate_policy_fields(body, c, &idle_s, &idle_action, &checkpoint_every_s, e);
                if (r < 0)
                        return r;
        }
        r = api_validate_network(json_get(body, "network"), c, &network, e);
        if (r < 0)
                return r;

        if (strscpy(sb->template_name, sizeof sb->template_name, tmpl) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "template name too long");
        v = json_get(body, "runtime");
        /* none named: the template's, tenant's or host's default (api_sandbox_defaults) */
        (void) strscpy(sb->runtime, sizeof sb->runtime, v && json_string(v) ? json_string(v) : "");
        sb->cpu_millis = (uint32_t) cpu_millis;
        sb->memory_mb = memory_mb;
        sb->disk_mb = disk_mb;
        sb->pids_max = (uint32_t) pids;
        sb->io_weight = (uint32_t) io_weight;
        sb->timeout_s = timeout_s;
        free(sb->env_json);
        sb->env_json = TAKE_PTR(env);
        free(sb->metadata_json);
        sb->metadata_json = TAKE_PTR(metadata);
        free(sb->network_json);
        sb->network_json = TAKE_PTR(network);
        sb->idle_s = idle_s;
        sb->idle_action = idle_action;
        sb->checkpoint_every_s = checkpoint_every_s;
        sb->checkpoints_max = ckpt_max;
        sb->checkpoints_mb = ckpt_mb;
        sb->auto_resume = auto_resume;
        sb->public_traffic = public_traffic;
        sb->processes_preserved = true; /* nothing was suspended yet */
        return 0;
}

/* ---- exec ---- */

void exec_request_done(ExecRequest *x) {
        x->agent_json = mfree(x->agent_json);
        x->stdin_data = mfree(x->stdin_data);
        x->stdin_len = 0;
}

static bool user_name_valid(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > API_USER_MAX || !((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
                return false;
        for (size_t i = 1; i < n; i++)
                if (!is_lower_alnum(s[i]) && s[i] != '_' && s[i] != '-' && !(s[i] == '$' && i == n - 1))
                        return false;
        return true;
}

static int exec_argv(JsonWriter *w, const JsonValue *cmd, ApiError *e) {
        size_t n = json_array_size(cmd);

        if (json_type(cmd) != JSON_ARRAY || n == 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "cmd must be a non-empty array of strings");
        if (n > API_ARGV_MAX)
                return api_error(e, -E2BIG, API_INVALID_ARGUMENT, "cmd has more than %u arguments", API_ARGV_MAX);
        json_w_key(w, "argv");
        json_w_array_begin(w);
        for (size_t i = 0; i < n; i++) {
                JsonValue *a = json_array_at(cmd, i);
                if (json_type(a) != JSON_STRING)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "cmd[%zu] must be a string", i);
                if (json_string_len(a) > API_ARG_MAX)
                        return api_error(e, -E2BIG, API_INVALID_ARGUMENT, "cmd[%zu] is longer than %u bytes", i,
                                         API_ARG_MAX);
                if (memchr(json_string(a), 0, json_string_len(a)))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "cmd[%zu] contains a NUL byte", i);
                if (i == 0 && json_string_len(a) == 0)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "cmd[0] must not be empty");
                json_w_string_n(w, json_string(a), json_string_len(a));
        }
        json_w_array_end(w);
        return 0;
}

static int exec_pty(JsonWriter *w, const JsonValue *pty, ApiError *e) {
        static const char *const allowed[] = { "rows", "cols", NULL };
        const char *unknown = NULL;
        uint64_t rows = 24, cols = 80;
        bool b;
        int r;

        if (json_bool(pty, &b) >= 0) {
                json_w_kv_bool(w, "pty", b);
                return 0;
        }
        if (json_type(pty) != JSON_OBJECT)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "pty must be true, false or {\"rows\":N,\"cols\":N}");
        if (json_check_keys(pty, allowed, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field 'pty.%.64s'", strna(unknown));
        r = field_u64(pty, "rows", 1, API_PTY_DIM_MAX, &rows, e);
        if (r < 0)
                return r;
        r = field_u64(pty, "cols", 1, API_PTY_DIM_MAX, &cols, e);
        if (r < 0)
                return r;
        json_w_kv_bool(w, "pty", true);
        json_w_kv_int(w, "rows", (int64_t) rows);
        json_w_kv_int(w, "cols", (int64_t) cols);
        return 0;
}

int api_validate_exec(const JsonValue *body, const Config *c, ExecRequest *ret, ApiError *e) {
        static const char *const allowed[] = { "cmd", "shell", "env", "cwd", "user", "stdin", "timeout_s",
                                               "background", "pty", "output", "on_disconnect", NULL };
        _cleanup_(json_w_done) JsonWriter w;
        ExecRequest x = {};
        const char *unknown = NULL;
        JsonValue *cmd, *shell, *v;
        uint64_t timeout_s = 0;
        int r;

        json_w_init(&w);
        if (json_check_keys(body, allowed, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));

        json_w_object_begin(&w);
        cmd = json_get(body, "cmd");
        shell = json_get(body, "shell");
        if (cmd && json_is_null(cmd))
                cmd = NULL;
        if (shell && json_is_null(shell))
                shell = NULL;
        if (cmd && shell)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "give either cmd or shell, not both");
        if (!cmd && !shell)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "cmd (an array of strings) or shell is required");
        if (cmd) {
                r = exec_argv(&w, cmd, e);
                if (r < 0)
                        return r;
        } else {
                if (json_type(shell) != JSON_STRING || json_string_len(shell) == 0)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "shell must be a non-empty string");
                if (json_string_len(shell) > API_ARG_MAX)
                        return api_error(e, -E2BIG, API_INVALID_ARGUMENT, "shell is longer than %u bytes", API_ARG_MAX);
                if (memchr(json_string(shell), 0, json_string_len(shell)))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "shell contains a NUL byte");
                json_w_key(&w, "shell");
                json_w_string_n(&w, json_string(shell), json_string_len(shell));
        }

        v = json_get(body, "env");
        if (v && !json_is_null(v)) {
                _cleanup_free_ char *text = NULL;
                r = validate_string_map(v, "env", true, e);
                if (r < 0)
                        return r;
                if (json_serialize(v, &text, NULL) < 0)
                        return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                json_w_key(&w, "env");
                json_w_raw(&w, text);
        }

        v = json_get(body, "cwd");
        if (v && !json_is_null(v)) {
                if (json_type(v) != JSON_STRING)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "cwd must be a string");
                r = api_validate_path(json_string(v), json_string_len(v), "cwd", e);
                if (r < 0)
                        return r;
                json_w_kv_string(&w, "cwd", json_string(v));
        }

        v = json_get(body, "user");
        if (v && !json_is_null(v)) {
                uint64_t uid;
                if (json_type(v) == JSON_STRING) {
                        if (!user_name_valid(json_string(v)))
                                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                                 "user: '%.40s' is not a valid user name", json_string(v));
                        json_w_kv_string(&w, "user", json_string(v));
                } else if (json_type(v) == JSON_NUMBER && json_uint64(v, &uid) >= 0 && uid < UINT32_MAX) {
                        json_w_kv_int(&w, "user", (int64_t) uid);
                } else
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "user must be a user name or a uid");
        }

        v = json_get(body, "stdin");
        if (v && !json_is_null(v)) {
                if (json_type(v) == JSON_STRING) {
                        x.stdin_data = memdup_suffix0(json_string(v), json_string_len(v));
                        if (!x.stdin_data)
                                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                        x.stdin_len = json_string_len(v);
                        json_w_kv_bool(&w, "stdin", true);
                } else if (json_bool(v, &x.keep_stdin) >= 0)
                        json_w_kv_bool(&w, "stdin", x.keep_stdin);
                else
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "stdin must be a string (fed, then closed) or true (kept open)");
        }

        r = field_u64(body, "timeout_s", 0, c->max_timeout_s, &timeout_s, e);
        if (r < 0)
                goto fail;
        if (timeout_s > 0)
                json_w_kv_int(&w, "timeout_ms", (int64_t) (timeout_s * 1000));

        v = json_get(body, "background");
        if (v && !json_is_null(v)) {
                if (json_bool(v, &x.background) < 0) {
                        r = api_error(e, -EINVAL, API_INVALID_ARGUMENT, "background must be true or false");
                        goto fail;
                }
                json_w_kv_bool(&w, "background", x.background);
        }

        v = json_get(body, "pty");
        if (v && !json_is_null(v)) {
                r = exec_pty(&w, v, e);
                if (r < 0)
                        goto fail;
        }

        v = json_get(body, "output");
        if (v && !json_is_null(v)) {
                x.output = json_type(v) == JSON_STRING ? exec_output_from_string(json_string(v)) : _EXEC_OUTPUT_INVALID;
                if (x.output < 0) {
                        r = api_error(e, -EINVAL, API_INVALID_ARGUMENT, "output must be \"text\", \"base64\" or \"frames\"");
                        goto fail;
                }
        }
        v = json_get(body, "on_disconnect");
        if (v && !json_is_null(v)) {
                if (json_type(v) != JSON_STRING || (!streq(json_string(v), "keep") && !streq(json_string(v), "hangup") &&
                                                        !streq(json_string(v), "kill"))) {
                        r = api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                      "on_disconnect must be \"keep\", \"hangup\" or \"kill\"");
                        goto fail;
                }
                json_w_kv_string(&w, "on_disconnect", json_string(v));
        }

        json_w_object_end(&w);
        r = json_w_finish(&w, &x.agent_json, NULL);
        if (r < 0) {
                r = api_error(e, r, API_UNAVAILABLE, "out of memory");
                goto fail;
        }
        *ret = x;
        return 0;
fail:
        exec_request_done(&x);
        return r;
}

/* ---- signals ---- */

const char *api_signal_name(const char *s) {
        static const char *const names[] = {
                "SIGHUP", "SIGINT", "SIGQUIT", "SIGKILL", "SIGUSR1", "SIGUSR2", "SIGTERM", "SIGCONT",
                "SIGSTOP", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGWINCH", "SIGALRM", "SIGPIPE", "SIGABRT",
        };
        const char *bare;

        if (!s)
                return NULL;
        bare = startswith(s, "SIG") ?: s;
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (streq(names[i] + 3, bare))
                        return names[i];
        return NULL;
}

/* ---- RFC 3339 ---- */

static int digits(const char **p, unsigned n, unsigned *ret) {
        unsigned v = 0;
        for (unsigned i = 0; i < n; i++) {
                char c = (*p)[i];
                if (c < '0' || c > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned) (c - '0');
        }
        *p += n;
        *ret = v;
        return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
        y -= m <= 2;
        int64_t era = (y >= 0 ? y : y - 399) / 400;
        unsigned yoe = (unsigned) (y - era * 400);
        unsigned doy = (153 * (m + (m > 2 ? (unsigned) -3 : 9)) + 2) / 5 + d - 1;
        unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        return era * 146097 + (int64_t) doe - 719468;
}

int api_parse_time(const char *s, int64_t *ret_usec) {
        static const unsigned mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
        unsigned y, mo, d, h, mi, sec, frac_usec = 0;
        int64_t offset_sec = 0, t;
        const char *p = s;

        if (!s || strlen(s) > 40)
                return -EINVAL;
        if (digits(&p, 4, &y) < 0 || *p++ != '-' || digits(&p, 2, &mo) < 0 || *p++ != '-' ||
            digits(&p, 2, &d) < 0 || (*p != 'T' && *p != 't') || !*p++ || digits(&p, 2, &h) < 0 || *p++ != ':' ||
            digits(&p, 2, &mi) < 0 || *p++ != ':' || digits(&p, 2, &sec) < 0)
                return -EINVAL;
        if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 || mi > 59 || sec > 60)
                return -EINVAL;
        if (mo == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
                return -EINVAL;
        if (sec == 60)
                sec = 59; /* leap second */
        if (*p == '.') {
                unsigned n = 0, scale = 100000;
                p++;
                while (*p >= '0' && *p <= '9') {
                        if (n++ >= 9)
                                return -EINVAL;
                        frac_usec += (unsigned) (*p - '0') * scale;
                        scale /= 10;
                        p++;
                }
                if (n == 0)
                        return -EINVAL;
        }
        if (*p == 'Z' || *p == 'z')
                p++;
        else if (*p == '+' || *p == '-') {
                unsigned oh, om;
                int sign = *p++ == '-' ? -1 : 1;
                if (digits(&p, 2, &oh) < 0 || *p++ != ':' || digits(&p, 2, &om) < 0 || oh > 23 || om > 59)
                        return -EINVAL;
                offset_sec = sign * (int64_t) (oh * 3600 + om * 60);
        } else
                return -EINVAL;
        if (*p)
                return -EINVAL;

        t = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - offset_sec;
        *ret_usec = t * 1000000 + frac_usec;
        return 0;
}
