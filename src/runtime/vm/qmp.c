/* SPDX-License-Identifier: MIT */
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "macros.h"
#include "qmp.h"
#include "sock-io.h"
#include "str-util.h"
#include "time-util.h"

/* The next line from QEMU as JSON (bounded; a longer line is -EMSGSIZE). */
static int qmp_read_msg(Qmp *q, int timeout_msec, JsonValue **ret) {
        int64_t deadline = mono_msec() + timeout_msec;

        for (;;) {
                char *nl = memchr(q->buf, '\n', q->n);
                if (nl) {
                        size_t len = (size_t) (nl - q->buf);
                        int r = json_parse(q->buf, len, ret, NULL, 0);
                        memmove(q->buf, nl + 1, q->n - len - 1);
                        q->n -= len + 1;
                        return r < 0 ? -EPROTO : 0;
                }
                if (q->n == sizeof q->buf)
                        return -EMSGSIZE;
                struct pollfd p = { .fd = q->fd, .events = POLLIN };
                int64_t left = deadline - mono_msec();
                if (left <= 0)
                        return -ETIMEDOUT;
                int r = poll(&p, 1, (int) left);
                if (r < 0 && errno != EINTR)
                        return negative_errno();
                if (r <= 0)
                        continue;
                ssize_t k = read(q->fd, q->buf + q->n, sizeof q->buf - q->n);
                if (k == 0)
                        return -ECONNRESET;
                if (k < 0 && errno != EINTR && errno != EAGAIN)
                        return negative_errno();
                if (k > 0)
                        q->n += (size_t) k;
        }
}

int qmp_execute(Qmp *q, const char *cmd, const char *args_json, JsonValue **ret_return, char *err, size_t err_size) {
        _cleanup_free_ char *line = NULL;
        int r;

        if (args_json)
                line = strdup_printf("{\"execute\":\"%s\",\"arguments\":%s}\n", cmd, args_json);
        else
                line = strdup_printf("{\"execute\":\"%s\"}\n", cmd);
        if (!line)
                return -ENOMEM;
        r = loop_write(q->fd, line, strlen(line));
        if (r < 0)
                return r;
        for (;;) {
                JsonValue *m = NULL, *v;
                r = qmp_read_msg(q, q->timeout_msec, &m);
                if (r < 0)
                        return r;
                if ((v = json_get(m, "return"))) {
                        if (ret_return) {
                                /* hand over the return value by re-parsing it: keeps ownership simple */
                                _cleanup_free_ char *s = NULL;
                                size_t n;
                                r = json_serialize(v, &s, &n);
                                json_free(m);
                                return r < 0 ? r : json_parse(s, n, ret_return, NULL, 0);
                        }
                        json_free(m);
                        return 0;
                }
                if ((v = json_get(m, "error"))) {
                        if (err)
                                snprintf(err, err_size, "%s: %s", strna(json_string(json_get(v, "class"))),
                                         strna(json_string(json_get(v, "desc"))));
                        json_free(m);
                        return -EIO;
                }
                json_free(m); /* an event */
        }
}

int qmp_send_fd(Qmp *q, const char *name, int fd) {
        _cleanup_free_ char *line = strdup_printf("{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\"%s\"}}\n", name);
        int r;

        if (!line)
                return -ENOMEM;
        r = sock_send_fds(q->fd, line, strlen(line), &fd, 1);
        if (r < 0)
                return r == -EMSGSIZE ? -EIO : r;
        /* the reply to getfd */
        for (;;) {
                JsonValue *m = NULL;
                r = qmp_read_msg(q, q->timeout_msec, &m);
                if (r < 0)
                        return r;
                bool ok = json_get(m, "return") != NULL, err = json_get(m, "error") != NULL;
                json_free(m);
                if (ok)
                        return 0;
                if (err)
                        return -EIO;
        }
}

int qmp_wait_event(Qmp *q, const char *name, int timeout_msec) {
        int64_t deadline = mono_msec() + timeout_msec;

        for (;;) {
                JsonValue *m = NULL;
                int64_t left = deadline - mono_msec();
                int r = left > 0 ? qmp_read_msg(q, (int) left, &m) : -ETIMEDOUT;
                if (r < 0)
                        return r;
                const char *ev = json_string(json_get(m, "event"));
                bool match = ev && streq(ev, name);
                json_free(m);
                if (match)
                        return 0;
        }
}

int qmp_open(const char *path, Qmp *q) {
        return qmp_open_timeout(path, QMP_TIMEOUT_MSEC, q);
}

int qmp_connect(const char *path, int *ret_fd) {
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

int qmp_open_fd(int fd, int timeout_msec, Qmp *q) {
        JsonValue *greeting = NULL;
        int r;

        q->fd = fd;
        q->n = 0;
        q->timeout_msec = timeout_msec;
        r = qmp_read_msg(q, q->timeout_msec, &greeting);
        if (r < 0)
                goto fail;
        r = json_get(greeting, "QMP") ? 0 : -EPROTO;
        json_free(greeting);
        if (r < 0)
                goto fail;
        r = qmp_execute(q, "qmp_capabilities", NULL, NULL, NULL, 0);
        if (r < 0)
                goto fail;
        return 0;
fail:
        q->fd = safe_close(q->fd);
        return r;
}

int qmp_open_timeout(const char *path, int timeout_msec, Qmp *q) {
        int fd, r;

        q->fd = -EBADF;
        r = qmp_connect(path, &fd);
        if (r < 0)
                return r;
        return qmp_open_fd(fd, timeout_msec, q);
}

void qmp_close(Qmp *q) {
        q->fd = safe_close(q->fd);
}
