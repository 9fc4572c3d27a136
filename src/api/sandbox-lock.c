/* SPDX-License-Identifier: MIT */
/* One lock per sandbox id (sandbox-lock.h). An entry lives while its lock is
 * held or waited for: a list under one mutex, each entry with a holder flag
 * and a count of waiters, one condition variable for all (lifecycle calls
 * are few; contention on one sandbox is rare). It replaces a table of 64
 * mutexes by hash of the id, where two sandboxes of the same bucket waited
 * for each other: a delete of one waited out another's two-minute branch. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sandbox-lock.h"
#include "store.h"
#include "str-util.h"

struct ApiSandboxLock {
        ApiSandboxLock *next;
        unsigned waiters;
        bool held;
        char id[STORE_ID_MAX];
};

static pthread_mutex_t table_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t table_changed = PTHREAD_COND_INITIALIZER;
static ApiSandboxLock *table;

static ApiSandboxLock *find(const char *id) {
        for (ApiSandboxLock *l = table; l; l = l->next)
                if (strncmp(l->id, id, sizeof l->id - 1) == 0) /* as stored: at most STORE_ID_MAX-1 bytes */
                        return l;
        return NULL;
}

static void wait_a_moment(void) {
        struct timespec t;

        (void) clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 10 * 1000 * 1000;
        if (t.tv_nsec >= 1000 * 1000 * 1000) {
                t.tv_sec++;
                t.tv_nsec -= 1000 * 1000 * 1000;
        }
        (void) pthread_cond_timedwait(&table_changed, &table_mutex, &t);
}

ApiSandboxLock *api_sandbox_lock(const char *id) {
        ApiSandboxLock *l;

        if (!id)
                id = "";
        (void) pthread_mutex_lock(&table_mutex);
        for (;;) {
                l = find(id);
                if (!l) {
                        l = calloc(1, sizeof *l);
                        if (!l) {
                                wait_a_moment(); /* out of memory: again when some is back */
                                continue;
                        }
                        (void) strscpy(l->id, sizeof l->id, id); /* longer ids than any valid one share a prefix */
                        l->next = table;
                        table = l;
                }
                if (!l->held)
                        break;
                l->waiters++; /* keeps the entry while we wait */
                (void) pthread_cond_wait(&table_changed, &table_mutex);
                l->waiters--;
        }
        l->held = true;
        (void) pthread_mutex_unlock(&table_mutex);
        return l;
}

void api_sandbox_unlock(ApiSandboxLock *l) {
        (void) pthread_mutex_lock(&table_mutex);
        l->held = false;
        if (l->waiters == 0) {
                for (ApiSandboxLock **p = &table; *p; p = &(*p)->next)
                        if (*p == l) {
                                *p = l->next;
                                break;
                        }
                free(l);
        }
        (void) pthread_cond_broadcast(&table_changed);
        (void) pthread_mutex_unlock(&table_mutex);
}

unsigned api_sandbox_lock_entries(void) {
        unsigned n = 0;

        (void) pthread_mutex_lock(&table_mutex);
        for (ApiSandboxLock *l = table; l; l = l->next)
                n++;
        (void) pthread_mutex_unlock(&table_mutex);
        return n;
}
