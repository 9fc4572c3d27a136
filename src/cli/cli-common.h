/* SPDX-License-Identifier: MIT */
#pragma once

/* Shared parts of the space CLI: configuration (URL, key, state dir), the
 * option parser every verb uses, HTTP calls with the API's error handling,
 * and printing helpers.
 *
 * Error convention: every function that fails prints exactly one line
 * "space: <reason>" on stderr where the failure is found (with --json one
 * line {"error":{"code":...,"message":...}}) and returns a negative errno;
 * callers only propagate it. The failure's class is remembered, and main()
 * exits with it (CLI_EXIT_*; the exec verbs with CLI_EXIT_EXEC_FAILED). */

#include <stdarg.h>
#include <stdio.h>

#include "alloc-util.h"
#include "http-client.h"
#include "json.h"
#include "macros.h"
#include "str-util.h"

#define CLI_DEFAULT_URL "http://127.0.0.1:7070"
#define CLI_DEFAULT_STATE_DIR "/var/lib/space"
#define CLI_KEY_FILE_MAX 4096U               /* admin.key */
#define CLI_RESPONSE_MAX (64U * 1024U * 1024U) /* a JSON answer (lists can be long) */
#define CLI_LINE_MAX (64U * 1024U * 1024U)   /* one NDJSON event */
#define CLI_IO_BUFFER (256U * 1024U)         /* streamed copies */

/* A verb of the command table. */
typedef struct CliCommand {
        const char *name;
        int (*run)(int argc, char **argv); /* argv[0] is the verb; returns exit code >= 0 or -errno */
        const char *usage;                 /* arguments, e.g. "ID [--timeout S] -- CMD [ARG...]" */
        const char *help;                  /* one line */
        const char *details;               /* option descriptions, may be NULL */
        int failure_exit;                  /* 0: a failure exits with its class (CLI_EXIT_*); else this code */
} CliCommand;

/* Global flags (--json, --url, --state-dir), valid before and after the verb. */
extern bool arg_json;
const char *cli_url(void);
const char *cli_state_dir(void);
int cli_set_global(const char *name, const char *value); /* by option name, e.g. "url" */

/* The command table (main.c). */
const CliCommand *cli_command_table(size_t *ret_n);

/* The verb being run (for --help and messages). */
extern const CliCommand *cli_current;
void cli_print_usage(const CliCommand *c, FILE *f);

/* Exit codes of the CLI's own failures (space help, space(1)). */
enum {
        CLI_EXIT_FAILURE = 1,     /* anything else */
        CLI_EXIT_USAGE = 2,       /* the command line is wrong (see --help) */
        CLI_EXIT_NOT_FOUND = 3,   /* 404, or a local file that is not there */
        CLI_EXIT_CONFLICT = 4,    /* 409: the object's state does not allow it, or it exists */
        CLI_EXIT_AUTH = 5,        /* 401, 403 */
        CLI_EXIT_UNAVAILABLE = 6, /* 503, connection refused, timeout */
        CLI_EXIT_STORAGE = 7,     /* 507 insufficient storage, 429 over a quota or rate */
        CLI_EXIT_EXEC_FAILED = 125, /* exec, attach, shell: the CLI failed, not the command */
};

/* Errors: print "space: ..." (with --json the JSON error object) and return
 * the negative errno (never 0). The exit class follows from the errno
 * (ENOENT: not found, EEXIST: conflict, ENOSPC/EDQUOT: storage, connection
 * errors: unavailable, else failure). */
int cli_error_errno(int error, const char *fmt, ...) _printf_(2, 3);
#define cli_error(...) cli_error_errno(-EINVAL, __VA_ARGS__)
/* The same with an explicit exit class and error code (code NULL: the class's). */
int cli_fail(int exit_class, const char *code, int error, const char *fmt, ...) _printf_(4, 5);
/* A wrong command line: exit 2, code "usage". */
#define cli_usage_error(...) cli_fail(CLI_EXIT_USAGE, "usage", -EINVAL, __VA_ARGS__)
/* The exit class of the last failure reported (CLI_EXIT_FAILURE if none). */
int cli_exit_class(void);
/* The class of an API status (404 → CLI_EXIT_NOT_FOUND, ...). */
int cli_exit_class_of_status(int status);
/* A negative errno that means "already reported" for paths that have no errno. */
#define CLI_EREPORTED (-ECANCELED)

/* ---- Options ---- */

enum {
        CLI_OPT_DONE = 0,
        CLI_OPT_HELP = -1000, /* --help was given: usage is printed, return 0 */
};

typedef struct CliOption {
        const char *name; /* long name without "--" */
        char short_name;  /* 0 if none */
        bool has_arg;
        int id;           /* > 0 */
} CliOption;

typedef struct CliParser {
        int argc;
        char **argv;
        int i;
        size_t stop_after;  /* after this many positionals, the next positional ends option parsing; 0 = never */
        bool options_done;
        bool saw_dashdash;  /* a "--" was seen */
        size_t dashdash_at; /* n_pos when "--" was seen */
        const char *short_rest; /* rest of a group of short flags */
        char **pos;         /* positionals (pointers into argv) */
        size_t n_pos;
} CliParser;

int cli_parser_init(CliParser *p, int argc, char **argv, size_t stop_after);
void cli_parser_done(CliParser *p);
/* Returns the id of the next option (its argument in *ret_arg), CLI_OPT_DONE
 * at the end, CLI_OPT_HELP after --help (usage printed), or -EINVAL (printed).
 * Global flags are applied on the way. opts ends with a zeroed entry. */
int cli_parser_next(CliParser *p, const CliOption *opts, const char **ret_arg);
/* Checks the positional count after parsing; prints usage hints on mismatch. */
int cli_parser_want(const CliParser *p, size_t min, size_t max);
/* After the option loop (r: cli_parser_next's last answer): 1 = go on with
 * min..max positionals; 0 = --help, usage printed (the verb returns 0); or
 * negative (printed). */
int cli_parser_end(const CliParser *p, int r, size_t min, size_t max);
/* For a verb without options of its own: parses argv (global flags, --help,
 * positionals) and wants min..max positionals. 1: go on; 0: --help, usage
 * printed (the verb returns 0); or negative (printed). */
int cli_parser_positionals(CliParser *p, int argc, char **argv, size_t min, size_t max);

/* A verb with subcommands (space key create|ls|rm): runs the one argv[1]
 * names with (argc - 1, argv + 1), or prints usage for help. */
typedef struct CliSubcommand {
        const char *name;
        int (*run)(int argc, char **argv);
} CliSubcommand;
int cli_run_subcommand(const char *verb, const CliSubcommand *sub, size_t n_sub, int argc, char **argv);

/* Typed option values. */
int cli_parse_u64(const char *option, const char *s, uint64_t *ret);
int cli_parse_double(const char *option, const char *s, double *ret);
/* "K=V" → split; key must be non-empty. */
int cli_parse_kv(const char *option, const char *s, char **ret_key, const char **ret_value);

/* ---- HTTP ---- */

typedef struct CliResponse {
        int status;
        char *body;
        size_t body_len;
        JsonValue *json; /* the body parsed if it is JSON, else NULL */
} CliResponse;
void cli_response_done(CliResponse *r);

/* A new connection to the API. */
int cli_connect(HttpClient **ret);
int cli_connect_url(const char *url, HttpClient **ret);
/* "Authorization: Bearer ...\r\n" + extra (may be NULL); "" when there is no key. */
int cli_headers(const char *extra, char **ret);
bool cli_have_key(void);
/* The API key: SPACE_API_KEY, else the key file of the state directory; NULL if none. */
const char *cli_api_key(void);

/* Sends a request (body: JSON text or NULL) and reads the whole answer.
 * Status >= 400 is printed as the API's error and returns CLI_EREPORTED. */
int cli_call(const char *method, const char *target, const char *json_body, CliResponse *ret);
/* Like cli_call but a 404 is returned as -ENOENT without printing; *ret
 * then holds the error answer (for cli_report_response()). */
int cli_call_quiet_404(const char *method, const char *target, const char *json_body, CliResponse *ret);

/* A GET whose failure is not reported (nor counted as the command's): 0, or < 0. */
int cli_call_quiet(const char *target, CliResponse *ret);

/* Sends a request on c and reads the head. Status >= 400: the error is read,
 * printed, CLI_EREPORTED returned. body_len == SIZE_MAX: chunked, the caller
 * writes the body and then calls cli_finish_upload(). */
int cli_start(HttpClient *c, const char *method, const char *target, const char *content_type, const void *body,
              size_t body_len, const HttpHead **ret_head);
/* After a streamed upload: ends the body, reads the answer into *ret (errors printed). */
int cli_finish_upload(HttpClient *c, CliResponse *ret);
/* Writes what fd holds (to its end) as the body of the request cli_start()
 * began; what: the source, for the messages. */
int cli_upload_fd(HttpClient *c, int fd, const char *what);
/* The same, telling on_sent(userdata, n) of each chunk sent (a progress bar). */
int cli_upload_fd_progress(HttpClient *c, int fd, const char *what, void (*on_sent)(void *userdata, size_t n),
                           void *userdata);
/* A write to an upload failed: the server may have answered early (e.g. 507).
 * Prints its error if there is one, else the write error. */
int cli_upload_failed(HttpClient *c, int write_error);
/* Prints the API error carried by a response (status >= 400). */
int cli_report_response(int status, const char *body, size_t body_len);
/* Reports a connection-level failure with a hint. */
int cli_report_connect(int r);

/* Reads NDJSON lines from a streamed body. */
typedef struct CliLineReader {
        char *buf;
        size_t n, allocated, start;
        bool eof;
        bool quiet_timeout; /* a read timeout is returned as -ETIMEDOUT, unprinted */
} CliLineReader;
void cli_line_reader_done(CliLineReader *lr);
/* Next line without its '\n' in (*ret, *ret_len), valid until the next call.
 * Returns 1 with a line, 0 at the end of the body, negative on errors (printed). */
int cli_line_reader_next(CliLineReader *lr, HttpClient *c, char **ret, size_t *ret_len);

/* Percent-encoded, for a path segment or query value. */
char *cli_escape(const char *s);
/* METHOD prefix + each positional from first on (escaped): one request a
 * positional, going on after a failure (the last one's error is returned).
 * Prints each positional that succeeded, or with --json and print_json each
 * answer. */
int cli_call_each(const CliParser *p, size_t first, const char *method, const char *prefix, bool print_json);

/* ---- Output ---- */

/* Writes the body unchanged (adds a newline if it has none). */
int cli_print_raw(const char *body, size_t len);
/* Prints "key: value" lines for an object; nested objects as "key.sub: value". */
void cli_print_object(const JsonValue *obj, const char *prefix);
/* A scalar as text into a malloc'd string ("-" for null/missing). */
char *cli_value_text(const JsonValue *v);
/* Field of obj as text ("-" if missing). */
char *cli_field_text(const JsonValue *obj, const char *key);
/* "2026-11-30T01:02:03.456Z" → "2026-11-30 01:02:03". */
char *cli_time_text(const JsonValue *v);
/* Bytes to "1.5G" style. */
void cli_format_size(uint64_t bytes, char *buf, size_t size);

/* A simple table: add rows of strings, print with aligned columns. */
typedef struct CliTable {
        size_t n_columns;
        char **cells; /* row-major, header first */
        size_t n_cells, allocated;
} CliTable;
int cli_table_new(CliTable *t, const char *const *header, size_t n_columns);
int cli_table_add(CliTable *t, char **row); /* takes ownership of every cell */
/* A list verb without arguments of its own: GET target, the array at key of
 * its answer as a table (header: n_columns names; row() fills one row's
 * malloc'd cells per element, NULL prints as "?"), then footer if any;
 * --json prints the answer as it came. what names the list in errors. */
/* A verb on one object: METHOD prefix + the escaped ID (its one argument) +
 * suffix, with body (NULL: none); the answer printed as key: value lines, or
 * as it came with --json. */
int cli_object_verb(int argc, char **argv, const char *method, const char *prefix, const char *suffix,
                    const char *body);
#define CLI_LIST_COLUMNS_MAX 16
typedef void (*CliRowFn)(const JsonValue *item, char **cells);
int cli_list_verb(int argc, char **argv, const char *target, const char *key, const char *what,
                  const char *const *header, size_t n_columns, CliRowFn row, const char *footer);
void cli_table_print(const CliTable *t, FILE *f);
void cli_table_done(CliTable *t);

/* Joins path components "a" + "b" → "a/b". */
char *cli_path_join(const char *a, const char *b);
/* Last component of a path ("" for "/"); pointer into p. */
const char *cli_basename(const char *p);
