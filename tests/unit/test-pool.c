/* SPDX-License-Identifier: MIT */
/* The storage tests' pools and skips (test-pool.h). */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <sys/mount.h>
#include <time.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "loop.h"
#include "mountinfo.h"
#include "str-util.h"
#include "test-pool.h"
#include "test.h"

#define GUARD_MAX 8 /* pools open at once in one test */
static Pool *guard_pools[GUARD_MAX];
static char guard_dirs[GUARD_MAX][PATH_MAX];

static void guard_add(Pool *p, const char *dir) {
        for (size_t i = 0; i < GUARD_MAX; i++)
                if (!guard_pools[i]) {
                        guard_pools[i] = p;
                        snprintf(guard_dirs[i], sizeof guard_dirs[i], "%s", dir);
                        return;
                }
}

static void guard_forget(Pool *p) {
        for (size_t i = 0; i < GUARD_MAX; i++)
                if (guard_pools[i] == p) {
                        guard_pools[i] = NULL;
                        guard_dirs[i][0] = 0;
                }
}

/* Closes the fds a failed test leaked into dir (they keep a mount busy). */
static void close_fds_under(const char *dir) {
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;
        size_t n = strlen(dir);

        if (!d)
                return;
        while ((de = readdir(d))) {
                char link[PATH_MAX], p[64];
                int fd;
                ssize_t k;

                if (safe_atoi(de->d_name, &fd) < 0 || fd <= 2 || fd == dirfd(d))
                        continue;
                snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
                k = readlink(p, link, sizeof link - 1);
                if (k <= 0)
                        continue;
                link[k] = 0;
                if (strneq(link, dir, n) && (link[n] == '/' || link[n] == 0))
                        close(fd);
        }
        closedir(d);
}

void test_pool_sweep(void) {
        for (size_t i = 0; i < GUARD_MAX; i++) {
                _cleanup_strv_free_ char **ids = NULL, **owners = NULL;
                Pool *p = guard_pools[i];

                if (!p)
                        continue;
                fprintf(stderr, "  cleaning up after a failed test: %s\n", guard_dirs[i]);
                close_fds_under(guard_dirs[i]);
                if (pool_sandbox_list(p, &ids) >= 0)
                        for (char **id = ids; *id; id++)
                                (void) pool_sandbox_remove(p, *id);
                if (pool_checkpoint_owners(p, &owners) >= 0)
                        for (char **id = owners; *id; id++)
                                (void) pool_checkpoint_remove_all(p, *id);
                if (pool_release(p) < 0)
                        (void) umount2(pool_mount_path(p), MNT_DETACH); /* the loop device goes with it */
                pool_free(p);
                (void) rm_rf(guard_dirs[i]);
                guard_pools[i] = NULL;
        }
}

__attribute__((destructor)) static void guard_at_exit(void) {
        test_pool_sweep();
}

void test_pool_check_no_residue(const char *state_dir) {
        _cleanup_free_ char *mnt = strjoin(state_dir, "/pool"), *image = strjoin(state_dir, "/pool.img"),
                            *dev = NULL;

        ASSERT_NOT_NULL(mnt);
        ASSERT_NOT_NULL(image);
        ASSERT_ERRNO(mountinfo_lookup(mnt, NULL, NULL), ENOENT);
        ASSERT_ERRNO(loop_find_backing(image, &dev), ENOENT);
}

void test_pool_release_and_freep(Pool **p) {
        if (!*p)
                return;
        guard_forget(*p);
        (void) pool_release(*p);
        *p = pool_free(*p);
}

void test_pool_drop(Pool **p) {
        guard_forget(*p);
        *p = pool_free(*p);
}

int test_pool_open(const char *state_dir, const char *pool_path, uint64_t size_mb, const char *storage, Pool **ret) {
        PoolConfig cfg = {
                .state_dir = state_dir,
                .pool_path = pool_path,
                .size_mb = size_mb,
                .storage = storage,
        };
        int r = pool_open(&cfg, ret);
        if (r >= 0)
                guard_add(*ret, state_dir);
        return r;
}

void test_pool_need_root(void) {
        test_pool_sweep();
        if (geteuid() != 0)
                test_skip("needs root");
}

void test_pool_need_btrfs(void) {
        _cleanup_free_ char *fs = NULL;

        test_pool_need_root();
        if (access("/dev/loop-control", W_OK) < 0)
                test_skip("no /dev/loop-control (loop devices unavailable)");
        if (access("/usr/sbin/mkfs.btrfs", X_OK) < 0 && access("/sbin/mkfs.btrfs", X_OK) < 0 &&
            access("/usr/bin/mkfs.btrfs", X_OK) < 0)
                test_skip("mkfs.btrfs not installed (btrfs-progs)");
        if (read_full_file("/proc/filesystems", 65536, &fs, NULL) < 0 || !strstr(fs, "\tbtrfs\n"))
                test_skip("kernel has no btrfs (not in /proc/filesystems)");
}

void test_pool_need_overlay(void) {
        _cleanup_free_ char *fs = NULL;

        test_pool_need_root();
        if (read_full_file("/proc/filesystems", 65536, &fs, NULL) < 0 || !strstr(fs, "\toverlay\n"))
                test_skip("kernel has no overlayfs");
}

uint64_t test_now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

void test_sleep_msec(unsigned ms) {
        (void) nanosleep(&(struct timespec){ .tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000 }, NULL);
}

char *test_path_join(const char *a, const char *b) {
        char *p = strjoin(a, "/", b);
        ASSERT_NOT_NULL(p);
        return p;
}
