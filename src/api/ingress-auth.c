/* SPDX-License-Identifier: MIT */
/* The ingress's host names and its access: traffic tokens, one-time links
 * and cookies, all HMACs under the server secret (src/api/e2b/e2b-route.c) with a
 * label of their own, so no token stands for another (nor for the envd
 * access token). */

#include <inttypes.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <strings.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "e2b.h"
#include "ingress-auth.h"
#include "str-util.h"

#define INGRESS_HOST_MAX 255U

int ingress_host_parse(const char *host, const char *domain, uint16_t *ret_port, char ret_id[static 17]) {
        size_t n, dn, i, port_len;
        const char *dash, *dot;
        char id[API_ID_LEN + 1];
        unsigned port = 0;

        if (!host || !domain || isempty(domain))
                return -EINVAL;
        n = strnlen(host, INGRESS_HOST_MAX + 1);
        if (n > INGRESS_HOST_MAX)
                return -EINVAL;
        /* the listener's port, if the client says it */
        const char *colon = memchr(host, ':', n);
        if (colon) {
                const char *p = colon + 1;
                if (*p == 0 || strspn(p, "0123456789") != strlen(p) || strlen(p) > 5)
                        return -EINVAL;
                n = (size_t) (colon - host);
        }
        if (n > 0 && host[n - 1] == '.') /* the absolute form of the name */
                n--;
        dn = strlen(domain);
        if (n < dn + 1 || host[n - dn - 1] != '.' || strncasecmp(host + n - dn, domain, dn) != 0)
                return -EINVAL;
        n -= dn + 1; /* now: "{port}-{id}" */
        dash = memchr(host, '-', n);
        if (!dash)
                return -EINVAL;
        port_len = (size_t) (dash - host);
        if (port_len == 0 || port_len > 5 || host[0] == '0')
                return -EINVAL;
        for (i = 0; i < port_len; i++) {
                if (host[i] < '0' || host[i] > '9')
                        return -EINVAL;
                port = port * 10 + (unsigned) (host[i] - '0');
        }
        if (port == 0 || port > 65535)
                return -EINVAL;
        if (n - port_len - 1 != API_ID_LEN)
                return -EINVAL;
        dot = memchr(dash + 1, '.', API_ID_LEN);
        if (dot)
                return -EINVAL;
        for (i = 0; i < API_ID_LEN; i++) {
                char ch = dash[1 + i];
                if (ch >= 'A' && ch <= 'Z') /* host names are case-insensitive; ids are lower case */
                        ch = (char) (ch - 'A' + 'a');
                id[i] = ch;
        }
        id[API_ID_LEN] = 0;
        if (!api_sandbox_id_valid(id))
                return -EINVAL;
        *ret_port = (uint16_t) port;
        memcpy(ret_id, id, sizeof id);
        return 0;
}

int ingress_traffic_token(const Config *c, const char *id, char ret[static INGRESS_TOKEN_LEN + 1]) {
        char msg[64];

        if (!api_sandbox_id_valid(id))
                return -EINVAL;
        snprintf(msg, sizeof msg, "traffic:%s", id);
        return e2b_secret_hmac(c, msg, ret);
}

#define INGRESS_NONCE_LEN 12U

static int signed_mac(const Config *c, const char *kind, const char *id, uint64_t expiry_sec, const char *nonce,
                      char ret[static INGRESS_TOKEN_LEN + 1]) {
        char msg[128];

        if (!api_sandbox_id_valid(id) || (!streq(kind, "link") && !streq(kind, "cookie")))
                return -EINVAL;
        snprintf(msg, sizeof msg, "ingress-%s:%s:%" PRIu64 ":%s", kind, id, expiry_sec, nonce);
        return e2b_secret_hmac(c, msg, ret);
}

int ingress_signed_make(const Config *c, const char *kind, const char *id, uint64_t expiry_sec,
                        char ret[static INGRESS_SIGNED_MAX]) {
        char mac[INGRESS_TOKEN_LEN + 1], nonce[INGRESS_NONCE_LEN + 1];
        int r = random_alnum(nonce, INGRESS_NONCE_LEN);
        if (r < 0)
                return r;
        nonce[INGRESS_NONCE_LEN] = 0;
        r = signed_mac(c, kind, id, expiry_sec, nonce, mac);
        if (r < 0)
                return r;
        snprintf(ret, INGRESS_SIGNED_MAX, "%" PRIu64 ".%s.%s", expiry_sec, nonce, mac);
        explicit_bzero(mac, sizeof mac);
        return 0;
}

int ingress_signed_check(const Config *c, const char *kind, const char *id, const char *value, size_t n,
                         uint64_t now_sec) {
        char mac[INGRESS_TOKEN_LEN + 1], nonce[INGRESS_NONCE_LEN + 1];
        const char *dot;
        uint64_t exp = 0;
        size_t digits;
        int r;

        if (!value || n == 0 || n >= INGRESS_SIGNED_MAX)
                return -EACCES;
        dot = memchr(value, '.', n);
        if (!dot)
                return -EACCES;
        digits = (size_t) (dot - value);
        /* "<exp>.<nonce>.<mac>" */
        if (digits == 0 || digits > 19 || value[0] == '0' || n != digits + 1 + INGRESS_NONCE_LEN + 1 + INGRESS_TOKEN_LEN ||
            dot[1 + INGRESS_NONCE_LEN] != '.')
                return -EACCES;
        for (size_t i = 0; i < digits; i++) {
                if (value[i] < '0' || value[i] > '9')
                        return -EACCES;
                exp = exp * 10 + (uint64_t) (value[i] - '0');
        }
        for (size_t i = 0; i < INGRESS_NONCE_LEN; i++) {
                char ch = dot[1 + i];
                if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')))
                        return -EACCES;
                nonce[i] = ch;
        }
        nonce[INGRESS_NONCE_LEN] = 0;
        r = signed_mac(c, kind, id, exp, nonce, mac);
        if (r < 0)
                return r;
        r = CRYPTO_memcmp(mac, dot + 2 + INGRESS_NONCE_LEN, INGRESS_TOKEN_LEN) == 0 ? 0 : -EACCES;
        explicit_bzero(mac, sizeof mac);
        if (r < 0)
                return r;
        return exp < now_sec ? -ETIME : 0;
}

/* Calls f for each "name=value" pair of a Cookie header. */
static const char *cookie_next(const char *p, const char **ret_name, size_t *ret_name_len, const char **ret_value,
                               size_t *ret_value_len) {
        const char *end, *eq;

        p += strspn(p, " \t;");
        if (*p == 0)
                return NULL;
        end = p + strcspn(p, ";");
        eq = memchr(p, '=', (size_t) (end - p));
        *ret_name = p;
        *ret_name_len = eq ? (size_t) (eq - p) : (size_t) (end - p);
        *ret_value = eq ? eq + 1 : end;
        *ret_value_len = eq ? (size_t) (end - eq - 1) : 0;
        while (*ret_name_len > 0 && (p[*ret_name_len - 1] == ' ' || p[*ret_name_len - 1] == '\t'))
                (*ret_name_len)--;
        while (*ret_value_len > 0 && ((*ret_value)[*ret_value_len - 1] == ' ' || (*ret_value)[*ret_value_len - 1] == '\t'))
                (*ret_value_len)--;
        return end;
}

const char *ingress_cookie_find(const char *header, const char *name, size_t *ret_len) {
        const char *p = header, *cn, *cv;
        size_t cnl, cvl, nl = strlen(name);

        if (!header)
                return NULL;
        while ((p = cookie_next(p, &cn, &cnl, &cv, &cvl))) {
                if (cnl == nl && memcmp(cn, name, nl) == 0) {
                        *ret_len = cvl;
                        return cv;
                }
        }
        return NULL;
}

int ingress_cookie_strip(const char *header, const char *name, char **ret) {
        _cleanup_free_ char *out = NULL;
        const char *p = header, *cn, *cv;
        size_t cnl, cvl, nl = strlen(name), used = 0;

        out = new0(char, 2 * strlen(header) + 1); /* "; " may replace ";" */
        if (!out)
                return -ENOMEM;
        while ((p = cookie_next(p, &cn, &cnl, &cv, &cvl))) {
                size_t len = (size_t) (p - cn);
                if (cnl == nl && memcmp(cn, name, nl) == 0)
                        continue;
                if (used > 0) {
                        memcpy(out + used, "; ", 2);
                        used += 2;
                }
                memcpy(out + used, cn, len);
                used += len;
        }
        out[used] = 0;
        *ret = used > 0 ? TAKE_PTR(out) : NULL;
        return 0;
}

int ingress_public_domain(const Config *c, char *ret, size_t size) {
        const char *colon;
        int k;

        if (isempty(c->ingress_listen) || isempty(c->ingress_domain))
                return -ENODATA;
        colon = strrchr(c->ingress_listen, ':');
        if (!colon || streq(colon + 1, isempty(c->ingress_tls_cert) ? "80" : "443"))
                k = snprintf(ret, size, "%s", c->ingress_domain);
        else
                k = snprintf(ret, size, "%s:%s", c->ingress_domain, colon + 1);
        return k < 0 || (size_t) k >= size ? -ENAMETOOLONG : 0;
}

int ingress_url(const Config *c, const char *id, unsigned port, char *ret, size_t size) {
        char domain[CONFIG_STR_MAX + 8];
        int k = ingress_public_domain(c, domain, sizeof domain);
        if (k < 0)
                return k;
        k = snprintf(ret, size, "%s://%u-%s.%s/", isempty(c->ingress_tls_cert) ? "http" : "https", port, id, domain);
        return k < 0 || (size_t) k >= size ? -ENAMETOOLONG : 0;
}
