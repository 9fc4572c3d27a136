/* SPDX-License-Identifier: MIT */
/* The per-sandbox lock of the API's lifecycle calls (src/api/sandbox-lock.c):
 * two sandboxes never wait for each other, one sandbox's callers take turns,
 * and no entry outlives its last holder or waiter. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "sandbox-lock.h"
#include "test.h"

/* The two ids of the CI run where a delete waited out the other's branch:
 * the same bucket (36) of the former table of 64 mutexes by FNV-1a hash. */
#define ID_BRANCHING "mu3i3by06080dysc"
#define ID_DELETED "j2krk18t306lwxua"

typedef struct {
        const char *id;
        atomic_bool got;
} Taker;

static void *take(void *arg) {
        Taker *t = arg;
        ApiSandboxLock *l = api_sandbox_lock(t->id);

        atomic_store(&t->got, true);
        api_sandbox_unlock(l);
        return NULL;
}

/* Whether the thread ends within ms (it did: joined). */
static bool joined_within(pthread_t t, long ms) {
        struct timespec at;

        ASSERT_OK(clock_gettime(CLOCK_REALTIME, &at));
        at.tv_sec += ms / 1000;
        at.tv_nsec += (ms % 1000) * 1000000L;
        if (at.tv_nsec >= 1000000000L) {
                at.tv_sec++;
                at.tv_nsec -= 1000000000L;
        }
        return pthread_timedjoin_np(t, NULL, &at) == 0;
}

static uint32_t old_bucket(const char *id) {
        uint32_t h = 2166136261U;

        for (const char *p = id; *p; p++)
                h = (h ^ (uint8_t) *p) * 16777619U;
        return h % 64U;
}

TEST(sandbox_lock_other_sandbox_never_waits) {
        Taker t = { .id = ID_DELETED };
        ApiSandboxLock *held;
        pthread_t th;

        ASSERT_EQ(old_bucket(ID_BRANCHING), old_bucket(ID_DELETED)); /* the case that failed */
        held = api_sandbox_lock(ID_BRANCHING);
        ASSERT_EQ(pthread_create(&th, NULL, take, &t), 0);
        /* generous: it must not wait at all; 60 s only bounds a machine under load */
        ASSERT_TRUE(joined_within(th, 60000));
        ASSERT_TRUE(atomic_load(&t.got));
        api_sandbox_unlock(held);
        ASSERT_EQ(api_sandbox_lock_entries(), 0U);
}

TEST(sandbox_lock_same_sandbox_waits_its_turn) {
        Taker t = { .id = ID_BRANCHING };
        ApiSandboxLock *held;
        pthread_t th;

        held = api_sandbox_lock(ID_BRANCHING);
        ASSERT_EQ(pthread_create(&th, NULL, take, &t), 0);
        ASSERT_FALSE(joined_within(th, 200)); /* it waits: no lock is given twice */
        ASSERT_FALSE(atomic_load(&t.got));
        ASSERT_EQ(api_sandbox_lock_entries(), 1U); /* the waiter shares the holder's entry */
        api_sandbox_unlock(held);
        ASSERT_TRUE(joined_within(th, 60000));
        ASSERT_TRUE(atomic_load(&t.got));
        ASSERT_EQ(api_sandbox_lock_entries(), 0U);
}

#define N_THREADS 8
#define ROUNDS 2000

static long counter[2]; /* guarded by the lock of ids[i] alone */
static const char *const ids[2] = { ID_BRANCHING, ID_DELETED };

static void *bump(void *arg) {
        size_t i = (size_t) (uintptr_t) arg % 2;

        for (int k = 0; k < ROUNDS; k++) {
                ApiSandboxLock *l = api_sandbox_lock(ids[i]);
                long v = counter[i];

                if (k % 64 == 0)
                        sched_yield(); /* a window for another holder, were there one */
                counter[i] = v + 1;
                api_sandbox_unlock(l);
        }
        return NULL;
}

TEST(sandbox_lock_mutual_exclusion_under_contention) {
        pthread_t th[N_THREADS];

        counter[0] = counter[1] = 0;
        for (size_t i = 0; i < N_THREADS; i++)
                ASSERT_EQ(pthread_create(&th[i], NULL, bump, (void *) (uintptr_t) i), 0);
        for (size_t i = 0; i < N_THREADS; i++)
                ASSERT_EQ(pthread_join(th[i], NULL), 0);
        ASSERT_EQ(counter[0], (long) (N_THREADS / 2 * ROUNDS));
        ASSERT_EQ(counter[1], (long) (N_THREADS / 2 * ROUNDS));
        ASSERT_EQ(api_sandbox_lock_entries(), 0U);
}

TEST(sandbox_lock_ids_longer_than_any_valid_one) {
        char a[200], b[200];
        ApiSandboxLock *la, *lb;

        memset(a, 'x', sizeof a - 1);
        a[sizeof a - 1] = 0;
        memcpy(b, a, sizeof b);
        b[150] = 'y'; /* same first 63 bytes: they share an entry, as any invalid id may */
        la = api_sandbox_lock(a);
        api_sandbox_unlock(la);
        lb = api_sandbox_lock(b);
        api_sandbox_unlock(lb);
        la = api_sandbox_lock(NULL);
        api_sandbox_unlock(la);
        ASSERT_EQ(api_sandbox_lock_entries(), 0U);
}
