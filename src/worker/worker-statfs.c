/* SPDX-License-Identifier: MIT */
/* statfs()/fstatfs() inside ns sandboxes, answered in the worker's event loop
 * (the steps are statfs-notify.h's): each sandbox's listener is one more fd
 * in the loop, served one notification per wake-up (level-triggered, so a
 * flood of one sandbox alternates with everything else) and at most
 * WORKER_STATFS_PER_TICK_MAX a second; a sandbox over that budget is not
 * polled until the next tick: its calls wait, nobody else's do. */
#include <sys/epoll.h>
#include <sys/statfs.h>
#include <time.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "log.h"
#include "space-build.h"
#include "statfs-notify.h"
#include "time-util.h"
#include "worker-internal.h"

int worker_statfs_setup(Worker *w) {
        int r;

        /* a -Dbench_no_hardening build installs no seccomp filter: nobody would ask */
        w->statfs_emulate = pool_has_quota(w->pool) && !SPACE_BENCH_NO_HARDENING;
        if (!w->statfs_emulate) {
                log_info("statfs inside sandboxes shows the pool's figures (no quotas on %s storage)",
                         pool_kind_to_string(pool_kind(w->pool)));
                return 0;
        }
        r = ns_statfs_setup();
        if (r < 0)
                return log_error_errno(r, "Cannot set up statfs answers: %m");
        return 0;
}

static LiveSandbox *find_by_fd(Worker *w, int fd) {
        for (size_t i = 0; i < w->n_live; i++)
                if (w->live[i].statfs_fd == fd)
                        return &w->live[i];
        return NULL;
}

static int quota_of(void *userdata, uint64_t *ret_limit, uint64_t *ret_used) {
        LiveSandbox *l = userdata;
        int64_t now = mono_usec();
        int r;

        if (l->quota_fd < 0)
                return -EOPNOTSUPP;
        if (l->quota_usec == 0 || now - l->quota_usec >= WORKER_STATFS_QUOTA_USEC) {
                r = pool_quota_read(l->quota_fd, &l->quota_limit, &l->quota_used);
                if (r < 0)
                        return r;
                l->quota_usec = now;
        }
        *ret_limit = l->quota_limit;
        *ret_used = l->quota_used;
        return 0;
}

/* A stable f_fsid of the sandbox's own (FNV-1a of its id): two sandboxes on one pool show different ones. */
static void fsid_of(const char *id, uint32_t ret[2]) {
        uint64_t h = UINT64_C(0xcbf29ce484222325);

        for (const char *c = id; *c; c++) {
                h ^= (uint8_t) *c;
                h *= UINT64_C(0x100000001b3);
        }
        ret[0] = (uint32_t) h;
        ret[1] = (uint32_t) (h >> 32);
}

static int epoll_set(Worker *w, LiveSandbox *l, int op, uint32_t events) {
        struct epoll_event ev = { .events = events, .data.u64 = WORKER_TAG_STATFS | (uint64_t) (unsigned) l->statfs_fd };

        return epoll_ctl(w->epoll_fd, op, l->statfs_fd, &ev) < 0 ? negative_errno() : 0;
}

void worker_statfs_attach(Worker *w, LiveSandbox *l) {
        _cleanup_free_ char *root = NULL;
        struct statfs st;
        int r;

        r = ns_statfs_listener_take(l->pidfd, &l->statfs_fd);
        if (r < 0) {
                /* without a listener the filter has nobody to ask: its statfs calls wait for PID 1's
                 * copy, i.e. for ever if that is gone (root inside closed it): that sandbox's own doing */
                log_warning_errno(r, "sandbox=%s Cannot take the statfs listener of PID 1: %m", l->id);
                return;
        }
        r = pool_sandbox_quota_open(w->pool, l->id, &l->quota_fd);
        if (r < 0)
                log_warning_errno(r, "sandbox=%s Cannot open its qgroup: statfs inside shows no space: %m", l->id);
        fsid_of(l->id, l->statfs_fsid);
        if (pool_sandbox_root_path(w->pool, l->id, &root) >= 0 && statfs(root, &st) >= 0) {
                l->statfs_root_fsid[0] = (uint32_t) st.f_fsid.__val[0];
                l->statfs_root_fsid[1] = (uint32_t) st.f_fsid.__val[1];
        }
        r = epoll_set(w, l, EPOLL_CTL_ADD, EPOLLIN);
        if (r < 0) {
                log_warning_errno(r, "sandbox=%s Cannot poll its statfs listener: %m", l->id);
                l->statfs_fd = safe_close(l->statfs_fd);
                l->quota_fd = safe_close(l->quota_fd);
        }
}

void worker_statfs_detach(Worker *w, LiveSandbox *l) {
        if (l->statfs_fd >= 0)
                (void) epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, l->statfs_fd, NULL);
        l->statfs_fd = safe_close(l->statfs_fd);
        l->quota_fd = safe_close(l->quota_fd);
}

void worker_statfs_readable(Worker *w, int fd) {
        LiveSandbox *l = find_by_fd(w, fd);
        NsStatfsView v;
        int r;

        if (!l)
                return;
        v = (NsStatfsView){ .quota = quota_of, .userdata = l };
        memcpy(v.fsid, l->statfs_fsid, sizeof v.fsid);
        memcpy(v.root_fsid, l->statfs_root_fsid, sizeof v.root_fsid);
        r = ns_statfs_handle(fd, &v);
        if (r < 0) {
                /* -ENOTCONN: every process of the filter is gone (its PID 1's pidfd says so too) */
                if (r != -ENOTCONN)
                        log_warning_errno(r, "sandbox=%s statfs listener failed, dropped: %m", l->id);
                worker_statfs_detach(w, l);
                return;
        }
        if (r > 0 && ++l->statfs_calls >= WORKER_STATFS_PER_TICK_MAX && !l->statfs_throttled) {
                if (epoll_set(w, l, EPOLL_CTL_MOD, 0) >= 0)
                        l->statfs_throttled = true;
                log_debug("sandbox=%s statfs budget spent, its calls wait for the next tick", l->id);
        }
}

void worker_statfs_tick(Worker *w) {
        for (size_t i = 0; i < w->n_live; i++) {
                LiveSandbox *l = &w->live[i];

                l->statfs_calls = 0;
                if (l->statfs_throttled && l->statfs_fd >= 0 && epoll_set(w, l, EPOLL_CTL_MOD, EPOLLIN) >= 0)
                        l->statfs_throttled = false;
        }
}
