/* SPDX-License-Identifier: MIT */
/* Checkpoints, restores and branches of vm sandboxes (disk images). A vm
 * checkpoint is a directory checkpoints/<sandbox>/<checkpoint>/ holding
 * disk.img, a reflink of the sandbox's disk (O(1) on btrfs), and, when it
 * was taken with memory, memory.state: the machine saved at the same
 * moment. Restores and branches reflink disk.img back out; the memory file
 * is only ever read (by the VMM, as an -incoming fd). */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "pool-internal.h"
#include "str-util.h"

#define DISK_NEW_SUFFIX ".new"

static int ids_check(Pool *p, const char *a, const char *b) {
        int r = pool_usable(p);
        if (r < 0)
                return r;
        if (!pool_sandbox_id_valid(a) || (b && !pool_sandbox_id_valid(b)))
                return -EINVAL;
        return 0;
}

int pool_disk_checkpoint_path(Pool *p, const char *sandbox_id, const char *checkpoint_id, const char *file,
                              char **ret) {
        _cleanup_free_ char *sub = NULL;
        char *path;
        int r = ids_check(p, sandbox_id, checkpoint_id);

        if (r < 0)
                return r;
        sub = strjoin(sandbox_id, "/", checkpoint_id);
        path = sub ? pool_subpath(p, POOL_CHECKPOINTS_DIR, sub, file) : NULL;
        if (!path)
                return -ENOMEM;
        *ret = path;
        return 0;
}

bool pool_disk_checkpoint_has_memory(Pool *p, const char *sandbox_id, const char *checkpoint_id) {
        _cleanup_free_ char *m = NULL;
        struct stat st;

        return pool_disk_checkpoint_path(p, sandbox_id, checkpoint_id, POOL_SANDBOX_MEMORY, &m) >= 0 &&
               stat(m, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

/* dst_dir_fd/dst_name (new, mode 0600, owner) as a clone of src_path. */
static int clone_to(const char *src_path, int dst_dir_fd, const char *dst_name, uid_t owner) {
        _cleanup_close_ int src = -EBADF, dst = -EBADF;
        int r;

        src = open(src_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (src < 0)
                return negative_errno();
        dst = openat(dst_dir_fd, dst_name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (dst < 0)
                return negative_errno();
        r = pool_clone_file(src, dst);
        if (r >= 0 && owner != (uid_t) -1 && fchown(dst, owner, owner) < 0)
                r = negative_errno();
        if (r < 0)
                (void) unlinkat(dst_dir_fd, dst_name, 0);
        return r;
}

int pool_disk_checkpoint_create(Pool *p, const char *sandbox_id, const char *checkpoint_id, char **ret_dir) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_close_ int ckpts_fd = -EBADF, owner_fd = -EBADF;
        int r;

        r = pool_disk_checkpoint_path(p, sandbox_id, checkpoint_id, NULL, &dir);
        if (r < 0)
                return r;
        ckpts_fd = pool_open_subdir(p, POOL_CHECKPOINTS_DIR);
        if (ckpts_fd < 0)
                return ckpts_fd;
        if (mkdirat(ckpts_fd, sandbox_id, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        owner_fd = openat(ckpts_fd, sandbox_id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (owner_fd < 0)
                return negative_errno();
        if (mkdirat(owner_fd, checkpoint_id, 0700) < 0)
                return negative_errno(); /* -EEXIST: taken */
        *ret_dir = TAKE_PTR(dir);
        return 0;
}

int pool_disk_checkpoint_take_disk(Pool *p, const char *sandbox_id, const char *checkpoint_id, bool saved_memory) {
        _cleanup_free_ char *dir = NULL, *disk = NULL, *mem = NULL;
        _cleanup_close_ int dfd = -EBADF;
        int r;

        r = pool_disk_checkpoint_path(p, sandbox_id, checkpoint_id, NULL, &dir);
        if (r < 0)
                return r;
        disk = pool_subpath(p, POOL_SANDBOXES_DIR, sandbox_id, POOL_SANDBOX_DISK);
        mem = pool_subpath(p, POOL_SANDBOXES_DIR, sandbox_id, POOL_SANDBOX_MEMORY);
        if (!disk || !mem)
                return -ENOMEM;
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return negative_errno();
        r = clone_to(disk, dfd, POOL_SANDBOX_DISK, (uid_t) -1);
        /* a suspended sandbox's saved machine belongs to exactly this disk */
        if (r >= 0 && saved_memory && access(mem, F_OK) == 0)
                r = clone_to(mem, dfd, POOL_SANDBOX_MEMORY, (uid_t) -1);
        return r;
}

int pool_sandbox_disk_restore(Pool *p, const char *id, const char *checkpoint_id, uid_t owner, char **ret_disk) {
        _cleanup_free_ char *src = NULL, *disk = NULL, *dir = NULL;
        _cleanup_close_ int dfd = -EBADF;
        int r;

        r = pool_disk_checkpoint_path(p, id, checkpoint_id, POOL_SANDBOX_DISK, &src);
        if (r < 0)
                return r;
        dir = pool_subpath(p, POOL_SANDBOXES_DIR, id, NULL);
        disk = pool_subpath(p, POOL_SANDBOXES_DIR, id, POOL_SANDBOX_DISK);
        if (!dir || !disk)
                return -ENOMEM;
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return negative_errno();
        if (access(src, F_OK) < 0)
                return negative_errno();
        (void) unlinkat(dfd, POOL_SANDBOX_DISK DISK_NEW_SUFFIX, 0); /* a crashed restore's */
        r = clone_to(src, dfd, POOL_SANDBOX_DISK DISK_NEW_SUFFIX, owner);
        if (r < 0)
                return r;
        /* the disk is the old or the new one at every moment */
        if (renameat(dfd, POOL_SANDBOX_DISK DISK_NEW_SUFFIX, dfd, POOL_SANDBOX_DISK) < 0) {
                r = negative_errno();
                (void) unlinkat(dfd, POOL_SANDBOX_DISK DISK_NEW_SUFFIX, 0);
                return r;
        }
        /* a machine saved at suspend belongs to the disk that just went */
        (void) unlinkat(dfd, POOL_SANDBOX_MEMORY, 0);
        *ret_disk = TAKE_PTR(disk);
        return 0;
}

int pool_sandbox_disk_clone(Pool *p, const char *src_path, const char *id, uid_t owner, char **ret_path) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int sb_fd = -EBADF, dfd = -EBADF;
        int r;

        r = ids_check(p, id, NULL);
        if (r < 0)
                return r;
        path = pool_subpath(p, POOL_SANDBOXES_DIR, id, POOL_SANDBOX_DISK);
        if (!path)
                return -ENOMEM;
        sb_fd = pool_open_subdir(p, POOL_SANDBOXES_DIR);
        if (sb_fd < 0)
                return sb_fd;
        if (mkdirat(sb_fd, id, 0700) < 0)
                return negative_errno(); /* -EEXIST: taken */
        r = pool_checkpoint_remove_all(p, id);
        if (r >= 0) {
                dfd = openat(sb_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                r = dfd < 0 ? negative_errno() : clone_to(src_path, dfd, POOL_SANDBOX_DISK, owner);
        }
        if (r < 0) {
                (void) pool_sandbox_remove_dir(p, sb_fd, id);
                return r;
        }
        *ret_path = TAKE_PTR(path);
        return 0;
}

int pool_sandbox_disk_branch(Pool *p, const char *src_id, const char *from_checkpoint, const char *new_id, uid_t owner,
                             char **ret_path) {
        _cleanup_free_ char *src = NULL;
        int r;

        r = ids_check(p, src_id, new_id);
        if (r < 0)
                return r;
        if (from_checkpoint) {
                r = pool_disk_checkpoint_path(p, src_id, from_checkpoint, POOL_SANDBOX_DISK, &src);
                if (r < 0)
                        return r;
        } else {
                src = pool_subpath(p, POOL_SANDBOXES_DIR, src_id, POOL_SANDBOX_DISK);
                if (!src)
                        return -ENOMEM;
        }
        if (access(src, F_OK) < 0)
                return negative_errno();
        return pool_sandbox_disk_clone(p, src, new_id, owner, ret_path);
}

/* Bytes of the files of a checkpoint directory (allocated blocks: reflinked
 * extents count for each copy, so this is an upper bound). */
int pool_disk_checkpoint_usage(int dir_fd, uint64_t *ret_bytes) {
        _cleanup_(closedirp_) DIR *d = NULL;
        struct dirent *de;
        uint64_t total = 0;
        int fd;

        fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return negative_errno();
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return negative_errno();
        }
        while ((de = readdir(d))) {
                struct stat st;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
                        total += (uint64_t) st.st_blocks * 512U;
        }
        *ret_bytes = total;
        return 0;
}
