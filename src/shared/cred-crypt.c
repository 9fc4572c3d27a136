/* SPDX-License-Identifier: MIT */
/* Sealing credentials with AES-256-GCM (OpenSSL EVP) and the master key
 * file. See cred-crypt.h. */

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc-util.h"
#include "base64.h"
#include "cred-crypt.h"
#include "fd-util.h"
#include "json.h"
#include "str-util.h"

struct CredKey {
        uint8_t key[CRED_KEY_BYTES];
        char id[CRED_KEY_ID_LEN + 1];
        CredKey *previous; /* owned: opens values sealed before a rotation, never seals */
};

/* A private mapping for secret bytes: locked (best effort: RLIMIT_MEMLOCK
 * may forbid it, the wipe still happens), out of core dumps, not inherited
 * by children forked later. */
static void *secret_map(size_t len, size_t *ret_map_len) {
        long page = sysconf(_SC_PAGESIZE);
        size_t map_len;
        void *p;

        if (page <= 0)
                page = 4096;
        map_len = (len + (size_t) page) / (size_t) page * (size_t) page; /* room for a NUL */
        p = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
                return NULL;
        (void) madvise(p, map_len, MADV_DONTDUMP);
        (void) madvise(p, map_len, MADV_DONTFORK);
        (void) mlock(p, map_len);
        *ret_map_len = map_len;
        return p;
}

static void secret_unmap(void *p, size_t map_len) {
        if (!p)
                return;
        OPENSSL_cleanse(p, map_len);
        (void) munlock(p, map_len);
        (void) munmap(p, map_len);
}

int cred_secret_new(size_t len, CredSecret **ret) {
        CredSecret *s;

        if (!ret || len > CRED_VALUE_MAX * 4)
                return -EINVAL;
        s = new0(CredSecret, 1);
        if (!s)
                return -ENOMEM;
        s->data = secret_map(len, &s->map_len);
        if (!s->data) {
                free(s);
                return -ENOMEM;
        }
        s->len = len;
        *ret = s;
        return 0;
}

int cred_secret_from(const void *p, size_t n, CredSecret **ret) {
        CredSecret *s;
        int r;

        if (!p && n > 0)
                return -EINVAL;
        r = cred_secret_new(n, &s);
        if (r < 0)
                return r;
        if (n > 0)
                memcpy(s->data, p, n);
        *ret = s;
        return 0;
}

CredSecret *cred_secret_free(CredSecret *s) {
        if (!s)
                return NULL;
        secret_unmap(s->data, s->map_len);
        free(s);
        return NULL;
}

static int key_new(CredKey **ret) {
        size_t map_len;
        CredKey *k;

        _Static_assert(sizeof(CredKey) <= 4096, "CredKey fits a page");
        k = secret_map(sizeof(CredKey), &map_len);
        if (!k)
                return -ENOMEM;
        *ret = k;
        return 0;
}

CredKey *cred_key_free(CredKey *k) {
        size_t map_len;
        long page = sysconf(_SC_PAGESIZE);

        if (!k)
                return NULL;
        cred_key_free(k->previous);
        if (page <= 0)
                page = 4096;
        map_len = (sizeof(CredKey) + (size_t) page) / (size_t) page * (size_t) page;
        secret_unmap(k, map_len);
        return NULL;
}

static void key_set_id(CredKey *k) {
        uint8_t digest[SHA256_DIGEST_LENGTH];
        static const char hex[] = "0123456789abcdef";

        SHA256(k->key, sizeof k->key, digest);
        for (size_t i = 0; i < CRED_KEY_ID_LEN / 2; i++) {
                k->id[2 * i] = hex[digest[i] >> 4];
                k->id[2 * i + 1] = hex[digest[i] & 15];
        }
        k->id[CRED_KEY_ID_LEN] = 0;
        OPENSSL_cleanse(digest, sizeof digest);
}

int cred_key_from_bytes(const uint8_t *key, size_t len, CredKey **ret) {
        CredKey *k;
        int r;

        if (!key || !ret || len != CRED_KEY_BYTES)
                return -EINVAL;
        r = key_new(&k);
        if (r < 0)
                return r;
        memcpy(k->key, key, CRED_KEY_BYTES);
        key_set_id(k);
        *ret = k;
        return 0;
}

const char *cred_key_id(const CredKey *k) {
        return k ? k->id : NULL;
}

int cred_key_set_previous(CredKey *k, CredKey *previous) {
        if (!k || !previous || previous->previous)
                return -EINVAL;
        if (streq(k->id, previous->id) || CRYPTO_memcmp(k->key, previous->key, sizeof k->key) == 0)
                return -EEXIST;
        cred_key_free(k->previous);
        k->previous = previous;
        return 0;
}

const CredKey *cred_key_previous(const CredKey *k) {
        return k ? k->previous : NULL;
}

const CredKey *cred_key_by_fingerprint(const CredKey *k, const char *fingerprint) {
        char fp[CRED_KEY_FINGERPRINT_HEX + 1];

        if (!fingerprint)
                return NULL;
        for (; k; k = k->previous)
                if (cred_key_fingerprint(k, fp) >= 0 && streq(fp, fingerprint))
                        return k;
        return NULL;
}

/* The key of the ring that sealed key_id. */
static const CredKey *key_by_id(const CredKey *k, const char *key_id) {
        for (; k; k = k->previous)
                if (streq(key_id, k->id))
                        return k;
        return NULL;
}

int cred_key_fingerprint(const CredKey *k, char buf[static CRED_KEY_FINGERPRINT_HEX + 1]) {
        static const char hex[] = "0123456789abcdef";
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int n = 0;

        if (!k)
                return -EINVAL;
        if (!HMAC(EVP_sha256(), k->key, (int) sizeof k->key, (const unsigned char *) CRED_KEY_FINGERPRINT_LABEL,
                  strlen(CRED_KEY_FINGERPRINT_LABEL), md, &n) ||
            n < CRED_KEY_FINGERPRINT_HEX / 2) {
                OPENSSL_cleanse(md, sizeof md);
                return -EIO;
        }
        for (size_t i = 0; i < CRED_KEY_FINGERPRINT_HEX / 2; i++) {
                buf[2 * i] = hex[md[i] >> 4];
                buf[2 * i + 1] = hex[md[i] & 15];
        }
        buf[CRED_KEY_FINGERPRINT_HEX] = 0;
        OPENSSL_cleanse(md, sizeof md);
        return 0;
}

static int key_create(int dfd, const char *base, const char *path, char *errbuf, size_t errbuf_size) {
        uint8_t key[CRED_KEY_BYTES];
        _cleanup_close_ int fd = -EBADF;
        int r;

        fd = openat(dfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
                r = -errno;
                if (r != -EEXIST)
                        (void) snprintf(errbuf, errbuf_size, "cannot create %s: %s", path, strerror(-r));
                return r;
        }
        r = random_bytes(key, sizeof key);
        if (r >= 0)
                r = loop_write(fd, key, sizeof key);
        if (r >= 0 && fsync(fd) < 0)
                r = -errno;
        OPENSSL_cleanse(key, sizeof key);
        if (r < 0) {
                (void) unlinkat(dfd, base, 0);
                (void) snprintf(errbuf, errbuf_size, "cannot write %s: %s", path, strerror(-r));
                return r;
        }
        return 0;
}

int cred_key_open(const char *state_dir, bool create, CredKey **ret, char *errbuf, size_t errbuf_size) {
        char path[4096];

        if (!state_dir || !ret || !errbuf || errbuf_size == 0)
                return -EINVAL;
        if ((size_t) snprintf(path, sizeof path, "%s/%s", state_dir, CRED_MASTER_KEY_FILE) >= sizeof path)
                return -ENAMETOOLONG;
        return cred_key_open_file(path, create, ret, errbuf, errbuf_size);
}

int cred_key_open_file(const char *path, bool create, CredKey **ret, char *errbuf, size_t errbuf_size) {
        _cleanup_close_ int dfd = -EBADF, fd = -EBADF;
        _cleanup_(cred_key_freep) CredKey *k = NULL;
        char dir[4096], dummy;
        const char *base, *slash;
        struct stat st;
        ssize_t n;
        int r;

        if (!path || !ret || !errbuf || errbuf_size == 0)
                return -EINVAL;
        errbuf[0] = 0;
        slash = strrchr(path, '/');
        base = slash ? slash + 1 : path;
        if (isempty(base) || streq(base, ".") || streq(base, "..")) {
                (void) snprintf(errbuf, errbuf_size, "%s does not name a file", path);
                return -EINVAL;
        }
        if (!slash)
                (void) strscpy(dir, sizeof dir, ".");
        else if (slash == path)
                (void) strscpy(dir, sizeof dir, "/");
        else if ((size_t) (slash - path) >= sizeof dir)
                return -ENAMETOOLONG;
        else {
                memcpy(dir, path, (size_t) (slash - path));
                dir[slash - path] = 0;
        }

        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
                r = -errno;
                (void) snprintf(errbuf, errbuf_size, "cannot open %s: %s", dir, strerror(-r));
                return r;
        }
        fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        if (fd < 0 && errno == ENOENT && create) {
                r = key_create(dfd, base, path, errbuf, errbuf_size);
                if (r < 0 && r != -EEXIST) /* EEXIST: another opener created it meanwhile */
                        return r;
                fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        }
        if (fd < 0) {
                r = -errno;
                if (r == -ELOOP)
                        (void) snprintf(errbuf, errbuf_size, "%s is a symbolic link; it must be a regular file",
                                        path);
                else
                        (void) snprintf(errbuf, errbuf_size, "cannot open %s: %s", path, strerror(-r));
                return r;
        }
        if (fstat(fd, &st) < 0) {
                r = -errno;
                (void) snprintf(errbuf, errbuf_size, "cannot stat %s: %s", path, strerror(-r));
                return r;
        }
        if (!S_ISREG(st.st_mode)) {
                (void) snprintf(errbuf, errbuf_size, "%s is not a regular file", path);
                return -EPERM;
        }
        if (st.st_uid != geteuid()) {
                (void) snprintf(errbuf, errbuf_size, "%s is owned by uid %u, not by uid %u", path,
                                (unsigned) st.st_uid, (unsigned) geteuid());
                return -EPERM;
        }
        if ((st.st_mode & 07077) != 0) {
                (void) snprintf(errbuf, errbuf_size,
                                "%s has mode %04o; it must be 0600 (no access for group or others)", path,
                                (unsigned) (st.st_mode & 07777));
                return -EPERM;
        }
        if (st.st_size != CRED_KEY_BYTES) {
                (void) snprintf(errbuf, errbuf_size, "%s is %lld bytes long; a master key is exactly %d bytes",
                                path, (long long) st.st_size, CRED_KEY_BYTES);
                return -EBADMSG;
        }

        r = key_new(&k);
        if (r < 0)
                return r;
        n = read(fd, k->key, sizeof k->key);
        if (n < 0) {
                r = -errno;
                (void) snprintf(errbuf, errbuf_size, "cannot read %s: %s", path, strerror(-r));
                return r;
        }
        if (n != CRED_KEY_BYTES || read(fd, &dummy, 1) != 0) {
                (void) snprintf(errbuf, errbuf_size, "%s changed size while being read", path);
                return -EBADMSG;
        }
        key_set_id(k);
        *ret = TAKE_PTR(k);
        return 0;
}

/* Associated data: id NUL tenant NUL name. */
static int aad_update(EVP_CIPHER_CTX *ctx, const char *id, const char *tenant, const char *name) {
        const char *parts[] = { id, tenant, name };
        int outl;

        for (size_t i = 0; i < ELEMENTSOF(parts); i++)
                if (EVP_CipherUpdate(ctx, NULL, &outl, (const uint8_t *) parts[i], (int) strlen(parts[i]) + 1) != 1)
                        return -EIO;
        return 0;
}

static void cipher_ctx_freep(EVP_CIPHER_CTX **p) {
        if (*p)
                EVP_CIPHER_CTX_free(*p);
}

int cred_seal(const CredKey *k, const char *id, const char *tenant, const char *name, const void *value, size_t n,
              char **ret_ciphertext, char *ret_nonce, char *ret_key_id) {
        _cleanup_(cipher_ctx_freep) EVP_CIPHER_CTX *ctx = NULL;
        _cleanup_free_ uint8_t *buf = NULL;
        _cleanup_free_ char *ct64 = NULL, *nonce64 = NULL;
        uint8_t nonce[CRED_NONCE_BYTES];
        size_t len64;
        int outl, finl, r;

        if (!k || !id || !tenant || !name || !value || !ret_ciphertext || !ret_nonce || !ret_key_id)
                return -EINVAL;
        if (n == 0 || n > CRED_VALUE_MAX)
                return -EINVAL;
        r = random_bytes(nonce, sizeof nonce);
        if (r < 0)
                return r;
        buf = malloc(n + CRED_TAG_BYTES);
        ctx = EVP_CIPHER_CTX_new();
        if (!buf || !ctx)
                return -ENOMEM;
        if (EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, CRED_NONCE_BYTES, NULL) != 1 ||
            EVP_EncryptInit_ex(ctx, NULL, NULL, k->key, nonce) != 1)
                return -EIO;
        r = aad_update(ctx, id, tenant, name);
        if (r < 0)
                return r;
        if (EVP_EncryptUpdate(ctx, buf, &outl, value, (int) n) != 1 || (size_t) outl != n ||
            EVP_EncryptFinal_ex(ctx, buf + outl, &finl) != 1 || finl != 0 ||
            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, CRED_TAG_BYTES, buf + n) != 1)
                return -EIO;
        r = base64_encode(buf, n + CRED_TAG_BYTES, &ct64, &len64);
        if (r < 0)
                return r;
        r = base64_encode(nonce, sizeof nonce, &nonce64, &len64);
        if (r < 0)
                return r;
        if (len64 >= CRED_NONCE_B64_MAX)
                return -EIO;
        memcpy(ret_nonce, nonce64, len64 + 1);
        memcpy(ret_key_id, k->id, CRED_KEY_ID_LEN + 1);
        *ret_ciphertext = TAKE_PTR(ct64);
        return 0;
}

int cred_open(const CredKey *k, const char *id, const char *tenant, const char *name, const char *ciphertext,
              const char *nonce, const char *key_id, CredSecret **ret) {
        _cleanup_(cipher_ctx_freep) EVP_CIPHER_CTX *ctx = NULL;
        _cleanup_free_ void *ct = NULL, *iv = NULL;
        _cleanup_(cred_secret_freep) CredSecret *s = NULL;
        size_t ct_len, iv_len, n;
        int outl, finl, r;

        if (!k || !id || !tenant || !name || !ciphertext || !nonce || !key_id || !ret)
                return -EINVAL;
        k = key_by_id(k, key_id);
        if (!k)
                return -EKEYREJECTED;
        r = base64_decode(ciphertext, strlen(ciphertext), &ct, &ct_len);
        if (r < 0)
                return -EBADMSG;
        r = base64_decode(nonce, strlen(nonce), &iv, &iv_len);
        if (r < 0)
                return -EBADMSG;
        if (iv_len != CRED_NONCE_BYTES || ct_len <= CRED_TAG_BYTES || ct_len - CRED_TAG_BYTES > CRED_VALUE_MAX)
                return -EBADMSG;
        n = ct_len - CRED_TAG_BYTES;
        r = cred_secret_new(n, &s);
        if (r < 0)
                return r;
        ctx = EVP_CIPHER_CTX_new();
        if (!ctx)
                return -ENOMEM;
        if (EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, CRED_NONCE_BYTES, NULL) != 1 ||
            EVP_DecryptInit_ex(ctx, NULL, NULL, k->key, iv) != 1)
                return -EIO;
        r = aad_update(ctx, id, tenant, name);
        if (r < 0)
                return r;
        if (EVP_DecryptUpdate(ctx, s->data, &outl, ct, (int) n) != 1 || (size_t) outl != n)
                return -EBADMSG;
        if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, CRED_TAG_BYTES, (uint8_t *) ct + n) != 1)
                return -EIO;
        if (EVP_DecryptFinal_ex(ctx, s->data + outl, &finl) != 1)
                return -EBADMSG; /* s is wiped on the way out */
        s->data[n] = 0;
        *ret = TAKE_PTR(s);
        return 0;
}
