/* SPDX-License-Identifier: MIT */
/* The storage pool against the real kernel: a sparse btrfs image on a loop
 * device (skipped where btrfs, loop devices or root are missing) and the
 * overlayfs fallback. Test archives are written here by a small ustar writer,
 * so owners and hostile member names need no chown or helper tools. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>

#include "alloc-util.h"
#include "btrfs.h"
#include "fd-util.h"
#include "loop.h"
#include "mountinfo.h"
#include "pool-internal.h"
#include "pool.h"
#include "spawn.h"
#include "str-util.h"
#include "test-pool.h"
#include "test-tar.h"
#include "test.h"

#define TEST_POOL_MB 1024
#define TEST_QUOTA_MB 16
#define TEST_LATENCY_ROUNDS 20
#define TEST_CLEANER_WAIT_MSEC 20000

static int open_pool(const char *state_dir, const char *pool_path, const char *storage, Pool **ret) {
        return test_pool_open(state_dir, pool_path, TEST_POOL_MB, storage, ret);
}

#define DATA_SIZE (256 * 1024)

static const TarEntry good_tar[] = {
        { "./", '5', 0755, 0, 0 },
        { "./bin/", '5', 0755, 0, 0 },
        { "./bin/hello", '0', 0755, 0, 0, NULL, "#!/bin/sh\necho hello\n" },
        { "./bin/hello2", '1', 0755, 0, 0, "./bin/hello" },
        { "./bin/su-test", '0', 04755, 0, 0, NULL, "setuid\n" },
        { "./bin/link", '2', 0777, 0, 0, "hello" },
        { "./etc/", '5', 0755, 0, 0 },
        { "./etc/hostname", '0', 0644, 0, 0, NULL, "template\n" },
        { "./home/", '5', 0755, 0, 0 },
        { "./home/user/", '5', 0750, 1000, 1000 },
        { "./home/user/file", '0', 0640, 1000, 1000, NULL, "user data\n" },
        { "./data", '0', 0644, 0, 0, NULL, NULL, DATA_SIZE },
};

static char *make_good_tar(const char *dir) {
        char *p = test_path_join(dir, "good.tar");
        test_tar_write(p, good_tar, ELEMENTSOF(good_tar));
        return p;
}

static void check_template_tree(const char *root) {
        _cleanup_free_ char *hello = test_path_join(root, "bin/hello"), *hello2 = test_path_join(root, "bin/hello2"),
                            *su = test_path_join(root, "bin/su-test"), *link = test_path_join(root, "bin/link"),
                            *home = test_path_join(root, "home/user"), *file = test_path_join(root, "home/user/file"),
                            *content = NULL;
        struct stat st, st2;
        char target[64];
        ssize_t k;

        ASSERT_OK(stat(hello, &st));
        ASSERT_EQ(st.st_uid, 0);
        ASSERT_EQ(st.st_mode & 07777, 0755);
        ASSERT_OK(stat(hello2, &st2));
        ASSERT_EQ(st.st_ino, st2.st_ino); /* the hard link survived */
        ASSERT_OK(stat(su, &st));
        ASSERT_EQ(st.st_mode & 07777, 04755); /* setuid kept */
        ASSERT_OK(lstat(link, &st));
        ASSERT_TRUE(S_ISLNK(st.st_mode));
        k = readlink(link, target, sizeof target - 1);
        ASSERT_EQ(k, 5);
        target[k] = 0;
        ASSERT_STREQ(target, "hello");
        ASSERT_OK(stat(home, &st));
        ASSERT_EQ(st.st_uid, 1000);
        ASSERT_EQ(st.st_gid, 1000);
        ASSERT_EQ(st.st_mode & 07777, 0750);
        ASSERT_OK(stat(file, &st));
        ASSERT_EQ(st.st_uid, 1000);
        ASSERT_OK(read_full_file(file, 1024, &content, NULL));
        ASSERT_STREQ(content, "user data\n");
}

static void write_file(const char *path, const char *s) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(loop_write(fd, s, strlen(s)));
}

static void check_file(const char *root, const char *rel, const char *want) {
        _cleanup_free_ char *p = test_path_join(root, rel), *got = NULL;
        if (!want) {
                ASSERT_TRUE(access(p, F_OK) < 0 && errno == ENOENT);
                return;
        }
        ASSERT_OK(read_full_file(p, 4096, &got, NULL));
        ASSERT_STREQ(got, want);
}

/* Entries of a directory other than . and .., sorted, joined by ','. */
static char *dir_listing(const char *path) {
        _cleanup_strv_free_ char **l = NULL;
        DIR *d = opendir(path);
        struct dirent *de;
        char *s = strdup("");

        ASSERT_NOT_NULL(d);
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        ASSERT_OK(strv_extend(&l, de->d_name));
        closedir(d);
        for (size_t i = 0; l && l[i]; i++)
                for (size_t j = i + 1; l[j]; j++)
                        if (strcmp(l[i], l[j]) > 0) {
                                char *t = l[i];
                                l[i] = l[j];
                                l[j] = t;
                        }
        for (size_t i = 0; l && l[i]; i++) {
                char *n = strjoin(s, i ? "," : "", l[i]);
                free(s);
                s = n;
                ASSERT_NOT_NULL(s);
        }
        return s;
}

static void check_listing(const char *path, const char *want) {
        _cleanup_free_ char *got = dir_listing(path);
        ASSERT_STREQ(got, want);
}

static void check_no_residue(const char *state_dir, const char *image) {
        _cleanup_free_ char *mnt = test_path_join(state_dir, "pool"), *dev = NULL;
        ASSERT_ERRNO(mountinfo_lookup(mnt, NULL, NULL), ENOENT);
        if (image)
                ASSERT_ERRNO(loop_find_backing(image, &dev), ENOENT);
}

/* --- tests --- */

TEST(names) {
        static const char *const good_names[] = { "base", "debian", "a", "0", "py3.12", "a-b_c.d", "py@v1",
                                                  "py@v18446744073709551615", NULL };
        static const char *const bad_names[] = { "", ".", "..", ".hidden", "-x", "_x", "A", "a/b", "a b",
                                                 "a\n", "ä", "../x", "x/", "@v1", "py@", "py@v", "py@v0",
                                                 "py@v01", "py@1", "py@vx", "py@v1@v2", "py@v1/x",
                                                 "py@v123456789012345678901", NULL };
        char long_name[POOL_TEMPLATE_BASE_NAME_MAX + 2];

        for (const char *const *n = good_names; *n; n++)
                ASSERT_TRUE(pool_template_name_valid(*n));
        for (const char *const *n = bad_names; *n; n++)
                ASSERT_FALSE(pool_template_name_valid(*n));
        ASSERT_FALSE(pool_template_name_valid(NULL));
        memset(long_name, 'a', sizeof long_name);
        long_name[POOL_TEMPLATE_BASE_NAME_MAX] = 0;
        ASSERT_TRUE(pool_template_name_valid(long_name));
        long_name[POOL_TEMPLATE_BASE_NAME_MAX] = 'a';
        long_name[POOL_TEMPLATE_BASE_NAME_MAX + 1] = 0;
        ASSERT_FALSE(pool_template_name_valid(long_name));

        ASSERT_TRUE(pool_sandbox_id_valid("abc123"));
        ASSERT_FALSE(pool_sandbox_id_valid(""));
        ASSERT_FALSE(pool_sandbox_id_valid("a-b"));
        ASSERT_FALSE(pool_sandbox_id_valid("A"));
        ASSERT_FALSE(pool_sandbox_id_valid(".."));
        ASSERT_FALSE(pool_sandbox_id_valid(NULL));
        memset(long_name, 'a', sizeof long_name);
        long_name[POOL_SANDBOX_ID_MAX] = 0;
        ASSERT_TRUE(pool_sandbox_id_valid(long_name));
        long_name[POOL_SANDBOX_ID_MAX] = 'a';
        long_name[POOL_SANDBOX_ID_MAX + 1] = 0;
        ASSERT_FALSE(pool_sandbox_id_valid(long_name));

        ASSERT_STREQ(pool_kind_to_string(POOL_BTRFS), "btrfs");
        ASSERT_STREQ(pool_kind_to_string(POOL_OVERLAY), "overlay");
        ASSERT_NULL(pool_kind_to_string(_POOL_KIND_MAX));
        ASSERT_EQ(pool_kind_from_string("overlay"), POOL_OVERLAY);
        ASSERT_EQ(pool_kind_from_string("zfs"), -EINVAL);
}

TEST(open_bad_config) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();
        _cleanup_free_ char *file = test_path_join(dir, "plain-file");
        PoolConfig cfg = { .state_dir = "relative/dir", .size_mb = TEST_POOL_MB, .storage = "auto" };

        test_pool_need_root();
        ASSERT_ERRNO(pool_open(&cfg, &p), EINVAL);
        cfg.state_dir = dir;
        cfg.storage = "zfs";
        ASSERT_ERRNO(pool_open(&cfg, &p), EINVAL);
        cfg.storage = "btrfs";
        cfg.size_mb = 1;
        ASSERT_ERRNO(pool_open(&cfg, &p), EINVAL);
        ASSERT_ERRNO(pool_open(NULL, &p), EINVAL);
        {
                _cleanup_free_ char *comma = test_path_join(dir, "a,b");
                cfg.state_dir = comma;
                cfg.storage = "overlay";
                ASSERT_ERRNO(pool_open(&cfg, &p), EINVAL);
                cfg.state_dir = dir;
                cfg.storage = "btrfs";
        }

        /* A pool_path that is not btrfs: "btrfs" refuses it, "auto" falls back. */
        write_file(file, "x");
        cfg.size_mb = TEST_POOL_MB;
        cfg.pool_path = dir; /* /tmp: not btrfs here */
        {
                _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                ASSERT_TRUE(fd >= 0);
                if (btrfs_is_fs_fd(fd))
                        test_skip("the temp dir is on btrfs");
        }
        ASSERT_ERRNO(pool_open(&cfg, &p), EMEDIUMTYPE);
        cfg.pool_path = file;
        ASSERT_ERRNO(pool_open(&cfg, &p), ENOTDIR);
        cfg.pool_path = dir;
        cfg.storage = "auto";
        ASSERT_OK(open_pool(dir, dir, "auto", &p));
        ASSERT_EQ(pool_kind(p), POOL_OVERLAY);
        ASSERT_STREQ(pool_mount_path(p), dir);
}

TEST(btrfs_open_reuse_reattach) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();
        _cleanup_free_ char *image = test_path_join(dir, "pool.img"), *mnt = test_path_join(dir, "pool"),
                            *tar = NULL, *info = NULL, *loop1 = NULL, *fstype = NULL, *dev = NULL;
        _cleanup_close_ int dev_fd = -EBADF, img_fd = -EBADF;
        uint64_t t0;
        struct stat st;

        test_pool_need_btrfs();
        tar = make_good_tar(dir);

        t0 = test_now_usec();
        ASSERT_OK(open_pool(dir, NULL, "auto", &p));
        fprintf(stderr, "  fresh pool (create image, mkfs, attach, mount): %.1f ms\n", (test_now_usec() - t0) / 1000.0);
        ASSERT_EQ(pool_kind(p), POOL_BTRFS);
        ASSERT_STREQ(pool_mount_path(p), mnt);
        ASSERT_OK(stat(image, &st));
        ASSERT_EQ(st.st_size, (off_t) TEST_POOL_MB << 20);
        ASSERT_TRUE((uint64_t) st.st_blocks * 512 < (uint64_t) st.st_size / 4); /* sparse */
        ASSERT_OK(mountinfo_lookup(mnt, &fstype, NULL));
        ASSERT_STREQ(fstype, "btrfs");
        ASSERT_OK(stat(mnt, &st));
        ASSERT_EQ(st.st_mode & 07777, 0700);
        check_listing(mnt, "checkpoints,layers,sandboxes,templates,tmp,volumes");

        ASSERT_OK(pool_info_json(p, &info));
        fprintf(stderr, "  info: %s\n", info);
        ASSERT_TRUE(strstr(info, "\"kind\":\"btrfs\"") != NULL);
        ASSERT_TRUE(strstr(info, "\"quota\":true") != NULL);
        ASSERT_TRUE(strstr(info, "\"loop\":\"/dev/loop") != NULL);
        ASSERT_TRUE(strstr(info, "\"checkpoints\":\"snapshot\"") != NULL);
        ASSERT_OK(loop_find_backing(image, &loop1));
        ASSERT_OK(pool_template_import_tar(p, "base", tar, NULL));

        /* Forget the handle: the pool stays mounted, and the next open reuses it. */
        test_pool_drop(&p);
        ASSERT_OK(mountinfo_lookup(mnt, NULL, NULL));
        t0 = test_now_usec();
        ASSERT_OK(open_pool(dir, NULL, "auto", &p));
        fprintf(stderr, "  reopen of a mounted pool: %.1f ms\n", (test_now_usec() - t0) / 1000.0);
        ASSERT_EQ(pool_kind(p), POOL_BTRFS);
        ASSERT_TRUE(pool_template_exists(p, "base"));
        free(info);
        ASSERT_OK(pool_info_json(p, &info));
        ASSERT_TRUE(strstr(info, loop1) != NULL); /* same device, nothing attached twice */

        /* Release: no mount, no loop device. Calls on the released handle fail. */
        ASSERT_OK(pool_release(p));
        check_no_residue(dir, image);
        ASSERT_OK(pool_release(p)); /* idempotent */
        ASSERT_FALSE(pool_template_exists(p, "base"));
        ASSERT_ERRNO(pool_info_json(p, &info), ESTALE);
        test_pool_drop(&p);

        /* The image is there but not attached: attach and mount it again. */
        t0 = test_now_usec();
        ASSERT_OK(open_pool(dir, NULL, "auto", &p));
        fprintf(stderr, "  reopen of an unattached image: %.1f ms\n", (test_now_usec() - t0) / 1000.0);
        ASSERT_EQ(pool_kind(p), POOL_BTRFS);
        ASSERT_TRUE(pool_template_exists(p, "base"));
        ASSERT_OK(pool_release(p));
        check_no_residue(dir, image);
        test_pool_drop(&p);

        /* Attached to a loop device but not mounted: that device is used. */
        img_fd = open(image, O_RDWR | O_CLOEXEC);
        ASSERT_TRUE(img_fd >= 0);
        ASSERT_OK(loop_attach(img_fd, &dev_fd, &dev));
        ASSERT_OK(open_pool(dir, NULL, "btrfs", &p));
        dev_fd = safe_close(dev_fd); /* the mount holds it now */
        free(info);
        ASSERT_OK(pool_info_json(p, &info));
        ASSERT_TRUE(strstr(info, dev) != NULL);
        ASSERT_OK(pool_release(p));
        check_no_residue(dir, image);
}

TEST(btrfs_operator_pool_path) {
        _cleanup_pool_ Pool *mine = NULL, *op = NULL;
        const char *dir = test_tmpdir();
        _cleanup_free_ char *state2 = test_path_join(dir, "state2"), *mnt = test_path_join(dir, "pool"),
                            *image = test_path_join(dir, "pool.img"), *info = NULL, *tar = NULL, *root = NULL;

        test_pool_need_btrfs();
        tar = make_good_tar(dir);
        /* Stand-in for an operator's btrfs: the mount of a first pool. */
        ASSERT_OK(open_pool(dir, NULL, "btrfs", &mine));
        ASSERT_OK(open_pool(state2, mnt, "btrfs", &op));
        ASSERT_EQ(pool_kind(op), POOL_BTRFS);
        ASSERT_STREQ(pool_mount_path(op), mnt);
        ASSERT_OK(pool_info_json(op, &info));
        ASSERT_TRUE(strstr(info, "\"loop\":null") != NULL);
        ASSERT_OK(pool_template_import_tar(op, "base", tar, NULL));
        ASSERT_OK(pool_sandbox_create(op, "base", "op1", 0, &root));
        ASSERT_OK(pool_sandbox_remove(op, "op1"));
        ASSERT_OK(pool_template_remove(op, "base"));
        /* Never unmounted: not ours. */
        ASSERT_OK(pool_release(op));
        ASSERT_OK(mountinfo_lookup(mnt, NULL, NULL));
        ASSERT_OK(pool_release(mine));
        check_no_residue(dir, image);
}

/* Waits until the cleaner dropped subvolume id and its qgroup went away. */
static void wait_subvol_gone(int fd, uint64_t id, const char *what) {
        uint64_t t0 = test_now_usec();
        bool subvol_gone = false, qgroup_gone = false;

        for (unsigned waited = 0; waited < TEST_CLEANER_WAIT_MSEC; waited += 50) {
                ASSERT_OK(btrfs_sync(fd)); /* wakes the cleaner */
                subvol_gone = btrfs_subvol_exists(fd, id) == 0;
                qgroup_gone = btrfs_qgroup_get(fd, BTRFS_QGROUPID(id), NULL, NULL) == -ENOENT;
                if (subvol_gone && qgroup_gone)
                        break;
                if (subvol_gone && !qgroup_gone && waited > 1000) {
                        /* Kernels that keep the qgroup: the sweep at open removes it. */
                        fprintf(stderr, "  %s: qgroup 0/%llu kept after the subvolume was dropped; sweeping\n", what,
                                (unsigned long long) id);
                        ASSERT_TRUE(btrfs_qgroup_remove_stale(fd) > 0);
                }
                test_sleep_msec(50);
        }
        ASSERT_TRUE(subvol_gone);
        ASSERT_TRUE(qgroup_gone);
        fprintf(stderr, "  %s: subvolume %llu and qgroup gone %.0f ms after removal\n", what,
                (unsigned long long) id, (test_now_usec() - t0) / 1000.0);
}

static uint64_t subvol_id_of(const char *path) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        uint64_t id = 0;
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(btrfs_subvol_get_id(fd, &id));
        return id;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

static void print_latency(const char *what, uint64_t *usec, size_t n) {
        qsort(usec, n, sizeof *usec, cmp_u64);
        fprintf(stderr, "  %s latency over %zu: p50 %.2f ms, p90 %.2f ms, max %.2f ms\n", what, n,
                usec[n / 2] / 1000.0, usec[n * 9 / 10] / 1000.0, usec[n - 1] / 1000.0);
}

/* Both kinds: import, three roots, isolation, removal, failed imports. */
static void exercise_pool(Pool *p, const char *dir) {
        _cleanup_free_ char *tar = make_good_tar(dir), *tpl = NULL, *bad = test_path_join(dir, "bad.tar"),
                            *trunc = test_path_join(dir, "truncated.tar"), *evil = test_path_join(dir, "evil.tar"),
                            *esc = test_path_join(dir, "escape.tar"), *outside = test_path_join(dir, "outside"),
                            *pool_dir = strdup(pool_mount_path(p)), *tmp = NULL, *tpls = NULL, *sbs = NULL;
        _cleanup_strv_free_ char **names = NULL, **ids = NULL;
        char *roots[3] = {};
        const char *sandbox_ids[3] = { "sb1", "sb2", "sb3" };
        uint64_t size = 0, create_usec[TEST_LATENCY_ROUNDS], remove_usec[TEST_LATENCY_ROUNDS];

        ASSERT_NOT_NULL(pool_dir);
        tmp = test_path_join(pool_dir, "tmp");
        tpls = test_path_join(pool_dir, "templates");
        sbs = test_path_join(pool_dir, "sandboxes");

        /* Bad names and missing things. */
        ASSERT_ERRNO(pool_template_import_tar(p, "Bad", tar, NULL), EINVAL);
        ASSERT_ERRNO(pool_template_import_tar(p, "../x", tar, NULL), EINVAL);
        ASSERT_ERRNO(pool_template_import_tar(p, "x", "/nonexistent.tar", NULL), ENOENT);
        ASSERT_ERRNO(pool_template_import_tar(p, "x", dir, NULL), EINVAL); /* a directory */
        ASSERT_ERRNO(pool_template_remove(p, "missing"), ENOENT);
        ASSERT_ERRNO(pool_template_remove(p, "../templates"), EINVAL);
        ASSERT_ERRNO(pool_template_path(p, "missing", &tpl), ENOENT);
        ASSERT_ERRNO(pool_sandbox_create(p, "missing", "sb1", 0, &roots[0]), ENOENT);
        check_listing(sbs, "");

        /* Import. */
        ASSERT_OK(pool_template_import_tar(p, "base", tar, &size));
        fprintf(stderr, "  template size: %llu bytes\n", (unsigned long long) size);
        ASSERT_TRUE(size >= DATA_SIZE);
        ASSERT_TRUE(size < DATA_SIZE + 256 * 1024);
        ASSERT_ERRNO(pool_template_import_tar(p, "base", tar, NULL), EEXIST);
        ASSERT_TRUE(pool_template_exists(p, "base"));
        ASSERT_FALSE(pool_template_exists(p, "other"));
        ASSERT_OK(pool_template_path(p, "base", &tpl));
        check_template_tree(tpl);
        ASSERT_OK(pool_template_list(p, &names));
        ASSERT_EQ(strv_length(names), 1);
        ASSERT_STREQ(names[0], "base");
        check_listing(tmp, "");

        /* Failed imports leave nothing: garbage, a truncated archive, ".."
         * members, a symlink leading out of the root. */
        write_file(bad, "this is not a tar archive at all, just some bytes........\n");
        ASSERT_ERRNO(pool_template_import_tar(p, "bad", bad, NULL), EBADMSG);
        {
                _cleanup_free_ char *full = NULL;
                size_t n;
                _cleanup_close_ int fd = -EBADF;
                ASSERT_OK(read_full_file(tar, 16 << 20, &full, &n));
                fd = open(trunc, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                ASSERT_TRUE(fd >= 0);
                ASSERT_OK(loop_write(fd, full, n - 1024 - DATA_SIZE / 2)); /* cut inside ./data */
        }
        ASSERT_ERRNO(pool_template_import_tar(p, "trunc", trunc, NULL), EBADMSG);
        {
                const TarEntry e[] = {
                        { "./ok", '0', 0644, 0, 0, NULL, "ok\n" },
                        { "../../../../outside-dotdot", '0', 0644, 0, 0, NULL, "evil\n" },
                };
                test_tar_write(evil, e, ELEMENTSOF(e));
        }
        ASSERT_ERRNO(pool_template_import_tar(p, "evil", evil, NULL), EBADMSG);
        ASSERT_OK(mkdir(outside, 0755));
        {
                const TarEntry e[] = {
                        { "./esc", '2', 0777, 0, 0, outside },
                        { "./esc/pwned", '0', 0644, 0, 0, NULL, "evil\n" },
                };
                test_tar_write(esc, e, ELEMENTSOF(e));
        }
        ASSERT_ERRNO(pool_template_import_tar(p, "esc", esc, NULL), EBADMSG);
        check_listing(outside, "");
        check_listing(tmp, "");

        /* Device nodes are dropped; a hard link cannot reach a host file. */
        {
                _cleanup_free_ char *devs = test_path_join(dir, "devs.tar"), *devtpl = NULL, *pw = NULL;
                struct stat host_pw, st;
                const TarEntry e[] = {
                        { "./dev/", '5', 0755, 0, 0 },
                        { "./dev/vda", '4', 0666, 0, 0, .major = 253, .minor = 0 },
                        { "./dev/mem", '3', 0666, 0, 0, .major = 1, .minor = 1 },
                        { "./dev/fifo", '6', 0644, 0, 0 },
                        { "./pw", '1', 0644, 0, 0, "/etc/passwd" },
                };
                test_tar_write(devs, e, ELEMENTSOF(e));
                ASSERT_OK(stat("/etc/passwd", &host_pw));
                /* GNU tar strips the leading '/' of the link target: it names a
                 * member that is not there, so the import fails. */
                ASSERT_ERRNO(pool_template_import_tar(p, "devs", devs, NULL), EBADMSG);
                test_tar_write(devs, e, ELEMENTSOF(e) - 1);
                ASSERT_OK(pool_template_import_tar(p, "devs", devs, NULL));
                ASSERT_OK(pool_template_path(p, "devs", &devtpl));
                check_listing(devtpl, "dev");
                pw = test_path_join(devtpl, "dev");
                check_listing(pw, "fifo");
                free(pw);
                pw = test_path_join(devtpl, "dev/fifo");
                ASSERT_OK(lstat(pw, &st));
                ASSERT_TRUE(S_ISFIFO(st.st_mode));
                ASSERT_OK(pool_template_remove(p, "devs"));
        }
        check_listing(tmp, "");
        check_listing(tpls, "base");
        check_listing(pool_dir, "checkpoints,layers,sandboxes,templates,tmp,volumes");

        /* Three roots from the template; writes in one show nowhere else. */
        for (size_t i = 0; i < ELEMENTSOF(roots); i++) {
                _cleanup_free_ char *again = NULL;
                ASSERT_OK(pool_sandbox_create(p, "base", sandbox_ids[i], 64, &roots[i]));
                ASSERT_TRUE(pool_sandbox_exists(p, sandbox_ids[i]));
                ASSERT_OK(pool_sandbox_root_path(p, sandbox_ids[i], &again));
                ASSERT_STREQ(again, roots[i]);
                check_template_tree(roots[i]);
        }
        ASSERT_ERRNO(pool_sandbox_create(p, "base", "sb1", 0, &tpl), EEXIST);
        ASSERT_ERRNO(pool_sandbox_create(p, "base", "SB", 0, &tpl), EINVAL);
        ASSERT_ERRNO(pool_sandbox_create(p, "base", "a/b", 0, &tpl), EINVAL);
        ASSERT_ERRNO(pool_sandbox_create(p, "Base", "ok", 0, &tpl), EINVAL);
        ASSERT_ERRNO(pool_sandbox_remove(p, "../x"), EINVAL);
        ASSERT_OK(pool_sandbox_remove(p, "nonexistent"));
        ASSERT_FALSE(pool_sandbox_exists(p, "nonexistent"));
        ASSERT_ERRNO(pool_sandbox_root_path(p, "nonexistent", &tpl), ENOENT);
        {
                _cleanup_free_ char *f0 = test_path_join(roots[0], "etc/hostname"),
                                    *new0 = test_path_join(roots[0], "home/user/new"),
                                    *del0 = test_path_join(roots[0], "bin/hello");
                write_file(f0, "changed\n");
                write_file(new0, "new\n");
                ASSERT_OK(unlink(del0));
        }
        check_file(roots[0], "etc/hostname", "changed\n");
        check_file(roots[0], "home/user/new", "new\n");
        check_file(roots[0], "bin/hello", NULL);
        for (size_t i = 1; i < ELEMENTSOF(roots); i++) {
                check_file(roots[i], "etc/hostname", "template\n");
                check_file(roots[i], "home/user/new", NULL);
                check_file(roots[i], "bin/hello", "#!/bin/sh\necho hello\n");
        }
        check_file(tpl, "etc/hostname", "template\n");
        check_file(tpl, "home/user/new", NULL);
        check_file(tpl, "bin/hello", "#!/bin/sh\necho hello\n");
        ASSERT_OK(pool_sandbox_list(p, &ids));
        ASSERT_EQ(strv_length(ids), 3);
        ASSERT_STREQ(ids[0], "sb1");
        ASSERT_STREQ(ids[2], "sb3");

        /* Remove: nothing of the sandbox stays; the template is untouched. */
        for (size_t i = 0; i < ELEMENTSOF(roots); i++) {
                ASSERT_OK(pool_sandbox_remove(p, sandbox_ids[i]));
                ASSERT_FALSE(pool_sandbox_exists(p, sandbox_ids[i]));
                ASSERT_ERRNO(mountinfo_lookup(roots[i], NULL, NULL), ENOENT);
                ASSERT_OK(pool_sandbox_remove(p, sandbox_ids[i])); /* again: fine */
                free(roots[i]);
        }
        check_listing(sbs, "");
        check_template_tree(tpl);

        /* Latency of one root: create and remove (with and without a quota). */
        for (unsigned quota = 0; quota < 2; quota++) {
                char what[64];
                for (size_t i = 0; i < TEST_LATENCY_ROUNDS; i++) {
                        _cleanup_free_ char *root = NULL;
                        uint64_t t0 = test_now_usec();
                        ASSERT_OK(pool_sandbox_create(p, "base", "lat", quota ? 1024 : 0, &root));
                        create_usec[i] = test_now_usec() - t0;
                        t0 = test_now_usec();
                        ASSERT_OK(pool_sandbox_remove(p, "lat"));
                        remove_usec[i] = test_now_usec() - t0;
                }
                snprintf(what, sizeof what, "%s root create (%s)", pool_kind_to_string(pool_kind(p)),
                         quota ? "disk_mb=1024" : "no quota");
                print_latency(what, create_usec, TEST_LATENCY_ROUNDS);
                snprintf(what, sizeof what, "%s root remove (%s)", pool_kind_to_string(pool_kind(p)),
                         quota ? "disk_mb=1024" : "no quota");
                print_latency(what, remove_usec, TEST_LATENCY_ROUNDS);
        }
        check_listing(sbs, "");

        /* Template removal. */
        ASSERT_OK(pool_template_remove(p, "base"));
        ASSERT_FALSE(pool_template_exists(p, "base"));
        check_listing(tpls, "");
        strv_free(names);
        names = NULL;
        ASSERT_OK(pool_template_list(p, &names));
        ASSERT_EQ(strv_length(names), 0);
}

TEST(btrfs_templates_and_sandboxes) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();
        _cleanup_free_ char *image = test_path_join(dir, "pool.img");

        test_pool_need_btrfs();
        ASSERT_OK(open_pool(dir, NULL, "btrfs", &p));
        exercise_pool(p, dir);
        ASSERT_OK(pool_release(p));
        check_no_residue(dir, image);
}

TEST(btrfs_template_readonly_and_cleanup) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();
        _cleanup_free_ char *image = test_path_join(dir, "pool.img"), *tar = NULL, *tpl = NULL, *root = NULL,
                            *newfile = NULL, *nested = NULL, *nested2 = NULL;
        _cleanup_close_ int pool_fd = -EBADF, root_fd = -EBADF;
        uint64_t tpl_id, root_id, nested_id, nested2_id;

        test_pool_need_btrfs();
        tar = make_good_tar(dir);
        ASSERT_OK(open_pool(dir, NULL, "btrfs", &p));
        pool_fd = open(pool_mount_path(p), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(pool_fd >= 0);
        ASSERT_OK(pool_template_import_tar(p, "base", tar, NULL));
        ASSERT_OK(pool_template_path(p, "base", &tpl));

        /* The template is a read-only subvolume. */
        {
                _cleanup_close_ int fd = open(tpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                ASSERT_TRUE(fd >= 0);
                ASSERT_EQ(btrfs_is_subvol_fd(fd), 1);
                ASSERT_EQ(btrfs_subvol_is_readonly(fd), 1);
        }
        newfile = test_path_join(tpl, "newfile");
        ASSERT_TRUE(open(newfile, O_WRONLY | O_CREAT | O_CLOEXEC, 0644) < 0 && errno == EROFS);
        tpl_id = subvol_id_of(tpl);

        /* A root with nested subvolumes (one read-only), as hostile code could make them. */
        ASSERT_OK(pool_sandbox_create(p, "base", "nest", 0, &root));
        root_id = subvol_id_of(root);
        root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(root_fd >= 0);
        ASSERT_OK(btrfs_subvol_create(root_fd, "inner"));
        nested = test_path_join(root, "inner");
        {
                _cleanup_close_ int fd = open(nested, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                ASSERT_TRUE(fd >= 0);
                ASSERT_OK(btrfs_subvol_snapshot(root_fd, fd, "ro-snap", true));
        }
        nested2 = test_path_join(nested, "ro-snap");
        nested_id = subvol_id_of(nested);
        nested2_id = subvol_id_of(nested2);
        root_fd = safe_close(root_fd);
        ASSERT_OK(pool_sandbox_remove(p, "nest"));
        ASSERT_FALSE(pool_sandbox_exists(p, "nest"));
        wait_subvol_gone(pool_fd, nested2_id, "nested read-only subvolume");
        wait_subvol_gone(pool_fd, nested_id, "nested subvolume");
        wait_subvol_gone(pool_fd, root_id, "sandbox root");

        ASSERT_OK(pool_template_remove(p, "base"));
        wait_subvol_gone(pool_fd, tpl_id, "template");
        {
                _cleanup_free_ uint64_t *qg = NULL;
                size_t n = 0;
                ASSERT_OK(btrfs_qgroup_list(pool_fd, &qg, &n));
                for (size_t i = 0; i < n; i++)
                        fprintf(stderr, "  qgroup left: 0/%llu\n", (unsigned long long) qg[i]);
                ASSERT_TRUE(n <= 1); /* at most the top level's 0/5 */
        }
        pool_fd = safe_close(pool_fd);
        ASSERT_OK(pool_release(p));
        check_no_residue(dir, image);
}

/* Spare roots: made of the template only, taken by a create, never given
 * once the template under that name is another subvolume, never a deleted
 * sandbox's root, all gone with drop_all. */
static char *spare_path(Pool *p, unsigned i) {
        _cleanup_free_ char *tmp = test_path_join(pool_mount_path(p), "tmp"), *list = dir_listing(tmp);
        char *save = NULL, *tok = strtok_r(list, ",", &save);
        for (unsigned k = 0; tok && k < i; k++)
                tok = strtok_r(NULL, ",", &save);
        return tok ? test_path_join(tmp, tok) : NULL;
}

TEST(btrfs_spare_roots) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();
        _cleanup_free_ char *image = test_path_join(dir, "pool.img"), *tar = NULL, *ra = NULL, *rb = NULL,
                            *rc = NULL, *mine = NULL, *sp = NULL, *marker = NULL, *tmp = NULL;

        test_pool_need_btrfs();
        tar = make_good_tar(dir);
        ASSERT_OK(open_pool(dir, NULL, "btrfs", &p));
        ASSERT_OK(pool_template_import_tar(p, "base", tar, NULL));
        tmp = test_path_join(pool_mount_path(p), "tmp");

        /* none wanted yet; then as many as asked for, no more */
        ASSERT_EQ(pool_spare_make(p, 2), 0);
        ASSERT_EQ(pool_spare_make(p, 0), -EOPNOTSUPP);
        pool_spare_want(p, "base");
        pool_spare_want(p, "no-such");
        ASSERT_EQ(pool_spare_make(p, 2), 1);
        ASSERT_TRUE(pool_spare_make(p, 2) < 0); /* "no-such" is the shorter: not there, no longer wanted */
        ASSERT_EQ(pool_spare_make(p, 2), 1);
        ASSERT_EQ(pool_spare_make(p, 2), 0);
        ASSERT_EQ(pool_spare_count(p, "base"), 2U);
        ASSERT_EQ(pool_spare_count(p, NULL), 2U);

        /* a create takes one: the template's tree, writable, at its place */
        ASSERT_OK(pool_sandbox_create(p, "base", "a", TEST_QUOTA_MB, &ra));
        ASSERT_EQ(pool_spare_count(p, "base"), 1U);
        check_template_tree(ra);
        {
                /* its quota is its own (the spare had none) */
                _cleanup_close_ int fd = open(ra, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                uint64_t limit = 0;
                ASSERT_TRUE(fd >= 0);
                ASSERT_OK(btrfs_qgroup_limit_exclusive_get(fd, BTRFS_QGROUPID(subvol_id_of(ra)), &limit));
                ASSERT_EQ(limit, (uint64_t) TEST_QUOTA_MB << 20);
        }
        mine = test_path_join(ra, "mine");
        write_file(mine, "a's\n");
        ASSERT_OK(pool_sandbox_remove(p, "a"));

        /* a deleted sandbox's root is not a spare: the next ones are the template's */
        ASSERT_EQ(pool_spare_make(p, 2), 1);
        ASSERT_OK(pool_sandbox_create(p, "base", "b", TEST_QUOTA_MB, &rb));
        check_file(rb, "mine", NULL);
        ASSERT_OK(pool_sandbox_remove(p, "b"));

        /* a spare of the template "base" was before: a create of the new one never gets it */
        sp = spare_path(p, 0);
        ASSERT_NOT_NULL(sp);
        marker = test_path_join(sp, "old-template");
        write_file(marker, "stale\n");
        ASSERT_OK(pool_template_remove(p, "base"));
        ASSERT_OK(pool_template_import_tar(p, "base", tar, NULL));
        ASSERT_EQ(pool_spare_count(p, "base"), 1U);
        ASSERT_OK(pool_sandbox_create(p, "base", "c", TEST_QUOTA_MB, &rc));
        check_template_tree(rc);
        check_file(rc, "old-template", NULL);
        ASSERT_EQ(pool_spare_count(p, "base"), 0U); /* stale: removed, not given */
        ASSERT_OK(pool_sandbox_remove(p, "c"));

        /* a template removed: its spares go with it at the next top-up */
        ASSERT_EQ(pool_spare_make(p, 2), 1);
        ASSERT_EQ(pool_spare_count(p, "base"), 1U);
        ASSERT_OK(pool_template_remove(p, "base"));
        ASSERT_TRUE(pool_spare_make(p, 2) < 0);
        ASSERT_EQ(pool_spare_count(p, NULL), 0U);
        check_listing(tmp, "");
        ASSERT_OK(pool_template_import_tar(p, "base", tar, NULL));
        pool_spare_want(p, "base");

        /* drained: none left in tmp/ */
        ASSERT_EQ(pool_spare_make(p, 2), 1);
        ASSERT_EQ(pool_spare_count(p, NULL), 1U);
        pool_spare_drop_all(p);
        ASSERT_EQ(pool_spare_count(p, NULL), 0U);
        check_listing(tmp, "");
        ASSERT_OK(pool_template_remove(p, "base"));
        ASSERT_OK(pool_release(p));
        check_no_residue(dir, image);
}

/* Versions: name@vN beside name; promote makes name a read-only copy of a
 * version, which stays; a sandbox made from an old version keeps its files. */
TEST(btrfs_template_versions) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();
        _cleanup_free_ char *image = test_path_join(dir, "pool.img"), *tar = NULL, *tpl = NULL, *root = NULL;
        _cleanup_strv_free_ char **names = NULL;

        test_pool_need_btrfs();
        tar = make_good_tar(dir);
        ASSERT_OK(open_pool(dir, NULL, "btrfs", &p));
        ASSERT_ERRNO(pool_template_promote(p, "base", 1), ENOENT);
        ASSERT_ERRNO(pool_template_promote(p, "base", 0), EINVAL);
        ASSERT_ERRNO(pool_template_promote(p, "base@v1", 1), EINVAL);
        ASSERT_ERRNO(pool_template_promote(p, "../x", 1), EINVAL);
        ASSERT_OK(pool_template_import_tar(p, "base@v1", tar, NULL));
        ASSERT_OK(pool_template_promote(p, "base", 1));
        ASSERT_TRUE(pool_template_exists(p, "base"));
        ASSERT_OK(pool_template_import_tar(p, "base@v2", tar, NULL));
        ASSERT_OK(pool_template_promote(p, "base", 2)); /* replaces base */
        ASSERT_TRUE(pool_template_exists(p, "base@v1"));
        ASSERT_OK(pool_template_path(p, "base", &tpl));
        {
                _cleanup_close_ int fd = open(tpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                ASSERT_TRUE(fd >= 0);
                ASSERT_EQ(btrfs_subvol_is_readonly(fd), 1);
        }
        ASSERT_OK(pool_template_list(p, &names));
        ASSERT_EQ(strv_length(names), 3);
        ASSERT_OK(pool_sandbox_create(p, "base@v1", "old1", 0, &root));
        ASSERT_OK(pool_template_remove(p, "base@v1"));
        ASSERT_TRUE(access(root, F_OK) == 0);
        ASSERT_OK(pool_sandbox_remove(p, "old1"));
        ASSERT_OK(pool_template_remove(p, "base@v2"));
        ASSERT_OK(pool_template_remove(p, "base"));
        ASSERT_OK(pool_release(p));
        check_no_residue(dir, image);
}

TEST(btrfs_quota) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();
        _cleanup_free_ char *image = test_path_join(dir, "pool.img"), *tar = NULL, *root = NULL, *root2 = NULL,
                            *big = NULL, *big2 = NULL, *buf = NULL;
        _cleanup_close_ int fd = -EBADF, pool_fd = -EBADF;
        uint64_t written = 0, usage = 0, limit = (uint64_t) TEST_QUOTA_MB << 20;
        const size_t chunk = 1 << 20;
        int err = 0;

        test_pool_need_btrfs();
        tar = make_good_tar(dir);
        ASSERT_OK(open_pool(dir, NULL, "btrfs", &p));
        ASSERT_OK(pool_template_import_tar(p, "base", tar, NULL));
        ASSERT_OK(pool_sandbox_create(p, "base", "q1", TEST_QUOTA_MB, &root));
        ASSERT_OK(pool_sandbox_create(p, "base", "q2", 0, &root2));
        buf = malloc(chunk);
        ASSERT_NOT_NULL(buf);
        memset(buf, 0x5a, chunk);

        /* Rewriting shared template data costs nothing against the limit until
         * it is written; fresh data counts. Write 4x the limit. */
        big = test_path_join(root, "big");
        fd = open(big, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ASSERT_TRUE(fd >= 0);
        while (written < 4 * limit) {
                ssize_t k = write(fd, buf, chunk);
                if (k < 0) {
                        err = errno;
                        break;
                }
                written += (uint64_t) k;
        }
        if (err == 0 && fsync(fd) < 0)
                err = errno;
        fprintf(stderr, "  quota %d MB: write failed after %.1f MB with %s\n", TEST_QUOTA_MB,
                written / 1048576.0, err ? strerror(err) : "no error");
        ASSERT_EQ(err, EDQUOT);
        ASSERT_TRUE(written <= limit);
        ASSERT_TRUE(written >= limit / 2);
        fd = safe_close(fd);

        pool_fd = open(pool_mount_path(p), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(pool_fd >= 0);
        ASSERT_OK(syncfs(pool_fd));
        ASSERT_OK(pool_sandbox_usage(p, "q1", &usage));
        fprintf(stderr, "  usage of q1 after sync: %.1f MB\n", usage / 1048576.0);
        ASSERT_TRUE(usage >= written / 2);
        ASSERT_TRUE(usage <= limit + (1 << 20));
        ASSERT_ERRNO(pool_sandbox_usage(p, "nonexistent", &usage), ENOENT);

        /* Deleting frees the space again. */
        ASSERT_OK(unlink(big));
        ASSERT_OK(syncfs(pool_fd));
        fd = open(big, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(loop_write(fd, buf, chunk));
        fd = safe_close(fd);

        /* The unlimited sandbox writes past the other's limit. */
        big2 = test_path_join(root2, "big");
        fd = open(big2, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ASSERT_TRUE(fd >= 0);
        for (uint64_t w = 0; w < 2 * limit; w += chunk)
                ASSERT_OK(loop_write(fd, buf, chunk));
        ASSERT_OK(fsync(fd));
        fd = safe_close(fd);

        ASSERT_OK(pool_sandbox_remove(p, "q1"));
        ASSERT_OK(pool_sandbox_remove(p, "q2"));
        pool_fd = safe_close(pool_fd);
        ASSERT_OK(pool_release(p));
        check_no_residue(dir, image);
}

TEST(btrfs_space_and_promises) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();
        _cleanup_free_ char *image = test_path_join(dir, "pool.img"), *tar = NULL, *root = NULL, *root2 = NULL,
                            *big = NULL, *buf = NULL;
        _cleanup_close_ int fd = -EBADF, pool_fd = -EBADF;
        const size_t chunk = 1 << 20;
        PoolSpace s, before;

        test_pool_need_btrfs();
        tar = make_good_tar(dir);
        ASSERT_OK(open_pool(dir, NULL, "btrfs", &p));
        ASSERT_OK(pool_template_import_tar(p, "base", tar, NULL));
        ASSERT_OK(pool_space_read(p, NULL, &before));
        ASSERT_TRUE(before.quota_known);
        ASSERT_EQ(before.promised_bytes, 0);
        ASSERT_EQ(before.sandboxes, 0);
        ASSERT_TRUE(before.size_bytes >= (uint64_t) (TEST_POOL_MB - 16) << 20);
        ASSERT_TRUE(before.free_bytes > 0 && before.free_bytes < before.size_bytes);

        ASSERT_OK(pool_sandbox_create(p, "base", "s1", 40, &root));
        ASSERT_OK(pool_sandbox_create(p, "base", "s2", 24, &root2));
        ASSERT_OK(pool_space_read(p, NULL, &s));
        ASSERT_EQ(s.promised_bytes, UINT64_C(64) << 20);
        /* a fresh root holds nothing of its own but its tree's root node */
        ASSERT_TRUE(s.outstanding_bytes <= UINT64_C(64) << 20);
        ASSERT_TRUE(s.outstanding_bytes >= UINT64_C(63) << 20);
        ASSERT_EQ(s.sandboxes, 2U);
        /* one counted apart: the sandbox an op changes */
        ASSERT_OK(pool_space_read(p, "s1", &s));
        ASSERT_EQ(s.promised_bytes, UINT64_C(24) << 20);
        ASSERT_EQ(s.self_promised_bytes, UINT64_C(40) << 20);
        ASSERT_EQ(s.sandboxes, 1U);

        /* what s1 writes is no longer outstanding, once committed */
        buf = malloc(chunk);
        ASSERT_NOT_NULL(buf);
        memset(buf, 0x5a, chunk);
        big = test_path_join(root, "big");
        fd = open(big, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ASSERT_TRUE(fd >= 0);
        for (int i = 0; i < 16; i++)
                ASSERT_OK(loop_write(fd, buf, chunk));
        ASSERT_OK(fsync(fd));
        fd = safe_close(fd);
        ASSERT_OK(pool_space_sync(p));
        ASSERT_OK(pool_space_read(p, "s1", &s));
        ASSERT_TRUE(s.self_outstanding_bytes <= (UINT64_C(24) << 20) + (UINT64_C(1) << 20));
        ASSERT_TRUE(s.self_outstanding_bytes >= UINT64_C(20) << 20);
        ASSERT_TRUE(s.free_bytes < before.free_bytes);

        /* a new quota is what the next read sees */
        ASSERT_OK(pool_sandbox_set_quota(p, "s2", 100));
        ASSERT_OK(pool_space_read(p, NULL, &s));
        ASSERT_EQ(s.promised_bytes, UINT64_C(140) << 20);
        ASSERT_ERRNO(pool_sandbox_set_quota(p, "nonexistent", 100), ENOENT);
        ASSERT_ERRNO(pool_sandbox_set_quota(p, "s2", UINT64_MAX), ERANGE);

        /* a sandbox dir without a root (half removed) promises nothing */
        ASSERT_OK(pool_sandbox_remove(p, "s1"));
        ASSERT_OK(pool_space_read(p, NULL, &s));
        ASSERT_EQ(s.promised_bytes, UINT64_C(100) << 20);
        ASSERT_EQ(s.sandboxes, 1U);

        ASSERT_OK(pool_sandbox_remove(p, "s2"));
        pool_fd = safe_close(pool_fd);
        ASSERT_OK(pool_release(p));
        check_no_residue(dir, image);
}

/* On an overlay pool a sandbox's lower directory is the template: promote
 * does not replace it while a sandbox lies on it. */
TEST(overlay_template_promote_in_use) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();
        _cleanup_free_ char *tar = NULL, *root = NULL;

        test_pool_need_overlay();
        tar = make_good_tar(dir);
        ASSERT_OK(open_pool(dir, NULL, "overlay", &p));
        ASSERT_OK(pool_template_import_tar(p, "base@v1", tar, NULL));
        ASSERT_OK(pool_template_promote(p, "base", 1));
        ASSERT_OK(pool_sandbox_create(p, "base", "ov1", 0, &root));
        ASSERT_OK(pool_template_import_tar(p, "base@v2", tar, NULL));
        ASSERT_ERRNO(pool_template_promote(p, "base", 2), EBUSY);
        ASSERT_TRUE(pool_template_exists(p, "base"));
        ASSERT_OK(pool_sandbox_remove(p, "ov1"));
        ASSERT_OK(pool_template_promote(p, "base", 2));
        ASSERT_OK(pool_template_remove(p, "base"));
        ASSERT_OK(pool_template_remove(p, "base@v1"));
        ASSERT_OK(pool_template_remove(p, "base@v2"));
        ASSERT_OK(pool_release(p));
}

TEST(overlay_templates_and_sandboxes) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();
        _cleanup_free_ char *info = NULL, *mnt = test_path_join(dir, "pool"), *tar = NULL, *root = NULL,
                            *again = NULL, *f = NULL;
        uint64_t usage;
        struct stat st;

        test_pool_need_overlay();
        ASSERT_OK(open_pool(dir, NULL, "overlay", &p));
        ASSERT_EQ(pool_kind(p), POOL_OVERLAY);
        ASSERT_STREQ(pool_mount_path(p), mnt);
        ASSERT_ERRNO(mountinfo_lookup(mnt, NULL, NULL), ENOENT);
        ASSERT_OK(stat(mnt, &st));
        ASSERT_EQ(st.st_mode & 07777, 0700);
        ASSERT_OK(pool_info_json(p, &info));
        fprintf(stderr, "  info: %s\n", info);
        ASSERT_TRUE(strstr(info, "\"kind\":\"overlay\"") != NULL);
        ASSERT_TRUE(strstr(info, "\"quota\":false") != NULL);
        ASSERT_TRUE(strstr(info, "\"loop\":null") != NULL);
        ASSERT_TRUE(strstr(info, "\"checkpoints\":\"copy\"") != NULL);

        exercise_pool(p, dir);

        /* No usage accounting; a root unmounted behind our back (a reboot)
         * is mounted again when its path is asked for. */
        tar = make_good_tar(dir);
        ASSERT_OK(pool_template_import_tar(p, "base", tar, NULL));
        ASSERT_OK(pool_sandbox_create(p, "base", "ov1", 100, &root));
        ASSERT_ERRNO(pool_sandbox_usage(p, "ov1", &usage), EOPNOTSUPP);
        f = test_path_join(root, "etc/hostname");
        write_file(f, "mine\n");
        ASSERT_OK(umount2(root, 0));
        ASSERT_OK(pool_sandbox_root_path(p, "ov1", &again));
        ASSERT_OK(mountinfo_lookup(root, NULL, NULL));
        check_file(again, "etc/hostname", "mine\n");
        ASSERT_OK(pool_sandbox_remove(p, "ov1"));
        ASSERT_ERRNO(mountinfo_lookup(root, NULL, NULL), ENOENT);
        ASSERT_OK(pool_template_remove(p, "base"));

        /* "auto" keeps an existing overlay pool that holds data. */
        ASSERT_OK(pool_template_import_tar(p, "keep", tar, NULL));
        ASSERT_OK(pool_release(p));
        test_pool_drop(&p);
        ASSERT_OK(open_pool(dir, NULL, "auto", &p));
        ASSERT_EQ(pool_kind(p), POOL_OVERLAY);
        ASSERT_TRUE(pool_template_exists(p, "keep"));
        ASSERT_OK(pool_release(p));
}

TEST(auto_prefers_btrfs) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();
        _cleanup_free_ char *image = test_path_join(dir, "pool.img");

        test_pool_need_btrfs();
        ASSERT_OK(open_pool(dir, NULL, NULL, &p)); /* NULL storage = auto */
        ASSERT_EQ(pool_kind(p), POOL_BTRFS);
        ASSERT_OK(pool_release(p));
        check_no_residue(dir, image);
}

/* The base recipe builds offline from Debian's static busybox and bash; its
 * archive imports, and a sandbox root made from it runs bash and busybox. */
TEST(base_template_recipe) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();
        _cleanup_free_ char *tar = test_path_join(dir, "base.tar"), *root = NULL, *chroot_bin = NULL;
        char out[SPAWN_OUTPUT_MAX];
        char *build[] = { (char *) "/bin/bash", (char *) SPACE_SOURCE_ROOT "/templates/base/build.sh", tar, NULL };
        uint64_t size;

        test_pool_need_overlay();
        if (access("/bin/busybox", X_OK) < 0 || access("/bin/bash-static", X_OK) < 0)
                test_skip("busybox-static and bash-static are not installed (build.sh would apt-get them)");
        if (spawn_find_binary("chroot", &chroot_bin) < 0)
                test_skip("no chroot binary");

        ASSERT_OK(spawn_and_wait(build, -EBADF, out, sizeof out));

        ASSERT_OK(open_pool(dir, NULL, "auto", &p));
        ASSERT_OK(pool_template_import_tar(p, "base", tar, &size));
        fprintf(stderr, "  base template (%s): %.1f MB\n", pool_kind_to_string(pool_kind(p)), size / 1048576.0);
        ASSERT_OK(pool_sandbox_create(p, "base", "b1", 0, &root));
        {
                char *run[] = { chroot_bin, root, (char *) "/bin/bash", (char *) "-c",
                                (char *) "set -e; . /etc/profile; id -u user; stat -c %u:%g:%a /home/user /tmp; "
                                         "ls /bin/ls >/dev/null; echo hi | sed s/hi/ok/; readlink /bin/sh",
                                NULL };
                ASSERT_OK(spawn_and_wait(run, -EBADF, out, sizeof out));
                fprintf(stderr, "  in the root: %s", out);
                ASSERT_STREQ(out, "1000\n1000:1000:755\n0:0:1777\nok\nbusybox\n");
        }
        ASSERT_OK(pool_sandbox_remove(p, "b1"));
        ASSERT_OK(pool_template_remove(p, "base"));
        ASSERT_OK(pool_release(p));
        check_no_residue(dir, NULL);
}

/* pool_remove_entry() of a symlink removes the link, never its target; a
 * tree's symlinks inside go as links too (an image or a sandbox can shape
 * what lands in the pool's directories). */
TEST(remove_entry_never_follows_a_symlink) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();
        _cleanup_free_ char *outside = test_path_join(dir, "outside"), *precious = NULL, *tmp = NULL;
        _cleanup_close_ int tmp_fd = -EBADF, tree_fd = -EBADF;
        struct stat st;

        test_pool_need_btrfs();
        ASSERT_OK(open_pool(dir, NULL, "auto", &p));
        ASSERT_OK(mkdir_p(outside, 0755));
        precious = test_path_join(outside, "precious");
        ASSERT_OK(write_file_atomic(precious, "keep me\n", 8, 0644));
        tmp = test_path_join(pool_mount_path(p), "tmp");
        tmp_fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(tmp_fd >= 0);

        ASSERT_OK(symlinkat(outside, tmp_fd, "evil"));
        ASSERT_OK(pool_remove_entry(p, tmp_fd, "evil"));
        ASSERT_TRUE(fstatat(tmp_fd, "evil", &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT);
        ASSERT_OK(stat(precious, &st));

        ASSERT_OK(mkdirat(tmp_fd, "tree", 0755));
        tree_fd = openat(tmp_fd, "tree", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(tree_fd >= 0);
        ASSERT_OK(symlinkat(outside, tree_fd, "link"));
        ASSERT_OK(pool_remove_entry(p, tmp_fd, "tree"));
        ASSERT_TRUE(fstatat(tmp_fd, "tree", &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT);
        ASSERT_OK(stat(precious, &st));
        tree_fd = safe_close(tree_fd);
        tmp_fd = safe_close(tmp_fd); /* nothing may hold the pool open for its release */
        ASSERT_OK(pool_release(p));
}

static void volume_write(const char *path, const char *s) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(loop_write(fd, s, strlen(s)));
}

TEST(btrfs_volumes) {
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();
        _cleanup_free_ char *image = test_path_join(dir, "pool.img"), *path = NULL, *f = NULL, *cf = NULL,
                            *cpath = NULL;
        uint64_t used = 0, limit = 0;
        struct stat st;

        test_pool_need_btrfs();
        ASSERT_OK(open_pool(dir, NULL, "btrfs", &p));
        ASSERT_ERRNO(pool_volume_create(p, "bad/id", 16), EINVAL);
        ASSERT_ERRNO(pool_volume_create(p, "v1", 0), ERANGE);
        ASSERT_OK(pool_volume_create(p, "v1", 16));
        ASSERT_ERRNO(pool_volume_create(p, "v1", 16), EEXIST);
        ASSERT_OK(pool_volume_path(p, "v1", &path));
        ASSERT_OK(stat(path, &st));
        ASSERT_TRUE(S_ISDIR(st.st_mode) && st.st_uid == 0 && (st.st_mode & 07777) == 0777);
        {
                _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                uint64_t id;
                ASSERT_TRUE(fd >= 0);
                ASSERT_OK(btrfs_subvol_get_id(fd, &id));
                ASSERT_OK(btrfs_qgroup_limit_exclusive_get(fd, BTRFS_QGROUPID(id), &limit));
                ASSERT_EQ(limit, UINT64_C(16) << 20);
        }
        f = test_path_join(path, "f");
        volume_write(f, "data\n");
        ASSERT_OK(pool_volume_usage(p, "v1", &used));

        /* a clone: its own copy, its own limit */
        ASSERT_ERRNO(pool_volume_clone(p, "nosuch", "v2", 16, false), ENOENT);
        ASSERT_OK(pool_volume_clone(p, "v1", "v2", 32, false));
        ASSERT_OK(pool_volume_path(p, "v2", &cpath));
        cf = test_path_join(cpath, "f");
        volume_write(cf, "changed\n");
        {
                _cleanup_free_ char *got = NULL;
                size_t n;
                ASSERT_OK(read_full_file(f, 64, &got, &n));
                ASSERT_STREQ(got, "data\n");
        }
        /* a read-only snapshot: nothing writes it, not even root on the host; it goes all the same */
        {
                _cleanup_free_ char *spath = NULL, *sf = NULL, *got = NULL;
                size_t n;
                ASSERT_OK(pool_volume_clone(p, "v1", "s1", 16, true));
                ASSERT_OK(pool_volume_path(p, "s1", &spath));
                sf = test_path_join(spath, "f");
                ASSERT_OK(read_full_file(sf, 64, &got, &n));
                ASSERT_STREQ(got, "data\n");
                ASSERT_TRUE(open(sf, O_WRONLY | O_TRUNC | O_CLOEXEC) < 0 && errno == EROFS);
                ASSERT_OK(pool_volume_remove(p, "s1"));
        }
        /* listed by id; one set aside is kept under another name, no longer a volume */
        {
                _cleanup_strv_free_ char **ids = NULL, **after = NULL;
                _cleanup_free_ char *vols = test_path_join(pool_mount_path(p), "volumes");
                _cleanup_(closedirp_) DIR *d = NULL;
                struct dirent *de;
                char aside[256] = "";
                ASSERT_OK(pool_volume_list(p, &ids));
                ASSERT_EQ(strv_length(ids), (size_t) 2);
                ASSERT_STREQ(ids[0], "v1");
                ASSERT_STREQ(ids[1], "v2");
                ASSERT_EQ(pool_volume_set_aside(p, "v2"), 1);
                ASSERT_EQ(pool_volume_set_aside(p, "v2"), 0); /* none left to set aside */
                ASSERT_ERRNO(pool_volume_set_aside(p, "../v1"), EINVAL);
                ASSERT_OK(pool_volume_list(p, &after));
                ASSERT_EQ(strv_length(after), (size_t) 1);
                ASSERT_ERRNO(pool_volume_usage(p, "v2", &used), ENOENT);
                d = opendir(vols);
                ASSERT_NOT_NULL(d);
                while ((de = readdir(d)))
                        if (startswith(de->d_name, "v2.stale-"))
                                snprintf(aside, sizeof aside, "%s", de->d_name);
                ASSERT_TRUE(aside[0] != 0);
                {
                        _cleanup_free_ char *kept = test_path_join(vols, aside), *kf = test_path_join(kept, "f");
                        _cleanup_free_ char *got = NULL;
                        _cleanup_close_ int vfd = open(vols, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        size_t n;
                        ASSERT_OK(read_full_file(kf, 64, &got, &n));
                        ASSERT_STREQ(got, "changed\n");
                        ASSERT_TRUE(vfd >= 0);
                        ASSERT_OK(btrfs_subvol_remove(vfd, aside));
                }
        }
        ASSERT_OK(pool_volume_remove(p, "v1"));
        ASSERT_OK(pool_volume_remove(p, "v1")); /* a missing one is fine */
        ASSERT_ERRNO(pool_volume_usage(p, "v1", &used), ENOENT);
        ASSERT_OK(pool_volume_remove(p, "v2")); /* set aside: none */
        {
                _cleanup_free_ char *vols = test_path_join(pool_mount_path(p), "volumes");
                check_listing(vols, "");
        }
        ASSERT_OK(pool_release(p));
        check_no_residue(dir, image);
}
