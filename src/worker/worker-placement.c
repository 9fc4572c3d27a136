/* SPDX-License-Identifier: MIT */
/* Placement of a new sandbox on a worker (see worker-placement.h). Pure:
 * the caller reads the workers and their usage from the store. */
#include <stdlib.h>

#include "str-util.h"
#include "worker-placement.h"

bool worker_list_has(const char *list, const char *item) {
        size_t l = item ? strlen(item) : 0;

        if (!list || l == 0)
                return false;
        for (const char *p = list; *p;) {
                const char *comma = strchr(p, ',');
                size_t n = comma ? (size_t) (comma - p) : strlen(p);
                if (n == l && memcmp(p, item, l) == 0)
                        return true;
                if (!comma)
                        break;
                p = comma + 1;
        }
        return false;
}

typedef struct Candidate {
        size_t index;
        bool local_template;
        double load;
        uint32_t sandboxes;
        const char *name;
} Candidate;

static int candidate_cmp(const void *a, const void *b) {
        const Candidate *x = a, *y = b;

        if (x->local_template != y->local_template)
                return x->local_template ? -1 : 1;
        if (x->load != y->load)
                return x->load < y->load ? -1 : 1;
        if (x->sandboxes != y->sandboxes)
                return x->sandboxes < y->sandboxes ? -1 : 1;
        return strcmp(x->name, y->name);
}

static double ratio(uint64_t used, uint64_t capacity) {
        return capacity == 0 ? 0.0 : (double) used / (double) capacity;
}

void worker_place(const WorkerNode *workers, size_t n, const Sandbox *sb, int64_t fresh_after_usec,
                  size_t *ret_order, size_t *ret_n) {
        Candidate *c = n > 0 ? calloc(n, sizeof *c) : NULL;
        size_t k = 0;

        *ret_n = 0;
        if (!c)
                return;
        for (size_t i = 0; i < n; i++) {
                const WorkerNode *w = &workers[i];
                uint64_t mem = w->used_memory_mb + sb->memory_mb, disk = w->used_disk_mb + sb->disk_mb;
                double cpu_load, mem_load, disk_load;

                if (w->state != WORKER_LIVE || w->heartbeat_usec < fresh_after_usec)
                        continue;
                if (!isempty(sb->runtime) && !isempty(w->runtimes) && !worker_list_has(w->runtimes, sb->runtime))
                        continue;
                if (w->memory_mb > 0 && mem > w->memory_mb)
                        continue;
                /* disk is reserved like memory: disk_mb is what its pool admits (worker-node.c) */
                if (w->disk_mb > 0 && disk > w->disk_mb)
                        continue;
                cpu_load = ratio((uint64_t) w->used_cpu_millis + sb->cpu_millis, w->cpu_millis);
                mem_load = ratio(mem, w->memory_mb);
                disk_load = ratio(disk, w->disk_mb);
                if (disk_load > mem_load)
                        mem_load = disk_load;
                c[k++] = (Candidate){
                        .index = i,
                        .local_template = worker_list_has(w->templates, sb->template_pool[0] ? sb->template_pool
                                                                                : sb->template_name),
                        .load = cpu_load > mem_load ? cpu_load : mem_load,
                        .sandboxes = w->sandboxes,
                        .name = w->name,
                };
        }
        qsort(c, k, sizeof *c, candidate_cmp);
        for (size_t i = 0; i < k; i++)
                ret_order[i] = c[i].index;
        *ret_n = k;
        free(c);
}
