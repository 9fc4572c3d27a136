/* SPDX-License-Identifier: MIT */
#include <errno.h>

#include "vm-kvm.h"

int vm_kvm_access(const struct stat *st, gid_t *ret_gid) {
        const mode_t rw_other = S_IROTH | S_IWOTH, rw_group = S_IRGRP | S_IWGRP;

        if ((st->st_mode & rw_other) == rw_other) {
                *ret_gid = (gid_t) -1;
                return 0;
        }
        /* a group of root's own would give the VMM more than the device */
        if ((st->st_mode & rw_group) == rw_group && st->st_gid != 0) {
                *ret_gid = st->st_gid;
                return 0;
        }
        return -EACCES;
}
