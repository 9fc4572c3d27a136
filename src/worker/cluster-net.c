/* SPDX-License-Identifier: MIT */
/* The cluster token, TCP connections with deadlines, bounded line reads and
 * the two-way byte relay of proxied agent streams. */
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "log.h"
#include "str-util.h"
#include "cluster-net.h"
#include "cluster-tls.h"
#include "json.h"

#define SPLICE_BUF 65536U
#define TOKEN_FINGERPRINT_LABEL "space cluster token fingerprint v1"
#define TOKEN_FINGERPRINT_SETTING "token_fingerprint"

char *cluster_token_free(char *t) {
        if (t) {
                explicit_bzero(t, strlen(t));
                free(t);
        }
        return NULL;
}

int cluster_token_load(const char *path, char **ret) {
        _cleanup_close_ int fd = -EBADF;
        char buf[CLUSTER_TOKEN_MAX + 2];
        struct stat st;
        size_t n = 0;
        char *t;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0)
                return log_error_errno(errno, "Cannot open the cluster token file %s: %m", path);
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return log_error_errno(EINVAL, "The cluster token file %s is not a regular file", path);
        if ((st.st_mode & 0077) != 0 || (st.st_uid != 0 && st.st_uid != geteuid()))
                return log_error_errno(EPERM,
                                       "The cluster token file %s must be owned by root and mode 0600 (it is %04o)",
                                       path, (unsigned) (st.st_mode & 07777));
        for (;;) {
                ssize_t k = read(fd, buf + n, sizeof buf - 1 - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return negative_errno();
                if (k == 0)
                        break;
                n += (size_t) k;
                if (n >= sizeof buf - 1)
                        break;
        }
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
                n--;
        buf[n] = 0;
        if (n < CLUSTER_TOKEN_MIN || n > CLUSTER_TOKEN_MAX) {
                explicit_bzero(buf, sizeof buf);
                return log_error_errno(EINVAL, "The cluster token in %s must be %u to %u bytes", path,
                                       CLUSTER_TOKEN_MIN, CLUSTER_TOKEN_MAX);
        }
        for (size_t i = 0; i < n; i++)
                if (buf[i] <= ' ' || buf[i] > '~') {
                        explicit_bzero(buf, sizeof buf);
                        return log_error_errno(EINVAL, "The cluster token in %s must be printable ASCII without spaces",
                                               path);
                }
        t = strdup(buf);
        explicit_bzero(buf, sizeof buf);
        if (!t)
                return -ENOMEM;
        *ret = t;
        return 0;
}

bool cluster_token_equal(const char *a, const char *b) {
        unsigned char ha[SHA256_DIGEST_LENGTH], hb[SHA256_DIGEST_LENGTH];
        bool eq;

        if (!a || !b)
                return false;
        SHA256((const unsigned char *) a, strlen(a), ha);
        SHA256((const unsigned char *) b, strlen(b), hb);
        eq = CRYPTO_memcmp(ha, hb, sizeof ha) == 0;
        explicit_bzero(ha, sizeof ha);
        explicit_bzero(hb, sizeof hb);
        return eq;
}

int cluster_token_fingerprint(const char *token, char buf[static CLUSTER_TOKEN_FINGERPRINT_HEX + 1]) {
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int n = 0;

        if (!token)
                return -EINVAL;
        if (!HMAC(EVP_sha256(), token, (int) strlen(token), (const unsigned char *) TOKEN_FINGERPRINT_LABEL,
                  strlen(TOKEN_FINGERPRINT_LABEL), md, &n) ||
            n < CLUSTER_TOKEN_FINGERPRINT_HEX / 2)
                return -EIO;
        for (size_t i = 0; i < CLUSTER_TOKEN_FINGERPRINT_HEX / 2; i++)
                snprintf(buf + 2 * i, 3, "%02x", md[i]);
        explicit_bzero(md, sizeof md);
        return 0;
}

int cluster_token_check(Store *s, const char *token, const char *path) {
        char mine[CLUSTER_TOKEN_FINGERPRINT_HEX + 1], theirs[STORE_CLUSTER_SETTING_MAX];
        int r;

        r = cluster_token_fingerprint(token, mine);
        if (r < 0)
                return log_error_errno(r, "Cannot fingerprint the cluster token: %m");
        r = store_cluster_setting_claim(s, TOKEN_FINGERPRINT_SETTING, mine, theirs);
        if (r < 0)
                return log_error_errno(r, "Cannot check the cluster token against the store: %m");
        if (!streq(mine, theirs))
                return log_error_errno(EKEYREJECTED,
                                       "The cluster token in %s is not this cluster's (its fingerprint %s, the "
                                       "cluster's %s): refusing to join", strna(path), mine, theirs);
        return 0;
}

int cluster_master_key_check(Store *s, const CredKey *k, const char *path) {
        char mine[CRED_KEY_FINGERPRINT_HEX + 1], theirs[STORE_CLUSTER_SETTING_MAX], before[STORE_CLUSTER_SETTING_MAX];
        char prev[CRED_KEY_FINGERPRINT_HEX + 1] = "";
        int r;

        r = cred_key_fingerprint(k, mine);
        if (r >= 0 && cred_key_previous(k))
                r = cred_key_fingerprint(cred_key_previous(k), prev);
        if (r < 0)
                return log_error_errno(r, "Cannot fingerprint the credentials' master key: %m");
        r = store_cluster_setting_claim(s, CRED_KEY_FINGERPRINT_SETTING, mine, theirs);
        if (r < 0)
                return log_error_errno(r, "Cannot check the credentials' master key against the store: %m");
        if (streq(mine, theirs))
                return 0;
        if (prev[0] && streq(prev, theirs)) {
                log_info("The store's credentials are sealed under master_key_previous_file (fingerprint %s), not "
                         "yet under %s (%s): this process opens both and seals under the store's until "
                         "'spaced rotate-master-key' re-seals them",
                         theirs, strna(path), mine);
                return 0;
        }
        r = store_cluster_setting_get(s, CRED_KEY_PREVIOUS_FINGERPRINT_SETTING, before);
        if (r < 0 && r != -ENOENT)
                return log_error_errno(r, "Cannot check the credentials' master key against the store: %m");
        if (r >= 0 && streq(mine, before))
                return log_error_errno(EKEYREJECTED,
                                       "The credentials' master key %s (fingerprint %s) is the one this store's "
                                       "credentials were sealed under before the last master key rotation: they "
                                       "are sealed under another key now (fingerprint %s). Set master_key_file to "
                                       "the new key (and, during the rotation's window, master_key_previous_file "
                                       "to this one; docs/operations.md, Rotating the master key); refusing to start",
                                       strna(path), mine, theirs);
        return log_error_errno(EKEYREJECTED,
                                       "The credentials' master key %s is not the one this store's credentials are "
                                       "sealed under (its fingerprint %s, the store's %s): every API server and "
                                       "worker needs the same master_key_file (docs/operations.md, Backup: a lost "
                                       "key); refusing to start",
                                       strna(path), mine, theirs);
        return 0;
}

int net_split_host_port(const char *address, char *host, size_t host_size, char *port, size_t port_size) {
        const char *colon, *h = address;
        size_t hl;

        if (!address)
                return -EINVAL;
        if (address[0] == '[') {
                const char *close = strchr(address, ']');
                if (!close || close[1] != ':')
                        return -EINVAL;
                h = address + 1;
                hl = (size_t) (close - h);
                colon = close + 1;
        } else {
                colon = strrchr(address, ':');
                if (!colon)
                        return -EINVAL;
                hl = (size_t) (colon - address);
        }
        if (hl >= host_size || strlen(colon + 1) >= port_size || colon[1] == 0)
                return -EINVAL;
        memcpy(host, h, hl);
        host[hl] = 0;
        for (const char *p = colon + 1; *p; p++)
                if (*p < '0' || *p > '9')
                        return -EINVAL;
        memcpy(port, colon + 1, strlen(colon + 1) + 1);
        return 0;
}

static int resolve(const char *address, bool passive, struct addrinfo **ret) {
        char host[256], port[16];
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
        int r;

        r = net_split_host_port(address, host, sizeof host, port, sizeof port);
        if (r < 0)
                return r;
        if (passive)
                hints.ai_flags |= AI_PASSIVE;
        r = getaddrinfo(host[0] == 0 || streq(host, "*") ? NULL : host, port, &hints, ret);
        if (r != 0)
                return r == EAI_SYSTEM ? negative_errno() : -EADDRNOTAVAIL;
        return 0;
}

int net_connect(const char *address, int timeout_msec, int *ret_fd) {
        struct addrinfo *ai = NULL;
        int r, last = -ECONNREFUSED;

        r = resolve(address, false, &ai);
        if (r < 0)
                return r;
        for (struct addrinfo *a = ai; a; a = a->ai_next) {
                _cleanup_close_ int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                struct pollfd p;
                int one = 1, err = 0;
                socklen_t len = sizeof err;

                if (fd < 0) {
                        last = negative_errno();
                        continue;
                }
                if (connect(fd, a->ai_addr, a->ai_addrlen) < 0 && errno != EINPROGRESS) {
                        last = negative_errno();
                        continue;
                }
                p = (struct pollfd){ .fd = fd, .events = POLLOUT };
                do
                        r = poll(&p, 1, timeout_msec);
                while (r < 0 && errno == EINTR);
                if (r <= 0) {
                        last = r < 0 ? negative_errno() : -ETIMEDOUT;
                        continue;
                }
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0) {
                        last = err ? -err : negative_errno();
                        continue;
                }
                (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                r = fd_nonblock(fd, false);
                if (r < 0) {
                        last = r;
                        continue;
                }
                freeaddrinfo(ai);
                *ret_fd = TAKE_FD(fd);
                return 0;
        }
        freeaddrinfo(ai);
        return last;
}

int net_connect_worker(const char *address, const char *worker, int timeout_msec, int *ret_fd, char *why,
                       size_t why_size) {
        char buf[320] = "";
        int fd = -EBADF, r;

        if (!why || why_size == 0)
                why = buf, why_size = sizeof buf;
        r = net_connect(address, timeout_msec, &fd);
        if (r < 0 || !cluster_tls_enabled()) {
                if (r >= 0)
                        *ret_fd = fd;
                return r;
        }
        r = cluster_tls_client(fd, worker, address, ret_fd, why, why_size);
        if (r < 0)
                log_warning("Worker %s (%s): %s", strna(worker), address, why[0] ? why : strerror(-r));
        return r;
}

int net_listen(const char *address, int backlog, int *ret_fd) {
        struct addrinfo *ai = NULL;
        int r, last = -EADDRNOTAVAIL;

        r = resolve(address, true, &ai);
        if (r < 0)
                return r;
        for (struct addrinfo *a = ai; a; a = a->ai_next) {
                _cleanup_close_ int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
                int one = 1;

                if (fd < 0) {
                        last = negative_errno();
                        continue;
                }
                (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
                if (bind(fd, a->ai_addr, a->ai_addrlen) < 0 || listen(fd, backlog) < 0) {
                        last = negative_errno();
                        continue;
                }
                freeaddrinfo(ai);
                *ret_fd = TAKE_FD(fd);
                return 0;
        }
        freeaddrinfo(ai);
        return last;
}

void net_reply(int fd, bool ok, const char *code, const char *message, const char *worker) {
        _cleanup_free_ char *out = NULL;
        JsonWriter jw;
        size_t len;

        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_bool(&jw, "ok", ok);
        if (code)
                json_w_kv_string(&jw, "code", code);
        if (message)
                json_w_kv_string(&jw, "message", message);
        if (worker)
                json_w_kv_string(&jw, "worker", worker);
        json_w_object_end(&jw);
        if (json_w_finish(&jw, &out, &len) < 0)
                return;
        if (loop_write(fd, out, len) >= 0)
                (void) loop_write(fd, "\n", 1);
}

int net_read_line(int fd, char *buf, size_t size, int timeout_msec, size_t *ret_len) {
        size_t n = 0;

        if (size == 0)
                return -EINVAL;
        for (;;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                char c;
                ssize_t k;
                int r;

                r = poll(&p, 1, timeout_msec);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return r < 0 ? negative_errno() : -ETIMEDOUT;
                k = read(fd, &c, 1);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return negative_errno();
                if (k == 0)
                        return -ECONNRESET;
                if (c == '\n') {
                        buf[n] = 0;
                        if (ret_len)
                                *ret_len = n;
                        return 0;
                }
                if (n + 1 >= size)
                        return -EMSGSIZE;
                buf[n++] = c;
        }
}

int net_splice_both(int a, int b) {
        _cleanup_free_ char *buf = malloc(2 * SPLICE_BUF);
        bool open_ab = true, open_ba = true; /* a → b, b → a */

        if (!buf)
                return -ENOMEM;
        while (open_ab || open_ba) {
                struct pollfd p[2] = {
                        { .fd = open_ab ? a : -1, .events = POLLIN },
                        { .fd = open_ba ? b : -1, .events = POLLIN },
                };
                int r = poll(p, 2, -1);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return negative_errno();
                for (int i = 0; i < 2; i++) {
                        int from = i == 0 ? a : b, to = i == 0 ? b : a;
                        char *bp = buf + (size_t) i * SPLICE_BUF;
                        ssize_t k;

                        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                                continue;
                        k = read(from, bp, SPLICE_BUF);
                        if (k < 0 && (errno == EINTR || errno == EAGAIN))
                                continue;
                        if (k <= 0 || loop_write(to, bp, (size_t) k) < 0) {
                                /* this direction ended: pass the EOF on */
                                (void) shutdown(to, SHUT_WR);
                                if (i == 0)
                                        open_ab = false;
                                else
                                        open_ba = false;
                                if (k < 0 || (k > 0))
                                        return 0; /* an error: drop both */
                        }
                }
        }
        return 0;
}

int net_hello(int fd, const char *token, const char *worker, char *ret_message, size_t message_size) {
        _cleanup_json_ JsonValue *v = NULL;
        _cleanup_free_ char *req = NULL;
        char line[WORKER_HANDSHAKE_LINE_MAX];
        JsonWriter jw;
        bool ok = false;
        size_t len;
        int r;

        json_w_init(&jw);
        json_w_object_begin(&jw);
        json_w_kv_string(&jw, "op", "hello");
        json_w_kv_string(&jw, "token", token);
        json_w_kv_string(&jw, "worker", worker);
        json_w_object_end(&jw);
        r = json_w_finish(&jw, &req, &len);
        if (r < 0)
                return r;
        r = loop_write(fd, req, len);
        explicit_bzero(req, len);
        if (r >= 0)
                r = loop_write(fd, "\n", 1);
        if (r >= 0)
                r = net_read_line(fd, line, sizeof line, WORKER_HELLO_TIMEOUT_MSEC, &len);
        if (r < 0)
                return r;
        if (json_parse(line, len, &v, NULL, 0) < 0 || json_bool(json_get(v, "ok"), &ok) < 0)
                return -EBADMSG;
        if (!ok) {
                if (ret_message && message_size > 0)
                        (void) strscpy(ret_message, message_size, strna(json_string(json_get(v, "message"))));
                return -EACCES;
        }
        return 0;
}
