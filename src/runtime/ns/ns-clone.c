/* SPDX-License-Identifier: MIT */
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "macros.h"
#include "ns-clone.h"
#include "ns-sys.h"
#include "str-util.h"

/* The child's stack: its deepest frames are a few KiB (more with the
 * sanitizers); only the pages it touches are ever faulted in. */
#define NS_CHILD_STACK_SIZE (256U * 1024U)
/* Room for the child's copies in a standard block (a larger spec gets a
 * larger block of its own). */
#define NS_CHILD_DATA_SIZE (128U * 1024U)
/* Finished blocks kept for reuse (children set up side by side at most this many, then new mappings). */
#define NS_CHILD_BLOCKS_KEPT 16U

typedef struct NsChildBlock {
        /* CLONE_CHILD_CLEARTID word: 1 from the clone until the kernel zeroes
         * it at the child's exec or exit (while its parent's memory is shared) */
        uint32_t running;
        size_t map_size, data_size; /* the mapping; the room for copies after this header */
        struct NsChildBlock *next;
        sigset_t mask; /* the parent's signal mask, restored in the child */
        NsChildArgs args;
        RuntimeSpec spec;
        struct sock_fprog seccomp;
        char data[]; /* the copies; then a guard page and the stack */
} NsChildBlock;

/* Blocks of this process's children still setting up, and finished ones for reuse
 * (a process that clones sandboxes is single-threaded). */
static NsChildBlock *blocks_busy, *blocks_free;
static unsigned blocks_free_count;

static size_t page_align(size_t n) {
        size_t pg = (size_t) sysconf(_SC_PAGESIZE);
        return (n + pg - 1) / pg * pg;
}

static void blocks_collect(void) {
        for (NsChildBlock **p = &blocks_busy; *p;) {
                NsChildBlock *b = *p;
                if (__atomic_load_n(&b->running, __ATOMIC_ACQUIRE) != 0) {
                        p = &b->next;
                        continue;
                }
                *p = b->next;
                if (blocks_free_count >= NS_CHILD_BLOCKS_KEPT)
                        (void) munmap(b, b->map_size);
                else {
                        b->next = blocks_free;
                        blocks_free = b;
                        blocks_free_count++;
                }
        }
}

static NsChildBlock *block_get(size_t need) {
        NsChildBlock *b;
        size_t pg = (size_t) sysconf(_SC_PAGESIZE), head, map;
        void *m;

        blocks_collect();
        for (NsChildBlock **p = &blocks_free; *p; p = &(*p)->next)
                if ((*p)->data_size >= need) {
                        b = *p;
                        *p = b->next;
                        blocks_free_count--;
                        return b;
                }
        head = page_align(offsetof(NsChildBlock, data) + MAX(need, (size_t) NS_CHILD_DATA_SIZE));
        map = head + pg + NS_CHILD_STACK_SIZE;
        m = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
                return NULL;
        if (mprotect((char *) m + head, pg, PROT_NONE) < 0) { /* the stack's guard page */
                (void) munmap(m, map);
                return NULL;
        }
        b = m;
        b->map_size = map;
        b->data_size = head - offsetof(NsChildBlock, data);
        return b;
}

static void block_put(NsChildBlock *b, bool busy) {
        b->next = busy ? blocks_busy : blocks_free;
        if (busy)
                blocks_busy = b;
        else {
                blocks_free = b;
                blocks_free_count++;
        }
}

static char *copy_str(char **at, const char *s) {
        size_t n;
        char *d = *at;

        if (!s)
                return NULL;
        n = strlen(s) + 1;
        memcpy(d, s, n);
        *at += n;
        return d;
}

/* Everything the child reads, into the block: a->spec's strings, the environment, the filter. */
static void block_fill(NsChildBlock *b, const NsChildArgs *a, size_t n_env) {
        const RuntimeSpec *s = a->spec;
        char *at = b->data;
        char **env = (char **) (void *) at;

        at += (n_env + 1) * sizeof(char *);
        for (size_t i = 0; i < n_env; i++)
                env[i] = copy_str(&at, a->envp[i]);
        env[n_env] = NULL;
        b->spec = (RuntimeSpec) {
                .limits = s->limits,
                .agent_exe_fd = s->agent_exe_fd,
                .seccomp_notify = s->seccomp_notify,
                .clone_parent = s->clone_parent,
                .root_later = s->root_later,
        };
        b->spec.root_path = copy_str(&at, s->root_path);
        b->spec.hostname = copy_str(&at, s->hostname);
        b->spec.resolv_conf = copy_str(&at, s->resolv_conf);
        if (s->seccomp) {
                size_t n = s->seccomp->len * sizeof(struct sock_filter);
                at = (char *) (((uintptr_t) at + 7) & ~(uintptr_t) 7);
                memcpy(at, s->seccomp->filter, n);
                b->seccomp = (struct sock_fprog) { .len = s->seccomp->len, .filter = (struct sock_filter *) (void *) at };
                b->spec.seccomp = &b->seccomp;
                at += n;
        }
        b->args = *a;
        b->args.stage_path = copy_str(&at, a->stage_path);
        b->args.spec = &b->spec;
        b->args.envp = env;
}

static size_t block_need(const NsChildArgs *a, size_t n_env) {
        const RuntimeSpec *s = a->spec;
        size_t n = (n_env + 1) * sizeof(char *) + 8; /* + the filter's alignment */

        for (size_t i = 0; i < n_env; i++)
                n += strlen(a->envp[i]) + 1;
        n += strlen(s->root_path) + 1 + strlen(s->hostname) + 1 + (s->resolv_conf ? strlen(s->resolv_conf) + 1 : 0);
        n += a->stage_path ? strlen(a->stage_path) + 1 : 0;
        if (s->seccomp)
                n += s->seccomp->len * sizeof(struct sock_filter);
        return n;
}

/* The kernel's struct sigaction (handler first on every architecture). */
struct ns_kernel_sigaction {
        void *handler;
        unsigned long flags;
        void *restorer;
        uint64_t mask;
};

_noreturn_ _ns_child_ static void child_entry(void *p) {
        NsChildBlock *b = p;

        /* the parent's handlers would run on memory it shares with us: back to default
         * (ignored signals stay ignored, as across an exec), then the parent's mask */
        for (int sig = 1; sig < _NSIG; sig++) {
                struct ns_kernel_sigaction old = {}, dfl = {};

                if (sig == SIGKILL || sig == SIGSTOP)
                        continue;
                if (ns_sys4(SYS_rt_sigaction, sig, NULL, &old, sizeof(uint64_t)) < 0)
                        continue;
                if (old.handler != (void *) SIG_DFL && old.handler != (void *) SIG_IGN)
                        (void) ns_sys4(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(uint64_t));
        }
        (void) ns_sys4(SYS_rt_sigprocmask, SIG_SETMASK, &b->mask, NULL, sizeof(uint64_t));
        ns_child_main(&b->args);
}

#if NS_RAW_SYSCALLS
/* clone3 that starts the child in fn(arg) on the stack set in args (CLONE_VM:
 * it must not return into the parent's frames). */
static long clone3_run(struct clone_args *args, void (*fn)(void *), void *arg) {
#if defined(__x86_64__)
        register long r12 __asm__("r12") = (long) fn; /* callee-saved: the child has them too */
        register long r13 __asm__("r13") = (long) arg;
        long ret;

        __asm__ volatile("syscall\n\t"
                         "test %%rax, %%rax\n\t"
                         "jnz 1f\n\t"
                         "xor %%ebp, %%ebp\n\t"
                         "mov %%r13, %%rdi\n\t"
                         "call *%%r12\n\t"
                         "mov $231, %%eax\n\t" /* exit_group, never reached */
                         "mov $127, %%edi\n\t"
                         "syscall\n\t"
                         "hlt\n"
                         "1:"
                         : "=a"(ret)
                         : "a"((long) SYS_clone3), "D"(args), "S"(sizeof *args), "r"(r12), "r"(r13)
                         : "rcx", "r11", "memory");
        return ret;
#else /* aarch64 */
        register long x8 __asm__("x8") = SYS_clone3;
        register long x0 __asm__("x0") = (long) args;
        register long x1 __asm__("x1") = (long) sizeof *args;
        register long x19 __asm__("x19") = (long) fn;
        register long x20 __asm__("x20") = (long) arg;

        __asm__ volatile("svc 0\n\t"
                         "cbnz x0, 1f\n\t"
                         "mov x29, xzr\n\t"
                         "mov x30, xzr\n\t"
                         "mov x0, x20\n\t"
                         "blr x19\n\t"
                         "mov x8, #94\n\t" /* exit_group, never reached */
                         "mov x0, #127\n\t"
                         "svc 0\n"
                         "1:"
                         : "+r"(x0)
                         : "r"(x8), "r"(x1), "r"(x19), "r"(x20)
                         : "x30", "memory");
        return x0;
#endif
}
#endif

pid_t ns_clone_child(const NsChildArgs *a, int cgroup_fd, bool clone_parent, int *ret_pidfd) {
        struct clone_args args = {
                .flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC |
                         CLONE_PIDFD | (clone_parent ? CLONE_PARENT : 0),
                .pidfd = (uint64_t) (uintptr_t) ret_pidfd,
                /* CLONE_PARENT: the caller's own exit signal (SIGCHLD), which clone3 wants left 0 */
                .exit_signal = clone_parent ? 0 : SIGCHLD,
        };
        size_t n_env = strv_length(a->envp);
        size_t need = block_need(a, n_env);
        NsChildBlock *b;
        sigset_t all;
        long pid;

        if (cgroup_fd >= 0) {
                args.flags |= CLONE_INTO_CGROUP;
                args.cgroup = (uint64_t) cgroup_fd;
        }
        b = block_get(need);
        if (!b)
                return -ENOMEM;
        block_fill(b, a, n_env);
        b->running = 1;
#if defined(__SANITIZE_ADDRESS__)
        /* a previous child's frames never returned (it exec'd): their redzones are still poisoned */
        __asan_unpoison_memory_region((char *) b + b->map_size - NS_CHILD_STACK_SIZE, NS_CHILD_STACK_SIZE);
#endif
        sigfillset(&all);
        (void) sigprocmask(SIG_SETMASK, &all, &b->mask);
#if NS_RAW_SYSCALLS
        args.flags |= CLONE_VM | CLONE_CHILD_CLEARTID;
        args.child_tid = (uint64_t) (uintptr_t) &b->running;
        args.stack = (uint64_t) (uintptr_t) ((char *) b + b->map_size - NS_CHILD_STACK_SIZE);
        args.stack_size = NS_CHILD_STACK_SIZE;
        pid = clone3_run(&args, child_entry, b);
#else
        pid = ns_sys2(SYS_clone3, &args, sizeof args);
        if (pid == 0)
                child_entry(b);
        b->running = 0; /* the child has a copy of its own */
#endif
        (void) sigprocmask(SIG_SETMASK, &b->mask, NULL);
        if (pid < 0)
                b->running = 0;
        block_put(b, __atomic_load_n(&b->running, __ATOMIC_ACQUIRE) != 0);
        return (pid_t) pid;
}
