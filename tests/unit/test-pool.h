/* SPDX-License-Identifier: MIT */
#pragma once

/* What the storage tests share: pools opened under a safety net (a failed
 * ASSERT longjmps past _cleanup_ handlers, so every pool opened here is also
 * recorded and released at the start of the next test and at exit: its fds,
 * sandbox roots (overlay mounts included) and checkpoints removed first),
 * and the skips for what the machine lacks. */

#include "pool.h"

/* pool_open() of a pool of size_mb under state_dir (pool_path: NULL = the
 * default place), recorded for the safety net. */
int test_pool_open(const char *state_dir, const char *pool_path, uint64_t size_mb, const char *storage, Pool **ret);
/* The normal path: release and free when the variable goes out of scope. */
void test_pool_release_and_freep(Pool **p);
#define _cleanup_pool_ _cleanup_(test_pool_release_and_freep)
/* Forgets a handle without releasing (the pool stays mounted). */
void test_pool_drop(Pool **p);

/* Asserts that no mount and no loop device of the pool under state_dir are left. */
void test_pool_check_no_residue(const char *state_dir);

/* Releases what a failed test left (called by the skips below and at exit). */
void test_pool_sweep(void);
/* Skip the test unless we are root / btrfs on loop devices / overlayfs can be used. */
void test_pool_need_root(void);
void test_pool_need_btrfs(void);
void test_pool_need_overlay(void);

/* CLOCK_MONOTONIC in microseconds; a sleep; "a/b" (asserted). */
uint64_t test_now_usec(void);
void test_sleep_msec(unsigned ms);
char *test_path_join(const char *a, const char *b);
