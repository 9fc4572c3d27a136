/* SPDX-License-Identifier: MIT */
#pragma once

/* Putting credentials on a sandbox's requests. The gateway holds, per
 * sandbox, the credentials granted to it with their values opened
 * (cred_open() of src/shared/cred-crypt.h, in secret memory); the worker
 * builds the set from the store (store_grant_list) and replaces it whenever
 * a credential is rotated, revoked, granted or ungranted — and the gateway
 * checks expiry and revocation again on every request (now_usec), so an
 * expired credential stops at once even before the set is replaced.
 *
 * For a request to host with the parsed head h (HTTP/1.x):
 *     if (!cred_inject_wants(set, host, now))  → tunnel TLS, do not intercept;
 *     cred_inject_head(set, host, now, &h, &used)
 *   - where a header value holds the placeholder "space-cred-NAME" (as a
 *     whole token: "space-cred-ab" is not "space-cred-a" followed by "b") of
 *     a credential whose hosts match host, the placeholder is replaced by the
 *     value ({value} of the format: "Bearer space-cred-x" becomes
 *     "Bearer <value>"); for basic credentials the header becomes the whole
 *     "Basic base64(user:value)";
 *   - a matching credential whose placeholder appeared nowhere sets its
 *     header (header name: format with {value} replaced; basic:
 *     Authorization), replacing a header of that name the sandbox sent;
 *   - a placeholder of a credential that does not match host (or is expired
 *     or revoked) is left as it is: the value never goes to another host.
 *   used lists the names of the credentials applied: one event each
 *   (sandbox, host, name, time — never the value).
 * After the head is serialised and sent, cred_inject_head_done() wipes and
 * frees it (header values held the value). */

#include "cred-crypt.h"
#include "cred-rules.h"
#include "http-parse.h"

#define CRED_INJECT_USED_MAX CRED_GRANTS_MAX

typedef enum CredInjectApply {
        CRED_INJECT_HEADER,
        CRED_INJECT_BASIC,
} CredInjectApply;

typedef struct CredInject {
        char name[CRED_NAME_MAX + 1];
        char **hosts;                 /* patterns (cred_host_match), NULL-terminated; owned */
        CredInjectApply apply;
        char header_name[CRED_HEADER_NAME_MAX + 1];
        char header_format[CRED_HEADER_FORMAT_MAX + 1];
        char basic_user[CRED_BASIC_USER_MAX + 1];
        CredSecret *value;            /* owned */
        int64_t expires_usec;         /* 0 = never */
        int64_t revoked_usec;         /* 0 = not revoked */
} CredInject;

typedef struct CredInjectSet {
        CredInject *items;
        size_t n;
} CredInjectSet;

void cred_inject_done(CredInject *c);          /* frees hosts, wipes and frees the value */
void cred_inject_set_done(CredInjectSet *s);
/* hosts_json: the store's JSON array of patterns → c->hosts. */
int cred_inject_set_hosts(CredInject *c, const char *hosts_json);

/* Whether a credential of the set is active for host (then TLS to it is intercepted). */
bool cred_inject_wants(const CredInjectSet *set, const char *host, int64_t now_usec);

typedef struct CredInjectUsed {
        const char *names[CRED_INJECT_USED_MAX]; /* borrowed from the set */
        size_t n;
} CredInjectUsed;

/* Applies the set to h for host; -ENOMEM, or -E2BIG if a header would grow
 * past HTTP_HEAD_MAX or the head has HTTP_HEADERS_MAX headers already. */
int cred_inject_head(const CredInjectSet *set, const char *host, int64_t now_usec, HttpHead *h,
                     CredInjectUsed *ret_used);
/* Wipes every header value of h, then http_head_done(). */
void cred_inject_head_done(HttpHead *h);
