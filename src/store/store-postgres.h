/* SPDX-License-Identifier: MIT */
#pragma once

/* Private to the PostgreSQL back end: the handle (one libpq connection,
 * synchronous), its prepared statements, and the helpers that
 * store-postgres-ops.c builds the operations from. All parameters and
 * results travel in text format. */

#include <libpq-fe.h>

#include "store-backend.h"
#include "store-migrations.h"

extern const StoreOps store_postgres_ops;
extern const StoreMigration store_postgres_migrations[];
extern const size_t store_postgres_migrations_count;

/* Advisory lock keys (classid, objid): the class spells "spac". */
#define PG_LOCK_CLASS "1936744803"
#define PG_LOCK_MIGRATIONS "1"
#define PG_LOCK_SLOTS "2"
#define PG_LOCK_CONTROLLER "3" /* held by the active controller (a session lock) */
/* Admission of one tenant (transaction locks): (this class, hashtext(tenant id)). */
#define PG_LOCK_TENANT_CLASS "1936744804"

#define PG_CONNECT_TIMEOUT_SEC "10"  /* unless the URL says otherwise */
#define PG_APPLICATION_NAME "space"  /* likewise */
#define PG_TX_TRIES 8                /* serialization failures and deadlocks */
#define PG_RETRY_SLEEP_NSEC (5 * 1000 * 1000)
#define PG_SECRETS_MAX 8             /* password spellings scrubbed from messages */
#define PG_PARAMS_MAX 40
#define PG_INT_TEXT_MAX 24           /* "-9223372036854775808" and a NUL */

/* Statements with fixed text, prepared once per connection on first use. */
typedef enum PgStmt {
        PG_SCHEMA_VERSION,
        PG_MIGRATION_APPLIED,
        PG_MIGRATION_RECORD,
        PG_TENANT_INSERT,
        PG_TENANT_GET,
        PG_TENANT_GET_BY_NAME,
        PG_TENANT_LIST,
        PG_KEY_INSERT,
        PG_KEY_GET_BY_HASH,
        PG_KEY_LIST,
        PG_KEY_DELETE,
        PG_KEY_COUNT,
        PG_TEMPLATE_INSERT,
        PG_TEMPLATE_GET,
        PG_TEMPLATE_LIST,
        PG_TEMPLATE_SET_STATE,
        PG_TEMPLATE_DELETE,
        PG_TEMPLATE_IN_USE,
        PG_LOCK_SLOTS_XACT,
        PG_SANDBOX_FREE_SLOT,
        PG_SANDBOX_INSERT,
        PG_SANDBOX_GET,
        PG_SANDBOX_SET_STATE_FROM,
        PG_SANDBOX_SET_STATE_LIVE,
        PG_SANDBOX_SET_RUNTIME,
        PG_SANDBOX_SET_RUNNING,
        PG_SANDBOX_TAKE_OVER,
        PG_SANDBOX_SET_EXPIRY,
        PG_SANDBOX_HOLD_SLOT,
        PG_SANDBOX_RELEASE_SLOTS,
        PG_SANDBOX_FREE_SLOT_LIVE,
        PG_SANDBOX_PURGE,
        PG_EVENT_APPEND,
        PG_EVENT_DELETE_BEFORE,
        _PG_STMT_MAX,
} PgStmt;

extern const char *const pg_stmt_sql[_PG_STMT_MAX];

/* The lifecycle statements (store-postgres-lifecycle.c), prepared likewise. */
typedef enum PgLifecycleStmt {
        PG_LC_SANDBOX_TOUCH,
        PG_LC_SANDBOX_SET_POLICY,
        PG_LC_SANDBOX_SET_TIMEOUT_WARNED,
        PG_LC_SANDBOX_SET_PRESERVED,
        PG_LC_SANDBOX_SET_NETWORK,
        PG_LC_SANDBOX_CLAIM_WARM,
        PG_LC_SANDBOX_WARM_COUNT,
        PG_LC_CHECKPOINT_INSERT,
        PG_LC_CHECKPOINT_GET,
        PG_LC_CHECKPOINT_LIST,
        PG_LC_CHECKPOINT_LIST_ALL,
        PG_LC_CHECKPOINT_UPDATE,
        PG_LC_CHECKPOINT_DELETE,
        PG_LC_CHECKPOINT_DELETE_ORPHANS,
        _PG_LC_STMT_MAX,
} PgLifecycleStmt;

/* The credential statements (store-postgres-credentials.c), prepared likewise. */
typedef enum PgCredStmt {
        PG_CRED_INSERT,
        PG_CRED_GET,
        PG_CRED_LIST,
        PG_CRED_UPDATE,
        PG_CRED_DELETE,
        PG_GRANT_INSERT,
        PG_GRANT_DELETE,
        PG_GRANT_LIST,
        PG_CRED_LOCK,
        PG_CRED_ALL,
        PG_CRED_RESEAL,
        PG_CRED_SETTING_GET,
        PG_CRED_SETTING_SET,
        _PG_CRED_STMT_MAX,
} PgCredStmt;
/* The cluster statements (store-postgres-cluster.c), prepared likewise. */
typedef enum PgClusterStmt {
        PG_CL_WORKER_REGISTER,
        PG_CL_WORKER_HEARTBEAT,
        PG_CL_WORKER_STOP,
        PG_CL_WORKER_GET,
        PG_CL_WORKER_LIST,
        PG_CL_WORKER_SET_LOST,
        PG_CL_SANDBOXES_SET_LOST,
        PG_CL_LEADER_TRY,
        PG_CL_LEADER_HELD,
        PG_CL_SETTING_CLAIM,
        PG_CL_COPY_SET,
        PG_CL_COPY_LIST,
        PG_CL_COPY_LIST_ALL,
        PG_CL_COPY_DELETE,
        PG_CL_CLOCK,
        PG_CL_LEASE_TAKE,
        PG_CL_LEASE_RENEW,
        PG_CL_LEASE_RELEASE,
        PG_CL_LEASE_GET,
        PG_CL_FENCE,
        _PG_CL_STMT_MAX,
} PgClusterStmt;

/* The tenant quota statements (store-postgres-tenants.c), prepared likewise. */
typedef enum PgTenantStmt {
        PG_TQ_LOCK,
        PG_TQ_GET,
        PG_TQ_SET,
        PG_TQ_USAGE,
        _PG_TQ_STMT_MAX,
} PgTenantStmt;

/* The template version statements (store-postgres-template-versions.c), prepared likewise. */
typedef enum PgTemplateVersionStmt {
        PG_TV_ADD,
        PG_TV_NEXT,
        PG_TV_GET,
        PG_TV_LIST,
        PG_TV_LOCK,
        PG_TV_HOLD,
        PG_TV_HOLD_NEWEST,
        PG_TV_DELETE,
        PG_TV_DROP,
        PG_TV_TAG_SET,
        PG_TV_TAG_DELETE,
        PG_TV_TAG_GET,
        PG_TV_TAG_LIST,
        _PG_TV_STMT_MAX,
} PgTemplateVersionStmt;

/* The volume statements (store-postgres-volumes.c), prepared likewise. */
typedef enum PgVolumeStmt {
        PG_VOL_INSERT,
        PG_VOL_GET,
        PG_VOL_GET_BY_ID,
        PG_VOL_LIST,
        PG_VOL_LOCK_BY_NAME,
        PG_VOL_LOCK_BY_ID,
        PG_VOL_LIVE_MOUNTS,
        PG_VOL_DELETE,
        PG_VOL_MOUNT_INSERT,
        PG_VOL_MOUNT_LIST,
        PG_VOL_MOVE,
        _PG_VOL_STMT_MAX,
} PgVolumeStmt;
/* The webhook statements (store-postgres-webhooks.c), prepared likewise. */
typedef enum PgWebhookStmt {
        PG_WH_INSERT,
        PG_WH_GET,
        PG_WH_LIST,
        PG_WH_LIST_ALL,
        PG_WH_UPDATE,
        PG_WH_DELETE,
        PG_WH_SET_STATE,
        PG_WH_SET_SECRET,
        _PG_WH_STMT_MAX,
} PgWebhookStmt;
/* The object settings statements (store-postgres-settings.c), prepared likewise. */
typedef enum PgSettingStmt {
        PG_SET_UPSERT,
        PG_SET_REMOVE,
        PG_SET_REMOVE_ALL,
        PG_SET_GET,
        _PG_SET_STMT_MAX,
} PgSettingStmt;

/* Statements built from a filter: one prepared statement per combination. */
#define PG_SANDBOX_LIST_VARIANTS 16
#define PG_SANDBOX_COUNT_VARIANTS 8
#define PG_EVENT_LIST_VARIANTS 32

/* A prepared statement is valid for the connection generation it was
 * prepared in; a reconnect starts a new generation. */
typedef struct PgSlot {
        unsigned gen;
} PgSlot;

typedef struct PgStore {
        Store base;
        PGconn *conn;
        unsigned gen;                   /* >= 1; bumped by every reconnect */
        bool in_tx;
        char *where;                    /* the URL without its password, for messages */
        char *secrets[PG_SECRETS_MAX];  /* spellings of the password, NULL-terminated */
        PgSlot stmts[_PG_STMT_MAX];
        PgSlot lifecycle[_PG_LC_STMT_MAX];
        PgSlot credentials[_PG_CRED_STMT_MAX];
        PgSlot cluster[_PG_CL_STMT_MAX];
        PgSlot tenants[_PG_TQ_STMT_MAX];
        PgSlot volumes[_PG_VOL_STMT_MAX];
        PgSlot template_versions[_PG_TV_STMT_MAX];
        PgSlot webhooks[_PG_WH_STMT_MAX];
        PgSlot settings[_PG_SET_STMT_MAX];
        unsigned leader_gen;            /* the generation whose session holds the controller lock, 0 = none */
        int64_t fence_token;            /* store_fence: 0 = none */
        unsigned fence_gen;             /* the generation whose session has it set, 0 = none yet */
        PgSlot sandbox_list[PG_SANDBOX_LIST_VARIANTS];
        PgSlot sandbox_count[PG_SANDBOX_COUNT_VARIANTS];
        PgSlot event_list[PG_EVENT_LIST_VARIANTS];
} PgStore;

static inline PgStore *pg_store(Store *s) {
        return (PgStore *) s; /* base is the first member */
}

/* Positional parameters ($1, $2, ...) in text format; NULL text = SQL NULL. */
typedef struct PgParams {
        const char *values[PG_PARAMS_MAX];
        char ints[PG_PARAMS_MAX][PG_INT_TEXT_MAX];
        int n;
        bool overflow;
} PgParams;

void pg_param_text(PgParams *p, const char *s);
void pg_param_i64(PgParams *p, int64_t v);
void pg_param_bool(PgParams *p, bool b);

static inline void pg_resultp(PGresult **r) {
        if (*r)
                PQclear(*r);
}
#define _cleanup_pgresult_ _cleanup_(pg_resultp)

/* Runs statement sql under the prepared name in slot (preparing it first on
 * this connection if needed). On success *ret holds the result (rows or a
 * command status). Outside a transaction a connection found broken is reset
 * first, and a serialization failure or deadlock is retried. A connection
 * lost during the call is -EIO; the next call reconnects. */
int pg_store_exec_slot(PgStore *q, PgSlot *slot, const char *name, const char *sql, const PgParams *p,
                       PGresult **ret);
int pg_store_exec(PgStore *q, PgStmt id, const PgParams *p, PGresult **ret);
/* Rows changed by an INSERT/UPDATE/DELETE result. */
uint64_t pg_result_changes(PGresult *res);
/* The result of a compare-and-set written as SQL_CHANGED_AND_EXISTS (one row
 * "changed, exists"): 0 if it changed a row, else -ESTALE if the row exists,
 * -ENOENT if not. */
int pg_result_cas(const PGresult *res);

/* Reads row of res into *ret (a Tenant, a Sandbox, ...: the reader's type);
 * -EBADMSG if a value does not fit. */
typedef int (*PgRowReader)(const PGresult *res, int row, void *ret);
/* The first row of res through read into ret; -ENOENT if it has none. */
int pg_result_get_row(const PGresult *res, PgRowReader read, void *ret);
/* Every row of res through read into a new zeroed array of elements of size
 * bytes (*ret, *ret_n; one element more than rows, so never empty). On
 * failure free_rows (NULL: free()) frees the rows read so far. */
int pg_result_list_rows(const PGresult *res, size_t size, PgRowReader read, StoreRowsFree free_rows, void **ret,
                        size_t *ret_n);

/* Runs fn inside BEGIN ISOLATION LEVEL READ COMMITTED ... COMMIT (ROLLBACK
 * if fn fails), retrying the whole transaction on serialization failures and
 * deadlocks. READ COMMITTED whatever the database's default: each statement
 * sees what was committed before it, so one that follows a lock sees what
 * the previous holder wrote. fn returns >= 0 or -errno; its results go
 * through userdata, and it may run more than once. */
typedef int (*PgTxFn)(PgStore *q, void *userdata);
int pg_store_transact(PgStore *q, PgTxFn fn, void *userdata);

/* Reading columns (row, col): -EBADMSG if a value does not fit its field
 * (never truncated) or is not a number where one is expected. */
int pg_col_str(const PGresult *res, int row, int col, char *buf, size_t size);
#define PG_COL_STR(res, row, col, field) pg_col_str((res), (row), (col), (field), sizeof(field))
int pg_col_strdup(const PGresult *res, int row, int col, char **ret); /* SQL NULL → NULL */
int pg_col_i64(const PGresult *res, int row, int col, int64_t *ret);  /* any sign */
int pg_col_u64(const PGresult *res, int row, int col, uint64_t *ret); /* must be >= 0 */
int pg_col_u32(const PGresult *res, int row, int col, uint32_t *ret);
int pg_col_bool(const PGresult *res, int row, int col, bool *ret);

/* Maps an SQLSTATE ("23505") to -errno. */
int pg_sqlstate_errno(const char *sqlstate);

/* Copies msg with every secret replaced by "***" (malloc'd; NULL on OOM). */
char *pg_scrub(const char *msg, char *const *secrets);
/* Collects the spellings of the password in url (raw and decoded, in the
 * user info and in password= parameters) into secrets[0..max-1], longest
 * first, NULL-terminated; -E2BIG if they do not fit. The caller frees the
 * strings, also after a failure. libpq quotes parts of a URL it cannot parse
 * in its messages, so every message is scrubbed of these. */
int pg_url_secrets(const char *url, char **secrets, size_t max);

/* The lifecycle operations (store-postgres-lifecycle.c), for the ops table. */
int pg_op_sandbox_touch(Store *s, const char *id, int64_t now);
int pg_op_sandbox_set_policy(Store *s, const char *id, const SandboxPolicy *p, int64_t now);
int pg_op_sandbox_set_timeout_warned(Store *s, const char *id, int64_t now);
int pg_op_sandbox_set_processes_preserved(Store *s, const char *id, bool preserved, int64_t now);
int pg_op_sandbox_set_network(Store *s, const char *id, const char *network_json, int64_t now);
int pg_op_sandbox_claim_warm(Store *s, const char *template_name, const Sandbox *req, StoreAdmission *adm, int64_t now,
                             Sandbox *ret);
int pg_op_sandbox_warm_count(Store *s, const char *template_name, uint64_t *ret_ready, uint64_t *ret_total);
int pg_op_checkpoint_insert(Store *s, const Checkpoint *c, StoreAdmission *adm);
int pg_op_checkpoint_get(Store *s, const char *tenant_id, const char *id, Checkpoint *ret);
int pg_op_checkpoint_list(Store *s, const char *sandbox_id, Checkpoint **ret, size_t *ret_n);
int pg_op_checkpoint_update(Store *s, const char *id, bool restorable, uint64_t size_bytes);
int pg_op_checkpoint_delete(Store *s, const char *id);
int pg_op_checkpoint_delete_orphans(Store *s, uint64_t *ret);

/* The credential operations (store-postgres-credentials.c). */
int pg_op_credential_insert(Store *s, const Credential *c);
int pg_op_credential_get(Store *s, const char *tenant_id, const char *name, Credential *ret);
int pg_op_credential_list(Store *s, const char *tenant_id, Credential **ret, size_t *ret_n);
int pg_op_credential_update(Store *s, const Credential *c, int64_t now, uint64_t *ret_version);
int pg_op_credential_delete(Store *s, const char *tenant_id, const char *name);
int pg_op_grant_insert(Store *s, const char *tenant_id, const char *sandbox_id, const char *credential_id,
                   const char *hosts_json, const char *header_name, const char *header_format, int64_t now);
int pg_op_grant_delete(Store *s, const char *sandbox_id, const char *credential_id);
int pg_op_grant_list(Store *s, const char *sandbox_id, Credential **ret, size_t *ret_n);
/* The cluster operations (store-postgres-cluster.c), for the ops table. */
int pg_op_worker_register(Store *s, const WorkerNode *w, int64_t stale_before_usec);
int pg_op_worker_heartbeat(Store *s, const char *name, const char *instance, const char *templates, int64_t now);
int pg_op_worker_stop(Store *s, const char *name, const char *instance);
int pg_op_worker_get(Store *s, const char *name, WorkerNode *ret);
int pg_op_worker_list(Store *s, WorkerNode **ret, size_t *ret_n);
int pg_op_worker_mark_lost(Store *s, const char *name, int64_t stale_before_usec, const char *reason, int64_t now,
                           SandboxRef **ret, size_t *ret_n);
int pg_op_leader_try(Store *s, bool *ret_leader);
int pg_op_clock(Store *s, int64_t *ret_usec);
int pg_op_lease_take(Store *s, const char *holder, uint64_t lease_usec, int64_t *ret_token);
int pg_op_lease_renew(Store *s, const char *holder, int64_t token, uint64_t lease_usec);
int pg_op_lease_release(Store *s, const char *holder, int64_t token);
int pg_op_lease_get(Store *s, ControllerLease *ret);
int pg_op_fence(Store *s, int64_t token);
int pg_store_fence_apply(PgStore *q);
int pg_op_cluster_setting_get(Store *s, const char *name, char ret[static STORE_CLUSTER_SETTING_MAX]);
int pg_op_credentials_reseal(Store *s, const StoreReseal *rs, uint64_t *ret_changed, uint64_t *ret_total);
int pg_op_cluster_setting_claim(Store *s, const char *name, const char *value,
                                char ret[static STORE_CLUSTER_SETTING_MAX]);
int pg_op_checkpoint_copy_set(Store *s, const CheckpointCopy *c);
int pg_op_checkpoint_copy_list(Store *s, const char *checkpoint_id, CheckpointCopy **ret, size_t *ret_n);
int pg_op_checkpoint_copy_delete(Store *s, const char *checkpoint_id, const char *worker);

/* Tenant quotas (store-postgres-tenants.c), for the ops table. */
int pg_op_tenant_quotas_get(Store *s, const char *tenant_id, TenantQuotas *ret);
int pg_op_tenant_quotas_set(Store *s, const TenantQuotas *q);
int pg_op_tenant_usage(Store *s, const char *tenant_id, TenantUsage *ret);
/* Inside a write's transaction: takes the tenant's admission lock, counts
 * its usage and decides adm for sb (NULL = a checkpoint); adm NULL = nothing
 * to decide. */
int pg_tenant_admit(PgStore *q, const char *tenant_id, StoreAdmission *adm, const Sandbox *sb);
/* ... of what add[] adds (a volume). */
int pg_tenant_admit_add(PgStore *q, const char *tenant_id, StoreAdmission *adm, const uint64_t add[static TENANT_RESOURCES]);

/* Volumes (store-postgres-volumes.c), for the ops table. */
int pg_op_template_version_add(Store *s, const TemplateVersion *v);
int pg_op_template_version_next(Store *s, const char *name, uint64_t *ret);
int pg_op_template_version_get(Store *s, const char *name, uint64_t version, TemplateVersion *ret);
int pg_op_template_version_list(Store *s, const char *name, TemplateVersion **ret, size_t *ret_n);
int pg_op_template_version_delete(Store *s, const char *name, uint64_t version);
/* Inside a sandbox insert's transaction: locks *version's row FOR KEY SHARE
 * until the commit, so a delete of it (FOR UPDATE) waits for the insert and
 * then sees its sandbox; -EIDRM if the row is gone (collected meanwhile).
 * newest: the newest version's row, into *version. */
int pg_template_version_hold(PgStore *q, const char *name, bool newest, uint64_t *version);
int pg_op_template_versions_drop(Store *s, const char *name);
int pg_op_template_tag_set(Store *s, const char *name, const char *tag, uint64_t version);
int pg_op_template_tag_delete(Store *s, const char *name, const char *tag);
int pg_op_template_tag_get(Store *s, const char *name, const char *tag, uint64_t *ret_version);
int pg_op_template_tag_list(Store *s, const char *name, TemplateTag **ret, size_t *ret_n);
int pg_op_volume_insert(Store *s, const Volume *v, StoreAdmission *adm);
int pg_op_volume_get(Store *s, const char *tenant_id, const char *name, Volume *ret);
int pg_op_volume_get_by_id(Store *s, const char *id, Volume *ret);
int pg_op_volume_list(Store *s, const char *tenant_id, Volume **ret, size_t *ret_n);
int pg_op_volume_delete(Store *s, const char *tenant_id, const char *name);
int pg_op_volume_move(Store *s, const char *volume_id, const char *sandbox_id, const char *from, const char *to);
int pg_op_volume_mount(Store *s, const char *sandbox_id, const VolumeMount *m, size_t n);
int pg_op_volume_mounts(Store *s, const char *sandbox_id, VolumeMount **ret, size_t *ret_n);
/* Webhooks (store-postgres-webhooks.c), for the ops table. */
int pg_op_webhook_insert(Store *s, Webhook *w);
int pg_op_webhook_get(Store *s, const char *tenant_id, const char *id, Webhook *ret);
int pg_op_webhook_list(Store *s, const char *tenant_id, Webhook **ret, size_t *ret_n);
int pg_op_webhook_update(Store *s, const Webhook *w);
int pg_op_webhook_delete(Store *s, const char *tenant_id, const char *id);
int pg_op_webhook_set_state(Store *s, const Webhook *w, bool disable);
int pg_op_webhook_set_secret(Store *s, const char *id, const char *old, const char *secret);
/* Object settings (store-postgres-settings.c), for the ops table. */
int pg_op_setting_set(Store *s, const ObjectSetting *v);
int pg_op_setting_remove(Store *s, const char *kind, const char *name, const char *key);
int pg_op_settings_get(Store *s, const char *a_kind, const char *a_name, const char *b_kind, const char *b_name,
                       ObjectSetting **ret, size_t *ret_n);

/* The handle (store-postgres.c). */
int pg_store_open(const char *url, Store **ret);
void pg_store_close(Store *s);
int pg_store_schema_version(Store *s);
