/* SPDX-License-Identifier: MIT */
#pragma once

/* What a credential may look like, and how it applies: the checks the API
 * runs on a new or changed credential, the host matching and header
 * building the gateway uses. Inputs are (pointer, length) where they come
 * from a request; errbuf gets a one-line reason for the user. */

#include "macros.h"
#include "public-suffix.h"

#define CRED_NAME_MAX 64                /* characters of a credential name */
#define CRED_HOSTS_MAX 32               /* host patterns of one credential */
#define CRED_GRANTS_MAX 32              /* credentials granted to one sandbox */
#define CRED_HOST_MAX 253               /* characters of a host name */
#define CRED_ENV_NAME_MAX 128
#define CRED_HEADER_NAME_MAX 127
#define CRED_HEADER_FORMAT_MAX 511
#define CRED_BASIC_USER_MAX 127
#define CRED_PLACEHOLDER_PREFIX "space-cred-"
#define CRED_PLACEHOLDER_MAX (sizeof(CRED_PLACEHOLDER_PREFIX) + CRED_NAME_MAX)
#define CRED_FORMAT_VALUE "{value}"

/* [A-Za-z0-9][A-Za-z0-9_.-]*, at most CRED_NAME_MAX. */
bool cred_name_valid(const char *p, size_t n);

/* A host pattern: a DNS name of lower-case letters, digits and '-' in
 * labels of 1..63 (total <= CRED_HOST_MAX), optionally starting with "*."
 * (any name below, not the name itself). Refused: a pattern that matches
 * everything ("*", "*.") or a whole top-level domain ("*.com", "com"), IP
 * literals, ports, upper case, a trailing dot; and a wildcard that covers a
 * public suffix of the Public Suffix List, either section: "*.co.uk",
 * "*.github.io" (the suffix itself), "*.amazonaws.com" ("s3.amazonaws.com"
 * and others lie below it) — every owner's site there would get the value;
 * any wildcard when the list is not installed. Exact hosts ("api.co.uk") are
 * never refused by the list. What the API checks on a new or changed
 * credential. */
int cred_host_pattern_check(const char *p, size_t n, char *errbuf, size_t errbuf_size);
/* The syntax part alone (what the gateway checks on stored credentials: the
 * list may have grown since they were stored). */
int cred_host_pattern_syntax_check(const char *p, size_t n, char *errbuf, size_t errbuf_size);
/* Whether "*.X" covers a public suffix: CRED_SUFFIX_IS (X is one; its section
 * in ret_section), CRED_SUFFIX_BELOW (one lies below X, into ret_below), or
 * CRED_SUFFIX_NONE (and for every exact host). -ENOENT without the list. */
enum { CRED_SUFFIX_NONE, CRED_SUFFIX_IS, CRED_SUFFIX_BELOW };
int cred_host_pattern_public_suffix(const char *p, size_t n, PublicSuffixSection *ret_section, char *ret_below,
                                    size_t below_size);
/* Whether host (a name as the client sent it: case-insensitive, an optional
 * trailing dot, no port) matches the pattern. */
bool cred_host_match(const char *pattern, const char *host, size_t host_len);

/* A header field name (RFC 9110 token) that is not one of the framing or
 * routing headers (Host, Content-Length, Transfer-Encoding, Connection, ...). */
int cred_header_name_check(const char *p, size_t n, char *errbuf, size_t errbuf_size);
/* Visible ASCII and spaces, containing CRED_FORMAT_VALUE exactly once. */
int cred_header_format_check(const char *p, size_t n, char *errbuf, size_t errbuf_size);
/* Visible ASCII, no ':' (the user of basic auth). */
int cred_basic_user_check(const char *p, size_t n, char *errbuf, size_t errbuf_size);
/* [A-Za-z_][A-Za-z0-9_]*, not one the platform sets itself (PATH, HOME,
 * LD_*, proxy and CA bundle variables). */
int cred_env_name_check(const char *p, size_t n, char *errbuf, size_t errbuf_size);
/* A value must fit a header: 1..CRED_VALUE_MAX bytes, no control characters. */
int cred_value_check(const void *p, size_t n, char *errbuf, size_t errbuf_size);

/* "space-cred-<name>" into buf (>= CRED_PLACEHOLDER_MAX bytes). */
int cred_placeholder(const char *name, char *buf, size_t size);
