/* SPDX-License-Identifier: MIT */
#pragma once

/* Where a new sandbox goes in a cluster. Candidates are the live workers
 * whose heartbeat is at or after fresh_after_usec, that offer the sandbox's
 * runtime and have room for its memory (capacity 0 = not limited; CPU and
 * disk quotas are shared, not reserved — thin btrfs — so they only weigh in
 * the load). Best first: those that hold the template (locality: no copy
 * needed), then the least loaded (the largest of CPU, memory and disk used
 * over capacity, counting this sandbox), then the fewest sandboxes, then by
 * name — so creates spread across hosts. ret_order (room for n) gets
 * indexes into workers. */

#include "store.h"

void worker_place(const WorkerNode *workers, size_t n, const Sandbox *sb, int64_t fresh_after_usec,
                  size_t *ret_order, size_t *ret_n);
/* Whether list ("a,b,c") holds item. */
bool worker_list_has(const char *list, const char *item);
