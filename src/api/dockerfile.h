/* SPDX-License-Identifier: MIT */
#pragma once

/* A strict Dockerfile parser for template builds (dockerfile.c, pure): one
 * stage (FROM a template, an OCI reference or scratch), RUN, COPY, ADD of
 * local files, ENV, ARG, WORKDIR, USER, LABEL, ENTRYPOINT and CMD, with line
 * continuations and comments. Everything else (EXPOSE, multi-stage, flags it
 * does not know, URLs in ADD) is an error naming the line. Also the
 * variable expansion of the instructions that take it ($X, ${X}, ${X:-d},
 * ${X:+d}), the clean context paths of COPY and the .dockerignore patterns. */

#include <stdbool.h>
#include <stddef.h>

#define DOCKERFILE_MAX (1024U * 1024U)     /* bytes of a Dockerfile */
#define DOCKERFILE_STEPS_MAX 256U          /* instructions */
#define DOCKERFILE_ERR_MAX 256U

typedef enum DockerfileKind {
        DOCKERFILE_FROM,
        DOCKERFILE_RUN,
        DOCKERFILE_COPY,
        DOCKERFILE_ADD,
        DOCKERFILE_ENV,
        DOCKERFILE_ARG,
        DOCKERFILE_WORKDIR,
        DOCKERFILE_USER,
        DOCKERFILE_LABEL,
        DOCKERFILE_ENTRYPOINT,
        DOCKERFILE_CMD,
        _DOCKERFILE_KIND_MAX,
} DockerfileKind;

typedef struct DockerfileStep {
        DockerfileKind kind;
        unsigned line;  /* where the instruction begins (1-based) */
        char *text;     /* the instruction with its continuations joined (one line) */
        bool json;      /* RUN/CMD/ENTRYPOINT/COPY/ADD in the JSON (exec) form */
        char *shell;    /* RUN/CMD/ENTRYPOINT in the shell form: the command */
        char **args;    /* FROM: [image]; JSON forms: the array; COPY/ADD: sources then the destination;
                         * WORKDIR, USER: [value] */
        char **kv;      /* ENV, LABEL: "K=V"...; ARG: "K" or "K=V" */
        char *chown;    /* COPY/ADD --chown=USER[:GROUP] */
        char *user;     /* RUN: the user of this command only (steps not from a Dockerfile); NULL = USER's */
        unsigned mode;  /* COPY: the mode of the copied files (steps not from a Dockerfile); 0 = theirs */
} DockerfileStep;

typedef struct Dockerfile {
        DockerfileStep *steps;
        size_t n;
        size_t from; /* the index of the FROM (ARGs may come before it) */
} Dockerfile;

const char *dockerfile_kind_to_string(DockerfileKind k);
/* 0, or -EINVAL (-E2BIG, -ENOMEM) with err "line N: ..." */
int dockerfile_parse(const char *text, size_t len, Dockerfile *ret, char *err, size_t errlen);
void dockerfile_done(Dockerfile *d);

/* Expands $NAME, ${NAME}, ${NAME:-word} and ${NAME:+word} from vars ("K=V"
 * strv, the last of a name wins); \$ is a literal $. An unknown name is "". */
int dockerfile_expand(const char *in, char *const *vars, char **ret, char *err, size_t errlen);

/* A context path made clean and relative ("./a//b/" → "a/b", "" → "."):
 * -EINVAL for one that leaves the context (".." above its root). A leading
 * "/" means the context's root. */
int dockerfile_context_path(const char *in, char **ret);

/* .dockerignore: its patterns (comments and blank lines dropped, each
 * cleaned; "!" keeps its meaning). */
int dockerignore_parse(const char *text, size_t len, char ***ret);
/* Whether a clean context path is ignored (the last matching pattern wins; a
 * pattern matches the path or a directory above it; "**" any number of
 * components). */
bool dockerignore_match(char *const *patterns, const char *path);
