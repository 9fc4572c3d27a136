/* SPDX-License-Identifier: MIT */
#pragma once

/* The verbs of the command table in main.c, one file each (or per group).
 * Each takes argv with argv[0] = the verb and returns an exit code >= 0,
 * or a negative errno after printing the reason. */

int cli_up(int argc, char **argv);       /* cli-up.c */
int cli_down(int argc, char **argv);     /* cli-up.c */
int cli_info(int argc, char **argv);     /* cli-info.c */
int cli_create(int argc, char **argv);   /* cli-create.c */
int cli_exec(int argc, char **argv);     /* cli-exec.c */
int cli_shell(int argc, char **argv);    /* cli-shell.c */
int cli_ls(int argc, char **argv);       /* cli-ls.c */
int cli_show(int argc, char **argv);     /* cli-ls.c */
int cli_rm(int argc, char **argv);       /* cli-rm.c */
int cli_cp(int argc, char **argv);       /* cli-cp.c */
int cli_template(int argc, char **argv); /* cli-template.c */
int cli_key(int argc, char **argv);      /* cli-key.c */
int cli_events(int argc, char **argv);   /* cli-events.c */
