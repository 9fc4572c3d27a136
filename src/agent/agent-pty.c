/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>

#include "agent-pty.h"
#include "fd-util.h"

int agent_pty_resize(int master, uint16_t rows, uint16_t cols) {
        struct winsize ws = { .ws_row = rows, .ws_col = cols };

        if (master < 0)
                return -EBADF;
        return ioctl(master, TIOCSWINSZ, &ws) < 0 ? negative_errno() : 0;
}

int agent_pty_open(uint16_t rows, uint16_t cols, int *ret_master, int *ret_slave) {
        _cleanup_close_ int master = -EBADF, slave = -EBADF;
        char name[PATH_MAX];
        int r;

        master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
        if (master < 0)
                return negative_errno();
        if (grantpt(master) < 0 || unlockpt(master) < 0)
                return negative_errno();
        r = ptsname_r(master, name, sizeof name);
        if (r != 0)
                return -r;
        slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0)
                return negative_errno();
        r = agent_pty_resize(master, rows, cols);
        if (r < 0)
                return r;
        *ret_master = TAKE_FD(master);
        *ret_slave = TAKE_FD(slave);
        return 0;
}
