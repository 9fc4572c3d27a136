/* SPDX-License-Identifier: MIT */
/* space shell ID [CMD...]: an interactive terminal in a sandbox. Runs
 * /bin/bash -l (or /bin/sh where there is no bash) on a pty sized like the
 * local terminal, with the local terminal in raw mode. */

#include "cli-exec.h"
#include "cli-verbs.h"

int cli_shell(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_strv_free_ char **env = NULL, **cmd = NULL;
        _cleanup_free_ char *term_kv = NULL;
        const char *arg = NULL, *term;
        CliExecOptions o = {
                .pty = true,
                .interactive = true,
                .raw = true,
        };
        int r, code = 0;

        r = cli_parser_init(&p, argc, argv, 1);
        if (r < 0)
                return r;
        r = cli_parser_next(&p, NULL, &arg);
        if (r == CLI_OPT_HELP)
                return 0;
        if (r < 0)
                return r;
        if (p.n_pos < 1)
                return cli_usage_error("missing sandbox id (usage: space shell %s)", cli_current->usage);

        /* The remote programs should draw for our terminal. */
        term = secure_getenv("TERM");
        term_kv = strjoin("TERM=", isempty(term) || streq(term, "dumb") ? "xterm-256color" : term);
        if (!term_kv || strv_extend(&env, term_kv) < 0)
                return cli_error_errno(-ENOMEM, "out of memory");
        o.env = env;

        if (p.n_pos == 2)
                o.shell = p.pos[1];
        else if (p.n_pos > 2) {
                for (size_t i = 1; i < p.n_pos; i++)
                        if (strv_extend(&cmd, p.pos[i]) < 0)
                                return cli_error_errno(-ENOMEM, "out of memory");
                o.cmd = cmd;
        } else {
                static char *bash[] = { (char *) "/bin/bash", (char *) "-l", NULL };
                static char *sh[] = { (char *) "/bin/sh", NULL };

                o.cmd = bash;
                o.quiet_not_found = true;
                r = cli_exec_run(p.pos[0], &o, &code);
                if (r != CLI_EXEC_NOT_FOUND)
                        return r < 0 ? r : code;
                o.cmd = sh;
                o.quiet_not_found = false;
        }

        r = cli_exec_run(p.pos[0], &o, &code);
        if (r < 0)
                return r;
        return code;
}
