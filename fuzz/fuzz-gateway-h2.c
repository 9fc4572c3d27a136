/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the HTTP/2 relay of intercepted connections
 * (src/gateway/gateway-h2.c): hostile frames from the sandbox (after its
 * connection preface, which is given) and from the upstream, interleaved
 * as the input says, go through the two nghttp2 sessions with a credential
 * for the connection's host; what each leg sends is counted, not kept.
 * Nothing may crash or leak; the buffered bytes stay within the windows.
 *
 * Input: records of [leg: 1 byte, even = sandbox, odd = upstream]
 * [length: 2 bytes, big-endian][bytes], then a send of both legs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-check.h"
#include "cred-inject.h"
#include "gateway-h2.h"
#include "gateway-internal.h"

#define FUZZ_H2_SENT_MAX (64U * 1024U * 1024U) /* what a leg may send for one input */

static const char PREFACE[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

typedef struct Counter {
        size_t sent;
} Counter;

static int count_write(void *u, const void *p, size_t n) {
        Counter *c = u;

        (void) p;
        c->sent += n;
        return c->sent <= FUZZ_H2_SENT_MAX ? 0 : -ENOBUFS;
}

static size_t count_pending(void *u) {
        (void) u;
        return 0; /* always drained */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static GatewayConfig config = { .events_per_sec = 0 }; /* events are dropped (counted) */
        static Gateway gw = { .config = &config };
        static GwSandbox sb = { .id = "sb", .tenant = "t" };
        static GwConn c = { .sb = &sb, .host = "api.test", .port = 443 };
        Counter down = {}, up = {};
        GwH2 *h = NULL;
        CredInject *cred;
        size_t i = 0;

        if (!sb.creds.items) { /* once: a credential for api.test */
                sb.creds.items = calloc(1, sizeof *sb.creds.items);
                CHECK(sb.creds.items);
                cred = &sb.creds.items[0];
                *cred = (CredInject){ .apply = CRED_INJECT_HEADER };
                snprintf(cred->name, sizeof cred->name, "k");
                CHECK(cred_inject_set_hosts(cred, "[\"api.test\"]") >= 0);
                snprintf(cred->header_name, sizeof cred->header_name, "Authorization");
                snprintf(cred->header_format, sizeof cred->header_format, "Bearer {value}");
                CHECK(cred_secret_from("fuzz-h2-secret", 14, &cred->value) >= 0);
                sb.creds.n = 1;
        }
        CHECK(gw_h2_new(&gw, &c, (GwH2Sink){ count_write, count_pending, &down },
                        (GwH2Sink){ count_write, count_pending, &up }, &h) >= 0);
        if (gw_h2_recv(h, true, (const uint8_t *) PREFACE, strlen(PREFACE)) < 0)
                goto done;
        while (i + 3 <= size) {
                bool from_sandbox = (data[i] & 1) == 0;
                size_t n = MIN((size_t) (data[i + 1] << 8 | data[i + 2]), size - i - 3);

                if (gw_h2_recv(h, from_sandbox, data + i + 3, n) < 0)
                        break;
                i += 3 + n;
                if (gw_h2_send(h, GW_BUF_SIZE) < 0)
                        break;
        }
        (void) gw_h2_send(h, GW_BUF_SIZE);
        (void) gw_h2_done(h);
        gw_h2_upstream_gone(h);
        (void) gw_h2_send(h, GW_BUF_SIZE);
done:
        gw_h2_free(h);
        return 0;
}
