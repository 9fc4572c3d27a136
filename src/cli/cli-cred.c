/* SPDX-License-Identifier: MIT */
/* space cred add | ls | show | rm | rotate | revoke | grant | ungrant:
 * /v1/credentials. A value is read from stdin (without echo on a terminal)
 * or from --value-file, never from the command line, where every user of
 * the host could read it in /proc; our copies are wiped after the call. */

#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include "cli-common.h"
#include "cli-verbs.h"
#include "cred-crypt.h"
#include "fd-util.h"

enum {
        OPT_HOST = 1,
        OPT_HEADER,
        OPT_BASIC_USER,
        OPT_ENV,
        OPT_EXPIRES,
        OPT_VALUE_FILE,
};

static const CliOption add_options[] = {
        { "host", 0, true, OPT_HOST },
        { "header", 0, true, OPT_HEADER },
        { "basic-user", 0, true, OPT_BASIC_USER },
        { "env", 0, true, OPT_ENV },
        { "expires", 0, true, OPT_EXPIRES },
        { "value-file", 0, true, OPT_VALUE_FILE },
        {},
};

typedef struct Secret {
        char *p;
        size_t n, size;
} Secret;

static void secret_done(Secret *s) {
        if (s->p) {
                explicit_bzero(s->p, s->size);
                free(s->p);
        }
        *s = (Secret) {};
}

/* Reads the value from path or stdin (one trailing newline dropped). */
static int read_value(const char *path, Secret *ret) {
        _cleanup_close_ int own = -EBADF;
        struct termios old, quiet;
        bool restore = false;
        Secret s = { .size = CRED_VALUE_MAX + 2 };
        int fd = STDIN_FILENO, r = 0;
        ssize_t k;

        if (path) {
                own = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (own < 0)
                        return cli_error_errno(-errno, "cannot open %s: %m", path);
                fd = own;
        } else if (isatty(fd) && tcgetattr(fd, &old) == 0) {
                quiet = old;
                quiet.c_lflag &= ~(tcflag_t) ECHO;
                restore = tcsetattr(fd, TCSAFLUSH, &quiet) == 0;
                fprintf(stderr, "value: ");
                fflush(stderr);
        }
        s.p = malloc(s.size);
        if (!s.p)
                r = -ENOMEM;
        while (r == 0 && s.n < s.size) {
                k = read(fd, s.p + s.n, s.size - s.n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        r = -errno;
                else if (k == 0)
                        break;
                else {
                        s.n += (size_t) k;
                        if (restore && memchr(s.p + s.n - (size_t) k, '\n', (size_t) k))
                                break; /* a terminal: one line */
                }
        }
        if (restore) {
                (void) tcsetattr(fd, TCSAFLUSH, &old);
                fprintf(stderr, "\n");
        }
        if (r < 0) {
                secret_done(&s);
                return cli_error_errno(r, "cannot read the value: %m");
        }
        if (s.n > 0 && s.p[s.n - 1] == '\n')
                s.n--;
        if (s.n > 0 && s.p[s.n - 1] == '\r')
                s.n--;
        if (s.n == 0 || s.n > CRED_VALUE_MAX) {
                secret_done(&s);
                return cli_error("the value must be 1 to %d bytes (read from %s)", CRED_VALUE_MAX,
                                 path ? path : "stdin");
        }
        *ret = s;
        return 0;
}

/* Calls with a body that holds the value, and wipes the body. */
static int call_with_secret(const char *method, const char *target, JsonWriter *w, CliResponse *resp) {
        char *body = NULL;
        size_t n = 0;
        int r;

        r = json_w_finish(w, &body, &n);
        if (r < 0)
                return cli_error_errno(r, "out of memory");
        r = cli_call(method, target, body, resp);
        explicit_bzero(body, n);
        free(body);
        return r;
}

static char *cred_target(const char *name, const char *suffix) {
        _cleanup_free_ char *esc = cli_escape(name);
        return esc ? strjoin("/v1/credentials/", esc, suffix ?: "") : NULL;
}

static void print_credential(const JsonValue *c) {
        printf("%s\t%s\t%s\n", strna(json_string(json_get(c, "name"))), strna(json_string(json_get(c, "state"))),
               strna(json_string(json_get(c, "placeholder"))));
}

/* What add and update say of a credential, but its value. */
typedef struct CredFields {
        char **hosts;
        const char *header, *basic_user, *env, *expires, *value_file;
} CredFields;

static void cred_fields_done(CredFields *f) {
        strv_free(f->hosts);
        *f = (CredFields) {};
}

/* The options of add and update, then NAME. > 0: parsed. */
static int cred_fields_parse(CliParser *p, int argc, char **argv, CredFields *f) {
        const char *arg = NULL;
        int r;

        r = cli_parser_init(p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(p, add_options, &arg)) > 0) {
                switch (r) {
                case OPT_HOST:
                        if (strv_extend(&f->hosts, arg) < 0)
                                return cli_error_errno(-ENOMEM, "out of memory");
                        break;
                case OPT_HEADER:
                        f->header = arg;
                        break;
                case OPT_BASIC_USER:
                        f->basic_user = arg;
                        break;
                case OPT_ENV:
                        f->env = arg;
                        break;
                case OPT_EXPIRES:
                        f->expires = arg;
                        break;
                case OPT_VALUE_FILE:
                        f->value_file = arg;
                        break;
                }
        }
        return cli_parser_end(p, r, 1, 1);
}

/* The fields given, into the open object w ("never" expires: null). */
static void cred_fields_write(JsonWriter *w, const CredFields *f) {
        if (f->hosts) {
                json_w_key(w, "hosts");
                json_w_array_begin(w);
                for (char **h = f->hosts; *h; h++)
                        json_w_string(w, *h);
                json_w_array_end(w);
        }
        if (f->header)
                json_w_kv_string(w, "header", f->header);
        if (f->basic_user)
                json_w_kv_string(w, "basic_user", f->basic_user);
        if (f->env)
                json_w_kv_string(w, "env", f->env);
        if (f->expires && streq(f->expires, "never")) {
                json_w_key(w, "expires_at");
                json_w_null(w);
        } else if (f->expires)
                json_w_kv_string(w, "expires_at", f->expires);
}

/* Calls with the body, prints the credential it answers. */
static int cred_call_print(const char *method, const char *target, JsonWriter *w) {
        _cleanup_(cli_response_done) CliResponse resp = {};
        int r;

        r = call_with_secret(method, target, w, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        print_credential(resp.json);
        return 0;
}

static int cred_add(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_(cred_fields_done) CredFields f = {};
        _cleanup_(secret_done) Secret value = {};
        int r;

        r = cred_fields_parse(&p, argc, argv, &f);
        if (r <= 0)
                return r;
        if (!f.hosts)
                return cli_usage_error("give at least one --host");
        r = read_value(f.value_file, &value);
        if (r < 0)
                return r;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "name", p.pos[0]);
        cred_fields_write(&w, &f);
        json_w_key(&w, "value");
        json_w_string_n(&w, value.p, value.n);
        json_w_object_end(&w);
        return cred_call_print("POST", "/v1/credentials", &w);
}

static int cred_ls(int argc, char **argv) {
        static const char *const header[] = { "NAME", "STATE", "HOSTS", "APPLY", "ENV", "VERSION", "EXPIRES" };
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_(cli_table_done) CliTable t = {};
        const JsonValue *list;
        int r;

        r = cli_parser_positionals(&p, argc, argv, 0, 1);
        if (r <= 0)
                return r;
        if (p.n_pos == 1) { /* space cred ls SANDBOX: what it was granted */
                _cleanup_free_ char *esc = cli_escape(p.pos[0]);
                _cleanup_free_ char *target = esc ? strjoin("/v1/sandboxes/", esc, "/credentials") : NULL;
                if (!target)
                        return cli_error_errno(-ENOMEM, "out of memory");
                r = cli_call("GET", target, NULL, &resp);
        } else
                r = cli_call("GET", "/v1/credentials", NULL, &resp);
        if (r < 0)
                return r;
        if (arg_json)
                return cli_print_raw(resp.body, resp.body_len);
        list = json_get(resp.json, "credentials");
        if (json_type(list) != JSON_ARRAY)
                return cli_error("the server's answer has no credential list");
        r = cli_table_new(&t, header, ELEMENTSOF(header));
        if (r < 0)
                return r;
        for (size_t i = 0; i < json_array_size(list); i++) {
                const JsonValue *c = json_array_at(list, i);
                char *row[] = {
                        cli_field_text(c, "name"),    cli_field_text(c, "state"),   cli_field_text(c, "hosts"),
                        cli_field_text(c, "apply"),   cli_field_text(c, "env"),     cli_field_text(c, "version"),
                        cli_time_text(json_get(c, "expires_at")),
                };
                r = cli_table_add(&t, row);
                if (r < 0)
                        return r;
        }
        cli_table_print(&t, stdout);
        return 0;
}

/* show NAME, rm NAME..., revoke NAME... */
static int cred_simple(int argc, char **argv, const char *method, const char *suffix, bool many) {
        _cleanup_(cli_parser_done) CliParser p = {};
        int r, ret = 0;

        r = cli_parser_positionals(&p, argc, argv, 1, many ? SIZE_MAX : 1);
        if (r <= 0)
                return r;
        for (size_t i = 0; i < p.n_pos; i++) {
                _cleanup_(cli_response_done) CliResponse resp = {};
                _cleanup_free_ char *target = cred_target(p.pos[i], suffix);

                if (!target)
                        return cli_error_errno(-ENOMEM, "out of memory");
                r = cli_call(method, target, NULL, &resp);
                if (r < 0) {
                        ret = r;
                        continue;
                }
                if (arg_json && resp.body_len > 0)
                        (void) cli_print_raw(resp.body, resp.body_len);
                else if (streq(method, "DELETE"))
                        printf("%s\n", p.pos[i]);
                else if (streq(method, "GET"))
                        cli_print_object(resp.json, "");
                else
                        print_credential(resp.json);
        }
        return ret;
}

static int cred_show(int argc, char **argv) {
        return cred_simple(argc, argv, "GET", NULL, false);
}

static int cred_rm(int argc, char **argv) {
        return cred_simple(argc, argv, "DELETE", NULL, true);
}

static int cred_revoke(int argc, char **argv) {
        return cred_simple(argc, argv, "POST", "/revoke", true);
}

static int cred_rotate(int argc, char **argv) {
        static const CliOption options[] = { { "value-file", 0, true, OPT_VALUE_FILE }, {} };
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_(secret_done) Secret value = {};
        _cleanup_free_ char *target = NULL;
        const char *value_file = NULL, *arg = NULL;
        int r;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, options, &arg)) > 0)
                value_file = arg;
        r = cli_parser_end(&p, r, 1, 1);
        if (r <= 0)
                return r;
        target = cred_target(p.pos[0], NULL);
        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        r = read_value(value_file, &value);
        if (r < 0)
                return r;
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "value");
        json_w_string_n(&w, value.p, value.n);
        json_w_object_end(&w);
        return cred_call_print("PATCH", target, &w);
}

/* update NAME [--host H]... [--header F | --basic-user U] [--env VAR] [--expires T|never]:
 * PATCH of everything but the value (--host replaces the host list). */
static int cred_update(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_(cred_fields_done) CredFields f = {};
        _cleanup_free_ char *target = NULL;
        int r;

        r = cred_fields_parse(&p, argc, argv, &f);
        if (r <= 0)
                return r;
        if (f.value_file)
                return cli_usage_error("a new value goes with 'space cred rotate', not update");
        if (!f.hosts && !f.header && !f.basic_user && !f.env && !f.expires)
                return cli_usage_error("nothing to change: give --host, --header, --basic-user, --env or --expires");
        target = cred_target(p.pos[0], NULL);
        if (!target)
                return cli_error_errno(-ENOMEM, "out of memory");
        json_w_init(&w);
        json_w_object_begin(&w);
        cred_fields_write(&w, &f);
        json_w_object_end(&w);
        return cred_call_print("PATCH", target, &w);
}

/* grant ID NAME... / ungrant ID NAME... */
static int cred_grant_common(int argc, char **argv, const char *method) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_free_ char *sb = NULL, *prefix = NULL;
        int r;

        r = cli_parser_positionals(&p, argc, argv, 2, SIZE_MAX);
        if (r <= 0)
                return r;
        sb = cli_escape(p.pos[0]);
        prefix = sb ? strjoin("/v1/sandboxes/", sb, "/credentials/") : NULL;
        if (!prefix)
                return cli_error_errno(-ENOMEM, "out of memory");
        return cli_call_each(&p, 1, method, prefix, false);
}

static int cred_grant(int argc, char **argv) {
        return cred_grant_common(argc, argv, "POST");
}

static int cred_ungrant(int argc, char **argv) {
        return cred_grant_common(argc, argv, "DELETE");
}

int cli_cred(int argc, char **argv) {
        static const CliSubcommand sub[] = {
                { "add", cred_add },       { "ls", cred_ls },         { "show", cred_show },
                { "update", cred_update },
                { "rm", cred_rm },         { "rotate", cred_rotate }, { "revoke", cred_revoke },
                { "grant", cred_grant },   { "ungrant", cred_ungrant },
        };

        return cli_run_subcommand("cred", sub, ELEMENTSOF(sub), argc, argv);
}
