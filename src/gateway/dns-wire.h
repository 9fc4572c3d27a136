/* SPDX-License-Identifier: MIT */
#pragma once

/* DNS messages (RFC 1035) as far as the gateway needs them: the one question
 * of a query from a sandbox (hostile bytes), the A records of an upstream
 * answer (not trusted either), and the replies the gateway writes. */

#include <netinet/in.h>
#include <stdint.h>

#include "macros.h"

#define DNS_HEADER_SIZE 12U
#define DNS_UDP_MAX 512U          /* our replies over UDP stay in the classic limit */
#define DNS_MSG_MAX 4096U         /* the largest message read (UDP upstream answer, TCP query) */
#define DNS_NAME_MAX 253U         /* presentation form, no trailing dot */
#define DNS_ANSWERS_MAX 16U       /* A records kept from an upstream answer / written to a reply */
#define DNS_RR_PARSE_MAX 64U      /* records looked at in an upstream answer */
#define DNS_POINTERS_MAX 16U      /* compression pointers followed in one name */

enum {
        DNS_TYPE_A = 1,
        DNS_TYPE_NS = 2,
        DNS_TYPE_CNAME = 5,
        DNS_TYPE_SOA = 6,
        DNS_TYPE_PTR = 12,
        DNS_TYPE_MX = 15,
        DNS_TYPE_TXT = 16,
        DNS_TYPE_AAAA = 28,
        DNS_TYPE_SRV = 33,
        DNS_TYPE_OPT = 41,
        DNS_TYPE_HTTPS = 65,
        DNS_TYPE_ANY = 255,
        DNS_CLASS_IN = 1,
};

enum {
        DNS_RCODE_NOERROR = 0,
        DNS_RCODE_FORMERR = 1,
        DNS_RCODE_SERVFAIL = 2,
        DNS_RCODE_NXDOMAIN = 3,
        DNS_RCODE_NOTIMP = 4,
        DNS_RCODE_REFUSED = 5,
};

typedef struct DnsQuestion {
        uint16_t id;
        uint16_t flags;      /* of the query (RD bit echoed) */
        uint16_t qtype, qclass;
        char name[DNS_NAME_MAX + 1]; /* as asked, lower-cased, no trailing dot; "" for the root */
        size_t question_len; /* bytes of the question section (name + type + class) */
} DnsQuestion;

/* Parses a query: QR=0, opcode QUERY, exactly one question, no answer or
 * authority records (additional, e.g. EDNS OPT, ignored). -EBADMSG if not a
 * well-formed query (a reply of FORMERR is right if the id could be read:
 * ret->id is set whenever n >= 2), -ENAMETOOLONG for a name over the limit,
 * -EINVAL for a name with bytes outside [0x21, 0x7e] or a '.' in a label. */
int dns_question_parse(const uint8_t *p, size_t n, DnsQuestion *ret);

/* Writes a reply to q with rcode and the given A records (owner = the
 * question's name, ttl seconds) into buf (at most size bytes). Returns the
 * length, -ENOBUFS if it does not fit. */
int dns_reply_build(const DnsQuestion *q, int rcode, const struct in_addr *addrs, size_t n_addrs, uint32_t ttl,
                    uint8_t *buf, size_t size);

/* Writes an A query for name (a valid host name) with id. */
int dns_query_build(const char *name, uint16_t id, uint16_t qtype, uint8_t *buf, size_t size);

/* From an upstream answer to our query (id, name, A): -EBADMSG if malformed
 * or not the answer to that query; the rcode; the A records of the answer
 * section (at most DNS_ANSWERS_MAX, owner names not checked beyond the CNAME
 * chain being the upstream's business) and their smallest TTL. */
int dns_answer_parse(const uint8_t *p, size_t n, uint16_t id, const char *name, int *ret_rcode,
                     struct in_addr ret_addrs[static DNS_ANSWERS_MAX], size_t *ret_n, uint32_t *ret_ttl);

const char *dns_type_to_string(uint16_t t, char buf[static 8]);
