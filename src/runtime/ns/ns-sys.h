/* SPDX-License-Identifier: MIT */
#pragma once

/* System calls for a sandbox's child between clone() and execve(), made
 * without libc: each returns the kernel's answer (>= 0, or -errno) and
 * writes nothing but the child's own stack. The child shares its parent's
 * memory (ns-clone.h: CLONE_VM), and with it libc's errno (thread-local
 * storage of the parent's one thread): a libc wrapper failing in the child
 * would change the parent's errno under it. */

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>

#if defined(__x86_64__)
#define NS_RAW_SYSCALLS 1
static inline long ns_sys6(long n, long a1, long a2, long a3, long a4, long a5, long a6) {
        register long r10 __asm__("r10") = a4;
        register long r8 __asm__("r8") = a5;
        register long r9 __asm__("r9") = a6;
        long ret;

        __asm__ volatile("syscall"
                         : "=a"(ret)
                         : "a"(n), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                         : "rcx", "r11", "memory");
        return ret;
}
#elif defined(__aarch64__)
#define NS_RAW_SYSCALLS 1
static inline long ns_sys6(long n, long a1, long a2, long a3, long a4, long a5, long a6) {
        register long x8 __asm__("x8") = n;
        register long x0 __asm__("x0") = a1;
        register long x1 __asm__("x1") = a2;
        register long x2 __asm__("x2") = a3;
        register long x3 __asm__("x3") = a4;
        register long x4 __asm__("x4") = a5;
        register long x5 __asm__("x5") = a6;

        __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory");
        return x0;
}
#else
/* Elsewhere the child is a copy of its parent (no CLONE_VM: ns-clone.c), so
 * libc's syscall() may set errno; the answer is still returned as -errno. */
#include <unistd.h>
#define NS_RAW_SYSCALLS 0
static inline long ns_sys6(long n, long a1, long a2, long a3, long a4, long a5, long a6) {
        long r = syscall(n, a1, a2, a3, a4, a5, a6);
        return r < 0 ? -errno : r;
}
#endif

/* Functions of the child that call a noreturn function: not instrumented by
 * ASan, whose no-return hook does not know the child's stack (ns-clone.c). */
#define _ns_child_ __attribute__((no_sanitize_address))

#define NS_SYS_ARG(x) ((long) (x))
#define ns_sys0(n) ns_sys6((n), 0, 0, 0, 0, 0, 0)
#define ns_sys1(n, a) ns_sys6((n), NS_SYS_ARG(a), 0, 0, 0, 0, 0)
#define ns_sys2(n, a, b) ns_sys6((n), NS_SYS_ARG(a), NS_SYS_ARG(b), 0, 0, 0, 0)
#define ns_sys3(n, a, b, c) ns_sys6((n), NS_SYS_ARG(a), NS_SYS_ARG(b), NS_SYS_ARG(c), 0, 0, 0)
#define ns_sys4(n, a, b, c, d) ns_sys6((n), NS_SYS_ARG(a), NS_SYS_ARG(b), NS_SYS_ARG(c), NS_SYS_ARG(d), 0, 0)
#define ns_sys5(n, a, b, c, d, e) \
        ns_sys6((n), NS_SYS_ARG(a), NS_SYS_ARG(b), NS_SYS_ARG(c), NS_SYS_ARG(d), NS_SYS_ARG(e), 0)

static inline int ns_close(int fd) {
        return (int) ns_sys1(SYS_close, fd);
}

static inline int ns_dup2(int from, int to) {
        if (from == to) /* dup2's answer; dup3 refuses it */
                return (int) ns_sys3(SYS_fcntl, from, 1 /* F_GETFD */, 0) < 0 ? -EBADF : to;
        return (int) ns_sys3(SYS_dup3, from, to, 0);
}

/* "/proc/self/fd/N" into buf (at least NS_FD_PATH_MAX bytes). */
#define NS_FD_PATH_MAX 32
static inline const char *ns_fd_path(char *buf, int fd) {
        static const char prefix[] = "/proc/self/fd/";
        char digits[12];
        unsigned v = (unsigned) fd, n = 0, o = 0;

        do
                digits[n++] = (char) ('0' + v % 10);
        while ((v /= 10) != 0);
        for (; prefix[o]; o++)
                buf[o] = prefix[o];
        while (n > 0)
                buf[o++] = digits[--n];
        buf[o] = 0;
        return buf;
}

/* The decimal digits of v after prefix, into buf of size n (truncated, NUL-terminated). */
static inline const char *ns_fmt_u64(char *buf, size_t n, const char *prefix, uint64_t v) {
        char digits[24];
        size_t o = 0, k = 0;

        if (n == 0)
                return buf;
        for (; prefix[o] && o + 1 < n; o++)
                buf[o] = prefix[o];
        do
                digits[k++] = (char) ('0' + v % 10);
        while ((v /= 10) != 0);
        while (k > 0 && o + 1 < n)
                buf[o++] = digits[--k];
        buf[o] = 0;
        return buf;
}
