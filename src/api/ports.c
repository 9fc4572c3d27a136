/* SPDX-License-Identifier: MIT */
/* GET /v1/sandboxes/{id}/ports/{port}: how to reach a port of a sandbox
 * through the ingress: its URL, its traffic token and a one-time link that
 * sets the traffic cookie in a browser (src/ingress/ingress.h). */

#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "api-internal.h"
#include "ingress-auth.h"
#include "str-util.h"

int api_parse_port(const char *s, uint16_t *ret, ApiError *e) {
        uint64_t port;

        if (!s || *s == 0 || *s == '0' || strlen(s) > 5 || strspn(s, "0123456789") != strlen(s) ||
            (port = strtoull(s, NULL, 10)) == 0 || port > 65535)
                return api_error(e, -EINVAL, API_BAD_REQUEST, "the port must be an integer in [1, 65535]");
        *ret = (uint16_t) port;
        return 0;
}

int api_sandbox_port(ApiRequest *r, ApiError *e) {
        _cleanup_(sandbox_done) Sandbox sb = {};
        _cleanup_(json_w_done) JsonWriter w = {};
        const Config *c = api_config(r->api);
        char url[CONFIG_STR_MAX + 64], link[CONFIG_STR_MAX + 64 + INGRESS_SIGNED_MAX], token[INGRESS_TOKEN_LEN + 1],
                signed_link[INGRESS_SIGNED_MAX], when[JSON_OUT_TIME_MAX];
        uint16_t port = 0;
        uint64_t expiry = (uint64_t) time(NULL) + INGRESS_LINK_TTL_SEC;
        int k;

        /* the sandbox first: another tenant's is a 404 whatever else the request says */
        k = api_sandbox_lookup(r, r->params[0], false, &sb, e);
        if (k < 0)
                return k;
        k = api_parse_port(r->params[1], &port, e);
        if (k < 0)
                return k;
        k = ingress_url(c, sb.id, (unsigned) port, url, sizeof url);
        if (k == -ENODATA)
                return api_error(e, k, API_UNAVAILABLE, "the ingress is off on this server (ingress_listen)");
        if (k < 0)
                return api_error(e, k, API_INTERNAL, "cannot form the URL");
        k = ingress_traffic_token(c, sb.id, token);
        if (k >= 0)
                k = ingress_signed_make(c, "link", sb.id, expiry, signed_link);
        if (k < 0)
                return api_error(e, k, API_INTERNAL, "traffic tokens are unavailable");
        snprintf(link, sizeof link, "%s?" INGRESS_LINK_PARAM "=%s", url, signed_link);
        json_out_time((int64_t) expiry * 1000000, when);

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "sandbox_id", sb.id);
        json_w_kv_int(&w, "port", (int64_t) port);
        json_w_kv_string(&w, "url", url);
        json_w_kv_string(&w, "token", token);
        json_w_kv_string(&w, "token_header", INGRESS_TOKEN_HEADER);
        json_w_kv_string(&w, "link", link);
        json_w_kv_string(&w, "link_expires_at", when);
        json_w_object_end(&w);
        explicit_bzero(token, sizeof token);
        return api_reply_json(r, 200, &w);
}
