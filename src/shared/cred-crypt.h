/* SPDX-License-Identifier: MIT */
#pragma once

/* Credentials at rest: AES-256-GCM under a 32-byte master key kept in
 * <state>/master.key (mode 0600, owned by us, never in the store, never
 * logged). A credential is sealed with a fresh random 96-bit nonce and the
 * associated data id "\0" tenant "\0" name, so a sealed value copied onto
 * another row (or another tenant's) does not open. key_id names the master
 * key that sealed it (hex of the first 8 bytes of its SHA-256), so a store
 * opened with another key says so instead of "corrupt".
 *
 * Key and plaintext values live in their own anonymous mappings, locked in
 * memory where the host allows, marked MADV_DONTDUMP (not in core dumps) and
 * wiped with OPENSSL_cleanse before they are unmapped. Used by the API
 * (sealing new values) and the gateway (opening them for injection). */

#include "macros.h"

#define CRED_KEY_BYTES 32
#define CRED_NONCE_BYTES 12
#define CRED_TAG_BYTES 16
#define CRED_KEY_ID_LEN 16             /* hex characters */
#define CRED_NONCE_B64_MAX 32          /* base64 of 12 bytes is 16 characters */
#define CRED_VALUE_MAX 8192            /* bytes of a credential's value */
#define CRED_MASTER_KEY_FILE "master.key"
#define CRED_KEY_FINGERPRINT_HEX 32
#define CRED_KEY_FINGERPRINT_LABEL "space credentials master key fingerprint v1"
/* The store's cluster settings: the fingerprint (below) of the master key
 * the credentials are sealed under, and of the one before the last
 * rotation (spaced rotate-master-key). */
#define CRED_KEY_FINGERPRINT_SETTING "master_key_fingerprint"
#define CRED_KEY_PREVIOUS_FINGERPRINT_SETTING "master_key_previous_fingerprint"
/* The current key's cred_key_id() (set by a rotation): the store takes a new
 * credential sealed under that key only. */
#define CRED_KEY_ID_SETTING "master_key_id"

typedef struct CredKey CredKey;

/* A plaintext value: data[0..len) followed by a NUL (for header building);
 * wiped and unmapped by cred_secret_free(). */
typedef struct CredSecret {
        uint8_t *data;
        size_t len;
        size_t map_len;
} CredSecret;

/* Opens <state_dir>/master.key, creating it (0600, random) if create and it
 * does not exist. Refused: not a regular file, a symlink, not owned by the
 * effective uid, readable or writable by group or others (-EPERM), not
 * exactly CRED_KEY_BYTES long (-EBADMSG). errbuf gets a message for the
 * operator (the path and what is wrong; never key bytes). */
int cred_key_open(const char *state_dir, bool create, CredKey **ret, char *errbuf, size_t errbuf_size);
/* The same for the file at path (config master_key_file). */
int cred_key_open_file(const char *path, bool create, CredKey **ret, char *errbuf, size_t errbuf_size);
/* From raw bytes (tests). */
int cred_key_from_bytes(const uint8_t *key, size_t len, CredKey **ret);
CredKey *cred_key_free(CredKey *k);
DEFINE_TRIVIAL_CLEANUP_FUNC(CredKey *, cred_key_free);
const char *cred_key_id(const CredKey *k); /* CRED_KEY_ID_LEN hex characters */
/* A master key rotation's window: k also opens (never seals) values sealed
 * under previous (config master_key_previous_file), which k then owns and
 * frees. -EEXIST if they are the same key, -EINVAL if previous has a
 * previous itself (a ring holds two keys: the current one and the one
 * before it). */
int cred_key_set_previous(CredKey *k, CredKey *previous);
const CredKey *cred_key_previous(const CredKey *k); /* NULL: none */
/* The key of k's ring (k or its previous) whose fingerprint (below) is
 * fingerprint: the one to seal with when the store names its current key by
 * that fingerprint; NULL if the ring holds no such key. */
const CredKey *cred_key_by_fingerprint(const CredKey *k, const char *fingerprint);
/* HMAC-SHA256 of a fixed label under the key, CRED_KEY_FINGERPRINT_HEX hex
 * characters: what the processes of a cluster compare (in the store's
 * cluster settings) to find that they hold the same master key, without
 * telling anything of the key. */
int cred_key_fingerprint(const CredKey *k, char buf[static CRED_KEY_FINGERPRINT_HEX + 1]);

int cred_secret_new(size_t len, CredSecret **ret);
/* A copy of p[0..n) in a secret mapping. */
int cred_secret_from(const void *p, size_t n, CredSecret **ret);
CredSecret *cred_secret_free(CredSecret *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(CredSecret *, cred_secret_free);

/* Seals value[0..n) (1..CRED_VALUE_MAX bytes) for the credential (id,
 * tenant, name): *ret_ciphertext = base64(ciphertext || tag) (malloc'd),
 * ret_nonce = base64 of the nonce (>= CRED_NONCE_B64_MAX bytes), ret_key_id
 * = cred_key_id(k) (>= CRED_KEY_ID_LEN + 1 bytes). */
int cred_seal(const CredKey *k, const char *id, const char *tenant, const char *name, const void *value, size_t n,
              char **ret_ciphertext, char *ret_nonce, char *ret_key_id);
/* The reverse, with whichever key of k's ring sealed it (by key_id):
 * -EKEYREJECTED if key_id is neither k's nor its previous's (sealed under
 * another master key), -EBADMSG if the ciphertext, nonce or associated data do not
 * authenticate (tampered, or copied from another row). */
int cred_open(const CredKey *k, const char *id, const char *tenant, const char *name, const char *ciphertext,
              const char *nonce, const char *key_id, CredSecret **ret);
