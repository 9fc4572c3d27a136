/* SPDX-License-Identifier: MIT */
/* Listening sockets for the HTTP server: "host:port", "[v6]:port" or "unix:/path". */

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "fd-util.h"
#include "http-listen.h"
#include "str-util.h"

static int listen_unix(const char *path, int *ret_fd, char **ret_path) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char *copy = NULL;
        struct stat st;

        if (path[0] != '/' || strlen(path) >= sizeof sa.sun_path)
                return -EINVAL;
        memcpy(sa.sun_path, path, strlen(path) + 1);

        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return negative_errno();

        /* A stale socket file from a previous run is removed; a live one is not stolen. */
        if (lstat(path, &st) == 0) {
                _cleanup_close_ int probe = -EBADF;
                if (!S_ISSOCK(st.st_mode))
                        return -EEXIST;
                probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (probe < 0)
                        return negative_errno();
                if (connect(probe, (struct sockaddr *) &sa, sizeof sa) == 0)
                        return -EADDRINUSE;
                if (unlink(path) < 0 && errno != ENOENT)
                        return negative_errno();
        }
        if (bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0)
                return negative_errno();
        if (listen(fd, SOMAXCONN) < 0 || !(copy = strdup(path))) {
                int r = copy ? negative_errno() : -ENOMEM;
                (void) unlink(path);
                return r;
        }
        *ret_fd = TAKE_FD(fd);
        *ret_path = copy;
        return 0;
}

static int listen_inet(const char *listen_address, int *ret_fd, int *ret_port) {
        _cleanup_free_ char *host = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
        struct addrinfo *ai = NULL;
        struct sockaddr_storage bound = {};
        socklen_t bound_len = sizeof bound;
        const char *port_str, *colon;
        unsigned port;
        int one = 1, r;

        if (listen_address[0] == '[') {
                const char *rb = strchr(listen_address, ']');
                if (!rb || rb[1] != ':')
                        return -EINVAL;
                host = strndup(listen_address + 1, (size_t) (rb - listen_address - 1));
                port_str = rb + 2;
                hints.ai_family = AF_INET6;
        } else {
                colon = strrchr(listen_address, ':');
                if (!colon || strchr(listen_address, ':') != colon)
                        return -EINVAL;
                host = strndup(listen_address, (size_t) (colon - listen_address));
                port_str = colon + 1;
        }
        if (!host)
                return -ENOMEM;
        if (isempty(host))
                return -EINVAL;
        r = safe_atou(port_str, &port);
        if (r < 0 || port > 65535)
                return -EINVAL;

        r = getaddrinfo(host, port_str, &hints, &ai);
        if (r != 0)
                return r == EAI_SYSTEM ? negative_errno() : -EADDRNOTAVAIL;

        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                r = negative_errno();
                freeaddrinfo(ai);
                return r;
        }
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        r = bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 ? negative_errno() : 0;
        freeaddrinfo(ai);
        if (r < 0)
                return r;
        if (getsockname(fd, (struct sockaddr *) &bound, &bound_len) < 0)
                return negative_errno();
        if (listen(fd, SOMAXCONN) < 0)
                return negative_errno();
        *ret_port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *) &bound)->sin6_port
                                                      : ((struct sockaddr_in *) &bound)->sin_port);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int http_listen(const char *address, int *ret_fd, int *ret_port, char **ret_unix_path) {
        const char *path;

        if (!address || !ret_fd || !ret_port || !ret_unix_path)
                return -EINVAL;
        path = startswith(address, "unix:");
        if (path) {
                *ret_port = 0;
                return listen_unix(path, ret_fd, ret_unix_path);
        }
        *ret_unix_path = NULL;
        return listen_inet(address, ret_fd, ret_port);
}
