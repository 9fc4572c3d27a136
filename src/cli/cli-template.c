/* SPDX-License-Identifier: MIT */
/* space template ls | import NAME SRC | pull NAME REF | rm NAME: /v1/templates.
 * import streams a tar archive: a directory is packed by a tar child process,
 * a file is sent as is, '-' reads the archive from stdin. Nothing is held in memory.
 * SRC may name an image: oci-layout:DIR[:TAG] (an OCI image layout directory,
 * packed like a directory), oci-archive:FILE[:TAG] (such a layout in a tar),
 * docker-archive:FILE[:TAG] (what docker/podman save write); the server tells
 * the formats apart, TAG picks an image (?tag=). pull has the server fetch
 * an image from its registry (POST /v1/templates/NAME/pull), logging in with
 * a stored credential named by --credential. */

#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cli-common.h"
#include "cli-child.h"
#include "cli-progress.h"
#include "cli-verbs.h"
#include "fd-util.h"

static void template_row(const JsonValue *tp, char **c) {
        uint64_t size;
        char sbuf[32] = "-";

        if (json_uint64(json_get(tp, "size_bytes"), &size) >= 0)
                cli_format_size(size, sbuf, sizeof sbuf);
        c[0] = cli_field_text(tp, "name");
        c[1] = cli_field_text(tp, "state");
        c[2] = strdup(sbuf);
        c[3] = cli_field_text(tp, "in_use");
        c[4] = cli_time_text(json_get(tp, "created_at"));
}

static int template_ls(int argc, char **argv) {
        static const char *const header[] = { "NAME", "STATE", "SIZE", "IN_USE", "CREATED" };
        return cli_list_verb(argc, argv, "/v1/templates", "templates", "template", header, ELEMENTSOF(header),
                             template_row, NULL);
}

static int tar_spawn(const char *dir, CliChild *child, int *ret_fd) {
        char *const argv[] = { (char *) "tar", (char *) "-C", (char *) dir, (char *) "--numeric-owner",
                               (char *) "-cf", (char *) "-", (char *) ".", NULL };
        return cli_child_spawn(argv, false, child, ret_fd);
}

/* "oci-layout:DIR[:TAG]", "oci-archive:FILE[:TAG]", "docker-archive:FILE[:TAG]":
 * *ret_kind the prefix (NULL for a plain source), the path and the tag. A
 * ":TAG" is split off only when the whole rest is not an existing path. */
static int image_source_split(const char *src, const char **ret_kind, char **ret_path, char **ret_tag) {
        static const char *const kinds[] = { "oci-layout", "oci-archive", "docker-archive" };
        struct stat st;

        *ret_kind = NULL;
        for (size_t i = 0; i < ELEMENTSOF(kinds); i++) {
                size_t n = strlen(kinds[i]);
                const char *rest, *colon;

                if (strncmp(src, kinds[i], n) != 0 || src[n] != ':')
                        continue;
                rest = src + n + 1;
                if (!*rest)
                        return cli_error("%s: names no path", src);
                colon = strrchr(rest, ':');
                if (colon && colon > rest && colon[1] && !strchr(colon, '/') && stat(rest, &st) < 0) {
                        *ret_path = strndup(rest, (size_t) (colon - rest));
                        *ret_tag = strdup(colon + 1);
                } else {
                        *ret_path = strdup(rest);
                        *ret_tag = NULL;
                        if (!*ret_path)
                                return cli_error_errno(-ENOMEM, "out of memory");
                        *ret_kind = kinds[i];
                        return 0;
                }
                if (!*ret_path || !*ret_tag)
                        return cli_error_errno(-ENOMEM, "out of memory");
                *ret_kind = kinds[i];
                return 0;
        }
        return 0;
}

static int template_import(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_child_done) CliChild tar = { .name = "tar" };
        CliProgress progress = {};
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_free_ char *name = NULL, *target = NULL, *src_buf = NULL, *tag = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *src, *kind = NULL;
        struct stat st = {};
        int r;

        r = cli_parser_positionals(&p, argc, argv, 2, 2);
        if (r <= 0)
                return r;
        src = p.pos[1];
        r = image_source_split(src, &kind, &src_buf, &tag);
        if (r < 0)
                return r;
        if (kind)
                src = src_buf;

        if (streq(src, "-")) {
                fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
                if (fd < 0)
                        return cli_error_errno(negative_errno(), "stdin: %m");
        } else {
                if (stat(src, &st) < 0)
                        return cli_error_errno(negative_errno(), "%s: %m", src);
                if (kind && !streq(kind, "oci-layout") && S_ISDIR(st.st_mode))
                        return cli_error("%s: %s: names a directory; use oci-layout:DIR", src, kind);
                if (kind && streq(kind, "oci-layout") && !S_ISDIR(st.st_mode))
                        return cli_error("%s: oci-layout: needs an image layout directory", src);
                if (S_ISDIR(st.st_mode)) {
                        r = tar_spawn(src, &tar, &fd);
                        if (r < 0)
                                return r;
                } else if (S_ISREG(st.st_mode)) {
                        fd = open(src, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                        if (fd < 0)
                                return cli_error_errno(negative_errno(), "%s: %m", src);
                } else
                        return cli_error("%s: not a directory or a tar file", src);
        }

        name = cli_escape(p.pos[0]);
        if (tag) {
                _cleanup_free_ char *etag = cli_escape(tag);
                target = name && etag ? strjoin("/v1/templates?name=", name, "&tag=", etag) : NULL;
        } else
                target = name ? strjoin("/v1/templates?name=", name) : NULL;
        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");

        r = cli_connect(&c);
        if (r < 0)
                return r;
        r = cli_start(c, "POST", target, "application/x-tar", NULL, SIZE_MAX, NULL);
        if (r < 0)
                return r;
        cli_progress_begin(&progress, "importing", tar.pid > 0 || !S_ISREG(st.st_mode) ? CLI_PROGRESS_UNKNOWN
                                                                                      : (uint64_t) st.st_size);
        r = cli_upload_fd_progress(c, fd, src, cli_progress_callback, &progress);
        cli_progress_end(&progress);
        if (r < 0)
                return r;
        if (tar.pid > 0) {
                /* On a tar failure the body is left unfinished: the server sees a broken upload. */
                r = cli_child_wait(&tar);
                if (r < 0)
                        return r;
        }
        r = cli_finish_upload(c, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        printf("imported template %s\n", strna(json_string(json_get(resp.json, "name")) ?: p.pos[0]));
        return 0;
}

enum {
        OPT_CREDENTIAL = 1,
};

static const CliOption pull_options[] = {
        { "credential", 0, true, OPT_CREDENTIAL },
        {},
};

static int template_pull(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *name = NULL, *target = NULL, *body = NULL;
        const char *credential = NULL, *arg;
        size_t len;
        int r;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, pull_options, &arg)) > 0)
                if (r == OPT_CREDENTIAL)
                        credential = arg;
        r = cli_parser_end(&p, r, 2, 2);
        if (r <= 0)
                return r;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "ref", p.pos[1]);
        if (credential)
                json_w_kv_string(&w, "credential", credential);
        json_w_object_end(&w);
        r = json_w_finish(&w, &body, &len);
        if (r < 0)
                return cli_error_errno(r, "out of memory");
        name = cli_escape(p.pos[0]);
        target = name ? strjoin("/v1/templates/", name, "/pull") : NULL;
        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        if (!arg_json && isatty(STDERR_FILENO))
                fprintf(stderr, "pulling %s ...\n", p.pos[1]);
        r = cli_call("POST", target, body, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        printf("pulled template %s from %s (%s)\n", strna(json_string(json_get(resp.json, "name")) ?: p.pos[0]),
               p.pos[1], strna(json_string(json_get(resp.json, "digest"))));
        return 0;
}

static void version_row(const JsonValue *v, char **c) {
        const JsonValue *tags = json_get(v, "tags"), *sbs = json_get(v, "sandboxes"),
                        *shared = json_get(v, "shared_with");
        uint64_t size, n;
        char sbuf[32] = "-";
        bool latest = false;
        _cleanup_free_ char *t = NULL, *u = NULL, *sh = NULL;

        if (json_uint64(json_get(v, "size_bytes"), &size) >= 0)
                cli_format_size(size, sbuf, sizeof sbuf);
        (void) json_bool(json_get(v, "latest"), &latest);
        t = strdup(latest ? "latest" : "");
        for (size_t i = 0; t && i < json_array_size(tags); i++) {
                char *x = strjoin(t, t[0] ? "," : "", strempty(json_string(json_array_at(tags, i))));
                free(t);
                t = x;
        }
        for (size_t i = 0; i < json_array_size(sbs); i++) {
                char *x = strjoin(strempty(u), u ? "," : "", strempty(json_string(json_array_at(sbs, i))));
                free(u);
                u = x;
        }
        for (size_t i = 0; i < json_array_size(shared); i++) {
                char *x = strjoin(strempty(sh), sh ? "," : "", strempty(json_string(json_array_at(shared, i))));
                free(sh);
                sh = x;
        }
        c[0] = json_uint64(json_get(v, "version"), &n) >= 0 ? strdup_printf("v%" PRIu64, n) : strdup("-");
        c[1] = strdup(t && t[0] ? t : "-");
        c[2] = strdup(sbuf);
        c[3] = strdup(sh ?: "-");
        c[4] = cli_field_text(v, "in_use");
        c[5] = strdup(u ?: "-");
        c[6] = cli_time_text(json_get(v, "created_at"));
}

/* space template versions NAME: GET /v1/templates/NAME/versions */
static int template_versions(int argc, char **argv) {
        static const char *const header[] = { "VERSION", "TAGS", "SIZE", "SHARED_WITH", "IN_USE", "SANDBOXES",
                                              "CREATED" };
        _cleanup_free_ char *name = NULL, *target = NULL;

        if (argc < 2 || argv[1][0] == '-')
                return cli_error("usage: space template versions NAME");
        name = cli_escape(argv[1]);
        target = name ? strjoin("/v1/templates/", name, "/versions") : NULL;
        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        argv[1] = argv[0];
        return cli_list_verb(argc - 1, argv + 1, target, "versions", "version", header, ELEMENTSOF(header),
                             version_row, NULL);
}

/* space template tag NAME[@vN] TAG: POST /v1/templates/NAME/tags */
static int template_tag(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *base = NULL, *name = NULL, *target = NULL, *body = NULL;
        const char *at;
        uint64_t version = 0, got = 0;
        size_t len;
        int r;

        r = cli_parser_positionals(&p, argc, argv, 2, 2);
        if (r <= 0)
                return r;
        at = strchr(p.pos[0], '@');
        if (at) {
                char *end = NULL;
                if (at[1] != 'v' || !at[2] || (errno = 0, version = strtoull(at + 2, &end, 10), errno) || *end ||
                    version == 0)
                        return cli_error("'%s': a version is NAME@vN (N = 1, 2, ...)", p.pos[0]);
                base = strndup(p.pos[0], (size_t) (at - p.pos[0]));
        } else
                base = strdup(p.pos[0]);
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "tag", p.pos[1]);
        if (version > 0) {
                json_w_key(&w, "version");
                json_w_uint(&w, version);
        }
        json_w_object_end(&w);
        r = json_w_finish(&w, &body, &len);
        name = base ? cli_escape(base) : NULL;
        target = name ? strjoin("/v1/templates/", name, "/tags") : NULL;
        if (r < 0 || !target)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = cli_call("POST", target, body, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        (void) json_uint64(json_get(resp.json, "version"), &got);
        printf("tagged %s@v%" PRIu64 " as %s:%s\n", base, got, base, p.pos[1]);
        return 0;
}

/* space template untag NAME TAG: DELETE /v1/templates/NAME/tags/TAG */
static int template_untag(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_free_ char *name = NULL, *tag = NULL, *target = NULL;
        int r;

        r = cli_parser_positionals(&p, argc, argv, 2, 2);
        if (r <= 0)
                return r;
        name = cli_escape(p.pos[0]);
        tag = cli_escape(p.pos[1]);
        target = name && tag ? strjoin("/v1/templates/", name, "/tags/", tag) : NULL;
        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = cli_call("DELETE", target, NULL, &resp);
        if (r < 0)
                return r;
        if (!arg_json)
                printf("removed tag %s:%s\n", p.pos[0], p.pos[1]);
        return 0;
}

static int template_rm(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        int r;

        r = cli_parser_positionals(&p, argc, argv, 1, SIZE_MAX);
        if (r <= 0)
                return r;
        return cli_call_each(&p, 0, "DELETE", "/v1/templates/", false);
}

int cli_template(int argc, char **argv) {
        static const CliSubcommand sub[] = {
                { "ls", template_ls },
                { "import", template_import },
                { "pull", template_pull },
                { "rm", template_rm },
                { "versions", template_versions },
                { "tag", template_tag },
                { "untag", template_untag },
                { "set", cli_template_set },
                { "build", cli_template_build },
        };

        return cli_run_subcommand("template", sub, ELEMENTSOF(sub), argc, argv);
}
