/* SPDX-License-Identifier: MIT */
#pragma once

/* A small HTTP/1.1 server: one thread per connection (bounded), keep-alive,
 * Content-Length and chunked request bodies (streamed to the handler),
 * chunked streaming responses, slow-client timeouts. The handler runs on the
 * connection's thread and may block. */

#include "http-parse.h"

#define HTTP_CONNECTIONS_MAX 1024U
#define HTTP_HEAD_TIMEOUT_MSEC 10000    /* whole head must arrive within this (slowloris) */
#define HTTP_IDLE_TIMEOUT_MSEC 60000    /* keep-alive idle */
#define HTTP_BODY_IDLE_TIMEOUT_MSEC 30000 /* no body byte for this long → drop */

typedef struct HttpServer HttpServer;
typedef struct HttpConn HttpConn;

typedef void (*HttpHandler)(HttpConn *c, const HttpHead *req, void *userdata);

/* listen: "127.0.0.1:7070", "[::1]:7070", "0.0.0.0:7070" or "unix:/path". */
int http_server_new(const char *listen, HttpHandler handler, void *userdata, HttpServer **ret);
/* Overrides the timeouts above (values <= 0 keep the current one), e.g. for
 * tests or from config. Call before http_server_run(). */
void http_server_set_timeouts(HttpServer *s, int head_msec, int idle_msec, int body_idle_msec);
/* At most n connections of one peer address (IPv4/IPv6; not unix sockets)
 * waiting for a request head (idle keep-alive, or nothing sent yet): a
 * newcomer past that closes the address's oldest waiting one. 0 (the
 * default) = no such cap. Call before http_server_run(). */
void http_server_set_peer_waiting_max(HttpServer *s, unsigned n);
/* Extra header lines ("Name: value\r\n") for every response: the hook
 * writes them into buf (NUL-terminated, at most size) on the connection's
 * thread as each response head goes out, e.g. timings of the request. */
typedef void (*HttpHeadHook)(char *buf, size_t size, void *userdata);
void http_server_set_head_hook(HttpServer *s, HttpHeadHook hook);
/* Runs on each connection's thread once it is done with its last request,
 * before the server counts the connection gone (so http_server_free()
 * returns only after every hook ran): for per-thread state of the handler
 * that a thread-local destructor would free too late. */
typedef void (*HttpThreadHook)(void *userdata);
void http_server_set_thread_done_hook(HttpServer *s, HttpThreadHook hook);
/* A connection that starts with the HTTP/2 preface (prior knowledge) is
 * handed to hook on its thread instead of being refused (GOAWAY
 * HTTP_1_1_REQUIRED): fd is the connection's socket (non-blocking, still
 * the server's to close), pending the bytes read so far, from the preface
 * on. It returns when it is done with the connection. */
typedef void (*HttpH2Hook)(HttpConn *c, int fd, const void *pending, size_t n, void *userdata);
void http_server_set_h2_hook(HttpServer *s, HttpH2Hook hook);
/* TLS on every connection: ssl_ctx (an SSL_CTX *, the caller's, kept alive
 * until http_server_free()) holds the certificate and selects ALPN; a
 * connection that agrees on "h2" goes to the HTTP/2 hook (pending empty;
 * its I/O through http_conn_ssl()), others speak HTTP/1.1 over TLS (after
 * http_conn_hijack() the socket carries TLS records: relay through
 * http_conn_ssl()). NULL (the default) = plaintext. */
void http_server_set_tls(HttpServer *s, void *ssl_ctx);
/* For a hook that serves the connection itself (HTTP/2): idle (no request
 * in flight) makes it count as waiting for a head again, so the server may
 * close it for a newcomer when full, as an idle keep-alive one. */
void http_conn_set_idle(HttpConn *c, bool idle);
/* The connection's SSL * (NULL in plaintext). */
void *http_conn_ssl(const HttpConn *c);
/* One non-blocking TLS read or write on ssl (an SSL *): bytes, 0 at a clean
 * close, -EAGAIN with *ret_events (POLLIN/POLLOUT) to wait for, <0 else. */
ssize_t http_tls_io(void *ssl, bool write, void *buf, size_t n, short *ret_events);
/* The bound port (useful with port 0). */
int http_server_port(const HttpServer *s);
/* Serves until http_server_stop(); returns 0. Call from one thread. */
int http_server_run(HttpServer *s);
/* Async-signal-safe: makes run() return; open connections are shut down. */
void http_server_stop(HttpServer *s);
/* Closes the listener (removing a unix socket file), shuts down open
 * connections and waits for their threads (i.e. for running handlers) to end. */
HttpServer *http_server_free(HttpServer *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpServer *, http_server_free);

/* Request body, streamed: returns bytes read, 0 at the end of the body, <0 on
 * error (-ETIMEDOUT, -ECONNRESET, -EINVAL for bad chunking). */
ssize_t http_conn_read_body(HttpConn *c, void *buf, size_t n);
/* Reads the whole body; -EFBIG if longer than max (caller answers 413). */
int http_conn_read_body_all(HttpConn *c, size_t max, char **ret, size_t *ret_len);

/* Fixed response with Content-Length. extra_headers: NULL or "Name: value\r\n..." */
int http_conn_respond(HttpConn *c, int status, const char *content_type, const void *body, size_t n,
                      const char *extra_headers);
/* Streaming response (Transfer-Encoding: chunked, flushed per write). */
int http_conn_stream_begin(HttpConn *c, int status, const char *content_type, const char *extra_headers);
int http_conn_stream_write(HttpConn *c, const void *p, size_t n);
int http_conn_stream_end(HttpConn *c);
/* Streaming response with a known length (e.g. file downloads): Content-Length, raw writes. */
int http_conn_sized_begin(HttpConn *c, int status, const char *content_type, uint64_t length,
                          const char *extra_headers);
int http_conn_sized_write(HttpConn *c, const void *p, size_t n);

/* Takes the connection over after a request without a body (an Upgrade):
 * sends head (n bytes, a complete response head, e.g. "101 Switching
 * Protocols"), then hands back the socket (non-blocking; still owned and
 * closed by the server once the handler returns) and the bytes the client
 * sent after the request head. No further request is read from it.
 * -EBUSY if a response was started or a request body is unread. */
int http_conn_hijack(HttpConn *c, const void *head, size_t n, const void **ret_pending, size_t *ret_pending_len);
/* The socket, for poll()ing it to notice a client that went away (POLLRDHUP). */
int http_conn_fd(const HttpConn *c);
/* True once a response was started. */
bool http_conn_responded(const HttpConn *c);
/* Close the connection after this response (no keep-alive). */
void http_conn_set_close(HttpConn *c);
/* "127.0.0.1:54321" */
const char *http_conn_peer(const HttpConn *c);
