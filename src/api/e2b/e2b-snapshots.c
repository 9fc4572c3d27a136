/* SPDX-License-Identifier: MIT */
/* E2B snapshots and fork over space's checkpoints and branch. A snapshot is a
 * checkpoint of the sandbox (its files; on the ns runtime processes are not
 * kept), its snapshotID the checkpoint's id and its names the checkpoint's
 * name if it has one. Sandbox.create(snapshotID or name) branches a new
 * sandbox from it; Sandbox.deleteSnapshot is DELETE /templates/{id}. Like
 * every checkpoint, a snapshot lives as long as its sandbox. fork branches
 * from the sandbox's current files. */

#include <inttypes.h>
#include <stdio.h>

#include "alloc-util.h"
#include "e2b.h"
#include "log.h"
#include "str-util.h"

#define E2B_SNAPSHOT_SCAN_PAGE 500U

static void snapshot_json(JsonWriter *w, const Checkpoint *c) {
        json_w_object_begin(w);
        json_w_kv_string(w, "snapshotID", c->id);
        json_w_key(w, "names");
        json_w_array_begin(w);
        if (c->name[0])
                json_w_string(w, c->name);
        json_w_array_end(w);
        json_w_object_end(w);
}

/* POST /sandboxes/{id}/snapshots {"name"?} → 201 {snapshotID, names}. */
int e2b_snapshot_create(ApiRequest *r, const char *id, ApiError *e) {
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        char name[STORE_NAME_MAX] = "";
        Checkpoint c;
        int k;

        json_w_init(&w);
        k = e2b_read_json(r, &body, e);
        if (k >= 0)
                k = api_validate_checkpoint_create(body, name, e);
        if (k >= 0)
                k = api_checkpoint_take(r, id, name[0] ? name : NULL, -1, &c, e);
        if (k < 0)
                return k;
        snapshot_json(&w, &c);
        return e2b_reply_json(r, 201, &w, NULL);
}

static int checkpoint_cmp(const void *a, const void *b) {
        return strcmp(((const Checkpoint *) a)->id, ((const Checkpoint *) b)->id);
}

/* The restorable checkpoints of the tenant's live sandboxes (or of one), by id. */
static int tenant_checkpoints(ApiRequest *r, const char *sandbox_id, Checkpoint **ret, size_t *ret_n, ApiError *e) {
        _cleanup_free_ Checkpoint *all = NULL;
        char cursor[STORE_ID_MAX] = "";
        size_t n = 0, allocated = 0;
        int k;

        for (;;) {
                SandboxFilter f = { .tenant_id = r->key.tenant_id, .state = -1, .limit = E2B_SNAPSHOT_SCAN_PAGE };
                Sandbox *list = NULL;
                size_t m = 0;

                f.after_id = cursor[0] ? cursor : NULL;
                k = store_sandbox_list(r->store, &f, &list, &m);
                if (k < 0)
                        return api_store_error(e, k, "listing sandboxes");
                for (size_t i = 0; i < m && k >= 0; i++) {
                        _cleanup_free_ Checkpoint *cks = NULL;
                        size_t c = 0;

                        if (list[i].state == SANDBOX_DELETED || (sandbox_id && !streq(list[i].id, sandbox_id)))
                                continue;
                        k = store_checkpoint_list(r->store, list[i].id, &cks, &c);
                        if (k < 0) {
                                (void) api_store_error(e, k, "listing checkpoints");
                                break;
                        }
                        for (size_t j = 0; j < c; j++) {
                                if (!cks[j].restorable)
                                        continue;
                                if (GREEDY_REALLOC(all, allocated, n + 1) < 0) {
                                        k = api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
                                        break;
                                }
                                all[n++] = cks[j];
                        }
                }
                if (m > 0)
                        (void) strscpy(cursor, sizeof cursor, list[m - 1].id);
                sandbox_array_free(list, m);
                if (k < 0)
                        return k;
                if (m < E2B_SNAPSHOT_SCAN_PAGE)
                        break;
        }
        if (n > 1)
                qsort(all, n, sizeof *all, checkpoint_cmp);
        *ret = TAKE_PTR(all);
        *ret_n = n;
        return 0;
}

/* GET /snapshots?sandboxID=&name=&limit=&nextToken= → [{snapshotID, names}], X-Next-Token. */
int e2b_snapshot_list(ApiRequest *r, ApiError *e) {
        _cleanup_free_ char *sandbox_id = NULL, *name = NULL, *next = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_free_ Checkpoint *all = NULL;
        char hdr[STORE_ID_MAX + 32] = "";
        uint64_t limit = E2B_LIST_LIMIT_DEFAULT, shown = 0;
        size_t n = 0, i = 0;
        int k;

        json_w_init(&w);
        k = api_query_string(r, "sandboxID", &sandbox_id, e);
        if (k >= 0)
                k = api_query_string(r, "name", &name, e);
        if (k >= 0)
                k = api_query_string(r, "nextToken", &next, e);
        if (k >= 0)
                k = api_query_u64(r, "limit", 1, E2B_LIST_LIMIT_MAX, &limit, e);
        if (k < 0)
                return k;
        if (next && !api_sandbox_id_valid(next))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "nextToken is not one this server handed out");
        if (sandbox_id) {
                _cleanup_sandbox_ Sandbox sb = {};
                k = api_sandbox_lookup(r, sandbox_id, false, &sb, e);
                if (k < 0) {
                        if (e->code == API_NOT_FOUND)
                                (void) api_error(e, k, API_NOT_FOUND, "sandbox '%.64s' not found", sandbox_id);
                        return k;
                }
        }
        k = tenant_checkpoints(r, sandbox_id, &all, &n, e);
        if (k < 0)
                return k;
        json_w_array_begin(&w);
        if (next)
                while (i < n && strcmp(all[i].id, next) <= 0)
                        i++;
        for (; i < n; i++) {
                if (name && !streq(all[i].name, name))
                        continue;
                if (shown == limit) {
                        snprintf(hdr, sizeof hdr, "X-Next-Token: %s\r\n", all[i - 1].id);
                        break;
                }
                snapshot_json(&w, &all[i]);
                shown++;
        }
        json_w_array_end(&w);
        return e2b_reply_json(r, 200, &w, hdr[0] ? hdr : NULL);
}

/* A snapshot of the tenant by id, else by name (which must then be unique):
 * 1 found, 0 none, < 0 with e set. */
static int snapshot_find(ApiRequest *r, const char *ref, bool by_name, Checkpoint *ret, ApiError *e) {
        _cleanup_free_ Checkpoint *all = NULL;
        size_t n = 0, found = 0;
        int k;

        if (!api_checkpoint_name_valid(ref))
                return 0;
        k = store_checkpoint_get(r->store, r->key.tenant_id, ref, ret);
        if (k >= 0 && ret->restorable) {
                _cleanup_sandbox_ Sandbox sb = {};
                /* the checkpoint of a live sandbox only */
                if (store_sandbox_get(r->store, r->key.tenant_id, ret->sandbox_id, &sb) >= 0 &&
                    sb.state != SANDBOX_DELETED)
                        return 1;
        }
        if (k < 0 && k != -ENOENT)
                return api_store_error(e, k, "looking up the snapshot");
        if (!by_name)
                return 0;
        k = tenant_checkpoints(r, NULL, &all, &n, e);
        if (k < 0)
                return k;
        for (size_t i = 0; i < n; i++)
                if (streq(all[i].name, ref)) {
                        *ret = all[i];
                        found++;
                }
        if (found > 1)
                return api_error(e, -ENOTUNIQ, API_CONFLICT,
                                 "%zu snapshots are named '%s': use a snapshotID", found, ref);
        return found == 1;
}

/* DELETE /templates/{id}: a snapshot → 204; 404 {code:404} if there is none. */
int e2b_snapshot_delete(ApiRequest *r, const char *id, ApiError *e) {
        Template t;
        Checkpoint c;
        int k;

        k = snapshot_find(r, id, false, &c, e);
        if (k < 0)
                return k;
        if (k == 0) {
                if (store_template_get(r->store, id, &t) >= 0)
                        return api_error(e, -EOPNOTSUPP, API_NOT_IMPLEMENTED,
                                         "templates are managed with the space API (space template rm)");
                return api_error(e, -ENOENT, API_NOT_FOUND, "snapshot '%.64s' not found", id);
        }
        k = api_checkpoint_remove(r, c.sandbox_id, c.id, e);
        if (k < 0)
                return k;
        return e2b_reply(r, 204, NULL, NULL, 0, NULL);
}

/* The new sandboxes' E2B timeout and lifecycle (on_timeout: autoPause's
 * pause or suspend, else none), as a create or fork named them. */
static int kids_lifecycle(ApiRequest *r, const Sandbox *kids, size_t n, uint64_t timeout_s, const E2bLifecycle *lc,
                          ApiError *e) {
        for (size_t i = 0; i < n; i++) {
                bool auto_pause = lc->on_timeout != IDLE_ACTION_NONE;
                SandboxPolicy p = {
                        .timeout_s = auto_pause ? 0 : timeout_s,
                        .expires_usec = auto_pause || timeout_s == 0 ? 0 : now_usec() + (int64_t) timeout_s * 1000000,
                        .idle_s = auto_pause ? MAX(timeout_s, (uint64_t) 1) : kids[i].idle_s,
                        .idle_action = auto_pause ? lc->on_timeout : kids[i].idle_action,
                        .checkpoint_every_s = kids[i].checkpoint_every_s,
                        .auto_resume = lc->auto_resume,
                };
                int k = store_sandbox_set_policy(r->store, kids[i].id, &p);
                if (k < 0)
                        return api_store_error(e, k, "setting the new sandbox's timeout");
        }
        return 0;
}

static int timeout_field(const JsonValue *in, uint64_t *ret, ApiError *e) {
        const JsonValue *v = json_get(in, "timeout");

        if (!v || json_is_null(v))
                return 0;
        if (json_uint64(v, ret) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "timeout must be a number of seconds (>= 0)");
        return 1;
}

int e2b_create_from_snapshot(ApiRequest *r, const char *ref, const JsonValue *in, ApiError *e) {
        const Config *c = api_config(r->api);
        _cleanup_free_ Sandbox *kids = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        _cleanup_sandbox_ Sandbox got = {};
        _cleanup_free_ char *metadata = NULL, *env = NULL, *policy = NULL;
        _cleanup_json_ JsonValue *policy_json = NULL;
        uint64_t timeout = E2B_DEFAULT_TIMEOUT_S;
        BranchOverrides ov;
        E2bLifecycle lc;
        Template t;
        Checkpoint ck;
        size_t n = 0;
        int k;

        if (store_template_get(r->store, ref, &t) >= 0)
                return 0; /* a template: an ordinary create */
        k = snapshot_find(r, ref, true, &ck, e);
        if (k <= 0)
                return k;
        /* metadata given replaces the snapshot's sandbox's; envVars are laid over its envs */
        k = api_validate_string_map(in, "metadata", false, &metadata, e);
        if (k >= 0)
                k = api_validate_string_map(in, "envVars", true, &env, e);
        if (k >= 0)
                k = timeout_field(in, &timeout, e);
        if (k >= 0)
                k = e2b_body_lifecycle(in, &lc, e);
        if (k >= 0) /* asked nothing: the snapshot's sandbox's policy, as a branch keeps it */
                k = e2b_network_policy(json_get(in, "allow_internet_access"), json_get(in, "network"), c, true,
                                       &policy, e);
        if (k >= 0) {
                _cleanup_free_ char *creds = NULL;
                k = e2b_network_credentials(r, json_get(in, "network"), &creds, e);
                if (k >= 0 && creds && !streq(creds, "[]"))
                        k = api_error(e, -EOPNOTSUPP, API_INVALID_ARGUMENT,
                                      "network.rules are not supported on a create from a snapshot (the new sandbox "
                                      "keeps its source's credentials; change them with the space API)");
        }
        if (k >= 0 && policy && json_parse(policy, strlen(policy), &policy_json, NULL, 0) < 0)
                k = api_error(e, -EINVAL, API_INTERNAL, "cannot build the policy");
        if (k >= 0 && policy_json) { /* refused before anything is made */
                _cleanup_free_ char *canon = NULL;
                k = api_validate_network(policy_json, c, &canon, e);
        }
        if (k < 0)
                return k;
        if (timeout > c->max_timeout_s)
                return api_error(e, -ERANGE, API_INVALID_ARGUMENT, "timeout must be at most %" PRIu64 " s",
                                 c->max_timeout_s);
        ov = (BranchOverrides){ .metadata_json = metadata, .env_json = env };
        k = api_sandbox_branch_do(r, ck.sandbox_id, 1, ck.id, false, &ov, &kids, &n, e);
        if (k < 0)
                return k;
        k = kids_lifecycle(r, kids, n, timeout, &lc, e);
        if (k >= 0 && policy_json)
                k = api_sandbox_policy_apply(r, kids[0].id, policy_json, e);
        if (k >= 0)
                k = store_sandbox_get(r->store, r->key.tenant_id, kids[0].id, &got);
        if (k < 0)
                return e->code != API_OK ? k : api_store_error(e, k, "reading the new sandbox back");
        json_w_init(&w);
        k = e2b_write_sandbox(r, &w, &got);
        if (k < 0)
                return api_error(e, k, API_INTERNAL, "cannot make the sandbox's access token");
        (void) e2b_reply_json(r, 201, &w, NULL);
        return 1;
}

/* One child of a fork: its id, or the error of the batch that could not make it. */
typedef struct ForkChild {
        char id[STORE_ID_MAX];
        int status;
        char message[API_ERROR_MESSAGE_MAX];
} ForkChild;

static void fork_set_timeout(ApiRequest *r, const Sandbox *kid, uint64_t timeout) {
        ApiError ignored = {}; /* the fork exists; its timeout stays the parent's */
        E2bLifecycle lc = { .on_timeout = e2b_auto_pause(kid) ? kid->idle_action : IDLE_ACTION_NONE,
                            .auto_resume = kid->auto_resume };
        (void) kids_lifecycle(r, kid, 1, timeout, &lc, &ignored);
}

/* POST /sandboxes/{id}/fork {"timeout"?, "count"?} → 201 [{sandbox}|{error}]:
 * up to E2B_FORK_MAX children, made max_branch at a time; a batch that fails
 * after the first made some is reported on each of its children. */
int e2b_fork(ApiRequest *r, const char *id, ApiError *e) {
        const Config *c = api_config(r->api);
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_free_ ForkChild *children = NULL;
        _cleanup_(json_w_done) JsonWriter w = {};
        const JsonValue *v;
        uint64_t count = 1, timeout = 0, batch_max = c->max_branch;
        size_t made = 0;
        int k, have_timeout;

        json_w_init(&w);
        k = e2b_read_json(r, &body, e);
        if (k < 0)
                return k;
        have_timeout = timeout_field(body, &timeout, e);
        if (have_timeout < 0)
                return have_timeout;
        if (timeout > c->max_timeout_s)
                return api_error(e, -ERANGE, API_INVALID_ARGUMENT, "timeout must be at most %" PRIu64 " s",
                                 c->max_timeout_s);
        v = json_get(body, "count");
        if (v && !json_is_null(v) && (json_uint64(v, &count) < 0 || count < 1 || count > E2B_FORK_MAX))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "count must be from 1 to %u", E2B_FORK_MAX);
        children = new0(ForkChild, count);
        if (!children)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");

        while (made < count) {
                _cleanup_free_ Sandbox *kids = NULL;
                size_t want = MIN(count - made, (size_t) batch_max), n = 0;
                ApiError be = {};

                k = api_sandbox_branch_do(r, id, want, NULL, false, NULL, &kids, &n, &be);
                if (k < 0 && made == 0) {
                        /* nothing was forked: the whole call fails as it is */
                        *e = be;
                        if (e->code == API_NOT_FOUND)
                                (void) api_error(e, k, API_NOT_FOUND, "sandbox '%.64s' not found", id);
                        return k;
                }
                for (size_t i = 0; i < want; i++) {
                        ForkChild *ch = &children[made + i];
                        if (k >= 0 && i < n) {
                                (void) strscpy(ch->id, sizeof ch->id, kids[i].id);
                                if (have_timeout)
                                        fork_set_timeout(r, &kids[i], timeout);
                        } else {
                                ch->status = k < 0 ? api_error_code_to_status(be.code) : 500;
                                (void) strscpy(ch->message, sizeof ch->message,
                                               k < 0 ? be.message : "this fork could not be recorded");
                        }
                }
                made += want;
        }

        json_w_array_begin(&w);
        for (size_t i = 0; i < count; i++) {
                _cleanup_sandbox_ Sandbox got = {};
                json_w_object_begin(&w);
                if (children[i].id[0] && store_sandbox_get(r->store, r->key.tenant_id, children[i].id, &got) >= 0) {
                        json_w_key(&w, "sandbox");
                        k = e2b_write_sandbox(r, &w, &got);
                        if (k < 0)
                                return api_error(e, k, API_INTERNAL, "cannot make the sandbox's access token");
                } else {
                        json_w_key(&w, "error");
                        json_w_object_begin(&w);
                        json_w_kv_int(&w, "code", children[i].status ?: 500);
                        json_w_kv_string(&w, "message", children[i].message[0] ? children[i].message
                                                                                 : "this fork could not be recorded");
                        json_w_object_end(&w);
                }
                json_w_object_end(&w);
        }
        json_w_array_end(&w);
        return e2b_reply_json(r, 201, &w, NULL);
}
