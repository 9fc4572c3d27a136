/* SPDX-License-Identifier: MIT */
/* Turns the reviewed policy (seccomp-policy.c) into a seccomp BPF program
 * with libseccomp, once per worker, and installs a finished program in a
 * sandbox's child. Building allocates and may log at debug level; installing
 * does neither (it runs between clone() and execve()). */
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <seccomp.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "log.h"
#include "ns-sys.h"
#include "seccomp-filter.h"

/* The kernel refuses longer programs. */
#define SECCOMP_PROGRAM_INSNS_MAX BPF_MAXINSNS
/* Syscall arguments a rule can test: args[0..5]. */
#define SECCOMP_SYSCALL_ARGS 6u

static const char *const seccomp_verdict_table[_SECCOMP_VERDICT_MAX] = {
        [SECCOMP_ALLOW_REVIEWED] = "allow-reviewed",
        [SECCOMP_DENY_EPERM] = "deny-eperm",
        [SECCOMP_DENY_ENOSYS] = "deny-enosys",
        [SECCOMP_USER_NOTIF] = "user-notif",
};

const char *seccomp_verdict_to_string(SeccompVerdict v) {
        if (v < 0 || v >= _SECCOMP_VERDICT_MAX)
                return NULL;
        return seccomp_verdict_table[v];
}

DEFINE_TRIVIAL_CLEANUP_FUNC(scmp_filter_ctx, seccomp_release);

static int seccomp_rule_check(const SeccompRule *r) {
        if (isempty(r->syscall) || isempty(r->why))
                return -EINVAL;
        if (r->verdict < 0 || r->verdict >= _SECCOMP_VERDICT_MAX)
                return -EINVAL;
        if (r->gate < 0 || r->gate >= _SECCOMP_GATE_MAX)
                return -EINVAL;
        if (r->arg.test < 0 || r->arg.test >= _SECCOMP_ARG_TEST_MAX)
                return -EINVAL;
        if (r->arg.test != SECCOMP_ARG_ALWAYS && r->arg.index >= SECCOMP_SYSCALL_ARGS)
                return -EINVAL;
        if (r->arg.test == SECCOMP_ARG_ANY_BIT && r->arg.value == 0)
                return -EINVAL;
        if (r->arg.test == SECCOMP_ARG_MIXED_BITS32 && r->arg.value != 0)
                return -EINVAL; /* takes no value: a row that sets one meant something else */
        return 0;
}

static bool seccomp_rule_lifted(const SeccompRule *r, const SeccompOptions *o) {
        switch (r->gate) {
        case SECCOMP_GATE_IO_URING:
                return o->allow_io_uring;
        case SECCOMP_GATE_STATFS:
                return !o->emulate_statfs;
        default:
                return false;
        }
}

static int seccomp_add_rule(scmp_filter_ctx ctx, const SeccompRule *r, int nr) {
        uint32_t action = r->verdict == SECCOMP_USER_NOTIF ? SCMP_ACT_NOTIFY
                                                           : SCMP_ACT_ERRNO(r->verdict == SECCOMP_DENY_ENOSYS ? ENOSYS : EPERM);
        unsigned idx = r->arg.index;
        int k;

        switch (r->arg.test) {
        case SECCOMP_ARG_ALWAYS:
                return seccomp_rule_add_exact(ctx, action, nr, 0);

        case SECCOMP_ARG_ANY_BIT:
                /* libseccomp ANDs the conditions of one rule and ORs rules: one rule per bit. */
                for (unsigned b = 0; b < 64; b++) {
                        uint64_t bit = UINT64_C(1) << b;

                        if (!(r->arg.value & bit))
                                continue;
                        k = seccomp_rule_add_exact(ctx, action, nr, 1, SCMP_CMP(idx, SCMP_CMP_MASKED_EQ, bit, bit));
                        if (k < 0)
                                return k;
                }
                return 0;

        case SECCOMP_ARG_MIXED_BITS32:
                /* libseccomp takes one condition per argument in a rule, so "!= 0 && != 0xffffffff"
                 * cannot be one rule. Equivalent: going round the 32 bits, some set bit is followed
                 * by a clear one. One rule per position b: (arg & (bit b | bit b+1 mod 32)) == bit b.
                 * The high 32 bits are not looked at, as the kernel does not read them. */
                for (unsigned b = 0; b < 32; b++) {
                        uint64_t bit = UINT64_C(1) << b, next = UINT64_C(1) << ((b + 1) % 32);

                        k = seccomp_rule_add_exact(ctx, action, nr, 1,
                                                   SCMP_CMP(idx, SCMP_CMP_MASKED_EQ, bit | next, bit));
                        if (k < 0)
                                return k;
                }
                return 0;

        default:
                return -EINVAL;
        }
}

static int seccomp_export(scmp_filter_ctx ctx, struct sock_fprog *ret) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ struct sock_filter *insns = NULL;
        struct stat st;
        size_t n, size;
        ssize_t k;
        int r;

        /* libseccomp 2.5 exports only to an fd: go through a memfd. */
        fd = memfd_create("seccomp-bpf", MFD_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        r = seccomp_export_bpf(ctx, fd);
        if (r < 0)
                return r;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (st.st_size <= 0 || (size_t) st.st_size % sizeof(struct sock_filter) != 0)
                return -EBADMSG;
        size = (size_t) st.st_size;
        n = size / sizeof(struct sock_filter);
        if (n > SECCOMP_PROGRAM_INSNS_MAX)
                return -E2BIG;

        insns = new(struct sock_filter, n);
        if (!insns)
                return -ENOMEM;
        if (lseek(fd, 0, SEEK_SET) < 0)
                return negative_errno();
        k = loop_read(fd, insns, size);
        if (k < 0)
                return (int) k;
        if ((size_t) k != size)
                return -EIO;

        *ret = (struct sock_fprog) { .len = (unsigned short) n, .filter = TAKE_PTR(insns) };
        return 0;
}

int seccomp_build_table(const SeccompRule *rules, size_t n, const SeccompOptions *o, struct sock_fprog *ret) {
        static const SeccompOptions defaults = {};
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        unsigned added = 0;
        int r;

        if (!ret || (!rules && n > 0))
                return -EINVAL;
        if (!o)
                o = &defaults;

        for (size_t i = 0; i < n; i++) {
                r = seccomp_rule_check(&rules[i]);
                if (r < 0)
                        return log_debug_errno(r, "seccomp: policy row %zu (%s) is malformed", i,
                                               strna(rules[i].syscall));
        }

        /* seccomp_init() puts the native architecture in the filter, and only it: a syscall through
         * any other ABI (ia32, x32 on x86-64; the 32-bit compat entry on aarch64) takes the
         * bad-arch action. libseccomp checks x32 numbers (__X32_SYSCALL_BIT) under x86-64 too. */
        ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return -ENOMEM;
        r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r < 0)
                return log_debug_errno(r, "seccomp: cannot set the bad-arch action: %m");

        for (size_t i = 0; i < n; i++) {
                const SeccompRule *rule = &rules[i];
                int nr;

                if (rule->verdict == SECCOMP_ALLOW_REVIEWED || seccomp_rule_lifted(rule, o))
                        continue;

                nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_NATIVE, rule->syscall);
                if (nr == __NR_SCMP_ERROR) {
                        log_debug("seccomp: syscall '%s' unknown to this libseccomp, skipped", rule->syscall);
                        continue;
                }
                if (nr < 0) {
                        log_debug("seccomp: syscall '%s' does not exist on this architecture, skipped", rule->syscall);
                        continue;
                }

                r = seccomp_add_rule(ctx, rule, nr);
                if (r < 0)
                        return log_debug_errno(r, "seccomp: cannot add the rule for '%s': %m", rule->syscall);
                added++;
        }

        r = seccomp_export(ctx, ret);
        if (r < 0)
                return log_debug_errno(r, "seccomp: cannot export the BPF program: %m");
        log_debug("seccomp: filter built, %u rows, %u instructions", added, ret->len);
        return 0;
}

int seccomp_build(const SeccompOptions *o, struct sock_fprog *ret) {
        return seccomp_build_table(seccomp_policy, seccomp_policy_len, o, ret);
}

void seccomp_fprog_done(struct sock_fprog *p) {
        if (!p)
                return;
        p->filter = mfree(p->filter);
        p->len = 0;
}

#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5) /* Linux 5.19 */
#endif

int seccomp_install(const struct sock_fprog *p, int *ret_listener) {
        long fd;
        int r;

        if (!p || !p->filter || p->len == 0)
                return -EINVAL;
        /* Lets an unprivileged process install a filter, and keeps setuid binaries inside from
         * gaining what the filter (or the dropped capabilities) took away. */
        r = (int) ns_sys2(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1);
        if (r < 0)
                return r;
        if (!ret_listener)
                return (int) MIN(ns_sys3(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, p), 0L);

        fd = ns_sys3(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                     SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, p);
        if (fd == -EINVAL) /* a kernel before 5.19 */
                fd = ns_sys3(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, p);
        if (fd < 0)
                return (int) fd;
        *ret_listener = (int) fd;
        return 0;
}
