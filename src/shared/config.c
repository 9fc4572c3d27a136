/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "config.h"
#include "fd-util.h"
#include "space-build.h"
#include "str-util.h"

#define S(field) CONFIG_STRING, offsetof(Config, field), sizeof(((Config *) 0)->field)
#define U(field) CONFIG_U64, offsetof(Config, field), sizeof(uint64_t)
/* A worker's name: a host name (the default) or a Kubernetes node name fits, in
 * Config.worker_name. */
#define CONFIG_WORKER_NAME_MAX 127U

const ConfigItem config_table[] = {
        { "role", S(role), "all", 0, 0, "all|api|worker|controller", "which parts this process runs" },
        { "listen", S(listen), "127.0.0.1:7070", 0, 0, NULL, "HTTP API address (host:port or unix:/path)" },
        { "ingress_listen", S(ingress_listen), "127.0.0.1:7072", 0, 0, NULL, "address of the ingress, the reverse proxy to ports inside sandboxes at {port}-{sandbox}.{ingress_domain} (host:port; empty = off)" },
        { "ingress_domain", S(ingress_domain), "localhost", 0, 0, NULL, "base domain of the ingress's host names: {port}-{sandbox}.<this> (localhost works on one machine without DNS)" },
        { "ingress_tls_cert", S(ingress_tls_cert), "", 0, 0, NULL, "PEM certificate chain for TLS on the ingress (with ingress_tls_key; ALPN h2 and http/1.1; read at start); empty = plaintext" },
        { "ingress_tls_key", S(ingress_tls_key), "", 0, 0, NULL, "PEM private key of ingress_tls_cert" },
        { "state_dir", S(state_dir), "/var/lib/space", 0, 0, NULL, "state directory (store, pool, keys)" },
        { "store_url", S(store_url), "", 0, 0, NULL, "store; default sqlite:<state_dir>/space.db" },
        { "storage", S(storage), "auto", 0, 0, "auto|btrfs|overlay", "storage back end (auto: btrfs, else overlayfs)" },
        { "pool_path", S(pool_path), "", 0, 0, NULL, "an existing btrfs mount to use as pool; default: loop image in state_dir" },
        { "pool_size_mb", U(pool_size_mb), "16384", 1024, UINT64_C(1) << 30, NULL, "size of the sparse pool image" },
        { "disk_overcommit", S(disk_overcommit), "1.0", 0, 0, NULL, "how many times the pool's size the disk quotas of its sandboxes may add up to (a decimal, 0.1 to 100; 1.0: every sandbox can always write its whole quota)" },
        { "pool_reserve_mb", U(pool_reserve_mb), "0", 0, UINT64_C(1) << 30, NULL, "MiB of the pool kept free for the daemon's own writes and btrfs metadata, never promised to sandboxes; 0 = 5 % of the pool, at most 1024" },
        { "agent_path", S(agent_path), "", 0, 0, NULL, "space-agent binary; default: beside spaced" },
        { "template_dir", S(template_dir), "", 0, 0, NULL, "NAME.tar files imported as templates at start; default <datadir>/space/templates" },
        { "instance", S(instance), "", 0, 0, NULL, "this daemon's name on the host, which names what it makes there (cgroup root, nft table, links); default: space for the state_dir /var/lib/space, else space-<hash of the state_dir>, kept in <state_dir>/instance.json" },
        { "cgroup_root", S(cgroup_root), "", 0, 0, NULL, "cgroup (below each hierarchy's root) that holds sandboxes; default: the instance name" },
        { "log_level", S(log_level), "info", 0, 0, "error|warning|info|debug", "log level" },
        { "log_format", S(log_format), "logfmt", 0, 0, "logfmt|json", "log lines as logfmt or as one JSON object each (fields as fields)" },
        { "log_health_requests", U(log_health_requests), "0", 0, 1, NULL, "1: requests of /healthz, /readyz and /metrics are logged too (default: not, as probes and scrapers ask often)" },
        { "log_file", S(log_file), "", 0, 0, NULL, "role all: write the log (and the worker's) to this file instead of stderr; reopened on SIGHUP (space up sets <state_dir>/spaced.log)" },
        { "log_max_mb", U(log_max_mb), "64", 0, UINT64_C(1) << 20, NULL, "log_file is renamed to FILE.1 and begun anew once larger than this; 0 = never" },
        { "debug_timing", U(debug_timing), "0", 0, 1, NULL, "1: every API response carries Server-Timing: time its request waited on the store, and in all (benchmarks)" },
        { "default_template", S(default_template), "base", 0, 0, NULL, "template of a create that names none" },
        { "uid_base", U(uid_base), "0", 0, UINT64_C(4000000000), NULL, "first host uid of sandbox id ranges; 0: 1000000000 for instance space, else a range no other instance on the host holds, chosen at the first start and kept in <state_dir>/instance.json" },
        { "slots_max", U(slots_max), "4096", 1, 65536, NULL, "sandbox uid/gid ranges (65536 ids each)" },
        { "default_cpu_millis", U(default_cpu_millis), "1000", 10, 1024000, NULL, "CPU quota of a new sandbox (1000 = one CPU)" },
        { "default_memory_mb", U(default_memory_mb), "512", 16, UINT64_C(1) << 30, NULL, "memory limit of a new sandbox" },
        { "default_disk_mb", U(default_disk_mb), "2048", 16, UINT64_C(1) << 30, NULL, "disk quota of a new sandbox" },
        { "default_pids_max", U(default_pids_max), "1024", 8, 4194304, NULL, "process limit of a new sandbox" },
        { "default_timeout_s", U(default_timeout_s), "0", 0, UINT64_C(1) << 40, NULL, "lifetime of a new sandbox, 0 = none" },
        { "max_cpu_millis", U(max_cpu_millis), "64000", 10, 1024000, NULL, "upper bound for cpu in a request" },
        { "max_memory_mb", U(max_memory_mb), "65536", 16, UINT64_C(1) << 30, NULL, "upper bound for memory_mb" },
        { "max_disk_mb", U(max_disk_mb), "262144", 16, UINT64_C(1) << 30, NULL, "upper bound for disk_mb" },
        { "max_pids", U(max_pids), "32768", 8, 4194304, NULL, "upper bound for pids_max" },
        { "max_timeout_s", U(max_timeout_s), "2592000", 1, UINT64_C(1) << 40, NULL, "upper bound for timeout_s" },
        { "max_sandboxes", U(max_sandboxes), "1000", 1, 65536, NULL, "live sandboxes per host" },
        { "root_spares", U(root_spares), "2", 0, 8, NULL, "roots made ahead for each of the (8) templates creates used last (btrfs pools: a create takes one instead of snapshotting its template), on a low-priority thread; 0 = off" },
        { "seccomp_io_uring", U(seccomp_io_uring), "0", 0, 1, NULL, "1 lets sandboxes use io_uring (off: a large kernel attack surface)" },
        { "exec_buffer_kb", U(exec_buffer_kb), "1024", 256, 262144, NULL, "output of each exec kept in its sandbox for readers that fall behind or reattach (charged to the sandbox's memory); beyond it the oldest is dropped" },
        { "exec_stall_ms", U(exec_stall_ms), "5000", 0, 3600000, NULL, "an exec reader that takes no output for this long no longer holds the command up (its output then goes to the buffer only); 0 = readers never hold a command up" },
        { "exec_keep_s", U(exec_keep_s), "600", 0, 604800, NULL, "how long a finished exec's buffered output and exit stay for reattaching readers (at most 64 per sandbox)" },
        { "http_stall_s", U(http_stall_s), "30", 1, 3600, NULL, "a client that sends no byte of a request body, or takes no byte of a response, for this long is dropped" },
        { "upload_max_mb", U(upload_max_mb), "4096", 1, UINT64_C(1) << 30, NULL, "largest file upload" },
        { "auto_resume_paused", U(auto_resume_paused), "0", 0, 1, NULL, "1: exec and file calls on a paused sandbox resume it (else 409 sandbox_paused)" },
        { "max_branch", U(max_branch), "16", 1, 64, NULL, "most sandboxes one branch call may make" },
        { "checkpoint_keep_last", U(checkpoint_keep_last), "5", 1, 1000, NULL, "automatic checkpoints kept per sandbox before hourly (24 h) and daily (7 d) thinning" },
        { "vm_kernel_dir", S(vm_kernel_dir), "", 0, 0, NULL, "guest kernel of the vm runtime (vm/kernel/build.sh DIR); default <state_dir>/vm/kernel" },
        { "vm_qemu", S(vm_qemu), "/usr/bin/qemu-system-x86_64", 0, 0, NULL, "QEMU binary of the vm runtime (an absolute path)" },
        { "default_runtime", S(default_runtime), "ns", 0, 0, "ns|vm|auto", "the runtime of a sandbox whose create, template and tenant name none (auto: vm where the vm runtime reports KVM, else ns)" },
        { "vm_accel", S(vm_accel), "auto", 0, 0, "auto|kvm|tcg", "vm runtime acceleration (auto: KVM if a boot works, else TCG emulation)" },
        { "vm_kvm_device", S(vm_kvm_device), "/dev/kvm", 0, 0, NULL, "the KVM device vm_accel auto looks for (where it is there, the first boot probes KVM)" },
        { "vm_base_snapshots", U(vm_base_snapshots), "1", 0, 1, NULL, "1: a vm create restores a booted template VM saved once per template and shape (base snapshot) instead of booting" },
        { "checkpoints_max", U(checkpoints_max), "64", 1, CONFIG_CHECKPOINTS_MAX, NULL, "most checkpoints one sandbox may hold (default and upper bound of its checkpoints_max)" },
        { "checkpoints_max_mb", U(checkpoints_max_mb), "0", 0, UINT64_C(1) << 40, NULL, "most MiB one sandbox's checkpoints may hold exclusively (default and upper bound of its checkpoints_mb); 0 = the sandbox's disk_mb" },
        { "warm_pool", S(warm_pool), "", 0, 0, NULL, "sandboxes kept created and paused per template, e.g. base:2,debian:1" },
        { "gateway_dns_upstream", S(gateway_dns_upstream), "", 0, 0, NULL, "the resolver the egress gateway asks, a.b.c.d[:port]; default: the first nameserver of /etc/resolv.conf" },
        { "gateway_ca_file", S(gateway_ca_file), "", 0, 0, NULL, "CA bundle (PEM) the gateway verifies upstreams against when it puts credentials on their requests; default: the host's trust store (/etc/ssl/certs)" },
        { "e2b_internet", U(e2b_internet), "0", 0, 1, NULL, "1: an E2B create or network update that leaves allowInternetAccess unset gets internet access, as on E2B (the gateway's guard still refuses the host, other sandboxes, loopback, link-local, metadata); 0: space's default (default_network, else no egress)" },
        { "registry_ca_file", S(registry_ca_file), "", 0, 0, NULL, "CA bundle (PEM) template pulls verify registries (and their token services and blob stores) against; default: the host's trust store" },
        { "registry_insecure", S(registry_insecure), "", 0, 0, NULL, "registries (host[:port], comma-separated) template pulls reach over plain http instead of https; a credential is never sent to them" },
        { "registry_resolve", S(registry_resolve), "", 0, 0, NULL, "registry hosts reached at a fixed address instead of asking DNS, as name=address (comma-separated), e.g. registry.internal=10.0.0.5; TLS still verifies the name" },
        { "registry_timeout_s", U(registry_timeout_s), "60", 1, 3600, NULL, "a registry that sends or takes no byte for this long fails the template pull" },
        { "webhook_allow_private", U(webhook_allow_private), "0", 0, 1, NULL, "1: webhooks may call loopback, link-local, metadata, private and the host's own addresses and the sandboxes' network (a test or a trusted single-tenant host); 0: those are refused at create and at every delivery" },
        { "webhook_give_up_s", U(webhook_give_up_s), "86400", 60, UINT64_C(30) * 86400, NULL, "a webhook whose deliveries of one event keep failing this long is disabled (a PATCH enabled=true starts it again at that event)" },
        { "default_network", S(default_network), "", 0, 0, NULL, "egress policy of a create that names none, as JSON (e.g. {\"allow\":[\"pypi.org\"]}); empty = no egress" },
        { "net_pool", S(net_pool), "", 0, 0, NULL, "private IPv4 CIDR of the sandbox links: slot n is the /31 at base+2n (host end) and base+2n+1 (sandbox); must hold slots_max /31s; default: 10.200.0.0/16 for instance space, else a block of 10.201.0.0-10.255.255.255 no other instance holds, chosen at the first start and kept in <state_dir>/instance.json" },
        { "net_table", S(net_table), "", 0, 0, NULL, "nftables table (inet) holding this daemon's sandbox firewall; unique per daemon on a host; default: the instance name" },
        { "net_link_prefix", S(net_link_prefix), "", 0, 0, NULL, "name prefix of this daemon's host-side links: 1-9 letters or digits and a final '-'; unique per daemon on a host; default: sp- for instance space, else sp<6 hex>-" },
        { "gateway", S(gateway), "on", 0, 0, "on|off", "the egress gateway process (off: sandboxes reach nothing at all)" },
        { "gateway_dns_port", U(gateway_dns_port), "10053", 1, 65535, NULL, "the gateway's DNS port on each host end (sandbox port 53 is redirected to it)" },
        { "gateway_proxy_port", U(gateway_proxy_port), "10080", 1, 65535, NULL, "the gateway's explicit HTTP proxy port on each host end (HTTP_PROXY in sandboxes)" },
        { "gateway_transparent_port", U(gateway_transparent_port), "10081", 1, 65535, NULL, "the gateway's port for intercepted TCP (every other TCP connection of a sandbox is redirected to it)" },
        { "gateway_udp_port", U(gateway_udp_port), "10082", 1, 65535 - 7, NULL, "the first of the gateway's 8 UDP ports on each host end (every datagram of a sandbox but DNS is redirected to them, and relayed only where a rule names UDP)" },
        { "worker_name", S(worker_name), "", 0, 0, NULL, "role worker: its unique name in the cluster (letters, digits, ., _, -); default: the host name" },
        { "worker_listen", S(worker_listen), "", 0, 0, NULL, "role worker: internal listener (host:port) for API servers and controllers" },
        { "worker_address", S(worker_address), "", 0, 0, NULL, "role worker: host:port others reach it at; default: worker_listen" },
        { "cluster_token_file", S(cluster_token_file), "", 0, 0, NULL, "roles api, worker, controller: file (mode 0600) with the shared cluster token" },
        { "cluster_tls", S(cluster_tls), "on", 0, 0, "on|off", "roles api, worker, controller: on: the worker protocol (worker_listen) runs over mutual TLS 1.3 when cluster_tls_cert, _key and _ca are set, and a worker without them listens on a loopback address only; off: plaintext (a test network, or TLS terminated outside)" },
        { "cluster_tls_cert", S(cluster_tls_cert), "", 0, 0, NULL, "roles api, worker, controller: this node's certificate (PEM, with its chain), signed by cluster_tls_ca; a worker's names its worker_name (subjectAltName DNS); read again when it changes (looked at for each new connection)" },
        { "cluster_tls_key", S(cluster_tls_key), "", 0, 0, NULL, "roles api, worker, controller: the private key of cluster_tls_cert (PEM, mode 0600)" },
        { "cluster_tls_ca", S(cluster_tls_ca), "", 0, 0, NULL, "roles api, worker, controller: the cluster CA (PEM): peers' certificates must be signed by it" },
        { "master_key_file", S(master_key_file), "", 0, 0, NULL, "the credentials' master key (32 bytes, mode 0600, owned by spaced's user); default <state_dir>/master.key, made at the first start of role all. A cluster's API servers and workers each need the same file to offer credentials" },
        { "master_key_previous_file", S(master_key_previous_file), "", 0, 0, NULL, "a master key rotation's window: the key before master_key_file (same rules), which still opens credentials sealed under it but seals nothing; see spaced rotate-master-key" },
        { "controller_listen", S(controller_listen), "", 0, 0, NULL, "role controller: host:port of its probes: GET /healthz (200 while its loop turns, 503 once it has not for controller_stall_s) and /metrics" },
        { "controller_stall_s", U(controller_stall_s), "30", 2, 3600, NULL, "role controller: /healthz fails when the controller loop has not turned for this long" },
        { "controller_lease_s", U(controller_lease_s), "10", 1, 300, NULL, "role controller: the leadership lease, judged by the store's clock; a leader that cannot renew it steps down before it ends, a standby takes over after it (a hung leader's, at most this plus a quarter)" },
        { "worker_lost_timeout_s", U(worker_lost_timeout_s), "15", 1, 3600, NULL, "a worker without heartbeat for this long is suspect (its sandboxes unreachable)" },
        { "worker_oom_protect", S(worker_oom_protect), "on", 0, 0, "on|off", "role worker: spaced and its worker process get oom_score_adj " WORKER_OOM_SCORE_ADJ_STR " (the OOM killer takes sandbox processes, at +500, long before it; an OOM kill of the worker is a crash of every sandbox's control)" },
        { "worker_cpu_millis", U(worker_cpu_millis), "0", 0, 1024000000, NULL, "role worker: CPU it offers (0 = all online CPUs)" },
        { "ship_checkpoints", U(ship_checkpoints), "1", 0, 16, NULL, "a cluster: workers besides the sandbox's own that get a copy of each checkpoint (btrfs send/receive), so that a lost sandbox can be restored elsewhere; 0 = none" },
        { "key_rps", U(key_rps), "100", 1, 1000000, NULL, "requests per second one API key may make (token bucket; more: 429 too_many_requests with Retry-After)" },
        { "key_burst", U(key_burst), "200", 1, 10000000, NULL, "requests one API key may make at once above key_rps (the bucket's size)" },
        { "key_streams_max", U(key_streams_max), "64", 1, 100000, NULL, "open streams (exec output, event follows, file transfers) per API key" },
        { "key_requests_max", U(key_requests_max), "128", 1, 100000, NULL, "requests in flight per API key (streams included)" },
        { "admin_key_rps", U(admin_key_rps), "1000", 1, 1000000, NULL, "key_rps of an admin key" },
        { "admin_key_burst", U(admin_key_burst), "2000", 1, 10000000, NULL, "key_burst of an admin key" },
        { "admin_key_streams_max", U(admin_key_streams_max), "256", 1, 100000, NULL, "key_streams_max of an admin key" },
        { "admin_key_requests_max", U(admin_key_requests_max), "512", 1, 100000, NULL, "key_requests_max of an admin key" },
        { "admin_reserved_connections", U(admin_reserved_connections), "64", 0, 512, NULL, "of the server's 1024 connections, the ones only admin keys' requests may take (the others' requests in flight stop short of them)" },
        { "peer_idle_connections_max", U(peer_idle_connections_max), "256", 0, 1024, NULL, "connections of one client address waiting for a request (idle keep-alive, or nothing sent yet): a newcomer past that closes that address's oldest; 0 = no per-address cap" },
        { "tenant_rps", U(tenant_rps), "200", 0, 1000000, NULL, "requests per second all non-admin keys of one tenant may make together (burst twice that); 0 = no tenant-wide rate; a tenant's own rps overrides it" },
        { "tenant_streams_max", U(tenant_streams_max), "128", 0, 100000, NULL, "open streams of all non-admin keys of one tenant together; 0 = no tenant-wide cap; a tenant's own streams overrides it" },
        { "tenant_requests_max", U(tenant_requests_max), "256", 1, 100000, NULL, "requests in flight of all non-admin keys of one tenant together" },
        { "tenant_max_sandboxes", U(tenant_max_sandboxes), "0", 0, 65536, NULL, "live sandboxes one tenant may hold (default of its quota `sandboxes`); 0 = unlimited (max_sandboxes still holds)" },
        { "tenant_max_cpu_millis", U(tenant_max_cpu_millis), "0", 0, UINT64_C(1) << 40, NULL, "CPU (1000 = one CPU) one tenant's live sandboxes may hold together; 0 = unlimited" },
        { "tenant_max_memory_mb", U(tenant_max_memory_mb), "0", 0, UINT64_C(1) << 40, NULL, "memory one tenant's live sandboxes may hold together; 0 = unlimited" },
        { "tenant_max_disk_mb", U(tenant_max_disk_mb), "0", 0, UINT64_C(1) << 40, NULL, "disk quota one tenant's live sandboxes may hold together; 0 = unlimited" },
        { "tenant_max_checkpoints", U(tenant_max_checkpoints), "0", 0, UINT64_C(1) << 40, NULL, "checkpoints one tenant's live sandboxes may hold together (taken through the API); 0 = unlimited" },
        { "worker_memory_mb", U(worker_memory_mb), "0", 0, UINT64_C(1) << 40, NULL, "role worker: memory it offers (0 = physical memory)" },
};
const size_t config_table_size = ELEMENTSOF(config_table);

static const ConfigItem *config_find(const char *key) {
        for (size_t i = 0; i < config_table_size; i++)
                if (streq(config_table[i].key, key))
                        return &config_table[i];
        return NULL;
}

static bool choice_ok(const char *choices, const char *v) {
        size_t n = strlen(v);
        const char *p = choices;

        while (p && *p) {
                const char *bar = strchr(p, '|');
                size_t len = bar ? (size_t) (bar - p) : strlen(p);
                if (len == n && strncmp(p, v, n) == 0)
                        return true;
                p = bar ? bar + 1 : NULL;
        }
        return false;
}

int config_set(Config *c, const char *key, const char *value, char *errbuf, size_t errbuf_size) {
        const ConfigItem *it = config_find(key);
        char *field;

        if (!it) {
                snprintf(errbuf, errbuf_size, "unknown configuration key '%s'", key);
                return -EINVAL;
        }
        field = (char *) c + it->offset;
        if (it->type == CONFIG_STRING) {
                if (it->choices && !choice_ok(it->choices, value)) {
                        snprintf(errbuf, errbuf_size, "%s: '%s' is not one of %s", key, value, it->choices);
                        return -EINVAL;
                }
                if (strscpy(field, it->size, value) < 0) {
                        snprintf(errbuf, errbuf_size, "%s: value longer than %zu bytes", key, it->size - 1);
                        return -EINVAL;
                }
                return 0;
        }

        uint64_t v;
        if (safe_atou64(value, &v) < 0) {
                snprintf(errbuf, errbuf_size, "%s: '%s' is not a non-negative integer", key, value);
                return -EINVAL;
        }
        if (v < it->min || v > it->max) {
                snprintf(errbuf, errbuf_size, "%s: %" PRIu64 " is out of range [%" PRIu64 ", %" PRIu64 "]", key, v,
                         it->min, it->max);
                return -ERANGE;
        }
        memcpy(field, &v, sizeof v);
        return 0;
}

void config_defaults(Config *c) {
        char err[256];
        memset(c, 0, sizeof *c);
        for (size_t i = 0; i < config_table_size; i++)
                (void) config_set(c, config_table[i].key, config_table[i].def, err, sizeof err);
}

static char *strip(char *s) {
        char *e;
        while (isspace((unsigned char) *s))
                s++;
        e = s + strlen(s);
        while (e > s && isspace((unsigned char) e[-1]))
                *--e = 0;
        return s;
}

int config_load_file(Config *c, const char *path, char *errbuf, size_t errbuf_size) {
        _cleanup_free_ char *text = NULL;
        char *save = NULL, *line;
        unsigned lineno = 0;
        int r;

        r = read_full_file(path, 1024 * 1024, &text, NULL);
        if (r < 0) {
                snprintf(errbuf, errbuf_size, "cannot read %s: %s", path, strerror(-r));
                return r;
        }
        for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *eq, *k, *v, sub[256];
                lineno++;
                line = strip(line);
                if (!*line || *line == '#')
                        continue;
                eq = strchr(line, '=');
                if (!eq) {
                        snprintf(errbuf, errbuf_size, "%s:%u: expected key = value", path, lineno);
                        return -EINVAL;
                }
                *eq = 0;
                k = strip(line);
                v = strip(eq + 1);
                if (strlen(v) >= 2 && v[0] == '"' && v[strlen(v) - 1] == '"') {
                        v[strlen(v) - 1] = 0;
                        v++;
                }
                r = config_set(c, k, v, sub, sizeof sub);
                if (r < 0) {
                        snprintf(errbuf, errbuf_size, "%s:%u: %s", path, lineno, sub);
                        return r;
                }
        }
        return 0;
}

extern char **environ;

int config_load_env(Config *c, char *errbuf, size_t errbuf_size) {
        static const char *const client_only[] = { "SPACE_URL", "SPACE_API_KEY", "SPACE_STATE_DIR",
                                                    "SPACE_CONFIG", "SPACE_BUILD_DIR", NULL };
        for (char **e = environ; e && *e; e++) {
                const char *rest = startswith(*e, "SPACE_");
                char key[128];
                const char *eq;
                size_t n;
                int r;

                if (!rest)
                        continue;
                eq = strchr(rest, '=');
                if (!eq)
                        continue;
                n = (size_t) (eq - rest);
                if (n == 0 || n >= sizeof key)
                        continue;
                for (size_t i = 0; i < n; i++)
                        key[i] = (char) tolower((unsigned char) rest[i]);
                key[n] = 0;

                bool skip = false;
                for (const char *const *k = client_only; *k; k++)
                        if (strncmp(*e, *k, strlen(*k)) == 0 && (*e)[strlen(*k)] == '=')
                                skip = true;
                if (skip) {
                        /* SPACE_STATE_DIR is shared with the CLI: honour it */
                        if (streq(key, "state_dir"))
                                (void) config_set(c, key, eq + 1, errbuf, errbuf_size);
                        continue;
                }
                r = config_set(c, key, eq + 1, errbuf, errbuf_size);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* host:port whose host is empty or a wildcard (0.0.0.0, ::, [::], *): fine
 * to listen on, no address to be reached at. */
static bool config_address_is_wildcard(const char *address) {
        static const char *const wildcards[] = { "", "0.0.0.0", "::", "[::]", "*", "0" };
        const char *colon = strrchr(address, ':');
        size_t n = colon ? (size_t) (colon - address) : strlen(address);

        for (size_t i = 0; i < ELEMENTSOF(wildcards); i++)
                if (strlen(wildcards[i]) == n && strncmp(address, wildcards[i], n) == 0)
                        return true;
        return false;
}

/* 127.0.0.0/8, ::1 or localhost: reachable from this host only. */
static bool config_address_is_loopback(const char *address) {
        const char *colon = strrchr(address, ':');
        size_t n = colon ? (size_t) (colon - address) : strlen(address);

        if (n == 9 && strncmp(address, "localhost", 9) == 0)
                return true;
        if (n == 5 && strncmp(address, "[::1]", 5) == 0)
                return true;
        return n > 4 && strncmp(address, "127.", 4) == 0;
}

/* A worker's name goes into events, logs and the store as it is: a short
 * name of safe characters (what a host name may hold, and '_'). */
static bool config_worker_name_is_valid(const char *name) {
        size_t n = strlen(name);

        if (n == 0 || n > CONFIG_WORKER_NAME_MAX || !isalnum((unsigned char) name[0]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char) name[i]) && !strchr("._-", name[i]))
                        return false;
        return true;
}

int config_finish(Config *c, char *errbuf, size_t errbuf_size) {
        if (c->state_dir[0] != '/') {
                snprintf(errbuf, errbuf_size, "state_dir must be an absolute path");
                return -EINVAL;
        }
        if (isempty(c->store_url)) {
                int k = snprintf(c->store_url, sizeof c->store_url, "sqlite:%s/space.db", c->state_dir);
                if (k < 0 || (size_t) k >= sizeof c->store_url) {
                        snprintf(errbuf, errbuf_size, "state_dir too long");
                        return -ENAMETOOLONG;
                }
        }
        if (isempty(c->agent_path)) {
                /* beside spaced, the build tree's layout, then the installed one */
                char self[PATH_MAX], cand[PATH_MAX];
                ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
                const char *const rel[] = { "space-agent", "../agent/space-agent", "../libexec/space/space-agent" };
                if (k > 0) {
                        char *slash;
                        self[k] = 0;
                        slash = strrchr(self, '/');
                        if (slash)
                                *slash = 0;
                        for (size_t i = 0; i < ELEMENTSOF(rel) && isempty(c->agent_path); i++)
                                if ((size_t) snprintf(cand, sizeof cand, "%s/%s", self, rel[i]) < sizeof cand &&
                                    access(cand, X_OK) == 0)
                                        (void) strscpy(c->agent_path, sizeof c->agent_path, cand);
                }
                if (isempty(c->agent_path))
                        (void) strscpy(c->agent_path, sizeof c->agent_path, SPACE_LIBEXECDIR "/space/space-agent");
        }
        if (!streq(c->role, "all")) {
                if (isempty(c->cluster_token_file)) {
                        snprintf(errbuf, errbuf_size, "role %s needs cluster_token_file", c->role);
                        return -EINVAL;
                }
                int n_tls = !isempty(c->cluster_tls_cert) + !isempty(c->cluster_tls_key) + !isempty(c->cluster_tls_ca);
                if (n_tls != 0 && n_tls != 3) {
                        snprintf(errbuf, errbuf_size,
                                 "cluster TLS needs all of cluster_tls_cert, cluster_tls_key and cluster_tls_ca");
                        return -EINVAL;
                }
                if (n_tls == 3 && streq(c->cluster_tls, "off")) {
                        snprintf(errbuf, errbuf_size, "cluster_tls=off with cluster_tls_cert set: choose one");
                        return -EINVAL;
                }
                if (streq(c->role, "worker") && n_tls == 0 && !streq(c->cluster_tls, "off") &&
                    !isempty(c->worker_listen) && !config_address_is_loopback(c->worker_listen)) {
                        snprintf(errbuf, errbuf_size,
                                 "worker_listen '%s' is not a loopback address and cluster TLS is not configured: "
                                 "set cluster_tls_cert, cluster_tls_key and cluster_tls_ca (docs/operations.md, "
                                 "Cluster TLS), or cluster_tls=off to run the worker protocol in plaintext",
                                 c->worker_listen);
                        return -EINVAL;
                }
                if (strncmp(c->store_url, "postgres", 8) != 0) {
                        snprintf(errbuf, errbuf_size, "role %s needs a shared store: store_url=postgres://...", c->role);
                        return -EINVAL;
                }
        }
        if (streq(c->role, "worker")) {
                if (isempty(c->worker_listen)) {
                        snprintf(errbuf, errbuf_size, "role worker needs worker_listen (host:port)");
                        return -EINVAL;
                }
                if (isempty(c->worker_address))
                        (void) strscpy(c->worker_address, sizeof c->worker_address, c->worker_listen);
                if (config_address_is_wildcard(c->worker_address)) {
                        snprintf(errbuf, errbuf_size,
                                 "worker_address '%s' is a wildcard address: others cannot reach this worker "
                                 "at it (set worker_address to this host's address)",
                                 c->worker_address);
                        return -EINVAL;
                }
                if (isempty(c->worker_name) &&
                    (gethostname(c->worker_name, sizeof c->worker_name - 1) < 0 || isempty(c->worker_name))) {
                        snprintf(errbuf, errbuf_size, "worker_name is not set and the host name is unknown");
                        return -EINVAL;
                }
                if (!config_worker_name_is_valid(c->worker_name)) {
                        snprintf(errbuf, errbuf_size,
                                 "worker_name '%.64s' is not a name: 1-%u letters, digits, '.', '_' or '-', "
                                 "starting with a letter or digit",
                                 c->worker_name, CONFIG_WORKER_NAME_MAX);
                        return -EINVAL;
                }
        }
        if (isempty(c->template_dir))
                (void) strscpy(c->template_dir, sizeof c->template_dir, SPACE_DATADIR "/templates");
        {
                ConfigWarmPool pools[CONFIG_WARM_POOLS_MAX];
                size_t n;
                char sub[256];
                int r = config_warm_pools(c->warm_pool, pools, &n, sub, sizeof sub);
                if (r < 0) {
                        snprintf(errbuf, errbuf_size, "warm_pool: %s", sub);
                        return r;
                }
        }
        if (c->gateway_dns_port == c->gateway_proxy_port || c->gateway_dns_port == c->gateway_transparent_port ||
            c->gateway_proxy_port == c->gateway_transparent_port ||
            (c->gateway_dns_port >= c->gateway_udp_port && c->gateway_dns_port < c->gateway_udp_port + CONFIG_GATEWAY_UDP_PORTS) ||
            (c->gateway_proxy_port >= c->gateway_udp_port && c->gateway_proxy_port < c->gateway_udp_port + CONFIG_GATEWAY_UDP_PORTS) ||
            (c->gateway_transparent_port >= c->gateway_udp_port && c->gateway_transparent_port < c->gateway_udp_port + CONFIG_GATEWAY_UDP_PORTS)) {
                snprintf(errbuf, errbuf_size, "the gateway ports must differ from each other (gateway_udp_port takes %u ports from it)", CONFIG_GATEWAY_UDP_PORTS);
                return -EINVAL;
        }
        if (c->uid_base != 0 && c->uid_base < 65536) {
                snprintf(errbuf, errbuf_size, "uid_base must be 0 (chosen) or at least 65536");
                return -ERANGE;
        }
        {
                char sub[128];
                int r = config_parse_ratio_permille(c->disk_overcommit, CONFIG_DISK_OVERCOMMIT_MIN_PERMILLE,
                                                    CONFIG_DISK_OVERCOMMIT_MAX_PERMILLE, &c->disk_overcommit_permille,
                                                    sub, sizeof sub);
                if (r < 0) {
                        snprintf(errbuf, errbuf_size, "disk_overcommit: %s", sub);
                        return r;
                }
        }
        if (c->default_cpu_millis > c->max_cpu_millis || c->default_memory_mb > c->max_memory_mb ||
            c->default_disk_mb > c->max_disk_mb || c->default_pids_max > c->max_pids) {
                snprintf(errbuf, errbuf_size, "a default limit is above its maximum");
                return -EINVAL;
        }
        return 0;
}

static bool warm_template_name_valid(const char *s, size_t n) {
        if (n == 0 || n > CONFIG_WARM_POOL_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char ch = s[i];
                bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
                if (!alnum && (i == 0 || (ch != '.' && ch != '_' && ch != '-')))
                        return false;
        }
        return true;
}

int config_warm_pools(const char *s, ConfigWarmPool ret[static CONFIG_WARM_POOLS_MAX], size_t *ret_n, char *errbuf,
                      size_t errbuf_size) {
        size_t n = 0;

        if (!s || !ret || !ret_n)
                return -EINVAL;
        while (*s) {
                size_t len = strcspn(s, ","), name_len;
                const char *colon = memchr(s, ':', len);
                char num[24];
                uint64_t count;

                if (!colon) {
                        snprintf(errbuf, errbuf_size, "'%.*s' is not TEMPLATE:COUNT", (int) MIN(len, (size_t) 64), s);
                        return -EINVAL;
                }
                name_len = (size_t) (colon - s);
                if (!warm_template_name_valid(s, name_len)) {
                        snprintf(errbuf, errbuf_size, "'%.*s' is not a template name", (int) MIN(name_len, (size_t) 64),
                                 s);
                        return -EINVAL;
                }
                if (len - name_len - 1 == 0 || len - name_len - 1 >= sizeof num) {
                        snprintf(errbuf, errbuf_size, "bad count for template '%.*s'", (int) name_len, s);
                        return -EINVAL;
                }
                memcpy(num, colon + 1, len - name_len - 1);
                num[len - name_len - 1] = 0;
                if (safe_atou64(num, &count) < 0 || count > CONFIG_WARM_POOL_SIZE_MAX) {
                        snprintf(errbuf, errbuf_size, "count '%s' of template '%.*s' is not in [0, %u]", num,
                                 (int) name_len, s, CONFIG_WARM_POOL_SIZE_MAX);
                        return -EINVAL;
                }
                for (size_t i = 0; i < n; i++)
                        if (strlen(ret[i].template_name) == name_len && memcmp(ret[i].template_name, s, name_len) == 0) {
                                snprintf(errbuf, errbuf_size, "template '%.*s' is named twice", (int) name_len, s);
                                return -EINVAL;
                        }
                if (n >= CONFIG_WARM_POOLS_MAX) {
                        snprintf(errbuf, errbuf_size, "more than %u templates", CONFIG_WARM_POOLS_MAX);
                        return -E2BIG;
                }
                memcpy(ret[n].template_name, s, name_len);
                ret[n].template_name[name_len] = 0;
                ret[n].count = count;
                n++;
                s += len;
                if (*s == ',') {
                        s++;
                        if (!*s) {
                                snprintf(errbuf, errbuf_size, "trailing comma");
                                return -EINVAL;
                        }
                }
        }
        *ret_n = n;
        return 0;
}

int config_parse_ratio_permille(const char *s, uint64_t min, uint64_t max, uint64_t *ret, char *errbuf,
                                size_t errbuf_size) {
        uint64_t whole = 0, frac = 0;
        unsigned digits = 0, frac_digits = 0;
        const char *p = s;

        for (; *p >= '0' && *p <= '9'; p++, digits++)
                if (digits < 7)
                        whole = whole * 10 + (uint64_t) (*p - '0');
        if (*p == '.')
                for (p++; *p >= '0' && *p <= '9'; p++, frac_digits++)
                        if (frac_digits < 3)
                                frac = frac * 10 + (uint64_t) (*p - '0');
        if (*p || digits == 0 || digits > 6 || (s[digits] == '.' && frac_digits == 0) || frac_digits > 3) {
                snprintf(errbuf, errbuf_size, "'%.32s' is not a decimal number such as 1.5 (at most 3 decimals)", s);
                return -EINVAL;
        }
        for (unsigned i = frac_digits; i < 3; i++)
                frac *= 10;
        whole = whole * 1000 + frac;
        if (whole < min || whole > max) {
                snprintf(errbuf, errbuf_size, "%.32s is out of range [%" PRIu64 ".%03" PRIu64 ", %" PRIu64 ".%03" PRIu64 "]",
                         s, min / 1000, min % 1000, max / 1000, max % 1000);
                return -ERANGE;
        }
        *ret = whole;
        return 0;
}

void config_print_help(FILE *f) {
        fprintf(f, "Configuration (--key=value, SPACE_KEY=value, or 'key = value' in --config FILE):\n");
        for (size_t i = 0; i < config_table_size; i++) {
                const ConfigItem *it = &config_table[i];
                char env[128];
                size_t n = 0;
                for (const char *k = it->key; *k && n < sizeof env - 7; k++)
                        env[n++] = (char) toupper((unsigned char) *k);
                env[n] = 0;
                fprintf(f, "  --%-20s SPACE_%-20s %s (default: %s%s%s)\n", it->key, env, it->help,
                        isempty(it->def) ? "-" : it->def, it->choices ? "; one of " : "",
                        it->choices ? it->choices : "");
        }
}

void config_checkpoint_caps(const Config *c, uint64_t sb_max, uint64_t sb_mb, uint64_t disk_mb, uint64_t *ret_max,
                            uint64_t *ret_mb) {
        *ret_max = sb_max ?: c->checkpoints_max;
        *ret_mb = sb_mb ?: (c->checkpoints_max_mb ?: disk_mb);
}
