/* SPDX-License-Identifier: MIT */
/* What every runtime's branch shares: the request (source, checkpoint,
 * with_memory, one spec per child), the children's bookkeeping (whether
 * each one's root or disk was made, whether it runs), the all-or-nothing
 * undo, and the reply. The ns branch (worker-lifecycle.c), the vm branch
 * (worker-vm.c) and the vm children that boot in the event loop
 * (worker-boot.c) differ only in how the children are made. */
#include <limits.h>

#include "str-util.h"
#include "worker-internal.h"

int worker_branch_parse(Worker *w, const JsonValue *req, WorkerBranch *ret, ApiError *e) {
        const JsonValue *children = json_get(req, "sandboxes"), *ck = json_get(req, "checkpoint"),
                        *mem = json_get(req, "with_memory");

        *ret = (WorkerBranch){};
        ret->source = worker_req_id(req, "source", e);
        if (!ret->source)
                return -EINVAL;
        if (ck && !json_is_null(ck) && !(ret->checkpoint = worker_req_id(req, "checkpoint", e)))
                return -EINVAL;
        if (mem && !json_is_null(mem) && json_bool(mem, &ret->with_memory) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "'with_memory' must be a boolean");
        if (json_type(children) != JSON_ARRAY || json_array_size(children) == 0 ||
            json_array_size(children) > WORKER_BRANCH_MAX)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "branch needs 1 to %d sandboxes",
                                 WORKER_BRANCH_MAX);
        for (size_t i = 0; i < json_array_size(children); i++) {
                int r = worker_spec_parse(w, json_array_at(children, i), &ret->specs[i], e);
                if (r < 0)
                        return r;
                ret->n = i + 1;
                (void) strscpy(ret->kids[i].id, sizeof ret->kids[i].id, ret->specs[i].id);
        }
        return 0;
}

void worker_branch_done(WorkerBranch *b) {
        for (size_t i = 0; i < WORKER_BRANCH_MAX; i++)
                worker_spec_done(&b->specs[i]);
        b->n = 0;
}

void worker_branch_undo(Worker *w, const WorkerBranchChild *kids, size_t n) {
        for (size_t i = 0; i < n; i++) {
                if (kids[i].live)
                        (void) worker_cleanup_sandbox(w, kids[i].id, false);
                if (kids[i].made)
                        (void) pool_sandbox_remove(w->pool, kids[i].id);
        }
}

void worker_branch_reply(JsonWriter *jw, const WorkerBranchChild *kids, size_t n, bool processes_preserved) {
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_kv_bool(jw, "processes_preserved", processes_preserved);
        json_w_key(jw, "sandboxes");
        json_w_array_begin(jw);
        for (size_t i = 0; i < n; i++) {
                json_w_object_begin(jw);
                json_w_kv_string(jw, "id", kids[i].id);
                json_w_kv_int(jw, "pid", kids[i].pid);
                json_w_key(jw, "starttime");
                json_w_uint(jw, kids[i].starttime);
                json_w_object_end(jw);
        }
        json_w_array_end(jw);
        json_w_object_end(jw);
}
