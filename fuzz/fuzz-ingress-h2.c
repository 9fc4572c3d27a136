/* SPDX-License-Identifier: MIT */
/* The ingress's HTTP/2 side (src/ingress/ingress-h2.c) on hostile frames:
 * the input follows the client preface and is fed to the session as one
 * read; every stream whose head completes is turned into HTTP/1.1 text,
 * parsed, and routed by the stub below (no Api, no sandbox): "/up" paths
 * get a sink (/dev/null) as the sandbox, so the request head and body go
 * the proxy's way ("/upc": after a connect under way, "/upx": one that
 * fails), others a refusal (JSON, or a 302 with headers). The
 * client's end is closed: the session's answer fails to go out, which
 * ends the connection once the input was parsed. Checks: no crash, no
 * leak, no read past the input (ASan). */
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz-check.h"
#include "alloc-util.h"
#include "fd-util.h"
#include "ingress.h"

#define FUZZ_INPUT_MAX (64U * 1024U)
#define PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

const char *ingress_domain(const Ingress *g) {
        return "localhost";
}

void ingress_refusal_done(IngressRefusal *f) {
        f->body = mfree(f->body);
        f->headers = mfree(f->headers);
}

int ingress_route_start(Ingress *g, HttpConn *c, const HttpHead *head, IngressTarget *t, IngressRefusal *f) {
        CHECK(head->target && head->target[0] == '/');
        CHECK(t->port >= 1 && t->port != INGRESS_ENVD_PORT);
        *f = (IngressRefusal){};
        if (startswith(head->target, "/up")) {
                t->fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
                t->connecting = startswith(head->target, "/upc") || startswith(head->target, "/upx");
                t->port = startswith(head->target, "/upx") ? 1 : t->port;
                if (t->fd >= 0)
                        return 0;
        }
        f->status = startswith(head->target, "/link") ? 302 : 403;
        f->headers = strdup("Set-Cookie: space_traffic=1.x; Path=/\r\nLocation: /\r\n");
        f->body = f->status == 302 ? NULL : strdup("{\"error\":{\"code\":\"forbidden\",\"message\":\"no\"}}\n");
        return 1;
}

int ingress_route_connected(Ingress *g, IngressTarget *t, bool timed_out, IngressRefusal *f) {
        CHECK(t->fd >= 0 && t->connecting);
        *f = (IngressRefusal){};
        if (t->port == 1 || timed_out) {
                f->status = 502;
                f->body = strdup("{\"error\":{\"code\":\"bad_gateway\",\"message\":\"refused\"}}\n");
                return 1;
        }
        t->connecting = false;
        return t->port == 2 ? 2 : 0;
}

void ingress_port_opened(Ingress *g, HttpConn *c, const IngressTarget *t) {
        CHECK(t->fd < 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *buf = NULL;
        int sv[2];

        if (size > FUZZ_INPUT_MAX)
                return 0;
        buf = malloc(strlen(PREFACE) + size + 1);
        if (!buf || socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
                return 0;
        memcpy(buf, PREFACE, strlen(PREFACE));
        if (size > 0)
                memcpy(buf + strlen(PREFACE), data, size);
        safe_close(sv[1]);
        ingress_h2_serve(NULL, NULL, sv[0], buf, strlen(PREFACE) + size, "127.0.0.1:1");
        safe_close(sv[0]);
        return 0;
}
