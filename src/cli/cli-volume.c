/* SPDX-License-Identifier: MIT */
/* space volume create NAME [--size MB] | clone NAME NEW | snapshot NAME SNAP | ls | show NAME |
 * rm NAME...: /v1/volumes. And the --volume NAME:/path[:ro] of space create
 * (cli_volume_write_mount). */

#include "cli-common.h"
#include "cli-verbs.h"

enum {
        OPT_SIZE = 1,
};

static const CliOption create_options[] = {
        { "size", 0, true, OPT_SIZE },
        { "size-mb", 0, true, OPT_SIZE },
        {},
};

static int volume_create(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_free_ char *body = NULL;
        const char *arg = NULL;
        uint64_t size = 0;
        bool have_size = false;
        size_t body_len;
        int r;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, create_options, &arg)) > 0)
                if (r == OPT_SIZE) {
                        if (cli_parse_u64("size", arg, &size) < 0)
                                return -EINVAL;
                        have_size = true;
                }
        r = cli_parser_end(&p, r, 1, 1);
        if (r <= 0)
                return r;
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "name", p.pos[0]);
        if (have_size) {
                json_w_key(&w, "size_mb");
                json_w_uint(&w, size);
        }
        json_w_object_end(&w);
        r = json_w_finish(&w, &body, &body_len);
        if (r < 0)
                return cli_error_errno(r, "out of memory");
        r = cli_call("POST", "/v1/volumes", body, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        printf("%s\n", strna(json_string(json_get(resp.json, "name"))));
        return 0;
}

/* space volume clone NAME NEW / snapshot NAME SNAP: a writable or a read-only copy, made at once */
static int volume_copy(int argc, char **argv, const char *verb) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_free_ char *body = NULL, *path = NULL, *name = NULL;
        size_t body_len;
        int r;

        r = cli_parser_positionals(&p, argc, argv, 2, 2);
        if (r <= 0)
                return r;
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "name", p.pos[1]);
        json_w_object_end(&w);
        r = json_w_finish(&w, &body, &body_len);
        if (r < 0)
                return cli_error_errno(r, "out of memory");
        name = cli_escape(p.pos[0]);
        path = name ? strjoin("/v1/volumes/", name, verb) : NULL;
        if (!path)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = cli_call("POST", path, body, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        printf("%s\n", strna(json_string(json_get(resp.json, "name"))));
        return 0;
}

static int volume_clone(int argc, char **argv) {
        return volume_copy(argc, argv, "/clone");
}

static int volume_snapshot(int argc, char **argv) {
        return volume_copy(argc, argv, "/snapshot");
}

static void volume_row(const JsonValue *v, char **c) {
        const JsonValue *src = json_get(v, "source");
        bool ro = false;

        (void) json_bool(json_get(v, "read_only"), &ro);
        c[0] = cli_field_text(v, "name");
        c[1] = cli_field_text(v, "size_mb");
        c[2] = strdup(ro ? "snapshot" : json_type(src) == JSON_STRING ? "clone" : "volume");
        c[3] = json_type(src) == JSON_STRING ? strdup(json_string(src)) : strdup("-");
        c[4] = cli_field_text(v, "readers");
        c[5] = cli_field_text(v, "writers");
        c[6] = cli_field_text(v, "worker");
        c[7] = cli_time_text(json_get(v, "created_at"));
}

static int volume_ls(int argc, char **argv) {
        static const char *const header[] = { "NAME", "SIZE_MB", "KIND", "SOURCE", "READERS", "WRITERS", "WORKER",
                                              "CREATED" };
        return cli_list_verb(argc, argv, "/v1/volumes", "volumes", "volume", header, ELEMENTSOF(header), volume_row,
                             NULL);
}

static int volume_show(int argc, char **argv) {
        return cli_object_verb(argc, argv, "GET", "/v1/volumes/", NULL, NULL);
}

static int volume_rm(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        int r;

        r = cli_parser_positionals(&p, argc, argv, 1, SIZE_MAX);
        if (r <= 0)
                return r;
        return cli_call_each(&p, 0, "DELETE", "/v1/volumes/", false);
}

int cli_volume(int argc, char **argv) {
        static const CliSubcommand sub[] = {
                { "create", volume_create },
                { "clone", volume_clone },
                { "snapshot", volume_snapshot },
                { "ls", volume_ls },
                { "show", volume_show },
                { "rm", volume_rm },
        };

        return cli_run_subcommand("volume", sub, ELEMENTSOF(sub), argc, argv);
}

int cli_volume_write_mount(JsonWriter *w, const char *spec) {
        const char *colon = strchr(spec, ':'), *path, *end;
        _cleanup_free_ char *name = NULL, *p = NULL;
        bool ro = false;

        if (!colon || colon == spec || colon[1] != '/')
                return cli_usage_error("--volume: expected NAME:/path[:ro], got '%s'", spec);
        path = colon + 1;
        end = strrchr(path, ':');
        if (end) {
                if (streq(end, ":ro"))
                        ro = true;
                else if (!streq(end, ":rw"))
                        return cli_usage_error("--volume: the mode after the path is ro or rw, got '%s'", end + 1);
        } else
                end = path + strlen(path);
        name = strndup(spec, (size_t) (colon - spec));
        p = strndup(path, (size_t) (end - path));
        if (!name || !p)
                return cli_error_errno(-ENOMEM, "out of memory");
        json_w_object_begin(w);
        json_w_kv_string(w, "name", name);
        json_w_kv_string(w, "path", p);
        json_w_kv_bool(w, "read_only", ro);
        json_w_object_end(w);
        return 0;
}
