/* SPDX-License-Identifier: MIT */
#pragma once

/* spaced's configuration: one table yields the struct, the defaults, the
 * bounds, the SPACE_* environment names, --help and the docs table.
 * Precedence: command line > environment > config file > default.
 * Unknown keys are an error. */

#include "macros.h"

#define CONFIG_GATEWAY_UDP_PORTS 8U /* consecutive UDP ports of the gateway (GATEWAY_UDP_PORTS) */
#define CONFIG_STR_MAX 512
#define CONFIG_WARM_POOLS_MAX 16U       /* templates in warm_pool */
#define CONFIG_WARM_POOL_SIZE_MAX 64U   /* sandboxes kept warm per template */
#define CONFIG_WARM_POOL_NAME_MAX 64U   /* a template name */
#define CONFIG_CHECKPOINTS_MAX 256U     /* bound of checkpoints_max */
#define CONFIG_DISK_OVERCOMMIT_MIN_PERMILLE 100U    /* disk_overcommit 0.1 */
#define CONFIG_DISK_OVERCOMMIT_MAX_PERMILLE 100000U /* disk_overcommit 100 */

/* role worker with worker_oom_protect=on: its /proc/self/oom_score_adj. */
#define WORKER_OOM_SCORE_ADJ_STR "-900"

typedef struct Config {
        char role[16];                 /* all | api | worker | controller */
        char listen[CONFIG_STR_MAX];
        char ingress_listen[CONFIG_STR_MAX]; /* the ingress reverse proxy, "" = off */
        char ingress_domain[CONFIG_STR_MAX]; /* {port}-{sandbox}.<this> */
        char ingress_tls_cert[CONFIG_STR_MAX]; /* PEM chain; "" (with the key) = plaintext */
        char ingress_tls_key[CONFIG_STR_MAX];
        char state_dir[CONFIG_STR_MAX];
        char store_url[CONFIG_STR_MAX];
        char storage[16];              /* auto | btrfs | overlay */
        char pool_path[CONFIG_STR_MAX];/* an existing btrfs mount; empty = image in state dir */
        uint64_t pool_size_mb;
        char disk_overcommit[16];      /* a decimal: pool size x this = the disk quotas it may promise */
        uint64_t disk_overcommit_permille; /* parsed from disk_overcommit by config_finish() */
        uint64_t pool_reserve_mb;      /* kept free for the daemon; 0 = automatic (pool.h) */
        char agent_path[CONFIG_STR_MAX];
        char template_dir[CONFIG_STR_MAX];
        char instance[33];             /* this daemon's name on the host; "" = derived (instance.h) */
        char cgroup_root[128];         /* "" = the instance name */
        char log_level[16];
        char log_format[16];           /* logfmt | json */
        uint64_t log_health_requests;  /* 1: probes and scrapes are logged */
        char log_file[CONFIG_STR_MAX];  /* "" = stderr */
        uint64_t log_max_mb;            /* log_file is rotated to .1 past this; 0 = never */
        char default_template[128];
        uint64_t uid_base;             /* 0 = chosen at the first start (instance.h) */
        uint64_t slots_max;
        uint64_t default_cpu_millis;
        uint64_t default_memory_mb;
        uint64_t default_disk_mb;
        uint64_t default_pids_max;
        uint64_t default_timeout_s;
        uint64_t max_cpu_millis;
        uint64_t max_memory_mb;
        uint64_t max_disk_mb;
        uint64_t max_pids;
        uint64_t max_timeout_s;
        uint64_t max_sandboxes;
        uint64_t root_spares;
        uint64_t upload_max_mb;
        uint64_t exec_buffer_kb;       /* output buffer per exec (in the agent) */
        uint64_t exec_stall_ms;        /* a reader idle this long no longer holds an exec up */
        uint64_t exec_keep_s;          /* a finished exec's output and exit are kept this long */
        uint64_t http_stall_s;         /* a client stalled this long on a body or response is dropped */
        uint64_t seccomp_io_uring;
        uint64_t webhook_allow_private; /* webhooks may call private, loopback, metadata and host addresses */
        uint64_t webhook_give_up_s;    /* a webhook failing one event this long is disabled */
        uint64_t auto_resume_paused;   /* exec/file calls on a paused sandbox resume it instead of a 409 */
        uint64_t debug_timing;         /* API responses carry Server-Timing (store time, total) */
        uint64_t max_branch;           /* most sandboxes one branch call makes */
        uint64_t checkpoint_keep_last; /* automatic checkpoints kept before the hourly/daily thinning */
        char vm_kernel_dir[CONFIG_STR_MAX];
        char vm_qemu[CONFIG_STR_MAX];
        char default_runtime[8];       /* ns | vm | auto: for a create that names none */
        char vm_accel[16];             /* auto | kvm | tcg */
        char vm_kvm_device[CONFIG_STR_MAX]; /* looked for by vm_accel auto */
        uint64_t vm_base_snapshots;    /* 1: creates restore a base snapshot of the template */
        uint64_t checkpoints_max;      /* most checkpoints per sandbox */
        uint64_t checkpoints_max_mb;   /* most MiB a sandbox's checkpoints hold exclusively; 0 = its disk_mb */
        char warm_pool[CONFIG_STR_MAX];/* "template:count,..." kept created and paused */
        char default_network[CONFIG_STR_MAX]; /* egress policy JSON of a create that names none; "" = no egress */
        uint64_t e2b_internet;         /* 1: E2B creates and network updates that leave allowInternetAccess unset get it */
        char gateway_ca_file[CONFIG_STR_MAX]; /* CA bundle intercepted upstreams are verified against; "" = the host's */
        char registry_ca_file[CONFIG_STR_MAX]; /* CA bundle registries are verified against; "" = the host's */
        char registry_insecure[CONFIG_STR_MAX]; /* registries (host[:port],...) pulled from over plain http */
        char registry_resolve[CONFIG_STR_MAX]; /* "name=address,...": registry hosts reached without DNS */
        uint64_t registry_timeout_s;
        char gateway_dns_upstream[64]; /* "a.b.c.d[:port]" the gateway resolves through; "" = /etc/resolv.conf */
        char net_pool[32];             /* private IPv4 CIDR the sandbox links' /31s come from; "" = chosen */
        char net_table[40];            /* this daemon's nftables table (inet); "" = the instance name */
        char net_link_prefix[16];      /* name prefix of this daemon's host-side links; "" = derived */
        char gateway[8];               /* on | off: the egress gateway process */
        char worker_oom_protect[8];    /* on | off: role worker's oom_score_adj WORKER_OOM_SCORE_ADJ */
        uint64_t gateway_dns_port;     /* the gateway's listeners on every host end */
        uint64_t gateway_proxy_port;
        uint64_t gateway_transparent_port;
        uint64_t gateway_udp_port;     /* the first of CONFIG_GATEWAY_UDP_PORTS */
        /* scale-out (roles other than "all") */
        char worker_name[128];
        char worker_listen[CONFIG_STR_MAX];
        char controller_listen[CONFIG_STR_MAX];
        char worker_address[CONFIG_STR_MAX];
        char cluster_token_file[CONFIG_STR_MAX];
        char cluster_tls[8];                   /* on|off */
        char cluster_tls_cert[CONFIG_STR_MAX]; /* "" = no TLS (loopback or cluster_tls=off only) */
        char cluster_tls_key[CONFIG_STR_MAX];
        char cluster_tls_ca[CONFIG_STR_MAX];
        char master_key_file[CONFIG_STR_MAX]; /* credentials' master key; "" = <state_dir>/master.key */
        char master_key_previous_file[CONFIG_STR_MAX]; /* the key before a rotation (opens, never seals); "" = none */
        uint64_t worker_lost_timeout_s;
        uint64_t controller_lease_s;
        uint64_t controller_stall_s;
        uint64_t worker_cpu_millis;
        uint64_t worker_memory_mb;
        uint64_t ship_checkpoints;
        /* tenancy limits: per API key, per tenant (its keys together), quotas' defaults */
        uint64_t key_rps, key_burst, key_streams_max, key_requests_max;
        uint64_t admin_key_rps, admin_key_burst, admin_key_streams_max, admin_key_requests_max;
        uint64_t admin_reserved_connections;
        uint64_t peer_idle_connections_max;
        uint64_t tenant_rps, tenant_streams_max, tenant_requests_max;
        uint64_t tenant_max_sandboxes, tenant_max_cpu_millis, tenant_max_memory_mb, tenant_max_disk_mb;
        uint64_t tenant_max_checkpoints;
} Config;

/* One entry of warm_pool. */
typedef struct ConfigWarmPool {
        char template_name[CONFIG_WARM_POOL_NAME_MAX + 1];
        uint64_t count;
} ConfigWarmPool;

typedef enum ConfigType {
        CONFIG_STRING,
        CONFIG_U64,
} ConfigType;

typedef struct ConfigItem {
        const char *key;      /* file key and --key; env is SPACE_<KEY upper> */
        ConfigType type;
        size_t offset;
        size_t size;          /* for strings: buffer size */
        const char *def;      /* default, as text */
        uint64_t min, max;    /* bounds for numbers */
        const char *choices;  /* "a|b|c" or NULL */
        const char *help;
} ConfigItem;

extern const ConfigItem config_table[];
extern const size_t config_table_size;

/* Sets every default. */
void config_defaults(Config *c);
/* Sets one key from text, checking bounds; errbuf gets a one-line reason. */
int config_set(Config *c, const char *key, const char *value, char *errbuf, size_t errbuf_size);
/* Loads "key = value" lines ('#' comments). */
int config_load_file(Config *c, const char *path, char *errbuf, size_t errbuf_size);
/* Applies SPACE_* variables from the environment (unknown SPACE_* names are an error,
 * except the client-side ones SPACE_URL, SPACE_API_KEY). */
int config_load_env(Config *c, char *errbuf, size_t errbuf_size);
/* Derives what depends on others (store_url and agent_path defaults). */
int config_finish(Config *c, char *errbuf, size_t errbuf_size);
/* A decimal ratio ("1", "1.5", "0.25": digits, at most 3 decimals) in
 * thousandths, in [min, max]; -EINVAL / -ERANGE with a reason in errbuf. */
int config_parse_ratio_permille(const char *s, uint64_t min, uint64_t max, uint64_t *ret, char *errbuf,
                                size_t errbuf_size);
/* Parses a warm_pool value ("base:2,debian:1"; "" = none): template names as
 * in the API, counts 0..CONFIG_WARM_POOL_SIZE_MAX, no name twice. -EINVAL
 * with a one-line reason in errbuf. config_finish() checks the configured one. */
int config_warm_pools(const char *s, ConfigWarmPool ret[static CONFIG_WARM_POOLS_MAX], size_t *ret_n, char *errbuf,
                      size_t errbuf_size);
/* Prints the option table (for --help and docs). */
void config_print_help(FILE *f);

/* What one sandbox's checkpoints may hold: its own caps (checkpoints_max,
 * checkpoints_mb; 0 = unset), else the host's (checkpoints_max,
 * checkpoints_max_mb, whose 0 means the sandbox's disk_mb). */
void config_checkpoint_caps(const Config *c, uint64_t sb_max, uint64_t sb_mb, uint64_t disk_mb, uint64_t *ret_max,
                            uint64_t *ret_mb);
