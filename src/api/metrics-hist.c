/* SPDX-License-Identifier: MIT */
/* Latency histograms (metrics-hist.h). */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "macros.h"
#include "metrics-hist.h"
#include "str-util.h"

/* upper bounds in microseconds; the last bucket is +Inf */
static const int64_t bounds_usec[] = { 5000,    10000,   25000,   50000,    100000,   250000,  500000,
                                       1000000, 2500000, 5000000, 10000000, 30000000, 60000000 };
#define N_BUCKETS (ELEMENTSOF(bounds_usec) + 1)
#define ROUTES_MAX 96U /* the route table's rows and the E2B surface's one, with methods */

typedef struct Hist {
        atomic_uint_fast64_t buckets[N_BUCKETS]; /* not cumulative: summed when printed */
        atomic_uint_fast64_t sum_usec;
        atomic_uint_fast64_t count;
} Hist;

typedef struct RouteHist {
        _Atomic(const char *) route; /* NULL: free */
        const char *method;
        Hist h;
} RouteHist;

static RouteHist routes[ROUTES_MAX];
static Hist phases[_API_PHASE_MAX];
static pthread_mutex_t routes_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const phase_names[_API_PHASE_MAX] = {
        [API_PHASE_CREATE] = "create",
        [API_PHASE_EXEC_START] = "exec_start",
        [API_PHASE_CHECKPOINT] = "checkpoint",
        [API_PHASE_BRANCH] = "branch",
};

static void observe(Hist *h, int64_t usec) {
        size_t i = 0;

        if (usec < 0)
                usec = 0;
        while (i < ELEMENTSOF(bounds_usec) && usec > bounds_usec[i])
                i++;
        atomic_fetch_add(&h->buckets[i], 1);
        atomic_fetch_add(&h->sum_usec, (uint64_t) usec);
        atomic_fetch_add(&h->count, 1);
}

static RouteHist *route_slot(const char *method, const char *route) {
        for (size_t i = 0; i < ROUTES_MAX; i++) {
                const char *r = atomic_load(&routes[i].route);
                if (!r)
                        break;
                if (r == route && routes[i].method == method)
                        return &routes[i];
        }
        pthread_mutex_lock(&routes_lock);
        for (size_t i = 0; i < ROUTES_MAX; i++) {
                const char *r = atomic_load(&routes[i].route);
                if (r == route && routes[i].method == method) {
                        pthread_mutex_unlock(&routes_lock);
                        return &routes[i];
                }
                if (!r) {
                        routes[i].method = method;
                        atomic_store(&routes[i].route, route);
                        pthread_mutex_unlock(&routes_lock);
                        return &routes[i];
                }
        }
        pthread_mutex_unlock(&routes_lock);
        return NULL; /* full: not counted (the table has fewer rows than this) */
}

void api_hist_observe_route(const char *method, const char *route, int64_t usec) {
        RouteHist *rh = route_slot(method, route);
        if (rh)
                observe(&rh->h, usec);
}

void api_hist_observe_phase(ApiPhase p, int64_t usec) {
        if (p >= 0 && p < _API_PHASE_MAX)
                observe(&phases[p], usec);
}

static void print_hist(FILE *f, const char *name, const char *labels, const Hist *h) {
        uint64_t cum = 0;

        for (size_t i = 0; i < N_BUCKETS; i++) {
                cum += atomic_load(&h->buckets[i]);
                if (i < ELEMENTSOF(bounds_usec))
                        fprintf(f, "%s_bucket{%s,le=\"%g\"} %" PRIu64 "\n", name, labels,
                                (double) bounds_usec[i] / 1e6, cum);
                else
                        fprintf(f, "%s_bucket{%s,le=\"+Inf\"} %" PRIu64 "\n", name, labels, cum);
        }
        fprintf(f, "%s_sum{%s} %.6f\n", name, labels, (double) atomic_load(&h->sum_usec) / 1e6);
        fprintf(f, "%s_count{%s} %" PRIu64 "\n", name, labels, (uint64_t) atomic_load(&h->count));
}

void api_hist_print(FILE *f) {
        char labels[256];

        fprintf(f, "# HELP space_http_request_duration_seconds Time to answer an HTTP request, by route.\n"
                   "# TYPE space_http_request_duration_seconds histogram\n");
        for (size_t i = 0; i < ROUTES_MAX; i++) {
                const char *r = atomic_load(&routes[i].route);
                if (!r)
                        break;
                snprintf(labels, sizeof labels, "method=\"%s\",route=\"%s\"", routes[i].method, r);
                print_hist(f, "space_http_request_duration_seconds", labels, &routes[i].h);
        }
        fprintf(f, "# HELP space_operation_duration_seconds Time users wait on an operation: create, exec start "
                   "(until the command runs), checkpoint, branch.\n"
                   "# TYPE space_operation_duration_seconds histogram\n");
        for (int p = 0; p < _API_PHASE_MAX; p++) {
                snprintf(labels, sizeof labels, "op=\"%s\"", phase_names[p]);
                print_hist(f, "space_operation_duration_seconds", labels, &phases[p]);
        }
}
