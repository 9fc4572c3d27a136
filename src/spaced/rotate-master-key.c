/* SPDX-License-Identifier: MIT */
/* spaced rotate-master-key: every credential re-sealed under a new master
 * key in one store transaction. See rotate-master-key.h and
 * docs/operations.md (Rotating the master key).
 *
 * Why a spaced verb and not an API call: the master key never travels over
 * the API or into the store, and the operator who rotates it is the one who
 * holds the key files and the store's URL on a host of the installation.
 * The verb reads the same configuration as the daemon (--config, SPACE_*,
 * --KEY=VALUE), so it finds the same store and the same key files. */

#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc-util.h"
#include "cred-crypt.h"
#include "json.h"
#include "log.h"
#include "rotate-master-key.h"
#include "store.h"
#include "str-util.h"

#define ROTATE_ERR_MAX 512
#define ROTATE_EVENT_TYPE "credential.master_key_rotated"
#define ROTATE_EVENT_ACTOR "rotate-master-key"

typedef struct Rotation {
        const CredKey *ring;    /* master_key_file (and master_key_previous_file): what values open with */
        const CredKey *new_key; /* what they are sealed under now */
        char expect[STORE_CLUSTER_SETTING_MAX]; /* the store's fingerprint before the transaction, "" = none */
        const char *new_fp;     /* fingerprints (HMACs, nothing of a key) for the event */
        const char *prev_fp;    /* "" = the store's key was the new one already */
        char host[HOST_NAME_MAX + 1];
        long stall_after;
        uint64_t resealed;
        char err[ROTATE_ERR_MAX];
        char *event_data;
} Rotation;

static void rotation_done(Rotation *rot) {
        free(rot->event_data);
}

static int rotation_begin(char *const *current, void *userdata) {
        Rotation *rot = userdata;

        rot->resealed = 0; /* a retried transaction starts over */
        if (!streq(strempty(current[0]), rot->expect)) {
                (void) snprintf(rot->err, sizeof rot->err,
                                "the store's master key fingerprint changed meanwhile (another rotation?); run "
                                "the command again");
                return -ESTALE;
        }
        return 0;
}

static int rotation_row(Credential *c, void *userdata) {
        Rotation *rot = userdata;
        _cleanup_(cred_secret_freep) CredSecret *value = NULL;
        char *ct = NULL;
        int r;

        if (streq(c->key_id, cred_key_id(rot->new_key)))
                return 0; /* sealed under it already */
        r = cred_open(rot->ring, c->id, c->tenant_id, c->name, c->ciphertext, c->nonce, c->key_id, &value);
        if (r == -EKEYREJECTED)
                r = cred_open(rot->new_key, c->id, c->tenant_id, c->name, c->ciphertext, c->nonce, c->key_id, &value);
        if (r < 0) {
                (void) snprintf(rot->err, sizeof rot->err,
                                r == -EKEYREJECTED
                                        ? "credential '%s' of tenant %s (%s) is sealed under a master key that is "
                                          "neither master_key_file nor master_key_previous_file (key id %s)"
                                        : "credential '%s' of tenant %s (%s) does not open: its sealed value is "
                                          "damaged (key id %s)",
                                c->name, c->tenant_id, c->id, c->key_id);
                return r;
        }
        r = cred_seal(rot->new_key, c->id, c->tenant_id, c->name, value->data, value->len, &ct, c->nonce, c->key_id);
        if (r < 0) {
                (void) snprintf(rot->err, sizeof rot->err, "cannot seal credential '%s' of tenant %s: %s", c->name,
                                c->tenant_id, strerror(-r));
                return r;
        }
        free(c->ciphertext);
        c->ciphertext = ct;
        rot->resealed++;
        if (rot->stall_after >= 0 && rot->resealed == (uint64_t) rot->stall_after) {
                sigset_t usr1;
                int sig;

                /* tests: killed here (a crash mid-way), or SIGUSR1 goes on to the commit */
                sigemptyset(&usr1);
                sigaddset(&usr1, SIGUSR1);
                (void) sigprocmask(SIG_BLOCK, &usr1, NULL);
                fprintf(stderr, "spaced: stalled after re-sealing %" PRIu64 " credentials (--stall-after)\n",
                        rot->resealed);
                fflush(stderr);
                while (sigwait(&usr1, &sig) != 0)
                        ;
        }
        return 1;
}

/* The audit record, system-wide (no tenant: an admin key's GET /v1/events
 * shows it), committed with the rotation: counts, fingerprints (HMACs) and
 * the host it ran on, never a key or a value. */
static int rotation_end(uint64_t changed, uint64_t total, Event *ret, void *userdata) {
        Rotation *rot = userdata;
        _cleanup_(json_w_done) JsonWriter w;
        int r;

        (void) strscpy(ret->type, sizeof ret->type, ROTATE_EVENT_TYPE);
        (void) strscpy(ret->actor, sizeof ret->actor, ROTATE_EVENT_ACTOR);
        if (rot->prev_fp[0])
                (void) snprintf(ret->reason, sizeof ret->reason,
                                "master key rotated on host %.64s: %" PRIu64 " of %" PRIu64
                                " credentials re-sealed under it",
                                rot->host, changed, total);
        else
                (void) snprintf(ret->reason, sizeof ret->reason,
                                "master key rotation run again on host %.64s: %" PRIu64 " of %" PRIu64
                                " credentials re-sealed (the others were under the new key already)",
                                rot->host, changed, total);
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_key(&w, "resealed");
        json_w_uint(&w, changed);
        json_w_key(&w, "credentials");
        json_w_uint(&w, total);
        json_w_kv_string(&w, "fingerprint", rot->new_fp);
        json_w_kv_string(&w, "previous_fingerprint", rot->prev_fp[0] ? rot->prev_fp : NULL);
        json_w_kv_string(&w, "host", rot->host);
        json_w_object_end(&w);
        rot->event_data = mfree(rot->event_data); /* a retried transaction calls it again */
        r = json_w_finish(&w, &rot->event_data, NULL);
        if (r < 0)
                return r;
        ret->data_json = rot->event_data;
        return 0;
}

/* A key file the daemon could use, or why not (on stderr). */
static int load_key(const char *what, const char *path, CredKey **ret) {
        char errbuf[512];
        int r;

        r = cred_key_open_file(path, false, ret, errbuf, sizeof errbuf);
        if (r < 0)
                log_error("%s: %s", what, errbuf[0] ? errbuf : strerror(-r));
        return r;
}

static bool sqlite_store_missing(const char *url) {
        const char *path = startswith(url, "sqlite:") ?: url;
        struct stat st;

        if (startswith(url, "postgres"))
                return false;
        return stat(path, &st) < 0 && errno == ENOENT;
}

int rotate_master_key(const Config *config, const char *new_key_path, long stall_after) {
        _cleanup_(cred_key_freep) CredKey *ring = NULL, *new_key = NULL, *prev = NULL;
        _cleanup_(store_closep) Store *store = NULL;
        char path[PATH_MAX], new_fp[CRED_KEY_FINGERPRINT_HEX + 1], fp[CRED_KEY_FINGERPRINT_HEX + 1];
        char prev_fp[CRED_KEY_FINGERPRINT_HEX + 1] = "";
        StoreSetting settings[3];
        _cleanup_(rotation_done) Rotation rot = { .stall_after = stall_after };
        uint64_t changed = 0, total = 0;
        int r;

        if (geteuid() != 0) {
                log_error("spaced rotate-master-key runs as root, the user of spaced and owner of its key files");
                return 1;
        }
        if (isempty(new_key_path)) {
                log_error("spaced rotate-master-key needs --new-key FILE (32 random bytes, mode 0600, owned by "
                          "root: head -c 32 /dev/urandom > FILE; chmod 600 FILE)");
                return 1;
        }
        if (isempty(config->master_key_file))
                snprintf(path, sizeof path, "%s/%s", config->state_dir, CRED_MASTER_KEY_FILE);
        else
                (void) strscpy(path, sizeof path, config->master_key_file);

        /* the new key first: the commonest mistake, reported before anything else is touched */
        if (load_key("The new master key (--new-key)", new_key_path, &new_key) < 0)
                return 1;
        if (load_key("The current master key (master_key_file)", path, &ring) < 0)
                return 1;
        if (!isempty(config->master_key_previous_file)) {
                if (load_key("The previous master key (master_key_previous_file)", config->master_key_previous_file,
                             &prev) < 0)
                        return 1;
                if (streq(cred_key_id(prev), cred_key_id(new_key))) {
                        log_error("The new key %s is master_key_previous_file (%s): a rotation goes to a new key",
                                  new_key_path, config->master_key_previous_file);
                        return 1;
                }
                r = cred_key_set_previous(ring, prev);
                if (r < 0) {
                        log_error("master_key_previous_file %s is the same key as master_key_file %s",
                                  config->master_key_previous_file, path);
                        return 1;
                }
                prev = NULL;
        }
        if (cred_key_fingerprint(new_key, new_fp) < 0)
                return 1;

        if (sqlite_store_missing(config->store_url)) {
                log_error("There is no store at %s (wrong --config or state_dir?)", config->store_url);
                return 1;
        }
        r = store_open(config->store_url, &store);
        if (r < 0) {
                log_error_errno(r, "Cannot open the store %s: %m", config->store_url);
                return 1;
        }
        r = store_cluster_setting_get(store, CRED_KEY_FINGERPRINT_SETTING, rot.expect);
        if (r == -ENOENT) {
                log_error("The store has no master key on record: no spaced has used credentials on it yet, so "
                          "there is nothing to rotate (start spaced with the new key instead)");
                return 1;
        }
        if (r < 0) {
                log_error_errno(r, "Cannot read the store's master key fingerprint: %m");
                return 1;
        }
        /* the store's key must be one the ring holds (or the new one: a rotation
         * that was done already, run again to re-seal anything left under another) */
        if (!cred_key_by_fingerprint(ring, rot.expect) && !streq(rot.expect, new_fp)) {
                (void) cred_key_fingerprint(ring, fp);
                log_error("The store's credentials are sealed under a master key (fingerprint %s) that is neither "
                          "master_key_file %s (%s) nor master_key_previous_file: nothing changed",
                          rot.expect, path, fp);
                return 1;
        }
        rot.ring = ring;
        rot.new_key = new_key;
        rot.new_fp = new_fp;
        rot.prev_fp = prev_fp;
        if (gethostname(rot.host, sizeof rot.host - 1) < 0 || isempty(rot.host))
                (void) strscpy(rot.host, sizeof rot.host, "unknown");
        settings[0] = (StoreSetting){ CRED_KEY_FINGERPRINT_SETTING, new_fp };
        settings[1] = (StoreSetting){ CRED_KEY_ID_SETTING, cred_key_id(new_key) };
        if (!streq(rot.expect, new_fp)) {
                (void) strscpy(prev_fp, sizeof prev_fp, rot.expect);
                settings[2] = (StoreSetting){ CRED_KEY_PREVIOUS_FINGERPRINT_SETTING, prev_fp };
        }
        r = store_credentials_reseal(store,
                                     &(StoreReseal){ .begin = rotation_begin, .row = rotation_row,
                                                     .end = rotation_end,
                                                     .settings = settings, .n_settings = prev_fp[0] ? 3 : 2,
                                                     .userdata = &rot },
                                     &changed, &total);
        if (r < 0) {
                if (rot.err[0])
                        log_error("Master key rotation refused: %s; nothing changed", rot.err);
                else
                        log_error_errno(r, "Master key rotation failed (the store: %m); nothing changed");
                return 1;
        }
        if (prev_fp[0])
                log_info("Rotated the credentials' master key: %" PRIu64 " of %" PRIu64 " credentials re-sealed "
                         "under %s (fingerprint %s, was %s), in one transaction. API servers that hold it seal "
                         "under it from now on; every process needs it as master_key_file before it restarts "
                         "(the old key as master_key_previous_file until all have it). No key file was deleted.",
                         changed, total, new_key_path, new_fp, prev_fp);
        else
                log_info("The store's master key is %s already (fingerprint %s): %" PRIu64 " of %" PRIu64
                         " credentials were still sealed under another key and are re-sealed under it now",
                         new_key_path, new_fp, changed, total);
        return 0;
}
