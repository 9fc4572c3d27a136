/* SPDX-License-Identifier: MIT */
#pragma once

/* The tap device of a vm sandbox: the host end of its link (the same name
 * form, /31 and firewall element as an ns sandbox's veth host end; the VMM's
 * virtio-net device is the other end). Not persistent: the device exists
 * exactly as long as an fd of it is open, so it goes with the VMM that holds
 * it (no residue after a crash of anyone). */

#include <stdint.h>

/* Creates the tap name (IFF_TAP, no packet info, with virtio-net headers)
 * with the slot's host MAC (tap_host_mac), down and without addresses, and
 * returns its fd (O_CLOEXEC). A link of that name that already exists (a
 * leftover) is deleted first. -EINVAL for a bad name. */
int tap_create(const char *name, uint64_t slot, int *ret_fd);
/* The host end's MAC for a slot: 02:53:00 and the slot's low 24 bits, the
 * same each time the slot's tap is made (a guest resumed from memory keeps
 * its neighbour entry for it). */
void tap_host_mac(uint64_t slot, uint8_t ret_mac[static 6]);
/* The guest's MAC address for a slot: locally administered, unicast,
 * 52:54:00 followed by the slot's low 24 bits (unique per daemon). */
void tap_guest_mac(uint64_t slot, uint8_t ret_mac[static 6]);
