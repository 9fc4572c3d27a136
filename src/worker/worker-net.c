/* SPDX-License-Identifier: MIT */
/* The sandbox network on this host: a veth pair into each sandbox's network
 * namespace (its /31 out of net_pool, by the sandbox's slot) or, for a vm
 * sandbox, a tap device whose other end is the guest's NIC, one element of
 * this daemon's nftables set per link (firewall.h: the gateway's ports on the
 * host end only, everything else redirected or dropped), and the gateway told
 * about each sandbox. Everything global on the host carries this daemon's
 * names: the table (net_table) and the link prefix (net_link_prefix). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <net/if.h>
#include <stdio.h>
#include <sys/epoll.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "egress-policy.h"
#include "gateway-client.h"
#include "log.h"
#include "str-util.h"
#include "tap.h"
#include "veth.h"
#include "worker-internal.h"

/* ---- the gateway (src/gateway/gateway-client.h) ---- */

/* A decision of the gateway becomes an event of the sandbox. */
static void gateway_event(void *userdata, const char *type, const char *sandbox, const char *tenant,
                          const char *reason, const char *data_json) {
        Worker *w = userdata;
        Sandbox sb = {};

        worker_metrics_gateway_event(w, sandbox, type, data_json);
        (void) strscpy(sb.id, sizeof sb.id, strempty(sandbox));
        (void) strscpy(sb.tenant_id, sizeof sb.tenant_id, strempty(tenant));
        worker_event(w, sandbox ? &sb : NULL, type, reason, data_json);
}

_Static_assert(GATEWAY_UDP_PORTS == CONFIG_GATEWAY_UDP_PORTS, "one number of gateway UDP ports");

static int gateway_start(Worker *w) {
        GatewayConfig gc;
        int r;

        r = gateway_config_default(&gc);
        if (r < 0)
                return r;
        gc.dns_port = w->gateway_ports.dns;
        gc.proxy_port = w->gateway_ports.proxy;
        gc.transparent_port = w->gateway_ports.transparent;
        gc.udp_port = w->gateway_ports.udp;
        /* checked by spaced at start */
        if (!isempty(w->config->gateway_dns_upstream) &&
            gateway_parse_upstream(w->config->gateway_dns_upstream, &gc.upstream_dns) < 0)
                return log_error_errno(-EINVAL, "gateway_dns_upstream '%s' is not a.b.c.d[:port]",
                                       w->config->gateway_dns_upstream);
        gc.state_dir = w->config->state_dir; /* master.key */
        gc.master_key_file = isempty(w->config->master_key_file) ? NULL : w->config->master_key_file;
        gc.master_key_previous_file =
                isempty(w->config->master_key_previous_file) ? NULL : w->config->master_key_previous_file;
        gc.upstream_ca_file = isempty(w->config->gateway_ca_file) ? NULL : w->config->gateway_ca_file;
        gc.pool_base = w->net_pool.base;
        gc.pool_prefixlen = w->net_pool.prefixlen;
        r = gateway_client_start(&gc, gateway_event, w, &w->gateway);
        if (r < 0)
                return r;
        struct epoll_event ev = { .events = EPOLLIN, .data.u64 = WORKER_TAG_GATEWAY };
        if (epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, gateway_client_fd(w->gateway), &ev) < 0) {
                r = negative_errno();
                w->gateway = gateway_client_free(w->gateway);
                return r;
        }
        log_info("Gateway started (pid %d): DNS %u, proxy %u, transparent %u, UDP %u-%u on each host end",
                 (int) gateway_client_pid(w->gateway), gc.dns_port, gc.proxy_port, gc.transparent_port, gc.udp_port,
                 gc.udp_port + GATEWAY_UDP_PORTS - 1);
        return 0;
}

static void gateway_stop(Worker *w) {
        if (!w->gateway)
                return;
        (void) epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, gateway_client_fd(w->gateway), NULL);
        w->gateway = gateway_client_free(w->gateway);
}

/* The registration is sent, not awaited: *ret_seq is its reply's (0: no
 * gateway). The tenant and the egress policy are the spec's when it names
 * the tenant (the API wrote the spec from the store row it just read); else
 * they come from the store (the API stores a policy before it tells the
 * worker), spec_policy used only if the store has none. NULL: no egress. */
static int send_register(Worker *w, bool again, const char *id, const char *tenant, const AddrPair *pair,
                         const char *policy, int64_t *ret_seq) {
        return again ? gateway_client_send_register_again(w->gateway, id, tenant, pair->peer, pair->host, policy,
                                                          ret_seq)
                     : gateway_client_send_register(w->gateway, id, tenant, pair->peer, pair->host, policy, ret_seq);
}

/* again: the sandbox may be registered with this gateway already (a retry
 * after the gateway restarted, whose sweep registered every live sandbox). */
static int gateway_register_send(Worker *w, bool again, const char *id, const AddrPair *pair, const char *spec_tenant,
                                 const char *spec_policy, int64_t *ret_seq, char *err, size_t err_size) {
        Sandbox sb = {};
        int r;

        *ret_seq = 0;
        if (!w->gateway)
                return 0; /* gateway = off: nothing leaves (the firewall's default) */
        if (!isempty(spec_tenant))
                r = send_register(w, again, id, spec_tenant, pair, spec_policy, ret_seq);
        else {
                r = store_sandbox_get(w->store, NULL, id, &sb);
                if (r < 0) {
                        snprintf(err, err_size, "sandbox %s is not in the store: %s", id, strerror(-r));
                        return r;
                }
                r = send_register(w, again, id, sb.tenant_id, pair, sb.network_json ?: spec_policy, ret_seq);
                sandbox_done(&sb);
        }
        if (r < 0)
                snprintf(err, err_size, "%s", strerror(-r));
        return r;
}

static int gateway_register(Worker *w, const char *id, const AddrPair *pair, const char *spec_policy,
                            char *err, size_t err_size) {
        int64_t seq;
        int r = gateway_register_send(w, true, id, pair, NULL, spec_policy, &seq, err, err_size);
        if (r < 0 || seq == 0)
                return r;
        return gateway_client_wait(w->gateway, seq, err, err_size);
}

static void gateway_unregister(Worker *w, const char *id) {
        if (w->gateway)
                (void) gateway_client_unregister(w->gateway, id);
}

/* Registers every live sandbox again (a new gateway knows none). */
static void gateway_register_live(Worker *w) {
        for (size_t i = 0; i < w->n_live; i++) {
                LiveSandbox *l = &w->live[i];
                char err[256] = "";
                AddrPair pair;
                int r;

                if (l->reaping) /* deleted */
                        continue;
                if (worker_net_pair(w, l->slot, &pair) < 0)
                        continue;
                r = gateway_register(w, l->id, &pair, NULL, err, sizeof err);
                if (r < 0) {
                        log_warning_errno(r, "Sandbox %s: cannot register with the gateway: %s", l->id, err);
                        continue;
                }
                ApiError e = {};
                if (l->net && worker_cred_sync(w, l->id, true, &e) < 0)
                        log_warning("Sandbox %s: its credentials are not applied: %s", l->id, e.message);
        }
}

void worker_net_gateway_flush(Worker *w) {
        if (w->gateway && gateway_client_has_queued(w->gateway))
                worker_net_gateway_readable(w);
}

/* The gateway's control socket failed this way: the gateway is gone. */
static bool gateway_gone(int r) {
        return r == -EPIPE || r == -ECONNRESET || r == -ENOTCONN;
}

int worker_net_gateway_restart(Worker *w, const char *why) {
        int64_t now = now_usec();
        int r;

        if (w->gateway) {
                /* it died: its sandboxes lose egress until a new one knows them */
                log_error("The gateway (pid %d) is gone (%s); starting a new one", (int) gateway_client_pid(w->gateway),
                          why ?: "it exited");
                worker_event(w, NULL, "gateway.restarted", "the gateway process exited", NULL);
                gateway_stop(w);
                worker_restarts_died(&w->gateway_restarts, now, why ?: "it exited");
        }
        if (!streq(w->config->gateway, "on"))
                return 0;
        if (!worker_restarts_due(&w->gateway_restarts, now))
                return -EAGAIN;
        r = gateway_start(w);
        if (r < 0) {
                worker_restarts_died(&w->gateway_restarts, now, "it could not be started");
                return log_error_errno(r, "Cannot start the gateway again: %m; sandboxes have no egress until it "
                                       "starts (next try in %.1f s)", (double) w->gateway_restarts.delay_usec / 1e6);
        }
        worker_restarts_started(&w->gateway_restarts, now);
        log_info("Gateway restart #%u", w->gateway_restarts.restarts);
        gateway_register_live(w);
        return 0;
}

void worker_net_tick(Worker *w) {
        if (!w->gateway && streq(w->config->gateway, "on") && worker_restarts_due(&w->gateway_restarts, now_usec()))
                (void) worker_net_gateway_restart(w, NULL);
}

void worker_net_gateway_readable(Worker *w) {
        int r;

        if (!w->gateway)
                return;
        r = gateway_client_dispatch(w->gateway);
        if (r >= 0 || r == -EAGAIN)
                return;
        (void) worker_net_gateway_restart(w, strerror(-r));
}

/* A create waits this long at most for a gateway whose restart is due soon
 * (it kept dying: backoff), rather than failing at once. */
#define GATEWAY_CREATE_WAIT_USEC (1000 * 1000)

/* worker_net_gateway_restart() for a request that needs the gateway now:
 * a restart due within GATEWAY_CREATE_WAIT_USEC is waited for. */
static int gateway_restart_for_request(Worker *w, const char *why) {
        int r = worker_net_gateway_restart(w, why);
        int64_t wait = w->gateway_restarts.next_usec - now_usec();

        if (r != -EAGAIN || wait > GATEWAY_CREATE_WAIT_USEC)
                return r;
        if (wait > 0)
                (void) usleep((useconds_t) wait);
        return worker_net_gateway_restart(w, NULL);
}

/* The gateway to register a new sandbox with: one that died is started again
 * first (once). A gateway that cannot be had now is a 503 (the client tries
 * again), never a create without egress control. */
static int gateway_ready(Worker *w, ApiError *e) {
        int r;

        if (!streq(w->config->gateway, "on") || w->gateway)
                return 0;
        r = gateway_restart_for_request(w, NULL);
        if (r < 0 || !w->gateway)
                return api_error(e, r < 0 ? r : -EAGAIN, API_WORKER_UNAVAILABLE,
                                 "the sandbox gateway is restarting (next try in %.1f s)",
                                 (double) w->gateway_restarts.delay_usec / 1e6);
        return 0;
}

int worker_net_set_policy(Worker *w, const char *id, const char *policy_json, ApiError *e) {
        char err[256] = "";
        int r;

        /* not running here (suspended, ...): its next registration reads the store */
        if (!worker_live_find(w, id) || !w->gateway)
                return 0;
        r = gateway_client_set_policy(w->gateway, id, policy_json, err, sizeof err);
        if (gateway_gone(r))
                /* a new gateway registers every live sandbox from the store, which has the policy */
                return worker_net_gateway_restart(w, strerror(-r)) >= 0 ? 0
                       : api_error(e, -EAGAIN, API_WORKER_UNAVAILABLE, "the sandbox gateway is restarting");
        if (r < 0)
                return api_error(e, r, r == -EINVAL ? API_INVALID_ARGUMENT : API_INTERNAL,
                                 "the gateway refused the policy of %s: %s", id, err);
        return 0;
}

/* prefix: 1..NET_PREFIX_NAME_MAX letters or digits and one final '-', so no
 * daemon's prefix is a prefix of another's (their catch-all rules stay apart). */
static bool link_prefix_is_valid(const char *p) {
        size_t n = strlen(p);
        if (n < 2 || n > NET_PREFIX_NAME_MAX + 1 || p[n - 1] != '-')
                return false;
        for (size_t i = 0; i + 1 < n; i++)
                if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= '0' && p[i] <= '9')))
                        return false;
        return true;
}

int worker_net_link_name(const Worker *w, uint64_t slot, char buf[static IFNAMSIZ]) {
        int k = snprintf(buf, IFNAMSIZ, "%s%" PRIu64, w->config->net_link_prefix, slot);
        return k < 0 || k >= IFNAMSIZ ? -ENAMETOOLONG : 0;
}

int worker_net_pair(const Worker *w, uint64_t slot, AddrPair *ret) {
        if (slot > UINT32_MAX)
                return -ERANGE;
        return addr_pool_slot(&w->net_pool, (uint32_t) slot, ret);
}

int worker_net_setup(Worker *w) {
        const Config *c = w->config;
        char name[IFNAMSIZ];
        int r;

        r = addr_pool_parse(c->net_pool, strlen(c->net_pool), &w->net_pool);
        if (r < 0)
                return log_error_errno(r, "net_pool '%s' is not a private IPv4 CIDR (10/8, 172.16/12, 192.168/16; "
                                       "prefix length 8..30, base aligned)", c->net_pool);
        if (addr_pool_slots(&w->net_pool) < c->slots_max)
                return log_error_errno(-ERANGE, "net_pool %s holds %" PRIu32 " sandbox links, slots_max is %" PRIu64
                                       ": take a larger pool or fewer slots", c->net_pool,
                                       addr_pool_slots(&w->net_pool), c->slots_max);
        if (!link_prefix_is_valid(c->net_link_prefix))
                return log_error_errno(-EINVAL, "net_link_prefix '%s' must be 1-%u letters or digits and a final '-'",
                                       c->net_link_prefix, NET_PREFIX_NAME_MAX);
        if (worker_net_link_name(w, c->slots_max - 1, name) < 0)
                return log_error_errno(-ENAMETOOLONG, "net_link_prefix '%s' plus a slot number up to %" PRIu64
                                       " is longer than a link name may be (15)", c->net_link_prefix,
                                       c->slots_max - 1);
        if (!firewall_table_name_is_valid(c->net_table))
                return log_error_errno(-EINVAL, "net_table '%s' must be 1-%u letters, digits, '-' or '_'",
                                       c->net_table, FIREWALL_TABLE_NAME_MAX);
        w->gateway_ports = (FirewallPorts){
                .dns = (uint16_t) c->gateway_dns_port,
                .proxy = (uint16_t) c->gateway_proxy_port,
                .transparent = (uint16_t) c->gateway_transparent_port,
                .udp = (uint16_t) c->gateway_udp_port,
                .n_udp = GATEWAY_UDP_PORTS,
        };
        w->self_netns_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (w->self_netns_fd < 0)
                return log_error_errno(errno, "Cannot open our network namespace: %m");
        r = firewall_new(&w->firewall);
        if (r < 0)
                return log_error_errno(r, "Cannot create an nftables context: %m");
        if (streq(c->gateway, "on")) {
                r = gateway_start(w);
                if (r < 0)
                        return log_error_errno(r, "Cannot start the gateway: %m");
                worker_restarts_started(&w->gateway_restarts, now_usec());
        } else
                log_warning("gateway = off: sandboxes have no egress at all");
        return 0;
}

void worker_net_done(Worker *w) {
        gateway_stop(w);
        if (w->firewall && w->n_live == 0) {
                /* nothing runs: no table left behind (links went with their namespaces) */
                int r = firewall_teardown(w->firewall, w->config->net_table);
                if (r < 0)
                        log_warning_errno(r, "Cannot remove nftables table %s: %s", w->config->net_table,
                                          firewall_last_error(w->firewall));
        }
        w->firewall = firewall_free(w->firewall);
        w->self_netns_fd = safe_close(w->self_netns_fd);
}

/* The pair into the namespace of pid, both ends configured. A link of that
 * name is a leftover of an earlier life of the slot: replaced. */
static int link_up(Worker *w, const char *link, const AddrPair *pair, pid_t pid) {
        char p[64];
        int r;

        snprintf(p, sizeof p, "/proc/%d/ns/net", (int) pid);
        _cleanup_close_ int nsfd = open(p, O_RDONLY | O_CLOEXEC);
        if (nsfd < 0)
                return negative_errno();
        r = veth_create(link, VETH_PEER_DEFAULT, nsfd);
        if (r == -EEXIST) {
                (void) veth_delete(link);
                r = veth_create(link, VETH_PEER_DEFAULT, nsfd);
        }
        if (r < 0)
                return r;
        r = veth_configure_host(link, pair);
        if (r >= 0)
                r = veth_configure_peer_here(nsfd, w->self_netns_fd, VETH_PEER_DEFAULT, pair);
        if (r < 0)
                (void) veth_delete(link);
        return r;
}

int worker_net_tap(Worker *w, uint64_t slot, int *ret_fd, ApiError *e) {
        _cleanup_close_ int fd = -EBADF;
        char link[IFNAMSIZ];
        AddrPair pair;
        int r;

        if (worker_net_link_name(w, slot, link) < 0 || worker_net_pair(w, slot, &pair) < 0)
                return api_error(e, -ERANGE, API_INTERNAL, "slot %" PRIu64 " has no network link here", slot);
        r = tap_create(link, slot, &fd);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "cannot create the tap device %s: %s", link, strerror(-r));
        r = veth_configure_host(link, &pair);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "cannot configure the tap device %s: %s", link, strerror(-r));
        *ret_fd = TAKE_FD(fd); /* the last fd closed, the tap goes */
        return 0;
}

/* The network goes up while PID 1 sets itself up: the registration is sent
 * to the gateway first (it binds the sandbox's listeners meanwhile), then
 * the pair and the firewall element are made; _end() collects the gateway's
 * answer. Until the gateway has it, nothing listens on the host end: every
 * connection of the sandbox is refused, none is let through. */
int worker_net_attach_begin(Worker *w, const char *id, uint64_t slot, pid_t pid, const char *tenant,
                            const char *policy_json, WorkerNet *ret, ApiError *e) {
        char link[IFNAMSIZ], err[256] = "";
        AddrPair pair;
        int r;

        *ret = (WorkerNet){ .start_usec = now_usec(), .slot = slot };
        if (strscpy(ret->id, sizeof ret->id, id) < 0 || worker_net_link_name(w, slot, link) < 0 ||
            worker_net_pair(w, slot, &pair) < 0)
                return api_error(e, -ERANGE, API_INTERNAL, "slot %" PRIu64 " has no network link here", slot);
        FirewallLink fl = { .link = link, .addr = pair.peer, .gateway = pair.host };

        r = gateway_ready(w, e);
        if (r < 0)
                return r;
        r = gateway_register_send(w, false, id, &pair, tenant, policy_json, &ret->gateway_seq, err, sizeof err);
        if (gateway_gone(r)) {
                /* it died since the loop last looked: a new one, and the registration again */
                r = gateway_restart_for_request(w, strerror(-r));
                if (r < 0 || !w->gateway)
                        return api_error(e, r < 0 ? r : -EAGAIN, API_WORKER_UNAVAILABLE,
                                         "the sandbox gateway is restarting; try again");
                r = gateway_register_send(w, true, id, &pair, tenant, policy_json, &ret->gateway_seq, err,
                                          sizeof err);
        }
        ret->gateway_gen = w->gateway_restarts.started_usec;
        if (r < 0)
                return api_error(e, r, gateway_gone(r) ? API_WORKER_UNAVAILABLE : API_INTERNAL,
                                 "cannot register sandbox %s with the gateway: %s", id, err);
        r = pid > 0 ? link_up(w, link, &pair, pid) : 0; /* else a tap, up already */
        if (r < 0) {
                api_error(e, r, API_INTERNAL, "cannot create the network link %s: %s", link, strerror(-r));
                goto fail;
        }
        ret->link_usec = now_usec();
        r = firewall_add_link(w->firewall, w->config->net_table, &fl);
        if (r < 0) {
                (void) veth_delete(link);
                api_error(e, r, API_INTERNAL, "cannot add firewall rules for %s: %s", link,
                          r == -EPROTO ? firewall_last_error(w->firewall) : strerror(-r));
                goto fail;
        }
        ret->firewall_usec = now_usec();
        ret->active = true;
        return 0;
fail:
        if (ret->gateway_seq > 0 && w->gateway && ret->gateway_gen == w->gateway_restarts.started_usec &&
            gateway_client_wait(w->gateway, ret->gateway_seq, NULL, 0) >= 0)
                gateway_unregister(w, id);
        return r;
}

int worker_net_attach_end(Worker *w, WorkerNet *n, ApiError *e) {
        char err[256] = "";
        int64_t t = now_usec();
        int r = 0;

        if (!n->active)
                return 0;
        n->active = false;
        if (n->gateway_seq > 0 && w->gateway && n->gateway_gen == w->gateway_restarts.started_usec)
                r = gateway_client_wait(w->gateway, n->gateway_seq, err, sizeof err);
        else if (n->gateway_seq > 0)
                r = -ECONNRESET; /* the gateway it was sent to died meanwhile (another request found out) */
        if (gateway_gone(r)) {
                /* it died with the registration: a new gateway, and the registration again (from the
                 * store, which the API wrote before it asked us) */
                AddrPair pair;
                err[0] = 0;
                r = gateway_restart_for_request(w, w->gateway ? strerror(-r) : NULL);
                if (r >= 0 && w->gateway && worker_net_pair(w, n->slot, &pair) >= 0)
                        r = gateway_register(w, n->id, &pair, NULL, err, sizeof err);
                else if (r >= 0)
                        r = -ECONNRESET;
        }
        if (r < 0) {
                worker_net_detach(w, n->id, n->slot); /* unregisters too: a late registration goes */
                if (gateway_gone(r) || r == -EAGAIN)
                        return api_error(e, r, API_WORKER_UNAVAILABLE,
                                         "the sandbox gateway is restarting; try again (sandbox %s)", n->id);
                return api_error(e, r, r == -EINVAL ? API_INVALID_ARGUMENT : API_INTERNAL,
                                 "cannot register sandbox %s with the gateway: %s", n->id, err[0] ? err : strerror(-r));
        }
        log_debug("Sandbox %s: network up in %" PRIi64 " us (link %" PRIi64 ", firewall %" PRIi64
                  ", then the gateway's answer waited for %" PRIi64 " us)", n->id, now_usec() - n->start_usec,
                  n->link_usec - n->start_usec, n->firewall_usec - n->link_usec, now_usec() - t);
        return 0;
}

/* A warm sandbox taken by a tenant: the gateway forgets the pool's registration
 * (its tenant and policy) and takes the taker's before the sandbox runs again,
 * so its egress policy, its events and what its traffic may use are the
 * taker's. No round trip: the request is written before the caller thaws the
 * sandbox, and the gateway carries out what the worker wrote before any
 * decision it makes (gateway_client_send_replace()); the policy is checked
 * here first, so its answer could only be out of memory (then the sandbox
 * has no egress, with an event). tenant "" or NULL: the store's. */
int worker_net_reregister(Worker *w, const char *id, uint64_t slot, const char *tenant, const char *policy_json,
                          ApiError *e) {
        _cleanup_(sandbox_done) Sandbox sb = {};
        char err[EGRESS_POLICY_ERR_MAX] = "";
        AddrPair pair;
        int r;

        if (!w->gateway)
                return 0;
        if (worker_net_pair(w, slot, &pair) < 0)
                return api_error(e, -ERANGE, API_INTERNAL, "slot %" PRIu64 " has no network link here", slot);
        if (isempty(tenant)) {
                r = store_sandbox_get(w->store, NULL, id, &sb);
                if (r < 0)
                        return api_error(e, r, API_INTERNAL, "sandbox %s is not in the store: %s", id, strerror(-r));
                tenant = sb.tenant_id;
                policy_json = sb.network_json ?: policy_json;
        }
        if (policy_json) {
                _cleanup_json_ JsonValue *v = NULL;
                _cleanup_egress_policy_ EgressPolicy *p = NULL;
                r = json_parse(policy_json, strlen(policy_json), &v, err, sizeof err);
                if (r >= 0)
                        r = egress_policy_from_json(v, &p, err, sizeof err);
                if (r < 0)
                        return api_error(e, r, API_INVALID_ARGUMENT, "the egress policy of %s is not valid: %s", id,
                                         err);
        }
        r = gateway_client_send_replace(w->gateway, id, tenant, pair.peer, pair.host, policy_json);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "cannot register sandbox %s with the gateway: %s", id,
                                 strerror(-r));
        return 0;
}

int worker_net_attach(Worker *w, const char *id, uint64_t slot, pid_t pid, const char *policy_json, ApiError *e) {
        WorkerNet n;
        int r = worker_net_attach_begin(w, id, slot, pid, NULL, policy_json, &n, e);
        if (r < 0)
                return r;
        return worker_net_attach_end(w, &n, e);
}

void worker_net_attach_abort(Worker *w, WorkerNet *n) {
        if (!n->active)
                return;
        n->active = false;
        /* its answer is read first: each request is awaited once */
        if (n->gateway_seq > 0 && w->gateway && n->gateway_gen == w->gateway_restarts.started_usec)
                (void) gateway_client_wait(w->gateway, n->gateway_seq, NULL, 0);
        worker_net_detach(w, n->id, n->slot);
}

void worker_net_unregister(Worker *w, const char *id) {
        gateway_unregister(w, id);
}

static void firewall_unlink(const Worker *w, Firewall *fw, const char *id, const char *link, const AddrPair *pair) {
        FirewallLink fl = { .link = link, .addr = pair->peer, .gateway = pair->host };
        int r;

        if (!fw)
                return; /* the table is rebuilt at the next start */
        r = firewall_remove_link(fw, w->config->net_table, &fl);
        if (r < 0)
                log_warning_errno(r, "Cannot remove the firewall element of %s (sandbox %s): %s", link, id,
                                  r == -EPROTO ? firewall_last_error(fw) : strerror(-r));
}

static void link_delete(const char *link, const char *id) {
        int r = veth_delete(link);

        if (r < 0 && r != -ENODEV)
                log_warning_errno(r, "Cannot delete network link %s of sandbox %s: %m", link, id);
}

void worker_net_detach_link(const Worker *w, Firewall *fw, const char *id, uint64_t slot) {
        char link[IFNAMSIZ];
        AddrPair pair;

        if (worker_net_link_name(w, slot, link) < 0 || worker_net_pair(w, slot, &pair) < 0)
                return;
        link_delete(link, id);
        firewall_unlink(w, fw, id, link, &pair);
}

void worker_net_detach(Worker *w, const char *id, uint64_t slot) {
        gateway_unregister(w, id);
        worker_net_detach_link(w, w->firewall, id, slot);
}

void worker_net_detach_later(Worker *w, const char *id, uint64_t slot) {
        char link[IFNAMSIZ];
        AddrPair pair;
        int ifindex;

        if (worker_net_link_name(w, slot, link) < 0 || worker_net_pair(w, slot, &pair) < 0)
                return;
        gateway_unregister(w, id);
        firewall_unlink(w, w->firewall, id, link, &pair);
        ifindex = (int) if_nametoindex(link);
        if (ifindex > 0 && worker_teardown_queue_link(w, id, ifindex) < 0)
                link_delete(link, id);
}

/* At start, after the live sandboxes are adopted: the table is rebuilt with
 * exactly their links (one transaction), missing links are made again, and
 * links with our prefix that no live sandbox owns are deleted. */
int worker_net_reconcile(Worker *w) {
        _cleanup_free_ FirewallLink *fl = new0(FirewallLink, w->n_live);
        char (*names)[IFNAMSIZ] = calloc(w->n_live ?: 1, IFNAMSIZ);
        struct if_nameindex *ifs;
        size_t n = 0;
        int r;

        if (!fl || !names) {
                free(names);
                return -ENOMEM;
        }
        for (size_t i = 0; i < w->n_live; i++) {
                LiveSandbox *l = &w->live[i];
                AddrPair pair;

                if (!l->net)
                        continue;
                if (worker_net_link_name(w, l->slot, names[n]) < 0 || worker_net_pair(w, l->slot, &pair) < 0) {
                        log_warning("Sandbox %s: slot %" PRIu64 " has no network link here", l->id, l->slot);
                        continue;
                }
                if (l->rt->net == RUNTIME_NET_TAP &&
                    (if_nametoindex(names[n]) == 0 || veth_configure_host(names[n], &pair) < 0)) {
                        /* a vm's tap lives as long as its VMM holds it: it cannot be made again from here */
                        log_warning("Sandbox %s: its tap device %s is gone; it has no network until it is restarted",
                                    l->id, names[n]);
                        continue;
                }
                if (if_nametoindex(names[n]) == 0 || veth_configure_host(names[n], &pair) < 0) {
                        log_info("Sandbox %s: network link %s missing, making it again", l->id, names[n]);
                        r = link_up(w, names[n], &pair, l->pid);
                        if (r < 0) {
                                log_warning_errno(r, "Sandbox %s: cannot make its network link again: %m", l->id);
                                continue;
                        }
                }
                fl[n] = (FirewallLink){ .link = names[n], .addr = pair.peer, .gateway = pair.host };
                n++;
        }
        r = firewall_setup(w->firewall, w->config->net_table, w->config->net_link_prefix, &w->gateway_ports, fl, n);
        if (r < 0) {
                log_error_errno(r, "Cannot set up nftables table %s: %s", w->config->net_table,
                                r == -EPROTO ? firewall_last_error(w->firewall) : strerror(-r));
                free(names);
                return r;
        }
        gateway_register_live(w);

        ifs = if_nameindex();
        for (struct if_nameindex *i = ifs; i && i->if_index != 0; i++) {
                const char *slot = startswith(i->if_name, w->config->net_link_prefix);
                bool owned = false;
                /* ours are <prefix><slot> only: any other name is someone else's */
                if (!slot || !*slot || slot[strspn(slot, "0123456789")] != 0)
                        continue;
                for (size_t j = 0; j < n && !owned; j++)
                        owned = streq(names[j], i->if_name);
                if (owned)
                        continue;
                log_info("Removing orphan network link %s", i->if_name);
                r = veth_delete(i->if_name);
                if (r < 0 && r != -ENODEV)
                        log_warning_errno(r, "Cannot delete network link %s: %m", i->if_name);
        }
        if (ifs)
                if_freenameindex(ifs);
        free(names);
        return 0;
}

static bool env_has(char **env, const char *key) {
        size_t n = strlen(key);
        for (char **e = env; e && *e; e++)
                if (strncmp(*e, key, n) == 0 && (*e)[n] == '=')
                        return true;
        return false;
}

/* What a sandbox on slot is told about its network: the host end is its DNS
 * server and its HTTP(S) proxy. Appends to *env (keys the caller set win). */
int worker_net_env(const Worker *w, uint64_t slot, char ***env, char *resolv, size_t resolv_size) {
        static const char *const keys[] = { "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy" };
        char host[INET_ADDRSTRLEN], proxy[64];
        AddrPair pair;
        int r;

        r = worker_net_pair(w, slot, &pair);
        if (r < 0)
                return r;
        if (!inet_ntop(AF_INET, &pair.host, host, sizeof host))
                return -EINVAL;
        snprintf(proxy, sizeof proxy, "http://%s:%" PRIu64, host, w->config->gateway_proxy_port);
        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                if (!env_has(*env, keys[i]) && strv_push(env, strjoin(keys[i], "=", proxy)) < 0)
                        return -ENOMEM;
        if (!env_has(*env, "NO_PROXY") && strv_push(env, strdup("NO_PROXY=localhost,127.0.0.1,::1")) < 0)
                return -ENOMEM;
        if (!env_has(*env, "no_proxy") && strv_push(env, strdup("no_proxy=localhost,127.0.0.1,::1")) < 0)
                return -ENOMEM;
        r = snprintf(resolv, resolv_size, "# written by space: the sandbox gateway\nnameserver %s\n", host);
        return r < 0 || (size_t) r >= resolv_size ? -ENOBUFS : 0;
}
