/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the gateway's parsers of hostile bytes: a DNS query
 * from a sandbox (dns_question_parse, then the reply built for it must parse
 * back as an answer to the same question), an upstream DNS answer
 * (dns_answer_parse), a TLS ClientHello (sni_parse: a name found is
 * NUL-free, bounded, and the record length lies within the input), the first
 * bytes through a CONNECT tunnel (gw_first_bytes_kind), an authority
 * (gw_split_authority: a host found is bounded and lower-case) and a
 * ClientHello's ALPN list (tls_alpn_parse: only the known bits). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-check.h"
#include "dns-wire.h"
#include "gateway-internal.h"
#include "sni-parse.h"
#include "tls-intercept.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        DnsQuestion q = {};
        struct in_addr addrs[DNS_ANSWERS_MAX];
        char sni[SNI_NAME_MAX + 1];
        size_t n = 0, rec = 0;
        uint32_t ttl;
        int rcode, r;

        if (dns_question_parse(data, size, &q) >= 0) {
                uint8_t buf[DNS_UDP_MAX];
                struct in_addr one = { .s_addr = 0x0100007fU };
                CHECK(strlen(q.name) <= DNS_NAME_MAX);
                int len = dns_reply_build(&q, DNS_RCODE_NOERROR, &one, 1, 60, buf, sizeof buf);
                if (len > 0 && q.qtype == DNS_TYPE_A && q.qclass == DNS_CLASS_IN && q.name[0]) {
                        CHECK(dns_answer_parse(buf, (size_t) len, q.id, q.name, &rcode, addrs, &n, &ttl) >= 0);
                        CHECK(n == 1 && addrs[0].s_addr == one.s_addr && ttl == 60);
                }
        }
        r = dns_answer_parse(data, size, size >= 2 ? (uint16_t) (data[0] << 8 | data[1]) : 0, "example.com", &rcode,
                             addrs, &n, &ttl);
        if (r >= 0)
                CHECK(n <= DNS_ANSWERS_MAX);
        r = gw_first_bytes_kind(data, size);
        CHECK(r == -EAGAIN || r == GW_FIRST_OTHER || r == GW_FIRST_TLS || r == GW_FIRST_HTTP);
        {
                char host[DNS_NAME_MAX + 1];
                uint16_t port = 0;
                if (size <= 4096 && memchr(data, 0, size) == NULL &&
                    gw_split_authority((const char *) data, size, 80, host, &port) >= 0) {
                        CHECK(strlen(host) <= DNS_NAME_MAX && port > 0);
                        for (const char *p = host; *p; p++)
                                CHECK(!(*p >= 'A' && *p <= 'Z'));
                }
        }
        CHECK((tls_alpn_parse(data, size) & ~(unsigned) (TLS_ALPN_H2 | TLS_ALPN_HTTP11)) == 0);
        r = sni_parse(data, size, sni, &rec);
        if (r == 0) {
                CHECK(strlen(sni) <= SNI_NAME_MAX && strlen(sni) > 0);
                CHECK(rec <= size);
        }
        return 0;
}
