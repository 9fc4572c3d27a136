/* SPDX-License-Identifier: MIT */
/* Admission of disk quotas against the pool (pool.h): pure arithmetic on a
 * PoolSpace, saturating, so that no figure can wrap into an admission. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "pool.h"

#define MIB (UINT64_C(1) << 20)

static uint64_t add_sat(uint64_t a, uint64_t b) {
        return a + b < a ? UINT64_MAX : a + b;
}

static uint64_t sub_sat(uint64_t a, uint64_t b) {
        return a > b ? a - b : 0;
}

static uint64_t clamp128(unsigned __int128 v) {
        return v > UINT64_MAX ? UINT64_MAX : (uint64_t) v;
}

/* a x permille / 1000, saturating; rounded down */
static uint64_t scale_permille(uint64_t a, uint64_t permille) {
        return clamp128((unsigned __int128) a * permille / 1000);
}

/* a x 1000 / permille, saturating; rounded up (what must fit is never made smaller) */
static uint64_t unscale_permille(uint64_t a, uint64_t permille) {
        if (permille == 0)
                return UINT64_MAX;
        return clamp128(((unsigned __int128) a * 1000 + permille - 1) / permille);
}

uint64_t pool_admit_reserve_bytes(uint64_t size_bytes, uint64_t reserve_mb) {
        uint64_t auto_bytes;

        if (reserve_mb > 0)
                return reserve_mb > UINT64_MAX / MIB ? UINT64_MAX : reserve_mb * MIB;
        auto_bytes = size_bytes / 100 * POOL_RESERVE_AUTO_PERCENT;
        return MIN(auto_bytes, (uint64_t) POOL_RESERVE_AUTO_MAX_MB * MIB);
}

int pool_admit(const PoolSpace *s, const PoolAdmitPolicy *pol, uint64_t promise_bytes, uint64_t outstanding_bytes,
               PoolAdmitResult *ret) {
        PoolAdmitResult res = {};

        if (!s || !pol || !ret || pol->overcommit_permille == 0)
                return -EINVAL;
        res.capacity_bytes = sub_sat(scale_permille(s->size_bytes, pol->overcommit_permille), pol->reserve_bytes);
        res.room_bytes = sub_sat(s->free_bytes, pol->reserve_bytes);
        res.need_bytes = unscale_permille(add_sat(s->outstanding_bytes, outstanding_bytes), pol->overcommit_permille);
        if (promise_bytes > 0 && add_sat(s->promised_bytes, promise_bytes) > res.capacity_bytes)
                res.verdict = POOL_ADMIT_PROMISED;
        else if (res.need_bytes > res.room_bytes)
                res.verdict = POOL_ADMIT_FREE;
        else
                res.verdict = POOL_ADMIT_OK;
        *ret = res;
        return res.verdict == POOL_ADMIT_OK ? 0 : -ENOSPC;
}

const char *pool_admit_ratio(uint64_t permille, char buf[static POOL_ADMIT_RATIO_MAX]) {
        snprintf(buf, POOL_ADMIT_RATIO_MAX, "%" PRIu64 ".%03" PRIu64, permille / 1000, permille % 1000);
        /* 1.500 reads better as 1.5 */
        for (char *e = buf + strlen(buf) - 1; e > buf && *e == '0' && e[-1] != '.'; e--)
                *e = 0;
        return buf;
}

void pool_admit_describe(const PoolSpace *s, const PoolAdmitPolicy *pol, const PoolAdmitResult *res,
                         const char *name, const char *what, uint64_t promise_bytes, uint64_t outstanding_bytes,
                         char *buf, size_t size) {
        char ratio[POOL_ADMIT_RATIO_MAX];

        pool_admit_ratio(pol->overcommit_permille, ratio);
        if (res->verdict == POOL_ADMIT_PROMISED)
                snprintf(buf, size,
                         "storage pool %s cannot hold the %s: it asks for %" PRIu64 " MiB of disk quota, and the "
                         "pool (size %" PRIu64 " MiB, disk_overcommit %s, reserve %" PRIu64 " MiB) admits %" PRIu64
                         " MiB, of which its %zu sandboxes have %" PRIu64 " MiB reserved already (%" PRIu64
                         " MiB left)",
                         name, what, promise_bytes / MIB, s->size_bytes / MIB, ratio, pol->reserve_bytes / MIB,
                         res->capacity_bytes / MIB, s->sandboxes, s->promised_bytes / MIB,
                         sub_sat(res->capacity_bytes, s->promised_bytes) / MIB);
        else
                snprintf(buf, size,
                         "storage pool %s is too full for the %s: it has %" PRIu64 " MiB free of %" PRIu64
                         " MiB, keeps %" PRIu64 " MiB in reserve, its %zu sandboxes may still write %" PRIu64
                         " MiB of their quotas (%" PRIu64 " MiB reserved) and the %s needs %" PRIu64
                         " MiB (disk_overcommit %s)",
                         name, what, s->free_bytes / MIB, s->size_bytes / MIB, pol->reserve_bytes / MIB,
                         s->sandboxes, s->outstanding_bytes / MIB, s->promised_bytes / MIB, what,
                         outstanding_bytes / MIB, ratio);
}
