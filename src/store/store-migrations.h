/* SPDX-License-Identifier: MIT */
#pragma once

/* Schema migrations embedded at build time from migrations/<backend>/NNNN-name.sql
 * by embed-migrations.py. Versions run 1..count in array order. */

#include "macros.h"

typedef struct StoreMigration {
        int version;
        const char *name; /* "0001-initial" */
        const char *sql;  /* one or more statements */
} StoreMigration;

extern const StoreMigration store_sqlite_migrations[];
extern const size_t store_sqlite_migrations_count;
