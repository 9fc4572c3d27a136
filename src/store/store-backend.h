/* SPDX-License-Identifier: MIT */
#pragma once

/* Private to src/store: what a back end implements. store.c checks the
 * arguments (NULLs, enum ranges, string lengths against the fixed buffers,
 * integer ranges) before dispatching, so an op may assume them valid. Every op
 * returns >= 0 or -errno with the meanings documented in store.h, and sets its
 * ret_* out-params only on success. */

#include "store.h"

/* Store timing (store.h): a back end brackets each round trip with
 * STORE_TIMED; nested brackets (statements inside a transaction) count once. */
uint64_t store_timing_enter(void);
void store_timing_leave(uint64_t *start_usec);
#define STORE_TIMED _cleanup_(store_timing_leave) uint64_t _store_timed_start = store_timing_enter()

struct Store {
        const StoreOps *ops;
};

struct StoreOps {
        const char *name;
        /* location: the URL with "sqlite:" stripped, or the whole URL for
         * back ends that parse their own (postgres://...). */
        int (*open)(const char *location, Store **ret);
        void (*close)(Store *s);
        int (*schema_version)(Store *s);
        /* Optional (store_batch_begin): one transaction around several operations. */
        int (*batch_begin)(Store *s);
        int (*batch_end)(Store *s);

        int (*tenant_insert)(Store *s, const Tenant *t);
        int (*tenant_get)(Store *s, const char *id, Tenant *ret);
        int (*tenant_get_by_name)(Store *s, const char *name, Tenant *ret);
        int (*tenant_list)(Store *s, Tenant **ret, size_t *ret_n);

        int (*key_insert)(Store *s, const ApiKey *k);
        int (*key_get_by_hash)(Store *s, const char *hash, ApiKey *ret);
        int (*key_list)(Store *s, const char *tenant_id, ApiKey **ret, size_t *ret_n);
        int (*key_delete)(Store *s, const char *tenant_id, const char *id);
        int (*key_count)(Store *s, uint64_t *ret);

        int (*template_insert)(Store *s, const Template *t);
        int (*template_get)(Store *s, const char *name, Template *ret);
        int (*template_list)(Store *s, Template **ret, size_t *ret_n);
        int (*template_set_ready)(Store *s, const char *name, uint64_t size_bytes);
        int (*template_delete)(Store *s, const char *name);
        int (*template_in_use)(Store *s, const char *name, uint64_t *ret);

        /* sb is complete but for slot, which the op picks (< slots_max) and sets. */
        /* adm (NULL = none): admitted in the insert's transaction (store_admission_check). */
        int (*sandbox_insert)(Store *s, Sandbox *sb, uint32_t slots_max, StoreAdmission *adm);
        int (*sandbox_get)(Store *s, const char *tenant_id, const char *id, Sandbox *ret);
        /* f->limit is already resolved (never 0). */
        int (*sandbox_list)(Store *s, const SandboxFilter *f, Sandbox **ret, size_t *ret_n);
        int (*sandbox_count)(Store *s, const SandboxFilter *f, uint64_t *ret);
        int (*sandbox_set_state)(Store *s, const char *id, int from, SandboxState to,
                                 const char *reason, int64_t now);
        int (*sandbox_set_runtime)(Store *s, const char *id, int64_t pid, uint64_t pid_starttime,
                                   const char *worker, int64_t now);
        int (*sandbox_take_over)(Store *s, const char *id, SandboxState from, const char *from_worker,
                                 SandboxState to, int64_t pid, uint64_t pid_starttime, const char *to_worker,
                                 const char *reason, int64_t now);
        int (*sandbox_set_expiry)(Store *s, const char *id, int64_t expires_usec, int64_t now);
        /* ev is checked (store_event_check) and its sandbox_id is id */
        int (*sandbox_set_running)(Store *s, const char *id, int64_t pid, uint64_t pid_starttime, Event *ev,
                                   int64_t now);
        int (*sandbox_purge)(Store *s, const char *id);
        int (*sandbox_hold_slot)(Store *s, const char *id, bool held);
        int (*sandbox_release_slots)(Store *s, const char *worker);

        int (*sandbox_touch)(Store *s, const char *id, int64_t now);
        int (*sandbox_set_policy)(Store *s, const char *id, const SandboxPolicy *p, int64_t now);
        int (*sandbox_set_timeout_warned)(Store *s, const char *id, int64_t now);
        int (*sandbox_set_processes_preserved)(Store *s, const char *id, bool preserved, int64_t now);
        int (*sandbox_set_network)(Store *s, const char *id, const char *network_json, int64_t now);
        int (*sandbox_claim_warm)(Store *s, const char *template_name, const Sandbox *req, StoreAdmission *adm,
                                  int64_t now, Sandbox *ret);
        int (*sandbox_warm_count)(Store *s, const char *template_name, uint64_t *ret_ready, uint64_t *ret_total);

        /* c->created_usec is already set. */
        int (*checkpoint_insert)(Store *s, const Checkpoint *c, StoreAdmission *adm);
        int (*checkpoint_get)(Store *s, const char *tenant_id, const char *id, Checkpoint *ret);
        int (*checkpoint_list)(Store *s, const char *sandbox_id, Checkpoint **ret, size_t *ret_n);
        int (*checkpoint_update)(Store *s, const char *id, bool restorable, uint64_t size_bytes);
        int (*checkpoint_delete)(Store *s, const char *id);
        int (*checkpoint_delete_orphans)(Store *s, uint64_t *ret);

        /* e->time_usec is already set; the op sets e->seq. */
        int (*event_append)(Store *s, Event *e);
        int (*event_list)(Store *s, const EventFilter *f, Event **ret, size_t *ret_n);
        int (*event_delete_before)(Store *s, int64_t before_usec, uint64_t *ret);

        /* c->created_usec, updated_usec and version are already set. */
        int (*credential_insert)(Store *s, const Credential *c);
        int (*credential_get)(Store *s, const char *tenant_id, const char *name, Credential *ret);
        int (*credential_list)(Store *s, const char *tenant_id, Credential **ret, size_t *ret_n);
        int (*credential_update)(Store *s, const Credential *c, int64_t now, uint64_t *ret_version);
        int (*credential_delete)(Store *s, const char *tenant_id, const char *name);
        int (*grant_insert)(Store *s, const char *tenant_id, const char *sandbox_id, const char *credential_id,
                            const char *hosts_json, const char *header_name, const char *header_format, int64_t now);
        int (*grant_delete)(Store *s, const char *sandbox_id, const char *credential_id);
        int (*grant_list)(Store *s, const char *sandbox_id, Credential **ret, size_t *ret_n);
        int (*credentials_reseal)(Store *s, const StoreReseal *rs, uint64_t *ret_changed, uint64_t *ret_total);
        /* cluster (store-*-cluster.c); w->registered_usec and heartbeat_usec are set */
        int (*worker_register)(Store *s, const WorkerNode *w, int64_t stale_before_usec);
        int (*worker_heartbeat)(Store *s, const char *name, const char *instance, const char *templates,
                                int64_t now);
        int (*worker_stop)(Store *s, const char *name, const char *instance);
        int (*worker_get)(Store *s, const char *name, WorkerNode *ret);
        int (*worker_list)(Store *s, WorkerNode **ret, size_t *ret_n);
        int (*worker_mark_lost)(Store *s, const char *name, int64_t stale_before_usec, const char *reason,
                                int64_t now, SandboxRef **ret, size_t *ret_n);
        int (*leader_try)(Store *s, bool *ret_leader);
        int (*clock)(Store *s, int64_t *ret_usec);
        int (*lease_take)(Store *s, const char *holder, uint64_t lease_usec, int64_t *ret_token);
        int (*lease_renew)(Store *s, const char *holder, int64_t token, uint64_t lease_usec);
        int (*lease_release)(Store *s, const char *holder, int64_t token);
        int (*lease_get)(Store *s, ControllerLease *ret);
        int (*fence)(Store *s, int64_t token);
        int (*cluster_setting_claim)(Store *s, const char *name, const char *value,
                                     char ret[static STORE_CLUSTER_SETTING_MAX]);
        int (*cluster_setting_get)(Store *s, const char *name, char ret[static STORE_CLUSTER_SETTING_MAX]);
        /* c->updated_usec is already set */
        int (*checkpoint_copy_set)(Store *s, const CheckpointCopy *c);
        int (*checkpoint_copy_list)(Store *s, const char *checkpoint_id, CheckpointCopy **ret, size_t *ret_n);
        int (*checkpoint_copy_delete)(Store *s, const char *checkpoint_id, const char *worker);
        /* tenant quotas (store-*-tenants.c); -ENOENT: no row */
        int (*tenant_quotas_get)(Store *s, const char *tenant_id, TenantQuotas *ret);
        int (*tenant_quotas_set)(Store *s, const TenantQuotas *q);
        int (*tenant_usage)(Store *s, const char *tenant_id, TenantUsage *ret);
        /* volumes (store-*-volumes.c); v->created_usec is set */
        int (*volume_insert)(Store *s, const Volume *v, StoreAdmission *adm);
        int (*volume_get)(Store *s, const char *tenant_id, const char *name, Volume *ret);
        int (*volume_get_by_id)(Store *s, const char *id, Volume *ret);
        int (*volume_list)(Store *s, const char *tenant_id, Volume **ret, size_t *ret_n);
        int (*volume_delete)(Store *s, const char *tenant_id, const char *name);
        int (*volume_move)(Store *s, const char *volume_id, const char *sandbox_id, const char *from, const char *to);
        int (*volume_mount)(Store *s, const char *sandbox_id, const VolumeMount *m, size_t n);
        int (*volume_mounts)(Store *s, const char *sandbox_id, VolumeMount **ret, size_t *ret_n);
        /* template versions and tags (store-*-template-versions.c); v->created_usec is set */
        int (*template_version_add)(Store *s, const TemplateVersion *v);
        int (*template_version_next)(Store *s, const char *name, uint64_t *ret);
        int (*template_version_get)(Store *s, const char *name, uint64_t version, TemplateVersion *ret);
        int (*template_version_list)(Store *s, const char *name, TemplateVersion **ret, size_t *ret_n);
        int (*template_version_delete)(Store *s, const char *name, uint64_t version);
        int (*template_versions_drop)(Store *s, const char *name);
        int (*template_tag_set)(Store *s, const char *name, const char *tag, uint64_t version);
        int (*template_tag_delete)(Store *s, const char *name, const char *tag);
        int (*template_tag_get)(Store *s, const char *name, const char *tag, uint64_t *ret_version);
        int (*template_tag_list)(Store *s, const char *name, TemplateTag **ret, size_t *ret_n);
        /* webhooks (store-*-webhooks.c) */
        int (*webhook_insert)(Store *s, Webhook *w);
        int (*webhook_get)(Store *s, const char *tenant_id, const char *id, Webhook *ret);
        int (*webhook_list)(Store *s, const char *tenant_id, Webhook **ret, size_t *ret_n);
        int (*webhook_update)(Store *s, const Webhook *w);
        int (*webhook_delete)(Store *s, const char *tenant_id, const char *id);
        int (*webhook_set_state)(Store *s, const Webhook *w, bool disable);
        int (*webhook_set_secret)(Store *s, const char *id, const char *old, const char *secret);
        /* object settings (store-*-settings.c) */
        int (*setting_set)(Store *s, const ObjectSetting *v);
        int (*setting_remove)(Store *s, const char *kind, const char *name, const char *key);
        int (*settings_get)(Store *s, const char *a_kind, const char *a_name, const char *b_kind,
                            const char *b_name, ObjectSetting **ret, size_t *ret_n);
};

/* A row a reseal's row() changed: still a valid credential (-EINVAL). */
int store_reseal_row_check(const Credential *c);
/* An event about to be written is valid (-EINVAL); time_usec 0 becomes now.
 * For back ends that record one inside a transaction of their own. */
int store_event_check(Event *e);
/* A reseal's event (rs->end), checked and appended inside its transaction. */
int store_reseal_event(Store *s, const StoreReseal *rs, uint64_t changed, uint64_t total);

/* Argument checks shared by store.c and store-credentials.c. */
/* A fixed buffer of a record must hold a NUL-terminated string: a longer one
 * is refused, never truncated. */
static inline int check_field(const char *buf, size_t size, bool required) {
        size_t n = strnlen(buf, size);

        if (n >= size)
                return -ENAMETOOLONG;
        if (required && n == 0)
                return -EINVAL;
        return 0;
}
#define CHECK_FIELD(f, required) check_field((f), sizeof(f), (required))

/* A string argument that will be written into a fixed-size column. */
static inline int check_arg(const char *s, size_t size, bool required) {
        if (!s)
                return required ? -EINVAL : 0;
        return check_field(s, size, required);
}

/* A string argument used only to look a row up: one that cannot fit a
 * column cannot name a row either. */
static inline int check_lookup(const char *s, size_t size) {
        if (!s)
                return -EINVAL;
        if (s[0] == 0 || strnlen(s, size) >= size)
                return -ENOENT;
        return 0;
}

/* The SQL integer columns are signed 64 bit. */
static inline int check_u64(uint64_t v) {
        return v > (uint64_t) INT64_MAX ? -ERANGE : 0;
}

#define CHECK(expr)                     \
        do {                            \
                int _r = (expr);        \
                if (_r < 0)             \
                        return _r;      \
        } while (0)

/* Frees an array of n rows a back end read (sandbox_array_free, ...), for
 * the back ends' row-list helpers; NULL where the rows own nothing (free()). */
typedef void (*StoreRowsFree)(void *rows, size_t n);

extern const StoreOps store_sqlite_ops;
