/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>

#include "cli-tty.h"
#include "fd-util.h"

static struct termios saved_termios;
static volatile sig_atomic_t saved_fd = -1;
static int winch_pipe[2] = { -1, -1 };

/* Async-signal-safe: tcsetattr is on the list. */
void cli_tty_restore(void) {
        int fd = saved_fd;

        if (fd < 0)
                return;
        saved_fd = -1;
        (void) tcsetattr(fd, TCSADRAIN, &saved_termios);
}

static void restore_and_reraise(int sig) {
        cli_tty_restore();
        signal(sig, SIG_DFL);
        raise(sig);
}

int cli_tty_raw_begin(int fd) {
        static const int signals[] = { SIGTERM, SIGHUP, SIGINT, SIGQUIT };
        static bool registered = false;
        struct termios raw;

        if (!isatty(fd))
                return 0;
        if (saved_fd >= 0)
                return 1;
        if (tcgetattr(fd, &saved_termios) < 0)
                return negative_errno();

        struct sigaction sa = { .sa_handler = restore_and_reraise, .sa_flags = SA_RESETHAND };
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < ELEMENTSOF(signals); i++)
                (void) sigaction(signals[i], &sa, NULL);
        if (!registered) {
                atexit(cli_tty_restore);
                registered = true;
        }

        raw = saved_termios;
        cfmakeraw(&raw);
        raw.c_cc[VMIN] = 1;
        raw.c_cc[VTIME] = 0;
        saved_fd = fd;
        if (tcsetattr(fd, TCSADRAIN, &raw) < 0) {
                saved_fd = -1;
                return negative_errno();
        }
        return 1;
}

int cli_tty_size(unsigned *ret_rows, unsigned *ret_cols) {
        for (int fd = 0; fd <= 2; fd++) {
                struct winsize ws = {};
                if (ioctl(fd, TIOCGWINSZ, &ws) < 0 || ws.ws_row == 0 || ws.ws_col == 0)
                        continue;
                *ret_rows = ws.ws_row;
                *ret_cols = ws.ws_col;
                return 0;
        }
        return -ENOTTY;
}

static void winch_handler(int sig) {
        int saved = errno;
        if (winch_pipe[1] >= 0)
                (void) !write(winch_pipe[1], "w", 1);
        errno = saved;
}

int cli_tty_winch_fd(int *ret_fd) {
        if (winch_pipe[0] < 0) {
                if (pipe2(winch_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
                        return negative_errno();
                struct sigaction sa = { .sa_handler = winch_handler, .sa_flags = SA_RESTART };
                sigemptyset(&sa.sa_mask);
                if (sigaction(SIGWINCH, &sa, NULL) < 0)
                        return negative_errno();
        }
        *ret_fd = winch_pipe[0];
        return 0;
}

void cli_tty_winch_drain(int fd) {
        char buf[64];
        while (read(fd, buf, sizeof buf) > 0)
                ;
}
