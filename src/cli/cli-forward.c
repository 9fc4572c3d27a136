/* SPDX-License-Identifier: MIT */
/* space forward ID [LOCAL:]REMOTE...: listens on a local TCP port for each
 * mapping and carries every connection to port REMOTE inside the sandbox
 * over the API (GET /v1/sandboxes/{id}/ports/{port}/connect, Upgrade: tcp),
 * like kubectl port-forward, for services that are not HTTP. LOCAL 0 or
 * ":REMOTE" takes a free port; the line "Forwarding from ADDR:LOCAL ->
 * REMOTE" (or a JSON object with --json) tells which, once each listens.
 * Runs until SIGINT or SIGTERM; a connection the sandbox refuses is closed
 * and said on stderr, the others go on. */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include "cli-common.h"
#include "cli-verbs.h"
#include "fd-util.h"
#include "http-client.h"
#include "sock-io.h"

#define FORWARD_MAPPINGS_MAX 16U
#define FORWARD_BUFFER (64U * 1024U)
#define FORWARD_HEADERS "Connection: Upgrade\r\nUpgrade: tcp\r\n"

enum {
        OPT_ADDRESS = 1,
};

static const CliOption options[] = {
        { "address", 0, true, OPT_ADDRESS },
        {},
};

typedef struct Mapping {
        uint16_t local, remote;
        int fd;
        char *target; /* "/v1/sandboxes/ID/ports/REMOTE/connect" */
} Mapping;

typedef struct Connection {
        int fd;
        char target[128];
} Connection;

static volatile sig_atomic_t stop_requested;
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;

static void on_stop(int sig) {
        (void) sig;
        stop_requested = 1;
}

static int parse_port(const char *what, const char *s, bool zero_ok, uint16_t *ret) {
        uint64_t v;

        if (cli_parse_u64(what, s, &v) < 0)
                return -EINVAL;
        if ((v == 0 && !zero_ok) || v > 65535)
                return cli_usage_error("%s: a port must be in [%s, 65535], got '%s'", what, zero_ok ? "0" : "1", s);
        *ret = (uint16_t) v;
        return 0;
}

/* "REMOTE", "LOCAL:REMOTE" or ":REMOTE" (a free local port). */
static int parse_mapping(const char *s, Mapping *ret) {
        const char *colon = strchr(s, ':');
        _cleanup_free_ char *local = NULL;

        *ret = (Mapping){ .fd = -EBADF };
        if (!colon)
                return parse_port(s, s, false, &ret->remote) < 0 ? -EINVAL : (ret->local = ret->remote, 0);
        local = strndup(s, (size_t) (colon - s));
        if (!local)
                return cli_error_errno(-ENOMEM, "out of memory");
        if (strchr(colon + 1, ':'))
                return cli_usage_error("'%s': expected [LOCAL:]REMOTE (use --address for the local address)", s);
        if (*local == 0)
                ret->local = 0;
        else if (parse_port(s, local, true, &ret->local) < 0)
                return -EINVAL;
        return parse_port(s, colon + 1, false, &ret->remote);
}

static int listen_on(const char *address, Mapping *m) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(m->local) };
        socklen_t len = sizeof sa;
        int one = 1, fd;

        if (inet_pton(AF_INET, address, &sa.sin_addr) != 1)
                return cli_usage_error("--address: expected an IPv4 address, got '%s'", address);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return cli_error_errno(-errno, "cannot make a socket: %m");
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0 || listen(fd, 64) < 0 ||
            getsockname(fd, (struct sockaddr *) &sa, &len) < 0) {
                int r = -errno;
                safe_close(fd);
                return cli_error_errno(r, "cannot listen on %s:%u: %m", address, (unsigned) m->local);
        }
        m->fd = fd;
        m->local = ntohs(sa.sin_port);
        return 0;
}

/* One local connection: the API's upgrade, then bytes both ways. */
static void *connection_main(void *arg) {
        Connection *conn = arg;
        _cleanup_(http_client_freep) HttpClient *c = NULL;
        _cleanup_free_ char *headers = NULL, *pending = NULL, *err = NULL;
        _cleanup_close_ int local = conn->fd, remote = -EBADF;
        char target[sizeof conn->target];
        const HttpHead *h = NULL;
        size_t pending_len = 0, n = 0;
        int r, one = 1;

        memcpy(target, conn->target, sizeof target);
        free(conn);
        (void) setsockopt(local, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        r = http_client_new(cli_url(), &c);
        if (r >= 0)
                r = cli_headers(FORWARD_HEADERS, &headers);
        if (r >= 0)
                r = http_client_request(c, "GET", target, headers, NULL, 0);
        if (r >= 0)
                r = http_client_response(c, &h);
        if (r < 0) {
                pthread_mutex_lock(&print_lock);
                (void) cli_report_connect(r);
                pthread_mutex_unlock(&print_lock);
                return NULL;
        }
        if (h->status != 101) {
                int status = h->status;
                (void) http_client_read_body_all(c, CLI_RESPONSE_MAX, &err, &n);
                pthread_mutex_lock(&print_lock);
                (void) cli_report_response(status >= 400 ? status : 502, err, n);
                pthread_mutex_unlock(&print_lock);
                return NULL;
        }
        r = http_client_take_upgraded(c, &remote, &pending, &pending_len);
        if (r >= 0)
                r = sock_relay(local, NULL, 0, remote, pending, pending_len, FORWARD_BUFFER, -1);
        (void) r; /* a connection's end, clean or not, is its own: the forward goes on */
        return NULL;
}

static int start_connection(int fd, const char *target) {
        pthread_attr_t attr;
        pthread_t t;
        Connection *conn = new0(Connection, 1);
        int r;

        if (!conn) {
                safe_close(fd);
                return -ENOMEM;
        }
        conn->fd = fd;
        (void) strscpy(conn->target, sizeof conn->target, target);
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        r = -pthread_create(&t, &attr, connection_main, conn);
        pthread_attr_destroy(&attr);
        if (r < 0) {
                safe_close(fd);
                free(conn);
        }
        return r;
}

static int serve(Mapping *m, size_t n) {
        struct pollfd p[FORWARD_MAPPINGS_MAX];

        for (size_t i = 0; i < n; i++)
                p[i] = (struct pollfd){ .fd = m[i].fd, .events = POLLIN };
        while (!stop_requested) {
                int k = poll(p, n, -1);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return cli_error_errno(-errno, "poll: %m");
                for (size_t i = 0; i < n; i++) {
                        int fd;
                        if (!(p[i].revents & POLLIN))
                                continue;
                        fd = accept4(m[i].fd, NULL, NULL, SOCK_CLOEXEC);
                        if (fd < 0)
                                continue; /* the peer gave up already, or no fd now: the next one */
                        if (start_connection(fd, m[i].target) < 0) {
                                pthread_mutex_lock(&print_lock);
                                fprintf(stderr, "space: cannot serve a connection on port %u: out of resources\n",
                                        (unsigned) m[i].local);
                                pthread_mutex_unlock(&print_lock);
                        }
                }
        }
        return 0;
}

int cli_forward(int argc, char **argv) {
        _cleanup_(cli_parser_done) CliParser p = {};
        _cleanup_(cli_response_done) CliResponse resp = {};
        _cleanup_free_ char *id = NULL, *show = NULL;
        const char *address = "127.0.0.1", *arg = NULL;
        Mapping m[FORWARD_MAPPINGS_MAX] = {};
        struct sigaction sa = { .sa_handler = on_stop };
        size_t n = 0;
        int r;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, options, &arg)) > 0)
                if (r == OPT_ADDRESS)
                        address = arg;
        r = cli_parser_end(&p, r, 2, 1 + FORWARD_MAPPINGS_MAX);
        if (r <= 0)
                return r;
        id = cli_escape(p.pos[0]);
        if (!id)
                return cli_error_errno(-ENOMEM, "out of memory");
        for (n = 0; n + 1 < p.n_pos; n++) {
                r = parse_mapping(p.pos[n + 1], &m[n]);
                if (r >= 0) {
                        char port[8];
                        snprintf(port, sizeof port, "%u", (unsigned) m[n].remote);
                        m[n].target = strjoin("/v1/sandboxes/", id, "/ports/", port, "/connect");
                        if (!m[n].target)
                                r = cli_error_errno(-ENOMEM, "out of memory");
                }
                if (r < 0)
                        goto done;
        }
        /* the sandbox first: a wrong id or key fails here, not at the first connection */
        show = strjoin("/v1/sandboxes/", id);
        if (!show) {
                r = cli_error_errno(-ENOMEM, "out of memory");
                goto done;
        }
        r = cli_call("GET", show, NULL, &resp);
        if (r < 0)
                goto done;
        for (size_t i = 0; i < n; i++) {
                r = listen_on(address, &m[i]);
                if (r < 0)
                        goto done;
                if (arg_json)
                        printf("{\"sandbox_id\":\"%s\",\"address\":\"%s\",\"local_port\":%u,\"remote_port\":%u}\n",
                               p.pos[0], address, (unsigned) m[i].local, (unsigned) m[i].remote);
                else
                        printf("Forwarding from %s:%u -> %u\n", address, (unsigned) m[i].local,
                               (unsigned) m[i].remote);
        }
        fflush(stdout);
        sigemptyset(&sa.sa_mask);
        (void) sigaction(SIGINT, &sa, NULL);
        (void) sigaction(SIGTERM, &sa, NULL);
        r = serve(m, n);
done:
        for (size_t i = 0; i < FORWARD_MAPPINGS_MAX; i++) {
                if (m[i].target)
                        m[i].fd = safe_close(m[i].fd);
                free(m[i].target);
        }
        return r;
}
