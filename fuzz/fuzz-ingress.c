/* SPDX-License-Identifier: MIT */
/* The ingress's parsers of hostile bytes (src/api/ingress-auth.c): the Host
 * of a request, and Cookie headers. The first byte picks:
 *  0  ingress_host_parse() against the domain "localhost": on success the
 *     port is 1..65535, the id a valid sandbox id, and formatting them back
 *     and parsing again gives the same;
 *  1  a Cookie header: the value found lies inside the header, and the
 *     header without the cookie no longer holds it. */
#include <stdio.h>
#include <string.h>

#include "fuzz-check.h"
#include "alloc-util.h"
#include "api-internal.h"
#include "ingress-auth.h"

#define FUZZ_INPUT_MAX 4096U

static void fuzz_host(const char *s) {
        char id[17], id2[17], again[64];
        uint16_t port = 0, port2 = 0;

        if (ingress_host_parse(s, "localhost", &port, id) < 0)
                return;
        CHECK(port >= 1);
        CHECK(api_sandbox_id_valid(id));
        snprintf(again, sizeof again, "%u-%s.localhost", (unsigned) port, id);
        CHECK(ingress_host_parse(again, "localhost", &port2, id2) == 0);
        CHECK(port2 == port && strcmp(id, id2) == 0);
}

static void fuzz_cookie(const char *s) {
        _cleanup_free_ char *rest = NULL;
        size_t n = 0;
        const char *v = ingress_cookie_find(s, INGRESS_COOKIE, &n);

        if (v)
                CHECK(v >= s && v + n <= s + strlen(s));
        CHECK(ingress_cookie_strip(s, INGRESS_COOKIE, &rest) == 0);
        if (rest)
                CHECK(!ingress_cookie_find(rest, INGRESS_COOKIE, &n));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *s = NULL;

        if (size < 1 || size > FUZZ_INPUT_MAX)
                return 0;
        s = new0(char, size);
        if (!s)
                return 0;
        memcpy(s, data + 1, size - 1); /* NUL-terminated: headers reach these as C strings */
        if (data[0] & 1)
                fuzz_cookie(s);
        else
                fuzz_host(s);
        return 0;
}
