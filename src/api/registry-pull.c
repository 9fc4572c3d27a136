/* SPDX-License-Identifier: MIT */
/* A pull: GET /v2/ to learn how the registry wants to be asked (nothing,
 * a Bearer token from its token service, or Basic), the manifest by tag or
 * digest (an index or manifest list resolved to linux/<host arch>), then the
 * config and the layers. Everything lands in an OCI layout tar that the
 * import (src/storage/oci-import.c) reads as it reads an uploaded one, which
 * checks every digest again and applies the layers with its cache.
 *
 * Every document is bounded (OCI_JSON_MAX) and every blob is hashed as it
 * streams, its size held to its descriptor's: a registry that sends other
 * bytes than the digest names fails the pull, and the partial tar is
 * removed. A credential is sent only to hosts its host patterns match; never
 * over plain http to a host not listed insecure; never to where a blob
 * request redirects. */

#include <fcntl.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "alloc-util.h"
#include "base64.h"
#include "cred-rules.h"
#include "fd-util.h"
#include "json.h"
#include "log.h"
#include "oci-image.h"
#include "registry-http.h"
#include "str-util.h"

#define PULL_CHUNK (128U * 1024U)
#define PULL_TOKEN_DOC_MAX (64U * 1024U)
#define PULL_AUTH_HEADER_MAX (16U * 1024U)
#define TAR_BLOCK 512U
#define TAR_SIZE_MAX (UINT64_C(077777777777)) /* 11 octal digits of a ustar header */

#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define ACCEPT_MANIFESTS                                                                                      \
        "Accept: " MT_OCI_INDEX ", " MT_OCI_MANIFEST ", " MT_DOCKER_LIST ", " MT_DOCKER_MANIFEST "\r\n"

typedef struct Pull {
        const RegistryRef *ref;
        const RegistryCredential *cred;
        const RegistryOptions *o;
        RegistryHttp *h;
        char *base;  /* "https://host[:port]" */
        char *auth;  /* "Authorization: ...\r\n" or NULL (secret: wiped) */
        int fd;      /* the tar */
        uint64_t blob_bytes;
        char (*written)[72]; /* blobs already in the tar */
        size_t n_written;
} Pull;

static void pull_done(Pull *p) {
        if (p->auth) {
                OPENSSL_cleanse(p->auth, strlen(p->auth));
                free(p->auth);
        }
        free(p->base);
        free(p->written);
        registry_http_free(p->h);
        safe_close(p->fd);
}

static void sha256_text(const unsigned char md[static 32], char ret[static 72]) {
        memcpy(ret, "sha256:", 7);
        for (unsigned i = 0; i < 32; i++)
                snprintf(ret + 7 + 2 * i, 3, "%02x", md[i]);
}

static int sha256_of(const void *p, size_t n, char ret[static 72]) {
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned mdlen = 0;

        if (EVP_Digest(p, n, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
                return -EIO;
        sha256_text(md, ret);
        return 0;
}

/* --- the tar --- */

static void octal(char *field, size_t width, uint64_t v) {
        /* width - 1 digits and a NUL */
        field[width - 1] = '\0';
        for (size_t i = width - 1; i > 0; i--) {
                field[i - 1] = (char) ('0' + (v & 7));
                v >>= 3;
        }
}

static int tar_header(int fd, const char *name, uint64_t size) {
        uint8_t b[TAR_BLOCK] = {};
        unsigned sum = 0;

        if (strlen(name) >= 100 || size > TAR_SIZE_MAX)
                return -E2BIG;
        memcpy(b, name, strlen(name));
        octal((char *) b + 100, 8, 0644);
        octal((char *) b + 108, 8, 0);
        octal((char *) b + 116, 8, 0);
        octal((char *) b + 124, 12, size);
        octal((char *) b + 136, 12, 0);
        b[156] = '0';
        memcpy(b + 257, "ustar", 6);
        memcpy(b + 263, "00", 2);
        memset(b + 148, ' ', 8);
        for (size_t i = 0; i < TAR_BLOCK; i++)
                sum += b[i];
        octal((char *) b + 148, 7, sum);
        b[155] = ' ';
        return loop_write(fd, b, sizeof b);
}

static int tar_pad(int fd, uint64_t size) {
        static const uint8_t zero[TAR_BLOCK] = {};
        size_t pad = (size_t) ((TAR_BLOCK - size % TAR_BLOCK) % TAR_BLOCK);
        return pad ? loop_write(fd, zero, pad) : 0;
}

static int tar_file(int fd, const char *name, const void *data, size_t n) {
        int r = tar_header(fd, name, n);
        if (r >= 0)
                r = loop_write(fd, data, n);
        if (r >= 0)
                r = tar_pad(fd, n);
        return r;
}

static int tar_end(int fd) {
        static const uint8_t zero[2 * TAR_BLOCK] = {};
        return loop_write(fd, zero, sizeof zero);
}

static int write_failed(ApiError *e, int r) {
        return api_error(e, r, r == -ENOSPC || r == -EDQUOT ? API_INSUFFICIENT_STORAGE : API_INTERNAL,
                         "cannot write the pulled image: %s", strerror(-r));
}

/* --- auth --- */

/* The credential may go to host (a URL authority: its port is not part of a host pattern). */
static bool cred_allowed(const RegistryCredential *c, const char *authority) {
        _cleanup_json_ JsonValue *hosts = NULL;
        char host[REGISTRY_HOST_MAX + 1];
        const char *colon;
        char err[64];

        if (!c || !c->hosts_json || authority[0] == '[')
                return false; /* IPv6 literals: host patterns are names */
        (void) strscpy(host, sizeof host, authority);
        colon = strchr(host, ':');
        if (colon)
                host[colon - host] = '\0';
        if (json_parse(c->hosts_json, strlen(c->hosts_json), &hosts, err, sizeof err) < 0 ||
            json_type(hosts) != JSON_ARRAY)
                return false;
        for (size_t i = 0; i < json_array_size(hosts); i++) {
                const char *pat = json_string(json_array_at(hosts, i));
                if (pat && cred_host_match(pat, host, strlen(host)))
                        return true;
        }
        return false;
}

static int basic_header(const RegistryCredential *c, char **ret) {
        _cleanup_free_ char *plain = NULL, *b64 = NULL;
        size_t ul = strlen(c->user), pl = c->password_len, n = 0;
        int r;

        plain = malloc(ul + 1 + pl + 1);
        if (!plain)
                return -ENOMEM;
        memcpy(plain, c->user, ul);
        plain[ul] = ':';
        memcpy(plain + ul + 1, c->password, pl);
        plain[ul + 1 + pl] = '\0';
        r = base64_encode(plain, ul + 1 + pl, &b64, &n);
        OPENSSL_cleanse(plain, ul + 1 + pl);
        if (r < 0)
                return r;
        *ret = strjoin("Authorization: Basic ", b64, "\r\n");
        OPENSSL_cleanse(b64, n);
        return *ret ? 0 : -ENOMEM;
}

/* One auth-param of a WWW-Authenticate challenge: name=token or name="quoted". */
static int challenge_param(const char *ch, const char *name, char **ret) {
        size_t nl = strlen(name);
        const char *p = ch;

        *ret = NULL;
        while (*p) {
                while (*p == ' ' || *p == ',')
                        p++;
                const char *k = p;
                while (*p && *p != '=' && *p != ' ' && *p != ',')
                        p++;
                size_t kl = (size_t) (p - k);
                if (*p != '=')
                        continue;
                p++;
                _cleanup_free_ char *v = malloc(strlen(p) + 1);
                size_t vl = 0;
                if (!v)
                        return -ENOMEM;
                if (*p == '"') {
                        p++;
                        while (*p && *p != '"') {
                                if (*p == '\\' && p[1])
                                        p++;
                                v[vl++] = *p++;
                        }
                        if (*p != '"')
                                return -EBADMSG;
                        p++;
                } else
                        while (*p && *p != ',' && *p != ' ')
                                v[vl++] = *p++;
                v[vl] = '\0';
                if (kl == nl && strncasecmp(k, name, nl) == 0) {
                        *ret = TAKE_PTR(v);
                        return 0;
                }
        }
        return -ENOENT;
}

static char *query_escape(const char *s) {
        static const char hex[] = "0123456789ABCDEF";
        char *out = malloc(strlen(s) * 3 + 1), *o = out;

        if (!out)
                return NULL;
        for (; *s; s++) {
                unsigned char c = (unsigned char) *s;
                if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~:/", c))
                        *o++ = (char) c;
                else {
                        *o++ = '%';
                        *o++ = hex[c >> 4];
                        *o++ = hex[c & 15];
                }
        }
        *o = '\0';
        return out;
}

static bool header_safe(const char *s) {
        for (; *s; s++)
                if ((unsigned char) *s < 0x21 || (unsigned char) *s > 0x7e)
                        return false;
        return true;
}

static int refused(Pull *p, int status, ApiError *e) {
        if (p->cred)
                return api_error(e, -EACCES, API_FORBIDDEN, "the registry %s refused credential '%s' (HTTP %d)",
                                 p->ref->name, p->cred->name, status);
        return api_error(e, -EACCES, API_FORBIDDEN,
                         "the registry %s requires authentication (HTTP %d): pass --credential NAME, a basic "
                         "credential for its host", p->ref->name, status);
}

static int bearer_token(Pull *p, const char *challenge, ApiError *e) {
        _cleanup_free_ char *realm = NULL, *service = NULL, *url = NULL, *escope = NULL, *eservice = NULL,
                            *scope = NULL, *doc = NULL, *basic = NULL;
        _cleanup_(reg_conn_freep) RegConn *c = NULL;
        _cleanup_json_ JsonValue *j = NULL;
        const char *tok, *auth_host;
        char err[128];
        int r;

        r = challenge_param(challenge, "realm", &realm);
        if (r < 0 || isempty(realm))
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the registry %s asks for a token but names no realm",
                                 p->ref->name);
        (void) challenge_param(challenge, "service", &service);
        scope = strjoin("repository:", p->ref->repo, ":pull");
        escope = scope ? query_escape(scope) : NULL;
        eservice = service ? query_escape(service) : NULL;
        if (!escope || (service && !eservice))
                return -ENOMEM;
        url = strjoin(realm, strchr(realm, '?') ? "&" : "?", "scope=", escope, service ? "&service=" : "",
                      strempty(eservice));
        if (!url)
                return -ENOMEM;
        if (p->cred) {
                /* the token service gets the credential only where its host patterns allow */
                auth_host = strstr(realm, "://");
                _cleanup_free_ char *authority = auth_host ? strndup(auth_host + 3, strcspn(auth_host + 3, "/?#"))
                                                           : NULL;
                if (!authority)
                        return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the registry %s names a bad token realm",
                                         p->ref->name);
                if (strncasecmp(realm, "https://", 8) != 0)
                        return api_error(e, -EPERM, API_FORBIDDEN,
                                         "the registry %s sends credentials to a token service over plain http; "
                                         "refused", p->ref->name);
                if (!cred_allowed(p->cred, authority))
                        return api_error(e, -EACCES, API_FORBIDDEN,
                                         "the registry %s sends credentials to the token service %s, which no "
                                         "host pattern of credential '%s' names", p->ref->name, authority,
                                         p->cred->name);
                r = basic_header(p->cred, &basic);
                if (r < 0)
                        return r;
        }
        r = registry_get(p->h, url, basic, NULL, &c, e);
        if (basic)
                OPENSSL_cleanse(basic, strlen(basic));
        if (r < 0)
                return r;
        if (reg_conn_head(c)->status == 401 || reg_conn_head(c)->status == 403)
                return refused(p, reg_conn_head(c)->status, e);
        if (reg_conn_head(c)->status != 200)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the token service of %s answered HTTP %d",
                                 p->ref->name, reg_conn_head(c)->status);
        r = reg_conn_read_all(c, PULL_TOKEN_DOC_MAX, &doc, NULL);
        if (r < 0)
                return api_error(e, r, API_BAD_GATEWAY, "cannot read the token of %s: %s", p->ref->name,
                                 strerror(-r));
        r = json_parse(doc, strlen(doc), &j, err, sizeof err);
        OPENSSL_cleanse(doc, strlen(doc));
        if (r < 0)
                return api_error(e, r, API_BAD_GATEWAY, "the token service of %s sent no JSON", p->ref->name);
        tok = json_string(json_get(j, "token")) ?: json_string(json_get(j, "access_token"));
        if (isempty(tok) || strlen(tok) > PULL_AUTH_HEADER_MAX || !header_safe(tok))
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the token service of %s sent no usable token",
                                 p->ref->name);
        p->auth = strjoin("Authorization: Bearer ", tok, "\r\n");
        OPENSSL_cleanse((char *) tok, strlen(tok));
        return p->auth ? 0 : -ENOMEM;
}

/* GET /v2/: which auth the registry wants, and the header that gives it. */
static int authenticate(Pull *p, ApiError *e) {
        _cleanup_(reg_conn_freep) RegConn *c = NULL;
        _cleanup_free_ char *url = strjoin(p->base, "/v2/");
        const char *ch;
        int r, status;

        if (!url)
                return -ENOMEM;
        r = registry_get(p->h, url, NULL, NULL, &c, e);
        if (r < 0)
                return r;
        status = reg_conn_head(c)->status;
        if (status == 200)
                return 0; /* anonymous; a credential named anyway is not sent */
        if (status != 401)
                return api_error(e, -EPROTO, API_BAD_GATEWAY,
                                 "%s does not answer as a registry (GET /v2/: HTTP %d)", p->ref->name, status);
        ch = http_head_header(reg_conn_head(c), "WWW-Authenticate");
        if (!ch)
                return api_error(e, -EPROTO, API_BAD_GATEWAY, "the registry %s asks for auth but says not how",
                                 p->ref->name);
        if (strncasecmp(ch, "Bearer ", 7) == 0)
                return bearer_token(p, ch + 7, e);
        if (strncasecmp(ch, "Basic", 5) == 0 && (ch[5] == ' ' || ch[5] == '\0')) {
                if (!p->cred)
                        return refused(p, status, e);
                if (!cred_allowed(p->cred, p->ref->host))
                        return api_error(e, -EACCES, API_FORBIDDEN,
                                         "credential '%s' is not for %s: no host pattern of it names that host",
                                         p->cred->name, p->ref->name);
                return basic_header(p->cred, &p->auth);
        }
        return api_error(e, -EOPNOTSUPP, API_BAD_GATEWAY, "the registry %s asks for auth scheme '%.32s', not Bearer "
                         "or Basic", p->ref->name, ch);
}

/* --- documents and blobs --- */

static int status_error(Pull *p, int status, const char *what, ApiError *e) {
        if (status == 401 || status == 403)
                return refused(p, status, e);
        if (status == 404)
                return api_error(e, -ENOENT, API_NOT_FOUND, "the registry %s has no %s", p->ref->name, what);
        if (status == 429)
                return api_error(e, -EBUSY, API_UNAVAILABLE, "the registry %s limits our requests (HTTP 429); try "
                                 "again later", p->ref->name);
        return api_error(e, -EPROTO, API_BAD_GATEWAY, "the registry %s answered HTTP %d for %s", p->ref->name,
                         status, what);
}

static int authenticate(Pull *p, ApiError *e);

static int fetch(Pull *p, const char *kind, const char *reference, const char *accept, const char *what,
                 RegConn **ret, ApiError *e) {
        _cleanup_free_ char *url = strjoin(p->base, "/v2/", p->ref->repo, "/", kind, "/", reference);
        int r;

        if (!url)
                return -ENOMEM;
        r = registry_get(p->h, url, p->auth, accept, ret, e);
        if (r < 0)
                return r;
        if (reg_conn_head(*ret)->status == 401 && p->auth && startswith(p->auth, "Authorization: Bearer ")) {
                /* a token that ran out during a long pull: a new one, once */
                *ret = reg_conn_free(*ret);
                OPENSSL_cleanse(p->auth, strlen(p->auth));
                p->auth = mfree(p->auth);
                r = authenticate(p, e);
                if (r >= 0)
                        r = registry_get(p->h, url, p->auth, accept, ret, e);
                if (r < 0)
                        return r;
        }
        if (reg_conn_head(*ret)->status != 200) {
                r = status_error(p, reg_conn_head(*ret)->status, what, e);
                *ret = reg_conn_free(*ret);
                return r;
        }
        return 0;
}

/* A manifest or index: *ret its JSON, ret_type its media type, ret_digest its sha256 (checked against want). */
static int fetch_manifest(Pull *p, const char *reference, const char *want, char **ret, size_t *ret_len,
                          char ret_type[static 128], char ret_digest[static 72], ApiError *e) {
        _cleanup_(reg_conn_freep) RegConn *c = NULL;
        _cleanup_json_ JsonValue *j = NULL;
        _cleanup_free_ char *doc = NULL;
        char what[REGISTRY_REPO_MAX + 200], err[128], ctbuf[128];
        const char *ct, *mt, *dcd;
        size_t n = 0;
        int r;

        snprintf(what, sizeof what, "manifest %s%s%s", p->ref->repo, oci_digest_valid(reference) ? "@" : ":",
                 reference);
        r = fetch(p, "manifests", reference, ACCEPT_MANIFESTS, what, &c, e);
        if (r < 0)
                return r;
        r = reg_conn_read_all(c, OCI_JSON_MAX, &doc, &n);
        if (r == -E2BIG)
                return api_error(e, r, API_BAD_GATEWAY, "the %s from %s is larger than %u bytes; refused", what,
                                 p->ref->name, OCI_JSON_MAX);
        if (r < 0)
                return api_error(e, r, API_BAD_GATEWAY, "cannot read the %s from %s: %s", what, p->ref->name,
                                 strerror(-r));
        r = sha256_of(doc, n, ret_digest);
        if (r < 0)
                return r;
        if (want && !streq(want, ret_digest))
                return api_error(e, -EBADMSG, API_BAD_GATEWAY,
                                 "the %s from %s does not match its digest (it is %s); refused", what, p->ref->name,
                                 ret_digest);
        dcd = http_head_header(reg_conn_head(c), "Docker-Content-Digest");
        if (dcd && oci_digest_valid(dcd) && !streq(dcd, ret_digest))
                return api_error(e, -EBADMSG, API_BAD_GATEWAY,
                                 "the %s from %s is not what its Docker-Content-Digest %s says (it is %s); refused",
                                 what, p->ref->name, dcd, ret_digest);
        if (json_parse(doc, n, &j, err, sizeof err) < 0 || json_type(j) != JSON_OBJECT)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY, "the %s from %s is not a JSON object", what,
                                 p->ref->name);
        mt = json_string(json_get(j, "mediaType"));
        ct = http_head_header(reg_conn_head(c), "Content-Type");
        if (!mt && ct && strcspn(ct, "; ") < 128) {
                memcpy(ctbuf, ct, strcspn(ct, "; "));
                ctbuf[strcspn(ct, "; ")] = '\0';
                mt = ctbuf;
        }
        if (!mt)
                mt = json_get(j, "manifests") ? MT_OCI_INDEX : MT_OCI_MANIFEST;
        if (!streq(mt, MT_OCI_INDEX) && !streq(mt, MT_OCI_MANIFEST) && !streq(mt, MT_DOCKER_LIST) &&
            !streq(mt, MT_DOCKER_MANIFEST))
                return api_error(e, -EOPNOTSUPP, API_BAD_GATEWAY,
                                 "the %s from %s has media type '%.100s', which this server does not pull (OCI and "
                                 "Docker v2 schema 2 images)", what, p->ref->name, mt);
        (void) strscpy(ret_type, 128, mt);
        *ret = TAKE_PTR(doc);
        *ret_len = n;
        return 0;
}

static bool already_written(const Pull *p, const char *digest) {
        for (size_t i = 0; i < p->n_written; i++)
                if (streq(p->written[i], digest))
                        return true;
        return false;
}

static int mark_written(Pull *p, const char *digest) {
        char (*n)[72] = realloc(p->written, (p->n_written + 1) * sizeof *p->written);
        if (!n)
                return -ENOMEM;
        p->written = n;
        (void) strscpy(p->written[p->n_written++], 72, digest);
        return 0;
}

static int put_doc(Pull *p, const char *digest, const char *doc, size_t n, ApiError *e) {
        char path[96];
        int r;

        if (already_written(p, digest))
                return 0;
        snprintf(path, sizeof path, "blobs/sha256/%s", digest + 7);
        r = tar_file(p->fd, path, doc, n);
        if (r < 0)
                return write_failed(e, r);
        return mark_written(p, digest);
}

/* A blob into the tar, hashed and counted as it streams. */
static int put_blob(Pull *p, const OciDescriptor *d, const char *what, ApiError *e) {
        _cleanup_(reg_conn_freep) RegConn *c = NULL;
        _cleanup_free_ uint8_t *buf = NULL;
        EVP_MD_CTX *sha = NULL;
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned mdlen = 0;
        char path[96], got[72], w[256];
        uint64_t n = 0;
        int r;

        if (already_written(p, d->digest))
                return 0;
        snprintf(w, sizeof w, "%s (%s)", what, d->digest);
        if (d->size > TAR_SIZE_MAX || d->size > p->o->max_bytes - MIN(p->blob_bytes, p->o->max_bytes))
                return api_error(e, -EFBIG, API_PAYLOAD_TOO_LARGE,
                                 "the image is larger than the %" PRIu64 " MiB a template may take (upload_max_mb)",
                                 p->o->max_bytes / (1024 * 1024));
        r = fetch(p, "blobs", d->digest, NULL, w, &c, e);
        if (r < 0)
                return r;
        if (reg_conn_head(c)->content_length >= 0 && (uint64_t) reg_conn_head(c)->content_length != d->size)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY,
                                 "the registry %s sends %s as %" PRId64 " bytes, the manifest says %" PRIu64
                                 "; refused", p->ref->name, w, reg_conn_head(c)->content_length, d->size);
        snprintf(path, sizeof path, "blobs/sha256/%s", d->digest + 7);
        r = tar_header(p->fd, path, d->size);
        if (r < 0)
                return write_failed(e, r);
        buf = malloc(PULL_CHUNK);
        sha = EVP_MD_CTX_new();
        if (!buf || !sha || EVP_DigestInit_ex(sha, EVP_sha256(), NULL) != 1) {
                EVP_MD_CTX_free(sha);
                return -ENOMEM;
        }
        for (;;) {
                ssize_t k = reg_conn_read(c, buf, PULL_CHUNK);
                if (k < 0) {
                        EVP_MD_CTX_free(sha);
                        return api_error(e, (int) k, API_BAD_GATEWAY, "cannot read %s from %s: %s", w, p->ref->name,
                                         strerror((int) -k));
                }
                if (k == 0)
                        break;
                if ((uint64_t) k > d->size - n) {
                        EVP_MD_CTX_free(sha);
                        return api_error(e, -EBADMSG, API_BAD_GATEWAY,
                                         "the registry %s sends more of %s than its %" PRIu64 " bytes; refused",
                                         p->ref->name, w, d->size);
                }
                if (EVP_DigestUpdate(sha, buf, (size_t) k) != 1) {
                        EVP_MD_CTX_free(sha);
                        return -EIO;
                }
                r = loop_write(p->fd, buf, (size_t) k);
                if (r < 0) {
                        EVP_MD_CTX_free(sha);
                        return write_failed(e, r);
                }
                n += (uint64_t) k;
        }
        r = EVP_DigestFinal_ex(sha, md, &mdlen) == 1 && mdlen == 32 ? 0 : -EIO;
        EVP_MD_CTX_free(sha);
        if (r < 0)
                return r;
        if (n != d->size)
                return api_error(e, -EBADMSG, API_BAD_GATEWAY,
                                 "the registry %s sent %" PRIu64 " bytes of %s, the manifest says %" PRIu64
                                 "; refused", p->ref->name, n, w, d->size);
        sha256_text(md, got);
        if (!streq(got, d->digest))
                return api_error(e, -EBADMSG, API_BAD_GATEWAY,
                                 "%s from the registry %s does not match its digest (it is %s); refused", w,
                                 p->ref->name, got);
        r = tar_pad(p->fd, d->size);
        if (r < 0)
                return write_failed(e, r);
        p->blob_bytes += d->size;
        return mark_written(p, d->digest);
}

/* A layer the import takes from its cache: its member is a hole of the
 * declared size (the import checks the size, never reads it; were the cache
 * gone by then, it would read zeros and refuse the digest). */
static int put_cached(Pull *p, const OciDescriptor *d, ApiError *e) {
        char path[96];
        uint64_t padded = d->size + (TAR_BLOCK - d->size % TAR_BLOCK) % TAR_BLOCK;
        int r;

        if (already_written(p, d->digest))
                return 0;
        if (d->size > TAR_SIZE_MAX)
                return api_error(e, -EFBIG, API_PAYLOAD_TOO_LARGE, "a layer of the image is too large");
        snprintf(path, sizeof path, "blobs/sha256/%s", d->digest + 7);
        r = tar_header(p->fd, path, d->size);
        if (r < 0)
                return write_failed(e, r);
        if (lseek(p->fd, (off_t) padded, SEEK_CUR) < 0)
                return write_failed(e, negative_errno());
        return mark_written(p, d->digest);
}

static int pull_into(Pull *p, char ret_digest[static 72], ApiError *e) {
        static const char layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
        _cleanup_free_ char *doc = NULL, *index = NULL;
        _cleanup_free_ OciManifest *man = NULL;
        _cleanup_free_ char (*keys)[65] = NULL;
        _cleanup_free_ bool *cached = NULL;
        size_t n_cached = 0;
        const char *arch = oci_host_arch();
        char type[128], digest[72];
        const char *want = p->ref->digest[0] ? p->ref->digest : NULL;
        const char *reference = registry_ref_reference(p->ref);
        uint64_t size = 0;
        size_t n = 0;
        int r;

        r = authenticate(p, e);
        if (r < 0)
                return r;
        r = fetch_manifest(p, reference, want, &doc, &n, type, digest, e);
        for (unsigned depth = 0; r >= 0 && (streq(type, MT_OCI_INDEX) || streq(type, MT_DOCKER_LIST)); depth++) {
                OciDescriptor d;

                if (depth >= OCI_INDEX_DEPTH_MAX)
                        return api_error(e, -ELOOP, API_BAD_GATEWAY, "the image's indexes nest too deep");
                r = oci_index_pick(doc, n, NULL, arch, &d, e);
                if (r < 0)
                        return r;
                free(doc);
                doc = NULL;
                r = fetch_manifest(p, d.digest, d.digest, &doc, &n, type, digest, e);
                if (r >= 0 && n != d.size)
                        return api_error(e, -EBADMSG, API_BAD_GATEWAY,
                                         "the manifest %s from %s is %zu bytes, its index says %" PRIu64 "; refused",
                                         d.digest, p->ref->name, n, d.size);
        }
        if (r < 0)
                return r;
        size = n;
        man = new0(OciManifest, 1);
        if (!man)
                return -ENOMEM;
        r = oci_manifest_parse(doc, n, man, e);
        if (r < 0)
                return r;
        if (man->config.size > OCI_JSON_MAX)
                return api_error(e, -E2BIG, API_BAD_GATEWAY, "the image's config is larger than %u bytes; refused",
                                 OCI_JSON_MAX);

        r = tar_file(p->fd, "oci-layout", layout, strlen(layout));
        if (r < 0)
                return write_failed(e, r);
        r = asprintf(&index, "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"%s\",\"digest\":\"%s\","
                     "\"size\":%" PRIu64 "}]}", type, digest, size);
        if (r < 0) {
                index = NULL;
                return -ENOMEM;
        }
        r = tar_file(p->fd, "index.json", index, strlen(index));
        if (r < 0)
                return write_failed(e, r);
        r = put_doc(p, digest, doc, n, e);
        if (r < 0)
                return r;
        keys = calloc(man->n_layers + 1, sizeof *keys);
        cached = new0(bool, man->n_layers + 1);
        if (!keys || !cached)
                return -ENOMEM;
        for (size_t i = 0; i < man->n_layers; i++)
                oci_layer_key(i ? keys[i - 1] : NULL, man->layers[i].digest, keys[i]);
        if (p->o->layers_cached && p->o->layers_cached(p->o->userdata, keys, man->n_layers, cached) < 0)
                memset(cached, 0, sizeof(bool) * man->n_layers); /* then everything is fetched */
        r = put_blob(p, &man->config, "the config", e);
        for (size_t i = 0; r >= 0 && i < man->n_layers; i++) {
                char what[32];
                snprintf(what, sizeof what, "layer %zu", i + 1);
                if (cached[i]) {
                        n_cached++;
                        r = put_cached(p, &man->layers[i], e);
                } else
                        r = put_blob(p, &man->layers[i], what, e);
        }
        if (r < 0)
                return r;
        r = tar_end(p->fd);
        if (r < 0)
                return write_failed(e, r);
        memcpy(ret_digest, digest, 72);
        log_info("Pulled %s/%s@%s: %zu layers (%zu in the layer cache, not fetched), %" PRIu64 " bytes",
                 p->ref->name, p->ref->repo, digest, man->n_layers, n_cached, p->blob_bytes);
        return 0;
}

int registry_pull(const RegistryRef *ref, const RegistryCredential *cred, const RegistryOptions *o,
                  const char *tmpdir, char **ret_path, char ret_digest[static 72], ApiError *e) {
        _cleanup_(pull_done) Pull p = { .ref = ref, .cred = cred, .o = o, .fd = -EBADF };
        _cleanup_free_ char *path = NULL;
        bool insecure = registry_host_listed(o->insecure, ref->host);
        int r;

        if (insecure && cred)
                return api_error(e, -EPERM, API_INVALID_ARGUMENT,
                                 "the registry %s is listed in registry_insecure (plain http): a credential is never "
                                 "sent to it", ref->name);

        r = mkdir_p(tmpdir, 0700);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "cannot create %s: %s", tmpdir, strerror(-r));
        path = strjoin(tmpdir, "/pull-XXXXXX");
        p.base = strjoin(insecure ? "http://" : "https://", ref->host);
        if (!path || !p.base)
                return -ENOMEM;
        r = registry_http_new(o, &p.h, e);
        if (r < 0)
                return r;
        p.fd = mkostemp(path, O_CLOEXEC);
        if (p.fd < 0)
                return api_error(e, negative_errno(), API_INTERNAL, "cannot create a temporary file in %s: %m",
                                 tmpdir);
        r = pull_into(&p, ret_digest, e);
        if (r >= 0 && fsync(p.fd) < 0)
                r = write_failed(e, negative_errno());
        if (r < 0) {
                (void) unlink(path);
                if (e && e->code == API_OK)
                        (void) api_error(e, r, API_INTERNAL, "the pull failed: %s", strerror(-r));
                return r;
        }
        *ret_path = TAKE_PTR(path);
        return 0;
}
