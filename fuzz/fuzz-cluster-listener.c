/* SPDX-License-Identifier: MIT */
/* The cluster listener (src/worker/cluster-listener.c) on what a peer on
 * the network sends it: the input is a whole connection's bytes, served by
 * cluster_listener_serve() over a socketpair (plaintext: cluster TLS is a
 * layer below). The listener has a token, a state directory of its own and
 * nothing behind it: no worker process, no sandbox, no pool. So:
 *  - every line it answers is a JSON object whose "ok" is a boolean;
 *  - a connection whose first line is not a hello with the right token gets
 *    exactly one answer, a refusal, and nothing of the rest is served;
 *  - nothing can succeed but the hello: at most one "ok":true, the first
 *    answer, and only after the right token;
 *  - it ends when the input does, and leaves no file in its directory (a
 *    template upload's spool file is removed whatever came of it). */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz-check.h"
#include "alloc-util.h"
#include "cluster-listener.h"
#include "config.h"
#include "fd-util.h"
#include "json.h"
#include "log.h"

#define FUZZ_INPUT_MAX (64U * 1024U)
#define FUZZ_OUTPUT_MAX (4U * 1024U * 1024U)
#define FUZZ_TOKEN "fuzz-cluster-token-0123456789abcdef"

static Config config;
static ClusterListener *listener;
static char state_dir[] = "/tmp/space-fuzz-cluster-XXXXXX";
static char spool_dir[sizeof state_dir + 8];

static void cleanup(void) {
        listener = cluster_listener_free(listener);
        (void) rmdir(spool_dir);
        (void) rmdir(state_dir);
}

static void setup(void) {
        char err[256];

        if (listener)
                return;
        log_set_max_level(LOG_ERR_); /* every refusal is logged as a warning: not here */
        CHECK(mkdtemp(state_dir));
        snprintf(spool_dir, sizeof spool_dir, "%s/tmp", state_dir);
        CHECK(mkdir(spool_dir, 0700) == 0);
        atexit(cleanup);
        config_defaults(&config);
        CHECK(config_set(&config, "state_dir", state_dir, err, sizeof err) >= 0);
        CHECK(config_set(&config, "worker_name", "fuzz-worker", err, sizeof err) >= 0);
        CHECK(config_set(&config, "worker_listen", "127.0.0.1:0", err, sizeof err) >= 0);
        CHECK(cluster_listener_start(&config, FUZZ_TOKEN, &listener) >= 0);
}

typedef struct Serve {
        int fd;
} Serve;

static void *serve_thread(void *userdata) {
        Serve *s = userdata;
        CHECK(cluster_listener_serve(listener, s->fd, "fuzz") >= 0);
        return NULL;
}

/* Whether the first line of data is a hello that shows the right token. */
static bool first_line_is_hello(const uint8_t *data, size_t size) {
        _cleanup_json_ JsonValue *v = NULL;
        const uint8_t *nl = memchr(data, '\n', size);
        const char *op, *token;

        if (!nl || json_parse((const char *) data, (size_t) (nl - data), &v, NULL, 0) < 0)
                return false;
        op = json_string(json_get(v, "op"));
        token = json_string(json_get(v, "token"));
        return op && token && strcmp(op, "hello") == 0 && strcmp(token, FUZZ_TOKEN) == 0;
}

static void check_output(const char *out, size_t len, bool hello) {
        unsigned lines = 0, oks = 0;
        bool first_ok = false;

        for (size_t at = 0; at < len;) {
                _cleanup_json_ JsonValue *v = NULL;
                const char *nl = memchr(out + at, '\n', len - at);
                bool ok;

                CHECK(nl); /* every answer is a whole line */
                CHECK(json_parse(out + at, (size_t) (nl - (out + at)), &v, NULL, 0) >= 0);
                CHECK(json_type(v) == JSON_OBJECT);
                CHECK(json_bool(json_get(v, "ok"), &ok) >= 0);
                if (ok) {
                        oks++;
                        first_ok = first_ok || lines == 0;
                }
                lines++;
                at = (size_t) (nl - out) + 1;
        }
        if (!hello) {
                CHECK(lines <= 1); /* one refusal (none if the input ended before a line) */
                CHECK(oks == 0);
        } else
                CHECK(oks <= 1 && (oks == 0 || first_ok));
}

static void check_spool_empty(void) {
        DIR *d = opendir(spool_dir);
        struct dirent *de;

        CHECK(d);
        while ((de = readdir(d)))
                CHECK(de->d_name[0] == '.');
        closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *out = NULL;
        _cleanup_close_ int us = -EBADF;
        int pair[2];
        pthread_t t;
        Serve s;
        size_t len = 0;

        if (size > FUZZ_INPUT_MAX)
                return 0;
        setup();
        out = malloc(FUZZ_OUTPUT_MAX);
        CHECK(out);
        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
        us = pair[0];
        s.fd = pair[1];
        CHECK(pthread_create(&t, NULL, serve_thread, &s) == 0);
        /* the whole input, then EOF; answers are read as they come (the
         * listener may answer before it read everything, or stop reading) */
        for (size_t at = 0; at < size;) {
                ssize_t k = send(us, data + at, size - at, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (k > 0) {
                        at += (size_t) k;
                        continue;
                }
                if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
                        break; /* it closed: the rest is not read */
                k = recv(us, out + len, FUZZ_OUTPUT_MAX - len, MSG_DONTWAIT);
                if (k > 0)
                        len += (size_t) k;
                else if (k == 0)
                        break;
                else
                        (void) usleep(100);
        }
        (void) shutdown(us, SHUT_WR);
        for (;;) {
                ssize_t k = recv(us, out + len, FUZZ_OUTPUT_MAX - len, 0);
                if (k <= 0)
                        break;
                len += (size_t) k;
                CHECK(len < FUZZ_OUTPUT_MAX);
        }
        CHECK(pthread_join(t, NULL) == 0);
        check_output(out, len, first_line_is_hello(data, size));
        check_spool_empty();
        return 0;
}
