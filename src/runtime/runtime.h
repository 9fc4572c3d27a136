/* SPDX-License-Identifier: MIT */
#pragma once

/* A runtime turns a root filesystem plus limits into a running, isolated
 * guest with space-agent as PID 1. Variants are ops tables registered in one
 * visible table (runtime.c). Every call runs in the worker process, which
 * starts no threads. */

#include <linux/filter.h>
#include <netinet/in.h>
#include <sys/types.h>

#include "macros.h"

#define RUNTIME_ID_RANGE 65536U /* host uids/gids per sandbox */

typedef struct RuntimeLimits {
        uint32_t cpu_millis;  /* 1000 = one CPU; 0 = unlimited */
        uint64_t memory_bytes;/* 0 = unlimited */
        uint32_t pids_max;    /* 0 = unlimited; also RLIMIT_NPROC */
        uint64_t fsize_bytes; /* RLIMIT_FSIZE; 0 = unlimited */
        uint32_t io_weight;   /* 1..10000 (v2 io.weight; v1 blkio weight where a BFQ/CFQ scheduler has it); 0 = default */
} RuntimeLimits;

static inline bool runtime_limits_equal(const RuntimeLimits *a, const RuntimeLimits *b) {
        return a->cpu_millis == b->cpu_millis && a->memory_bytes == b->memory_bytes && a->pids_max == b->pids_max &&
               a->fsize_bytes == b->fsize_bytes && a->io_weight == b->io_weight;
}

/* A volume mounted into an ns sandbox (idmapped into its user namespace,
 * like its root): files stored as uid N appear as N inside. */
#define RUNTIME_VOLUMES_MAX 16
#define RUNTIME_VOLUME_PATH_MAX 256 /* the path inside, with its NUL */
typedef struct RuntimeVolume {
        const char *host_path;     /* the volume's directory on the host (pool) */
        const char *path;          /* inside the sandbox: absolute, no "." or ".." (the API validated it) */
        bool read_only;
} RuntimeVolume;

typedef struct RuntimeSpec {
        const char *id;
        const char *root_path;     /* the sandbox's root directory on the host (pool) */
        const char *hostname;
        uid_t uid_base;            /* host id of root inside; RUNTIME_ID_RANGE ids from here */
        RuntimeLimits limits;
        char **env;                /* "K=V" for the agent (and so every process), may be NULL */
        const char *agent_socket;  /* host path of the agent's listening socket to create */
        int agent_exe_fd;          /* an fd of the space-agent binary (sealed memfd) */
        const struct sock_fprog *seccomp; /* installed right before the agent runs; NULL = none */
        bool seccomp_notify;       /* ns: seccomp has SECCOMP_USER_NOTIF rows: PID 1 gets the listener (statfs-notify.h) */
        const char *disk_path;     /* vm: the sandbox's raw root disk (root_path unused) */
        uint32_t vcpus;            /* vm: virtual CPUs (0 = 1) */
        const char *restore_path;  /* vm: continue from this saved machine (memory and devices) instead of booting;
                                    * the guest is then told who it is (identify) before create returns */
        bool new_identity;         /* vm, with restore_path: a new sandbox from another's memory (fresh machine-id) */
        bool neutral;              /* vm: boot with no environment and the hostname "space" (a base snapshot is
                                    * saved from it before identify gives it its own) */
        const char *resolv_conf;   /* written to /etc/resolv.conf inside; NULL = left alone */
        const RuntimeVolume *volumes; /* ns: mounted with the root (given with it when root_later) */
        size_t n_volumes;          /* at most RUNTIME_VOLUMES_MAX */
        /* ns: PID 1 becomes a child of the caller's parent (CLONE_PARENT): a
         * small spawner process clones for the worker, which reaps. A spawn
         * that fails after the clone leaves the killed PID 1's pid in
         * RuntimePending.pid for that parent to reap. */
        bool clone_parent;
        /* ns: spawn returns before PID 1 is in its cgroup v1 hierarchies
         * (each move waits for an RCU grace period, milliseconds): settle()
         * moves it, after the caller has handed PID 1 on, which gives it its
         * root and makes its network meanwhile. PID 1 waits for it before its
         * cgroup namespace and the rest of its setup (it has forked nothing,
         * run nothing); if settle fails or never comes, its setup fails. */
        bool settle_later;
        /* ns: spawn returns before the root exists (PID 1 waits for it):
         * give_root() hands it over once it is made at root_path */
        bool root_later;
        /* vm: the guest's network (net false: none). The VMM's virtio-net
         * device is the other end of the tap net_fd (the caller's, not taken);
         * the guest configures eth0 with net_addr/31 and a default route via
         * net_gateway (the tap's address); IPv6 is off in the guest. */
        bool net;
        int net_fd;
        uint8_t net_mac[6];
        struct in_addr net_addr, net_gateway;
} RuntimeSpec;

/* What a runtime needs to know about the host, given once at worker start. */
typedef struct RuntimeHost {
        const char *state_dir;
        const char *run_dir;       /* <state>/run/sandboxes: <run_dir>/<id>/ holds a sandbox's sockets */
        const char *vm_kernel_dir; /* vm: vmlinux, modules.cpio, version (vm/kernel/build.sh) */
        const char *vm_accel;      /* vm: "auto" | "kvm" | "tcg" */
        const char *vm_kvm_device; /* vm: the device accel auto looks for (NULL/"": /dev/kvm) */
        const char *vm_qemu;       /* vm: the QEMU binary (qemu-system-x86_64) */
        int agent_exe_fd;          /* space-agent (sealed memfd) */
} RuntimeHost;

typedef struct RuntimeInstance {
        pid_t pid;                 /* host pid of the sandbox's PID 1 */
        uint64_t starttime;        /* /proc/PID/stat starttime (detects pid reuse) */
        int pidfd;                 /* owned by the caller; readable when PID 1 exits */
} RuntimeInstance;

/* A guest between spawn and finish: it is setting itself up. */
typedef struct RuntimePending {
        char id[64];
        char agent_socket[108];    /* sun_path */
        pid_t pid;
        int pidfd;
        int sync_fd;               /* readable once the guest is ready (or failed): finish will not block then */
        uint64_t deadline_usec;    /* CLOCK_MONOTONIC: finish gives up then (0: the runtime's own bound) */
        bool settle_pending;       /* ns, spawned with settle_later: settle() follows (settle_fd is valid) */
        int settle_fd;
        bool accel_probe;          /* vm: this boot tells whether KVM works here; if it does not, finish
                                    * returns -EAGAIN and the runtime uses TCG from then on (boot again) */
} RuntimePending;

/* vm: where the choice of accelerator stands (accel auto: KVM only once a boot under it worked). */
typedef enum RuntimeAccelProbe {
        RUNTIME_ACCEL_DECIDED,     /* the accelerator is known */
        RUNTIME_ACCEL_UNDECIDED,   /* the next create's boot (no saved machine) is the probe */
        RUNTIME_ACCEL_PROBING,     /* a probe boot runs: other boots run under TCG (creates wait for its verdict) */
} RuntimeAccelProbe;

/* How a runtime's guests differ where the worker acts on them, as facts of
 * the runtime: the worker reads these, it never asks which runtime it holds. */
typedef enum RuntimeRoot {
        RUNTIME_ROOT_TREE,   /* a directory tree in the pool (spec.root_path, idmapped): the host writes into it
                              * (the trust store), its quota can change while it runs */
        RUNTIME_ROOT_IMAGE,  /* a raw disk image of a fixed size (spec.disk_path), made before the guest starts:
                              * the host reaches its files only through the guest's agent */
} RuntimeRoot;

typedef enum RuntimeNet {
        RUNTIME_NET_VETH,    /* a veth pair whose peer the worker moves into PID 1's network namespace once
                              * PID 1 exists; its host end can be made again while the sandbox runs */
        RUNTIME_NET_TAP,     /* a tap the worker makes before spawn and the VMM holds (spec.net, spec.net_fd):
                              * it lives as long as the VMM and cannot be made again */
} RuntimeNet;

typedef enum RuntimeStart {
        RUNTIME_START_SPAWN, /* PID 1 is a host process cloned in milliseconds by the worker's spawner
                              * (spec.clone_parent), within the create call; its processes are the host's, so
                              * seccomp user notification reaches the worker (spec.seccomp_notify) */
        RUNTIME_START_BOOT,  /* a machine boots, or loads a saved one, for seconds: the worker drives spawn and
                              * finish from its event loop (worker-boot.c) and answers the create then */
} RuntimeStart;

typedef struct RuntimeOps {
        const char *name;
        RuntimeRoot root;
        RuntimeNet net;
        RuntimeStart start;
        /* Probe: can this runtime run here? 0, or -errno and why (for errors and /v1/info). */
        int (*probe)(const RuntimeHost *host, char *why, size_t why_size);
        /* Facts for /v1/info as a JSON object (malloc'd), or NULL. */
        char *(*info_json)(void);
        int (*create)(const RuntimeSpec *spec, RuntimeInstance *ret, char *errbuf, size_t errbuf_size);
        /* create in two halves, so that several guests set themselves up at
         * once: spawn returns as soon as the guest runs its own setup; finish
         * waits for it to run space-agent (or unwinds everything on failure).
         * Every successful spawn is followed by exactly one finish; spec need
         * not outlive spawn. */
        int (*spawn)(const RuntimeSpec *spec, RuntimePending *ret, char *errbuf, size_t errbuf_size);
        int (*finish)(RuntimePending *p, RuntimeInstance *ret, char *errbuf, size_t errbuf_size);
        /* ns: after a spawn with settle_later (and once its answer is on its
         * way), PID 1 into its cgroup v1 hierarchies; it goes on once there.
         * A failure: PID 1's setup fails (finish reports it). */
        int (*settle)(RuntimePending *p, char *errbuf, size_t errbuf_size);
        /* ns: after a spawn with root_later, the root for PID 1 (made at the
         * spec's root_path meanwhile); a failure leaves PID 1 waiting: the
         * caller kills it (it never gets a root) before finish or instead. */
        int (*give_root)(RuntimePending *p, const char *root_path, const RuntimeVolume *volumes, size_t n_volumes,
                         char *errbuf, size_t errbuf_size);
        /* Kills every process of the sandbox and removes its host resources
         * (cgroups, agent socket). The root filesystem is the pool's. Idempotent. */
        int (*destroy)(const char *id, const char *agent_socket);
        /* Optional (NULL: destroy does it all). Sends SIGKILL to every process
         * of the sandbox and returns without
         * waiting; PID 1's pidfd turns readable once the kernel has torn the
         * sandbox's processes down, and destroy then finishes at once. */
        int (*kill)(const char *id);
        /* Re-adopts a sandbox found running after a restart: 0 and a pidfd if
         * pid is alive with that starttime and is in the sandbox's cgroup. */
        int (*adopt)(const char *id, pid_t pid, uint64_t starttime, int *ret_pidfd);
        /* Ids of every sandbox that has host resources (for the orphan scan). */
        int (*list)(char ***ret_ids);
        /* Freezes (every process stops where it stands, memory kept) or thaws. */
        int (*freeze)(const char *id, bool frozen);
        /* Changes the cgroup limits of a running sandbox. */
        int (*set_limits)(const char *id, const RuntimeLimits *limits);
        /* Saves the whole machine (memory, devices) to state_path and stops it
         * (vm; NULL where the runtime cannot keep processes). The caller then
         * destroys the sandbox's host resources as usual. */
        int (*suspend)(const char *id, const char *state_path);
        /* Processes killed by the kernel's OOM killer inside the sandbox so far. */
        int (*oom_kills)(const char *id, uint64_t *ret);
        /* Optional: why a sandbox whose PID 1 exited stopped, if the runtime
         * can tell more than the exit status (vm: the guest kernel panicked,
         * the guest broke the agent channel); -ENODATA if it cannot. */
        int (*stopped_reason)(const char *id, char *buf, size_t size);
        /* vm (NULL elsewhere): saves the running machine's memory and devices
         * to state_path, calls between(ctx) while the machine is stopped and
         * its disk consistent with that memory (the caller copies the disk
         * then), and lets it run on (paused: it stays paused). A failure of
         * between fails the call; the machine runs on either way. */
        int (*snapshot)(const char *id, const char *state_path, bool paused, int (*between)(void *ctx), void *ctx);
        /* vm: tells a running guest who it is (vm-restored.h): entropy, time,
         * spec's hostname and environment, a fresh machine-id if new_machine_id. */
        int (*identify)(const RuntimeSpec *spec, bool new_machine_id, char *errbuf, size_t errbuf_size);
        /* vm: tells a guest started with spec->neutral its identity (kept since its spawn), after the
         * worker saved it as a base snapshot. */
        int (*identify_deferred)(const char *id, const char *agent_socket, char *errbuf, size_t errbuf_size);
        /* vm: what a saved machine depends on besides its template and shape
         * (VMM, guest kernel, initramfs with the agent, accelerator), as text:
         * a base snapshot saved under another key cannot be restored. */
        int (*base_key)(char *buf, size_t size);
        /* vm: the running guest writes its dirty file data to its disk (before a disk-only copy). */
        int (*sync)(const char *agent_socket);
        /* vm (NULL: always decided): where the choice of accelerator stands. */
        RuntimeAccelProbe (*accel_probe_state)(void);
} RuntimeOps;

/* The runtimes there are, the default ("ns") first: RUNTIMES_MAX of them, by index or name. */
#define RUNTIMES_MAX 2
const RuntimeOps *runtime_nth(size_t i);
const RuntimeOps *runtime_find(const char *name);
size_t runtime_index(const RuntimeOps *rt);
extern const RuntimeOps ns_runtime_ops;
extern const RuntimeOps vm_runtime_ops;

/* /proc/PID/stat field 22. */
int proc_starttime(pid_t pid, uint64_t *ret);
