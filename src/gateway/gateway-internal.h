/* SPDX-License-Identifier: MIT */
#pragma once

#include <netinet/in.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "cred-crypt.h"
#include "cred-inject.h"
#include "dns-wire.h"
#include "egress-policy.h"
#include "gateway.h"
#include "http-parse.h"
#include "json.h"
#include "tls-ca.h"
#include "tls-intercept.h"

#define GW_ID_MAX 64U
#define GW_SANDBOXES_MAX 4096U
#define GW_CONNS_MAX 16384U             /* over every sandbox */
#define GW_DNS_MEMORY_MAX 1024U         /* (name, address) pairs remembered per sandbox */
#define GW_DNS_MEMORY_GRACE_SEC 120U    /* kept past the TTL (clients cache a little longer) */
#define GW_DNS_TTL_MAX 300U             /* TTL written to sandboxes */
#define GW_DNS_TTL_MIN 5U
#define GW_RESOLVE_TIMEOUT_SEC 5U
#define GW_RESOLVES_PER_SANDBOX_MAX 64U /* upstream queries in flight */
#define GW_BUF_SIZE (64U * 1024U)       /* per direction of a relayed connection */
#define GW_PIPE_SIZE (256U * 1024U)     /* the upstream → sandbox pipe, where the kernel allows (else its default) */
/* TCP_NOTSENT_LOWAT on both sockets of a relayed connection: at most this
 * much (plus the skb being filled) waits unsent in a socket, the rest stays in
 * the pipe (or buffer) until the socket drains. Without it the socket towards
 * the sandbox holds MiBs unsent, and each window update from the sandbox's
 * reader transmits the next segments in the reader's own softirq, on its CPU:
 * the gateway's sending and the sandbox's receive processing land on the
 * (single-threaded) client. With it, nearly every segment leaves from the
 * gateway's splice, on its own CPU, in parallel with the reader. 4 KiB beat
 * 16 KiB and 16 KiB beat 128 KiB in interleaved runs (bench/gateway.py), the
 * gateway's CPU per download unchanged. */
#define GW_NOTSENT_LOWAT (4U * 1024U)
/* Congestion control of the socket towards the sandbox (a host-local veth:
 * round trip of tens of µs, no queue, no loss but for the sandbox's own
 * window). The host's default may be BBR, which paces: with no fq qdisc on
 * the link every relayed connection then runs TCP's internal pacing, an
 * hrtimer per burst, and that cost the gateway ~110 ms of CPU per 100 MiB
 * download against 65-70 with Reno (bench/gateway.py, interleaved). Reno is
 * always permitted without privileges. The upstream socket keeps the host's
 * default: that path is the internet. */
#define GW_SANDBOX_LEG_CC "reno"
#define GW_CONTROL_LINE_MAX (128U * 1024U)
#define GW_UDP_FLOWS_PER_SANDBOX 256U  /* relayed UDP flows (source port, destination) */
#define GW_UDP_FLOWS_MAX 16384U        /* over every sandbox */
#define GW_UDP_IDLE_SEC 120U           /* a flow without a datagram either way */
#define GW_UDP_DATAGRAM_MAX 65535U
#define GW_UDP_BATCH 64U               /* datagrams read per wake-up and socket */
#define GW_EVENT_REASON_MAX 512U
/* Read away at a connection's close, at most: unread bytes from the sandbox
 * would turn the close into a reset, and a reset can make the sandbox's
 * kernel drop what the gateway sent last (a refusal, the end of a response)
 * before its client read it (RFC 9112 9.6). */
#define GW_CLOSE_DRAIN_MAX (256U * 1024U)
#define GW_ALPN_MEMORY_MAX 16U          /* upstreams' ALPN choices remembered per sandbox (gateway-intercept.c) */
#define GW_ALPN_MEMORY_SEC 600U
#define GW_NAMES_PER_ADDR_MAX 16U       /* names remembered for one address, tried by a redirected other-port connection */

typedef struct Gateway Gateway;
typedef struct GwIo GwIo;
typedef void (*GwIoFn)(Gateway *gw, GwIo *io, uint32_t events);

struct GwIo {
        int fd;
        GwIoFn fn;
        uint32_t events; /* as registered: gw_epoll_mod() skips a change to the same */
};

typedef struct GwBucket {
        double tokens;
        uint64_t last_usec;
} GwBucket;

typedef struct GwDnsMemory {
        char name[DNS_NAME_MAX + 1];
        struct in_addr addr;
        uint64_t expiry_usec;
} GwDnsMemory;

typedef struct GwSandbox GwSandbox;
typedef struct GwUdpFlow GwUdpFlow;

typedef struct GwAlpnMemory {
        char host[DNS_NAME_MAX + 1];
        uint16_t port;
        uint8_t alpn;         /* TlsAlpn */
        uint64_t expiry_usec; /* 0: free */
} GwAlpnMemory;

/* One of a sandbox's UDP listeners (GATEWAY_UDP_PORTS of them). */
typedef struct GwUdpListener {
        GwIo io;
        GwSandbox *sb;
        unsigned index;
} GwUdpListener;

struct GwSandbox {
        char id[GW_ID_MAX], tenant[GW_ID_MAX];
        struct in_addr ip, host;
        EgressPolicy *policy;
        GwIo dns_udp, dns_tcp, proxy, transparent;
        unsigned n_conns, n_resolves;
        GwBucket dns_bucket, event_bucket;
        uint64_t events_dropped;
        GwDnsMemory *memory;
        size_t n_memory;
        GwAlpnMemory alpn_memory[GW_ALPN_MEMORY_MAX];
        GwUdpListener udp[GATEWAY_UDP_PORTS];
        int udp_ifindex;      /* the host end's link, found on the first datagram (0: not yet) */
        GwUdpFlow *udp_flows; /* doubly linked */
        unsigned n_udp_flows;
        /* credentials (gateway-cred.c): the sandbox's CA and its granted set, values opened */
        TlsCa *ca;
        char *ca_cert_pem;
        CredInjectSet creds;
        GwBucket cred_bucket;
        uint64_t cred_uses_dropped;
};

typedef struct GwConn GwConn;
typedef struct GwResolve GwResolve;

/* gateway-host-addrs.c: the guard's host addresses, kept from rtnetlink */
typedef struct GwHostAddrs {
        GwIo io;           /* the subscribed NETLINK_ROUTE socket; fd < 0: broken, reopened on the tick */
        HostAddrSet *set;  /* what the guard consults (guard.host) */
        HostAddrSet *dump; /* filled by the dump in flight */
        uint8_t *buf;
        uint32_t seq, dump_seq; /* dump_seq 0: no dump in flight */
        bool dump_intr;    /* the kernel marked the dump in flight interrupted */
        bool redump;       /* events were lost during it: dump again at its end */
        uint64_t next_dump_usec, retry_usec, last_unknown_log_usec;
        uint64_t opened;   /* sockets opened */
        uint64_t n_events, n_dumps, n_redumps, n_overruns, n_errors, n_reopens, n_drift, n_denied_unknown;
} GwHostAddrs;

struct Gateway {
        const GatewayConfig *config;
        EgressPolicyGuard guard;
        GwHostAddrs host_addrs;
        int epoll_fd;
        GwIo control;
        char *control_buf;
        size_t control_n;
        char *out_buf; /* pending control output */
        size_t out_n, out_allocated;
        bool control_eof;
        GwSandbox **sandboxes;
        size_t n_sandboxes;
        GwConn *conns;       /* doubly linked */
        unsigned n_conns;
        GwResolve *resolves; /* doubly linked */
        unsigned n_udp_flows;
        bool udp_off;        /* the kernel cannot tell us a datagram's destination */
        uint8_t *udp_buf;    /* GW_UDP_DATAGRAM_MAX: one datagram at a time */
        uint16_t next_query_id;
        CredKey *cred_key;     /* NULL: no master key here, no credential can be opened */
        SSL_CTX *upstream_tls; /* verifies intercepted upstreams */
        struct epoll_event *batch; /* the epoll events being handled (gw_io_close drops its own) */
        int batch_n;
};

uint64_t gw_now_usec(void);
bool gw_bucket_take(GwBucket *b, double per_sec, double burst);
int gw_epoll_add(Gateway *gw, GwIo *io, uint32_t events);
int gw_epoll_mod(Gateway *gw, GwIo *io, uint32_t events);
void gw_epoll_del(Gateway *gw, GwIo *io);
void gw_io_close(Gateway *gw, GwIo *io);
GwSandbox *gw_sandbox_find(Gateway *gw, const char *id);

/* A decision event: verdict "allow"/"deny", kind "dns"/"http"/"tls"/"connect"/"tcp"/"udp". */
void gw_event(Gateway *gw, GwSandbox *sb, bool allow, const char *kind, const char *host, const struct in_addr *addr,
              uint16_t port, const char *why);

/* gateway-host-addrs.c */
/* Allocates the sets, opens the socket and waits (bounded) for the first
 * dump; before the epoll fd exists. -ENOMEM only: a socket that cannot be
 * opened leaves every destination refused and is retried on the tick. */
int gw_host_addrs_init(Gateway *gw);
/* Adds the socket to the event loop. */
int gw_host_addrs_watch(Gateway *gw);
void gw_host_addrs_tick(Gateway *gw, uint64_t now);
void gw_host_addrs_done(Gateway *gw);
/* egress_policy_addr_forbidden() with the guard, after the queued address
 * events are applied; a refusal because the addresses are unknown is counted
 * and logged. */
const char *gw_addr_forbidden(Gateway *gw, int family, const void *addr);
/* "host_addrs": {...} for the "stats" control op. */
void gw_host_addrs_write_stats(Gateway *gw, JsonWriter *w);

/* gateway-dns.c */
struct GwResolve {
        GwIo io;
        GwResolve *prev, *next;
        GwSandbox *sb;
        char name[DNS_NAME_MAX + 1];
        uint16_t id;
        uint64_t deadline_usec;
        /* who waits: a UDP query (question + client address), a TCP DNS
         * connection or a proxy connection */
        bool answer_dns;        /* reply to question (to client over UDP, or to conn) */
        DnsQuestion question;
        struct sockaddr_in client;
        GwConn *conn;           /* NULL: UDP */
};
void gw_dns_udp_event(Gateway *gw, GwIo *io, uint32_t events);
/* Starts an upstream A lookup for name on behalf of sb; done via the owner. */
int gw_resolve_start(Gateway *gw, GwSandbox *sb, const char *name, GwResolve **ret);
void gw_resolve_free(Gateway *gw, GwResolve *r);
void gw_resolves_tick(Gateway *gw, uint64_t now);
/* Answers a (TCP) DNS query held by conn; the reply goes to conn's output. */
void gw_dns_query(Gateway *gw, GwSandbox *sb, GwConn *conn, const uint8_t *p, size_t n, const struct sockaddr_in *from);
/* Remembers (name → addr) for sb; true if addr was given to sb for name. */
void gw_memory_add(GwSandbox *sb, const char *name, struct in_addr addr, uint32_t ttl);
bool gw_memory_has(GwSandbox *sb, const char *name, struct in_addr addr);
/* Names sb was given addr for (at most max). */
size_t gw_memory_names(GwSandbox *sb, struct in_addr addr, const char **ret, size_t max);
/* Filters addresses through the guard; returns how many remain. */
size_t gw_filter_addrs(Gateway *gw, struct in_addr *addrs, size_t n);

/* gateway-udp.c: the UDP relay */
/* Opens sb's UDP listeners (nothing if udp_port is 0). */
int gw_udp_listen(Gateway *gw, GwSandbox *sb);
/* Closes sb's flows (policy change: the next datagram is decided again). */
void gw_udp_drop_flows(Gateway *gw, GwSandbox *sb);
/* Closes sb's flows and listeners. */
void gw_udp_close(Gateway *gw, GwSandbox *sb);
void gw_udp_tick(Gateway *gw, uint64_t now);

/* gateway-proxy.c */
typedef enum GwConnKind {
        GW_CONN_DNS,         /* DNS over TCP */
        GW_CONN_PROXY,       /* explicit proxy: absolute-URI requests and CONNECT */
        GW_CONN_TRANSPARENT, /* redirected: original destination from conntrack */
} GwConnKind;

typedef enum GwConnState {
        GW_CONN_HEAD,       /* reading the request head / ClientHello */
        GW_CONN_RESOLVING,  /* the gateway resolves the host (explicit proxy) */
        GW_CONN_CONNECTING, /* connecting upstream */
        GW_CONN_RELAY,
        GW_CONN_FLUSH,      /* writing a refusal, then closing */
} GwConnState;

struct GwConn {
        GwIo cio, uio; /* the sandbox's side, the upstream side */
        GwConn *prev, *next;
        GwSandbox *sb;
        GwConnKind kind;
        GwConnState state;
        struct sockaddr_in dst; /* upstream address */
        char host[DNS_NAME_MAX + 1]; /* the name the decision was about ("" for an address) */
        uint16_t port;
        const char *proto; /* "http", "tls", "connect", "tcp" for events */
        uint8_t *in, *out; /* sandbox → upstream, upstream → sandbox (GW_BUF_SIZE each) */
        size_t in_n, out_n;
        int pipe_r, pipe_w; /* upstream → sandbox bytes spliced through a pipe once relaying (-1: buffered) */
        size_t pipe_n, pipe_cap;
        bool c_eof, u_eof, c_shut, u_shut;
        bool one_request; /* HTTP: only the first request's body goes upstream */
        bool body_done, chunked;
        uint64_t body_left;
        HttpChunkDecoder chunk;
        bool connect_reply;  /* CONNECT: say 200 once connected */
        bool sni_check;      /* CONNECT: a ClientHello's SNI must name the CONNECT host */
        uint64_t deadline_usec, last_usec;
        GwResolve *resolve;
        bool intercept;           /* TLS to a credential host: terminated here (gateway-intercept.c) */
        struct GwIntercept *ix;
        bool by_addr; /* no host entry decided its name: its destination address does (checked at connect) */
};

void gw_listener_event(Gateway *gw, GwIo *io, uint32_t events);
void gw_conn_resolved(Gateway *gw, GwConn *c, int rcode, const struct in_addr *addrs, size_t n);
void gw_conn_dns_reply(Gateway *gw, GwConn *c, const uint8_t *p, size_t n);
/* A DNS-over-TCP connection's lookup finished: answer what else it sent. */
void gw_conn_dns_continue(Gateway *gw, GwConn *c);
void gw_conns_tick(Gateway *gw, uint64_t now);
/* Closes every connection and lookup of sb. */
void gw_sandbox_drop_conns(Gateway *gw, GwSandbox *sb);
void gw_conn_close(Gateway *gw, GwConn *c);
/* A decision event for c and a refusal (403/502 for HTTP clients, a close otherwise). */
void gw_conn_deny(Gateway *gw, GwConn *c, int status, const char *why);
/* A deny event for c and its end: the refusal a new connection gets if
 * nothing was relayed yet, else both legs reset. Frees c. */
void gw_conn_cut(Gateway *gw, GwConn *c, const char *why);

/* gateway-decide.c: the policy's verdict on a connection (why: the rule that
 * decided, or the reason it is denied) */
/* c's name on c->port. A name no host entry decides under a policy whose
 * names go by address (EGRESS_POLICY_BY_ADDR) sets c->by_addr and is
 * decided by c->dst, or, not resolved yet, allowed until conn_connect checks
 * the address. */
bool gw_verdict_name(Gateway *gw, GwConn *c, const char *name, char *why, size_t whysize);
/* c->dst on c->port: the guard, then CIDR rules. */
bool gw_verdict_addr(Gateway *gw, const GwConn *c, char *why, size_t whysize);
/* A redirected other-port connection: c->host (if set), then the names the
 * gateway resolved to c->dst for the sandbox, then the address. ret_host: the
 * name that allowed it ("" if the address did). */
bool gw_verdict_tcp(Gateway *gw, const GwConn *c, char ret_host[static DNS_NAME_MAX + 1], char *why, size_t whysize);
/* sb's policy changed: every open connection of sb the new policy denies is
 * cut (gw_conn_cut), with a network.deny event saying so. */
void gw_policy_recheck(Gateway *gw, GwSandbox *sb);

struct GwIntercept;

/* gateway-first-bytes.c */
int gw_split_authority(const char *p, size_t n, uint16_t default_port, char host[static DNS_NAME_MAX + 1],
                       uint16_t *ret_port);
enum { GW_FIRST_OTHER, GW_FIRST_TLS, GW_FIRST_HTTP };
/* What the bytes a client sent first through a tunnel are: GW_FIRST_*, or
 * -EAGAIN until its first line is complete. */
int gw_first_bytes_kind(const uint8_t *p, size_t n);

/* gateway-cred.c */
int64_t gw_wall_usec(void);
int gw_cred_setup(Gateway *gw);              /* as root: master key, CA file */
int gw_cred_setup_unprivileged(Gateway *gw); /* after the drop: the host's trust store */
void gw_cred_done(Gateway *gw);
/* {"op":"credentials","id":ID,"ca_cert":PEM,"ca_key":PEM,"creds":[...]}: replaces sb's set. */
int gw_op_credentials(Gateway *gw, const JsonValue *req, char *err, size_t errsize);
void gw_sandbox_cred_done(GwSandbox *sb);
/* Whether c's host (c->host) gets a credential of sb: TLS to it is intercepted. */
bool gw_cred_wants(GwSandbox *sb, const char *host);
/* One event per credential applied (rate-limited; the rest counted). */
void gw_cred_used(Gateway *gw, GwSandbox *sb, const char *host, const CredInjectUsed *used);
void gw_cred_flush(Gateway *gw, GwSandbox *sb);
void gw_control_writer(Gateway *gw, JsonWriter *w);

/* gateway-intercept.c: TLS terminated with the sandbox's CA, requests parsed,
 * credentials applied, the upstream verified. Called once c's upstream TCP
 * connection is up (transparent 443: right after connect; CONNECT: when the
 * ClientHello arrives); c->in holds the ClientHello. */
void gw_intercept_start(Gateway *gw, GwConn *c);
void gw_intercept_free(struct GwIntercept *ix);
/* The policy denied an intercepted connection: if it is HTTP/2, the event,
 * the upstream dropped, RST_STREAM/GOAWAY to the sandbox and the close
 * (gw_h2_cut()); true. false: not HTTP/2, cut it as any other. */
bool gw_intercept_cut(Gateway *gw, GwConn *c, const char *why);
/* "name[:port]" of a Host header or :authority against c's host and port (443 if none). */
bool gw_host_header_matches(const GwConn *c, const char *v);
