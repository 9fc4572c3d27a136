/* SPDX-License-Identifier: MIT */
/* Disk admission arithmetic (pool-admit.c) and its configuration
 * (disk_overcommit, pool_reserve_mb): pure, no pool needed. */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "pool.h"
#include "test.h"

#define MIB (UINT64_C(1) << 20)

static const PoolAdmitPolicy one = { .overcommit_permille = 1000, .reserve_bytes = 50 * MIB };

TEST(admit_fits_exactly_and_one_byte_more_does_not) {
        /* 1000 MiB, all free: 950 MiB can be promised, and written */
        PoolSpace s = { .size_bytes = 1000 * MIB, .free_bytes = 1000 * MIB };
        PoolAdmitResult res;

        ASSERT_OK(pool_admit(&s, &one, 950 * MIB, 950 * MIB, &res));
        ASSERT_EQ(res.verdict, POOL_ADMIT_OK);
        ASSERT_EQ(res.capacity_bytes, 950 * MIB);
        ASSERT_ERRNO(pool_admit(&s, &one, 950 * MIB + 1, 0, &res), ENOSPC);
        ASSERT_EQ(res.verdict, POOL_ADMIT_PROMISED);
}

TEST(admit_counts_what_is_promised_already) {
        PoolSpace s = { .size_bytes = 1000 * MIB, .free_bytes = 1000 * MIB, .promised_bytes = 600 * MIB,
                        .outstanding_bytes = 0, .sandboxes = 2 };
        PoolAdmitResult res;

        ASSERT_OK(pool_admit(&s, &one, 350 * MIB, 350 * MIB, &res));
        ASSERT_ERRNO(pool_admit(&s, &one, 351 * MIB, 351 * MIB, &res), ENOSPC);
        ASSERT_EQ(res.verdict, POOL_ADMIT_PROMISED);
}

TEST(admit_refuses_a_pool_full_by_other_means) {
        /* nothing promised, but checkpoints or templates hold all but 60 MiB */
        PoolSpace s = { .size_bytes = 1000 * MIB, .free_bytes = 60 * MIB };
        PoolAdmitResult res;

        ASSERT_OK(pool_admit(&s, &one, 10 * MIB, 10 * MIB, &res));
        ASSERT_EQ(res.room_bytes, 10 * MIB);
        ASSERT_ERRNO(pool_admit(&s, &one, 11 * MIB, 11 * MIB, &res), ENOSPC);
        ASSERT_EQ(res.verdict, POOL_ADMIT_FREE);
        /* a checkpoint asks only for room (promise 0): the same answer */
        ASSERT_ERRNO(pool_admit(&s, &one, 0, 11 * MIB, &res), ENOSPC);
        ASSERT_EQ(res.verdict, POOL_ADMIT_FREE);
        /* free below the reserve: even nothing does not fit */
        s.free_bytes = 10 * MIB;
        ASSERT_ERRNO(pool_admit(&s, &one, 0, 1, &res), ENOSPC);
        ASSERT_EQ(res.room_bytes, 0);
}

TEST(admit_keeps_what_sandboxes_may_still_write) {
        /* 500 MiB free past the reserve, sandboxes may still write 400 of their quotas */
        PoolSpace s = { .size_bytes = 1000 * MIB, .free_bytes = 550 * MIB, .promised_bytes = 450 * MIB,
                        .outstanding_bytes = 400 * MIB, .sandboxes = 1 };
        PoolAdmitResult res;

        ASSERT_OK(pool_admit(&s, &one, 100 * MIB, 100 * MIB, &res));
        ASSERT_ERRNO(pool_admit(&s, &one, 101 * MIB, 101 * MIB, &res), ENOSPC);
        ASSERT_EQ(res.verdict, POOL_ADMIT_FREE);
        ASSERT_EQ(res.need_bytes, 501 * MIB);
}

TEST(admit_overcommit_scales_both_checks) {
        PoolAdmitPolicy two = { .overcommit_permille = 2000, .reserve_bytes = 0 };
        PoolAdmitPolicy half = { .overcommit_permille = 500, .reserve_bytes = 0 };
        PoolSpace s = { .size_bytes = 1000 * MIB, .free_bytes = 1000 * MIB };
        PoolAdmitResult res;

        ASSERT_OK(pool_admit(&s, &two, 2000 * MIB, 2000 * MIB, &res));
        ASSERT_EQ(res.need_bytes, 1000 * MIB);
        ASSERT_ERRNO(pool_admit(&s, &two, 2000 * MIB + MIB, 0, &res), ENOSPC);
        ASSERT_OK(pool_admit(&s, &half, 500 * MIB, 500 * MIB, &res));
        ASSERT_ERRNO(pool_admit(&s, &half, 501 * MIB, 0, &res), ENOSPC);
        /* rounded up: 1 byte at 2.0 still needs a byte */
        ASSERT_OK(pool_admit(&s, &two, 0, 1, &res));
        ASSERT_EQ(res.need_bytes, 1);
}

TEST(admit_never_wraps) {
        PoolAdmitPolicy big = { .overcommit_permille = 100000, .reserve_bytes = UINT64_MAX };
        PoolSpace s = { .size_bytes = UINT64_MAX, .free_bytes = UINT64_MAX, .promised_bytes = UINT64_MAX - 1,
                        .outstanding_bytes = UINT64_MAX };
        PoolAdmitResult res;

        /* the reserve eats everything: nothing is admitted, whatever overflows */
        ASSERT_ERRNO(pool_admit(&s, &big, 2, 2, &res), ENOSPC);
        ASSERT_EQ(res.capacity_bytes, 0);
        /* promised + 2 would wrap to 0 */
        s = (PoolSpace){ .size_bytes = 1000 * MIB, .free_bytes = 1000 * MIB, .promised_bytes = UINT64_MAX - 1 };
        ASSERT_ERRNO(pool_admit(&s, &one, 2, 0, &res), ENOSPC);
        ASSERT_EQ(res.verdict, POOL_ADMIT_PROMISED);
        /* and outstanding + new likewise */
        big.reserve_bytes = 0;
        s = (PoolSpace){ .size_bytes = UINT64_MAX, .free_bytes = 1000 * MIB };
        s.outstanding_bytes = UINT64_MAX;
        ASSERT_ERRNO(pool_admit(&s, &big, 1, UINT64_MAX, &res), ENOSPC);
        ASSERT_EQ(res.verdict, POOL_ADMIT_FREE);
        ASSERT_ERRNO(pool_admit(&s, &(PoolAdmitPolicy){ .overcommit_permille = 0 }, 1, 1, &res), EINVAL);
}

TEST(admit_reserve_default_is_five_percent_at_most_one_gib) {
        ASSERT_EQ(pool_admit_reserve_bytes(1000 * MIB, 0), 50 * MIB);
        ASSERT_TRUE(pool_admit_reserve_bytes(16384 * MIB, 0) > 819 * MIB);
        ASSERT_TRUE(pool_admit_reserve_bytes(16384 * MIB, 0) < 820 * MIB);
        ASSERT_EQ(pool_admit_reserve_bytes(UINT64_C(4) << 40, 0), 1024 * MIB);
        ASSERT_EQ(pool_admit_reserve_bytes(1000 * MIB, 7), 7 * MIB);
}

TEST(admit_describe_names_the_pool_and_the_figures) {
        PoolSpace s = { .size_bytes = 1024 * MIB, .free_bytes = 900 * MIB, .promised_bytes = 600 * MIB,
                        .outstanding_bytes = 600 * MIB, .sandboxes = 2 };
        PoolAdmitPolicy pol = { .overcommit_permille = 1500, .reserve_bytes = 51 * MIB };
        PoolAdmitResult res;
        char buf[512];

        ASSERT_ERRNO(pool_admit(&s, &pol, 262144 * MIB, 262144 * MIB, &res), ENOSPC);
        pool_admit_describe(&s, &pol, &res, "'/srv/pool'", "create", 262144 * MIB, 262144 * MIB, buf, sizeof buf);
        ASSERT_NOT_NULL(strstr(buf, "storage pool '/srv/pool'"));
        ASSERT_NOT_NULL(strstr(buf, "262144 MiB"));
        ASSERT_NOT_NULL(strstr(buf, "size 1024 MiB"));
        ASSERT_NOT_NULL(strstr(buf, "disk_overcommit 1.5,"));
        ASSERT_NOT_NULL(strstr(buf, "reserve 51 MiB"));
        ASSERT_NOT_NULL(strstr(buf, "600 MiB reserved"));

        s.free_bytes = 100 * MIB;
        ASSERT_ERRNO(pool_admit(&s, &(PoolAdmitPolicy){ .overcommit_permille = 1000, .reserve_bytes = 51 * MIB },
                                64 * MIB, 64 * MIB, &res),
                     ENOSPC);
        ASSERT_EQ(res.verdict, POOL_ADMIT_FREE);
        pool_admit_describe(&s, &(PoolAdmitPolicy){ .overcommit_permille = 1000, .reserve_bytes = 51 * MIB }, &res,
                            "'/srv/pool'", "branch of 1 sandbox", 64 * MIB, 64 * MIB, buf, sizeof buf);
        ASSERT_NOT_NULL(strstr(buf, "too full for the branch of 1 sandbox"));
        ASSERT_NOT_NULL(strstr(buf, "100 MiB free of 1024 MiB"));
        ASSERT_NOT_NULL(strstr(buf, "needs 64 MiB (disk_overcommit 1.0)"));
}

TEST(admit_ratio) {
        char buf[POOL_ADMIT_RATIO_MAX];

        ASSERT_STREQ(pool_admit_ratio(1000, buf), "1.0");
        ASSERT_STREQ(pool_admit_ratio(1500, buf), "1.5");
        ASSERT_STREQ(pool_admit_ratio(125, buf), "0.125");
        ASSERT_STREQ(pool_admit_ratio(100000, buf), "100.0");
}

TEST(config_disk_overcommit) {
        char err[256];
        uint64_t v = 0;
        Config c;

        config_defaults(&c);
        ASSERT_STREQ(c.disk_overcommit, "1.0");
        ASSERT_EQ(c.pool_reserve_mb, 0);
        ASSERT_OK(config_finish(&c, err, sizeof err));
        ASSERT_EQ(c.disk_overcommit_permille, 1000);

        ASSERT_OK(config_parse_ratio_permille("2", 100, 100000, &v, err, sizeof err));
        ASSERT_EQ(v, 2000);
        ASSERT_OK(config_parse_ratio_permille("1.25", 100, 100000, &v, err, sizeof err));
        ASSERT_EQ(v, 1250);
        ASSERT_OK(config_parse_ratio_permille("0.1", 100, 100000, &v, err, sizeof err));
        ASSERT_EQ(v, 100);
        ASSERT_OK(config_parse_ratio_permille("100.000", 100, 100000, &v, err, sizeof err));
        ASSERT_EQ(v, 100000);
        static const char *const bad[] = { "", ".5", "1.", "1.2345", "-1", "1e3", "0x10", "1,5", " 1", "1 ",
                                           "nan", "12345678" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                ASSERT_ERRNO(config_parse_ratio_permille(bad[i], 100, 100000, &v, err, sizeof err), EINVAL);
        ASSERT_ERRNO(config_parse_ratio_permille("0.05", 100, 100000, &v, err, sizeof err), ERANGE);
        ASSERT_ERRNO(config_parse_ratio_permille("100.001", 100, 100000, &v, err, sizeof err), ERANGE);
        ASSERT_ERRNO(config_parse_ratio_permille("0", 100, 100000, &v, err, sizeof err), ERANGE);

        ASSERT_OK(config_set(&c, "disk_overcommit", "abc", err, sizeof err)); /* a string: checked at finish */
        ASSERT_ERRNO(config_finish(&c, err, sizeof err), EINVAL);
        ASSERT_NOT_NULL(strstr(err, "disk_overcommit"));
        ASSERT_OK(config_set(&c, "disk_overcommit", "3.5", err, sizeof err));
        ASSERT_OK(config_finish(&c, err, sizeof err));
        ASSERT_EQ(c.disk_overcommit_permille, 3500);
        ASSERT_OK(config_set(&c, "pool_reserve_mb", "512", err, sizeof err));
        ASSERT_EQ(c.pool_reserve_mb, 512);
}
