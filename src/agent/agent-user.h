/* SPDX-License-Identifier: MIT */
#pragma once

/* Users and groups from the sandbox's own /etc/passwd and /etc/group, parsed
 * here (a static binary has no NSS). Both files are untrusted: bounded size,
 * malformed lines are skipped. */

#include <sys/types.h>

#include "macros.h"

#define AGENT_PASSWD_FILE_MAX (16U * 1024U * 1024U)
#define AGENT_GROUPS_MAX 64U

typedef struct AgentUser {
        char *name; /* for a uid without a passwd entry: the number */
        uid_t uid;
        gid_t gid;
        char *home; /* "/" when unknown */
        gid_t groups[AGENT_GROUPS_MAX]; /* supplementary groups, primary gid first */
        size_t n_groups;
} AgentUser;

/* name: a user name, or digits for a uid; NULL and !have_uid: root.
 * -ENOENT for an unknown name. A uid without an entry is accepted (gid = uid, home "/"). */
int agent_user_lookup(const char *name, bool have_uid, uid_t uid, AgentUser *ret);
void agent_user_done(AgentUser *u);

/* The parsers behind it, over (pointer, length) buffers (for tests). */
int agent_user_from_passwd(const char *p, size_t n, const char *name, bool have_uid, uid_t uid, AgentUser *ret);
void agent_user_add_groups(AgentUser *u, const char *p, size_t n);
