/* SPDX-License-Identifier: MIT */
#pragma once

/* A stream of bytes between cluster hosts (a btrfs send stream, a template's
 * tar), framed and checksummed. After the request line that announces it:
 *     chunks: a 4-byte big-endian length, then that many bytes (1 ..
 *             SHIP_CHUNK_MAX); a length of 0 ends the stream;
 *     then one line {"sha256":"<hex of the whole stream>","bytes":N}.
 * The receiver hashes what it gets and refuses the stream (-EBADMSG) if the
 * trailer does not match, so a flipped byte or a truncated stream is never
 * taken for a good one. */

#include <inttypes.h>

#include "macros.h"

#define SHIP_CHUNK_MAX (256U * 1024U)
#define SHIP_IDLE_TIMEOUT_MSEC (120 * 1000) /* a stream that stalls this long is given up */
#define SHIP_SHA256_HEX 65U

/* Reads in_fd to its end and sends it on sock as above. At in_fd's end,
 * finish (may be NULL) says whether what produced it ended well: if it
 * fails, its error is returned and the stream is not ended (the caller
 * closes sock: the receiver sees a stream cut short and keeps nothing).
 * *ret_sha256 (hex), *ret_bytes (may be NULL). */
int ship_stream_send(int sock, int in_fd, int (*finish)(void *userdata), void *userdata, char *ret_sha256,
                     uint64_t *ret_bytes);
/* Receives a stream from sock into out_fd (written as it comes: a slow
 * out_fd slows the sender), at most max_bytes (0: no bound; -EFBIG past
 * it). -EBADMSG: malformed framing, or the trailer's sha256 or byte count
 * differs from what came (*ret_why says which); -EPIPE: out_fd's reader went
 * away (the rest of the stream is still read, and dropped, so that the
 * sender can read the answer after its last byte). */
int ship_stream_recv(int sock, int out_fd, uint64_t max_bytes, char *ret_sha256, uint64_t *ret_bytes,
                     const char **ret_why);
