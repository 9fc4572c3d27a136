/* SPDX-License-Identifier: MIT */
#pragma once

/* Listening sockets for http-server.c. */

#include "macros.h"

/* address: "127.0.0.1:7070", "[::1]:0", "0.0.0.0:7070" (port 0: ephemeral) or
 * "unix:/abs/path". Binds (SO_REUSEADDR) and listens. A unix socket file left
 * by a dead server is replaced; a live one gives -EADDRINUSE, any other file
 * -EEXIST. Returns the socket, the bound port (0 for unix) and, for unix, the
 * path to unlink when done. -EINVAL on a malformed address. */
int http_listen(const char *address, int *ret_fd, int *ret_port, char **ret_unix_path);
