/* SPDX-License-Identifier: MIT */
/* libFuzzer target for src/gateway/cred-inject.c and src/shared/cred-rules.c:
 * a request head from a sandbox (hostile) gets the credentials of a fixed
 * set applied for two hosts, one the credentials are for and one they are
 * not. Nothing may crash; the value of a credential never appears in the
 * head of a request to a host that is not its own; the input as a host
 * pattern and as a host name goes through the checks and the matcher. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-check.h"
#include "alloc-util.h"
#include "cred-inject.h"

#define VALUE_A "fuzz-secret-AAAAAAAAAAAAAAAA"
#define VALUE_B "fuzz-secret-BBBBBBBBBBBBBBBB"

static void add(CredInjectSet *s, const char *name, const char *hosts, CredInjectApply apply, const char *h,
                const char *f, const char *value) {
        CredInject *c = &s->items[s->n++];

        *c = (CredInject) { .apply = apply };
        snprintf(c->name, sizeof c->name, "%s", name);
        CHECK(cred_inject_set_hosts(c, hosts) >= 0);
        snprintf(c->header_name, sizeof c->header_name, "%s", h);
        snprintf(c->header_format, sizeof c->header_format, "%s", f);
        snprintf(c->basic_user, sizeof c->basic_user, "%s", h);
        CHECK(cred_secret_from(value, strlen(value), &c->value) >= 0);
}

static bool head_has(const HttpHead *h, const char *needle) {
        for (size_t i = 0; i < h->n_headers; i++)
                if (strstr(h->headers[i].value, needle) || strstr(h->headers[i].name, needle))
                        return true;
        return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char *const hosts[] = { "api.a.test", "elsewhere.test" };
        CredInjectSet set = {};
        char err[256];

        (void) cred_host_pattern_check((const char *) data, size, err, sizeof err);
        if (size > HTTP_HEAD_MAX)
                return 0;
        set.items = calloc(2, sizeof *set.items);
        CHECK(set.items);
        add(&set, "a", "[\"api.a.test\"]", CRED_INJECT_HEADER, "Authorization", "Bearer {value}", VALUE_A);
        add(&set, "b", "[\"*.b.test\"]", CRED_INJECT_BASIC, "user", "", VALUE_B);
        {
                _cleanup_free_ char *s = strndup((const char *) data, size);
                if (s) {
                        (void) cred_host_match("*.a.test", s, strlen(s));
                        (void) cred_inject_wants(&set, s, 1);
                }
        }
        for (size_t i = 0; i < 2; i++) {
                HttpHead h = {};
                CredInjectUsed used;

                if (http_parse_request_head((const char *) data, size, &h) < 0)
                        break;
                if (cred_inject_head(&set, hosts[i], 1, &h, &used) >= 0 && i == 1) {
                        CHECK(used.n == 0);
                        CHECK(!head_has(&h, VALUE_A) && !head_has(&h, VALUE_B));
                }
                cred_inject_head_done(&h);
        }
        cred_inject_set_done(&set);
        return 0;
}
