/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dns-wire.h"

static uint16_t rd16(const uint8_t *p) {
        return (uint16_t) ((p[0] << 8) | p[1]);
}

static uint32_t rd32(const uint8_t *p) {
        return ((uint32_t) p[0] << 24) | ((uint32_t) p[1] << 16) | ((uint32_t) p[2] << 8) | p[3];
}

static void wr16(uint8_t *p, uint16_t v) {
        p[0] = (uint8_t) (v >> 8);
        p[1] = (uint8_t) v;
}

/* Reads the uncompressed name at p[*off] into out (lower case, dots); moves
 * *off past it. Questions from sandboxes may not use compression. */
static int name_read_plain(const uint8_t *p, size_t n, size_t *off, char out[static DNS_NAME_MAX + 1]) {
        size_t o = *off, w = 0;
        for (;;) {
                if (o >= n)
                        return -EBADMSG;
                uint8_t len = p[o++];
                if (len == 0)
                        break;
                if (len & 0xC0)
                        return -EBADMSG; /* compression or extended label in a question */
                if (o + len > n)
                        return -EBADMSG;
                if (w + (w ? 1U : 0U) + len > DNS_NAME_MAX)
                        return -ENAMETOOLONG;
                if (w)
                        out[w++] = '.';
                for (uint8_t i = 0; i < len; i++) {
                        uint8_t c = p[o + i];
                        if (c <= 0x20 || c >= 0x7f || c == '.')
                                return -EINVAL;
                        out[w++] = (char) (c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
                }
                o += len;
        }
        out[w] = 0;
        *off = o;
        return 0;
}

int dns_question_parse(const uint8_t *p, size_t n, DnsQuestion *ret) {
        size_t off = DNS_HEADER_SIZE;
        uint16_t flags;
        int r;

        if (n >= 2)
                ret->id = rd16(p);
        if (n < DNS_HEADER_SIZE || n > DNS_MSG_MAX)
                return -EBADMSG;
        flags = rd16(p + 2);
        ret->flags = flags;
        if ((flags & 0x8000) || ((flags >> 11) & 0xF) != 0)
                return -EBADMSG; /* a response, or not a standard query */
        if (rd16(p + 4) != 1 || rd16(p + 6) != 0 || rd16(p + 8) != 0)
                return -EBADMSG;
        r = name_read_plain(p, n, &off, ret->name);
        if (r < 0)
                return r;
        if (off + 4 > n)
                return -EBADMSG;
        ret->qtype = rd16(p + off);
        ret->qclass = rd16(p + off + 2);
        ret->question_len = off + 4 - DNS_HEADER_SIZE;
        return 0;
}

static int name_write(const char *name, uint8_t *buf, size_t size, size_t *off) {
        size_t o = *off;
        const char *s = name;
        while (*s) {
                const char *dot = strchr(s, '.');
                size_t len = dot ? (size_t) (dot - s) : strlen(s);
                if (len == 0 || len > 63)
                        return -EINVAL;
                if (o + 1 + len > size)
                        return -ENOBUFS;
                buf[o++] = (uint8_t) len;
                memcpy(buf + o, s, len);
                o += len;
                s += len;
                if (*s == '.')
                        s++;
        }
        if (o + 1 > size)
                return -ENOBUFS;
        buf[o++] = 0;
        *off = o;
        return 0;
}

int dns_reply_build(const DnsQuestion *q, int rcode, const struct in_addr *addrs, size_t n_addrs, uint32_t ttl,
                    uint8_t *buf, size_t size) {
        size_t o = DNS_HEADER_SIZE;
        int r;

        if (size < DNS_HEADER_SIZE)
                return -ENOBUFS;
        if (rcode != DNS_RCODE_NOERROR)
                n_addrs = 0;
        n_addrs = n_addrs > DNS_ANSWERS_MAX ? DNS_ANSWERS_MAX : n_addrs;
        memset(buf, 0, DNS_HEADER_SIZE);
        wr16(buf, q->id);
        /* QR, opcode 0, RD echoed, RA, rcode */
        wr16(buf + 2, (uint16_t) (0x8000U | (q->flags & 0x0100U) | 0x0080U | ((unsigned) rcode & 0xFU)));
        if (q->question_len == 0) { /* FORMERR without a readable question */
                return (int) o;
        }
        wr16(buf + 4, 1);
        r = name_write(q->name, buf, size, &o);
        if (r < 0)
                return r;
        if (o + 4 > size)
                return -ENOBUFS;
        wr16(buf + o, q->qtype);
        wr16(buf + o + 2, q->qclass);
        o += 4;
        for (size_t i = 0; i < n_addrs; i++) {
                if (o + 16 > size)
                        return -ENOBUFS;
                wr16(buf + o, 0xC000U | DNS_HEADER_SIZE); /* pointer to the question's name */
                wr16(buf + o + 2, DNS_TYPE_A);
                wr16(buf + o + 4, DNS_CLASS_IN);
                buf[o + 6] = (uint8_t) (ttl >> 24);
                buf[o + 7] = (uint8_t) (ttl >> 16);
                buf[o + 8] = (uint8_t) (ttl >> 8);
                buf[o + 9] = (uint8_t) ttl;
                wr16(buf + o + 10, 4);
                memcpy(buf + o + 12, &addrs[i].s_addr, 4);
                o += 16;
        }
        wr16(buf + 6, (uint16_t) n_addrs);
        return (int) o;
}

int dns_query_build(const char *name, uint16_t id, uint16_t qtype, uint8_t *buf, size_t size) {
        size_t o = DNS_HEADER_SIZE;
        int r;
        if (size < DNS_HEADER_SIZE)
                return -ENOBUFS;
        memset(buf, 0, DNS_HEADER_SIZE);
        wr16(buf, id);
        wr16(buf + 2, 0x0100); /* RD */
        wr16(buf + 4, 1);
        r = name_write(name, buf, size, &o);
        if (r < 0)
                return r;
        if (o + 4 > size)
                return -ENOBUFS;
        wr16(buf + o, qtype);
        wr16(buf + o + 2, DNS_CLASS_IN);
        return (int) (o + 4);
}

/* Skips a possibly compressed name; compares it to expect (if given). */
static int name_skip(const uint8_t *p, size_t n, size_t *off, const char *expect, bool *ret_equal) {
        size_t o = *off, end = 0, pos = 0, elen = expect ? strlen(expect) : 0;
        unsigned jumps = 0;
        bool equal = true, jumped = false;
        for (;;) {
                if (o >= n)
                        return -EBADMSG;
                uint8_t len = p[o];
                if ((len & 0xC0) == 0xC0) {
                        if (o + 1 >= n || ++jumps > DNS_POINTERS_MAX)
                                return -EBADMSG;
                        if (!jumped)
                                end = o + 2;
                        jumped = true;
                        o = (size_t) (((len & 0x3F) << 8) | p[o + 1]);
                        continue;
                }
                if (len & 0xC0)
                        return -EBADMSG;
                o++;
                if (len == 0)
                        break;
                if (o + len > n)
                        return -EBADMSG;
                if (expect && equal) {
                        /* pos < elen before every read of expect; a NUL in a label never matches */
                        if (pos > 0) {
                                if (pos >= elen || expect[pos] != '.')
                                        equal = false;
                                else
                                        pos++;
                        }
                        for (uint8_t i = 0; i < len && equal; i++) {
                                char c = (char) p[o + i];
                                if (c >= 'A' && c <= 'Z')
                                        c = (char) (c - 'A' + 'a');
                                if (pos >= elen || c == 0 || expect[pos] != c)
                                        equal = false;
                                else
                                        pos++;
                        }
                }
                o += len;
        }
        if (expect && pos != elen)
                equal = false;
        *off = jumped ? end : o;
        if (ret_equal)
                *ret_equal = equal;
        return 0;
}

int dns_answer_parse(const uint8_t *p, size_t n, uint16_t id, const char *name, int *ret_rcode,
                     struct in_addr ret_addrs[static DNS_ANSWERS_MAX], size_t *ret_n, uint32_t *ret_ttl) {
        size_t off = DNS_HEADER_SIZE, got = 0;
        uint32_t ttl = UINT32_MAX;
        uint16_t flags, an;
        bool same;

        if (n < DNS_HEADER_SIZE || rd16(p) != id)
                return -EBADMSG;
        flags = rd16(p + 2);
        if (!(flags & 0x8000) || rd16(p + 4) != 1)
                return -EBADMSG;
        if (flags & 0x0200)
                return -EMSGSIZE; /* truncated */
        if (name_skip(p, n, &off, name, &same) < 0 || !same || off + 4 > n)
                return -EBADMSG;
        if (rd16(p + off) != DNS_TYPE_A || rd16(p + off + 2) != DNS_CLASS_IN)
                return -EBADMSG;
        off += 4;
        an = rd16(p + 6);
        for (unsigned i = 0; i < an && i < DNS_RR_PARSE_MAX; i++) {
                uint16_t type, class, rdlen;
                uint32_t t;
                if (name_skip(p, n, &off, NULL, NULL) < 0 || off + 10 > n)
                        return -EBADMSG;
                type = rd16(p + off);
                class = rd16(p + off + 2);
                t = rd32(p + off + 4);
                rdlen = rd16(p + off + 8);
                off += 10;
                if (off + rdlen > n)
                        return -EBADMSG;
                if (type == DNS_TYPE_A && class == DNS_CLASS_IN && rdlen == 4 && got < DNS_ANSWERS_MAX) {
                        memcpy(&ret_addrs[got++].s_addr, p + off, 4);
                        if (t < ttl)
                                ttl = t;
                }
                off += rdlen;
        }
        *ret_rcode = flags & 0xF;
        *ret_n = got;
        *ret_ttl = got ? (ttl > 0x7FFFFFFFU ? 0 : ttl) : 0;
        return 0;
}

const char *dns_type_to_string(uint16_t t, char buf[static 8]) {
        switch (t) {
        case DNS_TYPE_A: return "A";
        case DNS_TYPE_NS: return "NS";
        case DNS_TYPE_CNAME: return "CNAME";
        case DNS_TYPE_SOA: return "SOA";
        case DNS_TYPE_PTR: return "PTR";
        case DNS_TYPE_MX: return "MX";
        case DNS_TYPE_TXT: return "TXT";
        case DNS_TYPE_AAAA: return "AAAA";
        case DNS_TYPE_SRV: return "SRV";
        case DNS_TYPE_HTTPS: return "HTTPS";
        case DNS_TYPE_ANY: return "ANY";
        default:
                snprintf(buf, 8, "%u", t);
                return buf;
        }
}
