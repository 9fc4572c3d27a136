/* SPDX-License-Identifier: MIT */
/* GET /v1/sandboxes/{id}/ports/{port}/connect with "Connection: Upgrade"
 * and "Upgrade: tcp": after "101 Switching Protocols" the connection is a
 * raw TCP stream to that port inside the sandbox, both ways, until either
 * side ends it (`space forward`, like kubectl port-forward, for services
 * that are not HTTP). The sandbox is the key's tenant's own (another's is a
 * 404); the connection goes only to that sandbox's own address on its link
 * (the dialer takes a slot and a port, no address), never to the host or a
 * neighbour. A paused sandbox with auto_resume resumes, as for an exec. */

#include <stdio.h>
#include <strings.h>

#include "api-internal.h"
#include "fd-util.h"
#include "log.h"
#include "sock-io.h"

#define FORWARD_BUFFER (64U * 1024U)              /* each direction's buffer */
#define FORWARD_IDLE_TIMEOUT_MSEC (3600 * 1000)    /* a forward without a byte either way this long ends */

#define FORWARD_UPGRADED "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n"

/* The connect to port failed with k: the 502 (the same for every caller). */
static int dial_failed(const char *id, uint16_t port, int k, ApiError *e) {
        log_debug_errno(k, "Connecting to port %u of sandbox %s: %m", (unsigned) port, id);
        return api_error(e, k, API_BAD_GATEWAY, "nothing answers on port %u of sandbox %s (%s)", (unsigned) port, id,
                         k == -ECONNREFUSED ? "connection refused"
                         : k == -ETIMEDOUT  ? "timed out"
                                            : "unreachable");
}

static int dial(ApiRequest *r, const Sandbox *sb, uint16_t port, bool wait, int *ret_fd, ApiError *e) {
        int k;

        if (r->api->port_dialer) {
                k = r->api->port_dialer(r->api->port_dialer_userdata, (uint32_t) sb->slot, port, wait, ret_fd);
                if (k < 0)
                        return dial_failed(sb->id, port, k, e);
                return k;
        }
        if (!r->api->cluster_token)
                return api_error(e, -EOPNOTSUPP, API_NOT_IMPLEMENTED,
                                 "this server reaches no sandbox's ports (its sandboxes have no network)");
        k = api_get_worker(r, e);
        if (k < 0)
                return k;
        return worker_port_connect(r->worker, sb, port, ret_fd, e);
}

int api_sandbox_dial(ApiRequest *r, const Sandbox *sb, uint16_t port, int *ret_fd, ApiError *e) {
        return dial(r, sb, port, true, ret_fd, e);
}

int api_sandbox_dial_start(ApiRequest *r, const Sandbox *sb, uint16_t port, int *ret_fd, ApiError *e) {
        return dial(r, sb, port, false, ret_fd, e);
}

int api_sandbox_dial_finish(const char *id, uint16_t port, int fd, bool timed_out, ApiError *e) {
        int k = timed_out ? -ETIMEDOUT : sock_connect_result(fd);

        return k < 0 ? dial_failed(id, port, k, e) : 0;
}

int api_sandbox_port_connect(ApiRequest *r, ApiError *e) {
        _cleanup_(sandbox_done) Sandbox sb = {};
        _cleanup_close_ int fd = -EBADF;
        const char *upgrade;
        const void *pending;
        size_t pending_len;
        uint16_t port;
        int k, cfd;

        /* the sandbox first: another tenant's is a 404 whatever else the request says */
        k = api_sandbox_lookup(r, r->params[0], false, &sb, e);
        if (k < 0)
                return k;
        k = api_parse_port(r->params[1], &port, e);
        if (k < 0)
                return k;
        upgrade = http_head_upgrade(r->head);
        if (!upgrade || strcasecmp(upgrade, "tcp") != 0)
                return api_error(e, -EINVAL, API_BAD_REQUEST,
                                 "this endpoint upgrades to a raw TCP stream: send Connection: Upgrade and Upgrade: tcp");
        if (r->head->chunked || r->head->content_length > 0)
                return api_error(e, -EINVAL, API_BAD_REQUEST, "an upgrade to TCP takes no request body");
        if (sb.state != SANDBOX_RUNNING) {
                /* looked up again as for an exec: resumed if paused with auto_resume, else its 409 */
                sandbox_done(&sb);
                k = api_sandbox_lookup(r, r->params[0], true, &sb, e);
                if (k < 0)
                        return k;
        } else
                (void) store_sandbox_touch(r->store, sb.id); /* activity, for the idle policy (as the lookup does) */
        k = api_sandbox_dial(r, &sb, port, &fd, e);
        if (k < 0)
                return k;
        cfd = http_conn_hijack(r->conn, FORWARD_UPGRADED, strlen(FORWARD_UPGRADED), &pending, &pending_len);
        if (cfd < 0)
                return 0; /* the client is gone: nobody to answer */
        log_debug("Forward: port %u of sandbox %s for key %s", (unsigned) port, sb.id, r->key.id);
        k = sock_relay(cfd, pending, pending_len, fd, NULL, 0, FORWARD_BUFFER, FORWARD_IDLE_TIMEOUT_MSEC);
        if (k < 0)
                log_debug_errno(k, "Forward: port %u of sandbox %s ended: %m", (unsigned) port, sb.id);
        if (sb.idle_s > 0)
                (void) store_sandbox_touch(r->store, sb.id); /* a long forward is activity too */
        return 0;
}
