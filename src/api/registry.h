/* SPDX-License-Identifier: MIT */
#pragma once

/* Pulling an image from a registry (the OCI distribution protocol): the
 * reference (registry-ref.c), one HTTPS exchange at a time with the
 * registry's token or basic auth (registry-http.c), and the pull itself,
 * which writes what it fetched as an OCI layout tar for the existing import
 * (registry-pull.c). Every byte from the registry is hostile: documents and
 * blobs are bounded and every blob's sha256 is checked as it streams. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api-error.h"

#define REGISTRY_HOST_MAX 255U      /* host[:port] */
#define REGISTRY_REPO_MAX 255U      /* path components, '/'-separated */
#define REGISTRY_TAG_MAX 128U
#define REGISTRY_REF_MAX 512U       /* the whole reference */
#define REGISTRY_DEFAULT_TAG "latest"

typedef struct RegistryRef {
        char host[REGISTRY_HOST_MAX + 1];   /* the authority the client connects to ("docker.io" → registry-1.docker.io) */
        char name[REGISTRY_HOST_MAX + 1];   /* the registry as written, for messages */
        char repo[REGISTRY_REPO_MAX + 1];
        char tag[REGISTRY_TAG_MAX + 1];     /* "" when a digest is given */
        char digest[72];                    /* "sha256:<64 hex>" or "" */
} RegistryRef;

/* "registry.example[:port]/path/repo[:tag][@sha256:<hex>]" parsed strictly:
 * the registry must be named (a host with a dot or a port, or localhost), repo
 * components are [a-z0-9] with single '.', '_', '__' or '-' runs between,
 * the tag [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}, the digest sha256 with 64
 * lowercase hex; no tag and no digest means "latest"; a digest wins over a
 * tag given with it. -EINVAL with err filled. */
int registry_ref_parse(const char *s, RegistryRef *ret, char *err, size_t errlen);
/* The reference the manifest is asked for: the digest, else the tag. */
const char *registry_ref_reference(const RegistryRef *r);

/* Whether host[:port] (as in a RegistryRef) appears in the comma-separated
 * list (config registry_insecure). */
bool registry_host_listed(const char *list, const char *host);

/* --- the pull --- */

typedef struct RegistryCredential {
        const char *user;        /* basic_user */
        const char *password;    /* the opened value (secret memory), password_len bytes */
        size_t password_len;
        const char *name;        /* the space credential's name, for messages */
        const char *hosts_json;  /* the hosts it may be sent to (its host patterns) */
} RegistryCredential;

typedef struct RegistryOptions {
        const char *ca_file;     /* PEM bundle; NULL: the host's trust store */
        const char *insecure;    /* hosts reached over plain http (comma-separated) */
        const char *resolve;     /* "name=address,...": where a name is reached without asking DNS */
        uint64_t max_bytes;      /* all blobs together */
        int timeout_msec;        /* per read or write */
        /* Which layers (by oci_layer_key()) the importing worker's cache
         * holds already: those are not fetched (optional). */
        int (*layers_cached)(void *userdata, char (*keys)[65], size_t n, bool *ret_cached);
        void *userdata;
} RegistryOptions;

/* Fetches ref's manifest (an index resolved to linux/<host arch>), config
 * and layers into a new OCI layout tar in tmpdir: *ret_path (malloc'd; the
 * caller unlinks it), ret_digest the manifest's digest. cred may be NULL
 * (anonymous). Nothing is left in tmpdir on failure. */
int registry_pull(const RegistryRef *ref, const RegistryCredential *cred, const RegistryOptions *o,
                  const char *tmpdir, char **ret_path, char ret_digest[static 72], ApiError *e);
