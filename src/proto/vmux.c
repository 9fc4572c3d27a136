/* SPDX-License-Identifier: MIT */
/* vmux: see vmux.h. One poll() loop, no threads; every buffer is bounded. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fd-util.h"
#include "macros.h"
#include "vmux.h"

#define VMUX_LINK_IN_SIZE (VMUX_HEADER_SIZE + VMUX_DATA_MAX)

typedef struct VmuxChan {
        uint32_t id;
        int fd;
        uint8_t *in;           /* DATA from the link not yet written to fd (<= VMUX_WINDOW) */
        size_t in_len;
        uint32_t unacked;      /* bytes we sent on the link not credited yet */
        uint32_t to_credit;    /* bytes written to fd not credited to the peer yet */
        bool local_eof;        /* fd said EOF; we sent EOF */
        bool peer_eof;         /* the peer sent EOF: shut fd's write side once in is empty */
        bool wr_shut;
} VmuxChan;

typedef struct Vmux {
        const VmuxConfig *cfg;
        VmuxChan chans[VMUX_CHANNELS_MAX];
        size_t n_chans;
        uint32_t next_id;
        bool ready;
        uint8_t *out;          /* link output queue */
        size_t out_len, out_cap;
        uint8_t in[VMUX_LINK_IN_SIZE];
        size_t in_len;
} Vmux;

static void put32(uint8_t *p, uint32_t v) {
        p[0] = (uint8_t) v;
        p[1] = (uint8_t) (v >> 8);
        p[2] = (uint8_t) (v >> 16);
        p[3] = (uint8_t) (v >> 24);
}

static uint32_t get32(const uint8_t *p) {
        return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

void vmux_header_put(uint8_t *buf, uint32_t channel, uint32_t type, uint32_t length) {
        put32(buf, channel);
        put32(buf + 4, type);
        put32(buf + 8, length);
}

int vmux_header_get(const uint8_t *buf, size_t n, uint32_t *ret_channel, uint32_t *ret_type, uint32_t *ret_length) {
        uint32_t type, length;

        if (n < VMUX_HEADER_SIZE)
                return -EAGAIN;
        type = get32(buf + 4);
        length = get32(buf + 8);
        if (type < VMUX_HELLO || type >= _VMUX_TYPE_MAX || length > VMUX_DATA_MAX)
                return -EBADMSG;
        if ((type == VMUX_CREDIT && length != 4) || (type != VMUX_CREDIT && type != VMUX_DATA && length != 0))
                return -EBADMSG;
        *ret_channel = get32(buf);
        *ret_type = type;
        *ret_length = length;
        return 0;
}

static int vmux_send(Vmux *m, uint32_t chan, uint32_t type, const void *data, uint32_t length) {
        size_t need = m->out_len + VMUX_HEADER_SIZE + length;

        if (need > m->out_cap) {
                size_t cap = MAX(need, m->out_cap * 2);
                uint8_t *p = realloc(m->out, cap);
                if (!p)
                        return -ENOMEM;
                m->out = p;
                m->out_cap = cap;
        }
        vmux_header_put(m->out + m->out_len, chan, type, length);
        if (length > 0)
                memcpy(m->out + m->out_len + VMUX_HEADER_SIZE, data, length);
        m->out_len = need;
        return 0;
}

static VmuxChan *vmux_find(Vmux *m, uint32_t id) {
        for (size_t i = 0; i < m->n_chans; i++)
                if (m->chans[i].id == id)
                        return &m->chans[i];
        return NULL;
}

static VmuxChan *vmux_add(Vmux *m, uint32_t id, int fd) {
        VmuxChan *c;

        if (m->n_chans >= VMUX_CHANNELS_MAX)
                return NULL;
        c = &m->chans[m->n_chans];
        *c = (VmuxChan){ .id = id, .fd = fd };
        c->in = malloc(VMUX_WINDOW);
        if (!c->in)
                return NULL;
        m->n_chans++;
        return c;
}

/* Forgets a channel; tells the peer unless it told us. */
static int vmux_drop(Vmux *m, VmuxChan *c, bool tell) {
        uint32_t id = c->id;

        safe_close(c->fd);
        free(c->in);
        *c = m->chans[--m->n_chans];
        return tell ? vmux_send(m, id, VMUX_CLOSE, NULL, 0) : 0;
}

static void vmux_drop_all(Vmux *m) {
        while (m->n_chans > 0)
                (void) vmux_drop(m, &m->chans[0], false);
}

static int vmux_maybe_done(Vmux *m, VmuxChan *c) {
        if (c->local_eof && c->wr_shut)
                return vmux_drop(m, c, true);
        return 0;
}

static int vmux_open_guest(Vmux *m, uint32_t id) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd;

        if (id == 0 || vmux_find(m, id) || m->n_chans >= VMUX_CHANNELS_MAX)
                return -EPROTO;
        if (strlen(m->cfg->connect_path) >= sizeof sa.sun_path)
                return vmux_send(m, id, VMUX_CLOSE, NULL, 0);
        memcpy(sa.sun_path, m->cfg->connect_path, strlen(m->cfg->connect_path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0 || fd_nonblock(fd, true) < 0) {
                safe_close(fd);
                return vmux_send(m, id, VMUX_CLOSE, NULL, 0);
        }
        if (!vmux_add(m, id, fd)) {
                safe_close(fd);
                return -ENOMEM;
        }
        return 0;
}

/* One frame from the link. */
static int vmux_frame(Vmux *m, uint32_t id, uint32_t type, const uint8_t *p, uint32_t n) {
        bool host = m->cfg->role == VMUX_ROLE_HOST;
        VmuxChan *c;

        switch (type) {
        case VMUX_HELLO:
                if (!host) {
                        /* a new host side: whatever we had is gone; say we are here */
                        vmux_drop_all(m);
                        return vmux_send(m, 0, VMUX_HELLO, NULL, 0);
                }
                vmux_drop_all(m); /* the guest (re)started: whatever we had is gone */
                if (!m->ready && m->cfg->ready_fd >= 0) {
                        (void) loop_write(m->cfg->ready_fd, "r", 1);
                        (void) close(m->cfg->ready_fd);
                }
                m->ready = true;
                return 0;
        case VMUX_OPEN:
                if (host)
                        return -EPROTO;
                return vmux_open_guest(m, id);
        default:
                break;
        }
        c = vmux_find(m, id);
        if (!c)
                return 0; /* a channel one side closed while the other still spoke: fine */
        switch (type) {
        case VMUX_DATA:
                if (c->peer_eof || n > VMUX_WINDOW - c->in_len)
                        return -EPROTO;
                memcpy(c->in + c->in_len, p, n);
                c->in_len += n;
                return 0;
        case VMUX_EOF:
                c->peer_eof = true;
                if (c->in_len == 0 && !c->wr_shut) {
                        (void) shutdown(c->fd, SHUT_WR);
                        c->wr_shut = true;
                }
                return vmux_maybe_done(m, c);
        case VMUX_CLOSE:
                return vmux_drop(m, c, false);
        case VMUX_CREDIT: {
                uint32_t v = get32(p);
                if (v > c->unacked)
                        return -EPROTO;
                c->unacked -= v;
                return 0;
        }
        default:
                return -EPROTO;
        }
}

static int vmux_link_read(Vmux *m) {
        ssize_t k;
        size_t off = 0;
        int r;

        k = read(m->cfg->link_fd, m->in + m->in_len, sizeof m->in - m->in_len);
        if (k == 0)
                return -ECONNRESET;
        if (k < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : negative_errno();
        m->in_len += (size_t) k;
        for (;;) {
                uint32_t id, type, len;
                r = vmux_header_get(m->in + off, m->in_len - off, &id, &type, &len);
                if (r == -EAGAIN)
                        break;
                if (r < 0)
                        return -EPROTO;
                if (m->in_len - off < VMUX_HEADER_SIZE + len)
                        break;
                r = vmux_frame(m, id, type, m->in + off + VMUX_HEADER_SIZE, len);
                if (r < 0)
                        return r;
                off += VMUX_HEADER_SIZE + len;
        }
        memmove(m->in, m->in + off, m->in_len - off);
        m->in_len -= off;
        return 0;
}

static int vmux_link_write(Vmux *m) {
        ssize_t k = write(m->cfg->link_fd, m->out, m->out_len);
        if (k < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : negative_errno();
        memmove(m->out, m->out + k, m->out_len - (size_t) k);
        m->out_len -= (size_t) k;
        return 0;
}

static int vmux_chan_read(Vmux *m, VmuxChan *c) {
        uint8_t buf[VMUX_DATA_MAX];
        size_t room = MIN(sizeof buf, (size_t) (VMUX_WINDOW - c->unacked));
        ssize_t k = read(c->fd, buf, room);

        if (k < 0) {
                if (errno == EAGAIN || errno == EINTR)
                        return 0;
                return vmux_drop(m, c, true);
        }
        if (k == 0) {
                c->local_eof = true;
                int r = vmux_send(m, c->id, VMUX_EOF, NULL, 0);
                return r < 0 ? r : vmux_maybe_done(m, c);
        }
        c->unacked += (uint32_t) k;
        return vmux_send(m, c->id, VMUX_DATA, buf, (uint32_t) k);
}

static int vmux_chan_write(Vmux *m, VmuxChan *c) {
        ssize_t k = send(c->fd, c->in, c->in_len, MSG_NOSIGNAL);
        uint8_t v[4];
        int r;

        if (k < 0) {
                if (errno == EAGAIN || errno == EINTR)
                        return 0;
                return vmux_drop(m, c, true);
        }
        memmove(c->in, c->in + k, c->in_len - (size_t) k);
        c->in_len -= (size_t) k;
        c->to_credit += (uint32_t) k;
        if (c->to_credit >= VMUX_WINDOW / 4 || c->in_len == 0) {
                put32(v, c->to_credit);
                c->to_credit = 0;
                r = vmux_send(m, c->id, VMUX_CREDIT, v, sizeof v);
                if (r < 0)
                        return r;
        }
        if (c->in_len == 0 && c->peer_eof && !c->wr_shut) {
                (void) shutdown(c->fd, SHUT_WR);
                c->wr_shut = true;
                return vmux_maybe_done(m, c);
        }
        return 0;
}

static int vmux_accept(Vmux *m) {
        int fd = accept4(m->cfg->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        uint32_t id;

        if (fd < 0)
                return 0;
        do
                id = ++m->next_id;
        while (id == 0 || vmux_find(m, id));
        if (!vmux_add(m, id, fd)) {
                safe_close(fd);
                return 0;
        }
        return vmux_send(m, id, VMUX_OPEN, NULL, 0);
}

int vmux_run(const VmuxConfig *cfg) {
        struct pollfd pfd[VMUX_CHANNELS_MAX + 2];
        uint32_t ids[VMUX_CHANNELS_MAX];
        Vmux m = { .cfg = cfg };
        int r = 0;

        (void) fd_nonblock(cfg->link_fd, true);
        if (cfg->role == VMUX_ROLE_GUEST || cfg->hello_first) {
                r = vmux_send(&m, 0, VMUX_HELLO, NULL, 0);
                if (r < 0)
                        goto out;
        }
        for (;;) {
                bool host = cfg->role == VMUX_ROLE_HOST;
                bool can_read = m.out_len < VMUX_LINK_OUT_HIGH;
                size_t n = 0, nc = m.n_chans;

                pfd[n++] = (struct pollfd){ .fd = cfg->link_fd, .events = POLLIN | (m.out_len ? POLLOUT : 0) };
                pfd[n++] = (struct pollfd){
                        .fd = host && m.ready && m.n_chans < VMUX_CHANNELS_MAX ? cfg->listen_fd : -1,
                        .events = POLLIN,
                };
                for (size_t i = 0; i < nc; i++) {
                        VmuxChan *c = &m.chans[i];
                        short ev = 0;
                        if (!c->local_eof && can_read && c->unacked < VMUX_WINDOW)
                                ev |= POLLIN;
                        if (c->in_len > 0)
                                ev |= POLLOUT;
                        ids[i] = c->id;
                        pfd[n++] = (struct pollfd){ .fd = ev ? c->fd : -1, .events = ev };
                }
                if (poll(pfd, n, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        r = negative_errno();
                        goto out;
                }
                if (pfd[0].revents & POLLOUT) {
                        r = vmux_link_write(&m);
                        if (r < 0)
                                goto out;
                }
                if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                        r = vmux_link_read(&m);
                        if (r == -ECONNRESET) {
                                r = 0;
                                goto out;
                        }
                        if (r < 0)
                                goto out;
                }
                /* channels may have moved in the array: look them up by id */
                for (size_t i = 0; i < nc; i++) {
                        short re = pfd[2 + i].revents;
                        VmuxChan *c;
                        if (!re || !(c = vmux_find(&m, ids[i])))
                                continue;
                        if (re & POLLOUT || (re & (POLLHUP | POLLERR) && c->in_len > 0))
                                r = vmux_chan_write(&m, c);
                        if (r >= 0 && (c = vmux_find(&m, ids[i])) && re & (POLLIN | POLLHUP | POLLERR) &&
                            !c->local_eof)
                                r = vmux_chan_read(&m, c);
                        if (r < 0)
                                goto out;
                }
                if (pfd[1].revents & POLLIN) {
                        r = vmux_accept(&m);
                        if (r < 0)
                                goto out;
                }
        }
out:
        vmux_drop_all(&m);
        free(m.out);
        safe_close(cfg->link_fd);
        if (cfg->listen_fd >= 0)
                safe_close(cfg->listen_fd);
        return r;
}
