/* SPDX-License-Identifier: MIT */
#pragma once

/* The server name (SNI) of a TLS ClientHello, read from the first bytes a
 * client sends (hostile input; never decrypts anything). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SNI_HELLO_MAX (16U * 1024U) /* a ClientHello larger than one record is refused */
#define SNI_NAME_MAX 253U

/* 0 and the host name (as sent, NUL-terminated) if p holds a complete
 * ClientHello record with a server_name extension of type host_name;
 * -EAGAIN if more bytes are needed (and could still make one); -ENOENT for a
 * complete ClientHello without SNI; -EBADMSG if it is not a TLS ClientHello
 * or is malformed (lengths disagree, several host names, a NUL in the name);
 * -ENAMETOOLONG for a name over the limit. *ret_record_len is the bytes of
 * the record (so callers know the ClientHello's extent). */
int sni_parse(const uint8_t *p, size_t n, char ret_name[static SNI_NAME_MAX + 1], size_t *ret_record_len);

/* True if p (at least 1 byte) starts like a TLS handshake record. */
bool sni_looks_like_tls(const uint8_t *p, size_t n);
