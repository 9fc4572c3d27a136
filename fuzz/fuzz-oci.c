/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the OCI import's parsers of hostile bytes
 * (src/storage/oci-tar.c, oci-image.c). The first byte picks:
 *  0: the rest is a tar: every member is read to the end of the archive;
 *     each path is cleaned (the result is relative, has no "..", no empty or
 *     "." component, and cleaning it again gives it back) and classified as a
 *     whiteout (a whiteout's target is clean and never "..");
 *  1..4: the rest is an index / manifest / docker manifest.json / config: a
 *     success fills a valid result (digests sha256:<64 hex>, counts within the
 *     limits), a failure fills the error; nothing leaks. */
#include <string.h>

#include "alloc-util.h"
#include "fuzz-check.h"
#include "oci.h"
#include "str-util.h"

#define FUZZ_INPUT_MAX (512U * 1024U)

typedef struct Mem {
        const uint8_t *p;
        size_t n, pos;
} Mem;

static int mem_read(void *u, void *buf, size_t n) {
        Mem *m = u;
        if (n > m->n - m->pos)
                return -EBADMSG;
        memcpy(buf, m->p + m->pos, n);
        m->pos += n;
        return 0;
}

static void check_clean(const char *c) {
        _cleanup_free_ char *again = NULL;
        const char *p = c;

        CHECK(c[0] != '/' && c[0] != '\0');
        CHECK(oci_path_clean(c, &again) == 0 && streq(again, c));
        if (streq(c, "."))
                return;
        for (;;) {
                const char *s = strchr(p, '/');
                size_t len = s ? (size_t) (s - p) : strlen(p);
                CHECK(len > 0);
                CHECK(!(len == 1 && p[0] == '.'));
                CHECK(!(len == 2 && p[0] == '.' && p[1] == '.'));
                if (!s)
                        break;
                p = s + 1;
        }
}

static void fuzz_tar(const uint8_t *data, size_t size) {
        Mem m = { .p = data, .n = size };
        TarStream s = { .read = mem_read, .userdata = &m };
        char err[160];

        for (unsigned i = 0; i < 10000; i++) {
                _cleanup_(tar_entry_done) TarEntry t = {};
                _cleanup_free_ char *clean = NULL, *target = NULL;
                OciWhiteout kind;
                uint8_t buf[700];
                int r;

                r = tar_next(&s, &t, err, sizeof err);
                if (r <= 0)
                        return;
                CHECK(t.path && t.link && t.n_xattrs <= OCI_TAR_XATTRS_MAX);
                CHECK(t.type >= 0 && t.type < _TAR_TYPE_MAX);
                CHECK(t.type == TAR_FILE || t.size == 0);
                if (t.size > 0 && t.size <= sizeof buf)
                        (void) tar_read_data(&s, buf, (size_t) t.size);
                if (oci_path_clean(t.path, &clean) < 0)
                        continue;
                check_clean(clean);
                if (oci_whiteout_classify(clean, &kind, &target) < 0)
                        continue;
                CHECK((kind == OCI_WHITEOUT_NONE) == (target == NULL));
                if (target)
                        check_clean(target);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *json = NULL;
        ApiError e = {};
        int r;

        if (size < 1 || size > FUZZ_INPUT_MAX)
                return 0;
        if (data[0] % 5 == 0) {
                fuzz_tar(data + 1, size - 1);
                return 0;
        }
        json = memdup_suffix0(data + 1, size - 1);
        CHECK(json);
        switch (data[0] % 5) {
        case 1: {
                OciDescriptor d;
                r = oci_index_pick(json, size - 1, size > 8 && data[1] == '{' ? NULL : "latest", "amd64", &d, &e);
                CHECK(r < 0 ? e.code != API_OK : oci_digest_valid(d.digest));
                break;
        }
        case 2: {
                _cleanup_free_ OciManifest *m = new0(OciManifest, 1);
                CHECK(m);
                r = oci_manifest_parse(json, size - 1, m, &e);
                CHECK(r < 0 ? e.code != API_OK : m->n_layers <= OCI_LAYERS_MAX && oci_digest_valid(m->config.digest));
                for (size_t i = 0; r >= 0 && i < m->n_layers; i++)
                        CHECK(oci_digest_valid(m->layers[i].digest));
                break;
        }
        case 3: {
                _cleanup_free_ char *config = NULL;
                _cleanup_strv_free_ char **layers = NULL;
                size_t n = 0;
                r = oci_docker_manifest_parse(json, size - 1, NULL, &config, &layers, &n, &e);
                CHECK(r < 0 || (config && n <= OCI_LAYERS_MAX && strv_length(layers) == n));
                break;
        }
        case 4: {
                _cleanup_free_ OciConfig *c = new0(OciConfig, 1);
                CHECK(c);
                r = oci_config_parse(json, size - 1, "amd64", c, &e);
                CHECK(r < 0 || (c->defaults_json && c->n_diff_ids <= OCI_LAYERS_MAX));
                oci_config_done(c);
                break;
        }
        }
        return 0;
}
