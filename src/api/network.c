/* SPDX-License-Identifier: MIT */
/* A sandbox's egress policy: the create request's "network" field and
 * PUT /v1/sandboxes/{id}/policy, which replaces it on a live sandbox (the
 * worker's gateway applies it to new connections and queries at once).
 * Validation is egress-policy.c's; what is stored and shown is its canonical
 * form. */

#include <stdio.h>

#include "api-internal.h"
#include "egress-policy.h"
#include "log.h"
#include "str-util.h"

static int canonical(const JsonValue *v, const char *what, char **ret, ApiError *e) {
        _cleanup_(egress_policy_freep) EgressPolicy *p = NULL;
        _cleanup_free_ char *text = NULL;
        char err[EGRESS_POLICY_ERR_MAX] = "";
        size_t n = 0;
        int r;

        r = json_serialize(v, &text, &n);
        if (r < 0)
                return api_error(e, r, API_UNAVAILABLE, "out of memory");
        if (n > EGRESS_POLICY_JSON_MAX)
                return api_error(e, -E2BIG, API_PAYLOAD_TOO_LARGE, "%s: the policy is larger than %u bytes", what,
                                 EGRESS_POLICY_JSON_MAX);
        r = egress_policy_from_json(v, &p, err, sizeof err);
        if (r == -ENOMEM)
                return api_error(e, r, API_UNAVAILABLE, "out of memory");
        if (r == -E2BIG)
                return api_error(e, r, API_PAYLOAD_TOO_LARGE, "%s: %s", what, err);
        if (r >= 0)
                r = egress_policy_check_new(p, err, sizeof err);
        if (r < 0)
                return api_error(e, r, API_INVALID_ARGUMENT, "%s: %s", what, err);
        r = egress_policy_to_json(p, ret);
        if (r < 0)
                return api_error(e, r, API_UNAVAILABLE, "out of memory");
        return 0;
}

int api_validate_network(const JsonValue *v, const Config *c, char **ret, ApiError *e) {
        _cleanup_json_ JsonValue *def = NULL;

        if (v && !json_is_null(v))
                return canonical(v, "network", ret, e);
        /* the deployment's default (checked at start), else no egress */
        if (json_parse(isempty(c->default_network) ? "{}" : c->default_network,
                       isempty(c->default_network) ? 2 : strlen(c->default_network), &def, NULL, 0) < 0)
                return api_error(e, -EINVAL, API_INTERNAL, "the configured default_network is not valid JSON");
        return canonical(def, "default_network", ret, e);
}

static int reply_sandbox(ApiRequest *r, const char *id, ApiError *e) {
        _cleanup_sandbox_ Sandbox sb = {};
        _cleanup_(json_w_done) JsonWriter w;
        int k;

        json_w_init(&w);
        k = store_sandbox_get(r->store, r->key.tenant_id, id, &sb);
        if (k < 0)
                return api_store_error(e, k, "reading the sandbox back");
        json_out_sandbox(&w, &sb, r->tenant_name);
        return api_reply_json(r, 200, &w);
}

int api_sandbox_policy_apply(ApiRequest *r, const char *id, const JsonValue *body, ApiError *e) {
        _cleanup_sandbox_lock_ ApiSandboxLock *lock = NULL;
        _cleanup_sandbox_ Sandbox sb = {};
        _cleanup_free_ char *policy = NULL, *old = NULL;
        char reason[STORE_REASON_MAX];
        int k;

        k = body ? canonical(body, "policy", &policy, e) : api_validate_network(NULL, api_config(r->api), &policy, e);
        if (k < 0)
                return k;
        lock = api_sandbox_lock(id);
        k = api_sandbox_lookup(r, id, false, &sb, e);
        if (k < 0)
                return k;
        old = sb.network_json ? strdup(sb.network_json) : strdup("{\"allow\":[],\"deny\":[]}");
        if (!old)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");

        k = store_sandbox_set_network(r->store, id, policy);
        if (k == -ESTALE || k == -ENOENT)
                return api_error(e, -ENOENT, API_NOT_FOUND, "no sandbox '%s'", id);
        if (k < 0)
                return api_store_error(e, k, "changing the network policy");

        /* the live gateway: at once; a sandbox that is not running gets it when it starts */
        if (sb.state == SANDBOX_RUNNING || sb.state == SANDBOX_PAUSED) {
                free(sb.network_json);
                sb.network_json = TAKE_PTR(policy);
                k = api_get_worker(r, e);
                if (k >= 0)
                        k = worker_sandbox_set_network(r->worker, &sb, e);
                if (k < 0) {
                        int u = store_sandbox_set_network(r->store, id, old); /* nothing changed */
                        if (u < 0)
                                log_error_errno(u, "Failed to restore the network policy of %s: %m", id);
                        if (e->code == API_OK)
                                (void) api_error(e, k, API_UNAVAILABLE, "the worker failed: %s", strerror(-k));
                        return k;
                }
        } else {
                free(sb.network_json);
                sb.network_json = TAKE_PTR(policy);
        }

        snprintf(reason, sizeof reason, "network policy changed by %s", r->actor);
        api_event(r, id, "sandbox.network_policy", reason, sb.network_json);
        log_info("Sandbox %s: network policy changed", id);
        return 0;
}

int api_sandbox_policy_put(ApiRequest *r, ApiError *e) {
        _cleanup_json_ JsonValue *body = NULL;
        int k;

        k = api_read_json(r, &body, e);
        if (k < 0)
                return k;
        k = api_sandbox_policy_apply(r, r->params[0], body, e);
        if (k < 0)
                return k;
        return reply_sandbox(r, r->params[0], e);
}
