/* SPDX-License-Identifier: MIT */
#pragma once

/* The API ↔ worker boundary. The API server never touches host resources
 * itself: it asks a worker. Today the worker is a local process reached over
 * a unix socket; the scale-out issue makes the same calls a network hop.
 * One WorkerClient is used by one thread at a time. */

#include "api-error.h"
#include "config.h"
#include "json.h"
#include "store.h"

typedef struct WorkerClient WorkerClient;

/* Where the local worker serves (<state>/run/worker.sock) and where sandbox
 * agents listen (<state>/run/sandboxes/<id>/agent.sock). */
int worker_socket_path(const Config *config, char *buf, size_t n);
int worker_agent_dir(const Config *config, char *buf, size_t n);

/* address: "unix:/var/lib/space/run/worker.sock" */
int worker_client_new(const char *address, const char *agent_dir, WorkerClient **ret);
/* A client of a cluster: each call goes to the worker the store names for
 * the sandbox (creates are placed), over TCP with the cluster token. store is
 * borrowed (the caller's handle, used from the same thread); a worker whose
 * heartbeat is older than lost_timeout_s is not used. */
/* A call not answered within msec fails with -ETIMEDOUT (API_UNAVAILABLE)
 * and drops the connection (the late answer is never mistaken for the next
 * one's); <= 0: each op's own deadline, from the table of worker-proto.h. */
void worker_client_set_reply_timeout(WorkerClient *w, int msec);
int worker_client_new_cluster(Store *store, const char *token, uint64_t lost_timeout_s, WorkerClient **ret);
bool worker_client_is_cluster(const WorkerClient *w);
WorkerClient *worker_client_free(WorkerClient *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(WorkerClient *, worker_client_free);

/* Creates and starts the sandbox described by sb (id, slot, template, limits,
 * env). On success returns the host pid and its start time. A failed create
 * leaves nothing behind. */
int worker_sandbox_create(WorkerClient *w, const Sandbox *sb, int64_t *ret_pid, uint64_t *ret_starttime,
                          ApiError *e);
/* Stops the sandbox and removes every host resource it had (idempotent: a
 * sandbox the worker does not know is fine). */
int worker_sandbox_destroy(WorkerClient *w, const char *id, ApiError *e);
/* Freezes (pause = true) or thaws the sandbox's processes. */
int worker_sandbox_pause(WorkerClient *w, const char *id, bool pause, ApiError *e);
/* Ends the sandbox's processes and releases its host resources; its files
 * stay. *ret_processes_preserved says whether process state was kept. */
int worker_sandbox_suspend(WorkerClient *w, const char *id, bool *ret_processes_preserved, ApiError *e);
/* Starts a sandbox again on its existing root (after suspend). */
/* *ret_preserved (may be NULL): the sandbox continued from its saved memory (vm), not a fresh start. */
int worker_sandbox_start(WorkerClient *w, const Sandbox *sb, int64_t *ret_pid, uint64_t *ret_starttime, bool *ret_preserved,
                         ApiError *e);
/* Applies sb's limits to the running sandbox. */
int worker_sandbox_set_limits(WorkerClient *w, const Sandbox *sb, ApiError *e);
/* Hands the sandbox's egress policy (sb->network_json) to its gateway: new
 * connections and queries follow it at once. */
int worker_sandbox_set_network(WorkerClient *w, const Sandbox *sb, ApiError *e);
/* Hands the sandbox's credentials (its grants in the store: values,
 * expiry, revocation) to its gateway: the next request uses them. A sandbox
 * not running on its worker is fine (its next start reads the store). */
int worker_sandbox_set_credentials(WorkerClient *w, const Sandbox *sb, ApiError *e);
/* A paused warm sandbox handed out: sb's limits, then its processes run again (one call). */
int worker_sandbox_take_warm(WorkerClient *w, const Sandbox *sb, ApiError *e);
/* A read-only snapshot of the sandbox's root (processes frozen around it).
 * max_mb: refused (507, and the snapshot removed again) if the sandbox's
 * checkpoints hold that many MiB exclusively, measured right after the
 * snapshot's commit (0 = no cap; pools without qgroups cannot tell; a vm
 * sandbox's cap is checked before, on the files its checkpoints hold).
 * with_memory: the machine's memory too (vm sandboxes; the worker refuses it for ns). */
int worker_checkpoint_create(WorkerClient *w, const char *id, const char *checkpoint_id, uint64_t max_mb,
                             bool with_memory, uint64_t *ret_size_bytes, ApiError *e);
int worker_checkpoint_remove(WorkerClient *w, const char *id, const char *checkpoint_id, ApiError *e);
/* What each checkpoint of the sandbox holds exclusively now (qgroup
 * exclusive bytes as of the pool's last commit): *ret is the reply, whose
 * "sizes" is an object {checkpoint id: bytes}, empty where the pool cannot tell. */
int worker_checkpoint_sizes(WorkerClient *w, const char *id, JsonValue **ret, ApiError *e);
/* The count of the sandbox's processes the kernel killed for memory, so far. */
int worker_sandbox_oom_kills(WorkerClient *w, const char *id, uint64_t *ret, ApiError *e);
/* worker-client-metrics.c: the usage series of a running sandbox since since_usec (the worker's
 * reply: {"cpu_millis":N,"samples":[...]}, worker-metrics.c), and the latest sample of every live
 * sandbox (cluster: of every live worker; {"sandboxes":[{id,cpu_millis,sample}]}). */
int worker_sandbox_metrics(WorkerClient *w, const char *id, int64_t since_usec, JsonValue **ret, ApiError *e);
int worker_metrics_live(WorkerClient *w, JsonValue ***ret, size_t *ret_n, ApiError *e);
/* This process's TLS handshakes with workers as their client (cluster-tls.c):
 * false when cluster TLS is off. */
bool worker_client_tls_handshakes(uint64_t *ret_full, uint64_t *ret_resumed);
/* The same as Prometheus text (space_cluster_tls_handshakes_total, HELP and
 * TYPE lines included) into buf: "" when cluster TLS is off, -ENOBUFS if it
 * does not fit. For every /metrics that shows it (API server, controller). */
int worker_client_tls_metrics(char *buf, size_t size);
/* Processes end, the root is replaced by the checkpoint, the agent starts
 * afresh; or (a vm checkpoint with memory) the machine of the checkpoint
 * continues: *ret_preserved (may be NULL) says which. */
int worker_sandbox_restore(WorkerClient *w, const Sandbox *sb, const char *checkpoint_id, int64_t *ret_pid,
                           uint64_t *ret_starttime, bool *ret_preserved, ApiError *e);
/* n new sandboxes (children[i] describes each) from the source's current
 * state (checkpoint_id NULL) or a checkpoint. All or nothing. */
/* with_memory (vm): the children continue the source's (or the checkpoint's) machine. */
int worker_sandbox_branch(WorkerClient *w, const char *source_id, const char *checkpoint_id, bool with_memory,
                          const Sandbox *children, size_t n, int64_t *ret_pids, uint64_t *ret_starttimes, ApiError *e);
/* Opens a connection to the sandbox's agent: the returned fd speaks the agent
 * protocol (src/proto/proto.h) and the agent's HELLO has already been read. */
int worker_agent_connect(WorkerClient *w, const char *id, int *ret_fd, ApiError *e);
/* Cluster: a connection through the sandbox's worker that is a TCP stream to
 * port inside the sandbox (its worker dials it, net-dial.h). -EOPNOTSUPP for
 * the local worker (the API server dials itself). 502 if nothing answers. */
int worker_port_connect(WorkerClient *w, const Sandbox *sb, uint16_t port, int *ret_fd, ApiError *e);
/* Imports a template from a tar file readable by the worker. A cluster: the
 * tar is streamed to one live worker, which imports it and ships it to every
 * other live worker (one that is down gets it from the controller later). */
int worker_template_import(WorkerClient *w, const char *name, const char *tar_path, const char *tag,
                           uint64_t *ret_size_bytes, ApiError *e);
int worker_template_remove(WorkerClient *w, const char *name, ApiError *e);
/* templates/<name> becomes version name@vN on every worker (see worker-client-ship.c). */
int worker_template_promote(WorkerClient *w, const char *name, uint64_t version, ApiError *e);
/* The same on one worker only (a cluster: the controller, once it shipped that worker the version). */
int worker_template_promote_on(WorkerClient *w, const char *worker, const char *name, uint64_t version,
                               ApiError *e);
/* Volumes (worker-client-volume.c), on worker ("" = the local one). place:
 * the worker a new volume of size_mb goes to ("" when not a cluster). */
int worker_volume_place(WorkerClient *w, uint64_t size_mb, char ret_worker[static STORE_NAME_MAX], ApiError *e);
int worker_volume_create(WorkerClient *w, const char *worker, const char *id, uint64_t size_mb, ApiError *e);
/* A new volume id: a snapshot of source_id (on the same worker), writable or read-only. */
int worker_volume_clone(WorkerClient *w, const char *worker, const char *source_id, const char *id, uint64_t size_mb,
                        bool read_only, ApiError *e);
int worker_volume_remove(WorkerClient *w, const char *worker, const char *id, ApiError *e);
/* A volume's files (path relative to its root, "" = the root): *ret is the reply
 * ({"type":"file","data_b64"} or {"type":"dir","entries"}); write replaces the file. */
int worker_volume_file_read(WorkerClient *w, const char *worker, const char *id, const char *path, JsonValue **ret,
                            ApiError *e);
int worker_volume_file_write(WorkerClient *w, const char *worker, const char *id, const char *path,
                             const char *data_b64, JsonValue **ret, ApiError *e);
/* The stat of path (not followed if a symlink); a directory made (parents too). *ret: the stat
 * {"type","size","mode","uid","gid","atime_usec","mtime_usec","ctime_usec"}. */
int worker_volume_file_stat(WorkerClient *w, const char *worker, const char *id, const char *path, JsonValue **ret,
                            ApiError *e);
int worker_volume_mkdir(WorkerClient *w, const char *worker, const char *id, const char *path, JsonValue **ret,
                        ApiError *e);
int worker_volume_file_remove(WorkerClient *w, const char *worker, const char *id, const char *path, ApiError *e);
int worker_volume_usage(WorkerClient *w, const char *worker, const char *id, uint64_t *ret_used_bytes, ApiError *e);
/* A Dockerfile build's ops go to worker: in a cluster the build's one worker
 * (worker_build_place: layers, stage templates and the build's sandboxes are
 * on it), else "" (the local one).
 * The worker a build of template name runs on: among the live workers, the
 * same one for the same name while it is there (its layer cache); "" when
 * not a cluster. */
int worker_build_place(WorkerClient *w, const char *name, char ret_worker[static STORE_NAME_MAX], ApiError *e);
/* A build's step: layers/<key> from "scratch", or a "layer", "template" or "sandbox" name, with the tar
 * at tar_path applied (a cluster: streamed to the worker), the directory mkdir_path made and the exec
 * defaults written (each may be NULL). */
int worker_build_layer(WorkerClient *w, const char *worker, const char *key, const char *from, const char *name,
                       const char *tar_path, const char *mkdir_path, const char *defaults, ApiError *e);
/* The same, with the layer's exec defaults file in *ret_image_defaults (NULL if it has none). */
int worker_build_layer_defaults(WorkerClient *w, const char *worker, const char *key, const char *from,
                                const char *name, char **ret_image_defaults, ApiError *e);
/* A build's COPY --chown: the uid and primary gid of user, the gid of group (names, each may be NULL: its
 * ids are then 0) in layers/<key>'s etc/passwd and etc/group; an image that lacks one fails (e says why,
 * API_INVALID_ARGUMENT). */
int worker_layer_ids(WorkerClient *w, const char *worker, const char *key, const char *user, const char *group,
                     uint32_t *ret_uid, uint32_t *ret_user_gid, uint32_t *ret_gid, ApiError *e);
/* templates/<name> from layers/<key>, replacing the one there. */
int worker_build_publish(WorkerClient *w, const char *worker, const char *key, const char *name,
                         uint64_t *ret_size_bytes, ApiError *e);
/* Which of keys[0..n) (layer cache keys) worker's layer cache holds, into
 * ret_cached. A cluster with worker "" (a pull, which imports wherever a
 * worker is live): none. */
int worker_layers_cached(WorkerClient *w, const char *worker, char (*keys)[65], size_t n, bool *ret_cached,
                         ApiError *e);
/* A template imported on worker alone (a build's image: a cluster streams
 * the tar to it and ships it nowhere else); not a cluster: the local import. */
int worker_template_import_on(WorkerClient *w, const char *worker, const char *name, const char *tar_path,
                              uint64_t *ret_size_bytes, ApiError *e);
/* A cluster: template name, made on worker holder, shipped to every other
 * live worker now (the controller ships it to the rest later), as what
 * differs from template parent where the receiver holds it (NULL: whole). */
void worker_template_spread(WorkerClient *w, const char *holder, const char *name, const char *parent);
/* What the worker offers: JSON object {"runtimes":[...],"storage":"btrfs",...}
 * (a cluster: {"worker":"cluster","workers":[...]} from the store). */
int worker_info(WorkerClient *w, char **ret_json, ApiError *e);
/* Whether a vm sandbox would run under KVM: the local worker's vm runtime
 * is available and reports KVM (until a boot proved it does not work), or,
 * in a cluster, a live worker offers the vm runtime with KVM. */
int worker_kvm_available(WorkerClient *w, bool *ret, ApiError *e);
/* The local worker's own view of its parts (a cheap call, for /healthz and
 * /readyz: give the client a short reply timeout): JSON object
 * {"gateway":{...},"spawner":{...},"pool":{...},"sandboxes_running":N}. */
int worker_health(WorkerClient *w, char **ret_json, ApiError *e);
/* The templates the (local) worker holds, comma-separated into buf. */
int worker_templates(WorkerClient *w, char *buf, size_t size, ApiError *e);
/* The runtimes the (local) worker can run ("ns,vm") and the hardware
 * accelerators they use ("kvm"), comma-separated, from its info. */
int worker_runtimes(WorkerClient *w, char *runtimes, size_t runtimes_size, char *accelerators,
                    size_t accelerators_size, ApiError *e);

/* ---- a cluster: state shipped between workers (worker-ship.h) ---- */

typedef struct WorkerShipResult {
        char sha256[STORE_SHA256_HEX]; /* of the stream ("" if the receiver had it already) */
        uint64_t bytes;
        char parent[STORE_NAME_MAX];   /* what the stream was incremental against, "" = a full stream */
        bool complete;                 /* the receiver had it already: nothing was sent */
} WorkerShipResult;

/* Worker from sends its copy of a checkpoint (sandbox_id, name; template_name:
 * the sandbox's template, a parent candidate) or of a template (sandbox_id
 * NULL) to worker to, which keeps it only once complete and verified. Both
 * must be live. */
int worker_ship(WorkerClient *w, const char *from, const char *to, const char *sandbox_id, const char *name,
                const char *template_name, WorkerShipResult *ret, ApiError *e);
/* Removes a checkpoint's copy from one worker (which need not hold the sandbox). */
int worker_checkpoint_remove_on(WorkerClient *w, const char *worker, const char *sandbox_id, const char *checkpoint_id,
                                ApiError *e);
/* A lost sandbox comes back on a live worker that holds an available copy of
 * the checkpoint (the store's checkpoint_copies): its root is made from the
 * checkpoint there and it starts afresh. The sandbox's row names that worker
 * before the try. ret_worker (STORE_NAME_MAX): where it now runs.
 * API_CONFLICT if no live worker holds a copy. */
int worker_sandbox_recover(WorkerClient *w, const Sandbox *sb, const char *checkpoint_id, char *ret_worker,
                           int64_t *ret_pid, uint64_t *ret_starttime, ApiError *e);
