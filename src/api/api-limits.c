/* SPDX-License-Identifier: MIT */
/* Request limits of API keys and tenants, in this process's memory: a
 * token bucket per key and per tenant (its non-admin keys together), and
 * counts of requests in flight and of open streams per key and per tenant.
 * Requests of non-admin keys together stop short of the server's connection
 * cap by admin_reserved_connections, so an admin key always finds room.
 * A refusal is 429 too_many_requests naming the limit, with Retry-After
 * (503 for the server-wide share); one over its rate gets it only after
 * API_LIMITS_TARPIT_MSEC, counted in flight meanwhile. The tenant's own rps and streams (its
 * quota row) are read from the store at most every API_LIMITS_QUOTA_TTL_USEC. */

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "log.h"
#include "str-util.h"
#include "time-util.h"

#define API_LIMITS_BUCKETS 1024U
#define API_LIMITS_ENTRIES_GC 4096U              /* entries past which idle ones are dropped */
#define API_LIMITS_IDLE_USEC (60 * 1000000LL)    /* ... if unused this long */
#define API_LIMITS_QUOTA_TTL_USEC (5 * 1000000LL)
#define API_LIMITS_TARPIT_MSEC 250U              /* a request over its rate waits this long for its 429 */

typedef struct LimitEntry {
        struct LimitEntry *next;
        char id[STORE_ID_MAX + 2];      /* "k:<key id>" or "t:<tenant id>" */
        double tokens;
        int64_t refill_usec;            /* CLOCK_MONOTONIC of the last refill */
        uint64_t requests, streams;     /* in flight now */
        int64_t used_usec;
        /* tenant entries: the tenant's own rps and streams (TENANT_QUOTA_DEFAULT: none) */
        int64_t quota_rps, quota_streams;
        int64_t quotas_read_usec;       /* 0 = never */
} LimitEntry;

struct ApiLimits {
        pthread_mutex_t lock;
        LimitEntry *buckets[API_LIMITS_BUCKETS];
        size_t n_entries;
        uint64_t others_in_flight;      /* requests of non-admin keys */
        atomic_uint_fast64_t refused;   /* for /metrics */
};

static unsigned hash_id(const char *s) {
        uint32_t h = 2166136261U;
        for (; *s; s++)
                h = (h ^ (uint8_t) *s) * 16777619U;
        return h % API_LIMITS_BUCKETS;
}

int api_limits_new(ApiLimits **ret) {
        ApiLimits *l = new0(ApiLimits, 1);
        if (!l)
                return -ENOMEM;
        pthread_mutex_init(&l->lock, NULL);
        *ret = l;
        return 0;
}

ApiLimits *api_limits_free(ApiLimits *l) {
        if (!l)
                return NULL;
        for (size_t i = 0; i < API_LIMITS_BUCKETS; i++)
                while (l->buckets[i]) {
                        LimitEntry *x = l->buckets[i];
                        l->buckets[i] = x->next;
                        free(x);
                }
        pthread_mutex_destroy(&l->lock);
        free(l);
        return NULL;
}

uint64_t api_limits_refused(const ApiLimits *l) {
        return l ? atomic_load(&l->refused) : 0;
}

/* Tops the bucket up for the time since its last refill. */
static void refill(LimitEntry *x, double rps, double burst, int64_t now) {
        if (x->refill_usec == 0)
                x->tokens = burst;
        else if (now > x->refill_usec)
                x->tokens = fmin(burst, x->tokens + rps * (double) (now - x->refill_usec) / 1e6);
        x->refill_usec = now;
}

static void gc_locked(ApiLimits *l, int64_t now) {
        for (size_t i = 0; i < API_LIMITS_BUCKETS; i++)
                for (LimitEntry **p = &l->buckets[i]; *p;) {
                        LimitEntry *x = *p;
                        /* idle, and long enough for its bucket to be full again at any rate we allow */
                        if (x->requests == 0 && now - x->used_usec > API_LIMITS_IDLE_USEC &&
                            now - x->refill_usec > API_LIMITS_IDLE_USEC) {
                                *p = x->next;
                                free(x);
                                l->n_entries--;
                        } else
                                p = &x->next;
                }
}

static LimitEntry *entry_get_locked(ApiLimits *l, char kind, const char *id, int64_t now) {
        char name[STORE_ID_MAX + 2];
        unsigned h;

        (void) snprintf(name, sizeof name, "%c:%s", kind, id);
        h = hash_id(name);
        for (LimitEntry *x = l->buckets[h]; x; x = x->next)
                if (streq(x->id, name))
                        return x;
        if (l->n_entries >= API_LIMITS_ENTRIES_GC)
                gc_locked(l, now);
        LimitEntry *x = new0(LimitEntry, 1);
        if (!x)
                return NULL;
        (void) strscpy(x->id, sizeof x->id, name);
        x->quota_rps = x->quota_streams = TENANT_QUOTA_DEFAULT;
        x->used_usec = now;
        x->next = l->buckets[h];
        l->buckets[h] = x;
        l->n_entries++;
        return x;
}

/* The tenant's own rps and streams, read again when older than the TTL. */
static void tenant_quotas_refresh(ApiRequest *r, ApiLimits *l, int64_t now) {
        TenantQuotas q;
        LimitEntry *t;
        bool stale;
        int k;

        pthread_mutex_lock(&l->lock);
        t = entry_get_locked(l, 't', r->key.tenant_id, now);
        stale = t && (t->quotas_read_usec == 0 || now - t->quotas_read_usec > API_LIMITS_QUOTA_TTL_USEC);
        pthread_mutex_unlock(&l->lock);
        if (!stale || !r->store)
                return;
        k = store_tenant_quotas_get(r->store, r->key.tenant_id, &q);
        if (k < 0) {
                log_debug_errno(k, "Reading the quotas of tenant %s failed, keeping the last: %m", r->key.tenant_id);
                return;
        }
        api_limits_set_tenant(l, &q);
}

void api_limits_set_tenant(ApiLimits *l, const TenantQuotas *q) {
        int64_t now = mono_usec();
        LimitEntry *t;

        if (!l || !q)
                return;
        pthread_mutex_lock(&l->lock);
        t = entry_get_locked(l, 't', q->tenant_id, now);
        if (t) {
                if (t->quota_rps != q->value[TENANT_QUOTA_RPS])
                        t->refill_usec = 0; /* a new rate starts with a full bucket */
                t->quota_rps = q->value[TENANT_QUOTA_RPS];
                t->quota_streams = q->value[TENANT_QUOTA_STREAMS];
                t->quotas_read_usec = now;
        }
        pthread_mutex_unlock(&l->lock);
}

static int refuse(ApiRequest *r, ApiLimits *l, int retry_after_s, bool close, ApiError *e, ApiErrorCode code,
                  const char *fmt, ...) _printf_(7, 8);

static int refuse(ApiRequest *r, ApiLimits *l, int retry_after_s, bool close, ApiError *e, ApiErrorCode code,
                  const char *fmt, ...) {
        va_list ap;

        atomic_fetch_add(&l->refused, 1);
        r->limited = true;
        r->retry_after_s = MAX(retry_after_s, 1);
        if (close)
                http_conn_set_close(r->conn); /* a thread and a socket less until it comes back */
        e->code = code;
        va_start(ap, fmt);
        (void) vsnprintf(e->message, sizeof e->message, fmt, ap);
        va_end(ap);
        log_debug("Refused a request of key %s: %s", r->key.id, e->message);
        return -EAGAIN;
}

/* Seconds until the bucket holds one token again. */
static int retry_after(const LimitEntry *x, double rps) {
        double s = rps > 0 ? (1.0 - x->tokens) / rps : 1.0;
        return (int) MIN(ceil(fmax(s, 1.0)), 3600.0);
}

int api_limits_enter(ApiRequest *r, bool stream, ApiError *e) {
        ApiLimits *l = r->api->limits;
        const Config *c = api_config(r->api);
        bool admin = r->key.admin;
        uint64_t key_requests = admin ? c->admin_key_requests_max : c->key_requests_max;
        uint64_t key_streams = admin ? c->admin_key_streams_max : c->key_streams_max;
        double key_rps = (double) (admin ? c->admin_key_rps : c->key_rps);
        double key_burst = (double) (admin ? c->admin_key_burst : c->key_burst);
        uint64_t others_max = HTTP_CONNECTIONS_MAX - MIN(c->admin_reserved_connections, HTTP_CONNECTIONS_MAX / 2);
        int64_t now = mono_usec();
        LimitEntry *k, *t = NULL;
        uint64_t t_streams = 0;
        double t_rps = 0;
        bool tarpit = false;
        int ret = 0;

        if (!l || r->limits_held)
                return 0;
        if (!admin)
                tenant_quotas_refresh(r, l, now);

        pthread_mutex_lock(&l->lock);
        k = entry_get_locked(l, 'k', r->key.id, now);
        if (!admin)
                t = entry_get_locked(l, 't', r->key.tenant_id, now);
        if (!k || (!admin && !t)) {
                pthread_mutex_unlock(&l->lock);
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        }
        if (t) {
                t_rps = (double) (t->quota_rps >= 0 ? (uint64_t) t->quota_rps : c->tenant_rps);
                t_streams = t->quota_streams >= 0 ? (uint64_t) t->quota_streams : c->tenant_streams_max;
        }
        refill(k, key_rps, key_burst, now);
        if (t && t_rps > 0)
                refill(t, t_rps, 2 * t_rps, now);

        if (!admin && l->others_in_flight >= others_max)
                ret = refuse(r, l, 1, true, e, API_UNAVAILABLE,
                             "the server's %" PRIu64 " connections for non-admin keys are all busy "
                             "(admin_reserved_connections=%" PRIu64 " are kept for admin keys)",
                             others_max, c->admin_reserved_connections);
        else if (k->requests >= key_requests)
                ret = refuse(r, l, 1, true, e, API_TOO_MANY_REQUESTS,
                             "key %s has %" PRIu64 " requests in flight (limit %s=%" PRIu64 ")", r->key.id,
                             k->requests, admin ? "admin_key_requests_max" : "key_requests_max", key_requests);
        else if (stream && k->streams >= key_streams)
                ret = refuse(r, l, 1, true, e, API_TOO_MANY_REQUESTS,
                             "key %s has %" PRIu64 " open streams (limit %s=%" PRIu64 ")", r->key.id, k->streams,
                             admin ? "admin_key_streams_max" : "key_streams_max", key_streams);
        else if (t && t->requests >= c->tenant_requests_max)
                ret = refuse(r, l, 1, true, e, API_TOO_MANY_REQUESTS,
                             "tenant '%s' has %" PRIu64 " requests in flight (limit tenant_requests_max=%" PRIu64 ")",
                             r->tenant_name, t->requests, c->tenant_requests_max);
        else if (t && stream && t_streams > 0 && t->streams >= t_streams)
                ret = refuse(r, l, 1, true, e, API_TOO_MANY_REQUESTS,
                             "tenant '%s' has %" PRIu64 " open streams (limit %s=%" PRIu64 "%s)", r->tenant_name,
                             t->streams, t->quota_streams >= 0 ? "streams" : "tenant_streams_max", t_streams,
                             t->quota_streams >= 0 ? ", the tenant's quota" : "");
        else if (k->tokens < 1.0) {
                ret = refuse(r, l, retry_after(k, key_rps), false, e, API_TOO_MANY_REQUESTS,
                             "key %s is over its request rate (limit %s=%.0f, %s=%.0f)", r->key.id,
                             admin ? "admin_key_rps" : "key_rps", key_rps, admin ? "admin_key_burst" : "key_burst",
                             key_burst);
                tarpit = true;
        } else if (t && t_rps > 0 && t->tokens < 1.0) {
                ret = refuse(r, l, retry_after(t, t_rps), false, e, API_TOO_MANY_REQUESTS,
                             "tenant '%s' is over its request rate (limit %s=%.0f%s)", r->tenant_name,
                             t->quota_rps >= 0 ? "rps" : "tenant_rps", t_rps,
                             t->quota_rps >= 0 ? ", the tenant's quota" : "");
                tarpit = true;
        }
        if (ret >= 0 || tarpit) {
                /* admitted; or over its rate, held in flight (so its in-flight caps bound how many wait)
                 * while it waits out API_LIMITS_TARPIT_MSEC below */
                if (ret >= 0)
                        k->tokens -= 1.0;
                k->requests++;
                k->streams += stream;
                k->used_usec = now;
                if (t) {
                        if (ret >= 0 && t_rps > 0)
                                t->tokens -= 1.0;
                        t->requests++;
                        t->streams += stream;
                        t->used_usec = now;
                        l->others_in_flight++;
                }
                r->limits_held = true;
                r->limits_stream = stream;
        }
        pthread_mutex_unlock(&l->lock);
        /* A client over its rate waits for its 429: a flood on keep-alive connections slows down to
         * their number over this, instead of costing the server a request each as fast as they come. */
        if (tarpit)
                (void) usleep(API_LIMITS_TARPIT_MSEC * 1000);
        return ret;
}

void api_limits_leave(ApiRequest *r) {
        ApiLimits *l = r->api->limits;
        int64_t now = mono_usec();
        LimitEntry *k, *t;

        if (!l || !r->limits_held)
                return;
        pthread_mutex_lock(&l->lock);
        k = entry_get_locked(l, 'k', r->key.id, now);
        if (k) {
                k->requests -= k->requests > 0;
                k->streams -= r->limits_stream && k->streams > 0;
                k->used_usec = now;
        }
        if (!r->key.admin) {
                t = entry_get_locked(l, 't', r->key.tenant_id, now);
                if (t) {
                        t->requests -= t->requests > 0;
                        t->streams -= r->limits_stream && t->streams > 0;
                        t->used_usec = now;
                }
                l->others_in_flight -= l->others_in_flight > 0;
        }
        pthread_mutex_unlock(&l->lock);
        r->limits_held = false;
}
