/* SPDX-License-Identifier: MIT */
/* A worker host's registration and heartbeat (see worker-node.h). */
#include <inttypes.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "log.h"
#include "pool.h"
#include "str-util.h"
#include "worker-node.h"

static int random_hex(char *buf, size_t size) {
        uint8_t b[8];

        if (size < 2 * sizeof b + 1)
                return -ENOBUFS;
        if (getrandom(b, sizeof b, 0) != (ssize_t) sizeof b)
                return -EIO;
        for (size_t i = 0; i < sizeof b; i++)
                snprintf(buf + 2 * i, 3, "%02x", b[i]);
        return 0;
}

int worker_node_instance(const char *state_dir, char *buf, size_t size) {
        _cleanup_free_ char *path = strjoin(state_dir, "/" WORKER_NODE_INSTANCE_FILE), *old = NULL;
        size_t n = 0;
        int r;

        if (!path)
                return -ENOMEM;
        r = read_full_file(path, 64, &old, &n);
        if (r >= 0) {
                n = strcspn(old, "\n");
                old[n] = 0;
                if (n == 16 && strspn(old, "0123456789abcdef") == 16)
                        return strscpy(buf, size, old);
                log_warning("%s is not an instance id: making a new one", path);
        } else if (r != -ENOENT)
                return r;
        r = random_hex(buf, size);
        if (r < 0)
                return r;
        return write_file_atomic(path, buf, strlen(buf), 0644);
}

uint64_t worker_node_disk_mb(const Config *c) {
        /* what the pool admits (pool_admit): its size x disk_overcommit, less the reserve */
        uint64_t permille = c->disk_overcommit_permille ?: 1000;
        uint64_t promised = (uint64_t) ((unsigned __int128) c->pool_size_mb * permille / 1000);
        uint64_t reserve = pool_admit_reserve_bytes(c->pool_size_mb << 20, c->pool_reserve_mb) >> 20;

        return promised > reserve ? promised - reserve : 1; /* 1: full, not "not limited" */
}

int worker_node_capacity(const Config *c, WorkerNode *ret) {
        WorkerNode w = {};
        struct sysinfo si;
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);

        w.cpu_millis = c->worker_cpu_millis > 0 ? (uint32_t) c->worker_cpu_millis
                                                : (uint32_t) (cpus > 0 ? cpus : 1) * 1000U;
        if (c->worker_memory_mb > 0)
                w.memory_mb = c->worker_memory_mb;
        else if (sysinfo(&si) == 0)
                w.memory_mb = (uint64_t) si.totalram * si.mem_unit / (1024 * 1024);
        w.disk_mb = worker_node_disk_mb(c);
        /* until the worker process says what it can run (worker_node_register) */
        (void) strscpy(w.runtimes, sizeof w.runtimes, "ns");
        if (strscpy(w.name, sizeof w.name, c->worker_name) < 0 ||
            strscpy(w.address, sizeof w.address, c->worker_address) < 0)
                return -ENAMETOOLONG;
        *ret = w;
        return 0;
}

int worker_node_register(Store *s, const Config *c, const char *instance, const char *templates,
                         const char *runtimes, const char *accelerators) {
        WorkerNode w;
        int r;

        r = worker_node_capacity(c, &w);
        if (r < 0)
                return r;
        if (!isempty(runtimes) && strscpy(w.runtimes, sizeof w.runtimes, runtimes) < 0)
                return -ENAMETOOLONG;
        if (accelerators && strscpy(w.accelerators, sizeof w.accelerators, accelerators) < 0)
                return -ENAMETOOLONG;
        (void) strscpy(w.instance, sizeof w.instance, instance);
        (void) strscpy(w.templates, sizeof w.templates, templates ?: "");
        r = store_worker_register(s, &w, store_now_usec(s) - (int64_t) c->worker_lost_timeout_s * 1000000);
        if (r == -EEXIST)
                return log_error_errno(r, "Worker name '%s' is taken by another live worker: refusing to register",
                                       c->worker_name);
        if (r < 0)
                return log_error_errno(r, "Cannot register worker '%s': %m", c->worker_name);
        log_info("Registered worker %s at %s (cpu %u millis, memory %" PRIu64 " MB, disk %" PRIu64
                 " MB, runtimes %s, accelerators %s)",
                 w.name, w.address, w.cpu_millis, w.memory_mb, w.disk_mb, w.runtimes,
                 w.accelerators[0] ? w.accelerators : "none");
        return 0;
}

int worker_node_heartbeat(Store *s, const Config *c, const char *instance, const char *templates,
                          const char *runtimes, const char *accelerators) {
        int r = store_worker_heartbeat(s, c->worker_name, instance, templates);

        if (r == -ESTALE || r == -ENOENT) {
                log_warning("Worker %s was marked suspect or removed; registering again", c->worker_name);
                return worker_node_register(s, c, instance, templates, runtimes, accelerators);
        }
        return r;
}
