/* SPDX-License-Identifier: MIT */
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "proto.h"
#include "sock-io.h"

static const char *const proto_type_table[_PROTO_TYPE_MAX] = {
        [PROTO_HELLO] = "HELLO",
        [PROTO_PING] = "PING",
        [PROTO_PONG] = "PONG",
        [PROTO_EXEC] = "EXEC",
        [PROTO_STARTED] = "STARTED",
        [PROTO_STDIN] = "STDIN",
        [PROTO_STDIN_EOF] = "STDIN_EOF",
        [PROTO_STDOUT] = "STDOUT",
        [PROTO_STDERR] = "STDERR",
        [PROTO_EXIT] = "EXIT",
        [PROTO_SIGNAL] = "SIGNAL",
        [PROTO_RESIZE] = "RESIZE",
        [PROTO_ATTACH] = "ATTACH",
        [PROTO_PS] = "PS",
        [PROTO_FILE_READ] = "FILE_READ",
        [PROTO_FILE_INFO] = "FILE_INFO",
        [PROTO_FILE_WRITE] = "FILE_WRITE",
        [PROTO_FILE_LIST] = "FILE_LIST",
        [PROTO_FILE_STAT] = "FILE_STAT",
        [PROTO_FILE_MKDIR] = "FILE_MKDIR",
        [PROTO_FILE_REMOVE] = "FILE_REMOVE",
        [PROTO_FILE_RENAME] = "FILE_RENAME",
        [PROTO_DATA] = "DATA",
        [PROTO_DATA_END] = "DATA_END",
        [PROTO_RESULT] = "RESULT",
        [PROTO_ERROR] = "ERROR",
        [PROTO_FILE_WATCH] = "FILE_WATCH",
        [PROTO_RESTORED] = "RESTORED",
        [PROTO_SYNC] = "SYNC",
        [PROTO_DROPPED] = "DROPPED",
};

static bool proto_type_valid(int t) {
        return t > 0 && t < _PROTO_TYPE_MAX && proto_type_table[t];
}

const char *proto_type_to_string(ProtoType t) {
        return proto_type_valid((int) t) ? proto_type_table[t] : NULL;
}

ProtoType proto_type_from_string(const char *s) {
        if (!s)
                return _PROTO_TYPE_INVALID;
        for (int t = 1; t < _PROTO_TYPE_MAX; t++)
                if (proto_type_table[t] && streq(proto_type_table[t], s))
                        return (ProtoType) t;
        return _PROTO_TYPE_INVALID;
}

bool proto_type_is_json(ProtoType t) {
        if (!proto_type_valid((int) t))
                return false;
        switch (t) {
        case PROTO_STDIN:
        case PROTO_STDIN_EOF:
        case PROTO_STDOUT:
        case PROTO_STDERR:
        case PROTO_DATA:
        case PROTO_DATA_END:
                return false;
        default:
                return true;
        }
}

void proto_frame_done(ProtoFrame *f) {
        if (!f)
                return;
        f->payload = mfree(f->payload);
        f->len = 0;
}

static void put_le16(uint8_t *p, uint16_t v) {
        p[0] = (uint8_t) v;
        p[1] = (uint8_t) (v >> 8);
}

static void put_le32(uint8_t *p, uint32_t v) {
        p[0] = (uint8_t) v;
        p[1] = (uint8_t) (v >> 8);
        p[2] = (uint8_t) (v >> 16);
        p[3] = (uint8_t) (v >> 24);
}

static uint16_t get_le16(const uint8_t *p) {
        return (uint16_t) (p[0] | (p[1] << 8));
}

static uint32_t get_le32(const uint8_t *p) {
        return (uint32_t) p[0] | ((uint32_t) p[1] << 8) | ((uint32_t) p[2] << 16) | ((uint32_t) p[3] << 24);
}

void proto_header_encode(uint8_t out[PROTO_HEADER_SIZE], ProtoType type, uint32_t stream, uint32_t len) {
        put_le32(out, len);
        put_le16(out + 4, (uint16_t) type);
        put_le16(out + 6, 0);
        put_le32(out + 8, stream);
}

int proto_header_decode(const uint8_t in[PROTO_HEADER_SIZE], ProtoType *ret_type, uint32_t *ret_stream,
                        uint32_t *ret_len) {
        uint32_t len = get_le32(in);
        uint16_t type = get_le16(in + 4), flags = get_le16(in + 6);

        if (!proto_type_valid(type) || flags != 0)
                return -EBADMSG;
        if (len > PROTO_PAYLOAD_MAX)
                return -EMSGSIZE;
        if (ret_type)
                *ret_type = (ProtoType) type;
        if (ret_stream)
                *ret_stream = get_le32(in + 8);
        if (ret_len)
                *ret_len = len;
        return 0;
}

/* Writes all iovecs; MSG_NOSIGNAL on sockets, plain writev on anything else
 * (pipes, virtio-serial character devices). With a deadline (>= 0) every
 * write waits for room first and never blocks (a peer that reads a byte at
 * a time cannot hold us past it). */
static int write_iov_all(int fd, struct iovec *iov, size_t n_iov, int64_t deadline_msec) {
        bool use_writev = false;

        while (n_iov > 0) {
                ssize_t k;
                int r;

                if (iov->iov_len == 0) {
                        iov++;
                        n_iov--;
                        continue;
                }
                r = deadline_msec >= 0 ? sock_wait_until(fd, POLLOUT, deadline_msec) : 0;
                if (r < 0)
                        return r;
                if (use_writev)
                        k = writev(fd, iov, (int) n_iov);
                else {
                        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = n_iov };
                        k = sendmsg(fd, &mh, MSG_NOSIGNAL | (deadline_msec >= 0 ? MSG_DONTWAIT : 0));
                        if (k < 0 && errno == ENOTSOCK) {
                                use_writev = true;
                                continue;
                        }
                }
                if (k < 0) {
                        if (errno == EINTR || (deadline_msec >= 0 && errno == EAGAIN))
                                continue;
                        return negative_errno();
                }
                if (k == 0)
                        return -EIO;
                iovec_advance(&iov, &n_iov, (size_t) k);
        }
        return 0;
}

int proto_send(int fd, ProtoType type, uint32_t stream, const void *payload, size_t len) {
        return proto_send_until(fd, -1, type, stream, payload, len);
}

int proto_send_until(int fd, int64_t deadline_msec, ProtoType type, uint32_t stream, const void *payload,
                     size_t len) {
        uint8_t hdr[PROTO_HEADER_SIZE];
        struct iovec iov[2];

        if (!proto_type_valid((int) type))
                return -EINVAL;
        if (len > PROTO_PAYLOAD_MAX)
                return -EMSGSIZE;
        if (len > 0 && !payload)
                return -EINVAL;
        proto_header_encode(hdr, type, stream, (uint32_t) len);
        iov[0] = (struct iovec){ .iov_base = hdr, .iov_len = sizeof hdr };
        iov[1] = (struct iovec){ .iov_base = (void *) payload, .iov_len = len };
        return write_iov_all(fd, iov, 2, deadline_msec);
}

int proto_send_json(int fd, ProtoType type, uint32_t stream, const char *json) {
        if (!json)
                return -EINVAL;
        return proto_send(fd, type, stream, json, strlen(json));
}

/* Reads exactly n bytes. Returns n, 0 on EOF before the first byte, -EBADMSG on
 * EOF in the middle (a truncated frame), -errno on errors. */
static ssize_t read_exact(int fd, void *buf, size_t n, int64_t deadline_msec) {
        size_t done = 0;

        while (done < n) {
                int r = deadline_msec >= 0 ? sock_wait_until(fd, POLLIN, deadline_msec) : 0;
                if (r < 0)
                        return r;
                ssize_t k = read(fd, (uint8_t *) buf + done, n - done);
                if (k < 0) {
                        if (errno == EINTR || (deadline_msec >= 0 && errno == EAGAIN))
                                continue;
                        return negative_errno();
                }
                if (k == 0)
                        return done == 0 ? 0 : -EBADMSG;
                done += (size_t) k;
        }
        return (ssize_t) done;
}

int proto_recv(int fd, ProtoFrame *ret) {
        return proto_recv_until(fd, -1, ret);
}

int proto_recv_until(int fd, int64_t deadline_msec, ProtoFrame *ret) {
        uint8_t hdr[PROTO_HEADER_SIZE];
        _cleanup_free_ char *payload = NULL;
        ProtoType type;
        uint32_t stream, len;
        ssize_t k;
        int r;

        if (!ret)
                return -EINVAL;
        k = read_exact(fd, hdr, sizeof hdr, deadline_msec);
        if (k < 0)
                return (int) k;
        if (k == 0)
                return -ECONNRESET;
        r = proto_header_decode(hdr, &type, &stream, &len);
        if (r < 0)
                return r;
        payload = malloc((size_t) len + 1);
        if (!payload)
                return -ENOMEM;
        if (len > 0) {
                k = read_exact(fd, payload, len, deadline_msec);
                if (k < 0)
                        return (int) k;
                if (k == 0)
                        return -EBADMSG; /* EOF right after the header: truncated */
        }
        payload[len] = 0;
        *ret = (ProtoFrame){ .type = type, .stream = stream, .len = len, .payload = TAKE_PTR(payload) };
        return 0;
}

void proto_reader_init(ProtoReader *r) {
        *r = (ProtoReader){};
}

void proto_reader_done(ProtoReader *r) {
        if (!r)
                return;
        proto_frame_done(&r->cur);
        proto_reader_init(r);
}

int proto_reader_feed(ProtoReader *r, const void *p, size_t n, size_t *ret_consumed, ProtoFrame *ret) {
        const uint8_t *in = p;
        size_t used = 0;
        int k;

        if (!r || (!p && n > 0) || !ret_consumed || !ret)
                return -EINVAL;
        if (n == 0) {
                *ret_consumed = 0;
                return 0;
        }

        if (!r->in_payload) {
                size_t take = MIN(n, PROTO_HEADER_SIZE - r->have);
                memcpy(r->header + r->have, in, take);
                r->have += take;
                used += take;
                if (r->have < PROTO_HEADER_SIZE) {
                        *ret_consumed = used;
                        return 0;
                }
                k = proto_header_decode(r->header, &r->cur.type, &r->cur.stream, &r->cur.len);
                if (k < 0) {
                        *ret_consumed = used;
                        return k;
                }
                /* The whole payload is allocated only once its header is valid
                 * (bounded by PROTO_PAYLOAD_MAX). */
                r->cur.payload = malloc((size_t) r->cur.len + 1);
                if (!r->cur.payload) {
                        *ret_consumed = used;
                        return -ENOMEM;
                }
                r->in_payload = true;
                r->have = 0;
        }

        if (r->have < r->cur.len && used < n) {
                size_t take = MIN(n - used, (size_t) r->cur.len - r->have);
                memcpy(r->cur.payload + r->have, in + used, take);
                r->have += take;
                used += take;
        }
        *ret_consumed = used;
        if (r->have < r->cur.len)
                return 0;

        r->cur.payload[r->cur.len] = 0;
        *ret = r->cur;
        r->cur = (ProtoFrame){};
        r->have = 0;
        r->in_payload = false;
        return 1;
}

/* Codes as they travel; the table is the only source of these strings. */
static const struct {
        int err;
        const char *code;
} proto_errno_table[] = {
        { EPERM, "EPERM" },
        { ENOENT, "ENOENT" },
        { ESRCH, "ESRCH" },
        { EINTR, "EINTR" },
        { EIO, "EIO" },
        { ENXIO, "ENXIO" },
        { E2BIG, "E2BIG" },
        { ENOEXEC, "ENOEXEC" },
        { EBADF, "EBADF" },
        { ECHILD, "ECHILD" },
        { EAGAIN, "EAGAIN" },
        { ENOMEM, "ENOMEM" },
        { EACCES, "EACCES" },
        { EFAULT, "EFAULT" },
        { EBUSY, "EBUSY" },
        { EEXIST, "EEXIST" },
        { EXDEV, "EXDEV" },
        { ENODEV, "ENODEV" },
        { ENOTDIR, "ENOTDIR" },
        { EISDIR, "EISDIR" },
        { EINVAL, "EINVAL" },
        { ENFILE, "ENFILE" },
        { EMFILE, "EMFILE" },
        { ENOTTY, "ENOTTY" },
        { ETXTBSY, "ETXTBSY" },
        { EFBIG, "EFBIG" },
        { ENOSPC, "ENOSPC" },
        { ESPIPE, "ESPIPE" },
        { EROFS, "EROFS" },
        { EMLINK, "EMLINK" },
        { EPIPE, "EPIPE" },
        { ERANGE, "ERANGE" },
        { ENAMETOOLONG, "ENAMETOOLONG" },
        { ENOSYS, "ENOSYS" },
        { ENOTEMPTY, "ENOTEMPTY" },
        { ELOOP, "ELOOP" },
        { EPROTO, "EPROTO" },
        { EBADMSG, "EBADMSG" },
        { EOVERFLOW, "EOVERFLOW" },
        { EILSEQ, "EILSEQ" },
        { EMSGSIZE, "EMSGSIZE" },
        { EOPNOTSUPP, "EOPNOTSUPP" },
        { ECONNRESET, "ECONNRESET" },
        { ETIMEDOUT, "ETIMEDOUT" },
        { ECANCELED, "ECANCELED" },
        { EDQUOT, "EDQUOT" },
};

const char *proto_errno_to_code(int err) {
        if (err < 0)
                err = -err;
        for (size_t i = 0; i < ELEMENTSOF(proto_errno_table); i++)
                if (proto_errno_table[i].err == err)
                        return proto_errno_table[i].code;
        return "EIO";
}

int proto_errno_from_code(const char *code) {
        if (!code)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(proto_errno_table); i++)
                if (streq(proto_errno_table[i].code, code))
                        return proto_errno_table[i].err;
        return -EINVAL;
}
