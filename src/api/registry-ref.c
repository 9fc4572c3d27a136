/* SPDX-License-Identifier: MIT */
/* An image reference, parsed strictly (the grammar of the distribution
 * project's reference package, with the registry always named: a pull never
 * guesses which host it talks to). */

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "registry.h"
#include "str-util.h"

static int fail(char *err, size_t errlen, const char *msg) {
        snprintf(err, errlen, "%s", msg);
        return -EINVAL;
}

static bool is_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is_lower_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* A DNS label run "a.b-c.d" or an IPv6 literal "[...]", then an optional ":port". */
static bool host_valid(const char *h, size_t n, bool *ret_has_dot_or_port) {
        size_t i = 0, label = 0;
        bool dot = false;

        if (n == 0)
                return false;
        if (h[0] == '[') {
                for (i = 1; i < n && h[i] != ']'; i++)
                        if (!strchr("0123456789abcdefABCDEF:.", h[i]))
                                return false;
                if (i >= n || i < 3)
                        return false;
                i++;
                dot = true;
        } else {
                for (; i < n && h[i] != ':'; i++) {
                        if (h[i] == '.') {
                                if (label == 0 || h[i - 1] == '-')
                                        return false;
                                dot = true;
                                label = 0;
                                continue;
                        }
                        if (!is_alnum(h[i]) && !(h[i] == '-' && label > 0))
                                return false;
                        if (++label > 63)
                                return false;
                }
                if (label == 0 || h[i - 1] == '-')
                        return false;
        }
        if (i < n) {
                unsigned port = 0;
                if (h[i] != ':' || i + 1 >= n || n - i - 1 > 5)
                        return false;
                for (size_t k = i + 1; k < n; k++) {
                        if (h[k] < '0' || h[k] > '9')
                                return false;
                        port = port * 10 + (unsigned) (h[k] - '0');
                }
                if (port == 0 || port > 65535 || h[i + 1] == '0')
                        return false;
                dot = true;
        }
        *ret_has_dot_or_port = dot;
        return true;
}

/* path-component: [a-z0-9]+ ((\.|_|__|-+) [a-z0-9]+)* */
static bool component_valid(const char *c, size_t n) {
        size_t i = 0;

        if (n == 0 || !is_lower_alnum(c[0]) || !is_lower_alnum(c[n - 1]))
                return false;
        while (i < n) {
                if (is_lower_alnum(c[i])) {
                        i++;
                        continue;
                }
                if (c[i] == '.' || c[i] == '_') {
                        size_t run = 1;
                        if (c[i] == '_' && i + 1 < n && c[i + 1] == '_')
                                run = 2;
                        i += run;
                } else if (c[i] == '-') {
                        while (i < n && c[i] == '-')
                                i++;
                } else
                        return false;
                if (i >= n || !is_lower_alnum(c[i]))
                        return false;
        }
        return true;
}

static bool tag_valid(const char *t, size_t n) {
        if (n == 0 || n > REGISTRY_TAG_MAX || !(is_alnum(t[0]) || t[0] == '_'))
                return false;
        for (size_t i = 1; i < n; i++)
                if (!is_alnum(t[i]) && !strchr("_.-", t[i]))
                        return false;
        return true;
}

static bool digest_valid(const char *d) {
        if (strncmp(d, "sha256:", 7) != 0 || strlen(d) != 7 + 64)
                return false;
        for (size_t i = 7; i < 7 + 64; i++)
                if (!((d[i] >= '0' && d[i] <= '9') || (d[i] >= 'a' && d[i] <= 'f')))
                        return false;
        return true;
}

int registry_ref_parse(const char *s, RegistryRef *ret, char *err, size_t errlen) {
        const char *at, *slash, *path, *colon, *end;
        size_t n, hn;
        bool named = false;

        *ret = (RegistryRef){};
        if (!s || !*s)
                return fail(err, errlen, "the image reference is empty");
        n = strlen(s);
        if (n > REGISTRY_REF_MAX)
                return fail(err, errlen, "the image reference is too long");
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) s[i] <= ' ' || (unsigned char) s[i] >= 0x7f)
                        return fail(err, errlen, "the image reference has a space or a control character");

        end = s + n;
        at = strchr(s, '@');
        if (at) {
                if (strchr(at + 1, '@'))
                        return fail(err, errlen, "the image reference has more than one '@'");
                if (!digest_valid(at + 1))
                        return fail(err, errlen, "the digest must be sha256:<64 lowercase hex digits>");
                memcpy(ret->digest, at + 1, 7 + 64 + 1);
                end = at;
        }

        slash = memchr(s, '/', (size_t) (end - s));
        if (!slash)
                return fail(err, errlen, "the image reference names no registry (e.g. docker.io/library/python:3.12)");
        hn = (size_t) (slash - s);
        if (hn > REGISTRY_HOST_MAX || !host_valid(s, hn, &named))
                return fail(err, errlen, "the registry must be a host name or address with an optional :port");
        if (!named && !(hn == 9 && strncmp(s, "localhost", 9) == 0))
                return fail(err, errlen,
                            "the image reference names no registry: its first part must be a host with a dot or a "
                            "port, or localhost (e.g. docker.io/library/python:3.12)");
        memcpy(ret->name, s, hn);

        /* the tag: after the last ':' of the path */
        path = slash + 1;
        colon = NULL;
        for (const char *p = path; p < end; p++)
                if (*p == ':')
                        colon = p;
                else if (*p == '/')
                        colon = NULL;
        if (colon) {
                if (!tag_valid(colon + 1, (size_t) (end - colon - 1)))
                        return fail(err, errlen, "the tag must be [A-Za-z0-9_][A-Za-z0-9_.-], at most 128 characters");
                if (!ret->digest[0])
                        memcpy(ret->tag, colon + 1, (size_t) (end - colon - 1));
                end = colon;
        }
        if (end == path)
                return fail(err, errlen, "the image reference names no repository");
        for (const char *c = path; c < end;) {
                const char *e = memchr(c, '/', (size_t) (end - c));
                if (!e)
                        e = end;
                if (!component_valid(c, (size_t) (e - c)))
                        return fail(err, errlen,
                                    "a repository path component must be lowercase letters and digits, "
                                    "separated by '.', '_', '__' or '-'");
                c = e == end ? end : e + 1;
                if (e != end && c == end)
                        return fail(err, errlen, "the repository path ends with '/'");
        }

        /* Docker Hub: its registry's host, and "library/" for an official image */
        if (streq(ret->name, "docker.io") || streq(ret->name, "index.docker.io")) {
                (void) strscpy(ret->host, sizeof ret->host, "registry-1.docker.io");
                if (!memchr(path, '/', (size_t) (end - path))) {
                        if ((size_t) (end - path) + 8 > REGISTRY_REPO_MAX)
                                return fail(err, errlen, "the repository path is too long");
                        memcpy(ret->repo, "library/", 8);
                        memcpy(ret->repo + 8, path, (size_t) (end - path));
                } else if ((size_t) (end - path) > REGISTRY_REPO_MAX)
                        return fail(err, errlen, "the repository path is too long");
                else
                        memcpy(ret->repo, path, (size_t) (end - path));
        } else {
                if ((size_t) (end - path) > REGISTRY_REPO_MAX)
                        return fail(err, errlen, "the repository path is too long");
                memcpy(ret->host, s, hn);
                memcpy(ret->repo, path, (size_t) (end - path));
        }
        if (!ret->digest[0] && !ret->tag[0])
                (void) strscpy(ret->tag, sizeof ret->tag, REGISTRY_DEFAULT_TAG);
        return 0;
}

const char *registry_ref_reference(const RegistryRef *r) {
        return r->digest[0] ? r->digest : r->tag;
}

bool registry_host_listed(const char *list, const char *host) {
        size_t hl = strlen(host);

        if (!list)
                return false;
        for (const char *p = list; *p;) {
                const char *e = strchr(p, ',');
                size_t n = e ? (size_t) (e - p) : strlen(p);
                const char *q = p;
                size_t m = n;

                while (m > 0 && *q == ' ') {
                        q++;
                        m--;
                }
                while (m > 0 && q[m - 1] == ' ')
                        m--;
                if (m == hl && strncasecmp(q, host, hl) == 0)
                        return true;
                p += n;
                if (*p == ',')
                        p++;
        }
        return false;
}
