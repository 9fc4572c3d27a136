/* SPDX-License-Identifier: MIT */
#pragma once

#include <net/if.h>

#include "addr-pool.h"
#include "api-error.h"
#include "config.h"
#include "firewall.h"
#include "json.h"
#include "pool.h"
#include "runtime.h"
#include "store.h"

typedef struct LiveSandbox {
        char id[STORE_ID_MAX];
        pid_t pid;
        uint64_t starttime;
        int pidfd;
        const RuntimeOps *rt; /* the runtime that holds it */
        bool frozen;
        uint64_t oom_kills; /* last count seen */
        bool reaping;       /* deleted: killed, the kernel still tearing its processes down */
        int64_t reap_usec;  /* when the delete killed it */
        bool slot_held;     /* reaping: its slot is held in the store until its teardown ends */
        bool teardown;      /* reaping, PID 1 reaped: the rest is torn down in the background (worker-teardown.c) */
        uint64_t slot;      /* uid range and network link */
        bool net;           /* has a network link (ns: veth, vm: tap), firewall element and gateway registration */
        /* statfs inside (worker-statfs.c); -EBADF: not answered here */
        int statfs_fd;      /* its seccomp filter's listener */
        int quota_fd;       /* sysfs directory of its root's qgroup */
        uint32_t statfs_calls; /* answered since the last tick */
        bool statfs_throttled; /* out of calls until the next tick: not polled */
        uint32_t statfs_fsid[2], statfs_root_fsid[2];
        uint64_t quota_limit, quota_used; /* as read at quota_usec (a burst of calls reads sysfs once) */
        int64_t quota_usec;
        RuntimeLimits limits; /* as last applied by this worker (limits_known): a change to the same is no write */
        bool limits_known;
        bool lost_pending;  /* its row says lost, recovered elsewhere or not yet decided (worker-adopt.c) */
} LiveSandbox;

/* A sandbox as the worker protocol describes it. */
typedef struct WorkerSpec {
        char id[STORE_ID_MAX];
        char template_name[STORE_NAME_MAX];
        char runtime[16];      /* "ns" (default) | "vm" */
        const char *restore_path; /* vm: continue the machine saved here (not owned) */
        bool new_identity;     /* vm, with restore_path: another sandbox's machine (fresh machine-id) */
        bool neutral;          /* vm: booted with nothing of the sandbox (a base snapshot is saved from it) */
        bool cold_boot;        /* vm: booted, not restored from its base snapshot (that failed; a new one is saved) */
        bool restore_checkpoint; /* vm: restore_path is a checkpoint's, of this sandbox (it stays, with its CA) */
        uint64_t slot, cpu_millis, memory_mb, disk_mb, pids_max, io_weight;
        char **env;
        char *policy;  /* egress policy JSON text ("policy" of the spec), NULL: none */
        char tenant[STORE_ID_MAX]; /* "": not in the spec (the store is asked) */
} WorkerSpec;

/* A helper process of the worker (gateway, spawner) that is started again
 * when it dies: at once after a stable run, else after a delay that doubles
 * from WORKER_HELPER_BACKOFF_MIN_USEC to WORKER_HELPER_BACKOFF_MAX_USEC
 * (worker-health.c). */
#define WORKER_HELPER_BACKOFF_MIN_USEC (100 * 1000)
#define WORKER_HELPER_BACKOFF_MAX_USEC (10 * 1000 * 1000)
#define WORKER_HELPER_STABLE_USEC (10 * 1000 * 1000)
typedef struct WorkerRestarts {
        int64_t started_usec;   /* its last start */
        int64_t next_usec;      /* no start before this (0: any time) */
        uint64_t delay_usec;    /* the delay after a death that came soon after a start */
        unsigned restarts;      /* started again since the worker's start */
        char last_exit[96];     /* why it last died, "" = never */
} WorkerRestarts;

typedef struct Worker {
        const Config *config;
        Store *store;
        Pool *pool;
        /* the runtimes this host runs, by runtime_nth() index: NULL where its
         * probe failed (runtime_why says why); [0] is the default, "runtime" */
        const RuntimeOps *runtimes[RUNTIMES_MAX];
        char runtime_why[RUNTIMES_MAX][256];
        const RuntimeOps *runtime;
        int agent_exe_fd;   /* sealed memfd of space-agent */
        struct sock_fprog seccomp; /* the sandboxes' filter, built once */
        int epoll_fd;
        char agent_dir[512];
        LiveSandbox *live;
        size_t n_live, allocated_live;
        Firewall *firewall;        /* libnftables context for net_table */
        AddrPool net_pool;
        FirewallPorts gateway_ports;
        int self_netns_fd;         /* the worker's own network namespace, to return to */
        struct GatewayClient *gateway; /* the gateway process (NULL: gateway = off) */
        void *current_client;      /* the connection whose request is being handled */
        bool reply_deferred;       /* its handler replies later (worker_boot_defer) */
        bool statfs_emulate;       /* ns sandboxes' statfs answered by the worker (a pool with quotas) */
        struct WorkerBoot **boots; /* creates whose guest is booting (worker-boot.c) */
        size_t n_boots, allocated_boots;
        struct WorkerProbeWait *probe_waits; /* vm creates waiting for the KVM probe's verdict (worker-boot.c) */
        size_t n_probe_waits, allocated_probe_waits;
        int spawner_fd;            /* worker-spawner.c: the process that clones ns sandboxes */
        pid_t spawner_pid;         /* 0: none (they are cloned in process) */
        unsigned spawner_outstanding; /* requests sent, not answered yet (answered in order) */
        int roots_fd;              /* worker-roots.c: the process that makes a branch's roots side by side */
        pid_t roots_pid;           /* 0: none (they are made in process) */
        bool roots_failed;         /* it could not be started: not tried again */
        WorkerRestarts gateway_restarts;
        /* a cluster's worker that may have been judged suspect meanwhile (its adoption tick did not
         * run for a lost timeout, or found it not live): once live again, every sandbox it runs is
         * looked up once (worker-adopt.c), since a recovery may have moved it elsewhere */
        bool adopt_recheck;
        bool volumes_swept;        /* worker_volumes_sweep_stale() ran since the start or the last recheck */
        WorkerRestarts spawner_restarts;
        bool restarted;            /* started again by spaced's supervisor (the API process lives on) */
        struct WorkerTeardowns *teardowns; /* worker-teardown.c; NULL: deletes tear down in line */
} Worker;

/* worker-teardown.c: deleted ns sandboxes torn down by a thread of lower
 * priority (its queue bounded), their slots held in the store meanwhile.
 * start: at the worker's start (a failure is logged; deletes tear down in
 * line then). queue: a reaping sandbox whose PID 1 was reaped; -EAGAIN when
 * the queue is full (tear it down in line). collect: the eventfd
 * (WORKER_TAG_TEARDOWN) is readable: finished ones lose their entry and free
 * their slot. pending: deleted sandboxes not torn down yet (the gauge
 * space_worker_teardowns_pending). drain: waits until the queue is empty
 * (disk admission, before it calls the pool full). stop: drains, then ends
 * the thread. serving: the main thread handles a request (the thread waits,
 * bounded, before each step). */
typedef struct WorkerTeardowns WorkerTeardowns;
int worker_teardown_start(Worker *w);
bool worker_teardown_available(Worker *w);
int worker_teardown_queue(Worker *w, LiveSandbox *l);
/* Only the link of index ifindex goes, in the background (a suspend's: the
 * kernel's unregister of a veth waits ~40 ms for RCU grace periods): -EAGAIN
 * when the queue is full, -EOPNOTSUPP without the thread. */
int worker_teardown_queue_link(Worker *w, const char *id, int ifindex);
void worker_teardown_collect(Worker *w);
unsigned worker_teardown_pending(Worker *w);
void worker_teardown_drain(Worker *w);
void worker_teardown_stop(Worker *w);
void worker_teardown_serving(Worker *w, bool serving);

/* worker-health.c: restarts of the helpers, and the health op */
void worker_restarts_started(WorkerRestarts *r, int64_t now);
/* It died (why): when it may start again. */
void worker_restarts_died(WorkerRestarts *r, int64_t now, const char *why);
bool worker_restarts_due(const WorkerRestarts *r, int64_t now);
void worker_op_health(Worker *w, const JsonValue *req, JsonWriter *jw);

#define WORKER_TAG_GATEWAY 3 /* epoll tag of the gateway's control socket */
#define WORKER_TAG_TEARDOWN 4 /* the teardown thread's eventfd */
#define WORKER_TAG_BOOT (UINT64_C(1) << 62) /* | a WorkerBoot pointer: its guest is ready or its VMM ended */
#define WORKER_TAG_STATFS (UINT64_C(1) << 61) /* | a statfs listener fd: a sandbox process waits in statfs */

/* A sandbox's network between worker_net_attach_begin() and _end(). */
typedef struct WorkerNet {
        bool active;          /* begun: exactly one _end() or _abort() follows */
        char id[64];
        uint64_t slot;
        int64_t gateway_seq;  /* the registration sent ahead; 0: no gateway */
        int64_t gateway_gen;  /* ... to the gateway started then (gateway_restarts.started_usec) */
        int64_t start_usec, link_usec, firewall_usec;
} WorkerNet;

/* worker-sandbox.c */
bool id_valid(const char *id);
int worker_spec_parse(Worker *w, const JsonValue *spec, WorkerSpec *ret, ApiError *e);
void worker_spec_done(WorkerSpec *s);
RuntimeLimits worker_spec_limits(const WorkerSpec *s);
/* worker_start_runtime in two halves (several sandboxes set themselves up
 * at once): every successful spawn is followed by exactly one finish. */
typedef struct WorkerPending {
        const RuntimeOps *rt;
        char id[64];
        RuntimePending p;      /* rt->spawn's */
        RuntimeInstance inst;  /* a runtime without spawn creates at once */
        bool created;
        uint64_t slot;         /* uid range and network link */
        WorkerNet net;         /* ns runtime: made while PID 1 sets itself up */
        RuntimeLimits limits;  /* what it was started with */
        int net_error;         /* ... or why not (reported by finish, after PID 1 is reaped) */
        ApiError net_api_error;
        bool make_base;        /* vm, a neutral boot: saved as the base snapshot of base_template/base_variant once
                                * it answers, then told its identity (worker-vm.c) */
        char base_template[64];
        char base_variant[72];
        JsonValue *retry_spec; /* vm, restoring a base snapshot in the event loop: the create's spec, booted
                                * cold should the restore fail (owned; worker-boot.c frees it) */
        bool keep_ca;          /* a machine resumed with its memory: its processes keep trusting its CA */
        bool start_op;         /* vm, a start (resume) of a suspended sandbox in the event loop, not a create */
        char *state_path;      /* ... from the machine saved here (owned; NULL: a boot on its disk) */
        bool keep_state;       /* ... a checkpoint's (a restore in place): it stays */
        bool root_made;        /* worker_spawn_runtime() made the root (it was given none) */
        int64_t start_usec, root_begin_usec, root_usec, spawned_usec; /* for the debug log of a create's phases */
} WorkerPending;
int worker_spawn_runtime(Worker *w, const WorkerSpec *s, const char *root, WorkerPending *ret, ApiError *e);
/* worker_spawn_runtime in its parts, so that several spawns are in flight
 * at the spawner (a branch): prepare builds the runtime spec (root NULL: the
 * root comes later, at its planned path, and goes to PID 1 once made), send
 * hands it to the spawner, complete takes the answer (or spawns in process),
 * gives PID 1 its root (root_made) and begins the network. Completes and
 * cancels follow the order of the sends. A prep is freed with _prep_done. */
typedef struct WorkerSpawnPrep {
        RuntimeSpec rs;
        char **env;
        char *root;              /* given, or planned (root_later) */
        int tap_fd;              /* vm */
        bool prepared, root_later, sent;
        char sock[PATH_MAX], dir[PATH_MAX], hostname[64], resolv[256];
        /* ns: the volumes the store says the sandbox mounts (worker-volume.c) */
        RuntimeVolume volumes[RUNTIME_VOLUMES_MAX];
        char *volume_host[RUNTIME_VOLUMES_MAX];
        char volume_path[RUNTIME_VOLUMES_MAX][RUNTIME_VOLUME_PATH_MAX];
        size_t n_volumes;
} WorkerSpawnPrep;
/* worker-volume.c: the volumes sandbox id mounts (its rows in the store), on this worker's pool, into
 * prep->volumes; a vm sandbox with any is refused (400 unsupported). */
int worker_volumes_prepare(Worker *w, const char *id, bool restore, WorkerSpawnPrep *prep, ApiError *e);
/* Whether the sandbox mounts volumes (the store says; false when it cannot be read) */
bool worker_sandbox_has_volumes(Worker *w, const char *id);
/* A cluster's worker: a checkpoint ck of sandbox id takes a copy of each
 * volume it mounts (pool_volume_copy_create), shipped with the checkpoint.
 * All or none: on failure the ones made are removed again. */
int worker_volume_copies_take(Worker *w, const char *id, const char *ck, ApiError *e);
/* A restore here from checkpoint ck of a sandbox whose volumes live on
 * another worker (a recovery: that worker is lost): each moves here, its row
 * first (store_volume_move), then made from its copy with the checkpoint.
 * 409 when this worker holds no such copy, or another sandbox mounts it. */
typedef struct WorkerVolumeMoves {
        size_t n;
        char id[RUNTIME_VOLUMES_MAX][STORE_ID_MAX];
        char from[RUNTIME_VOLUMES_MAX][STORE_NAME_MAX];
} WorkerVolumeMoves;
int worker_volumes_move_in(Worker *w, const WorkerSpec *s, const char *ck, WorkerVolumeMoves *ret, ApiError *e);
/* The restore failed after all: the volumes it moved here name their old
 * worker again, and what was made of them here goes (the sandbox never ran
 * on it). */
void worker_volumes_move_back(Worker *w, const WorkerSpec *s, const WorkerVolumeMoves *moves);
/* A cluster's worker, at its start and back from a suspect spell: each
 * volume of its pool whose row names another worker now (it moved with a
 * restore there) and that no sandbox here mounts is set aside
 * (pool_volume_set_aside: kept, no longer counted). <0: the store could not
 * be read (tried again later). */
int worker_volumes_sweep_stale(Worker *w);
/* vm: QEMU cannot save a machine with virtiofs devices: what would save one (what: "a checkpoint ...") is
 * refused for a sandbox with volumes (400 unsupported; -EOPNOTSUPP), else 0 */
int worker_vm_volumes_refuse_save(Worker *w, const char *id, const char *what, ApiError *e);
void worker_volumes_prep_done(WorkerSpawnPrep *prep);
int worker_spawn_prepare(Worker *w, const WorkerSpec *s, const char *root, WorkerSpawnPrep *prep,
                         WorkerPending *ret, ApiError *e);
void worker_spawn_send(Worker *w, const WorkerPending *p, WorkerSpawnPrep *prep);
int worker_spawn_complete(Worker *w, const WorkerSpec *s, WorkerSpawnPrep *prep, const char *root_made,
                          WorkerPending *ret, ApiError *e);
/* A prepared (maybe sent) spawn that will not complete: its PID 1, if any, goes. */
void worker_spawn_cancel(Worker *w, WorkerSpawnPrep *prep, WorkerPending *p);
void worker_spawn_prep_done(WorkerSpawnPrep *prep);
/* A spawned PID 1 that will not get its root: killed, reaped, cgroups and socket removed. */
void worker_spawn_abandon(const RuntimeOps *rt, RuntimePending *p);
int worker_finish_runtime(Worker *w, WorkerPending *p, int64_t *ret_pid, uint64_t *ret_starttime, ApiError *e);
/* Starts the runtime on an existing root; on failure nothing but the root remains. */
int worker_start_runtime(Worker *w, const WorkerSpec *s, const char *root, int64_t *ret_pid, uint64_t *ret_starttime,
                         ApiError *e);
int worker_create_sandbox(Worker *w, const JsonValue *spec, int64_t *ret_pid, uint64_t *ret_starttime, ApiError *e);
int worker_destroy_sandbox(Worker *w, const char *id, ApiError *e);
/* PID 1 of a live sandbox exited (its pidfd became readable). */
void worker_sandbox_died(Worker *w, LiveSandbox *l);
/* PID 1 of a deleted (reaping) sandbox exited: its teardown finishes. */
void worker_reap_finish(Worker *w, LiveSandbox *l);
/* At stop: waits (bounded) for the sandboxes still being torn down and finishes them. */
void worker_reap_all(Worker *w, int timeout_msec);
LiveSandbox *worker_live_find(Worker *w, const char *id);
int worker_live_add(Worker *w, const RuntimeOps *rt, const char *id, uint64_t slot, pid_t pid, uint64_t starttime,
                    int pidfd);
/* The runtime called name ("ns", "vm"; NULL/"" = ns), or NULL with an error if it is not available here. */
const RuntimeOps *worker_runtime(Worker *w, const char *name, ApiError *e);
/* The runtime of a live sandbox (ns if it is not live). */
const RuntimeOps *worker_runtime_of(Worker *w, const char *id);
void worker_live_remove(Worker *w, const char *id);
int worker_agent_socket(Worker *w, const char *id, char *buf, size_t n);
/* Removes every host trace of a sandbox id (processes, cgroups, socket dir,
 * and the root too if remove_root). */
int worker_cleanup_sandbox(Worker *w, const char *id, bool remove_root);
void worker_event(Worker *w, const Sandbox *sb, const char *type, const char *reason, const char *data_json);

/* worker-branch.c: what every runtime's branch shares. A branch is all or
 * nothing: on any failure every child goes, its processes (live) and its
 * root or disk (made). */
#define WORKER_BRANCH_MAX 64
typedef struct WorkerBranchChild {
        char id[STORE_ID_MAX];
        int64_t pid;
        uint64_t starttime;
        bool made; /* its root (ns) or disk (vm) exists */
        bool live; /* it runs */
} WorkerBranchChild;
typedef struct WorkerBranch {
        const char *source, *checkpoint; /* point into the request; checkpoint NULL: the live source */
        bool with_memory;
        size_t n;
        WorkerSpec specs[WORKER_BRANCH_MAX];
        WorkerBranchChild kids[WORKER_BRANCH_MAX]; /* kids[i].id = specs[i].id */
} WorkerBranch;
/* {"source":ID,"checkpoint":CK?,"with_memory":B?,"sandboxes":[spec...]}, 1..WORKER_BRANCH_MAX children. */
int worker_branch_parse(Worker *w, const JsonValue *req, WorkerBranch *ret, ApiError *e);
void worker_branch_done(WorkerBranch *b);
void worker_branch_undo(Worker *w, const WorkerBranchChild *kids, size_t n);
/* {"ok":true,"processes_preserved":B,"sandboxes":[{"id","pid","starttime"}...]} */
void worker_branch_reply(JsonWriter *jw, const WorkerBranchChild *kids, size_t n, bool processes_preserved);

/* worker-lifecycle.c: one handler per protocol op; each writes its reply. */
void worker_op_pause(Worker *w, const JsonValue *req, bool pause, JsonWriter *jw);
void worker_op_suspend(Worker *w, const JsonValue *req, JsonWriter *jw);
void worker_op_start(Worker *w, const JsonValue *req, JsonWriter *jw);
void worker_op_checkpoint(Worker *w, const JsonValue *req, JsonWriter *jw);
void worker_op_checkpoint_remove(Worker *w, const JsonValue *req, JsonWriter *jw);
void worker_op_checkpoint_sizes(Worker *w, const JsonValue *req, JsonWriter *jw);
void worker_op_oom_kills(Worker *w, const JsonValue *req, JsonWriter *jw);
void worker_op_volume_create(Worker *w, const JsonValue *req, JsonWriter *jw);
void worker_op_volume_remove(Worker *w, const JsonValue *req, JsonWriter *jw);
void worker_op_volume_usage(Worker *w, const JsonValue *req, JsonWriter *jw);
void worker_op_volume_file_read(Worker *w, const JsonValue *req, JsonWriter *jw);   /* worker-volume-files.c */
void worker_op_volume_file_write(Worker *w, const JsonValue *req, JsonWriter *jw);
void worker_op_volume_file_remove(Worker *w, const JsonValue *req, JsonWriter *jw);
void worker_op_restore(Worker *w, const JsonValue *req, JsonWriter *jw);
void worker_op_branch(Worker *w, const JsonValue *req, JsonWriter *jw);
void worker_op_set_limits(Worker *w, const JsonValue *req, JsonWriter *jw);
void worker_op_set_policy(Worker *w, const JsonValue *req, JsonWriter *jw);
void worker_op_take_warm(Worker *w, const JsonValue *req, JsonWriter *jw);
/* worker-dispatch.c: a request line to its op's handler (the table of
 * worker-proto.h), which writes the reply to jw or defers it. */
void worker_dispatch(Worker *w, const char *line, size_t n, JsonWriter *jw);
/* Every op the worker process serves has its handler, and no other: -EPROTO (logged) if not. */
int worker_dispatch_check(void);
void worker_reply_error(JsonWriter *jw, const ApiError *e);
/* The sandbox or checkpoint id a request names under key (e says so if it is missing or bad). */
const char *worker_req_id(const JsonValue *req, const char *key, ApiError *e);
void worker_reply_ok(JsonWriter *jw);

/* Once a second: OOM kills inside sandboxes become events. */
void worker_tick(Worker *w);

/* worker-net.c: the sandbox's veth pair, firewall element and gateway registration */
#define NET_PREFIX_NAME_MAX 9U /* letters/digits before the '-' of net_link_prefix */
int worker_net_setup(Worker *w);
void worker_net_done(Worker *w);
int worker_net_link_name(const Worker *w, uint64_t slot, char buf[static IFNAMSIZ]);
int worker_net_pair(const Worker *w, uint64_t slot, AddrPair *ret);
/* Proxy variables into *env, the text of /etc/resolv.conf into resolv. */
int worker_net_env(const Worker *w, uint64_t slot, char ***env, char *resolv, size_t resolv_size);
/* vm: the tap device of slot, its host end configured; *ret_fd goes to the
 * VMM (the tap lasts as long as an fd of it is open). */
int worker_net_tap(Worker *w, uint64_t slot, int *ret_fd, ApiError *e);
/* _begin() and _end() at once, after the runtime started PID 1 (pid): link,
 * firewall, gateway; on failure nothing of them remains. pid 0: the link
 * exists already (a vm's tap). */
int worker_net_attach(Worker *w, const char *id, uint64_t slot, pid_t pid, const char *policy_json, ApiError *e);
/* ns: once the runtime cloned PID 1 (pid), while it sets itself up: the
 * gateway registration is sent (tenant and policy as the spec has them, the
 * API wrote it from the store; tenant NULL: the store's), link and firewall
 * element are made; _end() awaits the gateway's answer. pid 0: the link is
 * there already (a vm's tap). A failed _begin() or _end() leaves nothing of
 * the three; _abort() takes down what a successful _begin() made. */
int worker_net_attach_begin(Worker *w, const char *id, uint64_t slot, pid_t pid, const char *tenant,
                            const char *policy_json, WorkerNet *ret, ApiError *e);
int worker_net_attach_end(Worker *w, WorkerNet *n, ApiError *e);
void worker_net_attach_abort(Worker *w, WorkerNet *n);
/* The gateway's control socket is readable: its events, or a new gateway if it died. */
void worker_net_gateway_readable(Worker *w);
/* Hands out the gateway's events that came while the worker waited for a reply. */
void worker_net_gateway_flush(Worker *w);
/* The gateway is gone (why; NULL: it is down already): a new one if its
 * backoff allows, every live sandbox registered again. -EAGAIN: not yet. */
int worker_net_gateway_restart(Worker *w, const char *why);
/* Each tick: a gateway that is due is started again. */
void worker_net_tick(Worker *w);
/* A taken warm sandbox: registered with the gateway again under the taker's
 * tenant and policy (tenant ""/NULL: the store's). */
int worker_net_reregister(Worker *w, const char *id, uint64_t slot, const char *tenant, const char *policy_json,
                          ApiError *e);
/* A running sandbox's egress policy changes at once (NULL: no egress); for
 * one not running here nothing is to be done. */
int worker_net_set_policy(Worker *w, const char *id, const char *policy_json, ApiError *e);
/* Idempotent: whatever of the three exists goes. */
void worker_net_detach(Worker *w, const char *id, uint64_t slot);
/* The same once the sandbox's processes are gone (a suspend): the gateway
 * and the firewall element now, the link in the background
 * (worker_teardown_queue_link; in line if it cannot be queued). */
void worker_net_detach_later(Worker *w, const char *id, uint64_t slot);
/* Its two parts: the gateway forgets the sandbox (the event loop's), and
 * link and firewall element go (fw: a libnftables context of the caller's
 * thread; w only read). */
void worker_net_unregister(Worker *w, const char *id);
void worker_net_detach_link(const Worker *w, Firewall *fw, const char *id, uint64_t slot);
int worker_net_reconcile(Worker *w);

/* worker-boot.c: a create whose guest boots for seconds (vm) ends in the event loop */
typedef struct WorkerBoot WorkerBoot;
/* Takes over p (spawned, not finished) for the current request, whose reply
 * is then written when the boot ends (w->reply_deferred). */
int worker_boot_defer(Worker *w, WorkerPending *p);
/* A branch's children, each spawned (not finished), deferred into one
 * group whose reply ({"ok","processes_preserved","sandboxes":[{id,pid,
 * starttime}]}, or the first failure) is written when the last ends; all or
 * nothing: a failure undoes every child, processes and disks. _new (NULL:
 * out of memory) for the current request; then _defer_child for each
 * spawned child i (p taken over; a failure fails it), then exactly one
 * _release: spawned children were deferred, the rest failed with e. The
 * release writes the reply to jw if every child ended already, else sets
 * w->reply_deferred. */
typedef struct WorkerBootGroup WorkerBootGroup;
WorkerBootGroup *worker_boot_group_new(Worker *w, const char *source, const WorkerSpec *specs, size_t n,
                                       bool with_memory);
int worker_boot_defer_child(Worker *w, WorkerBootGroup *g, size_t i, WorkerPending *p);
void worker_boot_group_release(Worker *w, WorkerBootGroup *g, size_t spawned, const ApiError *e, JsonWriter *jw);
/* A vm create (spec, its JSON) while the runtime probes KVM with another
 * boot: it waits for the verdict (w->reply_deferred), then runs as if it had
 * just arrived; the worker serves every other request meanwhile. */
int worker_boot_wait_probe(Worker *w, const char *id, const JsonValue *spec);
/* A copy of v (NULL on failure or if v is NULL). */
JsonValue *worker_json_copy(const JsonValue *v);
/* epoll reported an fd tagged WORKER_TAG_BOOT. */
void worker_boot_ready(Worker *w, uint64_t tag);
/* Boots past their deadline end (failed). */
void worker_boot_tick(Worker *w);
/* A booting sandbox is deleted: its boot ends now (failed); false if id is not booting. */
bool worker_boot_cancel(Worker *w, const char *id);
bool worker_boot_pending(Worker *w, const char *id);
void worker_boot_client_gone(Worker *w, void *client);
void worker_boot_cancel_all(Worker *w);
/* worker.c: writes a deferred reply to client and reads its next request. */
void worker_client_reply_deferred(Worker *w, void *client, JsonWriter *jw);
/* worker-spawner.c: ns sandboxes cloned by a small process (not by the worker,
 * whose every page a clone would write-protect), still children of the worker. */
int worker_spawner_start(Worker *w);
void worker_spawner_stop(Worker *w);
/* Each tick: a spawner that died is reaped and, when due, started again. */
void worker_spawner_tick(Worker *w);
/* The ns runtime's spawn, made by the spawner (in process when there is none). */
int worker_spawner_spawn(Worker *w, const RuntimeSpec *rs, RuntimePending *ret, char *errbuf, size_t errbuf_size);
/* The same in two halves, so that the worker works meanwhile (requests are
 * answered in order): send returns < 0 when nothing was sent; recv takes the
 * answer of the oldest request, or spawns in process when its request was
 * not sent or the spawner is gone (rs must be the same and alive until then). */
int worker_spawner_send(Worker *w, const RuntimeSpec *rs);
int worker_spawner_recv(Worker *w, bool sent, const RuntimeSpec *rs, RuntimePending *ret, char *errbuf,
                        size_t errbuf_size);
/* worker-cred.c: a sandbox's CA, trust store and credentials in its gateway */
/* Sends the sandbox's grants (store) to the gateway; the first time it has
 * any in this life of its processes, makes its CA and installs it into its
 * trust store. Nothing to do for a sandbox without a network here.
 * registered_now: the gateway registered it just now (with no credentials),
 * so a sandbox without grants needs no message (a create's round trip). */
int worker_cred_sync(Worker *w, const char *id, bool registered_now, ApiError *e);
#define WORKER_CA_SAVED_SUFFIX ".gateway-ca" /* beside a vm's saved memory */
/* Drops the CA of an earlier life of the sandbox (its root is new or replaced). */
void worker_cred_forget(Worker *w, const char *id);
/* A vm suspended or checkpointed with its memory: its CA saved to path
 * (beside the saved machine; nothing to save is fine), and put back when
 * that machine runs again as this sandbox (its processes continue and keep
 * trusting it): 0 if it was put back, -ENOENT if there was none. consume:
 * path goes (a suspend's; a checkpoint's stays, restorable again). */
int worker_cred_save(Worker *w, const char *id, const char *path);
int worker_cred_load_saved(Worker *w, const char *id, const char *path, bool consume);
/* A saved CA copied (a checkpoint of a suspended vm takes the one saved with its memory); none is fine. */
int worker_cred_copy_saved(const char *from, const char *to);
void worker_op_set_credentials(Worker *w, const JsonValue *req, JsonWriter *jw);
/* worker-agent-file.c: small files in a running sandbox through its agent
 * (the vm runtime's trust store). open: a connection, greeted; read: at
 * most max bytes (-EFBIG beyond, -ENOENT and the like as the agent says);
 * write: the whole file (parents made), owned by root. */
typedef struct AgentFile {
        int fd;
        int64_t deadline_msec; /* mono_msec(): of the whole exchange, from the open */
} AgentFile;
int worker_agent_file_open(Worker *w, const char *id, AgentFile *ret);
void worker_agent_file_close(AgentFile *a);
int worker_agent_file_read(const AgentFile *a, const char *path, size_t max, char **ret, size_t *ret_n);
int worker_agent_file_write(const AgentFile *a, const char *path, const void *data, size_t n, mode_t mode);

/* worker-roots.c: the roots helper, started once the pool is open (a
 * failure is logged; the roots are made in process then). A root is sent
 * with a tag; answers (0 or -errno) come back in the order the snapshots
 * finish. A helper that fails during a branch is killed and reaped (none of
 * its snapshots is in flight any more); _ready, at the start of a branch,
 * reaps one that exited since and starts another. */
int worker_roots_start(Worker *w);
void worker_roots_stop(Worker *w);
bool worker_roots_ready(Worker *w);
int worker_roots_send(Worker *w, uint32_t tag, const char *source, const char *checkpoint, const char *id,
                      uint64_t disk_mb);
int worker_roots_recv(Worker *w, uint32_t *ret_tag, int *ret_result);

/* worker-vm.c: vm sandboxes' checkpoints with memory, restores, branches, creates from base snapshots */
/* max_mb (0: none): the cap on what the sandbox's checkpoints hold, this one included. */
void worker_vm_op_checkpoint(Worker *w, const char *id, const char *ck, bool with_memory, uint64_t max_mb,
                             JsonWriter *jw);
void worker_vm_op_restore(Worker *w, WorkerSpec *s, const JsonValue *spec, const char *ck, JsonWriter *jw);
void worker_vm_op_branch(Worker *w, WorkerBranch *b, JsonWriter *jw);
/* The disk from the template's base snapshot (restored, told its identity) or, without one,
 * from its image (booted neutral, saved as the base snapshot, then told its identity). */
int worker_vm_create(Worker *w, const RuntimeOps *rt, WorkerSpec *s, const JsonValue *spec, int64_t *ret_pid,
                     uint64_t *ret_starttime, ApiError *e);
/* worker-lifecycle.c: starts s on root (from the machine saved in state, if
 * not NULL). A vm sandbox with a client waiting is finished by the event
 * loop (worker-boot.c: QEMU loads the machine, or the guest boots, for
 * seconds; every other request is served meanwhile): 0 and
 * w->reply_deferred, the reply {"ok","pid","starttime","processes_preserved"}.
 * spec: s as JSON, to start it again on its disk should the saved machine
 * not load there. keep_state: state is a checkpoint's (it stays); else it
 * goes once the machine runs (its disk moves on). */
int worker_start_runtime_deferred(Worker *w, WorkerSpec *s, const char *root, const char *state, bool keep_state,
                                  const JsonValue *spec, int64_t *ret_pid, uint64_t *ret_starttime, ApiError *e);
/* A vm start (resume) whose saved machine would not load boots on its disk. */
int worker_vm_start_on_disk(Worker *w, const JsonValue *spec, int64_t *ret_pid, uint64_t *ret_starttime,
                            ApiError *e);
/* A create from a base snapshot failed to restore: that snapshot goes and spec boots, without one. */
int worker_vm_create_cold(Worker *w, const JsonValue *spec, int64_t *ret_pid, uint64_t *ret_starttime, ApiError *e);
/* A neutral boot answered (p->make_base): saves the base snapshot, then tells the guest who it is. */
int worker_vm_base_after_boot(Worker *w, const WorkerPending *p, ApiError *e);

/* worker-statfs.c: statfs()/fstatfs() inside ns sandboxes show their quota, not the pool */
#define WORKER_STATFS_PER_TICK_MAX 1000u /* answered per sandbox per tick (second); the rest wait */
#define WORKER_STATFS_QUOTA_USEC 50000  /* a quota figure read from sysfs serves the calls of the next 50 ms */
/* At worker start: whether to answer them (w->statfs_emulate), before the seccomp filter is built. */
int worker_statfs_setup(Worker *w);
/* A live ns sandbox (PID 1's pidfd): takes its listener, opens its quota. Failing leaves its statfs
 * calls waiting (the listener is PID 1's), so it is logged, never fatal. */
void worker_statfs_attach(Worker *w, LiveSandbox *l);
void worker_statfs_detach(Worker *w, LiveSandbox *l);
/* epoll reported the listener fd (tag & 0xffffffff). */
void worker_statfs_readable(Worker *w, int fd);
/* Once a second: the budgets refill, throttled listeners are polled again. */
void worker_statfs_tick(Worker *w);

/* worker-adopt.c: lost sandboxes of a cluster that still run here */
/* sb (lost, its row naming this worker) runs here as l: taken back, running
 * or paused as l is (event sandbox.found). -ESTALE if it was recovered
 * elsewhere or deleted first (its copy here is removed, sb->state set to
 * deleted); -EAGAIN while a recovery elsewhere is tried (nothing done). */
int worker_adopt_lost(Worker *w, Sandbox *sb, LiveSandbox *l);
/* Role worker, every few seconds: the adoption of the ones marked lost while this worker kept running. */
void worker_adopt_tick(Worker *w);
/* Before a sandbox takes s->slot here: no other live one holds it (two never
 * share a uid range or an address). A copy left from a suspect spell whose
 * row moved on (recovered elsewhere, deleted) is removed now; any other
 * holder refuses the start (API_UNAVAILABLE, logged), but one killed whose
 * teardown gave the slot up (reaping without slot_held). */
int worker_slot_claim(Worker *w, const WorkerSpec *s, ApiError *e);

/* worker-metrics.c (worker-metrics.h): each live sandbox's usage, sampled every few seconds */
void worker_metrics_tick(Worker *w);
void worker_metrics_sample(Worker *w);
void worker_metrics_done(void);
void worker_op_metrics(Worker *w, const JsonValue *req, JsonWriter *jw);
void worker_op_metrics_live(Worker *w, const JsonValue *req, JsonWriter *jw);
/* A gateway event (network.allow, .deny, .dropped) counted for its sandbox. */
void worker_metrics_gateway_event(Worker *w, const char *sandbox, const char *type, const char *data_json);
/* worker-admit.c: disk quotas admitted against the pool (pool.h: pool_admit), and
 * full-pool errors as 507 insufficient_storage naming the pool. */
/* Admits an op that gives sandboxes promise_bytes of disk quota in all
 * (self_id: the one sandbox whose quota it replaces, or NULL) which may write
 * outstanding_bytes right after it; what: "create", "branch of 3 sandboxes".
 * A pool that looks too full is committed (its cleaner woken, its qgroups
 * current) and looked at once more before the answer. 0, or -ENOSPC with e
 * filled (507); an unreadable pool is -errno with e filled (500): never
 * admitted blind. */
#define WORKER_DISK_MB_MAX (UINT64_C(1) << 32) /* 4 PiB: a disk_mb in bytes fits a uint64_t many times over */
int worker_admit_disk(Worker *w, const char *what, const char *self_id, uint64_t promise_bytes,
                      uint64_t outstanding_bytes, ApiError *e);
/* A checkpoint of sandbox id: its root's data becomes shared with the
 * checkpoint, so the sandbox may write its whole quota again: admitted when
 * the pool's free space holds that. */
int worker_admit_checkpoint(Worker *w, const char *id, ApiError *e);
/* Imports the tar file at tar as template name, admitted first (the
 * archive's size must fit the pool's free space beside what its sandboxes
 * may still write); a pool filled meanwhile is 507 too. */
int worker_admit_template_import(Worker *w, const char *name, const char *tar, const char *tag, uint64_t *ret_size_bytes,
                                 ApiError *e);
/* The ApiError of a failed step: ENOSPC or EDQUOT become 507
 * insufficient_storage with the pool's figures appended; anything else gets
 * code. Returns r. */
int worker_storage_error(Worker *w, int r, ApiError *e, ApiErrorCode code, const char *fmt, ...) _printf_(5, 6);
/* Whether r is a full disk or a reached quota. */
static inline bool worker_errno_is_full(int r) {
        return r == -ENOSPC || r == -EDQUOT;
}

/* worker-reconcile.c */
int worker_reconcile(Worker *w);
int worker_import_bundled_templates(Worker *w);
