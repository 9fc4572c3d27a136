/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>

#include "cgroup-view.h"
#include "cgroup.h"
#include "fd-util.h"
#include "log.h"
#include "str-util.h"
#include "time-util.h"

#define CGROUP_FS "/sys/fs/cgroup"
/* Wall-clock bounds (monotonic): 10k processes exiting on a loaded host take a while. */
#define CGROUP_KILL_TIMEOUT_MSEC 30000
#define CGROUP_RMDIR_TIMEOUT_MSEC 30000

static const char *const v1_controllers[] = { "memory", "cpu", "pids", "freezer", "blkio" };

static struct {
        bool set_up;
        CgroupMode mode;
        char v2[256];       /* v2 mount, "" if none */
        char root[128];     /* our subtree name, e.g. "space" */
        bool v1_have[ELEMENTSOF(v1_controllers)];
} layout;

static const char *const mode_names[_CGROUP_MODE_MAX] = {
        [CGROUP_MODE_V2] = "v2",
        [CGROUP_MODE_HYBRID] = "hybrid",
        [CGROUP_MODE_V1] = "v1",
};

const char *cgroup_mode_to_string(CgroupMode m) {
        return m >= 0 && m < _CGROUP_MODE_MAX ? mode_names[m] : NULL;
}

CgroupMode cgroup_mode(void) {
        return layout.mode;
}

static bool is_fs(const char *path, long magic) {
        struct statfs sfs;
        return statfs(path, &sfs) == 0 && (long) sfs.f_type == magic;
}

static int path_v2(char *buf, size_t n, const char *id, const char *file) {
        int k = snprintf(buf, n, "%s/%s%s%s%s%s", layout.v2, layout.root, id ? "/" : "", strempty(id),
                         file ? "/" : "", strempty(file));
        return k < 0 || (size_t) k >= n ? -ENAMETOOLONG : 0;
}

static int path_v1(char *buf, size_t n, size_t ctrl, const char *id, const char *file) {
        int k = snprintf(buf, n, "%s/%s/%s%s%s%s%s", CGROUP_FS, v1_controllers[ctrl], layout.root, id ? "/" : "",
                         strempty(id), file ? "/" : "", strempty(file));
        return k < 0 || (size_t) k >= n ? -ENAMETOOLONG : 0;
}

static int write_knob(const char *path, const char *value) {
        int r = write_string_file(path, value);
        if (r < 0)
                return log_debug_errno(r, "Failed to write '%s' to %s: %m", value, path);
        return 0;
}

int cgroup_setup(const char *root) {
        char p[PATH_MAX];
        int r;

        if (strscpy(layout.root, sizeof layout.root, root) < 0 || isempty(root) || strchr(root, '/') ||
            streq(root, ".") || streq(root, ".."))
                return log_error_errno(EINVAL, "Invalid cgroup root '%s'", root);

        if (is_fs(CGROUP_FS, CGROUP2_SUPER_MAGIC)) {
                layout.mode = CGROUP_MODE_V2;
                snprintf(layout.v2, sizeof layout.v2, "%s", CGROUP_FS);
        } else {
                layout.mode = CGROUP_MODE_V1;
                layout.v2[0] = 0;
                if (is_fs(CGROUP_FS "/unified", CGROUP2_SUPER_MAGIC)) {
                        layout.mode = CGROUP_MODE_HYBRID;
                        snprintf(layout.v2, sizeof layout.v2, "%s/unified", CGROUP_FS);
                }
                for (size_t i = 0; i < ELEMENTSOF(v1_controllers); i++) {
                        snprintf(p, sizeof p, "%s/%s", CGROUP_FS, v1_controllers[i]);
                        layout.v1_have[i] = is_fs(p, CGROUP_SUPER_MAGIC);
                }
        }

        if (layout.v2[0]) {
                r = path_v2(p, sizeof p, NULL, NULL);
                if (r < 0)
                        return r;
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                        return log_error_errno(errno, "Failed to create cgroup %s: %m", p);
                if (layout.mode == CGROUP_MODE_V2) {
                        /* Enable the controllers we need for children of the root and of ours. */
                        static const char *const ctrls[] = { "+memory", "+cpu", "+pids", "+io" };
                        char sub[PATH_MAX];
                        for (size_t i = 0; i < ELEMENTSOF(ctrls); i++) {
                                (void) write_knob(CGROUP_FS "/cgroup.subtree_control", ctrls[i]);
                                r = path_v2(sub, sizeof sub, NULL, "cgroup.subtree_control");
                                if (r >= 0)
                                        r = write_knob(sub, ctrls[i]);
                                if (r < 0)
                                        log_warning_errno(r, "cgroup v2 controller %s unavailable: %m", ctrls[i] + 1);
                        }
                }
        }
        for (size_t i = 0; i < ELEMENTSOF(v1_controllers); i++) {
                if (layout.mode == CGROUP_MODE_V2 || !layout.v1_have[i])
                        continue;
                r = path_v1(p, sizeof p, i, NULL, NULL);
                if (r < 0)
                        return r;
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                        return log_error_errno(errno, "Failed to create cgroup %s: %m", p);
        }
        if (layout.mode != CGROUP_MODE_V2 && !layout.v1_have[0])
                log_warning("No memory cgroup controller: memory limits are not enforced");
        {
                /* what sandboxes see of their own cgroups at /sys/fs/cgroup */
                const char *used[ELEMENTSOF(v1_controllers) + 1] = {};
                size_t n = 0;
                for (size_t i = 0; i < ELEMENTSOF(v1_controllers); i++)
                        if (layout.mode != CGROUP_MODE_V2 && layout.v1_have[i])
                                used[n++] = v1_controllers[i];
                r = cgroup_view_setup(layout.mode, used);
                if (r < 0)
                        return log_error_errno(r, "Cannot work out the sandboxes' view of their cgroups: %m");
        }
        layout.set_up = true;
        log_info("cgroup layout %s (v2 at %s)", cgroup_mode_to_string(layout.mode),
                 layout.v2[0] ? layout.v2 : "-");
        return 0;
}

static int apply_limits_v2(const char *id, const RuntimeLimits *l) {
        char p[PATH_MAX], v[64];
        int r = 0;

        if (layout.mode != CGROUP_MODE_V2)
                return 0;
        if (l->memory_bytes) {
                path_v2(p, sizeof p, id, "memory.max");
                snprintf(v, sizeof v, "%" PRIu64, l->memory_bytes);
                r = write_knob(p, v);
                if (r < 0)
                        return r;
                path_v2(p, sizeof p, id, "memory.swap.max");
                (void) write_knob(p, "0");
        }
        if (l->cpu_millis) {
                path_v2(p, sizeof p, id, "cpu.max");
                snprintf(v, sizeof v, "%" PRIu64 " 100000", (uint64_t) l->cpu_millis * 100);
                r = write_knob(p, v);
                if (r < 0)
                        return r;
        }
        if (l->pids_max) {
                path_v2(p, sizeof p, id, "pids.max");
                snprintf(v, sizeof v, "%u", l->pids_max);
                r = write_knob(p, v);
                if (r < 0)
                        return r;
        }
        if (l->io_weight) {
                /* io.weight exists only where the io controller is enabled */
                path_v2(p, sizeof p, id, "io.weight");
                snprintf(v, sizeof v, "default %u", l->io_weight);
                if (access(p, F_OK) == 0)
                        (void) write_knob(p, v);
        }
        return 0;
}

static int apply_limits_v1(const char *id, const RuntimeLimits *l) {
        char p[PATH_MAX], v[64];
        int r;

        for (size_t i = 0; i < ELEMENTSOF(v1_controllers); i++) {
                if (!layout.v1_have[i])
                        continue;
                if (streq(v1_controllers[i], "memory") && l->memory_bytes) {
                        path_v1(p, sizeof p, i, id, "memory.limit_in_bytes");
                        snprintf(v, sizeof v, "%" PRIu64, l->memory_bytes);
                        r = write_knob(p, v);
                        if (r < 0)
                                return r;
                        /* memory+swap, where the kernel accounts swap */
                        path_v1(p, sizeof p, i, id, "memory.memsw.limit_in_bytes");
                        if (access(p, F_OK) == 0)
                                (void) write_knob(p, v);
                } else if (streq(v1_controllers[i], "cpu") && l->cpu_millis) {
                        path_v1(p, sizeof p, i, id, "cpu.cfs_period_us");
                        (void) write_knob(p, "100000");
                        path_v1(p, sizeof p, i, id, "cpu.cfs_quota_us");
                        snprintf(v, sizeof v, "%" PRIu64, (uint64_t) l->cpu_millis * 100);
                        r = write_knob(p, v);
                        if (r < 0)
                                return r;
                } else if (streq(v1_controllers[i], "blkio") && l->io_weight) {
                        /* blkio.weight needs a proportional I/O scheduler (BFQ); absent elsewhere */
                        path_v1(p, sizeof p, i, id, "blkio.bfq.weight");
                        if (access(p, F_OK) < 0)
                                path_v1(p, sizeof p, i, id, "blkio.weight");
                        snprintf(v, sizeof v, "%u", MAX(l->io_weight, 10U));
                        if (access(p, F_OK) == 0)
                                (void) write_knob(p, v);
                } else if (streq(v1_controllers[i], "pids") && l->pids_max) {
                        path_v1(p, sizeof p, i, id, "pids.max");
                        snprintf(v, sizeof v, "%u", l->pids_max);
                        r = write_knob(p, v);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

int cgroup_create(const char *id, const RuntimeLimits *limits, int *ret_v2_fd) {
        _cleanup_close_ int v2fd = -EBADF;
        char p[PATH_MAX];
        int r;

        if (!layout.set_up)
                return -ENXIO;
        if (layout.v2[0]) {
                path_v2(p, sizeof p, id, NULL);
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                        return log_debug_errno(errno, "mkdir %s: %m", p);
                v2fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (v2fd < 0)
                        return negative_errno();
        }
        if (layout.mode != CGROUP_MODE_V2)
                for (size_t i = 0; i < ELEMENTSOF(v1_controllers); i++) {
                        if (!layout.v1_have[i])
                                continue;
                        path_v1(p, sizeof p, i, id, NULL);
                        if (mkdir(p, 0755) < 0 && errno != EEXIST) {
                                r = negative_errno();
                                (void) cgroup_remove(id);
                                return r;
                        }
                }
        r = apply_limits_v2(id, limits);
        if (r >= 0)
                r = apply_limits_v1(id, limits);
        if (r < 0) {
                (void) cgroup_remove(id);
                return r;
        }
        *ret_v2_fd = TAKE_FD(v2fd);
        return 0;
}

int cgroup_attach_v1(const char *id, pid_t pid) {
        char p[PATH_MAX], v[32];
        int r;

        if (layout.mode == CGROUP_MODE_V2)
                return 0;
        snprintf(v, sizeof v, "%d", (int) pid);
        for (size_t i = 0; i < ELEMENTSOF(v1_controllers); i++) {
                if (!layout.v1_have[i])
                        continue;
                path_v1(p, sizeof p, i, id, "cgroup.procs");
                r = write_knob(p, v);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Reads pids from a cgroup.procs file; calls fn for each; returns how many. */
static int for_each_pid(const char *procs, void (*fn)(pid_t)) {
        _cleanup_fclose_ FILE *f = fopen(procs, "re");
        int pid, n = 0;

        if (!f)
                return errno == ENOENT ? 0 : negative_errno();
        while (fscanf(f, "%d", &pid) == 1) {
                if (fn)
                        fn(pid);
                n++;
        }
        return n;
}

static void kill_pid(pid_t pid) {
        (void) kill(pid, SIGKILL);
}

bool cgroup_contains(const char *id, pid_t pid) {
        char p[PATH_MAX], want[256], line[512];
        _cleanup_fclose_ FILE *f = NULL;
        bool found = false;

        snprintf(p, sizeof p, "/proc/%d/cgroup", (int) pid);
        f = fopen(p, "re");
        if (!f)
                return false;
        if ((size_t) snprintf(want, sizeof want, "/%s/%s", layout.root, id) >= sizeof want)
                return false;
        while (fgets(line, sizeof line, f)) {
                char *path = strrchr(line, ':');
                if (!path)
                        continue;
                path++;
                path[strcspn(path, "\n")] = 0;
                if (endswith(path, want))
                        found = true;
        }
        return found;
}

static int procs_path(char *p, size_t n, const char *id) {
        if (layout.v2[0])
                return path_v2(p, n, id, "cgroup.procs");
        for (size_t i = 0; i < ELEMENTSOF(v1_controllers); i++)
                if (layout.v1_have[i])
                        return path_v1(p, n, i, id, "cgroup.procs");
        return -ENXIO;
}

/* SIGKILL to every process of the cgroup, once: cgroup.kill, or on v1
 * freeze, kill all, thaw, so forks can't race us. */
static void kill_round(const char *id, const char *procs, const char *kp, bool have_kill) {
        char p[PATH_MAX];

        if (have_kill) {
                (void) write_string_file(kp, "1");
                return;
        }
        for (size_t i = 0; i < ELEMENTSOF(v1_controllers); i++)
                if (layout.v1_have[i] && streq(v1_controllers[i], "freezer")) {
                        path_v1(p, sizeof p, i, id, "freezer.state");
                        (void) write_string_file(p, "FROZEN");
                }
        (void) for_each_pid(procs, kill_pid);
        for (size_t i = 0; i < ELEMENTSOF(v1_controllers); i++)
                if (layout.v1_have[i] && streq(v1_controllers[i], "freezer")) {
                        path_v1(p, sizeof p, i, id, "freezer.state");
                        (void) write_string_file(p, "THAWED");
                }
}

static int kill_paths(const char *id, char procs[static PATH_MAX], char kp[static PATH_MAX], bool *ret_have_kill) {
        if (procs_path(procs, PATH_MAX, id) < 0)
                return -ENXIO;
        *ret_have_kill = false;
        if (layout.v2[0]) {
                path_v2(kp, PATH_MAX, id, "cgroup.kill");
                *ret_have_kill = access(kp, F_OK) == 0;
        }
        return 0;
}

int cgroup_kill_now(const char *id) {
        char procs[PATH_MAX], kp[PATH_MAX] = "";
        bool have_kill;

        if (kill_paths(id, procs, kp, &have_kill) < 0)
                return -ENXIO;
        kill_round(id, procs, kp, have_kill);
        return 0;
}

int cgroup_kill(const char *id) {
        char procs[PATH_MAX], kp[PATH_MAX] = "";
        bool have_kill;
        int n;

        if (kill_paths(id, procs, kp, &have_kill) < 0)
                return -ENXIO;
        int64_t start = mono_msec();
        for (int round = 0; mono_msec() - start < CGROUP_KILL_TIMEOUT_MSEC; round++) {
                kill_round(id, procs, kp, have_kill);
                n = for_each_pid(procs, NULL);
                if (n <= 0)
                        return 0;
                (void) poll(NULL, 0, round < 50 ? 1 : 5);
        }
        return log_warning_errno(EBUSY, "Processes of sandbox %s survived SIGKILL", id);
}

static int rmdir_retry(const char *p) {
        int64_t start = mono_msec();
        for (;;) {
                if (rmdir(p) == 0 || errno == ENOENT)
                        return 0;
                if (errno != EBUSY || mono_msec() - start > CGROUP_RMDIR_TIMEOUT_MSEC)
                        return negative_errno();
                (void) poll(NULL, 0, 5);
        }
}

static bool cgroup_populated(const char *id) {
        char p[PATH_MAX];
        return procs_path(p, sizeof p, id) >= 0 && for_each_pid(p, NULL) > 0;
}

int cgroup_remove(const char *id) {
        /* processes still dying: one attempt each, no waiting (the caller retries later) */
        bool busy = cgroup_populated(id);
        char p[PATH_MAX];
        int r = 0, k;

        if (layout.v2[0]) {
                path_v2(p, sizeof p, id, NULL);
                k = busy ? (rmdir(p) < 0 && errno != ENOENT ? negative_errno() : 0) : rmdir_retry(p);
                if (k < 0)
                        r = log_warning_errno(k, "Failed to remove cgroup %s: %m", p);
        }
        if (layout.mode != CGROUP_MODE_V2)
                for (size_t i = 0; i < ELEMENTSOF(v1_controllers); i++) {
                        if (!layout.v1_have[i])
                                continue;
                        path_v1(p, sizeof p, i, id, NULL);
                        k = busy ? (rmdir(p) < 0 && errno != ENOENT ? negative_errno() : 0) : rmdir_retry(p);
                        if (k < 0)
                                r = log_warning_errno(k, "Failed to remove cgroup %s: %m", p);
                }
        return r;
}

#define CGROUP_FREEZE_TIMEOUT_MSEC 5000
#define CGROUP_FREEZE_POLL_MIN_USEC 20    /* the first wait for the freezer: most finish within it */
#define CGROUP_FREEZE_POLL_MAX_USEC 1000


static bool v2_frozen(const char *id) {
        char p[PATH_MAX], line[128];
        _cleanup_fclose_ FILE *f = NULL;
        bool frozen = false;

        if (path_v2(p, sizeof p, id, "cgroup.events") < 0 || !(f = fopen(p, "re")))
                return false;
        while (fgets(line, sizeof line, f))
                if (streq(line, "frozen 1\n"))
                        frozen = true;
        return frozen;
}

static int v1_freezer_state(const char *id, char *buf, size_t n) {
        char p[PATH_MAX];
        _cleanup_fclose_ FILE *f = NULL;

        for (size_t i = 0; i < ELEMENTSOF(v1_controllers); i++)
                if (layout.v1_have[i] && streq(v1_controllers[i], "freezer")) {
                        path_v1(p, sizeof p, i, id, "freezer.state");
                        f = fopen(p, "re");
                        if (!f || !fgets(buf, (int) n, f))
                                return -EIO;
                        buf[strcspn(buf, "\n")] = 0;
                        return 0;
                }
        return -EOPNOTSUPP;
}

/* Waits for the freezer: short sleeps first (a freeze usually completes in
 * microseconds; a fixed 1 ms sleep made every pause and checkpoint wait it),
 * doubling to 1 ms. 0 on time, -ETIMEDOUT after CGROUP_FREEZE_TIMEOUT_MSEC. */
static int freeze_wait(const char *id, bool frozen, bool v2) {
        int64_t start = mono_msec();
        long step = CGROUP_FREEZE_POLL_MIN_USEC;
        char state[32];

        for (;;) {
                bool done;
                if (v2)
                        done = v2_frozen(id) == frozen;
                else
                        done = v1_freezer_state(id, state, sizeof state) >= 0 &&
                               streq(state, frozen ? "FROZEN" : "THAWED");
                if (done)
                        return 0;
                if (mono_msec() - start >= CGROUP_FREEZE_TIMEOUT_MSEC)
                        return -ETIMEDOUT;
                (void) nanosleep(&(struct timespec){ .tv_nsec = step * 1000 }, NULL);
                step = MIN(step * 2, (long) CGROUP_FREEZE_POLL_MAX_USEC);
        }
}

int cgroup_freeze(const char *id, bool frozen) {
        char p[PATH_MAX];
        int r;

        if (layout.v2[0]) {
                r = path_v2(p, sizeof p, id, "cgroup.freeze");
                if (r < 0)
                        return r;
                if (access(p, F_OK) == 0) {
                        r = write_knob(p, frozen ? "1" : "0");
                        if (r < 0)
                                return r;
                        return freeze_wait(id, frozen, true);
                }
        }
        for (size_t i = 0; i < ELEMENTSOF(v1_controllers); i++)
                if (layout.v1_have[i] && streq(v1_controllers[i], "freezer")) {
                        path_v1(p, sizeof p, i, id, "freezer.state");
                        r = write_knob(p, frozen ? "FROZEN" : "THAWED");
                        if (r < 0)
                                return r;
                        return freeze_wait(id, frozen, false);
                }
        return -EOPNOTSUPP;
}

int cgroup_oom_kills(const char *id, uint64_t *ret) {
        char p[PATH_MAX], line[128];
        _cleanup_fclose_ FILE *f = NULL;
        unsigned long long n;

        if (layout.mode == CGROUP_MODE_V2)
                path_v2(p, sizeof p, id, "memory.events");
        else if (layout.v1_have[0])
                path_v1(p, sizeof p, 0, id, "memory.oom_control");
        else
                return -EOPNOTSUPP;
        f = fopen(p, "re");
        if (!f)
                return negative_errno();
        while (fgets(line, sizeof line, f))
                if (sscanf(line, "oom_kill %llu", &n) == 1) {
                        *ret = n;
                        return 0;
                }
        return -ENODATA;
}

/* The first number of file p, or of its line starting with key (key NULL: the file is the number). */
static int read_u64_key(const char *p, const char *key, uint64_t *ret) {
        _cleanup_fclose_ FILE *f = fopen(p, "re");
        char line[128];
        size_t kl = key ? strlen(key) : 0;

        if (!f)
                return negative_errno();
        while (fgets(line, sizeof line, f)) {
                const char *v = line;
                if (key) {
                        if (strncmp(line, key, kl) != 0 || line[kl] != ' ')
                                continue;
                        v = line + kl + 1;
                }
                if (strncmp(v, "max", 3) == 0) {
                        *ret = UINT64_MAX;
                        return 0;
                }
                {
                        char *end;
                        unsigned long long x;
                        errno = 0;
                        x = strtoull(v, &end, 10);
                        if (errno != 0 || end == v)
                                return -EBADMSG;
                        *ret = x;
                        return 0;
                }
        }
        return -ENODATA;
}

int cgroup_usage(const char *id, CgroupUsage *ret) {
        CgroupUsage u = { UINT64_MAX, UINT64_MAX, UINT64_MAX };
        char p[PATH_MAX];
        uint64_t ns;

        if (!layout.set_up)
                return -ENXIO;
        if (layout.v2[0] && path_v2(p, sizeof p, id, "cpu.stat") >= 0)
                (void) read_u64_key(p, "usage_usec", &u.cpu_usec);
        if (u.cpu_usec == UINT64_MAX && layout.mode != CGROUP_MODE_V2 && layout.v1_have[1] &&
            path_v1(p, sizeof p, 1, id, "cpuacct.usage") >= 0 && read_u64_key(p, NULL, &ns) >= 0)
                u.cpu_usec = ns / 1000;
        if (layout.mode == CGROUP_MODE_V2) {
                if (path_v2(p, sizeof p, id, "memory.current") >= 0)
                        (void) read_u64_key(p, NULL, &u.memory_bytes);
                if (path_v2(p, sizeof p, id, "memory.max") >= 0)
                        (void) read_u64_key(p, NULL, &u.memory_max_bytes);
        } else if (layout.v1_have[0]) {
                if (path_v1(p, sizeof p, 0, id, "memory.usage_in_bytes") >= 0)
                        (void) read_u64_key(p, NULL, &u.memory_bytes);
                if (path_v1(p, sizeof p, 0, id, "memory.limit_in_bytes") >= 0)
                        (void) read_u64_key(p, NULL, &u.memory_max_bytes);
                if (u.memory_max_bytes >= (UINT64_C(1) << 62))
                        u.memory_max_bytes = UINT64_MAX; /* v1's "no limit" is a page-rounded LONG_MAX */
        }
        if (u.cpu_usec == UINT64_MAX && u.memory_bytes == UINT64_MAX)
                return -ENOENT; /* no cgroup of that id */
        *ret = u;
        return 0;
}

int cgroup_set_limits(const char *id, const RuntimeLimits *limits) {
        int r = apply_limits_v2(id, limits);
        if (r < 0)
                return r;
        return apply_limits_v1(id, limits);
}

int cgroup_teardown(void) {
        char p[PATH_MAX];

        if (!layout.set_up)
                return 0;
        if (layout.v2[0] && path_v2(p, sizeof p, NULL, NULL) >= 0 && rmdir(p) < 0 && errno != ENOENT)
                log_debug_errno(errno, "Cannot remove %s: %m", p);
        if (layout.mode != CGROUP_MODE_V2)
                for (size_t i = 0; i < ELEMENTSOF(v1_controllers); i++)
                        if (layout.v1_have[i] && path_v1(p, sizeof p, i, NULL, NULL) >= 0 && rmdir(p) < 0 &&
                            errno != ENOENT)
                                log_debug_errno(errno, "Cannot remove %s: %m", p);
        return 0;
}

static int list_dir(const char *dir, char ***ids) {
        _cleanup_(closedirp_) DIR *d = opendir(dir);
        struct dirent *de;
        int r;

        if (!d)
                return errno == ENOENT ? 0 : negative_errno();
        while ((de = readdir(d))) {
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                if (strv_contains(*ids, de->d_name))
                        continue;
                r = strv_extend(ids, de->d_name);
                if (r < 0)
                        return r;
        }
        return 0;
}

int cgroup_list(char ***ret_ids) {
        _cleanup_strv_free_ char **ids = NULL;
        char p[PATH_MAX];
        int r;

        if (layout.v2[0]) {
                path_v2(p, sizeof p, NULL, NULL);
                r = list_dir(p, &ids);
                if (r < 0)
                        return r;
        }
        if (layout.mode != CGROUP_MODE_V2)
                for (size_t i = 0; i < ELEMENTSOF(v1_controllers); i++) {
                        if (!layout.v1_have[i])
                                continue;
                        path_v1(p, sizeof p, i, NULL, NULL);
                        r = list_dir(p, &ids);
                        if (r < 0)
                                return r;
                }
        if (!ids && !(ids = calloc(1, sizeof(char *))))
                return -ENOMEM;
        *ret_ids = TAKE_PTR(ids);
        return 0;
}
