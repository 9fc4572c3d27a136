/* SPDX-License-Identifier: MIT */
/* Shipping checkpoints and templates between workers: see shipper.h. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>

#include "alloc-util.h"
#include "controller-util.h"
#include "json.h"
#include "log.h"
#include "shipper.h"
#include "str-util.h"

typedef struct Pass {
        Store *store;
        WorkerClient *wc;
        WorkerNode *nodes;
        size_t n_nodes;
        int64_t fresh_after;
        unsigned budget; /* ships left in this pass */
        int shipped;
} Pass;

static bool node_live(const Pass *p, const char *name) {
        for (size_t i = 0; i < p->n_nodes; i++)
                if (streq(p->nodes[i].name, name))
                        return p->nodes[i].state == WORKER_LIVE && p->nodes[i].heartbeat_usec >= p->fresh_after;
        return false;
}

static bool has_copy(const CheckpointCopy *copies, size_t n, const char *ck, const char *worker, bool available) {
        for (size_t i = 0; i < n; i++)
                if (streq(copies[i].checkpoint_id, ck) && streq(copies[i].worker, worker) &&
                    (!available || copies[i].available))
                        return true;
        return false;
}

static void shipped_event(Pass *p, const Sandbox *sb, const char *ck, const char *to, const WorkerShipResult *res) {
        _cleanup_free_ char *data = NULL;
        char reason[STORE_REASON_MAX];
        JsonWriter jw;
        size_t len;

        snprintf(reason, sizeof reason, "checkpoint %s shipped from worker %s to worker %s", ck, sb->worker, to);
        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "checkpoint", ck);
        json_w_kv_string(&jw, "from_worker", sb->worker);
        json_w_kv_string(&jw, "worker", to);
        json_w_key(&jw, "bytes");
        json_w_uint(&jw, res->bytes);
        json_w_kv_string(&jw, "sha256", res->sha256);
        json_w_key(&jw, "parent");
        if (res->parent[0])
                json_w_string(&jw, res->parent);
        else
                json_w_null(&jw);
        json_w_object_end(&jw);
        if (json_w_finish(&jw, &data, &len) >= 0)
                controller_event(p->store, sb, "sandbox.checkpoint_shipped", reason, data);
}

/* Available copies of ck on live workers. */
static size_t live_copies(const Pass *p, const CheckpointCopy *copies, size_t n, const char *ck) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
                if (streq(copies[i].checkpoint_id, ck) && copies[i].available && node_live(p, copies[i].worker))
                        k++;
        return k;
}

/* Checkpoints reported without a copy (sandbox.checkpoint_unavailable), so
 * that each is reported once until it has one again; a bounded set (the
 * oldest reported goes first when full: reported again, at worst). */
#define UNAVAILABLE_MAX 256
static char unavailable[UNAVAILABLE_MAX][STORE_ID_MAX];
static size_t unavailable_next;
static _Atomic uint64_t unavailable_gauge;

uint64_t shipper_checkpoints_unavailable(void) {
        return atomic_load(&unavailable_gauge);
}

static bool unavailable_reported(const char *ck) {
        for (size_t i = 0; i < UNAVAILABLE_MAX; i++)
                if (streq(unavailable[i], ck))
                        return true;
        return false;
}

static void unavailable_forget(const char *ck) {
        for (size_t i = 0; i < UNAVAILABLE_MAX; i++)
                if (streq(unavailable[i], ck))
                        unavailable[i][0] = 0;
}

static void unavailable_report(Pass *p, const Checkpoint *c, const Sandbox *sb) {
        char reason[STORE_REASON_MAX], data[STORE_ID_MAX + 32];

        if (unavailable_reported(c->id))
                return;
        (void) strscpy(unavailable[unavailable_next], STORE_ID_MAX, c->id);
        unavailable_next = (unavailable_next + 1) % UNAVAILABLE_MAX;
        snprintf(reason, sizeof reason, "no live worker holds a copy of checkpoint %s", c->id);
        snprintf(data, sizeof data, "{\"checkpoint\":\"%s\"}", c->id);
        log_warning("Checkpoint %s of sandbox %s has no copy on a live worker: it cannot be restored now", c->id,
                    sb->id);
        controller_event(p->store, sb, "sandbox.checkpoint_unavailable", reason, data);
}

/* The copies of the sandbox's volumes taken with checkpoint ck (a cluster
 * worker takes one of each volume a sandbox mounts with each checkpoint,
 * worker-volume.c), from one worker to another before the checkpoint
 * itself: a worker listed as holding the checkpoint holds them too. A copy
 * the sender lacks (a checkpoint from before the volume was mounted, a vm's)
 * is not an error here: a restore there then says what is missing. */
static int ship_volume_copies(Pass *p, const Sandbox *sb, const char *ck, const char *from, const char *to,
                              ApiError *e) {
        _cleanup_free_ VolumeMount *m = NULL;
        size_t n = 0;
        int r;

        r = store_volume_mounts(p->store, sb->id, &m, &n);
        if (r < 0)
                return api_error(e, r, API_UNAVAILABLE, "the store failed (the sandbox's volumes): %s", strerror(-r));
        for (size_t i = 0; i < n; i++) {
                char name[2 * STORE_ID_MAX + 2];
                WorkerShipResult res;

                /* the copy's name in the worker's pool (pool_volume_copy_name()) */
                if ((size_t) snprintf(name, sizeof name, "%s.%s", ck, m[i].volume_id) >= sizeof name)
                        continue;
                r = worker_ship(p->wc, from, to, sb->id, name, NULL, &res, e);
                if (r < 0 && e->code == API_NOT_FOUND) {
                        log_debug("Checkpoint %s of %s has no copy of volume %s on %s: not shipped", ck, sb->id,
                                  m[i].volume_name, from);
                        *e = (ApiError){};
                        continue;
                }
                if (r < 0)
                        return r;
                log_debug("Volume %s of %s shipped with checkpoint %s to %s (%" PRIu64 " bytes)", m[i].volume_name,
                          sb->id, ck, to, res.bytes);
        }
        return 0;
}

/* Ships checkpoint c of sb to one more live worker, from a live worker
 * that holds it (the sandbox's own first). */
static void ship_checkpoint(Pass *p, const Checkpoint *c, const Sandbox *sb, const CheckpointCopy *copies,
                            size_t n_copies) {
        const char *from = NULL;

        if (!isempty(sb->worker) && node_live(p, sb->worker) && has_copy(copies, n_copies, c->id, sb->worker, true))
                from = sb->worker;
        for (size_t i = 0; i < n_copies && !from; i++)
                if (streq(copies[i].checkpoint_id, c->id) && copies[i].available && node_live(p, copies[i].worker))
                        from = copies[i].worker;
        if (!from)
                return;
        for (size_t i = 0; i < p->n_nodes && p->budget > 0; i++) {
                const char *to = p->nodes[i].name;
                CheckpointCopy row = {};
                WorkerShipResult res;
                ApiError e = {};
                int r;

                if (streq(to, sb->worker) || streq(to, from) || !node_live(p, to) ||
                    has_copy(copies, n_copies, c->id, to, true))
                        continue;
                p->budget--;
                (void) strscpy(row.checkpoint_id, sizeof row.checkpoint_id, c->id);
                (void) strscpy(row.sandbox_id, sizeof row.sandbox_id, sb->id);
                (void) strscpy(row.worker, sizeof row.worker, to);
                r = store_checkpoint_copy_set(p->store, &row); /* receiving */
                if (r < 0) {
                        log_warning_errno(r, "Cannot record the copy of checkpoint %s on %s: %m", c->id, to);
                        return;
                }
                r = ship_volume_copies(p, sb, c->id, from, to, &e);
                if (r >= 0)
                        r = worker_ship(p->wc, from, to, sb->id, c->id, sb->template_name, &res, &e);
                if (r < 0) {
                        log_warning("Shipping checkpoint %s of sandbox %s from %s to %s failed (tried again): %s",
                                    c->id, sb->id, from, to, e.message);
                        continue; /* another worker, if any */
                }
                row.available = true;
                (void) strscpy(row.sha256, sizeof row.sha256, res.sha256);
                row.size_bytes = res.bytes;
                r = store_checkpoint_copy_set(p->store, &row);
                if (r < 0) {
                        log_warning_errno(r, "Cannot record the copy of checkpoint %s on %s: %m", c->id, to);
                        return;
                }
                p->shipped++;
                Sandbox shown = *sb;
                (void) strscpy(shown.worker, sizeof shown.worker, from);
                shipped_event(p, &shown, c->id, to, &res);
                return;
        }
}

static void pass_checkpoints(Pass *p, uint64_t want) {
        _cleanup_free_ Checkpoint *cks = NULL;
        _cleanup_free_ CheckpointCopy *copies = NULL;
        size_t n_cks = 0, n_copies = 0;

        if (store_checkpoint_list(p->store, NULL, &cks, &n_cks) < 0 ||
            store_checkpoint_copy_list(p->store, NULL, &copies, &n_copies) < 0)
                return;
        /* copies of checkpoints that are gone: unlisted (no longer available: no
         * restore picks it) before its files go, the row itself once they are */
        for (size_t i = 0; i < n_copies; i++) {
                bool known = false;
                ApiError e = {};
                for (size_t j = 0; j < n_cks && !known; j++)
                        known = streq(cks[j].id, copies[i].checkpoint_id);
                if (known || !node_live(p, copies[i].worker))
                        continue;
                if (copies[i].available) {
                        CheckpointCopy row = copies[i];
                        row.available = false;
                        if (store_checkpoint_copy_set(p->store, &row) < 0)
                                continue;
                }
                if (worker_checkpoint_remove_on(p->wc, copies[i].worker, copies[i].sandbox_id, copies[i].checkpoint_id,
                                                &e) < 0) {
                        log_warning("Cannot remove the copy of checkpoint %s from %s: %s", copies[i].checkpoint_id,
                                    copies[i].worker, e.message);
                        continue;
                }
                (void) store_checkpoint_copy_delete(p->store, copies[i].checkpoint_id, copies[i].worker);
        }
        /* oldest first (the list is newest first) */
        uint64_t none = 0;
        for (size_t j = n_cks; j > 0; j--) {
                const Checkpoint *c = &cks[j - 1];
                size_t live;
                Sandbox sb = {};

                if (!c->restorable)
                        continue;
                live = live_copies(p, copies, n_copies, c->id);
                /* the sandbox's own copy and want others on live workers: nothing to look up */
                if (live > want) {
                        unavailable_forget(c->id);
                        continue;
                }
                if (store_sandbox_get(p->store, NULL, c->sandbox_id, &sb) < 0)
                        continue;
                if (sb.state == SANDBOX_RUNNING || sb.state == SANDBOX_PAUSED || sb.state == SANDBOX_SUSPENDED ||
                    sb.state == SANDBOX_UNREACHABLE) {
                        if (live == 0) {
                                none++;
                                unavailable_report(p, c, &sb);
                        } else {
                                unavailable_forget(c->id);
                                /* fewer than the sandbox's own and want others (a holder was lost,
                                 * or a copy went): shipped again from a live holder */
                                bool own = !isempty(sb.worker) && node_live(p, sb.worker) &&
                                           has_copy(copies, n_copies, c->id, sb.worker, true);
                                if (want > 0 && p->budget > 0 && live - (own ? 1 : 0) < want)
                                        ship_checkpoint(p, c, &sb, copies, n_copies);
                        }
                }
                sandbox_done(&sb);
        }
        atomic_store(&unavailable_gauge, none);
}

/* Whether name is in the comma-separated list. */
static bool list_has(const char *list, const char *name) {
        size_t n = strlen(name);

        for (const char *x = list; x && *x;) {
                const char *comma = strchr(x, ',');
                size_t l = comma ? (size_t) (comma - x) : strlen(x);
                if (l == n && strncmp(x, name, n) == 0)
                        return true;
                x = comma ? comma + 1 : NULL;
        }
        return false;
}

/* A live worker whose heartbeat lists item, or NULL. */
static const char *template_holder(const Pass *p, const char *item) {
        for (size_t i = 0; i < p->n_nodes; i++)
                if (node_live(p, p->nodes[i].name) && list_has(p->nodes[i].templates, item))
                        return p->nodes[i].name;
        return NULL;
}

/* item (a template name or one version of it, NAME@vN) to every live worker
 * that lacks it; promote (the newest version's number, or 0): that worker's
 * NAME then becomes this version, as the API did on the workers that were
 * there when it was published. */
static void ship_template(Pass *p, const char *item, const char *name, uint64_t promote) {
        const char *from = template_holder(p, item);

        if (!from)
                return;
        for (size_t i = 0; i < p->n_nodes && p->budget > 0; i++) {
                const char *to = p->nodes[i].name;
                WorkerShipResult res;
                ApiError e = {};
                if (!node_live(p, to) || list_has(p->nodes[i].templates, item))
                        continue;
                p->budget--;
                if (worker_ship(p->wc, from, to, NULL, item, NULL, &res, &e) < 0) {
                        log_warning("Shipping template %s from %s to %s failed (tried again): %s", item, from, to,
                                    e.message);
                        continue;
                }
                if (!res.complete) {
                        log_info("Template %s shipped from %s to %s (%" PRIu64 " bytes)", item, from, to,
                                 res.bytes);
                        p->shipped++;
                }
                /* still the newest (a publish may have come since the pass read it)? */
                if (promote == 0 || controller_template_newest(p->store, name) != promote)
                        continue;
                e = (ApiError){};
                if (worker_template_promote_on(p->wc, to, name, promote, &e) < 0)
                        log_warning("Making version %" PRIu64 " template %s on %s failed: %s", promote, name, to,
                                    e.message);
        }
}

/* Every ready template to every live worker: an unversioned one (bundled) by
 * its name, a versioned one as each version still kept (what a cluster's
 * creates name, worker-client-sandbox.c), the newest promoted. */
static void pass_templates(Pass *p) {
        _cleanup_free_ Template *tpls = NULL;
        size_t n = 0;

        if (store_template_list(p->store, &tpls, &n) < 0)
                return;
        for (size_t t = 0; t < n && p->budget > 0; t++) {
                _cleanup_free_ TemplateVersion *versions = NULL;
                size_t n_versions = 0;

                if (tpls[t].state != TEMPLATE_READY)
                        continue;
                if (store_template_version_list(p->store, tpls[t].name, &versions, &n_versions) < 0)
                        continue;
                /* a build's stage (build-*, unversioned: api/template-build.c) lives on its build's
                 * worker only, for as long as the step that runs on it */
                if (n_versions == 0 && !startswith(tpls[t].name, "build-"))
                        ship_template(p, tpls[t].name, tpls[t].name, 0);
                for (size_t v = 0; v < n_versions && p->budget > 0; v++) {
                        char item[STORE_NAME_MAX + 24];
                        snprintf(item, sizeof item, "%s@v%" PRIu64, tpls[t].name, versions[v].version);
                        ship_template(p, item, tpls[t].name, v == 0 ? versions[v].version : 0);
                }
        }
}

int shipper_run_once(Store *store, WorkerClient *wc, const Config *config, int64_t now) {
        _cleanup_free_ WorkerNode *nodes = NULL;
        size_t n = 0;
        int r;

        if (!worker_client_is_cluster(wc))
                return 0;
        r = store_worker_list(store, &nodes, &n);
        if (r < 0)
                return r;
        Pass p = {
                .store = store,
                .wc = wc,
                .nodes = nodes,
                .n_nodes = n,
                .fresh_after = now - (int64_t) config->worker_lost_timeout_s * 1000000,
                .budget = SHIPPER_SHIPS_PER_PASS,
        };
        pass_checkpoints(&p, config->ship_checkpoints);
        pass_templates(&p);
        return p.shipped;
}
