/* SPDX-License-Identifier: MIT */
#pragma once

/* Where a new sandbox goes in a cluster. Candidates are the live workers
 * whose heartbeat is at or after fresh_after_usec, that offer the sandbox's
 * runtime and have room for its memory and its disk quota (capacity 0 = not
 * limited; a worker's disk capacity is what its pool admits: pool size x
 * disk_overcommit less the reserve; CPU is shared, not reserved, so it only
 * weighs in the load). The worker admits the disk again against its real
 * pool (507 if that is fuller than the figures said). Best first: those
 * that hold the template (locality: no copy needed; sb->template_pool, the
 * exact version, when set), then the least loaded (the largest of CPU,
 * memory and disk used over capacity, counting this sandbox), then the
 * fewest sandboxes, then by name — so creates spread across hosts.
 * ret_order (room for n) gets indexes into workers. */

#include "store.h"

void worker_place(const WorkerNode *workers, size_t n, const Sandbox *sb, int64_t fresh_after_usec,
                  size_t *ret_order, size_t *ret_n);
/* Whether list ("a,b,c") holds item. */
bool worker_list_has(const char *list, const char *item);
