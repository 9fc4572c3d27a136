/* SPDX-License-Identifier: MIT */
/* Framed, checksummed streams between cluster hosts: see ship-stream.h. */
#include <openssl/evp.h>
#include <poll.h>
#include <stdio.h>

#include "alloc-util.h"
#include "cluster-net.h"
#include "fd-util.h"
#include "json.h"
#include "ship-stream.h"
#include "str-util.h"

#define SHIP_TRAILER_MAX 256U

typedef EVP_MD_CTX *MdCtx;
static void md_ctx_freep(MdCtx *c) {
        if (*c)
                EVP_MD_CTX_free(*c);
}

static int md_new(EVP_MD_CTX **ret) {
        EVP_MD_CTX *c = EVP_MD_CTX_new();

        if (!c)
                return -ENOMEM;
        if (EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1) {
                EVP_MD_CTX_free(c);
                return -EIO;
        }
        *ret = c;
        return 0;
}

static int md_hex(EVP_MD_CTX *c, char *hex) {
        unsigned char d[EVP_MAX_MD_SIZE];
        unsigned n = 0;

        if (EVP_DigestFinal_ex(c, d, &n) != 1 || n != 32)
                return -EIO;
        for (unsigned i = 0; i < n; i++)
                snprintf(hex + 2 * i, 3, "%02x", d[i]);
        return 0;
}

/* Waits until fd is readable (or SHIP_IDLE_TIMEOUT_MSEC passed). */
static int wait_readable(int fd) {
        for (;;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                int r = poll(&p, 1, SHIP_IDLE_TIMEOUT_MSEC);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return negative_errno();
                return r == 0 ? -ETIMEDOUT : 0;
        }
}

/* Reads exactly n bytes (EOF before: -ECONNRESET). */
static int read_full(int fd, void *buf, size_t n) {
        size_t got = 0;

        while (got < n) {
                ssize_t k;
                int r = wait_readable(fd);
                if (r < 0)
                        return r;
                k = read(fd, (char *) buf + got, n - got);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return negative_errno();
                if (k == 0)
                        return -ECONNRESET;
                got += (size_t) k;
        }
        return 0;
}

static int send_chunk(int sock, const void *data, uint32_t n) {
        uint8_t h[4] = { (uint8_t) (n >> 24), (uint8_t) (n >> 16), (uint8_t) (n >> 8), (uint8_t) n };
        int r = loop_write(sock, h, sizeof h);
        if (r >= 0 && n > 0)
                r = loop_write(sock, data, n);
        return r;
}

int ship_stream_send(int sock, int in_fd, int (*finish)(void *userdata), void *userdata, char *ret_sha256,
                     uint64_t *ret_bytes) {
        _cleanup_(md_ctx_freep) MdCtx md = NULL;
        _cleanup_free_ char *buf = malloc(SHIP_CHUNK_MAX);
        char hex[SHIP_SHA256_HEX], trailer[SHIP_TRAILER_MAX];
        uint64_t total = 0;
        int r, k;

        if (!buf)
                return -ENOMEM;
        r = md_new(&md);
        if (r < 0)
                return r;
        for (;;) {
                ssize_t n = read(in_fd, buf, SHIP_CHUNK_MAX);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return negative_errno();
                if (n == 0)
                        break;
                if (EVP_DigestUpdate(md, buf, (size_t) n) != 1)
                        return -EIO;
                r = send_chunk(sock, buf, (uint32_t) n);
                if (r < 0)
                        return r;
                total += (uint64_t) n;
        }
        /* the producer must have ended well before the stream is declared complete */
        r = finish ? finish(userdata) : 0;
        if (r < 0)
                return r;
        r = md_hex(md, hex);
        if (r < 0)
                return r;
        r = send_chunk(sock, NULL, 0);
        if (r < 0)
                return r;
        k = snprintf(trailer, sizeof trailer, "{\"sha256\":\"%s\",\"bytes\":%" PRIu64 "}\n", hex, total);
        r = loop_write(sock, trailer, (size_t) k);
        if (r < 0)
                return r;
        if (ret_sha256)
                memcpy(ret_sha256, hex, SHIP_SHA256_HEX);
        if (ret_bytes)
                *ret_bytes = total;
        return 0;
}

int ship_stream_recv(int sock, int out_fd, uint64_t max_bytes, char *ret_sha256, uint64_t *ret_bytes,
                     const char **ret_why) {
        _cleanup_(md_ctx_freep) MdCtx md = NULL;
        _cleanup_free_ char *buf = malloc(SHIP_CHUNK_MAX);
        _cleanup_json_ JsonValue *v = NULL;
        char hex[SHIP_SHA256_HEX], line[SHIP_TRAILER_MAX];
        const char *want;
        uint64_t total = 0, want_bytes = 0;
        size_t len = 0;
        int r, write_error = 0;

        if (ret_why)
                *ret_why = NULL;
        if (!buf)
                return -ENOMEM;
        r = md_new(&md);
        if (r < 0)
                return r;
        for (;;) {
                uint8_t h[4];
                uint32_t n;

                r = read_full(sock, h, sizeof h);
                if (r < 0)
                        return r;
                n = (uint32_t) h[0] << 24 | (uint32_t) h[1] << 16 | (uint32_t) h[2] << 8 | h[3];
                if (n == 0)
                        break;
                if (n > SHIP_CHUNK_MAX) {
                        if (ret_why)
                                *ret_why = "a chunk longer than allowed";
                        return -EBADMSG;
                }
                if (max_bytes > 0 && total + n > max_bytes)
                        return -EFBIG;
                r = read_full(sock, buf, n);
                if (r < 0)
                        return r;
                if (EVP_DigestUpdate(md, buf, n) != 1)
                        return -EIO;
                if (write_error == 0) {
                        /* out_fd's reader gave up (btrfs receive refused the stream): the
                         * rest is read and dropped, so the sender gets to hear the answer */
                        r = loop_write(out_fd, buf, n);
                        if (r < 0)
                                write_error = r;
                }
                total += n;
        }
        r = md_hex(md, hex);
        if (r < 0)
                return r;
        r = net_read_line(sock, line, sizeof line, SHIP_IDLE_TIMEOUT_MSEC, &len);
        if (r < 0)
                return r;
        if (write_error < 0)
                return write_error;
        if (json_parse(line, len, &v, NULL, 0) < 0 || !(want = json_string(json_get(v, "sha256"))) ||
            json_uint64(json_get(v, "bytes"), &want_bytes) < 0) {
                if (ret_why)
                        *ret_why = "a malformed trailer";
                return -EBADMSG;
        }
        if (!streq(want, hex)) {
                if (ret_why)
                        *ret_why = "the sha256 of the stream does not match";
                return -EBADMSG;
        }
        if (want_bytes != total) {
                if (ret_why)
                        *ret_why = "the stream's length does not match";
                return -EBADMSG;
        }
        if (ret_sha256)
                memcpy(ret_sha256, hex, SHIP_SHA256_HEX);
        if (ret_bytes)
                *ret_bytes = total;
        return 0;
}
