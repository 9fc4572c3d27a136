/* SPDX-License-Identifier: MIT */
/* space template build NAME [-f DOCKERFILE] [--build-arg K=V]... [--allow HOST]... [CONTEXT]:
 * the context directory (default .) packed by a tar child process and sent
 * to POST /v1/templates/NAME/build; the NDJSON progress printed as it comes
 * (step N/M, each RUN's output, cache hits), --json prints its lines as they
 * are. The Dockerfile (default CONTEXT/Dockerfile) must be inside the context. */
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>

#include "cli-child.h"
#include "cli-common.h"
#include "cli-verbs.h"
#include "fd-util.h"

enum {
        OPT_FILE = 1,
        OPT_BUILD_ARG,
        OPT_ALLOW,
};

static const CliOption build_options[] = {
        { "file", 'f', true, OPT_FILE },
        { "build-arg", 0, true, OPT_BUILD_ARG },
        { "allow", 0, true, OPT_ALLOW },
        {},
};

static int print_line(const JsonValue *v) {
        const char *type = strempty(json_string(json_get(v, "type")));
        int64_t step = 0, steps = 0;

        if (streq(type, "step")) {
                bool cached = false;
                (void) json_int64(json_get(v, "step"), &step);
                (void) json_int64(json_get(v, "steps"), &steps);
                printf("step %" PRId64 "/%" PRId64 ": %s%s\n", step, steps,
                       strna(json_string(json_get(v, "instruction"))),
                       json_bool(json_get(v, "cached"), &cached) >= 0 && cached ? " (cached)" : "");
        } else if (streq(type, "output")) {
                const char *d = strempty(json_string(json_get(v, "data")));
                FILE *f = streq(strempty(json_string(json_get(v, "stream"))), "stderr") ? stderr : stdout;
                fputs(d, f);
                fflush(f);
        } else if (streq(type, "result")) {
                int64_t cached = 0, run = 0, ms = 0;
                (void) json_int64(json_get(v, "steps"), &steps);
                (void) json_int64(json_get(v, "cached_steps"), &cached);
                (void) json_int64(json_get(v, "run"), &run);
                (void) json_int64(json_get(v, "duration_ms"), &ms);
                printf("built template %s: %" PRId64 " steps, %" PRId64 " cached, %" PRId64 " run, %" PRId64 " ms\n",
                       strna(json_string(json_get(json_get(v, "template"), "name"))), steps, cached, run, ms);
        }
        return fflush(stdout) == 0 ? 0 : -EPIPE;
}

int cli_template_build(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_child_done) CliChild tar = { .name = "tar" };
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        _cleanup_(cli_line_reader_done) CliLineReader lr = {};
        _cleanup_(json_w_done) JsonWriter args = {}, net = {};
        _cleanup_free_ char *name = NULL, *target = NULL, *ctx_real = NULL, *file_real = NULL, *args_s = NULL,
                            *net_s = NULL, *q_file = NULL, *q_args = NULL, *q_net = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *file = NULL, *arg, *ctx, *rel;
        const HttpHead *h = NULL;
        bool any_arg = false, any_allow = false, failed = false;
        int r;

        json_w_init(&args);
        json_w_init(&net);
        json_w_object_begin(&args);
        json_w_object_begin(&net);
        json_w_key(&net, "allow");
        json_w_array_begin(&net);
        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, build_options, &arg)) > 0) {
                if (r == OPT_FILE)
                        file = arg;
                else if (r == OPT_BUILD_ARG) {
                        _cleanup_free_ char *k = NULL;
                        const char *v;
                        int q = cli_parse_kv("--build-arg", arg, &k, &v);
                        if (q < 0)
                                return q;
                        json_w_kv_string(&args, k, v);
                        any_arg = true;
                } else if (r == OPT_ALLOW) {
                        json_w_string(&net, arg);
                        any_allow = true;
                }
        }
        r = cli_parser_end(&p, r, 1, 2);
        if (r <= 0)
                return r;
        json_w_object_end(&args);
        json_w_array_end(&net);
        json_w_object_end(&net);
        ctx = p.n_pos > 1 ? p.pos[1] : ".";
        ctx_real = realpath(ctx, NULL);
        if (!ctx_real)
                return cli_error_errno(negative_errno(), "%s: %m", ctx);
        if (file) {
                file_real = realpath(file, NULL);
                if (!file_real)
                        return cli_error_errno(negative_errno(), "%s: %m", file);
                rel = startswith(file_real, ctx_real);
                if (!rel || rel[0] != '/')
                        return cli_fail(CLI_EXIT_USAGE, "invalid_argument", -EINVAL,
                                        "%s: the Dockerfile must be inside the context %s", file, ctx);
                q_file = cli_escape(rel + 1);
                if (!q_file)
                        return cli_error_errno(-ENOMEM, "out of memory");
        }
        if (json_w_finish(&args, &args_s, NULL) < 0 || json_w_finish(&net, &net_s, NULL) < 0)
                return cli_error_errno(-ENOMEM, "out of memory");
        q_args = any_arg ? cli_escape(args_s) : NULL;
        q_net = any_allow ? cli_escape(net_s) : NULL;
        name = cli_escape(p.pos[0]);
        if (!name)
                return cli_error_errno(-ENOMEM, "out of memory");
        target = strjoin("/v1/templates/", name, "/build?x=1", q_file ? "&dockerfile=" : "", strempty(q_file),
                         q_args ? "&build_args=" : "", strempty(q_args), q_net ? "&network=" : "", strempty(q_net));
        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        {
                char *const tar_argv[] = { (char *) "tar", (char *) "-C", ctx_real, (char *) "--numeric-owner",
                                           (char *) "-cf", (char *) "-", (char *) ".", NULL };
                r = cli_child_spawn(tar_argv, false, &tar, &fd);
                if (r < 0)
                        return r;
        }
        r = cli_connect(&c);
        if (r < 0)
                return r;
        r = cli_start(c, "POST", target, "application/x-tar", NULL, SIZE_MAX, NULL);
        if (r < 0)
                return r;
        r = cli_upload_fd(c, fd, ctx);
        if (r < 0)
                return r;
        r = cli_child_wait(&tar);
        if (r < 0)
                return r;
        r = http_client_end_body(c);
        if (r < 0)
                return cli_upload_failed(c, r);
        r = http_client_response(c, &h);
        if (r < 0)
                return cli_report_connect(r);
        if (h->status >= 400) {
                _cleanup_free_ char *err = NULL;
                size_t n = 0;
                int status = h->status;
                (void) http_client_read_body_all(c, 1024 * 1024, &err, &n);
                return cli_report_response(status, err, n);
        }
        for (;;) {
                _cleanup_json_ JsonValue *v = NULL;
                char *line;
                size_t n;

                r = cli_line_reader_next(&lr, c, &line, &n);
                if (r < 0)
                        return r;
                if (r == 0)
                        break;
                if (n == 0)
                        continue;
                if (json_parse(line, n, &v, NULL, 0) < 0)
                        return cli_error("the server sent an invalid progress line");
                if (arg_json) {
                        if (fwrite(line, 1, n, stdout) != n || fputc('\n', stdout) == EOF || fflush(stdout) != 0)
                                return -EPIPE;
                } else if (print_line(v) < 0)
                        return -EPIPE;
                if (streq(strempty(json_string(json_get(v, "type"))), "error")) {
                        const char *code = json_string(json_get(v, "code"));
                        return cli_fail(code && streq(code, "insufficient_storage") ? CLI_EXIT_STORAGE
                                                                                   : CLI_EXIT_FAILURE,
                                        code, -EIO, "%s", strna(json_string(json_get(v, "message"))));
                }
                if (streq(strempty(json_string(json_get(v, "type"))), "result"))
                        failed = false;
        }
        return failed ? -EIO : 0;
}
