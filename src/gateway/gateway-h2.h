/* SPDX-License-Identifier: MIT */
#pragma once

/* HTTP/2 on an intercepted connection (gateway-intercept.c decides: the
 * sandbox offered h2 and the upstream chose it, see tls-intercept.h). Two
 * nghttp2 sessions over the two TLS pipes' plaintext: a server session for
 * the sandbox ("down"), a client session for the upstream ("up"), relayed
 * stream by stream:
 *
 *   - a request's HEADERS: :authority (and a Host header, if any) must name
 *     the host TLS was for (SNI = the policy's decision); another name on
 *     the same connection (domain fronting by h2 connection coalescing) gets
 *     421 on that stream and an event, the connection stays. The credentials
 *     are applied to the regular headers as for HTTP/1.1 (cred-inject.h: a
 *     placeholder replaced in any value, or the header added; never in a
 *     pseudo-header), sent as never-indexed literals, and the request goes
 *     upstream as a new stream; one credential-use event per request.
 *   - header blocks (CONTINUATION frames included: nghttp2 assembles them)
 *     are bounded: a request's at GW_H2_REQUEST_HEADERS_MAX bytes (name +
 *     value + 32 each, as SETTINGS_MAX_HEADER_LIST_SIZE counts) and
 *     HTTP_HEADERS_MAX fields, refused with 431; a response's at
 *     GW_H2_RESPONSE_HEADERS_MAX, refused with 502. CONNECT is refused
 *     with 501; extended CONNECT (RFC 8441) is not offered (no
 *     SETTINGS_ENABLE_CONNECT_PROTOCOL: nghttp2 resets such a stream), so
 *     WebSocket clients use an HTTP/1.1 connection.
 *   - DATA, trailers (HEADERS after DATA: gRPC's status) and END_STREAM are
 *     passed through in both directions; 1xx responses too.
 *   - flow control end to end: automatic WINDOW_UPDATEs are off; a leg's
 *     window opens (nghttp2_session_consume) only as the other leg takes the
 *     bytes, so a stream buffers at most GW_H2_WINDOW bytes per direction
 *     and a connection GW_H2_WINDOW per direction in all.
 *   - SETTINGS are each leg's own: the sandbox gets at most
 *     GW_H2_STREAMS_MAX concurrent streams, GW_H2_WINDOW windows and
 *     GW_H2_REQUEST_HEADERS_MAX as MAX_HEADER_LIST_SIZE; the upstream gets
 *     ENABLE_PUSH=0 (a PUSH_PROMISE is then a connection error on that leg).
 *     PING is answered by each leg itself; PRIORITY is not relayed.
 *   - RST_STREAM is relayed to the paired stream with its code; a stream the
 *     upstream refuses (REFUSED_STREAM, or beyond its GOAWAY) is refused to
 *     the sandbox the same way (clients retry those).
 *   - GOAWAY from the upstream: the sandbox gets a GOAWAY (the same code)
 *     after the streams it already opened, which finish; new ones are
 *     refused. A GOAWAY from the sandbox ends the connection once its streams
 *     are done. The upstream closing its TCP/TLS: streams with a complete
 *     response still deliver it, the others are reset, and a GOAWAY follows.
 *
 * Memory per connection: two sessions (nghttp2's HPACK tables at their
 * 4 KiB defaults), at most GW_H2_STREAMS_MAX streams, header blocks bounded
 * as above while they are assembled, bodies bounded by the windows. Buffers
 * that held request headers (the credential) are wiped. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macros.h"

#define GW_H2_STREAMS_MAX 100U
#define GW_H2_WINDOW (256U * 1024U)
#define GW_H2_REQUEST_HEADERS_MAX (16U * 1024U)
#define GW_H2_RESPONSE_HEADERS_MAX (64U * 1024U)
#define GW_H2_PSEUDO_MAX 5U /* :method :scheme :authority :path :protocol / :status */

typedef struct Gateway Gateway;
typedef struct GwConn GwConn;
typedef struct GwH2 GwH2;

/* Where a leg's frames go (the TLS pipe of that leg; the fuzzer's counter):
 * write takes all n bytes or fails, pending says how many wait unsent. */
typedef struct GwH2Sink {
        int (*write)(void *userdata, const void *p, size_t n);
        size_t (*pending)(void *userdata);
        void *userdata;
} GwH2Sink;

/* Both TLS handshakes are done and both chose h2: the sessions start (each
 * queues its preface and SETTINGS). The sinks' owners stay the caller's. */
int gw_h2_new(Gateway *gw, GwConn *c, GwH2Sink down, GwH2Sink up, GwH2 **ret);
GwH2 *gw_h2_free(GwH2 *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(GwH2 *, gw_h2_free);

/* Plaintext read from one leg's pipe. -errno: the connection is beyond use
 * (a fatal protocol error or flood: nghttp2 queued its GOAWAY, send it). */
int gw_h2_recv(GwH2 *h, bool from_sandbox, const uint8_t *p, size_t n);
/* Frames out into the pipes, while each holds less than limit bytes. */
int gw_h2_send(GwH2 *h, size_t limit);
/* The upstream's TLS or TCP ended. */
void gw_h2_upstream_gone(GwH2 *h);
/* The policy no longer allows the connection (gw_policy_recheck()): the
 * upstream's leg is dropped (nothing more is sent to it or taken from it),
 * and the sandbox gets, per RFC 9113 §6.8, RST_STREAM for each stream still
 * in flight (CANCEL if its request went upstream, REFUSED_STREAM if it did
 * not: a header block still coming, a request waiting for a stream slot)
 * and a GOAWAY (NO_ERROR, last-stream-id = the highest stream the gateway
 * took, why as its debug data); gw_h2_done() once they are out. */
int gw_h2_cut(GwH2 *h, const char *why);
/* Nothing more to do on the sandbox's leg: close once its pipe is drained. */
bool gw_h2_done(const GwH2 *h);
