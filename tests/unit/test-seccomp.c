/* SPDX-License-Identifier: MIT */
/* The ns runtime's seccomp filter against the real kernel. Needs no
 * privilege: installing a filter needs only no_new_privs.
 *
 * Each probe runs in a forked child that installs filters and makes one raw
 * syscall. To tell the policy's EPERM from the kernel's own (an unprivileged
 * caller gets EPERM from mount, reboot, ... anyway), a "marked" probe first
 * installs a marker filter that fails the probed syscall with EMARK, then the
 * policy on top. The kernel runs the newest filter first and, among ERRNO
 * verdicts, keeps the newest: a syscall the policy denies fails with the
 * policy's errno, one it allows fails with EMARK. Either way the probed call
 * never reaches the kernel, so probes are harmless even when run as root. */
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/personality.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <seccomp.h>

#include "fd-util.h"
#include "seccomp-filter.h"
#include "statfs-notify.h"
#include "test.h"

/* "the filter under test let the call through to the marker" */
#define EMARK EDOTDOT

typedef long (*ProbeCall)(const unsigned long a[6]);

typedef struct Probe {
        const struct sock_fprog *policy; /* NULL: no policy (control run) */
        bool marked;                     /* install the marker filter for nr first */
        bool drop_privileges;            /* become nobody first (when run as root) */
        long nr;
        unsigned long a[6];
        ProbeCall call;                  /* NULL: syscall(nr, a...) */
} Probe;

typedef struct ProbeReport {
        int32_t stage; /* 0 ran the call; otherwise the setup step that failed */
        int32_t error; /* errno after the call (0 if it succeeded), or of the failed step */
        int64_t ret;
} ProbeReport;

typedef struct ProbeResult {
        bool reported;
        ProbeReport report;
        int status; /* waitpid status of the child */
} ProbeResult;

enum { PROBE_STAGE_CALL, PROBE_STAGE_DROP, PROBE_STAGE_MARKER, PROBE_STAGE_POLICY };

/* ---- the child: raw syscalls and _exit only, no allocation ---- */

static _noreturn_ void probe_child(const Probe *p, int fd) {
        struct sock_filter marker[] = {
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t) p->nr, 0, 1),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EMARK),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        const struct sock_fprog marker_prog = { .len = ELEMENTSOF(marker), .filter = marker };
        const struct rlimit no_core = {};
        ProbeReport rep = {};
        long k;
        int r;

        /* A probe may be killed by SIGSYS: no core file in the working directory. */
        (void) setrlimit(RLIMIT_CORE, &no_core);
        (void) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

        if (p->drop_privileges && getuid() == 0) {
                if (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, 65534, 65534, 65534) < 0 ||
                    syscall(SYS_setresuid, 65534, 65534, 65534) < 0) {
                        rep = (ProbeReport) { .stage = PROBE_STAGE_DROP, .error = errno };
                        goto report;
                }
        }
        if (p->marked) {
                r = seccomp_install(&marker_prog, NULL);
                if (r < 0) {
                        rep = (ProbeReport) { .stage = PROBE_STAGE_MARKER, .error = -r };
                        goto report;
                }
        }
        if (p->policy) {
                r = seccomp_install(p->policy, NULL);
                if (r < 0) {
                        rep = (ProbeReport) { .stage = PROBE_STAGE_POLICY, .error = -r };
                        goto report;
                }
        }

        errno = 0;
        if (p->call)
                k = p->call(p->a);
        else
                k = syscall(p->nr, p->a[0], p->a[1], p->a[2], p->a[3], p->a[4], p->a[5]);
        rep = (ProbeReport) { .stage = PROBE_STAGE_CALL, .error = k < 0 ? errno : 0, .ret = k };
report:
        (void) loop_write(fd, &rep, sizeof rep);
        _exit(0);
}

/* Runs p in a child and waits for it; never asserts, so no child outlives a failed test. */
static int probe_run(const Probe *p, ProbeResult *ret) {
        int pipefd[2];
        ProbeResult res = {};
        pid_t pid;
        ssize_t k;

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return negative_errno();
        fflush(stdout);
        fflush(stderr);
        pid = fork();
        if (pid < 0) {
                int r = negative_errno();
                safe_close(pipefd[0]);
                safe_close(pipefd[1]);
                return r;
        }
        if (pid == 0) {
                safe_close(pipefd[0]);
                probe_child(p, pipefd[1]);
        }
        safe_close(pipefd[1]);
        k = loop_read(pipefd[0], &res.report, sizeof res.report);
        res.reported = k == (ssize_t) sizeof res.report;
        safe_close(pipefd[0]);
        while (waitpid(pid, &res.status, 0) < 0)
                if (errno != EINTR)
                        return negative_errno();
        *ret = res;
        return 0;
}

/* The call ran (setup succeeded, child exited normally); returns its report. */
static ProbeReport probe_ran(const char *what, const Probe *p) {
        ProbeResult res;

        ASSERT_OK(probe_run(p, &res));
        if (!WIFEXITED(res.status) || WEXITSTATUS(res.status) != 0)
                test_fail(__FILE__, __LINE__, "%s: probe child died (status 0x%x)", what, (unsigned) res.status);
        if (!res.reported)
                test_fail(__FILE__, __LINE__, "%s: probe child reported nothing", what);
        if (res.report.stage != PROBE_STAGE_CALL)
                test_fail(__FILE__, __LINE__, "%s: probe setup step %d failed: %s", what, (int) res.report.stage,
                          strerror((int) res.report.error));
        return res.report;
}

/* Marked probe of nr with args a under policy: the errno the call fails with. */
static int marked_errno(const char *what, const struct sock_fprog *policy, long nr, const unsigned long a[6]) {
        Probe p = { .policy = policy, .marked = true, .nr = nr };
        ProbeReport rep;

        if (a)
                memcpy(p.a, a, sizeof p.a);
        rep = probe_ran(what, &p);
        if (rep.ret != -1)
                test_fail(__FILE__, __LINE__, "%s: returned %lld under the marker", what, (long long) rep.ret);
        return rep.error;
}

static void expect_marked(const char *what, const struct sock_fprog *policy, long nr, const unsigned long a[6],
                          int expected) {
        int e = marked_errno(what, policy, nr, a);
        if (e != expected)
                test_fail(__FILE__, __LINE__, "%s: errno %d (%s), expected %d (%s)", what, e, strerror(e), expected,
                          strerror(expected));
}

/* Unmarked probe of call under policy: the errno it fails with (0: it succeeded). */
static void expect_unmarked(const char *what, const struct sock_fprog *policy, long nr, ProbeCall call,
                            int expected) {
        Probe p = { .policy = policy, .nr = nr, .call = call };
        ProbeReport rep = probe_ran(what, &p);

        if (rep.error != expected)
                test_fail(__FILE__, __LINE__, "%s: errno %d (%s), expected %d (%s)", what, (int) rep.error,
                          strerror((int) rep.error), expected, strerror(expected));
}

/* A child killed by SIGSYS after installing policy and running call. */
static void expect_killed(const char *what, const struct sock_fprog *policy, ProbeCall call) {
        Probe p = { .policy = policy, .call = call };
        ProbeResult res;

        ASSERT_OK(probe_run(&p, &res));
        if (!WIFSIGNALED(res.status) || WTERMSIG(res.status) != SIGSYS)
                test_fail(__FILE__, __LINE__, "%s: expected death by SIGSYS, status 0x%x, reported=%d stage=%d error=%d ret=%lld",
                          what, (unsigned) res.status, res.reported, (int) res.report.stage, (int) res.report.error,
                          (long long) res.report.ret);
}

/* ---- the syscall numbers, from glibc, for every row of the policy ---- */

/* The second key on the policy: what this test expects of each row (0: allowed). Changing a
 * row's verdict, or dropping one, needs a change here too. */
typedef struct SyscallNr {
        const char *name;
        long nr;
        int expected; /* errno the filter answers, 0 for allowed */
} SyscallNr;

#define NR(x, e) { #x, SYS_##x, e }
static const SyscallNr syscall_nrs[] = {
        NR(keyctl, EPERM), NR(add_key, EPERM), NR(request_key, EPERM), NR(bpf, EPERM),
        NR(perf_event_open, EPERM), NR(userfaultfd, EPERM), NR(io_uring_setup, EPERM),
        NR(io_uring_enter, EPERM), NR(io_uring_register, EPERM), NR(fanotify_init, EPERM),
        NR(kexec_load, EPERM), NR(kexec_file_load, EPERM), NR(init_module, EPERM), NR(finit_module, EPERM),
        NR(delete_module, EPERM), NR(reboot, EPERM), NR(syslog, EPERM), NR(lookup_dcookie, EPERM),
        NR(acct, EPERM), NR(vhangup, EPERM), NR(swapon, EPERM), NR(swapoff, EPERM), NR(settimeofday, EPERM),
        NR(clock_settime, EPERM), NR(clock_adjtime, EPERM), NR(adjtimex, EPERM), NR(quotactl, EPERM),
        NR(quotactl_fd, EPERM), NR(mount, EPERM), NR(umount2, EPERM), NR(pivot_root, EPERM),
        NR(move_mount, EPERM), NR(fsopen, EPERM), NR(fsconfig, EPERM), NR(fsmount, EPERM),
        NR(fspick, EPERM), NR(open_tree, EPERM), NR(mount_setattr, EPERM), NR(open_by_handle_at, EPERM),
        NR(name_to_handle_at, EPERM), NR(unshare, EPERM), NR(setns, EPERM), NR(clone, EPERM),
        NR(clone3, ENOSYS), NR(personality, EPERM), NR(ptrace, 0), NR(process_vm_readv, 0),
        NR(process_vm_writev, 0), NR(kcmp, 0), NR(statfs, 0), NR(fstatfs, 0),
#ifdef SYS_uselib
        NR(uselib, EPERM),
#endif
#ifdef SYS_nfsservctl
        NR(nfsservctl, EPERM),
#endif
#ifdef SYS_iopl
        NR(iopl, EPERM),
#endif
#ifdef SYS_ioperm
        NR(ioperm, EPERM),
#endif
#ifdef SYS_umount
        NR(umount, EPERM),
#endif
#ifdef SYS_vm86
        NR(vm86, EPERM),
#endif
#ifdef SYS_vm86old
        NR(vm86old, EPERM),
#endif
#ifdef SYS_pciconfig_read
        NR(pciconfig_read, EPERM),
#endif
#ifdef SYS_pciconfig_write
        NR(pciconfig_write, EPERM),
#endif
#ifdef SYS_pciconfig_iobase
        NR(pciconfig_iobase, EPERM),
#endif
};

static long syscall_nr(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(syscall_nrs); i++)
                if (streq(syscall_nrs[i].name, name))
                        return syscall_nrs[i].nr;
        return -1;
}

static void build(const SeccompOptions *o, struct sock_fprog *ret) {
        ASSERT_OK(seccomp_build(o, ret));
        ASSERT_NOT_NULL(ret->filter);
        ASSERT_TRUE(ret->len > 0 && ret->len <= BPF_MAXINSNS);
}

/* ---- the table ---- */

TEST(policy_rows_are_well_formed) {
        ASSERT_TRUE(seccomp_policy_len > 0);
        for (size_t i = 0; i < seccomp_policy_len; i++) {
                const SeccompRule *r = &seccomp_policy[i];

                ASSERT_FALSE(isempty(r->syscall));
                ASSERT_FALSE(isempty(r->why));
                ASSERT_NOT_NULL(seccomp_verdict_to_string(r->verdict));
                for (size_t j = 0; j < i; j++)
                        if (streq(seccomp_policy[j].syscall, r->syscall))
                                test_fail(__FILE__, __LINE__, "'%s' has two rows", r->syscall);
        }
        ASSERT_STREQ(seccomp_verdict_to_string(SECCOMP_DENY_EPERM), "deny-eperm");
        ASSERT_NULL(seccomp_verdict_to_string(_SECCOMP_VERDICT_MAX));
        ASSERT_NULL(seccomp_verdict_to_string(_SECCOMP_VERDICT_INVALID));
}

/* Every row that exists on this architecture has a probe, and libseccomp resolves it to the number
 * the kernel uses (glibc's SYS_*): a name libseccomp does not know would be a silent hole. */
TEST(policy_rows_resolve_to_kernel_numbers) {
        for (size_t i = 0; i < seccomp_policy_len; i++) {
                const char *name = seccomp_policy[i].syscall;
                int lib = seccomp_syscall_resolve_name_arch(SCMP_ARCH_NATIVE, name);
                long nr = syscall_nr(name);

                if (nr < 0) {
                        if (lib >= 0)
                                test_fail(__FILE__, __LINE__, "'%s' (nr %d) has no probe in this test", name, lib);
                        continue;
                }
                if (lib != nr)
                        test_fail(__FILE__, __LINE__, "'%s': libseccomp says %d, the kernel %ld", name, lib, nr);
        }
}

static int row_errno(const SeccompRule *r) {
        return r->verdict == SECCOMP_DENY_EPERM ? EPERM : r->verdict == SECCOMP_DENY_ENOSYS ? ENOSYS : 0;
}

static const SeccompRule *policy_row(const char *name) {
        for (size_t i = 0; i < seccomp_policy_len; i++)
                if (streq(seccomp_policy[i].syscall, name))
                        return &seccomp_policy[i];
        return NULL;
}

/* The policy and this test's expectations agree row by row, both ways. */
TEST(policy_rows_match_the_expected_verdicts) {
        for (size_t i = 0; i < ELEMENTSOF(syscall_nrs); i++) {
                const SeccompRule *r = policy_row(syscall_nrs[i].name);

                if (!r)
                        test_fail(__FILE__, __LINE__, "'%s' expected in the policy", syscall_nrs[i].name);
                if (row_errno(r) != syscall_nrs[i].expected)
                        test_fail(__FILE__, __LINE__, "'%s': policy says %s, test expects errno %d", r->syscall,
                                  seccomp_verdict_to_string(r->verdict), syscall_nrs[i].expected);
        }
}

/* ---- building and installing ---- */

TEST(build_and_install_reject_bad_arguments) {
        struct sock_fprog empty = {};
        _cleanup_(seccomp_fprog_done) struct sock_fprog f = {};

        ASSERT_ERRNO(seccomp_build(NULL, NULL), EINVAL);
        ASSERT_ERRNO(seccomp_build_table(NULL, 1, NULL, &f), EINVAL);
        ASSERT_ERRNO(seccomp_install(NULL, NULL), EINVAL);
        ASSERT_ERRNO(seccomp_install(&empty, NULL), EINVAL);
        empty.len = 1;
        ASSERT_ERRNO(seccomp_install(&empty, NULL), EINVAL); /* no instructions */
        seccomp_fprog_done(NULL);
        seccomp_fprog_done(&empty);
        ASSERT_EQ(empty.len, 0);

        build(NULL, &f);
        seccomp_fprog_done(&f);
        ASSERT_NULL(f.filter);
        ASSERT_EQ(f.len, 0);
}

TEST(build_table_rejects_malformed_rows) {
        static const SeccompRule bad[] = {
                { NULL, SECCOMP_DENY_EPERM, { SECCOMP_ARG_ALWAYS }, "no name" },
                { "", SECCOMP_DENY_EPERM, { SECCOMP_ARG_ALWAYS }, "empty name" },
                { "keyctl", SECCOMP_DENY_EPERM, { SECCOMP_ARG_ALWAYS }, NULL },
                { "keyctl", SECCOMP_DENY_EPERM, { SECCOMP_ARG_ALWAYS }, "" },
                { "keyctl", _SECCOMP_VERDICT_MAX, { SECCOMP_ARG_ALWAYS }, "bad verdict" },
                { "keyctl", _SECCOMP_VERDICT_INVALID, { SECCOMP_ARG_ALWAYS }, "bad verdict" },
                { "keyctl", SECCOMP_DENY_EPERM, { _SECCOMP_ARG_TEST_MAX }, "bad test" },
                { "keyctl", SECCOMP_DENY_EPERM, { SECCOMP_ARG_ALWAYS }, "bad gate", _SECCOMP_GATE_MAX },
                { "clone", SECCOMP_DENY_EPERM, { SECCOMP_ARG_ANY_BIT, 6, CLONE_NEWUSER }, "arg index 6" },
                { "clone", SECCOMP_DENY_EPERM, { SECCOMP_ARG_ANY_BIT, 0, 0 }, "no bits" },
                { "personality", SECCOMP_DENY_EPERM, { SECCOMP_ARG_MIXED_BITS32, 7 }, "arg index 7" },
                { "personality", SECCOMP_DENY_EPERM, { SECCOMP_ARG_MIXED_BITS32, 0, 1 }, "takes no value" },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct sock_fprog f = {};
                int r = seccomp_build_table(&bad[i], 1, NULL, &f);

                if (r != -EINVAL)
                        test_fail(__FILE__, __LINE__, "row %zu (%s): %d, expected -EINVAL", i, bad[i].why, r);
                ASSERT_NULL(f.filter);
        }
}

/* A name this libseccomp does not know, or one absent on this architecture, adds nothing. */
TEST(build_table_skips_unknown_syscalls) {
        static const SeccompRule rows[] = {
                { "no_such_syscall_at_all", SECCOMP_DENY_EPERM, { SECCOMP_ARG_ALWAYS }, "unknown" },
                { "pciconfig_iobase", SECCOMP_DENY_EPERM, { SECCOMP_ARG_ALWAYS }, "absent on x86-64 and aarch64" },
                { "ptrace", SECCOMP_ALLOW_REVIEWED, { SECCOMP_ARG_ALWAYS }, "allowed: no rule" },
        };
        _cleanup_(seccomp_fprog_done) struct sock_fprog none = {}, skipped = {};

#if !defined(__x86_64__) && !defined(__aarch64__)
        test_skip("pciconfig_iobase may exist on this architecture");
#endif
        ASSERT_OK(seccomp_build_table(NULL, 0, NULL, &none));
        ASSERT_OK(seccomp_build_table(rows, ELEMENTSOF(rows), NULL, &skipped));
        ASSERT_EQ(skipped.len, none.len);
        ASSERT_EQ(memcmp(skipped.filter, none.filter, none.len * sizeof(struct sock_filter)), 0);
}

/* ---- the policy against the kernel ---- */

TEST(denied_syscalls_fail_with_the_row_errno) {
        _cleanup_(seccomp_fprog_done) struct sock_fprog f = {};
        unsigned probed = 0;

        build(NULL, &f);
        for (size_t i = 0; i < seccomp_policy_len; i++) {
                const SeccompRule *r = &seccomp_policy[i];
                long nr = syscall_nr(r->syscall);

                if (r->verdict == SECCOMP_ALLOW_REVIEWED || r->verdict == SECCOMP_USER_NOTIF ||
                    r->arg.test != SECCOMP_ARG_ALWAYS || nr < 0)
                        continue; /* allowed, answered and argument-dependent rows have their own tests */
                expect_marked(r->syscall, &f, nr, NULL, row_errno(r));
                probed++;
        }
        ASSERT_TRUE(probed >= 40);
        /* The marker itself works: with no policy, the probe sees EMARK. */
        expect_marked("keyctl without the policy", NULL, SYS_keyctl, NULL, EMARK);
}

TEST(reviewed_rows_stay_allowed) {
        _cleanup_(seccomp_fprog_done) struct sock_fprog f = {};
        unsigned probed = 0;

        build(NULL, &f);
        for (size_t i = 0; i < seccomp_policy_len; i++) {
                const SeccompRule *r = &seccomp_policy[i];
                long nr = syscall_nr(r->syscall);

                if (r->verdict != SECCOMP_ALLOW_REVIEWED || nr < 0)
                        continue;
                expect_marked(r->syscall, &f, nr, NULL, EMARK);
                probed++;
        }
        ASSERT_EQ(probed, 4); /* ptrace, process_vm_readv, process_vm_writev, kcmp */
        expect_marked("getpid", &f, SYS_getpid, NULL, EMARK);
        expect_marked("openat", &f, SYS_openat, NULL, EMARK);
}

TEST(clone_with_a_namespace_flag_is_denied) {
        static const unsigned long ns_flags[] = {
                CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
        };
        static const struct {
                const char *what;
                unsigned long flags;
        } allowed[] = {
                { "fork", SIGCHLD },
                { "glibc fork", CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD },
                { "thread", CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM |
                                    CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID },
                { "vfork", CLONE_VM | CLONE_VFORK | SIGCHLD },
                { "exit signal 0x80 (CLONE_NEWTIME's bit is CSIGNAL for clone)", 0x80 },
        };
        _cleanup_(seccomp_fprog_done) struct sock_fprog f = {};
        char what[128];

        build(NULL, &f);
        for (size_t i = 0; i < ELEMENTSOF(ns_flags); i++) {
                unsigned long a[6] = { ns_flags[i] | SIGCHLD };

                snprintf(what, sizeof what, "clone(0x%lx)", a[0]);
                expect_marked(what, &f, SYS_clone, a, EPERM);
                a[0] = ns_flags[i] | CLONE_VM | CLONE_VFORK | (UINT64_C(1) << 32);
                snprintf(what, sizeof what, "clone(0x%lx)", a[0]);
                expect_marked(what, &f, SYS_clone, a, EPERM);
        }
        for (size_t i = 0; i < ELEMENTSOF(allowed); i++) {
                unsigned long a[6] = { allowed[i].flags };
                expect_marked(allowed[i].what, &f, SYS_clone, a, EMARK);
        }
}

static void *thread_main(void *arg) {
        return arg;
}

static long call_fork(const unsigned long a[6]) {
        int status;
        pid_t pid = fork();

        if (pid < 0)
                return -1;
        if (pid == 0)
                _exit(7);
        if (waitpid(pid, &status, 0) < 0)
                return -1;
        return WIFEXITED(status) && WEXITSTATUS(status) == 7 ? 0 : -1;
}

static long call_pthread_create(const unsigned long a[6]) {
        pthread_t t;
        void *ret = NULL;
        int r = pthread_create(&t, NULL, thread_main, (void *) 0x42);

        if (r != 0) {
                errno = r;
                return -1;
        }
        if (pthread_join(t, &ret) != 0 || ret != (void *) 0x42) {
                errno = EPROTO;
                return -1;
        }
        return 0;
}

/* clone3's flags live in memory: the filter answers ENOSYS, glibc falls back to clone. */
TEST(clone3_is_enosys_and_glibc_falls_back) {
        _cleanup_(seccomp_fprog_done) struct sock_fprog f = {};
        Probe p = {};
        ProbeReport rep;

        build(NULL, &f);
        expect_marked("clone3", &f, SYS_clone3, NULL, ENOSYS);

        p = (Probe) { .policy = &f, .call = call_fork };
        rep = probe_ran("fork under the policy", &p);
        ASSERT_EQ(rep.ret, 0);
        p = (Probe) { .policy = &f, .call = call_pthread_create };
        rep = probe_ran("pthread_create under the policy", &p);
        ASSERT_EQ(rep.ret, 0);
}

/* unshare is refused whatever the flags, even 0 (a no-op elsewhere) and CLONE_FILES. */
TEST(unshare_and_setns_are_denied) {
        static const unsigned long flags[] = { 0, CLONE_FILES, CLONE_FS, CLONE_NEWUSER, CLONE_NEWNS | CLONE_NEWPID, CLONE_NEWTIME };
        _cleanup_(seccomp_fprog_done) struct sock_fprog f = {};
        char what[64];

        build(NULL, &f);
        for (size_t i = 0; i < ELEMENTSOF(flags); i++) {
                unsigned long a[6] = { flags[i] };
                snprintf(what, sizeof what, "unshare(0x%lx)", flags[i]);
                expect_marked(what, &f, SYS_unshare, a, EPERM);
        }
        expect_marked("setns", &f, SYS_setns, (const unsigned long[6]) { (unsigned long) -1, 0 }, EPERM);
}

TEST(personality_only_linux_and_query) {
        static const struct {
                unsigned long persona;
                int expected;
        } cases[] = {
                { PER_LINUX, EMARK },
                { 0xffffffffUL, EMARK },
                { UINT64_C(1) << 32, EMARK },                 /* the kernel reads 32 bits: PER_LINUX */
                { (UINT64_C(0xdead) << 32) | 0xffffffffUL, EMARK }, /* ... the query */
                { READ_IMPLIES_EXEC, EPERM },
                { ADDR_NO_RANDOMIZE, EPERM },
                { PER_LINUX32, EPERM },
                { UNAME26, EPERM },
                { 1, EPERM },
                { 0x80000000UL, EPERM },
                { 0x7fffffffUL, EPERM },
                { 0xfffffffeUL, EPERM },
                { 0xaaaaaaaaUL, EPERM },
                { (UINT64_C(1) << 32) | READ_IMPLIES_EXEC, EPERM },
        };
        _cleanup_(seccomp_fprog_done) struct sock_fprog f = {};
        Probe p = {};
        ProbeReport rep;
        char what[64];

        build(NULL, &f);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                unsigned long a[6] = { cases[i].persona };
                snprintf(what, sizeof what, "personality(0x%lx)", cases[i].persona);
                expect_marked(what, &f, SYS_personality, a, cases[i].expected);
        }

        /* And for real: setting PER_LINUX and querying work, READ_IMPLIES_EXEC does not. */
        p = (Probe) { .policy = &f, .nr = SYS_personality, .a = { PER_LINUX } };
        rep = probe_ran("personality(PER_LINUX)", &p);
        ASSERT_TRUE(rep.ret >= 0);
        p.a[0] = 0xffffffffUL;
        rep = probe_ran("personality(query)", &p);
        ASSERT_EQ(rep.ret & ~(int64_t) 0xffffffff, 0);
        ASSERT_EQ(rep.ret & PER_MASK, PER_LINUX);
        p.a[0] = READ_IMPLIES_EXEC;
        rep = probe_ran("personality(READ_IMPLIES_EXEC)", &p);
        ASSERT_EQ(rep.ret, -1);
        ASSERT_EQ(rep.error, EPERM);
}

TEST(ordinary_syscalls_work_under_the_policy) {
        _cleanup_(seccomp_fprog_done) struct sock_fprog f = {};
        Probe p = {};
        ProbeReport rep;

        build(NULL, &f);
        p = (Probe) { .policy = &f, .nr = SYS_getpid };
        rep = probe_ran("getpid", &p);
        ASSERT_TRUE(rep.ret > 0);
        p = (Probe) { .policy = &f, .nr = SYS_getppid };
        rep = probe_ran("getppid", &p);
        ASSERT_EQ(rep.ret, getpid());
        p = (Probe) { .policy = &f, .nr = SYS_close, .a = { (unsigned long) -1 } };
        rep = probe_ran("close(-1)", &p);
        ASSERT_EQ(rep.error, EBADF);
}

/* Installing needs no privilege: the sandbox's child may have dropped everything first. */
TEST(install_works_unprivileged) {
        _cleanup_(seccomp_fprog_done) struct sock_fprog f = {};
        Probe p = {};
        ProbeReport rep;

        build(NULL, &f);
        p = (Probe) { .policy = &f, .marked = true, .drop_privileges = true, .nr = SYS_keyctl };
        rep = probe_ran("keyctl as nobody", &p);
        ASSERT_EQ(rep.error, EPERM);
        p = (Probe) { .policy = &f, .drop_privileges = true, .nr = SYS_getuid };
        rep = probe_ran("getuid as nobody", &p);
        ASSERT_TRUE(getuid() != 0 || rep.ret == 65534);
}

static long call_io_uring_setup(const unsigned long a[6]) {
        struct {
                uint32_t words[30]; /* struct io_uring_params, zeroed */
        } params = {};
        long fd = syscall(SYS_io_uring_setup, 1, &params);

        if (fd >= 0)
                (void) close((int) fd);
        return fd < 0 ? -1 : 0;
}

TEST(io_uring_is_denied_unless_allowed) {
        static const long nrs[] = { SYS_io_uring_setup, SYS_io_uring_enter, SYS_io_uring_register };
        const SeccompOptions allow = { .allow_io_uring = true };
        _cleanup_(seccomp_fprog_done) struct sock_fprog deny_f = {}, allow_f = {};
        Probe p = {};
        ProbeReport control, rep;

        build(NULL, &deny_f);
        build(&allow, &allow_f);
        for (size_t i = 0; i < ELEMENTSOF(nrs); i++) {
                expect_marked("io_uring (default)", &deny_f, nrs[i], NULL, EPERM);
                expect_marked("io_uring (allowed)", &allow_f, nrs[i], NULL, EMARK);
        }

        /* For real: with allow_io_uring, io_uring_setup behaves as without any filter (which
         * may itself refuse, e.g. kernel.io_uring_disabled). */
        p = (Probe) { .call = call_io_uring_setup };
        control = probe_ran("io_uring_setup without a filter", &p);
        p.policy = &allow_f;
        rep = probe_ran("io_uring_setup, allowed", &p);
        ASSERT_EQ(rep.ret, control.ret);
        ASSERT_EQ(rep.error, control.error);
        p.policy = &deny_f;
        rep = probe_ran("io_uring_setup, default", &p);
        ASSERT_EQ(rep.error, EPERM);
}

/* ---- the program by evaluation ----
 * A classic-BPF interpreter (the instructions seccomp accepts) asks the filter about inputs the
 * kernel here may be unable to produce (an ia32 entry on a kernel without ia32 emulation) and
 * about every syscall number at once. */

#if defined(__x86_64__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

static int bpf_eval(const struct sock_fprog *prog, const struct seccomp_data *d, uint32_t *ret) {
        uint32_t A = 0, X = 0, M[BPF_MEMWORDS] = {};

        for (size_t pc = 0; pc < prog->len; pc++) {
                const struct sock_filter *f = &prog->filter[pc];
                uint32_t k = f->k, src = BPF_SRC(f->code) == BPF_X ? X : k;
                size_t skip = 0;

                switch (BPF_CLASS(f->code)) {
                case BPF_LD:
                case BPF_LDX: {
                        uint32_t v;
                        if (f->code == (BPF_LD | BPF_W | BPF_ABS)) {
                                if (k % 4 != 0 || k > sizeof *d - 4)
                                        return -EINVAL;
                                memcpy(&v, (const uint8_t *) d + k, 4);
                        } else if (BPF_MODE(f->code) == BPF_IMM)
                                v = k;
                        else if (BPF_MODE(f->code) == BPF_MEM && k < BPF_MEMWORDS)
                                v = M[k];
                        else if (BPF_MODE(f->code) == BPF_LEN)
                                v = sizeof *d;
                        else
                                return -EINVAL;
                        *(BPF_CLASS(f->code) == BPF_LD ? &A : &X) = v;
                        break;
                }
                case BPF_ST:
                case BPF_STX:
                        if (k >= BPF_MEMWORDS)
                                return -EINVAL;
                        M[k] = BPF_CLASS(f->code) == BPF_ST ? A : X;
                        break;
                case BPF_ALU:
                        switch (BPF_OP(f->code)) {
                        case BPF_ADD: A += src; break;
                        case BPF_SUB: A -= src; break;
                        case BPF_MUL: A *= src; break;
                        case BPF_DIV: if (src == 0) return -EINVAL; A /= src; break;
                        case BPF_MOD: if (src == 0) return -EINVAL; A %= src; break;
                        case BPF_AND: A &= src; break;
                        case BPF_OR: A |= src; break;
                        case BPF_XOR: A ^= src; break;
                        case BPF_LSH: A = src < 32 ? A << src : 0; break;
                        case BPF_RSH: A = src < 32 ? A >> src : 0; break;
                        case BPF_NEG: A = -A; break;
                        default: return -EINVAL;
                        }
                        break;
                case BPF_JMP:
                        switch (BPF_OP(f->code)) {
                        case BPF_JA: skip = k; break;
                        case BPF_JEQ: skip = A == src ? f->jt : f->jf; break;
                        case BPF_JGT: skip = A > src ? f->jt : f->jf; break;
                        case BPF_JGE: skip = A >= src ? f->jt : f->jf; break;
                        case BPF_JSET: skip = (A & src) ? f->jt : f->jf; break;
                        default: return -EINVAL;
                        }
                        if (skip >= prog->len - pc - 1)
                                return -EINVAL; /* would jump past the end */
                        pc += skip;
                        break;
                case BPF_RET:
                        *ret = BPF_RVAL(f->code) == BPF_A ? A : k;
                        return 0;
                case BPF_MISC:
                        if (BPF_MISCOP(f->code) == BPF_TAX)
                                X = A;
                        else
                                A = X;
                        break;
                default:
                        return -EINVAL;
                }
        }
        return -EINVAL; /* fell off the end */
}

static uint32_t eval(const struct sock_fprog *prog, uint32_t arch, int nr, uint64_t arg0) {
        const struct seccomp_data d = { .nr = nr, .arch = arch, .args = { arg0 } };
        uint32_t ret = 0;

        ASSERT_OK(bpf_eval(prog, &d, &ret));
        return ret;
}

#ifdef NATIVE_AUDIT_ARCH
TEST(bad_abi_and_arch_are_killed) {
        static const uint32_t foreign[] = {
                AUDIT_ARCH_I386, AUDIT_ARCH_X86_64, AUDIT_ARCH_ARM, AUDIT_ARCH_AARCH64,
                AUDIT_ARCH_PPC64LE, AUDIT_ARCH_RISCV64, AUDIT_ARCH_S390X, 0,
        };
        _cleanup_(seccomp_fprog_done) struct sock_fprog f = {};

        build(NULL, &f);
        for (size_t i = 0; i < ELEMENTSOF(foreign); i++) {
                if (foreign[i] == NATIVE_AUDIT_ARCH)
                        continue;
                ASSERT_EQ(eval(&f, foreign[i], 20, 0), SECCOMP_RET_KILL_PROCESS);
                ASSERT_EQ(eval(&f, foreign[i], SYS_keyctl, 0), SECCOMP_RET_KILL_PROCESS);
        }
        ASSERT_EQ(eval(&f, NATIVE_AUDIT_ARCH, SYS_getpid, 0), SECCOMP_RET_ALLOW);
#if defined(__x86_64__)
        /* x32: the native arch token with __X32_SYSCALL_BIT in the number. */
        ASSERT_EQ(eval(&f, AUDIT_ARCH_X86_64, SYS_getpid | 0x40000000, 0), SECCOMP_RET_KILL_PROCESS);
        ASSERT_EQ(eval(&f, AUDIT_ARCH_X86_64, SYS_keyctl | 0x40000000, 0), SECCOMP_RET_KILL_PROCESS);
#endif
}

/* Nothing outside the table is denied: every syscall number with zero arguments gets exactly the
 * verdict of its row (clone(0) and personality(PER_LINUX) are allowed), or ALLOW. */
TEST(only_the_rows_are_denied) {
        _cleanup_(seccomp_fprog_done) struct sock_fprog f = {}, io = {}, st = {};
        const SeccompOptions allow = { .allow_io_uring = true }, emulate = { .emulate_statfs = true };
        unsigned denied = 0, notified = 0;

        build(NULL, &f);
        build(&allow, &io);
        build(&emulate, &st);
        for (int nr = 0; nr < 1024; nr++) {
                uint32_t expected = SECCOMP_RET_ALLOW, expected_io = SECCOMP_RET_ALLOW, expected_st = SECCOMP_RET_ALLOW;

                for (size_t i = 0; i < seccomp_policy_len; i++) {
                        const SeccompRule *r = &seccomp_policy[i];
                        uint32_t v;

                        if (syscall_nr(r->syscall) != nr || r->verdict == SECCOMP_ALLOW_REVIEWED ||
                            r->arg.test != SECCOMP_ARG_ALWAYS)
                                continue;
                        if (r->verdict == SECCOMP_USER_NOTIF) { /* only where emulate_statfs keeps the row */
                                expected_st = SECCOMP_RET_USER_NOTIF;
                                continue;
                        }
                        v = SECCOMP_RET_ERRNO | (uint32_t) row_errno(r);
                        expected = v;
                        expected_io = r->gate == SECCOMP_GATE_IO_URING ? SECCOMP_RET_ALLOW : v;
                        expected_st = v;
                }
                if (eval(&f, NATIVE_AUDIT_ARCH, nr, 0) != expected)
                        test_fail(__FILE__, __LINE__, "syscall %d: 0x%x, expected 0x%x", nr,
                                  eval(&f, NATIVE_AUDIT_ARCH, nr, 0), expected);
                ASSERT_EQ(eval(&io, NATIVE_AUDIT_ARCH, nr, 0), expected_io);
                ASSERT_EQ(eval(&st, NATIVE_AUDIT_ARCH, nr, 0), expected_st);
                denied += expected != SECCOMP_RET_ALLOW;
                notified += expected_st == SECCOMP_RET_USER_NOTIF;
        }
        ASSERT_TRUE(denied >= 40);
        ASSERT_EQ(notified, 2u); /* statfs, fstatfs */
        /* The argument rows, by evaluation (the kernel tests above probe the same). */
        ASSERT_EQ(eval(&f, NATIVE_AUDIT_ARCH, SYS_clone, CLONE_NEWUSER | SIGCHLD), SECCOMP_RET_ERRNO | EPERM);
        ASSERT_EQ(eval(&f, NATIVE_AUDIT_ARCH, SYS_personality, 0xffffffffUL), SECCOMP_RET_ALLOW);
        for (unsigned b = 0; b < 32; b++)
                ASSERT_EQ(eval(&f, NATIVE_AUDIT_ARCH, SYS_personality, UINT64_C(1) << b), SECCOMP_RET_ERRNO | EPERM);
}
#endif

/* ---- other ABIs: killed ---- */

#if defined(__x86_64__)
static long call_int80_getpid(const unsigned long a[6]) {
        /* Kernel layout of struct sigaction; SIGSEGV back to the default, so that a kernel without
         * ia32 emulation kills the child quietly rather than through the sanitizer's report. */
        const struct {
                unsigned long handler, flags, restorer;
                uint64_t mask;
        } dfl = { .handler = 0 /* SIG_DFL */ };
        long ret;

        (void) syscall(SYS_rt_sigaction, SIGSEGV, &dfl, NULL, sizeof dfl.mask);
        /* ia32 getpid is 20; the compat entry zeroes r8-r11. */
        __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory", "cc", "r8", "r9", "r10", "r11");
        if (ret < 0) {
                errno = (int) -ret;
                return -1;
        }
        return ret;
}

static long call_x32_getpid(const unsigned long a[6]) {
        return syscall(SYS_getpid | 0x40000000L); /* __X32_SYSCALL_BIT */
}

TEST(ia32_syscall_kills_the_process) {
        Probe p = { .call = call_int80_getpid };
        ProbeResult control;

        /* Without a filter, int 0x80 works only if the kernel has ia32 emulation (without it the
         * CPU faults before seccomp runs: SIGSEGV). bad_abi_and_arch_are_killed covers the filter's
         * side by evaluation when the kernel cannot. */
        ASSERT_OK(probe_run(&p, &control));
        if (!WIFEXITED(control.status) || !control.reported || control.report.ret <= 0)
                test_skip("no ia32 emulation in this kernel (int 0x80 faults)");

        _cleanup_(seccomp_fprog_done) struct sock_fprog f = {};
        build(NULL, &f);
        expect_killed("int 0x80 getpid", &f, call_int80_getpid);
}

TEST(x32_syscall_kills_the_process) {
        _cleanup_(seccomp_fprog_done) struct sock_fprog f = {};

        build(NULL, &f);
        /* seccomp sees the x32 number before the kernel decides whether it supports x32 at all. */
        expect_killed("x32 getpid", &f, call_x32_getpid);
}
#endif

/* ---- statfs/fstatfs: answered through the listener (statfs-notify.c) ---- */

static long call_statfs(const unsigned long a[6]) {
        struct statfs st;
        return syscall(SYS_statfs, "/", &st);
}

TEST(statfs_rows_apply_only_when_emulated) {
        _cleanup_(seccomp_fprog_done) struct sock_fprog off = {}, on = {};

        build(NULL, &off);
        build(&(SeccompOptions){ .emulate_statfs = true }, &on);
        ASSERT_TRUE(on.len > off.len);
        /* no rows: the kernel answers */
        expect_unmarked("statfs without emulation", &off, SYS_statfs, call_statfs, 0);
        /* rows but nobody listening (installed without a listener): the kernel says ENOSYS */
        expect_unmarked("statfs to a filter without listener", &on, SYS_statfs, call_statfs, ENOSYS);
}

/* A failed assertion must not leave the child waiting in its statfs for ever. */
static void kill_childp(pid_t *pid) {
        if (*pid > 0) {
                (void) kill(*pid, SIGKILL);
                (void) waitpid(*pid, NULL, 0);
        }
}

typedef struct StatfsReport {
        long r[5];
        int e[5];
        struct statfs st[2];
} StatfsReport;

/* A process under the policy asks; this test's process answers with the worker's code. */
TEST(statfs_answered_through_the_listener_as_the_kernel_would) {
        _cleanup_(seccomp_fprog_done) struct sock_fprog on = {};
        _cleanup_(kill_childp) pid_t pid = 0;
        _cleanup_close_ int pidfd = -EBADF, listener = -EBADF;
        StatfsReport rep = {};
        struct statfs want;
        int pipefd[2], status, answered = 0, r;

        ASSERT_OK(ns_statfs_setup());
        build(&(SeccompOptions){ .emulate_statfs = true }, &on);
        ASSERT_OK(pipe2(pipefd, O_CLOEXEC));
        pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                StatfsReport c = {};
                int l = -1, fd;

                int out = fcntl(pipefd[1], F_DUPFD_CLOEXEC, 10); /* away from NS_NOTIFY_FD */

                safe_close(pipefd[0]);
                if (out < 0 || seccomp_install(&on, &l) < 0 || dup2(l, NS_NOTIFY_FD) < 0)
                        _exit(1);
                fd = open("/", O_PATH | O_CLOEXEC);
                c.r[0] = syscall(SYS_statfs, "/", &c.st[0]);
                c.e[0] = errno;
                c.r[1] = syscall(SYS_fstatfs, fd, &c.st[1]);
                c.e[1] = errno;
                c.r[2] = syscall(SYS_statfs, "/no/such/path", &c.st[0]);
                c.e[2] = errno;
                c.r[3] = syscall(SYS_statfs, NULL, &c.st[0]);
                c.e[3] = errno;
                c.r[4] = syscall(SYS_fstatfs, 9999, &c.st[0]);
                c.e[4] = errno;
                (void) loop_write(out, &c, sizeof c);
                _exit(0);
        }
        safe_close(pipefd[1]);
        pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        ASSERT_TRUE(pidfd >= 0);
        for (int i = 0; i < 5000 && listener < 0; i++) /* until the child installed its filter */
                if (ns_statfs_listener_take(pidfd, &listener) < 0)
                        (void) usleep(1000);
        ASSERT_TRUE(listener >= 0);
        while (answered < 5) { /* every call is answered: with figures or with an errno */
                struct pollfd pfd = { .fd = listener, .events = POLLIN };
                r = poll(&pfd, 1, 10000);
                ASSERT_TRUE(r > 0);
                if (pfd.revents & POLLHUP)
                        break;
                r = ns_statfs_handle(listener, &(NsStatfsView){});
                ASSERT_TRUE(r >= 0);
                answered += r;
        }
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        pid = 0;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                test_fail(__FILE__, __LINE__, "the asking child ended with status 0x%x", (unsigned) status);
        ASSERT_EQ(loop_read(pipefd[0], &rep, sizeof rep), (ssize_t) sizeof rep);
        safe_close(pipefd[0]);

        /* not btrfs here: the kernel's own figures, written into the caller's buffer */
        ASSERT_OK(statfs("/", &want));
        ASSERT_EQ(rep.r[0], 0);
        ASSERT_EQ(rep.st[0].f_type, want.f_type);
        ASSERT_EQ(rep.st[0].f_blocks, want.f_blocks);
        ASSERT_EQ(rep.r[1], 0);
        ASSERT_EQ(rep.st[1].f_type, want.f_type);
        /* the kernel's errnos */
        ASSERT_TRUE(rep.r[2] < 0 && rep.e[2] == ENOENT);
        ASSERT_TRUE(rep.r[3] < 0 && rep.e[3] == EFAULT);
        ASSERT_TRUE(rep.r[4] < 0 && rep.e[4] == EBADF);
}
