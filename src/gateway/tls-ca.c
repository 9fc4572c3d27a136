/* SPDX-License-Identifier: MIT */
/* The per-sandbox CA of TLS interception and its leaf certificates. See
 * tls-ca.h. */

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <string.h>
#include <time.h>

#include "alloc-util.h"
#include "str-util.h"
#include "tls-ca.h"

#define LEAF_BACKDATE_SEC 3600  /* clocks of clients that lag behind */

typedef struct LeafEntry {
        char host[TLS_CA_NAME_MAX + 1];
        X509 *cert;
        time_t issued;
        uint64_t used; /* LRU tick */
} LeafEntry;

struct TlsCa {
        X509 *cert;
        EVP_PKEY *key;
        EVP_PKEY *leaf_key; /* shared by the leaves */
        LeafEntry leaves[TLS_CA_LEAF_CACHE_MAX];
        uint64_t tick;
};

static int ec_key_new(EVP_PKEY **ret) {
        EVP_PKEY *k = EVP_EC_gen("P-256");
        if (!k)
                return -EIO;
        *ret = k;
        return 0;
}

static int set_serial(X509 *x) {
        uint8_t raw[16];
        BIGNUM *bn;
        int ok;

        if (RAND_bytes(raw, sizeof raw) != 1)
                return -EIO;
        raw[0] &= 0x7f; /* positive */
        bn = BN_bin2bn(raw, sizeof raw, NULL);
        if (!bn)
                return -ENOMEM;
        ok = BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
        BN_free(bn);
        return ok ? 0 : -EIO;
}

static int add_ext(X509 *issuer, X509 *x, int nid, const char *value) {
        X509V3_CTX ctx;
        X509_EXTENSION *ext;
        int ok;

        X509V3_set_ctx_nodb(&ctx);
        X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
        ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
        if (!ext)
                return -EINVAL;
        ok = X509_add_ext(x, ext, -1);
        X509_EXTENSION_free(ext);
        return ok ? 0 : -EIO;
}

static void x509_freep(X509 **x) {
        X509_free(*x);
}

int tls_ca_new(const char *common_name, TlsCa **ret) {
        _cleanup_(tls_ca_freep) TlsCa *ca = NULL;
        X509_NAME *name;
        int r;

        if (!common_name || !ret || strlen(common_name) == 0 || strlen(common_name) > 64)
                return -EINVAL;
        ca = new0(TlsCa, 1);
        if (!ca)
                return -ENOMEM;
        r = ec_key_new(&ca->key);
        if (r < 0)
                return r;
        r = ec_key_new(&ca->leaf_key);
        if (r < 0)
                return r;
        ca->cert = X509_new();
        if (!ca->cert)
                return -ENOMEM;
        if (X509_set_version(ca->cert, 2) != 1 || set_serial(ca->cert) < 0 ||
            !X509_gmtime_adj(X509_getm_notBefore(ca->cert), -LEAF_BACKDATE_SEC) ||
            !X509_gmtime_adj(X509_getm_notAfter(ca->cert), (long) TLS_CA_DAYS * 86400) ||
            X509_set_pubkey(ca->cert, ca->key) != 1)
                return -EIO;
        name = X509_get_subject_name(ca->cert);
        if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, (const uint8_t *) "space", -1, -1, 0) != 1 ||
            X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const uint8_t *) common_name, -1, -1, 0) != 1 ||
            X509_set_issuer_name(ca->cert, name) != 1)
                return -EINVAL;
        r = add_ext(ca->cert, ca->cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
        if (r >= 0)
                r = add_ext(ca->cert, ca->cert, NID_key_usage, "critical,keyCertSign,cRLSign");
        if (r >= 0)
                r = add_ext(ca->cert, ca->cert, NID_subject_key_identifier, "hash");
        if (r < 0)
                return r;
        if (X509_sign(ca->cert, ca->key, EVP_sha256()) <= 0)
                return -EIO;
        *ret = TAKE_PTR(ca);
        return 0;
}

int tls_ca_load(const char *cert_pem, size_t cert_n, const char *key_pem, size_t key_n, TlsCa **ret) {
        _cleanup_(tls_ca_freep) TlsCa *ca = NULL;
        BIO *b;
        int r;

        if (!cert_pem || !key_pem || !ret || cert_n == 0 || key_n == 0 || cert_n > TLS_CA_PEM_MAX ||
            key_n > TLS_CA_PEM_MAX)
                return -EINVAL;
        ca = new0(TlsCa, 1);
        if (!ca)
                return -ENOMEM;
        b = BIO_new_mem_buf(cert_pem, (int) cert_n);
        if (!b)
                return -ENOMEM;
        ca->cert = PEM_read_bio_X509(b, NULL, NULL, NULL);
        BIO_free(b);
        b = BIO_new_mem_buf(key_pem, (int) key_n);
        if (!b)
                return -ENOMEM;
        ca->key = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
        BIO_free(b);
        if (!ca->cert || !ca->key)
                return -EBADMSG;
        if (X509_check_ca(ca->cert) != 1 || X509_check_private_key(ca->cert, ca->key) != 1)
                return -EBADMSG;
        r = ec_key_new(&ca->leaf_key);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(ca);
        return 0;
}

TlsCa *tls_ca_free(TlsCa *ca) {
        if (!ca)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(ca->leaves); i++)
                X509_free(ca->leaves[i].cert);
        X509_free(ca->cert);
        EVP_PKEY_free(ca->key);
        EVP_PKEY_free(ca->leaf_key);
        free(ca);
        return NULL;
}

X509 *tls_ca_cert(const TlsCa *ca) {
        return ca ? ca->cert : NULL;
}

static int bio_to_string(BIO *b, char **ret, size_t *ret_n) {
        char *data = NULL, *s;
        long n = BIO_get_mem_data(b, &data);

        if (n <= 0 || !data)
                return -EIO;
        s = malloc((size_t) n + 1);
        if (!s)
                return -ENOMEM;
        memcpy(s, data, (size_t) n);
        s[n] = 0;
        OPENSSL_cleanse(data, (size_t) n);
        *ret = s;
        if (ret_n)
                *ret_n = (size_t) n;
        return 0;
}

int tls_ca_cert_pem(const TlsCa *ca, char **ret, size_t *ret_n) {
        BIO *b;
        int r;

        if (!ca || !ret)
                return -EINVAL;
        b = BIO_new(BIO_s_mem());
        if (!b)
                return -ENOMEM;
        r = PEM_write_bio_X509(b, ca->cert) == 1 ? bio_to_string(b, ret, ret_n) : -EIO;
        BIO_free(b);
        return r;
}

int tls_ca_key_pem(const TlsCa *ca, char **ret, size_t *ret_n) {
        BIO *b;
        int r;

        if (!ca || !ret)
                return -EINVAL;
        b = BIO_new(BIO_s_secmem());
        if (!b)
                b = BIO_new(BIO_s_mem());
        if (!b)
                return -ENOMEM;
        r = PEM_write_bio_PrivateKey(b, ca->key, NULL, NULL, 0, NULL, NULL) == 1 ? bio_to_string(b, ret, ret_n)
                                                                                 : -EIO;
        BIO_free(b);
        return r;
}

/* A DNS name: labels of [a-z0-9-] (upper case folded), 1..63 each. */
static int host_normalize(const char *host, char out[static TLS_CA_NAME_MAX + 1]) {
        size_t n = host ? strlen(host) : 0, label = 0;

        if (n > 0 && host[n - 1] == '.')
                n--;
        if (n == 0 || n > TLS_CA_NAME_MAX)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                char c = host[i];

                if (c >= 'A' && c <= 'Z')
                        c = (char) (c - 'A' + 'a');
                if (c == '.') {
                        if (label == 0)
                                return -EINVAL;
                        label = 0;
                } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-') {
                        if (++label > 63)
                                return -EINVAL;
                } else
                        return -EINVAL;
                out[i] = c;
        }
        if (label == 0)
                return -EINVAL;
        out[n] = 0;
        return 0;
}

static int leaf_issue(TlsCa *ca, const char *host, X509 **ret) {
        _cleanup_(x509_freep) X509 *x = X509_new();
        char san[TLS_CA_NAME_MAX + 8];
        X509_NAME *name;
        int r;

        if (!x)
                return -ENOMEM;
        if (X509_set_version(x, 2) != 1 || set_serial(x) < 0 ||
            !X509_gmtime_adj(X509_getm_notBefore(x), -LEAF_BACKDATE_SEC) ||
            !X509_gmtime_adj(X509_getm_notAfter(x), (long) TLS_CA_LEAF_DAYS * 86400) ||
            X509_set_pubkey(x, ca->leaf_key) != 1 ||
            X509_set_issuer_name(x, X509_get_subject_name(ca->cert)) != 1)
                return -EIO;
        name = X509_get_subject_name(x);
        if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const uint8_t *) host,
                                       strlen(host) <= 64 ? -1 : 64, -1, 0) != 1)
                return -EINVAL;
        (void) snprintf(san, sizeof san, "DNS:%s", host);
        r = add_ext(ca->cert, x, NID_subject_alt_name, san);
        if (r >= 0)
                r = add_ext(ca->cert, x, NID_basic_constraints, "critical,CA:FALSE");
        if (r >= 0)
                r = add_ext(ca->cert, x, NID_key_usage, "critical,digitalSignature");
        if (r >= 0)
                r = add_ext(ca->cert, x, NID_ext_key_usage, "serverAuth");
        if (r >= 0)
                r = add_ext(ca->cert, x, NID_authority_key_identifier, "keyid:always");
        if (r < 0)
                return r;
        if (X509_sign(x, ca->key, EVP_sha256()) <= 0)
                return -EIO;
        *ret = TAKE_PTR(x);
        return 0;
}

int tls_ca_leaf(TlsCa *ca, const char *host, X509 **ret_cert, EVP_PKEY **ret_key) {
        char name[TLS_CA_NAME_MAX + 1];
        LeafEntry *e = NULL, *oldest = NULL;
        time_t now = time(NULL);
        int r;

        if (!ca || !ret_cert || !ret_key)
                return -EINVAL;
        r = host_normalize(host, name);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ELEMENTSOF(ca->leaves); i++) {
                LeafEntry *l = &ca->leaves[i];

                if (l->cert && streq(l->host, name)) {
                        e = l;
                        break;
                }
                if (!oldest || !l->cert || (oldest->cert && l->used < oldest->used))
                        oldest = l;
        }
        if (e && now - e->issued > (time_t) TLS_CA_LEAF_DAYS * 86400 / 2) {
                oldest = e; /* re-issue in place */
                e = NULL;
        }
        if (!e) {
                X509 *x;

                r = leaf_issue(ca, name, &x);
                if (r < 0)
                        return r;
                e = oldest;
                X509_free(e->cert);
                memcpy(e->host, name, sizeof name);
                e->cert = x;
                e->issued = now;
        }
        e->used = ++ca->tick;
        if (X509_up_ref(e->cert) != 1 || EVP_PKEY_up_ref(ca->leaf_key) != 1)
                return -EIO;
        *ret_cert = e->cert;
        *ret_key = ca->leaf_key;
        return 0;
}
