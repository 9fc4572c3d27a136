/* SPDX-License-Identifier: MIT */
/* Disk images for the vm runtime: a template becomes a raw ext4 image
 * (images/<name>.ext4, made once with mkfs.ext4 -d from the template's tree),
 * and a sandbox's disk is a reflink clone of it (FICLONE: O(1) on btrfs;
 * a copy where the pool cannot share extents), grown to disk_mb. */
#include <fcntl.h>
#include <inttypes.h>
#include <ftw.h>
#include <linux/fs.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "log.h"
#include "pool-internal.h"
#include "spawn.h"
#include "str-util.h"

#define POOL_IMAGE_SUFFIX ".ext4"
#define POOL_IMAGE_MIN_BYTES (UINT64_C(256) << 20)
#define POOL_IMAGE_SLACK_BYTES (UINT64_C(128) << 20) /* free room in a fresh image */

static uint64_t tree_bytes;

static int tree_add(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void) path;
        (void) flag;
        (void) ftw;
        tree_bytes += (uint64_t) st->st_size + 4096; /* data + an inode/block's worth of metadata */
        return 0;
}

static int images_dir(Pool *p, char **ret) {
        _cleanup_free_ char *dir = pool_subpath(p, POOL_IMAGES_DIR, NULL, NULL);

        if (!dir)
                return -ENOMEM;
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        *ret = TAKE_PTR(dir);
        return 0;
}

/* The last line of mkfs.ext4's output that says something, printable only. */
static void image_last_line(const char *out, char *why, size_t why_size) {
        const char *end = out + strlen(out), *start;

        if (!why || why_size == 0)
                return;
        while (end > out && (end[-1] == '\n' || end[-1] == ' '))
                end--;
        start = end;
        while (start > out && start[-1] != '\n')
                start--;
        size_t n = MIN((size_t) (end - start), why_size - 1);
        for (size_t i = 0; i < n; i++)
                why[i] = (unsigned char) start[i] < 0x20 || start[i] == 0x7f ? ' ' : start[i];
        why[n] = 0;
}

int pool_template_image(Pool *p, const char *name, char **ret_path) {
        return pool_template_image_why(p, name, NULL, 0, ret_path);
}

int pool_template_image_why(Pool *p, const char *name, char *why, size_t why_size, char **ret_path) {
        _cleanup_free_ char *dir = NULL, *path = NULL, *tmp = NULL, *tree = NULL, *mkfs = NULL;
        char size_arg[32], out[SPAWN_OUTPUT_MAX];
        uint64_t bytes;
        int r;

        r = pool_usable(p);
        if (r < 0)
                return r;
        if (!pool_template_name_valid(name))
                return -EINVAL;
        if (!pool_template_exists(p, name))
                return -ENOENT;
        r = images_dir(p, &dir);
        if (r < 0)
                return r;
        path = strjoin(dir, "/", name, POOL_IMAGE_SUFFIX);
        if (!path)
                return -ENOMEM;
        if (access(path, F_OK) == 0) {
                *ret_path = TAKE_PTR(path);
                return 0;
        }

        r = pool_template_path(p, name, &tree);
        if (r < 0)
                return r;
        r = spawn_find_binary("mkfs.ext4", &mkfs);
        if (r < 0)
                return r;
        tree_bytes = 0;
        if (nftw(tree, tree_add, 64, FTW_PHYS) < 0)
                return negative_errno();
        bytes = MAX(POOL_IMAGE_MIN_BYTES, tree_bytes + tree_bytes / 4 + POOL_IMAGE_SLACK_BYTES);
        bytes = (bytes + (UINT64_C(1) << 20) - 1) & ~((UINT64_C(1) << 20) - 1);
        snprintf(size_arg, sizeof size_arg, "%" PRIu64 "k", bytes >> 10);
        tmp = strdup_printf("%s/.%s.tmp.%d", dir, name, (int) getpid());
        if (!tmp)
                return -ENOMEM;
        (void) unlink(tmp);

        char *argv[] = { mkfs, (char *) "-q", (char *) "-F", (char *) "-t", (char *) "ext4", (char *) "-m", (char *) "0",
                         (char *) "-L", (char *) "space-root", (char *) "-E", (char *) "root_owner=0:0",
                         (char *) "-d", tree, tmp, size_arg, NULL };
        r = spawn_and_wait(argv, -1, out, sizeof out);
        if (r < 0) {
                log_debug("mkfs.ext4 -d %s failed: %s", tree, out);
                (void) unlink(tmp);
                if (r != -EPROTO)
                        return r;
                image_last_line(out, why, why_size);
                if (strstr(out, "No space left on device"))
                        return -ENOSPC;
                /* it read the tree and could not put it into ext4 */
                if (strstr(out, "while populating file system"))
                        return -EMEDIUMTYPE;
                return -EIO;
        }
        if (chmod(tmp, 0600) < 0 || rename(tmp, path) < 0) {
                r = negative_errno();
                (void) unlink(tmp);
                return r;
        }
        *ret_path = TAKE_PTR(path);
        return 0;
}

int pool_template_image_remove(Pool *p, const char *name) {
        _cleanup_free_ char *dir = NULL, *path = NULL;

        if (!pool_template_name_valid(name))
                return -EINVAL;
        dir = pool_subpath(p, POOL_IMAGES_DIR, NULL, NULL);
        path = dir ? strjoin(dir, "/", name, POOL_IMAGE_SUFFIX) : NULL;
        if (!path)
                return -ENOMEM;
        if (unlink(path) < 0 && errno != ENOENT)
                return negative_errno();
        return pool_base_remove(p, name); /* they were made from it */
}

int pool_clone_file(int src, int dst) {
        struct stat st;

        if (ioctl(dst, FICLONE, src) >= 0)
                return 0;
        if (fstat(src, &st) < 0)
                return negative_errno();
        for (off_t off = 0; off < st.st_size;) {
                ssize_t k = copy_file_range(src, &off, dst, NULL, (size_t) (st.st_size - off), 0);
                if (k < 0)
                        return negative_errno();
                if (k == 0)
                        return -EIO;
        }
        return 0;
}

int pool_sandbox_disk_create(Pool *p, const char *template_name, const char *id, uint64_t disk_mb, uid_t owner,
                             char **ret_path) {
        _cleanup_free_ char *image = NULL, *dir = NULL, *path = NULL, *resize = NULL;
        _cleanup_close_ int src = -EBADF, dst = -EBADF, sb_fd = -EBADF;
        char out[SPAWN_OUTPUT_MAX];
        struct stat st;
        int r;

        if (!pool_sandbox_id_valid(id))
                return -EINVAL;
        if (disk_mb > (UINT64_MAX >> 21))
                return -ERANGE;
        r = pool_template_image(p, template_name, &image);
        if (r < 0)
                return r;
        sb_fd = pool_open_subdir(p, POOL_SANDBOXES_DIR);
        if (sb_fd < 0)
                return sb_fd;
        if (mkdirat(sb_fd, id, 0700) < 0)
                return negative_errno(); /* -EEXIST: taken */
        r = pool_checkpoint_remove_all(p, id);
        if (r < 0)
                goto fail;
        dir = pool_subpath(p, POOL_SANDBOXES_DIR, id, NULL);
        path = pool_subpath(p, POOL_SANDBOXES_DIR, id, POOL_SANDBOX_DISK);
        if (!dir || !path) {
                r = -ENOMEM;
                goto fail;
        }
        src = open(image, O_RDONLY | O_CLOEXEC);
        dst = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (src < 0 || dst < 0 || fstat(src, &st) < 0) {
                r = negative_errno();
                goto fail;
        }
        r = pool_clone_file(src, dst);
        if (r < 0)
                goto fail;
        /* the disk's size is its quota: grow the image (and its file system) to disk_mb */
        if (disk_mb > 0 && (uint64_t) st.st_size < (disk_mb << 20)) {
                if (ftruncate(dst, (off_t) (disk_mb << 20)) < 0) {
                        r = negative_errno();
                        goto fail;
                }
                r = spawn_find_binary("resize2fs", &resize);
                if (r >= 0) {
                        char *argv[] = { resize, (char *) "-f", path, NULL };
                        r = spawn_and_wait(argv, -1, out, sizeof out);
                        if (r < 0)
                                log_debug("resize2fs %s failed: %s", path, out);
                }
                if (r < 0) {
                        r = -EIO;
                        goto fail;
                }
        }
        /* the VMM runs as the sandbox's unprivileged uid and opens the disk itself */
        if (fchown(dst, owner, owner) < 0) {
                r = negative_errno();
                goto fail;
        }
        *ret_path = TAKE_PTR(path);
        return 0;
fail:
        (void) pool_sandbox_remove_dir(p, sb_fd, id);
        return r;
}

int pool_sandbox_disk_path(Pool *p, const char *id, char **ret) {
        _cleanup_free_ char *path = NULL;

        if (!pool_sandbox_id_valid(id))
                return -EINVAL;
        path = pool_subpath(p, POOL_SANDBOXES_DIR, id, POOL_SANDBOX_DISK);
        if (!path)
                return -ENOMEM;
        if (access(path, F_OK) < 0)
                return negative_errno();
        *ret = TAKE_PTR(path);
        return 0;
}

int pool_sandbox_memory_path(Pool *p, const char *id, char **ret) {
        char *path;

        if (!pool_sandbox_id_valid(id))
                return -EINVAL;
        path = pool_subpath(p, POOL_SANDBOXES_DIR, id, POOL_SANDBOX_MEMORY);
        if (!path)
                return -ENOMEM;
        *ret = path;
        return 0;
}

bool pool_sandbox_is_vm(Pool *p, const char *id) {
        _cleanup_free_ char *path = NULL;
        return pool_sandbox_disk_path(p, id, &path) >= 0;
}
