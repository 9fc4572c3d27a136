/* SPDX-License-Identifier: MIT */
/* Credentials in the gateway: the master key and the upstream trust store
 * (read at start, before root is dropped), a sandbox's CA and granted set
 * (the "credentials" control op: values arrive sealed and are opened here,
 * into secret memory), and the credential.used events. */
#include <errno.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc-util.h"
#include "gateway-internal.h"
#include "log.h"
#include "str-util.h"

#define GW_CRED_EVENT_BURST_FACTOR 10.0

/* Credential times (expiry, revocation) are wall-clock microseconds, like the store's. */
int64_t gw_wall_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int gw_cred_setup(Gateway *gw) {
        const GatewayConfig *c = gw->config;
        char err[512] = "";
        int r;

        /* a CA file may be readable by root only: loaded now (the host's store after the drop) */
        if (c->upstream_ca_file) {
                r = tls_intercept_client_ctx_new(c->upstream_ca_file, &gw->upstream_tls);
                if (r < 0)
                        return log_error_errno(r, "gateway: cannot load the CA file for upstreams %s",
                                               c->upstream_ca_file);
        }
        if (c->master_key_file)
                r = cred_key_open_file(c->master_key_file, false, &gw->cred_key, err, sizeof err);
        else if (c->state_dir)
                r = cred_key_open(c->state_dir, false, &gw->cred_key, err, sizeof err);
        else
                return 0;
        if (r < 0) {
                log_warning("gateway: no credentials master key (%s): credentials cannot be applied on this host",
                            err[0] ? err : strerror(-r));
                return 0;
        }
        if (c->master_key_previous_file) {
                /* a rotation's window: values sealed under the key before it still open */
                _cleanup_(cred_key_freep) CredKey *prev = NULL;
                r = cred_key_open_file(c->master_key_previous_file, false, &prev, err, sizeof err);
                if (r >= 0)
                        r = cred_key_set_previous(gw->cred_key, prev);
                if (r >= 0)
                        prev = NULL; /* owned by the key now */
                else
                        log_warning("gateway: the previous master key is not used (%s): credentials sealed under "
                                    "it cannot be applied on this host",
                                    err[0] ? err : r == -EEXIST ? "it is the same key as master_key_file" : strerror(-r));
        }
        return 0;
}

int gw_cred_setup_unprivileged(Gateway *gw) {
        int r;

        if (gw->upstream_tls)
                return 0;
        r = tls_intercept_client_ctx_new(NULL, &gw->upstream_tls);
        if (r < 0)
                return log_error_errno(r, "gateway: cannot use the host's trust store for upstreams: %m");
        return 0;
}

void gw_cred_done(Gateway *gw) {
        gw->cred_key = cred_key_free(gw->cred_key);
        SSL_CTX_free(gw->upstream_tls);
        gw->upstream_tls = NULL;
}

void gw_sandbox_cred_done(GwSandbox *sb) {
        cred_inject_set_done(&sb->creds);
        sb->ca = tls_ca_free(sb->ca);
        sb->ca_cert_pem = mfree(sb->ca_cert_pem);
}

bool gw_cred_wants(GwSandbox *sb, const char *host) {
        return sb->ca && host && host[0] && cred_inject_wants(&sb->creds, host, gw_wall_usec());
}

static const char *str_field(const JsonValue *o, const char *key, size_t max) {
        const JsonValue *v = json_get(o, key);
        const char *s = json_string(v);
        return s && json_string_len(v) == strlen(s) && strlen(s) <= max ? s : NULL;
}

/* One credential of the op into c; the value opened unless it is revoked. */
static int cred_parse(Gateway *gw, const JsonValue *o, CredInject *c, char *err, size_t errsize) {
        const char *name = str_field(o, "name", CRED_NAME_MAX), *apply = str_field(o, "apply", 16);
        const char *id = str_field(o, "id", 128), *tenant = str_field(o, "tenant", 128);
        const char *ct = str_field(o, "ciphertext", 4 * CRED_VALUE_MAX), *nonce = str_field(o, "nonce", 64);
        const char *key_id = str_field(o, "key_id", 64);
        const JsonValue *hosts = json_get(o, "hosts");
        int r;

        if (!name || !cred_name_valid(name, strlen(name)) || !apply || !id || !tenant || !ct || !nonce || !key_id ||
            json_type(hosts) != JSON_ARRAY || json_array_size(hosts) == 0 || json_array_size(hosts) > CRED_HOSTS_MAX) {
                snprintf(err, errsize, "a credential needs name, id, tenant, hosts, apply and its sealed value");
                return -EINVAL;
        }
        (void) strscpy(c->name, sizeof c->name, name);
        for (size_t i = 0; i < json_array_size(hosts); i++) {
                const char *h = json_string(json_array_at(hosts, i));
                PublicSuffixSection ps = PUBLIC_SUFFIX_NONE;

                if (!h || cred_host_pattern_syntax_check(h, strlen(h), NULL, 0) < 0) {
                        snprintf(err, errsize, "credential %s: bad host pattern", name);
                        return -EINVAL;
                }
                /* stored before the API refused it, or the list grew since:
                 * never inject over a public suffix (or unchecked without a list) */
                if (cred_host_pattern_public_suffix(h, strlen(h), &ps, NULL, 0) != CRED_SUFFIX_NONE) {
                        log_warning("credential %s: host pattern %s covers a public suffix; not injected there",
                                    name, h);
                        continue;
                }
                if (strv_extend(&c->hosts, h) < 0)
                        return -ENOMEM;
        }
        if (streq(apply, "basic")) {
                const char *u = str_field(o, "basic_user", CRED_BASIC_USER_MAX);
                if (!u || cred_basic_user_check(u, strlen(u), NULL, 0) < 0) {
                        snprintf(err, errsize, "credential %s: bad basic_user", name);
                        return -EINVAL;
                }
                c->apply = CRED_INJECT_BASIC;
                (void) strscpy(c->basic_user, sizeof c->basic_user, u);
        } else if (streq(apply, "header")) {
                const char *hn = str_field(o, "header_name", CRED_HEADER_NAME_MAX);
                const char *hf = str_field(o, "header_format", CRED_HEADER_FORMAT_MAX);
                if (!hn || !hf || cred_header_name_check(hn, strlen(hn), NULL, 0) < 0 ||
                    cred_header_format_check(hf, strlen(hf), NULL, 0) < 0) {
                        snprintf(err, errsize, "credential %s: bad header", name);
                        return -EINVAL;
                }
                c->apply = CRED_INJECT_HEADER;
                (void) strscpy(c->header_name, sizeof c->header_name, hn);
                (void) strscpy(c->header_format, sizeof c->header_format, hf);
        } else {
                snprintf(err, errsize, "credential %s: apply must be header or basic", name);
                return -EINVAL;
        }
        (void) json_int64(json_get(o, "expires_usec"), &c->expires_usec);
        (void) json_int64(json_get(o, "revoked_usec"), &c->revoked_usec);
        if (c->revoked_usec > 0)
                return 0; /* never applied again: its value is not needed */
        if (!gw->cred_key) {
                snprintf(err, errsize, "credential %s: this host has no master key (master_key_file, "
                         "default master.key in the state directory)",
                         name);
                return -ENOKEY;
        }
        r = cred_open(gw->cred_key, id, tenant, name, ct, nonce, key_id, &c->value);
        if (r == -EKEYREJECTED)
                snprintf(err, errsize, "credential %s was sealed under another master key than this host's", name);
        else if (r < 0)
                snprintf(err, errsize, "credential %s does not open (its sealed value is damaged)", name);
        return r;
}

int gw_op_credentials(Gateway *gw, const JsonValue *req, char *err, size_t errsize) {
        const char *id = json_string(json_get(req, "id"));
        GwSandbox *sb = id ? gw_sandbox_find(gw, id) : NULL;
        const JsonValue *list = json_get(req, "creds"), *cert = json_get(req, "ca_cert"), *key = json_get(req, "ca_key");
        _cleanup_(cred_inject_set_done) CredInjectSet set = {};
        _cleanup_(tls_ca_freep) TlsCa *ca = NULL;
        int r = 0;

        if (!sb) {
                snprintf(err, errsize, "no such sandbox");
                return -ENOENT;
        }
        if (json_type(list) != JSON_ARRAY || json_array_size(list) > CRED_GRANTS_MAX) {
                snprintf(err, errsize, "creds must be an array of at most %d credentials", CRED_GRANTS_MAX);
                r = -EINVAL;
                goto fail;
        }
        set.items = new0(CredInject, json_array_size(list) ?: 1);
        if (!set.items) {
                r = -ENOMEM;
                goto fail;
        }
        for (size_t i = 0; i < json_array_size(list); i++) {
                set.n++;
                r = cred_parse(gw, json_array_at(list, i), &set.items[i], err, errsize);
                if (r < 0)
                        goto fail;
        }
        if (set.n > 0) {
                const char *cp = json_string(cert), *kp = json_string(key);
                if (!cp || !kp) {
                        snprintf(err, errsize, "credentials need the sandbox's CA (ca_cert, ca_key)");
                        r = -EINVAL;
                        goto fail;
                }
                if (!sb->ca_cert_pem || !streq(sb->ca_cert_pem, cp)) {
                        r = tls_ca_load(cp, strlen(cp), kp, strlen(kp), &ca);
                        if (r < 0) {
                                snprintf(err, errsize, "the sandbox's CA does not load");
                                goto fail;
                        }
                }
        }
        if (key && json_string(key))
                OPENSSL_cleanse((char *) json_string(key), json_string_len(key));
        cred_inject_set_done(&sb->creds);
        sb->creds = set;
        set = (CredInjectSet){};
        if (ca) {
                char *pem = strdup(json_string(cert));
                if (!pem) {
                        cred_inject_set_done(&sb->creds);
                        return -ENOMEM;
                }
                tls_ca_free(sb->ca);
                sb->ca = TAKE_PTR(ca);
                free(sb->ca_cert_pem);
                sb->ca_cert_pem = pem;
        }
        log_debug("gateway: sandbox %s holds %zu credentials", sb->id, sb->creds.n);
        return 0;
fail:
        if (key && json_string(key))
                OPENSSL_cleanse((char *) json_string(key), json_string_len(key));
        /* fail closed: no stale value stays in use */
        cred_inject_set_done(&sb->creds);
        return r;
}

void gw_cred_used(Gateway *gw, GwSandbox *sb, const char *host, const CredInjectUsed *used) {
        for (size_t i = 0; i < used->n; i++) {
                char reason[GW_EVENT_REASON_MAX];
                JsonWriter w;

                if (!gw_bucket_take(&sb->cred_bucket, gw->config->events_per_sec,
                                    gw->config->events_per_sec * GW_CRED_EVENT_BURST_FACTOR)) {
                        sb->cred_uses_dropped++;
                        continue;
                }
                snprintf(reason, sizeof reason, "credential %s put on a request to %s", used->names[i], host);
                json_w_init(&w);
                json_w_object_begin(&w);
                json_w_kv_string(&w, "event", "credential.used");
                json_w_kv_string(&w, "sandbox", sb->id);
                json_w_kv_string(&w, "tenant", sb->tenant);
                json_w_kv_string(&w, "reason", reason);
                json_w_key(&w, "data");
                json_w_object_begin(&w);
                json_w_kv_string(&w, "credential", used->names[i]);
                json_w_kv_string(&w, "host", host);
                json_w_object_end(&w);
                json_w_object_end(&w);
                gw_control_writer(gw, &w);
        }
}

void gw_cred_flush(Gateway *gw, GwSandbox *sb) {
        char reason[128];
        JsonWriter w;

        if (sb->cred_uses_dropped == 0 ||
            !gw_bucket_take(&sb->cred_bucket, gw->config->events_per_sec,
                            gw->config->events_per_sec * GW_CRED_EVENT_BURST_FACTOR))
                return;
        snprintf(reason, sizeof reason, "%" PRIu64 " more credential uses (rate limit: counted, not recorded one by one)",
                 sb->cred_uses_dropped);
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "event", "credential.used");
        json_w_kv_string(&w, "sandbox", sb->id);
        json_w_kv_string(&w, "tenant", sb->tenant);
        json_w_kv_string(&w, "reason", reason);
        json_w_key(&w, "data");
        json_w_object_begin(&w);
        json_w_key(&w, "uses");
        json_w_uint(&w, sb->cred_uses_dropped);
        json_w_object_end(&w);
        json_w_object_end(&w);
        gw_control_writer(gw, &w);
        sb->cred_uses_dropped = 0;
}
