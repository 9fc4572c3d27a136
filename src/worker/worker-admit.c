/* SPDX-License-Identifier: MIT */
/* Disk admission (see worker-internal.h): every op that makes sandboxes or
 * changes their quota asks the pool first, so a promise the pool cannot keep
 * is a 507 before anything is made, and a pool filled by other means is a
 * 507 too, never a 500 from whichever step hit ENOSPC first. */
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>

#include "log.h"
#include "str-util.h"
#include "time-util.h"
#include "worker-internal.h"

#define WORKER_ADMIT_SYNC_USEC (250 * 1000) /* a pool that looks full is committed at most this often */
/* After that commit, the cleaner frees deleted subvolumes as it goes: free
 * space is read again every WORKER_ADMIT_POLL_MSEC while it grows, until it
 * stood still for WORKER_ADMIT_STILL_MSEC or WORKER_ADMIT_WAIT_MSEC passed. */
#define WORKER_ADMIT_POLL_MSEC 20
#define WORKER_ADMIT_STILL_MSEC 300
#define WORKER_ADMIT_WAIT_MSEC 3000

static PoolAdmitPolicy policy_of(const Worker *w, const PoolSpace *s) {
        return (PoolAdmitPolicy){
                /* config_finish() parsed it; a Config that skipped it gets 1.0 */
                .overcommit_permille = w->config->disk_overcommit_permille ?: 1000,
                .reserve_bytes = pool_admit_reserve_bytes(s->size_bytes, w->config->pool_reserve_mb),
        };
}

static void pool_name(const Worker *w, char *buf, size_t size) {
        if (streq(w->config->role, "worker"))
                snprintf(buf, size, "'%s' of worker %s", pool_mount_path(w->pool), w->config->worker_name);
        else
                snprintf(buf, size, "'%s'", pool_mount_path(w->pool));
}

/* The worker is one thread: the time of the last commit admission asked for. */
static int64_t last_sync = INT64_MIN / 2;

typedef struct Admission {
        const char *self_id;
        uint64_t promise_bytes, outstanding_bytes;
        bool checkpoint;
        PoolSpace s;
        PoolAdmitPolicy pol;
        PoolAdmitResult res;
} Admission;

/* Reads the pool's space and decides: 0, -ENOSPC (a.res says why), -errno. */
static int admit_once(Worker *w, Admission *a) {
        int r = pool_space_read(w->pool, a->self_id, &a->s);
        if (r < 0)
                return r;
        if (a->checkpoint) /* its quota stays; what it may write grows back to all of it */
                a->outstanding_bytes = a->s.self_promised_bytes;
        a->pol = policy_of(w, &a->s);
        return pool_admit(&a->s, &a->pol, a->promise_bytes, a->outstanding_bytes, &a->res);
}

/* After a commit the cleaner frees deleted subvolumes as it goes: decides
 * again while free space grows, until admitted, free space stood still for
 * WORKER_ADMIT_STILL_MSEC, or WORKER_ADMIT_WAIT_MSEC passed. */
static int admit_awaiting_cleaner(Worker *w, Admission *a) {
        int64_t start = mono_msec(), grew = start;
        uint64_t before = a->s.free_bytes, seen = before;
        int r = -ENOSPC;

        while (r == -ENOSPC && a->res.verdict == POOL_ADMIT_FREE && mono_msec() - start < WORKER_ADMIT_WAIT_MSEC &&
               mono_msec() - grew < WORKER_ADMIT_STILL_MSEC) {
                (void) poll(NULL, 0, WORKER_ADMIT_POLL_MSEC);
                r = admit_once(w, a);
                if (a->s.free_bytes > seen) {
                        seen = a->s.free_bytes;
                        grew = mono_msec();
                }
        }
        if (seen > before)
                log_debug("Admission waited %" PRIi64 " ms for the cleaner, which freed %" PRIu64 " MiB",
                          mono_msec() - start, (seen - before) >> 20);
        return r;
}

static int admit(Worker *w, const char *what, const char *self_id, uint64_t promise_bytes, uint64_t outstanding_bytes,
                 bool checkpoint, ApiError *e) {
        Admission a = { .self_id = self_id, .promise_bytes = promise_bytes, .outstanding_bytes = outstanding_bytes,
                        .checkpoint = checkpoint };
        char name[PATH_MAX + 64], msg[API_ERROR_MESSAGE_MAX];
        int r;

        for (;;) {
                r = admit_once(w, &a);
                if (r != -ENOSPC)
                        break;
                /* deleted sandboxes not torn down yet still hold their quota and their disk:
                 * the pool is not full before they are gone */
                if (worker_teardown_pending(w) == 0)
                        break;
                worker_teardown_drain(w);
                if (worker_teardown_pending(w) > 0)
                        break;
        }
        /* The promises are what they are; free space may only look short: deleted
         * subvolumes wait for the cleaner, qgroups for the next commit. At most once
         * a WORKER_ADMIT_SYNC_USEC: requests on a full pool do not each cost a commit
         * and a wait. */
        if (r == -ENOSPC && a.res.verdict == POOL_ADMIT_FREE && now_usec() - last_sync >= WORKER_ADMIT_SYNC_USEC) {
                last_sync = now_usec();
                if (pool_space_sync(w->pool) >= 0)
                        r = admit_awaiting_cleaner(w, &a);
        }
        if (r < 0 && r != -ENOSPC && r != -EINVAL)
                return api_error(e, r, API_INTERNAL, "cannot read the storage pool's space for the %s: %s", what,
                                 strerror(-r));
        if (r == -EINVAL)
                return api_error(e, r, API_INTERNAL, "bad disk admission policy");
        if (r >= 0) {
                log_debug("Admitted the %s: %" PRIu64 " MiB of quota, %" PRIu64 " MiB writable (pool: %" PRIu64
                          " MiB promised, %" PRIu64 " MiB free)",
                          what, promise_bytes >> 20, a.outstanding_bytes >> 20, a.s.promised_bytes >> 20,
                          a.s.free_bytes >> 20);
                return 0;
        }
        pool_name(w, name, sizeof name);
        pool_admit_describe(&a.s, &a.pol, &a.res, name, what, promise_bytes, a.outstanding_bytes, msg, sizeof msg);
        log_info("Refused the %s: %s", what, msg);
        return api_error(e, -ENOSPC, API_INSUFFICIENT_STORAGE, "%s", msg);
}

int worker_admit_disk(Worker *w, const char *what, const char *self_id, uint64_t promise_bytes,
                      uint64_t outstanding_bytes, ApiError *e) {
        return admit(w, what, self_id, promise_bytes, outstanding_bytes, false, e);
}

int worker_admit_checkpoint(Worker *w, const char *id, ApiError *e) {
        return admit(w, "checkpoint", id, 0, 0, true, e);
}

int worker_storage_error(Worker *w, int r, ApiError *e, ApiErrorCode code, const char *fmt, ...) {
        char what[API_ERROR_MESSAGE_MAX], name[PATH_MAX + 64];
        PoolSpace s;
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        if (!worker_errno_is_full(r))
                return api_error(e, r, code, "%s", what);
        if (r == -EDQUOT)
                return api_error(e, r, API_INSUFFICIENT_STORAGE, "%s (the sandbox's disk quota, disk_mb, is full)",
                                 what);
        pool_name(w, name, sizeof name);
        if (pool_space_read(w->pool, NULL, &s) < 0)
                return api_error(e, r, API_INSUFFICIENT_STORAGE, "%s (storage pool %s is full)", what, name);
        return api_error(e, r, API_INSUFFICIENT_STORAGE,
                         "%s (storage pool %s: %" PRIu64 " MiB free of %" PRIu64 " MiB, %" PRIu64
                         " MiB reserved by %zu sandboxes)",
                         what, name, s.free_bytes >> 20, s.size_bytes >> 20, s.promised_bytes >> 20, s.sandboxes);
}

int worker_admit_template_import(Worker *w, const char *name, const char *tar, const char *tag, uint64_t *ret_size_bytes,
                                 ApiError *e) {
        ApiError ie = {};
        struct stat st;
        int r;

        if (!tar)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "cannot import template '%s': no archive", name);
        /* a compressed archive unpacks to more: its size is only a floor, the import may still fill the pool */
        if (stat(tar, &st) >= 0 && S_ISREG(st.st_mode)) {
                r = worker_admit_disk(w, "template import", NULL, 0, (uint64_t) st.st_size, e);
                if (r < 0)
                        return r;
        }
        /* a root fs tar, an OCI layout or a docker save archive: oci-import.c */
        r = pool_template_import(w->pool, name, tar, tag, ret_size_bytes, NULL, &ie);
        if (r == -EEXIST)
                return api_error(e, r, API_ALREADY_EXISTS, "cannot import template '%s': it exists", name);
        if (r < 0 && worker_errno_is_full(r))
                return worker_storage_error(w, r, e, API_BAD_REQUEST, "%s", ie.message);
        if (r < 0) {
                *e = ie;
                return r;
        }
        return 0;
}
