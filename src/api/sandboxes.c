/* SPDX-License-Identifier: MIT */
/* /v1/sandboxes: create, list, show, delete. The store row is written first
 * (state creating), the worker does the host work, and the row then records
 * the outcome; every transition is an event. */

#include <inttypes.h>
#include <poll.h>
#include <stdio.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "log.h"
#include "str-util.h"

#define API_ID_ATTEMPTS 5U      /* fresh ids tried when one is taken */
#define API_WORKER_NAME "local" /* the worker of an all-in-one deployment */

int api_sandbox_lookup(ApiRequest *r, const char *id, bool running, Sandbox *ret, ApiError *e) {
        int k;

        if (!api_sandbox_id_valid(id))
                return api_error(e, -ENOENT, API_NOT_FOUND, "no sandbox '%.64s'", strempty(id));
        k = store_sandbox_get(r->store, r->key.tenant_id, id, ret);
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "no sandbox '%s'", id);
        if (k < 0)
                return api_store_error(e, k, "looking up the sandbox");
        /* a deleted sandbox is gone (its history stays in the events) */
        if (ret->state == SANDBOX_DELETED)
                k = api_error(e, -ENOENT, API_NOT_FOUND, "no sandbox '%s'", id);
        else if (!running)
                return 0;
        else if (ret->state == SANDBOX_PAUSED && (ret->auto_resume || api_config(r->api)->auto_resume_paused)) {
                k = api_sandbox_resume_paused(r, ret,
                                              ret->auto_resume ? "resumed by an exec or file call (auto_resume)"
                                                               : "resumed by an exec or file call (auto_resume_paused)",
                                              e);
                if (k >= 0) {
                        (void) store_sandbox_touch(r->store, id); /* activity, for the idle policy */
                        return 0;
                }
        } else if (ret->state == SANDBOX_RUNNING) {
                (void) store_sandbox_touch(r->store, id);
                return 0;
        } else if (ret->state == SANDBOX_PAUSED)
                k = api_error(e, -EBUSY, API_SANDBOX_PAUSED,
                              "sandbox '%s' is paused; resume it with POST /v1/sandboxes/%s/resume", id, id);
        else if (ret->state == SANDBOX_SUSPENDED)
                k = api_error(e, -EBUSY, API_SANDBOX_NOT_RUNNING,
                              "sandbox '%s' is suspended; resume it with POST /v1/sandboxes/%s/resume", id, id);
        else
                k = api_error(e, -EBUSY, API_SANDBOX_NOT_RUNNING, "sandbox '%s' is %s, not running", id,
                              sandbox_state_to_string(ret->state) ?: "not running");
        sandbox_done(ret);
        return k;
}

int api_sandbox_count(ApiRequest *r, const char *template_name, uint64_t *ret, ApiError *e) {
        SandboxFilter f = { .tenant_id = NULL, .state = -1 };
        int k;

        if (template_name)
                k = store_template_in_use(r->store, template_name, ret);
        else
                k = store_sandbox_count(r->store, &f, ret);
        if (k < 0)
                return api_store_error(e, k, "counting sandboxes");
        return 0;
}

static int reply_sandbox(ApiRequest *r, int status, const char *id, ApiError *e) {
        _cleanup_sandbox_ Sandbox sb = {};
        _cleanup_(json_w_done) JsonWriter w;
        int k;

        json_w_init(&w);
        k = store_sandbox_get(r->store, r->key.tenant_id, id, &sb);
        if (k < 0)
                return api_store_error(e, k, "reading the sandbox back");
        json_out_sandbox(&w, &sb, r->tenant_name);
        return api_reply_json(r, status, &w);
}

bool api_sandbox_create_failed(ApiRequest *r, const Sandbox *sb, const ApiError *e) {
        char reason[STORE_REASON_MAX];
        int k;

        snprintf(reason, sizeof reason, "create failed: %s", e->message);
        log_warning("Creating sandbox %s failed: %s", sb->id, e->message);
        k = store_sandbox_set_state(r->store, sb->id, SANDBOX_CREATING, SANDBOX_DELETED, reason);
        if (k == -ESTALE) /* no longer creating: a caller deleted it meanwhile */
                return true;
        if (k < 0)
                log_error_errno(k, "Failed to mark sandbox %s deleted after a failed create: %m", sb->id);
        api_event(r, sb->id, "sandbox.create_failed", reason, NULL);
        return false;
}

/* Every free slot is held by a deleted sandbox whose teardown runs on (the
 * store says -EAGAIN): its worker finishes one within milliseconds, so the
 * insert is tried again for this long before the host counts as full. */
#define API_SLOT_HELD_WAIT_MSEC 10000
#define API_SLOT_HELD_POLL_MSEC 5

int api_sandbox_insert_new(ApiRequest *r, Sandbox *sb, uint64_t pending, ApiError *e) {
        int64_t deadline = now_usec() + (int64_t) API_SLOT_HELD_WAIT_MSEC * 1000;
        StoreAdmission adm;
        int k = -EEXIST;

        /* the tenant's quotas, decided in the insert's transaction */
        k = api_tenant_admission(r, sb->tenant_id, &adm, e);
        if (k < 0)
                return k;
        adm.count = pending;
        k = -EEXIST;
        for (unsigned i = 0; i < API_ID_ATTEMPTS && k == -EEXIST; i++) {
                k = api_sandbox_id_generate(sb->id);
                if (k < 0)
                        return api_error(e, k, API_INTERNAL, "cannot generate an id: %s", strerror(-k));
                k = store_sandbox_insert_admit(r->store, sb, (uint32_t) api_config(r->api)->slots_max, &adm);
                if (k == -EAGAIN && now_usec() < deadline) {
                        (void) poll(NULL, 0, API_SLOT_HELD_POLL_MSEC);
                        k = -EEXIST; /* once more */
                        i--;
                }
        }
        if (k == -EDQUOT)
                return api_quota_error(r, &adm, pending > 1 ? "this branch" : "a new sandbox", e);
        if (k == -EIDRM) /* resolved, then collected before the row was in: no sandbox used it */
                return api_error(e, k, API_CONFLICT,
                                 "version %" PRIu64 " of template '%s' was removed while this sandbox was being "
                                 "created; try again", sb->template_version, sb->template_name);
        if (k == -ENOSPC || k == -EAGAIN)
                return api_error(e, k, API_UNAVAILABLE, "no free sandbox slot on this host%s",
                                 k == -EAGAIN ? " (the teardowns of deleted sandboxes still hold them)" : "");
        if (k < 0)
                return api_store_error(e, k, "recording the new sandbox");
        return 0;
}

int api_sandbox_start_new(ApiRequest *r, Sandbox *sb, const char *via, const ApiVolumeMounts *vols, ApiError *e) {
        uint64_t starttime = 0;
        int64_t pid = 0;
        char data[STORE_NAME_MAX + 64];
        Event ev;
        int k;

        /* a cluster places a sandbox with volumes on their worker, one a caller pinned (a build's
         * sandbox: sb->worker set) on that one, else as placement chooses */
        if (vols && vols->n > 0 && vols->worker[0])
                (void) strscpy(sb->worker, sizeof sb->worker, vols->worker);
        else if (isempty(sb->worker))
                (void) strscpy(sb->worker, sizeof sb->worker, API_WORKER_NAME);
        sb->state = SANDBOX_CREATING;
        k = api_sandbox_insert_new(r, sb, 1, e);
        if (k < 0)
                return k;
        api_log_sandbox(r, sb->id);
        k = api_volume_mounts_record(r, sb->id, vols, e);
        if (k < 0) {
                api_sandbox_create_failed(r, sb, e);
                return k;
        }
        /* its expiry came with the insert */
        k = api_get_worker(r, e);
        if (k >= 0)
                k = worker_sandbox_create(r->worker, sb, &pid, &starttime, e);
        if (k < 0) {
                if (e->code == API_OK)
                        (void) api_error(e, k, API_UNAVAILABLE, "the worker failed: %s", strerror(-k));
                api_sandbox_create_failed(r, sb, e);
                return k;
        }

        /* validated template name and a fixed `via`: no escaping needed */
        if (via)
                snprintf(data, sizeof data, "{\"template\":\"%s\",\"via\":\"%s\"}", sb->template_name, via);
        else
                snprintf(data, sizeof data, "{\"template\":\"%s\"}", sb->template_name);
        /* running, its pid (its worker: as placed) and its event in one transaction */
        api_event_init(r, r->key.tenant_id, sb->id, "sandbox.created", "", data, &ev);
        k = store_sandbox_set_running(r->store, sb->id, pid, starttime, &ev);
        if (k < 0) {
                ApiError ignored = {};
                /* deleted while we created it, or the store failed: do not leave it running */
                (void) worker_sandbox_destroy(r->worker, sb->id, &ignored);
                if (k == -ESTALE)
                        return api_error(e, k, API_CONFLICT, "sandbox '%s' was deleted while it was being created",
                                         sb->id);
                (void) api_store_error(e, k, "recording the running sandbox");
                api_sandbox_create_failed(r, sb, e);
                return k;
        }
        log_info("Created sandbox %s from template %s%s", sb->id, sb->template_name, via ? " (E2B API)" : "");
        return 0;
}

/* The rest of a create once the request is valid: creds are the credentials
 * to grant (their placeholders are in sb's env already). */
/* sb->template_name a reference (NAME, NAME:TAG, NAME@vN): it becomes the
 * name, with the version and, for an old version, its pool name. Once
 * resolved, a second call changes nothing. The version is checked again by
 * the insert (a collection may take it in between): NAME (whichever version
 * is newest, as the pool's NAME is) takes the newest there. */
int api_sandbox_resolve_template(ApiRequest *r, Sandbox *sb, ApiError *e) {
        ApiTemplateRef t, asked;
        int k;

        if (sb->template_resolved || sb->template_version > 0)
                return 0;
        k = api_template_resolve(r, sb->template_name, &t, e);
        if (k < 0)
                return k;
        sb->template_newest = t.version > 0 && api_template_ref_parse(sb->template_name, &asked) >= 0 &&
                              asked.version == 0 && !asked.tag[0];
        (void) strscpy(sb->template_name, sizeof sb->template_name, t.name);
        sb->template_version = t.version;
        if (!t.newest && t.version > 0)
                api_template_pool_name(&t, sb->template_pool, sizeof sb->template_pool);
        sb->template_resolved = true;
        return 0;
}

int api_sandbox_create_with(ApiRequest *r, Sandbox *sb, const Credential *creds, size_t n_creds, const char *via,
                            const ApiVolumeMounts *vols, ApiError *e) {
        const Config *c = api_config(r->api);
        uint64_t live;
        Template t;
        int k;

        k = api_sandbox_resolve_template(r, sb, e);
        if (k < 0)
                return k;
        k = store_template_get(r->store, sb->template_name, &t);
        if (k >= 0 && t.tenant_id[0] && !r->key.admin && !streq(t.tenant_id, r->key.tenant_id))
                k = -ENOENT; /* another tenant's template (an E2B build) is none */
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "no template '%s'", sb->template_name);
        if (k < 0)
                return api_store_error(e, k, "looking up the template");
        if (t.state != TEMPLATE_READY)
                return api_error(e, -EBUSY, API_CONFLICT, "template '%s' is still being imported", t.name);

        (void) strscpy(sb->tenant_id, sizeof sb->tenant_id, r->key.tenant_id);
        sb->created_usec = sb->updated_usec = now_usec();
        sb->expires_usec = sb->timeout_s > 0 ? sb->created_usec + (int64_t) sb->timeout_s * 1000000 : 0;

        /* a warm sandbox, if the template has a pool and one is free (it adds no sandbox to the host);
         * not for one with credentials: their gateway CA is installed when a sandbox is created */
        if (n_creds == 0 && (!vols || vols->n == 0) && !sb->ingress_host[0] && !sb->template_pool[0]) { /* nor with volumes: they are mounted as it starts */
                k = api_sandbox_create_warm(r, sb, via, e);
                if (k != 0)
                        return k < 0 ? k : 0;
        }

        k = api_sandbox_count(r, NULL, &live, e);
        if (k < 0)
                return k;
        if (live >= c->max_sandboxes)
                return api_error(e, -EAGAIN, API_UNAVAILABLE, "this host already runs its maximum of %" PRIu64
                                 " sandboxes", c->max_sandboxes);

        k = api_sandbox_start_new(r, sb, via, vols, e);
        if (k < 0)
                return k;
        k = api_credentials_grant_all(r, sb->id, creds, n_creds, e);
        if (k >= 0 && n_creds > 0) {
                /* its gateway learns them (and its CA goes into its trust store) before the create returns */
                Sandbox placed = {};
                k = api_sandbox_lookup(r, sb->id, false, &placed, e);
                if (k >= 0)
                        k = worker_sandbox_set_credentials(r->worker, &placed, e);
                sandbox_done(&placed);
        }
        if (k < 0) {
                ApiError ignored = {};
                (void) worker_sandbox_destroy(r->worker, sb->id, &ignored);
                api_sandbox_create_failed(r, sb, e);
                return k;
        }
        return 0;
}

int api_sandbox_create(ApiRequest *r, ApiError *e) {
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_sandbox_ Sandbox sb = {};
        _cleanup_free_ ApiVolumeMounts *vols = new0(ApiVolumeMounts, 1);
        _cleanup_free_ char *start = NULL;
        Credential *creds = NULL;
        size_t n_creds = 0;
        int k;

        if (!vols)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        k = api_read_json_optional(r, &body, e); /* every field is optional: no body is fine */
        if (k < 0)
                return k;
        k = api_validate_sandbox_create(body, api_config(r->api), &sb, e);
        if (k >= 0)
                k = api_sandbox_resolve_template(r, &sb, e); /* NAME:TAG, NAME@vN: before its defaults */
        if (k < 0)
                return k;
        k = api_volume_mounts_parse(r, json_get(body, "volumes"), "read_only", vols, e);
        if (k < 0)
                return k;
        k = api_sandbox_defaults(r, &sb, &start, e);
        if (k < 0)
                return k;
        k = api_credentials_resolve(r, json_get(body, "credentials"), &creds, &n_creds, e);
        if (k < 0)
                return k;
        k = api_credentials_add_env(creds, n_creds, &sb.env_json, e);
        if (k >= 0)
                k = api_sandbox_create_with(r, &sb, creds, n_creds, NULL, vols, e);
        credential_array_free(creds, n_creds);
        if (k >= 0)
                k = api_sandbox_start_command(r, &sb, start, e);
        if (k < 0)
                return k;
        return reply_sandbox(r, 201, sb.id, e); /* a new one, or a warm one handed over (its id in sb) */
}

int api_sandbox_list(ApiRequest *r, ApiError *e) {
        _cleanup_free_ char *state = NULL, *after = NULL;
        _cleanup_(json_w_done) JsonWriter w;
        uint64_t limit = API_LIST_LIMIT_DEFAULT;
        SandboxFilter f = { .tenant_id = r->key.tenant_id, .state = -1 };
        Sandbox *list = NULL;
        size_t n = 0, shown;
        int k;

        json_w_init(&w);
        k = api_query_string(r, "state", &state, e);
        if (k < 0)
                return k;
        if (state) {
                SandboxState s = sandbox_state_from_string(state);
                if (s < 0)
                        return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                         "state must be one of creating, running, paused, suspended, deleting, "
                                         "deleted, error; not '%.32s'", state);
                f.state = s;
                f.include_deleted = s == SANDBOX_DELETED;
        }
        k = api_query_u64(r, "limit", 1, API_LIST_LIMIT_MAX, &limit, e);
        if (k < 0)
                return k;
        k = api_query_string(r, "after", &after, e);
        if (k < 0)
                return k;
        if (after && !api_sandbox_id_valid(after))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "after must be a sandbox id (the next of a page)");
        f.after_id = after;
        f.limit = limit + 1; /* one more, to know whether there is a next page */

        k = store_sandbox_list(r->store, &f, &list, &n);
        if (k < 0)
                return api_store_error(e, k, "listing sandboxes");
        shown = MIN(n, (size_t) limit);

        json_w_object_begin(&w);
        json_w_key(&w, "sandboxes");
        json_w_array_begin(&w);
        for (size_t i = 0; i < shown; i++)
                json_out_sandbox(&w, &list[i], r->tenant_name);
        json_w_array_end(&w);
        json_w_kv_string(&w, "next", n > shown && shown > 0 ? list[shown - 1].id : NULL);
        json_w_object_end(&w);
        sandbox_array_free(list, n);
        return api_reply_json(r, 200, &w);
}

int api_sandbox_show(ApiRequest *r, ApiError *e) {
        _cleanup_sandbox_ Sandbox sb = {};
        _cleanup_(json_w_done) JsonWriter w;
        int k;

        json_w_init(&w);
        k = api_sandbox_lookup(r, r->params[0], false, &sb, e);
        if (k < 0)
                return k;
        json_out_sandbox(&w, &sb, r->tenant_name);
        return api_reply_json(r, 200, &w);
}

int api_sandbox_destroy(ApiRequest *r, const char *id, const char *reason, ApiError *e) {
        int k;

        k = store_sandbox_set_state(r->store, id, -1, SANDBOX_DELETING, reason);
        if (k == -ESTALE)
                return k;
        if (k < 0)
                return api_store_error(e, k, "marking the sandbox deleting");

        k = api_get_worker(r, e);
        if (k >= 0)
                k = worker_sandbox_destroy(r->worker, id, e);
        if (k < 0 && e->code == API_WORKER_UNAVAILABLE) {
                /* the worker went away (or is restarting): the sandbox stays deleting, and the
                 * worker finishes the delete at its start (or the reaper retries it) */
                log_warning("Deleting sandbox %s waits for the worker: %s", id, e->message);
                (void) api_error(e, k, API_WORKER_UNAVAILABLE,
                                 "the worker is unavailable (%.200s); the delete is recorded and finishes when the "
                                 "worker is back", e->message);
                return k;
        }
        if (k < 0) {
                char why[STORE_REASON_MAX];
                if (e->code == API_OK)
                        (void) api_error(e, k, API_UNAVAILABLE, "the worker failed: %s", strerror(-k));
                snprintf(why, sizeof why, SANDBOX_REASON_DELETE_FAILED "%s", e->message);
                log_error("Deleting sandbox %s failed: %s", id, e->message);
                if (store_sandbox_set_state(r->store, id, SANDBOX_DELETING, SANDBOX_ERROR, why) >= 0)
                        api_event(r, id, "sandbox.error", why, NULL);
                return k;
        }

        k = store_sandbox_set_state(r->store, id, SANDBOX_DELETING, SANDBOX_DELETED, reason);
        if (k == -ESTALE) {
                /* a restarted worker (or the reaper) finished it meanwhile */
                _cleanup_sandbox_ Sandbox now = {};
                if (store_sandbox_get(r->store, NULL, id, &now) >= 0 && now.state == SANDBOX_DELETED)
                        return 0;
        }
        if (k < 0)
                return api_store_error(e, k, "marking the sandbox deleted");
        api_event(r, id, "sandbox.deleted", reason, NULL);
        log_info("Deleted sandbox %s (%s)", id, reason);
        api_template_gc_sandbox(r, id); /* an old version it held may go now */
        return 0;
}

int api_sandbox_delete(ApiRequest *r, ApiError *e) {
        _cleanup_sandbox_lock_ ApiSandboxLock *lock = NULL;
        _cleanup_sandbox_ Sandbox sb = {};
        char reason[STORE_REASON_MAX];
        const char *id = r->params[0];
        int k;

        lock = api_sandbox_lock(id); /* after any lifecycle call in flight on it */
        k = api_sandbox_lookup(r, id, false, &sb, e);
        if (k < 0)
                return k;
        snprintf(reason, sizeof reason, "deleted by %s", r->actor);
        k = api_sandbox_destroy(r, id, reason, e);
        if (k == -ESTALE)
                return api_error(e, -ENOENT, API_NOT_FOUND, "no sandbox '%s'", id);
        if (k < 0)
                return k;
        return reply_sandbox(r, 200, id, e);
}
