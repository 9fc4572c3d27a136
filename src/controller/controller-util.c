/* SPDX-License-Identifier: MIT */
#include "controller-util.h"
#include "log.h"
#include "str-util.h"

#define CHECKPOINT_ID_ATTEMPTS 5U

void controller_event(Store *s, const Sandbox *sb, const char *type, const char *reason, const char *data) {
        Event ev = {};
        int r;

        (void) strscpy(ev.tenant_id, sizeof ev.tenant_id, sb->tenant_id);
        (void) strscpy(ev.sandbox_id, sizeof ev.sandbox_id, sb->id);
        (void) strscpy(ev.type, sizeof ev.type, type);
        (void) strscpy(ev.actor, sizeof ev.actor, CONTROLLER_ACTOR);
        (void) strscpy(ev.reason, sizeof ev.reason, strempty(reason));
        ev.data_json = (char *) data; /* borrowed */
        r = store_event_append(s, &ev);
        if (r < 0)
                log_warning_errno(r, "Failed to record %s event for %s: %m", type, sb->id);
}

int controller_list_live(Store *s, Sandbox **ret, size_t *ret_n) {
        SandboxFilter f = { .state = -1, .limit = CONTROLLER_LIST_MAX };
        return store_sandbox_list(s, &f, ret, ret_n);
}

uint64_t controller_template_newest(Store *s, const char *template_name) {
        _cleanup_free_ TemplateVersion *list = NULL;
        size_t n = 0;

        return store_template_version_list(s, template_name, &list, &n) >= 0 && n > 0 ? list[0].version : 0;
}

int controller_id_generate(char ret[static CONTROLLER_ID_LEN + 1]) {
        uint8_t first;
        int r;

        r = random_bytes(&first, 1);
        if (r < 0)
                return r;
        r = random_alnum(ret + 1, CONTROLLER_ID_LEN - 1);
        if (r < 0)
                return r;
        ret[0] = (char) ('a' + first % 26);
        ret[CONTROLLER_ID_LEN] = 0;
        return 0;
}

int controller_checkpoint_take(Store *s, WorkerClient *w, const Sandbox *sb, bool automatic, uint64_t max_mb,
                               Checkpoint *ret) {
        Checkpoint c = { .automatic = automatic, .created_usec = now_usec() };
        ApiError e = {};
        uint64_t size = 0;
        int r = -EEXIST;

        (void) strscpy(c.sandbox_id, sizeof c.sandbox_id, sb->id);
        (void) strscpy(c.tenant_id, sizeof c.tenant_id, sb->tenant_id);
        for (unsigned i = 0; i < CHECKPOINT_ID_ATTEMPTS && r == -EEXIST; i++) {
                char id[CONTROLLER_ID_LEN + 1];
                r = controller_id_generate(id);
                if (r < 0)
                        return r;
                (void) strscpy(c.id, sizeof c.id, id);
                r = store_checkpoint_insert(s, &c);
        }
        if (r < 0)
                return r;
        r = worker_checkpoint_create(w, sb->id, c.id, max_mb, false, &size, &e); /* disk only: automatic ones stay small */
        if (r >= 0) {
                r = store_checkpoint_update(s, c.id, true, size);
                if (r < 0) {
                        ApiError ignored = {};
                        (void) worker_checkpoint_remove(w, sb->id, c.id, &ignored);
                }
        } else if (e.code == API_INSUFFICIENT_STORAGE) {
                log_debug("Checkpoint of sandbox %s refused: %s", sb->id, e.message);
                r = -ENOSPC;
        } else
                log_warning("Checkpoint of sandbox %s failed: %s", sb->id, e.message);
        if (r < 0) {
                (void) store_checkpoint_delete(s, c.id);
                return r;
        }
        c.restorable = true;
        c.size_bytes = size;
        if (worker_client_is_cluster(w)) {
                /* the first copy: on the sandbox's worker (the shipper copies it to others) */
                CheckpointCopy cc = { .available = true };
                (void) strscpy(cc.checkpoint_id, sizeof cc.checkpoint_id, c.id);
                (void) strscpy(cc.sandbox_id, sizeof cc.sandbox_id, sb->id);
                (void) strscpy(cc.worker, sizeof cc.worker, sb->worker);
                r = store_checkpoint_copy_set(s, &cc);
                if (r < 0)
                        log_warning_errno(r, "Cannot record where checkpoint %s is: %m", c.id);
        }
        if (ret)
                *ret = c;
        return 0;
}

int controller_checkpoint_drop(Store *s, WorkerClient *w, const Checkpoint *c) {
        ApiError e = {};
        int r;

        if (c->restorable) {
                r = store_checkpoint_update(s, c->id, false, c->size_bytes);
                if (r < 0)
                        return r == -ENOENT ? 0 : r;
        }
        r = worker_checkpoint_remove(w, c->sandbox_id, c->id, &e); /* a missing one is fine */
        if (r < 0) {
                log_warning("Removing checkpoint %s of %s failed: %s", c->id, c->sandbox_id, e.message);
                return r;
        }
        r = store_checkpoint_delete(s, c->id);
        return r == -ENOENT ? 0 : r;
}
