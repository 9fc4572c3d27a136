/* SPDX-License-Identifier: MIT */
#pragma once

/* Private to the SQLite back end: the handle, its statement cache, and the
 * helpers store-sqlite-ops.c builds the operations from. */

#include <sqlite3.h>

#include "store-backend.h"

#define SQLITE_BUSY_TIMEOUT_MSEC 5000

/* Statements with fixed text, prepared once per handle on first use. */
typedef enum SqlStmt {
        SQL_BEGIN_IMMEDIATE,
        SQL_COMMIT,
        SQL_ROLLBACK,
        SQL_SAVEPOINT,
        SQL_RELEASE,
        SQL_ROLLBACK_TO,
        SQL_SCHEMA_VERSION,
        SQL_MIGRATION_APPLIED,
        SQL_MIGRATION_RECORD,
        SQL_TENANT_INSERT,
        SQL_TENANT_GET,
        SQL_TENANT_GET_BY_NAME,
        SQL_TENANT_LIST,
        SQL_KEY_INSERT,
        SQL_KEY_GET_BY_HASH,
        SQL_KEY_LIST,
        SQL_KEY_DELETE,
        SQL_KEY_COUNT,
        SQL_TEMPLATE_INSERT,
        SQL_TEMPLATE_GET,
        SQL_TEMPLATE_LIST,
        SQL_TEMPLATE_SET_STATE,
        SQL_TEMPLATE_DELETE,
        SQL_TEMPLATE_IN_USE,
        SQL_SANDBOX_FREE_SLOT,
        SQL_SANDBOX_INSERT,
        SQL_SANDBOX_GET,
        SQL_SANDBOX_EXISTS,
        SQL_SANDBOX_SET_STATE_FROM,
        SQL_SANDBOX_SET_STATE_LIVE,
        SQL_SANDBOX_SET_RUNTIME,
        SQL_SANDBOX_SET_RUNNING,
        SQL_SANDBOX_TAKE_OVER,
        SQL_SANDBOX_SET_EXPIRY,
        SQL_SANDBOX_HOLD_SLOT,
        SQL_SANDBOX_RELEASE_SLOTS,
        SQL_SANDBOX_FREE_SLOT_LIVE,
        SQL_SANDBOX_PURGE,
        SQL_EVENT_APPEND,
        SQL_EVENT_DELETE_BEFORE,
        _SQL_STMT_MAX,
} SqlStmt;

extern const char *const sqlite_stmt_sql[_SQL_STMT_MAX];

/* The lifecycle statements (store-sqlite-lifecycle.c), cached likewise. */
typedef enum SqlLifecycleStmt {
        SQL_LC_SANDBOX_TOUCH,
        SQL_LC_SANDBOX_SET_POLICY,
        SQL_LC_SANDBOX_SET_TIMEOUT_WARNED,
        SQL_LC_SANDBOX_SET_PRESERVED,
        SQL_LC_SANDBOX_SET_NETWORK,
        SQL_LC_SANDBOX_CLAIM_WARM,
        SQL_LC_SANDBOX_WARM_COUNT,
        SQL_LC_CHECKPOINT_INSERT,
        SQL_LC_CHECKPOINT_GET,
        SQL_LC_CHECKPOINT_LIST,
        SQL_LC_CHECKPOINT_LIST_ALL,
        SQL_LC_CHECKPOINT_UPDATE,
        SQL_LC_CHECKPOINT_DELETE,
        SQL_LC_CHECKPOINT_DELETE_ORPHANS,
        _SQL_LC_STMT_MAX,
} SqlLifecycleStmt;

/* The credential statements (store-sqlite-credentials.c), cached likewise. */
typedef enum SqlCredStmt {
        SQL_CRED_INSERT,
        SQL_CRED_GET,
        SQL_CRED_LIST,
        SQL_CRED_UPDATE,
        SQL_CRED_DELETE,
        SQL_CRED_DELETE_GRANTS,
        SQL_CRED_EXISTS,
        SQL_GRANT_INSERT,
        SQL_GRANT_DELETE,
        SQL_GRANT_LIST,
        SQL_CRED_ALL,
        SQL_CRED_RESEAL,
        SQL_CRED_SETTING_GET,
        SQL_CRED_SETTING_SET,
        _SQL_CRED_STMT_MAX,
} SqlCredStmt;
/* The cluster statements (store-sqlite-cluster.c), cached likewise. */
typedef enum SqlClusterStmt {
        SQL_CL_WORKER_REGISTER,
        SQL_CL_WORKER_HEARTBEAT,
        SQL_CL_WORKER_EXISTS,
        SQL_CL_WORKER_STOP,
        SQL_CL_WORKER_GET,
        SQL_CL_WORKER_LIST,
        SQL_CL_WORKER_SET_LOST,
        SQL_CL_SANDBOXES_SET_LOST,
        SQL_CL_SETTING_INSERT,
        SQL_CL_SETTING_GET,
        SQL_CL_COPY_SET,
        SQL_CL_COPY_LIST,
        SQL_CL_COPY_LIST_ALL,
        SQL_CL_COPY_DELETE,
        SQL_CL_CLOCK,
        SQL_CL_LEASE_TAKE,
        SQL_CL_LEASE_RENEW,
        SQL_CL_LEASE_RELEASE,
        SQL_CL_LEASE_GET,
        _SQL_CL_STMT_MAX,
} SqlClusterStmt;

/* The tenant quota statements (store-sqlite-tenants.c), cached likewise. */
typedef enum SqlTenantStmt {
        SQL_TQ_GET,
        SQL_TQ_SET,
        SQL_TQ_USAGE,
        _SQL_TQ_STMT_MAX,
} SqlTenantStmt;

/* The volume statements (store-sqlite-volumes.c), cached likewise. */
typedef enum SqlVolumeStmt {
        SQL_VOL_INSERT,
        SQL_VOL_GET,
        SQL_VOL_GET_BY_ID,
        SQL_VOL_LIST,
        SQL_VOL_ID,
        SQL_VOL_LIVE_MOUNTS,
        SQL_VOL_DELETE_MOUNTS,
        SQL_VOL_DELETE,
        SQL_VOL_EXISTS,
        SQL_VOL_MOUNT_INSERT,
        SQL_VOL_MOUNT_LIST,
        SQL_VOL_MOVE,
        _SQL_VOL_STMT_MAX,
} SqlVolumeStmt;
/* The webhook statements (store-sqlite-webhooks.c), cached likewise. */
typedef enum SqlWebhookStmt {
        SQL_WH_INSERT,
        SQL_WH_GET,
        SQL_WH_LIST,
        SQL_WH_LIST_ALL,
        SQL_WH_UPDATE,
        SQL_WH_DELETE,
        SQL_WH_SET_STATE,
        SQL_WH_SET_SECRET,
        _SQL_WH_STMT_MAX,
} SqlWebhookStmt;
/* The object settings statements (store-sqlite-settings.c), cached likewise. */
typedef enum SqlSettingStmt {
        SQL_SET_UPSERT,
        SQL_SET_REMOVE,
        SQL_SET_REMOVE_ALL,
        SQL_SET_GET,
        _SQL_SET_STMT_MAX,
} SqlSettingStmt;

/* The template version statements (store-sqlite-template-versions.c), cached likewise. */
typedef enum SqlTemplateVersionStmt {
        SQL_TV_ADD,
        SQL_TV_NEXT,
        SQL_TV_GET,
        SQL_TV_LIST,
        SQL_TV_EXISTS,
        SQL_TV_NEWEST,
        SQL_TV_DELETE,
        SQL_TV_DROP_TAGS,
        SQL_TV_DROP,
        SQL_TV_TAG_SET,
        SQL_TV_TAG_DELETE,
        SQL_TV_TAG_GET,
        SQL_TV_TAG_LIST,
        _SQL_TV_STMT_MAX,
} SqlTemplateVersionStmt;

/* Statements built from a filter: one cache slot per combination of clauses. */
#define SQL_SANDBOX_LIST_VARIANTS 16
#define SQL_SANDBOX_COUNT_VARIANTS 8
#define SQL_EVENT_LIST_VARIANTS 32

typedef struct SqliteStore {
        Store base;
        sqlite3 *db;
        sqlite3_stmt *stmts[_SQL_STMT_MAX];
        sqlite3_stmt *lifecycle[_SQL_LC_STMT_MAX];
        sqlite3_stmt *credentials[_SQL_CRED_STMT_MAX];
        sqlite3_stmt *cluster[_SQL_CL_STMT_MAX];
        sqlite3_stmt *tenants[_SQL_TQ_STMT_MAX];
        sqlite3_stmt *volumes[_SQL_VOL_STMT_MAX];
        sqlite3_stmt *webhooks[_SQL_WH_STMT_MAX];
        sqlite3_stmt *settings[_SQL_SET_STMT_MAX];
        sqlite3_stmt *template_versions[_SQL_TV_STMT_MAX];
        sqlite3_stmt *sandbox_list[SQL_SANDBOX_LIST_VARIANTS];
        sqlite3_stmt *sandbox_count[SQL_SANDBOX_COUNT_VARIANTS];
        sqlite3_stmt *event_list[SQL_EVENT_LIST_VARIANTS];
        bool batch; /* in store_batch_begin: an operation's transaction is a savepoint */
} SqliteStore;

static inline SqliteStore *sqlite_store(Store *s) {
        return (SqliteStore *) s; /* base is the first member */
}

/* Maps an SQLite result code to -errno (and logs the message at debug). */
int sqlite_store_errno(SqliteStore *q, int rc);

/* The cached statement; reset it with _cleanup_stmt_ after use. */
int sqlite_store_stmt(SqliteStore *q, SqlStmt id, sqlite3_stmt **ret);
/* Prepares sql into *slot unless already there. */
int sqlite_store_prepare(SqliteStore *q, sqlite3_stmt **slot, const char *sql, sqlite3_stmt **ret);

static inline void sqlite_stmt_resetp(sqlite3_stmt **st) {
        if (*st) {
                (void) sqlite3_reset(*st);
                (void) sqlite3_clear_bindings(*st);
        }
}
#define _cleanup_stmt_ _cleanup_(sqlite_stmt_resetp)

/* Runs a statement that returns no row (or whose rows are ignored). */
int sqlite_store_step_done(SqliteStore *q, sqlite3_stmt *st);
/* Steps once: 1 = a row, 0 = done, or -errno. */
int sqlite_store_step(SqliteStore *q, sqlite3_stmt *st);
/* Runs a cached statement without parameters. */
int sqlite_store_exec(SqliteStore *q, SqlStmt id);
/* Runs an UPDATE/DELETE whose bindings are done; returns the number of rows changed. */
int sqlite_store_step_changes(SqliteStore *q, sqlite3_stmt *st);
/* The same for one row: 0 if it changed one, -ENOENT if none. */
int sqlite_store_step_changed(SqliteStore *q, sqlite3_stmt *st);
/* A compare-and-set UPDATE (or DELETE) of the row named key whose bindings
 * are done: 0 if it changed a row, else -ESTALE if exists(q, key) finds the
 * row (> 0), -ENOENT if not. */
int sqlite_store_step_cas(SqliteStore *q, sqlite3_stmt *st, int (*exists)(SqliteStore *q, const char *key),
                          const char *key);
/* sqlite_store_step_cas() of sandbox id. */
int sqlite_sandbox_update(SqliteStore *q, sqlite3_stmt *st, const char *id);

/* Reads the current row of st into *ret (a Tenant, a Sandbox, ...: the
 * reader's type); -EBADMSG if a value does not fit. */
typedef int (*SqliteRowReader)(sqlite3_stmt *st, void *ret);
/* Steps st once: its row through read into ret; -ENOENT if there is none. */
int sqlite_store_get_row(SqliteStore *q, sqlite3_stmt *st, SqliteRowReader read, void *ret);
/* Steps st to its end: every row through read into a new array of elements
 * of size bytes (*ret, *ret_n). On failure free_rows (NULL: free()) frees
 * the rows read so far. */
int sqlite_store_list_rows(SqliteStore *q, sqlite3_stmt *st, size_t size, SqliteRowReader read,
                           StoreRowsFree free_rows, void **ret, size_t *ret_n);

/* Transactions: BEGIN IMMEDIATE (takes the write lock up front, so a
 * read-then-write cannot lose a race). A _cleanup_tx_ variable set to the
 * store rolls back unless cleared by sqlite_store_commit(). */
int sqlite_store_begin(SqliteStore *q, SqliteStore **ret_tx);
int sqlite_store_commit(SqliteStore **tx);
void sqlite_store_rollbackp(SqliteStore **tx);
int sqlite_store_batch_begin(Store *s);
int sqlite_store_batch_end(Store *s);
#define _cleanup_tx_ _cleanup_(sqlite_store_rollbackp)

/* Binding: text NULL binds SQL NULL. Strings must outlive the statement's use. */
int sqlite_bind_text(SqliteStore *q, sqlite3_stmt *st, int i, const char *s);
int sqlite_bind_int64(SqliteStore *q, sqlite3_stmt *st, int i, int64_t v);
/* By name (":tenant"); a name the statement lacks is ignored. */
int sqlite_bind_text_named(SqliteStore *q, sqlite3_stmt *st, const char *name, const char *s);
int sqlite_bind_int64_named(SqliteStore *q, sqlite3_stmt *st, const char *name, int64_t v);

/* Reading columns: -EBADMSG if a value does not fit its field (never truncated). */
int sqlite_col_str(sqlite3_stmt *st, int i, char *buf, size_t size);
#define SQLITE_COL_STR(st, i, field) sqlite_col_str((st), (i), (field), sizeof(field))
int sqlite_col_strdup(sqlite3_stmt *st, int i, char **ret); /* SQL NULL → NULL */
int sqlite_col_u64(sqlite3_stmt *st, int i, uint64_t *ret);
int sqlite_col_u32(sqlite3_stmt *st, int i, uint32_t *ret);
int sqlite_col_i64(sqlite3_stmt *st, int i, int64_t *ret); /* must be >= 0 */

/* The lifecycle operations (store-sqlite-lifecycle.c), for the ops table. */
int sqlite_op_sandbox_touch(Store *s, const char *id, int64_t now);
int sqlite_op_sandbox_set_policy(Store *s, const char *id, const SandboxPolicy *p, int64_t now);
int sqlite_op_sandbox_set_timeout_warned(Store *s, const char *id, int64_t now);
int sqlite_op_sandbox_set_processes_preserved(Store *s, const char *id, bool preserved, int64_t now);
int sqlite_op_sandbox_set_network(Store *s, const char *id, const char *network_json, int64_t now);
int sqlite_op_sandbox_claim_warm(Store *s, const char *template_name, const Sandbox *req, StoreAdmission *adm,
                                 int64_t now, Sandbox *ret);
int sqlite_op_sandbox_warm_count(Store *s, const char *template_name, uint64_t *ret_ready, uint64_t *ret_total);
int sqlite_op_checkpoint_insert(Store *s, const Checkpoint *c, StoreAdmission *adm);
int sqlite_op_checkpoint_get(Store *s, const char *tenant_id, const char *id, Checkpoint *ret);
int sqlite_op_checkpoint_list(Store *s, const char *sandbox_id, Checkpoint **ret, size_t *ret_n);
int sqlite_op_checkpoint_update(Store *s, const char *id, bool restorable, uint64_t size_bytes);
int sqlite_op_checkpoint_delete(Store *s, const char *id);
int sqlite_op_checkpoint_delete_orphans(Store *s, uint64_t *ret);

/* The credential operations (store-sqlite-credentials.c). */
int sqlite_op_credential_insert(Store *s, const Credential *c);
int sqlite_op_credential_get(Store *s, const char *tenant_id, const char *name, Credential *ret);
int sqlite_op_credential_list(Store *s, const char *tenant_id, Credential **ret, size_t *ret_n);
int sqlite_op_credential_update(Store *s, const Credential *c, int64_t now, uint64_t *ret_version);
int sqlite_op_credential_delete(Store *s, const char *tenant_id, const char *name);
int sqlite_op_grant_insert(Store *s, const char *tenant_id, const char *sandbox_id, const char *credential_id,
                   const char *hosts_json, const char *header_name, const char *header_format, int64_t now);
int sqlite_op_grant_delete(Store *s, const char *sandbox_id, const char *credential_id);
int sqlite_op_grant_list(Store *s, const char *sandbox_id, Credential **ret, size_t *ret_n);
/* The cluster operations (store-sqlite-cluster.c), for the ops table. */
int sqlite_op_worker_register(Store *s, const WorkerNode *w, int64_t stale_before_usec);
int sqlite_op_worker_heartbeat(Store *s, const char *name, const char *instance, const char *templates,
                               int64_t now);
int sqlite_op_worker_stop(Store *s, const char *name, const char *instance);
int sqlite_op_worker_get(Store *s, const char *name, WorkerNode *ret);
int sqlite_op_worker_list(Store *s, WorkerNode **ret, size_t *ret_n);
int sqlite_op_worker_mark_lost(Store *s, const char *name, int64_t stale_before_usec, const char *reason,
                               int64_t now, SandboxRef **ret, size_t *ret_n);
int sqlite_op_leader_try(Store *s, bool *ret_leader);
int sqlite_op_clock(Store *s, int64_t *ret_usec);
int sqlite_op_lease_take(Store *s, const char *holder, uint64_t lease_usec, int64_t *ret_token);
int sqlite_op_lease_renew(Store *s, const char *holder, int64_t token, uint64_t lease_usec);
int sqlite_op_lease_release(Store *s, const char *holder, int64_t token);
int sqlite_op_lease_get(Store *s, ControllerLease *ret);
int sqlite_op_fence(Store *s, int64_t token);
/* The message of a fence trigger's abort (sqlite_op_fence): -ESTALE. */
#define SQLITE_FENCED_MESSAGE "space: fenced (the controller lease is no longer held)"
int sqlite_op_cluster_setting_get(Store *s, const char *name, char ret[static STORE_CLUSTER_SETTING_MAX]);
int sqlite_op_credentials_reseal(Store *s, const StoreReseal *rs, uint64_t *ret_changed, uint64_t *ret_total);
int sqlite_op_cluster_setting_claim(Store *s, const char *name, const char *value,
                                    char ret[static STORE_CLUSTER_SETTING_MAX]);
int sqlite_op_checkpoint_copy_set(Store *s, const CheckpointCopy *c);
int sqlite_op_checkpoint_copy_list(Store *s, const char *checkpoint_id, CheckpointCopy **ret, size_t *ret_n);
int sqlite_op_checkpoint_copy_delete(Store *s, const char *checkpoint_id, const char *worker);

/* Tenant quotas (store-sqlite-tenants.c), for the ops table. */
int sqlite_op_tenant_quotas_get(Store *s, const char *tenant_id, TenantQuotas *ret);
int sqlite_op_tenant_quotas_set(Store *s, const TenantQuotas *q);
int sqlite_op_tenant_usage(Store *s, const char *tenant_id, TenantUsage *ret);
/* Inside a write's transaction: counts the tenant's usage and decides adm
 * for sb (NULL = a checkpoint); adm NULL = nothing to decide. */
int sqlite_tenant_admit(SqliteStore *q, const char *tenant_id, StoreAdmission *adm, const Sandbox *sb);

/* Volumes (store-sqlite-volumes.c), for the ops table. */
int sqlite_op_template_version_add(Store *s, const TemplateVersion *v);
int sqlite_op_template_version_next(Store *s, const char *name, uint64_t *ret);
int sqlite_op_template_version_get(Store *s, const char *name, uint64_t version, TemplateVersion *ret);
int sqlite_op_template_version_list(Store *s, const char *name, TemplateVersion **ret, size_t *ret_n);
int sqlite_op_template_version_delete(Store *s, const char *name, uint64_t version);
/* Inside a sandbox insert's transaction: -EIDRM if *version is not recorded
 * (collected meanwhile); newest: the newest version, into *version.
 * BEGIN IMMEDIATE serializes it with a delete. */
int sqlite_template_version_hold(SqliteStore *q, const char *name, bool newest, uint64_t *version);
int sqlite_op_template_versions_drop(Store *s, const char *name);
int sqlite_op_template_tag_set(Store *s, const char *name, const char *tag, uint64_t version);
int sqlite_op_template_tag_delete(Store *s, const char *name, const char *tag);
int sqlite_op_template_tag_get(Store *s, const char *name, const char *tag, uint64_t *ret_version);
int sqlite_op_template_tag_list(Store *s, const char *name, TemplateTag **ret, size_t *ret_n);
int sqlite_op_volume_insert(Store *s, const Volume *v, StoreAdmission *adm);
int sqlite_op_volume_get(Store *s, const char *tenant_id, const char *name, Volume *ret);
int sqlite_op_volume_get_by_id(Store *s, const char *id, Volume *ret);
int sqlite_op_volume_list(Store *s, const char *tenant_id, Volume **ret, size_t *ret_n);
int sqlite_op_volume_delete(Store *s, const char *tenant_id, const char *name);
int sqlite_op_volume_move(Store *s, const char *volume_id, const char *sandbox_id, const char *from, const char *to);
int sqlite_op_volume_mount(Store *s, const char *sandbox_id, const VolumeMount *m, size_t n);
int sqlite_op_volume_mounts(Store *s, const char *sandbox_id, VolumeMount **ret, size_t *ret_n);
/* Webhooks (store-sqlite-webhooks.c), for the ops table. */
int sqlite_op_webhook_insert(Store *s, Webhook *w);
int sqlite_op_webhook_get(Store *s, const char *tenant_id, const char *id, Webhook *ret);
int sqlite_op_webhook_list(Store *s, const char *tenant_id, Webhook **ret, size_t *ret_n);
int sqlite_op_webhook_update(Store *s, const Webhook *w);
int sqlite_op_webhook_delete(Store *s, const char *tenant_id, const char *id);
int sqlite_op_webhook_set_state(Store *s, const Webhook *w, bool disable);
int sqlite_op_webhook_set_secret(Store *s, const char *id, const char *old, const char *secret);
/* Object settings (store-sqlite-settings.c), for the ops table. */
int sqlite_op_setting_set(Store *s, const ObjectSetting *v);
int sqlite_op_setting_remove(Store *s, const char *kind, const char *name, const char *key);
int sqlite_op_settings_get(Store *s, const char *a_kind, const char *a_name, const char *b_kind, const char *b_name,
                           ObjectSetting **ret, size_t *ret_n);

/* The handle (store-sqlite.c). */
int sqlite_store_open(const char *location, Store **ret);
void sqlite_store_close(Store *s);
int sqlite_store_schema_version(Store *s);
