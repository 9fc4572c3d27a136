/* SPDX-License-Identifier: MIT */
/* The generic half of the cluster operations (workers, controller
 * leadership): argument checks, then the back end's op. */

#include "store-backend.h"
#include "str-util.h"

static const char *const worker_state_table[_WORKER_STATE_MAX] = {
        [WORKER_LIVE] = "live",
        [WORKER_SUSPECT] = "suspect",
        [WORKER_STOPPED] = "stopped",
};

const char *worker_state_to_string(WorkerState s) {
        if (s < 0 || s >= _WORKER_STATE_MAX)
                return NULL;
        return worker_state_table[s];
}

WorkerState worker_state_from_string(const char *s) {
        if (!s)
                return _WORKER_STATE_INVALID;
        for (size_t i = 0; i < ELEMENTSOF(worker_state_table); i++)
                if (streq(worker_state_table[i], s))
                        return (WorkerState) i;
        return _WORKER_STATE_INVALID;
}

/* A string that must fit its column (required: non-empty). */
static int check_str(const char *s, size_t size, bool required) {
        size_t n;

        if (!s)
                return required ? -EINVAL : 0;
        n = strnlen(s, size);
        if (n >= size)
                return -ENAMETOOLONG;
        if (required && n == 0)
                return -EINVAL;
        return 0;
}

#define CHECK(expr)                     \
        do {                            \
                int _r = (expr);        \
                if (_r < 0)             \
                        return _r;      \
        } while (0)

int store_worker_register(Store *s, const WorkerNode *w, int64_t stale_before_usec) {
        WorkerNode copy;

        if (!s || !w)
                return -EINVAL;
        CHECK(check_str(w->name, sizeof w->name, true));
        CHECK(check_str(w->address, sizeof w->address, true));
        CHECK(check_str(w->instance, sizeof w->instance, true));
        CHECK(check_str(w->runtimes, sizeof w->runtimes, false));
        CHECK(check_str(w->accelerators, sizeof w->accelerators, false));
        CHECK(check_str(w->templates, sizeof w->templates, false));
        if (w->memory_mb > (uint64_t) INT64_MAX || w->disk_mb > (uint64_t) INT64_MAX)
                return -ERANGE;
        copy = *w;
        copy.state = WORKER_LIVE;
        copy.registered_usec = copy.heartbeat_usec = now_usec();
        return s->ops->worker_register(s, &copy, stale_before_usec);
}

int store_worker_heartbeat(Store *s, const char *name, const char *instance, const char *templates) {
        if (!s)
                return -EINVAL;
        CHECK(check_str(name, STORE_NAME_MAX, true));
        CHECK(check_str(instance, STORE_ID_MAX, true));
        CHECK(check_str(templates, STORE_WORKER_TEMPLATES_MAX, false));
        return s->ops->worker_heartbeat(s, name, instance, templates ?: "", now_usec());
}

int store_worker_stop(Store *s, const char *name, const char *instance) {
        if (!s)
                return -EINVAL;
        CHECK(check_str(name, STORE_NAME_MAX, true));
        CHECK(check_str(instance, STORE_ID_MAX, true));
        return s->ops->worker_stop(s, name, instance);
}

int store_worker_get(Store *s, const char *name, WorkerNode *ret) {
        if (!s || !name || !ret)
                return -EINVAL;
        if (name[0] == 0 || strnlen(name, STORE_NAME_MAX) >= STORE_NAME_MAX)
                return -ENOENT;
        return s->ops->worker_get(s, name, ret);
}

int store_worker_list(Store *s, WorkerNode **ret, size_t *ret_n) {
        if (!s || !ret || !ret_n)
                return -EINVAL;
        return s->ops->worker_list(s, ret, ret_n);
}

int store_worker_mark_lost(Store *s, const char *name, int64_t stale_before_usec, const char *reason,
                           SandboxRef **ret, size_t *ret_n) {
        if (!s || !ret || !ret_n)
                return -EINVAL;
        CHECK(check_str(name, STORE_NAME_MAX, true));
        CHECK(check_str(reason, STORE_REASON_MAX, false));
        return s->ops->worker_mark_lost(s, name, stale_before_usec, reason ?: "", now_usec(), ret, ret_n);
}

int store_leader_try(Store *s, bool *ret_leader) {
        if (!s || !ret_leader)
                return -EINVAL;
        return s->ops->leader_try(s, ret_leader);
}

int store_clock(Store *s, int64_t *ret_usec) {
        if (!s || !ret_usec)
                return -EINVAL;
        return s->ops->clock(s, ret_usec);
}

int64_t store_now_usec(Store *s) {
        int64_t t;

        if (s && store_clock(s, &t) >= 0)
                return t;
        return now_usec();
}

/* A lease of a year at most; a token is >= 1. */
#define LEASE_USEC_MAX (366ULL * 24 * 3600 * 1000000)

int store_lease_take(Store *s, const char *holder, uint64_t lease_usec, int64_t *ret_token) {
        if (!s || !ret_token || lease_usec == 0)
                return -EINVAL;
        if (lease_usec > LEASE_USEC_MAX)
                return -ERANGE;
        CHECK(check_str(holder, STORE_NAME_MAX, true));
        return s->ops->lease_take(s, holder, lease_usec, ret_token);
}

int store_lease_renew(Store *s, const char *holder, int64_t token, uint64_t lease_usec) {
        if (!s || token <= 0 || lease_usec == 0)
                return -EINVAL;
        if (lease_usec > LEASE_USEC_MAX)
                return -ERANGE;
        CHECK(check_str(holder, STORE_NAME_MAX, true));
        return s->ops->lease_renew(s, holder, token, lease_usec);
}

int store_lease_release(Store *s, const char *holder, int64_t token) {
        if (!s || token <= 0)
                return -EINVAL;
        CHECK(check_str(holder, STORE_NAME_MAX, true));
        return s->ops->lease_release(s, holder, token);
}

int store_lease_get(Store *s, ControllerLease *ret) {
        if (!s || !ret)
                return -EINVAL;
        return s->ops->lease_get(s, ret);
}

int store_fence(Store *s, int64_t token) {
        if (!s || token < 0)
                return -EINVAL;
        return s->ops->fence(s, token);
}

int store_cluster_setting_claim(Store *s, const char *name, const char *value,
                                char ret[static STORE_CLUSTER_SETTING_MAX]) {
        if (!s || !ret)
                return -EINVAL;
        CHECK(check_str(name, STORE_NAME_MAX, true));
        CHECK(check_str(value, STORE_CLUSTER_SETTING_MAX, true));
        return s->ops->cluster_setting_claim(s, name, value, ret);
}

int store_cluster_setting_get(Store *s, const char *name, char ret[static STORE_CLUSTER_SETTING_MAX]) {
        if (!s || !ret)
                return -EINVAL;
        CHECK(check_str(name, STORE_NAME_MAX, true));
        return s->ops->cluster_setting_get(s, name, ret);
}

static bool sha256_hex_ok(const char *h) {
        size_t n = strnlen(h, STORE_SHA256_HEX);

        if (n != 0 && n != STORE_SHA256_HEX - 1)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f')))
                        return false;
        return true;
}

int store_checkpoint_copy_set(Store *s, const CheckpointCopy *c) {
        CheckpointCopy copy;

        if (!s || !c)
                return -EINVAL;
        CHECK(check_str(c->checkpoint_id, sizeof c->checkpoint_id, true));
        CHECK(check_str(c->sandbox_id, sizeof c->sandbox_id, true));
        CHECK(check_str(c->worker, sizeof c->worker, true));
        if (!sha256_hex_ok(c->sha256))
                return -EINVAL;
        if (c->size_bytes > (uint64_t) INT64_MAX)
                return -ERANGE;
        copy = *c;
        copy.updated_usec = now_usec();
        return s->ops->checkpoint_copy_set(s, &copy);
}

int store_checkpoint_copy_list(Store *s, const char *checkpoint_id, CheckpointCopy **ret, size_t *ret_n) {
        if (!s || !ret || !ret_n)
                return -EINVAL;
        CHECK(check_str(checkpoint_id, STORE_ID_MAX, false));
        return s->ops->checkpoint_copy_list(s, checkpoint_id, ret, ret_n);
}

int store_checkpoint_copy_delete(Store *s, const char *checkpoint_id, const char *worker) {
        if (!s)
                return -EINVAL;
        CHECK(check_str(checkpoint_id, STORE_ID_MAX, true));
        CHECK(check_str(worker, STORE_NAME_MAX, true));
        return s->ops->checkpoint_copy_delete(s, checkpoint_id, worker);
}
