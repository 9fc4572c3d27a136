/* SPDX-License-Identifier: MIT */
/* Reaching into another process of the sandbox as a debugger would.
 *   ptrace PID [FD]   one "NAME ok" / "NAME errno=N (text)" line per attempt on PID:
 *                attach (PTRACE_ATTACH), seize (PTRACE_SEIZE), mem (read 1 byte of
 *                /proc/PID/mem at the address of its stack), environ (read
 *                /proc/PID/environ), fd (list /proc/PID/fd), vm-read
 *                (process_vm_readv), getfd (pidfd_getfd of its fd FD, default 0)
 * A traced process is detached again at once. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static void report(const char *name, int ok) {
        if (ok)
                printf("%s ok\n", name);
        else
                printf("%s errno=%d (%s)\n", name, errno, strerror(errno));
}

/* The start of the [stack] mapping of pid (0 if /proc/PID/maps is unreadable). */
static unsigned long stack_of(int pid) {
        char path[64], line[512];
        unsigned long lo = 0;
        FILE *f;

        snprintf(path, sizeof path, "/proc/%d/maps", pid);
        f = fopen(path, "r");
        while (f && fgets(line, sizeof line, f))
                if (strstr(line, "[stack]")) {
                        lo = strtoul(line, NULL, 16);
                        break;
                }
        if (f)
                fclose(f);
        return lo;
}

int main(int argc, char **argv) {
        char path[64], buf[256];
        int pid, fd, ok, target_fd;

        if (argc != 2 && argc != 3)
                return 2;
        pid = (int) strtol(argv[1], NULL, 10);
        target_fd = argc == 3 ? (int) strtol(argv[2], NULL, 10) : 0;

        ok = ptrace(PTRACE_ATTACH, pid, 0, 0) == 0;
        report("attach", ok);
        if (ok) {
                waitpid(pid, NULL, __WALL);
                ptrace(PTRACE_DETACH, pid, 0, 0);
        }
        ok = ptrace(PTRACE_SEIZE, pid, 0, 0) == 0;
        report("seize", ok);
        if (ok)
                ptrace(PTRACE_DETACH, pid, 0, 0);

        snprintf(path, sizeof path, "/proc/%d/mem", pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        ok = fd >= 0;
        if (ok) {
                unsigned long at = stack_of(pid);
                ok = pread(fd, buf, 1, (off_t) (at ? at : 0x1000)) == 1 || (at == 0 && errno == EIO);
                close(fd);
        }
        report("mem", ok);

        snprintf(path, sizeof path, "/proc/%d/environ", pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        ok = fd >= 0 && read(fd, buf, sizeof buf) >= 0;
        if (fd >= 0)
                close(fd);
        report("environ", ok);

        snprintf(path, sizeof path, "/proc/%d/fd", pid);
        {
                DIR *d = opendir(path);
                ok = d && readdir(d) != NULL;
                if (d)
                        closedir(d);
        }
        report("fd", ok);

        {
                unsigned long at = stack_of(pid);
                struct iovec local = { .iov_base = buf, .iov_len = 1 };
                struct iovec remote = { .iov_base = (void *) (at ? at : 0x1000), .iov_len = 1 };
                ok = syscall(SYS_process_vm_readv, pid, &local, 1, &remote, 1, 0) == 1 ||
                     (at == 0 && errno == EFAULT);
        }
        report("vm-read", ok);

        {
                int pidfd = (int) syscall(SYS_pidfd_open, pid, 0), got = -1;
                if (pidfd >= 0) {
                        got = (int) syscall(SYS_pidfd_getfd, pidfd, target_fd, 0);
                        close(pidfd);
                }
                ok = got >= 0;
                if (got >= 0)
                        close(got);
        }
        report("getfd", ok);
        return 0;
}
