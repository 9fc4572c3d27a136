/* SPDX-License-Identifier: MIT */
/* What statfs()/fstatfs() tell a sandbox (raw syscalls: no libc conversion).
 *   statfs path P...      one line per path: "P type=T bsize=B blocks=N bfree=N bavail=N files=N ffree=N
 *                         fsid=A:B" or "P errno=E"
 *   statfs fd P...        the same through fstatfs() of open(P, O_PATH)
 *   statfs fdnum N        fstatfs() of fd number N as is
 *   statfs thread P       statfs(P) from a second thread (not the thread group leader)
 *   statfs bad            the error of each malformed call: "name errno=E"
 *   statfs race N A B     a thread flips a path buffer between A and B while this one calls statfs on it N
 *                         times: prints every distinct answer once, then "calls=N"
 *   statfs flood SECONDS  statfs("/") as fast as it can: "calls=N errors=N" */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long raw_statfs(const void *path, void *buf) {
        return syscall(SYS_statfs, path, buf);
}

static long raw_fstatfs(long fd, void *buf) {
        return syscall(SYS_fstatfs, fd, buf);
}

static void fmt(char *out, size_t n, const struct statfs *st) {
        snprintf(out, n, "type=%lx bsize=%ld blocks=%llu bfree=%llu bavail=%llu files=%llu ffree=%llu fsid=%x:%x",
                 (unsigned long) st->f_type, (long) st->f_bsize, (unsigned long long) st->f_blocks,
                 (unsigned long long) st->f_bfree, (unsigned long long) st->f_bavail,
                 (unsigned long long) st->f_files, (unsigned long long) st->f_ffree, (unsigned) st->f_fsid.__val[0],
                 (unsigned) st->f_fsid.__val[1]);
}

static void report(const char *name, long r, const struct statfs *st) {
        char line[512];
        if (r < 0) {
                printf("%s errno=%d\n", name, errno);
                return;
        }
        fmt(line, sizeof line, st);
        printf("%s %s\n", name, line);
}

static struct statfs thread_st;
static long thread_r;
static int thread_errno;

static void *thread_call(void *path) {
        thread_r = raw_statfs(path, &thread_st);
        thread_errno = errno;
        return NULL;
}

static char race_buf[4096];
static const char *race_a, *race_b;
static volatile int race_stop;

static void *flipper(void *arg) {
        size_t la = strlen(race_a) + 1, lb = strlen(race_b) + 1;
        (void) arg;
        while (!race_stop) {
                memcpy(race_buf, race_a, la);
                memcpy(race_buf, race_b, lb);
        }
        return NULL;
}

int main(int argc, char **argv) {
        struct statfs st;

        setvbuf(stdout, NULL, _IOLBF, 0);
        if (argc >= 3 && !strcmp(argv[1], "path")) {
                for (int i = 2; i < argc; i++) {
                        memset(&st, 0, sizeof st);
                        report(argv[i], raw_statfs(argv[i], &st), &st);
                }
                return 0;
        }
        if (argc >= 3 && !strcmp(argv[1], "fd")) {
                for (int i = 2; i < argc; i++) {
                        int fd = open(argv[i], O_PATH | O_CLOEXEC);
                        if (fd < 0) {
                                printf("%s open-errno=%d\n", argv[i], errno);
                                continue;
                        }
                        memset(&st, 0, sizeof st);
                        report(argv[i], raw_fstatfs(fd, &st), &st);
                        close(fd);
                }
                return 0;
        }
        if (argc == 3 && !strcmp(argv[1], "fdnum")) {
                memset(&st, 0, sizeof st);
                report(argv[2], raw_fstatfs(strtol(argv[2], NULL, 10), &st), &st);
                return 0;
        }
        if (argc == 3 && !strcmp(argv[1], "thread")) {
                pthread_t t;
                if (pthread_create(&t, NULL, thread_call, argv[2]) != 0 || pthread_join(t, NULL) != 0)
                        return 1;
                errno = thread_errno;
                report(argv[2], thread_r, &thread_st);
                return 0;
        }
        if (argc == 2 && !strcmp(argv[1], "bad")) {
                static char longpath[8192];
                char *page;

                memset(longpath, 'a', sizeof longpath - 1);
                report("null-path", raw_statfs(NULL, &st), &st);
                report("null-buf", raw_statfs("/", NULL), &st);
                report("kernel-buf", raw_statfs("/", (void *) 0xffffffffff600000UL), &st);
                report("long-path", raw_statfs(longpath, &st), &st);
                report("empty-path", raw_statfs("", &st), &st);
                report("missing", raw_statfs("/no/such/dir", &st), &st);
                report("bad-fd", raw_fstatfs(9999, &st), &st);
                report("negative-fd", raw_fstatfs(-1, &st), &st);
                /* a path that runs into an unmapped page without a NUL */
                page = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (page != MAP_FAILED) {
                        munmap(page + 4096, 4096);
                        memset(page, '/', 4096);
                        report("unterminated", raw_statfs(page, &st), &st);
                }
                return 0;
        }
        if (argc == 5 && !strcmp(argv[1], "race")) {
                long n = strtol(argv[2], NULL, 10), calls = 0;
                char seen[64][512];
                int nseen = 0;
                pthread_t t;

                race_a = argv[3];
                race_b = argv[4];
                memcpy(race_buf, race_a, strlen(race_a) + 1);
                if (pthread_create(&t, NULL, flipper, NULL) != 0)
                        return 1;
                for (long i = 0; i < n; i++, calls++) {
                        char line[512];
                        long r;

                        memset(&st, 0, sizeof st);
                        r = raw_statfs(race_buf, &st);
                        if (r < 0)
                                snprintf(line, sizeof line, "errno=%d", errno);
                        else
                                fmt(line, sizeof line, &st);
                        int k;
                        for (k = 0; k < nseen; k++)
                                if (!strcmp(seen[k], line))
                                        break;
                        if (k == nseen && nseen < 64) {
                                memcpy(seen[nseen++], line, sizeof line);
                                printf("%s\n", line);
                        }
                }
                race_stop = 1;
                pthread_join(t, NULL);
                printf("calls=%ld\n", calls);
                return 0;
        }
        if (argc == 3 && !strcmp(argv[1], "flood")) {
                struct timespec t0, t;
                long calls = 0, errors = 0;
                double secs = strtod(argv[2], NULL);

                clock_gettime(CLOCK_MONOTONIC, &t0);
                do {
                        for (int i = 0; i < 100; i++, calls++)
                                if (raw_statfs("/", &st) < 0)
                                        errors++;
                        clock_gettime(CLOCK_MONOTONIC, &t);
                } while ((double) (t.tv_sec - t0.tv_sec) + (double) (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
                printf("calls=%ld errors=%ld\n", calls, errors);
                return 0;
        }
        fprintf(stderr, "usage: statfs path|fd|fdnum|bad|race|flood ...\n");
        return 2;
}
