/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <stdio.h>

#include "agent-user.h"
#include "alloc-util.h"
#include "fd-util.h"
#include "str-util.h"

#define PASSWD_FIELDS 7
#define GROUP_FIELDS 4
#define ID_INVALID ((uint64_t) UINT32_MAX)

void agent_user_done(AgentUser *u) {
        if (!u)
                return;
        u->name = mfree(u->name);
        u->home = mfree(u->home);
        u->n_groups = 0;
}

/* Splits line into exactly n ':' separated fields; false if the count differs. */
static bool split_fields(Slice line, Slice *f, size_t n) {
        size_t k = 0;
        const char *p = line.p, *end = line.p + line.n;

        for (;;) {
                const char *c = memchr(p, ':', (size_t) (end - p));
                if (k >= n)
                        return false;
                f[k++] = (Slice){ p, c ? (size_t) (c - p) : (size_t) (end - p) };
                if (!c)
                        break;
                p = c + 1;
        }
        return k == n;
}

/* Returns the next line of [*p, end) without its newline and advances *p. */
static Slice next_line(const char **p, const char *end) {
        const char *nl = memchr(*p, '\n', (size_t) (end - *p));
        Slice s = { *p, nl ? (size_t) (nl - *p) : (size_t) (end - *p) };
        *p = nl ? nl + 1 : end;
        return s;
}

static bool parse_id(Slice s, uint32_t *ret) {
        uint64_t u;
        if (s.n == 0 || s.n > 10 || slice_to_u64(s, &u) < 0 || u >= ID_INVALID)
                return false;
        *ret = (uint32_t) u;
        return true;
}

static bool all_digits(const char *s) {
        if (!*s)
                return false;
        for (; *s; s++)
                if (*s < '0' || *s > '9')
                        return false;
        return true;
}

int agent_user_from_passwd(const char *p, size_t n, const char *name, bool have_uid, uid_t uid, AgentUser *ret) {
        const char *end = p ? p + n : NULL;
        uint32_t want_uid = 0;
        bool by_uid = have_uid || !name;

        if (!ret)
                return -EINVAL;
        if (!have_uid && !name)
                want_uid = 0; /* root */
        else if (have_uid)
                want_uid = (uint32_t) uid;

        for (int pass = 0; pass < 2; pass++) {
                /* pass 0: by name (or uid if asked); pass 1: a numeric name as uid */
                if (pass == 1) {
                        if (by_uid || !all_digits(name))
                                break;
                        uint64_t u;
                        if (safe_atou64(name, &u) < 0 || u >= ID_INVALID)
                                break;
                        by_uid = true;
                        want_uid = (uint32_t) u;
                }
                for (const char *q = p; q && q < end;) {
                        Slice line = next_line(&q, end), f[PASSWD_FIELDS];
                        uint32_t fuid, fgid;

                        if (line.n == 0 || line.p[0] == '#' || !split_fields(line, f, PASSWD_FIELDS))
                                continue;
                        if (!parse_id(f[2], &fuid) || !parse_id(f[3], &fgid) || f[0].n == 0)
                                continue;
                        if (by_uid ? fuid != want_uid : !slice_eq(f[0], name))
                                continue;
                        *ret = (AgentUser){ .uid = fuid, .gid = fgid };
                        ret->name = memdup_suffix0(f[0].p, f[0].n);
                        ret->home = f[5].n > 0 && f[5].p[0] == '/' ? memdup_suffix0(f[5].p, f[5].n) : strdup("/");
                        if (!ret->name || !ret->home) {
                                agent_user_done(ret);
                                return -ENOMEM;
                        }
                        ret->groups[ret->n_groups++] = fgid;
                        return 0;
                }
        }

        if (!by_uid)
                return -ENOENT;
        /* A uid without an entry: its own group, no home. */
        *ret = (AgentUser){ .uid = want_uid, .gid = want_uid };
        ret->name = want_uid == 0 ? strdup("root") : strdup_printf("%" PRIu32, want_uid);
        ret->home = strdup(want_uid == 0 ? "/root" : "/");
        if (!ret->name || !ret->home) {
                agent_user_done(ret);
                return -ENOMEM;
        }
        ret->groups[ret->n_groups++] = want_uid;
        return 0;
}

static bool member_of(Slice members, const char *name) {
        const char *p = members.p, *end = members.p + members.n;

        while (p < end) {
                const char *c = memchr(p, ',', (size_t) (end - p));
                Slice m = { p, c ? (size_t) (c - p) : (size_t) (end - p) };
                if (slice_eq(m, name))
                        return true;
                p = c ? c + 1 : end;
        }
        return false;
}

void agent_user_add_groups(AgentUser *u, const char *p, size_t n) {
        const char *end = p ? p + n : NULL;

        if (!u || !u->name)
                return;
        for (const char *q = p; q && q < end && u->n_groups < AGENT_GROUPS_MAX;) {
                Slice line = next_line(&q, end), f[GROUP_FIELDS];
                uint32_t gid;
                bool dup = false;

                if (line.n == 0 || line.p[0] == '#' || !split_fields(line, f, GROUP_FIELDS))
                        continue;
                if (!parse_id(f[2], &gid) || !member_of(f[3], u->name))
                        continue;
                for (size_t i = 0; i < u->n_groups; i++)
                        dup = dup || u->groups[i] == gid;
                if (!dup)
                        u->groups[u->n_groups++] = gid;
        }
}

int agent_user_lookup(const char *name, bool have_uid, uid_t uid, AgentUser *ret) {
        _cleanup_free_ char *passwd = NULL, *group = NULL;
        size_t np = 0, ng = 0;
        int r;

        /* A missing or unreadable file is an empty one: root and numeric uids still work. */
        if (read_full_file("/etc/passwd", AGENT_PASSWD_FILE_MAX, &passwd, &np) < 0)
                np = 0;
        r = agent_user_from_passwd(passwd, np, name, have_uid, uid, ret);
        if (r < 0)
                return r;
        if (read_full_file("/etc/group", AGENT_PASSWD_FILE_MAX, &group, &ng) >= 0)
                agent_user_add_groups(ret, group, ng);
        return 0;
}
