/* SPDX-License-Identifier: MIT */
#pragma once

/* The image JSON of OCI layouts, docker archives and registries (oci-image.c):
 * pure parsing of hostile documents, no file system. The API side uses it to
 * resolve what a registry sends (src/api/registry-pull.c); the import
 * (oci.h) builds on it. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api-error.h"

/* Limits on hostile input. */
#define OCI_TAR_NAME_MAX 4096U              /* a member's path or link target */
#define OCI_TAR_PAX_MAX (1024U * 1024U)     /* one pax extended header */
#define OCI_TAR_XATTRS_MAX 64U              /* xattrs of one member */
#define OCI_JSON_MAX (4U * 1024U * 1024U)   /* index.json, manifest, config */
#define OCI_LAYERS_MAX 256U                 /* layers of one image */
#define OCI_INDEX_DEPTH_MAX 2U              /* index → index → manifest */
#define OCI_ID_MAX 65535U                   /* owners must map into the sandbox's user namespace */
#define OCI_OUTER_ENTRIES_MAX 100000U       /* members of an image archive */

/* A member path made relative and clean ("./a//b/" → "a/b", "." for the
 * root): -EINVAL for an absolute path or one with "..". */
int oci_path_clean(const char *in, char **ret);

/* --- image JSON --- */

typedef enum OciCompression {
        OCI_COMPRESSION_NONE,
        OCI_COMPRESSION_GZIP,
        OCI_COMPRESSION_ZSTD,
} OciCompression;

typedef struct OciDescriptor {
        char media_type[128];
        char digest[72]; /* sha256:<64 hex> */
        uint64_t size;
        bool is_index;
        OciCompression compression;
} OciDescriptor;

typedef struct OciManifest {
        OciDescriptor config;
        OciDescriptor layers[OCI_LAYERS_MAX];
        size_t n_layers;
} OciManifest;

typedef struct OciConfig {
        char diff_ids[OCI_LAYERS_MAX][72];
        size_t n_diff_ids;
        char *defaults_json; /* {"env":[..],"cwd":..,"user":..,"entrypoint":[..],"cmd":[..]} */
} OciConfig;

void oci_config_done(OciConfig *c);

bool oci_digest_valid(const char *d);
/* From an index (index.json or a nested one) the manifest for linux/arch,
 * with ref name tag if given. */
int oci_index_pick(const char *json, size_t n, const char *tag, const char *arch, OciDescriptor *ret, ApiError *e);
int oci_manifest_parse(const char *json, size_t n, OciManifest *ret, ApiError *e);
/* docker save's manifest.json: the config's and the layers' paths (malloc'd). */
int oci_docker_manifest_parse(const char *json, size_t n, const char *tag, char **ret_config, char ***ret_layers,
                              size_t *ret_n, ApiError *e);
int oci_config_parse(const char *json, size_t n, const char *arch, OciConfig *ret, ApiError *e);
/* The GOARCH of this host ("amd64", "arm64"...). */
const char *oci_host_arch(void);

/* A layer's key in the layer cache: the digest's hex for the first layer
 * (parent_key NULL), else the sha256 hex of "<parent_key> <digest>". */
void oci_layer_key(const char *parent_key, const char *digest, char ret[static 65]);

