/* SPDX-License-Identifier: MIT */
/* API keys: "Authorization: Bearer sk_..." → sha256 hex → the store's key row.
 * The secret itself is never stored or logged; comparing hashes in SQL makes
 * timing irrelevant. */

#include <openssl/evp.h>
#include <stdio.h>
#include <strings.h>

#include "api-internal.h"
#include "str-util.h"

#define API_KEY_TOKEN_MAX 256U /* longest bearer token we hash */

void api_key_hash(const char *secret, char ret[static 65]) {
        uint8_t md[EVP_MAX_MD_SIZE];
        unsigned md_len = 0;

        if (EVP_Digest(secret, strlen(secret), md, &md_len, EVP_sha256(), NULL) != 1 || md_len != 32) {
                /* cannot happen with a working libcrypto; an empty hash matches no key */
                ret[0] = 0;
                return;
        }
        hexencode(md, 32, ret);
}

int api_key_generate(char ret_secret[static API_KEY_SECRET_LEN + 1], char ret_id[static API_KEY_ID_LEN + 1]) {
        char s[41], id[11];
        int r;

        r = random_alnum(s, 40);
        if (r < 0)
                return r;
        r = random_alnum(id, 10);
        if (r < 0)
                return r;
        snprintf(ret_secret, API_KEY_SECRET_LEN + 1, "sk_%s", s);
        snprintf(ret_id, API_KEY_ID_LEN + 1, "key_%s", id);
        explicit_bzero(s, sizeof s);
        return 0;
}

static bool token_char_ok(char c) {
        /* RFC 6750 b64token characters */
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               strchr("-._~+/=", c);
}

int api_auth_token(ApiRequest *r, const char *p, size_t n, ApiError *e) {
        char hash[65], token[API_KEY_TOKEN_MAX + 1];
        Tenant t;
        int k;

        if (n == 0 || n > API_KEY_TOKEN_MAX)
                return api_error(e, -EACCES, API_UNAUTHORIZED, "invalid API key");
        for (size_t i = 0; i < n; i++)
                if (!token_char_ok(p[i]))
                        return api_error(e, -EACCES, API_UNAUTHORIZED, "invalid API key");
        memcpy(token, p, n);
        token[n] = 0;
        api_key_hash(token, hash);
        explicit_bzero(token, sizeof token);

        k = store_key_get_by_hash(r->store, hash, &r->key);
        if (k == -ENOENT)
                return api_error(e, -EACCES, API_UNAUTHORIZED, "invalid API key");
        if (k < 0)
                return api_store_error(e, k, "looking up the API key");

        snprintf(r->actor, sizeof r->actor, "key:%s", r->key.id);
        k = store_tenant_get(r->store, r->key.tenant_id, &t);
        (void) strscpy(r->tenant_name, sizeof r->tenant_name, k >= 0 ? t.name : r->key.tenant_id);
        return 0;
}

int api_auth(ApiRequest *r, ApiError *e) {
        const char *h = http_head_header(r->head, "Authorization");
        size_t n;

        if (!h)
                return api_error(e, -EACCES, API_UNAUTHORIZED, "missing 'Authorization: Bearer <api key>' header");
        if (strncasecmp(h, "Bearer ", 7) != 0)
                return api_error(e, -EACCES, API_UNAUTHORIZED, "the Authorization header must be 'Bearer <api key>'");
        h += 7;
        h += strspn(h, " ");
        n = strcspn(h, " ");
        if (h[n + strspn(h + n, " ")] != 0)
                return api_error(e, -EACCES, API_UNAUTHORIZED, "invalid API key");
        return api_auth_token(r, h, n, e);
}
