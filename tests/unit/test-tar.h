/* SPDX-License-Identifier: MIT */
#pragma once

/* A minimal ustar writer for the tests' templates. */

#include <stddef.h>

typedef struct TarEntry {
        const char *name;
        char type; /* '0' file, '1' hard link, '2' symlink, '5' dir */
        unsigned mode, uid, gid;
        const char *link;
        const char *data;
        size_t size; /* if data is NULL: that many 'x' bytes */
        unsigned major, minor;
} TarEntry;

/* Writes the entries to path as a tar (asserted). */
void test_tar_write(const char *path, const TarEntry *e, size_t n_entries);
