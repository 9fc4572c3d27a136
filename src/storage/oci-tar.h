/* SPDX-License-Identifier: MIT */
#pragma once

/* The tar reader for hostile archives (oci-tar.c): pure parsing of a stream
 * read through a callback, no file system. The import (oci.h) applies what
 * it reads; the API's template build reads a build context with it. */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oci-image.h"

typedef enum TarType {
        TAR_FILE,
        TAR_HARDLINK,
        TAR_SYMLINK,
        TAR_CHAR,
        TAR_BLOCK,
        TAR_DIR,
        TAR_FIFO,
        _TAR_TYPE_MAX,
        _TAR_TYPE_INVALID = -EINVAL,
} TarType;

typedef struct TarXattr {
        char *name;
        char *value;
        size_t len;
} TarXattr;

typedef struct TarEntry {
        TarType type;
        char *path; /* as in the archive */
        char *link; /* hard link target or symlink contents */
        uint64_t size;
        uint32_t mode;
        uint64_t uid, gid;
        int64_t mtime;
        TarXattr xattrs[OCI_TAR_XATTRS_MAX];
        size_t n_xattrs;
} TarEntry;

/* Reads exactly n bytes: 0, -EBADMSG at the end of the input, -errno. */
typedef int (*TarReadFn)(void *userdata, void *buf, size_t n);

typedef struct TarStream {
        TarReadFn read;
        int (*skip)(void *userdata, uint64_t n); /* optional: skips n bytes without reading them */
        void *userdata;
        uint64_t offset;   /* bytes consumed */
        uint64_t data_left; /* of the current member, with its padding */
        bool ended;
} TarStream;

/* A stream reading a seekable fd from its current offset; *fd must outlive it. */
TarStream tar_stream_of_fd(int *fd);

void tar_entry_done(TarEntry *e);
/* The next member: 1, 0 at the end of the archive, <0 with err filled. */
int tar_next(TarStream *s, TarEntry *ret, char *err, size_t errlen);
/* The current member's data: exactly n bytes (n <= what is left). */
int tar_read_data(TarStream *s, void *buf, size_t n);
/* Skips what is left of the current member. */
int tar_skip_data(TarStream *s);
