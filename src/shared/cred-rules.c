/* SPDX-License-Identifier: MIT */
/* Checks of credential fields and host matching. See cred-rules.h. */

#include <stdio.h>
#include <string.h>

#include "cred-crypt.h"
#include "cred-rules.h"
#include "public-suffix.h"
#include "str-util.h"

#define DNS_LABEL_MAX 63

static bool is_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static char lower(char c) {
        return c >= 'A' && c <= 'Z' ? (char) (c - 'A' + 'a') : c;
}

static int fail(char *errbuf, size_t size, const char *msg, const char *p, size_t n) {
        if (errbuf && size > 0)
                (void) snprintf(errbuf, size, "%s: '%.*s'", msg, (int) MIN(n, (size_t) 80), p);
        return -EINVAL;
}

bool cred_name_valid(const char *p, size_t n) {
        if (!p || n == 0 || n > CRED_NAME_MAX || !is_alnum(p[0]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_alnum(p[i]) && p[i] != '_' && p[i] != '.' && p[i] != '-')
                        return false;
        return true;
}

int cred_host_pattern_syntax_check(const char *p, size_t n, char *errbuf, size_t errbuf_size) {
        size_t labels = 0, label_len = 0;
        bool all_digits = true;

        if (!p)
                return -EINVAL;
        if (n == 0)
                return fail(errbuf, errbuf_size, "empty host pattern", p, n);
        if (n > CRED_HOST_MAX)
                return fail(errbuf, errbuf_size, "host pattern too long", p, n);
        if (n >= 2 && p[0] == '*' && p[1] == '.') {
                p += 2;
                n -= 2;
        }
        if (n == 0 || memchr(p, '*', n))
                return fail(errbuf, errbuf_size,
                            "host pattern matches everything or has a '*' elsewhere than a leading '*.'", p, n);
        for (size_t i = 0; i <= n; i++) {
                char c = i < n ? p[i] : '.';

                if (c == '.') {
                        if (label_len == 0)
                                return fail(errbuf, errbuf_size, "host pattern has an empty label", p, n);
                        if (p[i - 1] == '-' || p[i - label_len] == '-')
                                return fail(errbuf, errbuf_size, "a label of a host may not start or end with '-'",
                                            p, n);
                        labels++;
                        label_len = 0;
                        continue;
                }
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
                        return fail(errbuf, errbuf_size,
                                    "host pattern may hold only lower-case letters, digits, '-' and '.'", p, n);
                if (c < '0' || c > '9')
                        all_digits = false;
                if (++label_len > DNS_LABEL_MAX)
                        return fail(errbuf, errbuf_size, "a label of a host is longer than 63", p, n);
        }
        if (all_digits)
                return fail(errbuf, errbuf_size, "host pattern is an IP address (credentials are for names)", p,
                            n);
        if (labels < 2)
                return fail(errbuf, errbuf_size, "host pattern matches a whole top-level domain", p, n);
        return 0;
}

int cred_host_pattern_public_suffix(const char *p, size_t n, PublicSuffixSection *ret_section, char *ret_below,
                                    size_t below_size) {
        int r;

        if (!p || !ret_section)
                return -EINVAL;
        *ret_section = PUBLIC_SUFFIX_NONE;
        if (ret_below && below_size > 0)
                ret_below[0] = 0;
        if (n < 2 || p[0] != '*' || p[1] != '.')
                return CRED_SUFFIX_NONE; /* an exact host matches one name only */
        r = public_suffix_lookup(p + 2, n - 2, ret_section);
        if (r < 0)
                return r;
        if (*ret_section != PUBLIC_SUFFIX_NONE)
                return CRED_SUFFIX_IS;
        r = public_suffix_below(p + 2, n - 2, ret_below, below_size);
        if (r < 0)
                return r;
        return r > 0 ? CRED_SUFFIX_BELOW : CRED_SUFFIX_NONE;
}

int cred_host_pattern_check(const char *p, size_t n, char *errbuf, size_t errbuf_size) {
        char below[PUBLIC_SUFFIX_NAME_MAX + 1];
        PublicSuffixSection s;
        int r, pn = (int) MIN(n, (size_t) 80), xn = (int) MIN(n - 2, (size_t) 80);

        r = cred_host_pattern_syntax_check(p, n, errbuf, errbuf_size);
        if (r < 0)
                return r;
        r = cred_host_pattern_public_suffix(p, n, &s, below, sizeof below);
        if (r == -ENOENT) {
                /* fail closed: without the list no wildcard can be shown to be narrow */
                if (errbuf && errbuf_size > 0)
                        (void) snprintf(errbuf, errbuf_size,
                                        "'%.*s': the Public Suffix List (%s, Debian's publicsuffix package) is not "
                                        "installed to check a wildcard against; name exact hosts",
                                        pn, p, PUBLIC_SUFFIX_DAT_PATH);
                return -EINVAL;
        }
        if (r < 0)
                return fail(errbuf, errbuf_size, "host pattern is not a host name", p, n);
        if (r == CRED_SUFFIX_IS) {
                if (errbuf && errbuf_size > 0)
                        (void) snprintf(errbuf, errbuf_size,
                                        "'%.*s' covers the public suffix '%.*s' (%s section of the Public Suffix "
                                        "List): every owner's site under it would receive the credential; name "
                                        "hosts under one registered domain (e.g. '*.example.%.*s')",
                                        pn, p, xn, p + 2, public_suffix_section_to_string(s), xn, p + 2);
                return -EINVAL;
        }
        if (r == CRED_SUFFIX_BELOW) {
                if (errbuf && errbuf_size > 0)
                        (void) snprintf(errbuf, errbuf_size,
                                        "'%.*s' covers public suffixes below '%.*s', such as '%.80s' (Public Suffix "
                                        "List): every owner's site under them would receive the credential; name "
                                        "the exact hosts", pn, p, xn, p + 2, below);
                return -EINVAL;
        }
        return 0;
}

static bool eq_ci(const char *a, const char *b, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (lower(a[i]) != lower(b[i]))
                        return false;
        return true;
}

bool cred_host_match(const char *pattern, const char *host, size_t host_len) {
        size_t plen;

        if (!pattern || !host)
                return false;
        if (host_len > 0 && host[host_len - 1] == '.')
                host_len--;
        if (host_len == 0 || host_len > CRED_HOST_MAX || memchr(host, 0, host_len))
                return false;
        if (pattern[0] == '*' && pattern[1] == '.') {
                const char *suffix = pattern + 1; /* ".example.com" */

                plen = strlen(suffix);
                /* at least one character before the dot, and that label is not empty */
                return host_len > plen && eq_ci(host + host_len - plen, suffix, plen) &&
                       host[host_len - plen - 1] != '.';
        }
        plen = strlen(pattern);
        return plen == host_len && eq_ci(host, pattern, plen);
}

static bool is_tchar(char c) {
        return is_alnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

int cred_header_name_check(const char *p, size_t n, char *errbuf, size_t errbuf_size) {
        static const char *const refused[] = {
                "host",       "content-length",   "transfer-encoding", "connection", "keep-alive",
                "upgrade",    "te",               "trailer",           "proxy-connection",
                "proxy-authorization", "expect",
        };

        if (!p)
                return -EINVAL;
        if (n == 0 || n > CRED_HEADER_NAME_MAX)
                return fail(errbuf, errbuf_size, "header name must be 1..127 characters", p, n);
        for (size_t i = 0; i < n; i++)
                if (!is_tchar(p[i]))
                        return fail(errbuf, errbuf_size, "header name has a character not allowed in a token", p,
                                    n);
        for (size_t i = 0; i < ELEMENTSOF(refused); i++)
                if (strlen(refused[i]) == n && eq_ci(p, refused[i], n))
                        return fail(errbuf, errbuf_size, "header cannot carry a credential", p, n);
        return 0;
}

static bool visible_or_space(const char *p, size_t n) {
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) p[i] < 0x20 || (unsigned char) p[i] > 0x7e)
                        return false;
        return true;
}

int cred_header_format_check(const char *p, size_t n, char *errbuf, size_t errbuf_size) {
        const char *v;
        size_t vl = strlen(CRED_FORMAT_VALUE);

        if (!p)
                return -EINVAL;
        if (n > CRED_HEADER_FORMAT_MAX || !visible_or_space(p, n))
                return fail(errbuf, errbuf_size, "header format must be up to 511 visible ASCII characters", p, n);
        v = memmem(p, n, CRED_FORMAT_VALUE, vl);
        if (!v || memmem(v + vl, n - (size_t) (v - p) - vl, CRED_FORMAT_VALUE, vl))
                return fail(errbuf, errbuf_size, "header format must contain {value} exactly once", p, n);
        return 0;
}

int cred_basic_user_check(const char *p, size_t n, char *errbuf, size_t errbuf_size) {
        if (!p)
                return -EINVAL;
        if (n == 0 || n > CRED_BASIC_USER_MAX || !visible_or_space(p, n) || memchr(p, ':', n))
                return fail(errbuf, errbuf_size, "basic auth user must be 1..127 visible characters without ':'",
                            p, n);
        return 0;
}

int cred_env_name_check(const char *p, size_t n, char *errbuf, size_t errbuf_size) {
        static const char *const refused[] = {
                "PATH", "HOME", "USER", "SHELL", "TERM", "PWD", "HOSTNAME",
                "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE",
                "GIT_SSL_CAINFO", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy",
                "https_proxy", "no_proxy", "all_proxy",
        };

        if (!p)
                return -EINVAL;
        if (n == 0 || n > CRED_ENV_NAME_MAX || (!is_alnum(p[0]) && p[0] != '_') || (p[0] >= '0' && p[0] <= '9'))
                return fail(errbuf, errbuf_size, "env name must match [A-Za-z_][A-Za-z0-9_]*", p, n);
        for (size_t i = 0; i < n; i++)
                if (!is_alnum(p[i]) && p[i] != '_')
                        return fail(errbuf, errbuf_size, "env name must match [A-Za-z_][A-Za-z0-9_]*", p, n);
        if (n >= 3 && memcmp(p, "LD_", 3) == 0)
                return fail(errbuf, errbuf_size, "env name is one the platform sets", p, n);
        for (size_t i = 0; i < ELEMENTSOF(refused); i++)
                if (strlen(refused[i]) == n && memcmp(p, refused[i], n) == 0)
                        return fail(errbuf, errbuf_size, "env name is one the platform sets", p, n);
        return 0;
}

int cred_value_check(const void *p, size_t n, char *errbuf, size_t errbuf_size) {
        const unsigned char *b = p;

        if (!p && n > 0)
                return -EINVAL;
        if (n == 0) {
                (void) snprintf(errbuf, errbuf_size, "value is empty");
                return -EINVAL;
        }
        if (n > CRED_VALUE_MAX) {
                (void) snprintf(errbuf, errbuf_size, "value is longer than %d bytes", CRED_VALUE_MAX);
                return -E2BIG;
        }
        for (size_t i = 0; i < n; i++)
                if (b[i] < 0x20 || b[i] == 0x7f) {
                        /* never echo the value */
                        (void) snprintf(errbuf, errbuf_size, "value has a control character at byte %zu", i);
                        return -EINVAL;
                }
        return 0;
}

int cred_placeholder(const char *name, char *buf, size_t size) {
        int k;

        if (!name || !buf || !cred_name_valid(name, strlen(name)))
                return -EINVAL;
        k = snprintf(buf, size, "%s%s", CRED_PLACEHOLDER_PREFIX, name);
        if (k < 0 || (size_t) k >= size)
                return -ENAMETOOLONG;
        return 0;
}
