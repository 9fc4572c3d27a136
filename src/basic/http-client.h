/* SPDX-License-Identifier: MIT */
#pragma once

/* A blocking HTTP/1.1 client for the CLI, tests and internal hops:
 * one connection, keep-alive, request bodies by length or streamed chunked,
 * responses by Content-Length, chunked or close. */

#include "http-parse.h"

typedef struct HttpClient HttpClient;

/* url base: "http://127.0.0.1:7070" or "unix:/path/to.sock". */
int http_client_new(const char *base_url, HttpClient **ret);
HttpClient *http_client_free(HttpClient *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpClient *, http_client_free);
void http_client_set_timeout(HttpClient *c, int timeout_msec); /* per read/write; -1 none (default) */

/* Sends a request. headers: NULL or "Name: value\r\n...". body may be NULL.
 * If body_len == (size_t)-1 the body is sent chunked via http_client_write_body(). */
int http_client_request(HttpClient *c, const char *method, const char *target, const char *headers,
                        const void *body, size_t body_len);
/* For chunked uploads started with body_len == (size_t)-1: write pieces, then end. */
int http_client_write_body(HttpClient *c, const void *p, size_t n);
int http_client_end_body(HttpClient *c);

/* Reads the response head; *ret is owned by the client until the next request. */
int http_client_response(HttpClient *c, const HttpHead **ret);
/* Streams the response body: bytes read, 0 at end. */
ssize_t http_client_read_body(HttpClient *c, void *buf, size_t n);
int http_client_read_body_all(HttpClient *c, size_t max, char **ret, size_t *ret_len);
/* The socket (e.g. to poll it together with stdin). */
int http_client_fd(const HttpClient *c);
/* After a 101 Switching Protocols: the connection becomes the caller's byte
 * stream. *ret_fd (non-blocking) and the bytes already read past the head
 * (*ret_pending, malloc'd) are the caller's; the client is left unconnected. */
int http_client_take_upgraded(HttpClient *c, int *ret_fd, char **ret_pending, size_t *ret_pending_len);
