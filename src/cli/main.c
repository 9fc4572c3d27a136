/* SPDX-License-Identifier: MIT */
/* space: the command-line client of the space API. One table of verbs;
 * each verb lives in its own file (see cli-verbs.h). */

#include <signal.h>
#include <stdio.h>

#include "cli-common.h"
#include "cli-verbs.h"
#include "space-build.h"

static int cli_help(int argc, char **argv);
static int cli_version(int argc, char **argv);

static const CliCommand commands[] = {
        { "up", cli_up, "[--state-dir DIR] [--listen ADDR] [--timeout S] [-- SPACED-FLAGS...]",
          "start spaced in the background and wait until it is healthy",
          "  --state-dir DIR   state directory (default $SPACE_STATE_DIR or /var/lib/space)\n"
          "  --listen ADDR     HTTP address host:port (default from $SPACE_URL, 127.0.0.1:7070)\n"
          "  --timeout S       how long to wait for it to become healthy (default 30)\n"
          "spaced is looked up beside this binary, then on $PATH; its output goes to DIR/spaced.log.\n" },
        { "down", cli_down, "[--state-dir DIR]", "stop the spaced of a state directory (sandboxes keep their state)",
          NULL },
        { "info", cli_info, "", "show what this deployment offers (runtimes, storage, network, limits)", NULL },
        { "create", cli_create,
          "[--template T] [--runtime ns|vm] [--cpu N] [--memory MB] [--disk MB] [--timeout S] [--env K=V]... "
          "[--meta K=V]... [--allow HOST[:PORTS]]... [--allow-cidr CIDR[:PORTS]]... [--deny HOST|CIDR]... "
          "[--cred NAME]...",
          "create a sandbox and print its id",
          "  --template T       template name (default: the server's default_template)\n"
          "  --runtime ns|vm    isolation runtime\n"
          "  --cpu N            CPUs (may be fractional, e.g. 0.5)\n"
          "  --memory MB        memory limit\n"
          "  --disk MB          disk quota\n"
          "  --timeout S        delete the sandbox after S seconds (0 = never)\n"
          "  --env K=V          environment of every process (repeatable)\n"
          "  --meta K=V         metadata (repeatable)\n"
          "  --allow HOST[:PORTS]  allow egress to HOST or *.DOMAIN (ports default 80,443; repeatable)\n"
          "  --allow-cidr CIDR[:PORTS]  allow egress to raw addresses in CIDR (repeatable)\n"
          "  A rule ending in /udp allows UDP to its PORTS instead of TCP (e.g. 10.0.0.0/8:5000/udp;\n"
          "  UDP 443, QUIC, is never relayed).\n"
          "  --deny HOST|CIDR   never allow it, whatever an allow rule says (repeatable)\n"
          "  Without any, the server's default_network applies (no egress unless configured).\n"
          "  --cred NAME        grant a credential (repeatable; also --credential)\n" },
        { "exec", cli_exec,
          "ID [--timeout S] [--env K=V]... [--cwd D] [--user U] [--tty] [-i] -- CMD [ARG...]",
          "run a command in a sandbox, stream its output and exit with its code",
          "  --timeout S   kill the command after S seconds\n"
          "  --env K=V     environment variable (repeatable)\n"
          "  --cwd D       working directory\n"
          "  --user U      user name or uid (default root)\n"
          "  -t, --tty     run on a pseudo-terminal\n"
          "  -i, --interactive  send this program's stdin to the command\n" },
        { "attach", cli_attach, "ID EXEC_ID [--from N]",
          "read an exec's output again (running, background or finished) and exit with its code",
          "  --from N   start at output offset N (default 0: all the sandbox still keeps)\n"
          "The exec id is in the start event (space --json exec); the sandbox keeps the newest\n"
          "exec_buffer_kb of each exec's output, and a finished exec's for exec_keep_s.\n" },
        { "shell", cli_shell, "ID [CMD...]", "open an interactive terminal in a sandbox (default: /bin/bash -l)",
          "With one CMD argument it is run by /bin/sh -c, with several as an argv.\n" },
        { "ls", cli_ls, "[--all] [--state S]", "list sandboxes",
          "  --all       also list sandboxes in state error\n"
          "  --state S   only sandboxes in state S\n" },
        { "policy", cli_policy,
          "ID [--allow HOST[:PORTS]]... [--allow-cidr CIDR[:PORTS]]... [--deny HOST[:PORTS]]... "
          "[--deny-cidr CIDR[:PORTS]]... [--remove HOST|CIDR]... [--clear] [--show]",
          "show or change a sandbox's egress policy (takes effect at once)",
          "  --allow HOST[:PORTS]       add an allow rule for HOST or *.DOMAIN (ports default 80,443)\n"
          "  --allow-cidr CIDR[:PORTS]  add an allow rule for raw addresses\n"
          "  --deny HOST[:PORTS]        add a deny rule (wins over allow; ports default all)\n"
          "  --deny-cidr CIDR[:PORTS]   add a deny rule for addresses\n"
          "  --remove HOST|CIDR         drop every allow and deny rule for HOST or CIDR (an error if none)\n"
          "  --clear                    start from an empty policy (no egress)\n"
          "  --show                     print the policy (the default without changes)\n"
          "PORTS: comma-separated numbers or LO-HI ranges, e.g. 443,8000-8100. A rule ending in /udp\n"
          "is for UDP (allow: PORTS required, e.g. --allow-cidr 10.0.0.0/8:5000/udp; UDP 443, QUIC, is\n"
          "never relayed), /tcp for TCP only; allow rules are TCP and deny rules both without one.\n"
          "Changes apply to the current policy in one request (--clear with --allow replaces it);\n"
          "the server checks it whole: on an error nothing changes.\n" },
        { "show", cli_show, "ID", "show a sandbox (state, processes_preserved, lineage, checkpoints)", NULL },
        { "port", cli_port, "ID PORT", "print the URL of a TCP port of the sandbox (through the ingress)",
          "Prints http://PORT-ID.DOMAIN/, a one-time link that lets a browser in (it sets a cookie)\n"
          "and the sandbox's traffic token for scripts (header X-Space-Traffic-Token).\n" },
        { "open", cli_open, "ID PORT", "print the one-time link to a port of the sandbox, for a browser", NULL },
        { "rm", cli_rm, "ID...", "delete sandboxes", NULL },
        { "pause", cli_pause, "ID...", "freeze a sandbox's processes (memory kept)", NULL },
        { "resume", cli_resume, "ID...", "resume a paused sandbox, or start a suspended one again", NULL },
        { "suspend", cli_suspend, "ID...", "release a sandbox's host resources; its files stay",
          "On the ns runtime its processes end; resume starts it again on its files.\n" },
        { "checkpoint", cli_checkpoint, "ID [--name N]", "take a checkpoint of a sandbox's files, print its id",
          "  -n, --name N   a name, unique among the sandbox's checkpoints\n" },
        { "checkpoints", cli_checkpoints, "ID", "list a sandbox's checkpoints, newest first", NULL },
        { "restore", cli_restore, "ID CKPT", "put a sandbox's files back to a checkpoint (id or name)",
          "Its processes end and start afresh on the restored files.\n" },
        { "branch", cli_branch, "ID [--count N] [--from CKPT]",
          "make new sandboxes from a sandbox's files (or a checkpoint), print their ids",
          "  -n, --count N   how many (default 1)\n"
          "  --from CKPT     from this checkpoint (id or name) instead of the current files\n" },
        { "cp", cli_cp, "SRC DST", "copy a file into or out of a sandbox",
          "Exactly one of SRC and DST is ID:/path. A local DST may be a directory or '-' (stdout);\n"
          "SRC '-' uploads stdin. The file mode is kept. Directories are not supported yet.\n" },
        { "template", cli_template, "ls | import NAME SRC | rm NAME", "manage templates",
          "  ls                 list templates\n"
          "  import NAME SRC    import a directory or a .tar file ('-' = tar on stdin) as template NAME\n"
          "  rm NAME            remove a template\n" },
        { "key", cli_key, "create [--tenant T] [--name N] [--admin] | ls | rm ID", "manage API keys",
          "  create   create a key and print its secret (shown only once)\n"
          "  ls       list keys\n"
          "  rm ID    delete a key\n" },
        { "cred", cli_cred,
          "add NAME --host H... [--header 'Authorization: Bearer {value}' | --basic-user U] [--env VAR] "
          "[--expires T] [--value-file F] | ls [ID] | show NAME | rm NAME... | rotate NAME [--value-file F] | "
          "revoke NAME... | grant ID NAME... | ungrant ID NAME...",
          "manage credentials (values are read from stdin or --value-file, never from the command line)",
          "  add NAME        create a credential; the value is read from stdin (no echo on a terminal)\n"
          "                  or from --value-file; --host repeatable ('*.example.com' for names below);\n"
          "                  --header 'Name: format' with {value} (default 'Authorization: Bearer {value}')\n"
          "                  or --basic-user U; --env VAR puts the placeholder space-cred-NAME in VAR\n"
          "  ls [ID]         list credentials (or those granted to sandbox ID)\n"
          "  show NAME       show one (never its value)\n"
          "  rm NAME...      delete credentials and their grants\n"
          "  rotate NAME     give it a new value (from stdin or --value-file); next requests use it\n"
          "  revoke NAME...  revoke at once (final)\n"
          "  grant ID NAME...    grant credentials to a running sandbox\n"
          "  ungrant ID NAME...  take them away\n" },
        { "events", cli_events, "[ID] [--type T] [--follow] [--limit N]", "show lifecycle and audit events",
          "  --type T    only events whose type starts with T (e.g. sandbox.)\n"
          "  --follow    keep streaming new events\n"
          "  --limit N   at most N events\n" },
        { "mcp", cli_mcp, "[--listen HOST:PORT]", "serve space as an MCP server (stdio, or streamable HTTP)",
          "  Without --listen: MCP over stdin/stdout with this CLI's key (SPACE_API_KEY or the key file);\n"
          "  for an agent's MCP configuration: {\"command\": \"space\", \"args\": [\"mcp\"]}.\n"
          "  --listen HOST:PORT  streamable HTTP at http://HOST:PORT/mcp; each client sends its own\n"
          "                      space key as Authorization: Bearer\n"
          "Tools: create_sandbox, list_sandboxes, run_command, read_file, write_file, list_files,\n"
          "checkpoint, branch, restore, delete_sandbox; resources: a sandbox's files and events.\n" },
        { "help", cli_help, "[COMMAND]", "show help", NULL },
        { "version", cli_version, "", "show the version", NULL },
};

static const CliCommand *command_find(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                if (streq(commands[i].name, name))
                        return &commands[i];
        return NULL;
}

static void print_help(FILE *f) {
        fputs("Usage: space [--json] [--url URL] [--state-dir DIR] COMMAND [ARGS...]\n\n"
              "Drives a space deployment ($SPACE_URL, default " CLI_DEFAULT_URL ") with the key in\n"
              "$SPACE_API_KEY or STATE_DIR/admin.key.\n\nCommands:\n",
              f);
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
        fputs("\nRun 'space COMMAND --help' for a command's options.\n", f);
}

static int cli_help(int argc, char **argv) {
        const CliCommand *c;

        if (argc < 2) {
                print_help(stdout);
                return 0;
        }
        c = command_find(argv[1]);
        if (!c)
                return cli_error("unknown command '%s' (see 'space help')", argv[1]);
        cli_print_usage(c, stdout);
        return 0;
}

static int cli_version(int argc, char **argv) {
        printf("space %s\n", SPACE_VERSION);
        return 0;
}

int main(int argc, char **argv) {
        const CliCommand *c;
        int i = 1, r;

        /* A closed pipe is reported as EPIPE by writes, never a silent death mid-request. */
        signal(SIGPIPE, SIG_IGN);

        /* Global options before the verb. */
        for (; i < argc && argv[i][0] == '-'; i++) {
                const char *a = argv[i], *v;

                if (streq(a, "--json"))
                        arg_json = true;
                else if (streq(a, "--help") || streq(a, "-h")) {
                        print_help(stdout);
                        return 0;
                } else if (streq(a, "--version")) {
                        return cli_version(0, NULL);
                } else if ((v = startswith(a, "--url=")) || (v = startswith(a, "--state-dir="))) {
                        if (cli_set_global(a[2] == 'u' ? "url" : "state-dir", v) < 0)
                                return 1;
                } else if (streq(a, "--url") || streq(a, "--state-dir")) {
                        if (i + 1 >= argc) {
                                cli_error("option '%s' needs a value", a);
                                return 1;
                        }
                        if (cli_set_global(a + 2, argv[++i]) < 0)
                                return 1;
                } else {
                        cli_error("unknown option '%s' (see 'space help')", a);
                        return 1;
                }
        }
        if (i >= argc) {
                print_help(stderr);
                return 1;
        }

        c = command_find(argv[i]);
        if (!c) {
                cli_error("unknown command '%s' (see 'space help')", argv[i]);
                return 1;
        }
        cli_current = c;
        r = c->run(argc - i, argv + i);
        if (fflush(stdout) != 0 && r >= 0 && errno != EPIPE) {
                cli_error_errno(-errno, "writing to stdout failed: %m");
                return 1;
        }
        return r < 0 ? 1 : r;
}
