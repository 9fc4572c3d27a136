/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "alloc-util.h"
#include "cli-common.h"
#include "fd-util.h"

bool arg_json = false;
static char *arg_url = NULL;
static char *arg_state_dir = NULL;
const CliCommand *cli_current = NULL;

static char *cached_url = NULL;
static char *cached_key = NULL;
static bool key_loaded = false;

static void cli_common_free(void) {
        free(arg_url);
        free(arg_state_dir);
        free(cached_url);
        if (cached_key) {
                explicit_bzero(cached_key, strlen(cached_key));
                free(cached_key);
        }
}

static void cli_common_register(void) {
        static bool registered = false;
        if (!registered) {
                atexit(cli_common_free);
                registered = true;
        }
}

int cli_set_global(const char *name, const char *value) {
        char **field;

        cli_common_register();
        if (streq(name, "url"))
                field = &arg_url;
        else if (streq(name, "state-dir"))
                field = &arg_state_dir;
        else
                return -EINVAL;
        if (isempty(value))
                return cli_usage_error("--%s needs a non-empty value", name);
        free(*field);
        *field = strdup(value);
        if (!*field)
                return cli_error_errno(-ENOMEM, "out of memory");
        if (field == &arg_url)
                cached_url = mfree(cached_url);
        return 0;
}

const char *cli_url(void) {
        const char *u;
        size_t n;

        if (cached_url)
                return cached_url;
        u = arg_url ?: secure_getenv("SPACE_URL");
        if (isempty(u))
                u = CLI_DEFAULT_URL;
        n = strlen(u);
        while (n > 0 && u[n - 1] == '/')
                n--;
        cli_common_register();
        cached_url = memdup_suffix0(u, n);
        return cached_url ?: CLI_DEFAULT_URL;
}

const char *cli_state_dir(void) {
        const char *d = arg_state_dir ?: secure_getenv("SPACE_STATE_DIR");
        return isempty(d) ? CLI_DEFAULT_STATE_DIR : d;
}

const char *cli_api_key(void) {
        const char *k;

        if (key_loaded)
                return cached_key;
        key_loaded = true;
        cli_common_register();

        k = secure_getenv("SPACE_API_KEY");
        if (!isempty(k)) {
                cached_key = strdup(k);
                return cached_key;
        }

        _cleanup_free_ char *path = cli_path_join(cli_state_dir(), "admin.key");
        _cleanup_free_ char *buf = NULL;
        size_t n = 0;
        if (!path || read_full_file(path, CLI_KEY_FILE_MAX, &buf, &n) < 0)
                return NULL;
        /* Trim whitespace around the key. */
        size_t a = 0;
        while (a < n && isspace((unsigned char) buf[a]))
                a++;
        while (n > a && isspace((unsigned char) buf[n - 1]))
                n--;
        if (n > a)
                cached_key = memdup_suffix0(buf + a, n - a);
        explicit_bzero(buf, strlen(buf));
        return cached_key;
}

bool cli_have_key(void) {
        return cli_api_key() != NULL;
}

static int last_exit_class = 0;

int cli_exit_class(void) {
        return last_exit_class > 0 ? last_exit_class : CLI_EXIT_FAILURE;
}

int cli_exit_class_of_status(int status) {
        switch (status) {
        case 404:
                return CLI_EXIT_NOT_FOUND;
        case 409:
                return CLI_EXIT_CONFLICT;
        case 401:
        case 403:
                return CLI_EXIT_AUTH;
        case 503:
        case 504:
                return CLI_EXIT_UNAVAILABLE;
        case 429:
        case 507:
                return CLI_EXIT_STORAGE;
        default:
                return CLI_EXIT_FAILURE;
        }
}

static int exit_class_of_errno(int error) {
        switch (error < 0 ? -error : error) {
        case ENOENT:
                return CLI_EXIT_NOT_FOUND;
        case EEXIST:
                return CLI_EXIT_CONFLICT;
        case ENOSPC:
        case EDQUOT:
                return CLI_EXIT_STORAGE;
        case ECONNREFUSED:
        case ECONNRESET:
        case ETIMEDOUT:
        case EHOSTUNREACH:
        case ENETUNREACH:
                return CLI_EXIT_UNAVAILABLE;
        default:
                return CLI_EXIT_FAILURE;
        }
}

static const char *code_of_exit_class(int exit_class) {
        switch (exit_class) {
        case CLI_EXIT_USAGE:
                return "usage";
        case CLI_EXIT_NOT_FOUND:
                return "not_found";
        case CLI_EXIT_CONFLICT:
                return "conflict";
        case CLI_EXIT_AUTH:
                return "unauthorized";
        case CLI_EXIT_UNAVAILABLE:
                return "unavailable";
        case CLI_EXIT_STORAGE:
                return "insufficient_storage";
        default:
                return "failed";
        }
}

static int cli_fail_va(int exit_class, const char *code, int error, const char *fmt, va_list ap) {
        int saved = errno;

        last_exit_class = exit_class > 0 ? exit_class : CLI_EXIT_FAILURE;
        errno = error < 0 ? -error : error;
        if (arg_json) {
                _cleanup_(json_w_done) JsonWriter w = {};
                _cleanup_free_ char *message = NULL, *out = NULL;
                size_t n = 0;

                /* One line on stderr a failure, as the API's own error object. */
                if (vasprintf(&message, fmt, ap) < 0)
                        message = NULL;
                json_w_init(&w);
                json_w_object_begin(&w);
                json_w_key(&w, "error");
                json_w_object_begin(&w);
                json_w_kv_string(&w, "code", code ?: code_of_exit_class(last_exit_class));
                json_w_kv_string(&w, "message", message ?: "out of memory");
                json_w_object_end(&w);
                json_w_object_end(&w);
                if (json_w_finish(&w, &out, &n) >= 0)
                        fprintf(stderr, "%s\n", out);
                else
                        fputs("{\"error\":{\"code\":\"failed\",\"message\":\"out of memory\"}}\n", stderr);
        } else {
                fputs("space: ", stderr);
                vfprintf(stderr, fmt, ap);
                fputc('\n', stderr);
        }
        fflush(stderr);
        errno = saved;
        return error < 0 ? error : (error > 0 ? -error : -EINVAL);
}

int cli_fail(int exit_class, const char *code, int error, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = cli_fail_va(exit_class, code, error, fmt, ap);
        va_end(ap);
        return r;
}

int cli_error_errno(int error, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = cli_fail_va(exit_class_of_errno(error), NULL, error, fmt, ap);
        va_end(ap);
        return r;
}

void cli_print_usage(const CliCommand *c, FILE *f) {
        fprintf(f, "Usage: space %s%s%s\n\n%s.\n", c->name, isempty(c->usage) ? "" : " ", strempty(c->usage), c->help);
        if (c->details)
                fprintf(f, "\n%s", c->details);
        fputs("\nGlobal options: --json (print the API's JSON), --url URL, --state-dir DIR\n", f);
}

/* ---- Options ---- */

enum {
        GLOBAL_JSON = 10001,
        GLOBAL_URL,
        GLOBAL_STATE_DIR,
        GLOBAL_HELP,
};

static const CliOption global_options[] = {
        { "json", 0, false, GLOBAL_JSON },
        { "url", 0, true, GLOBAL_URL },
        { "state-dir", 0, true, GLOBAL_STATE_DIR },
        { "help", 'h', false, GLOBAL_HELP },
        {},
};

int cli_parser_init(CliParser *p, int argc, char **argv, size_t stop_after) {
        *p = (CliParser){
                .argc = argc,
                .argv = argv,
                .i = 1,
                .stop_after = stop_after,
        };
        p->pos = new0(char *, (size_t) argc + 1);
        if (!p->pos)
                return cli_error_errno(-ENOMEM, "out of memory");
        return 0;
}

void cli_parser_done(CliParser *p) {
        p->pos = mfree(p->pos);
}

static const CliOption *option_find_long(const CliOption *opts, const char *name, size_t n) {
        for (const CliOption *o = opts; o && o->name; o++)
                if (strlen(o->name) == n && strncmp(o->name, name, n) == 0)
                        return o;
        return NULL;
}

static const CliOption *option_find_short(const CliOption *opts, char c) {
        for (const CliOption *o = opts; o && o->name; o++)
                if (o->short_name == c)
                        return o;
        return NULL;
}

/* Applies a global option; returns 1 if it was one, CLI_OPT_HELP, or < 0. */
static int parser_global(const CliOption *o, const char *value) {
        switch (o->id) {
        case GLOBAL_JSON:
                arg_json = true;
                return 1;
        case GLOBAL_URL:
                return cli_set_global("url", value) < 0 ? -EINVAL : 1;
        case GLOBAL_STATE_DIR:
                return cli_set_global("state-dir", value) < 0 ? -EINVAL : 1;
        case GLOBAL_HELP:
                if (cli_current)
                        cli_print_usage(cli_current, stdout);
                return CLI_OPT_HELP;
        }
        return 0;
}

int cli_parser_next(CliParser *p, const CliOption *opts, const char **ret_arg) {
        for (;;) {
                const CliOption *o = NULL;
                const char *value = NULL, *s;
                bool global = false;

                if (p->short_rest) {
                        /* The next letter of a group of short flags ("-it"). */
                        s = p->short_rest;
                        p->short_rest = NULL;
                } else {
                        char *a;

                        if (p->i >= p->argc)
                                return CLI_OPT_DONE;
                        a = p->argv[p->i++];
                        if (p->options_done || a[0] != '-' || streq(a, "-")) {
                                if (!p->options_done && p->stop_after > 0 && p->n_pos >= p->stop_after)
                                        p->options_done = true;
                                p->pos[p->n_pos++] = a;
                                continue;
                        }
                        if (streq(a, "--")) {
                                p->options_done = true;
                                p->saw_dashdash = true;
                                p->dashdash_at = p->n_pos;
                                continue;
                        }
                        if (a[1] == '-') {
                                const char *name = a + 2, *eq = strchr(name, '=');
                                size_t n = eq ? (size_t) (eq - name) : strlen(name);

                                o = option_find_long(opts, name, n);
                                if (!o) {
                                        o = option_find_long(global_options, name, n);
                                        global = o != NULL;
                                }
                                if (!o)
                                        return cli_usage_error("unknown option '--%.*s' (see 'space %s --help')", (int) n,
                                                         name, cli_current ? cli_current->name : "help");
                                if (eq && !o->has_arg)
                                        return cli_usage_error("option '--%s' takes no value", o->name);
                                if (o->has_arg) {
                                        if (eq)
                                                value = eq + 1;
                                        else if (p->i < p->argc)
                                                value = p->argv[p->i++];
                                        else
                                                return cli_usage_error("option '--%s' needs a value", o->name);
                                }
                                s = NULL;
                        } else
                                s = a + 1;
                }

                if (s) {
                        /* Short options: "-x", "-xVALUE", "-x VALUE" or flags grouped as "-it". */
                        o = option_find_short(opts, *s);
                        if (!o) {
                                o = option_find_short(global_options, *s);
                                global = o != NULL;
                        }
                        if (!o)
                                return cli_usage_error("unknown option '-%c' (see 'space %s --help')", *s,
                                                 cli_current ? cli_current->name : "help");
                        if (o->has_arg) {
                                if (s[1])
                                        value = s + 1;
                                else if (p->i < p->argc)
                                        value = p->argv[p->i++];
                                else
                                        return cli_usage_error("option '-%c' needs a value", *s);
                        } else if (s[1])
                                p->short_rest = s + 1;
                }

                if (global) {
                        int r = parser_global(o, value);
                        if (r != 1)
                                return r;
                        continue;
                }
                *ret_arg = value;
                return o->id;
        }
}

int cli_parser_want(const CliParser *p, size_t min, size_t max) {
        const char *name = cli_current ? cli_current->name : "help";

        if (p->n_pos < min)
                return cli_usage_error("missing argument (usage: space %s %s)", name,
                                 cli_current ? strempty(cli_current->usage) : "");
        if (p->n_pos > max)
                return cli_usage_error("unexpected argument '%s' (usage: space %s %s)", p->pos[max], name,
                                 cli_current ? strempty(cli_current->usage) : "");
        return 0;
}

int cli_parser_end(const CliParser *p, int r, size_t min, size_t max) {
        if (r == CLI_OPT_HELP)
                return 0;
        if (r < 0)
                return r;
        r = cli_parser_want(p, min, max);
        return r < 0 ? r : 1;
}

int cli_parser_positionals(CliParser *p, int argc, char **argv, size_t min, size_t max) {
        const char *arg = NULL;
        int r;

        r = cli_parser_init(p, argc, argv, 0);
        if (r < 0)
                return r;
        r = cli_parser_next(p, NULL, &arg);
        return cli_parser_end(p, r, min, max);
}

int cli_run_subcommand(const char *verb, const CliSubcommand *sub, size_t n_sub, int argc, char **argv) {
        if (argc < 2)
                return cli_usage_error("missing subcommand (usage: space %s %s)", verb, cli_current->usage);
        if (streq(argv[1], "--help") || streq(argv[1], "-h") || streq(argv[1], "help")) {
                cli_print_usage(cli_current, stdout);
                return 0;
        }
        for (size_t i = 0; i < n_sub; i++)
                if (streq(argv[1], sub[i].name))
                        return sub[i].run(argc - 1, argv + 1);
        return cli_usage_error("unknown subcommand '%s %s' (usage: space %s %s)", verb, argv[1], verb, cli_current->usage);
}

int cli_parse_u64(const char *option, const char *s, uint64_t *ret) {
        if (safe_atou64(s, ret) < 0)
                return cli_usage_error("--%s: '%s' is not a non-negative integer", option, s);
        return 0;
}

int cli_parse_double(const char *option, const char *s, double *ret) {
        char *end = NULL;
        double d;

        if (isempty(s) || isspace((unsigned char) s[0]))
                return cli_usage_error("--%s: '%s' is not a number", option, strempty(s));
        errno = 0;
        d = strtod(s, &end);
        if (errno != 0 || !end || *end != 0 || !isfinite(d))
                return cli_usage_error("--%s: '%s' is not a number", option, s);
        *ret = d;
        return 0;
}

int cli_parse_kv(const char *option, const char *s, char **ret_key, const char **ret_value) {
        const char *eq = strchr(s, '=');

        if (!eq || eq == s)
                return cli_usage_error("--%s: expected KEY=VALUE, got '%s'", option, s);
        *ret_key = memdup_suffix0(s, (size_t) (eq - s));
        if (!*ret_key)
                return cli_error_errno(-ENOMEM, "out of memory");
        *ret_value = eq + 1;
        return 0;
}

/* ---- HTTP ---- */

void cli_response_done(CliResponse *r) {
        r->body = mfree(r->body);
        r->json = json_free(r->json);
        r->body_len = 0;
        r->status = 0;
}

int cli_report_connect(int r) {
        if (r == -ECONNREFUSED || r == -ENOENT)
                return cli_fail(CLI_EXIT_UNAVAILABLE, "unavailable", r,
                                "cannot connect to %s: %m (is spaced running? try 'space up')", cli_url());
        return cli_error_errno(r, "request to %s failed: %m", cli_url());
}

int cli_connect_url(const char *url, HttpClient **ret) {
        int r = http_client_new(url, ret);
        if (r == -EINVAL)
                return cli_usage_error("invalid URL '%s' (expected http://HOST:PORT or unix:/PATH)", url);
        if (r < 0)
                return cli_report_connect(r);
        return 0;
}

int cli_connect(HttpClient **ret) {
        return cli_connect_url(cli_url(), ret);
}

int cli_headers(const char *extra, char **ret) {
        const char *key = cli_api_key();
        char *h;

        if (key)
                h = strjoin("Authorization: Bearer ", key, "\r\n", strempty(extra));
        else
                h = strdup(strempty(extra));
        if (!h)
                return cli_error_errno(-ENOMEM, "out of memory");
        *ret = h;
        return 0;
}

int cli_report_response(int status, const char *body, size_t body_len) {
        _cleanup_json_ JsonValue *v = NULL;
        const char *message = NULL, *code = NULL;
        int exit_class = cli_exit_class_of_status(status);

        if (body && body_len > 0 && json_parse(body, body_len, &v, NULL, 0) >= 0) {
                JsonValue *e = json_get(v, "error");
                message = json_string(json_get(e, "message"));
                code = json_string(json_get(e, "code"));
        }
        if (isempty(code))
                code = NULL;
        if (isempty(message))
                message = code;
        if (status == 401 && !cli_have_key())
                return cli_fail(exit_class, code ?: "unauthorized", CLI_EREPORTED,
                                "%s (no API key: set SPACE_API_KEY or make %s/admin.key readable)",
                                message ?: "unauthorized", cli_state_dir());
        if (isempty(message))
                return cli_fail(exit_class, code, CLI_EREPORTED, "server answered HTTP %d %s", status,
                                http_status_reason(status));
        return cli_fail(exit_class, code, CLI_EREPORTED, "%s", message);
}

static int cli_headers_for(const char *content_type, char **ret) {
        _cleanup_free_ char *extra = NULL;

        if (content_type) {
                extra = strjoin("Content-Type: ", content_type, "\r\n");
                if (!extra)
                        return cli_error_errno(-ENOMEM, "out of memory");
        }
        return cli_headers(extra, ret);
}

int cli_start(HttpClient *c, const char *method, const char *target, const char *content_type, const void *body,
              size_t body_len, const HttpHead **ret_head) {
        _cleanup_free_ char *headers = NULL;
        const HttpHead *h = NULL;
        int r;

        r = cli_headers_for(content_type, &headers);
        if (r < 0)
                return r;
        r = http_client_request(c, method, target, headers, body, body_len);
        if (r < 0)
                return cli_report_connect(r);
        if (body_len == SIZE_MAX) {
                if (ret_head)
                        *ret_head = NULL;
                return 0;
        }
        r = http_client_response(c, &h);
        if (r < 0)
                return cli_report_connect(r);
        if (h->status >= 400) {
                _cleanup_free_ char *err = NULL;
                size_t n = 0;
                int status = h->status;
                (void) http_client_read_body_all(c, CLI_RESPONSE_MAX, &err, &n);
                return cli_report_response(status, err, n);
        }
        if (ret_head)
                *ret_head = h;
        return 0;
}

static int cli_read_response(HttpClient *c, CliResponse *ret, bool quiet_404) {
        CliResponse resp = {};
        const HttpHead *h = NULL;
        char errbuf[128] = "";
        int r;

        r = http_client_response(c, &h);
        if (r < 0)
                return cli_report_connect(r);
        resp.status = h->status;
        r = http_client_read_body_all(c, CLI_RESPONSE_MAX, &resp.body, &resp.body_len);
        if (r < 0)
                return cli_error_errno(r, "reading the answer from %s failed: %m", cli_url());
        if (resp.status >= 400) {
                if (quiet_404 && resp.status == 404) {
                        *ret = resp; /* the caller may still report it */
                        return -ENOENT;
                }
                r = cli_report_response(resp.status, resp.body, resp.body_len);
                cli_response_done(&resp);
                return r;
        }
        if (resp.body_len > 0 && resp.body[0] != 0) {
                r = json_parse(resp.body, resp.body_len, &resp.json, errbuf, sizeof errbuf);
                if (r < 0 && resp.body[0] == '{') {
                        cli_response_done(&resp);
                        return cli_error_errno(r, "the server sent invalid JSON: %s", errbuf);
                }
        }
        *ret = resp;
        return 0;
}

int cli_finish_upload(HttpClient *c, CliResponse *ret) {
        int r = http_client_end_body(c);
        if (r < 0)
                return cli_upload_failed(c, r);
        return cli_read_response(c, ret, false);
}

int cli_upload_failed(HttpClient *c, int write_error) {
        const HttpHead *h = NULL;

        /* The server may have answered and closed while we were sending. */
        http_client_set_timeout(c, 2000);
        if (http_client_response(c, &h) >= 0 && h->status >= 400) {
                _cleanup_free_ char *err = NULL;
                size_t n = 0;
                int status = h->status;
                (void) http_client_read_body_all(c, CLI_RESPONSE_MAX, &err, &n);
                return cli_report_response(status, err, n);
        }
        return cli_error_errno(write_error, "sending to %s failed: %m", cli_url());
}

int cli_upload_fd(HttpClient *c, int fd, const char *what) {
        return cli_upload_fd_progress(c, fd, what, NULL, NULL);
}

int cli_upload_fd_progress(HttpClient *c, int fd, const char *what, void (*on_sent)(void *userdata, size_t n),
                           void *userdata) {
        _cleanup_free_ char *buf = malloc(CLI_IO_BUFFER);
        int r;

        if (!buf)
                return cli_error_errno(-ENOMEM, "out of memory");
        for (;;) {
                ssize_t n = read(fd, buf, CLI_IO_BUFFER);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return cli_error_errno(negative_errno(), "reading %s failed: %m", what);
                if (n == 0)
                        return 0;
                r = http_client_write_body(c, buf, (size_t) n);
                if (r < 0)
                        return cli_upload_failed(c, r);
                if (on_sent)
                        on_sent(userdata, (size_t) n);
        }
}

static int cli_call_full(const char *method, const char *target, const char *json_body, CliResponse *ret,
                         bool quiet_404) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        int r;

        r = cli_connect(&c);
        if (r < 0)
                return r;
        _cleanup_free_ char *headers = NULL;
        r = cli_headers(json_body ? "Content-Type: application/json\r\n" : NULL, &headers);
        if (r < 0)
                return r;
        r = http_client_request(c, method, target, headers, json_body, json_body ? strlen(json_body) : 0);
        if (r < 0)
                return cli_report_connect(r);
        return cli_read_response(c, ret, quiet_404);
}

int cli_call(const char *method, const char *target, const char *json_body, CliResponse *ret) {
        return cli_call_full(method, target, json_body, ret, false);
}

int cli_call_quiet(const char *target, CliResponse *ret) {
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        _cleanup_free_ char *headers = NULL;
        const HttpHead *h = NULL;
        CliResponse resp = {};
        int r;

        if (http_client_new(cli_url(), &c) < 0 || cli_headers(NULL, &headers) < 0)
                return -EIO;
        r = http_client_request(c, "GET", target, headers, NULL, 0);
        if (r >= 0)
                r = http_client_response(c, &h);
        if (r < 0)
                return r;
        resp.status = h->status;
        r = http_client_read_body_all(c, CLI_RESPONSE_MAX, &resp.body, &resp.body_len);
        if (r < 0 || resp.status >= 400) {
                cli_response_done(&resp);
                return r < 0 ? r : -EIO;
        }
        if (resp.body_len > 0 && json_parse(resp.body, resp.body_len, &resp.json, NULL, 0) < 0) {
                cli_response_done(&resp);
                return -EBADMSG;
        }
        *ret = resp;
        return 0;
}

int cli_call_quiet_404(const char *method, const char *target, const char *json_body, CliResponse *ret) {
        return cli_call_full(method, target, json_body, ret, true);
}

void cli_line_reader_done(CliLineReader *lr) {
        lr->buf = mfree(lr->buf);
        lr->n = lr->allocated = lr->start = 0;
}

int cli_line_reader_next(CliLineReader *lr, HttpClient *c, char **ret, size_t *ret_len) {
        for (;;) {
                char *base = lr->buf + lr->start;
                size_t avail = lr->n - lr->start;
                char *nl = avail > 0 ? memchr(base, '\n', avail) : NULL;

                if (nl) {
                        *ret = base;
                        *ret_len = (size_t) (nl - base);
                        lr->start += *ret_len + 1;
                        return 1;
                }
                if (lr->eof) {
                        if (avail == 0)
                                return 0;
                        *ret = base; /* a last line without '\n' */
                        *ret_len = avail;
                        lr->start = lr->n;
                        return 1;
                }
                if (lr->start > 0) {
                        memmove(lr->buf, base, avail);
                        lr->n = avail;
                        lr->start = 0;
                }
                if (lr->n >= CLI_LINE_MAX)
                        return cli_error("the server sent an event line longer than %u bytes", CLI_LINE_MAX);
                if (lr->allocated - lr->n < 64 * 1024) {
                        size_t want = lr->n + 64 * 1024;
                        if (GREEDY_REALLOC(lr->buf, lr->allocated, want) < 0)
                                return cli_error_errno(-ENOMEM, "out of memory");
                }
                ssize_t k = http_client_read_body(c, lr->buf + lr->n, lr->allocated - lr->n);
                if (k == -ETIMEDOUT && lr->quiet_timeout)
                        return -ETIMEDOUT;
                if (k < 0)
                        return cli_error_errno((int) k, "reading the stream from %s failed: %m", cli_url());
                if (k == 0)
                        lr->eof = true;
                lr->n += (size_t) k;
        }
}

char *cli_escape(const char *s) {
        return http_percent_encode(s);
}

int cli_call_each(const CliParser *p, size_t first, const char *method, const char *prefix, bool print_json) {
        int r, ret = 0;

        for (size_t i = first; i < p->n_pos; i++) {
                _cleanup_(cli_response_done) CliResponse resp = {};
                _cleanup_free_ char *segment = cli_escape(p->pos[i]);
                _cleanup_free_ char *target = segment ? strjoin(prefix, segment) : NULL;

                if (!target)
                        return cli_error_errno(-ENOMEM, "out of memory");
                r = cli_call(method, target, NULL, &resp);
                if (r < 0) {
                        ret = r;
                        continue;
                }
                if (arg_json) {
                        if (print_json)
                                (void) cli_print_raw(resp.body, resp.body_len);
                } else
                        printf("%s\n", p->pos[i]);
                fflush(stdout);
        }
        return ret;
}

/* ---- Output ---- */

int cli_print_raw(const char *body, size_t len) {
        if (len > 0 && fwrite(body, 1, len, stdout) != len)
                return cli_error_errno(-EIO, "writing to stdout failed");
        if (len == 0 || body[len - 1] != '\n')
                fputc('\n', stdout);
        return 0;
}

char *cli_value_text(const JsonValue *v) {
        int64_t i;
        double d;
        bool b;

        switch (v ? json_type(v) : JSON_NULL) {
        case JSON_NULL:
                return strdup("-");
        case JSON_BOOL:
                (void) json_bool(v, &b);
                return strdup(b ? "true" : "false");
        case JSON_NUMBER:
                if (json_int64(v, &i) >= 0)
                        return strdup_printf("%" PRId64, i);
                if (json_double(v, &d) >= 0)
                        return strdup_printf("%g", d);
                return strdup("?");
        case JSON_STRING:
                return memdup_suffix0(json_string(v), strnlen(json_string(v), json_string_len(v)));
        case JSON_ARRAY: {
                _cleanup_free_ char *out = strdup("");
                for (size_t k = 0; out && k < json_array_size(v); k++) {
                        _cleanup_free_ char *e = cli_value_text(json_array_at(v, k));
                        char *n = e ? strjoin(out, k > 0 ? "," : "", e) : NULL;
                        free(out);
                        out = n;
                }
                if (out && isempty(out)) {
                        out = mfree(out); /* (out is freed again on return) */
                        return strdup("-");
                }
                return TAKE_PTR(out);
        }
        case JSON_OBJECT: {
                char *s = NULL;
                size_t n;
                if (json_serialize(v, &s, &n) < 0)
                        return NULL;
                return s;
        }
        default:
                return strdup("?");
        }
}

char *cli_field_text(const JsonValue *obj, const char *key) {
        return cli_value_text(json_get(obj, key));
}

char *cli_time_text(const JsonValue *v) {
        const char *s = json_string(v);
        char *out;

        if (isempty(s))
                return strdup("-");
        out = strdup(s);
        if (!out)
                return NULL;
        if (strlen(out) >= 19 && out[10] == 'T') {
                out[10] = ' ';
                out[19] = 0;
        }
        return out;
}

void cli_print_object(const JsonValue *obj, const char *prefix) {
        for (size_t i = 0; i < json_object_size(obj); i++) {
                const char *k = json_object_key(obj, i);
                const JsonValue *v = json_object_value(obj, i);
                _cleanup_free_ char *name = prefix ? strjoin(prefix, ".", k) : strdup(k);

                if (!name)
                        return;
                if (json_type(v) == JSON_OBJECT && json_object_size(v) > 0) {
                        cli_print_object(v, name);
                        continue;
                }
                _cleanup_free_ char *text = json_type(v) == JSON_OBJECT ? strdup("-") : cli_value_text(v);
                printf("%s: %s\n", name, isempty(text) ? "-" : text);
        }
}

void cli_format_size(uint64_t bytes, char *buf, size_t size) {
        static const char units[] = "BKMGTPE";
        double d = (double) bytes;
        size_t u = 0;

        while (d >= 1024.0 && u + 1 < STRLEN(units)) {
                d /= 1024.0;
                u++;
        }
        if (u == 0)
                snprintf(buf, size, "%" PRIu64 "B", bytes);
        else
                snprintf(buf, size, d < 10.0 ? "%.1f%c" : "%.0f%c", d, units[u]);
}

int cli_table_new(CliTable *t, const char *const *header, size_t n_columns) {
        *t = (CliTable){ .n_columns = n_columns };
        for (size_t i = 0; i < n_columns; i++) {
                if (GREEDY_REALLOC(t->cells, t->allocated, t->n_cells + 1) < 0)
                        return cli_error_errno(-ENOMEM, "out of memory");
                t->cells[t->n_cells] = strdup(header[i]);
                if (!t->cells[t->n_cells])
                        return cli_error_errno(-ENOMEM, "out of memory");
                t->n_cells++;
        }
        return 0;
}

int cli_table_add(CliTable *t, char **row) {
        int r = GREEDY_REALLOC(t->cells, t->allocated, t->n_cells + t->n_columns);
        if (r < 0) {
                for (size_t i = 0; i < t->n_columns; i++)
                        free(row[i]);
                return cli_error_errno(-ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < t->n_columns; i++)
                t->cells[t->n_cells++] = row[i] ?: strdup("?");
        return 0;
}

int cli_object_verb(int argc, char **argv, const char *method, const char *prefix, const char *suffix,
                    const char *body) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_free_ char *id = NULL, *target = NULL;
        int r;

        r = cli_parser_positionals(&p, argc, argv, 1, 1);
        if (r <= 0)
                return r;
        id = cli_escape(p.pos[0]);
        target = id ? strjoin(prefix, id, strempty(suffix)) : NULL;
        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = cli_call(method, target, body, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        if (resp.json)
                cli_print_object(resp.json, NULL);
        return 0;
}

int cli_list_verb(int argc, char **argv, const char *target, const char *key, const char *what,
                  const char *const *header, size_t n_columns, CliRowFn row, const char *footer) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_(cli_table_done) CliTable t = {};
        const JsonValue *list;
        int r;

        r = cli_parser_positionals(&p, argc, argv, 0, 0);
        if (r <= 0)
                return r;
        r = cli_call("GET", target, NULL, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        list = json_get(resp.json, key);
        if (json_type(list) != JSON_ARRAY)
                return cli_error("the server's answer has no %s list", what);
        if (n_columns > CLI_LIST_COLUMNS_MAX)
                return cli_error("a table of %zu columns", n_columns);
        r = cli_table_new(&t, header, n_columns);
        if (r < 0)
                return r;
        for (size_t i = 0; i < json_array_size(list); i++) {
                char *cells[CLI_LIST_COLUMNS_MAX] = {};
                row(json_array_at(list, i), cells);
                r = cli_table_add(&t, cells);
                if (r < 0)
                        return r;
        }
        cli_table_print(&t, stdout);
        if (footer)
                printf("%s\n", footer);
        return 0;
}

void cli_table_print(const CliTable *t, FILE *f) {
        size_t width[32] = {};
        size_t nc = MIN(t->n_columns, ELEMENTSOF(width));

        for (size_t i = 0; i < t->n_cells; i++) {
                size_t c = i % t->n_columns;
                if (c < nc && t->cells[i])
                        width[c] = MAX(width[c], strlen(t->cells[i]));
        }
        for (size_t i = 0; i < t->n_cells; i++) {
                size_t c = i % t->n_columns;
                bool last = c + 1 == t->n_columns;
                const char *s = strempty(t->cells[i]);

                if (last)
                        fprintf(f, "%s\n", s);
                else
                        fprintf(f, "%-*s  ", (int) (c < nc ? width[c] : 0), s);
        }
}

void cli_table_done(CliTable *t) {
        for (size_t i = 0; i < t->n_cells; i++)
                free(t->cells[i]);
        t->cells = mfree(t->cells);
        t->n_cells = t->allocated = 0;
}

char *cli_path_join(const char *a, const char *b) {
        size_t n = strlen(a);
        bool slash = n > 0 && a[n - 1] == '/';
        return strjoin(a, slash ? "" : "/", b);
}

const char *cli_basename(const char *p) {
        const char *s = strrchr(p, '/');
        return s ? s + 1 : p;
}
