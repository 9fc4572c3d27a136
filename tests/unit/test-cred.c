/* SPDX-License-Identifier: MIT */
/* src/shared/cred-crypt.c and cred-rules.c: sealing credentials under the
 * master key (and the attacks on it: a tampered ciphertext, a value moved to
 * another row, another master key, a master key file with a wrong mode,
 * owner, size or a symlink), and the checks of credential fields. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc-util.h"
#include "cred-crypt.h"
#include "cred-rules.h"
#include "fd-util.h"
#include "str-util.h"
#include "test.h"

static const uint8_t key_a[CRED_KEY_BYTES] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                               17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32 };

#define VALUE "sk-test-0123456789abcdef"

TEST(seal_open_roundtrip) {
        _cleanup_(cred_key_freep) CredKey *k = NULL;
        _cleanup_(cred_secret_freep) CredSecret *s = NULL;
        _cleanup_free_ char *ct = NULL, *ct2 = NULL;
        char nonce[CRED_NONCE_B64_MAX], nonce2[CRED_NONCE_B64_MAX], kid[CRED_KEY_ID_LEN + 1];

        ASSERT_OK(cred_key_from_bytes(key_a, sizeof key_a, &k));
        ASSERT_EQ(strlen(cred_key_id(k)), CRED_KEY_ID_LEN);
        ASSERT_OK(cred_seal(k, "cr_1", "tn_a", "openai", VALUE, strlen(VALUE), &ct, nonce, kid));
        ASSERT_STREQ(kid, cred_key_id(k));
        ASSERT_TRUE(strstr(ct, VALUE) == NULL);
        ASSERT_OK(cred_open(k, "cr_1", "tn_a", "openai", ct, nonce, kid, &s));
        ASSERT_EQ(s->len, strlen(VALUE));
        ASSERT_TRUE(memcmp(s->data, VALUE, s->len) == 0);
        ASSERT_EQ(s->data[s->len], 0);

        /* a fresh nonce each time: the same value seals differently */
        ASSERT_OK(cred_seal(k, "cr_1", "tn_a", "openai", VALUE, strlen(VALUE), &ct2, nonce2, kid));
        ASSERT_TRUE(strcmp(nonce, nonce2) != 0);
        ASSERT_TRUE(strcmp(ct, ct2) != 0);
}

TEST(open_refuses_moved_tampered_or_foreign) {
        _cleanup_(cred_key_freep) CredKey *k = NULL, *k2 = NULL;
        _cleanup_free_ char *ct = NULL;
        char nonce[CRED_NONCE_B64_MAX], kid[CRED_KEY_ID_LEN + 1];
        CredSecret *s = NULL;
        uint8_t other[CRED_KEY_BYTES];

        ASSERT_OK(cred_key_from_bytes(key_a, sizeof key_a, &k));
        ASSERT_OK(cred_seal(k, "cr_1", "tn_a", "openai", VALUE, strlen(VALUE), &ct, nonce, kid));

        /* copied onto another tenant's row, another name, another id */
        ASSERT_ERRNO(cred_open(k, "cr_1", "tn_b", "openai", ct, nonce, kid, &s), EBADMSG);
        ASSERT_ERRNO(cred_open(k, "cr_1", "tn_a", "openai2", ct, nonce, kid, &s), EBADMSG);
        ASSERT_ERRNO(cred_open(k, "cr_2", "tn_a", "openai", ct, nonce, kid, &s), EBADMSG);
        /* the boundaries of the associated data are not ambiguous */
        ASSERT_ERRNO(cred_open(k, "cr_1tn_a", "", "openai", ct, nonce, kid, &s), EBADMSG);

        /* one flipped bit of the ciphertext */
        ct[0] = ct[0] == 'A' ? 'B' : 'A';
        ASSERT_ERRNO(cred_open(k, "cr_1", "tn_a", "openai", ct, nonce, kid, &s), EBADMSG);
        ct[0] = ct[0] == 'A' ? 'B' : 'A';
        /* not base64, a short nonce */
        ASSERT_ERRNO(cred_open(k, "cr_1", "tn_a", "openai", "!!!", nonce, kid, &s), EBADMSG);
        ASSERT_ERRNO(cred_open(k, "cr_1", "tn_a", "openai", ct, "AAAA", kid, &s), EBADMSG);

        /* another master key */
        memcpy(other, key_a, sizeof other);
        other[0] ^= 1;
        ASSERT_OK(cred_key_from_bytes(other, sizeof other, &k2));
        ASSERT_TRUE(strcmp(cred_key_id(k), cred_key_id(k2)) != 0);
        ASSERT_ERRNO(cred_open(k2, "cr_1", "tn_a", "openai", ct, nonce, kid, &s), EKEYREJECTED);
        /* ... even one that lies about its id */
        ASSERT_ERRNO(cred_open(k2, "cr_1", "tn_a", "openai", ct, nonce, cred_key_id(k2), &s), EBADMSG);
        ASSERT_NULL(s);

        /* value bounds */
        char big[CRED_VALUE_MAX + 1];
        memset(big, 'x', sizeof big);
        _cleanup_free_ char *ct3 = NULL;
        ASSERT_ERRNO(cred_seal(k, "cr_1", "tn_a", "n", big, sizeof big, &ct3, nonce, kid), EINVAL);
        ASSERT_ERRNO(cred_seal(k, "cr_1", "tn_a", "n", big, 0, &ct3, nonce, kid), EINVAL);
        ASSERT_OK(cred_seal(k, "cr_1", "tn_a", "n", big, CRED_VALUE_MAX, &ct3, nonce, kid));
}

static void write_key(const char *dir, size_t n, mode_t mode) {
        char path[4096];
        uint8_t buf[64] = {};

        snprintf(path, sizeof path, "%s/" CRED_MASTER_KEY_FILE, dir);
        (void) unlink(path);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(loop_write(fd, buf, n));
        ASSERT_TRUE(fchmod(fd, mode) == 0);
        close(fd);
}

/* A rotation's window: a key that also opens values sealed under the one
 * before it, and seals under itself only. */
TEST(key_ring_opens_both_seals_current) {
        _cleanup_(cred_key_freep) CredKey *cur = NULL, *prev = NULL, *other = NULL, *same = NULL, *alone = NULL;
        _cleanup_free_ char *ct_old = NULL, *ct_new = NULL;
        char n_old[CRED_NONCE_B64_MAX], n_new[CRED_NONCE_B64_MAX], kid_old[CRED_KEY_ID_LEN + 1],
                kid_new[CRED_KEY_ID_LEN + 1], fp_prev[CRED_KEY_FINGERPRINT_HEX + 1], fp_cur[CRED_KEY_FINGERPRINT_HEX + 1];
        uint8_t b[CRED_KEY_BYTES];
        CredSecret *s = NULL;

        memcpy(b, key_a, sizeof b);
        ASSERT_OK(cred_key_from_bytes(b, sizeof b, &prev));
        ASSERT_OK(cred_key_from_bytes(b, sizeof b, &same));
        ASSERT_OK(cred_seal(prev, "cr_1", "tn_a", "openai", VALUE, strlen(VALUE), &ct_old, n_old, kid_old));
        ASSERT_OK(cred_key_fingerprint(prev, fp_prev));
        b[5] ^= 0x40;
        ASSERT_OK(cred_key_from_bytes(b, sizeof b, &cur));
        ASSERT_OK(cred_key_fingerprint(cur, fp_cur));
        b[6] ^= 0x40;
        ASSERT_OK(cred_key_from_bytes(b, sizeof b, &other));

        /* before the ring: the new key alone does not open the old value */
        ASSERT_ERRNO(cred_open(cur, "cr_1", "tn_a", "openai", ct_old, n_old, kid_old, &s), EKEYREJECTED);
        ASSERT_NULL(cred_key_previous(cur));
        ASSERT_ERRNO(cred_key_set_previous(cur, NULL), EINVAL);
        ASSERT_OK(cred_key_set_previous(cur, prev));
        ASSERT_TRUE(cred_key_previous(cur) == prev);
        prev = NULL; /* owned by cur */
        /* a ring holds two keys: one that has a previous cannot be one */
        ASSERT_OK(cred_key_from_bytes(b, sizeof b, &alone));
        ASSERT_ERRNO(cred_key_set_previous(alone, cur), EINVAL);
        alone = cred_key_free(alone);
        /* the same key as previous is refused (and stays the caller's) */
        ASSERT_OK(cred_key_from_bytes(key_a, sizeof key_a, &alone));
        ASSERT_ERRNO(cred_key_set_previous(alone, same), EEXIST);

        ASSERT_OK(cred_open(cur, "cr_1", "tn_a", "openai", ct_old, n_old, kid_old, &s));
        ASSERT_TRUE(s->len == strlen(VALUE) && memcmp(s->data, VALUE, s->len) == 0);
        s = cred_secret_free(s);
        /* sealing uses the current key only */
        ASSERT_OK(cred_seal(cur, "cr_1", "tn_a", "openai", VALUE, strlen(VALUE), &ct_new, n_new, kid_new));
        ASSERT_STREQ(kid_new, cred_key_id(cur));
        ASSERT_OK(cred_open(cur, "cr_1", "tn_a", "openai", ct_new, n_new, kid_new, &s));
        s = cred_secret_free(s);
        /* a key outside the ring still does not open, and a row that claims the
         * previous key's id with the current key's ciphertext does not authenticate */
        ASSERT_ERRNO(cred_open(other, "cr_1", "tn_a", "openai", ct_old, n_old, kid_old, &s), EKEYREJECTED);
        ASSERT_ERRNO(cred_open(cur, "cr_1", "tn_a", "openai", ct_new, n_new, kid_old, &s), EBADMSG);
        ASSERT_NULL(s);

        /* the store names the key to seal with by its fingerprint */
        ASSERT_TRUE(cred_key_by_fingerprint(cur, fp_cur) == cur);
        ASSERT_TRUE(cred_key_by_fingerprint(cur, fp_prev) == cred_key_previous(cur));
        ASSERT_NULL(cred_key_by_fingerprint(cur, "00000000000000000000000000000000"));
        ASSERT_NULL(cred_key_by_fingerprint(cur, NULL));
}

TEST(master_key_file) {
        const char *dir = test_tmpdir();
        _cleanup_(cred_key_freep) CredKey *k = NULL, *k2 = NULL;
        CredKey *bad = NULL;
        char err[512], path[4096], link_target[4096];
        struct stat st;

        snprintf(path, sizeof path, "%s/" CRED_MASTER_KEY_FILE, dir);
        /* not there and not to be created */
        ASSERT_ERRNO(cred_key_open(dir, false, &bad, err, sizeof err), ENOENT);
        ASSERT_TRUE(strstr(err, path) != NULL);

        /* created at first start: 0600, 32 bytes; the second open reads the same key */
        ASSERT_OK(cred_key_open(dir, true, &k, err, sizeof err));
        ASSERT_OK(stat(path, &st));
        ASSERT_EQ(st.st_mode & 07777, 0600);
        ASSERT_EQ(st.st_size, CRED_KEY_BYTES);
        ASSERT_OK(cred_key_open(dir, true, &k2, err, sizeof err));
        ASSERT_STREQ(cred_key_id(k), cred_key_id(k2));

        /* readable by others: refused, with the mode in the message */
        ASSERT_OK(chmod(path, 0644));
        ASSERT_ERRNO(cred_key_open(dir, true, &bad, err, sizeof err), EPERM);
        ASSERT_TRUE(strstr(err, "0644") != NULL);
        ASSERT_OK(chmod(path, 0640));
        ASSERT_ERRNO(cred_key_open(dir, true, &bad, err, sizeof err), EPERM);
        ASSERT_OK(chmod(path, 0600));

        /* wrong sizes */
        write_key(dir, 31, 0600);
        ASSERT_ERRNO(cred_key_open(dir, true, &bad, err, sizeof err), EBADMSG);
        ASSERT_TRUE(strstr(err, "31 bytes") != NULL);
        write_key(dir, 33, 0600);
        ASSERT_ERRNO(cred_key_open(dir, true, &bad, err, sizeof err), EBADMSG);
        write_key(dir, 0, 0600);
        ASSERT_ERRNO(cred_key_open(dir, true, &bad, err, sizeof err), EBADMSG);

        /* a symlink to a good key file is refused (and not replaced) */
        write_key(dir, 32, 0600);
        snprintf(link_target, sizeof link_target, "%s/real.key", dir);
        ASSERT_OK(rename(path, link_target));
        ASSERT_OK(symlink(link_target, path));
        ASSERT_ERRNO(cred_key_open(dir, true, &bad, err, sizeof err), ELOOP);
        ASSERT_TRUE(strstr(err, "symbolic link") != NULL);
        ASSERT_OK(unlink(path));

        /* another owner */
        if (geteuid() == 0) {
                write_key(dir, 32, 0600);
                ASSERT_OK(chown(path, 65534, 65534));
                ASSERT_ERRNO(cred_key_open(dir, true, &bad, err, sizeof err), EPERM);
                ASSERT_TRUE(strstr(err, "owned by uid 65534") != NULL);
        }
        ASSERT_NULL(bad);
}

/* master_key_file: a key file anywhere, opened (not made) by path; the
 * fingerprint a cluster compares: the same for the same key, another for
 * another key, and nothing of the key in it. */
TEST(master_key_file_by_path_and_fingerprint) {
        const char *dir = test_tmpdir();
        _cleanup_(cred_key_freep) CredKey *k = NULL, *k2 = NULL, *other = NULL;
        CredKey *bad = NULL;
        char err[512], path[4096], fp[CRED_KEY_FINGERPRINT_HEX + 1], fp2[CRED_KEY_FINGERPRINT_HEX + 1],
                fpo[CRED_KEY_FINGERPRINT_HEX + 1];
        uint8_t raw[CRED_KEY_BYTES];

        snprintf(path, sizeof path, "%s/cluster-master.key", dir);
        ASSERT_ERRNO(cred_key_open_file(path, false, &bad, err, sizeof err), ENOENT);
        ASSERT_TRUE(strstr(err, path) != NULL);
        ASSERT_ERRNO(cred_key_open_file(dir, false, &bad, err, sizeof err), EPERM); /* a directory */
        snprintf(path, sizeof path, "%s/", dir);
        ASSERT_ERRNO(cred_key_open_file(path, false, &bad, err, sizeof err), EINVAL);

        snprintf(path, sizeof path, "%s/cluster-master.key", dir);
        ASSERT_OK(cred_key_open_file(path, true, &k, err, sizeof err));
        ASSERT_OK(cred_key_open_file(path, false, &k2, err, sizeof err));
        ASSERT_STREQ(cred_key_id(k), cred_key_id(k2));
        ASSERT_OK(chmod(path, 0604));
        ASSERT_ERRNO(cred_key_open_file(path, false, &bad, err, sizeof err), EPERM);
        ASSERT_TRUE(strstr(err, "0604") != NULL);
        ASSERT_NULL(bad);

        ASSERT_OK(cred_key_fingerprint(k, fp));
        ASSERT_OK(cred_key_fingerprint(k2, fp2));
        ASSERT_EQ(strlen(fp), (size_t) CRED_KEY_FINGERPRINT_HEX);
        ASSERT_STREQ(fp, fp2);
        memset(raw, 0x5a, sizeof raw);
        ASSERT_OK(cred_key_from_bytes(raw, sizeof raw, &other));
        ASSERT_OK(cred_key_fingerprint(other, fpo));
        ASSERT_FALSE(streq(fp, fpo));
        /* not the key id (a hash of the key alone) either */
        ASSERT_TRUE(strncmp(fp, cred_key_id(k), CRED_KEY_ID_LEN) != 0);
}

TEST(secret_memory_is_not_dumped) {
        _cleanup_(cred_secret_freep) CredSecret *s = NULL;
        _cleanup_free_ char *smaps = NULL;
        char needle[64];
        size_t n;

        ASSERT_OK(cred_secret_from(VALUE, strlen(VALUE), &s));
        ASSERT_OK(read_full_file("/proc/self/smaps", 1 << 24, &smaps, &n));
        snprintf(needle, sizeof needle, "%lx-", (unsigned long) (uintptr_t) s->data);
        const char *m = strstr(smaps, needle);
        ASSERT_NOT_NULL(m);
        const char *flags = strstr(m, "VmFlags:");
        ASSERT_NOT_NULL(flags);
        const char *eol = strchr(flags, '\n');
        ASSERT_NOT_NULL(eol);
        ASSERT_NOT_NULL(memmem(flags, (size_t) (eol - flags), " dd", 3)); /* "do not dump" */
}

TEST(host_patterns) {
        char err[256];
        static const char *const good[] = {
                "api.openai.com", "*.example.com", "a.b", "x-1.example.org", "*.example.co.uk",
                /* exact hosts are never refused by the Public Suffix List, even one that is a suffix */
                "api.co.uk", "co.uk", "github.io", "user.github.io", "*.user.github.io",
                "*.city.kawasaki.jp", /* an exception rule ("!city.kawasaki.jp"): registrable */
                "*.example.xn--p1ai", "*.xn--80ak6aa92e.com",
        };
        static const char *const bad[] = {
                "", "*", "*.", "*.com", "com", "localhost", "*.*.example.com", "a*.example.com", "API.openai.com",
                "example.com.", "1.2.3.4", "example.com:443", "-a.example.com", "a-.example.com", "a..b",
                "exa mple.com", "*example.com", ".example.com",
        };

        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                ASSERT_OK(cred_host_pattern_check(good[i], strlen(good[i]), err, sizeof err));
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                if (cred_host_pattern_check(bad[i], strlen(bad[i]), err, sizeof err) != -EINVAL)
                        test_fail(__FILE__, __LINE__, "'%s' was accepted", bad[i]);
                ASSERT_TRUE(err[0] != 0);
        }
        /* wildcards over a public suffix of either section of the list: every
         * owner's site under it would receive the value */
        static const struct {
                const char *pattern, *suffix, *section;
        } suffixes[] = {
                { "*.co.uk", "'co.uk'", "ICANN" },
                { "*.com.au", "'com.au'", "ICANN" },
                { "*.foo.ck", "'foo.ck'", "ICANN" },          /* "*.ck": every name under ck is a suffix */
                { "*.foo.kawasaki.jp", "'foo.kawasaki.jp'", "ICANN" },
                { "*.xn--ciqpn.hk", "'xn--ciqpn.hk'", "ICANN" }, /* 个人.hk in punycode */
                { "*.github.io", "'github.io'", "private" },
                { "*.s3.amazonaws.com", "'s3.amazonaws.com'", "private" },
                { "*.blogspot.com", "'blogspot.com'", "private" },
        };
        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
                PublicSuffixSection sec;
                err[0] = 0;
                if (cred_host_pattern_check(suffixes[i].pattern, strlen(suffixes[i].pattern), err, sizeof err) !=
                    -EINVAL)
                        test_fail(__FILE__, __LINE__, "'%s' was accepted", suffixes[i].pattern);
                if (!strstr(err, suffixes[i].suffix) || !strstr(err, suffixes[i].section) ||
                    !strstr(err, "Public Suffix List"))
                        test_fail(__FILE__, __LINE__, "'%s': unclear reason: %s", suffixes[i].pattern, err);
                /* the syntax alone (what the gateway checks on stored rows) is fine */
                ASSERT_OK(cred_host_pattern_syntax_check(suffixes[i].pattern, strlen(suffixes[i].pattern), NULL, 0));
                ASSERT_EQ(cred_host_pattern_public_suffix(suffixes[i].pattern, strlen(suffixes[i].pattern), &sec,
                                                          NULL, 0),
                          CRED_SUFFIX_IS);
                ASSERT_STREQ(public_suffix_section_to_string(sec), suffixes[i].section);
        }
        /* a wildcard above a suffix: amazonaws.com is Amazon's, but every
         * bucket's name under s3.amazonaws.com is its owner's */
        static const char *const above[] = { "*.amazonaws.com", "*.eu-west-1.amazonaws.com", "*.fastly.net" };
        for (size_t i = 0; i < ELEMENTSOF(above); i++) {
                char below[PUBLIC_SUFFIX_NAME_MAX + 1];
                PublicSuffixSection sec;
                err[0] = 0;
                if (cred_host_pattern_check(above[i], strlen(above[i]), err, sizeof err) != -EINVAL)
                        test_fail(__FILE__, __LINE__, "'%s' was accepted", above[i]);
                if (!strstr(err, "covers public suffixes below") || !strstr(err, above[i] + 2))
                        test_fail(__FILE__, __LINE__, "'%s': unclear reason: %s", above[i], err);
                ASSERT_EQ(cred_host_pattern_public_suffix(above[i], strlen(above[i]), &sec, below, sizeof below),
                          CRED_SUFFIX_BELOW);
                ASSERT_TRUE(endswith(below, above[i] + 1)); /* ".amazonaws.com" */
        }
        /* upper case and a trailing dot stay refused by the syntax, whatever the suffix */
        static const char *const odd[] = { "*.CO.UK", "*.co.uk.", "*.Example.co.uk", "*.uk", "*.xn--p1ai" };
        for (size_t i = 0; i < ELEMENTSOF(odd); i++)
                if (cred_host_pattern_check(odd[i], strlen(odd[i]), err, sizeof err) != -EINVAL)
                        test_fail(__FILE__, __LINE__, "'%s' was accepted", odd[i]);
        /* only n bytes are read: "*.co.uk" of "*.co.ukx" is the suffix */
        ASSERT_ERRNO(cred_host_pattern_check("*.co.ukx", 7, err, sizeof err), EINVAL);
        ASSERT_OK(cred_host_pattern_check("*.x.co.uk", 9, err, sizeof err));

        char longname[CRED_HOST_MAX + 2];
        memset(longname, 'a', sizeof longname);
        ASSERT_ERRNO(cred_host_pattern_check(longname, sizeof longname, err, sizeof err), EINVAL);

        ASSERT_TRUE(cred_host_match("api.openai.com", "api.openai.com", 14));
        ASSERT_TRUE(cred_host_match("api.openai.com", "API.OpenAI.com.", 15));
        ASSERT_FALSE(cred_host_match("api.openai.com", "api.openai.com.evil.net", 23));
        ASSERT_FALSE(cred_host_match("api.openai.com", "xapi.openai.com", 15));
        ASSERT_TRUE(cred_host_match("*.example.com", "a.example.com", 13));
        ASSERT_TRUE(cred_host_match("*.example.com", "a.b.example.com", 15));
        ASSERT_FALSE(cred_host_match("*.example.com", "example.com", 11));
        ASSERT_FALSE(cred_host_match("*.example.com", ".example.com", 12));
        ASSERT_FALSE(cred_host_match("*.example.com", "badexample.com", 14));
        ASSERT_FALSE(cred_host_match("*.example.com", "a.example.com\0x", 15));
        ASSERT_FALSE(cred_host_match("api.openai.com", "", 0));
}

TEST(public_suffix_lookup) {
        PublicSuffixSection s;
        static const struct {
                const char *name;
                PublicSuffixSection want;
        } cases[] = {
                { "com", PUBLIC_SUFFIX_ICANN },
                { "co.uk", PUBLIC_SUFFIX_ICANN },
                { "CO.UK", PUBLIC_SUFFIX_ICANN },       /* case-insensitive */
                { "co.uk.", PUBLIC_SUFFIX_ICANN },      /* one trailing dot */
                { "xn--p1ai", PUBLIC_SUFFIX_ICANN },    /* .рф */
                { "xn--ciqpn.hk", PUBLIC_SUFFIX_ICANN },
                { "anything.ck", PUBLIC_SUFFIX_ICANN }, /* "*.ck" */
                { "www.ck", PUBLIC_SUFFIX_NONE },       /* "!www.ck" */
                { "github.io", PUBLIC_SUFFIX_PRIVATE },
                { "s3.amazonaws.com", PUBLIC_SUFFIX_PRIVATE },
                { "example.co.uk", PUBLIC_SUFFIX_NONE },
                { "amazonaws.com", PUBLIC_SUFFIX_NONE },
                { "example.com", PUBLIC_SUFFIX_NONE },
                { "no-such-tld-here", PUBLIC_SUFFIX_ICANN }, /* the list's implicit "*" */
        };

        ASSERT_OK(public_suffix_init());
        ASSERT_TRUE(!streq(public_suffix_source(), "none"));
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                ASSERT_OK(public_suffix_lookup(cases[i].name, strlen(cases[i].name), &s));
                if (s != cases[i].want)
                        test_fail(__FILE__, __LINE__, "%s: section %d, expected %d", cases[i].name, s, cases[i].want);
        }
        ASSERT_ERRNO(public_suffix_lookup("", 0, &s), EINVAL);
        ASSERT_ERRNO(public_suffix_lookup(".", 1, &s), EINVAL);
        ASSERT_ERRNO(public_suffix_lookup("co.uk..", 7, &s), EINVAL);
        ASSERT_ERRNO(public_suffix_lookup("\xe4.de", 3, &s), EINVAL);   /* raw UTF-8: punycode only */
        ASSERT_ERRNO(public_suffix_lookup("co.uk\0x", 7, &s), EINVAL); /* embedded NUL */
        char name[PUBLIC_SUFFIX_NAME_MAX + 2];
        memset(name, 'a', sizeof name);
        ASSERT_ERRNO(public_suffix_lookup(name, sizeof name, &s), EINVAL);
        ASSERT_OK(public_suffix_lookup(name, PUBLIC_SUFFIX_NAME_MAX, &s)); /* one unknown TLD */
        ASSERT_NULL(public_suffix_section_to_string(PUBLIC_SUFFIX_NONE));

        /* suffixes below a name (the text list, byte-reversed and sorted) */
        char below[PUBLIC_SUFFIX_NAME_MAX + 1];
        ASSERT_EQ(public_suffix_below("amazonaws.com", 13, below, sizeof below), 1);
        ASSERT_TRUE(endswith(below, ".amazonaws.com"));
        ASSERT_EQ(public_suffix_below("AMAZONAWS.COM.", 14, below, sizeof below), 1);
        ASSERT_EQ(public_suffix_below("compute.amazonaws.com", 21, below, sizeof below), 1); /* "*.compute..." */
        ASSERT_EQ(public_suffix_below("example.com", 11, below, sizeof below), 0);
        ASSERT_EQ(public_suffix_below("example.co.uk", 13, below, sizeof below), 0);
        ASSERT_EQ(public_suffix_below("github.com", 10, NULL, 0), 0);
        ASSERT_EQ(public_suffix_below("s3.amazonaws.com", 16, NULL, 0), 0); /* nothing strictly below it */
        ASSERT_EQ(public_suffix_below("uk", 2, below, sizeof below), 1);
        ASSERT_ERRNO(public_suffix_below("a..com", 6, below, sizeof below), EINVAL);
        ASSERT_ERRNO(public_suffix_below(".com", 4, below, sizeof below), EINVAL);
        ASSERT_ERRNO(public_suffix_below("", 0, below, sizeof below), EINVAL);
}

TEST(field_checks) {
        char err[256];

        ASSERT_TRUE(cred_name_valid("openai", 6));
        ASSERT_TRUE(cred_name_valid("gh_token-2.x", 12));
        ASSERT_FALSE(cred_name_valid("", 0));
        ASSERT_FALSE(cred_name_valid("-x", 2));
        ASSERT_FALSE(cred_name_valid("a/b", 3));
        ASSERT_FALSE(cred_name_valid("a b", 3));

        ASSERT_OK(cred_header_name_check("Authorization", 13, err, sizeof err));
        ASSERT_OK(cred_header_name_check("x-api-key", 9, err, sizeof err));
        ASSERT_ERRNO(cred_header_name_check("Host", 4, err, sizeof err), EINVAL);
        ASSERT_ERRNO(cred_header_name_check("content-LENGTH", 14, err, sizeof err), EINVAL);
        ASSERT_ERRNO(cred_header_name_check("Transfer-Encoding", 17, err, sizeof err), EINVAL);
        ASSERT_ERRNO(cred_header_name_check("X-A: b", 6, err, sizeof err), EINVAL);
        ASSERT_ERRNO(cred_header_name_check("X\r\nY", 4, err, sizeof err), EINVAL);
        ASSERT_ERRNO(cred_header_name_check("", 0, err, sizeof err), EINVAL);

        ASSERT_OK(cred_header_format_check("Bearer {value}", 14, err, sizeof err));
        ASSERT_OK(cred_header_format_check("{value}", 7, err, sizeof err));
        ASSERT_ERRNO(cred_header_format_check("Bearer", 6, err, sizeof err), EINVAL);
        ASSERT_ERRNO(cred_header_format_check("{value}{value}", 14, err, sizeof err), EINVAL);
        ASSERT_ERRNO(cred_header_format_check("a\r\nX-Evil: {value}", 19, err, sizeof err), EINVAL);

        ASSERT_OK(cred_basic_user_check("git", 3, err, sizeof err));
        ASSERT_ERRNO(cred_basic_user_check("a:b", 3, err, sizeof err), EINVAL);
        ASSERT_ERRNO(cred_basic_user_check("", 0, err, sizeof err), EINVAL);

        ASSERT_OK(cred_env_name_check("OPENAI_API_KEY", 14, err, sizeof err));
        ASSERT_OK(cred_env_name_check("_x1", 3, err, sizeof err));
        ASSERT_ERRNO(cred_env_name_check("1X", 2, err, sizeof err), EINVAL);
        ASSERT_ERRNO(cred_env_name_check("A-B", 3, err, sizeof err), EINVAL);
        ASSERT_ERRNO(cred_env_name_check("PATH", 4, err, sizeof err), EINVAL);
        ASSERT_ERRNO(cred_env_name_check("LD_PRELOAD", 10, err, sizeof err), EINVAL);
        ASSERT_ERRNO(cred_env_name_check("SSL_CERT_FILE", 13, err, sizeof err), EINVAL);
        ASSERT_ERRNO(cred_env_name_check("https_proxy", 11, err, sizeof err), EINVAL);

        ASSERT_OK(cred_value_check(VALUE, strlen(VALUE), err, sizeof err));
        ASSERT_ERRNO(cred_value_check("", 0, err, sizeof err), EINVAL);
        ASSERT_ERRNO(cred_value_check("secret\r\nX-Evil: 1", 17, err, sizeof err), EINVAL);
        ASSERT_TRUE(strstr(err, "secret") == NULL); /* the message never echoes the value */
        char big[CRED_VALUE_MAX + 1];
        memset(big, 'v', sizeof big);
        ASSERT_ERRNO(cred_value_check(big, sizeof big, err, sizeof err), E2BIG);

        char ph[CRED_PLACEHOLDER_MAX];
        ASSERT_OK(cred_placeholder("openai", ph, sizeof ph));
        ASSERT_STREQ(ph, "space-cred-openai");
        ASSERT_ERRNO(cred_placeholder("bad name", ph, sizeof ph), EINVAL);
}
