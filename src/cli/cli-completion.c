/* SPDX-License-Identifier: MIT */
/* space completion bash|zsh|fish: a completion script made from the command
 * table (verbs, their subcommands and options, read from each row's usage
 * and details), completing sandbox ids with 'space ls -q'. zsh gets the bash
 * function through bashcompinit. */

#include <ctype.h>
#include <stdio.h>

#include "cli-common.h"
#include "cli-verbs.h"

#define WORDS_MAX 64

typedef struct Words {
        char *w[WORDS_MAX];
        size_t n;
} Words;

static void words_done(Words *w) {
        for (size_t i = 0; i < w->n; i++)
                free(w->w[i]);
        w->n = 0;
}

static void words_add(Words *w, const char *p, size_t n) {
        for (size_t i = 0; i < w->n; i++)
                if (strlen(w->w[i]) == n && strncmp(w->w[i], p, n) == 0)
                        return;
        if (w->n < WORDS_MAX) {
                char *s = memdup_suffix0(p, n);
                if (s)
                        w->w[w->n++] = s;
        }
}

static void words_print(const Words *w, FILE *f) {
        for (size_t i = 0; i < w->n; i++)
                fprintf(f, "%s%s", i > 0 ? " " : "", w->w[i]);
}

/* "-x" names an option in a usage's "[-x]" or at the start of a details line ("  -x, --long"). */
static bool short_option_place(const char *text, const char *p) {
        if (p > text && p[-1] == '[')
                return true;
        for (const char *q = p; q > text; q--) {
                if (q[-1] == '\n')
                        return true;
                if (q[-1] != ' ')
                        return false;
        }
        return true;
}

/* Options named in a text: "--name" words and "-x" single letters. */
static void options_of(const char *text, Words *w) {
        for (const char *p = text; p && *p; p++) {
                if (p != text && !strchr(" [,(|\n", p[-1]))
                        continue;
                if (p[0] == '-' && p[1] == '-' && islower((unsigned char) p[2])) {
                        size_t n = 2;
                        while (islower((unsigned char) p[n]) || p[n] == '-')
                                n++;
                        if (!(n == 6 && strncmp(p, "--json", 6) == 0)) /* a global option, offered anyway */
                                words_add(w, p, n);
                        p += n - 1;
                } else if (p[0] == '-' && isalpha((unsigned char) p[1]) && strchr(" ,]\n", p[2]) &&
                           short_option_place(text, p))
                        words_add(w, p, 2);
        }
}

/* Subcommands: the first word of each ' | ' alternative of a usage such as
 * "ls | import NAME SRC | rm NAME", where that word is a lower-case name. */
static void subcommands_of(const char *usage, Words *w) {
        const char *p = usage;

        if (!usage || !strstr(usage, " | "))
                return;
        for (;;) {
                size_t n = 0;
                while (*p == ' ')
                        p++;
                while (islower((unsigned char) p[n]))
                        n++;
                if (n > 0 && (p[n] == ' ' || p[n] == 0))
                        words_add(w, p, n);
                p = strstr(p, " | ");
                if (!p)
                        return;
                p += 3;
        }
}

/* Whether a verb's (or one of its subcommands') first argument is a sandbox id. */
static bool takes_id(const char *usage) {
        for (const char *p = usage; p && (p = strstr(p, "ID")); p += 2) {
                bool start = p == usage || strchr(" [", p[-1]);
                bool end = strchr(" .]", p[2]) || p[2] == 0;
                if (start && end && !(p >= usage + 5 && strncmp(p - 5, "EXEC_", 5) == 0))
                        return true;
        }
        return false;
}

static void print_bash(FILE *f, const CliCommand *cmds, size_t n) {
        fputs("# bash completion for space: source <(space completion bash)\n"
              "_space_ids() { command space ls -q 2>/dev/null; }\n"
              "_space() {\n"
              "    local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\" verb=\"\" at=0 i\n"
              "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
              "        case \"${COMP_WORDS[i]}\" in\n"
              "            --url|--state-dir) ((i++)) ;;\n"
              "            -*) ;;\n"
              "            *) verb=\"${COMP_WORDS[i]}\"; at=$i; break ;;\n"
              "        esac\n"
              "    done\n"
              "    if [[ -z \"$verb\" ]]; then\n"
              "        COMPREPLY=($(compgen -W \"",
              f);
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s ", cmds[i].name);
        fputs("--json --url --state-dir --help --version\" -- \"$cur\"))\n"
              "        return\n"
              "    fi\n"
              "    local subs=\"\" opts=\"\" ids=0\n"
              "    case \"$verb\" in\n",
              f);
        for (size_t i = 0; i < n; i++) {
                _cleanup_(words_done) Words subs = {}, opts = {};
                subcommands_of(cmds[i].usage, &subs);
                options_of(cmds[i].usage, &opts);
                options_of(cmds[i].details, &opts);
                fprintf(f, "        %s) subs=\"", cmds[i].name);
                words_print(&subs, f);
                fputs("\"; opts=\"", f);
                words_print(&opts, f);
                /* ids=2: the verb's own first argument is an id too (space checkpoint ID | rm ID CKPT) */
                fprintf(f, "\"; ids=%d ;;\n",
                        !takes_id(cmds[i].usage)                                         ? 0
                        : subs.n > 0 && startswith(strempty(cmds[i].usage), "ID ") ? 2
                                                                                         : 1);
        }
        fputs("    esac\n"
              "    local first=$((at + 1))\n"
              "    if [[ -n \"$subs\" ]]; then\n"
              "        if ((COMP_CWORD == at + 1)); then\n"
              "            local more=\"\"\n"
              "            ((ids == 2)) && more=\"$(_space_ids)\"\n"
              "            COMPREPLY=($(compgen -W \"$subs $more\" -- \"$cur\"))\n"
              "            return\n"
              "        fi\n"
              "        first=$((at + 2))\n"
              "    fi\n"
              "    if [[ \"$cur\" == -* ]]; then\n"
              "        COMPREPLY=($(compgen -W \"$opts --json --help\" -- \"$cur\"))\n"
              "        return\n"
              "    fi\n"
              "    if [[ \"$verb\" == help ]]; then\n"
              "        COMPREPLY=($(compgen -W \"",
              f);
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s ", cmds[i].name);
        fputs("\" -- \"$cur\"))\n"
              "        return\n"
              "    fi\n"
              "    if ((ids >= 1 && COMP_CWORD == first)) && [[ \"$prev\" != --* ]]; then\n"
              "        COMPREPLY=($(compgen -W \"$(_space_ids)\" -- \"$cur\"))\n"
              "        return\n"
              "    fi\n"
              "    COMPREPLY=($(compgen -f -- \"$cur\"))\n"
              "}\n"
              "complete -F _space space\n",
              f);
}

static void print_fish(FILE *f, const CliCommand *cmds, size_t n) {
        fputs("# fish completion for space: space completion fish | source\n"
              "complete -c space -f\n"
              "complete -c space -n __fish_use_subcommand -l json -d 'print JSON'\n"
              "complete -c space -n __fish_use_subcommand -l url -r -d 'the API URL'\n"
              "complete -c space -n __fish_use_subcommand -l state-dir -r -d 'the state directory'\n",
              f);
        for (size_t i = 0; i < n; i++) {
                _cleanup_(words_done) Words subs = {}, opts = {};
                const char *name = cmds[i].name;

                fprintf(f, "complete -c space -n __fish_use_subcommand -a %s -d '", name);
                for (const char *h = cmds[i].help; *h; h++) {
                        if (*h == '\'' || *h == '\\')
                                fputc('\\', f);
                        fputc(*h, f);
                }
                fputs("'\n", f);
                subcommands_of(cmds[i].usage, &subs);
                if (subs.n > 0) {
                        fprintf(f, "complete -c space -n '__fish_seen_subcommand_from %s' -a '", name);
                        words_print(&subs, f);
                        fputs("'\n", f);
                }
                options_of(cmds[i].usage, &opts);
                options_of(cmds[i].details, &opts);
                for (size_t k = 0; k < opts.n; k++) {
                        const char *o = opts.w[k];
                        fprintf(f, "complete -c space -n '__fish_seen_subcommand_from %s' %s %s\n", name,
                                o[1] == '-' ? "-l" : "-s", o[1] == '-' ? o + 2 : o + 1);
                }
                if (takes_id(cmds[i].usage))
                        fprintf(f, "complete -c space -n '__fish_seen_subcommand_from %s' -a '(space ls -q 2>/dev/null)'\n",
                                name);
                if (streq(name, "cp") || streq(name, "template"))
                        fprintf(f, "complete -c space -n '__fish_seen_subcommand_from %s' -F\n", name);
        }
}

int cli_completion(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        const CliCommand *cmds;
        size_t n = 0;
        int r;

        r = cli_parser_positionals(&p, argc, argv, 1, 1);
        if (r <= 0)
                return r;
        cmds = cli_command_table(&n);
        if (streq(p.pos[0], "bash"))
                print_bash(stdout, cmds, n);
        else if (streq(p.pos[0], "zsh")) {
                fputs("#compdef space\n"
                      "# zsh completion for space: source <(space completion zsh), or save it as _space in $fpath\n"
                      "autoload -U +X bashcompinit && bashcompinit\n",
                      stdout);
                print_bash(stdout, cmds, n);
        } else if (streq(p.pos[0], "fish"))
                print_fish(stdout, cmds, n);
        else
                return cli_usage_error("unknown shell '%s' (bash, zsh or fish)", p.pos[0]);
        return 0;
}
