/* SPDX-License-Identifier: MIT */
#pragma once

#include <sys/types.h>

#include "macros.h"

/* Closes fd if >= 0, keeps errno, returns -EBADF (for "fd = safe_close(fd)"). */
int safe_close(int fd);
static inline void closep(int *fd) {
        safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

static inline void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Writes/reads all n bytes, retrying on EINTR/short IO. read returns bytes read (< n only at EOF). */
int loop_write(int fd, const void *buf, size_t n);
/* After a writev/sendmsg that wrote k bytes: moves *iov and *n_iov past
 * them (a partly written iovec is shortened from the front). */
struct iovec;
void iovec_advance(struct iovec **iov, size_t *n_iov, size_t k);
/* A blocking, CLOEXEC stream connection to the unix socket at path
 * (-ENAMETOOLONG if it does not fit a sockaddr_un). */
int socket_connect_unix(const char *path, int *ret_fd);
ssize_t loop_read(int fd, void *buf, size_t n);

int fd_nonblock(int fd, bool nonblock);
int fd_cloexec(int fd, bool cloexec);

/* Reads a whole small file (at most max bytes) into a NUL-terminated buffer. */
int read_full_file(const char *path, size_t max, char **ret, size_t *ret_size);
/* Writes a string to an existing file (e.g. cgroup/proc knobs), no O_CREAT. */
int write_string_file(const char *path, const char *s);
/* Writes data to path atomically (tmp + rename) with the given mode. */
int write_file_atomic(const char *path, const void *data, size_t n, mode_t mode);

/* mkdir -p with mode; existing directories are fine. */
int mkdir_p(const char *path, mode_t mode);
/* rm -rf of a host path that we own (does not cross mount points). */
int rm_rf(const char *path);

#include <dirent.h>
static inline void closedirp_(DIR **d) {
        if (*d)
                closedir(*d);
}
