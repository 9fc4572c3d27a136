/* SPDX-License-Identifier: MIT */
/* The Dockerfile of template builds (dockerfile.h): parsed strictly, every
 * refusal naming its line. */

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alloc-util.h"
#include "dockerfile.h"
#include "json.h"
#include "str-util.h"

static const char *const kind_names[_DOCKERFILE_KIND_MAX] = {
        [DOCKERFILE_FROM] = "FROM",       [DOCKERFILE_RUN] = "RUN",     [DOCKERFILE_COPY] = "COPY",
        [DOCKERFILE_ADD] = "ADD",         [DOCKERFILE_ENV] = "ENV",     [DOCKERFILE_ARG] = "ARG",
        [DOCKERFILE_WORKDIR] = "WORKDIR", [DOCKERFILE_USER] = "USER",   [DOCKERFILE_LABEL] = "LABEL",
        [DOCKERFILE_ENTRYPOINT] = "ENTRYPOINT", [DOCKERFILE_CMD] = "CMD",
};

/* Known to Docker, refused here. */
static const char *const unsupported[] = { "EXPOSE", "VOLUME", "HEALTHCHECK", "ONBUILD", "STOPSIGNAL", "SHELL",
                                           "MAINTAINER", NULL };

const char *dockerfile_kind_to_string(DockerfileKind k) {
        return k >= 0 && k < _DOCKERFILE_KIND_MAX ? kind_names[k] : NULL;
}

static int fail(char *err, size_t errlen, int r, unsigned line, const char *fmt, ...) _printf_(5, 6);
static int fail(char *err, size_t errlen, int r, unsigned line, const char *fmt, ...) {
        va_list ap;
        int n = 0;

        if (err && errlen > 0) {
                if (line > 0)
                        n = snprintf(err, errlen, "line %u: ", line);
                if (n >= 0 && (size_t) n < errlen) {
                        va_start(ap, fmt);
                        vsnprintf(err + n, errlen - (size_t) n, fmt, ap);
                        va_end(ap);
                }
        }
        return r;
}

static void step_done(DockerfileStep *s) {
        free(s->text);
        free(s->shell);
        strv_free(s->args);
        strv_free(s->kv);
        free(s->chown);
        free(s->user);
}

void dockerfile_done(Dockerfile *d) {
        if (!d)
                return;
        for (size_t i = 0; i < d->n; i++)
                step_done(&d->steps[i]);
        free(d->steps);
        *d = (Dockerfile){};
}

/* Splits s into words at blanks; "..." and '...' quote (and are removed), a
 * backslash escapes the next character outside '...'. */
static int split_words(const char *s, char ***ret) {
        _cleanup_strv_free_ char **words = NULL;
        const char *p = s;

        for (;;) {
                _cleanup_free_ char *w = NULL;
                size_t n = 0;
                char q = 0;

                while (*p == ' ' || *p == '\t')
                        p++;
                if (!*p)
                        break;
                w = malloc(strlen(p) + 1);
                if (!w)
                        return -ENOMEM;
                for (; *p; p++) {
                        if (!q && (*p == ' ' || *p == '\t'))
                                break;
                        if (q != '\'' && *p == '\\' && p[1]) {
                                w[n++] = *++p;
                                continue;
                        }
                        if (!q && (*p == '"' || *p == '\'')) {
                                q = *p;
                                continue;
                        }
                        if (q && *p == q) {
                                q = 0;
                                continue;
                        }
                        w[n++] = *p;
                }
                if (q)
                        return -EBADMSG; /* an unterminated quote */
                w[n] = 0;
                if (strv_push(&words, TAKE_PTR(w)) < 0)
                        return -ENOMEM;
        }
        if (!words) {
                words = new0(char *, 1);
                if (!words)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(words);
        return 0;
}

/* The JSON (exec) form: 1 with the strings, 0 if rest is not a JSON array of strings. */
static int json_form(const char *rest, char ***ret) {
        _cleanup_json_ JsonValue *v = NULL;
        _cleanup_strv_free_ char **l = NULL;

        if (rest[0] != '[')
                return 0;
        if (json_parse(rest, strlen(rest), &v, NULL, 0) < 0 || json_type(v) != JSON_ARRAY)
                return 0;
        for (size_t i = 0; i < json_array_size(v); i++) {
                const char *s = json_string(json_array_at(v, i));
                if (!s)
                        return 0;
                if (strv_extend(&l, s) < 0)
                        return -ENOMEM;
        }
        if (!l) {
                l = new0(char *, 1);
                if (!l)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 1;
}

static bool env_name_valid(const char *s, size_t n) {
        if (n == 0 || !(isalpha((unsigned char) s[0]) || s[0] == '_'))
                return false;
        for (size_t i = 1; i < n; i++)
                if (!(isalnum((unsigned char) s[i]) || s[i] == '_'))
                        return false;
        return true;
}

static int parse_command(DockerfileStep *s, const char *rest, bool empty_ok, char *err, size_t errlen) {
        int r;

        if (startswith(rest, "--"))
                return fail(err, errlen, -EINVAL, s->line, "%s flags (%.32s) are not supported",
                            kind_names[s->kind], rest);
        r = json_form(rest, &s->args);
        if (r < 0)
                return r;
        if (r > 0) {
                s->json = true;
                if (!empty_ok && !s->args[0])
                        return fail(err, errlen, -EINVAL, s->line, "%s needs a command", kind_names[s->kind]);
                return 0;
        }
        if (!rest[0])
                return fail(err, errlen, -EINVAL, s->line, "%s needs a command", kind_names[s->kind]);
        s->shell = strdup(rest);
        return s->shell ? 0 : -ENOMEM;
}

static int parse_copy(DockerfileStep *s, const char *rest, char *err, size_t errlen) {
        const char *p = rest;
        int r;

        while (startswith(p, "--")) {
                const char *end = p + strcspn(p, " \t");
                _cleanup_free_ char *flag = strndup(p, (size_t) (end - p));
                const char *v;

                if (!flag)
                        return -ENOMEM;
                if ((v = startswith(flag, "--chown="))) {
                        if (!v[0] || strlen(v) > 64)
                                return fail(err, errlen, -EINVAL, s->line, "--chown needs USER[:GROUP]");
                        free(s->chown);
                        s->chown = strdup(v);
                        if (!s->chown)
                                return -ENOMEM;
                } else if (startswith(flag, "--from"))
                        return fail(err, errlen, -EINVAL, s->line,
                                    "%s --from (a multi-stage build) is not supported", kind_names[s->kind]);
                else
                        return fail(err, errlen, -EINVAL, s->line, "%s flag '%.32s' is not supported",
                                    kind_names[s->kind], flag);
                p = end;
                while (*p == ' ' || *p == '\t')
                        p++;
        }
        r = json_form(p, &s->args);
        if (r < 0)
                return r;
        if (r > 0)
                s->json = true;
        else {
                r = split_words(p, &s->args);
                if (r == -EBADMSG)
                        return fail(err, errlen, -EINVAL, s->line, "an unterminated quote");
                if (r < 0)
                        return r;
        }
        if (strv_length(s->args) < 2)
                return fail(err, errlen, -EINVAL, s->line, "%s needs a source and a destination",
                            kind_names[s->kind]);
        for (char **a = s->args; a[1]; a++) {
                if (!a[0][0])
                        return fail(err, errlen, -EINVAL, s->line, "an empty source");
                if (s->kind == DOCKERFILE_ADD && (strstr(*a, "://") || startswith(*a, "git@")))
                        return fail(err, errlen, -EINVAL, s->line,
                                    "ADD of a URL (%.64s) is not supported: only files from the context", *a);
        }
        if (!s->args[strv_length(s->args) - 1][0])
                return fail(err, errlen, -EINVAL, s->line, "an empty destination");
        return 0;
}

/* ENV/LABEL K=V...; ENV also the old "ENV K V..."; ARG K[=V]... */
static int parse_kv(DockerfileStep *s, const char *rest, char *err, size_t errlen) {
        _cleanup_strv_free_ char **words = NULL;
        int r;

        r = split_words(rest, &words);
        if (r == -EBADMSG)
                return fail(err, errlen, -EINVAL, s->line, "an unterminated quote");
        if (r < 0)
                return r;
        if (!words[0])
                return fail(err, errlen, -EINVAL, s->line, "%s needs a name", kind_names[s->kind]);
        if (s->kind == DOCKERFILE_ENV && !strchr(words[0], '=')) {
                /* ENV NAME the rest of the line */
                const char *v = rest + strcspn(rest, " \t");
                while (*v == ' ' || *v == '\t')
                        v++;
                if (!env_name_valid(words[0], strlen(words[0])))
                        return fail(err, errlen, -EINVAL, s->line, "'%.64s' is not a variable name", words[0]);
                if (!v[0])
                        return fail(err, errlen, -EINVAL, s->line, "ENV %.64s needs a value", words[0]);
                r = strv_push(&s->kv, strjoin(words[0], "=", v));
                return r < 0 ? -ENOMEM : 0;
        }
        for (char **w = words; *w; w++) {
                const char *eq = strchr(*w, '=');
                size_t n = eq ? (size_t) (eq - *w) : strlen(*w);

                if (s->kind != DOCKERFILE_ARG && !eq)
                        return fail(err, errlen, -EINVAL, s->line, "%s takes NAME=VALUE pairs, not '%.64s'",
                                    kind_names[s->kind], *w);
                if (s->kind == DOCKERFILE_LABEL ? n == 0 : !env_name_valid(*w, n))
                        return fail(err, errlen, -EINVAL, s->line, "'%.*s' is not a %s name", (int) MIN(n, (size_t) 64),
                                    *w, s->kind == DOCKERFILE_LABEL ? "label" : "variable");
                if (strv_extend(&s->kv, *w) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int parse_instruction(Dockerfile *d, unsigned line, const char *text, char *err, size_t errlen) {
        _cleanup_(step_done) DockerfileStep s = { .line = line };
        _cleanup_free_ char *word = NULL;
        const char *rest;
        size_t n;
        int r, kind = -1;

        n = strcspn(text, " \t");
        word = strndup(text, n);
        if (!word)
                return -ENOMEM;
        for (char *c = word; *c; c++)
                *c = (char) toupper((unsigned char) *c);
        rest = text + n;
        while (*rest == ' ' || *rest == '\t')
                rest++;
        for (int k = 0; k < _DOCKERFILE_KIND_MAX; k++)
                if (streq(word, kind_names[k]))
                        kind = k;
        if (kind < 0) {
                for (const char *const *u = unsupported; *u; u++)
                        if (streq(word, *u))
                                return fail(err, errlen, -EINVAL, line, "%s is not supported by template builds", *u);
                return fail(err, errlen, -EINVAL, line, "unknown instruction '%.32s'", word);
        }
        if (d->n >= DOCKERFILE_STEPS_MAX)
                return fail(err, errlen, -E2BIG, line, "more than %u instructions", DOCKERFILE_STEPS_MAX);
        s.kind = (DockerfileKind) kind;
        s.text = strdup(text);
        if (!s.text)
                return -ENOMEM;
        bool have_from = d->n > 0 && d->steps[d->from].kind == DOCKERFILE_FROM;
        if (!have_from && s.kind != DOCKERFILE_FROM && s.kind != DOCKERFILE_ARG)
                return fail(err, errlen, -EINVAL, line, "%s before FROM (only ARG may come first)", word);

        switch (s.kind) {
        case DOCKERFILE_FROM: {
                if (have_from)
                        return fail(err, errlen, -EINVAL, line, "a second FROM (a multi-stage build) is not supported");
                if (startswith(rest, "--"))
                        return fail(err, errlen, -EINVAL, line, "FROM flags (%.32s) are not supported", rest);
                r = split_words(rest, &s.args);
                if (r < 0 && r != -EBADMSG)
                        return r;
                size_t m = r < 0 ? 0 : strv_length(s.args);
                if (m == 3 && strcasecmp(s.args[1], "AS") == 0) {
                        free(s.args[1]);
                        free(s.args[2]);
                        s.args[1] = s.args[2] = NULL;
                        m = 1;
                }
                if (m != 1)
                        return fail(err, errlen, -EINVAL, line, "FROM takes one image: a template, an OCI reference "
                                    "or scratch");
                d->from = d->n;
                break;
        }
        case DOCKERFILE_RUN:
                r = parse_command(&s, rest, false, err, errlen);
                break;
        case DOCKERFILE_CMD:
        case DOCKERFILE_ENTRYPOINT:
                r = parse_command(&s, rest, true, err, errlen);
                break;
        case DOCKERFILE_COPY:
        case DOCKERFILE_ADD:
                r = parse_copy(&s, rest, err, errlen);
                break;
        case DOCKERFILE_ENV:
        case DOCKERFILE_ARG:
        case DOCKERFILE_LABEL:
                r = parse_kv(&s, rest, err, errlen);
                break;
        case DOCKERFILE_WORKDIR:
        case DOCKERFILE_USER: {
                _cleanup_free_ char *v = strdup(rest);
                if (!v)
                        return -ENOMEM;
                for (size_t k = strlen(v); k > 0 && (v[k - 1] == ' ' || v[k - 1] == '\t'); k--)
                        v[k - 1] = 0;
                if (!v[0])
                        return fail(err, errlen, -EINVAL, line, "%s needs a value", word);
                if (s.kind == DOCKERFILE_USER && strpbrk(v, " \t"))
                        return fail(err, errlen, -EINVAL, line, "USER takes one USER[:GROUP]");
                r = strv_push(&s.args, TAKE_PTR(v));
                break;
        }
        default:
                r = -EINVAL;
        }
        if (r < 0)
                return r;
        DockerfileStep *grown = reallocarray(d->steps, d->n + 1, sizeof *grown);
        if (!grown)
                return -ENOMEM;
        d->steps = grown;
        d->steps[d->n++] = s;
        s = (DockerfileStep){};
        return 0;
}

int dockerfile_parse(const char *text, size_t len, Dockerfile *ret, char *err, size_t errlen) {
        _cleanup_(dockerfile_done) Dockerfile d = {};
        _cleanup_free_ char *cur = NULL;
        size_t cur_n = 0;
        unsigned line = 0, start = 0;
        const char *p = text, *end = text + len;
        int r;

        if (err && errlen)
                err[0] = 0;
        if (len > DOCKERFILE_MAX)
                return fail(err, errlen, -E2BIG, 0, "the Dockerfile is larger than %u bytes", DOCKERFILE_MAX);
        if (memchr(text, 0, len))
                return fail(err, errlen, -EINVAL, 0, "the Dockerfile holds a NUL byte");
        cur = malloc(len + 1);
        if (!cur)
                return -ENOMEM;
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t n = nl ? (size_t) (nl - p) : (size_t) (end - p);
                const char *l = p;
                bool cont;

                line++;
                p = nl ? nl + 1 : end;
                if (n > 0 && l[n - 1] == '\r')
                        n--;
                while (n > 0 && (*l == ' ' || *l == '\t')) {
                        l++;
                        n--;
                }
                if (n == 0 || *l == '#')
                        continue; /* blank, a comment (also inside a continuation), a parser directive */
                while (n > 0 && (l[n - 1] == ' ' || l[n - 1] == '\t'))
                        n--;
                cont = n > 0 && l[n - 1] == '\\';
                if (cont)
                        n--;
                if (cur_n == 0)
                        start = line;
                memcpy(cur + cur_n, l, n);
                cur_n += n;
                if (cont)
                        continue;
                while (cur_n > 0 && (cur[cur_n - 1] == ' ' || cur[cur_n - 1] == '\t'))
                        cur_n--;
                cur[cur_n] = 0;
                if (cur_n == 0)
                        continue;
                r = parse_instruction(&d, start, cur, err, errlen);
                if (r < 0)
                        return r == -ENOMEM ? fail(err, errlen, r, start, "out of memory") : r;
                cur_n = 0;
        }
        if (cur_n > 0) {
                while (cur_n > 0 && (cur[cur_n - 1] == ' ' || cur[cur_n - 1] == '\t'))
                        cur_n--;
                cur[cur_n] = 0;
                if (cur_n > 0) {
                        r = parse_instruction(&d, start, cur, err, errlen);
                        if (r < 0)
                                return r == -ENOMEM ? fail(err, errlen, r, start, "out of memory") : r;
                }
        }
        if (d.n == 0 || d.steps[d.from].kind != DOCKERFILE_FROM)
                return fail(err, errlen, -EINVAL, 0, "the Dockerfile has no FROM");
        *ret = d;
        d = (Dockerfile){};
        return 0;
}

static const char *var_get(char *const *vars, const char *name, size_t n) {
        const char *found = NULL;

        for (char *const *v = vars; v && *v; v++)
                if (strncmp(*v, name, n) == 0 && (*v)[n] == '=')
                        found = *v + n + 1;
        return found;
}

int dockerfile_expand(const char *in, char *const *vars, char **ret, char *err, size_t errlen) {
        _cleanup_free_ char *out = NULL;
        size_t n = 0, cap = 0;

#define PUT(p, len)                                                       \
        do {                                                              \
                size_t _l = (len);                                        \
                if (n + _l + 1 > 1024 * 1024)                             \
                        return fail(err, errlen, -E2BIG, 0, "a value expands past 1 MiB"); \
                if (GREEDY_REALLOC(out, cap, n + _l + 1) < 0)             \
                        return -ENOMEM;                                   \
                memcpy(out + n, (p), _l);                                 \
                n += _l;                                                  \
        } while (0)

        for (const char *p = in; *p;) {
                if (p[0] == '\\' && p[1] == '$') {
                        PUT("$", 1);
                        p += 2;
                        continue;
                }
                if (p[0] != '$') {
                        PUT(p, 1);
                        p++;
                        continue;
                }
                if (p[1] == '{') {
                        const char *close = strchr(p + 2, '}'), *name = p + 2, *v;
                        size_t nl;
                        if (!close)
                                return fail(err, errlen, -EINVAL, 0, "an unterminated ${ in '%.64s'", in);
                        nl = strcspn(name, ":}");
                        if (!env_name_valid(name, nl))
                                return fail(err, errlen, -EINVAL, 0, "a bad variable in '%.64s'", in);
                        v = var_get(vars, name, nl);
                        if (name[nl] == ':') {
                                const char *word = name + nl + 2;
                                if (name[nl + 1] != '-' && name[nl + 1] != '+')
                                        return fail(err, errlen, -EINVAL, 0,
                                                    "only ${NAME:-word} and ${NAME:+word} are supported, in '%.64s'",
                                                    in);
                                if (name[nl + 1] == '-') {
                                        if (v && *v)
                                                PUT(v, strlen(v));
                                        else
                                                PUT(word, (size_t) (close - word));
                                } else if (v && *v)
                                        PUT(word, (size_t) (close - word));
                        } else if (v)
                                PUT(v, strlen(v));
                        p = close + 1;
                        continue;
                }
                size_t nl = 0;
                const char *name = p + 1, *v;
                while (name[nl] && (isalnum((unsigned char) name[nl]) || name[nl] == '_'))
                        nl++;
                if (nl == 0 || isdigit((unsigned char) name[0])) {
                        PUT("$", 1);
                        p++;
                        continue;
                }
                v = var_get(vars, name, nl);
                if (v)
                        PUT(v, strlen(v));
                p = name + nl;
        }
#undef PUT
        if (GREEDY_REALLOC(out, cap, n + 1) < 0)
                return -ENOMEM;
        out[n] = 0;
        *ret = TAKE_PTR(out);
        return 0;
}

int dockerfile_context_path(const char *in, char **ret) {
        _cleanup_free_ char *out = NULL;
        size_t n = 0;
        const char *p = in;

        out = malloc(strlen(in) + 2);
        if (!out)
                return -ENOMEM;
        while (*p) {
                size_t l;
                while (*p == '/')
                        p++;
                l = strcspn(p, "/");
                if (l == 0)
                        break;
                if (l == 1 && p[0] == '.') {
                } else if (l == 2 && p[0] == '.' && p[1] == '.') {
                        if (n == 0)
                                return -EINVAL;
                        while (n > 0 && out[n - 1] != '/')
                                n--;
                        if (n > 0)
                                n--;
                } else {
                        if (n > 0)
                                out[n++] = '/';
                        memcpy(out + n, p, l);
                        n += l;
                }
                p += l;
        }
        if (n == 0)
                out[n++] = '.';
        out[n] = 0;
        *ret = TAKE_PTR(out);
        return 0;
}

int dockerignore_parse(const char *text, size_t len, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        const char *p = text, *end = text + len;

        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t n = nl ? (size_t) (nl - p) : (size_t) (end - p);
                _cleanup_free_ char *line = strndup(p, n), *clean = NULL;
                char *s;
                bool neg;

                p = nl ? nl + 1 : end;
                if (!line)
                        return -ENOMEM;
                s = line;
                while (*s == ' ' || *s == '\t')
                        s++;
                for (size_t k = strlen(s); k > 0 && strchr(" \t\r", s[k - 1]); k--)
                        s[k - 1] = 0;
                if (!*s || *s == '#')
                        continue;
                neg = *s == '!';
                if (neg)
                        s++;
                if (dockerfile_context_path(s, &clean) < 0 || streq(clean, "."))
                        continue; /* a pattern above the context matches nothing in it */
                if (strv_push(&l, neg ? strjoin("!", clean) : TAKE_PTR(clean)) < 0)
                        return -ENOMEM;
        }
        if (!l) {
                l = new0(char *, 1);
                if (!l)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

/* pattern components against path components, "**" any number of them */
static bool match_parts(const char *pat, const char *path) {
        size_t pl = strcspn(pat, "/"), sl;
        char pc[256], sc[256];

        if (!*pat)
                return !*path;
        if (pl == 2 && pat[0] == '*' && pat[1] == '*') {
                const char *rest = pat[2] ? pat + 3 : pat + 2;
                for (const char *s = path;; s++) {
                        if (match_parts(rest, s))
                                return true;
                        s = strchr(s, '/');
                        if (!s)
                                return false;
                }
        }
        if (!*path)
                return false;
        sl = strcspn(path, "/");
        if (pl >= sizeof pc || sl >= sizeof sc)
                return false;
        memcpy(pc, pat, pl);
        pc[pl] = 0;
        memcpy(sc, path, sl);
        sc[sl] = 0;
        if (fnmatch(pc, sc, 0) != 0)
                return false;
        return match_parts(pat[pl] ? pat + pl + 1 : pat + pl, path[sl] ? path + sl + 1 : path + sl);
}

static bool match_or_parent(const char *pat, const char *path) {
        char buf[4096];
        size_t n = strlen(path);

        if (n >= sizeof buf)
                return false;
        memcpy(buf, path, n + 1);
        for (;;) {
                if (match_parts(pat, buf))
                        return true;
                char *slash = strrchr(buf, '/');
                if (!slash)
                        return false;
                *slash = 0;
        }
}

bool dockerignore_match(char *const *patterns, const char *path) {
        bool ignored = false;

        for (char *const *p = patterns; p && *p; p++) {
                bool neg = (*p)[0] == '!';
                if (match_or_parent(neg ? *p + 1 : *p, path))
                        ignored = !neg;
        }
        return ignored;
}
