/* SPDX-License-Identifier: MIT */
/* Network reach from inside a sandbox. Each prints one word (and an errno name on error):
 *   net tcp ADDR PORT MS        connect (IPv4 or IPv6): connected | refused | timeout | error:E
 *   net udp ADDR PORT TEXT      one datagram: sent | error:E
 *   net listen ADDR PORT MS     accept one TCP connection: accepted | none | error:E
 *   net raw                     raw/packet sockets: "NAME ok|error:E" lines
 *   net spoof SRC ADDR PORT     a datagram from a forged source (IP_TRANSPARENT): sent | error:E
 *   net xchg tcp|udp ADDR PORT HEX MS
 *                               sends the bytes HEX (TCP: after connecting; UDP: one datagram on a
 *                               connected socket) and reads for MS ms: "reply HEX" (what came, up to
 *                               64 KiB; TCP: until EOF or MS) | closed (TCP EOF or reset, nothing read) |
 *                               none (nothing within MS) | refused | timeout (TCP connect) | error:E
 *                               TCP: HEX1.HEX2 sends HEX1, reads once (a CONNECT's 200), then HEX2 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int addr_of(const char *s, int port, struct sockaddr_storage *ss, socklen_t *len) {
        struct sockaddr_in *a = (struct sockaddr_in *) ss;
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *) ss;
        memset(ss, 0, sizeof *ss);
        if (inet_pton(AF_INET, s, &a->sin_addr) == 1) {
                a->sin_family = AF_INET;
                a->sin_port = htons(port);
                *len = sizeof *a;
                return AF_INET;
        }
        if (inet_pton(AF_INET6, s, &a6->sin6_addr) == 1) {
                a6->sin6_family = AF_INET6;
                a6->sin6_port = htons(port);
                *len = sizeof *a6;
                return AF_INET6;
        }
        return -1;
}

static int fail(void) {
        printf("error:%s\n", strerrorname_np(errno) ?: "?");
        return 0;
}

static int hexval(char c) {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int xchg(bool udp, const char *addr, int port, const char *hex, int ms) {
        static unsigned char out[65536], in[65536];
        struct sockaddr_storage ss;
        socklen_t len;
        const char *dot = strchr(hex, '.');
        size_t hl = dot ? (size_t) (dot - hex) : strlen(hex), n = hl / 2, got = 0;
        int fam, fd;
        bool eof = false;

        if (hl % 2 || n > sizeof out || (fam = addr_of(addr, port, &ss, &len)) < 0 || (dot && udp))
                return 2;
        for (size_t i = 0; i < n; i++) {
                int a = hexval(hex[2 * i]), b = hexval(hex[2 * i + 1]);
                if (a < 0 || b < 0)
                        return 2;
                out[i] = (unsigned char) (a << 4 | b);
        }
        fd = socket(fam, (udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return fail();
        if (connect(fd, (struct sockaddr *) &ss, len) < 0 && errno != EINPROGRESS)
                return errno == ECONNREFUSED ? (puts("refused"), 0) : fail();
        if (!udp) {
                struct pollfd p = { .fd = fd, .events = POLLOUT };
                int err = 0;
                socklen_t el = sizeof err;
                if (poll(&p, 1, ms) == 0)
                        return puts("timeout"), 0;
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
                if (err == ECONNREFUSED)
                        return puts("refused"), 0;
                if (err) {
                        errno = err;
                        return fail();
                }
        }
        for (size_t o = 0; o < n;) {
                ssize_t k = send(fd, out + o, n - o, MSG_NOSIGNAL);
                if (k < 0 && errno == EAGAIN) {
                        struct pollfd p = { .fd = fd, .events = POLLOUT };
                        poll(&p, 1, ms);
                        continue;
                }
                if (k < 0)
                        return errno == ECONNRESET || errno == EPIPE ? (puts("closed"), 0) : fail();
                o += (size_t) k;
                if (o == n && dot) { /* the first part is out: one answer, then the second part */
                        struct pollfd p = { .fd = fd, .events = POLLIN };
                        if (poll(&p, 1, ms) > 0) {
                                ssize_t r = recv(fd, in, sizeof in, 0);
                                if (r > 0)
                                        got = (size_t) r;
                        }
                        hex = dot + 1;
                        dot = NULL;
                        hl = strlen(hex);
                        if (hl % 2 || hl / 2 > sizeof out)
                                return 2;
                        n = hl / 2;
                        for (size_t i = 0; i < n; i++) {
                                int a = hexval(hex[2 * i]), b = hexval(hex[2 * i + 1]);
                                if (a < 0 || b < 0)
                                        return 2;
                                out[i] = (unsigned char) (a << 4 | b);
                        }
                        o = 0;
                }
        }
        while (!eof && got < sizeof in) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (poll(&p, 1, ms) <= 0)
                        break;
                ssize_t k = recv(fd, in + got, sizeof in - got, 0);
                if (k < 0 && errno == EAGAIN)
                        continue;
                if (k < 0 && udp && errno == ECONNREFUSED)
                        break;
                if (k < 0 && errno != ECONNRESET)
                        return fail();
                if (k <= 0)
                        eof = true;
                else
                        got += (size_t) k;
                if (udp)
                        break;
        }
        if (got == 0)
                return puts(eof ? "closed" : "none"), 0;
        printf("reply ");
        for (size_t i = 0; i < got; i++)
                printf("%02x", in[i]);
        putchar('\n');
        return 0;
}

int main(int argc, char **argv) {
        struct sockaddr_storage ss;
        socklen_t len;
        int fam, fd, one = 1;

        if (argc == 5 && !strcmp(argv[1], "tcp")) {
                if ((fam = addr_of(argv[2], atoi(argv[3]), &ss, &len)) < 0)
                        return 2;
                fd = socket(fam, SOCK_STREAM | SOCK_NONBLOCK, 0);
                if (fd < 0)
                        return fail();
                if (connect(fd, (struct sockaddr *) &ss, len) < 0 && errno != EINPROGRESS)
                        return errno == ECONNREFUSED ? (puts("refused"), 0) : fail();
                struct pollfd p = { .fd = fd, .events = POLLOUT };
                if (poll(&p, 1, atoi(argv[4])) == 0)
                        return puts("timeout"), 0;
                int err = 0;
                socklen_t el = sizeof err;
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
                if (err == 0)
                        return puts("connected"), 0;
                if (err == ECONNREFUSED)
                        return puts("refused"), 0;
                errno = err;
                return fail();
        }
        if (argc == 5 && (!strcmp(argv[1], "udp") || !strcmp(argv[1], "listen"))) {
                bool udp = !strcmp(argv[1], "udp");
                if ((fam = addr_of(argv[2], atoi(argv[3]), &ss, &len)) < 0)
                        return 2;
                fd = socket(fam, udp ? SOCK_DGRAM : SOCK_STREAM, 0);
                if (fd < 0)
                        return fail();
                if (udp) {
                        if (sendto(fd, argv[4], strlen(argv[4]), 0, (struct sockaddr *) &ss, len) < 0)
                                return fail();
                        return puts("sent"), 0;
                }
                setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
                if (bind(fd, (struct sockaddr *) &ss, len) < 0 || listen(fd, 8) < 0)
                        return fail();
                puts("listening");
                fflush(stdout);
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (poll(&p, 1, atoi(argv[4])) <= 0)
                        return puts("none"), 0;
                return puts("accepted"), 0;
        }
        if (argc == 2 && !strcmp(argv[1], "raw")) {
                static const struct { const char *name; int fam, type, proto; } t[] = {
                        { "raw-icmp", AF_INET, SOCK_RAW, IPPROTO_ICMP },
                        { "raw-ip", AF_INET, SOCK_RAW, IPPROTO_RAW },
                        { "raw-udp", AF_INET, SOCK_RAW, IPPROTO_UDP },
                        { "packet", AF_PACKET, SOCK_RAW, 0 },
                        { "packet-dgram", AF_PACKET, SOCK_DGRAM, 0 },
                };
                for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
                        fd = socket(t[i].fam, t[i].type, t[i].proto);
                        if (fd >= 0)
                                printf("%s ok\n", t[i].name);
                        else
                                printf("%s error:%s\n", t[i].name, strerrorname_np(errno) ?: "?");
                }
                return 0;
        }
        if (argc == 5 && !strcmp(argv[1], "spoof")) {
                struct sockaddr_in src = { .sin_family = AF_INET };
                if (inet_pton(AF_INET, argv[2], &src.sin_addr) != 1 || addr_of(argv[3], atoi(argv[4]), &ss, &len) != AF_INET)
                        return 2;
                fd = socket(AF_INET, SOCK_DGRAM, 0);
                if (fd < 0)
                        return fail();
                if (setsockopt(fd, SOL_IP, IP_FREEBIND, &one, sizeof one) < 0 ||
                    setsockopt(fd, SOL_IP, IP_TRANSPARENT, &one, sizeof one) < 0 ||
                    bind(fd, (struct sockaddr *) &src, sizeof src) < 0)
                        return fail();
                if (sendto(fd, "forged", 6, 0, (struct sockaddr *) &ss, len) < 0)
                        return fail();
                return puts("sent"), 0;
        }
        if (argc == 7 && !strcmp(argv[1], "xchg") && (!strcmp(argv[2], "tcp") || !strcmp(argv[2], "udp")))
                return xchg(!strcmp(argv[2], "udp"), argv[3], atoi(argv[4]), argv[5], atoi(argv[6]));
        return 2;
}
