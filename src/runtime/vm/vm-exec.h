/* SPDX-License-Identifier: MIT */
#pragma once

/* The error pipe of a helper process the vm runtime starts (QEMU,
 * virtiofsd): the child reports the step that failed before its execve, the
 * parent reads it once the write end of the pipe is closed. */

#include <stddef.h>

/* In the child: "what: strerror(errno)" into errfd, then _exit(127). */
_Noreturn void vm_child_fail(int errfd, const char *what);

/* In the parent, with the write end closed: 0 if the child reached its
 * execve (the pipe closed empty); else err is "cannot start <name>: <step>",
 * the child is reaped and -ENOEXEC returned. Closes err_read. */
int vm_child_exec_result(int err_read, int pidfd, const char *name, char *err, size_t err_size);
