/* SPDX-License-Identifier: MIT */
#pragma once

/* A minimal QMP client: connect, negotiate, run one command at a time.
 * QEMU is as untrusted as the guest it runs (a guest escape lands in it):
 * replies are bounded (QMP_REPLY_MAX) and parsed with the strict parser. */

#include <stdint.h>

#include "json.h"

#define QMP_REPLY_MAX (64U * 1024U)
#define QMP_TIMEOUT_MSEC 10000

typedef struct Qmp {
        int fd;
        int timeout_msec;       /* for each reply (QMP_TIMEOUT_MSEC, or qmp_open_timeout's) */
        char buf[QMP_REPLY_MAX];
        size_t n;
} Qmp;

/* Connects to the unix socket and enters command mode. */
int qmp_open(const char *path, Qmp *ret);
/* The same, waiting up to timeout_msec for the greeting and each reply (QEMU
 * answers nothing while it loads a saved machine from a file). */
int qmp_open_timeout(const char *path, int timeout_msec, Qmp *ret);
/* Connects to the unix socket (nothing read yet: QEMU may accept later). */
int qmp_connect(const char *path, int *ret_fd);
/* qmp_open_timeout on a connected fd, which it takes (closed on failure). */
int qmp_open_fd(int fd, int timeout_msec, Qmp *ret);
void qmp_close(Qmp *q);
/* Runs "execute":cmd with optional pre-serialised arguments (an object) and
 * waits for its return (events in between are skipped). -EIO with the
 * class/desc of an error reply in err. *ret_return (may be NULL) is the
 * "return" value. */
int qmp_execute(Qmp *q, const char *cmd, const char *args_json, JsonValue **ret_return, char *err, size_t err_size);
/* Hands fd to QEMU under name (QMP getfd, SCM_RIGHTS). */
int qmp_send_fd(Qmp *q, const char *name, int fd);
/* Waits for an event named name (e.g. "STOP"), up to timeout_msec. */
int qmp_wait_event(Qmp *q, const char *name, int timeout_msec);
