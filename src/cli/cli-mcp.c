/* SPDX-License-Identifier: MIT */
/* space mcp: the MCP server over stdio (one JSON-RPC message a line, the
 * CLI's key), or with --listen over streamable HTTP (POST /mcp; each
 * client's own space key as its bearer token; a session per initialize). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli-common.h"
#include "cli-verbs.h"
#include "fd-util.h"
#include "http-parse.h"
#include "mcp-server.h"

#define MCP_SESSIONS_MAX 1024U
#define MCP_SESSION_ID_LEN 32U
#define MCP_HTTP_CONNS_MAX 256
#define MCP_HTTP_TIMEOUT_MSEC 30000 /* to read a request */

/* ---- stdio ---- */

static int stdout_send(void *userdata, const char *json, size_t n) {
        pthread_mutex_t *lock = userdata;
        int r;

        pthread_mutex_lock(lock);
        r = loop_write(STDOUT_FILENO, json, n);
        if (r >= 0)
                r = loop_write(STDOUT_FILENO, "\n", 1);
        pthread_mutex_unlock(lock);
        return r;
}

static int mcp_stdio(const char *key) {
        static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        McpServer s = { .api_url = cli_url(), .api_key = key };
        _cleanup_free_ char *buf = NULL;
        size_t n = 0, allocated = 0;

        for (;;) {
                char *nl;
                ssize_t k;

                if (GREEDY_REALLOC(buf, allocated, n + 65536) < 0)
                        return cli_error_errno(-ENOMEM, "out of memory");
                k = read(STDIN_FILENO, buf + n, allocated - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return cli_error_errno(-errno, "cannot read stdin: %m");
                n += (size_t) k;
                while ((nl = memchr(buf, '\n', n))) {
                        size_t len = (size_t) (nl - buf);
                        if (len > 0 && buf[len - 1] == '\r')
                                len--;
                        if (len > 0 && mcp_server_handle(&s, buf, len, stdout_send, &lock) < 0)
                                return cli_error_errno(-EIO, "cannot write to stdout");
                        len = (size_t) (nl - buf) + 1;
                        memmove(buf, buf + len, n - len);
                        n -= len;
                }
                if (n > MCP_MESSAGE_MAX)
                        return cli_error("a message on stdin is larger than %u bytes", MCP_MESSAGE_MAX);
                if (k == 0)
                        return 0; /* the client closed stdin: done */
        }
}

/* ---- streamable HTTP ---- */

typedef struct Session {
        char id[MCP_SESSION_ID_LEN + 1];
        char *key;
} Session;

static Session sessions[MCP_SESSIONS_MAX];
static size_t sessions_next;
static pthread_mutex_t sessions_lock = PTHREAD_MUTEX_INITIALIZER;
static char http_origin_host[256];

static void session_new(const char *key, char ret_id[static MCP_SESSION_ID_LEN + 1]) {
        Session *s;

        if (random_alnum(ret_id, MCP_SESSION_ID_LEN) < 0)
                ret_id[0] = 0;
        ret_id[MCP_SESSION_ID_LEN] = 0;
        pthread_mutex_lock(&sessions_lock);
        s = &sessions[sessions_next++ % MCP_SESSIONS_MAX]; /* the oldest goes */
        free(s->key);
        memcpy(s->id, ret_id, sizeof s->id);
        s->key = strdup(key);
        pthread_mutex_unlock(&sessions_lock);
}

/* 1 if id is a live session of this key, 0 if unknown, -EPERM if another key's. */
static int session_check(const char *id, const char *key, bool remove) {
        int r = 0;

        pthread_mutex_lock(&sessions_lock);
        for (size_t i = 0; i < MCP_SESSIONS_MAX && r == 0; i++)
                if (sessions[i].key && streq(sessions[i].id, id)) {
                        r = streq(sessions[i].key, key) ? 1 : -EPERM;
                        if (r > 0 && remove) {
                                sessions[i].key = mfree(sessions[i].key);
                                sessions[i].id[0] = 0;
                        }
                }
        pthread_mutex_unlock(&sessions_lock);
        return r;
}

static int http_reply(int fd, int status, const char *reason, const char *extra, const char *ctype, const char *body,
                      size_t n) {
        char head[1024];
        int k = snprintf(head, sizeof head,
                         "HTTP/1.1 %d %s\r\nContent-Length: %zu\r\n%s%s%s%sConnection: close\r\n\r\n", status,
                         reason, n, ctype ? "Content-Type: " : "", ctype ? ctype : "", ctype ? "\r\n" : "",
                         strempty(extra));
        if (k < 0 || (size_t) k >= sizeof head)
                return -EINVAL;
        if (loop_write(fd, head, (size_t) k) < 0)
                return -EIO;
        return n ? loop_write(fd, body, n) : 0;
}

static int http_error(int fd, int status, const char *reason, const char *extra, const char *message) {
        char body[512];
        int k = snprintf(body, sizeof body, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32000,\"message\":\"%s\"}}",
                         message);
        return http_reply(fd, status, reason, extra, "application/json", body, (size_t) MAX(k, 0));
}

/* The answer of one request: JSON (collected) or SSE (written as it comes). */
typedef struct HttpSink {
        int fd;
        bool sse;
        bool head_sent;
        char session_header[96];
        char *json;
        size_t json_n;
} HttpSink;

static int sse_send(void *userdata, const char *json, size_t n) {
        HttpSink *k = userdata;
        char head[256];

        if (!k->sse) {
                /* JSON: the response is the one message that is not a notification */
                if (memmem(json, n, "\"method\":\"notifications/", 24))
                        return 0;
                free(k->json);
                k->json = strndup(json, n);
                k->json_n = n;
                return k->json ? 0 : -ENOMEM;
        }
        if (!k->head_sent) {
                int l = snprintf(head, sizeof head,
                                 "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                                 "%sConnection: close\r\n\r\n", k->session_header);
                if (loop_write(k->fd, head, (size_t) l) < 0)
                        return -EIO;
                k->head_sent = true;
        }
        if (loop_write(k->fd, "event: message\ndata: ", 21) < 0 || loop_write(k->fd, json, n) < 0 ||
            loop_write(k->fd, "\n\n", 2) < 0)
                return -EIO;
        return 0;
}

/* An Origin other than this listener's own host is a web page's request (DNS rebinding): refused. */
static bool origin_ok(const char *origin) {
        const char *host;
        size_t n;

        if (!origin)
                return true;
        host = startswith(origin, "http://") ?: startswith(origin, "https://");
        if (!host)
                return false;
        n = strcspn(host, ":/");
        return (n == 9 && strncmp(host, "localhost", 9) == 0) || (n == 9 && strncmp(host, "127.0.0.1", 9) == 0) ||
               (n == 5 && strncmp(host, "[::1]", 5) == 0) ||
               (n == strlen(http_origin_host) && strncmp(host, http_origin_host, n) == 0);
}

static int read_request(int fd, HttpHead *h, char **ret_body, size_t *ret_n) {
        _cleanup_free_ char *buf = NULL;
        size_t n = 0, allocated = 0, need = 0;
        ssize_t head_len = 0;

        for (;;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                ssize_t k;

                if (head_len > 0 && n >= need)
                        break;
                if (GREEDY_REALLOC(buf, allocated, n + 65536) < 0)
                        return -ENOMEM;
                if (poll(&p, 1, MCP_HTTP_TIMEOUT_MSEC) <= 0)
                        return -ETIMEDOUT;
                k = read(fd, buf + n, allocated - n);
                if (k <= 0)
                        return k < 0 ? -errno : -ECONNRESET;
                n += (size_t) k;
                if (head_len == 0) {
                        head_len = http_head_length(buf, n);
                        if (head_len < 0)
                                return (int) head_len;
                        if (head_len > 0) {
                                int r = http_parse_request_head(buf, (size_t) head_len, h);
                                if (r < 0)
                                        return r;
                                if (h->chunked)
                                        return -ENOSYS;
                                if (h->content_length > (int64_t) MCP_MESSAGE_MAX)
                                        return -E2BIG;
                                need = (size_t) head_len + (size_t) MAX(h->content_length, (int64_t) 0);
                        }
                }
        }
        *ret_n = need - (size_t) head_len;
        *ret_body = strndup(buf + head_len, *ret_n);
        return *ret_body ? 0 : -ENOMEM;
}

static void serve(int fd) {
        _cleanup_(http_head_done) HttpHead h = {};
        _cleanup_free_ char *body = NULL;
        HttpSink sink = { .fd = fd };
        const char *auth, *key, *sid, *accept;
        char new_sid[MCP_SESSION_ID_LEN + 1] = "";
        size_t n = 0;
        int r;

        r = read_request(fd, &h, &body, &n);
        if (r == -E2BIG)
                (void) http_error(fd, 413, "Payload Too Large", NULL, "message too large");
        else if (r == -ENOSYS)
                (void) http_error(fd, 411, "Length Required", NULL, "send the message with a Content-Length");
        else if (r == -EINVAL || r == -ENAMETOOLONG)
                (void) http_error(fd, 400, "Bad Request", NULL, "malformed request");
        if (r < 0)
                return;
        if (!streq(h.path, "/mcp"))
                return (void) http_error(fd, 404, "Not Found", NULL, "the MCP endpoint is /mcp");
        if (!origin_ok(http_head_header(&h, "Origin")))
                return (void) http_error(fd, 403, "Forbidden", NULL, "requests from other origins are refused");
        auth = http_head_header(&h, "Authorization");
        key = auth ? startswith(auth, "Bearer ") : NULL;
        if (isempty(key))
                return (void) http_error(fd, 401, "Unauthorized", "WWW-Authenticate: Bearer\r\n",
                                         "a space API key is needed (Authorization: Bearer sk_...)");
        sid = http_head_header(&h, "Mcp-Session-Id");
        if (streq(h.method, "GET"))
                return (void) http_error(fd, 405, "Method Not Allowed", "Allow: POST, DELETE\r\n",
                                         "this server sends no messages of its own: POST requests");
        if (streq(h.method, "DELETE")) {
                if (!sid || session_check(sid, key, true) <= 0)
                        return (void) http_error(fd, 404, "Not Found", NULL, "no such session");
                return (void) http_reply(fd, 204, "No Content", NULL, NULL, NULL, 0);
        }
        if (!streq(h.method, "POST"))
                return (void) http_error(fd, 405, "Method Not Allowed", "Allow: POST, DELETE\r\n", "POST requests");

        if (mcp_message_is_initialize(body, n)) {
                session_new(key, new_sid);
                snprintf(sink.session_header, sizeof sink.session_header, "Mcp-Session-Id: %s\r\n", new_sid);
        } else if (!sid)
                return (void) http_error(fd, 400, "Bad Request", NULL, "no Mcp-Session-Id: initialize first");
        else if ((r = session_check(sid, key, false)) <= 0)
                return (void) http_error(fd, 404, "Not Found", NULL, "no such session: initialize again");

        accept = http_head_header(&h, "Accept");
        sink.sse = accept && strstr(accept, "text/event-stream") && memmem(body, n, "\"tools/call\"", 12);
        McpServer s = { .api_url = cli_url(), .api_key = key, .initialized = true };
        r = mcp_server_handle(&s, body, n, sse_send, &sink);
        if (r == 0) /* a notification or a response */
                (void) http_reply(fd, 202, "Accepted", sink.session_header, NULL, NULL, 0);
        else if (r > 0 && !sink.sse)
                (void) http_reply(fd, 200, "OK", sink.session_header, "application/json", sink.json, sink.json_n);
        free(sink.json);
}

static void *conn_thread(void *p) {
        int fd = (int) (intptr_t) p;
        serve(fd);
        (void) shutdown(fd, SHUT_WR);
        safe_close(fd);
        return NULL;
}

static int mcp_http(const char *listen_addr) {
        _cleanup_close_ int lfd = -EBADF;
        struct sockaddr_in sa = { .sin_family = AF_INET };
        const char *colon = strrchr(listen_addr, ':');
        uint64_t port;
        int one = 1;
        char host[64];

        if (!colon || (size_t) (colon - listen_addr) >= sizeof host || cli_parse_u64("--listen", colon + 1, &port) < 0 ||
            port == 0 || port > 65535)
                return cli_error("--listen wants HOST:PORT (an IPv4 address), not '%s'", listen_addr);
        memcpy(host, listen_addr, (size_t) (colon - listen_addr));
        host[colon - listen_addr] = 0;
        if (inet_pton(AF_INET, host[0] ? host : "127.0.0.1", &sa.sin_addr) != 1)
                return cli_error("--listen: '%s' is not an IPv4 address", host);
        (void) strscpy(http_origin_host, sizeof http_origin_host, host);
        sa.sin_port = htons((uint16_t) port);
        lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (lfd < 0)
                return cli_error_errno(-errno, "socket: %m");
        (void) setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(lfd, (struct sockaddr *) &sa, sizeof sa) < 0 || listen(lfd, 128) < 0)
                return cli_error_errno(-errno, "cannot listen on %s: %m", listen_addr);
        fprintf(stderr, "space mcp: streamable HTTP on http://%s/mcp (API %s)\n", listen_addr, cli_url());
        for (;;) {
                pthread_attr_t attr;
                pthread_t t;
                int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        if (errno == EMFILE || errno == ENFILE) {
                                (void) poll(NULL, 0, 100);
                                continue;
                        }
                        return cli_error_errno(-errno, "accept: %m");
                }
                pthread_attr_init(&attr);
                pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                if (pthread_create(&t, &attr, conn_thread, (void *) (intptr_t) fd) != 0)
                        safe_close(fd);
                pthread_attr_destroy(&attr);
        }
}

int cli_mcp(int argc, char **argv) {
        static const CliOption opts[] = { { "listen", 0, true, 1 }, {} };
        _cleanup_(cli_parser_done) CliParser p = {};
        const char *listen_addr = NULL, *arg;
        int r;

        r = cli_parser_init(&p, argc, argv, 0);
        if (r < 0)
                return r;
        while ((r = cli_parser_next(&p, opts, &arg)) > 0)
                if (r == 1)
                        listen_addr = arg;
        r = cli_parser_end(&p, r, 0, 0);
        if (r <= 0)
                return r;
        (void) signal(SIGPIPE, SIG_IGN);
        if (listen_addr)
                return mcp_http(listen_addr);
        return mcp_stdio(cli_api_key());
}
