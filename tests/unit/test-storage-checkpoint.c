/* SPDX-License-Identifier: MIT */
/* Checkpoints, branches and restores of sandbox roots against the real kernel:
 * a sparse btrfs image on a loop device (skipped where btrfs, loop devices or
 * root are missing) and the overlayfs fallback. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#include "alloc-util.h"
#include "btrfs.h"
#include "fd-util.h"
#include "loop.h"
#include "mountinfo.h"
#include "pool.h"
#include "str-util.h"
#include "test-pool.h"
#include "test-tar.h"
#include "test.h"

#define TEST_POOL_MB 4096
#define TEST_QUOTA_MB 16
#define TEST_BRANCHES 10
#define TEST_BIG_BYTES (UINT64_C(1) << 30)
#define TEST_SMALL_BYTES (UINT64_C(1) << 20)
/* What a fresh snapshot holds alone: a few tree blocks, far below either size. */
#define TEST_SNAPSHOT_EXCL_MAX (UINT64_C(1) << 20)
#define TEST_CLEANER_WAIT_MSEC 20000

static int open_pool(const char *state_dir, const char *storage, Pool **ret) {
        return test_pool_open(state_dir, NULL, TEST_POOL_MB, storage, ret);
}

/* <pool>/checkpoints/<sandbox>/<checkpoint>, as pool.h lays it out. */
static char *checkpoint_path(Pool *p, const char *sandbox_id, const char *checkpoint_id) {
        char *s = strjoin(pool_mount_path(p), "/checkpoints/", sandbox_id, "/", checkpoint_id);
        ASSERT_NOT_NULL(s);
        return s;
}

static void write_file(const char *root, const char *rel, const char *s) {
        _cleanup_free_ char *path = test_path_join(root, rel);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(loop_write(fd, s, strlen(s)));
}

/* root/rel holds want, or (want NULL) does not exist. */
static void check_file(const char *root, const char *rel, const char *want) {
        _cleanup_free_ char *p = test_path_join(root, rel), *got = NULL;
        struct stat st;

        if (!want) {
                if (lstat(p, &st) == 0)
                        test_fail(__FILE__, __LINE__, "'%s' exists (mode %o), expected none", p, st.st_mode);
                ASSERT_EQ(errno, ENOENT);
                return;
        }
        ASSERT_OK(read_full_file(p, 4096, &got, NULL));
        if (!streq(got, want))
                test_fail(__FILE__, __LINE__, "'%s' holds \"%s\", expected \"%s\"", p, got, want);
}

static void remove_file(const char *root, const char *rel) {
        _cleanup_free_ char *p = test_path_join(root, rel);
        ASSERT_OK(unlink(p));
}

static uint64_t subvol_id_of(const char *path) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        uint64_t id = 0;
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(btrfs_subvol_get_id(fd, &id));
        return id;
}

/* Waits until the cleaner dropped subvolume id and its qgroup went away. */
static void wait_subvol_gone(int fd, uint64_t id, const char *what) {
        bool subvol_gone = false, qgroup_gone = false;

        for (unsigned waited = 0; waited < TEST_CLEANER_WAIT_MSEC; waited += 50) {
                ASSERT_OK(btrfs_sync(fd)); /* wakes the cleaner */
                subvol_gone = btrfs_subvol_exists(fd, id) == 0;
                qgroup_gone = btrfs_qgroup_get(fd, BTRFS_QGROUPID(id), NULL, NULL) == -ENOENT;
                if (subvol_gone && qgroup_gone)
                        break;
                if (subvol_gone && !qgroup_gone && waited > 1000)
                        /* Kernels that keep the qgroup: the sweep at open removes it. */
                        (void) btrfs_qgroup_remove_stale(fd);
                test_sleep_msec(50);
        }
        if (!subvol_gone || !qgroup_gone)
                test_fail(__FILE__, __LINE__, "%s: subvolume %llu %s, its qgroup %s", what, (unsigned long long) id,
                          subvol_gone ? "gone" : "still there", qgroup_gone ? "gone" : "still there");
}

/* Writes 1 MiB chunks to root/rel until a write fails or max bytes are written;
 * returns the errno (0: none) and the bytes written. */
static int fill_until_error(const char *root, const char *rel, uint64_t max, uint64_t *ret_written) {
        _cleanup_free_ char *path = test_path_join(root, rel), *buf = malloc(1 << 20);
        _cleanup_close_ int fd = -EBADF;
        uint64_t written = 0;
        int err = 0;

        ASSERT_NOT_NULL(buf);
        memset(buf, 0x5a, 1 << 20);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ASSERT_TRUE(fd >= 0);
        while (written < max) {
                ssize_t k = write(fd, buf, 1 << 20);
                if (k < 0) {
                        err = errno;
                        break;
                }
                written += (uint64_t) k;
        }
        if (err == 0 && fsync(fd) < 0)
                err = errno;
        *ret_written = written;
        return err;
}

/* Top-level files and directories, so that restores must hide the template's
 * entries at the top (whiteouts on overlay) and below it (opaque directories). */
static const TarEntry template_tar[] = {
        { "./", '5', 0755, 0, 0 },
        { "./bin/", '5', 0755, 0, 0 },
        { "./bin/hello", '0', 0755, 0, 0, NULL, "#!/bin/sh\necho hello\n" },
        { "./bin/link", '2', 0777, 0, 0, "hello" },
        { "./etc/", '5', 0755, 0, 0 },
        { "./etc/hostname", '0', 0644, 0, 0, NULL, "template\n" },
        { "./home/", '5', 0755, 0, 0 },
        { "./home/user/", '5', 0750, 1000, 1000 },
        { "./home/user/file", '0', 0640, 1000, 1000, NULL, "user data\n" },
        { "./srv/", '5', 0755, 0, 0 },
        { "./srv/data/", '5', 0755, 0, 0 },
        { "./srv/data/file", '0', 0644, 0, 0, NULL, "srv data\n" },
        { "./top-file", '0', 0644, 0, 0, NULL, "top\n" },
};

static void import_template(Pool *p, const char *dir) {
        _cleanup_free_ char *tar = test_path_join(dir, "template.tar");
        test_tar_write(tar, template_tar, ELEMENTSOF(template_tar));
        ASSERT_OK(pool_template_import_tar(p, "base", tar, NULL));
}

/* The two states the tests move a root between. v1: the template plus
 * changes; v2: v1 with more changes and the template's files deleted at the
 * top, in a top-level directory, and deeper. */
static void make_v1(const char *root) {
        write_file(root, "etc/hostname", "v1\n");
        write_file(root, "new1", "new1\n");
}

static void make_v2(const char *root) {
        _cleanup_free_ char *srv = test_path_join(root, "srv");
        write_file(root, "etc/hostname", "v2\n");
        write_file(root, "new2", "new2\n");
        remove_file(root, "bin/hello");
        remove_file(root, "home/user/file");
        remove_file(root, "top-file");
        ASSERT_OK(rm_rf(srv));
}

static void check_symlink(const char *root, const char *rel, const char *want) {
        _cleanup_free_ char *p = test_path_join(root, rel);
        char target[PATH_MAX];
        ssize_t k = readlink(p, target, sizeof target - 1);

        ASSERT_TRUE(k > 0);
        target[k] = 0;
        ASSERT_STREQ(target, want);
}

static void check_v1(const char *root) {
        _cleanup_free_ char *home = test_path_join(root, "home/user");
        struct stat st;

        check_file(root, "etc/hostname", "v1\n");
        check_file(root, "new1", "new1\n");
        check_file(root, "new2", NULL);
        check_file(root, "bin/hello", "#!/bin/sh\necho hello\n");
        check_file(root, "home/user/file", "user data\n");
        check_file(root, "srv/data/file", "srv data\n");
        check_file(root, "top-file", "top\n");
        check_symlink(root, "bin/link", "hello");
        ASSERT_OK(lstat(home, &st));
        ASSERT_EQ(st.st_uid, 1000);
        ASSERT_EQ(st.st_mode & 07777, 0750);
}

static void check_v2(const char *root) {
        check_file(root, "etc/hostname", "v2\n");
        check_file(root, "new1", "new1\n");
        check_file(root, "new2", "new2\n");
        check_file(root, "bin/hello", NULL);
        check_symlink(root, "bin/link", "hello"); /* dangling now, but kept */
        check_file(root, "home/user/file", NULL);
        check_file(root, "srv", NULL);
        check_file(root, "top-file", NULL);
}

/* Restores and checks that the root stays where it was. */
static void restore(Pool *p, const char *id, const char *checkpoint_id, uint64_t disk_mb, const char *root) {
        _cleanup_free_ char *again = NULL;
        ASSERT_OK(pool_sandbox_restore(p, id, checkpoint_id, disk_mb, &again));
        ASSERT_STREQ(again, root);
}

static void check_ids(char **got, const char *want) {
        _cleanup_free_ char *joined = strdup("");
        ASSERT_NOT_NULL(got);
        for (size_t i = 0; got[i]; i++) {
                char *n = strjoin(joined, i ? "," : "", got[i]);
                ASSERT_NOT_NULL(n);
                free(joined);
                joined = n;
        }
        ASSERT_STREQ(joined, want);
}

static void check_checkpoints(Pool *p, const char *sandbox_id, const char *want) {
        _cleanup_strv_free_ char **ids = NULL;
        ASSERT_OK(pool_checkpoint_list(p, sandbox_id, &ids));
        check_ids(ids, want);
}

static void check_owners(Pool *p, const char *want) {
        _cleanup_strv_free_ char **ids = NULL;
        ASSERT_OK(pool_checkpoint_owners(p, &ids));
        check_ids(ids, want);
}

/* Every call refuses bad ids, missing things and taken names. */
static void check_errors(Pool *p) {
        static const char *const bad[] = { "", "Bad", "a-b", "../x", "a/b", ".", "x y",
                                           "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" /* 64 */ };
        _cleanup_strv_free_ char **ids = NULL;
        char *root = NULL;
        uint64_t bytes;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                const char *b = bad[i];
                ASSERT_ERRNO(pool_checkpoint_create(p, b, "c1"), EINVAL);
                ASSERT_ERRNO(pool_checkpoint_create(p, "src", b), EINVAL);
                ASSERT_ERRNO(pool_checkpoint_remove(p, b, "c1"), EINVAL);
                ASSERT_ERRNO(pool_checkpoint_remove(p, "src", b), EINVAL);
                ASSERT_ERRNO(pool_checkpoint_remove_all(p, b), EINVAL);
                ASSERT_FALSE(pool_checkpoint_exists(p, b, "c1"));
                ASSERT_FALSE(pool_checkpoint_exists(p, "src", b));
                ASSERT_ERRNO(pool_checkpoint_list(p, b, &ids), EINVAL);
                ASSERT_ERRNO(pool_checkpoint_usage(p, b, "c1", &bytes), EINVAL);
                ASSERT_ERRNO(pool_checkpoint_usage(p, "src", b, &bytes), EINVAL);
                ASSERT_ERRNO(pool_sandbox_branch(p, b, NULL, "new", 0, &root), EINVAL);
                ASSERT_ERRNO(pool_sandbox_branch(p, "src", b, "new", 0, &root), EINVAL);
                ASSERT_ERRNO(pool_sandbox_branch(p, "src", NULL, b, 0, &root), EINVAL);
                ASSERT_ERRNO(pool_sandbox_restore(p, b, "c1", 0, &root), EINVAL);
                ASSERT_ERRNO(pool_sandbox_restore(p, "src", b, 0, &root), EINVAL);
        }
        ASSERT_ERRNO(pool_checkpoint_list(p, "src", NULL), EINVAL);
        ASSERT_ERRNO(pool_checkpoint_owners(p, NULL), EINVAL);
        ASSERT_ERRNO(pool_sandbox_branch(p, "src", NULL, "new", 0, NULL), EINVAL);
        ASSERT_ERRNO(pool_sandbox_restore(p, "src", "c1", 0, NULL), EINVAL);
        ASSERT_ERRNO(pool_sandbox_branch(p, "src", NULL, "new", UINT64_MAX, &root), ERANGE);
        ASSERT_ERRNO(pool_sandbox_restore(p, "src", "c1", UINT64_MAX, &root), ERANGE);
        ASSERT_ERRNO(pool_checkpoint_create(NULL, "src", "c1"), EINVAL);

        /* Missing sandboxes and checkpoints. */
        ASSERT_ERRNO(pool_checkpoint_create(p, "nosuch", "c1"), ENOENT);
        ASSERT_ERRNO(pool_checkpoint_remove(p, "nosuch", "c1"), ENOENT);
        ASSERT_ERRNO(pool_checkpoint_remove(p, "src", "nosuch"), ENOENT);
        ASSERT_OK(pool_checkpoint_remove_all(p, "nosuch"));
        ASSERT_FALSE(pool_checkpoint_exists(p, "src", "nosuch"));
        ASSERT_ERRNO(pool_checkpoint_list(p, "nosuch", &ids), ENOENT);
        if (pool_kind(p) == POOL_BTRFS)
                ASSERT_ERRNO(pool_checkpoint_usage(p, "src", "nosuch", &bytes), ENOENT);
        else
                ASSERT_ERRNO(pool_checkpoint_usage(p, "src", "nosuch", &bytes), EOPNOTSUPP);
        ASSERT_ERRNO(pool_sandbox_branch(p, "nosuch", NULL, "new", 0, &root), ENOENT);
        ASSERT_ERRNO(pool_sandbox_branch(p, "src", "nosuch", "new", 0, &root), ENOENT);
        ASSERT_ERRNO(pool_sandbox_branch(p, "nosuch", "c1", "new", 0, &root), ENOENT);
        ASSERT_ERRNO(pool_sandbox_restore(p, "src", "nosuch", 0, &root), ENOENT);
        ASSERT_ERRNO(pool_sandbox_restore(p, "nosuch", "c1", 0, &root), ENOENT);
        ASSERT_FALSE(pool_sandbox_exists(p, "new"));
        ASSERT_FALSE(pool_sandbox_exists(p, "nosuch"));
        check_owners(p, "");
        check_checkpoints(p, "src", ""); /* the sandbox exists: no checkpoint yet */
}

/* Both kinds: checkpoint, restore, branch x10 from the live root and from a
 * checkpoint, isolation, removal. */
static void exercise_checkpoints(Pool *p, const char *dir) {
        _cleanup_free_ char *root = NULL, *again = NULL, *c1 = NULL, *c2 = NULL, *ckpts = NULL, *zombie = NULL;
        char *children[2 * TEST_BRANCHES] = {};
        char child_ids[2 * TEST_BRANCHES][16];
        uint64_t t0;

        import_template(p, dir);
        ASSERT_OK(pool_sandbox_create(p, "base", "src", TEST_QUOTA_MB, &root));
        check_errors(p);

        /* A checkpoint, and writes after it that it does not see. */
        make_v1(root);
        t0 = test_now_usec();
        ASSERT_OK(pool_checkpoint_create(p, "src", "c1"));
        fprintf(stderr, "  %s checkpoint of a small root: %.2f ms\n", pool_kind_to_string(pool_kind(p)),
                (test_now_usec() - t0) / 1000.0);
        ASSERT_ERRNO(pool_checkpoint_create(p, "src", "c1"), EEXIST);
        ASSERT_TRUE(pool_checkpoint_exists(p, "src", "c1"));
        c1 = checkpoint_path(p, "src", "c1");
        check_v1(c1);
        make_v2(root);
        check_v2(root);
        check_v1(c1);
        ASSERT_OK(pool_checkpoint_create(p, "src", "c2"));
        c2 = checkpoint_path(p, "src", "c2");
        check_v2(c2);
        check_checkpoints(p, "src", "c1,c2");
        check_owners(p, "src");

        /* Restore brings back what was deleted and drops what came later. */
        write_file(root, "new3", "after c2\n");
        restore(p, "src", "c1", TEST_QUOTA_MB, root);
        check_v1(root);
        check_file(root, "new3", NULL);
        check_v1(c1); /* the checkpoints stay as they were */
        check_v2(c2);
        check_checkpoints(p, "src", "c1,c2");
        restore(p, "src", "c2", TEST_QUOTA_MB, root);
        check_v2(root);
        restore(p, "src", "c1", TEST_QUOTA_MB, root);
        check_v1(root);
        /* The restored root is a root like any other: written, checkpointed, restored. */
        write_file(root, "etc/hostname", "v3\n");
        ASSERT_OK(pool_checkpoint_create(p, "src", "c3"));
        write_file(root, "etc/hostname", "v4\n");
        restore(p, "src", "c3", TEST_QUOTA_MB, root);
        check_file(root, "etc/hostname", "v3\n");
        ASSERT_OK(pool_checkpoint_remove(p, "src", "c3"));
        ASSERT_ERRNO(pool_checkpoint_remove(p, "src", "c3"), ENOENT);
        ASSERT_FALSE(pool_checkpoint_exists(p, "src", "c3"));
        check_checkpoints(p, "src", "c1,c2");
        restore(p, "src", "c1", TEST_QUOTA_MB, root);
        check_v1(root);

        /* Branches: TEST_BRANCHES from the live root (v1), as many from c2. */
        for (size_t i = 0; i < ELEMENTSOF(children); i++) {
                bool live = i < TEST_BRANCHES;
                snprintf(child_ids[i], sizeof child_ids[i], "%s%zu", live ? "live" : "ckpt", i % TEST_BRANCHES);
                t0 = test_now_usec();
                ASSERT_OK(pool_sandbox_branch(p, "src", live ? NULL : "c2", child_ids[i], TEST_QUOTA_MB,
                                              &children[i]));
                if (i == 0 || i == TEST_BRANCHES)
                        fprintf(stderr, "  %s branch from %s: %.2f ms\n", pool_kind_to_string(pool_kind(p)),
                                live ? "the live root" : "a checkpoint", (test_now_usec() - t0) / 1000.0);
                ASSERT_TRUE(pool_sandbox_exists(p, child_ids[i]));
                if (live)
                        check_v1(children[i]);
                else
                        check_v2(children[i]);
        }
        ASSERT_ERRNO(pool_sandbox_branch(p, "src", NULL, "live0", 0, &again), EEXIST);
        ASSERT_ERRNO(pool_sandbox_branch(p, "src", "c1", "src", 0, &again), EEXIST);
        ASSERT_ERRNO(pool_sandbox_branch(p, "src", "c1", "ckpt0", 0, &again), EEXIST);
        check_v1(children[0]); /* a refused branch touched nothing */
        for (size_t i = 0; i < ELEMENTSOF(children); i++) {
                write_file(children[i], child_ids[i], "mine\n");
                write_file(children[i], "etc/hostname", child_ids[i]);
        }
        for (size_t i = 0; i < ELEMENTSOF(children); i++)
                for (size_t j = 0; j < ELEMENTSOF(children); j++) {
                        check_file(children[i], child_ids[j], i == j ? "mine\n" : NULL);
                        if (i == j)
                                check_file(children[i], "etc/hostname", child_ids[i]);
                }
        for (size_t i = 0; i < ELEMENTSOF(children); i++) {
                check_file(root, child_ids[i], NULL);
                check_file(c1, child_ids[i], NULL);
                check_file(c2, child_ids[i], NULL);
        }
        check_v1(root);
        check_v1(c1);
        check_v2(c2);
        /* Branches are sandboxes of their own: checkpoints, restores. */
        ASSERT_OK(pool_checkpoint_create(p, "live0", "c1"));
        write_file(children[0], "later", "later\n");
        restore(p, "live0", "c1", TEST_QUOTA_MB, children[0]);
        check_file(children[0], "later", NULL);
        check_file(children[0], "live0", "mine\n");
        check_v1(c1); /* src's c1 is not live0's c1 */
        check_owners(p, "live0,src");

        /* Removing the source leaves its branches whole and none of its checkpoints. */
        ckpts = strjoin(pool_mount_path(p), "/checkpoints");
        ASSERT_NOT_NULL(ckpts);
        ASSERT_OK(pool_sandbox_remove(p, "src"));
        ASSERT_FALSE(pool_sandbox_exists(p, "src"));
        ASSERT_FALSE(pool_checkpoint_exists(p, "src", "c1"));
        {
                _cleanup_strv_free_ char **ids = NULL;
                ASSERT_ERRNO(pool_checkpoint_list(p, "src", &ids), ENOENT);
        }
        check_owners(p, "live0");
        check_file(ckpts, "src", NULL);
        check_file(children[TEST_BRANCHES], "ckpt0", "mine\n");
        check_file(children[TEST_BRANCHES], "new2", "new2\n");
        check_file(children[1], "new1", "new1\n");

        /* Checkpoints under a fresh id are residue (a crash amid a removal): a
         * new sandbox of that id never sees them. */
        zombie = test_path_join(ckpts, "zombie");
        ASSERT_OK(mkdir(zombie, 0700));
        {
                _cleanup_free_ char *old = test_path_join(zombie, "old"), *zroot = NULL;
                ASSERT_OK(mkdir(old, 0700));
                check_owners(p, "live0,zombie");
                ASSERT_OK(pool_sandbox_create(p, "base", "zombie", 0, &zroot));
                check_checkpoints(p, "zombie", "");
                check_owners(p, "live0");
                ASSERT_OK(pool_sandbox_remove(p, "zombie"));
        }

        for (size_t i = 0; i < ELEMENTSOF(children); i++) {
                ASSERT_OK(pool_sandbox_remove(p, child_ids[i]));
                ASSERT_ERRNO(mountinfo_lookup(children[i], NULL, NULL), ENOENT);
                free(children[i]);
        }
        check_owners(p, "");
        check_file(ckpts, "live0", NULL);
        ASSERT_OK(pool_template_remove(p, "base"));
}

/* --- tests --- */

TEST(btrfs_checkpoints) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();

        test_pool_need_btrfs();
        ASSERT_OK(open_pool(dir, "btrfs", &p));
        ASSERT_EQ(pool_kind(p), POOL_BTRFS);
        exercise_checkpoints(p, dir);
        ASSERT_OK(pool_release(p));
        test_pool_check_no_residue(dir);
}

TEST(overlay_checkpoints) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();

        test_pool_need_overlay();
        ASSERT_OK(open_pool(dir, "overlay", &p));
        ASSERT_EQ(pool_kind(p), POOL_OVERLAY);
        exercise_checkpoints(p, dir);
        ASSERT_OK(pool_release(p));
}

/* A checkpoint of a root holding 1 GiB costs what one of 1 MiB does: no data
 * is copied. The snapshot's exclusive bytes are ~0, it references all the
 * data, and the pool's free space does not move. */
TEST(btrfs_checkpoint_without_copy) {
        _cleanup_pool_ Pool *p = NULL;
        _cleanup_close_ int pool_fd = -EBADF;
        const char *dir = test_tmpdir();
        static const struct {
                const char *id;
                uint64_t bytes;
        } roots[] = {
                { "small", TEST_SMALL_BYTES },
                { "big", TEST_BIG_BYTES },
        };

        test_pool_need_btrfs();
        ASSERT_OK(open_pool(dir, "btrfs", &p));
        import_template(p, dir);
        pool_fd = open(pool_mount_path(p), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(pool_fd >= 0);

        for (size_t i = 0; i < ELEMENTSOF(roots); i++) {
                _cleanup_free_ char *root = NULL, *blob = NULL, *ckpt = NULL;
                _cleanup_close_ int fd = -EBADF;
                uint64_t t0, usec, root_excl = 0, ckpt_excl = 0, ckpt_rfer = 0;
                struct statvfs before, after;

                ASSERT_OK(pool_sandbox_create(p, "base", roots[i].id, 0, &root));
                blob = test_path_join(root, "blob");
                fd = open(blob, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                ASSERT_TRUE(fd >= 0);
                ASSERT_OK(-posix_fallocate(fd, 0, (off_t) roots[i].bytes));
                ASSERT_OK(fsync(fd));
                fd = safe_close(fd);
                ASSERT_OK(btrfs_sync(pool_fd));
                ASSERT_OK(pool_sandbox_usage(p, roots[i].id, &root_excl));
                ASSERT_TRUE(root_excl >= roots[i].bytes);
                ASSERT_OK(statvfs(pool_mount_path(p), &before));

                t0 = test_now_usec();
                ASSERT_OK(pool_checkpoint_create(p, roots[i].id, "c1"));
                usec = test_now_usec() - t0;

                ASSERT_OK(btrfs_sync(pool_fd));
                ASSERT_OK(statvfs(pool_mount_path(p), &after));
                ASSERT_OK(pool_checkpoint_usage(p, roots[i].id, "c1", &ckpt_excl));
                ckpt = checkpoint_path(p, roots[i].id, "c1");
                ASSERT_OK(btrfs_qgroup_get(pool_fd, BTRFS_QGROUPID(subvol_id_of(ckpt)), &ckpt_rfer, NULL));
                fprintf(stderr,
                        "  checkpoint of a root holding %4llu MiB: %.2f ms; checkpoint exclusive %llu KiB, "
                        "referenced %llu MiB; pool free space %+lld KiB\n",
                        (unsigned long long) (roots[i].bytes >> 20), usec / 1000.0,
                        (unsigned long long) (ckpt_excl >> 10), (unsigned long long) (ckpt_rfer >> 20),
                        ((long long) after.f_bavail - (long long) before.f_bavail) * (long long) after.f_frsize / 1024);
                ASSERT_TRUE(ckpt_excl <= TEST_SNAPSHOT_EXCL_MAX);
                ASSERT_TRUE(ckpt_rfer >= roots[i].bytes);
                /* A copy would take roots[i].bytes off the free space. */
                ASSERT_TRUE((uint64_t) before.f_bavail * before.f_frsize <
                            (uint64_t) after.f_bavail * after.f_frsize + roots[i].bytes / 2);

                /* What the root drops afterwards only the checkpoint holds: its usage. */
                ASSERT_OK(unlink(blob));
                ASSERT_OK(btrfs_sync(pool_fd));
                ASSERT_OK(pool_checkpoint_usage(p, roots[i].id, "c1", &ckpt_excl));
                fprintf(stderr, "  after the root deleted it: checkpoint exclusive %llu MiB\n",
                        (unsigned long long) (ckpt_excl >> 20));
                ASSERT_TRUE(ckpt_excl >= roots[i].bytes);
                ASSERT_TRUE(ckpt_excl <= roots[i].bytes + TEST_SNAPSHOT_EXCL_MAX);
                ASSERT_OK(pool_sandbox_remove(p, roots[i].id));
        }
        pool_fd = safe_close(pool_fd);
        ASSERT_OK(pool_release(p));
        test_pool_check_no_residue(dir);
}

/* A checkpoint is a read-only subvolume: nothing writes to it, not even root. */
TEST(btrfs_checkpoint_readonly) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();
        _cleanup_free_ char *root = NULL, *ckpt = NULL, *newfile = NULL, *hostname = NULL, *etc = NULL,
                            *again = NULL;

        test_pool_need_btrfs();
        ASSERT_OK(open_pool(dir, "btrfs", &p));
        import_template(p, dir);
        ASSERT_OK(pool_sandbox_create(p, "base", "ro", 0, &root));
        ASSERT_OK(pool_checkpoint_create(p, "ro", "c1"));
        ckpt = checkpoint_path(p, "ro", "c1");
        {
                _cleanup_close_ int fd = open(ckpt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                ASSERT_TRUE(fd >= 0);
                ASSERT_EQ(btrfs_is_subvol_fd(fd), 1);
                ASSERT_EQ(btrfs_subvol_is_readonly(fd), 1);
        }
        newfile = test_path_join(ckpt, "newfile");
        hostname = test_path_join(ckpt, "etc/hostname");
        etc = test_path_join(ckpt, "etc");
        ASSERT_TRUE(open(newfile, O_WRONLY | O_CREAT | O_CLOEXEC, 0644) < 0 && errno == EROFS);
        ASSERT_TRUE(open(hostname, O_WRONLY | O_CLOEXEC) < 0 && errno == EROFS);
        ASSERT_TRUE(unlink(hostname) < 0 && errno == EROFS);
        ASSERT_TRUE(mkdir(newfile, 0755) < 0 && errno == EROFS);
        ASSERT_TRUE(chmod(etc, 0777) < 0 && errno == EROFS);

        /* Restores and branches use it without making it writable or moving it. */
        restore(p, "ro", "c1", 0, root);
        ASSERT_OK(pool_sandbox_branch(p, "ro", "c1", "child", 0, &again));
        write_file(again, "etc/hostname", "child\n");
        check_file(ckpt, "etc/hostname", "template\n");
        {
                _cleanup_close_ int fd = open(ckpt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                ASSERT_TRUE(fd >= 0);
                ASSERT_EQ(btrfs_subvol_is_readonly(fd), 1);
        }
        ASSERT_OK(pool_sandbox_remove(p, "child"));
        ASSERT_OK(pool_sandbox_remove(p, "ro"));
        ASSERT_OK(pool_release(p));
        test_pool_check_no_residue(dir);
}

/* The exclusive-bytes limit of the subvolume at path (0: none). */
static uint64_t root_limit(const char *path) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        uint64_t id = 0, bytes = UINT64_MAX;

        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(btrfs_subvol_get_id(fd, &id));
        ASSERT_OK(btrfs_qgroup_limit_exclusive_get(fd, BTRFS_QGROUPID(id), &bytes));
        return bytes;
}

/* Restored and branched roots carry the disk_mb limit. */
TEST(btrfs_quota_after_restore_and_branch) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();
        _cleanup_free_ char *root = NULL, *child = NULL, *child2 = NULL, *child3 = NULL, *child4 = NULL;
        uint64_t limit = (uint64_t) TEST_QUOTA_MB << 20, written = 0;
        int err;

        test_pool_need_btrfs();
        ASSERT_OK(open_pool(dir, "btrfs", &p));
        import_template(p, dir);
        ASSERT_OK(pool_sandbox_create(p, "base", "q", TEST_QUOTA_MB, &root));
        write_file(root, "before", "before\n");
        ASSERT_OK(pool_checkpoint_create(p, "q", "c1"));
        restore(p, "q", "c1", TEST_QUOTA_MB, root);
        check_file(root, "before", "before\n");

        err = fill_until_error(root, "big", 4 * limit, &written);
        fprintf(stderr, "  restored root, quota %d MB: write failed after %.1f MB with %s\n", TEST_QUOTA_MB,
                written / 1048576.0, err ? strerror(err) : "no error");
        ASSERT_EQ(err, EDQUOT);
        ASSERT_TRUE(written <= limit);
        ASSERT_TRUE(written >= limit / 2);

        ASSERT_OK(pool_sandbox_branch(p, "q", "c1", "child", TEST_QUOTA_MB, &child));
        err = fill_until_error(child, "big", 4 * limit, &written);
        fprintf(stderr, "  branch, quota %d MB: write failed after %.1f MB with %s\n", TEST_QUOTA_MB,
                written / 1048576.0, err ? strerror(err) : "no error");
        ASSERT_EQ(err, EDQUOT);
        ASSERT_TRUE(written <= limit);

        /* disk_mb = 0: no limit after the restore. */
        restore(p, "q", "c1", 0, root);
        err = fill_until_error(root, "big", 2 * limit, &written);
        ASSERT_EQ(err, 0);
        ASSERT_EQ(written, 2 * limit);

        /* the limit asked for, whether the source's is the same (inherited, not set again) or not */
        ASSERT_EQ(root_limit(child), limit);
        ASSERT_EQ(root_limit(root), 0U);
        ASSERT_OK(pool_sandbox_branch(p, "q", NULL, "child2", TEST_QUOTA_MB, &child2));
        ASSERT_EQ(root_limit(child2), limit);
        ASSERT_OK(pool_sandbox_branch(p, "q", "c1", "child3", 0, &child3));
        ASSERT_EQ(root_limit(child3), 0U);
        ASSERT_OK(pool_sandbox_branch(p, "child2", NULL, "child4", 2 * TEST_QUOTA_MB, &child4));
        ASSERT_EQ(root_limit(child4), 2 * limit);

        ASSERT_OK(pool_sandbox_remove(p, "child4"));
        ASSERT_OK(pool_sandbox_remove(p, "child3"));
        ASSERT_OK(pool_sandbox_remove(p, "child2"));
        ASSERT_OK(pool_sandbox_remove(p, "child"));
        ASSERT_OK(pool_sandbox_remove(p, "q"));
        ASSERT_OK(pool_release(p));
        test_pool_check_no_residue(dir);
}

/* Removing a sandbox removes its checkpoints: no subvolume, no qgroup (once
 * the cleaner ran), no directory. The same for the roots a restore replaced. */
TEST(btrfs_remove_leaves_nothing) {
        _cleanup_pool_ Pool *p = NULL;
        _cleanup_close_ int pool_fd = -EBADF;
        const char *dir = test_tmpdir();
        _cleanup_free_ char *root = NULL, *sbdir = NULL, *ckpts = NULL;
        static const char *const names[] = { "c1", "c2", "c3" };
        uint64_t ids[ELEMENTSOF(names)], old_root_id, root_id;

        test_pool_need_btrfs();
        ASSERT_OK(open_pool(dir, "btrfs", &p));
        import_template(p, dir);
        pool_fd = open(pool_mount_path(p), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(pool_fd >= 0);
        ASSERT_OK(pool_sandbox_create(p, "base", "gone", TEST_QUOTA_MB, &root));
        old_root_id = subvol_id_of(root);
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                _cleanup_free_ char *c = checkpoint_path(p, "gone", names[i]);
                write_file(root, names[i], names[i]);
                ASSERT_OK(pool_checkpoint_create(p, "gone", names[i]));
                ids[i] = subvol_id_of(c);
        }
        restore(p, "gone", "c2", TEST_QUOTA_MB, root);
        root_id = subvol_id_of(root);
        ASSERT_TRUE(root_id != old_root_id);
        wait_subvol_gone(pool_fd, old_root_id, "root replaced by a restore");
        sbdir = strjoin(pool_mount_path(p), "/sandboxes/gone");
        ASSERT_NOT_NULL(sbdir);
        check_file(sbdir, "root.new", NULL);

        ASSERT_OK(pool_sandbox_remove(p, "gone"));
        ckpts = strjoin(pool_mount_path(p), "/checkpoints");
        ASSERT_NOT_NULL(ckpts);
        check_file(ckpts, "gone", NULL);
        ASSERT_TRUE(access(sbdir, F_OK) < 0 && errno == ENOENT);
        check_owners(p, "");
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                wait_subvol_gone(pool_fd, ids[i], names[i]);
        wait_subvol_gone(pool_fd, root_id, "root");
        {
                _cleanup_free_ uint64_t *qg = NULL;
                size_t n = 0, left = 0;
                uint64_t tpl_id;
                _cleanup_free_ char *tpl = NULL;
                ASSERT_OK(pool_template_path(p, "base", &tpl));
                tpl_id = subvol_id_of(tpl);
                ASSERT_OK(btrfs_qgroup_list(pool_fd, &qg, &n));
                for (size_t i = 0; i < n; i++)
                        if (qg[i] >= 256 && qg[i] != tpl_id) {
                                fprintf(stderr, "  qgroup left: 0/%llu\n", (unsigned long long) qg[i]);
                                left++;
                        }
                ASSERT_EQ(left, 0);
        }
        ASSERT_OK(pool_template_remove(p, "base"));
        pool_fd = safe_close(pool_fd);
        ASSERT_OK(pool_release(p));
        test_pool_check_no_residue(dir);
}

/* What a crash in the middle of a restore leaves (the new root or upper beside
 * the live one) is removed by the next restore; a failed restore changes nothing. */
static void exercise_restore_leftovers(Pool *p, const char *dir) {
        _cleanup_free_ char *root = NULL, *again = NULL, *sbdir = NULL;
        const char *aside = pool_kind(p) == POOL_BTRFS ? "root.new" : "upper.new";

        import_template(p, dir);
        ASSERT_OK(pool_sandbox_create(p, "base", "crash", 0, &root));
        make_v1(root);
        ASSERT_OK(pool_checkpoint_create(p, "crash", "c1"));
        make_v2(root);
        sbdir = strjoin(pool_mount_path(p), "/sandboxes/crash");
        ASSERT_NOT_NULL(sbdir);
        /* A half-made new root from an earlier, interrupted restore. */
        if (pool_kind(p) == POOL_BTRFS) {
                _cleanup_close_ int sb_fd = open(sbdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC),
                                    root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                ASSERT_TRUE(sb_fd >= 0 && root_fd >= 0);
                ASSERT_OK(btrfs_subvol_snapshot(root_fd, sb_fd, aside, false));
        } else {
                _cleanup_free_ char *a = test_path_join(sbdir, aside);
                ASSERT_OK(mkdir(a, 0755));
                write_file(a, "junk", "junk\n");
        }

        /* A failed restore (no such checkpoint) leaves the root as it was. */
        ASSERT_ERRNO(pool_sandbox_restore(p, "crash", "c9", 0, &again), ENOENT);
        check_v2(root);

        restore(p, "crash", "c1", 0, root);
        check_v1(root);
        check_file(root, "junk", NULL);
        check_file(sbdir, aside, NULL);
        if (pool_kind(p) == POOL_OVERLAY) {
                /* After a reboot (root unmounted) it mounts again on the restored upper. */
                _cleanup_free_ char *path = NULL;
                ASSERT_OK(umount2(root, 0));
                ASSERT_OK(pool_sandbox_root_path(p, "crash", &path));
                check_v1(path);
                /* Checkpoints of an unmounted root mount it first. */
                ASSERT_OK(umount2(root, 0));
                ASSERT_OK(pool_checkpoint_create(p, "crash", "c2"));
                {
                        _cleanup_free_ char *c2 = checkpoint_path(p, "crash", "c2");
                        check_v1(c2);
                }
        }
        ASSERT_OK(pool_sandbox_remove(p, "crash"));
        check_owners(p, "");
        ASSERT_OK(pool_template_remove(p, "base"));
}

TEST(btrfs_restore_leftovers) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();

        test_pool_need_btrfs();
        ASSERT_OK(open_pool(dir, "btrfs", &p));
        exercise_restore_leftovers(p, dir);
        ASSERT_OK(pool_release(p));
        test_pool_check_no_residue(dir);
}

TEST(overlay_restore_leftovers) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();

        test_pool_need_overlay();
        ASSERT_OK(open_pool(dir, "overlay", &p));
        exercise_restore_leftovers(p, dir);
        ASSERT_OK(pool_release(p));
}

/* The overlay fallback copies: its cost grows with the root (printed, not asserted). */
TEST(overlay_checkpoint_cost) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();
        static const uint64_t sizes[] = { TEST_SMALL_BYTES, 64 * TEST_SMALL_BYTES };

        test_pool_need_overlay();
        ASSERT_OK(open_pool(dir, "overlay", &p));
        import_template(p, dir);
        for (size_t i = 0; i < ELEMENTSOF(sizes); i++) {
                _cleanup_free_ char *root = NULL, *again = NULL, *child = NULL;
                uint64_t written, t0, ckpt_usec, restore_usec, branch_usec;
                char id[16];

                snprintf(id, sizeof id, "cost%zu", i);
                ASSERT_OK(pool_sandbox_create(p, "base", id, 0, &root));
                ASSERT_EQ(fill_until_error(root, "blob", sizes[i], &written), 0);
                t0 = test_now_usec();
                ASSERT_OK(pool_checkpoint_create(p, id, "c1"));
                ckpt_usec = test_now_usec() - t0;
                t0 = test_now_usec();
                ASSERT_OK(pool_sandbox_restore(p, id, "c1", 0, &again));
                restore_usec = test_now_usec() - t0;
                t0 = test_now_usec();
                ASSERT_OK(pool_sandbox_branch(p, id, NULL, "costchild", 0, &child));
                branch_usec = test_now_usec() - t0;
                fprintf(stderr, "  overlay, root with %llu MiB: checkpoint %.1f ms, restore %.1f ms, branch %.1f ms\n",
                        (unsigned long long) (sizes[i] >> 20), ckpt_usec / 1000.0, restore_usec / 1000.0,
                        branch_usec / 1000.0);
                ASSERT_OK(pool_sandbox_remove(p, "costchild"));
                ASSERT_OK(pool_sandbox_remove(p, id));
        }
        ASSERT_OK(pool_release(p));
}

/* One byte of a file at an offset. */
static char byte_at(const char *path, off_t off) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        char c = 0;
        ASSERT_TRUE(fd >= 0);
        ASSERT_EQ(pread(fd, &c, 1, off), 1);
        return c;
}

static void put_byte(const char *path, off_t off, char c) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_EQ(pwrite(fd, &c, 1, off), 1);
}

/* vm sandboxes: checkpoints hold disk.img (a reflink) and memory.state;
 * restore puts the disk back in place, branches clone it, and base
 * snapshots are found only under their key. */
TEST(btrfs_vm_disk_checkpoints) {
        _cleanup_pool_ Pool *p = NULL;
        _cleanup_free_ char *disk = NULL, *ckdir = NULL, *mem = NULL, *d2 = NULL, *d3 = NULL, *restored = NULL,
                            *saved = NULL, *base = NULL, *found = NULL, *list = NULL;
        const char *dir = test_tmpdir();
        const off_t off = 3 * 1024 * 1024 + 7;
        char stamp[128];
        struct stat st;

        test_pool_need_btrfs();
        if (access("/usr/sbin/mkfs.ext4", X_OK) < 0 && access("/sbin/mkfs.ext4", X_OK) < 0)
                test_skip("mkfs.ext4 not installed (e2fsprogs)");
        ASSERT_OK(open_pool(dir, "btrfs", &p));
        import_template(p, dir);
        ASSERT_OK(pool_sandbox_disk_create(p, "base", "vm1", 0, 4242, &disk));
        ASSERT_TRUE(pool_sandbox_is_vm(p, "vm1"));
        put_byte(disk, off, 'A');

        ASSERT_OK(pool_disk_checkpoint_create(p, "vm1", "ck1", &ckdir));
        ASSERT_ERRNO(pool_disk_checkpoint_create(p, "vm1", "ck1", &mem), EEXIST);
        mem = test_path_join(ckdir, "memory.state");
        write_file(ckdir, "memory.state", "machine\n");
        ASSERT_OK(pool_disk_checkpoint_take_disk(p, "vm1", "ck1", false));
        ASSERT_TRUE(pool_checkpoint_exists(p, "vm1", "ck1"));
        ASSERT_TRUE(pool_disk_checkpoint_has_memory(p, "vm1", "ck1"));
        {
                uint64_t bytes = 0;
                ASSERT_OK(pool_checkpoint_usage(p, "vm1", "ck1", &bytes));
                ASSERT_TRUE(bytes > 0);
        }
        /* a disk-only checkpoint of a suspended sandbox takes its saved machine along only when asked */
        ASSERT_OK(pool_sandbox_memory_path(p, "vm1", &saved));
        {
                _cleanup_free_ char *d = NULL;
                ASSERT_OK(pool_disk_checkpoint_create(p, "vm1", "ck2", &d));
                ASSERT_OK(pool_disk_checkpoint_take_disk(p, "vm1", "ck2", true)); /* none saved: fine */
                ASSERT_FALSE(pool_disk_checkpoint_has_memory(p, "vm1", "ck2"));
        }

        /* restore in place: the checkpoint's disk, owned by the sandbox's uid; a suspend's memory goes */
        put_byte(disk, off, 'B');
        {
                _cleanup_close_ int fd = open(saved, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                ASSERT_TRUE(fd >= 0);
        }
        ASSERT_OK(pool_sandbox_disk_restore(p, "vm1", "ck1", 4242, &restored));
        ASSERT_STREQ(restored, disk);
        ASSERT_EQ(byte_at(disk, off), 'A');
        ASSERT_OK(stat(disk, &st));
        ASSERT_EQ(st.st_uid, 4242);
        ASSERT_TRUE(access(saved, F_OK) < 0);
        ASSERT_ERRNO(pool_sandbox_disk_restore(p, "vm1", "nosuch", 4242, &d3), ENOENT);

        /* branches: from the checkpoint and from the live disk, each its own */
        put_byte(disk, off, 'C');
        ASSERT_OK(pool_sandbox_disk_branch(p, "vm1", "ck1", "vm2", 4243, &d2));
        ASSERT_OK(pool_sandbox_disk_branch(p, "vm1", NULL, "vm3", 4244, &d3));
        ASSERT_EQ(byte_at(d2, off), 'A');
        ASSERT_EQ(byte_at(d3, off), 'C');
        put_byte(d3, off, 'D');
        ASSERT_EQ(byte_at(disk, off), 'C');
        ASSERT_OK(stat(d3, &st));
        ASSERT_EQ(st.st_uid, 4244);
        {
                _cleanup_free_ char *x = NULL;
                ASSERT_ERRNO(pool_sandbox_disk_branch(p, "vm1", NULL, "vm3", 4244, &x), EEXIST);
                ASSERT_ERRNO(pool_sandbox_disk_branch(p, "vm1", "nosuch", "vm4", 4244, &x), ENOENT);
                ASSERT_FALSE(pool_sandbox_exists(p, "vm4"));
        }

        /* base snapshots: found under their key only; another key removes it */
        ASSERT_OK(pool_template_image_stamp(p, "base", stamp, sizeof stamp));
        ASSERT_ERRNO(pool_base_lookup(p, "base", "m256-c1-d0", "k1", &found), ENOENT);
        ASSERT_OK(pool_base_begin(p, "base", "m256-c1-d0", &base));
        write_file(base, "disk.img", "disk");
        write_file(base, "memory.state", "memory");
        ASSERT_OK(pool_base_commit(p, "base", "m256-c1-d0", base, "k1"));
        ASSERT_OK(pool_base_lookup(p, "base", "m256-c1-d0", "k1", &found));
        ASSERT_OK(pool_base_list_json(p, &list));
        ASSERT_TRUE(strstr(list, "\"variant\":\"m256-c1-d0\"") != NULL);
        ASSERT_ERRNO(pool_base_lookup(p, "base", "m256-c1-d0", "k2", &found), ENOENT);
        ASSERT_ERRNO(pool_base_lookup(p, "base", "m256-c1-d0", "k1", &found), ENOENT);
        ASSERT_ERRNO(pool_base_begin(p, "base", "../x", &found), EINVAL);

        ASSERT_OK(pool_sandbox_remove(p, "vm1"));
        ASSERT_FALSE(pool_checkpoint_exists(p, "vm1", "ck1"));
        ASSERT_OK(pool_sandbox_remove(p, "vm2"));
        ASSERT_OK(pool_sandbox_remove(p, "vm3"));
        ASSERT_OK(pool_template_image_remove(p, "base"));
        ASSERT_OK(pool_release(p));
        test_pool_check_no_residue(dir);
}

/* A volume's copy with a checkpoint: taken beside it, read-only, never listed
 * as a checkpoint, gone with it; a volume made from it holds what the volume
 * held at the checkpoint, under its limit; a volume already here is moved
 * aside (kept: it may hold newer data), not replaced in place. */
TEST(btrfs_volume_copies) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();
        _cleanup_free_ char *root = NULL, *vol = NULL, *copy = NULL, *vols = NULL;
        _cleanup_strv_free_ char **cks = NULL, **copies = NULL;
        char name[64];
        uint64_t limit = 0;

        test_pool_need_btrfs();
        ASSERT_OK(open_pool(dir, "btrfs", &p));
        import_template(p, dir);
        ASSERT_OK(pool_sandbox_create(p, "base", "s1", TEST_QUOTA_MB, &root));
        ASSERT_OK(pool_volume_create(p, "v1", 16));
        ASSERT_OK(pool_volume_path(p, "v1", &vol));
        write_file(vol, "f", "at c1");

        ASSERT_ERRNO(pool_volume_copy_name("c1", "../v1", name, sizeof name), EINVAL);
        ASSERT_ERRNO(pool_volume_copy_name("c1", "v1", name, 4), ENAMETOOLONG);
        ASSERT_OK(pool_volume_copy_name("c1", "v1", name, sizeof name));
        ASSERT_STREQ(name, "c1.v1");
        ASSERT_TRUE(pool_volume_copy_name_valid("c1.v1"));
        ASSERT_FALSE(pool_volume_copy_name_valid("c1"));
        ASSERT_FALSE(pool_volume_copy_name_valid(".v1"));
        ASSERT_FALSE(pool_volume_copy_name_valid("c1."));
        ASSERT_FALSE(pool_volume_copy_name_valid("c1./v1"));
        ASSERT_FALSE(pool_volume_copy_name_valid(NULL));

        ASSERT_ERRNO(pool_volume_copy_create(p, "s1", "c1", "v1"), ENOENT); /* no checkpoint yet */
        ASSERT_OK(pool_checkpoint_create(p, "s1", "c1"));
        ASSERT_ERRNO(pool_volume_copy_create(p, "s1", "c1", "nosuch"), ENOENT);
        ASSERT_ERRNO(pool_volume_copy_create(p, "s1", "c1", "v/1"), EINVAL);
        ASSERT_OK(pool_volume_copy_create(p, "s1", "c1", "v1"));
        ASSERT_ERRNO(pool_volume_copy_create(p, "s1", "c1", "v1"), EEXIST);
        ASSERT_TRUE(pool_volume_copy_exists(p, "s1", "c1", "v1"));
        ASSERT_FALSE(pool_volume_copy_exists(p, "s1", "c2", "v1"));
        copy = checkpoint_path(p, "s1", "c1.v1");
        check_file(copy, "f", "at c1");
        {
                _cleanup_free_ char *f = test_path_join(copy, "f");
                ASSERT_TRUE(open(f, O_WRONLY | O_TRUNC | O_CLOEXEC) < 0 && errno == EROFS);
        }
        ASSERT_OK(pool_checkpoint_list(p, "s1", &cks));
        ASSERT_EQ(strv_length(cks), (size_t) 1);
        ASSERT_STREQ(cks[0], "c1");
        ASSERT_OK(pool_volume_copy_list(p, "s1", "v1", &copies));
        ASSERT_EQ(strv_length(copies), (size_t) 1);
        ASSERT_STREQ(copies[0], "c1.v1");
        copies = strv_free(copies);
        ASSERT_OK(pool_volume_copy_list(p, "nosuch", "v1", &copies));
        ASSERT_NULL(copies);

        /* the volume moves back here later: the copy wins, the newer data is kept aside */
        write_file(vol, "f", "after c1");
        ASSERT_ERRNO(pool_volume_from_copy(p, "s1", "c1", "v1", 0), ERANGE);
        ASSERT_ERRNO(pool_volume_from_copy(p, "s1", "c9", "v1", 16), ENOENT);
        ASSERT_OK(pool_volume_from_copy(p, "s1", "c1", "v1", 24));
        check_file(vol, "f", "at c1");
        write_file(vol, "g", "writable");
        {
                _cleanup_close_ int fd = open(vol, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                uint64_t id;
                ASSERT_TRUE(fd >= 0);
                ASSERT_OK(btrfs_subvol_get_id(fd, &id));
                ASSERT_OK(btrfs_qgroup_limit_exclusive_get(fd, BTRFS_QGROUPID(id), &limit));
                ASSERT_EQ(limit, UINT64_C(24) << 20);
        }
        vols = strjoin(pool_mount_path(p), "/volumes");
        ASSERT_NOT_NULL(vols);
        {
                _cleanup_(closedirp_) DIR *d = opendir(vols);
                _cleanup_close_ int vfd = -EBADF;
                struct dirent *de;
                char aside[256] = "";
                ASSERT_NOT_NULL(d);
                while ((de = readdir(d)))
                        if (startswith(de->d_name, "v1.stale-"))
                                snprintf(aside, sizeof aside, "%s", de->d_name);
                ASSERT_TRUE(aside[0] != 0);
                {
                        _cleanup_free_ char *stale = test_path_join(vols, aside);
                        check_file(stale, "f", "after c1");
                }
                vfd = open(vols, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                ASSERT_TRUE(vfd >= 0);
                ASSERT_OK(btrfs_subvol_remove(vfd, aside));
        }

        /* the copy goes with its checkpoint, the volume stays */
        ASSERT_OK(pool_checkpoint_remove(p, "s1", "c1"));
        ASSERT_FALSE(pool_volume_copy_exists(p, "s1", "c1", "v1"));
        check_file(vol, "f", "at c1");
        ASSERT_OK(pool_checkpoint_create(p, "s1", "c2"));
        ASSERT_OK(pool_volume_copy_create(p, "s1", "c2", "v1"));
        ASSERT_OK(pool_sandbox_remove(p, "s1")); /* and with all of its sandbox's */
        ASSERT_FALSE(pool_volume_copy_exists(p, "s1", "c2", "v1"));
        ASSERT_OK(pool_volume_remove(p, "v1"));
        ASSERT_OK(pool_release(p));
        test_pool_check_no_residue(dir);
}
