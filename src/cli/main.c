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
          "[--cred NAME]... [--pids N] [--io-weight N] [--idle S] [--idle-action A] [--checkpoint-every S] "
          "[--checkpoints-max N] [--checkpoints-mb MB] [--auto-resume] [--volume NAME:/path[:ro]]...",
          "create a sandbox and print its id",
          "  --template T       template: NAME, NAME:TAG or NAME@vN (default: the server's default_template)\n"
          "  --runtime ns|vm    isolation runtime\n"
          "  --cpu N            CPUs (may be fractional, e.g. 0.5)\n"
          "  --memory MB        memory limit\n"
          "  --disk MB          disk quota\n"
          "  --timeout S        delete the sandbox after S seconds (0 = never)\n"
          "  --env K=V          environment of every process (repeatable)\n"
          "  --volume NAME:/path[:ro]  mount the tenant's volume NAME at /path (repeatable; :ro read-only;\n"
          "                     one writer or many readers: 409 if another sandbox holds it)\n"
          "  --meta K=V         metadata (repeatable)\n"
          "  --allow HOST[:PORTS]  allow egress to HOST or *.DOMAIN (ports default 80,443; repeatable)\n"
          "  --allow-cidr CIDR[:PORTS]  allow egress to raw addresses in CIDR (repeatable)\n"
          "  A rule ending in /udp allows UDP to its PORTS instead of TCP (e.g. 10.0.0.0/8:5000/udp;\n"
          "  UDP 443, QUIC, is never relayed).\n"
          "  --deny HOST|CIDR   never allow it, whatever an allow rule says (repeatable)\n"
          "  Without any, the server's default_network applies (no egress unless configured).\n"
          "  --cred NAME        grant a credential (repeatable; also --credential)\n"
          "  --pids N           at most N processes (pids_max)\n"
          "  --io-weight N      its I/O weight, 1-10000\n"
          "  --idle S, --idle-action pause|suspend|none  act after S seconds without activity\n"
          "  --checkpoint-every S  automatic checkpoints every S seconds\n"
          "  --checkpoints-max N, --checkpoints-mb MB  caps on what its checkpoints hold\n"
          "  --auto-resume      exec and file calls resume it when it is paused\n" },
        { "exec", cli_exec,
          "ID [--timeout S] [--env K=V]... [--cwd D] [--user U] [--tty] [-i] [-d] [--on-disconnect A] -- CMD [ARG...]",
          "run a command in a sandbox, stream its output and exit with its code",
          "  --timeout S   kill the command after S seconds\n"
          "  --env K=V     environment variable (repeatable)\n"
          "  --cwd D       working directory\n"
          "  --user U      user name or uid (default root)\n"
          "  -t, --tty     run on a pseudo-terminal\n"
          "  -i, --interactive  send this program's stdin to the command\n"
          "  -d, --detach  run it in the background: print its exec id and return (read its output\n"
          "                with 'space logs ID EXEC_ID' or 'space attach'; with -i its stdin stays\n"
          "                open for 'space stdin ID EXEC_ID')\n"
          "  --on-disconnect keep|hangup|kill  what happens to the command if space goes away (default:\n"
          "                kill on a terminal without --tty, else the server's: keep, or hangup with --tty)\n"
          "Exits with the command's code (128 + N after signal N); 125 when space itself failed\n"
          "(the sandbox is not there, the server is unavailable, a usage error, ...).\n",
          CLI_EXIT_EXEC_FAILED },
        { "attach", cli_attach, "ID EXEC_ID [--from N]",
          "read an exec's output again (running, background or finished) and exit with its code",
          "  --from N   start at output offset N (default 0: all the sandbox still keeps)\n"
          "The exec id is in the start event (space --json exec); the sandbox keeps the newest\n"
          "exec_buffer_kb of each exec's output, and a finished exec's for exec_keep_s.\n"
          "Exits with the exec's code; 125 when space itself failed.\n",
          CLI_EXIT_EXEC_FAILED },
        { "shell", cli_shell, "ID [CMD...]", "open an interactive terminal in a sandbox (default: /bin/bash -l)",
          "With one CMD argument it is run by /bin/sh -c, with several as an argv.\n"
          "Exits with the shell's code; 125 when space itself failed.\n",
          CLI_EXIT_EXEC_FAILED },
        { "ls", cli_ls, "[--all] [--state S] [-q]", "list sandboxes",
          "  --all       also list sandboxes in state error\n"
          "  --state S   only sandboxes in state S\n"
          "  -q, --quiet only their ids, one a line\n" },
        { "ps", cli_ps, "ID", "list the processes (running execs) of a sandbox", NULL },
        { "kill", cli_kill, "ID EXEC_ID [--signal S]", "send a signal to an exec's process",
          "  -s, --signal S   TERM (default), KILL, INT, HUP, ... or a number\n" },
        { "logs", cli_logs, "ID [EXEC_ID] [--follow]",
          "show a sandbox's events and its running execs' output, or one exec's output",
          "  ID           the sandbox's newest events, then what each running exec (space ps) printed\n"
          "  ID EXEC_ID   that exec's output as the sandbox keeps it (running, background or finished)\n"
          "  -f, --follow with EXEC_ID: go on until the exec ends\n"
          "Without --follow the output is read until the sandbox has sent all it holds (1 s without\n"
          "more). The API keeps no list of finished execs: name one by its id (space exec -d prints it).\n" },
        { "stdin", cli_stdin, "ID EXEC_ID [--eof]",
          "send this program's stdin to an exec started with its stdin open (space exec -d -i)",
          "  --eof   close the exec's stdin after it\n" },
        { "update", cli_update,
          "ID [--timeout S] [--idle S] [--idle-action pause|suspend|none] [--checkpoint-every S] "
          "[--auto-resume|--no-auto-resume]",
          "change a sandbox's timeout and policies (PATCH)",
          "  --timeout S          delete it S seconds from now (0 = never)\n"
          "  --idle S             act after S seconds without activity (0 = off)\n"
          "  --idle-action A      pause, suspend or none\n"
          "  --checkpoint-every S automatic checkpoints every S seconds (0 = off)\n"
          "  --auto-resume, --no-auto-resume  whether exec and file calls resume it when paused\n" },
        { "top", cli_top, "[--interval S] [--once]", "show the sandboxes, their state and limits, refreshing",
          "  --interval S   refresh every S seconds (default 2; on a terminal)\n"
          "  --once         print once (the default when stdout is not a terminal)\n"
          "The server reports no per-sandbox usage (CPU or memory in use): top shows limits, state and\n"
          "activity, and says so.\n" },
        { "files", cli_files,
          "ls ID [PATH] | stat ID PATH | rm [-r] ID PATH... | mv ID FROM TO | mkdir [-p] [--mode M] ID PATH...",
          "list, inspect, remove, move and make files in a sandbox",
          "  ls ID [PATH]        list a directory (default /)\n"
          "  stat ID PATH        one entry\n"
          "  rm [-r] ID PATH...  remove files (-r, --recursive: directories with what they hold)\n"
          "  mv ID FROM TO       rename or move\n"
          "  mkdir [-p] [--mode M] ID PATH...  make directories (-p, --parents: with their parents)\n" },
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
        { "forward", cli_forward, "ID [LOCAL:]REMOTE... [--address ADDR]",
          "forward local TCP ports to ports of the sandbox (through the API; any TCP protocol)",
          "  --address ADDR    the local IPv4 address to listen on (default 127.0.0.1)\n"
          "REMOTE alone listens on the same port number; LOCAL 0 or :REMOTE takes a free port. Prints\n"
          "'Forwarding from ADDR:LOCAL -> REMOTE' once each listens, then runs until SIGINT or SIGTERM.\n" },
        { "rm", cli_rm, "ID...", "delete sandboxes", NULL },
        { "pause", cli_pause, "ID...", "freeze a sandbox's processes (memory kept)", NULL },
        { "resume", cli_resume, "ID...", "resume a paused sandbox, or start a suspended one again", NULL },
        { "suspend", cli_suspend, "ID...", "release a sandbox's host resources; its files stay",
          "On the ns runtime its processes end; resume starts it again on its files.\n" },
        { "checkpoint", cli_checkpoint, "ID [--name N] [--with-memory|--without-memory] | rm ID CKPT... | ls ID",
          "take a checkpoint of a sandbox's files, print its id (or remove or list them)",
          "  -n, --name N   a name, unique among the sandbox's checkpoints\n"
          "  --with-memory, --without-memory  a vm sandbox's memory too (its default), or its disk only\n"
          "  rm ID CKPT...  delete checkpoints (id or name)\n"
          "  ls ID          list them, newest first (as space checkpoints ID)\n" },
        { "checkpoints", cli_checkpoints, "ID", "list a sandbox's checkpoints, newest first", NULL },
        { "restore", cli_restore, "ID CKPT", "put a sandbox's files back to a checkpoint (id or name)",
          "Its processes end and start afresh on the restored files.\n" },
        { "branch", cli_branch, "ID [--count N] [--from CKPT] [--with-memory]",
          "make new sandboxes from a sandbox's files (or a checkpoint), print their ids",
          "  -n, --count N   how many (default 1)\n"
          "  --from CKPT     from this checkpoint (id or name) instead of the current files\n"
          "  --with-memory   (vm) every child continues the source's processes\n" },
        { "cp", cli_cp, "[-r] SRC DST", "copy files into or out of a sandbox",
          "Exactly one of SRC and DST is ID:/path. A local DST may be a directory or '-' (stdout);\n"
          "SRC '-' uploads stdin. The file mode is kept.\n"
          "  -r, --recursive   copy a directory (into DST if it is one, else as DST), streamed as tar\n"
          "                    through the sandbox's tar: modes, symlinks and empty directories are\n"
          "                    kept; files belong to whoever extracts them (root in the sandbox).\n"
          "On a terminal a progress bar on stderr shows large transfers.\n" },
        { "template", cli_template,
          "ls | import NAME SRC | pull NAME REF [--credential C] | build NAME [-f F] [CONTEXT] | set NAME [...] | "
          "rm NAME | versions NAME | tag NAME[@vN] TAG | untag NAME TAG",
          "manage templates",
          "  ls                 list templates\n"
          "  import NAME SRC    import a directory or a .tar file ('-' = tar on stdin) as template NAME\n"
          "  pull NAME REF      pull image REF (registry/repo[:tag] or registry/repo@sha256:...) from its\n"
          "                     registry as template NAME (the server fetches it, for linux/<its arch>)\n"
          "    --credential C   log in to the registry with the stored basic credential C (space cred add\n"
          "                     C --basic-user USER --host REGISTRY); never a password on the command line\n"
          "  build NAME [CTX]   build template NAME from a Dockerfile in the context directory CTX (default\n"
          "                     .), step by step with a cache of each step; progress as it comes\n"
          "    -f, --file F     the Dockerfile (inside CTX; default CTX/Dockerfile)\n"
          "    --build-arg K=V  an ARG value (repeatable)\n"
          "    --allow HOST     a host the RUN steps may reach (repeatable; default none)\n"
          "  set NAME           the template's settings, for every sandbox made from it:\n"
          "    --runtime R      ns, vm or auto where a create names none (default: the tenant's or host's)\n"
          "    --start CMD      a command every sandbox runs from its start (sh -c); the create answers\n"
          "                     once it is ready: --ready-cmd CMD (exits 0), --ready-port N (accepts a\n"
          "                     connection) with --ready-path /P (answers HTTP 200-399); --ready-timeout S\n"
          "                     (default 60), --start-cwd DIR, --start-user U; --no-start removes it\n"
          "  rm NAME            remove a template (refused while a sandbox uses any of its versions)\n"
          "  versions NAME      its versions, newest first: tags, size, what shares its files, the sandboxes\n"
          "                     using each; every import, pull or build is a new version and NAME means\n"
          "                     the newest; an old one without tag or sandbox is removed\n"
          "  tag NAME[@vN] TAG  point TAG at version N (default: the newest); create --template NAME:TAG\n"
          "                     or NAME@vN makes a sandbox from that version\n"
          "  untag NAME TAG     remove a tag\n" },
        { "volume", cli_volume, "create NAME [--size MB] | clone NAME NEW | snapshot NAME SNAP | ls | show NAME | rm NAME...",
          "manage persistent volumes",
          "  create NAME   a volume of --size MiB (default 1024), its quota; kept until removed\n"
          "  clone NAME NEW       a writable copy of NAME as it is now (only changed blocks cost)\n"
          "  snapshot NAME SNAP   a read-only copy of NAME as it is now: mounted :ro only; clone it to restore\n"
          "  ls            list the tenant's volumes and who mounts them\n"
          "  show NAME     one volume and the bytes it holds\n"
          "  rm NAME...    delete volumes (refused while a sandbox mounts one)\n"
          "Mount one at create: space create --volume NAME:/path[:ro]\n" },
        { "webhook", cli_webhook,
          "create URL [--event PATTERN]... [--name N] [--secret S] | ls | show ID | rm ID... | test ID | "
          "enable ID | disable ID",
          "manage webhooks (signed deliveries of your tenant's events)",
          "  create URL    deliver events to URL (POST, in order, retried); --event sandbox.* or an exact\n"
          "                type (default every event); prints the id and the signing secret (shown once)\n"
          "  ls            list them with their delivery state\n"
          "  show ID       one webhook\n"
          "  rm ID...      delete webhooks\n"
          "  test ID       send a webhook.test delivery now\n"
          "  enable ID, disable ID   resume (failures cleared) or pause its deliveries\n" },
        { "key", cli_key, "create [--tenant T] [--name N] [--admin] | ls | rm ID", "manage API keys",
          "  create   create a key and print its secret (shown only once)\n"
          "  ls       list keys\n"
          "  rm ID    delete a key\n" },
        { "tenant", cli_tenant,
          "ls | show T | set T [--sandboxes N] [--cpu N] [--memory MB] [--disk MB] [--checkpoints N] [--rps N] "
          "[--streams N] [--default-runtime R]",
          "tenants' quotas, default runtime and usage",
          "  ls       every tenant: used/limit of each quota (admin keys)\n"
          "  show T   one tenant's quotas, the ones set for it (overrides) and its usage\n"
          "  set T    set some of T's quotas (admin keys; makes T if it has no key yet): live sandboxes,\n"
          "           CPUs, memory and disk (MiB) of its live sandboxes together, checkpoints, requests\n"
          "           per second and open streams of its keys together; 0 = unlimited, 'default' = the\n"
          "           host's default (tenant_max_* and tenant_rps, tenant_streams_max of spaced);\n"
          "           --default-runtime ns|vm|auto|default: what its creates get that name no runtime\n"
          "           (below a template's own; default: the host's default_runtime)\n" },
        { "cred", cli_cred,
          "add NAME --host H... [--header 'Authorization: Bearer {value}' | --basic-user U] [--env VAR] "
          "[--expires T] [--value-file F] | ls [ID] | show NAME | rm NAME... | rotate NAME [--value-file F] | "
          "update NAME [--host H]... [--header F] [--env VAR] [--expires T|never] | "
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
          "  update NAME     change its hosts (--host replaces the list), header, basic user, env\n"
          "                  or expiry (--expires never: none)\n"
          "  revoke NAME...  revoke at once (final)\n"
          "  grant ID NAME...    grant credentials to a running sandbox\n"
          "  ungrant ID NAME...  take them away\n" },
        { "events", cli_events, "[ID] [--type T] [--limit N] [--since TIME] [--after SEQ] [--follow]",
          "show lifecycle and audit events (the newest, newest last)",
          "  --type T       only events whose type starts with T (e.g. sandbox.)\n"
          "  -n, --limit N  how many (1-1000; default 20 of the newest; with --since/--after the first N)\n"
          "  --since TIME   replay from TIME: RFC 3339 (2026-11-30T01:02:03Z) or an age (90s, 10m, 2h, 7d)\n"
          "  --after SEQ    replay the events after sequence number SEQ\n"
          "  -f, --follow   then stream new events as they happen; alone it starts now (no history;\n"
          "                 with --limit N the newest N first)\n" },
        { "mcp", cli_mcp, "[--listen HOST:PORT]", "serve space as an MCP server (stdio, or streamable HTTP)",
          "  Without --listen: MCP over stdin/stdout with this CLI's key (SPACE_API_KEY or the key file);\n"
          "  for an agent's MCP configuration: {\"command\": \"space\", \"args\": [\"mcp\"]}.\n"
          "  --listen HOST:PORT  streamable HTTP at http://HOST:PORT/mcp; each client sends its own\n"
          "                      space key as Authorization: Bearer\n"
          "Tools: create_sandbox, list_sandboxes, run_command, read_file, write_file, list_files,\n"
          "checkpoint, branch, restore, delete_sandbox; resources: a sandbox's files and events.\n" },
        { "completion", cli_completion, "bash | zsh | fish", "print a shell completion script",
          "  bash   source <(space completion bash)   (or save it in /etc/bash_completion.d/space)\n"
          "  zsh    source <(space completion zsh)\n"
          "  fish   space completion fish | source\n"
          "Verbs, subcommands and options come from this command table; sandbox ids from 'space ls -q'.\n" },
        { "help", cli_help, "[COMMAND]", "show help", NULL },
        { "version", cli_version, "", "show the version", NULL },
};

const CliCommand *cli_command_table(size_t *ret_n) {
        *ret_n = ELEMENTSOF(commands);
        return commands;
}

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
        fputs("\nRun 'space COMMAND --help' for a command's options.\n\n"
              "Exit status: 0 ok; 1 failure; 2 usage error; 3 not found; 4 conflict; 5 not authorized\n"
              "(401/403); 6 unavailable (503, connection refused, timeout); 7 insufficient storage or over\n"
              "a quota (507/429). exec, attach and shell exit with the command's code, and with 125 when\n"
              "space itself failed (with --json its error object on stderr says why).\n",
              f);
}

static int cli_help(int argc, char **argv) {
        const CliCommand *c;

        if (argc < 2) {
                print_help(stdout);
                return 0;
        }
        c = command_find(argv[1]);
        if (!c)
                return cli_usage_error("unknown command '%s' (see 'space help')", argv[1]);
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

        /* --json anywhere before a "--" applies from the start, so that errors found before the
         * parser reaches it are JSON too. */
        for (int k = 1; k < argc && !streq(argv[k], "--"); k++)
                if (streq(argv[k], "--json"))
                        arg_json = true;

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
                                return CLI_EXIT_USAGE;
                } else if (streq(a, "--url") || streq(a, "--state-dir")) {
                        if (i + 1 >= argc) {
                                cli_usage_error("option '%s' needs a value", a);
                                return CLI_EXIT_USAGE;
                        }
                        if (cli_set_global(a + 2, argv[++i]) < 0)
                                return CLI_EXIT_USAGE;
                } else {
                        cli_usage_error("unknown option '%s' (see 'space help')", a);
                        return CLI_EXIT_USAGE;
                }
        }
        if (i >= argc) {
                if (arg_json)
                        cli_usage_error("missing command (see 'space help')");
                else
                        print_help(stderr);
                return CLI_EXIT_USAGE;
        }

        c = command_find(argv[i]);
        if (!c) {
                cli_usage_error("unknown command '%s' (see 'space help')", argv[i]);
                return CLI_EXIT_USAGE;
        }
        cli_current = c;
        r = c->run(argc - i, argv + i);
        if (fflush(stdout) != 0 && r >= 0 && errno != EPIPE) {
                cli_error_errno(-errno, "writing to stdout failed: %m");
                return c->failure_exit ?: CLI_EXIT_FAILURE;
        }
        if (r < 0)
                return c->failure_exit ?: cli_exit_class();
        return r;
}
