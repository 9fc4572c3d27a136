/* SPDX-License-Identifier: MIT */
#pragma once

/* vmux: many byte-stream connections over one stream (a virtio-serial port
 * of a microVM), so that the host's agent socket keeps its usual meaning
 * (one unix connection per caller) when the agent runs inside a VM.
 *
 *   frame  = header(12 bytes, little endian) payload
 *   header = u32 channel, u32 type (VmuxType), u32 length (<= VMUX_DATA_MAX)
 *
 *   HELLO  guest → host on start (channel 0, empty): the guest is ready; every
 *          channel the host knew is gone (the guest restarted).
 *          host → guest (a new host side for a guest that kept running, e.g.
 *          after a restore from saved memory): every channel the guest knew
 *          is gone; the guest answers HELLO
 *   OPEN   host → guest: a new channel (ids chosen by the host, never 0)
 *   DATA   either way: bytes of a channel
 *   EOF    either way: the sender's side will send no more (shutdown(SHUT_WR))
 *   CLOSE  either way: the channel is gone (sender closed or failed)
 *   CREDIT either way: u32 count of bytes of DATA the sender delivered to its
 *          local socket; a side may have at most VMUX_WINDOW bytes of a
 *          channel sent and not credited, so neither side buffers more than
 *          VMUX_WINDOW per channel whatever the other does.
 *
 * The host side accepts on the agent's listening socket and opens a channel
 * per connection; the guest side connects each channel to the agent's
 * socket inside the guest. Frames from the guest are hostile input: sizes,
 * channel ids and windows are checked; a violation resets the link. */

#include <stdbool.h>
#include <stdint.h>

#define VMUX_HEADER_SIZE 12U
#define VMUX_DATA_MAX (32U * 1024U)     /* payload bytes per frame */
#define VMUX_WINDOW (256U * 1024U)      /* bytes in flight per channel and direction */
#define VMUX_CHANNELS_MAX 128U          /* channels at once */
#define VMUX_LINK_OUT_HIGH (1024U * 1024U) /* queued link output that stops reading local sockets */

typedef enum VmuxType {
        VMUX_HELLO = 1,
        VMUX_OPEN,
        VMUX_DATA,
        VMUX_EOF,
        VMUX_CLOSE,
        VMUX_CREDIT,
        _VMUX_TYPE_MAX,
} VmuxType;

typedef enum VmuxRole {
        VMUX_ROLE_HOST,  /* accepts on listen_fd, opens channels */
        VMUX_ROLE_GUEST, /* connects each channel to connect_path */
} VmuxRole;

typedef struct VmuxConfig {
        VmuxRole role;
        int link_fd;              /* the shared stream (owned by vmux_run) */
        int listen_fd;            /* host: the agent's listening socket (owned) */
        const char *connect_path; /* guest: the agent's socket */
        int ready_fd;             /* host: one byte written here at the first HELLO, then closed; -1 = none */
        bool hello_first;         /* host: start with a HELLO (the guest kept running; its channels are stale) */
} VmuxConfig;

/* Encodes a header into buf (VMUX_HEADER_SIZE bytes). */
void vmux_header_put(uint8_t *buf, uint32_t channel, uint32_t type, uint32_t length);
/* Decodes and validates a header: -EBADMSG for an unknown type or a length
 * above VMUX_DATA_MAX (or, except for DATA, a length the type does not have). */
int vmux_header_get(const uint8_t *buf, size_t n, uint32_t *ret_channel, uint32_t *ret_type, uint32_t *ret_length);

/* Runs the multiplexer until the link ends (EOF or error). Returns 0 at EOF,
 * -EPROTO if the peer broke the protocol, -errno otherwise. */
int vmux_run(const VmuxConfig *cfg);
