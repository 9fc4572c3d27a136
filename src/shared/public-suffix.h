/* SPDX-License-Identifier: MIT */
#pragma once

/* Mozilla's Public Suffix List through libpsl: whether a name is one under
 * which unrelated owners register their names ("com", "co.uk", "github.io"),
 * so that a "*.name" wildcard would cover the sites of countless owners.
 * The data is libpsl's built-in list, or Debian's `publicsuffix` package
 * (/usr/share/publicsuffix/public_suffix_list.dafsa) when that file is newer;
 * loaded once, read-only afterwards (lookups are thread-safe). */

#include "macros.h"

#define PUBLIC_SUFFIX_NAME_MAX 253 /* characters of a name looked up */
#define PUBLIC_SUFFIX_DAT_PATH "/usr/share/publicsuffix/public_suffix_list.dat" /* Debian's publicsuffix */

typedef enum PublicSuffixSection {
        PUBLIC_SUFFIX_NONE,    /* not a public suffix: a name someone registered, or below one */
        PUBLIC_SUFFIX_ICANN,   /* the list's ICANN section: TLDs and registry suffixes (com, co.uk, foo.ck) */
        PUBLIC_SUFFIX_PRIVATE, /* the list's private section: a company's shared suffix (github.io) */
        _PUBLIC_SUFFIX_MAX,
} PublicSuffixSection;

/* Loads the lists (idempotent). Call it before threads start so the files
 * are read once; lookups call it too. -ENOENT when libpsl has neither a
 * built-in list nor a readable distribution file, or the text list
 * (PUBLIC_SUFFIX_DAT_PATH) is missing: some lookups will fail closed. */
int public_suffix_init(void);

/* Which section lists the name as a public suffix, ICANN first. The name is
 * ASCII (letters of any case, digits, '-', '_', '.'; IDNs as punycode "xn--"
 * labels), no empty label, one trailing dot ignored. -EINVAL for an empty,
 * too long or otherwise bad name; -ENOENT when there is no list. */
int public_suffix_lookup(const char *name, size_t n, PublicSuffixSection *ret);

/* Whether a public suffix lies strictly below the name: "amazonaws.com" is
 * someone's registered name, but "s3.amazonaws.com" below it is a suffix, so
 * "*.amazonaws.com" covers every owner's bucket. 1 and one such suffix (the
 * first in reversed order, as the list writes it: "*.x" for a wildcard rule)
 * in ret_suffix, 0 if none.
 * From the text list of Debian's publicsuffix package (PUBLIC_SUFFIX_DAT_PATH;
 * libpsl cannot enumerate its rules): -ENOENT without that file; -EINVAL for
 * a bad name (as public_suffix_lookup). */
int public_suffix_below(const char *name, size_t n, char *ret_suffix, size_t ret_size);

/* "ICANN" / "private"; NULL for NONE or out of range. */
const char *public_suffix_section_to_string(PublicSuffixSection s);

/* Where the loaded list came from: "built-in (libpsl)" or the file's path;
 * "none" before a successful load. */
const char *public_suffix_source(void);
