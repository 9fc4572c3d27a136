/* SPDX-License-Identifier: MIT */
/* spaced: one binary, several roles.
 *   all        the HTTP API, the controllers and a local worker (one host);
 *   api        the HTTP API of a cluster: sandboxes live on workers;
 *   worker     one host's worker: registers in the store, heartbeats, and
 *              serves API servers and controllers on its internal listener;
 *   controller the controllers of a cluster, one active at a time.
 * A worker process is forked before any thread starts (it clones sandboxes
 * and must stay single-threaded); the rest runs as threads of this process. */
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc-util.h"
#include "api-bootstrap.h"
#include "api.h"
#include "cred-crypt.h"
#include "config.h"
#include "fd-util.h"
#include "http-server.h"
#include "ingress.h"
#include "net-dial.h"
#include "instance.h"
#include "egress-policy.h"
#include "gateway.h"
#include "log.h"
#include "log-file.h"
#include "checkpointer.h"
#include "controller-probe.h"
#include "liveness.h"
#include "shipper.h"
#include "policy.h"
#include "public-suffix.h"
#include "reaper.h"
#include "rotate-master-key.h"
#include "time-util.h"
#include "warm-pool.h"
#include "webhooks.h"
#include "space-build.h"
#include "store.h"
#include "supervise.h"
#include "str-util.h"
#include "worker-client.h"
#include "cluster-listener.h"
#include "cluster-net.h"
#include "cluster-tls.h"
#include "worker-node.h"
#include "worker.h"

#define WORKER_READY_TIMEOUT_MSEC (5 * 60 * 1000) /* first start formats the pool and imports templates */
#define CONTROLLER_INTERVAL_MSEC 1000
#define HEARTBEAT_MIN_MSEC 250

static HttpServer *server;
static volatile sig_atomic_t stopping;
static pid_t worker_pid;

static Ingress *ingress;
static AddrPool forward_pool; /* the sandboxes' addresses, for the API's port forwards (role all) */

_Static_assert(API_PORT_DIAL_TIMEOUT_MSEC == NET_DIAL_TIMEOUT_MSEC, "one timeout for a sandbox port's connect");

static int dial_sandbox(void *userdata, uint32_t slot, uint16_t port, bool wait, int *ret_fd) {
        return wait ? net_dial_sandbox(userdata, slot, port, ret_fd)
                    : net_dial_sandbox_start(userdata, slot, port, ret_fd);
}
static pthread_t ingress_thread;

static void on_signal(int sig) {
        if (sig == SIGHUP) {
                log_file_reopen_request();
                return;
        }
        stopping = 1;
        if (server)
                http_server_stop(server);
        ingress_stop(ingress);
}

static void *ingress_main(void *arg) {
        (void) ingress_run(arg);
        return NULL;
}

/* The ingress beside the API (roles all and api): a failure to listen is
 * logged and leaves it off, not the API. */
static void ingress_start(Api *api, const Config *c) {
        Ingress *g = NULL;
        int r;

        if (isempty(c->ingress_listen))
                return;
        r = ingress_new(api, &g);
        if (r < 0) {
                log_error_errno(r, "Cannot start the ingress on %s: %m (it stays off)", c->ingress_listen);
                return;
        }
        r = pthread_create(&ingress_thread, NULL, ingress_main, g);
        if (r != 0) {
                log_error_errno(-r, "Cannot start the ingress thread: %m");
                ingress_free(g);
                return;
        }
        ingress = g;
        log_info("Ingress listening on %s: {port}-{sandbox}.%s", c->ingress_listen, c->ingress_domain);
}

static void ingress_end(void) {
        Ingress *g = ingress;
        if (!g)
                return;
        ingress_stop(g);
        pthread_join(ingress_thread, NULL);
        ingress = NULL;
        ingress_free(g);
}

static void usage(void) {
        printf("Usage: spaced [--config FILE] [--role all|api|worker|controller] [--KEY=VALUE]...\n"
               "       spaced rotate-master-key --new-key FILE [--config FILE] [--KEY=VALUE]...\n"
               "The space daemon: HTTP API, controllers and a local worker (role all), or one part\n"
               "of a cluster on PostgreSQL (roles api, worker, controller).\n"
               "rotate-master-key re-seals every credential under the key in FILE (32 bytes, 0600, root's)\n"
               "in one store transaction; the configuration names the store and the current key files\n"
               "(docs/operations.md: Rotating the master key).\n\n");
        config_print_help(stdout);
}

static int parse_args(int argc, char *argv[], Config *c) {
        char err[512];
        int r;

        /* --config first, so that flags override the file */
        for (int i = 1; i < argc; i++) {
                const char *v = NULL;
                if (streq(argv[i], "--config") && i + 1 < argc)
                        v = argv[i + 1];
                else if (startswith(argv[i], "--config="))
                        v = argv[i] + strlen("--config=");
                if (v) {
                        r = config_load_file(c, v, err, sizeof err);
                        if (r < 0) {
                                fprintf(stderr, "spaced: %s\n", err);
                                return r;
                        }
                }
        }
        r = config_load_env(c, err, sizeof err);
        if (r < 0) {
                fprintf(stderr, "spaced: environment: %s\n", err);
                return r;
        }
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i], *eq;
                char key[128];
                const char *value;

                if (streq(a, "--help") || streq(a, "-h")) {
                        usage();
                        return 0;
                }
                if (streq(a, "--version")) {
                        printf("spaced %s\n", SPACE_VERSION);
                        return 0;
                }
                if (streq(a, "--config")) {
                        i++;
                        continue;
                }
                if (startswith(a, "--config="))
                        continue;
                if (!startswith(a, "--")) {
                        fprintf(stderr, "spaced: unexpected argument '%s'\n", a);
                        return -EINVAL;
                }
                a += 2;
                eq = strchr(a, '=');
                if (eq) {
                        if ((size_t) (eq - a) >= sizeof key) {
                                fprintf(stderr, "spaced: option too long\n");
                                return -EINVAL;
                        }
                        memcpy(key, a, (size_t) (eq - a));
                        key[eq - a] = 0;
                        value = eq + 1;
                } else {
                        if (strscpy(key, sizeof key, a) < 0 || i + 1 >= argc) {
                                fprintf(stderr, "spaced: option --%s needs a value\n", a);
                                return -EINVAL;
                        }
                        value = argv[++i];
                }
                for (char *p = key; *p; p++)
                        if (*p == '-')
                                *p = '_';
                r = config_set(c, key, value, err, sizeof err);
                if (r < 0) {
                        fprintf(stderr, "spaced: %s\n", err);
                        return r;
                }
        }
        r = config_finish(c, err, sizeof err);
        if (r < 0) {
                fprintf(stderr, "spaced: %s\n", err);
                return r;
        }
        if (!isempty(c->gateway_dns_upstream)) {
                struct sockaddr_in sa;
                if (gateway_parse_upstream(c->gateway_dns_upstream, &sa) < 0) {
                        fprintf(stderr, "spaced: gateway_dns_upstream: '%s' is not an IPv4 address[:port]\n",
                                c->gateway_dns_upstream);
                        return -EINVAL;
                }
        }
        if (!isempty(c->gateway_ca_file) && access(c->gateway_ca_file, R_OK) < 0) {
                fprintf(stderr, "spaced: gateway_ca_file: cannot read '%s': %s\n", c->gateway_ca_file, strerror(errno));
                return -EINVAL;
        }
        if (!isempty(c->default_network)) {
                _cleanup_(egress_policy_freep) EgressPolicy *p = NULL;
                r = egress_policy_parse(c->default_network, strlen(c->default_network), &p, err, sizeof err);
                if (r >= 0)
                        r = egress_policy_check_new(p, err, sizeof err);
                if (r < 0) {
                        fprintf(stderr, "spaced: default_network: %s\n", err);
                        return r;
                }
        }
        return 1;
}

/* One spaced per state directory: an flock on spaced.pid. */
static int take_pidfile(const Config *c, int *ret_fd) {
        char path[PATH_MAX], buf[32];
        int fd;

        snprintf(path, sizeof path, "%s/spaced.pid", c->state_dir);
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
                return log_error_errno(errno, "Cannot open %s: %m", path);
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                int r = errno;
                ssize_t n = r == EWOULDBLOCK ? pread(fd, buf, sizeof buf - 1, 0) : -1;
                if (n > 0) {
                        char name[INSTANCE_NAME_MAX + 1] = "?";
                        buf[n] = 0;
                        buf[strcspn(buf, "\n")] = 0;
                        close(fd);
                        (void) instance_kept_name(c->state_dir, name, sizeof name);
                        return log_error_errno(EBUSY, "Another spaced (instance '%s', pid %s) runs on %s", name, buf,
                                               c->state_dir);
                }
                close(fd);
                return log_error_errno(r == EWOULDBLOCK ? EBUSY : r, "Another spaced runs on %s", c->state_dir);
        }
        snprintf(buf, sizeof buf, "%d\n", (int) getpid());
        if (ftruncate(fd, 0) < 0 || loop_write(fd, buf, strlen(buf)) < 0) {
                close(fd);
                return -EIO;
        }
        *ret_fd = fd;
        return 0;
}

/* This daemon's instance on the host (roles that make things there: all,
 * worker): the unset host settings derived, checked against the other live
 * daemons, registered while this process and its children live. */
static int take_instance(Config *c, Instance **ret) {
        char err[2048];
        int r = instance_setup(c, INSTANCE_REGISTRY_DIR, ret, err, sizeof err);
        if (r < 0)
                return log_error_errno(r, "Refusing to start: %s", err);
        log_info("Instance %s: cgroup root %s, uids %" PRIu64 "-%" PRIu64 ", net_pool %s, nft table %s, links %s*",
                 c->instance, c->cgroup_root, c->uid_base, c->uid_base + c->slots_max * INSTANCE_ID_RANGE - 1,
                 c->net_pool, c->net_table, c->net_link_prefix);
        return 0;
}

static int start_worker(const Config *c) {
        int sp[2];
        char b;
        pid_t pid;
        struct pollfd pfd;

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
                return negative_errno();
        pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0) {
                close(sp[0]);
                _exit(worker_main(c, sp[1], false) < 0 ? 1 : 0);
        }
        close(sp[1]);
        pfd = (struct pollfd){ .fd = sp[0], .events = POLLIN };
        if (poll(&pfd, 1, WORKER_READY_TIMEOUT_MSEC) <= 0 || read(sp[0], &b, 1) != 1) {
                close(sp[0]);
                (void) kill(pid, SIGTERM);
                (void) waitpid(pid, NULL, 0);
                return log_error_errno(EIO, "The worker failed to start (see the log above)");
        }
        close(sp[0]);
        worker_pid = pid;
        return 0;
}

typedef struct Controller {
        const Config *config;
        const char *token;      /* a cluster: workers are reached with it; NULL = the local worker */
        pthread_t thread;
        volatile bool stop;
        /* webhook deliveries run in a thread of their own (a receiver or its DNS may be slow: the
         * policies and the reaper do not wait for them), while this controller is the active one */
        pthread_t webhook_thread;
        atomic_bool deliver;
        atomic_bool tasks_stop;
        /* a cluster: the workers' liveness is judged in a thread of its own too (a worker that
         * stalls in the middle of a call of the round, a ship say, holds up only that round) */
        pthread_t liveness_thread;
        /* a cluster: the leadership is a lease in the store (store_lease_*), taken and
         * renewed by lease_thread on a handle of its own (a long round does not hold up
         * its renewal); the loops lead while lease_token is set and lead_until (this
         * host's monotonic clock) has not passed, with their handles fenced by it */
        pthread_t lease_thread;
        atomic_llong lease_token;
        atomic_llong lead_until;
        char holder[STORE_NAME_MAX];
        ControllerProbeState probe;     /* what controller_listen's /healthz and /metrics read */
        const CredKey *cred_key; /* opens the webhooks' sealed secrets; NULL: none held */
} Controller;

/* The token this controller leads by, or 0. A lease it could not renew in
 * time ends here before it ends in the store (lead_until has a margin). */
static int64_t controller_leading(Controller *ctl) {
        int64_t t = atomic_load(&ctl->lease_token);

        if (t > 0 && mono_usec() >= atomic_load(&ctl->lead_until))
                return 0;
        return t;
}

/* Takes the lease when it is free and renews it every quarter of its length;
 * steps down (lease_token 0) when a renewal is refused (another controller
 * took over: this one is fenced) or when none succeeded in time. */
static void *lease_thread(void *userdata) {
        Controller *ctl = userdata;
        _cleanup_(store_closep) Store *store = NULL;
        uint64_t lease_usec = ctl->config->controller_lease_s * 1000000;
        int64_t margin = (int64_t) MAX(lease_usec / 5, 100000ULL), token = 0;
        bool failing = false;

        log_set_context(NULL, "lease");
        while (!ctl->stop && !stopping) {
                int64_t sent = mono_usec();
                int r;

                if (!store && store_open(ctl->config->store_url, &store) < 0)
                        store = NULL;
                if (!store)
                        r = -EIO;
                else if (token > 0)
                        r = store_lease_renew(store, ctl->holder, token, lease_usec);
                else {
                        r = store_lease_take(store, ctl->holder, lease_usec, &token);
                        if (r >= 0)
                                log_info("Took the controller lease (token %" PRIi64 ", %" PRIu64 " s)", token,
                                         ctl->config->controller_lease_s);
                }
                if (r >= 0) {
                        /* the store's expiry was set after we sent: it is at least this far */
                        atomic_store(&ctl->lead_until, sent + (int64_t) lease_usec - margin);
                        atomic_store(&ctl->lease_token, token);
                        failing = false;
                } else if (r == -EBUSY) {
                        failing = false; /* another controller leads */
                } else if (r == -ESTALE) {
                        log_warning("Fenced: the controller lease of token %" PRIi64
                                    " expired or was taken over; stepping down (this controller writes nothing more)",
                                    token);
                        atomic_store(&ctl->lease_token, 0);
                        token = 0;
                } else {
                        /* a store outage: the heartbeats missed meanwhile are judged by nobody */
                        liveness_hold(ctl->config->worker_lost_timeout_s, now_usec());
                        if (!failing)
                                log_warning_errno(r, "Cannot %s the controller lease: %m",
                                                  token > 0 ? "renew" : "take");
                        failing = true;
                        if (token > 0 && mono_usec() >= atomic_load(&ctl->lead_until)) {
                                log_warning("Cannot renew the controller lease of token %" PRIi64
                                            " before it ends: stepping down", token);
                                atomic_store(&ctl->lease_token, 0);
                                token = 0;
                        }
                }
                (void) poll(NULL, 0, (int) MIN(lease_usec / 4000, (uint64_t) CONTROLLER_INTERVAL_MSEC));
        }
        if (token > 0 && controller_leading(ctl) == token && store &&
            store_lease_release(store, ctl->holder, token) >= 0)
                log_info("Released the controller lease (token %" PRIi64 ")", token);
        atomic_store(&ctl->lease_token, 0);
        return NULL;
}

/* Still the active one (role all: always). Checked between the steps of a
 * round: a controller that lost its lease meanwhile stops short (and its
 * fenced handle would write nothing anyway). */
static bool still_leading(Controller *ctl, int64_t token) {
        return !ctl->token || controller_leading(ctl) == token;
}

/* One round of every controller. */
static void controller_round(Controller *ctl, Store *store, WorkerClient *wc, int64_t token) {
        /* policies before the reaper: a timeout warning comes before the kill */
        if (still_leading(ctl, token))
                (void) policy_run_once(store, wc, now_usec());
        if (still_leading(ctl, token))
                (void) reaper_run_once(store, wc, now_usec());
        if (still_leading(ctl, token))
                (void) checkpointer_run_once(store, wc, ctl->config, now_usec());
        if (still_leading(ctl, token))
                (void) warm_pool_run_once(store, wc, ctl->config, now_usec());
        /* the workers' heartbeats are in the store's time */
        if (ctl->token && still_leading(ctl, token))
                (void) shipper_run_once(store, wc, ctl->config, store_now_usec(store));
}

/* A step of the active controller in a thread of its own: while leading (role all: while the
 * controller delivers), on its own store handle, fenced by the lease's token in a cluster. */
static void leader_task(Controller *ctl, const char *name, void (*step)(Controller *ctl, Store *store)) {
        _cleanup_(store_closep) Store *store = NULL;
        int64_t fenced = 0;

        log_set_context(NULL, name);
        while (!ctl->stop && !stopping && !atomic_load(&ctl->tasks_stop)) {
                int64_t token = ctl->token ? controller_leading(ctl) : 0;
                if (ctl->token ? token > 0 : atomic_load(&ctl->deliver)) {
                        if (!store && store_open(ctl->config->store_url, &store) < 0) {
                                store = NULL;
                                if (ctl->token) /* the heartbeats missed meanwhile are judged by nobody */
                                        liveness_hold(ctl->config->worker_lost_timeout_s, now_usec());
                        }
                        if (store && token > 0 && token != fenced && store_fence(store, token) >= 0)
                                fenced = token;
                        if (store && (!ctl->token || fenced == token))
                                step(ctl, store);
                }
                (void) poll(NULL, 0, CONTROLLER_INTERVAL_MSEC);
        }
}

static void webhooks_step(Controller *ctl, Store *store) {
        (void) webhooks_run_once(store, ctl->config, ctl->cred_key, now_usec());
}

static void *webhook_thread(void *userdata) {
        leader_task(userdata, "webhooks", webhooks_step);
        return NULL;
}

static void liveness_step(Controller *ctl, Store *store) {
        (void) liveness_run_once(store, ctl->config->worker_lost_timeout_s, now_usec());
}

static void *liveness_thread(void *userdata) {
        leader_task(userdata, "liveness", liveness_step);
        return NULL;
}

static void *controller_loop(Controller *ctl);

static void *controller_thread(void *userdata) {
        Controller *ctl = userdata;
        bool started, leasing = false, judging = false;

        atomic_store(&ctl->deliver, ctl->token == NULL); /* role all: the only controller */
        atomic_store(&ctl->tasks_stop, false);
        atomic_store(&ctl->lease_token, 0);
        if (ctl->token) {
                char host[64] = "", rnd[9] = "";
                (void) gethostname(host, sizeof host - 1);
                (void) random_alnum(rnd, 8);
                snprintf(ctl->holder, sizeof ctl->holder, "%s:%d:%s", host, (int) getpid(), rnd);
                leasing = pthread_create(&ctl->lease_thread, NULL, lease_thread, ctl) == 0;
                if (!leasing) {
                        log_error("Cannot start the lease thread: this controller never leads");
                        return NULL;
                }
        }
        started = pthread_create(&ctl->webhook_thread, NULL, webhook_thread, ctl) == 0;
        if (!started)
                log_error("Cannot start the webhook thread: webhooks are not delivered");
        judging = ctl->token && pthread_create(&ctl->liveness_thread, NULL, liveness_thread, ctl) == 0;
        if (ctl->token && !judging)
                log_error("Cannot start the liveness thread: this controller never leads");
        else
                (void) controller_loop(ctl);
        atomic_store(&ctl->deliver, false);
        atomic_store(&ctl->tasks_stop, true);
        if (started)
                pthread_join(ctl->webhook_thread, NULL);
        if (judging)
                pthread_join(ctl->liveness_thread, NULL);
        if (leasing) {
                ctl->stop = true;
                pthread_join(ctl->lease_thread, NULL);
        }
        return NULL;
}

static void *controller_loop(Controller *ctl) {
        _cleanup_(store_closep) Store *store = NULL;
        _cleanup_(worker_client_freep) WorkerClient *wc = NULL;
        char sock[PATH_MAX], addr[PATH_MAX + 8], agents[PATH_MAX];
        bool leader = false;
        int64_t fenced = 0, token = 0;
        int r;

        log_set_context(NULL, "controller");
        (void) worker_socket_path(ctl->config, sock, sizeof sock);
        (void) worker_agent_dir(ctl->config, agents, sizeof agents);
        snprintf(addr, sizeof addr, "unix:%s", sock);
        r = store_open(ctl->config->store_url, &store);
        if (r >= 0)
                r = ctl->token ? worker_client_new_cluster(store, ctl->token, ctl->config->worker_lost_timeout_s, &wc)
                               : worker_client_new(addr, agents, &wc);
        if (r < 0) {
                log_error_errno(r, "Controller cannot start: %m");
                if (!ctl->token)
                        return NULL;
        }
        while (!ctl->stop && !stopping) {
                atomic_store(&ctl->probe.loop_turn_usec, mono_usec());
                /* role all: the worker is supervise.c's (a dead one is started again) */
                if (!ctl->token) {
                        controller_round(ctl, store, wc, 0);
                        (void) poll(NULL, 0, CONTROLLER_INTERVAL_MSEC);
                        continue;
                }
                /* a cluster: one active controller, by a lease in the store */
                if (!store) {
                        r = store_open(ctl->config->store_url, &store);
                        if (r >= 0)
                                r = worker_client_new_cluster(store, ctl->token, ctl->config->worker_lost_timeout_s,
                                                              &wc);
                        if (r < 0) {
                                store = store_close(store);
                                liveness_hold(ctl->config->worker_lost_timeout_s, now_usec());
                                (void) poll(NULL, 0, CONTROLLER_INTERVAL_MSEC);
                                continue;
                        }
                }
                /* the lease thread's token; this handle's writes are fenced by it */
                int64_t now_token = controller_leading(ctl);
                if (now_token > 0 && now_token != fenced) {
                        r = store_fence(store, now_token);
                        if (r < 0) {
                                log_warning_errno(r, "Cannot fence the controller's store handle: %m");
                                liveness_hold(ctl->config->worker_lost_timeout_s, now_usec());
                        } else
                                fenced = now_token;
                }
                bool now_leader = now_token > 0 && fenced == now_token;
                if (now_leader != leader || (now_leader && now_token != token)) {
                        if (now_leader)
                                log_info("This controller is now the active one (lease token %" PRIi64 ")", now_token);
                        else
                                log_info("This controller is no longer the active one (lease token %" PRIi64 ")",
                                         token);
                }
                leader = now_leader;
                token = now_token;
                atomic_store(&ctl->probe.lease_token, leader ? token : 0);
                atomic_store(&ctl->deliver, leader);
                if (leader)
                        controller_round(ctl, store, wc, token);
                (void) poll(NULL, 0, CONTROLLER_INTERVAL_MSEC);
        }
        return NULL;
}

/* The shared steps of every role: root, the state directory, the lock. */
static int common_setup(const Config *config, int *ret_pidfd) {
        char path[PATH_MAX];
        int r;

        if (geteuid() != 0)
                return log_error_errno(EPERM, "spaced needs root (it creates namespaces, cgroups and mounts)");
        r = mkdir_p(config->state_dir, 0700);
        if (r < 0)
                return log_error_errno(r, "Cannot create %s: %m", config->state_dir);
        r = take_pidfile(config, ret_pidfd);
        if (r < 0)
                return r;
        snprintf(path, sizeof path, "%s/tmp", config->state_dir);
        (void) rm_rf(path); /* leftovers of uploads cut short by a crash (we hold the lock now) */
        return mkdir_p(path, 0700);
}

/* master_key_previous_file, if set, into k's ring. Logs why it fails. */
static int master_key_load_previous(const Config *config, CredKey *k) {
        _cleanup_(cred_key_freep) CredKey *prev = NULL;
        char errbuf[512];
        int r;

        if (isempty(config->master_key_previous_file))
                return 0;
        r = cred_key_open_file(config->master_key_previous_file, false, &prev, errbuf, sizeof errbuf);
        if (r < 0)
                return log_error_errno(r, "Cannot use the previous master key (master_key_previous_file): %s",
                                       errbuf[0] ? errbuf : strerror(-r));
        r = cred_key_set_previous(k, prev);
        if (r == -EEXIST)
                return log_error_errno(r, "master_key_previous_file %s is the same key as master_key_file",
                                       config->master_key_previous_file);
        if (r < 0)
                return log_error_errno(r, "Cannot use the previous master key: %m");
        prev = NULL; /* k owns it */
        return 0;
}

/* The credentials' master key (master_key_file, else <state_dir>/master.key,
 * which role all makes at its first start; a cluster role makes none: every
 * API server and worker needs the same file), checked against the
 * fingerprint the store keeps (the first process to load a key records it).
 * *ret NULL: a cluster role without master_key_file, which offers no
 * credentials. Logs why it fails. */
static int master_key_load(const Config *config, Store *store, CredKey **ret) {
        _cleanup_(cred_key_freep) CredKey *k = NULL;
        bool cluster = !streq(config->role, "all"), given = !isempty(config->master_key_file);
        char path[PATH_MAX], errbuf[512];
        int r;

        *ret = NULL;
        if (cluster && !given) {
                if (!isempty(config->master_key_previous_file))
                        return log_error_errno(EINVAL, "master_key_previous_file needs master_key_file");
                log_info("No master_key_file: this %s offers no credentials", config->role);
                return 0;
        }
        if (given)
                (void) strscpy(path, sizeof path, config->master_key_file);
        else
                snprintf(path, sizeof path, "%s/%s", config->state_dir, CRED_MASTER_KEY_FILE);
        r = cred_key_open_file(path, !given, &k, errbuf, sizeof errbuf);
        if (r < 0)
                return log_error_errno(r, "Cannot use the credentials' master key: %s",
                                       errbuf[0] ? errbuf : strerror(-r));
        r = master_key_load_previous(config, k);
        if (r < 0)
                return r;
        r = cluster_master_key_check(store, k, path);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(k);
        return 0;
}

static void install_signals(void) {
        struct sigaction sa = { .sa_handler = on_signal }; /* no SA_RESTART: sleeps end at once */
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
}

/* The store at start (roles api and worker): a database that is not up yet
 * (a failover, a cluster starting in any order) is waited for with backoff,
 * 1 s doubling to 30 s, until it answers or a signal ends us; a store URL
 * that cannot work is an error at once. */
#define STORE_RETRY_MAX_MSEC 30000
static int store_open_retry(const char *url, Store **ret) {
        int wait_msec = 1000, r;

        for (;;) {
                r = store_open(url, ret);
                if (r >= 0 || r == -EINVAL || r == -EPROTONOSUPPORT || r == -ENAMETOOLONG || r == -EACCES ||
                    r == -EKEYREJECTED || stopping)
                        return r;
                log_warning_errno(r, "Cannot open the store yet: %m (trying again in %d s)", wait_msec / 1000);
                (void) poll(NULL, 0, wait_msec);
                wait_msec = MIN(wait_msec * 2, STORE_RETRY_MAX_MSEC);
        }
}

static void remove_pidfile(const Config *config) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/spaced.pid", config->state_dir);
        (void) unlink(path);
}

static void stop_worker_process(void) {
        if (worker_pid > 0) {
                (void) kill(worker_pid, SIGTERM);
                (void) waitpid(worker_pid, NULL, 0);
                worker_pid = 0;
        }
}

/* role worker: register, start the worker process and the internal
 * listener, heartbeat until told to stop. */
static int run_worker(Config *config) {
        _cleanup_(cluster_token_freep) char *token = NULL;
        _cleanup_(store_closep) Store *store = NULL;
        _cleanup_(worker_client_freep) WorkerClient *local = NULL;
        _cleanup_close_ int pidfd = -EBADF;
        _cleanup_(instance_freep) Instance *host_instance = NULL;
        ClusterListener *gw = NULL;
        char instance[STORE_ID_MAX], sock[PATH_MAX], addr[PATH_MAX + 8], agents[PATH_MAX];
        char templates[STORE_WORKER_TEMPLATES_MAX] = "";
        char runtimes[STORE_WORKER_LIST_MAX] = "", accelerators[STORE_WORKER_LIST_MAX] = "";
        uint64_t beat_msec = MAX(config->worker_lost_timeout_s * 1000 / 4, (uint64_t) HEARTBEAT_MIN_MSEC);
        int r;

        if (common_setup(config, &pidfd) < 0 || take_instance(config, &host_instance) < 0)
                return 1;
        if (cluster_token_load(config->cluster_token_file, &token) < 0 ||
            cluster_tls_setup(config->cluster_tls_cert, config->cluster_tls_key, config->cluster_tls_ca) < 0)
                return 1;
        /* before the worker process forks: it inherits it (sandbox processes set their own) */
        if (streq(config->worker_oom_protect, "on")) {
                r = write_string_file("/proc/self/oom_score_adj", WORKER_OOM_SCORE_ADJ_STR);
                if (r < 0)
                        log_warning_errno(r, "Cannot set oom_score_adj " WORKER_OOM_SCORE_ADJ_STR
                                          " (worker_oom_protect; needs CAP_SYS_RESOURCE): %m");
                else
                        log_info("oom_score_adj is " WORKER_OOM_SCORE_ADJ_STR " (worker_oom_protect)");
        }
        r = worker_node_instance(config->state_dir, instance, sizeof instance);
        if (r < 0)
                return log_error_errno(r, "Cannot make an instance id: %m"), 1;
        /* registered before the worker process reconciles this name's sandboxes:
         * a second worker under a live name must not touch them */
        r = store_open_retry(config->store_url, &store);
        if (r < 0)
                return log_error_errno(r, "Cannot open the store: %m"), 1;
        /* a worker with another token would register and never be reachable */
        r = cluster_token_check(store, token, config->cluster_token_file);
        if (r >= 0) {
                /* its gateway reads the file itself (it opens the sealed values): only checked here */
                _cleanup_(cred_key_freep) CredKey *key = NULL;
                r = master_key_load(config, store, &key);
        }
        if (r < 0) {
                if (r == -EKEYREJECTED)
                        log_error("Refusing to register worker '%s'", config->worker_name);
                remove_pidfile(config);
                return 1;
        }
        r = worker_node_register(store, config, instance, "", NULL, NULL);
        store = store_close(store); /* not shared with the forked worker */
        if (r < 0)
                return 1;

        r = start_worker(config); /* before any thread */
        if (r < 0)
                goto deregister;
        r = cluster_listener_start(config, token, &gw);
        if (r < 0)
                goto stop;
        install_signals();
        (void) worker_socket_path(config, sock, sizeof sock);
        (void) worker_agent_dir(config, agents, sizeof agents);
        snprintf(addr, sizeof addr, "unix:%s", sock);
        r = worker_client_new(addr, agents, &local);
        if (r < 0)
                goto stop;
        /* what the worker process can run (the vm runtime probes at its start) */
        {
                ApiError e = {};
                if (worker_runtimes(local, runtimes, sizeof runtimes, accelerators, sizeof accelerators, &e) < 0)
                        log_warning("Cannot read the worker's runtimes: %s", e.message);
                else if (store_open(config->store_url, &store) >= 0) {
                        (void) worker_templates(local, templates, sizeof templates, &e);
                        r = worker_node_register(store, config, instance, templates, runtimes, accelerators);
                        if (r == -EEXIST)
                                goto stop;
                        if (r < 0)
                                store = store_close(store); /* the heartbeat registers again */
                        r = 0;
                }
        }
        log_info("spaced %s worker %s serving on %s (state %s)", SPACE_VERSION, config->worker_name,
                 config->worker_listen, config->state_dir);
        /* the heartbeat never waits on a busy worker process (a microVM that
         * boots for half a minute): it goes out with the templates known last */
        worker_client_set_reply_timeout(local, (int) MAX(beat_msec / 2, (uint64_t) HEARTBEAT_MIN_MSEC));
        while (!stopping) {
                ApiError e = {};
                int status;

                if (waitpid(worker_pid, &status, WNOHANG) == worker_pid) {
                        log_error("The worker process exited (status 0x%x); stopping", status);
                        worker_pid = 0;
                        r = -ECHILD;
                        break;
                }
                r = worker_templates(local, templates, sizeof templates, &e);
                if (r == -ETIMEDOUT)
                        log_debug("The worker process is busy: heartbeat with the templates known last");
                else if (r < 0)
                        log_warning("Cannot list the templates: %s", e.message);
                r = 0;
                if (!store && store_open(config->store_url, &store) < 0)
                        store = NULL;
                if (store) {
                        r = worker_node_heartbeat(store, config, instance, templates, runtimes, accelerators);
                        if (r == -EEXIST)
                                break; /* another took the name while we were lost */
                        if (r < 0) {
                                log_warning_errno(r, "Heartbeat failed (the store): %m");
                                store = store_close(store);
                        }
                        r = 0;
                }
                (void) poll(NULL, 0, (int) beat_msec);
        }
stop:
        cluster_listener_free(gw);
        stop_worker_process();
deregister:
        if (!store)
                (void) store_open(config->store_url, &store);
        if (store)
                (void) store_worker_stop(store, config->worker_name, instance);
        remove_pidfile(config);
        log_info("spaced worker %s stopped", config->worker_name);
        return r < 0 ? 1 : 0;
}

/* Webhook secrets stored in clear (rows from before they were sealed) sealed now. */
static void seal_webhook_secrets(Store *store, const CredKey *key) {
        uint64_t n = 0;
        int r = webhooks_seal_stored(store, key, &n);

        if (r < 0)
                log_warning_errno(r, "Cannot seal the webhook secrets stored in clear: %m");
        else if (n > 0)
                log_info("Sealed %" PRIu64 " webhook secrets stored in clear under the master key", n);
}

/* role controller: the controllers, active while this process holds the lease. */
static int run_controller(const Config *config) {
        _cleanup_(cred_key_freep) CredKey *cred_key = NULL;
        _cleanup_(cluster_token_freep) char *token = NULL;
        _cleanup_close_ int pidfd = -EBADF;
        Controller ctl = { .config = config };

        if (common_setup(config, &pidfd) < 0)
                return 1;
        if (cluster_token_load(config->cluster_token_file, &token) < 0 ||
            cluster_tls_setup(config->cluster_tls_cert, config->cluster_tls_key, config->cluster_tls_ca) < 0)
                return 1;
        ctl.token = token;
        install_signals();
        /* the token must be the cluster's; until the store answers, nothing to do anyway */
        for (unsigned attempt = 0; !stopping; attempt++) {
                _cleanup_(store_closep) Store *store = NULL;
                int r = store_open(config->store_url, &store);
                if (r >= 0)
                        r = cluster_token_check(store, token, config->cluster_token_file);
                if (r == -EKEYREJECTED) {
                        remove_pidfile(config);
                        return 1;
                }
                /* the webhooks' secrets are sealed: master_key_file opens them (none: they do not deliver) */
                if (r >= 0 && master_key_load(config, store, &cred_key) < 0) {
                        remove_pidfile(config);
                        return 1;
                }
                if (r >= 0)
                        break;
                if (attempt == 0)
                        log_warning_errno(r, "The store is not available yet (%m); retrying every second");
                (void) poll(NULL, 0, 1000);
        }
        ControllerProbe *probe = NULL;
        if (!isempty(config->controller_listen) &&
            controller_probe_start(config->controller_listen, config->controller_stall_s, &ctl.probe, &probe) < 0) {
                remove_pidfile(config);
                return 1;
        }
        ctl.cred_key = cred_key;
        log_info("spaced %s controller (state %s), waiting for the lease", SPACE_VERSION, config->state_dir);
        (void) controller_thread(&ctl);
        controller_probe_stop(probe);
        remove_pidfile(config);
        log_info("spaced controller stopped");
        return 0;
}

/* role api: the HTTP API of a cluster. */
static int run_api(const Config *config) {
        _cleanup_(cluster_token_freep) char *token = NULL;
        _cleanup_(cred_key_freep) CredKey *cred_key = NULL;
        _cleanup_(store_closep) Store *store = NULL;
        _cleanup_close_ int pidfd = -EBADF;
        Api *api = NULL;
        int r;

        if (common_setup(config, &pidfd) < 0)
                return 1;
        if (cluster_token_load(config->cluster_token_file, &token) < 0 ||
            cluster_tls_setup(config->cluster_tls_cert, config->cluster_tls_key, config->cluster_tls_ca) < 0)
                return 1;
        r = store_open_retry(config->store_url, &store);
        if (r < 0)
                return log_error_errno(r, "Cannot open the store: %m"), 1;
        r = cluster_token_check(store, token, config->cluster_token_file);
        if (r < 0)
                return 1;
        r = master_key_load(config, store, &cred_key);
        if (r < 0)
                return 1;
        seal_webhook_secrets(store, cred_key);
        r = api_bootstrap(config, store);
        store = store_close(store);
        if (r < 0)
                return 1;
        r = api_new(config, &api);
        if (r >= 0 && cred_key) {
                api_set_cred_key(api, cred_key);
                cred_key = NULL;
        }
        if (r >= 0)
                r = api_set_cluster_token(api, token);
        if (r >= 0)
                r = http_server_new(config->listen, api_handle, api, &server);
        if (r >= 0) {
                http_server_set_head_hook(server, api_head_hook);
                http_server_set_timeouts(server, 0, 0, (int) (config->http_stall_s * 1000));
                http_server_set_peer_waiting_max(server, (unsigned) config->peer_idle_connections_max);
                http_server_set_thread_done_hook(server, api_thread_done);
        }
        if (r < 0) {
                log_error_errno(r, "Cannot listen on %s: %m", config->listen);
                api_free(api);
                return 1;
        }
        install_signals();
        ingress_start(api, config);
        log_info("spaced %s api listening on %s (state %s, cluster store)", SPACE_VERSION, config->listen,
                 config->state_dir);
        r = http_server_run(server);
        ingress_end();
        http_server_free(server);
        server = NULL;
        api_free(api);
        remove_pidfile(config);
        log_info("spaced api stopped");
        return r < 0 ? 1 : 0;
}

/* spaced rotate-master-key --new-key FILE [--stall-after N] [daemon options]. */
/* The configuration from the defaults and the command line, and the log set
 * by it: > 0 to go on, 0 when done (--help), < 0 on a bad argument. */
static int configure(int argc, char **argv, Config *config) {
        int r, lvl;

        config_defaults(config);
        r = parse_args(argc, argv, config);
        if (r <= 0)
                return r;
        lvl = log_parse_level(config->log_level);
        log_set_max_level(lvl < 0 ? LOG_INFO_ : lvl);
        log_set_json(streq(config->log_format, "json"));
        log_set_prefix("spaced");
        return r;
}

static int main_rotate(int argc, char *argv[]) {
        _cleanup_free_ char **rest = new0(char *, (size_t) argc + 1);
        const char *new_key = NULL;
        long stall_after = -1;
        Config config;
        int n = 0, r;

        if (!rest)
                return 1;
        rest[n++] = argv[0];
        for (int i = 2; i < argc; i++) {
                const char *v = NULL;
                bool stall = false;

                if (streq(argv[i], "--new-key") || streq(argv[i], "--stall-after")) {
                        stall = streq(argv[i], "--stall-after");
                        if (i + 1 >= argc) {
                                fprintf(stderr, "spaced: %s needs a value\n", argv[i]);
                                return 2;
                        }
                        v = argv[++i];
                } else if ((v = startswith(argv[i], "--new-key=")))
                        ;
                else if ((v = startswith(argv[i], "--stall-after=")))
                        stall = true;
                else {
                        rest[n++] = argv[i];
                        continue;
                }
                if (!stall)
                        new_key = v;
                else {
                        unsigned u;
                        if (safe_atou(v, &u) < 0 || u > INT_MAX) {
                                fprintf(stderr, "spaced: --stall-after needs a number\n");
                                return 2;
                        }
                        stall_after = (long) u;
                }
        }
        r = configure(n, rest, &config);
        if (r <= 0)
                return r < 0 ? 2 : 0;
        return rotate_master_key(&config, new_key, stall_after);
}

/* spaced worker-process first|restart [daemon options]: the worker process
 * of role all, started by supervise.c (not by hand). Its ready byte goes to
 * fd 3; fds 4 and 5 are its share of spaced's locks (of the state dir and of
 * the instance's registry entry: held while it lives, never passed on to what
 * it executes); its instance settings come as options (derived by spaced);
 * its stdout and stderr are set up by its supervisor. */
static int main_worker_process(int argc, char *argv[]) {
        _cleanup_free_ char **rest = new0(char *, (size_t) argc + 1);
        Config config;
        int n = 0, r;

        if (!rest || argc < 3 || (!streq(argv[2], "first") && !streq(argv[2], "restart"))) {
                fprintf(stderr, "spaced: worker-process is started by spaced itself (role all)\n");
                return 2;
        }
        rest[n++] = argv[0];
        for (int i = 3; i < argc; i++)
                rest[n++] = argv[i];
        r = configure(n, rest, &config);
        if (r <= 0)
                return r < 0 ? 2 : 0;
        if (!streq(config.role, "all")) {
                fprintf(stderr, "spaced: worker-process belongs to role all\n");
                return 2;
        }
        if (fcntl(4, F_SETFD, FD_CLOEXEC) < 0 || fcntl(5, F_SETFD, FD_CLOEXEC) < 0) {
                fprintf(stderr, "spaced: worker-process needs spaced's locks as fds 4 and 5\n");
                return 2;
        }
        signal(SIGPIPE, SIG_IGN);
        signal(SIGHUP, SIG_IGN); /* spaced's: it reopens the log for everyone */
        (void) public_suffix_init(); /* its gateway checks wildcards too; spaced warned already */
        /* as the forked worker did: no exit handlers (sanitizer leak checks of a process that
         * ends with sandboxes running, whose state it keeps on purpose) */
        _exit(worker_main(&config, 3, streq(argv[2], "restart")) < 0 ? 1 : 0);
}

int main(int argc, char *argv[]) {
        _cleanup_(store_closep) Store *store = NULL;
        _cleanup_close_ int pidfd = -EBADF;
        _cleanup_(cred_key_freep) CredKey *cred_key = NULL;
        _cleanup_(instance_freep) Instance *instance = NULL;
        Controller ctl = {};
        Supervisor *sup = NULL;
        Api *api = NULL;
        Config config;
        char path[PATH_MAX];
        int log_child_fd = -EBADF, r;

        if (argc > 1 && streq(argv[1], "rotate-master-key"))
                return main_rotate(argc, argv);
        if (argc > 1 && streq(argv[1], "worker-process"))
                return main_worker_process(argc, argv);
        r = configure(argc, argv, &config);
        if (r <= 0)
                return r < 0 ? 2 : 0;
        signal(SIGPIPE, SIG_IGN);
        /* the Public Suffix List once, before any thread (wildcard checks) */
        if (public_suffix_init() < 0)
                log_warning("The Public Suffix List is incomplete (libpsl's built-in list or %s of the "
                            "publicsuffix package missing): wildcard host patterns in credentials (and, without "
                            "libpsl's list, in allow rules) are refused", PUBLIC_SUFFIX_DAT_PATH);
        if (!isempty(config.log_file) && !streq(config.role, "all")) {
                /* a cluster role logs to stderr (the journal, the container's log) */
                fprintf(stderr, "spaced: log_file is for role all; role %s logs to stderr\n", config.role);
                return 2;
        }
        if (streq(config.role, "worker"))
                return run_worker(&config);
        if (streq(config.role, "api"))
                return run_api(&config);
        if (streq(config.role, "controller"))
                return run_controller(&config);
        if (geteuid() != 0) {
                log_error("spaced needs root (it creates namespaces, cgroups and mounts)");
                return 2;
        }
        signal(SIGPIPE, SIG_IGN);

        if (!isempty(config.log_file)) {
                r = log_file_open(config.log_file, config.log_max_mb * 1024 * 1024, &log_child_fd);
                if (r < 0)
                        return log_error_errno(r, "Cannot open the log file %s: %m", config.log_file), 1;
        }
        r = mkdir_p(config.state_dir, 0700);
        if (r < 0)
                return log_error_errno(r, "Cannot create %s: %m", config.state_dir), 1;
        if (take_pidfile(&config, &pidfd) < 0)
                return 1;
        snprintf(path, sizeof path, "%s/tmp", config.state_dir);
        (void) rm_rf(path); /* leftovers of uploads cut short by a crash (we hold the lock now) */
        if (mkdir_p(path, 0700) < 0)
                return 1;
        if (take_instance(&config, &instance) < 0)
                return 1;

        r = store_open(config.store_url, &store);
        if (r < 0)
                return log_error_errno(r, "Cannot open the store %s: %m", config.store_url), 1;
        r = api_bootstrap(&config, store);
        if (r < 0)
                return 1;

        /* The credentials' master key, before anything touches the host. The
         * worker forked next does not inherit its pages (MADV_DONTFORK). */
        r = master_key_load(&config, store, &cred_key);
        if (r < 0)
                return 1;
        seal_webhook_secrets(store, cred_key);

        /* the worker process, started again whenever it dies (a fresh exec: spaced has threads) */
        r = supervise_start(argv, &config, log_child_fd, (const int[]) { pidfd, instance_lock_fd(instance) }, 2,
                            &sup);
        if (r < 0) {
                log_error("The worker failed to start (see the log above)");
                return 1;
        }

        r = api_new(&config, &api);
        if (r >= 0) {
                api_set_cred_key(api, cred_key);
                ctl.cred_key = cred_key; /* the api owns it; it outlives the controller thread */
                cred_key = NULL;
                api_set_worker_status(api, supervise_status(sup));
                /* port forwards reach this host's sandboxes by their slot's address */
                if (!isempty(config.net_pool) &&
                    addr_pool_parse(config.net_pool, strlen(config.net_pool), &forward_pool) >= 0)
                        api_set_port_dialer(api, dial_sandbox, &forward_pool);
        }
        if (r >= 0)
                r = http_server_new(config.listen, api_handle, api, &server);
        if (r >= 0) {
                http_server_set_head_hook(server, api_head_hook);
                http_server_set_timeouts(server, 0, 0, (int) (config.http_stall_s * 1000));
                http_server_set_peer_waiting_max(server, (unsigned) config.peer_idle_connections_max);
                http_server_set_thread_done_hook(server, api_thread_done);
        }
        if (r < 0) {
                log_error_errno(r, "Cannot listen on %s: %m", config.listen);
                goto stop_worker;
        }

        struct sigaction sa = { .sa_handler = on_signal };
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sa.sa_flags = SA_RESTART; /* SIGHUP: the log is reopened; nothing else is interrupted */
        sigaction(SIGHUP, &sa, NULL);

        ingress_start(api, &config);
        ctl.config = &config;
        r = pthread_create(&ctl.thread, NULL, controller_thread, &ctl);
        if (r != 0) {
                r = -r;
                goto stop_server;
        }
        if (SPACE_BENCH_NO_HARDENING)
                log_warning("THIS BUILD RUNS SANDBOXES WITHOUT SECCOMP, CAPABILITY DROP AND /proc MASKS "
                            "(meson -Dbench_no_hardening=true, for benchmarks only): do not use it for anything else");
        log_info("spaced %s listening on %s (state %s, store %s)", SPACE_VERSION, config.listen, config.state_dir,
                 store_backend_name(store));
        r = http_server_run(server);
        ctl.stop = true;
        pthread_join(ctl.thread, NULL);

stop_server:
        ingress_end();
        http_server_free(server);
        server = NULL;
        api_free(api);
stop_worker:
        sup = supervise_stop(sup);
        snprintf(path, sizeof path, "%s/spaced.pid", config.state_dir);
        (void) unlink(path);
        log_info("spaced stopped");
        return r < 0 ? 1 : 0;
}
