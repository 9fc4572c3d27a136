/* SPDX-License-Identifier: MIT */
#pragma once

/* Whether the VMM, which runs as a sandbox's unprivileged uid, can open the
 * KVM device: the device's mode decides, not root's access(2). */
#include <sys/stat.h>
#include <sys/types.h>

/* From the device's stat: 0 and *ret_gid = (gid_t) -1 when every user may open it
 * (0666), 0 and *ret_gid = its group when the group may (0660 root:kvm: the VMM
 * keeps that group), -EACCES when only its owner may (0600). */
int vm_kvm_access(const struct stat *st, gid_t *ret_gid);
