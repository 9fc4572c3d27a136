/* SPDX-License-Identifier: MIT */
#pragma once

/* Shipping templates and checkpoints between worker hosts (btrfs send and
 * receive, pool.h), served on the internal listener (cluster-listener.c) and
 * spoken between two of them after the hello of cluster-net.h:
 *
 * A controller or API server asks the holder:
 *   {"op":"ship","kind":"checkpoint","sandbox":SB,"name":CK,"template":T,"to":W,"address":"host:port"}
 *   {"op":"ship","kind":"template","name":T,"to":W,"address":"host:port"}
 *     → {"ok":true,"sha256":HEX,"bytes":N,"parent":NAME|null,"complete":bool}
 * The holder connects to W and asks
 *   {"op":"receive","kind":..,"sandbox":..,"name":..,"ident":UUID,
 *    "parents":[{"kind","sandbox","name","ident"},...]}
 *     ← {"ok":true,"have":[i,...]}   the parents W holds (the stream is
 *                                     incremental against one of them), or
 *     ← {"ok":true,"complete":true}  W holds it already (a ship whose end was
 *                                     not heard): nothing is sent
 * then the stream as ship-stream.h frames it, and W answers
 *     ← {"ok":true} once it is received, its sha256 verified and in place;
 *       {"ok":false,...} otherwise, and W keeps nothing of it.
 *
 * An API server hands a template's tar to one worker:
 *   {"op":"template_put","name":T} then the tar as ship-stream.h frames it;
 *   the worker imports it (as "template_import") and answers like it. */

#include "config.h"
#include "json.h"

/* Serve one request on the connection fd; each writes its answer line. */
void worker_ship_send(const Config *config, const char *token, int fd, const JsonValue *req);
void worker_ship_receive(const Config *config, int fd, const JsonValue *req);
/* Receives the tar into <state_dir>/tmp (*ret_path, malloc'd; the caller
 * imports and unlinks it). On failure the answer is written and nothing stays. */
int worker_ship_template_put(const Config *config, int fd, const JsonValue *req, char **ret_path);
/* The same for any file streamed by a peer (what: "template", "build"; label:
 * a validated name for the file's name and the log). */
int worker_ship_upload(const Config *config, int fd, const char *what, const char *label, char **ret_path);
