/* SPDX-License-Identifier: MIT */
/* Lifecycle webhooks: URL, SSRF guard, signatures, event patterns (see
 * webhook.h). */

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "str-util.h"
#include "webhook.h"

static bool host_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

int webhook_url_parse(const char *s, WebhookUrl *ret, const char **ret_why) {
        WebhookUrl u = {};
        const char *p, *host, *end;
        size_t n, hn;
        const char *why = NULL;

#define FAIL(w) do { why = (w); goto fail; } while (0)
        if (!s || !ret)
                return -EINVAL;
        n = strlen(s);
        if (n == 0)
                FAIL("url must not be empty");
        if (n > WEBHOOK_URL_MAX)
                FAIL("url is longer than 2047 bytes");
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) s[i] <= 0x20 || (unsigned char) s[i] >= 0x7f)
                        FAIL("url must be printable ASCII without spaces");
        if (strncasecmp(s, "https://", 8) == 0) {
                u.https = true;
                p = s + 8;
                u.port = 443;
        } else if (strncasecmp(s, "http://", 7) == 0) {
                p = s + 7;
                u.port = 80;
        } else
                FAIL("url must be http:// or https://");
        end = p + strcspn(p, "/?#");
        if (memchr(p, '@', (size_t) (end - p)))
                FAIL("url must not carry a user name or password");
        if (strchr(s, '#'))
                FAIL("url must not have a fragment");
        host = p;
        if (*p == '[') {
                const char *close = memchr(p, ']', (size_t) (end - p));
                struct in6_addr a6;

                if (!close)
                        FAIL("url has a bad IPv6 address");
                hn = (size_t) (close - p - 1);
                if (hn == 0 || hn >= sizeof u.host)
                        FAIL("url has a bad IPv6 address");
                memcpy(u.host, p + 1, hn);
                if (inet_pton(AF_INET6, u.host, &a6) != 1)
                        FAIL("url has a bad IPv6 address");
                p = close + 1;
        } else {
                while (p < end && *p != ':')
                        p++;
                hn = (size_t) (p - host);
                if (hn == 0)
                        FAIL("url must name a host");
                if (hn > WEBHOOK_HOST_MAX)
                        FAIL("url host is too long");
                for (size_t i = 0; i < hn; i++)
                        if (!host_char(host[i]))
                                FAIL("url host must be a DNS name or an IP address");
                memcpy(u.host, host, hn);
                for (char *c = u.host; *c; c++)
                        if (*c >= 'A' && *c <= 'Z')
                                *c = (char) (*c - 'A' + 'a');
        }
        if (p < end) {
                char *e = NULL;
                unsigned long port;

                if (*p != ':' || p + 1 == end)
                        FAIL("url has a bad port");
                for (const char *d = p + 1; d < end; d++)
                        if (*d < '0' || *d > '9')
                                FAIL("url has a bad port");
                port = strtoul(p + 1, &e, 10);
                if (e != end || port == 0 || port > 65535)
                        FAIL("url port must be 1 to 65535");
                u.port = (uint16_t) port;
        }
        if (*end == 0)
                (void) strscpy(u.target, sizeof u.target, "/");
        else if (*end == '?')
                (void) snprintf(u.target, sizeof u.target, "/%s", end);
        else
                (void) strscpy(u.target, sizeof u.target, end);
        *ret = u;
        if (ret_why)
                *ret_why = NULL;
        return 0;
fail:
        if (ret_why)
                *ret_why = why;
        return -EINVAL;
#undef FAIL
}

int webhook_guard_init(WebhookGuard *g, bool allow_private, const char *net_pool) {
        char buf[64];
        char *slash;
        unsigned long len;

        if (!g)
                return -EINVAL;
        *g = (WebhookGuard) { .allow_private = allow_private, .pool_family = AF_UNSPEC };
        if (isempty(net_pool))
                return 0;
        if (strscpy(buf, sizeof buf, net_pool) < 0)
                return -EINVAL;
        slash = strchr(buf, '/');
        if (!slash)
                return -EINVAL;
        *slash = 0;
        len = strtoul(slash + 1, NULL, 10);
        if (inet_pton(AF_INET, buf, g->pool_addr) == 1) {
                if (len > 32)
                        return -EINVAL;
                g->pool_family = AF_INET;
        } else if (inet_pton(AF_INET6, buf, g->pool_addr) == 1) {
                if (len > 128)
                        return -EINVAL;
                g->pool_family = AF_INET6;
        } else
                return -EINVAL;
        g->pool_prefixlen = (unsigned) len;
        return 0;
}

static bool prefix_match(const uint8_t *a, const uint8_t *net, unsigned bits) {
        unsigned full = bits / 8, rest = bits % 8;

        if (memcmp(a, net, full) != 0)
                return false;
        if (rest == 0)
                return true;
        return ((a[full] ^ net[full]) & (uint8_t) (0xff << (8 - rest))) == 0;
}

static bool host_has_addr(int family, const void *addr) {
        struct ifaddrs *ifa = NULL;
        bool found = false;

        if (getifaddrs(&ifa) < 0)
                return true; /* unknown: fail closed */
        for (struct ifaddrs *i = ifa; i && !found; i = i->ifa_next) {
                if (!i->ifa_addr || i->ifa_addr->sa_family != family)
                        continue;
                if (family == AF_INET)
                        found = memcmp(&((struct sockaddr_in *) i->ifa_addr)->sin_addr, addr, 4) == 0;
                else
                        found = memcmp(&((struct sockaddr_in6 *) i->ifa_addr)->sin6_addr, addr, 16) == 0;
        }
        freeifaddrs(ifa);
        return found;
}

static const char *v4_forbidden(const WebhookGuard *g, const uint8_t a[4]) {
        static const struct { uint8_t net[4]; unsigned bits; const char *why; } nets[] = {
                { { 169, 254, 169, 254 }, 32, "metadata" },
                { { 0, 0, 0, 0 }, 8, "unspecified" },
                { { 127, 0, 0, 0 }, 8, "loopback" },
                { { 169, 254, 0, 0 }, 16, "link-local" },
                { { 10, 0, 0, 0 }, 8, "private" },
                { { 172, 16, 0, 0 }, 12, "private" },
                { { 192, 168, 0, 0 }, 16, "private" },
                { { 100, 64, 0, 0 }, 10, "shared (carrier-grade NAT)" },
                { { 192, 0, 0, 0 }, 24, "reserved" },
                { { 198, 18, 0, 0 }, 15, "reserved" },
                { { 224, 0, 0, 0 }, 4, "multicast" },
                { { 240, 0, 0, 0 }, 4, "reserved" },
        };

        for (size_t i = 0; i < ELEMENTSOF(nets); i++)
                if (prefix_match(a, nets[i].net, nets[i].bits))
                        return nets[i].why;
        if (g->pool_family == AF_INET && prefix_match(a, g->pool_addr, g->pool_prefixlen))
                return "the sandboxes' network";
        if (host_has_addr(AF_INET, a))
                return "the host's own address";
        return NULL;
}

const char *webhook_addr_forbidden(const WebhookGuard *g, const struct sockaddr *sa) {
        static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
        static const uint8_t nat64[12] = { 0, 0x64, 0xff, 0x9b };
        const uint8_t *a;
        const char *why;

        if (!g || !sa)
                return "no address";
        if (sa->sa_family == AF_INET) {
                a = (const uint8_t *) &((const struct sockaddr_in *) sa)->sin_addr;
                why = v4_forbidden(g, a);
                /* allowed private: the operator's choice; a multicast or 0.0.0.0 is never a receiver */
                if (why && g->allow_private && !streq(why, "multicast") && !streq(why, "reserved"))
                        return NULL;
                return why;
        }
        if (sa->sa_family != AF_INET6)
                return "not an IP address";
        a = (const uint8_t *) &((const struct sockaddr_in6 *) sa)->sin6_addr;
        static const uint8_t compat[12] = {};

        /* an IPv4 address inside IPv6 (mapped, NAT64, the old compatible form ::a.b.c.d) is judged as IPv4 */
        if (memcmp(a, mapped, 12) == 0 || memcmp(a, nat64, 12) == 0 ||
            (memcmp(a, compat, 12) == 0 && (a[12] | a[13] | a[14]) != 0)) {
                why = v4_forbidden(g, a + 12);
                if (why && g->allow_private && !streq(why, "multicast") && !streq(why, "reserved"))
                        return NULL;
                return why;
        }
        if (a[0] == 0xff)
                return "multicast";
        if (g->allow_private)
                return NULL;
        {
                static const uint8_t zero[16] = {};
                static const uint8_t one[16] = { [15] = 1 };

                if (memcmp(a, zero, 16) == 0)
                        return "unspecified";
                if (memcmp(a, one, 16) == 0)
                        return "loopback";
        }
        if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
                return "link-local";
        if ((a[0] & 0xfe) == 0xfc)
                return "private";
        if (g->pool_family == AF_INET6 && prefix_match(a, g->pool_addr, g->pool_prefixlen))
                return "the sandboxes' network";
        if (host_has_addr(AF_INET6, a))
                return "the host's own address";
        return NULL;
}

int webhook_resolve(const WebhookGuard *g, const WebhookUrl *u, struct sockaddr_storage *ret, socklen_t *ret_len,
                    char *why, size_t why_size) {
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
        char port[8];
        int r;

        if (!g || !u || !ret || !ret_len)
                return -EINVAL;
        (void) snprintf(port, sizeof port, "%u", u->port);
        r = getaddrinfo(u->host, port, &hints, &res);
        if (r != 0 || !res) {
                if (why)
                        (void) snprintf(why, why_size, "host '%s' does not resolve", u->host);
                return -EHOSTUNREACH;
        }
        for (struct addrinfo *i = res; i; i = i->ai_next) {
                const char *bad = webhook_addr_forbidden(g, i->ai_addr);

                if (bad) {
                        char addr[INET6_ADDRSTRLEN] = "?";

                        if (i->ai_family == AF_INET)
                                (void) inet_ntop(AF_INET, &((struct sockaddr_in *) i->ai_addr)->sin_addr, addr,
                                                 sizeof addr);
                        else if (i->ai_family == AF_INET6)
                                (void) inet_ntop(AF_INET6, &((struct sockaddr_in6 *) i->ai_addr)->sin6_addr, addr,
                                                 sizeof addr);
                        if (why)
                                (void) snprintf(why, why_size, "host '%s' is %s (%s): refused", u->host, addr, bad);
                        freeaddrinfo(res);
                        return -EPERM;
                }
        }
        if (res->ai_addrlen > sizeof *ret) {
                freeaddrinfo(res);
                return -EINVAL;
        }
        memcpy(ret, res->ai_addr, res->ai_addrlen);
        *ret_len = res->ai_addrlen;
        freeaddrinfo(res);
        return 0;
}

static void hex(const uint8_t *p, size_t n, char *out) {
        static const char digits[] = "0123456789abcdef";

        for (size_t i = 0; i < n; i++) {
                out[2 * i] = digits[p[i] >> 4];
                out[2 * i + 1] = digits[p[i] & 15];
        }
        out[2 * n] = 0;
}

int webhook_sign(const char *secret, const char *timestamp, const void *body, size_t n,
                 char ret[static WEBHOOK_SIG_HEX]) {
        uint8_t mac[EVP_MAX_MD_SIZE];
        unsigned len = 0;
        size_t tn;
        uint8_t *buf;
        bool ok;

        if (!secret || !timestamp || (!body && n > 0))
                return -EINVAL;
        tn = strlen(timestamp);
        buf = malloc(tn + 1 + n + 1);
        if (!buf)
                return -ENOMEM;
        memcpy(buf, timestamp, tn);
        buf[tn] = '.';
        if (n > 0)
                memcpy(buf + tn + 1, body, n);
        ok = HMAC(EVP_sha256(), secret, (int) strlen(secret), buf, tn + 1 + n, mac, &len) && len == 32;
        free(buf);
        if (!ok)
                return -EIO;
        hex(mac, 32, ret);
        return 0;
}

int webhook_sign_e2b(const char *secret, const void *body, size_t n, char ret[static WEBHOOK_SIG_B64]) {
        static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        uint8_t md[32];
        unsigned len = 0;
        EVP_MD_CTX *ctx;
        size_t o = 0;
        int ok;

        if (!secret || (!body && n > 0))
                return -EINVAL;
        ctx = EVP_MD_CTX_new();
        if (!ctx)
                return -ENOMEM;
        ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 && EVP_DigestUpdate(ctx, secret, strlen(secret)) == 1 &&
             (n == 0 || EVP_DigestUpdate(ctx, body, n) == 1) && EVP_DigestFinal_ex(ctx, md, &len) == 1 && len == 32;
        EVP_MD_CTX_free(ctx);
        if (!ok)
                return -EIO;
        for (size_t i = 0; i < 32; i += 3) {
                uint32_t v = (uint32_t) md[i] << 16 | (i + 1 < 32 ? (uint32_t) md[i + 1] << 8 : 0) |
                             (i + 2 < 32 ? md[i + 2] : 0);
                size_t chars = i + 2 < 32 ? 4 : i + 1 < 32 ? 3 : 2;

                for (size_t k = 0; k < chars; k++)
                        ret[o++] = b64[(v >> (18 - 6 * k)) & 63];
        }
        ret[o] = 0;
        return 0;
}

int webhook_secret_generate(char ret[static WEBHOOK_SECRET_GEN_LEN + 1]) {
        static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
        uint8_t raw[40];

        if (RAND_bytes(raw, sizeof raw) != 1)
                return -EIO;
        memcpy(ret, "whsec_", 6);
        for (size_t i = 0; i < sizeof raw; i++)
                ret[6 + i] = alphabet[raw[i] % 36]; /* 256 % 36 = 4: a negligible bias */
        ret[WEBHOOK_SECRET_GEN_LEN] = 0;
        explicit_bzero(raw, sizeof raw);
        return 0;
}

/* Our sandbox event types a webhook may name, with their E2B names. */
static const struct { const char *type, *e2b; } event_types[] = {
        { "sandbox.created", "sandbox.lifecycle.created" },
        { "sandbox.deleted", "sandbox.lifecycle.killed" },
        { "sandbox.paused", "sandbox.lifecycle.paused" },
        { "sandbox.suspended", "sandbox.lifecycle.paused" },
        { "sandbox.resumed", "sandbox.lifecycle.resumed" },
        { "sandbox.updated", "sandbox.lifecycle.updated" },
        { "sandbox.network_policy", "sandbox.lifecycle.updated" },
        { "sandbox.checkpointed", "sandbox.lifecycle.checkpointed" },
        { "sandbox.create_failed", NULL },
        { "sandbox.expired", NULL },
        { "sandbox.timeout_warning", NULL },
        { "sandbox.restored", NULL },
        { "sandbox.branched", NULL },
        { "sandbox.error", NULL },
        { "sandbox.oom", NULL },
        { "sandbox.unreachable", NULL },
        { "sandbox.found", NULL },
        { "sandbox.recovered", NULL },
        { "sandbox.checkpoint_deleted", NULL },
        { "sandbox.port_opened", NULL },
};

const char *webhook_e2b_type(const char *type) {
        if (!type)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(event_types); i++)
                if (streq(event_types[i].type, type))
                        return event_types[i].e2b;
        return NULL;
}

bool webhook_pattern_valid(const char *p) {
        if (!p || strlen(p) > WEBHOOK_PATTERN_MAX)
                return false;
        if (streq(p, "*") || streq(p, "sandbox.*") || streq(p, "sandbox.lifecycle.*"))
                return true;
        for (size_t i = 0; i < ELEMENTSOF(event_types); i++)
                if (streq(event_types[i].type, p) || (event_types[i].e2b && streq(event_types[i].e2b, p)))
                        return true;
        return false;
}

bool webhook_pattern_match(const char *pattern, const char *type) {
        const char *e2b;

        if (!pattern || !type)
                return false;
        if (streq(pattern, "*") || streq(pattern, type))
                return true;
        e2b = webhook_e2b_type(type);
        if (streq(pattern, "sandbox.lifecycle.*"))
                return e2b != NULL;
        if (streq(pattern, "sandbox.*"))
                return startswith(type, "sandbox.") != NULL;
        return e2b && streq(pattern, e2b);
}
