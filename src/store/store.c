/* SPDX-License-Identifier: MIT */
/* The generic half of the store: picks a back end from the URL, checks every
 * argument once (so back ends need not), and dispatches through the ops
 * table. Also the enum string tables, record destructors and now_usec(). */

#include <time.h>

#include "store-backend.h"
#include "store-postgres.h"
#include "str-util.h"
#include "time-util.h"

#define TENANT_ID_PREFIX "tn_"
#define TENANT_ID_RANDOM_LEN 12
#define TENANT_CREATE_TRIES 4

/* The one visible table of back ends. ops NULL = known scheme, not built yet.
 * "postgres://" and "postgresql://" URLs go to libpq whole (user, password,
 * host, port, database, and parameters such as sslmode or host=/socket/dir). */
static const struct {
        const char *scheme;     /* matches "SCHEME:..." */
        bool pass_whole_url;    /* the back end parses the URL itself */
        const StoreOps *ops;
} store_backends[] = {
        { "sqlite", false, &store_sqlite_ops },
        { "postgres", true, &store_postgres_ops },
        { "postgresql", true, &store_postgres_ops },
};

static const char *const sandbox_state_table[_SANDBOX_STATE_MAX] = {
        [SANDBOX_CREATING] = "creating",
        [SANDBOX_RUNNING] = "running",
        [SANDBOX_PAUSED] = "paused",
        [SANDBOX_SUSPENDED] = "suspended",
        [SANDBOX_DELETING] = "deleting",
        [SANDBOX_DELETED] = "deleted",
        [SANDBOX_ERROR] = "error",
        [SANDBOX_UNREACHABLE] = "unreachable",
};

static const char *const template_state_table[_TEMPLATE_STATE_MAX] = {
        [TEMPLATE_IMPORTING] = "importing",
        [TEMPLATE_READY] = "ready",
};

static const char *const idle_action_table[_IDLE_ACTION_MAX] = {
        [IDLE_ACTION_NONE] = "",
        [IDLE_ACTION_PAUSE] = "pause",
        [IDLE_ACTION_SUSPEND] = "suspend",
};

const char *idle_action_to_string(IdleAction a) {
        if (a < 0 || a >= _IDLE_ACTION_MAX)
                return NULL;
        return idle_action_table[a];
}

IdleAction idle_action_from_string(const char *s) {
        if (!s)
                return _IDLE_ACTION_INVALID;
        for (size_t i = 0; i < ELEMENTSOF(idle_action_table); i++)
                if (streq(idle_action_table[i], s))
                        return (IdleAction) i;
        return _IDLE_ACTION_INVALID;
}

const char *sandbox_state_to_string(SandboxState s) {
        if (s < 0 || s >= _SANDBOX_STATE_MAX)
                return NULL;
        return sandbox_state_table[s];
}

SandboxState sandbox_state_from_string(const char *s) {
        if (!s)
                return _SANDBOX_STATE_INVALID;
        for (size_t i = 0; i < ELEMENTSOF(sandbox_state_table); i++)
                if (streq(sandbox_state_table[i], s))
                        return (SandboxState) i;
        return _SANDBOX_STATE_INVALID;
}

const char *template_state_to_string(TemplateState s) {
        if (s < 0 || s >= _TEMPLATE_STATE_MAX)
                return NULL;
        return template_state_table[s];
}

TemplateState template_state_from_string(const char *s) {
        if (!s)
                return _TEMPLATE_STATE_INVALID;
        for (size_t i = 0; i < ELEMENTSOF(template_state_table); i++)
                if (streq(template_state_table[i], s))
                        return (TemplateState) i;
        return _TEMPLATE_STATE_INVALID;
}

int64_t now_usec(void) {
        struct timespec ts;

        if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
                return 0;
        return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static _Thread_local uint64_t timing_usec, timing_calls;
static _Thread_local unsigned timing_depth;

uint64_t store_timing_enter(void) {
        return timing_depth++ == 0 ? mono_usec() : 0;
}

void store_timing_leave(uint64_t *start_usec) {
        uint64_t now;

        if (timing_depth == 0 || --timing_depth > 0 || *start_usec == 0)
                return;
        now = mono_usec();
        timing_usec += now > *start_usec ? now - *start_usec : 0;
        timing_calls++;
}

void store_timing_reset(void) {
        timing_usec = timing_calls = 0;
}

uint64_t store_timing_usec(void) {
        return timing_usec;
}

uint64_t store_timing_calls(void) {
        return timing_calls;
}

void sandbox_done(Sandbox *s) {
        if (!s)
                return;
        s->env_json = mfree(s->env_json);
        s->metadata_json = mfree(s->metadata_json);
        s->network_json = mfree(s->network_json);
}

void sandbox_array_free(Sandbox *a, size_t n) {
        if (!a)
                return;
        for (size_t i = 0; i < n; i++)
                sandbox_done(a + i);
        free(a);
}

void event_done(Event *e) {
        if (!e)
                return;
        e->data_json = mfree(e->data_json);
}

void event_array_free(Event *a, size_t n) {
        if (!a)
                return;
        for (size_t i = 0; i < n; i++)
                event_done(a + i);
        free(a);
}

int store_open(const char *url, Store **ret) {
        const StoreOps *ops = NULL;
        const char *location = NULL;
        bool matched = false;

        if (!url || !ret)
                return -EINVAL;
        if (url[0] == 0)
                return -EINVAL;
        if (strnlen(url, STORE_URL_MAX) >= STORE_URL_MAX)
                return -ENAMETOOLONG;

        for (size_t i = 0; i < ELEMENTSOF(store_backends); i++) {
                const char *rest = startswith(url, store_backends[i].scheme);
                if (!rest || rest[0] != ':')
                        continue;
                matched = true;
                ops = store_backends[i].ops;
                if (store_backends[i].pass_whole_url)
                        location = url;
                else {
                        location = rest + 1;
                        /* "sqlite:///abs/path" and "sqlite://rel" as well as "sqlite:/abs" */
                        location = startswith(location, "//") ?: location;
                }
                break;
        }
        if (!matched) {
                /* Another scheme we do not know; else a plain path means sqlite. */
                if (strstr(url, "://"))
                        return -EPROTONOSUPPORT;
                ops = &store_sqlite_ops;
                location = url;
        }
        if (!ops)
                return -EPROTONOSUPPORT;
        if (location[0] == 0)
                return -EINVAL;

        return ops->open(location, ret);
}

Store *store_close(Store *s) {
        if (s)
                s->ops->close(s);
        return NULL;
}

const char *store_backend_name(const Store *s) {
        return s ? s->ops->name : NULL;
}

int store_schema_version(Store *s) {
        if (!s)
                return -EINVAL;
        return s->ops->schema_version(s);
}

int store_batch_begin(Store *s) {
        if (!s)
                return -EINVAL;
        return s->ops->batch_begin ? s->ops->batch_begin(s) : 0;
}

int store_batch_end(Store *s) {
        if (!s)
                return -EINVAL;
        return s->ops->batch_end ? s->ops->batch_end(s) : 0;
}

/* Tenants */

int store_tenant_create(Store *s, const char *name, Tenant *ret) {
        int r;

        if (!s)
                return -EINVAL;
        CHECK(check_arg(name, STORE_NAME_MAX, true));

        for (unsigned attempt = 0;; attempt++) {
                Tenant t = { .created_usec = now_usec() };
                char rnd[TENANT_ID_RANDOM_LEN + 1];

                r = random_alnum(rnd, TENANT_ID_RANDOM_LEN);
                if (r < 0)
                        return r;
                if (snprintf(t.id, sizeof t.id, "%s%s", TENANT_ID_PREFIX, rnd) < 0)
                        return -EIO;
                (void) strscpy(t.name, sizeof t.name, name); /* length checked above */

                r = s->ops->tenant_insert(s, &t);
                if (r == -EEXIST && attempt + 1 < TENANT_CREATE_TRIES) {
                        /* The name, or (rarely) the random id, is taken: tell which. */
                        Tenant other;
                        int k = s->ops->tenant_get_by_name(s, name, &other);
                        if (k >= 0)
                                return -EEXIST;
                        if (k != -ENOENT)
                                return k;
                        continue;
                }
                if (r < 0)
                        return r;
                if (ret)
                        *ret = t;
                return 0;
        }
}

int store_tenant_get(Store *s, const char *id, Tenant *ret) {
        if (!s || !ret)
                return -EINVAL;
        CHECK(check_lookup(id, STORE_ID_MAX));
        return s->ops->tenant_get(s, id, ret);
}

int store_tenant_get_by_name(Store *s, const char *name, Tenant *ret) {
        if (!s || !ret)
                return -EINVAL;
        CHECK(check_lookup(name, STORE_NAME_MAX));
        return s->ops->tenant_get_by_name(s, name, ret);
}

int store_tenant_list(Store *s, Tenant **ret, size_t *ret_n) {
        if (!s || !ret || !ret_n)
                return -EINVAL;
        return s->ops->tenant_list(s, ret, ret_n);
}

/* API keys */

int store_key_insert(Store *s, const ApiKey *k) {
        ApiKey copy;

        if (!s || !k)
                return -EINVAL;
        CHECK(CHECK_FIELD(k->id, true));
        CHECK(CHECK_FIELD(k->tenant_id, true));
        CHECK(CHECK_FIELD(k->hash, true));
        CHECK(CHECK_FIELD(k->name, false));
        if (k->created_usec < 0)
                return -EINVAL;

        copy = *k;
        if (copy.created_usec == 0)
                copy.created_usec = now_usec();
        return s->ops->key_insert(s, &copy);
}

int store_key_get_by_hash(Store *s, const char *hash, ApiKey *ret) {
        if (!s || !ret)
                return -EINVAL;
        CHECK(check_lookup(hash, sizeof(((ApiKey *) NULL)->hash)));
        return s->ops->key_get_by_hash(s, hash, ret);
}

int store_key_list(Store *s, const char *tenant_id, ApiKey **ret, size_t *ret_n) {
        if (!s || !ret || !ret_n)
                return -EINVAL;
        return s->ops->key_list(s, tenant_id, ret, ret_n);
}

int store_key_delete(Store *s, const char *tenant_id, const char *id) {
        if (!s)
                return -EINVAL;
        CHECK(check_lookup(id, STORE_ID_MAX));
        if (tenant_id)
                CHECK(check_lookup(tenant_id, STORE_ID_MAX));
        return s->ops->key_delete(s, tenant_id, id);
}

int store_key_count(Store *s, uint64_t *ret) {
        if (!s || !ret)
                return -EINVAL;
        return s->ops->key_count(s, ret);
}

/* Templates */

int store_template_insert(Store *s, const Template *t) {
        Template copy;

        if (!s || !t)
                return -EINVAL;
        CHECK(CHECK_FIELD(t->name, true));
        CHECK(CHECK_FIELD(t->tenant_id, false));
        if (!template_state_to_string(t->state))
                return -EINVAL;
        CHECK(check_u64(t->size_bytes));
        if (t->created_usec < 0)
                return -EINVAL;

        copy = *t;
        if (copy.created_usec == 0)
                copy.created_usec = now_usec();
        return s->ops->template_insert(s, &copy);
}

int store_template_get(Store *s, const char *name, Template *ret) {
        if (!s || !ret)
                return -EINVAL;
        CHECK(check_lookup(name, STORE_NAME_MAX));
        return s->ops->template_get(s, name, ret);
}

int store_template_list(Store *s, Template **ret, size_t *ret_n) {
        if (!s || !ret || !ret_n)
                return -EINVAL;
        return s->ops->template_list(s, ret, ret_n);
}

int store_template_set_ready(Store *s, const char *name, uint64_t size_bytes) {
        if (!s)
                return -EINVAL;
        CHECK(check_lookup(name, STORE_NAME_MAX));
        CHECK(check_u64(size_bytes));
        return s->ops->template_set_ready(s, name, size_bytes);
}

int store_template_delete(Store *s, const char *name) {
        if (!s)
                return -EINVAL;
        CHECK(check_lookup(name, STORE_NAME_MAX));
        return s->ops->template_delete(s, name);
}

int store_template_in_use(Store *s, const char *name, uint64_t *ret) {
        if (!s || !ret || !name)
                return -EINVAL;
        if (check_lookup(name, STORE_NAME_MAX) < 0) {
                *ret = 0;
                return 0;
        }
        return s->ops->template_in_use(s, name, ret);
}

/* Sandboxes */

static int sandbox_check(const Sandbox *sb) {
        CHECK(CHECK_FIELD(sb->id, true));
        CHECK(CHECK_FIELD(sb->tenant_id, true));
        CHECK(CHECK_FIELD(sb->template_name, true));
        CHECK(CHECK_FIELD(sb->runtime, true));
        CHECK(CHECK_FIELD(sb->worker, false));
        CHECK(CHECK_FIELD(sb->reason, false));
        CHECK(CHECK_FIELD(sb->parent_id, false));
        CHECK(CHECK_FIELD(sb->parent_checkpoint, false));
        CHECK(CHECK_FIELD(sb->warm_pool, false));
        CHECK(CHECK_FIELD(sb->ingress_host, false));
        if (!sandbox_state_to_string(sb->state))
                return -EINVAL;
        if (!idle_action_to_string(sb->idle_action))
                return -EINVAL;
        CHECK(check_u64(sb->idle_s));
        CHECK(check_u64(sb->checkpoint_every_s));
        CHECK(check_u64(sb->checkpoints_max));
        CHECK(check_u64(sb->checkpoints_mb));
        if (sb->last_activity_usec < 0)
                return -EINVAL;
        CHECK(check_u64(sb->memory_mb));
        CHECK(check_u64(sb->disk_mb));
        CHECK(check_u64(sb->timeout_s));
        CHECK(check_u64(sb->pid_starttime));
        if (sb->created_usec < 0 || sb->updated_usec < 0 || sb->expires_usec < 0 || sb->pid < 0)
                return -EINVAL;
        return 0;
}

int store_sandbox_insert_admit(Store *s, Sandbox *sb, uint32_t slots_max, StoreAdmission *adm) {
        Sandbox copy;
        int r;

        if (!s || !sb)
                return -EINVAL;
        CHECK(sandbox_check(sb));
        if (slots_max == 0)
                return -ENOSPC;

        copy = *sb;
        if (copy.created_usec == 0)
                copy.created_usec = now_usec();
        if (copy.updated_usec == 0)
                copy.updated_usec = copy.created_usec;
        if (copy.last_activity_usec == 0)
                copy.last_activity_usec = copy.created_usec;
        r = s->ops->sandbox_insert(s, &copy, slots_max, adm);
        if (r < 0)
                return r;
        sb->slot = copy.slot;
        sb->template_version = copy.template_version;
        sb->created_usec = copy.created_usec;
        sb->updated_usec = copy.updated_usec;
        sb->last_activity_usec = copy.last_activity_usec;
        return 0;
}

int store_sandbox_insert_max(Store *s, Sandbox *sb, uint32_t slots_max) {
        return store_sandbox_insert_admit(s, sb, slots_max, NULL);
}

int store_sandbox_insert(Store *s, Sandbox *sb) {
        return store_sandbox_insert_max(s, sb, UINT32_MAX);
}

int store_sandbox_get(Store *s, const char *tenant_id, const char *id, Sandbox *ret) {
        if (!s || !ret)
                return -EINVAL;
        CHECK(check_lookup(id, STORE_ID_MAX));
        if (tenant_id)
                CHECK(check_lookup(tenant_id, STORE_ID_MAX));
        return s->ops->sandbox_get(s, tenant_id, id, ret);
}

static int sandbox_filter_resolve(const SandboxFilter *f, SandboxFilter *ret) {
        SandboxFilter r = { .state = -1 };

        if (f)
                r = *f;
        if (r.state >= 0 && !sandbox_state_to_string(r.state))
                return -EINVAL;
        if (r.state < 0)
                r.state = -1;
        if (r.limit == 0)
                r.limit = STORE_LIST_LIMIT_DEFAULT;
        if (r.limit > INT32_MAX)
                r.limit = INT32_MAX;
        *ret = r;
        return 0;
}

int store_sandbox_list(Store *s, const SandboxFilter *f, Sandbox **ret, size_t *ret_n) {
        SandboxFilter filter;

        if (!s || !ret || !ret_n)
                return -EINVAL;
        CHECK(sandbox_filter_resolve(f, &filter));
        return s->ops->sandbox_list(s, &filter, ret, ret_n);
}

int store_sandbox_count(Store *s, const SandboxFilter *f, uint64_t *ret) {
        SandboxFilter filter;

        if (!s || !ret)
                return -EINVAL;
        CHECK(sandbox_filter_resolve(f, &filter));
        filter.after_id = NULL;
        return s->ops->sandbox_count(s, &filter, ret);
}

int store_sandbox_set_state(Store *s, const char *id, int from, SandboxState to, const char *reason) {
        if (!s)
                return -EINVAL;
        CHECK(check_lookup(id, STORE_ID_MAX));
        if (from >= 0 && !sandbox_state_to_string(from))
                return -EINVAL;
        if (!sandbox_state_to_string(to))
                return -EINVAL;
        CHECK(check_arg(reason, STORE_REASON_MAX, false));
        return s->ops->sandbox_set_state(s, id, from < 0 ? -1 : from, to, strempty(reason), now_usec());
}

int store_sandbox_set_runtime(Store *s, const char *id, int64_t pid, uint64_t pid_starttime, const char *worker) {
        if (!s)
                return -EINVAL;
        CHECK(check_lookup(id, STORE_ID_MAX));
        if (pid < 0)
                return -EINVAL;
        CHECK(check_u64(pid_starttime));
        CHECK(check_arg(worker, sizeof(((Sandbox *) NULL)->worker), false));
        return s->ops->sandbox_set_runtime(s, id, pid, pid_starttime, worker, now_usec());
}

int store_sandbox_set_running(Store *s, const char *id, int64_t pid, uint64_t pid_starttime, Event *ev) {
        Event copy;
        int r;

        if (!s || !ev || pid < 0)
                return -EINVAL;
        CHECK(check_lookup(id, STORE_ID_MAX));
        CHECK(check_u64(pid_starttime));
        copy = *ev;
        if (strscpy(copy.sandbox_id, sizeof copy.sandbox_id, id) < 0)
                return -EINVAL;
        CHECK(store_event_check(&copy));
        r = s->ops->sandbox_set_running(s, id, pid, pid_starttime, &copy, now_usec());
        if (r < 0)
                return r;
        ev->seq = copy.seq;
        ev->time_usec = copy.time_usec;
        return 0;
}

int store_sandbox_take_over(Store *s, const char *id, SandboxState from, const char *from_worker, SandboxState to,
                            int64_t pid, uint64_t pid_starttime, const char *to_worker, const char *reason) {
        if (!s || !from_worker || !to_worker)
                return -EINVAL;
        CHECK(check_lookup(id, STORE_ID_MAX));
        if (!sandbox_state_to_string(from) || !sandbox_state_to_string(to) || pid < 0)
                return -EINVAL;
        CHECK(check_u64(pid_starttime));
        CHECK(check_arg(from_worker, sizeof(((Sandbox *) NULL)->worker), false));
        CHECK(check_arg(to_worker, sizeof(((Sandbox *) NULL)->worker), false));
        CHECK(check_arg(reason, STORE_REASON_MAX, false));
        return s->ops->sandbox_take_over(s, id, from, from_worker, to, pid, pid_starttime, to_worker, strempty(reason),
                                         now_usec());
}

int store_sandbox_set_expiry(Store *s, const char *id, int64_t expires_usec) {
        if (!s)
                return -EINVAL;
        CHECK(check_lookup(id, STORE_ID_MAX));
        if (expires_usec < 0)
                return -EINVAL;
        return s->ops->sandbox_set_expiry(s, id, expires_usec, now_usec());
}

int store_sandbox_hold_slot(Store *s, const char *id, bool held) {
        if (!s)
                return -EINVAL;
        CHECK(check_lookup(id, STORE_ID_MAX));
        return s->ops->sandbox_hold_slot(s, id, held);
}

int store_sandbox_release_slots(Store *s, const char *worker) {
        if (!s)
                return -EINVAL;
        if (worker)
                CHECK(check_arg(worker, sizeof(((Sandbox *) NULL)->worker), false));
        return s->ops->sandbox_release_slots(s, worker);
}

int store_sandbox_purge(Store *s, const char *id) {
        if (!s)
                return -EINVAL;
        CHECK(check_lookup(id, STORE_ID_MAX));
        return s->ops->sandbox_purge(s, id);
}

/* Lifecycle of sandboxes */

int store_sandbox_touch(Store *s, const char *id) {
        if (!s)
                return -EINVAL;
        CHECK(check_lookup(id, STORE_ID_MAX));
        return s->ops->sandbox_touch(s, id, now_usec());
}

int store_sandbox_set_policy(Store *s, const char *id, const SandboxPolicy *p) {
        if (!s || !p)
                return -EINVAL;
        CHECK(check_lookup(id, STORE_ID_MAX));
        CHECK(check_u64(p->timeout_s));
        CHECK(check_u64(p->idle_s));
        CHECK(check_u64(p->checkpoint_every_s));
        if (p->expires_usec < 0 || !idle_action_to_string(p->idle_action))
                return -EINVAL;
        return s->ops->sandbox_set_policy(s, id, p, now_usec());
}

int store_sandbox_set_timeout_warned(Store *s, const char *id) {
        if (!s)
                return -EINVAL;
        CHECK(check_lookup(id, STORE_ID_MAX));
        return s->ops->sandbox_set_timeout_warned(s, id, now_usec());
}

int store_sandbox_set_network(Store *s, const char *id, const char *network_json) {
        if (!s || !network_json)
                return -EINVAL;
        CHECK(check_lookup(id, STORE_ID_MAX));
        return s->ops->sandbox_set_network(s, id, network_json, now_usec());
}

int store_sandbox_set_processes_preserved(Store *s, const char *id, bool preserved) {
        if (!s)
                return -EINVAL;
        CHECK(check_lookup(id, STORE_ID_MAX));
        return s->ops->sandbox_set_processes_preserved(s, id, preserved, now_usec());
}

int store_sandbox_claim_warm_admit(Store *s, const char *template_name, const Sandbox *req, StoreAdmission *adm,
                                   Sandbox *ret) {
        if (!s || !req || !ret)
                return -EINVAL;
        CHECK(check_lookup(template_name, STORE_NAME_MAX));
        CHECK(CHECK_FIELD(req->tenant_id, true));
        CHECK(CHECK_FIELD(req->runtime, true));
        if (streq(req->tenant_id, STORE_SYSTEM_TENANT_ID))
                return -EINVAL;
        CHECK(check_u64(req->memory_mb));
        CHECK(check_u64(req->disk_mb));
        CHECK(check_u64(req->timeout_s));
        CHECK(check_u64(req->idle_s));
        CHECK(check_u64(req->checkpoint_every_s));
        CHECK(check_u64(req->checkpoints_max));
        CHECK(check_u64(req->checkpoints_mb));
        if (req->expires_usec < 0 || !idle_action_to_string(req->idle_action))
                return -EINVAL;
        return s->ops->sandbox_claim_warm(s, template_name, req, adm, now_usec(), ret);
}

int store_sandbox_claim_warm(Store *s, const char *template_name, const Sandbox *req, Sandbox *ret) {
        return store_sandbox_claim_warm_admit(s, template_name, req, NULL, ret);
}

int store_sandbox_warm_count(Store *s, const char *template_name, uint64_t *ret_ready, uint64_t *ret_total) {
        uint64_t ready = 0, total = 0;
        int r;

        if (!s || !template_name)
                return -EINVAL;
        if (check_lookup(template_name, STORE_NAME_MAX) >= 0) {
                r = s->ops->sandbox_warm_count(s, template_name, &ready, &total);
                if (r < 0)
                        return r;
        }
        if (ret_ready)
                *ret_ready = ready;
        if (ret_total)
                *ret_total = total;
        return 0;
}

/* Checkpoints */

int store_checkpoint_insert_admit(Store *s, const Checkpoint *c, StoreAdmission *adm) {
        Checkpoint copy;

        if (!s || !c)
                return -EINVAL;
        CHECK(CHECK_FIELD(c->id, true));
        CHECK(CHECK_FIELD(c->sandbox_id, true));
        CHECK(CHECK_FIELD(c->tenant_id, true));
        CHECK(CHECK_FIELD(c->name, false));
        CHECK(check_u64(c->size_bytes));
        if (c->created_usec < 0)
                return -EINVAL;

        copy = *c;
        if (copy.created_usec == 0)
                copy.created_usec = now_usec();
        return s->ops->checkpoint_insert(s, &copy, adm);
}

int store_checkpoint_insert(Store *s, const Checkpoint *c) {
        return store_checkpoint_insert_admit(s, c, NULL);
}

int store_checkpoint_get(Store *s, const char *tenant_id, const char *id, Checkpoint *ret) {
        if (!s || !ret)
                return -EINVAL;
        CHECK(check_lookup(id, STORE_ID_MAX));
        if (tenant_id)
                CHECK(check_lookup(tenant_id, STORE_ID_MAX));
        return s->ops->checkpoint_get(s, tenant_id, id, ret);
}

int store_checkpoint_list(Store *s, const char *sandbox_id, Checkpoint **ret, size_t *ret_n) {
        if (!s || !ret || !ret_n)
                return -EINVAL;
        if (sandbox_id && check_lookup(sandbox_id, STORE_ID_MAX) < 0) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        return s->ops->checkpoint_list(s, sandbox_id, ret, ret_n);
}

int store_checkpoint_update(Store *s, const char *id, bool restorable, uint64_t size_bytes) {
        if (!s)
                return -EINVAL;
        CHECK(check_lookup(id, STORE_ID_MAX));
        CHECK(check_u64(size_bytes));
        return s->ops->checkpoint_update(s, id, restorable, size_bytes);
}

int store_checkpoint_delete(Store *s, const char *id) {
        if (!s)
                return -EINVAL;
        CHECK(check_lookup(id, STORE_ID_MAX));
        return s->ops->checkpoint_delete(s, id);
}

int store_checkpoint_delete_orphans(Store *s, uint64_t *ret) {
        uint64_t n = 0;
        int r;

        if (!s)
                return -EINVAL;
        r = s->ops->checkpoint_delete_orphans(s, &n);
        if (r < 0)
                return r;
        if (ret)
                *ret = n;
        return 0;
}

/* Events */

int store_event_check(Event *e) {
        CHECK(CHECK_FIELD(e->tenant_id, false));
        CHECK(CHECK_FIELD(e->sandbox_id, false));
        CHECK(CHECK_FIELD(e->type, true));
        CHECK(CHECK_FIELD(e->actor, false));
        CHECK(CHECK_FIELD(e->reason, false));
        if (e->time_usec < 0)
                return -EINVAL;
        if (e->time_usec == 0)
                e->time_usec = now_usec();
        return 0;
}

int store_event_append(Store *s, Event *e) {
        Event copy;
        int r;

        if (!s || !e)
                return -EINVAL;
        copy = *e;
        CHECK(store_event_check(&copy));
        r = s->ops->event_append(s, &copy);
        if (r < 0)
                return r;
        e->seq = copy.seq;
        e->time_usec = copy.time_usec;
        return 0;
}

int store_event_list(Store *s, const EventFilter *f, Event **ret, size_t *ret_n) {
        EventFilter filter = {};

        if (!s || !ret || !ret_n)
                return -EINVAL;
        if (f)
                filter = *f;
        if (filter.type && filter.type[0] == 0)
                filter.type = NULL;
        if (filter.after_seq < 0)
                filter.after_seq = 0;
        if (filter.since_usec < 0)
                filter.since_usec = 0;
        if (filter.limit == 0)
                filter.limit = STORE_LIST_LIMIT_DEFAULT;
        if (filter.limit > INT32_MAX)
                filter.limit = INT32_MAX;
        return s->ops->event_list(s, &filter, ret, ret_n);
}

int store_event_delete_before(Store *s, int64_t before_usec, uint64_t *ret) {
        uint64_t n = 0;
        int r;

        if (!s)
                return -EINVAL;
        if (before_usec <= 0) {
                if (ret)
                        *ret = 0;
                return 0;
        }
        r = s->ops->event_delete_before(s, before_usec, &n);
        if (r < 0)
                return r;
        if (ret)
                *ret = n;
        return 0;
}
