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
int cli_attach(int argc, char **argv);   /* cli-exec.c */
int cli_shell(int argc, char **argv);    /* cli-shell.c */
int cli_ls(int argc, char **argv);       /* cli-ls.c */
int cli_show(int argc, char **argv);     /* cli-ls.c */
int cli_rm(int argc, char **argv);       /* cli-rm.c */
int cli_cp(int argc, char **argv);       /* cli-cp.c */
int cli_template(int argc, char **argv); /* cli-template.c */
int cli_template_set(int argc, char **argv); /* cli-template-set.c: space template set */
int cli_template_build(int argc, char **argv); /* cli-template-build.c: space template build */
int cli_key(int argc, char **argv);      /* cli-key.c */
int cli_tenant(int argc, char **argv);   /* cli-tenant.c */
int cli_cred(int argc, char **argv);     /* cli-cred.c */
int cli_events(int argc, char **argv);   /* cli-events.c */
int cli_policy(int argc, char **argv);   /* cli-policy.c */
int cli_port(int argc, char **argv);     /* cli-port.c */
int cli_forward(int argc, char **argv);  /* cli-forward.c */
int cli_open(int argc, char **argv);     /* cli-port.c */
int cli_pause(int argc, char **argv);    /* cli-lifecycle.c */
int cli_resume(int argc, char **argv);   /* cli-lifecycle.c */
int cli_suspend(int argc, char **argv);  /* cli-lifecycle.c */
int cli_checkpoint(int argc, char **argv);  /* cli-lifecycle.c */
int cli_checkpoints(int argc, char **argv); /* cli-lifecycle.c */
int cli_restore(int argc, char **argv);  /* cli-lifecycle.c */
int cli_branch(int argc, char **argv);   /* cli-lifecycle.c */
int cli_mcp(int argc, char **argv);      /* cli-mcp.c */
int cli_ps(int argc, char **argv);       /* cli-proc.c */
int cli_kill(int argc, char **argv);     /* cli-proc.c */
int cli_logs(int argc, char **argv);     /* cli-proc.c */
int cli_stdin(int argc, char **argv);    /* cli-proc.c */
int cli_files(int argc, char **argv);    /* cli-files.c */
int cli_update(int argc, char **argv);   /* cli-update.c */
int cli_top(int argc, char **argv);      /* cli-top.c */
int cli_completion(int argc, char **argv); /* cli-completion.c */
int cli_volume(int argc, char **argv);   /* cli-volume.c */
int cli_webhook(int argc, char **argv);  /* cli-webhook.c */
/* One element of a create's "volumes" from --volume NAME:/path[:ro|:rw] (errors printed). */
struct JsonWriter;
int cli_volume_write_mount(struct JsonWriter *w, const char *spec); /* cli-volume.c */
/* The newest limit events of a sandbox (or of all with NULL), newest last. */
int cli_events_show(const char *sandbox, uint64_t limit); /* cli-events.c */
/* The checkpoint table of a sandbox for 'show' (nothing if it has none). */
int cli_show_checkpoints(const char *id); /* cli-lifecycle.c */
