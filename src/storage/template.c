/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>

#include "alloc-util.h"
#include "btrfs.h"
#include "fd-util.h"
#include "log.h"
#include "pool-internal.h"
#include "spawn.h"
#include "str-util.h"

/* Directory depth the size walk follows; deeper trees fail the import (-ELOOP). */
#define TEMPLATE_DEPTH_MAX 256U
#define TEMPLATE_TMP_SUFFIX_LEN 8U

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

/* name, or name@vN: a version of it kept beside it (N a decimal > 0). */
bool pool_template_name_valid(const char *name) {
        const char *at;
        size_t n;

        if (!name)
                return false;
        n = strnlen(name, POOL_TEMPLATE_NAME_MAX + 1);
        if (n == 0 || n > POOL_TEMPLATE_NAME_MAX)
                return false;
        at = memchr(name, '@', n);
        if (at) {
                const char *d = at + 2;
                if (at[1] != 'v' || !*d || *d == '0' || strlen(d) > 20)
                        return false;
                for (; *d; d++)
                        if (*d < '0' || *d > '9')
                                return false;
                n = (size_t) (at - name);
        }
        if (n == 0 || n > POOL_TEMPLATE_BASE_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = name[i];
                bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
                if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
                        return false;
        }
        return true;
}

bool pool_template_exists(Pool *p, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (pool_usable(p) < 0 || !pool_template_name_valid(name))
                return false;
        fd = pool_open_subdir(p, POOL_TEMPLATES_DIR);
        return fd >= 0 && fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

int pool_template_path(Pool *p, const char *name, char **ret) {
        char *path;
        int r;

        r = pool_usable(p);
        if (r < 0)
                return r;
        if (!pool_template_name_valid(name))
                return -EINVAL;
        if (!pool_template_exists(p, name))
                return -ENOENT;
        path = pool_subpath(p, POOL_TEMPLATES_DIR, name, NULL);
        if (!path)
                return -ENOMEM;
        *ret = path;
        return 0;
}

int pool_template_list(Pool *p, char ***ret_names) {
        return pool_list_names(p, POOL_TEMPLATES_DIR, pool_template_name_valid, ret_names);
}

int pool_template_remove(Pool *p, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        r = pool_usable(p);
        if (r < 0)
                return r;
        if (!pool_template_name_valid(name))
                return -EINVAL;
        if (!pool_template_exists(p, name))
                return -ENOENT;
        fd = pool_open_subdir(p, POOL_TEMPLATES_DIR);
        if (fd < 0)
                return fd;
        r = pool_remove_entry(p, fd, name);
        if (r >= 0)
                r = pool_template_image_remove(p, name);
        return r;
}

/* templates/<name> becomes a read-only copy of templates/<name>@v<version>
 * (on btrfs a snapshot: O(1), sharing every extent); the version stays. */
int pool_template_promote(Pool *p, const char *name, uint64_t version) {
        _cleanup_close_ int tpl_fd = -EBADF, src_fd = -EBADF;
        char vname[POOL_TEMPLATE_NAME_MAX + 1];
        int r;

        r = pool_usable(p);
        if (r < 0)
                return r;
        if (!pool_template_name_valid(name) || strchr(name, '@') || version == 0)
                return -EINVAL;
        (void) snprintf(vname, sizeof vname, "%s@v%" PRIu64, name, version);
        if (!pool_template_exists(p, vname))
                return -ENOENT;
        tpl_fd = pool_open_subdir(p, POOL_TEMPLATES_DIR);
        if (tpl_fd < 0)
                return tpl_fd;
        if (p->kind != POOL_BTRFS) {
                /* an overlay sandbox's lower directory is the template itself: not replaced under it */
                _cleanup_strv_free_ char **ids = NULL;
                r = pool_sandbox_list(p, &ids);
                if (r < 0)
                        return r;
                for (char **id = ids; id && *id; id++) {
                        _cleanup_free_ char *tpl = NULL;
                        if (pool_sandbox_template_name(p, *id, &tpl) >= 0 && streq(tpl, name))
                                return -EBUSY;
                }
        }
        if (pool_template_exists(p, name)) {
                r = pool_template_remove(p, name);
                if (r < 0)
                        return r;
        }
        if (p->kind == POOL_BTRFS) {
                src_fd = openat(tpl_fd, vname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (src_fd < 0)
                        return negative_errno();
                return btrfs_subvol_snapshot(src_fd, tpl_fd, name, true);
        } else {
                _cleanup_free_ char *cp = NULL, *src = NULL, *dst = NULL;
                char out[SPAWN_OUTPUT_MAX];

                r = spawn_find_binary("cp", &cp);
                if (r < 0)
                        return r;
                src = pool_subpath(p, POOL_TEMPLATES_DIR, vname, NULL);
                dst = pool_subpath(p, POOL_TEMPLATES_DIR, name, NULL);
                if (!src || !dst)
                        return -ENOMEM;
                char *argv[] = { cp, (char *) "-a", (char *) "--reflink=auto", src, dst, NULL };
                return spawn_and_wait(argv, -EBADF, out, sizeof out);
        }
}

/* --- the imported tree: device nodes out, disk usage (du: allocated blocks,
 * hard links once) --- */

typedef struct InodeId {
        dev_t dev;
        ino_t ino;
} InodeId;

typedef struct DuState {
        InodeId *seen; /* sorted */
        size_t n, allocated;
        uint64_t bytes;
} DuState;

static int inode_cmp(const InodeId *a, const InodeId *b) {
        if (a->dev != b->dev)
                return a->dev < b->dev ? -1 : 1;
        if (a->ino != b->ino)
                return a->ino < b->ino ? -1 : 1;
        return 0;
}

/* Returns 1 if the inode was already counted, else records it and returns 0. */
static int du_seen(DuState *s, const struct stat *st) {
        InodeId id = { st->st_dev, st->st_ino };
        size_t lo = 0, hi = s->n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = inode_cmp(&s->seen[mid], &id);
                if (c == 0)
                        return 1;
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (GREEDY_REALLOC(s->seen, s->allocated, s->n + 1) < 0)
                return -ENOMEM;
        memmove(s->seen + lo + 1, s->seen + lo, (s->n - lo) * sizeof *s->seen);
        s->seen[lo] = id;
        s->n++;
        return 0;
}

/* Takes dfd. */
static int du_at(int dfd, dev_t dev, unsigned depth, DuState *s) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;

        if (depth > TEMPLATE_DEPTH_MAX) {
                safe_close(dfd);
                return -ELOOP;
        }
        d = fdopendir(dfd);
        if (!d) {
                safe_close(dfd);
                return negative_errno();
        }
        while ((errno = 0, de = readdir(d))) {
                struct stat st;
                int r;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return negative_errno();
                if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
                        /* A template brings no devices: a node like /dev/vda with
                         * mode 0666 would hand the host's disk to the sandbox. The
                         * runtime provides /dev. */
                        log_debug("Dropping device node '%s' from the template", de->d_name);
                        if (unlinkat(dirfd(d), de->d_name, 0) < 0)
                                return negative_errno();
                        continue;
                }
                if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
                        r = du_seen(s, &st);
                        if (r < 0)
                                return r;
                        if (r > 0)
                                continue;
                }
                s->bytes += (uint64_t) st.st_blocks * 512;
                if (S_ISDIR(st.st_mode) && st.st_dev == dev) {
                        int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub < 0)
                                return negative_errno();
                        r = du_at(sub, dev, depth + 1, s);
                        if (r < 0)
                                return r;
                }
        }
        return errno != 0 ? negative_errno() : 0;
}

/* Drops device nodes and sums the disk usage of the tree at path. */
int pool_template_scan(const char *path, uint64_t *ret) {
        DuState s = {};
        struct stat st;
        int fd, r;

        fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0) {
                safe_close(fd);
                return negative_errno();
        }
        s.bytes = (uint64_t) st.st_blocks * 512;
        r = du_at(fd, st.st_dev, 0, &s);
        free(s.seen);
        if (r < 0)
                return r;
        *ret = s.bytes;
        return 0;
}

/* --- import --- */

static int extract_tar(const char *tar_path, const char *dir) {
        _cleanup_free_ char *tar = NULL;
        char out[SPAWN_OUTPUT_MAX];
        int r;

        r = spawn_find_binary("tar", &tar);
        if (r < 0)
                return r;
        /* GNU tar: owners by number as stored, modes with setuid bits, the
         * file capabilities and user xattrs only (no trusted.* such as
         * trusted.overlay.*). Its defaults keep everything inside dir: leading
         * '/' stripped, members with ".." refused, symlinks that point out
         * created last. --force-local: a ':' in the path is no remote host. */
        char *argv[] = {
                tar,
                (char *) "--extract",
                (char *) "--file", (char *) tar_path,
                (char *) "--directory", (char *) dir,
                (char *) "--force-local",
                (char *) "--numeric-owner",
                (char *) "--same-owner",
                (char *) "--same-permissions",
                (char *) "--xattrs",
                (char *) "--xattrs-include=user.*",
                (char *) "--xattrs-include=security.capability",
                (char *) "--delay-directory-restore",
                NULL,
        };
        r = spawn_and_wait(argv, -EBADF, out, sizeof out);
        if (r != -EPROTO)
                return r;
        log_debug("tar failed on '%s': %s", tar_path, out);
        /* The pool filling up is not a bad archive. */
        if (strstr(out, "No space left on device"))
                return -ENOSPC;
        if (strstr(out, "Disk quota exceeded"))
                return -EDQUOT;
        return -EBADMSG;
}

/* Moves tmp/<tmpname> to templates/<name>. btrfs cannot rename a read-only
 * subvolume (EROFS), so there the template appears as a read-only snapshot
 * of the import (O(1), atomic: it is never visible writable) and the import
 * subvolume goes. */
int pool_template_commit(Pool *p, int tmp_fd, const char *tmpname, int tpl_fd, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (p->kind != POOL_BTRFS)
                return renameat2(tmp_fd, tmpname, tpl_fd, name, RENAME_NOREPLACE) < 0 ? negative_errno() : 0;

        fd = openat(tmp_fd, tmpname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        r = btrfs_subvol_snapshot(fd, tpl_fd, name, true);
        if (r < 0)
                return r;
        fd = safe_close(fd);
        r = btrfs_subvol_remove(tmp_fd, tmpname);
        if (r < 0)
                log_debug_errno(r, "Failed to remove the import subvolume '%s' (removed at the next open): %m", tmpname);
        return 0;
}

int pool_template_import_tar(Pool *p, const char *name, const char *tar_path, uint64_t *ret_size_bytes) {
        _cleanup_close_ int tmp_fd = -EBADF, tpl_fd = -EBADF;
        _cleanup_free_ char *tmpname = NULL, *tmppath = NULL, *abs_tar = NULL;
        char suffix[TEMPLATE_TMP_SUFFIX_LEN + 1];
        uint64_t size = 0;
        struct stat st;
        int r;

        r = pool_usable(p);
        if (r < 0)
                return r;
        if (!pool_template_name_valid(name) || isempty(tar_path))
                return -EINVAL;
        if (pool_template_exists(p, name))
                return -EEXIST;
        if (stat(tar_path, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        abs_tar = realpath(tar_path, NULL);
        if (!abs_tar)
                return negative_errno();
        if (access(abs_tar, R_OK) < 0)
                return negative_errno();

        tmp_fd = pool_open_subdir(p, POOL_TMP_DIR);
        if (tmp_fd < 0)
                return tmp_fd;
        tpl_fd = pool_open_subdir(p, POOL_TEMPLATES_DIR);
        if (tpl_fd < 0)
                return tpl_fd;
        r = random_alnum(suffix, TEMPLATE_TMP_SUFFIX_LEN);
        if (r < 0)
                return r;
        tmpname = strjoin(name, ".", suffix);
        tmppath = tmpname ? pool_subpath(p, POOL_TMP_DIR, tmpname, NULL) : NULL;
        if (!tmppath)
                return -ENOMEM;

        if (p->kind == POOL_BTRFS)
                r = btrfs_subvol_create(tmp_fd, tmpname);
        else
                r = mkdirat(tmp_fd, tmpname, 0755) < 0 ? negative_errno() : 0;
        if (r < 0)
                return r;

        r = extract_tar(abs_tar, tmppath);
        if (r >= 0)
                r = pool_template_scan(tmppath, &size);
        if (r >= 0)
                r = pool_template_commit(p, tmp_fd, tmpname, tpl_fd, name);
        if (r < 0) {
                int k = pool_remove_entry(p, tmp_fd, tmpname);
                if (k < 0)
                        log_debug_errno(k, "Failed to remove the failed import '%s': %m", tmppath);
                return r;
        }
        if (ret_size_bytes)
                *ret_size_bytes = size;
        return 0;
}
