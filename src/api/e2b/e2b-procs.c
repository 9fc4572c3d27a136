/* SPDX-License-Identifier: MIT */
/* What process.Process needs beyond the agent's PS: tags, cwd and envs of the
 * processes Start began (for List and tag selectors), and the drainers.
 *
 * E2B processes outlive the stream that started them (envd kills a process
 * only when its Connect-Timeout-Ms deadline passes), while the agent kills a
 * foreground process when its connection closes. So when a Start client goes
 * away, its agent connection is handed to a small detached thread that reads
 * it to the process's exit (bounded: E2B_DRAINERS_MAX; past that the process
 * ends with its client, and a warning says so). */

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

#include "alloc-util.h"
#include "e2b.h"
#include "fd-util.h"
#include "log.h"
#include "str-util.h"

#define E2B_PROCS_MAX 4096U   /* remembered tags/cwd/envs of started processes */
#define E2B_DRAINERS_MAX 256U /* agent connections kept open for processes whose client left */
#define E2B_DRAIN_STACK (64U * 1024U)

/* ---- the registry of started processes ---- */

typedef struct ProcMeta {
        char sandbox[STORE_ID_MAX];
        uint32_t pid;
        char exec_id[E2B_EXEC_ID_MAX + 1];
        char *tag;       /* or NULL */
        char *cwd;       /* as asked for, or NULL */
        char *envs_json; /* the request's envs, or NULL */
} ProcMeta;

static pthread_mutex_t procs_lock = PTHREAD_MUTEX_INITIALIZER;
static ProcMeta procs[E2B_PROCS_MAX];
static size_t n_procs;

static void proc_meta_clear(ProcMeta *m) {
        free(m->tag);
        free(m->cwd);
        free(m->envs_json);
        *m = (ProcMeta){};
}

static void procs_remove_locked(size_t i) {
        proc_meta_clear(&procs[i]);
        procs[i] = procs[--n_procs];
        procs[n_procs] = (ProcMeta){};
}

/* Takes tag, cwd and envs_json (also on failure). */
void e2b_procs_add(const char *sandbox, uint32_t pid, const char *exec_id, char *tag, char *cwd, char *envs_json) {
        ProcMeta m = { .pid = pid, .tag = tag, .cwd = cwd, .envs_json = envs_json };

        (void) strscpy(m.sandbox, sizeof m.sandbox, sandbox);
        (void) strscpy(m.exec_id, sizeof m.exec_id, exec_id);
        pthread_mutex_lock(&procs_lock);
        if (n_procs >= E2B_PROCS_MAX)
                procs_remove_locked(0); /* the table is a cache: an entry makes room */
        procs[n_procs++] = m;
        pthread_mutex_unlock(&procs_lock);
}

void e2b_procs_forget(const char *sandbox, const char *exec_id) {
        pthread_mutex_lock(&procs_lock);
        for (size_t i = 0; i < n_procs; i++)
                if (streq(procs[i].sandbox, sandbox) && streq(procs[i].exec_id, exec_id)) {
                        procs_remove_locked(i);
                        break;
                }
        pthread_mutex_unlock(&procs_lock);
}

/* The pid of a tagged process of the sandbox: 0 if none. */
uint32_t e2b_procs_pid_by_tag(const char *sandbox, const char *tag) {
        uint32_t pid = 0;

        pthread_mutex_lock(&procs_lock);
        for (size_t i = 0; i < n_procs && pid == 0; i++)
                if (streq(procs[i].sandbox, sandbox) && procs[i].tag && streq(procs[i].tag, tag))
                        pid = procs[i].pid;
        pthread_mutex_unlock(&procs_lock);
        return pid;
}

/* Copies what is known about a process into w (tag, cwd, envs), under the lock. */
void e2b_procs_write_config(JsonWriter *w, const char *sandbox, const char *exec_id, bool *ret_known,
                               char **ret_tag) {
        pthread_mutex_lock(&procs_lock);
        for (size_t i = 0; i < n_procs; i++)
                if (streq(procs[i].sandbox, sandbox) && streq(procs[i].exec_id, exec_id)) {
                        *ret_known = true;
                        json_w_key(w, "envs");
                        if (procs[i].envs_json)
                                json_w_raw(w, procs[i].envs_json);
                        else {
                                json_w_object_begin(w);
                                json_w_object_end(w);
                        }
                        if (procs[i].cwd)
                                json_w_kv_string(w, "cwd", procs[i].cwd);
                        *ret_tag = procs[i].tag ? strdup(procs[i].tag) : NULL;
                        break;
                }
        pthread_mutex_unlock(&procs_lock);
}

/* ---- the drainer of agent connections whose client went away ---- */

typedef struct Drain {
        int fd;
        char sandbox[STORE_ID_MAX];
        char exec_id[E2B_EXEC_ID_MAX + 1];
} Drain;

static atomic_uint drainers;

static void *drain_thread(void *arg) {
        Drain *d = arg;

        for (;;) {
                struct pollfd p = { .fd = d->fd, .events = POLLIN };
                ProtoFrame f = {};
                int k = poll(&p, 1, -1);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 || proto_recv(d->fd, &f) < 0)
                        break;
                k = f.type == PROTO_EXIT || f.type == PROTO_ERROR;
                proto_frame_done(&f);
                if (k)
                        break;
        }
        e2b_procs_forget(d->sandbox, d->exec_id);
        safe_close(d->fd);
        free(d);
        atomic_fetch_sub(&drainers, 1);
        return NULL;
}

/* Keeps the process alive without its client. Takes fd. */
void e2b_drain_start(int fd, const char *sandbox, const char *exec_id) {
        pthread_attr_t attr;
        pthread_t t;
        Drain *d;

        if (atomic_fetch_add(&drainers, 1) >= E2B_DRAINERS_MAX) {
                atomic_fetch_sub(&drainers, 1);
                log_warning("Too many detached E2B processes (%u): process %s ends with its client", E2B_DRAINERS_MAX,
                            exec_id);
                e2b_procs_forget(sandbox, exec_id);
                safe_close(fd);
                return;
        }
        d = new0(Drain, 1);
        if (d) {
                d->fd = fd;
                (void) strscpy(d->sandbox, sizeof d->sandbox, sandbox);
                (void) strscpy(d->exec_id, sizeof d->exec_id, exec_id);
        }
        if (!d || pthread_attr_init(&attr) != 0) {
                free(d);
                atomic_fetch_sub(&drainers, 1);
                e2b_procs_forget(sandbox, exec_id);
                safe_close(fd);
                return;
        }
        (void) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        (void) pthread_attr_setstacksize(&attr, E2B_DRAIN_STACK);
        if (pthread_create(&t, &attr, drain_thread, d) != 0) {
                log_warning("Cannot keep process %s running without its client", exec_id);
                free(d);
                atomic_fetch_sub(&drainers, 1);
                e2b_procs_forget(sandbox, exec_id);
                safe_close(fd);
        }
        (void) pthread_attr_destroy(&attr);
}
