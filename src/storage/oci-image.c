/* SPDX-License-Identifier: MIT */
/* The JSON of an OCI layout or a docker save archive: the index (a manifest
 * picked by platform and tag), the manifest (config and layers with their
 * media types), docker's manifest.json and the image config (diff_ids, the
 * platform, the exec defaults). Every document is hostile and bounded. */

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

#include "alloc-util.h"
#include "json.h"
#include "oci-image.h"
#include "str-util.h"

#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_CONFIG "application/vnd.oci.image.config.v1+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_CONFIG "application/vnd.docker.container.image.v1+json"

static const struct {
        const char *type;
        OciCompression compression;
} layer_types[] = {
        { "application/vnd.oci.image.layer.v1.tar", OCI_COMPRESSION_NONE },
        { "application/vnd.oci.image.layer.v1.tar+gzip", OCI_COMPRESSION_GZIP },
        { "application/vnd.oci.image.layer.v1.tar+zstd", OCI_COMPRESSION_ZSTD },
        { "application/vnd.docker.image.rootfs.diff.tar", OCI_COMPRESSION_NONE },
        { "application/vnd.docker.image.rootfs.diff.tar.gzip", OCI_COMPRESSION_GZIP },
        { "application/vnd.docker.image.rootfs.diff.tar.zstd", OCI_COMPRESSION_ZSTD },
};

void oci_config_done(OciConfig *c) {
        free(c->defaults_json);
        c->defaults_json = NULL;
}

const char *oci_host_arch(void) {
        static struct utsname u;

        if (uname(&u) < 0)
                return "unknown";
        /* uname's machine names → GOARCH, what image platforms say */
        if (streq(u.machine, "x86_64"))
                return "amd64";
        if (streq(u.machine, "aarch64") || streq(u.machine, "arm64"))
                return "arm64";
        if (u.machine[0] == 'i' && strlen(u.machine) == 4 && streq(u.machine + 2, "86"))
                return "386"; /* i386..i686 */
        if (startswith(u.machine, "armv"))
                return "arm";
        return u.machine; /* ppc64le, s390x, riscv64: the same names */
}

bool oci_digest_valid(const char *d) {
        if (!d || strncmp(d, "sha256:", 7) != 0 || strlen(d) != 7 + 64)
                return false;
        for (size_t i = 7; i < 7 + 64; i++)
                if (!((d[i] >= '0' && d[i] <= '9') || (d[i] >= 'a' && d[i] <= 'f')))
                        return false;
        return true;
}

static int bad(ApiError *e, const char *msg) {
        return api_error(e, -EBADMSG, API_BAD_REQUEST, "%s", msg);
}

static int parse_doc(const char *json, size_t n, const char *what, JsonValue **ret, ApiError *e) {
        char err[128];
        int r;

        if (n > OCI_JSON_MAX)
                return api_error(e, -E2BIG, API_BAD_REQUEST, "the image's %s is larger than %u bytes", what, OCI_JSON_MAX);
        r = json_parse(json, n, ret, err, sizeof err);
        if (r < 0)
                return api_error(e, r, API_BAD_REQUEST, "the image's %s is not JSON: %s", what, err);
        if (json_type(*ret) != JSON_OBJECT && json_type(*ret) != JSON_ARRAY)
                return bad(e, "the image's JSON documents must be objects");
        return 0;
}

static int descriptor_parse(const JsonValue *v, const char *what, OciDescriptor *d, ApiError *e) {
        const char *mt = json_string(json_get(v, "mediaType")), *dg = json_string(json_get(v, "digest"));

        *d = (OciDescriptor){};
        if (json_type(v) != JSON_OBJECT)
                return api_error(e, -EBADMSG, API_BAD_REQUEST, "the image's %s is not a descriptor object", what);
        if (!oci_digest_valid(dg))
                return api_error(e, -EBADMSG, API_BAD_REQUEST,
                                 "the image's %s has digest '%.80s'; only sha256:<64 hex> is supported", what,
                                 strna(dg));
        if (json_uint64(json_get(v, "size"), &d->size) < 0)
                return api_error(e, -EBADMSG, API_BAD_REQUEST, "the image's %s has no valid size", what);
        if (mt && strlen(mt) >= sizeof d->media_type)
                return api_error(e, -EBADMSG, API_BAD_REQUEST, "the image's %s has an overlong media type", what);
        (void) strscpy(d->media_type, sizeof d->media_type, mt ?: "");
        (void) strscpy(d->digest, sizeof d->digest, dg);
        d->is_index = mt && (streq(mt, MT_OCI_INDEX) || streq(mt, MT_DOCKER_LIST));
        return 0;
}

static bool tag_matches(const JsonValue *m, const char *tag) {
        const JsonValue *a = json_get(m, "annotations");
        const char *ref = json_string(json_get(a, "org.opencontainers.image.ref.name"));
        const char *name = json_string(json_get(a, "io.containerd.image.name"));
        size_t tl = strlen(tag);

        if (ref && streq(ref, tag))
                return true;
        if (name) {
                size_t nl = strlen(name);
                if (streq(name, tag) || (nl > tl && name[nl - tl - 1] == ':' && streq(name + nl - tl, tag)))
                        return true;
        }
        return false;
}

int oci_index_pick(const char *json, size_t n, const char *tag, const char *arch, OciDescriptor *ret, ApiError *e) {
        _cleanup_json_ JsonValue *doc = NULL;
        const JsonValue *list;
        char seen[256] = "";
        size_t found = 0, tagged = 0;
        OciDescriptor pick = {};
        int r;

        r = parse_doc(json, n, "index", &doc, e);
        if (r < 0)
                return r;
        list = json_get(doc, "manifests");
        if (json_type(list) != JSON_ARRAY || json_array_size(list) == 0)
                return bad(e, "the image's index has no manifests");
        if (json_array_size(list) > OCI_LAYERS_MAX)
                return bad(e, "the image's index lists too many manifests");
        for (size_t i = 0; i < json_array_size(list); i++) {
                const JsonValue *m = json_array_at(list, i), *plat = json_get(m, "platform");
                const char *os = json_string(json_get(plat, "os")), *ar = json_string(json_get(plat, "architecture"));
                OciDescriptor d;

                if (tag && !tag_matches(m, tag))
                        continue;
                tagged++;
                r = descriptor_parse(m, "index entry", &d, e);
                if (r < 0)
                        return r;
                if (plat && (!os || !ar || !streq(os, "linux") || !streq(ar, arch))) {
                        size_t l = strlen(seen);
                        if (l + 40 < sizeof seen)
                                snprintf(seen + l, sizeof seen - l, "%s%.16s/%.16s", l ? ", " : "", strna(os), strna(ar));
                        continue;
                }
                if (!d.is_index && !streq(d.media_type, MT_OCI_MANIFEST) && !streq(d.media_type, MT_DOCKER_MANIFEST))
                        return api_error(e, -EOPNOTSUPP, API_BAD_REQUEST,
                                         "the image's index names media type '%.100s', which is not a manifest",
                                         d.media_type);
                if (found++ == 0)
                        pick = d;
        }
        if (tag && tagged == 0)
                return api_error(e, -ENOENT, API_BAD_REQUEST, "the image has no manifest tagged '%.128s'", tag);
        if (found == 0)
                return api_error(e, -ENOENT, API_BAD_REQUEST, "the image has no manifest for linux/%s (it has %s)", arch,
                                 seen);
        if (found > 1 && !tag)
                return bad(e, "the image's index has several manifests for this platform; name one with a tag");
        *ret = pick;
        return 0;
}

int oci_manifest_parse(const char *json, size_t n, OciManifest *ret, ApiError *e) {
        _cleanup_json_ JsonValue *doc = NULL;
        const JsonValue *layers;
        int r;

        r = parse_doc(json, n, "manifest", &doc, e);
        if (r < 0)
                return r;
        *ret = (OciManifest){};
        r = descriptor_parse(json_get(doc, "config"), "config", &ret->config, e);
        if (r < 0)
                return r;
        if (!streq(ret->config.media_type, MT_OCI_CONFIG) && !streq(ret->config.media_type, MT_DOCKER_CONFIG))
                return api_error(e, -EOPNOTSUPP, API_BAD_REQUEST,
                                 "the image's config has media type '%.100s', which is not an image config",
                                 ret->config.media_type);
        layers = json_get(doc, "layers");
        if (json_type(layers) != JSON_ARRAY)
                return bad(e, "the image's manifest has no layers array");
        if (json_array_size(layers) > OCI_LAYERS_MAX)
                return api_error(e, -E2BIG, API_BAD_REQUEST, "the image has more than %u layers", OCI_LAYERS_MAX);
        for (size_t i = 0; i < json_array_size(layers); i++) {
                OciDescriptor *d = &ret->layers[i];
                char what[32];
                bool known = false;

                snprintf(what, sizeof what, "layer %zu", i + 1);
                r = descriptor_parse(json_array_at(layers, i), what, d, e);
                if (r < 0)
                        return r;
                for (size_t k = 0; k < ELEMENTSOF(layer_types); k++)
                        if (streq(d->media_type, layer_types[k].type)) {
                                d->compression = layer_types[k].compression;
                                known = true;
                        }
                if (!known)
                        return api_error(e, -EOPNOTSUPP, API_BAD_REQUEST,
                                         "layer %zu (%s) has media type '%.100s', which is not a layer type this server "
                                         "applies", i + 1, d->digest, d->media_type);
                ret->n_layers++;
        }
        return 0;
}

int oci_docker_manifest_parse(const char *json, size_t n, const char *tag, char **ret_config, char ***ret_layers,
                              size_t *ret_n, ApiError *e) {
        _cleanup_json_ JsonValue *doc = NULL;
        const JsonValue *img = NULL, *layers;
        char **out;
        size_t nl;
        int r;

        r = parse_doc(json, n, "manifest.json", &doc, e);
        if (r < 0)
                return r;
        if (json_type(doc) != JSON_ARRAY || json_array_size(doc) == 0)
                return bad(e, "the archive's manifest.json lists no image");
        for (size_t i = 0; i < json_array_size(doc) && !img; i++) {
                const JsonValue *m = json_array_at(doc, i), *tags = json_get(m, "RepoTags");
                if (!tag) {
                        if (json_array_size(doc) > 1)
                                return bad(e, "the archive holds several images; name one with a tag");
                        img = m;
                }
                for (size_t k = 0; tag && k < json_array_size(tags); k++) {
                        const char *t = json_string(json_array_at(tags, k));
                        size_t tl = strlen(tag), l = t ? strlen(t) : 0;
                        if (t && (streq(t, tag) || (l > tl && t[l - tl - 1] == ':' && streq(t + l - tl, tag))))
                                img = m;
                }
        }
        if (!img)
                return api_error(e, -ENOENT, API_BAD_REQUEST, "the archive has no image tagged '%.128s'", strna(tag));
        if (!json_string(json_get(img, "Config")))
                return bad(e, "the archive's manifest.json names no Config");
        layers = json_get(img, "Layers");
        if (json_type(layers) != JSON_ARRAY)
                return bad(e, "the archive's manifest.json has no Layers array");
        nl = json_array_size(layers);
        if (nl > OCI_LAYERS_MAX)
                return api_error(e, -E2BIG, API_BAD_REQUEST, "the image has more than %u layers", OCI_LAYERS_MAX);
        out = new0(char *, nl + 1);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < nl; i++) {
                const char *l = json_string(json_array_at(layers, i));
                out[i] = l ? strdup(l) : NULL;
                if (!out[i]) {
                        strv_free(out);
                        return l ? -ENOMEM : bad(e, "the archive's manifest.json has a layer that is not a path");
                }
        }
        *ret_config = strdup(json_string(json_get(img, "Config")));
        if (!*ret_config) {
                strv_free(out);
                return -ENOMEM;
        }
        *ret_layers = out;
        *ret_n = nl;
        return 0;
}

/* Writes a string array value (or nothing if v is not an array of strings). */
static void write_strings(JsonWriter *w, const char *key, const JsonValue *v) {
        if (json_type(v) != JSON_ARRAY)
                return;
        for (size_t i = 0; i < json_array_size(v); i++)
                if (json_type(json_array_at(v, i)) != JSON_STRING)
                        return;
        json_w_key(w, key);
        json_w_array_begin(w);
        for (size_t i = 0; i < json_array_size(v); i++)
                json_w_string_n(w, json_string(json_array_at(v, i)), json_string_len(json_array_at(v, i)));
        json_w_array_end(w);
}

int oci_config_parse(const char *json, size_t n, const char *arch, OciConfig *ret, ApiError *e) {
        _cleanup_json_ JsonValue *doc = NULL;
        _cleanup_(json_w_done) JsonWriter w;
        const JsonValue *ids, *cfg;
        const char *os, *ar, *s;
        size_t len;
        int r;

        json_w_init(&w);
        r = parse_doc(json, n, "config", &doc, e);
        if (r < 0)
                return r;
        *ret = (OciConfig){};
        os = json_string(json_get(doc, "os"));
        ar = json_string(json_get(doc, "architecture"));
        if ((os && !streq(os, "linux")) || (ar && !streq(ar, arch)))
                return api_error(e, -ENOEXEC, API_BAD_REQUEST, "the image is for %.16s/%.16s, this host runs linux/%s",
                                 strna(os), strna(ar), arch);
        ids = json_get(json_get(doc, "rootfs"), "diff_ids");
        if (ids && json_type(ids) != JSON_ARRAY)
                return bad(e, "the image config's rootfs.diff_ids is not an array");
        if (json_array_size(ids) > OCI_LAYERS_MAX)
                return bad(e, "the image config lists too many diff_ids");
        for (size_t i = 0; i < json_array_size(ids); i++) {
                const char *d = json_string(json_array_at(ids, i));
                if (!oci_digest_valid(d))
                        return bad(e, "the image config has a diff_id that is not sha256:<64 hex>");
                (void) strscpy(ret->diff_ids[i], sizeof ret->diff_ids[i], d);
                ret->n_diff_ids++;
        }
        cfg = json_get(doc, "config");
        json_w_object_begin(&w);
        write_strings(&w, "env", json_get(cfg, "Env"));
        if ((s = json_string(json_get(cfg, "WorkingDir"))) && *s)
                json_w_kv_string(&w, "cwd", s);
        if ((s = json_string(json_get(cfg, "User"))) && *s)
                json_w_kv_string(&w, "user", s);
        write_strings(&w, "entrypoint", json_get(cfg, "Entrypoint"));
        write_strings(&w, "cmd", json_get(cfg, "Cmd"));
        json_w_object_end(&w);
        r = json_w_finish(&w, &ret->defaults_json, &len);
        if (r < 0)
                return r;
        return 0;
}

static void sha256_hex(const char *s, char ret[static 65]) {
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned mdlen = 0;

        EVP_Digest(s, strlen(s), md, &mdlen, EVP_sha256(), NULL);
        for (unsigned i = 0; i < 32; i++)
                snprintf(ret + 2 * i, 3, "%02x", md[i]);
}

void oci_layer_key(const char *parent_key, const char *digest, char ret[static 65]) {
        if (!parent_key) {
                memcpy(ret, digest + 7, 65);
                return;
        }
        _cleanup_free_ char *s = strjoin(parent_key, " ", digest);
        if (!s) {
                ret[0] = '\0';
                return;
        }
        sha256_hex(s, ret);
}

int oci_path_clean(const char *in, char **ret) {
        _cleanup_free_ char *out = NULL;
        size_t n, o = 0;
        const char *p = in;

        if (!in)
                return -EINVAL;
        n = strlen(in);
        if (n > OCI_TAR_NAME_MAX || in[0] == '/')
                return -EINVAL;
        out = malloc(n + 2);
        if (!out)
                return -ENOMEM;
        while (*p) {
                const char *slash = strchr(p, '/');
                size_t len = slash ? (size_t) (slash - p) : strlen(p);

                if (len == 2 && p[0] == '.' && p[1] == '.')
                        return -EINVAL;
                if (len > 0 && !(len == 1 && p[0] == '.')) {
                        if (o > 0)
                                out[o++] = '/';
                        memcpy(out + o, p, len);
                        o += len;
                }
                p += len;
                if (*p == '/')
                        p++;
        }
        if (o == 0)
                out[o++] = '.';
        out[o] = '\0';
        *ret = TAKE_PTR(out);
        return 0;
}
