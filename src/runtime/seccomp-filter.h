/* SPDX-License-Identifier: MIT */
#pragma once

/* The seccomp filter of the ns runtime. The policy is reviewed data
 * (seccomp-policy.c: one row a syscall, with its reason); seccomp.c turns it
 * into a BPF program with libseccomp once, in the worker, and installs the
 * finished program in a sandbox's child right before it executes space-agent.
 *
 * Default action: allow. Denied calls fail with the row's errno. A syscall
 * made through another ABI than the native one (x86-64: the ia32 int 0x80 /
 * sysenter entry and the x32 ABI; aarch64: the 32-bit compat entry) kills
 * the whole process (SIGSYS).
 *
 */

#include <errno.h>
#include <linux/filter.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct SeccompOptions {
        bool allow_io_uring; /* lift the io_uring_* rows (a sandbox that asked for it) */
        bool emulate_statfs; /* keep the statfs/fstatfs rows: the worker answers them (a pool with quotas) */
} SeccompOptions;

/* Builds the filter; may allocate and log at debug level (worker side).
 * *ret is a sock_fprog whose filter array is malloc'd: release it with
 * seccomp_fprog_done(). o == NULL means all options off. */
int seccomp_build(const SeccompOptions *o, struct sock_fprog *ret);
/* Frees the filter array and zeroes *p; accepts NULL and a zeroed struct. */
void seccomp_fprog_done(struct sock_fprog *p);
/* Installs a built filter in the calling thread's process:
 * PR_SET_NO_NEW_PRIVS, then seccomp(SECCOMP_SET_MODE_FILTER). No allocation,
 * no logging, no errno (raw system calls, ns-sys.h): safe between clone()
 * and execve() in a child sharing its parent's memory. Returns 0 or -errno.
 * ret_listener non-NULL: the filter gets a user-notification listener (the
 * SECCOMP_USER_NOTIF rows wait for its answers; where the kernel has it, a
 * received notification waits killably only, so a signal storm cannot make
 * the call restart forever) and *ret_listener is its fd (O_CLOEXEC). */
int seccomp_install(const struct sock_fprog *p, int *ret_listener);

/* ---- the policy table (seccomp-policy.c), also read by the tests ---- */

typedef enum SeccompVerdict {
        SECCOMP_ALLOW_REVIEWED, /* considered and allowed: no rule, the row records why */
        SECCOMP_DENY_EPERM,
        SECCOMP_DENY_ENOSYS,    /* "not implemented": callers fall back (clone3 → clone) */
        SECCOMP_USER_NOTIF,     /* answered by the worker through the filter's listener (statfs-notify.h) */
        _SECCOMP_VERDICT_MAX,
        _SECCOMP_VERDICT_INVALID = -EINVAL,
} SeccompVerdict;

const char *seccomp_verdict_to_string(SeccompVerdict v);

/* When a row's verdict applies, judged on one syscall argument. */
typedef enum SeccompArgTest {
        SECCOMP_ARG_ALWAYS,       /* every call, whatever the arguments */
        SECCOMP_ARG_ANY_BIT,      /* (args[index] & value) != 0: one rule per bit of value */
        SECCOMP_ARG_MIXED_BITS32, /* the low 32 bits of args[index] (an `unsigned int`
                                   * parameter) are neither 0 nor 0xffffffff */
        _SECCOMP_ARG_TEST_MAX,
        _SECCOMP_ARG_TEST_INVALID = -EINVAL,
} SeccompArgTest;

typedef struct SeccompArg {
        SeccompArgTest test;
        unsigned index; /* 0..5 */
        uint64_t value;
} SeccompArg;

typedef enum SeccompGate {
        SECCOMP_GATE_NONE,     /* the row always applies */
        SECCOMP_GATE_IO_URING, /* the row is lifted by SeccompOptions.allow_io_uring */
        SECCOMP_GATE_STATFS,   /* the row applies only with SeccompOptions.emulate_statfs */
        _SECCOMP_GATE_MAX,
        _SECCOMP_GATE_INVALID = -EINVAL,
} SeccompGate;

typedef struct SeccompRule {
        const char *syscall; /* name, resolved by libseccomp for the native arch */
        SeccompVerdict verdict;
        SeccompArg arg;
        const char *why;     /* one line of rationale, for the reviewer */
        SeccompGate gate;
} SeccompRule;

extern const SeccompRule seccomp_policy[];
extern const size_t seccomp_policy_len;

/* seccomp_build() on an explicit table (tests). A syscall unknown to this
 * libseccomp, or absent on this architecture, is skipped with a debug note;
 * a malformed row (bad verdict, test, gate or argument index, empty name or
 * reason, ANY_BIT without bits) is -EINVAL. */
int seccomp_build_table(const SeccompRule *rules, size_t n, const SeccompOptions *o, struct sock_fprog *ret);
