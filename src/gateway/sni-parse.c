/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "sni-parse.h"

#define TLS_RECORD_HANDSHAKE 22
#define TLS_HANDSHAKE_CLIENT_HELLO 1
#define TLS_EXT_SERVER_NAME 0

static size_t rd16(const uint8_t *p) {
        return ((size_t) p[0] << 8) | p[1];
}

bool sni_looks_like_tls(const uint8_t *p, size_t n) {
        return n >= 1 && p[0] == TLS_RECORD_HANDSHAKE && (n < 2 || p[1] == 3);
}

int sni_parse(const uint8_t *p, size_t n, char ret_name[static SNI_NAME_MAX + 1], size_t *ret_record_len) {
        size_t rec_len, o, end, hs_len, ext_end;
        bool found = false;

        if (n < 5) {
                if (!sni_looks_like_tls(p, n))
                        return -EBADMSG;
                return -EAGAIN;
        }
        if (p[0] != TLS_RECORD_HANDSHAKE || p[1] != 3)
                return -EBADMSG;
        rec_len = rd16(p + 3);
        if (rec_len < 4 || rec_len > SNI_HELLO_MAX)
                return -EBADMSG;
        if (n < 5 + rec_len)
                return -EAGAIN;
        if (ret_record_len)
                *ret_record_len = 5 + rec_len;
        o = 5;
        end = 5 + rec_len;
        if (p[o] != TLS_HANDSHAKE_CLIENT_HELLO)
                return -EBADMSG;
        hs_len = ((size_t) p[o + 1] << 16) | rd16(p + o + 2);
        o += 4;
        if (hs_len > end - o)
                return -EBADMSG; /* a ClientHello split over records: refused */
        end = o + hs_len;
        /* version(2) random(32) */
        if (end - o < 34)
                return -EBADMSG;
        o += 34;
        /* session id */
        if (o + 1 > end || p[o] > 32 || o + 1 + p[o] > end)
                return -EBADMSG;
        o += 1 + p[o];
        /* cipher suites */
        if (o + 2 > end || o + 2 + rd16(p + o) > end)
                return -EBADMSG;
        o += 2 + rd16(p + o);
        /* compression methods */
        if (o + 1 > end || o + 1 + p[o] > end)
                return -EBADMSG;
        o += 1 + p[o];
        if (o == end)
                return -ENOENT; /* no extensions */
        if (o + 2 > end || o + 2 + rd16(p + o) != end)
                return -EBADMSG;
        ext_end = o + 2 + rd16(p + o);
        o += 2;
        while (o < ext_end) {
                size_t type, len;
                if (o + 4 > ext_end)
                        return -EBADMSG;
                type = rd16(p + o);
                len = rd16(p + o + 2);
                o += 4;
                if (o + len > ext_end)
                        return -EBADMSG;
                if (type == TLS_EXT_SERVER_NAME) {
                        size_t lo = o, lend, names = 0;
                        if (found || len < 2 || rd16(p + lo) != len - 2)
                                return -EBADMSG;
                        lend = o + len;
                        lo += 2;
                        while (lo < lend) {
                                size_t nlen;
                                if (lo + 3 > lend)
                                        return -EBADMSG;
                                nlen = rd16(p + lo + 1);
                                if (lo + 3 + nlen > lend)
                                        return -EBADMSG;
                                if (p[lo] == 0) { /* host_name */
                                        if (++names > 1 || nlen == 0)
                                                return -EBADMSG;
                                        if (nlen > SNI_NAME_MAX)
                                                return -ENAMETOOLONG;
                                        if (memchr(p + lo + 3, 0, nlen))
                                                return -EBADMSG;
                                        memcpy(ret_name, p + lo + 3, nlen);
                                        ret_name[nlen] = 0;
                                        found = true;
                                }
                                lo += 3 + nlen;
                        }
                }
                o += len;
        }
        return found ? 0 : -ENOENT;
}
