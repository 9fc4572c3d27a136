/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/syscall.h>

#include "cgroup-view.h"
#include "fd-util.h"
#include "ns-sys.h"
#include "str-util.h"

/* /proc/self/cgroup of a process: one line per hierarchy, a few dozen at most */
#define CGROUP_VIEW_PROC_MAX 16384

static CgroupView view;

const CgroupView *cgroup_view_get(void) {
        return &view;
}

/* ---- parent side ---- */

static bool strv_has_n(const char *const *v, const char *s, size_t n) {
        for (; v && *v; v++)
                if (strlen(*v) == n && memcmp(*v, s, n) == 0)
                        return true;
        return false;
}

static bool controller_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '=' || c == ',';
}

static int copy_name(char dst[static CGROUP_VIEW_NAME_MAX], const char *s, size_t n) {
        if (n == 0 || n >= CGROUP_VIEW_NAME_MAX)
                return -E2BIG;
        memcpy(dst, s, n);
        dst[n] = 0;
        return 0;
}

static int add_mount(CgroupView *v, const char *dir, size_t dir_n, const char *type, const char *opts,
                     size_t opts_n) {
        CgroupViewMount *m;
        int r;

        if (v->n_mounts >= CGROUP_VIEW_MOUNTS_MAX)
                return -E2BIG;
        m = &v->mounts[v->n_mounts];
        *m = (CgroupViewMount) {};
        if (dir_n > 0 && (r = copy_name(m->dir, dir, dir_n)) < 0)
                return r;
        if (opts_n > 0 && (r = copy_name(m->options, opts, opts_n)) < 0)
                return r;
        if (strscpy(m->type, sizeof m->type, type) < 0)
                return -E2BIG;
        v->n_mounts++;
        return 0;
}

/* One v1 hierarchy "cpu,cpuacct": mounted if one of its controllers is used, with a symlink
 * for each controller where it holds several. */
static int add_v1(CgroupView *v, const char *ctrls, size_t n, const char *const *used) {
        bool wanted = false;
        size_t tokens = 0;
        int r;

        for (size_t i = 0; i < n;) {
                size_t e = i;
                while (e < n && ctrls[e] != ',')
                        e++;
                if (e == i)
                        return -EBADMSG;
                tokens++;
                if (strv_has_n(used, ctrls + i, e - i))
                        wanted = true;
                i = e + 1;
        }
        if (!wanted)
                return 0;
        r = add_mount(v, ctrls, n, "cgroup", ctrls, n);
        if (r < 0 || tokens < 2)
                return r;
        for (size_t i = 0; i < n;) {
                size_t e = i;
                while (e < n && ctrls[e] != ',')
                        e++;
                if (!(e - i >= 5 && memcmp(ctrls + i, "name=", 5) == 0)) { /* named hierarchies: no link */
                        CgroupViewLink *l;
                        if (v->n_links >= CGROUP_VIEW_LINKS_MAX)
                                return -E2BIG;
                        l = &v->links[v->n_links];
                        if ((r = copy_name(l->name, ctrls + i, e - i)) < 0 || (r = copy_name(l->target, ctrls, n)) < 0)
                                return r;
                        v->n_links++;
                }
                i = e + 1;
        }
        return 0;
}

int cgroup_view_build(CgroupMode mode, const char *text, size_t n, const char *const *used, CgroupView *ret) {
        CgroupView v = {};
        int r;

        if (mode == CGROUP_MODE_V2) {
                r = add_mount(&v, "", 0, "cgroup2", "", 0);
                if (r < 0)
                        return r;
                *ret = v;
                return 0;
        }
        for (size_t i = 0; i < n;) {
                size_t e = i, c1, c2;

                while (e < n && text[e] != '\n')
                        e++;
                /* ID:CONTROLLERS:PATH (the path may hold ':' itself) */
                for (c1 = i; c1 < e && text[c1] != ':'; c1++)
                        if (text[c1] < '0' || text[c1] > '9')
                                return -EBADMSG;
                if (c1 == i || c1 >= e)
                        return -EBADMSG;
                for (c2 = c1 + 1; c2 < e && text[c2] != ':'; c2++)
                        if (!controller_char(text[c2]))
                                return -EBADMSG;
                if (c2 >= e)
                        return -EBADMSG;
                /* "0::/..." is the v2 hierarchy, mounted below where there is one */
                if (c2 > c1 + 1) {
                        r = add_v1(&v, text + c1 + 1, c2 - c1 - 1, used);
                        if (r < 0)
                                return r;
                }
                i = e + 1;
        }
        if (mode == CGROUP_MODE_HYBRID) {
                r = add_mount(&v, "unified", strlen("unified"), "cgroup2", "", 0);
                if (r < 0)
                        return r;
        }
        v.tmpfs = v.n_mounts > 0;
        *ret = v;
        return 0;
}

int cgroup_view_setup(CgroupMode mode, const char *const *used) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        size_t n = 0;

        fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        buf = malloc(CGROUP_VIEW_PROC_MAX);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t k = read(fd, buf + n, CGROUP_VIEW_PROC_MAX - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return negative_errno();
                if (k == 0)
                        break;
                n += (size_t) k;
                if (n == CGROUP_VIEW_PROC_MAX)
                        return -E2BIG;
        }
        return cgroup_view_build(mode, buf, n, used, &view);
}

/* ---- child side ---- */

#define CGROUP_VIEW_MS (MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)

static int open_dir_in(int dirfd, const char *rel) {
        struct open_how how = {
                .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        return (int) ns_sys4(SYS_openat2, dirfd, rel, &how, sizeof how);
}

static int mount_on_fd(int fd, const char *src, const char *type, unsigned long flags, const char *data) {
        char p[NS_FD_PATH_MAX];
        return (int) ns_sys5(SYS_mount, src, ns_fd_path(p, fd), type, flags, data);
}

static int mount_one(int top, const CgroupViewMount *m) {
        int fd, r;

        r = (int) ns_sys3(SYS_mkdirat, top, m->dir, 0555);
        if (r < 0)
                return r;
        fd = open_dir_in(top, m->dir);
        if (fd < 0)
                return fd;
        r = mount_on_fd(fd, m->type, m->type, CGROUP_VIEW_MS, m->options[0] ? m->options : NULL);
        ns_close(fd);
        return r;
}

int ns_mount_cgroup_view(int rootfd, const CgroupView *v) {
        int cg, top = -1, r;

        if (v->n_mounts == 0)
                return 0;
        cg = open_dir_in(rootfd, "sys/fs/cgroup");
        if (cg == -ENOENT)
                return 0; /* a sysfs without the directory: nothing to mount on */
        if (cg < 0)
                return cg;
        if (!v->tmpfs) {
                r = mount_on_fd(cg, v->mounts[0].type, v->mounts[0].type, CGROUP_VIEW_MS, NULL);
                ns_close(cg);
                return r;
        }
        r = mount_on_fd(cg, "tmpfs", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=755,size=65536,nr_inodes=64");
        ns_close(cg);
        if (r < 0)
                return r;
        top = open_dir_in(rootfd, "sys/fs/cgroup"); /* the tmpfs on top */
        if (top < 0)
                return top;
        for (size_t i = 0; i < v->n_mounts && r >= 0; i++)
                r = mount_one(top, &v->mounts[i]);
        for (size_t i = 0; i < v->n_links && r >= 0; i++)
                r = (int) ns_sys3(SYS_symlinkat, v->links[i].target, top, v->links[i].name);
        if (r >= 0)
                r = mount_on_fd(top, NULL, NULL, MS_REMOUNT | MS_BIND | CGROUP_VIEW_MS, NULL);
        ns_close(top);
        return r < 0 ? r : 0;
}
