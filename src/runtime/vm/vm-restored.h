/* SPDX-License-Identifier: MIT */
#pragma once

/* After a microVM was restored from saved memory, the host tells its agent
 * who it is now (PROTO_RESTORED, handled by src/agent/agent-vm-restore.c):
 * fresh entropy from the host's getrandom() for the kernel's RNG, the host's
 * time for the clock, the sandbox's hostname and environment, and with
 * new_machine_id a fresh random /etc/machine-id (a new sandbox: a branch
 * child, a create from a base snapshot). Sent over the sandbox's agent
 * socket before the sandbox is handed to anyone. */

#include <stdbool.h>
#include <stddef.h>

#define VM_RESTORED_ENTROPY_BYTES 64U
#define VM_RESTORED_TIMEOUT_MSEC 30000 /* TCG on a loaded host */

/* The guest's network after the restore (its own tap's /31; eth0 is set again). */
typedef struct VmRestoredNet {
        const char *address, *gateway; /* dotted quads */
        const char *mac;               /* "52:54:..." or NULL */
        const char *resolv_conf;       /* NULL: left alone */
} VmRestoredNet;

/* The message (malloc'd JSON; it holds the entropy: the caller wipes and frees it). */
int vm_restored_json(const char *hostname, char *const *env, bool new_machine_id, const VmRestoredNet *net,
                     char **ret);
/* Sends it and waits for the agent's answer. */
int vm_restored_deliver(const char *agent_socket, const char *json, char *err, size_t err_size);
/* SYNC: the guest writes its dirty file data to its disk (before the host
 * copies the disk of a running machine without its memory). */
int vm_agent_sync(const char *agent_socket, char *err, size_t err_size);
