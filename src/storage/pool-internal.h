/* SPDX-License-Identifier: MIT */
#pragma once

/* Shared by the pool's files (pool.c, template.c, sandbox.c); not an interface. */

#include "pool.h"

#define POOL_TEMPLATES_DIR "templates"
#define POOL_SANDBOXES_DIR "sandboxes"
#define POOL_TMP_DIR "tmp"
#define POOL_SANDBOX_ROOT "root"
/* Overlay only: sandboxes/<id>/{upper,work} and the template's name, so the
 * overlay can be mounted again after a reboot. */
#define POOL_SANDBOX_UPPER "upper"
#define POOL_SANDBOX_WORK "work"
#define POOL_SANDBOX_TEMPLATE "template"

struct Pool {
        PoolKind kind;
        char *path;     /* the pool's root directory (mount point for btrfs) */
        char *image;    /* <state_dir>/pool.img when the pool lives in our image */
        char *loop;     /* "/dev/loopN" backing the pool, or NULL */
        bool owned;     /* mounted from our image: pool_release() unmounts it */
        bool quota;     /* btrfs quota groups are on */
        bool released;  /* pool_release() ran: every other call fails with -ESTALE */
};

/* -ESTALE after pool_release(), -EINVAL for NULL. */
int pool_usable(const Pool *p);
/* <pool>/<a>[/<b>[/<c>]] (malloc'd), or NULL on OOM. */
char *pool_subpath(const Pool *p, const char *a, const char *b, const char *c);
/* Opens <pool>/<sub> as a directory. */
int pool_open_subdir(const Pool *p, const char *sub);
/* Sorted names of the entries of <pool>/<sub> that pass valid(). */
int pool_list_names(const Pool *p, const char *sub, bool (*valid)(const char *), char ***ret);
/* Removes dirfd/name whatever it is: a subvolume (with nested ones) or a tree. */
int pool_remove_entry(const Pool *p, int dirfd, const char *name);
