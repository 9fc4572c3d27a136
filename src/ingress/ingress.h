/* SPDX-License-Identifier: MIT */
#pragma once

/* The ingress: a reverse proxy on its own listener that routes
 * Host: {port}-{sandbox}.{domain} to that TCP port of the sandbox, over the
 * sandbox's own address on its link (nothing else: not the host, not another
 * sandbox), and 49983-{sandbox}.{domain} to the E2B envd handlers.
 *
 *   ingress.c        the listener, Host routing, access, the sandbox's address
 *   ingress-auth.c   traffic tokens, one-time links and signed cookies (pure)
 *   ingress-proxy.c  one request to the sandbox: head, bodies, Upgrade relay
 *   ingress-h2.c     HTTP/2 (prior knowledge, or ALPN h2 over TLS): each
 *                    stream routed as a request and proxied as HTTP/1.1
 *
 * Access: private unless the sandbox allows public traffic; a request
 * carries the sandbox's traffic token (X-Space-Traffic-Token or E2B's
 * e2b-traffic-access-token) or the cookie a one-time link set. */

#include <netinet/in.h>

#include "api.h"
#include "http-server.h"

#include "ingress-auth.h"
#include "store.h"

typedef struct Ingress Ingress;

#define INGRESS_RESPONSE_TIMEOUT_MSEC 60000    /* for the sandbox's response head */
#define INGRESS_IDLE_TIMEOUT_MSEC 300000       /* a body or relay without a byte this long ends */
#define INGRESS_BUFFER (64U * 1024U)           /* each direction's buffer */
#define INGRESS_USED_LINKS_MAX 4096U           /* one-time links remembered until they expire */
#define INGRESS_PORTS_SEEN_MAX 65536U          /* (sandbox, port) pairs whose first use was recorded */

/* ---- ingress-proxy.c ---- */

/* Forwards the request on c to the connected socket fd (the sandbox's
 * port) and its answer back; an Upgrade becomes a relay both ways. Always
 * responds (502 if the sandbox fails us before a response began). mask
 * (E2B's maskRequestHost, "" = none): the Host the sandbox sees, "${PORT}"
 * replaced by port; X-Forwarded-Host keeps the one the client sent. */
void ingress_proxy(HttpConn *c, const HttpHead *req, int fd, const char *forwarded_for, const char *mask,
                   uint16_t port);

/* The pieces of it the HTTP/2 side shares: the head for the sandbox
 * (upgrade NULL: "Connection: close"), the response headers passed on
 * ("Name: value\r\n"..., ours and hop-by-hop ones dropped), and which
 * headers are hop-by-hop or ours. */
int ingress_request_head(const HttpHead *req, const char *upgrade, const char *forwarded_for, bool tls,
                         const char *mask, uint16_t port, char **ret, size_t *ret_len);
int ingress_response_headers(const HttpHead *resp, bool upgrade, char **ret);
bool ingress_header_is_hop(const char *name);

/* ---- ingress-h2.c ---- */

#define INGRESS_H2_STREAMS_MAX 64U            /* concurrent streams per connection */
#define INGRESS_H2_WINDOW (64U * 1024U)        /* each stream's receive window (request bodies) */
#define INGRESS_H2_HEADERS_MAX (16U * 1024U)   /* a request's header list, as for HTTP/1.1 */

/* Serves an HTTP/2 connection (prior knowledge: pending starts with the
 * preface) on fd until it ends: each stream is routed like an HTTP/1.1
 * request (ingress_route) and proxied to the sandbox as HTTP/1.1. peer:
 * the client's "address:port" (X-Forwarded-For, logs). */
void ingress_h2_serve(Ingress *g, HttpConn *c, int fd, const void *pending, size_t n, const char *peer);
/* The Ingress's domain (the h2 side parses :authority with it). */
const char *ingress_domain(const Ingress *g);

/* ---- ingress.c ---- */

/* Where a request goes: id and port from its Host; the rest set by ingress_route(). */
typedef struct IngressTarget {
        char id[17];                           /* as ingress_host_parse() writes it */
        uint16_t port;
        int fd;                                /* connected to the sandbox's port; the caller closes it */
        bool connecting;                       /* ingress_route_start(): fd's connect is under way */
        char tenant_id[STORE_ID_MAX];          /* the sandbox's */
        char mask[STORE_INGRESS_HOST_MAX];     /* maskRequestHost, "" = none */
} IngressTarget;

/* Our own answer instead of the sandbox's: a JSON error, or a link's 302. */
typedef struct IngressRefusal {
        int status;
        char *body;    /* JSON, or NULL (the 302) */
        char *headers; /* "Name: value\r\n"..., or NULL */
} IngressRefusal;
void ingress_refusal_done(IngressRefusal *f);

/* Access and the sandbox for one request whose Host gave t->id and t->port
 * (not envd's): 0 with t->fd connected, 1 with *f to answer. c is the
 * connection it came on (HTTP/1.1, or the one an HTTP/2 session runs on). */
int ingress_route(Ingress *g, HttpConn *c, const HttpHead *head, IngressTarget *t, IngressRefusal *f);
/* The same without waiting for the sandbox's port (what blocks is the
 * store and a resume): 0 with t->fd connected or t->connecting, its
 * non-blocking connect under way; the caller polls it for POLLOUT at most
 * API_PORT_DIAL_TIMEOUT_MSEC, then calls ingress_route_connected(). */
int ingress_route_start(Ingress *g, HttpConn *c, const HttpHead *head, IngressTarget *t, IngressRefusal *f);
/* That connect's outcome (timed_out: no POLLOUT in time; does not block):
 * 1 with *f to answer (the 502 ingress_route() gives), 0 connected, 2
 * connected and the port's first use: ingress_port_opened() is due (it
 * writes to the store, so where blocking is fine). */
int ingress_route_connected(Ingress *g, IngressTarget *t, bool timed_out, IngressRefusal *f);
void ingress_port_opened(Ingress *g, HttpConn *c, const IngressTarget *t);

/* Listens on config->ingress_listen (a host:port). */
int ingress_new(Api *api, Ingress **ret);
int ingress_port(const Ingress *g);
/* Serves until ingress_stop() (from a thread of its own). */
int ingress_run(Ingress *g);
void ingress_stop(Ingress *g);
Ingress *ingress_free(Ingress *g);
DEFINE_TRIVIAL_CLEANUP_FUNC(Ingress *, ingress_free);
