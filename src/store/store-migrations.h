/* SPDX-License-Identifier: MIT */
#pragma once

/* Schema migrations embedded at build time from migrations/<backend>/NNNN-name.sql
 * by embed-migrations.py. Versions increase in array order, possibly with
 * gaps: a runner applies each version that is not recorded yet. */

#include "macros.h"

typedef struct StoreMigration {
        int version;
        const char *name; /* "0001-initial" */
        const char *sql;  /* one or more statements */
} StoreMigration;

extern const StoreMigration store_sqlite_migrations[];
extern const size_t store_sqlite_migrations_count;
