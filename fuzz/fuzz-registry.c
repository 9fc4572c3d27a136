/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the image reference parser of template pulls
 * (src/api/registry-ref.c): the input, as a string, either fails with an
 * error message or gives a reference with a registry, a repository and a tag
 * or a digest (never both) within their limits, which written out again
 * parses to the same reference. */
#include <stdio.h>
#include <string.h>

#include "alloc-util.h"
#include "fuzz-check.h"
#include "registry.h"
#include "str-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *s = NULL;
        char err[160] = "", again[REGISTRY_REF_MAX + 200];
        RegistryRef r, r2;

        if (size > 2 * REGISTRY_REF_MAX)
                return 0;
        s = strndup((const char *) data, size);
        if (!s)
                return 0;
        if (registry_ref_parse(s, &r, err, sizeof err) < 0) {
                CHECK(err[0] != '\0');
                return 0;
        }
        CHECK(r.host[0] && r.name[0] && r.repo[0]);
        CHECK(!r.tag[0] != !r.digest[0]);
        CHECK(strlen(r.tag) <= REGISTRY_TAG_MAX && strlen(r.repo) <= REGISTRY_REPO_MAX);
        CHECK(!strchr(r.repo, ':') && !strchr(r.repo, '@') && !strstr(r.repo, "//"));
        CHECK(r.repo[0] != '/' && r.repo[strlen(r.repo) - 1] != '/');
        CHECK(streq(registry_ref_reference(&r), r.digest[0] ? r.digest : r.tag));
        snprintf(again, sizeof again, "%s/%s%s%s", r.name, r.repo, r.digest[0] ? "@" : ":",
                 registry_ref_reference(&r));
        CHECK(registry_ref_parse(again, &r2, err, sizeof err) == 0);
        CHECK(streq(r.host, r2.host) && streq(r.repo, r2.repo) && streq(r.tag, r2.tag) && streq(r.digest, r2.digest));
        return 0;
}
