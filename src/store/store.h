/* SPDX-License-Identifier: MIT */
#pragma once

/* The store: source of truth for tenants, keys, templates, sandboxes and
 * events. One interface, back ends as ops tables (sqlite now, postgres later).
 * Every function returns >= 0 on success or -errno: -ENOENT (no such row, or
 * not visible to that tenant), -EEXIST (unique key taken), -ESTALE (a
 * compare-and-set lost: the row was not in the expected state), -EIO. A Store is
 * used by one thread at a time; open one per thread (sqlite: WAL, busy timeout). */

#include "macros.h"

#define STORE_ID_MAX 64
#define STORE_NAME_MAX 128
#define STORE_REASON_MAX 512
#define STORE_URL_MAX 4096
#define STORE_LIST_LIMIT_DEFAULT 1000 /* a filter's limit 0 means this */
/* Owner of the sandboxes that sit unclaimed in a warm pool. Not a tenant row:
 * no key belongs to it, so no tenant sees them; real tenant ids are "tn_"
 * plus 12 random characters and never collide with it. */
#define STORE_SYSTEM_TENANT_ID "tn_system"

typedef struct Store Store;

typedef struct Tenant {
        char id[STORE_ID_MAX];
        char name[STORE_NAME_MAX];
        int64_t created_usec;
} Tenant;

typedef struct ApiKey {
        char id[STORE_ID_MAX];        /* public id, e.g. "key_ab12cd34", shown in lists */
        char tenant_id[STORE_ID_MAX];
        char hash[65];                /* hex sha256 of the secret; the secret is never stored */
        char name[STORE_NAME_MAX];
        bool admin;
        int64_t created_usec;
} ApiKey;

typedef enum TemplateState {
        TEMPLATE_IMPORTING,
        TEMPLATE_READY,
        _TEMPLATE_STATE_MAX,
        _TEMPLATE_STATE_INVALID = -EINVAL,
} TemplateState;

typedef struct Template {
        char name[STORE_NAME_MAX];
        char tenant_id[STORE_ID_MAX]; /* "" for global templates */
        TemplateState state;
        uint64_t size_bytes;
        int64_t created_usec;
} Template;

typedef enum SandboxState {
        SANDBOX_CREATING,
        SANDBOX_RUNNING,
        SANDBOX_PAUSED,
        SANDBOX_SUSPENDED,
        SANDBOX_DELETING,
        SANDBOX_DELETED,
        SANDBOX_ERROR,
        SANDBOX_UNREACHABLE, /* its worker stopped heartbeating: state unknown */
        _SANDBOX_STATE_MAX,
        _SANDBOX_STATE_INVALID = -EINVAL,
} SandboxState;

/* The reason of a sandbox in state error whose delete failed: the delete is
 * still wanted, and the worker finishes it at its next start. A delete cut
 * short by the worker going away leaves the sandbox deleting (the same). */
#define SANDBOX_REASON_DELETE_FAILED "delete failed: "

/* What the idle controller does with a sandbox that saw no exec or file
 * call for idle_s seconds. Wire and database strings: "", "pause", "suspend". */
typedef enum IdleAction {
        IDLE_ACTION_NONE,
        IDLE_ACTION_PAUSE,
        IDLE_ACTION_SUSPEND,
        _IDLE_ACTION_MAX,
        _IDLE_ACTION_INVALID = -EINVAL,
} IdleAction;

#define STORE_INGRESS_HOST_MAX 264

typedef struct Sandbox {
        char id[STORE_ID_MAX];
        char tenant_id[STORE_ID_MAX];
        char template_name[STORE_NAME_MAX];
        char runtime[16];               /* "ns" | "vm" */
        char worker[STORE_NAME_MAX];    /* worker (host) that holds it */
        SandboxState state;
        char reason[STORE_REASON_MAX];  /* why it is in this state (error, stopped, ...) */
        uint32_t cpu_millis;            /* 1000 = one CPU */
        uint64_t memory_mb;
        uint64_t disk_mb;
        uint32_t pids_max;
        uint64_t timeout_s;             /* 0 = none */
        int64_t created_usec;
        int64_t updated_usec;
        int64_t expires_usec;           /* 0 = never */
        uint32_t slot;                  /* host uid/gid range index, unique among live sandboxes */
        int64_t pid;                    /* host pid of the sandbox init, 0 if none */
        uint64_t pid_starttime;         /* /proc/PID/stat field 22, to detect pid reuse */
        char *env_json;                 /* JSON object of strings, or NULL */
        char *metadata_json;            /* JSON object of strings, or NULL */
        char parent_id[STORE_ID_MAX];   /* lineage: branched from */
        char parent_checkpoint[STORE_ID_MAX]; /* lineage: the checkpoint of parent_id it came from, "" = live state */
        bool processes_preserved;       /* its processes are those it had before the last suspend (the
                                         * column defaults to true; insert writes what is here) */
        uint64_t idle_s;                /* idle policy: after this many seconds without activity ... */
        IdleAction idle_action;         /* ... do this (IDLE_ACTION_NONE = nothing) */
        int64_t last_activity_usec;     /* last exec or file call; insert: 0 = created_usec */
        char warm_pool[STORE_NAME_MAX]; /* template of the warm pool that holds it unclaimed, else "" */
        uint32_t io_weight;             /* 0 = default */
        uint64_t checkpoint_every_s;    /* automatic checkpoints, 0 = off */
        bool timeout_warned;            /* the warning before the timeout was recorded */
        char *network_json;             /* egress policy, canonical JSON; NULL = none (no egress) */
        uint64_t checkpoints_max;       /* most checkpoints it may hold; 0 = the host's default */
        uint64_t checkpoints_mb;        /* most MiB its checkpoints may hold exclusively; 0 = the host's default */
        uint32_t checkpoints;           /* read only: restorable checkpoints it has */
        bool auto_resume;               /* exec and file calls (envd requests) on it while paused resume it */
        bool public_traffic;            /* the ingress lets anyone reach its ports (else: its traffic token) */
        char ingress_host[STORE_INGRESS_HOST_MAX]; /* the Host its servers see for ingress requests ("${PORT}"
                                                    * = the port); "" = the one the client sent (E2B's
                                                    * maskRequestHost) */
        uint64_t template_version;      /* the version of template_name it was made from, 0 = unversioned */
        char template_pool[STORE_NAME_MAX]; /* not stored: the pool template a create makes it from
                                             * ("name@vN" for an old version), "" = template_name */
        bool template_newest;           /* not stored: made from whichever version is the newest (NAME,
                                         * NAME:latest): the insert puts the one newest in its
                                         * transaction into template_version */
        bool template_resolved;         /* not stored: template_name is resolved (the API's create) */
} Sandbox;

void sandbox_done(Sandbox *s); /* frees the JSON members */
#define _cleanup_sandbox_ _cleanup_(sandbox_done)
void sandbox_array_free(Sandbox *a, size_t n);

/* A read-only snapshot of a sandbox's root, kept by the worker's pool under
 * the same id. */
typedef struct Checkpoint {
        char id[STORE_ID_MAX];
        char sandbox_id[STORE_ID_MAX];
        char tenant_id[STORE_ID_MAX];
        char name[STORE_NAME_MAX];      /* "" = none; otherwise unique among the sandbox's checkpoints */
        int64_t created_usec;
        uint64_t size_bytes;            /* bytes only this checkpoint holds (as the worker last measured) */
        bool automatic;                 /* taken by the controller: retention may prune it (column "auto") */
        bool restorable;                /* false while being taken, or once given up for garbage collection */
        bool memory;                    /* holds the machine's memory too (vm): a restore continues its processes */
} Checkpoint;

/* The policy fields a PATCH of a sandbox changes, all at once. */
typedef struct SandboxPolicy {
        uint64_t timeout_s;
        int64_t expires_usec;           /* 0 = never; a new value clears timeout_warned */
        uint64_t idle_s;
        IdleAction idle_action;
        uint64_t checkpoint_every_s;
        bool auto_resume;
        uint64_t disk_mb;               /* a new disk quota; 0 = unchanged */
} SandboxPolicy;

typedef struct Event {
        int64_t seq;                    /* assigned by the store, increasing */
        int64_t time_usec;
        char tenant_id[STORE_ID_MAX];   /* "" for system-wide events */
        char sandbox_id[STORE_ID_MAX];  /* "" if not about a sandbox */
        char type[64];                  /* e.g. "sandbox.created", "sandbox.state" */
        char actor[STORE_NAME_MAX];     /* "key:key_ab12", "worker", "controller", "system" */
        char reason[STORE_REASON_MAX];
        char *data_json;                /* extra JSON object, or NULL */
} Event;

void event_done(Event *e);
void event_array_free(Event *a, size_t n);

typedef struct SandboxFilter {
        const char *tenant_id;          /* NULL = all tenants (internal callers only) */
        int state;                      /* -1 = any; else a SandboxState */
        bool include_deleted;
        const char *after_id;           /* pagination: ids sort ascending; NULL = from start */
        size_t limit;                   /* 0 = default 1000 */
} SandboxFilter;

typedef struct EventFilter {
        const char *tenant_id;          /* NULL = all */
        const char *sandbox_id;         /* NULL = all */
        const char *type;               /* NULL = all; exact or prefix ending in '.' e.g. "sandbox." */
        int64_t after_seq;              /* only seq > after_seq */
        int64_t since_usec;             /* 0 = any */
        size_t limit;                   /* 0 = default 1000 */
} EventFilter;

typedef struct StoreOps StoreOps;

/* url: "sqlite:/var/lib/space/space.db" (or a plain path) — later "postgres://...". 
 * Opening applies pending migrations (in a transaction; concurrent openers are safe). */
int store_open(const char *url, Store **ret);
Store *store_close(Store *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(Store *, store_close);
const char *store_backend_name(const Store *s); /* "sqlite" */
int store_schema_version(Store *s);              /* highest applied migration */

/* Batches: the writes of this handle between begin and end are committed
 * together (one commit instead of one each). Each operation in it stays
 * all-or-nothing on its own, and a failed one does not end the batch. end
 * commits; if that fails, none of the batch's writes happened. Nothing but
 * store calls belongs in a batch (it holds the write lock). A back end
 * without batches commits each operation on its own. Batches do not nest. */
int store_batch_begin(Store *s);
int store_batch_end(Store *s);

/* Tenants */
int store_tenant_create(Store *s, const char *name, Tenant *ret);       /* id generated */
int store_tenant_get(Store *s, const char *id, Tenant *ret);
int store_tenant_get_by_name(Store *s, const char *name, Tenant *ret);
int store_tenant_list(Store *s, Tenant **ret, size_t *ret_n);

/* Tenant quotas (store-tenants.c). What a tenant may hold at once, and the
 * request limits of its keys taken together. The first TENANT_RESOURCES
 * are held by its live sandboxes (state not deleted; warm sandboxes belong
 * to no tenant until claimed) and their checkpoints, and are admitted by the
 * *_admit operations below. Wire and column names: the string table. */
typedef enum TenantQuota {
        TENANT_QUOTA_SANDBOXES,
        TENANT_QUOTA_CPU_MILLIS,
        TENANT_QUOTA_MEMORY_MB,
        TENANT_QUOTA_DISK_MB,
        TENANT_QUOTA_CHECKPOINTS,
        TENANT_QUOTA_RPS,
        TENANT_QUOTA_STREAMS,
        _TENANT_QUOTA_MAX,
        _TENANT_QUOTA_INVALID = -EINVAL,
} TenantQuota;
#define TENANT_RESOURCES (TENANT_QUOTA_CHECKPOINTS + 1)
#define TENANT_QUOTA_DEFAULT INT64_C(-1)        /* a value not set for the tenant: the host's default */

typedef struct TenantQuotas {
        char tenant_id[STORE_ID_MAX];
        int64_t value[_TENANT_QUOTA_MAX];       /* TENANT_QUOTA_DEFAULT, or >= 0 (0 = unlimited) */
        int64_t updated_usec;                   /* 0: no row (every value the default) */
} TenantQuotas;

typedef struct TenantUsage {
        uint64_t used[TENANT_RESOURCES];
} TenantUsage;

/* An admission: a sandbox (or checkpoint) is recorded only if the tenant's
 * usage, counted in the same transaction as the write (so concurrent
 * admissions of a tenant cannot pass a quota together), plus what it adds
 * stays within every limit. */
typedef struct StoreAdmission {
        uint64_t limit[TENANT_RESOURCES];       /* 0 = unlimited */
        uint64_t count;                         /* sandboxes this one stands for: itself and those of the same
                                                 * shape still to come (a branch's children); 0 = 1 */
        /* filled when the write is refused with -EDQUOT */
        TenantQuota exceeded;
        uint64_t need;                          /* what the request adds to that quota */
        TenantUsage usage;
} StoreAdmission;

const char *tenant_quota_to_string(TenantQuota q);
TenantQuota tenant_quota_from_string(const char *s);

/* The tenant's row; a tenant without one gets every value TENANT_QUOTA_DEFAULT
 * (and updated_usec 0). -ENOENT only if there is no such tenant. */
int store_tenant_quotas_get(Store *s, const char *tenant_id, TenantQuotas *ret);
/* The same without the check that the tenant exists (one round trip less
 * where its absence means the defaults too: a create's admission). */
int store_tenant_quotas_or_defaults(Store *s, const char *tenant_id, TenantQuotas *ret);
/* Inserts or replaces the row of q->tenant_id (every value TENANT_QUOTA_DEFAULT
 * or >= 0, else -EINVAL); updated_usec becomes now. -ENOENT if no such tenant. */
int store_tenant_quotas_set(Store *s, const TenantQuotas *q);
/* What the tenant's live sandboxes and their checkpoints hold now. */
int store_tenant_usage(Store *s, const char *tenant_id, TenantUsage *ret);
/* Decides an admission against usage u: 0, or -EDQUOT with a->exceeded,
 * a->need and a->usage set. sb: the sandbox to add (NULL = one checkpoint).
 * For the back ends, inside their write's transaction. */
int store_admission_check(StoreAdmission *a, const TenantUsage *u, const Sandbox *sb);
/* ... of what add[] adds to each resource (a volume: disk_mb). */
int store_admission_check_add(StoreAdmission *a, const TenantUsage *u, const uint64_t add[static TENANT_RESOURCES]);

/* API keys */
/* -ENOENT if k->tenant_id is not a tenant; -EEXIST if the id or hash is taken.
 * created_usec 0 = now. */
int store_key_insert(Store *s, const ApiKey *k);
int store_key_get_by_hash(Store *s, const char *hash, ApiKey *ret);
int store_key_list(Store *s, const char *tenant_id /* NULL = all */, ApiKey **ret, size_t *ret_n);
int store_key_delete(Store *s, const char *tenant_id /* NULL = any */, const char *id);
int store_key_count(Store *s, uint64_t *ret);

/* Templates (names are unique) */
int store_template_insert(Store *s, const Template *t); /* created_usec 0 = now */
int store_template_get(Store *s, const char *name, Template *ret);
int store_template_list(Store *s, Template **ret, size_t *ret_n);
int store_template_set_ready(Store *s, const char *name, uint64_t size_bytes);
/* Deletes unless a sandbox not in state deleted references it: then -EBUSY. */
int store_template_delete(Store *s, const char *name);
/* Number of sandboxes not in state deleted that use the template (0 if none). */
int store_template_in_use(Store *s, const char *name, uint64_t *ret);

/* Template versions and tags (store-template-versions.c). Every publish of
 * a template is a version, numbered per name from 1; the newest is what the
 * name means. A tag names one version of a template (moved by setting it
 * again). A version is in use while a sandbox made from it is not deleted or
 * still has a restorable checkpoint. */
#define STORE_TAG_MAX 128
#define STORE_DIGEST_MAX 80
#define STORE_TAGS_MAX 1024

typedef struct TemplateVersion {
        char name[STORE_NAME_MAX];
        uint64_t version;
        char digest[STORE_DIGEST_MAX];  /* the image's digest or the build's layer, "" if none */
        uint64_t size_bytes;
        int64_t created_usec;           /* 0 = now on add */
        uint64_t users;                 /* read only: sandboxes using it (see above) */
        char tags[STORE_TAGS_MAX];      /* read only: its tags, comma separated */
} TemplateVersion;

typedef struct TemplateTag {
        char name[STORE_NAME_MAX];
        char tag[STORE_TAG_MAX];
        uint64_t version;
} TemplateTag;

/* -EEXIST if the name has this version already. */
int store_template_version_add(Store *s, const TemplateVersion *v);
/* The number the next version of name gets (1 for a name without any). */
int store_template_version_next(Store *s, const char *name, uint64_t *ret);
int store_template_version_get(Store *s, const char *name, uint64_t version, TemplateVersion *ret);
/* Newest first. */
int store_template_version_list(Store *s, const char *name, TemplateVersion **ret, size_t *ret_n);
/* Deletes a version that is not the newest, has no tag and is not in use
 * (checked in the delete's transaction): else -EBUSY; -ENOENT if none. */
int store_template_version_delete(Store *s, const char *name, uint64_t version);
/* Every version and tag of name (the template is removed). */
int store_template_versions_drop(Store *s, const char *name);
/* Points tag at version (moved if set); -ENOENT if there is no such version. */
int store_template_tag_set(Store *s, const char *name, const char *tag, uint64_t version);
int store_template_tag_delete(Store *s, const char *name, const char *tag); /* -ENOENT if none */
int store_template_tag_get(Store *s, const char *name, const char *tag, uint64_t *ret_version);
/* Sorted by tag. */
int store_template_tag_list(Store *s, const char *name, TemplateTag **ret, size_t *ret_n);

/* Sandboxes. insert assigns s->slot: the lowest slot not used by a sandbox
 * whose state is not deleted (atomically, in the same transaction). */
int store_sandbox_insert(Store *s, Sandbox *sb);
/* The same, but only slots < slots_max are used: -ENOSPC when all are taken.
 * created_usec 0 = now; updated_usec 0 = created_usec. -EEXIST if the id is taken.
 * One made from a template version (template_version > 0, no parent_id) needs
 * the version's row: -EIDRM if it is gone; a version delete and the insert
 * are serialized, so a delete that comes after sees the sandbox (-EBUSY).
 * With template_newest the newest version is taken (-EIDRM if there is none). */
int store_sandbox_insert_max(Store *s, Sandbox *sb, uint32_t slots_max);
/* The same, admitted against sb->tenant_id's quotas (adm NULL = not): -EDQUOT. */
int store_sandbox_insert_admit(Store *s, Sandbox *sb, uint32_t slots_max, StoreAdmission *adm);
int store_sandbox_get(Store *s, const char *tenant_id /* NULL = any */, const char *id, Sandbox *ret);
int store_sandbox_list(Store *s, const SandboxFilter *f, Sandbox **ret, size_t *ret_n);
/* Counts what store_sandbox_list would return without after_id and limit. */
int store_sandbox_count(Store *s, const SandboxFilter *f, uint64_t *ret);
/* Compare-and-set of the state: only if current state == from (or from < 0 = any
 * state other than deleted); else -ESTALE. Updates reason and updated_usec. */
int store_sandbox_set_state(Store *s, const char *id, int from, SandboxState to, const char *reason);
/* Writes the runtime facts (pid, pid_starttime, worker) of a sandbox; worker
 * NULL = leave it as it is. */
int store_sandbox_set_runtime(Store *s, const char *id, int64_t pid, uint64_t pid_starttime, const char *worker);
/* In one compare-and-set on (state, worker): the sandbox in state from on
 * from_worker goes to state to, with pid, pid_starttime and to_worker. The
 * owner of a lost sandbox is decided by it: its worker coming back adopts it
 * (to_worker = from_worker), a recovery elsewhere moves it; whoever comes
 * second gets -ESTALE and must undo its copy. -ENOENT: no such sandbox. */
int store_sandbox_take_over(Store *s, const char *id, SandboxState from, const char *from_worker, SandboxState to,
                            int64_t pid, uint64_t pid_starttime, const char *to_worker, const char *reason);
int store_sandbox_set_expiry(Store *s, const char *id, int64_t expires_usec);
/* A create's end, in one transaction: the sandbox in state creating gets
 * its pid and pid_starttime and goes to running (reason ""), and ev, its
 * event (sandbox_id: id), is appended (ev->seq, ev->time_usec set). -ESTALE
 * if it is no longer creating (deleted meanwhile: nothing is written),
 * -ENOENT if there is none. */
int store_sandbox_set_running(Store *s, const char *id, int64_t pid, uint64_t pid_starttime, Event *ev);
/* Removes the row of a sandbox in state deleted (history is kept in events);
 * one whose slot is held stays. */
int store_sandbox_purge(Store *s, const char *id); /* -ESTALE if not deleted */
/* A sandbox whose teardown runs on after its delete holds its slot (uid
 * range, link, address) meanwhile: no insert gets it, and an insert that
 * finds only held slots free fails with -EAGAIN (one is free once a
 * teardown ends), not -ENOSPC. -ENOENT if there is no such row. */
int store_sandbox_hold_slot(Store *s, const char *id, bool held);
/* Every held slot of worker's rows (NULL: of every row) is free again (its
 * teardowns were finished by the orphan scan at the worker's start): how many. */
int store_sandbox_release_slots(Store *s, const char *worker);

/* Lifecycle of sandboxes */
/* Records activity (exec, file calls) now: last_activity_usec only grows. */
int store_sandbox_touch(Store *s, const char *id);
/* Replaces the policy fields. -ESTALE if the sandbox is deleted. */
int store_sandbox_set_policy(Store *s, const char *id, const SandboxPolicy *p);
/* Compare-and-set of timeout_warned from false to true: -ESTALE if it was
 * already set (the warning is recorded once, whoever races for it). */
int store_sandbox_set_timeout_warned(Store *s, const char *id);
int store_sandbox_set_processes_preserved(Store *s, const char *id, bool preserved);
/* Replaces the egress policy (canonical JSON, validated by the caller): -ENOENT
 * if the sandbox does not exist or is deleted. */
int store_sandbox_set_network(Store *s, const char *id, const char *network_json);
/* Hands one sandbox of the warm pool of template_name to a tenant, atomically
 * (two claims never get the same sandbox, on PostgreSQL across servers too):
 * one whose warm_pool is template_name, state paused, and whose runtime,
 * disk_mb and template_version equal req's (a warm sandbox of an older
 * version is none). It takes req's tenant_id, cpu_millis, memory_mb,
 * pids_max, io_weight, timeout_s, expires_usec, env_json, metadata_json,
 * idle_s, idle_action and checkpoint_every_s; warm_pool becomes "", the
 * created, updated and activity times now, timeout_warned false. The state
 * stays paused (the caller resumes it). *ret is the claimed row; -ENOENT if
 * none is free. */
int store_sandbox_claim_warm(Store *s, const char *template_name, const Sandbox *req, Sandbox *ret);
/* The same, admitted against req->tenant_id's quotas (adm NULL = not): -EDQUOT. */
int store_sandbox_claim_warm_admit(Store *s, const char *template_name, const Sandbox *req, StoreAdmission *adm,
                                   Sandbox *ret);
/* Live sandboxes in the warm pool of a template: how many are paused (ready
 * to be claimed) and how many in all (any state but deleted). */
int store_sandbox_warm_count(Store *s, const char *template_name, uint64_t *ret_ready, uint64_t *ret_total);

/* Checkpoints */
/* created_usec 0 = now. -EEXIST if the id, or the name among the sandbox's
 * checkpoints, is taken. */
int store_checkpoint_insert(Store *s, const Checkpoint *c);
/* The same, admitted against c->tenant_id's checkpoints quota (adm NULL = not): -EDQUOT. */
int store_checkpoint_insert_admit(Store *s, const Checkpoint *c, StoreAdmission *adm);
int store_checkpoint_get(Store *s, const char *tenant_id /* NULL = any */, const char *id, Checkpoint *ret);
/* Newest first (created_usec, then id, descending). sandbox_id NULL = of every sandbox. */
int store_checkpoint_list(Store *s, const char *sandbox_id, Checkpoint **ret, size_t *ret_n);
/* Sets restorable and size_bytes. */
int store_checkpoint_update(Store *s, const char *id, bool restorable, uint64_t size_bytes);
int store_checkpoint_delete(Store *s, const char *id);
/* Deletes the rows of checkpoints whose sandbox is deleted or gone (the pool
 * removes a sandbox's checkpoints with it); ret (may be NULL) = how many. */
int store_checkpoint_delete_orphans(Store *s, uint64_t *ret);

/* Events */
int store_event_append(Store *s, Event *e); /* sets e->seq and, if 0, e->time_usec */
int store_event_list(Store *s, const EventFilter *f, Event **ret, size_t *ret_n);
/* Retention: removes events with time_usec < before_usec; ret (may be NULL) = how many. */
int store_event_delete_before(Store *s, int64_t before_usec, uint64_t *ret);

/* Credentials: secrets that a granted sandbox's gateway puts on requests to
 * the credential's hosts. The store holds the value sealed only (see
 * src/shared/cred-crypt.h); names are unique per tenant. */
#define STORE_CRED_HEADER_MAX 128       /* header name */
#define STORE_CRED_FORMAT_MAX 512       /* header format, "Bearer {value}" */
#define STORE_CRED_NONCE_MAX 32         /* base64 of the 12-byte nonce */
#define STORE_CRED_KEY_ID_MAX 32        /* hex of 8 bytes */

typedef enum CredApply {
        CRED_APPLY_HEADER,              /* header_name: header_format with {value} replaced */
        CRED_APPLY_BASIC,               /* Authorization: Basic base64(basic_user ":" value) */
        _CRED_APPLY_MAX,
        _CRED_APPLY_INVALID = -EINVAL,
} CredApply;

typedef struct Credential {
        char id[STORE_ID_MAX];          /* "cr_" + random */
        char tenant_id[STORE_ID_MAX];
        char name[STORE_NAME_MAX];
        char *hosts_json;               /* JSON array of host patterns (validated by the caller) */
        CredApply apply;
        char header_name[STORE_CRED_HEADER_MAX];
        char header_format[STORE_CRED_FORMAT_MAX];
        char basic_user[STORE_NAME_MAX];
        char env_name[STORE_NAME_MAX];  /* placeholder variable in granted sandboxes, "" = none */
        char *ciphertext;               /* base64 of ciphertext || 16-byte tag */
        char nonce[STORE_CRED_NONCE_MAX];
        char key_id[STORE_CRED_KEY_ID_MAX];
        int64_t created_usec;
        int64_t updated_usec;
        int64_t expires_usec;           /* 0 = never */
        int64_t revoked_usec;           /* 0 = not revoked */
        uint64_t version;               /* 1 at insert, + 1 per update */
        bool grant_scoped;              /* store_grant_list: the grant's own hosts and header, not the credential's */
} Credential;

void credential_done(Credential *c); /* frees the members (the ciphertext wiped) */
void credential_array_free(Credential *a, size_t n);

/* created_usec 0 = now; updated = created; version = 1. -EEXIST if the id,
 * or the name within the tenant, is taken; -EKEYEXPIRED if it is sealed under
 * another master key than the one a rotation recorded (cluster setting
 * master_key_id: a rotation committed while the caller sealed it). */
int store_credential_insert(Store *s, const Credential *c);
/* By tenant and name; -ENOENT if the tenant has none of that name. */
int store_credential_get(Store *s, const char *tenant_id, const char *name, Credential *ret);
/* A tenant's credentials, by name. */
int store_credential_list(Store *s, const char *tenant_id, Credential **ret, size_t *ret_n);
/* Writes every mutable field of c (hosts, apply, header, user, env, sealed
 * value, expires, revoked) to the row (c->tenant_id, c->name) if its
 * version is still c->version: version + 1, updated_usec now; -ESTALE if the
 * row changed meanwhile, -ENOENT if it is gone. ret_version (may be NULL):
 * the new version. */
int store_credential_update(Store *s, const Credential *c, uint64_t *ret_version);
/* Deletes the credential and its grants. */
int store_credential_delete(Store *s, const char *tenant_id, const char *name);

/* Grants. -EEXIST if the sandbox already has it; the caller checks that the
 * sandbox and the credential belong to the tenant. */
int store_grant_insert(Store *s, const char *tenant_id, const char *sandbox_id, const char *credential_id);
/* A grant that puts the credential only on requests to hosts_json (a JSON
 * array of host patterns) as "header_name: header_format" ({value} = the
 * value), whatever hosts and header the credential itself names; hosts_json
 * NULL = store_grant_insert(). */
int store_grant_insert_scoped(Store *s, const char *tenant_id, const char *sandbox_id, const char *credential_id,
                              const char *hosts_json, const char *header_name, const char *header_format);
int store_grant_delete(Store *s, const char *sandbox_id, const char *credential_id); /* -ENOENT */
/* The credentials granted to a sandbox, by name (what its gateway applies). */
int store_grant_list(Store *s, const char *sandbox_id, Credential **ret, size_t *ret_n);

/* A master key rotation: every credential of every tenant re-sealed in ONE
 * transaction, all or nothing (a crash or a failure anywhere leaves every
 * row as it was). Credential writes of other processes wait for it
 * (PostgreSQL: the table locked EXCLUSIVE; SQLite: one writer). In order:
 *   begin(current, userdata): current[i] is the value of settings[i].name
 *     in the store now (NULL where unset); < 0 aborts;
 *   row(c, userdata) for every credential (tenant, name order): it may
 *     replace c->ciphertext (malloc'd, freeing the one it replaces), c->nonce
 *     and c->key_id (the store frees c's members afterwards); > 0 = changed (written back, version + 1:
 *     an update in flight that read the row before gets -ESTALE), 0 = left
 *     as it is, < 0 aborts;
 *   settings[i].name = settings[i].value for each setting (set or replaced);
 *   end (may be NULL): fills *ret (its data_json stays the caller's) with
 *     the event the store appends in the same transaction, last, knowing how
 *     many rows were re-sealed and seen: the audit record commits with the
 *     rotation or not at all.
 * The store sees only sealed values. ret_changed, ret_total (may be NULL):
 * rows re-sealed, rows seen. */
#define STORE_RESEAL_SETTINGS_MAX 4
typedef struct StoreSetting {
        const char *name;
        const char *value;
} StoreSetting;
typedef struct StoreReseal {
        int (*begin)(char *const *current, void *userdata);
        int (*row)(Credential *c, void *userdata);
        const StoreSetting *settings;
        size_t n_settings;              /* 1..STORE_RESEAL_SETTINGS_MAX */
        int (*end)(uint64_t changed, uint64_t total, Event *ret, void *userdata);
        void *userdata;
} StoreReseal;
int store_credentials_reseal(Store *s, const StoreReseal *rs, uint64_t *ret_changed, uint64_t *ret_total);
/* Workers (hosts) of a cluster: they register, heartbeat, and are marked
 * lost by the controller when the heartbeat stops. (An all-in-one spaced has
 * no rows here: its worker is "local".) */
#define STORE_WORKER_ADDRESS_MAX 256
#define STORE_WORKER_LIST_MAX 64        /* runtimes, accelerators: "ns,vm" */
#define STORE_WORKER_TEMPLATES_MAX 8192 /* comma-separated names it holds (templates and their versions) */

typedef enum WorkerState {
        WORKER_LIVE,
        WORKER_SUSPECT,                 /* no heartbeat within the timeout */
        WORKER_STOPPED,                 /* deregistered on a clean stop */
        _WORKER_STATE_MAX,
        _WORKER_STATE_INVALID = -EINVAL,
} WorkerState;

typedef struct WorkerNode {
        char name[STORE_NAME_MAX];
        char address[STORE_WORKER_ADDRESS_MAX];  /* host:port of its internal listener */
        char instance[STORE_ID_MAX];    /* random per start: a restart vs. a duplicate name */
        WorkerState state;
        uint32_t cpu_millis;            /* capacity */
        uint64_t memory_mb;
        uint64_t disk_mb;
        char runtimes[STORE_WORKER_LIST_MAX];
        char accelerators[STORE_WORKER_LIST_MAX];
        char templates[STORE_WORKER_TEMPLATES_MAX];
        int64_t registered_usec;
        int64_t heartbeat_usec;
        /* read only: what its sandboxes not deleted, error or lost reserve */
        uint32_t used_cpu_millis;
        uint64_t used_memory_mb;
        uint64_t used_disk_mb;
        uint32_t sandboxes;
} WorkerNode;

/* A sandbox a cluster operation changed. */
typedef struct SandboxRef {
        char id[STORE_ID_MAX];
        char tenant_id[STORE_ID_MAX];
} SandboxRef;

/* Registers (or re-registers) w->name as live with w's capacity, address and
 * instance; registered and heartbeat times become now. -EEXIST if the name
 * belongs to another live instance whose heartbeat is at or after
 * stale_before_usec (a duplicate name); a row that is lost, stopped, stale,
 * or of the same instance is taken over. */
int store_worker_register(Store *s, const WorkerNode *w, int64_t stale_before_usec);
/* Heartbeat now, with the templates it holds. -ESTALE if the row is not live
 * or belongs to another instance (re-register), -ENOENT if there is none. */
int store_worker_heartbeat(Store *s, const char *name, const char *instance, const char *templates);
/* A clean stop: live → stopped, only for this instance (-ESTALE otherwise). */
int store_worker_stop(Store *s, const char *name, const char *instance);
int store_worker_get(Store *s, const char *name, WorkerNode *ret);
/* Every worker, by name, with the used_* totals. */
int store_worker_list(Store *s, WorkerNode **ret, size_t *ret_n);
/* live → lost if its heartbeat is before stale_before_usec (else -ESTALE),
 * and every sandbox it holds that is not deleted or lost → lost with reason,
 * in one transaction. *ret are those sandboxes (the caller records events). */
int store_worker_mark_lost(Store *s, const char *name, int64_t stale_before_usec, const char *reason,
                           SandboxRef **ret, size_t *ret_n);

/* Settings every process of a cluster shares. Sets name to value unless it
 * is set already (the first one wins, also between processes at once); ret
 * is the value in the store afterwards. */
#define STORE_CLUSTER_SETTING_MAX 128
int store_cluster_setting_claim(Store *s, const char *name, const char *value,
                                char ret[static STORE_CLUSTER_SETTING_MAX]);
/* Its value now; -ENOENT if it is not set. */
int store_cluster_setting_get(Store *s, const char *name, char ret[static STORE_CLUSTER_SETTING_MAX]);
/* Checkpoint copies (a cluster): which workers hold a checkpoint. The
 * worker that took it holds the first copy; the controller ships it to
 * others (btrfs send/receive). A copy is available once complete and its
 * stream verified; only available copies can be restored from. */
#define STORE_SHA256_HEX 65
typedef struct CheckpointCopy {
        char checkpoint_id[STORE_ID_MAX];
        char sandbox_id[STORE_ID_MAX];
        char worker[STORE_NAME_MAX];
        bool available;                 /* complete and verified; false: a receive in progress or failed */
        char sha256[STORE_SHA256_HEX];  /* hex sha256 of the shipped stream ("" for the origin's copy) */
        uint64_t size_bytes;            /* bytes of the shipped stream (0 for the origin's copy) */
        int64_t updated_usec;
} CheckpointCopy;

/* Inserts or replaces the row of (c->checkpoint_id, c->worker); updated_usec becomes now. */
int store_checkpoint_copy_set(Store *s, const CheckpointCopy *c);
/* The copies of one checkpoint (checkpoint_id NULL: every copy), by checkpoint and worker. */
int store_checkpoint_copy_list(Store *s, const char *checkpoint_id, CheckpointCopy **ret, size_t *ret_n);
/* -ENOENT if there is no such row. */
int store_checkpoint_copy_delete(Store *s, const char *checkpoint_id, const char *worker);

/* Volumes (store-volumes.c): a tenant's named persistent subvolumes, and
 * which sandboxes mount them. A volume's mounts count while their sandbox is
 * not deleted: a writer excludes every other mount, readers share. Names are
 * unique per tenant. */
#define STORE_VOLUME_PATH_MAX 256
#define STORE_VOLUME_MOUNTS_MAX 16 /* volumes one sandbox mounts */

typedef struct Volume {
        char id[STORE_ID_MAX];          /* "vol_" + random: its subvolume's name in the pool */
        char tenant_id[STORE_ID_MAX];
        char name[STORE_NAME_MAX];
        uint64_t size_mb;               /* its quota, > 0 */
        char worker[STORE_NAME_MAX];    /* the worker whose pool holds it; "" = the local one */
        int64_t created_usec;
        bool read_only;                 /* a snapshot: mounted read-only only, its files unchangeable */
        char source[STORE_NAME_MAX];    /* the volume it was snapshotted or cloned from (its name then); "" = none */
        uint32_t readers, writers;      /* read only: mounts by sandboxes not deleted */
} Volume;

typedef struct VolumeMount {
        char volume_id[STORE_ID_MAX];
        char volume_name[STORE_NAME_MAX]; /* read only (list): the volume's name */
        char sandbox_id[STORE_ID_MAX];
        char path[STORE_VOLUME_PATH_MAX]; /* where inside the sandbox */
        bool read_only;
} VolumeMount;

/* created_usec 0 = now. -EEXIST if the id, or the name within the tenant, is taken. */
/* adm (NULL = none): the tenant's disk_mb quota, which counts its volumes'
 * size_mb beside its live sandboxes' disks, admits it in the insert's
 * transaction (-EDQUOT). */
int store_volume_insert(Store *s, const Volume *v, StoreAdmission *adm);
/* By tenant and name; -ENOENT if the tenant has none of that name. */
int store_volume_get(Store *s, const char *tenant_id, const char *name, Volume *ret);
/* By id, whatever its tenant (a worker's look at what its pool holds); -ENOENT if none. */
int store_volume_get_by_id(Store *s, const char *id, Volume *ret);
/* A tenant's volumes, by name. */
int store_volume_list(Store *s, const char *tenant_id, Volume **ret, size_t *ret_n);
/* Deletes the volume (and the mount rows of deleted sandboxes) unless a
 * sandbox not deleted mounts it: then -EBUSY. */
int store_volume_delete(Store *s, const char *tenant_id, const char *name);
/* Records that sandbox_id mounts m[0..n-1] (their sandbox_id is ignored),
 * all or none, in one transaction that also decides the sharing rule: -EBUSY
 * if a writer would share a volume with another sandbox's mount, or a reader
 * with another's writer. */
int store_volume_mount(Store *s, const char *sandbox_id, const VolumeMount *m, size_t n);
/* The volumes sandbox_id mounts, by path. */
int store_volume_mounts(Store *s, const char *sandbox_id, VolumeMount **ret, size_t *ret_n);
/* The volume moves to worker to with sandbox_id (its restore there from a
 * checkpoint): a compare-and-set against the worker it names (-ESTALE if it
 * names another now), refused (-EBUSY) while any other sandbox not deleted
 * mounts it (two copies would diverge); -ENOENT if there is no such volume. */
int store_volume_move(Store *s, const char *volume_id, const char *sandbox_id, const char *from, const char *to);

/* Controller leadership (the advisory-lock form, kept for callers that only
 * ask): true while this handle holds it. PostgreSQL: a session advisory lock
 * on this handle's connection; SQLite: always true. spaced's controllers use
 * the lease below instead. */
int store_leader_try(Store *s, bool *ret_leader);

/* The store's clock in microseconds since the epoch (PostgreSQL: the
 * server's clock_timestamp(); SQLite: its own julianday('now')). Every lease
 * is judged by it: worker heartbeats are written with it (store_worker_*),
 * and freshness is judged against it, never against another host's wall
 * clock. */
int store_clock(Store *s, int64_t *ret_usec);
/* store_clock's time, or this host's if the store does not answer (then the
 * reads it would be compared with fail too). */
int64_t store_now_usec(Store *s);

/* The controller lease: one row, judged by the store's clock. token is the
 * fencing token: one more at each takeover, the same across renewals. */
typedef struct ControllerLease {
        char holder[STORE_NAME_MAX];
        int64_t token;
        int64_t expires_usec;           /* store time; <= now_usec: free */
        int64_t now_usec;               /* the store's clock when read */
} ControllerLease;

/* Takes the lease for holder for lease_usec if it is free (expired or
 * released): its token becomes one more and is returned. -EBUSY while
 * another holder's (or this holder's earlier token's) lease runs. */
int store_lease_take(Store *s, const char *holder, uint64_t lease_usec, int64_t *ret_token);
/* Extends holder's unexpired lease of token to lease_usec from now.
 * -ESTALE: it expired or another took it over (this holder is fenced). */
int store_lease_renew(Store *s, const char *holder, int64_t token, uint64_t lease_usec);
/* Ends holder's lease of token at once (a graceful stop: the standby takes
 * over at its next try). -ESTALE if it no longer holds it. */
int store_lease_release(Store *s, const char *holder, int64_t token);
int store_lease_get(Store *s, ControllerLease *ret);
/* Fences this handle with token (0: no longer): from now on each of its
 * writes checks, in its own statement, that token's lease is unexpired, and
 * fails with -ESTALE (writing nothing) if not. A takeover waits for the
 * transaction of a write that passed the check. The controller's handles
 * carry their leader token so that a stalled leader that wakes up after a
 * takeover writes nothing. */
int store_fence(Store *s, int64_t token);

/* Webhooks: a tenant's URL the active controller POSTs the tenant's events
 * to, in order, signed with the secret (kept as given: it must sign; the
 * API never returns it after the create). */
#define STORE_WEBHOOK_URL_MAX 2048
#define STORE_WEBHOOK_EVENTS_MAX 1024   /* events_json: a JSON array of type patterns */
#define STORE_WEBHOOK_SECRET_MAX 512   /* the secret as stored: sealed (webhook.h) */

typedef struct Webhook {
        char id[STORE_ID_MAX];
        char tenant_id[STORE_ID_MAX];
        char name[STORE_NAME_MAX];
        bool e2b;                       /* the body in E2B's shape (made by /events/webhooks) */
        char url[STORE_WEBHOOK_URL_MAX];
        char events_json[STORE_WEBHOOK_EVENTS_MAX];
        char secret[STORE_WEBHOOK_SECRET_MAX];
        bool enabled;
        int64_t created_usec;
        /* delivery state (the controller's) */
        int64_t last_seq;               /* the last event delivered or filtered out */
        uint64_t failures;              /* consecutive failed attempts at the next event */
        int64_t next_usec;              /* no attempt before; 0 = now */
        int64_t failing_since_usec;     /* the first of those failures; 0 = none */
        char last_error[STORE_REASON_MAX];
} Webhook;

/* Records w (id, tenant_id, url, events_json, secret, enabled, name); its
 * last_seq becomes the newest event's: a new webhook gets what happens from
 * now on. created_usec 0 = now. */
int store_webhook_insert(Store *s, Webhook *w);
int store_webhook_get(Store *s, const char *tenant_id, const char *id, Webhook *ret);
/* tenant_id NULL = every tenant's (the controller). By creation time. */
int store_webhook_list(Store *s, const char *tenant_id, Webhook **ret, size_t *ret_n);
/* name, url, events_json and enabled of w; enabling a disabled webhook
 * clears its failures (it is tried again at once). -ENOENT. */
int store_webhook_update(Store *s, const Webhook *w);
int store_webhook_delete(Store *s, const char *tenant_id, const char *id);
/* The delivery state of w (by id); disable: also set enabled = false
 * (a PATCH meanwhile that disabled it stays). -ENOENT if deleted meanwhile. */
int store_webhook_set_state(Store *s, const Webhook *w, bool disable);
/* The stored (sealed) secret of webhook id replaced, if it is still old:
 * -ESTALE otherwise (or if the webhook is gone). */
int store_webhook_set_secret(Store *s, const char *id, const char *old, const char *secret);

/* Settings of a named object, by key (text values; a missing key is the
 * default): a template's "runtime" and "start", a tenant's
 * "default_runtime". The kinds and keys are the table in store-settings.c. */
#define STORE_SETTING_KIND_MAX 16
#define STORE_SETTING_KEY_MAX 32
#define STORE_SETTING_VALUE_MAX 8192

typedef struct ObjectSetting {
        char kind[STORE_SETTING_KIND_MAX];
        char name[STORE_NAME_MAX];
        char key[STORE_SETTING_KEY_MAX];
        char value[STORE_SETTING_VALUE_MAX];
        int64_t updated_usec;
} ObjectSetting;

/* Sets (value non-NULL, non-empty) or removes (NULL) one setting. -EINVAL for
 * a kind or key not in the table. */
int store_object_setting_set(Store *s, const char *kind, const char *name, const char *key, const char *value);
/* Every setting of two objects in one read (b_kind NULL: of a only), by
 * kind, name, key. */
int store_object_settings_get(Store *s, const char *a_kind, const char *a_name, const char *b_kind,
                              const char *b_name, ObjectSetting **ret, size_t *ret_n);
/* Removes every setting of the object (none: 0). */
int store_object_settings_remove(Store *s, const char *kind, const char *name);
/* The value of kind/key in a list from store_object_settings_get, or NULL. */
const char *object_setting_find(const ObjectSetting *list, size_t n, const char *kind, const char *key);

/* string tables (the only source of wire and database strings) */
const char *sandbox_state_to_string(SandboxState s);
SandboxState sandbox_state_from_string(const char *s);
const char *template_state_to_string(TemplateState s);
TemplateState template_state_from_string(const char *s);
const char *idle_action_to_string(IdleAction a);
const char *worker_state_to_string(WorkerState s);
WorkerState worker_state_from_string(const char *s);
IdleAction idle_action_from_string(const char *s);
const char *cred_apply_to_string(CredApply a);
CredApply cred_apply_from_string(const char *s);

int64_t now_usec(void); /* CLOCK_REALTIME in microseconds */

/* Time the calling thread spent waiting on the store (its back end's
 * statements, transactions, lock waits and reconnects) and how many such
 * calls it made since store_timing_reset(). The API reports it per request
 * (log line, and Server-Timing with debug_timing on). */
void store_timing_reset(void);
uint64_t store_timing_usec(void);
uint64_t store_timing_calls(void);
