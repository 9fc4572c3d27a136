/* SPDX-License-Identifier: MIT */
#pragma once

/* The worker's side of the gateway: forks the gateway process (before the
 * worker has threads; the child closes every other fd and dies with its
 * parent) and speaks its control protocol. Requests are synchronous; event
 * lines that arrive meanwhile are queued and handed out by
 * gateway_client_dispatch(), which the worker calls when gateway_client_fd()
 * is readable, and when gateway_client_has_queued() says a request left
 * some (they may be all the gateway had to say: a policy change's cuts come
 * just before its reply). */

#include <netinet/in.h>
#include <sys/types.h>

#include "gateway.h"
#include "json.h"

#define GATEWAY_CLIENT_REPLY_TIMEOUT_MSEC 5000
/* Requests sent ahead whose replies are kept until awaited (a branch
 * registers all its children before it waits for the first reply). */
#define GATEWAY_CLIENT_PENDING_MAX 128U

typedef struct GatewayClient GatewayClient;

/* One decision event: type ("network.allow", "network.deny",
 * "network.dropped"), sandbox id, tenant, reason, data (JSON object text). */
typedef void (*GatewayEventFn)(void *userdata, const char *type, const char *sandbox, const char *tenant,
                               const char *reason, const char *data_json);

int gateway_client_start(const GatewayConfig *config, GatewayEventFn on_event, void *userdata, GatewayClient **ret);
/* Uses an existing control socket (tests; a gateway started elsewhere). */
int gateway_client_new(int fd, pid_t pid, GatewayEventFn on_event, void *userdata, GatewayClient **ret);
/* Closes the control socket (the gateway exits) and reaps the child. */
GatewayClient *gateway_client_free(GatewayClient *g);
DEFINE_TRIVIAL_CLEANUP_FUNC(GatewayClient *, gateway_client_free);

int gateway_client_fd(GatewayClient *g);
pid_t gateway_client_pid(GatewayClient *g);
/* Reads what is there (non-blocking) and calls on_event for each event line.
 * -ECONNRESET once the gateway is gone. */
int gateway_client_dispatch(GatewayClient *g);
/* Whether event lines read while waiting for a reply wait for dispatch. */
bool gateway_client_has_queued(GatewayClient *g);

/* policy_json NULL: no egress. On failure with a reason in errbuf: -EINVAL
 * (bad policy), -EEXIST (id or address in use), -EADDRNOTAVAIL, ... */
int gateway_client_register(GatewayClient *g, const char *id, const char *tenant, struct in_addr sandbox_ip,
                            struct in_addr host_ip, const char *policy_json, char *errbuf, size_t errbuf_size);
/* The same in two halves: the request goes out at once and the gateway works
 * on it while the caller does something else; gateway_client_wait() returns
 * its result. The gateway answers in order: a sandbox whose registration is
 * not through yet has no listener on its host end, so every connection of it
 * is refused (never allowed). Each sent request is awaited exactly once. */
int gateway_client_send_register(GatewayClient *g, const char *id, const char *tenant, struct in_addr sandbox_ip,
                                 struct in_addr host_ip, const char *policy_json, int64_t *ret_seq);
int gateway_client_wait(GatewayClient *g, int64_t seq, char *errbuf, size_t errbuf_size);
/* The same registration sent again, awaited like the first: a gateway that
 * has it already (the same addresses) takes it as it is, so a sandbox that
 * two paths register with a new gateway (its creation, and the new
 * gateway's sweep of every live sandbox) is registered once. */
int gateway_client_send_register_again(GatewayClient *g, const char *id, const char *tenant,
                                       struct in_addr sandbox_ip, struct in_addr host_ip, const char *policy_json,
                                       int64_t *ret_seq);
/* A registered sandbox under another tenant and policy (a warm sandbox's new
 * owner), or registered afresh if it is not: sent, never awaited. The gateway
 * carries out every control line written before the cause of an event before
 * that event, so anything the sandbox sends after this returns is decided
 * under the new registration. The gateway checks the policy again: a
 * failure (out of memory, a policy the caller did not check) removes the
 * sandbox's registration (nothing of it is let through) and comes as an
 * event "network.error" of the sandbox. */
int gateway_client_send_replace(GatewayClient *g, const char *id, const char *tenant, struct in_addr sandbox_ip,
                                struct in_addr host_ip, const char *policy_json);
/* The sandbox's policy replaced, in effect when this returns: new connections
 * and DNS queries follow it, open connections it denies are reset (an event
 * each), UDP flows are decided again on their next datagram. */
int gateway_client_set_policy(GatewayClient *g, const char *id, const char *policy_json, char *errbuf, size_t errbuf_size);
int gateway_client_unregister(GatewayClient *g, const char *id);

/* The guard's host addresses as the gateway keeps them (op "stats"):
 * complete (known: a dump ended and nothing was lost since), how many, the
 * bytes of its sets, address events applied, dumps completed and thrown away
 * (interrupted, overrun under them), socket overruns, errors, sockets opened
 * again (after an error, or an overrun that did not drain), differences a
 * consistency dump found, destinations refused because they were unknown. */
typedef struct GatewayHostAddrStats {
        bool complete;
        uint64_t count, bytes, events, dumps, redumps, overruns, errors, reopens, drift, denied_unknown;
} GatewayHostAddrStats;
int gateway_client_host_addr_stats(GatewayClient *g, GatewayHostAddrStats *ret);

/* A credential as the gateway gets it: sealed (it opens the value itself). */
typedef struct GatewayCred {
        const char *id, *tenant, *name;
        const char *hosts_json;   /* JSON array of host patterns */
        const char *apply;        /* "header" | "basic" */
        const char *header_name, *header_format, *basic_user;
        const char *ciphertext, *nonce, *key_id;
        int64_t expires_usec, revoked_usec; /* wall clock; 0 = never / not revoked */
} GatewayCred;

/* Replaces the sandbox's credentials (n = 0: none) and hands it its CA (PEM;
 * needed when n > 0). The request line is wiped after it is sent. */
int gateway_client_set_credentials(GatewayClient *g, const char *id, const char *ca_cert_pem, const char *ca_key_pem,
                                   const GatewayCred *creds, size_t n, char *errbuf, size_t errbuf_size);
