/* SPDX-License-Identifier: MIT */
/* src/gateway/gateway-first-bytes.c: what a client sends first through a
 * CONNECT tunnel (TLS, HTTP as a lenient server would read it, anything
 * else, or not known yet), and the authority syntax. */
#include <errno.h>
#include <string.h>

#include "gateway-internal.h"
#include "test.h"

static int kind(const char *s) {
        return gw_first_bytes_kind((const uint8_t *) s, strlen(s));
}

TEST(first_bytes_http_as_servers_read_it) {
        ASSERT_EQ(kind("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), GW_FIRST_HTTP);
        ASSERT_EQ(kind("GET / HTTP/1.1\n"), GW_FIRST_HTTP);         /* bare LF */
        ASSERT_EQ(kind("\r\n\r\nPOST /x HTTP/1.0\r\n"), GW_FIRST_HTTP); /* blank lines first */
        ASSERT_EQ(kind("  GET / HTTP/1.1\r\n"), GW_FIRST_HTTP);     /* leading white space */
        ASSERT_EQ(kind("GET\t/\tHTTP/1.1\r\n"), GW_FIRST_HTTP);     /* tabs */
        ASSERT_EQ(kind("get http://b/ HTTP/1.1\r\n"), GW_FIRST_HTTP);
        ASSERT_EQ(kind("X-CUSTOM / HTTP/9.9\r\n"), GW_FIRST_HTTP);  /* any method token */
}

TEST(first_bytes_wait_for_the_first_line) {
        ASSERT_EQ(kind(""), -EAGAIN);
        ASSERT_EQ(kind("\r\n"), -EAGAIN);
        ASSERT_EQ(kind("G"), -EAGAIN);
        ASSERT_EQ(kind("GET"), -EAGAIN);
        ASSERT_EQ(kind("GET / HTTP/1.1"), -EAGAIN);
        ASSERT_EQ(kind("\x16"), GW_FIRST_TLS); /* the ClientHello parser waits for the rest itself */
}

TEST(first_bytes_tls_and_others) {
        static const uint8_t hello[] = { 0x16, 0x03, 0x01, 0x00, 0x05 };
        ASSERT_EQ(gw_first_bytes_kind(hello, sizeof hello), GW_FIRST_TLS);
        ASSERT_EQ(kind("SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n"), GW_FIRST_OTHER); /* no " HTTP/" in its line */
        ASSERT_EQ(kind("\x01\x02binary"), GW_FIRST_OTHER);
        ASSERT_EQ(kind("GET/ HTTP/1.1\r\n"), GW_FIRST_OTHER);      /* '/' ends the token: not a request line */
        ASSERT_EQ(kind("EHLO a\r\nGET / HTTP/1.1\r\n"), GW_FIRST_OTHER); /* only the first line counts */
}

TEST(split_authority) {
        char host[DNS_NAME_MAX + 1];
        uint16_t port = 0;

        ASSERT_OK(gw_split_authority("Allowed.Test.:8080", 18, 80, host, &port));
        ASSERT_STREQ(host, "allowed.test");
        ASSERT_EQ(port, 8080);
        ASSERT_OK(gw_split_authority("a.test", 6, 443, host, &port));
        ASSERT_EQ(port, 443);
        ASSERT_ERRNO(gw_split_authority("a.test:0", 8, 80, host, &port), EINVAL);
        ASSERT_ERRNO(gw_split_authority("a.test:65536", 12, 80, host, &port), EINVAL);
        ASSERT_ERRNO(gw_split_authority("u@a.test", 8, 80, host, &port), EINVAL);
        ASSERT_ERRNO(gw_split_authority("[::1]:80", 8, 80, host, &port), EINVAL);
        ASSERT_ERRNO(gw_split_authority(":80", 3, 80, host, &port), EINVAL);
}
