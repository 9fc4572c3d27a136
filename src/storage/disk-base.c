/* SPDX-License-Identifier: MIT */
/* Base snapshots of templates for the vm runtime (pool.h): a booted, idle
 * VM saved once, images/base/<template>/<variant>/{disk.img,memory.state,key}.
 * Made in tmp/ and renamed into place, so a half-made one is never found. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "json.h"
#include "pool-internal.h"
#include "str-util.h"

#define POOL_BASE_DIR "base"
#define POOL_BASE_KEY "key"
#define POOL_BASE_TMP_SUFFIX_LEN 8U

static bool variant_valid(const char *v) {
        size_t n = strlen(v);
        if (n == 0 || n > POOL_BASE_VARIANT_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= '0' && v[i] <= '9') || v[i] == '-'))
                        return false;
        return true;
}

static int base_check(Pool *p, const char *template_name, const char *variant) {
        int r = pool_usable(p);
        if (r < 0)
                return r;
        if (!pool_template_name_valid(template_name) || (variant && !variant_valid(variant)))
                return -EINVAL;
        return 0;
}

/* images/base/<template>[/<variant>] */
static char *base_path(Pool *p, const char *template_name, const char *variant) {
        _cleanup_free_ char *sub = strjoin(POOL_BASE_DIR "/", template_name);
        return sub ? pool_subpath(p, POOL_IMAGES_DIR, sub, variant) : NULL;
}

int pool_base_lookup(Pool *p, const char *template_name, const char *variant, const char *key, char **ret_dir) {
        _cleanup_free_ char *dir = NULL, *kp = NULL, *have = NULL, *disk = NULL, *mem = NULL;
        int r;

        r = base_check(p, template_name, variant);
        if (r < 0)
                return r;
        dir = base_path(p, template_name, variant);
        kp = dir ? strjoin(dir, "/" POOL_BASE_KEY) : NULL;
        disk = dir ? strjoin(dir, "/" POOL_SANDBOX_DISK) : NULL;
        mem = dir ? strjoin(dir, "/" POOL_SANDBOX_MEMORY) : NULL;
        if (!kp || !disk || !mem)
                return -ENOMEM;
        r = read_full_file(kp, POOL_BASE_KEY_MAX, &have, NULL);
        if (r == -ENOENT)
                return -ENOENT;
        if (r >= 0 && streq(have, key) && access(disk, R_OK) == 0 && access(mem, R_OK) == 0) {
                *ret_dir = TAKE_PTR(dir);
                return 0;
        }
        /* made from another kernel, agent, VMM or template image: it goes */
        (void) rm_rf(dir);
        return -ENOENT;
}

int pool_base_begin(Pool *p, const char *template_name, const char *variant, char **ret_dir) {
        _cleanup_free_ char *name = NULL, *dir = NULL;
        char suffix[POOL_BASE_TMP_SUFFIX_LEN + 1];
        int r;

        r = base_check(p, template_name, variant);
        if (r < 0)
                return r;
        r = random_alnum(suffix, POOL_BASE_TMP_SUFFIX_LEN);
        if (r < 0)
                return r;
        suffix[POOL_BASE_TMP_SUFFIX_LEN] = 0;
        name = strjoin("base.", template_name, ".", variant, ".", suffix);
        dir = name ? pool_subpath(p, POOL_TMP_DIR, name, NULL) : NULL;
        if (!dir)
                return -ENOMEM;
        if (mkdir(dir, 0700) < 0)
                return negative_errno();
        *ret_dir = TAKE_PTR(dir);
        return 0;
}

void pool_base_abandon(Pool *p, const char *dir) {
        (void) p;
        if (dir)
                (void) rm_rf(dir);
}

int pool_base_commit(Pool *p, const char *template_name, const char *variant, const char *dir, const char *key) {
        _cleanup_free_ char *images = NULL, *base = NULL, *tdir = NULL, *final = NULL, *old = NULL, *kp = NULL;
        _cleanup_close_ int kfd = -EBADF;
        int r;

        r = base_check(p, template_name, variant);
        if (r < 0)
                goto fail;
        images = pool_subpath(p, POOL_IMAGES_DIR, NULL, NULL);
        base = pool_subpath(p, POOL_IMAGES_DIR, POOL_BASE_DIR, NULL);
        tdir = base_path(p, template_name, NULL);
        final = base_path(p, template_name, variant);
        old = strjoin(dir, ".old");
        kp = strjoin(dir, "/" POOL_BASE_KEY);
        if (!images || !base || !tdir || !final || !old || !kp) {
                r = -ENOMEM;
                goto fail;
        }
        kfd = open(kp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (kfd < 0 || loop_write(kfd, key, strlen(key)) < 0) {
                r = negative_errno();
                goto fail;
        }
        if ((mkdir(images, 0700) < 0 && errno != EEXIST) || (mkdir(base, 0700) < 0 && errno != EEXIST) ||
            (mkdir(tdir, 0700) < 0 && errno != EEXIST)) {
                r = negative_errno();
                goto fail;
        }
        /* an older one of this variant moves out of the way first */
        if (rename(final, old) < 0 && errno != ENOENT) {
                r = negative_errno();
                goto fail;
        }
        if (rename(dir, final) < 0) {
                r = negative_errno();
                goto fail;
        }
        (void) rm_rf(old);
        return 0;
fail:
        (void) rm_rf(dir);
        return r;
}

int pool_template_image_stamp(Pool *p, const char *template_name, char *buf, size_t size) {
        _cleanup_free_ char *path = NULL;
        struct stat st;
        int r;

        r = base_check(p, template_name, NULL);
        if (r < 0)
                return r;
        path = strjoin(template_name, ".ext4");
        if (!path)
                return -ENOMEM;
        {
                _cleanup_free_ char *full = pool_subpath(p, POOL_IMAGES_DIR, path, NULL);
                if (!full)
                        return -ENOMEM;
                if (stat(full, &st) < 0)
                        return negative_errno();
        }
        snprintf(buf, size, "%" PRIu64 "-%" PRIu64 "-%" PRIu64 ".%09ld", (uint64_t) st.st_ino, (uint64_t) st.st_size,
                 (uint64_t) st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
        return 0;
}

static uint64_t dir_bytes(const char *dir) {
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        uint64_t n = 0;

        if (fd >= 0)
                (void) pool_disk_checkpoint_usage(fd, &n);
        return n;
}

int pool_base_list_json(Pool *p, char **ret) {
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_(closedirp_) DIR *d = NULL;
        _cleanup_free_ char *base = NULL;
        struct dirent *de;
        int r;

        json_w_init(&w);
        r = pool_usable(p);
        if (r < 0)
                return r;
        base = pool_subpath(p, POOL_IMAGES_DIR, POOL_BASE_DIR, NULL);
        if (!base)
                return -ENOMEM;
        json_w_array_begin(&w);
        d = opendir(base);
        while (d && (de = readdir(d))) {
                _cleanup_(closedirp_) DIR *v = NULL;
                _cleanup_free_ char *tdir = NULL;
                struct dirent *ve;
                if (!pool_template_name_valid(de->d_name))
                        continue;
                tdir = strjoin(base, "/", de->d_name);
                v = tdir ? opendir(tdir) : NULL;
                while (v && (ve = readdir(v))) {
                        _cleanup_free_ char *vdir = NULL;
                        if (!variant_valid(ve->d_name))
                                continue;
                        vdir = strjoin(tdir, "/", ve->d_name);
                        if (!vdir)
                                return -ENOMEM;
                        json_w_object_begin(&w);
                        json_w_kv_string(&w, "template", de->d_name);
                        json_w_kv_string(&w, "variant", ve->d_name);
                        json_w_key(&w, "size_bytes");
                        json_w_uint(&w, dir_bytes(vdir));
                        json_w_object_end(&w);
                }
        }
        json_w_array_end(&w);
        return json_w_finish(&w, ret, NULL);
}

int pool_base_remove(Pool *p, const char *template_name) {
        _cleanup_free_ char *dir = NULL;
        int r;

        r = base_check(p, template_name, NULL);
        if (r < 0)
                return r;
        dir = base_path(p, template_name, NULL);
        if (!dir)
                return -ENOMEM;
        r = rm_rf(dir);
        return r == -ENOENT ? 0 : r;
}
