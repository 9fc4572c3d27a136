/* SPDX-License-Identifier: MIT */
/* The layers of Dockerfile builds (pool.h): layers/<key> made from its
 * parent (a layer, a template, a build sandbox's root or nothing) with a tar
 * of copied files applied and the image's exec defaults written, and the
 * template made from the last of them. btrfs only: every step a snapshot. */

#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alloc-util.h"
#include "btrfs.h"
#include "fd-util.h"
#include "log.h"
#include "oci.h"
#include "passwd-util.h"
#include "pool-internal.h"
#include "str-util.h"

static bool key_valid(const char *k) {
        return k && strlen(k) == 64 && strspn(k, "0123456789abcdef") == 64;
}

/* Applies the tar at path in root_fd in the two passes of a layer. */
static int apply_tar(Pool *p, int root_fd, const char *path, ApiError *e) {
        for (int pass = 0; pass < 2; pass++) {
                _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                TarStream s;
                int r;

                if (fd < 0)
                        return api_error(e, negative_errno(), API_INTERNAL, "cannot open the step's files: %m");
                s = tar_stream_of_fd(&fd);
                r = oci_layer_apply(p, root_fd, &s, pass == 0, "the copied files", e);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int write_defaults(int root_fd, const char *defaults) {
        _cleanup_close_ int fd = -EBADF;

        if (unlinkat(root_fd, OCI_DEFAULTS_FILE, 0) < 0 && errno != ENOENT)
                return negative_errno();
        if (streq(defaults, "{}"))
                return 0;
        fd = openat(root_fd, OCI_DEFAULTS_FILE, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return negative_errno();
        return loop_write(fd, defaults, strlen(defaults));
}

/* mkdir -p of a clean relative path in root_fd, never through a symlink, existing directories untouched */
static int mkdir_in(int root_fd, const char *path) {
        _cleanup_close_ int fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
        const char *p = path;

        if (fd < 0)
                return negative_errno();
        while (*p) {
                size_t l = strcspn(p, "/");
                char comp[256];
                int next;

                if (l == 0 || l >= sizeof comp || (l <= 2 && strncmp(p, "..", l) == 0))
                        return -EINVAL;
                memcpy(comp, p, l);
                comp[l] = 0;
                if (mkdirat(fd, comp, 0755) < 0 && errno != EEXIST)
                        return negative_errno();
                next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (next < 0)
                        return negative_errno();
                safe_close(fd);
                fd = next;
                p += l;
                while (*p == '/')
                        p++;
        }
        return 0;
}

int pool_build_layer(Pool *p, const PoolBuildSource *src, const char *key, const char *tar_path,
                     const char *mkdir_path, const char *defaults, ApiError *e) {
        _cleanup_close_ int tmp_fd = -EBADF, lay_fd = -EBADF, parent_fd = -EBADF, root_fd = -EBADF;
        _cleanup_free_ char *work = NULL, *parent = NULL;
        char suffix[9];
        struct stat st;
        int r;

        r = pool_usable(p);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "the pool is not usable: %s", strerror(-r));
        if (p->kind != POOL_BTRFS)
                return api_error(e, -EOPNOTSUPP, API_UNSUPPORTED, "template builds need a btrfs storage pool");
        if (!key_valid(key))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "a layer key is 64 hex digits");
        lay_fd = pool_open_subdir(p, POOL_LAYERS_DIR);
        tmp_fd = lay_fd >= 0 ? pool_open_subdir(p, POOL_TMP_DIR) : lay_fd;
        if (tmp_fd < 0)
                return api_error(e, tmp_fd, API_INTERNAL, "cannot open the pool: %s", strerror(-tmp_fd));
        if (fstatat(lay_fd, key, &st, AT_SYMLINK_NOFOLLOW) == 0)
                return 0; /* made already (cached) */

        switch (src->kind) {
        case POOL_BUILD_FROM_LAYER:
                if (!key_valid(src->name))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "a layer key is 64 hex digits");
                parent = pool_subpath(p, POOL_LAYERS_DIR, src->name, NULL);
                break;
        case POOL_BUILD_FROM_TEMPLATE:
                if (!pool_template_name_valid(src->name))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "invalid template name");
                parent = pool_subpath(p, POOL_TEMPLATES_DIR, src->name, NULL);
                break;
        case POOL_BUILD_FROM_SANDBOX:
                if (!pool_sandbox_id_valid(src->name))
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "invalid sandbox id");
                parent = pool_subpath(p, POOL_SANDBOXES_DIR, src->name, "root");
                break;
        case POOL_BUILD_FROM_SCRATCH:
                break;
        default:
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "unknown layer source");
        }
        if (src->kind != POOL_BUILD_FROM_SCRATCH) {
                if (!parent)
                        return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                parent_fd = open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (parent_fd < 0)
                        return api_error(e, negative_errno(), errno == ENOENT ? API_NOT_FOUND : API_INTERNAL,
                                         "the step's parent is gone: %m");
        }
        r = random_alnum(suffix, sizeof suffix - 1);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "no randomness: %s", strerror(-r));
        suffix[sizeof suffix - 1] = 0;
        work = strjoin("build-", key, ".", suffix);
        if (!work)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        r = parent_fd >= 0 ? btrfs_subvol_snapshot(parent_fd, tmp_fd, work, false) : btrfs_subvol_create(tmp_fd, work);
        if (r < 0)
                return api_error(e, r, r == -ENOSPC ? API_INSUFFICIENT_STORAGE : API_INTERNAL,
                                 "cannot create the step's subvolume: %s", strerror(-r));
        root_fd = openat(tmp_fd, work, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        r = root_fd < 0 ? api_error(e, negative_errno(), API_INTERNAL, "cannot open the step's subvolume: %m") : 0;
        if (r >= 0 && !isempty(tar_path))
                r = apply_tar(p, root_fd, tar_path, e);
        if (r >= 0 && !isempty(mkdir_path)) {
                r = mkdir_in(root_fd, mkdir_path);
                if (r < 0)
                        (void) api_error(e, r, API_INVALID_ARGUMENT, "cannot make the directory '%.200s': %s",
                                         mkdir_path, strerror(-r));
        }
        if (r >= 0 && defaults) {
                r = write_defaults(root_fd, defaults);
                if (r < 0)
                        (void) api_error(e, r, API_INTERNAL, "cannot write the image's defaults: %s", strerror(-r));
        }
        if (r >= 0) {
                r = btrfs_subvol_snapshot(root_fd, lay_fd, key, true);
                if (r == -EEXIST)
                        r = 0; /* a concurrent build made it */
                if (r < 0)
                        (void) api_error(e, r, r == -ENOSPC ? API_INSUFFICIENT_STORAGE : API_INTERNAL,
                                         "cannot keep the step's layer: %s", strerror(-r));
        }
        root_fd = safe_close(root_fd);
        int k = pool_remove_entry(p, tmp_fd, work);
        if (k < 0)
                log_debug_errno(k, "Failed to remove the build's work tree '%s': %m", work);
        if (r < 0 && e->code == API_OK)
                (void) api_error(e, r, r == -ENOSPC || r == -EDQUOT ? API_INSUFFICIENT_STORAGE : API_INTERNAL,
                                 "the step failed: %s", strerror(-r));
        return r;
}

int pool_build_layer_defaults(Pool *p, const char *key, char **ret) {
        _cleanup_close_ int lay_fd = -EBADF, root = -EBADF, fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        ssize_t n;

        if (pool_usable(p) < 0 || !key_valid(key))
                return -EINVAL;
        lay_fd = pool_open_subdir(p, POOL_LAYERS_DIR);
        if (lay_fd < 0)
                return lay_fd;
        root = openat(lay_fd, key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0)
                return negative_errno();
        fd = openat(root, OCI_DEFAULTS_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return errno == ENOENT ? 0 : negative_errno();
        buf = malloc(64 * 1024 + 1);
        if (!buf)
                return -ENOMEM;
        n = read(fd, buf, 64 * 1024 + 1);
        if (n < 0)
                return negative_errno();
        if (n > 64 * 1024)
                return -EFBIG;
        buf[n] = 0;
        *ret = TAKE_PTR(buf);
        return 1;
}

/* etc/<name> of the layer at root, resolved inside it (its symlinks are the image's: ".." and absolute
 * targets stay in the root), a regular file of at most POOL_LAYER_ETC_MAX bytes: 1 with its contents, 0 if
 * there is none. */
static int read_etc(int root, const char *name, char **ret, size_t *ret_n, ApiError *e) {
        struct open_how how = {
                .flags = O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        _cleanup_free_ char *rel = strjoin("etc/", name), *buf = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        ssize_t n;

        if (!rel)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        for (unsigned i = 0; i < 8; i++) { /* EAGAIN: a rename raced with the resolution */
                fd = (int) syscall(SYS_openat2, root, rel, &how, sizeof how);
                if (fd >= 0 || errno != EAGAIN)
                        break;
        }
        if (fd < 0 && errno == ENOENT)
                return 0;
        if (fd < 0)
                return api_error(e, negative_errno(), API_INVALID_ARGUMENT, "cannot open the image's /etc/%s: %m",
                                 name);
        if (fstat(fd, &st) < 0)
                return api_error(e, negative_errno(), API_INTERNAL, "cannot stat the image's /etc/%s: %m", name);
        if (!S_ISREG(st.st_mode))
                return api_error(e, -EBADMSG, API_INVALID_ARGUMENT, "the image's /etc/%s is not a regular file", name);
        if (st.st_size > (off_t) POOL_LAYER_ETC_MAX)
                return api_error(e, -EFBIG, API_INVALID_ARGUMENT, "the image's /etc/%s is larger than %u bytes", name,
                                 POOL_LAYER_ETC_MAX);
        buf = malloc(POOL_LAYER_ETC_MAX + 1);
        if (!buf)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        n = loop_read(fd, buf, POOL_LAYER_ETC_MAX + 1); /* it may have grown since the fstat */
        if (n < 0)
                return api_error(e, (int) n, API_INTERNAL, "cannot read the image's /etc/%s: %s", name,
                                 strerror((int) -n));
        if (n > (ssize_t) POOL_LAYER_ETC_MAX)
                return api_error(e, -EFBIG, API_INVALID_ARGUMENT, "the image's /etc/%s is larger than %u bytes", name,
                                 POOL_LAYER_ETC_MAX);
        *ret = TAKE_PTR(buf);
        *ret_n = (size_t) n;
        return 1;
}

int pool_build_layer_ids(Pool *p, const char *key, const char *user, const char *group, PoolLayerIds *ret,
                         ApiError *e) {
        _cleanup_close_ int lay_fd = -EBADF, root = -EBADF;
        PoolLayerIds ids = {};
        int r;

        r = pool_usable(p);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "the pool is not usable: %s", strerror(-r));
        if (!key_valid(key))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "a layer key is 64 hex digits");
        if ((user && !passwd_name_valid(user)) || (group && !passwd_name_valid(group)))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "a user or group name is 1 to %u of [A-Za-z0-9_.-], not starting with '-'",
                                 PASSWD_NAME_MAX);
        lay_fd = pool_open_subdir(p, POOL_LAYERS_DIR);
        if (lay_fd < 0)
                return api_error(e, lay_fd, API_INTERNAL, "cannot open the pool: %s", strerror(-lay_fd));
        root = openat(lay_fd, key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0)
                return api_error(e, negative_errno(), errno == ENOENT ? API_NOT_FOUND : API_INTERNAL,
                                 "no layer %s: %m", key);
        for (int i = 0; i < 2; i++) {
                const char *name = i == 0 ? user : group, *file = i == 0 ? "passwd" : "group";
                const char *what = i == 0 ? "user" : "group";
                _cleanup_free_ char *buf = NULL;
                size_t n = 0;

                if (!name)
                        continue;
                r = read_etc(root, file, &buf, &n, e);
                if (r < 0)
                        return r;
                if (r == 0)
                        return api_error(e, -ENOENT, API_INVALID_ARGUMENT,
                                         "the image has no /etc/%s to look up %s '%s' in", file, what, name);
                r = i == 0 ? passwd_lookup(buf, n, name, &ids.uid, &ids.user_gid)
                           : group_lookup(buf, n, name, &ids.gid);
                if (r == -EBADMSG)
                        return api_error(e, r, API_INVALID_ARGUMENT,
                                         "the image's /etc/%s has no well-formed line for %s '%s'", file, what, name);
                if (r < 0)
                        return api_error(e, r, API_INVALID_ARGUMENT, "looking up %s '%s' failed: %s", what, name,
                                         strerror(-r));
                if (r == 0)
                        return api_error(e, -ENOENT, API_INVALID_ARGUMENT, "no %s '%s' in the image's /etc/%s", what,
                                         name, file);
        }
        *ret = ids;
        return 0;
}

int pool_build_publish(Pool *p, const char *key, const char *name, uint64_t *ret_size, ApiError *e) {
        _cleanup_close_ int lay_fd = -EBADF, tpl_fd = -EBADF, src_fd = -EBADF;
        _cleanup_free_ char *tpath = NULL;
        int r;

        r = pool_usable(p);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "the pool is not usable: %s", strerror(-r));
        if (p->kind != POOL_BTRFS)
                return api_error(e, -EOPNOTSUPP, API_UNSUPPORTED, "template builds need a btrfs storage pool");
        if (!key_valid(key) || !pool_template_name_valid(name))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "a layer key and a template name are needed");
        lay_fd = pool_open_subdir(p, POOL_LAYERS_DIR);
        tpl_fd = lay_fd >= 0 ? pool_open_subdir(p, POOL_TEMPLATES_DIR) : lay_fd;
        if (tpl_fd < 0)
                return api_error(e, tpl_fd, API_INTERNAL, "cannot open the pool: %s", strerror(-tpl_fd));
        src_fd = openat(lay_fd, key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (src_fd < 0)
                return api_error(e, negative_errno(), API_NOT_FOUND, "no layer %s: %m", key);
        /* the old version goes only now, when the new one is complete; sandboxes made from it
         * keep their own snapshots */
        if (pool_template_exists(p, name)) {
                r = pool_template_remove(p, name);
                if (r < 0)
                        return api_error(e, r, API_INTERNAL, "cannot replace template '%s': %s", name, strerror(-r));
        }
        r = btrfs_subvol_snapshot(src_fd, tpl_fd, name, true);
        if (r < 0)
                return api_error(e, r, r == -ENOSPC ? API_INSUFFICIENT_STORAGE : API_INTERNAL,
                                 "cannot make template '%s': %s", name, strerror(-r));
        tpath = pool_subpath(p, POOL_TEMPLATES_DIR, name, NULL);
        if (!tpath || pool_template_scan(tpath, ret_size) < 0)
                *ret_size = 0;
        return 0;
}
