/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>

#include "fd-util.h"
#include "loop.h"
#include "str-util.h"

#define LOOP_POLL_MSEC 10U
#define LOOP_SYSFS_VALUE_MAX 8192U

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

/* "/dev/loopN" → "loopN"; -EINVAL for anything else. */
static int loop_name(const char *devpath, const char **ret) {
        const char *n = startswith(strempty(devpath), "/dev/");
        unsigned idx;

        if (!n || !startswith(n, "loop") || safe_atou(n + 4, &idx) < 0)
                return -EINVAL;
        *ret = n;
        return 0;
}

static void sleep_poll(void) {
        (void) nanosleep(&(struct timespec){ .tv_nsec = LOOP_POLL_MSEC * 1000 * 1000 }, NULL);
}

/* Whether sysfs says the device "loopN" is backed by the file at real (a resolved path). */
static bool loop_backing_is(const char *name, const char *real) {
        _cleanup_free_ char *backing = NULL;
        char p[128];
        size_t n;

        snprintf(p, sizeof p, "/sys/block/%.32s/loop/backing_file", name);
        if (read_full_file(p, LOOP_SYSFS_VALUE_MAX, &backing, &n) < 0)
                return false; /* unbound */
        while (n > 0 && backing[n - 1] == '\n')
                backing[--n] = 0;
        return streq(backing, real);
}

bool loop_is_bound(const char *devpath) {
        char p[128];
        const char *name;

        if (loop_name(devpath, &name) < 0)
                return false;
        snprintf(p, sizeof p, "/sys/block/%.32s/loop/backing_file", name);
        return access(p, F_OK) == 0;
}

int loop_attach(int image_fd, int *ret_fd, char **ret_devpath) {
        _cleanup_close_ int ctl = -EBADF;

        if (image_fd < 0 || !ret_fd || !ret_devpath)
                return -EINVAL;
        ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC | O_NOCTTY);
        if (ctl < 0)
                return negative_errno();

        for (unsigned attempt = 0; attempt < LOOP_ATTACH_ATTEMPTS; attempt++) {
                struct loop_config config = {
                        .fd = (uint32_t) image_fd,
                        .info.lo_flags = LO_FLAGS_AUTOCLEAR, /* read-write, no direct I/O */
                };
                _cleanup_close_ int fd = -EBADF;
                char devpath[64];
                char *p;
                int n;

                n = ioctl(ctl, LOOP_CTL_GET_FREE);
                if (n < 0)
                        return negative_errno();
                snprintf(devpath, sizeof devpath, "/dev/loop%d", n);
                fd = open(devpath, O_RDWR | O_CLOEXEC | O_NOCTTY);
                if (fd < 0) {
                        if (errno == ENOENT || errno == ENXIO)
                                continue; /* raced with a removal */
                        return negative_errno();
                }
                if (ioctl(fd, LOOP_CONFIGURE, &config) < 0) {
                        if (errno == EBUSY)
                                continue; /* another process took it first */
                        return negative_errno();
                }
                p = strdup(devpath);
                if (!p)
                        return -ENOMEM; /* fd closes: autoclear detaches */
                *ret_devpath = p;
                *ret_fd = TAKE_FD(fd);
                return 0;
        }
        return -EBUSY;
}

bool loop_backs(const char *devpath, const char *image) {
        _cleanup_close_ int fd = -EBADF;
        struct loop_info64 info = {};
        const char *name;
        struct stat st;

        if (loop_name(devpath, &name) < 0 || !image || stat(image, &st) < 0)
                return false;
        fd = open(devpath, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return false;
        if (ioctl(fd, LOOP_GET_STATUS64, &info) < 0)
                return false;
        return info.lo_device == (uint64_t) st.st_dev && info.lo_inode == (uint64_t) st.st_ino;
}

int loop_find_backing(const char *image, char **ret_devpath) {
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_free_ char *real = NULL;
        struct dirent *de;

        real = realpath(image, NULL);
        if (!real)
                return negative_errno();
        d = opendir("/sys/block");
        if (!d)
                return negative_errno();
        while ((de = readdir(d))) {
                char devpath[64];
                unsigned idx;
                char *r;

                if (!startswith(de->d_name, "loop") || safe_atou(de->d_name + 4, &idx) < 0)
                        continue;
                if (!loop_backing_is(de->d_name, real))
                        continue;
                snprintf(devpath, sizeof devpath, "/dev/loop%u", idx);
                if (!loop_backs(devpath, image)) /* same name, other file: confirm by inode */
                        continue;
                r = strdup(devpath);
                if (!r)
                        return -ENOMEM;
                *ret_devpath = r;
                return 0;
        }
        return -ENOENT;
}

int loop_wait_released(const char *devpath, const char *image, unsigned timeout_msec) {
        _cleanup_free_ char *real = NULL;
        const char *name;
        int r;

        r = loop_name(devpath, &name);
        if (r < 0)
                return r;
        real = realpath(image, NULL);
        if (!real)
                return errno == ENOENT ? 0 : negative_errno();
        for (unsigned waited = 0;; waited += LOOP_POLL_MSEC) {
                if (!loop_backing_is(name, real))
                        return 0;
                if (waited >= timeout_msec)
                        return -ETIMEDOUT;
                sleep_poll();
        }
}

int loop_wait_unbound(const char *devpath, unsigned timeout_msec) {
        for (unsigned waited = 0;; waited += LOOP_POLL_MSEC) {
                if (!loop_is_bound(devpath))
                        return 0;
                if (waited >= timeout_msec)
                        return -ETIMEDOUT;
                sleep_poll();
        }
}

int loop_detach(const char *devpath) {
        _cleanup_close_ int fd = -EBADF;
        const char *name;
        int r;

        r = loop_name(devpath, &name);
        if (r < 0)
                return r;
        if (!loop_is_bound(devpath))
                return 0;
        fd = open(devpath, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return errno == ENOENT || errno == ENXIO ? 0 : negative_errno();
        if (ioctl(fd, LOOP_CLR_FD) < 0 && errno != ENXIO)
                return negative_errno();
        fd = safe_close(fd); /* the detach may happen on this last close */
        return loop_wait_unbound(devpath, LOOP_DETACH_TIMEOUT_MSEC) < 0 ? -EBUSY : 0;
}
