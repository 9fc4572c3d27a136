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
 *
 * Access: private unless the sandbox allows public traffic; a request
 * carries the sandbox's traffic token (X-Space-Traffic-Token or E2B's
 * e2b-traffic-access-token) or the cookie a one-time link set. */

#include <netinet/in.h>

#include "api.h"
#include "http-server.h"

#include "ingress-auth.h"

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

/* ---- ingress.c ---- */

typedef struct Ingress Ingress;

/* Listens on config->ingress_listen (a host:port). */
int ingress_new(Api *api, Ingress **ret);
int ingress_port(const Ingress *g);
/* Serves until ingress_stop() (from a thread of its own). */
int ingress_run(Ingress *g);
void ingress_stop(Ingress *g);
Ingress *ingress_free(Ingress *g);
DEFINE_TRIVIAL_CLEANUP_FUNC(Ingress *, ingress_free);
