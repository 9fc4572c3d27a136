/* SPDX-License-Identifier: MIT */
/* The RESTORED message to a freshly restored guest's agent (vm-restored.h).
 * The agent is as untrusted as the guest: its frames are bounded by
 * proto_recv_until(), the whole exchange by one deadline
 * (VM_RESTORED_TIMEOUT_MSEC, however it trickles), and nothing it says but
 * RESULT/ERROR on our stream matters. */
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "alloc-util.h"
#include "base64.h"
#include "fd-util.h"
#include "json.h"
#include "proto.h"
#include "str-util.h"
#include "time-util.h"
#include "vm-restored.h"

#define VM_RESTORED_STREAM 1U
#define VM_RESTORED_FRAMES_MAX 16U /* frames of other streams (HELLO) skipped at most */

int vm_restored_json(const char *hostname, char *const *env, bool new_machine_id, const VmRestoredNet *net,
                     char **ret) {
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_free_ char *b64 = NULL;
        uint8_t entropy[VM_RESTORED_ENTROPY_BYTES], mid[16];
        char mid_hex[33];
        struct timespec now;
        int r;

        json_w_init(&w);
        r = random_bytes(entropy, sizeof entropy);
        if (r < 0)
                return r;
        r = base64_encode(entropy, sizeof entropy, &b64, NULL);
        explicit_bzero(entropy, sizeof entropy);
        if (r < 0)
                return r;
        if (clock_gettime(CLOCK_REALTIME, &now) < 0)
                return negative_errno();
        json_w_object_begin(&w);
        json_w_kv_string(&w, "entropy", b64);
        json_w_kv_int(&w, "time_ns", (int64_t) now.tv_sec * 1000000000 + now.tv_nsec);
        if (hostname)
                json_w_kv_string(&w, "hostname", hostname);
        if (new_machine_id) {
                r = random_bytes(mid, sizeof mid);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < sizeof mid; i++)
                        snprintf(mid_hex + 2 * i, 3, "%02x", mid[i]);
                json_w_kv_string(&w, "machine_id", mid_hex);
        }
        if (net && net->address && net->gateway) {
                json_w_key(&w, "net");
                json_w_object_begin(&w);
                json_w_kv_string(&w, "address", net->address);
                json_w_kv_string(&w, "gateway", net->gateway);
                if (net->mac)
                        json_w_kv_string(&w, "mac", net->mac);
                json_w_object_end(&w);
        }
        if (net && net->resolv_conf)
                json_w_kv_string(&w, "resolv_conf", net->resolv_conf);
        json_w_key(&w, "env");
        json_w_object_begin(&w);
        for (char *const *e = env; e && *e; e++) {
                const char *eq = strchr(*e, '=');
                _cleanup_free_ char *k = NULL;
                if (!eq || eq == *e)
                        continue;
                k = strndup(*e, (size_t) (eq - *e));
                if (!k)
                        return -ENOMEM;
                json_w_kv_string(&w, k, eq + 1);
        }
        json_w_object_end(&w);
        json_w_object_end(&w);
        return json_w_finish(&w, ret, NULL);
}

static int agent_request(const char *agent_socket, ProtoType type, const char *json, char *err, size_t err_size);

static int restored_connect(const char *path, int *ret_fd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;

        if (strscpy(sa.sun_path, sizeof sa.sun_path, path) < 0)
                return -ENAMETOOLONG;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return negative_errno();
        if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0)
                return negative_errno();
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int vm_restored_deliver(const char *agent_socket, const char *json, char *err, size_t err_size) {
        return agent_request(agent_socket, PROTO_RESTORED, json, err, err_size);
}

int vm_agent_sync(const char *agent_socket, char *err, size_t err_size) {
        return agent_request(agent_socket, PROTO_SYNC, "{}", err, err_size);
}

/* One request on a fresh connection, its RESULT or ERROR awaited. */
static int agent_request(const char *agent_socket, ProtoType type, const char *json, char *err, size_t err_size) {
        int64_t deadline = mono_msec() + VM_RESTORED_TIMEOUT_MSEC;
        _cleanup_close_ int fd = -EBADF;
        int r;

        r = restored_connect(agent_socket, &fd);
        if (r >= 0)
                r = proto_send_until(fd, deadline, type, VM_RESTORED_STREAM, json, strlen(json));
        if (r < 0) {
                snprintf(err, err_size, "cannot reach the guest's agent: %s", strerror(-r));
                return r;
        }
        for (unsigned skipped = 0;; skipped++) {
                ProtoFrame f = {};
                r = proto_recv_until(fd, deadline, &f);
                if (r == -ETIMEDOUT) {
                        snprintf(err, err_size, "the guest's agent did not answer: %s", strerror(-r));
                        return r;
                }
                if (r < 0) {
                        snprintf(err, err_size, "the guest's agent failed: %s", strerror(-r));
                        return r;
                }
                if (f.stream == VM_RESTORED_STREAM && (f.type == PROTO_RESULT || f.type == PROTO_ERROR)) {
                        bool ok = f.type == PROTO_RESULT;
                        if (!ok)
                                snprintf(err, err_size, "the guest's agent refused %s: %.200s", proto_type_to_string(type),
                                         f.payload ? f.payload : "");
                        proto_frame_done(&f);
                        return ok ? 0 : -EPROTO;
                }
                proto_frame_done(&f);
                if (skipped >= VM_RESTORED_FRAMES_MAX) {
                        snprintf(err, err_size, "the guest's agent sent unexpected frames");
                        return -EBADMSG;
                }
        }
}
