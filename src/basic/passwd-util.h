/* SPDX-License-Identifier: MIT */
#pragma once

/* Lookups by name in the contents of an /etc/passwd ("name:pw:uid:gid:..."),
 * or an /etc/group ("name:pw:gid:members"), a hostile file: n bytes (no NUL
 * needed, NULs are bytes of a line), lines of any length, the last without
 * its newline. Blank lines, '#' comments and NIS lines ('+', '-') are
 * skipped; the first well-formed line of the name wins. An id is decimal,
 * below 4294967295 ((uid_t) -1). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PASSWD_NAME_MAX 32U

/* [A-Za-z0-9_.-]{1,32}, not starting with '-' (the names a lookup takes). */
bool passwd_name_valid(const char *s);

/* 1 with the user's uid and primary gid (ret_gid may be NULL), 0 if no line
 * names it, -EBADMSG if only malformed ones do (fewer than 4 fields, an id
 * that is not a number), -EINVAL for a name passwd_name_valid() refuses. */
int passwd_lookup(const char *buf, size_t n, const char *name, uint32_t *ret_uid, uint32_t *ret_gid);
/* The same in an /etc/group: 1 with the group's gid (3 fields at least). */
int group_lookup(const char *buf, size_t n, const char *name, uint32_t *ret_gid);
