/* SPDX-License-Identifier: MIT */
#pragma once

/* The guest's initramfs: the kernel recipe's modules.cpio, then a newc
 * archive with /dev/console, /dev/null, space-agent as /init and the
 * sandbox's /config (hostname and environment; see agent-vm.c). The kernel
 * unpacks concatenated archives in order. */

#include <stddef.h>
#include <stdint.h>

#define VM_INITRD_CONFIG_MAX (256U * 1024U)

typedef struct VmInitrd {
        uint8_t *data;
        size_t len, cap;
} VmInitrd;

void vm_initrd_done(VmInitrd *c);
/* Appends one entry: a directory (data NULL, mode S_IFDIR|...), a file, or a
 * character device (rdev major/minor, mode S_IFCHR|...). */
int vm_initrd_add(VmInitrd *c, const char *name, uint32_t mode, uint32_t rdev_major, uint32_t rdev_minor,
                  const void *data, size_t size);
/* Appends raw bytes (another archive). */
int vm_initrd_append(VmInitrd *c, const void *data, size_t size);
/* Ends the archive (TRAILER!!!). */
int vm_initrd_finish(VmInitrd *c);
/* A memfd holding the bytes (sealed against writes). */
int vm_initrd_memfd(const VmInitrd *c, int *ret_fd);
