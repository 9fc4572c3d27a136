/* SPDX-License-Identifier: MIT */
/* Webhook secrets sealed under the credentials' master key (webhook.h). */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "alloc-util.h"
#include "cred-crypt.h"
#include "str-util.h"
#include "webhook.h"

#define WEBHOOK_SEAL_NAME "webhook.secret" /* the associated data's name: never a credential's */

bool webhook_secret_sealed(const char *stored) {
        return stored && startswith(stored, WEBHOOK_SEALED_PREFIX);
}

int webhook_secret_seal(const CredKey *k, const char *id, const char *tenant, const char *plain,
                        char ret[static WEBHOOK_SEALED_MAX]) {
        _cleanup_free_ char *ct = NULL;
        char nonce[CRED_NONCE_B64_MAX + 1], key_id[CRED_KEY_ID_LEN + 1];
        int r;

        if (!k)
                return -ENOKEY;
        if (!id || !tenant || isempty(plain) || strlen(plain) > WEBHOOK_SECRET_MAX)
                return -EINVAL;
        r = cred_seal(k, id, tenant, WEBHOOK_SEAL_NAME, plain, strlen(plain), &ct, nonce, key_id);
        if (r < 0)
                return r;
        r = snprintf(ret, WEBHOOK_SEALED_MAX, WEBHOOK_SEALED_PREFIX "%s:%s:%s", key_id, nonce, ct);
        return r < 0 || (size_t) r >= WEBHOOK_SEALED_MAX ? -ENAMETOOLONG : 0;
}

int webhook_secret_open(const CredKey *k, const char *id, const char *tenant, const char *stored,
                        char ret[static WEBHOOK_SECRET_MAX + 1]) {
        char key_id[CRED_KEY_ID_LEN + 1], nonce[CRED_NONCE_B64_MAX + 1];
        const char *p, *c1, *c2;
        CredSecret *s = NULL;
        int r;

        if (!stored)
                return -EINVAL;
        if (!webhook_secret_sealed(stored)) { /* a row from before sealing */
                if (strlen(stored) > WEBHOOK_SECRET_MAX)
                        return -EBADMSG;
                memcpy(ret, stored, strlen(stored) + 1);
                return 0;
        }
        if (!k)
                return -ENOKEY;
        p = stored + strlen(WEBHOOK_SEALED_PREFIX);
        c1 = strchr(p, ':');
        c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c1 || !c2 || (size_t) (c1 - p) > CRED_KEY_ID_LEN || (size_t) (c2 - c1 - 1) > CRED_NONCE_B64_MAX)
                return -EBADMSG;
        memcpy(key_id, p, (size_t) (c1 - p));
        key_id[c1 - p] = 0;
        memcpy(nonce, c1 + 1, (size_t) (c2 - c1 - 1));
        nonce[c2 - c1 - 1] = 0;
        r = cred_open(k, id, tenant, WEBHOOK_SEAL_NAME, c2 + 1, nonce, key_id, &s);
        if (r < 0)
                return r;
        if (s->len == 0 || s->len > WEBHOOK_SECRET_MAX || memchr(s->data, 0, s->len)) {
                cred_secret_free(s);
                return -EBADMSG;
        }
        memcpy(ret, s->data, s->len);
        ret[s->len] = 0;
        cred_secret_free(s);
        return 0;
}
