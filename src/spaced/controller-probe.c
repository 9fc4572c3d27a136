/* SPDX-License-Identifier: MIT */
/* The controller's probe listener: see controller-probe.h. One request per
 * connection, answered at once from atomics (never waits on the store). */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "alloc-util.h"
#include "cluster-net.h"
#include "controller-probe.h"
#include "fd-util.h"
#include "log.h"
#include "shipper.h"
#include "str-util.h"
#include "time-util.h"
#include "worker-client.h"

#define PROBE_READ_MSEC 2000
#define PROBE_REQUEST_MAX 2048

struct ControllerProbe {
        int fd;
        uint64_t stall_s;
        ControllerProbeState *state;
        pthread_t thread;
        atomic_bool stop;
};

static void reply(int fd, const char *status, const char *type, const char *body) {
        char head[256];
        int n = snprintf(head, sizeof head,
                         "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                         status, type, strlen(body));
        if (n > 0)
                (void) loop_write(fd, head, (size_t) n);
        (void) loop_write(fd, body, strlen(body));
}

/* Reads up to the end of the request head (or PROBE_REQUEST_MAX, or a
 * silent client's timeout): the request line is all that counts. */
static ssize_t read_head(int fd, char *buf, size_t size) {
        size_t n = 0;

        while (n + 1 < size) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                ssize_t k;

                if (poll(&p, 1, PROBE_READ_MSEC) <= 0)
                        return -ETIMEDOUT;
                k = read(fd, buf + n, size - 1 - n);
                if (k <= 0)
                        return k < 0 ? -errno : -ECONNRESET;
                n += (size_t) k;
                buf[n] = 0;
                if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
                        return (ssize_t) n;
        }
        return -E2BIG;
}

/* With cluster TLS: this process's handshakes with workers, appended to body. */
static void tls_metrics(char *body, size_t size) {
        size_t n = strlen(body);

        (void) worker_client_tls_metrics(body + n, size - n);
}

static void serve(ControllerProbe *p, int fd) {
        char buf[PROBE_REQUEST_MAX], body[2048];
        ssize_t n = read_head(fd, buf, sizeof buf);
        int64_t turned = atomic_load(&p->state->loop_turn_usec), token = atomic_load(&p->state->lease_token);
        double age = turned > 0 ? (double) (mono_usec() - turned) / 1e6 : -1;
        bool healthy = turned > 0 && age < (double) p->stall_s;
        char *path, *end;

        if (n == -E2BIG) {
                reply(fd, "431 Request Header Fields Too Large", "text/plain", "request head too large\n");
                return;
        }
        if (n < 0)
                return;
        if (!startswith(buf, "GET ")) {
                reply(fd, "405 Method Not Allowed", "text/plain", "only GET\n");
                return;
        }
        path = buf + 4;
        end = strpbrk(path, " ?\r\n");
        if (end)
                *end = 0;
        if (streq(path, "/healthz")) {
                snprintf(body, sizeof body, "{\"ok\":%s,\"loop_age_s\":%.3f,\"stall_s\":%" PRIu64 ",\"leader\":%s}\n",
                         healthy ? "true" : "false", age, p->stall_s, token > 0 ? "true" : "false");
                reply(fd, healthy ? "200 OK" : "503 Service Unavailable", "application/json", body);
        } else if (streq(path, "/metrics")) {
                snprintf(body, sizeof body,
                         "# HELP space_controller_leader Whether this controller holds the lease.\n"
                         "# TYPE space_controller_leader gauge\n"
                         "space_controller_leader %d\n"
                         "# HELP space_controller_lease_token The fencing token it leads by (0: it does not).\n"
                         "# TYPE space_controller_lease_token gauge\n"
                         "space_controller_lease_token %" PRIi64 "\n"
                         "# HELP space_controller_loop_age_seconds Seconds since the controller loop last turned.\n"
                         "# TYPE space_controller_loop_age_seconds gauge\n"
                         "space_controller_loop_age_seconds %.3f\n"
                         "# HELP space_checkpoints_unavailable Checkpoints of live or unreachable sandboxes that no live "
                         "worker holds a copy of (at the last pass of the leader).\n"
                         "# TYPE space_checkpoints_unavailable gauge\n"
                         "space_checkpoints_unavailable %" PRIu64 "\n",
                         token > 0, token, age, token > 0 ? shipper_checkpoints_unavailable() : 0);
                tls_metrics(body, sizeof body);
                reply(fd, "200 OK", "text/plain; version=0.0.4", body);
        } else
                reply(fd, "404 Not Found", "text/plain", "not found\n");
}

static void *probe_thread(void *userdata) {
        ControllerProbe *p = userdata;

        log_set_context(NULL, "probe");
        while (!atomic_load(&p->stop)) {
                struct pollfd pfd = { .fd = p->fd, .events = POLLIN };
                int c;

                if (poll(&pfd, 1, 500) <= 0)
                        continue;
                c = accept4(p->fd, NULL, NULL, SOCK_CLOEXEC);
                if (c < 0)
                        continue;
                serve(p, c);
                (void) shutdown(c, SHUT_WR);
                close(c);
        }
        return NULL;
}

int controller_probe_start(const char *address, uint64_t stall_s, ControllerProbeState *state,
                           ControllerProbe **ret) {
        _cleanup_free_ ControllerProbe *p = NULL;
        int r;

        p = new0(ControllerProbe, 1);
        if (!p)
                return -ENOMEM;
        p->stall_s = stall_s;
        p->state = state;
        r = net_listen(address, 16, &p->fd);
        if (r < 0)
                return log_error_errno(r, "Cannot listen on controller_listen %s: %m", address);
        r = -pthread_create(&p->thread, NULL, probe_thread, p);
        if (r < 0) {
                close(p->fd);
                return log_error_errno(r, "Cannot start the probe thread: %m");
        }
        log_info("Controller probes (/healthz, /metrics) on %s", address);
        *ret = TAKE_PTR(p);
        return 0;
}

void controller_probe_stop(ControllerProbe *p) {
        if (!p)
                return;
        atomic_store(&p->stop, true);
        pthread_join(p->thread, NULL);
        close(p->fd);
        free(p);
}
