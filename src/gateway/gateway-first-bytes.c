/* SPDX-License-Identifier: MIT */
/* What a client sends first through a CONNECT tunnel, and the authority
 * syntax the proxy compares (CONNECT target, absolute URI, Host header). */
#include <string.h>

#include "gateway-internal.h"
#include "sni-parse.h"

/* "host[:port]" (no brackets: IPv6 is not served). */
int gw_split_authority(const char *p, size_t n, uint16_t default_port, char host[static DNS_NAME_MAX + 1],
                       uint16_t *ret_port) {
        const char *colon = memrchr(p, ':', n);
        size_t hl = colon ? (size_t) (colon - p) : n;
        uint64_t port = default_port;
        if (hl == 0 || hl > DNS_NAME_MAX || memchr(p, '[', n) || memchr(p, '@', n))
                return -EINVAL;
        if (colon && (slice_to_u64((Slice){ colon + 1, n - hl - 1 }, &port) < 0 || port == 0 || port > 65535))
                return -EINVAL;
        memcpy(host, p, hl);
        host[hl] = 0;
        if (hl > 0 && host[hl - 1] == '.')
                host[hl - 1] = 0;
        for (char *s = host; *s; s++)
                if (*s >= 'A' && *s <= 'Z')
                        *s = (char) (*s - 'A' + 'a');
        *ret_port = (uint16_t) port;
        return 0;
}

static bool is_tchar(uint8_t ch) {
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* HTTP is recognised by its first line (after the blank lines and white space
 * servers skip): a token, white space, anything, and " HTTP/" before the line
 * ends. So a server cannot be handed a request whose Host was never checked,
 * while a client-first protocol that is not HTTP (an SSH banner) still passes. */
int gw_first_bytes_kind(const uint8_t *p, size_t n) {
        size_t i = 0, tok, line;
        const uint8_t *eol;

        if (sni_looks_like_tls(p, n))
                return n > 0 ? GW_FIRST_TLS : -EAGAIN;
        while (i < n && (p[i] == '\r' || p[i] == '\n' || p[i] == ' ' || p[i] == '\t'))
                i++;
        if (i == n)
                return -EAGAIN;
        for (tok = i; tok < n && is_tchar(p[tok]); tok++)
                ;
        if (tok == i || (tok < n && p[tok] != ' ' && p[tok] != '\t'))
                return GW_FIRST_OTHER; /* no method token, or one that ends in something else */
        eol = memchr(p + i, '\n', n - i);
        if (!eol)
                return -EAGAIN; /* the caller bounds the wait */
        line = (size_t) (eol - (p + i));
        return memmem(p + i, line, " HTTP/", 6) || memmem(p + i, line, "\tHTTP/", 6) ? GW_FIRST_HTTP : GW_FIRST_OTHER;
}
