/* SPDX-License-Identifier: MIT */
/* The OCI import's pure parts: path cleaning, whiteouts, the tar reader on
 * hand-made headers, the image JSON. */
#include <stdio.h>
#include <string.h>

#include "alloc-util.h"
#include "oci.h"
#include "test.h"

static void clean_is(const char *in, const char *want) {
        _cleanup_free_ char *out = NULL;
        ASSERT_OK(oci_path_clean(in, &out));
        ASSERT_STREQ(out, want);
}

TEST(path_clean) {
        char *out = NULL;

        clean_is("./etc//passwd", "etc/passwd");
        clean_is("etc/./x/", "etc/x");
        clean_is("./", ".");
        clean_is("a..b/..c", "a..b/..c");
        ASSERT_ERRNO(oci_path_clean("/etc/passwd", &out), EINVAL);
        ASSERT_ERRNO(oci_path_clean("../x", &out), EINVAL);
        ASSERT_ERRNO(oci_path_clean("a/../../x", &out), EINVAL);
        ASSERT_ERRNO(oci_path_clean("a/..", &out), EINVAL);
        ASSERT_NULL(out);
}

static void whiteout_is(const char *in, OciWhiteout kind, const char *target) {
        _cleanup_free_ char *t = NULL;
        OciWhiteout k;
        ASSERT_OK(oci_whiteout_classify(in, &k, &t));
        ASSERT_EQ(k, kind);
        if (target)
                ASSERT_STREQ(t, target);
        else
                ASSERT_NULL(t);
}

TEST(whiteouts) {
        char *t = NULL;
        OciWhiteout k;

        whiteout_is("etc/passwd", OCI_WHITEOUT_NONE, NULL);
        whiteout_is("etc/.wh.passwd", OCI_WHITEOUT_FILE, "etc/passwd");
        whiteout_is(".wh.top", OCI_WHITEOUT_FILE, "top");
        whiteout_is("opt/d/.wh..wh..opq", OCI_WHITEOUT_OPAQUE, "opt/d");
        whiteout_is(".wh..wh..opq", OCI_WHITEOUT_OPAQUE, ".");
        whiteout_is("etc/x.wh.y", OCI_WHITEOUT_NONE, NULL);
        ASSERT_ERRNO(oci_whiteout_classify("etc/.wh.", &k, &t), EINVAL);
        ASSERT_ERRNO(oci_whiteout_classify("etc/.wh...", &k, &t), EINVAL);
        ASSERT_ERRNO(oci_whiteout_classify("etc/.wh..wh.plnk", &k, &t), EINVAL);
}

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

/* A ustar header with a valid checksum. */
static void header(uint8_t *b, const char *name, char type, const char *size_octal) {
        unsigned sum = 0;

        memset(b, 0, 512);
        memcpy(b, name, strlen(name));
        memcpy(b + 100, "0000644", 7);
        memcpy(b + 108, "0001750", 7); /* uid 1000 */
        memcpy(b + 116, "0001750", 7);
        memcpy(b + 124, size_octal, strlen(size_octal));
        memcpy(b + 136, "00000000000", 11);
        b[156] = (uint8_t) type;
        memcpy(b + 257, "ustar", 6);
        memcpy(b + 263, "00", 2);
        memset(b + 148, ' ', 8);
        for (int i = 0; i < 512; i++)
                sum += b[i];
        snprintf((char *) b + 148, 8, "%06o", sum);
}

TEST(tar_reader) {
        static uint8_t buf[512 * 8];
        const char pax[] = "29 path=long/name/from/pax.x\n";
        Mem m = { .p = buf, .n = sizeof buf };
        TarStream s = { .read = mem_read, .userdata = &m };
        TarEntry e = {};
        char err[160], data[4];

        header(buf, "PaxHeaders/x", 'x', "00000000035");
        memcpy(buf + 512, pax, strlen(pax));
        header(buf + 1024, "short", '0', "00000000003");
        memcpy(buf + 1536, "abc", 3);
        header(buf + 2048, "dev", '3', "0");
        /* then zeros: the end */
        ASSERT_EQ(tar_next(&s, &e, err, sizeof err), 1);
        ASSERT_STREQ(e.path, "long/name/from/pax.x");
        ASSERT_EQ(e.type, TAR_FILE);
        ASSERT_EQ(e.size, 3u);
        ASSERT_EQ(e.uid, 1000u);
        ASSERT_OK(tar_read_data(&s, data, 3));
        ASSERT_TRUE(memcmp(data, "abc", 3) == 0);
        tar_entry_done(&e);
        ASSERT_EQ(tar_next(&s, &e, err, sizeof err), 1);
        ASSERT_EQ(e.type, TAR_CHAR);
        tar_entry_done(&e);
        ASSERT_EQ(tar_next(&s, &e, err, sizeof err), 0);

        /* a bad checksum and a sparse member are refused */
        m.pos = 0;
        s = (TarStream){ .read = mem_read, .userdata = &m };
        buf[0] ^= 1;
        ASSERT_TRUE(tar_next(&s, &e, err, sizeof err) < 0);
        ASSERT_TRUE(strstr(err, "checksum") != NULL);
        m.pos = 0;
        s = (TarStream){ .read = mem_read, .userdata = &m };
        header(buf, "sparse", 'S', "0");
        ASSERT_ERRNO(tar_next(&s, &e, err, sizeof err), EOPNOTSUPP);
        /* the archive ends without an end marker */
        Mem shortm = { .p = buf + 1024, .n = 1024 };
        s = (TarStream){ .read = mem_read, .userdata = &shortm };
        ASSERT_EQ(tar_next(&s, &e, err, sizeof err), 1);
        tar_entry_done(&e);
        ASSERT_TRUE(tar_next(&s, &e, err, sizeof err) < 0);
}

#define D64(c) "sha256:" c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c

TEST(index_platform_and_tag) {
        const char *idx = "{\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"" D64("a")
                          "\",\"size\":1,\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\"}}]}";
        const char *two = "{\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"" D64("a")
                          "\",\"size\":1,\"annotations\":{\"org.opencontainers.image.ref.name\":\"x\"}},"
                          "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"" D64("b")
                          "\",\"size\":2,\"annotations\":{\"org.opencontainers.image.ref.name\":\"y\"}}]}";
        OciDescriptor d;
        ApiError e = {};

        ASSERT_TRUE(oci_index_pick(idx, strlen(idx), NULL, "amd64", &d, &e) < 0);
        ASSERT_TRUE(strstr(e.message, "linux/arm64") != NULL);
        ASSERT_OK(oci_index_pick(idx, strlen(idx), NULL, "arm64", &d, &e));
        ASSERT_STREQ(d.digest, D64("a"));
        e = (ApiError){};
        ASSERT_TRUE(oci_index_pick(two, strlen(two), NULL, "amd64", &d, &e) < 0);
        ASSERT_OK(oci_index_pick(two, strlen(two), "y", "amd64", &d, &e));
        ASSERT_EQ(d.size, 2u);
        ASSERT_TRUE(oci_index_pick(two, strlen(two), "z", "amd64", &d, &e) < 0);
}

TEST(manifest_media_types_and_config) {
        const char *m = "{\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"" D64("c")
                        "\",\"size\":3},\"layers\":[{\"mediaType\":\"application/vnd.example\",\"digest\":\"" D64("d")
                        "\",\"size\":4}]}";
        const char *c = "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Env\":[\"A=b\"],\"WorkingDir\":\"/w\","
                        "\"User\":\"app\"},\"rootfs\":{\"diff_ids\":[\"" D64("e") "\"]}}";
        _cleanup_free_ OciManifest *man = new0(OciManifest, 1);
        _cleanup_free_ OciConfig *cfg = new0(OciConfig, 1);
        ApiError e = {};

        ASSERT_TRUE(oci_manifest_parse(m, strlen(m), man, &e) < 0);
        ASSERT_TRUE(strstr(e.message, "application/vnd.example") != NULL);
        ASSERT_OK(oci_config_parse(c, strlen(c), "amd64", cfg, &e));
        ASSERT_EQ(cfg->n_diff_ids, 1u);
        ASSERT_STREQ(cfg->defaults_json, "{\"env\":[\"A=b\"],\"cwd\":\"/w\",\"user\":\"app\"}");
        oci_config_done(cfg);
        ASSERT_TRUE(oci_config_parse(c, strlen(c), "arm64", cfg, &e) < 0);
        ASSERT_TRUE(strstr(e.message, "amd64") != NULL);
}
