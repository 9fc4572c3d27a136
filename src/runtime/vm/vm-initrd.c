/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "macros.h"
#include "vm-initrd.h"

#define NEWC_HEADER_SIZE 110U

static int reserve(VmInitrd *c, size_t more) {
        if (c->len + more <= c->cap)
                return 0;
        size_t cap = MAX(c->len + more, c->cap * 2);
        uint8_t *p = realloc(c->data, cap);
        if (!p)
                return -ENOMEM;
        c->data = p;
        c->cap = cap;
        return 0;
}

static int pad4(VmInitrd *c) {
        size_t n = (4 - (c->len & 3)) & 3;
        int r = reserve(c, n);
        if (r < 0)
                return r;
        memset(c->data + c->len, 0, n);
        c->len += n;
        return 0;
}

void vm_initrd_done(VmInitrd *c) {
        free(c->data);
        *c = (VmInitrd){};
}

int vm_initrd_append(VmInitrd *c, const void *data, size_t size) {
        int r = reserve(c, size);
        if (r < 0)
                return r;
        memcpy(c->data + c->len, data, size);
        c->len += size;
        return pad4(c);
}

int vm_initrd_add(VmInitrd *c, const char *name, uint32_t mode, uint32_t rdev_major, uint32_t rdev_minor,
                  const void *data, size_t size) {
        static uint32_t ino = 1000;
        size_t namesize = strlen(name) + 1;
        char hdr[NEWC_HEADER_SIZE + 1];
        int r;

        if (size > UINT32_MAX || namesize > 4096)
                return -E2BIG;
        snprintf(hdr, sizeof hdr, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X", ino++, mode, 0U, 0U,
                 S_ISDIR(mode) ? 2U : 1U, 0U, (uint32_t) size, 0U, 0U, rdev_major, rdev_minor,
                 (uint32_t) namesize, 0U);
        r = reserve(c, NEWC_HEADER_SIZE + namesize);
        if (r < 0)
                return r;
        memcpy(c->data + c->len, hdr, NEWC_HEADER_SIZE);
        memcpy(c->data + c->len + NEWC_HEADER_SIZE, name, namesize);
        c->len += NEWC_HEADER_SIZE + namesize;
        r = pad4(c);
        if (r < 0 || size == 0)
                return r;
        return vm_initrd_append(c, data, size);
}

int vm_initrd_finish(VmInitrd *c) {
        return vm_initrd_add(c, "TRAILER!!!", 0, 0, 0, NULL, 0);
}

int vm_initrd_memfd(const VmInitrd *c, int *ret_fd) {
        _cleanup_close_ int fd = memfd_create("space-initrd", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        int r;

        if (fd < 0)
                return negative_errno();
        r = loop_write(fd, c->data, c->len);
        if (r < 0)
                return r;
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
                return negative_errno();
        *ret_fd = TAKE_FD(fd);
        return 0;
}
