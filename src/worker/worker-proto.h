/* SPDX-License-Identifier: MIT */
#pragma once

/* The worker protocol (API → worker), one JSON object per line both ways:
 *
 *   {"op":"create","sandbox":{"id","slot","template","cpu_millis","memory_mb","disk_mb","pids_max","env":{}}}
 *        → {"ok":true,"pid":N,"starttime":N}
 *   {"op":"destroy","id":"..."}                 → {"ok":true}
 *   {"op":"template_import","name":"..","tar":"/path"} → {"ok":true,"size_bytes":N}
 *   {"op":"template_remove","name":".."}        → {"ok":true}
 *   {"op":"info"}                               → {"ok":true,"info":{...}}
 *   any failure                                 → {"ok":false,"code":"<api error code>","message":"..."}
 */

#define WORKER_LINE_MAX (1024U * 1024U)
