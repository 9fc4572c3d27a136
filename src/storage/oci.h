/* SPDX-License-Identifier: MIT */
#pragma once

/* OCI and docker image import: a tar reader for hostile archives (oci-tar.c),
 * the image's JSON (oci-image.c), a layer applied inside a root with
 * whiteouts (oci-layer.c) and the import with its layer cache (oci-import.c). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api-error.h"
#include "oci-image.h"
#include "oci-tar.h"

/* The image config's exec defaults, at the root of a template imported from
 * an image: {"env":["K=V"...],"cwd":"/dir","user":"name|uid[:gid]",
 * "entrypoint":[...],"cmd":[...]}; space-agent applies env, cwd and user to
 * an exec that gives none. */
#define OCI_DEFAULTS_FILE ".space-image.json"


typedef enum OciWhiteout {
        OCI_WHITEOUT_NONE,
        OCI_WHITEOUT_FILE,   /* .wh.NAME: ret_target is dir/NAME */
        OCI_WHITEOUT_OPAQUE, /* .wh..wh..opq: ret_target is the dir */
} OciWhiteout;
/* Classifies a clean path; -EINVAL for a malformed whiteout. */
int oci_whiteout_classify(const char *clean, OciWhiteout *ret_kind, char **ret_target);

/* --- a layer applied in root_fd (oci-layer.c) --- */

struct Pool;
/* Pass 1 (whiteouts true): checks every member and applies the whiteouts.
 * Pass 2: creates every other member. Nothing resolves outside root_fd;
 * a path through a symlink, a device node, an owner outside 0..OCI_ID_MAX
 * is refused. what names the layer in errors. */
int oci_layer_apply(struct Pool *p, int root_fd, TarStream *s, bool whiteouts, const char *what, ApiError *e);

/* --- import (oci-import.c) --- */

typedef enum OciFormat {
        OCI_FORMAT_ROOTFS,
        OCI_FORMAT_OCI,
        OCI_FORMAT_DOCKER,
} OciFormat;

/* What the archive at fd is. */
int oci_detect_format(int fd, OciFormat *ret);

/* --- the layers of Dockerfile builds (build-layer.c; btrfs only) --- */
typedef enum PoolBuildFrom {
        POOL_BUILD_FROM_SCRATCH,
        POOL_BUILD_FROM_LAYER,    /* layers/<name> */
        POOL_BUILD_FROM_TEMPLATE, /* templates/<name> */
        POOL_BUILD_FROM_SANDBOX,  /* sandboxes/<name>/root: what a RUN left */
        _POOL_BUILD_FROM_MAX,
        _POOL_BUILD_FROM_INVALID = -EINVAL,
} PoolBuildFrom;
typedef struct PoolBuildSource {
        PoolBuildFrom kind;
        const char *name;
} PoolBuildSource;
/* layers/<key> (read-only): a snapshot of src, with the tar at tar_path (may
 * be NULL) applied like an image layer, the directories of the clean
 * relative mkdir_path (may be NULL) made where missing (0755, root's) and, if defaults is not NULL, the exec
 * defaults file (OCI_DEFAULTS_FILE) written ("{}": removed). A layer that
 * exists already is kept as it is. */
int pool_build_layer(struct Pool *p, const PoolBuildSource *src, const char *key, const char *tar_path,
                     const char *mkdir_path, const char *defaults, ApiError *e);
/* The exec defaults file of layers/<key> (at most 64 KiB): 1 with it in *ret, 0 if it has none. */
int pool_build_layer_defaults(struct Pool *p, const char *key, char **ret);
/* The ids of user and group names (each may be NULL) in layers/<key>'s etc/passwd and etc/group (resolved
 * inside the layer, regular files of at most POOL_LAYER_ETC_MAX bytes): -ENOENT (e says which) for a name
 * the image lacks, or a file it lacks. */
#define POOL_LAYER_ETC_MAX (1024U * 1024U)
typedef struct PoolLayerIds {
        uint32_t uid, user_gid; /* of the user: its uid and primary group */
        uint32_t gid;           /* of the group */
} PoolLayerIds;
int pool_build_layer_ids(struct Pool *p, const char *key, const char *user, const char *group, PoolLayerIds *ret,
                         ApiError *e);
/* templates/<name> as a read-only snapshot of layers/<key>, replacing the
 * template of that name if there is one (only once the new one is whole). */
int pool_build_publish(struct Pool *p, const char *key, const char *name, uint64_t *ret_size, ApiError *e);
