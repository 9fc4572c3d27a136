/* SPDX-License-Identifier: MIT */
/* The layers of Dockerfile builds (build-layer.c) on a real btrfs pool (skipped without root, btrfs or
 * loop devices). */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "oci.h"
#include "pool-internal.h"
#include "pool.h"
#include "test-pool.h"
#include "test.h"

static void put_file(int dirfd, const char *name, const char *data) {
        _cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(loop_write(fd, data, strlen(data)));
}

/* A build's --chown names (pool_build_layer_ids): the layer's own etc/passwd and etc/group, hostile ones
 * (a FIFO, a symlink that leaves the layer, a huge file) refused without blocking or reading the host's. */
TEST(btrfs_build_layer_ids) {
        static const char key[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                          other[] = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
        _cleanup_pool_ Pool *p = NULL;
        const char *dir = test_tmpdir();
        _cleanup_free_ char *layers = NULL, *big = NULL;
        _cleanup_close_ int lay_fd = -EBADF, root = -EBADF, etc = -EBADF;
        PoolLayerIds ids = {};
        ApiError e = {};

        test_pool_need_btrfs();
        ASSERT_OK(test_pool_open(dir, NULL, 1024, "btrfs", &p));
        layers = pool_subpath(p, POOL_LAYERS_DIR, NULL, NULL);
        ASSERT_NOT_NULL(layers);
        lay_fd = open(layers, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(lay_fd >= 0);
        ASSERT_OK(mkdirat(lay_fd, key, 0755));
        root = openat(lay_fd, key, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(root >= 0);

        /* no etc at all; a layer that is not there; a bad key or name */
        ASSERT_ERRNO(pool_build_layer_ids(p, key, "app", NULL, &ids, &e), ENOENT);
        ASSERT_TRUE(strstr(e.message, "the image has no /etc/passwd to look up user 'app' in") != NULL);
        ASSERT_OK(pool_build_layer_ids(p, key, NULL, NULL, &ids, &e)); /* nothing to look up */
        ASSERT_ERRNO(pool_build_layer_ids(p, other, "app", NULL, &ids, &e), ENOENT);
        ASSERT_EQ(e.code, API_NOT_FOUND);
        ASSERT_ERRNO(pool_build_layer_ids(p, "../aaaa", "app", NULL, &ids, &e), EINVAL);
        ASSERT_ERRNO(pool_build_layer_ids(p, key, "a/b", NULL, &ids, &e), EINVAL);
        ASSERT_ERRNO(pool_build_layer_ids(p, key, NULL, "-g", &ids, &e), EINVAL);

        ASSERT_OK(mkdirat(root, "etc", 0755));
        etc = openat(root, "etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(etc >= 0);
        put_file(etc, "passwd", "root:x:0:0::/root:/bin/sh\napp:x:1000:2000::/:/bin/sh\n");
        put_file(etc, "group", "root:x:0:\nstaff:x:3000:app\n");
        ASSERT_OK(pool_build_layer_ids(p, key, "app", "staff", &ids, &e));
        ASSERT_EQ(ids.uid, 1000);
        ASSERT_EQ(ids.user_gid, 2000);
        ASSERT_EQ(ids.gid, 3000);
        ASSERT_ERRNO(pool_build_layer_ids(p, key, "nosuch", NULL, &ids, &e), ENOENT);
        ASSERT_STREQ(e.message, "no user 'nosuch' in the image's /etc/passwd");
        ASSERT_ERRNO(pool_build_layer_ids(p, key, "app", "nosuch", &ids, &e), ENOENT);
        ASSERT_STREQ(e.message, "no group 'nosuch' in the image's /etc/group");

        /* a symlink resolves in the layer: "../.." stops at its root, never reaching layers/ */
        put_file(lay_fd, "passwd", "app:x:1:1::/:\n");
        ASSERT_OK(unlinkat(etc, "passwd", 0));
        ASSERT_OK(symlinkat("../../passwd", etc, "passwd"));
        ASSERT_ERRNO(pool_build_layer_ids(p, key, "app", NULL, &ids, &e), ENOENT);
        ASSERT_TRUE(strstr(e.message, "the image has no /etc/passwd") != NULL);
        put_file(root, "passwd", "app:x:7:8::/:\n");
        ASSERT_OK(pool_build_layer_ids(p, key, "app", NULL, &ids, &e));
        ASSERT_EQ(ids.uid, 7);
        ASSERT_OK(unlinkat(etc, "passwd", 0));
        ASSERT_OK(symlinkat("/proc/self/root/etc/passwd", etc, "passwd"));
        ASSERT_TRUE(pool_build_layer_ids(p, key, "root", NULL, &ids, &e) < 0);
        ASSERT_OK(unlinkat(etc, "passwd", 0));

        /* a FIFO is not read (no writer: a blocking open would hang), a directory neither */
        ASSERT_OK(mkfifoat(etc, "passwd", 0644));
        ASSERT_ERRNO(pool_build_layer_ids(p, key, "app", NULL, &ids, &e), EBADMSG);
        ASSERT_STREQ(e.message, "the image's /etc/passwd is not a regular file");
        ASSERT_OK(unlinkat(etc, "passwd", 0));
        ASSERT_OK(mkdirat(etc, "passwd", 0755));
        ASSERT_ERRNO(pool_build_layer_ids(p, key, "app", NULL, &ids, &e), EBADMSG);
        ASSERT_OK(unlinkat(etc, "passwd", AT_REMOVEDIR));

        /* larger than the bound */
        big = malloc(POOL_LAYER_ETC_MAX + 2);
        ASSERT_NOT_NULL(big);
        memset(big, '#', POOL_LAYER_ETC_MAX + 1);
        big[POOL_LAYER_ETC_MAX + 1] = 0;
        put_file(etc, "passwd", big);
        ASSERT_ERRNO(pool_build_layer_ids(p, key, "app", NULL, &ids, &e), EFBIG);
        big[POOL_LAYER_ETC_MAX] = 0;
        put_file(etc, "passwd", big);
        ASSERT_ERRNO(pool_build_layer_ids(p, key, "app", NULL, &ids, &e), ENOENT);

        etc = safe_close(etc);
        root = safe_close(root);
        lay_fd = safe_close(lay_fd);
        ASSERT_OK(pool_release(p));
        test_pool_check_no_residue(dir);
}
