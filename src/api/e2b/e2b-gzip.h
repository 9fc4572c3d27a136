/* SPDX-License-Identifier: MIT */
#pragma once

/* gzip for envd's /files: uploads sent with Content-Encoding: gzip are
 * inflated as they stream in (the upload's own size limit applies to what
 * comes out, so a small bomb is stopped like a large file), downloads are
 * deflated as they stream out to a client that accepts gzip. */

#include <stdbool.h>
#include <stddef.h>
#include <zlib.h>

typedef struct E2bGzip {
        z_stream z;
        bool inflating;
        bool ready;      /* z is initialised */
        bool member_end; /* inflating: the last member ended (more input must be a new member) */
} E2bGzip;

/* What comes out of a feed, in pieces; a negative return stops the feed with it. */
typedef int (*E2bGzipSink)(const char *p, size_t n, void *userdata);

int e2b_gunzip_begin(E2bGzip *g);
/* -EBADMSG: not gzip, corrupt, or bytes after the end that are no member. */
int e2b_gunzip_feed(E2bGzip *g, const void *in, size_t n, E2bGzipSink sink, void *userdata);
/* At the end of the input: -EBADMSG if it ended inside a member. */
int e2b_gunzip_end(const E2bGzip *g);

int e2b_gzip_begin(E2bGzip *g);
/* finish: the last input; everything left is flushed with the trailer. */
int e2b_gzip_feed(E2bGzip *g, const void *in, size_t n, bool finish, E2bGzipSink sink, void *userdata);

void e2b_gzip_done(E2bGzip *g);

/* Content-Encoding of an upload: 1 gzip, 0 none (absent or identity), -EINVAL else. */
int e2b_gzip_content_encoding(const char *value);
/* True if an Accept-Encoding header accepts gzip (not with q=0). */
bool e2b_gzip_accepted(const char *accept_encoding);
