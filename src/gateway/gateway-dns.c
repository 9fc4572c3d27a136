/* SPDX-License-Identifier: MIT */
/* The sandboxes' resolver: A queries for names the policy allows are asked
 * upstream and answered with the addresses that pass the guard; AAAA gets an
 * empty answer for allowed names (IPv6 is off inside); everything else is
 * refused. What was given to whom is remembered for the proxy's checks. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "gateway-internal.h"
#include "log.h"
#include "str-util.h"

void gw_memory_add(GwSandbox *sb, const char *name, struct in_addr addr, uint32_t ttl) {
        uint64_t now = gw_now_usec(), expiry = now + ((uint64_t) ttl + GW_DNS_MEMORY_GRACE_SEC) * 1000000U;
        size_t victim = SIZE_MAX;

        for (size_t i = 0; i < sb->n_memory; i++) {
                GwDnsMemory *m = &sb->memory[i];
                if (m->addr.s_addr == addr.s_addr && streq(m->name, name)) {
                        if (expiry > m->expiry_usec)
                                m->expiry_usec = expiry;
                        return;
                }
                if (victim == SIZE_MAX || m->expiry_usec < sb->memory[victim].expiry_usec)
                        victim = i;
        }
        if (sb->n_memory < GW_DNS_MEMORY_MAX) {
                GwDnsMemory *n = realloc(sb->memory, (sb->n_memory + 1) * sizeof *n);
                if (n) {
                        sb->memory = n;
                        victim = sb->n_memory++;
                }
        }
        if (victim == SIZE_MAX)
                return;
        /* full: the entry closest to expiry goes */
        (void) strscpy(sb->memory[victim].name, sizeof sb->memory[victim].name, name);
        sb->memory[victim].addr = addr;
        sb->memory[victim].expiry_usec = expiry;
}

bool gw_memory_has(GwSandbox *sb, const char *name, struct in_addr addr) {
        uint64_t now = gw_now_usec();
        for (size_t i = 0; i < sb->n_memory; i++)
                if (sb->memory[i].addr.s_addr == addr.s_addr && sb->memory[i].expiry_usec > now &&
                    streq(sb->memory[i].name, name))
                        return true;
        return false;
}

size_t gw_memory_names(GwSandbox *sb, struct in_addr addr, const char **ret, size_t max) {
        uint64_t now = gw_now_usec();
        size_t n = 0;
        for (size_t i = 0; i < sb->n_memory && n < max; i++)
                if (sb->memory[i].addr.s_addr == addr.s_addr && sb->memory[i].expiry_usec > now)
                        ret[n++] = sb->memory[i].name;
        return n;
}

size_t gw_filter_addrs(Gateway *gw, struct in_addr *addrs, size_t n) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
                if (!gw_addr_forbidden(gw, AF_INET, &addrs[i]))
                        addrs[k++] = addrs[i];
        return k;
}

static void resolve_io(Gateway *gw, GwIo *io, uint32_t events);

static void resolve_unlink(Gateway *gw, GwResolve *r) {
        if (r->prev)
                r->prev->next = r->next;
        else if (gw->resolves == r)
                gw->resolves = r->next;
        if (r->next)
                r->next->prev = r->prev;
        r->prev = r->next = NULL;
}

void gw_resolve_free(Gateway *gw, GwResolve *r) {
        if (!r)
                return;
        resolve_unlink(gw, r);
        gw_io_close(gw, &r->io);
        if (r->sb && r->sb->n_resolves > 0)
                r->sb->n_resolves--;
        free(r);
}

int gw_resolve_start(Gateway *gw, GwSandbox *sb, const char *name, GwResolve **ret) {
        _cleanup_free_ GwResolve *r = NULL;
        _cleanup_close_ int fd = -EBADF;
        uint8_t q[DNS_UDP_MAX];
        int len, k;

        if (sb->n_resolves >= GW_RESOLVES_PER_SANDBOX_MAX)
                return -EBUSY;
        r = calloc(1, sizeof *r);
        if (!r)
                return -ENOMEM;
        (void) strscpy(r->name, sizeof r->name, name);
        if (random_bytes(&r->id, sizeof r->id) < 0)
                r->id = ++gw->next_query_id;
        len = dns_query_build(name, r->id, DNS_TYPE_A, q, sizeof q);
        if (len < 0)
                return len;
        fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        /* connected: the kernel drops datagrams from anyone but the resolver; the
         * source port is random per query */
        if (connect(fd, (const struct sockaddr *) &gw->config->upstream_dns, sizeof gw->config->upstream_dns) < 0)
                return -errno;
        if (send(fd, q, (size_t) len, 0) != len)
                return -errno ?: -EIO;
        r->io.fd = TAKE_FD(fd);
        r->io.fn = resolve_io;
        k = gw_epoll_add(gw, &r->io, EPOLLIN);
        if (k < 0) {
                r->io.fd = safe_close(r->io.fd);
                return k;
        }
        r->sb = sb;
        sb->n_resolves++;
        r->deadline_usec = gw_now_usec() + GW_RESOLVE_TIMEOUT_SEC * 1000000ULL;
        r->next = gw->resolves;
        if (gw->resolves)
                gw->resolves->prev = r;
        gw->resolves = r;
        *ret = TAKE_PTR(r);
        return 0;
}

static void send_reply(Gateway *gw, GwSandbox *sb, GwConn *conn, const struct sockaddr_in *client, const DnsQuestion *q,
                       int rcode, const struct in_addr *addrs, size_t n, uint32_t ttl) {
        uint8_t buf[DNS_UDP_MAX];
        int len = dns_reply_build(q, rcode, addrs, n, ttl, buf, sizeof buf);
        if (len < 0)
                len = dns_reply_build(q, DNS_RCODE_SERVFAIL, NULL, 0, 0, buf, sizeof buf);
        if (len < 0)
                return;
        if (conn)
                gw_conn_dns_reply(gw, conn, buf, (size_t) len);
        else
                (void) sendto(sb->dns_udp.fd, buf, (size_t) len, MSG_DONTWAIT, (const struct sockaddr *) client,
                              sizeof *client);
}

/* The upstream answered (or timed out: n < 0 in rcode) */
static void resolve_finish(Gateway *gw, GwResolve *r, int rcode, struct in_addr *addrs, size_t n, uint32_t ttl) {
        GwSandbox *sb = r->sb;
        size_t total = n;

        if (r->conn)
                r->conn->resolve = NULL; /* the caller frees r; the connection may close below */
        n = gw_filter_addrs(gw, addrs, n);
        if (total > 0 && n == 0) {
                char why[128];
                snprintf(why, sizeof why, "the name resolves only to refused addresses (%s)",
                         gw_addr_forbidden(gw, AF_INET, &addrs[0]) ?: "guard");
                gw_event(gw, sb, false, "dns", r->name, NULL, 0, why);
                rcode = DNS_RCODE_NXDOMAIN;
        }
        ttl = ttl < GW_DNS_TTL_MIN ? GW_DNS_TTL_MIN : ttl > GW_DNS_TTL_MAX ? GW_DNS_TTL_MAX : ttl;
        if (rcode == DNS_RCODE_NOERROR)
                for (size_t i = 0; i < n; i++)
                        gw_memory_add(sb, r->name, addrs[i], ttl);
        if (r->answer_dns) {
                if (rcode == DNS_RCODE_NOERROR && n > 0) {
                        char why[160], ip[INET_ADDRSTRLEN];
                        inet_ntop(AF_INET, &addrs[0], ip, sizeof ip);
                        snprintf(why, sizeof why, "answered %zu address(es), first %s", n, ip);
                        gw_event(gw, sb, true, "dns", r->name, NULL, 0, why);
                }
                send_reply(gw, sb, r->conn, &r->client, &r->question, rcode < 0 ? DNS_RCODE_SERVFAIL : rcode, addrs, n, ttl);
                if (r->conn)
                        gw_conn_dns_continue(gw, r->conn); /* queries pipelined behind this one */
        } else if (r->conn)
                gw_conn_resolved(gw, r->conn, rcode, addrs, rcode == DNS_RCODE_NOERROR ? n : 0);
}

static void resolve_io(Gateway *gw, GwIo *io, uint32_t events) {
        GwResolve *r = (GwResolve *) io;
        uint8_t buf[DNS_MSG_MAX];
        struct in_addr addrs[DNS_ANSWERS_MAX];
        size_t n = 0;
        uint32_t ttl = 0;
        int rcode, k;
        ssize_t len = recv(io->fd, buf, sizeof buf, MSG_DONTWAIT);

        if (len < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (len < 0) {
                resolve_finish(gw, r, -errno, addrs, 0, 0); /* e.g. ECONNREFUSED */
                gw_resolve_free(gw, r);
                return;
        }
        k = dns_answer_parse(buf, (size_t) len, r->id, r->name, &rcode, addrs, &n, &ttl);
        if (k == -EBADMSG)
                return; /* not our answer: keep waiting until the deadline */
        if (k < 0)
                rcode = -k;
        resolve_finish(gw, r, k < 0 ? -1 : rcode, addrs, n, ttl);
        gw_resolve_free(gw, r);
}

void gw_resolves_tick(Gateway *gw, uint64_t now) {
        /* finishing one may close connections and free other lookups: look again each time */
        for (;;) {
                GwResolve *r = gw->resolves;
                struct in_addr none[1];
                while (r && r->deadline_usec > now)
                        r = r->next;
                if (!r)
                        return;
                resolve_finish(gw, r, -ETIMEDOUT, none, 0, 0);
                gw_resolve_free(gw, r);
        }
}

void gw_dns_query(Gateway *gw, GwSandbox *sb, GwConn *conn, const uint8_t *p, size_t n, const struct sockaddr_in *from) {
        DnsQuestion q = {};
        EgressPolicyMatch m;
        EgressPolicyVerdict v;
        char tbuf[8], why[EGRESS_POLICY_RULE_TEXT_MAX + 64];
        int r = dns_question_parse(p, n, &q);

        if (r < 0) {
                if (n < 2)
                        return;
                q.question_len = 0;
                gw_event(gw, sb, false, "dns", NULL, &sb->ip, 0,
                         r == -ENAMETOOLONG ? "query name too long" : r == -EINVAL ? "query name with invalid bytes"
                                                                                    : "malformed query");
                send_reply(gw, sb, conn, from, &q, r == -EBADMSG ? DNS_RCODE_FORMERR : DNS_RCODE_REFUSED, NULL, 0, 0);
                return;
        }
        if (!gw_bucket_take(&sb->dns_bucket, gw->config->dns_per_sec, gw->config->dns_per_sec * 2.0)) {
                gw_event(gw, sb, false, "dns", q.name, NULL, 0, "query rate limit");
                send_reply(gw, sb, conn, from, &q, DNS_RCODE_REFUSED, NULL, 0, 0);
                return;
        }
        if (q.qclass != DNS_CLASS_IN || (q.qtype != DNS_TYPE_A && q.qtype != DNS_TYPE_AAAA)) {
                snprintf(why, sizeof why, "query type %s refused (only A is answered)", dns_type_to_string(q.qtype, tbuf));
                gw_event(gw, sb, false, "dns", q.name, NULL, 0, why);
                send_reply(gw, sb, conn, from, &q, DNS_RCODE_REFUSED, NULL, 0, 0);
                return;
        }
        v = egress_policy_match_name(sb->policy, q.name, strlen(q.name), &m);
        if (v != EGRESS_POLICY_ALLOW && v != EGRESS_POLICY_BY_ADDR) { /* by address: the connection is judged */
                if (q.qtype == DNS_TYPE_A) {
                        snprintf(why, sizeof why, "%s", m.rule[0] ? m.rule : "no rule allows the name");
                        gw_event(gw, sb, false, "dns", q.name, NULL, 0, why);
                }
                send_reply(gw, sb, conn, from, &q, DNS_RCODE_NXDOMAIN, NULL, 0, 0);
                return;
        }
        if (q.qtype == DNS_TYPE_AAAA) { /* IPv6 is disabled inside: no data */
                send_reply(gw, sb, conn, from, &q, DNS_RCODE_NOERROR, NULL, 0, 0);
                return;
        }
        GwResolve *res = NULL;
        r = gw_resolve_start(gw, sb, q.name, &res);
        if (r < 0) {
                gw_event(gw, sb, false, "dns", q.name, NULL, 0,
                         r == -EBUSY ? "too many lookups in flight" : "upstream resolver unreachable");
                send_reply(gw, sb, conn, from, &q, r == -EBUSY ? DNS_RCODE_REFUSED : DNS_RCODE_SERVFAIL, NULL, 0, 0);
                return;
        }
        res->answer_dns = true;
        if (conn)
                conn->resolve = res;
        res->question = q;
        if (from)
                res->client = *from;
        res->conn = conn;
}

void gw_dns_udp_event(Gateway *gw, GwIo *io, uint32_t events) {
        GwSandbox *sb = (GwSandbox *) ((char *) io - offsetof(GwSandbox, dns_udp));
        for (unsigned i = 0; i < 64; i++) {
                uint8_t buf[DNS_MSG_MAX];
                struct sockaddr_in from;
                socklen_t fl = sizeof from;
                ssize_t n = recvfrom(io->fd, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *) &from, &fl);
                if (n < 0)
                        return;
                /* only the sandbox's own address (the firewall validates it too) */
                if (fl != sizeof from || from.sin_family != AF_INET || from.sin_addr.s_addr != sb->ip.s_addr)
                        continue;
                gw_dns_query(gw, sb, NULL, buf, (size_t) n, &from);
        }
}
