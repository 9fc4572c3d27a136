/* SPDX-License-Identifier: MIT */
/* Credentials onto request heads. See cred-inject.h. */

#include <openssl/crypto.h>
#include <strings.h>

#include "alloc-util.h"
#include "base64.h"
#include "cred-inject.h"
#include "json.h"
#include "str-util.h"

#define BASIC_PREFIX "Basic "
#define PLACEHOLDER_LEN(name) (STRLEN(CRED_PLACEHOLDER_PREFIX) + strlen(name))

void cred_inject_done(CredInject *c) {
        if (!c)
                return;
        c->hosts = strv_free(c->hosts);
        c->value = cred_secret_free(c->value);
}

void cred_inject_set_done(CredInjectSet *s) {
        if (!s)
                return;
        for (size_t i = 0; i < s->n; i++)
                cred_inject_done(&s->items[i]);
        free(s->items);
        *s = (CredInjectSet) {};
}

int cred_inject_set_hosts(CredInject *c, const char *hosts_json) {
        _cleanup_json_ JsonValue *v = NULL;
        _cleanup_strv_free_ char **l = NULL;

        if (!c || !hosts_json)
                return -EINVAL;
        if (json_parse(hosts_json, strlen(hosts_json), &v, NULL, 0) < 0 || json_type(v) != JSON_ARRAY)
                return -EBADMSG;
        for (size_t i = 0; i < json_array_size(v); i++) {
                const char *h = json_string(json_array_at(v, i));
                if (!h)
                        return -EBADMSG;
                if (strv_extend(&l, h) < 0)
                        return -ENOMEM;
        }
        strv_free(c->hosts);
        c->hosts = TAKE_PTR(l);
        return 0;
}

static bool cred_active(const CredInject *c, int64_t now) {
        return c->value && c->value->len > 0 && c->revoked_usec == 0 && (c->expires_usec == 0 || c->expires_usec > now);
}

static bool cred_for_host(const CredInject *c, const char *host) {
        size_t n = strlen(host);

        for (char **p = c->hosts; p && *p; p++)
                if (cred_host_match(*p, host, n))
                        return true;
        return false;
}

bool cred_inject_wants(const CredInjectSet *set, const char *host, int64_t now) {
        if (!set || !host)
                return false;
        for (size_t i = 0; i < set->n; i++)
                if (cred_active(&set->items[i], now) && cred_for_host(&set->items[i], host))
                        return true;
        return false;
}

/* A growing buffer for header values that hold secrets: wiped when it grows or is dropped. */
typedef struct Buf {
        char *p;
        size_t n, size;
} Buf;

static void buf_done(Buf *b) {
        if (b->p) {
                OPENSSL_cleanse(b->p, b->size);
                free(b->p);
        }
        *b = (Buf) {};
}

static int buf_add(Buf *b, const void *p, size_t n) {
        if (b->n + n + 1 > HTTP_HEAD_MAX)
                return -E2BIG;
        if (b->n + n + 1 > b->size) {
                size_t size = MAX(b->size * 2, b->n + n + 1);
                char *q = malloc(size);
                if (!q)
                        return -ENOMEM;
                if (b->p)
                        memcpy(q, b->p, b->n);
                buf_done(&(Buf) { .p = b->p, .size = b->size });
                b->p = q;
                b->size = size;
        }
        memcpy(b->p + b->n, p, n);
        b->n += n;
        b->p[b->n] = 0;
        return 0;
}

static bool is_name_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
               c == '.' || c == '-';
}

/* The credential whose placeholder starts at s[i] as a whole token, or -1. */
static ssize_t placeholder_at(const CredInjectSet *set, const char *s, size_t n, size_t i) {
        const size_t pl = STRLEN(CRED_PLACEHOLDER_PREFIX);
        size_t end;

        if (n - i < pl || memcmp(s + i, CRED_PLACEHOLDER_PREFIX, pl) != 0 || (i > 0 && is_name_char(s[i - 1])))
                return -1;
        end = i + pl;
        while (end < n && is_name_char(s[end]))
                end++;
        for (size_t k = 0; k < set->n; k++) {
                const char *name = set->items[k].name;
                if (strlen(name) == end - i - pl && memcmp(s + i + pl, name, end - i - pl) == 0)
                        return (ssize_t) k;
        }
        return -1;
}

/* The header value a credential sets: format with {value}, or "Basic base64(user:value)". */
static int render(const CredInject *c, Buf *ret) {
        Buf b = {};
        int r;

        if (c->apply == CRED_INJECT_BASIC) {
                Buf plain = {};
                _cleanup_free_ char *enc = NULL;
                size_t enc_n;

                r = buf_add(&plain, c->basic_user, strlen(c->basic_user));
                if (r >= 0)
                        r = buf_add(&plain, ":", 1);
                if (r >= 0)
                        r = buf_add(&plain, c->value->data, c->value->len);
                if (r >= 0)
                        r = base64_encode(plain.p, plain.n, &enc, &enc_n);
                buf_done(&plain);
                if (r >= 0)
                        r = buf_add(&b, BASIC_PREFIX, STRLEN(BASIC_PREFIX));
                if (r >= 0)
                        r = buf_add(&b, enc, enc_n);
                if (enc)
                        OPENSSL_cleanse(enc, enc_n);
        } else {
                const char *f = c->header_format, *v = strstr(f, CRED_FORMAT_VALUE);

                if (!v)
                        return -EINVAL;
                r = buf_add(&b, f, (size_t) (v - f));
                if (r >= 0)
                        r = buf_add(&b, c->value->data, c->value->len);
                if (r >= 0)
                        r = buf_add(&b, v + STRLEN(CRED_FORMAT_VALUE), strlen(v + STRLEN(CRED_FORMAT_VALUE)));
        }
        if (r < 0) {
                buf_done(&b);
                return r;
        }
        *ret = b;
        return 0;
}

/* Replaces the placeholders of usable credentials in (s, n) by their values
 * into out; *ret_whole = a basic credential was found (its rendered value
 * replaces the whole header). Returns how many were replaced. */
static int replace_tokens(const CredInjectSet *set, const char *host, int64_t now, const char *s, size_t n,
                          bool *used, Buf *out, ssize_t *ret_whole) {
        int count = 0, r;
        size_t i = 0, from = 0;

        *ret_whole = -1;
        while (i < n) {
                ssize_t k = placeholder_at(set, s, n, i);
                const CredInject *c;

                if (k < 0 || !cred_active(&set->items[k], now) || !cred_for_host(&set->items[k], host)) {
                        i++;
                        continue;
                }
                c = &set->items[k];
                used[k] = true;
                count++;
                if (c->apply == CRED_INJECT_BASIC) {
                        *ret_whole = k;
                        return count;
                }
                r = buf_add(out, s + from, i - from);
                if (r >= 0)
                        r = buf_add(out, c->value->data, c->value->len);
                if (r < 0)
                        return r;
                i += PLACEHOLDER_LEN(c->name);
                from = i;
        }
        if (count > 0) {
                r = buf_add(out, s + from, n - from);
                if (r < 0)
                        return r;
        }
        return count;
}

static int set_value(HttpHeader *hdr, Buf *b) {
        char *v = strndup(b->p ?: "", b->n);

        if (!v)
                return -ENOMEM;
        OPENSSL_cleanse(hdr->value, strlen(hdr->value));
        free(hdr->value);
        hdr->value = v;
        return 0;
}

/* One header: placeholders in its value, or in the user:password of a Basic authorization. */
static int inject_header(const CredInjectSet *set, const char *host, int64_t now, HttpHeader *hdr, bool *used) {
        const char *v = hdr->value;
        Buf out = {};
        ssize_t whole = -1;
        int r;

        if (strcasecmp(hdr->name, "authorization") == 0 && strncasecmp(v, BASIC_PREFIX, STRLEN(BASIC_PREFIX)) == 0) {
                _cleanup_free_ char *dec = NULL;
                _cleanup_free_ char *enc = NULL;
                size_t dec_n = 0, enc_n;
                Buf plain = {};

                if (base64_decode(v + STRLEN(BASIC_PREFIX), strlen(v + STRLEN(BASIC_PREFIX)), (void **) &dec,
                                  &dec_n) >= 0) {
                        r = replace_tokens(set, host, now, dec, dec_n, used, &plain, &whole);
                        if (r > 0 && whole < 0) {
                                r = base64_encode(plain.p, plain.n, &enc, &enc_n);
                                if (r >= 0)
                                        r = buf_add(&out, BASIC_PREFIX, STRLEN(BASIC_PREFIX));
                                if (r >= 0)
                                        r = buf_add(&out, enc, enc_n);
                                if (enc)
                                        OPENSSL_cleanse(enc, enc_n);
                                if (r >= 0)
                                        r = 1;
                        }
                        buf_done(&plain);
                        if (r < 0) {
                                buf_done(&out);
                                return r;
                        }
                        if (r > 0 && whole < 0) {
                                r = set_value(hdr, &out);
                                buf_done(&out);
                                return r;
                        }
                }
        }
        if (whole < 0) {
                r = replace_tokens(set, host, now, v, strlen(v), used, &out, &whole);
                if (r < 0) {
                        buf_done(&out);
                        return r;
                }
                if (r > 0 && whole < 0) {
                        r = set_value(hdr, &out);
                        buf_done(&out);
                        return r;
                }
                buf_done(&out);
        }
        if (whole >= 0) {
                r = render(&set->items[whole], &out);
                if (r >= 0)
                        r = set_value(hdr, &out);
                buf_done(&out);
                return r;
        }
        return 0;
}

/* Sets header name to the credential's rendered value: the first header of that name is replaced, later ones removed. */
static int set_header(HttpHead *h, const CredInject *c) {
        const char *name = c->apply == CRED_INJECT_BASIC ? "Authorization" : c->header_name;
        Buf val = {};
        bool done = false;
        int r;

        r = render(c, &val);
        if (r < 0)
                return r;
        for (size_t i = 0; i < h->n_headers;) {
                HttpHeader *hdr = &h->headers[i];

                if (strcasecmp(hdr->name, name) != 0) {
                        i++;
                        continue;
                }
                if (!done) {
                        r = set_value(hdr, &val);
                        if (r < 0)
                                goto out;
                        done = true;
                        i++;
                        continue;
                }
                OPENSSL_cleanse(hdr->value, strlen(hdr->value));
                free(hdr->name);
                free(hdr->value);
                memmove(hdr, hdr + 1, (h->n_headers - i - 1) * sizeof *hdr);
                h->n_headers--;
        }
        if (!done) {
                HttpHeader *a, nh = {};

                if (h->n_headers >= HTTP_HEADERS_MAX) {
                        r = -E2BIG;
                        goto out;
                }
                a = realloc(h->headers, (h->n_headers + 1) * sizeof *a);
                if (!a) {
                        r = -ENOMEM;
                        goto out;
                }
                h->headers = a;
                nh.name = strdup(name);
                nh.value = strndup(val.p, val.n);
                if (!nh.name || !nh.value) {
                        free(nh.name);
                        free(nh.value);
                        r = -ENOMEM;
                        goto out;
                }
                h->headers[h->n_headers++] = nh;
        }
        r = 0;
out:
        buf_done(&val);
        return r;
}

int cred_inject_head(const CredInjectSet *set, const char *host, int64_t now, HttpHead *h,
                     CredInjectUsed *ret_used) {
        bool used[CRED_INJECT_USED_MAX] = {};
        CredInjectUsed u = {};
        int r;

        if (!set || !host || !h || !ret_used || set->n > CRED_INJECT_USED_MAX)
                return -EINVAL;
        for (size_t i = 0; i < h->n_headers; i++) {
                r = inject_header(set, host, now, &h->headers[i], used);
                if (r < 0)
                        return r;
        }
        for (size_t k = 0; k < set->n; k++) {
                const CredInject *c = &set->items[k];

                if (!cred_active(c, now) || !cred_for_host(c, host))
                        continue;
                if (!used[k]) {
                        r = set_header(h, c);
                        if (r < 0)
                                return r;
                        used[k] = true;
                }
                u.names[u.n++] = c->name;
        }
        *ret_used = u;
        return 0;
}

void cred_inject_head_done(HttpHead *h) {
        if (!h)
                return;
        for (size_t i = 0; i < h->n_headers; i++)
                if (h->headers[i].value)
                        OPENSSL_cleanse(h->headers[i].value, strlen(h->headers[i].value));
        http_head_done(h);
}
