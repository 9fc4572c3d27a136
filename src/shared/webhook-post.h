/* SPDX-License-Identifier: MIT */
#pragma once

/* One webhook delivery: a POST to an address the guard has passed, over
 * plain HTTP or TLS (the certificate verified against the system's CAs
 * for the URL's host), within a deadline. No redirect is followed: a 3xx
 * is a failure like any other non-2xx. */

#include <stdint.h>
#include <sys/socket.h>

#include "webhook.h"

#define WEBHOOK_POST_TIMEOUT_MSEC 5000

/* headers: "Name: value\r\n"...; 0 on a 2xx answer, else -errno with why
 * ("HTTP 500", "timed out", "TLS: certificate verify failed", ...). */
int webhook_post(const WebhookUrl *u, const struct sockaddr *sa, socklen_t sa_len, const char *headers,
                 const char *body, size_t n, int timeout_msec, char *why, size_t why_size);

/* A whole delivery of body to url_s: parsed, resolved and checked by g
 * (again at every delivery: a name may point elsewhere since the create),
 * signed with secret (X-Space-* and e2b-* headers), posted. */
int webhook_send(const WebhookGuard *g, const char *url_s, const char *secret, const char *webhook_id,
                 const char *delivery_id, int64_t now_usec, const char *body, size_t n, char *why,
                 size_t why_size);
