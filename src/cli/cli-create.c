/* SPDX-License-Identifier: MIT */
/* space create: POST /v1/sandboxes, prints the new id. */

#include "cli-common.h"
#include "cli-policy.h"
#include "cli-verbs.h"

enum {
        OPT_TEMPLATE = 1,
        OPT_RUNTIME,
        OPT_CPU,
        OPT_MEMORY,
        OPT_DISK,
        OPT_TIMEOUT,
        OPT_ENV,
        OPT_META,
        OPT_ALLOW,
        OPT_ALLOW_CIDR,
        OPT_DENY,
        OPT_CREDENTIAL,
        OPT_IDLE_ACTION,
        OPT_AUTO_RESUME,
        OPT_VOLUME,
        OPT_NUMBER, /* OPT_NUMBER + i: number_fields[i] */
};

/* Options that set one non-negative integer field of the body. */
static const struct {
        const char *option, *field;
} number_fields[] = {
        { "pids", "pids_max" },
        { "io-weight", "io_weight" },
        { "idle", "idle_s" },
        { "checkpoint-every", "checkpoint_every_s" },
        { "checkpoints-max", "checkpoints_max" },
        { "checkpoints-mb", "checkpoints_mb" },
};

static const CliOption options[] = {
        { "template", 0, true, OPT_TEMPLATE },
        { "runtime", 0, true, OPT_RUNTIME },
        { "cpu", 0, true, OPT_CPU },
        { "memory", 0, true, OPT_MEMORY },
        { "disk", 0, true, OPT_DISK },
        { "timeout", 0, true, OPT_TIMEOUT },
        { "env", 'e', true, OPT_ENV },
        { "meta", 0, true, OPT_META },
        { "allow", 0, true, OPT_ALLOW },
        { "allow-cidr", 0, true, OPT_ALLOW_CIDR },
        { "deny", 0, true, OPT_DENY },
        { "credential", 0, true, OPT_CREDENTIAL },
        { "cred", 0, true, OPT_CREDENTIAL },
        { "idle-action", 0, true, OPT_IDLE_ACTION },
        { "auto-resume", 0, false, OPT_AUTO_RESUME },
        { "volume", 0, true, OPT_VOLUME },
        { "pids", 0, true, OPT_NUMBER + 0 },
        { "io-weight", 0, true, OPT_NUMBER + 1 },
        { "idle", 0, true, OPT_NUMBER + 2 },
        { "checkpoint-every", 0, true, OPT_NUMBER + 3 },
        { "checkpoints-max", 0, true, OPT_NUMBER + 4 },
        { "checkpoints-mb", 0, true, OPT_NUMBER + 5 },
        {},
};

/* Writes "key":{"K":"V",...} from "K=V" strings. */
static int write_kv_object(JsonWriter *w, const char *key, const char *option, char **kvs) {
        if (strv_length(kvs) == 0)
                return 0;
        json_w_key(w, key);
        json_w_object_begin(w);
        for (char **s = kvs; *s; s++) {
                _cleanup_free_ char *k = NULL;
                const char *v;
                int r = cli_parse_kv(option, *s, &k, &v);
                if (r < 0)
                        return r;
                json_w_kv_string(w, k, v);
        }
        json_w_object_end(w);
        return 0;
}

static void write_string_array(JsonWriter *w, char **l) {
        json_w_array_begin(w);
        for (char **s = l; s && *s; s++)
                json_w_string(w, *s);
        json_w_array_end(w);
}

int cli_create(int argc, char **argv) {
        _cleanup_strv_free_ char **env = NULL, **meta = NULL, **allow = NULL, **creds = NULL, **allow_cidr = NULL,
                                 **deny = NULL, **volumes = NULL;
        const char *template = NULL, *runtime = NULL, *arg = NULL, *idle_action = NULL;
        uint64_t numbers[ELEMENTSOF(number_fields)] = {};
        bool have_number[ELEMENTSOF(number_fields)] = {}, auto_resume = false;
        bool have_cpu = false, have_memory = false, have_disk = false, have_timeout = false;
        uint64_t memory = 0, disk = 0, timeout = 0;
        double cpu = 0;
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_free_ char *body = NULL;
        size_t body_len;
        int r;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, options, &arg)) > 0) {
                switch (r) {
                case OPT_TEMPLATE:
                        template = arg;
                        break;
                case OPT_RUNTIME:
                        runtime = arg;
                        break;
                case OPT_IDLE_ACTION:
                        if (!streq(arg, "pause") && !streq(arg, "suspend") && !streq(arg, "none"))
                                return cli_usage_error("--idle-action: expected pause, suspend or none, got '%s'", arg);
                        idle_action = streq(arg, "none") ? "" : arg;
                        break;
                case OPT_AUTO_RESUME:
                        auto_resume = true;
                        break;
                case OPT_CPU:
                        if (cli_parse_double("cpu", arg, &cpu) < 0)
                                return -EINVAL;
                        if (!(cpu > 0))
                                return cli_usage_error("--cpu: must be greater than 0, got '%s'", arg);
                        have_cpu = true;
                        break;
                case OPT_MEMORY:
                        if (cli_parse_u64("memory", arg, &memory) < 0)
                                return -EINVAL;
                        have_memory = true;
                        break;
                case OPT_DISK:
                        if (cli_parse_u64("disk", arg, &disk) < 0)
                                return -EINVAL;
                        have_disk = true;
                        break;
                case OPT_TIMEOUT:
                        if (cli_parse_u64("timeout", arg, &timeout) < 0)
                                return -EINVAL;
                        have_timeout = true;
                        break;
                case OPT_ENV:
                case OPT_META:
                case OPT_ALLOW:
                case OPT_ALLOW_CIDR:
                case OPT_DENY:
                case OPT_VOLUME:
                case OPT_CREDENTIAL: {
                        char ***l = r == OPT_ENV ? &env : r == OPT_META ? &meta : r == OPT_ALLOW ? &allow
                                  : r == OPT_ALLOW_CIDR ? &allow_cidr : r == OPT_DENY ? &deny
                                  : r == OPT_VOLUME ? &volumes : &creds;
                        if (isempty(arg))
                                return cli_usage_error("option needs a non-empty value");
                        if (strv_extend(l, arg) < 0)
                                return cli_error_errno(-ENOMEM, "out of memory");
                        break;
                }
                default:
                        if (r >= OPT_NUMBER && r < OPT_NUMBER + (int) ELEMENTSOF(number_fields)) {
                                size_t k = (size_t) (r - OPT_NUMBER);
                                if (cli_parse_u64(number_fields[k].option, arg, &numbers[k]) < 0)
                                        return -EINVAL;
                                have_number[k] = true;
                        }
                        break;
                }
        }
        r = cli_parser_end(&p, r, 0, 0);
        if (r <= 0)
                return r;

        json_w_init(&w);
        json_w_object_begin(&w);
        if (template)
                json_w_kv_string(&w, "template", template);
        if (runtime)
                json_w_kv_string(&w, "runtime", runtime);
        if (have_cpu) {
                json_w_key(&w, "cpu");
                json_w_double(&w, cpu);
        }
        if (have_memory) {
                json_w_key(&w, "memory_mb");
                json_w_uint(&w, memory);
        }
        if (have_disk) {
                json_w_key(&w, "disk_mb");
                json_w_uint(&w, disk);
        }
        if (have_timeout) {
                json_w_key(&w, "timeout_s");
                json_w_uint(&w, timeout);
        }
        for (size_t k = 0; k < ELEMENTSOF(number_fields); k++)
                if (have_number[k]) {
                        json_w_key(&w, number_fields[k].field);
                        json_w_uint(&w, numbers[k]);
                }
        if (idle_action)
                json_w_kv_string(&w, "idle_action", idle_action);
        if (auto_resume)
                json_w_kv_bool(&w, "auto_resume", true);
        r = write_kv_object(&w, "env", "env", env);
        if (r < 0)
                return r;
        r = write_kv_object(&w, "metadata", "meta", meta);
        if (r < 0)
                return r;
        if (allow || allow_cidr || deny) {
                /* the egress policy (without: the server's default, no egress unless configured) */
                json_w_key(&w, "network");
                json_w_object_begin(&w);
                json_w_key(&w, "allow");
                json_w_array_begin(&w);
                for (char **s = allow; s && *s; s++)
                        if (cli_policy_write_rule(&w, *s, CLI_RULE_HOST) < 0)
                                return cli_error_errno(-ENOMEM, "out of memory");
                for (char **s = allow_cidr; s && *s; s++)
                        if (cli_policy_write_rule(&w, *s, CLI_RULE_CIDR) < 0)
                                return cli_error_errno(-ENOMEM, "out of memory");
                json_w_array_end(&w);
                json_w_key(&w, "deny");
                json_w_array_begin(&w);
                for (char **s = deny; s && *s; s++)
                        if (cli_policy_write_rule(&w, *s, CLI_RULE_AUTO) < 0)
                                return cli_error_errno(-ENOMEM, "out of memory");
                json_w_array_end(&w);
                json_w_object_end(&w);
        }
        if (creds) {
                json_w_key(&w, "credentials");
                write_string_array(&w, creds);
        }
        if (volumes) {
                json_w_key(&w, "volumes");
                json_w_array_begin(&w);
                for (char **s = volumes; *s; s++) {
                        r = cli_volume_write_mount(&w, *s);
                        if (r < 0)
                                return r;
                }
                json_w_array_end(&w);
        }
        json_w_object_end(&w);
        r = json_w_finish(&w, &body, &body_len);
        if (r < 0)
                return cli_error_errno(r, "out of memory");

        r = cli_call("POST", "/v1/sandboxes", body, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);

        const char *id = json_string(json_get(resp.json, "id"));
        if (isempty(id))
                return cli_error("the server's answer has no sandbox id");
        printf("%s\n", id);
        return 0;
}
