/* SPDX-License-Identifier: MIT */
#pragma once

/* The web dashboard's files, embedded at build time (ui/embed.py writes the
 * table from ui/ and the npm packages of ui/package-lock.json). */

#include <stddef.h>

typedef struct UiAsset {
        const char *name;               /* served as /ui/NAME */
        const char *content_type;
        const char *etag;               /* quoted, from the bytes */
        const unsigned char *data;
        size_t size;
} UiAsset;

extern const UiAsset ui_assets[];
extern const size_t ui_assets_count;
