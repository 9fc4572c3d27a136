/* SPDX-License-Identifier: MIT */
/* Users of a sandbox as the envd surface needs them: E2B runs commands and
 * writes files as a named user (default "user"), resolves relative paths from
 * that user's home and names owners in file entries. The sandbox's own
 * /etc/passwd and /etc/group are read through the agent; their text is
 * hostile: bounded, and malformed lines are skipped. */

#include <inttypes.h>
#include <stdio.h>

#include "alloc-util.h"
#include "e2b.h"
#include "str-util.h"

#define PASSWD_FIELDS 7U
#define GROUP_FIELDS 4U
#define ROOT_HOME "/root"

void e2b_accounts_done(E2bAccounts *a) {
        if (!a)
                return;
        a->passwd = mfree(a->passwd);
        a->group = mfree(a->group);
        a->passwd_len = a->group_len = 0;
}

/* Splits a line into at most max ':'-separated fields; returns how many. */
static size_t split_fields(Slice line, Slice *f, size_t max) {
        const char *p = line.p, *end = line.p + line.n;
        size_t k = 0;

        for (;;) {
                const char *c = memchr(p, ':', (size_t) (end - p));
                if (k >= max)
                        return max + 1; /* too many */
                f[k++] = (Slice){ p, c ? (size_t) (c - p) : (size_t) (end - p) };
                if (!c)
                        return k;
                p = c + 1;
        }
}

static Slice next_line(const char **p, const char *end) {
        const char *nl = memchr(*p, '\n', (size_t) (end - *p));
        Slice s = { *p, nl ? (size_t) (nl - *p) : (size_t) (end - *p) };
        *p = nl ? nl + 1 : end;
        return s;
}

static bool parse_id(Slice s, uint32_t *ret) {
        uint64_t u;
        if (s.n == 0 || s.n > 10 || slice_to_u64(s, &u) < 0 || u >= UINT32_MAX)
                return false;
        *ret = (uint32_t) u;
        return true;
}

static bool slice_printable(Slice s) {
        for (size_t i = 0; i < s.n; i++)
                if ((unsigned char) s.p[i] < 0x20 || s.p[i] == 0x7f)
                        return false;
        return true;
}

int e2b_passwd_find(const char *p, size_t n, const char *name, E2bUser *ret) {
        const char *end = p ? p + n : NULL;

        if (!p || isempty(name) || strlen(name) > E2B_USER_NAME_MAX)
                return -ENOENT;
        while (p < end) {
                Slice line = next_line(&p, end), f[PASSWD_FIELDS];
                E2bUser u = {};

                if (split_fields(line, f, PASSWD_FIELDS) != PASSWD_FIELDS || !slice_eq(f[0], name))
                        continue;
                if (!parse_id(f[2], &u.uid) || !parse_id(f[3], &u.gid))
                        continue;
                if (f[5].n == 0 || f[5].p[0] != '/' || f[5].n > API_PATH_MAX || !slice_printable(f[5]))
                        continue;
                memcpy(u.name, name, strlen(name) + 1);
                memcpy(u.home, f[5].p, f[5].n);
                u.home[f[5].n] = 0;
                *ret = u;
                return 0;
        }
        return -ENOENT;
}

int e2b_id_name(const char *p, size_t n, uint32_t id, char *buf, size_t size) {
        const char *end = p ? p + n : NULL;

        while (p && p < end) {
                Slice line = next_line(&p, end), f[PASSWD_FIELDS];
                size_t k = split_fields(line, f, PASSWD_FIELDS);
                uint32_t x;

                if (k < 3 || k > PASSWD_FIELDS || f[0].n == 0 || f[0].n >= size || !slice_printable(f[0]))
                        continue;
                if (!parse_id(f[2], &x) || x != id)
                        continue;
                memcpy(buf, f[0].p, f[0].n);
                buf[f[0].n] = 0;
                return 0;
        }
        return -ENOENT;
}

int e2b_user_resolve(const E2bEnvd *x, const E2bAccounts *acc, E2bUser *ret, ApiError *e) {
        const char *name = x->user[0] ? x->user : E2B_DEFAULT_USER;

        if (e2b_passwd_find(acc->passwd, acc->passwd_len, name, ret) >= 0)
                return 0;
        if (x->user[0] && !streq(x->user, "root"))
                return api_error(e, -ENOENT, API_UNAUTHORIZED, "user '%s' does not exist in the sandbox", x->user);
        /* no "user" in this template (or no passwd entry for root): root it is */
        if (e2b_passwd_find(acc->passwd, acc->passwd_len, "root", ret) >= 0)
                return 0;
        *ret = (E2bUser){ .name = "root", .uid = 0, .gid = 0, .home = ROOT_HOME };
        return 0;
}

int e2b_path_resolve(const char *p, size_t n, const char *home, char **ret, ApiError *e) {
        _cleanup_free_ char *joined = NULL, *out = NULL;
        size_t len, o = 0;

        if (!p || n == 0)
                return api_error(e, -EINVAL, API_INVALID_PATH, "the path is empty");
        if (memchr(p, 0, n))
                return api_error(e, -EINVAL, API_INVALID_PATH, "the path contains a NUL byte");
        if (n > API_PATH_MAX)
                return api_error(e, -ENAMETOOLONG, API_INVALID_PATH, "the path is longer than %u bytes", API_PATH_MAX);

        /* "~" and "~/x" are the home; other relative paths start there too */
        if (p[0] == '~' && (n == 1 || p[1] == '/'))
                joined = strdup_printf("%s/%.*s", home, (int) n - 1, p + 1);
        else if (p[0] != '/')
                joined = strdup_printf("%s/%.*s", home, (int) n, p);
        else
                joined = memdup_suffix0(p, n);
        if (!joined)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        len = strlen(joined);
        out = malloc(len + 2);
        if (!out)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");

        /* lexically: "." and empty components vanish, ".." drops the previous one (never above /) */
        out[o++] = '/';
        for (const char *s = joined; *s;) {
                size_t c;
                while (*s == '/')
                        s++;
                c = strcspn(s, "/");
                if (c == 0)
                        break;
                if (c == 1 && s[0] == '.') {
                        /* nothing */
                } else if (c == 2 && s[0] == '.' && s[1] == '.') {
                        while (o > 1 && out[o - 1] != '/')
                                o--;
                        if (o > 1)
                                o--; /* the slash */
                } else {
                        if (o > 1)
                                out[o++] = '/';
                        memcpy(out + o, s, c);
                        o += c;
                }
                s += c;
        }
        out[o] = 0;
        if (o > API_PATH_MAX)
                return api_error(e, -ENAMETOOLONG, API_INVALID_PATH, "the path is longer than %u bytes", API_PATH_MAX);
        *ret = TAKE_PTR(out);
        return 0;
}

int e2b_agent_read_small(int fd, const char *path, size_t max, char **ret, size_t *ret_len, ApiError *e) {
        _cleanup_(proto_frame_done) ProtoFrame info = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ char *json = NULL, *buf = NULL;
        size_t len = 0;
        int k;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "path", path);
        json_w_kv_int(&w, "offset", 0);
        json_w_kv_int(&w, "length", (int64_t) max);
        json_w_object_end(&w);
        if (json_w_finish(&w, &json, NULL) < 0)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        k = proto_send_json(fd, PROTO_FILE_READ, AGENT_STREAM, json);
        if (k < 0)
                return api_error(e, k, API_BAD_GATEWAY, "sending to the agent failed: %s", strerror(-k));
        k = agent_call_recv(fd, AGENT_REPLY_TIMEOUT_MSEC, &info, e);
        if (k < 0)
                return k;
        if (info.type != PROTO_FILE_INFO)
                return agent_call_error(&info, path, e);
        buf = malloc(max + 1);
        if (!buf)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        for (;;) {
                _cleanup_(proto_frame_done) ProtoFrame f = {};

                k = agent_call_recv(fd, AGENT_REPLY_TIMEOUT_MSEC, &f, e);
                if (k < 0)
                        return k;
                if (f.type == PROTO_DATA_END)
                        break;
                if (f.type == PROTO_ERROR)
                        return agent_call_error(&f, path, e);
                if (f.type != PROTO_DATA || f.len > max - len)
                        return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the agent sent an unexpected frame");
                memcpy(buf + len, f.payload, f.len);
                len += f.len;
        }
        buf[len] = 0;
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

int e2b_accounts_load(int fd, bool with_groups, E2bAccounts *ret, ApiError *e) {
        _cleanup_(e2b_accounts_done) E2bAccounts a = {};
        ApiError ignored = {};
        int k;

        /* a sandbox without these files still works (as root) */
        k = e2b_agent_read_small(fd, "/etc/passwd", E2B_ACCOUNTS_FILE_MAX, &a.passwd, &a.passwd_len, &ignored);
        if (k < 0 && ignored.code == API_BAD_GATEWAY) {
                *e = ignored;
                return k;
        }
        if (with_groups) {
                ignored = (ApiError){};
                k = e2b_agent_read_small(fd, "/etc/group", E2B_ACCOUNTS_FILE_MAX, &a.group, &a.group_len, &ignored);
                if (k < 0 && ignored.code == API_BAD_GATEWAY) {
                        *e = ignored;
                        return k;
                }
        }
        *ret = a;
        a = (E2bAccounts){};
        return 0;
}
