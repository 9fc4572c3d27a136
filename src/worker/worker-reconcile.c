/* SPDX-License-Identifier: MIT */
/* At start: make host and store agree. Sandboxes the store knows are found
 * again (or marked with a reason), interrupted operations are finished, and
 * whatever nobody owns (cgroups, roots, agent dirs) is removed. */
#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>

#include "fd-util.h"
#include "log.h"
#include "str-util.h"
#include "worker-internal.h"

static void set_state(Worker *w, Sandbox *sb, SandboxState to, const char *type, const char *reason) {
        int r = store_sandbox_set_state(w->store, sb->id, (int) sb->state, to, reason);
        if (r < 0) {
                log_warning_errno(r, "Failed to set state of sandbox %s: %m", sb->id);
                return;
        }
        worker_event(w, sb, type, reason, NULL);
}

static int reconcile_known(Worker *w, Sandbox *sb) {
        char sock[PATH_MAX];
        const RuntimeOps *rt;
        int pidfd = -EBADF, r;

        switch (sb->state) {
        case SANDBOX_CREATING:
                (void) worker_cleanup_sandbox(w, sb->id, true);
                set_state(w, sb, SANDBOX_DELETED, "sandbox.create_failed", "create interrupted by a restart of spaced");
                return 0;
        case SANDBOX_DELETING:
                (void) worker_cleanup_sandbox(w, sb->id, true);
                set_state(w, sb, SANDBOX_DELETED, "sandbox.deleted", "delete finished after a restart of spaced");
                sb->state = SANDBOX_DELETED; /* its root goes with the orphans' */
                return 0;
        case SANDBOX_ERROR:
                /* a delete that failed is still wanted: finished now, disk and all */
                if (!startswith(sb->reason, SANDBOX_REASON_DELETE_FAILED))
                        return 0;
                (void) worker_cleanup_sandbox(w, sb->id, true);
                set_state(w, sb, SANDBOX_DELETED, "sandbox.deleted", "a failed delete finished at the worker's start");
                sb->state = SANDBOX_DELETED;
                return 0;
        case SANDBOX_RUNNING:
        case SANDBOX_PAUSED:
        case SANDBOX_UNREACHABLE: /* a cluster judged its worker lost: taken back if it runs here (worker-adopt.c) */
                rt = worker_runtime(w, sb->runtime, &(ApiError){});
                r = rt ? rt->adopt(sb->id, (pid_t) sb->pid, sb->pid_starttime, &pidfd) : -EOPNOTSUPP;
                if (r >= 0 && worker_agent_socket(w, sb->id, sock, sizeof sock) >= 0 && access(sock, F_OK) == 0) {
                        r = worker_live_add(w, rt, sb->id, sb->slot, (pid_t) sb->pid, sb->pid_starttime, pidfd);
                        if (r >= 0) {
                                LiveSandbox *l = worker_live_find(w, sb->id);
                                bool frozen;
                                if (sb->state == SANDBOX_UNREACHABLE) {
                                        r = worker_adopt_lost(w, sb, l);
                                        if (r == -ESTALE)
                                                return 0; /* recovered elsewhere or deleted: its copy here went */
                                        if (r < 0) {
                                                /* a recovery elsewhere is tried, or the store failed: it runs
                                                 * on, untouched, and worker_adopt_tick() decides later */
                                                l->lost_pending = true;
                                                l->net = true;
                                                return 0;
                                        }
                                }
                                /* a crash may have left the freezer otherwise (e.g. mid-checkpoint):
                                 * set it to what the store says, whatever it is now */
                                frozen = sb->state == SANDBOX_PAUSED;
                                if (rt->freeze(sb->id, frozen) < 0)
                                        log_warning("Cannot %s sandbox %s", frozen ? "freeze" : "thaw", sb->id);
                                l->frozen = frozen;
                                l->net = true; /* ns: its veth, vm: its tap */
                                log_info("Found sandbox %s running (pid %" PRIi64 ")", sb->id, sb->pid);
                                return 0;
                        }
                }
                safe_close(pidfd);
                if (sb->state == SANDBOX_UNREACHABLE && !streq(sb->worker, w->config->worker_name))
                        return 0; /* a recovery elsewhere is tried: what it has here stays until it is decided */
                (void) worker_cleanup_sandbox(w, sb->id, false);
                if (sb->state == SANDBOX_UNREACHABLE) {
                        /* its processes are gone, its disk is here: kept, for a restore or a resume */
                        if (store_sandbox_take_over(w->store, sb->id, SANDBOX_UNREACHABLE, w->config->worker_name,
                                                    SANDBOX_ERROR, 0, 0, w->config->worker_name,
                                                    "its worker came back and it was not running (its files are "
                                                    "kept: resume or restore it)") >= 0) {
                                sb->state = SANDBOX_ERROR;
                                worker_event(w, sb, "sandbox.error", "its worker came back and it was not running",
                                             NULL);
                        }
                        return 0;
                }
                set_state(w, sb, SANDBOX_ERROR, "sandbox.error", "sandbox was not running when spaced restarted");
                return 0;
        default:
                return 0;
        }
}

static int remove_orphan_agent_dirs(Worker *w) {
        _cleanup_(closedirp_) DIR *d = opendir(w->agent_dir);
        struct dirent *de;

        if (!d)
                return 0;
        while ((de = readdir(d))) {
                char p[PATH_MAX];
                if (de->d_name[0] == '.' || worker_live_find(w, de->d_name))
                        continue;
                snprintf(p, sizeof p, "%s/%s", w->agent_dir, de->d_name);
                log_info("Removing orphan agent directory %s", p);
                (void) rm_rf(p);
        }
        return 0;
}

/* At the daemon's start (role all; no API process is alive yet, so no
 * import is in flight): a template still importing was cut short by a crash
 * or kill of spaced. Rolled back: the row goes and so does whatever the pool
 * holds of it (a half-written import in the pool's tmp/ went at its open). A
 * worker started again by its supervisor leaves the rows alone: the API
 * process that imports them lives on and drops a row whose import failed. */
static void reconcile_templates(Worker *w) {
        _cleanup_free_ Template *list = NULL;
        size_t n = 0;

        if (!streq(w->config->role, "all") || w->restarted || store_template_list(w->store, &list, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++) {
                char data[STORE_NAME_MAX + 16];
                int r;

                if (list[i].state != TEMPLATE_IMPORTING)
                        continue;
                if (pool_template_exists(w->pool, list[i].name)) {
                        r = pool_template_remove(w->pool, list[i].name);
                        if (r < 0) {
                                log_warning_errno(r, "Template %s: cannot remove its interrupted import: %m",
                                                  list[i].name);
                                continue; /* stays importing: tried again at the next start */
                        }
                }
                r = store_template_delete(w->store, list[i].name);
                if (r < 0) {
                        log_warning_errno(r, "Template %s: cannot drop its interrupted import: %m", list[i].name);
                        continue;
                }
                snprintf(data, sizeof data, "{\"name\":\"%s\"}", list[i].name); /* a valid name: nothing to escape */
                worker_event(w, NULL, "template.removed", "import interrupted by a restart of spaced", data);
                log_info("Template %s: its import was interrupted by a restart of spaced; rolled back", list[i].name);
        }
}

int worker_reconcile(Worker *w) {
        _cleanup_strv_free_ char **cg = NULL, **roots = NULL;
        Sandbox *list = NULL;
        size_t n = 0;
        unsigned orphans = 0, found = 0;
        SandboxFilter f = { .state = -1, .limit = 100000 };
        int r;

        r = store_sandbox_list(w->store, &f, &list, &n);
        if (r < 0)
                return log_error_errno(r, "Failed to list sandboxes: %m");
        if (streq(w->config->role, "worker")) {
                /* a cluster: only this worker's sandboxes (the others are other
                 * hosts'; what this host has of theirs is an orphan), and the
                 * lost ones whose recovery elsewhere is being tried (their row
                 * names the worker tried: what is here stays until it is decided) */
                size_t k = 0;
                for (size_t i = 0; i < n; i++) {
                        if (streq(list[i].worker, w->config->worker_name) || list[i].state == SANDBOX_UNREACHABLE)
                                list[k++] = list[i];
                        else
                                sandbox_done(&list[i]);
                }
                n = k;
        }
        for (size_t i = 0; i < n; i++)
                (void) reconcile_known(w, &list[i]);
        found = (unsigned) w->n_live;
        reconcile_templates(w);

        /* cgroups (and so processes) nobody owns */
        if (w->runtime->list(&cg) >= 0)
                for (char **id = cg; id && *id; id++)
                        if (!worker_live_find(w, *id)) {
                                log_info("Removing orphan sandbox resources %s", *id);
                                char sock[PATH_MAX];
                                (void) worker_agent_socket(w, *id, sock, sizeof sock);
                                (void) w->runtime->destroy(*id, sock);
                                orphans++;
                        }
        /* roots nobody owns: not in the store, or deleted there */
        if (pool_sandbox_list(w->pool, &roots) >= 0)
                for (char **id = roots; id && *id; id++) {
                        bool known = false;
                        for (size_t i = 0; i < n; i++)
                                if (streq(list[i].id, *id) && list[i].state != SANDBOX_DELETED &&
                                    list[i].state != SANDBOX_CREATING && list[i].state != SANDBOX_DELETING)
                                        known = true;
                        if (!known) {
                                log_info("Removing orphan sandbox root %s", *id);
                                (void) pool_sandbox_remove(w->pool, *id);
                                orphans++;
                        }
                }
        /* checkpoints of sandboxes the store no longer has */
        _cleanup_strv_free_ char **owners = NULL;
        if (pool_checkpoint_owners(w->pool, &owners) >= 0)
                for (char **id = owners; id && *id; id++) {
                        bool known = false;
                        for (size_t i = 0; i < n; i++)
                                if (streq(list[i].id, *id) && list[i].state != SANDBOX_DELETED)
                                        known = true;
                        if (!known && streq(w->config->role, "worker")) {
                                /* a cluster: checkpoints shipped here of a sandbox on another
                                 * worker (or lost with one) stay while the sandbox exists */
                                Sandbox other = {};
                                if (store_sandbox_get(w->store, NULL, *id, &other) != -ENOENT &&
                                    other.state != SANDBOX_DELETED)
                                        known = true;
                                sandbox_done(&other);
                        }
                        if (!known) {
                                log_info("Removing orphan checkpoints of %s", *id);
                                (void) pool_checkpoint_remove_all(w->pool, *id);
                                orphans++;
                        }
                }
        (void) remove_orphan_agent_dirs(w);
        sandbox_array_free(list, n);
        /* the links of the live sandboxes, this daemon's firewall table, no other link of ours */
        r = worker_net_reconcile(w);
        if (r < 0)
                return r;
        /* the teardowns a stop or crash cut short are finished: their slots are free */
        r = store_sandbox_release_slots(w->store, streq(w->config->role, "worker") ? w->config->worker_name : NULL);
        if (r > 0)
                log_info("Freed %d slot(s) held by the teardowns of deleted sandboxes", r);
        else if (r < 0)
                log_warning_errno(r, "Cannot free the slots held by deleted sandboxes: %m");

        if (orphans || found) {
                char data[128];
                snprintf(data, sizeof data, "{\"running\":%u,\"orphans_removed\":%u}", found, orphans);
                worker_event(w, NULL, "worker.reconciled", "worker started", data);
        }
        log_info("Reconciled: %u sandboxes running, %u orphans removed", found, orphans);
        return 0;
}

int worker_import_bundled_templates(Worker *w) {
        _cleanup_(closedirp_) DIR *d = opendir(w->config->template_dir);
        struct dirent *de;

        if (!d) {
                log_debug("No template directory %s", w->config->template_dir);
                return 0;
        }
        while ((de = readdir(d))) {
                char name[STORE_NAME_MAX], tar[PATH_MAX];
                const char *dot = endswith(de->d_name, ".tar");
                Template t = {};
                uint64_t size = 0;
                size_t len;
                int r;

                if (!dot || dot == de->d_name)
                        continue;
                len = (size_t) (dot - de->d_name);
                if (len >= sizeof name)
                        continue;
                memcpy(name, de->d_name, len);
                name[len] = 0;
                if (!pool_template_name_valid(name))
                        continue;
                if (store_template_get(w->store, name, &t) >= 0 && t.state == TEMPLATE_READY &&
                    pool_template_exists(w->pool, name))
                        continue;
                snprintf(tar, sizeof tar, "%s/%s", w->config->template_dir, de->d_name);
                if (pool_template_exists(w->pool, name))
                        (void) pool_template_remove(w->pool, name);
                r = pool_template_import_tar(w->pool, name, tar, &size);
                if (r < 0) {
                        log_warning_errno(r, "Failed to import bundled template %s: %m", tar);
                        continue;
                }
                (void) store_template_delete(w->store, name);
                t = (Template){ .state = TEMPLATE_READY, .size_bytes = size };
                (void) strscpy(t.name, sizeof t.name, name);
                r = store_template_insert(w->store, &t);
                if (r < 0 && r != -EEXIST)
                        log_warning_errno(r, "Failed to record template %s: %m", name);
                else
                        (void) store_template_set_ready(w->store, name, size);
                worker_event(w, NULL, "template.imported", "bundled template", NULL);
                log_info("Imported bundled template %s (%" PRIu64 " bytes)", name, size);
        }
        return 0;
}
