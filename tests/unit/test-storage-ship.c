/* SPDX-License-Identifier: MIT */
/* Sends against the real kernel (a sparse btrfs image on a loop device;
 * skipped where btrfs, loop devices or root are missing): the kernel refuses
 * to delete a subvolume while a `btrfs send` reads it, so a removal cancels
 * the sends that read what it removes, and only those. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc-util.h"
#include "btrfs.h"
#include "fd-util.h"
#include "loop.h"
#include "mountinfo.h"
#include "pool.h"
#include "spawn.h"
#include "str-util.h"
#include "test-pool.h"
#include "test-tar.h"
#include "test.h"

#define TEST_POOL_MB 2048
/* Far more than a pipe holds: a send of it stays in the kernel until read. */
#define TEST_FILE_BYTES (UINT64_C(32) << 20)
#define TEST_CHUNK 65536U

static const TarEntry template_tar[] = {
        { "./", '5', 0755, 0, 0 },
        { "./etc/", '5', 0755, 0, 0 },
        { "./etc/hostname", '0', 0644, 0, 0, NULL, "template\n" },
};

static void import_template(Pool *p, const char *dir) {
        _cleanup_free_ char *tar = test_path_join(dir, "template.tar");
        test_tar_write(tar, template_tar, ELEMENTSOF(template_tar));
        ASSERT_OK(pool_template_import_tar(p, "base", tar, NULL));
}

/* A file of non-zero bytes (a send streams its data, not a hole). */
static void write_big_file(const char *root, const char *rel) {
        _cleanup_free_ char *path = test_path_join(root, rel);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        char buf[TEST_CHUNK];

        ASSERT_TRUE(fd >= 0);
        for (size_t i = 0; i < sizeof buf; i++)
                buf[i] = (char) ('a' + i % 26);
        for (uint64_t n = 0; n < TEST_FILE_BYTES; n += sizeof buf)
                ASSERT_OK(loop_write(fd, buf, sizeof buf));
}

/* A sandbox holding a big file, with checkpoint ck taken of it. */
static void sandbox_with_checkpoint(Pool *p, const char *id, const char *ck) {
        _cleanup_free_ char *root = NULL;

        ASSERT_OK(pool_sandbox_create(p, "base", id, 0, &root));
        write_big_file(root, "big");
        ASSERT_OK(pool_checkpoint_create(p, id, ck));
}

static char *checkpoint_path(Pool *p, const char *id, const char *ck) {
        char *s = strjoin(pool_mount_path(p), "/checkpoints/", id, "/", ck);
        ASSERT_NOT_NULL(s);
        return s;
}

/* Starts a send of path (against parent) into a pipe and reads its first
 * bytes: the kernel is streaming, and stays in the send (the pipe fills). */
static pid_t send_stalled(Pool *p, const char *path, const char *parent, int *ret_out) {
        _cleanup_close_ int err_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        char buf[512];
        pid_t pid;
        int fds[2];

        ASSERT_TRUE(err_fd >= 0);
        ASSERT_TRUE(pipe2(fds, O_CLOEXEC) == 0);
        ASSERT_OK(pool_ship_send_start(p, path, parent, fds[1], err_fd, &pid));
        safe_close(fds[1]);
        ASSERT_TRUE(loop_read(fds[0], buf, sizeof buf) == (ssize_t) sizeof buf);
        *ret_out = fds[0];
        return pid;
}

/* Reads the rest of a stream: its size. */
static uint64_t drain(int fd) {
        char buf[TEST_CHUNK];
        uint64_t total = 0;
        ssize_t k;

        while ((k = read(fd, buf, sizeof buf)) > 0)
                total += (uint64_t) k;
        ASSERT_TRUE(k == 0);
        return total;
}

TEST(btrfs_removal_cancels_the_sends_that_read_it) {
        _cleanup_pool_ Pool *p = NULL;
        _cleanup_close_ int ck_fd = -EBADF, out_a = -EBADF, out_b = -EBADF, out_c = -EBADF, out_d = -EBADF;
        _cleanup_free_ char *c1 = NULL, *c2 = NULL, *o1 = NULL, *tpl = NULL, *root = NULL, *ck_dir = NULL;
        const char *dir = test_tmpdir();
        pid_t a, b, c, d;

        test_pool_need_btrfs();
        ASSERT_OK(test_pool_open(dir, NULL, TEST_POOL_MB, "btrfs", &p));
        import_template(p, dir);
        ASSERT_OK(pool_template_path(p, "base", &tpl));
        sandbox_with_checkpoint(p, "sent", "c1");
        ASSERT_OK(pool_sandbox_root_path(p, "sent", &root));
        write_big_file(root, "more");
        ASSERT_OK(pool_checkpoint_create(p, "sent", "c2"));
        sandbox_with_checkpoint(p, "other", "o1");
        c1 = checkpoint_path(p, "sent", "c1");
        c2 = checkpoint_path(p, "sent", "c2");
        o1 = checkpoint_path(p, "other", "o1");

        /* an incremental send of c2 against c1, and a send of another sandbox's checkpoint */
        a = send_stalled(p, c2, c1, &out_a);
        b = send_stalled(p, o1, NULL, &out_b);
        /* what the kernel does on its own: it refuses to delete the parent */
        ck_dir = strjoin(pool_mount_path(p), "/checkpoints/sent");
        ASSERT_NOT_NULL(ck_dir);
        ck_fd = open(ck_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(ck_fd >= 0);
        ASSERT_ERRNO(btrfs_subvol_remove(ck_fd, "c1"), EPERM);
        /* the removal of the parent wins: the send reading it ends */
        ASSERT_OK(pool_checkpoint_remove(p, "sent", "c1"));
        ASSERT_TRUE(access(c1, F_OK) < 0 && errno == ENOENT);
        ASSERT_ERRNO(spawn_wait(a), EPROTO);
        /* the other send was not touched: it streams to its end */
        ASSERT_TRUE(drain(out_b) > TEST_FILE_BYTES);
        ASSERT_OK(spawn_wait(b));

        /* the item a send streams goes with its sandbox */
        c = send_stalled(p, c2, NULL, &out_c);
        ASSERT_OK(pool_sandbox_remove(p, "sent"));
        ASSERT_TRUE(access(c2, F_OK) < 0 && errno == ENOENT);
        ASSERT_ERRNO(spawn_wait(c), EPROTO);

        /* a template as the parent of a stream */
        d = send_stalled(p, o1, tpl, &out_d);
        ASSERT_OK(pool_template_remove(p, "base"));
        ASSERT_TRUE(access(tpl, F_OK) < 0 && errno == ENOENT);
        ASSERT_ERRNO(spawn_wait(d), EPROTO);

        ASSERT_OK(pool_sandbox_remove(p, "other"));
        ck_fd = safe_close(ck_fd); /* an fd in the pool keeps it mounted */
        ASSERT_OK(pool_release(p));
        test_pool_check_no_residue(dir);
}

/* The node's process runs the sends, the worker it forked removes: a
 * removal in a child of the process that started the send cancels it too. */
TEST(btrfs_removal_in_a_child_cancels_the_parents_send) {
        _cleanup_pool_ Pool *p = NULL;
        _cleanup_close_ int out = -EBADF;
        _cleanup_free_ char *c1 = NULL;
        const char *dir = test_tmpdir();
        int status = 0;
        pid_t send, child;

        test_pool_need_btrfs();
        ASSERT_OK(test_pool_open(dir, NULL, TEST_POOL_MB, "btrfs", &p));
        import_template(p, dir);
        sandbox_with_checkpoint(p, "w", "c1");
        c1 = checkpoint_path(p, "w", "c1");
        send = send_stalled(p, c1, NULL, &out);
        child = fork();
        ASSERT_TRUE(child >= 0);
        if (child == 0)
                _exit(pool_sandbox_remove(p, "w") >= 0 ? EXIT_SUCCESS : EXIT_FAILURE);
        ASSERT_TRUE(waitpid(child, &status, 0) == child);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == EXIT_SUCCESS);
        ASSERT_TRUE(access(c1, F_OK) < 0 && errno == ENOENT);
        ASSERT_ERRNO(spawn_wait(send), EPROTO);
        ASSERT_OK(pool_template_remove(p, "base"));
        ASSERT_OK(pool_release(p));
        test_pool_check_no_residue(dir);
}

/* A send that neither this process nor its parent started (an operator's
 * backup, say) is not touched: the removal fails until that send is done. */
TEST(btrfs_removal_leaves_a_send_it_did_not_start) {
        _cleanup_pool_ Pool *p = NULL;
        _cleanup_close_ int out = -EBADF;
        _cleanup_free_ char *c1 = NULL;
        const char *dir = test_tmpdir();
        int status = 0, fds[2];
        pid_t other;

        test_pool_need_btrfs();
        ASSERT_OK(test_pool_open(dir, NULL, TEST_POOL_MB, "btrfs", &p));
        import_template(p, dir);
        sandbox_with_checkpoint(p, "kept", "c1");
        c1 = checkpoint_path(p, "kept", "c1");
        ASSERT_TRUE(pipe2(fds, O_CLOEXEC) == 0);
        other = fork(); /* the send is its child, not ours */
        ASSERT_TRUE(other >= 0);
        if (other == 0) {
                int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
                pid_t pid;
                safe_close(fds[0]);
                if (null_fd < 0 || pool_ship_send_start(p, c1, NULL, fds[1], null_fd, &pid) < 0)
                        _exit(EXIT_FAILURE);
                safe_close(fds[1]);
                _exit(spawn_wait(pid) >= 0 ? EXIT_SUCCESS : EXIT_FAILURE);
        }
        fds[1] = safe_close(fds[1]);
        out = fds[0];
        {
                char buf[512];
                ASSERT_TRUE(loop_read(out, buf, sizeof buf) == (ssize_t) sizeof buf);
        }
        ASSERT_ERRNO(pool_checkpoint_remove(p, "kept", "c1"), EPERM);
        ASSERT_TRUE(access(c1, F_OK) == 0);
        /* that send goes on to the end, and then the removal works */
        ASSERT_TRUE(drain(out) > TEST_FILE_BYTES);
        ASSERT_TRUE(waitpid(other, &status, 0) == other);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == EXIT_SUCCESS);
        ASSERT_OK(pool_checkpoint_remove(p, "kept", "c1"));
        ASSERT_OK(pool_sandbox_remove(p, "kept"));
        ASSERT_OK(pool_template_remove(p, "base"));
        ASSERT_OK(pool_release(p));
        test_pool_check_no_residue(dir);
}
