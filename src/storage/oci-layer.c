/* SPDX-License-Identifier: MIT */
/* One image layer applied inside root_fd. Every path is resolved one
 * component at a time with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_XDEV): nothing is ever created, changed or removed outside the
 * root, and a member that would go through a symlink is refused (the classic
 * "symlink, then a file through it"). Pass 1 checks every member and applies
 * the whiteouts (.wh.NAME, .wh..wh..opq), which hide what lower layers have;
 * pass 2 creates the rest: owners, modes (setuid as the tar says; owners
 * must lie in 0..OCI_ID_MAX, the sandbox's id range), mtimes, user.* and
 * security.capability xattrs, hard links. Device nodes are refused. */

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "oci.h"
#include "pool-internal.h"
#include "str-util.h"

#define LAYER_COPY_CHUNK (128U * 1024U)
#define LAYER_DEPTH_MAX 256U

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

static int openat2_one(int dfd, const char *name, int flags) {
        struct open_how how = {
                .flags = (uint64_t) (flags | O_CLOEXEC | O_NOFOLLOW),
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        long fd = syscall(SYS_openat2, dfd, name, &how, sizeof how);
        return fd < 0 ? negative_errno() : (int) fd;
}

/* Opens the parent directory of the clean path (creating missing parents
 * 0755 root:root, as other runtimes do) and points *ret_base at its last
 * component. */
static int open_parent(int root_fd, const char *path, bool create, const char **ret_base, ApiError *e,
                       const char *what) {
        _cleanup_close_ int fd = -EBADF;
        const char *p = path, *slash;
        unsigned depth = 0;

        fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return negative_errno();
        while ((slash = strchr(p, '/'))) {
                char comp[256];
                size_t len = (size_t) (slash - p);
                int nfd;

                if (len >= sizeof comp || ++depth > LAYER_DEPTH_MAX)
                        return api_error(e, -ENAMETOOLONG, API_BAD_REQUEST, "%s: the path '%.200s' is too long or deep",
                                         what, path);
                memcpy(comp, p, len);
                comp[len] = '\0';
                nfd = openat2_one(fd, comp, O_RDONLY | O_DIRECTORY);
                if (nfd == -ENOENT && create) {
                        if (mkdirat(fd, comp, 0755) < 0 && errno != EEXIST)
                                return negative_errno();
                        nfd = openat2_one(fd, comp, O_RDONLY | O_DIRECTORY);
                }
                if (nfd == -ELOOP || nfd == -ENOTDIR || nfd == -EXDEV) {
                        struct stat st;
                        if (fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
                                return api_error(e, -ELOOP, API_BAD_REQUEST,
                                                 "%s: '%.200s' goes through the symlink '%.*s', which is refused", what,
                                                 path, (int) (slash - path), path);
                        return api_error(e, -ENOTDIR, API_BAD_REQUEST, "%s: a parent of '%.200s' is not a directory",
                                         what, path);
                }
                if (nfd < 0)
                        return nfd;
                safe_close(fd);
                fd = nfd;
                p = slash + 1;
        }
        *ret_base = p;
        return TAKE_FD(fd);
}

/* Removes dfd/name, whatever it is, never following a symlink: a symlink
 * goes, not what it points to (pool_remove_entry() resolves its path, which
 * is fine for the pool's own entries but not for an image's). */
static int tree_remove_at(int dfd, const char *name, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        struct stat st;
        int fd;

        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : negative_errno();
        if (!S_ISDIR(st.st_mode))
                return unlinkat(dfd, name, 0) < 0 && errno != ENOENT ? negative_errno() : 0;
        if (depth > LAYER_DEPTH_MAX)
                return -ELOOP;
        fd = openat2_one(dfd, name, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return fd;
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return negative_errno();
        }
        while ((errno = 0, de = readdir(d))) {
                int r;
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                r = tree_remove_at(dirfd(d), de->d_name, depth + 1);
                if (r < 0)
                        return r;
        }
        if (errno != 0)
                return negative_errno();
        return unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? negative_errno() : 0;
}

/* Empties the directory dfd (not following symlinks). */
static int tree_empty(int dfd) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);

        if (fd < 0)
                return negative_errno();
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return negative_errno();
        }
        while ((errno = 0, de = readdir(d))) {
                int r;
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                r = tree_remove_at(dirfd(d), de->d_name, 0);
                if (r < 0)
                        return r;
        }
        return errno != 0 ? negative_errno() : 0;
}

static int whiteout_apply(Pool *p, int root_fd, OciWhiteout kind, const char *target, ApiError *e, const char *what) {
        _cleanup_close_ int pfd = -EBADF;
        const char *base;

        if (kind == OCI_WHITEOUT_FILE) {
                pfd = open_parent(root_fd, target, false, &base, e, what);
                if (pfd == -ENOENT)
                        return 0; /* nothing below to hide */
                if (pfd < 0)
                        return pfd;
                return tree_remove_at(pfd, base, 0);
        }
        /* opaque: empty the directory of what the lower layers have */
        _cleanup_close_ int dfd = -EBADF;

        if (streq(target, "."))
                return tree_empty(root_fd);
        pfd = open_parent(root_fd, target, false, &base, e, what);
        if (pfd == -ENOENT)
                return 0;
        if (pfd < 0)
                return pfd;
        dfd = openat2_one(pfd, base, O_RDONLY | O_DIRECTORY);
        if (dfd == -ENOENT || dfd == -ENOTDIR || dfd == -ELOOP)
                return 0;
        if (dfd < 0)
                return dfd;
        return tree_empty(dfd);
}

static bool xattr_allowed(const char *name) {
        return strncmp(name, "user.", 5) == 0 || streq(name, "security.capability");
}

static int meta_apply_fd(int fd, const TarEntry *t) {
        struct timespec ts[2] = { { .tv_sec = t->mtime }, { .tv_sec = t->mtime } };

        if (fchown(fd, (uid_t) t->uid, (gid_t) t->gid) < 0)
                return negative_errno();
        /* after the chown, which clears setuid */
        if (fchmod(fd, (mode_t) t->mode) < 0)
                return negative_errno();
        for (size_t i = 0; i < t->n_xattrs; i++)
                if (xattr_allowed(t->xattrs[i].name) &&
                    fsetxattr(fd, t->xattrs[i].name, t->xattrs[i].value, t->xattrs[i].len, 0) < 0 && errno != ENOTSUP)
                        return negative_errno();
        if (futimens(fd, ts) < 0)
                return negative_errno();
        return 0;
}

static int copy_data(TarStream *s, int fd, uint64_t size, const char *path, ApiError *e, const char *what) {
        _cleanup_free_ char *buf = malloc(LAYER_COPY_CHUNK);

        if (!buf)
                return -ENOMEM;
        while (size > 0) {
                size_t n = size < LAYER_COPY_CHUNK ? (size_t) size : LAYER_COPY_CHUNK;
                int r = tar_read_data(s, buf, n);
                if (r == -EBADMSG)
                        return api_error(e, r, API_BAD_REQUEST,
                                         "%s: the layer ends inside '%.200s' (its declared size is larger than the data)",
                                         what, path);
                if (r < 0)
                        return r;
                r = loop_write(fd, buf, n);
                if (r < 0)
                        return r;
                size -= n;
        }
        return 0;
}

static int entry_create(Pool *p, int root_fd, TarStream *s, const TarEntry *t, const char *path, ApiError *e,
                        const char *what) {
        _cleanup_close_ int pfd = -EBADF, fd = -EBADF;
        const char *base;
        struct stat st;
        bool exists;
        int r;

        if (streq(path, ".")) {
                if (t->type != TAR_DIR)
                        return api_error(e, -EINVAL, API_BAD_REQUEST, "%s: the root is not a directory", what);
                return meta_apply_fd(root_fd, t);
        }
        pfd = open_parent(root_fd, path, true, &base, e, what);
        if (pfd < 0)
                return pfd;
        exists = fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0;
        if (exists && !(t->type == TAR_DIR && S_ISDIR(st.st_mode))) {
                r = tree_remove_at(pfd, base, 0);
                if (r < 0)
                        return r;
        }

        switch (t->type) {
        case TAR_DIR:
                if (!(exists && S_ISDIR(st.st_mode)) && mkdirat(pfd, base, 0700) < 0)
                        return negative_errno();
                fd = openat2_one(pfd, base, O_RDONLY | O_DIRECTORY);
                if (fd < 0)
                        return fd;
                return meta_apply_fd(fd, t);
        case TAR_FILE:
                fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd < 0)
                        return negative_errno();
                r = copy_data(s, fd, t->size, path, e, what);
                if (r < 0)
                        return r;
                return meta_apply_fd(fd, t);
        case TAR_FIFO:
                if (mknodat(pfd, base, S_IFIFO | 0600, 0) < 0)
                        return negative_errno();
                fd = openat2_one(pfd, base, O_PATH);
                if (fd < 0)
                        return fd;
                /* an O_PATH fd: owner and mode through the fd's /proc link-free variants */
                if (fchownat(pfd, base, (uid_t) t->uid, (gid_t) t->gid, AT_SYMLINK_NOFOLLOW) < 0 ||
                    fchmodat(pfd, base, (mode_t) t->mode, 0) < 0)
                        return negative_errno();
                return 0;
        case TAR_SYMLINK: {
                struct timespec ts[2] = { { .tv_sec = t->mtime }, { .tv_sec = t->mtime } };
                if (isempty(t->link))
                        return api_error(e, -EINVAL, API_BAD_REQUEST, "%s: the symlink '%.200s' is empty", what, path);
                if (symlinkat(t->link, pfd, base) < 0)
                        return negative_errno();
                if (fchownat(pfd, base, (uid_t) t->uid, (gid_t) t->gid, AT_SYMLINK_NOFOLLOW) < 0)
                        return negative_errno();
                (void) utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW);
                return 0;
        }
        case TAR_HARDLINK: {
                _cleanup_free_ char *target = NULL;
                _cleanup_close_ int tfd = -EBADF;
                const char *tbase;
                struct stat tst;

                if (oci_path_clean(t->link, &target) < 0 || streq(target, "."))
                        return api_error(e, -EINVAL, API_BAD_REQUEST,
                                         "%s: the hard link '%.200s' points outside the image ('%.200s')", what, path,
                                         t->link);
                tfd = open_parent(root_fd, target, false, &tbase, e, what);
                if (tfd == -ENOENT)
                        return api_error(e, -ENOENT, API_BAD_REQUEST,
                                         "%s: the hard link '%.200s' points to '%.200s', which does not exist", what,
                                         path, target);
                if (tfd < 0)
                        return tfd;
                if (fstatat(tfd, tbase, &tst, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(tst.st_mode))
                        return api_error(e, -ENOENT, API_BAD_REQUEST,
                                         "%s: the hard link '%.200s' points to '%.200s', which is no file", what, path,
                                         target);
                if (linkat(tfd, tbase, pfd, base, 0) < 0)
                        return negative_errno();
                return 0;
        }
        default:
                return api_error(e, -EPERM, API_BAD_REQUEST, "%s: '%.200s' is a device node, which is refused", what,
                                 path);
        }
}

int oci_layer_apply(Pool *p, int root_fd, TarStream *s, bool whiteouts, const char *what, ApiError *e) {
        char err[160];

        for (;;) {
                _cleanup_(tar_entry_done) TarEntry t = {};
                _cleanup_free_ char *path = NULL, *target = NULL;
                OciWhiteout kind;
                int r;

                r = tar_next(s, &t, err, sizeof err);
                if (r < 0)
                        return api_error(e, r, r == -ENOMEM ? API_UNAVAILABLE : API_BAD_REQUEST, "%s: %s", what, err);
                if (r == 0)
                        return 0;
                r = oci_path_clean(t.path, &path);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return api_error(e, r, API_BAD_REQUEST,
                                         "%s: the member '%.200s' is an absolute path or has '..', which is refused",
                                         what, t.path);
                r = oci_whiteout_classify(path, &kind, &target);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return api_error(e, r, API_BAD_REQUEST, "%s: the whiteout '%.200s' is malformed", what, path);
                if (whiteouts) {
                        if (t.type == TAR_CHAR || t.type == TAR_BLOCK)
                                return api_error(e, -EPERM, API_BAD_REQUEST,
                                                 "%s: '%.200s' is a device node, which is refused", what, path);
                        if (t.uid > OCI_ID_MAX || t.gid > OCI_ID_MAX)
                                return api_error(e, -ERANGE, API_BAD_REQUEST,
                                                 "%s: '%.200s' is owned by %llu:%llu, outside the sandbox's ids 0..%u",
                                                 what, path, (unsigned long long) t.uid, (unsigned long long) t.gid,
                                                 OCI_ID_MAX);
                        if (kind != OCI_WHITEOUT_NONE) {
                                r = whiteout_apply(p, root_fd, kind, target, e, what);
                                if (r < 0 && e->code == API_OK)
                                        return api_error(e, r, API_INTERNAL, "%s: applying the whiteout '%.200s': %s",
                                                         what, path, strerror(-r));
                                if (r < 0)
                                        return r;
                        }
                        continue;
                }
                if (kind != OCI_WHITEOUT_NONE)
                        continue;
                r = entry_create(p, root_fd, s, &t, path, e, what);
                if (r < 0 && e->code == API_OK)
                        return api_error(e, r, r == -ENOSPC || r == -EDQUOT ? API_INSUFFICIENT_STORAGE : API_INTERNAL,
                                         "%s: cannot create '%.200s': %s", what, path, strerror(-r));
                if (r < 0)
                        return r;
        }
}
