/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "vm-exec.h"

void vm_child_fail(int errfd, const char *what) {
        char buf[160];
        int n = snprintf(buf, sizeof buf, "%s: %s", what, strerror(errno));
        if (n > 0)
                (void) !write(errfd, buf, (size_t) n);
        _exit(127);
}

int vm_child_exec_result(int err_read, int pidfd, const char *name, char *err, size_t err_size) {
        char buf[160];
        ssize_t k = read(err_read, buf, sizeof buf - 1);

        safe_close(err_read);
        if (k <= 0)
                return 0;
        buf[k] = 0;
        snprintf(err, err_size, "cannot start %s: %s", name, buf);
        (void) waitid(P_PIDFD, (id_t) pidfd, NULL, WEXITED);
        return -ENOEXEC;
}
