/* SPDX-License-Identifier: MIT */
/* The pure parts of the /v1 API: request validation, path checks, JSON output
 * shapes, what is relayed from the agent, key hashing. */

#include <stdio.h>

#include "api-internal.h"
#include "fd-util.h"
#include "proto-msg.h"
#include "egress-policy.h"
#include "test.h"

static Config test_config(void) {
        Config c;
        config_defaults(&c);
        return c;
}

static JsonValue *parse(const char *text) {
        JsonValue *v = NULL;
        char err[128] = "";
        if (json_parse(text, strlen(text), &v, err, sizeof err) < 0)
                test_fail(__FILE__, __LINE__, "bad test JSON %s: %s", text, err);
        return v;
}

static char *finish(JsonWriter *w) {
        char *text = NULL;
        ASSERT_OK(json_w_finish(w, &text, NULL));
        return text;
}

/* ---- ids and names ---- */

TEST(sandbox_ids) {
        char id[API_ID_LEN + 1];

        for (int i = 0; i < 200; i++) {
                ASSERT_OK(api_sandbox_id_generate(id));
                ASSERT_TRUE(api_sandbox_id_valid(id));
        }
        ASSERT_TRUE(api_sandbox_id_valid("s3k9x0a1b2c3d4e5"));
        ASSERT_FALSE(api_sandbox_id_valid("3k9x0a1b2c3d4e5s")); /* starts with a digit */
        ASSERT_FALSE(api_sandbox_id_valid("S3k9x0a1b2c3d4e5")); /* upper case */
        ASSERT_FALSE(api_sandbox_id_valid("s3k9x0a1b2c3d4e"));  /* 15 */
        ASSERT_FALSE(api_sandbox_id_valid("s3k9x0a1b2c3d4e5f")); /* 17 */
        ASSERT_FALSE(api_sandbox_id_valid("s3k9x0a1b2c3d4/5"));
        ASSERT_FALSE(api_sandbox_id_valid(""));
        ASSERT_FALSE(api_sandbox_id_valid(NULL));
}

TEST(names) {
        char long_name[80];

        ASSERT_TRUE(api_template_name_valid("base"));
        ASSERT_TRUE(api_template_name_valid("debian-12.1_x"));
        ASSERT_TRUE(api_template_name_valid("0"));
        ASSERT_FALSE(api_template_name_valid(""));
        ASSERT_FALSE(api_template_name_valid(".hidden"));
        ASSERT_FALSE(api_template_name_valid("-x"));
        ASSERT_FALSE(api_template_name_valid(".."));
        ASSERT_FALSE(api_template_name_valid("a/b"));
        ASSERT_FALSE(api_template_name_valid("Base"));
        memset(long_name, 'a', 64);
        long_name[64] = 0;
        ASSERT_TRUE(api_template_name_valid(long_name));
        long_name[64] = 'a';
        long_name[65] = 0;
        ASSERT_FALSE(api_template_name_valid(long_name));

        ASSERT_TRUE(api_tenant_name_valid("acme"));
        ASSERT_TRUE(api_tenant_name_valid("acme-2"));
        ASSERT_FALSE(api_tenant_name_valid("acme.corp"));
        ASSERT_FALSE(api_tenant_name_valid("-acme"));
        ASSERT_FALSE(api_tenant_name_valid(""));

        ASSERT_TRUE(api_key_name_valid("ci runner #2"));
        ASSERT_FALSE(api_key_name_valid(""));
        ASSERT_FALSE(api_key_name_valid("a\"b"));
        ASSERT_FALSE(api_key_name_valid("tab\there"));
}

/* ---- paths ---- */

TEST(paths) {
        ApiError e = {};
        char big[API_PATH_MAX + 2];

        ASSERT_OK(api_validate_path("/a/b", 4, "path", &e));
        ASSERT_OK(api_validate_path("relative/x", 10, "path", &e));
        ASSERT_OK(api_validate_path("/a/...", 6, "path", &e));
        ASSERT_OK(api_validate_path("/a/..b/c", 8, "path", &e));
        ASSERT_OK(api_validate_path("/", 1, "path", &e));

        ASSERT_ERRNO(api_validate_path("..", 2, "path", &e), EINVAL);
        ASSERT_EQ(e.code, API_INVALID_PATH);
        ASSERT_STREQ(e.message, "path must not contain a '..' component");
        ASSERT_ERRNO(api_validate_path("/a/../b", 7, "path", &e), EINVAL);
        ASSERT_ERRNO(api_validate_path("/a/..", 5, "path", &e), EINVAL);
        ASSERT_ERRNO(api_validate_path("../a", 4, "path", &e), EINVAL);
        ASSERT_ERRNO(api_validate_path("/a//../", 7, "path", &e), EINVAL);

        ASSERT_ERRNO(api_validate_path("", 0, "path", &e), EINVAL);
        ASSERT_STREQ(e.message, "path must not be empty");
        ASSERT_ERRNO(api_validate_path("/a\0b", 4, "path", &e), EINVAL);
        ASSERT_STREQ(e.message, "path contains a NUL byte");
        ASSERT_ERRNO(api_validate_path("/a\xff", 3, "cwd", &e), EINVAL);
        ASSERT_STREQ(e.message, "cwd is not valid UTF-8");

        memset(big, 'a', sizeof big);
        big[0] = '/';
        ASSERT_OK(api_validate_path(big, API_PATH_MAX, "path", &e));
        ASSERT_ERRNO(api_validate_path(big, API_PATH_MAX + 1, "path", &e), ENAMETOOLONG);
        ASSERT_EQ(e.code, API_INVALID_PATH);
        ASSERT_STREQ(e.message, "path is longer than 4095 bytes");
}

TEST(volume_names_and_paths) {
        static const char *const good_paths[] = { "/data", "/a/b/c", "/mnt/x.y", "/procfs", "/devices", "/etcetera",
                                                   "/home/user/.cache", "/a/..b", "/a/...", "/srv/run" };
        static const char *const bad_paths[] = { "/", "data", "", "//", "/a//b", "/a/", "/a/./b", "/.", "/a/..",
                                                  "/../proc", "/proc", "/proc/self", "/sys", "/sys/fs/cgroup", "/dev",
                                                  "/dev/shm", "/run", "/run/space-agent", "/etc", "/etc/passwd",
                                                  "/a\nb", "/a\x7f" };
        char big[API_VOLUME_PATH_MAX + 2];
        ApiError e = {};

        ASSERT_TRUE(api_volume_name_valid("data"));
        ASSERT_TRUE(api_volume_name_valid("My.Vol_1-x"));
        ASSERT_TRUE(api_volume_name_valid("0"));
        ASSERT_FALSE(api_volume_name_valid(NULL));
        ASSERT_FALSE(api_volume_name_valid(""));
        ASSERT_FALSE(api_volume_name_valid("-x"));
        ASSERT_FALSE(api_volume_name_valid(".x"));
        ASSERT_FALSE(api_volume_name_valid("a/b"));
        ASSERT_FALSE(api_volume_name_valid("a b"));
        memset(big, 'a', sizeof big);
        big[API_VOLUME_NAME_MAX] = 0;
        ASSERT_TRUE(api_volume_name_valid(big));
        big[API_VOLUME_NAME_MAX] = 'a';
        big[API_VOLUME_NAME_MAX + 1] = 0;
        ASSERT_FALSE(api_volume_name_valid(big));

        for (size_t i = 0; i < ELEMENTSOF(good_paths); i++)
                ASSERT_OK(api_volume_path_validate(good_paths[i], strlen(good_paths[i]), &e));
        for (size_t i = 0; i < ELEMENTSOF(bad_paths); i++) {
                e = (ApiError) {};
                ASSERT_ERRNO(api_volume_path_validate(bad_paths[i], strlen(bad_paths[i]), &e), EINVAL);
                ASSERT_EQ(e.code, API_INVALID_PATH);
        }
        ASSERT_ERRNO(api_volume_path_validate("/a\0b", 4, &e), EINVAL);
        memset(big, 'a', sizeof big);
        big[0] = '/';
        ASSERT_OK(api_volume_path_validate(big, API_VOLUME_PATH_MAX - 1, &e));
        ASSERT_ERRNO(api_volume_path_validate(big, API_VOLUME_PATH_MAX, &e), EINVAL);
        ASSERT_EQ(api_branch_volumes_from_string("share_ro"), API_BRANCH_VOLUMES_SHARE_RO);
        ASSERT_EQ(api_branch_volumes_from_string("snapshot"), API_BRANCH_VOLUMES_SNAPSHOT);
        ASSERT_EQ(api_branch_volumes_from_string("none"), API_BRANCH_VOLUMES_NONE);
        ASSERT_ERRNO(api_branch_volumes_from_string("copy"), EINVAL);
        ASSERT_ERRNO(api_branch_volumes_from_string(NULL), EINVAL);
}

/* ---- create requests ---- */

static int create(const char *json, Sandbox *sb, ApiError *e) {
        _cleanup_json_ JsonValue *v = parse(json);
        Config c = test_config();
        return api_validate_sandbox_create(v, &c, sb, e);
}

TEST(create_defaults) {
        Config c = test_config();
        Sandbox sb = {};
        ApiError e = {};

        ASSERT_OK(api_validate_sandbox_create(NULL, &c, &sb, &e));
        ASSERT_STREQ(sb.template_name, "base");
        ASSERT_STREQ(sb.runtime, ""); /* none named: the template's, tenant's or host's (api_sandbox_defaults) */
        ASSERT_EQ(sb.cpu_millis, c.default_cpu_millis);
        ASSERT_EQ(sb.memory_mb, c.default_memory_mb);
        ASSERT_EQ(sb.disk_mb, c.default_disk_mb);
        ASSERT_EQ(sb.pids_max, c.default_pids_max);
        ASSERT_EQ(sb.timeout_s, 0);
        ASSERT_NULL(sb.env_json);
        ASSERT_NULL(sb.metadata_json);

        ASSERT_OK(create("{}", &sb, &e));
        ASSERT_STREQ(sb.template_name, "base");
        /* null counts as absent */
        ASSERT_OK(create("{\"template\":null,\"cpu\":null,\"env\":null}", &sb, &e));
        ASSERT_STREQ(sb.template_name, "base");
        sandbox_done(&sb);
}

TEST(create_all_fields) {
        Sandbox sb = {};
        ApiError e = {};

        ASSERT_OK(create("{\"template\":\"debian\",\"runtime\":\"ns\",\"cpu\":0.5,\"memory_mb\":1024,"
                         "\"disk_mb\":4096,\"pids_max\":100,\"timeout_s\":3600,"
                         "\"env\":{\"A\":\"1\",\"_B2\":\"x y\"},\"metadata\":{\"owner\":\"me\",\"k\":\"\"}}",
                         &sb, &e));
        ASSERT_STREQ(sb.template_name, "debian");
        ASSERT_EQ(sb.cpu_millis, 500);
        ASSERT_EQ(sb.memory_mb, 1024);
        ASSERT_EQ(sb.disk_mb, 4096);
        ASSERT_EQ(sb.pids_max, 100);
        ASSERT_EQ(sb.timeout_s, 3600);
        ASSERT_STREQ(sb.env_json, "{\"A\":\"1\",\"_B2\":\"x y\"}");
        ASSERT_STREQ(sb.metadata_json, "{\"owner\":\"me\",\"k\":\"\"}");
        sandbox_done(&sb);

        /* checkpoint caps: the host's by default (checkpoints_max_mb 0 = the disk_mb), lower on request */
        ASSERT_OK(create("{\"disk_mb\":4096}", &sb, &e));
        ASSERT_EQ(sb.checkpoints_max, 64);
        ASSERT_EQ(sb.checkpoints_mb, 4096);
        sandbox_done(&sb);
        ASSERT_OK(create("{\"checkpoints_max\":3,\"checkpoints_mb\":100}", &sb, &e));
        ASSERT_EQ(sb.checkpoints_max, 3);
        ASSERT_EQ(sb.checkpoints_mb, 100);
        sandbox_done(&sb);

        ASSERT_OK(create("{\"cpu\":2}", &sb, &e));
        ASSERT_EQ(sb.cpu_millis, 2000);
        ASSERT_OK(create("{\"cpu\":0.01}", &sb, &e));
        ASSERT_EQ(sb.cpu_millis, 10);
        sandbox_done(&sb);
}

#define ASSERT_CREATE_FAILS(json, want_code, msg)                    \
        do {                                                    \
                Sandbox _sb = {};                               \
                ApiError _e = {};                               \
                ASSERT_TRUE(create(json, &_sb, &_e) < 0);       \
                ASSERT_EQ(_e.code, want_code);                       \
                ASSERT_STREQ(_e.message, msg);                  \
                sandbox_done(&_sb);                             \
        } while (0)

TEST(create_network) {
        Config c = test_config();
        Sandbox sb = {};
        ApiError e = {};

        /* none: the configured default, which is no egress */
        ASSERT_OK(create("{}", &sb, &e));
        ASSERT_STREQ(sb.network_json, "{\"allow\":[],\"deny\":[]}");
        ASSERT_OK(create("{\"network\":null}", &sb, &e));
        ASSERT_STREQ(sb.network_json, "{\"allow\":[],\"deny\":[]}");
        /* canonical form stored */
        ASSERT_OK(create("{\"network\":{\"allow\":[\"PyPI.org\",\"10.1.0.0/16\"],\"deny\":[\"x.pypi.org\"]}}", &sb, &e));
        ASSERT_STREQ(sb.network_json, "{\"allow\":[{\"host\":\"pypi.org\",\"ports\":[80,443]},"
                                      "{\"cidr\":\"10.1.0.0/16\",\"ports\":[80,443]}],"
                                      "\"deny\":[{\"host\":\"x.pypi.org\"}]}");
        sandbox_done(&sb);
        /* a configured default */
        (void) strscpy(c.default_network, sizeof c.default_network, "{\"allow\":[\"deb.debian.org\"]}");
        ASSERT_OK(api_validate_sandbox_create(NULL, &c, &sb, &e));
        ASSERT_STREQ(sb.network_json, "{\"allow\":[{\"host\":\"deb.debian.org\",\"ports\":[80,443]}],\"deny\":[]}");
        sandbox_done(&sb);

        /* larger than the limit: 413, the size named */
        _cleanup_free_ char *big = malloc(EGRESS_POLICY_JSON_MAX + 64);
        size_t o = (size_t) snprintf(big, 64, "{\"network\":{\"allow\":[");
        for (unsigned i = 0; o < EGRESS_POLICY_JSON_MAX + 16; i++)
                o += (size_t) snprintf(big + o, 32, "%s\"h%u.example.org\"", i ? "," : "", i);
        memcpy(big + o, "]}}", 4);
        ASSERT_TRUE(create(big, &sb, &e) < 0);
        ASSERT_EQ(e.code, API_PAYLOAD_TOO_LARGE);
        ASSERT_TRUE(strstr(e.message, "larger than 65536 bytes") != NULL);
        sandbox_done(&sb);
}

TEST(create_errors) {
        ASSERT_CREATE_FAILS("{\"networks\":{}}", API_UNKNOWN_FIELD, "unknown field 'networks'");
        ASSERT_CREATE_FAILS("{\"network\":[]}", API_INVALID_ARGUMENT,
                            "network: the policy must be an object {\"allow\": [...], \"deny\": [...]}");
        ASSERT_CREATE_FAILS("{\"network\":{\"allow\":[\"*\"]}}", API_INVALID_ARGUMENT,
                            "network: allow[0]: invalid host \"*\": '*' only as the whole first label (\"*.example.com\")");
        ASSERT_CREATE_FAILS("{\"network\":{\"allow\":[\"ok.example\",\"*.com\"]}}", API_INVALID_ARGUMENT,
                            "network: allow[1]: invalid host \"*.com\": wildcard covers a whole top-level domain");
        ASSERT_CREATE_FAILS("{\"network\":{\"deny\":[\"10.0.0.1/8\"]}}", API_INVALID_ARGUMENT,
                            "network: deny[0]: invalid CIDR \"10.0.0.1/8\" (\"a.b.c.d/len\" with the host bits zero)");
        ASSERT_CREATE_FAILS("{\"network\":{\"allow\":[{\"host\":\"a.example\",\"ports\":[0]}]}}",
                            API_INVALID_ARGUMENT, "network: allow[0].ports[0]: a port is an integer 1-65535");
        ASSERT_CREATE_FAILS("{\"network\":{\"allow\":[],\"except\":[]}}", API_INVALID_ARGUMENT,
                            "network: unknown field \"except\" (allowed: allow, deny, precedence, default)");
        ASSERT_CREATE_FAILS("{\"template\":1}", API_INVALID_ARGUMENT, "template must be a string");
        ASSERT_CREATE_FAILS("{\"template\":\"../etc\"}", API_INVALID_ARGUMENT,
                            "template: '../etc' is not a template reference (NAME, NAME:TAG or NAME@vN; a name is "
                            "[a-z0-9][a-z0-9._-]{0,63})");
        ASSERT_CREATE_FAILS("{\"runtime\":\"vm\",\"memory_mb\":64}", API_INVALID_ARGUMENT,
                            "memory_mb must be at least 128 for runtime 'vm' (the guest kernel's minimum)");
        ASSERT_CREATE_FAILS("{\"runtime\":\"xen\"}", API_INVALID_ARGUMENT, "runtime must be 'ns' or 'vm', not 'xen'");
        ASSERT_CREATE_FAILS("{\"runtime\":true}", API_INVALID_ARGUMENT, "runtime must be a string");
        ASSERT_CREATE_FAILS("{\"cpu\":0}", API_INVALID_ARGUMENT,
                            "cpu must be a number of CPUs greater than 0 (e.g. 0.5)");
        ASSERT_CREATE_FAILS("{\"cpu\":-1}", API_INVALID_ARGUMENT,
                            "cpu must be a number of CPUs greater than 0 (e.g. 0.5)");
        ASSERT_CREATE_FAILS("{\"cpu\":\"2\"}", API_INVALID_ARGUMENT,
                            "cpu must be a number of CPUs greater than 0 (e.g. 0.5)");
        ASSERT_CREATE_FAILS("{\"cpu\":0.001}", API_INVALID_ARGUMENT, "cpu must be at least 0.01");
        ASSERT_CREATE_FAILS("{\"cpu\":65}", API_INVALID_ARGUMENT, "cpu must be at most 64");
        ASSERT_CREATE_FAILS("{\"checkpoints_max\":0}", API_INVALID_ARGUMENT,
                            "checkpoints_max must be between 1 and 64, not 0");
        ASSERT_CREATE_FAILS("{\"checkpoints_max\":65}", API_INVALID_ARGUMENT,
                            "checkpoints_max must be between 1 and 64, not 65");
        ASSERT_CREATE_FAILS("{\"checkpoints_max\":\"2\"}", API_INVALID_ARGUMENT,
                            "checkpoints_max must be a non-negative integer");
        ASSERT_CREATE_FAILS("{\"disk_mb\":1024,\"checkpoints_mb\":1025}", API_INVALID_ARGUMENT,
                            "checkpoints_mb must be between 1 and 1024, not 1025");
        ASSERT_CREATE_FAILS("{\"cpu\":1e300}", API_INVALID_ARGUMENT, "cpu must be at most 64");
        ASSERT_CREATE_FAILS("{\"memory_mb\":8}", API_INVALID_ARGUMENT, "memory_mb must be between 16 and 65536, not 8");
        ASSERT_CREATE_FAILS("{\"memory_mb\":100000}", API_INVALID_ARGUMENT,
                            "memory_mb must be between 16 and 65536, not 100000");
        ASSERT_CREATE_FAILS("{\"memory_mb\":512.5}", API_INVALID_ARGUMENT, "memory_mb must be a non-negative integer");
        ASSERT_CREATE_FAILS("{\"memory_mb\":-1}", API_INVALID_ARGUMENT, "memory_mb must be a non-negative integer");
        ASSERT_CREATE_FAILS("{\"memory_mb\":\"512\"}", API_INVALID_ARGUMENT, "memory_mb must be a non-negative integer");
        ASSERT_CREATE_FAILS("{\"disk_mb\":1}", API_INVALID_ARGUMENT, "disk_mb must be between 16 and 262144, not 1");
        ASSERT_CREATE_FAILS("{\"pids_max\":0}", API_INVALID_ARGUMENT, "pids_max must be between 8 and 32768, not 0");
        ASSERT_CREATE_FAILS("{\"timeout_s\":99999999}", API_INVALID_ARGUMENT,
                            "timeout_s must be between 0 and 2592000, not 99999999");
        ASSERT_CREATE_FAILS("{\"env\":[]}", API_INVALID_ARGUMENT, "env must be an object of strings");
        ASSERT_CREATE_FAILS("{\"env\":{\"1A\":\"x\"}}", API_INVALID_ARGUMENT,
                            "env: '1A' is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)");
        ASSERT_CREATE_FAILS("{\"env\":{\"A=B\":\"x\"}}", API_INVALID_ARGUMENT,
                            "env: 'A=B' is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)");
        ASSERT_CREATE_FAILS("{\"env\":{\"A\":1}}", API_INVALID_ARGUMENT, "env: the value of 'A' must be a string");
        ASSERT_CREATE_FAILS("{\"env\":{\"A\":\"a\\u0000b\"}}", API_INVALID_ARGUMENT,
                            "env: the value of 'A' contains a NUL byte");
        ASSERT_CREATE_FAILS("{\"metadata\":{\"\":\"x\"}}", API_INVALID_ARGUMENT,
                            "metadata: keys must be 1 to 64 bytes long");
        ASSERT_CREATE_FAILS("{\"metadata\":\"x\"}", API_INVALID_ARGUMENT, "metadata must be an object of strings");
}

TEST(create_env_limits) {
        _cleanup_free_ char *json = NULL;
        size_t n = 0, size = 64 * 1024;
        Sandbox sb = {};
        ApiError e = {};

        json = malloc(size);
        ASSERT_NOT_NULL(json);
        n += (size_t) snprintf(json + n, size - n, "{\"env\":{");
        for (unsigned i = 0; i <= API_ENV_ENTRIES_MAX; i++)
                n += (size_t) snprintf(json + n, size - n, "%s\"V%u\":\"x\"", i ? "," : "", i);
        snprintf(json + n, size - n, "}}");
        ASSERT_ERRNO(create(json, &sb, &e), E2BIG);
        ASSERT_STREQ(e.message, "env has more than 256 entries");

        n = (size_t) snprintf(json, size, "{\"metadata\":{\"k\":\"");
        memset(json + n, 'v', API_METADATA_VALUE_MAX + 1);
        n += API_METADATA_VALUE_MAX + 1;
        snprintf(json + n, size - n, "\"}}");
        ASSERT_ERRNO(create(json, &sb, &e), E2BIG);
        ASSERT_STREQ(e.message, "metadata: the value of 'k' is longer than 1024 bytes");
}

/* ---- exec requests ---- */

static int exec_req(const char *json, ExecRequest *x, ApiError *e) {
        _cleanup_json_ JsonValue *v = parse(json);
        Config c = test_config();
        return api_validate_exec(v, &c, x, e);
}

/* What we send must be what the agent's parser accepts. */
static void assert_agent_accepts(const char *agent_json) {
        _cleanup_json_ JsonValue *v = parse(agent_json);
        ProtoExecRequest pr = {};
        char err[256] = "";
        int r = proto_exec_request_parse(v, &pr, err, sizeof err);
        if (r < 0)
                test_fail(__FILE__, __LINE__, "agent refuses %s: %s", agent_json, err);
        proto_exec_request_done(&pr);
}

TEST(exec_cmd) {
        ExecRequest x = {};
        ApiError e = {};

        ASSERT_OK(exec_req("{\"cmd\":[\"echo\",\"hi there\"]}", &x, &e));
        ASSERT_STREQ(x.agent_json, "{\"argv\":[\"echo\",\"hi there\"]}");
        ASSERT_FALSE(x.background);
        ASSERT_NULL(x.stdin_data);
        assert_agent_accepts(x.agent_json);
        exec_request_done(&x);

        ASSERT_OK(exec_req("{\"shell\":\"echo $HOME | wc -c\",\"env\":{\"A\":\"b\"},\"cwd\":\"/tmp\",\"user\":\"nobody\","
                           "\"timeout_s\":5,\"background\":true}",
                           &x, &e));
        ASSERT_STREQ(x.agent_json, "{\"shell\":\"echo $HOME | wc -c\",\"env\":{\"A\":\"b\"},\"cwd\":\"/tmp\","
                                   "\"user\":\"nobody\",\"timeout_ms\":5000,\"background\":true}");
        ASSERT_TRUE(x.background);
        assert_agent_accepts(x.agent_json);
        exec_request_done(&x);

        ASSERT_OK(exec_req("{\"cmd\":[\"cat\"],\"stdin\":\"abc\\u0000d\",\"user\":1000}", &x, &e));
        ASSERT_STREQ(x.agent_json, "{\"argv\":[\"cat\"],\"user\":1000,\"stdin\":true}");
        ASSERT_EQ(x.stdin_len, 5);
        ASSERT_TRUE(memcmp(x.stdin_data, "abc\0d", 5) == 0);
        ASSERT_FALSE(x.keep_stdin);
        assert_agent_accepts(x.agent_json);
        exec_request_done(&x);

        ASSERT_OK(exec_req("{\"cmd\":[\"sh\"],\"stdin\":true,\"pty\":{\"rows\":50,\"cols\":132}}", &x, &e));
        ASSERT_STREQ(x.agent_json, "{\"argv\":[\"sh\"],\"stdin\":true,\"pty\":true,\"rows\":50,\"cols\":132}");
        ASSERT_TRUE(x.keep_stdin);
        assert_agent_accepts(x.agent_json);
        exec_request_done(&x);

        ASSERT_OK(exec_req("{\"cmd\":[\"sh\"],\"pty\":true}", &x, &e));
        ASSERT_STREQ(x.agent_json, "{\"argv\":[\"sh\"],\"pty\":true}");
        assert_agent_accepts(x.agent_json);
        exec_request_done(&x);
}

#define ASSERT_EXEC_FAILS(json, want_code, msg)                      \
        do {                                                    \
                ExecRequest _x = {};                            \
                ApiError _e = {};                               \
                ASSERT_TRUE(exec_req(json, &_x, &_e) < 0);      \
                ASSERT_EQ(_e.code, want_code);                       \
                ASSERT_STREQ(_e.message, msg);                  \
                ASSERT_NULL(_x.agent_json);                     \
        } while (0)

TEST(exec_errors) {
        ASSERT_EXEC_FAILS("{}", API_INVALID_ARGUMENT, "cmd (an array of strings) or shell is required");
        ASSERT_EXEC_FAILS("{\"cmd\":[\"a\"],\"shell\":\"b\"}", API_INVALID_ARGUMENT, "give either cmd or shell, not both");
        ASSERT_EXEC_FAILS("{\"cmd\":[]}", API_INVALID_ARGUMENT, "cmd must be a non-empty array of strings");
        ASSERT_EXEC_FAILS("{\"cmd\":\"ls\"}", API_INVALID_ARGUMENT, "cmd must be a non-empty array of strings");
        ASSERT_EXEC_FAILS("{\"cmd\":[\"ls\",1]}", API_INVALID_ARGUMENT, "cmd[1] must be a string");
        ASSERT_EXEC_FAILS("{\"cmd\":[\"\"]}", API_INVALID_ARGUMENT, "cmd[0] must not be empty");
        ASSERT_EXEC_FAILS("{\"cmd\":[\"a\\u0000b\"]}", API_INVALID_ARGUMENT, "cmd[0] contains a NUL byte");
        ASSERT_EXEC_FAILS("{\"shell\":\"\"}", API_INVALID_ARGUMENT, "shell must be a non-empty string");
        ASSERT_EXEC_FAILS("{\"shell\":\"x\",\"tty\":true}", API_UNKNOWN_FIELD, "unknown field 'tty'");
        ASSERT_EXEC_FAILS("{\"shell\":\"x\",\"cwd\":\"/a/../b\"}", API_INVALID_PATH,
                          "cwd must not contain a '..' component");
        ASSERT_EXEC_FAILS("{\"shell\":\"x\",\"cwd\":5}", API_INVALID_ARGUMENT, "cwd must be a string");
        ASSERT_EXEC_FAILS("{\"shell\":\"x\",\"user\":\"Root;\"}", API_INVALID_ARGUMENT,
                          "user: 'Root;' is not a valid user name");
        ASSERT_EXEC_FAILS("{\"shell\":\"x\",\"user\":-1}", API_INVALID_ARGUMENT, "user must be a user name or a uid");
        ASSERT_EXEC_FAILS("{\"shell\":\"x\",\"stdin\":5}", API_INVALID_ARGUMENT,
                          "stdin must be a string (fed, then closed) or true (kept open)");
        ASSERT_EXEC_FAILS("{\"shell\":\"x\",\"stdin\":\"abc\",\"timeout_s\":-1}", API_INVALID_ARGUMENT,
                          "timeout_s must be a non-negative integer");
        ASSERT_EXEC_FAILS("{\"shell\":\"x\",\"background\":1}", API_INVALID_ARGUMENT, "background must be true or false");
        ASSERT_EXEC_FAILS("{\"shell\":\"x\",\"pty\":\"yes\"}", API_INVALID_ARGUMENT,
                          "pty must be true, false or {\"rows\":N,\"cols\":N}");
        ASSERT_EXEC_FAILS("{\"shell\":\"x\",\"pty\":{\"rows\":0}}", API_INVALID_ARGUMENT,
                          "rows must be between 1 and 1000, not 0");
        ASSERT_EXEC_FAILS("{\"shell\":\"x\",\"pty\":{\"width\":80}}", API_UNKNOWN_FIELD, "unknown field 'pty.width'");
        ASSERT_EXEC_FAILS("{\"shell\":\"x\",\"env\":{\"A\":null}}", API_INVALID_ARGUMENT,
                          "env: the value of 'A' must be a string");
        ASSERT_EXEC_FAILS("{\"shell\":\"x\",\"output\":\"hex\"}", API_INVALID_ARGUMENT,
                          "output must be \"text\", \"base64\" or \"frames\"");
        ASSERT_EXEC_FAILS("{\"shell\":\"x\",\"output\":true}", API_INVALID_ARGUMENT,
                          "output must be \"text\", \"base64\" or \"frames\"");
        ASSERT_EXEC_FAILS("{\"shell\":\"x\",\"on_disconnect\":\"detach\"}", API_INVALID_ARGUMENT,
                          "on_disconnect must be \"keep\", \"hangup\" or \"kill\"");
}

TEST(exec_output_and_disconnect) {
        ExecRequest x = {};
        ApiError e = {};

        ASSERT_OK(exec_req("{\"cmd\":[\"true\"]}", &x, &e));
        ASSERT_EQ(x.output, EXEC_OUTPUT_TEXT);
        exec_request_done(&x);
        ASSERT_OK(exec_req("{\"cmd\":[\"true\"],\"output\":\"frames\",\"on_disconnect\":\"kill\"}", &x, &e));
        ASSERT_EQ(x.output, EXEC_OUTPUT_FRAMES);
        /* on_disconnect goes to the agent; the output form stays with the API */
        ASSERT_STREQ(x.agent_json, "{\"argv\":[\"true\"],\"on_disconnect\":\"kill\"}");
        assert_agent_accepts(x.agent_json);
        exec_request_done(&x);
        ASSERT_STREQ(exec_output_to_string(EXEC_OUTPUT_BASE64), "base64");
        ASSERT_EQ(exec_output_from_string("base64"), EXEC_OUTPUT_BASE64);
        ASSERT_EQ(exec_output_from_string("raw"), _EXEC_OUTPUT_INVALID);
        ASSERT_STREQ(exec_output_content_type(EXEC_OUTPUT_FRAMES), "application/vnd.space.exec-frames");
}

TEST(signals) {
        ASSERT_STREQ(api_signal_name("SIGTERM"), "SIGTERM");
        ASSERT_STREQ(api_signal_name("KILL"), "SIGKILL");
        ASSERT_STREQ(api_signal_name("SIGWINCH"), "SIGWINCH");
        ASSERT_NULL(api_signal_name("SIGSEGV"));
        ASSERT_NULL(api_signal_name("sigterm"));
        ASSERT_NULL(api_signal_name("15"));
        ASSERT_NULL(api_signal_name(""));
        ASSERT_NULL(api_signal_name("SIG"));
        ASSERT_NULL(api_signal_name(NULL));
        /* every name we accept is one the agent knows */
        ASSERT_TRUE(proto_signal_from_string(api_signal_name("HUP")) > 0);
        ASSERT_TRUE(proto_signal_from_string(api_signal_name("SIGSTOP")) > 0);
}

/* ---- times ---- */

TEST(times) {
        char buf[JSON_OUT_TIME_MAX];
        int64_t t;

        json_out_time(0, buf);
        ASSERT_STREQ(buf, "1970-01-01T00:00:00.000Z");
        json_out_time(INT64_C(1795914123456789), buf);
        ASSERT_STREQ(buf, "2026-11-29T01:02:03.456Z");
        json_out_time(-1000, buf); /* before the epoch: floor, not truncation */
        ASSERT_STREQ(buf, "1969-12-31T23:59:59.999Z");

        ASSERT_OK(api_parse_time("2026-11-29T01:02:03.456Z", &t));
        ASSERT_EQ(t, INT64_C(1795914123456000));
        ASSERT_OK(api_parse_time("2026-11-29T01:02:03Z", &t));
        ASSERT_EQ(t, INT64_C(1795914123000000));
        ASSERT_OK(api_parse_time("2026-11-29T03:02:03.456789+02:00", &t));
        ASSERT_EQ(t, INT64_C(1795914123456789));
        ASSERT_OK(api_parse_time("2026-11-29t00:32:03.5-00:30", &t));
        ASSERT_EQ(t, INT64_C(1795914123500000));
        ASSERT_OK(api_parse_time("1970-01-01T00:00:00Z", &t));
        ASSERT_EQ(t, 0);
        ASSERT_OK(api_parse_time("2024-02-29T00:00:00Z", &t));
        ASSERT_OK(api_parse_time("2016-12-31T23:59:60Z", &t)); /* leap second */

        ASSERT_ERRNO(api_parse_time("2026-11-28", &t), EINVAL);
        ASSERT_ERRNO(api_parse_time("2026-11-29T01:02:03", &t), EINVAL); /* no zone */
        ASSERT_ERRNO(api_parse_time("2026-13-01T00:00:00Z", &t), EINVAL);
        ASSERT_ERRNO(api_parse_time("2026-02-29T00:00:00Z", &t), EINVAL);
        ASSERT_ERRNO(api_parse_time("2026-04-31T00:00:00Z", &t), EINVAL);
        ASSERT_ERRNO(api_parse_time("2026-11-28T24:00:00Z", &t), EINVAL);
        ASSERT_ERRNO(api_parse_time("2026-11-29T01:02:03.Z", &t), EINVAL);
        ASSERT_ERRNO(api_parse_time("2026-11-29T01:02:03.1234567890Z", &t), EINVAL);
        ASSERT_ERRNO(api_parse_time("2026-11-29T01:02:03Zjunk", &t), EINVAL);
        ASSERT_ERRNO(api_parse_time("2026-11-29T01:02:03+0200", &t), EINVAL);
        ASSERT_ERRNO(api_parse_time("", &t), EINVAL);
        ASSERT_ERRNO(api_parse_time("1795914123", &t), EINVAL);
}

/* ---- output shapes ---- */

TEST(sandbox_json) {
        Sandbox sb = {
                .id = "s3k9x0a1b2c3d4e5",
                .tenant_id = "t_1",
                .template_name = "base",
                .runtime = "ns",
                .worker = "local",
                .state = SANDBOX_RUNNING,
                .cpu_millis = 1500,
                .memory_mb = 512,
                .disk_mb = 2048,
                .pids_max = 1024,
                .created_usec = INT64_C(1795914123456000),
        };
        _cleanup_free_ char *text = NULL;
        JsonWriter w;

        json_w_init(&w);
        json_out_sandbox(&w, &sb, "default");
        text = finish(&w);
        ASSERT_STREQ(text, "{\"id\":\"s3k9x0a1b2c3d4e5\",\"tenant\":\"default\",\"state\":\"running\",\"reason\":\"\","
                           "\"template\":\"base\",\"template_version\":0,"
                           "\"runtime\":\"ns\",\"worker\":\"local\",\"cpu\":1.5,"
                           "\"memory_mb\":512,\"disk_mb\":2048,\"pids_max\":1024,\"io_weight\":0,\"timeout_s\":0,"
                           "\"created_at\":\"2026-11-29T01:02:03.456Z\",\"expires_at\":null,\"env\":{},"
                           "\"metadata\":{},\"parent\":null,\"parent_checkpoint\":null,\"processes_preserved\":false,"
                           "\"idle_s\":0,\"idle_action\":null,\"checkpoint_every_s\":0,\"checkpoints_max\":0,"
                           "\"checkpoints_mb\":0,\"checkpoints\":0,\"auto_resume\":false,\"public_traffic\":false,"
                           "\"last_activity_at\":null,\"network\":{\"allow\":[],\"deny\":[]}}");
        free(text);

        sb.state = SANDBOX_DELETED;
        snprintf(sb.reason, sizeof sb.reason, "deleted by key:key_x");
        sb.cpu_millis = 1000;
        sb.timeout_s = 60;
        sb.expires_usec = INT64_C(1795914183456000);
        sb.env_json = (char *) "{\"A\":\"1\"}";
        sb.metadata_json = (char *) "not json"; /* a broken stored value does not break the output */
        sb.network_json = (char *) "{\"allow\":[{\"host\":\"PyPI.org\",\"ports\":[443]}]}";
        snprintf(sb.parent_id, sizeof sb.parent_id, "abcdefghijklmnop");
        snprintf(sb.parent_checkpoint, sizeof sb.parent_checkpoint, "ckabcdefghijklmn");
        sb.processes_preserved = true;
        sb.idle_s = 30;
        sb.idle_action = IDLE_ACTION_SUSPEND;
        sb.checkpoint_every_s = 600;
        sb.checkpoints_max = 10;
        sb.checkpoints_mb = 2048;
        sb.checkpoints = 3;
        sb.auto_resume = true;
        sb.public_traffic = true;
        sb.last_activity_usec = INT64_C(1795914183456000);
        json_w_init(&w);
        json_out_sandbox(&w, &sb, "acme");
        text = finish(&w);
        ASSERT_STREQ(text, "{\"id\":\"s3k9x0a1b2c3d4e5\",\"tenant\":\"acme\",\"state\":\"deleted\","
                           "\"reason\":\"deleted by key:key_x\",\"template\":\"base\",\"template_version\":0,"
                           "\"runtime\":\"ns\","
                           "\"worker\":\"local\",\"cpu\":1,\"memory_mb\":512,\"disk_mb\":2048,\"pids_max\":1024,"
                           "\"io_weight\":0,\"timeout_s\":60,\"created_at\":\"2026-11-29T01:02:03.456Z\","
                           "\"expires_at\":\"2026-11-29T01:03:03.456Z\",\"env\":{\"A\":\"1\"},\"metadata\":{},"
                           "\"parent\":\"abcdefghijklmnop\",\"parent_checkpoint\":\"ckabcdefghijklmn\","
                           "\"processes_preserved\":true,\"idle_s\":30,\"idle_action\":\"suspend\","
                           "\"checkpoint_every_s\":600,\"checkpoints_max\":10,\"checkpoints_mb\":2048,"
                           "\"checkpoints\":3,\"auto_resume\":true,\"public_traffic\":true,\"last_activity_at\":\"2026-11-29T01:03:03.456Z\","
                           "\"network\":{\"allow\":[{\"host\":\"pypi.org\",\"ports\":[443]}],\"deny\":[]}}");
}

TEST(other_json) {
        Template t = { .name = "base", .state = TEMPLATE_READY, .size_bytes = 123456789, .created_usec = 1000 };
        ApiKey k = { .id = "key_ab12cd34ef", .tenant_id = "t", .hash = "x", .name = "ci", .admin = true,
                     .created_usec = 2000 };
        Event ev = { .seq = 42, .time_usec = 3000, .type = "sandbox.created", .actor = "key:key_ab12cd34ef",
                     .sandbox_id = "s3k9x0a1b2c3d4e5" };
        ApiError err = { .code = API_NOT_FOUND, .message = "no sandbox 'x'" };
        _cleanup_free_ char *text = NULL;
        JsonWriter w;

        json_w_init(&w);
        json_out_template(&w, &t, 3);
        text = finish(&w);
        ASSERT_STREQ(text, "{\"name\":\"base\",\"state\":\"ready\",\"size_bytes\":123456789,"
                           "\"created_at\":\"1970-01-01T00:00:00.001Z\",\"in_use\":3,\"runtime\":null,\"start\":null}");
        free(text);

        json_w_init(&w);
        json_out_key(&w, &k, "acme");
        text = finish(&w);
        /* never the hash */
        ASSERT_STREQ(text, "{\"id\":\"key_ab12cd34ef\",\"tenant\":\"acme\",\"name\":\"ci\",\"admin\":true,"
                           "\"created_at\":\"1970-01-01T00:00:00.002Z\"}");
        free(text);

        json_w_init(&w);
        json_out_event(&w, &ev, "default");
        text = finish(&w);
        ASSERT_STREQ(text, "{\"seq\":42,\"time\":\"1970-01-01T00:00:00.003Z\",\"tenant\":\"default\","
                           "\"sandbox\":\"s3k9x0a1b2c3d4e5\",\"type\":\"sandbox.created\","
                           "\"actor\":\"key:key_ab12cd34ef\",\"reason\":\"\",\"data\":{}}");
        free(text);

        ev.sandbox_id[0] = 0;
        ev.data_json = (char *) "{\"name\":\"base\",\"size_bytes\":1}";
        snprintf(ev.type, sizeof ev.type, "template.imported");
        json_w_init(&w);
        json_out_event(&w, &ev, "");
        text = finish(&w);
        ASSERT_STREQ(text, "{\"seq\":42,\"time\":\"1970-01-01T00:00:00.003Z\",\"tenant\":\"\",\"sandbox\":null,"
                           "\"type\":\"template.imported\",\"actor\":\"key:key_ab12cd34ef\",\"reason\":\"\","
                           "\"data\":{\"name\":\"base\",\"size_bytes\":1}}");
        free(text);

        json_w_init(&w);
        json_out_error(&w, &err);
        text = finish(&w);
        ASSERT_STREQ(text, "{\"error\":{\"code\":\"not_found\",\"message\":\"no sandbox 'x'\"}}");
}

/* ---- what the agent sends ---- */

static char *entry_json(const char *agent) {
        _cleanup_json_ JsonValue *v = parse(agent);
        JsonWriter w;
        json_w_init(&w);
        if (json_out_file_entry(&w, v) < 0) {
                json_w_done(&w);
                return NULL;
        }
        return finish(&w);
}

TEST(file_entries) {
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL;

        a = entry_json("{\"name\":\"a\",\"path\":\"/d/a\",\"type\":\"file\",\"size\":5,\"mode\":33188,"
                       "\"mtime_ns\":1795914123456789000,\"uid\":0,\"gid\":0}");
        ASSERT_STREQ(a, "{\"name\":\"a\",\"path\":\"/d/a\",\"type\":\"file\",\"size\":5,\"mode\":420,"
                        "\"mtime\":\"2026-11-29T01:02:03.456Z\",\"uid\":0,\"gid\":0}");
        b = entry_json("{\"name\":\"l\",\"path\":\"/d/l\",\"type\":\"symlink\",\"size\":1,\"mode\":511,"
                       "\"mtime_ns\":0,\"uid\":1000,\"gid\":1000,\"target\":\"../x\"}");
        ASSERT_STREQ(b, "{\"name\":\"l\",\"path\":\"/d/l\",\"type\":\"symlink\",\"size\":1,\"mode\":511,"
                        "\"mtime\":null,\"uid\":1000,\"gid\":1000,\"target\":\"../x\"}");
        /* an unknown type is reported as other; unknown keys are dropped */
        c = entry_json("{\"name\":\"s\",\"path\":\"/s\",\"type\":\"socket\",\"size\":0,\"mode\":0,\"uid\":0,"
                       "\"gid\":0,\"evil\":\"<script>\"}");
        ASSERT_STREQ(c, "{\"name\":\"s\",\"path\":\"/s\",\"type\":\"other\",\"size\":0,\"mode\":0,"
                        "\"mtime\":null,\"uid\":0,\"gid\":0}");

        ASSERT_NULL(entry_json("[]"));
        ASSERT_NULL(entry_json("{\"path\":\"/a\",\"type\":\"file\",\"size\":5,\"mode\":0,\"uid\":0,\"gid\":0}"));
        ASSERT_NULL(entry_json("{\"name\":\"a\",\"path\":\"/a\",\"type\":\"file\",\"size\":-5,\"mode\":0,\"uid\":0,"
                               "\"gid\":0}"));
        ASSERT_NULL(entry_json("{\"name\":\"a\",\"path\":\"/a\",\"type\":\"file\",\"size\":5,\"mode\":0,"
                               "\"uid\":4294967296,\"gid\":0}"));
        ASSERT_NULL(entry_json("{\"name\":\"a\\u0000b\",\"path\":\"/a\",\"type\":\"file\",\"size\":5,\"mode\":0,"
                               "\"uid\":0,\"gid\":0}"));
        ASSERT_NULL(entry_json("{\"name\":\"a\",\"path\":\"/a\",\"type\":\"file\",\"size\":5,\"mode\":0,\"uid\":0,"
                               "\"gid\":0,\"target\":7}"));
        ASSERT_NULL(entry_json("{\"name\":\"a\",\"path\":\"/a\",\"type\":\"file\",\"size\":5,\"mode\":0,\"uid\":0,"
                               "\"gid\":0,\"mtime_ns\":\"yesterday\"}"));
}

static char *exit_json(const char *agent) {
        _cleanup_json_ JsonValue *v = parse(agent);
        JsonWriter w;
        json_w_init(&w);
        if (json_out_exit(&w, v) < 0) {
                json_w_done(&w);
                return NULL;
        }
        return finish(&w);
}

TEST(exit_and_processes) {
        _cleanup_free_ char *a = NULL, *b = NULL, *p = NULL;
        _cleanup_json_ JsonValue *proc = NULL, *bad = NULL;
        JsonWriter w;

        a = exit_json("{\"code\":3}");
        ASSERT_STREQ(a, "{\"type\":\"exit\",\"code\":3}");
        b = exit_json("{\"signal\":\"SIGKILL\",\"code\":137,\"reason\":\"timeout\"}");
        ASSERT_STREQ(b, "{\"type\":\"exit\",\"code\":137,\"signal\":\"SIGKILL\",\"reason\":\"timeout\"}");
        ASSERT_NULL(exit_json("{}"));
        ASSERT_NULL(exit_json("{\"code\":256}"));
        ASSERT_NULL(exit_json("{\"code\":-1}"));
        ASSERT_NULL(exit_json("{\"code\":1,\"signal\":\"KILL\"}"));
        ASSERT_NULL(exit_json("{\"code\":1,\"signal\":\"SIG\\\"};\"}"));
        ASSERT_NULL(exit_json("{\"code\":1,\"reason\":\"Time Out\"}"));

        proc = parse("{\"exec_id\":\"e1\",\"pid\":12,\"argv\":[\"sleep\",\"9\"],\"pty\":false,\"extra\":1}");
        json_w_init(&w);
        ASSERT_OK(json_out_process(&w, proc));
        p = finish(&w);
        ASSERT_STREQ(p, "{\"exec_id\":\"e1\",\"pid\":12,\"argv\":[\"sleep\",\"9\"],\"pty\":false}");
        bad = parse("{\"exec_id\":\"e1\",\"pid\":12,\"argv\":[1]}");
        json_w_init(&w);
        ASSERT_ERRNO(json_out_process(&w, bad), EBADMSG);
        json_w_done(&w);
}

TEST(exec_output) {
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL;
        JsonWriter w;

        json_w_init(&w);
        json_out_exec_data(&w, "stdout", "hi\n", 3);
        a = finish(&w);
        ASSERT_STREQ(a, "{\"type\":\"stdout\",\"data\":\"hi\\n\"}");
        json_w_init(&w);
        json_out_exec_data(&w, "stderr", "\xff", 1);
        b = finish(&w);
        ASSERT_STREQ(b, "{\"type\":\"stderr\",\"data_b64\":\"/w==\"}");
        json_w_init(&w);
        json_out_exec_data(&w, "stdout", "caf\xc3\xa9", 5);
        c = finish(&w);
        ASSERT_STREQ(c, "{\"type\":\"stdout\",\"data\":\"caf\xc3\xa9\"}");

        ASSERT_EQ(utf8_incomplete_tail("abc", 3), 0);
        ASSERT_EQ(utf8_incomplete_tail("", 0), 0);
        ASSERT_EQ(utf8_incomplete_tail("caf\xc3", 4), 1);          /* é cut after its lead byte */
        ASSERT_EQ(utf8_incomplete_tail("caf\xc3\xa9", 5), 0);      /* complete */
        ASSERT_EQ(utf8_incomplete_tail("x\xe2\x82", 3), 2);         /* € cut after 2 of 3 */
        ASSERT_EQ(utf8_incomplete_tail("x\xf0\x9f\x98", 4), 3);     /* emoji cut after 3 of 4 */
        ASSERT_EQ(utf8_incomplete_tail("x\xf0\x9f\x98\x80", 5), 0); /* complete */
        ASSERT_EQ(utf8_incomplete_tail("\x80\x80\x80", 3), 0);      /* only continuation bytes */
        ASSERT_EQ(utf8_incomplete_tail("a\xff", 2), 0);             /* invalid lead: nothing held */
}

/* ---- agent errors ---- */

static int agent_error(const char *payload, ApiError *e) {
        ProtoFrame f = { .type = PROTO_ERROR, .stream = AGENT_STREAM, .len = (uint32_t) strlen(payload),
                         .payload = (char *) payload };
        return agent_call_error(&f, "'/a'", e);
}

TEST(agent_errors) {
        ApiError e = {};

        ASSERT_ERRNO(agent_error("{\"errno\":2,\"code\":\"ENOENT\",\"message\":\"No such file or directory\"}", &e),
                     ENOENT);
        ASSERT_EQ(e.code, API_NOT_FOUND);
        ASSERT_STREQ(e.message, "'/a': No such file or directory");
        /* a message that names the path already is not prefixed again */
        ASSERT_TRUE(agent_error("{\"code\":\"ENOENT\",\"message\":\"Failed to open '/a': No such file\"}", &e) < 0);
        ASSERT_STREQ(e.message, "Failed to open '/a': No such file");
        ASSERT_TRUE(agent_error("{\"code\":\"EISDIR\"}", &e) < 0);
        ASSERT_EQ(e.code, API_INVALID_PATH);
        ASSERT_STREQ(e.message, "'/a': Is a directory");
        ASSERT_TRUE(agent_error("{\"code\":\"EEXIST\"}", &e) < 0);
        ASSERT_EQ(api_error_code_to_status(e.code), 409);
        ASSERT_TRUE(agent_error("{\"code\":\"EACCES\"}", &e) < 0);
        ASSERT_EQ(api_error_code_to_status(e.code), 403);
        ASSERT_TRUE(agent_error("{\"code\":\"EDQUOT\"}", &e) < 0);
        ASSERT_EQ(e.code, API_INSUFFICIENT_STORAGE);
        ASSERT_TRUE(agent_error("{\"code\":\"ENOSPC\"}", &e) < 0);
        ASSERT_EQ(api_error_code_to_status(e.code), 507);
        ASSERT_TRUE(agent_error("{\"code\":\"ELOOP\"}", &e) < 0);
        ASSERT_EQ(e.code, API_INVALID_PATH);
        ASSERT_TRUE(agent_error("{\"code\":\"ENAMETOOLONG\"}", &e) < 0);
        ASSERT_EQ(e.code, API_INVALID_PATH);
        ASSERT_TRUE(agent_error("{\"code\":\"ENOTDIR\"}", &e) < 0);
        ASSERT_EQ(e.code, API_INVALID_PATH);
        ASSERT_TRUE(agent_error("{\"code\":\"EPERM\"}", &e) < 0);
        ASSERT_EQ(e.code, API_FORBIDDEN);
        /* only the errno number */
        ASSERT_ERRNO(agent_error("{\"errno\":17}", &e), EEXIST);
        /* control bytes in a hostile message are neutralised */
        ASSERT_TRUE(agent_error("{\"code\":\"EIO\",\"message\":\"bad\\nline\\u001b[31m\"}", &e) < 0);
        ASSERT_STREQ(e.message, "'/a': bad line [31m");
        ASSERT_EQ(e.code, API_INTERNAL);
        /* not JSON: the agent misbehaves */
        ASSERT_ERRNO(agent_error("nope", &e), EBADMSG);
        ASSERT_EQ(e.code, API_BAD_GATEWAY);
}

/* ---- keys ---- */

TEST(key_hash) {
        char hash[65], secret[API_KEY_SECRET_LEN + 1], id[API_KEY_ID_LEN + 1];

        api_key_hash("abc", hash);
        ASSERT_STREQ(hash, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        ASSERT_OK(api_key_generate(secret, id));
        ASSERT_EQ(strlen(secret), 43);
        ASSERT_TRUE(strncmp(secret, "sk_", 3) == 0);
        ASSERT_EQ(strspn(secret + 3, "abcdefghijklmnopqrstuvwxyz0123456789"), 40);
        ASSERT_EQ(strlen(id), 14);
        ASSERT_TRUE(strncmp(id, "key_", 4) == 0);
        ASSERT_EQ(strspn(id + 4, "abcdefghijklmnopqrstuvwxyz0123456789"), 10);
}

/* ---- lifecycle requests ---- */

TEST(create_policy_fields) {
        Sandbox sb = {};
        ApiError e = {};

        ASSERT_OK(create("{}", &sb, &e));
        ASSERT_TRUE(sb.processes_preserved);
        ASSERT_EQ(sb.idle_s, 0);
        ASSERT_EQ(sb.idle_action, IDLE_ACTION_NONE);
        ASSERT_OK(create("{\"idle_s\":60}", &sb, &e)); /* idle_s alone: pause */
        ASSERT_EQ(sb.idle_s, 60);
        ASSERT_EQ(sb.idle_action, IDLE_ACTION_PAUSE);
        ASSERT_OK(create("{\"idle_s\":5,\"idle_action\":\"suspend\",\"checkpoint_every_s\":300}", &sb, &e));
        ASSERT_EQ(sb.idle_action, IDLE_ACTION_SUSPEND);
        ASSERT_EQ(sb.checkpoint_every_s, 300);
        sandbox_done(&sb);
        ASSERT_CREATE_FAILS("{\"idle_action\":\"sleep\"}", API_INVALID_ARGUMENT,
                            "idle_action must be \"pause\", \"suspend\" or \"\" (nothing)");
        ASSERT_CREATE_FAILS("{\"idle_s\":-1}", API_INVALID_ARGUMENT, "idle_s must be a non-negative integer");
        ASSERT_CREATE_FAILS("{\"idle_s\":99999999}", API_INVALID_ARGUMENT,
                            "idle_s must be 0 (off) or between 1 and 2592000, not 99999999");
        ASSERT_CREATE_FAILS("{\"checkpoint_every_s\":\"5\"}", API_INVALID_ARGUMENT,
                            "checkpoint_every_s must be a non-negative integer");
}

static int patch(const char *json, const Sandbox *cur, SandboxPolicy *p, ApiError *e) {
        _cleanup_json_ JsonValue *v = parse(json);
        Config c = test_config();
        return api_validate_sandbox_patch(v, &c, cur, 1000000, p, e);
}

TEST(sandbox_patch) {
        Sandbox cur = { .timeout_s = 60, .expires_usec = 555, .idle_s = 10, .idle_action = IDLE_ACTION_SUSPEND,
                        .checkpoint_every_s = 30 };
        SandboxPolicy p;
        ApiError e = {};

        /* what is not given stays */
        ASSERT_OK(patch("{\"checkpoint_every_s\":0}", &cur, &p, &e));
        ASSERT_EQ(p.timeout_s, 60);
        ASSERT_EQ(p.expires_usec, 555);
        ASSERT_EQ(p.idle_s, 10);
        ASSERT_EQ(p.idle_action, IDLE_ACTION_SUSPEND);
        ASSERT_EQ(p.checkpoint_every_s, 0);
        /* a timeout counts from now; 0 = none */
        ASSERT_OK(patch("{\"timeout_s\":120}", &cur, &p, &e));
        ASSERT_EQ(p.timeout_s, 120);
        ASSERT_EQ(p.expires_usec, 1000000 + 120 * 1000000LL);
        ASSERT_OK(patch("{\"timeout_s\":0}", &cur, &p, &e));
        ASSERT_EQ(p.expires_usec, 0);
        /* idle_s alone keeps the action set before; null or "" clears it */
        ASSERT_OK(patch("{\"idle_s\":20}", &cur, &p, &e));
        ASSERT_EQ(p.idle_action, IDLE_ACTION_SUSPEND);
        ASSERT_OK(patch("{\"idle_action\":null}", &cur, &p, &e));
        ASSERT_EQ(p.idle_action, IDLE_ACTION_NONE);
        ASSERT_OK(patch("{\"idle_action\":\"\"}", &cur, &p, &e));
        ASSERT_EQ(p.idle_action, IDLE_ACTION_NONE);

        ASSERT_TRUE(patch("{}", &cur, &p, &e) < 0);
        ASSERT_EQ(e.code, API_INVALID_ARGUMENT);
        ASSERT_TRUE(patch("{\"cpu\":1}", &cur, &p, &e) < 0);
        ASSERT_EQ(e.code, API_UNKNOWN_FIELD);
        ASSERT_TRUE(patch("{\"timeout_s\":99999999999}", &cur, &p, &e) < 0);
        ASSERT_STREQ(e.message, "timeout_s must be at most 2592000, not 99999999999");
        ASSERT_TRUE(patch("{\"timeout_s\":1.5}", &cur, &p, &e) < 0);
        ASSERT_EQ(e.code, API_INVALID_ARGUMENT);
        ASSERT_TRUE(patch("{\"idle_action\":3}", &cur, &p, &e) < 0);
        ASSERT_EQ(e.code, API_INVALID_ARGUMENT);

        /* disk_mb: a new quota, or 0 (unchanged) when it is the same */
        cur.disk_mb = 2048;
        ASSERT_OK(patch("{\"disk_mb\":4096}", &cur, &p, &e));
        ASSERT_EQ(p.disk_mb, 4096);
        ASSERT_EQ(p.timeout_s, 60);
        ASSERT_OK(patch("{\"disk_mb\":2048}", &cur, &p, &e));
        ASSERT_EQ(p.disk_mb, 0);
        ASSERT_OK(patch("{\"timeout_s\":5}", &cur, &p, &e));
        ASSERT_EQ(p.disk_mb, 0);
        ASSERT_TRUE(patch("{\"disk_mb\":8}", &cur, &p, &e) < 0);
        ASSERT_STREQ(e.message, "disk_mb must be between 16 and 262144, not 8");
        ASSERT_TRUE(patch("{\"disk_mb\":262145}", &cur, &p, &e) < 0);
        ASSERT_EQ(e.code, API_INVALID_ARGUMENT);
        ASSERT_TRUE(patch("{\"disk_mb\":\"64\"}", &cur, &p, &e) < 0);
        ASSERT_STREQ(e.message, "disk_mb must be a non-negative integer");
        ASSERT_TRUE(patch("{\"disk_mb\":-1}", &cur, &p, &e) < 0);
        ASSERT_EQ(e.code, API_INVALID_ARGUMENT);
}

TEST(checkpoint_requests) {
        char name[STORE_NAME_MAX];
        const char *ref = NULL;
        uint64_t count = 0;
        Config c = test_config();
        ApiError e = {};
        JsonValue *v;

        ASSERT_TRUE(api_checkpoint_name_valid("before-upgrade.1"));
        ASSERT_TRUE(api_checkpoint_name_valid("A_b"));
        ASSERT_FALSE(api_checkpoint_name_valid("-x"));
        ASSERT_FALSE(api_checkpoint_name_valid(""));
        ASSERT_FALSE(api_checkpoint_name_valid("a/b"));
        ASSERT_FALSE(api_checkpoint_name_valid("a b"));
        ASSERT_FALSE(api_checkpoint_name_valid(NULL));
        char long_name[API_CHECKPOINT_NAME_MAX + 2];
        memset(long_name, 'a', sizeof long_name - 1);
        long_name[sizeof long_name - 1] = 0;
        ASSERT_FALSE(api_checkpoint_name_valid(long_name));
        long_name[API_CHECKPOINT_NAME_MAX] = 0;
        ASSERT_TRUE(api_checkpoint_name_valid(long_name));

        ASSERT_OK(api_validate_checkpoint_create(NULL, name, &e));
        ASSERT_STREQ(name, "");
        v = parse("{\"name\":\"v1\"}");
        ASSERT_OK(api_validate_checkpoint_create(v, name, &e));
        ASSERT_STREQ(name, "v1");
        json_free(v);
        v = parse("{\"name\":\"../x\"}");
        ASSERT_TRUE(api_validate_checkpoint_create(v, name, &e) < 0);
        ASSERT_EQ(e.code, API_INVALID_ARGUMENT);
        json_free(v);
        v = parse("{\"name\":\"a\\u0000b\"}");
        ASSERT_TRUE(api_validate_checkpoint_create(v, name, &e) < 0);
        json_free(v);
        v = parse("{\"label\":\"x\"}");
        ASSERT_TRUE(api_validate_checkpoint_create(v, name, &e) < 0);
        ASSERT_EQ(e.code, API_UNKNOWN_FIELD);
        json_free(v);

        v = parse("{\"checkpoint\":\"abc\"}");
        ASSERT_OK(api_validate_restore(v, &ref, &e));
        ASSERT_STREQ(ref, "abc");
        json_free(v);
        v = parse("{}");
        ASSERT_TRUE(api_validate_restore(v, &ref, &e) < 0);
        ASSERT_STREQ(e.message, "checkpoint (a checkpoint id or name) is required");
        json_free(v);
        v = parse("{\"checkpoint\":7}");
        ASSERT_TRUE(api_validate_restore(v, &ref, &e) < 0);
        json_free(v);

        v = parse("{}");
        ASSERT_OK(api_validate_branch(v, &c, &count, &ref, &e));
        ASSERT_EQ(count, 1);
        ASSERT_NULL(ref);
        json_free(v);
        v = parse("{\"count\":16,\"from\":\"ck1\",\"with_memory\":false}");
        ASSERT_OK(api_validate_branch(v, &c, &count, &ref, &e));
        ASSERT_EQ(count, 16);
        ASSERT_STREQ(ref, "ck1");
        json_free(v);
        v = parse("{\"count\":0}");
        ASSERT_TRUE(api_validate_branch(v, &c, &count, &ref, &e) < 0);
        ASSERT_STREQ(e.message, "count must be between 1 and 16 (max_branch), not 0");
        json_free(v);
        v = parse("{\"count\":17}");
        ASSERT_TRUE(api_validate_branch(v, &c, &count, &ref, &e) < 0);
        json_free(v);
        v = parse("{\"with_memory\":true}");
        ASSERT_OK(api_validate_branch(v, &c, &count, &ref, &e)); /* the sandbox's runtime decides (vm only) */
        json_free(v);
        v = parse("{\"with_memory\":\"yes\"}");
        ASSERT_TRUE(api_validate_branch(v, &c, &count, &ref, &e) < 0);
        ASSERT_EQ(e.code, API_INVALID_ARGUMENT);
        ASSERT_STREQ(e.message, "with_memory must be true or false");
        json_free(v);
        v = parse("{\"with_memory\":1}");
        ASSERT_TRUE(api_validate_checkpoint_create(v, name, &e) < 0);
        ASSERT_STREQ(e.message, "with_memory must be true or false");
        json_free(v);
        v = parse("{\"name\":\"m\",\"with_memory\":true}");
        ASSERT_OK(api_validate_checkpoint_create(v, name, &e));
        json_free(v);
        v = parse("{\"from\":\"\"}");
        ASSERT_TRUE(api_validate_branch(v, &c, &count, &ref, &e) < 0);
        json_free(v);
}

TEST(exec_env_merge) {
        ExecRequest x = {};
        ApiError e = {};

        /* the sandbox's env under the request's */
        ASSERT_OK(exec_req("{\"cmd\":[\"env\"],\"env\":{\"A\":\"req\",\"C\":\"3\"}}", &x, &e));
        ASSERT_OK(api_exec_merge_env(&x, "{\"A\":\"sb\",\"B\":\"2\"}", &e));
        ASSERT_STREQ(x.agent_json, "{\"argv\":[\"env\"],\"env\":{\"B\":\"2\",\"A\":\"req\",\"C\":\"3\"}}");
        assert_agent_accepts(x.agent_json);
        exec_request_done(&x);
        /* no request env: the sandbox's */
        ASSERT_OK(exec_req("{\"shell\":\"true\",\"timeout_s\":2}", &x, &e));
        ASSERT_OK(api_exec_merge_env(&x, "{\"B\":\"2\"}", &e));
        ASSERT_STREQ(x.agent_json, "{\"shell\":\"true\",\"timeout_ms\":2000,\"env\":{\"B\":\"2\"}}");
        assert_agent_accepts(x.agent_json);
        exec_request_done(&x);
        /* no sandbox env: unchanged */
        ASSERT_OK(exec_req("{\"shell\":\"true\"}", &x, &e));
        ASSERT_OK(api_exec_merge_env(&x, NULL, &e));
        ASSERT_OK(api_exec_merge_env(&x, "{}", &e));
        ASSERT_STREQ(x.agent_json, "{\"shell\":\"true\"}");
        ASSERT_TRUE(api_exec_merge_env(&x, "[1]", &e) < 0);
        ASSERT_EQ(e.code, API_INTERNAL);
        exec_request_done(&x);
}

/* ---- openapi.yaml stays in step with the router and the error table ---- */

TEST(openapi_in_step) {
        _cleanup_free_ char *yaml = NULL;
        const char *enum_start, *enum_end;
        size_t n_codes = 0;

        ASSERT_OK(read_full_file(SPACE_SOURCE_ROOT "/src/api/openapi.yaml", 1024 * 1024, &yaml, NULL));

        for (size_t i = 0; i < api_route_count(); i++) {
                const char *method, *pattern, *block, *end;
                char key[256], op[32];

                api_route_get(i, &method, &pattern);
                snprintf(key, sizeof key, "\n  %s:\n", pattern);
                block = strstr(yaml, key);
                if (!block)
                        test_fail(__FILE__, __LINE__, "openapi.yaml lacks the path %s", pattern);
                block += strlen(key);
                /* the path's block ends at the next path or at components */
                end = block;
                while ((end = strstr(end, "\n  ")) && end[3] == ' ')
                        end++;
                snprintf(op, sizeof op, "\n    %s:", method);
                for (char *c = op; *c; c++)
                        *c = (char) (*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
                {
                        const char *found = strstr(block - 1, op);
                        if (!found || (end && found > end))
                                test_fail(__FILE__, __LINE__, "openapi.yaml lacks %s %s", method, pattern);
                }
        }

        enum_start = strstr(yaml, "description: The code table of src/shared/api-error.c");
        ASSERT_NOT_NULL(enum_start);
        enum_end = strstr(enum_start, "message:");
        ASSERT_NOT_NULL(enum_end);
        for (const char *p = enum_start; (p = strstr(p, "- ")) && p < enum_end; p += 2)
                n_codes++;
        ASSERT_EQ(n_codes, _API_ERROR_CODE_MAX);
        for (int c = 0; c < _API_ERROR_CODE_MAX; c++) {
                char line[64];
                const char *found;
                snprintf(line, sizeof line, "- %s\n", api_error_code_to_string((ApiErrorCode) c));
                found = strstr(enum_start, line);
                if (!found || found > enum_end)
                        test_fail(__FILE__, __LINE__, "the Error.code enum lacks %s", line);
        }
}
