/* SPDX-License-Identifier: MIT */
/* Seals a credential value the way the API does, for tests and benchmarks
 * that drive the gateway directly:
 *     cred-seal STATE_DIR ID TENANT NAME < value
 * creates STATE_DIR/master.key (0600) if missing and prints
 * {"ciphertext":...,"nonce":...,"key_id":...}. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "alloc-util.h"
#include "cred-crypt.h"
#include "fd-util.h"

int main(int argc, char **argv) {
        _cleanup_(cred_key_freep) CredKey *k = NULL;
        _cleanup_free_ char *ct = NULL;
        char err[512] = "", nonce[CRED_NONCE_B64_MAX], key_id[CRED_KEY_ID_LEN + 1], value[CRED_VALUE_MAX + 1];
        ssize_t n;

        if (argc != 5) {
                fprintf(stderr, "usage: cred-seal STATE_DIR ID TENANT NAME < value\n");
                return 2;
        }
        n = loop_read(STDIN_FILENO, value, sizeof value);
        while (n > 0 && (value[n - 1] == '\n' || value[n - 1] == '\r'))
                n--;
        if (n <= 0 || (size_t) n > CRED_VALUE_MAX) {
                fprintf(stderr, "cred-seal: the value must be 1..%d bytes\n", CRED_VALUE_MAX);
                return 2;
        }
        if (cred_key_open(argv[1], true, &k, err, sizeof err) < 0) {
                fprintf(stderr, "cred-seal: %s\n", err);
                return 1;
        }
        if (cred_seal(k, argv[2], argv[3], argv[4], value, (size_t) n, &ct, nonce, key_id) < 0) {
                fprintf(stderr, "cred-seal: sealing failed\n");
                return 1;
        }
        explicit_bzero(value, sizeof value);
        printf("{\"ciphertext\":\"%s\",\"nonce\":\"%s\",\"key_id\":\"%s\"}\n", ct, nonce, key_id);
        return 0;
}
