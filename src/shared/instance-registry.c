/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "instance-registry.h"
#include "instance.h"
#include "json.h"
#include "str-util.h"

#define ENTRY_SIZE_MAX 8192U
#define LOCK_POLL_MSEC 10U
#define ENTRY_SUFFIX ".json"

int instance_netns_id(uint64_t *ret) {
        struct stat st;

        if (stat("/proc/self/ns/net", &st) < 0)
                return negative_errno();
        *ret = (uint64_t) st.st_ino;
        return 0;
}

int instance_cidr_parse(const char *s, uint32_t *ret_base, unsigned *ret_len) {
        char addr[INET_ADDRSTRLEN];
        const char *slash = s ? strchr(s, '/') : NULL;
        struct in_addr in;
        unsigned len;

        if (!slash || (size_t) (slash - s) >= sizeof addr || safe_atou(slash + 1, &len) < 0 || len > 32)
                return -EINVAL;
        memcpy(addr, s, (size_t) (slash - s));
        addr[slash - s] = 0;
        if (inet_pton(AF_INET, addr, &in) != 1)
                return -EINVAL;
        *ret_base = ntohl(in.s_addr) & (len == 0 ? 0 : UINT32_MAX << (32 - len));
        *ret_len = len;
        return 0;
}

bool instance_cidrs_overlap(const char *a, const char *b) {
        uint32_t ab, bb;
        unsigned al, bl;

        if (instance_cidr_parse(a, &ab, &al) < 0 || instance_cidr_parse(b, &bb, &bl) < 0)
                return false;
        unsigned l = MIN(al, bl);
        uint32_t mask = l == 0 ? 0 : UINT32_MAX << (32 - l);
        return (ab & mask) == (bb & mask);
}

bool instance_uid_ranges_overlap(uint64_t a_base, uint64_t a_count, uint64_t b_base, uint64_t b_count) {
        return a_count > 0 && b_count > 0 && a_base < b_base + b_count && b_base < a_base + a_count;
}

/* host:port → whether two listeners can take the same socket: unix paths
 * equal, or ports equal and a host equal or a wildcard. */
static bool listeners_overlap(const char *a, const char *b) {
        static const char *const wildcards[] = { "", "0.0.0.0", "::", "[::]", "*", "0" };
        const char *ua = startswith(a, "unix:"), *ub = startswith(b, "unix:");
        const char *ca = strrchr(a, ':'), *cb = strrchr(b, ':');

        if (ua || ub)
                return ua && ub && streq(ua, ub);
        if (isempty(a) || isempty(b) || !ca || !cb || !streq(ca, cb))
                return false;
        size_t na = (size_t) (ca - a), nb = (size_t) (cb - b);
        if (na == nb && strncmp(a, b, na) == 0)
                return true;
        for (size_t i = 0; i < ELEMENTSOF(wildcards); i++)
                if ((strlen(wildcards[i]) == na && strncmp(a, wildcards[i], na) == 0) ||
                    (strlen(wildcards[i]) == nb && strncmp(b, wildcards[i], nb) == 0))
                        return true;
        return false;
}

bool instance_entry_overlaps(const InstanceEntry *a, const InstanceEntry *b, char *what, size_t size) {
        bool netns = a->netns == b->netns;

        if (streq(a->state_dir, b->state_dir))
                snprintf(what, size, "state_dir %s is", a->state_dir);
        else if (instance_uid_ranges_overlap(a->uid_base, a->uid_count, b->uid_base, b->uid_count))
                snprintf(what, size,
                         "uid range %" PRIu64 "-%" PRIu64 " (uid_base, slots_max) overlaps %" PRIu64 "-%" PRIu64 ",",
                         a->uid_base, a->uid_base + a->uid_count - 1, b->uid_base, b->uid_base + b->uid_count - 1);
        else if (streq(a->cgroup_root, b->cgroup_root))
                snprintf(what, size, "cgroup_root %s is", a->cgroup_root);
        else if (netns && instance_cidrs_overlap(a->net_pool, b->net_pool))
                snprintf(what, size, "net_pool %s overlaps %s,", a->net_pool, b->net_pool);
        else if (netns && streq(a->net_table, b->net_table))
                snprintf(what, size, "net_table %s is", a->net_table);
        else if (netns && streq(a->net_link_prefix, b->net_link_prefix))
                snprintf(what, size, "net_link_prefix %s is", a->net_link_prefix);
        else if ((netns || startswith(a->listen, "unix:")) && listeners_overlap(a->listen, b->listen))
                snprintf(what, size, "listener %s overlaps %s,", a->listen, b->listen);
        else
                return false;
        return true;
}

int instance_registry_lock(const char *dir, int *ret_fd) {
        _cleanup_free_ char *path = strjoin(dir, "/.lock");
        int fd, r;

        if (!path)
                return -ENOMEM;
        r = mkdir_p(dir, 0700);
        if (r < 0)
                return r;
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return negative_errno();
        /* held for the milliseconds of a start; a start stopped while holding it must not hang ours */
        for (unsigned waited = 0; flock(fd, LOCK_EX | LOCK_NB) < 0; waited += LOCK_POLL_MSEC) {
                if (errno != EWOULDBLOCK || waited >= INSTANCE_REGISTRY_LOCK_TIMEOUT_MSEC) {
                        r = errno == EWOULDBLOCK ? -ETIMEDOUT : negative_errno();
                        close(fd);
                        return r;
                }
                (void) poll(NULL, 0, LOCK_POLL_MSEC);
        }
        *ret_fd = fd;
        return 0;
}

static void copy_string(const JsonValue *o, const char *key, char *buf, size_t size) {
        const char *s = json_string(json_get(o, key));
        (void) strscpy(buf, size, s ?: "");
}

static int entry_from_json(const char *text, size_t n, InstanceEntry *e) {
        _cleanup_json_ JsonValue *o = NULL;
        int64_t pid = 0;

        if (json_parse(text, n, &o, NULL, 0) < 0 || json_type(o) != JSON_OBJECT)
                return -EBADMSG;
        *e = (InstanceEntry){};
        copy_string(o, "instance", e->name, sizeof e->name);
        copy_string(o, "state_dir", e->state_dir, sizeof e->state_dir);
        copy_string(o, "role", e->role, sizeof e->role);
        copy_string(o, "net_pool", e->net_pool, sizeof e->net_pool);
        copy_string(o, "net_table", e->net_table, sizeof e->net_table);
        copy_string(o, "net_link_prefix", e->net_link_prefix, sizeof e->net_link_prefix);
        copy_string(o, "cgroup_root", e->cgroup_root, sizeof e->cgroup_root);
        copy_string(o, "listen", e->listen, sizeof e->listen);
        if (json_int64(json_get(o, "pid"), &pid) < 0 || json_uint64(json_get(o, "netns"), &e->netns) < 0 ||
            json_uint64(json_get(o, "uid_base"), &e->uid_base) < 0 ||
            json_uint64(json_get(o, "uid_count"), &e->uid_count) < 0 || !instance_name_is_valid(e->name))
                return -EBADMSG;
        e->pid = pid;
        return 0;
}

static int entry_to_json(const InstanceEntry *e, char **ret, size_t *ret_len) {
        _cleanup_(json_w_done) JsonWriter w;

        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "instance", e->name);
        json_w_kv_string(&w, "state_dir", e->state_dir);
        json_w_kv_string(&w, "role", e->role);
        json_w_kv_int(&w, "pid", e->pid);
        json_w_key(&w, "netns");
        json_w_uint(&w, e->netns);
        json_w_key(&w, "uid_base");
        json_w_uint(&w, e->uid_base);
        json_w_key(&w, "uid_count");
        json_w_uint(&w, e->uid_count);
        json_w_kv_string(&w, "cgroup_root", e->cgroup_root);
        json_w_kv_string(&w, "net_pool", e->net_pool);
        json_w_kv_string(&w, "net_table", e->net_table);
        json_w_kv_string(&w, "net_link_prefix", e->net_link_prefix);
        json_w_kv_string(&w, "listen", e->listen);
        json_w_object_end(&w);
        return json_w_finish(&w, ret, ret_len);
}

/* Reads an open entry; live: whether someone holds its lock. */
static int entry_read(int fd, InstanceEntry *e) {
        char buf[ENTRY_SIZE_MAX + 1];
        ssize_t n;
        bool live = false;

        if (flock(fd, LOCK_SH | LOCK_NB) < 0) {
                if (errno != EWOULDBLOCK)
                        return negative_errno();
                live = true;
        } else
                (void) flock(fd, LOCK_UN);
        n = pread(fd, buf, ENTRY_SIZE_MAX, 0);
        if (n < 0)
                return negative_errno();
        buf[n] = 0;
        if (entry_from_json(buf, (size_t) n, e) < 0)
                return -EBADMSG;
        e->live = live;
        return 0;
}

/* A stopped daemon's entry stays while its state directory still names it. */
static bool entry_still_reserved(const InstanceEntry *e) {
        _cleanup_free_ char *path = strjoin(e->state_dir, "/" INSTANCE_FILE), *text = NULL;
        _cleanup_json_ JsonValue *o = NULL;
        size_t n = 0;

        if (!path || read_full_file(path, ENTRY_SIZE_MAX, &text, &n) < 0 ||
            json_parse(text, n, &o, NULL, 0) < 0)
                return false;
        const char *name = json_string(json_get(o, "instance"));
        return name && streq(name, e->name);
}

int instance_registry_list(const char *dir, InstanceEntry **ret, size_t *ret_n) {
        _cleanup_(closedirp_) DIR *d = opendir(dir);
        _cleanup_free_ InstanceEntry *list = NULL;
        size_t n = 0, allocated = 0;
        struct dirent *de;

        if (!d)
                return negative_errno();
        while ((de = readdir(d))) {
                const char *suffix = endswith(de->d_name, ENTRY_SUFFIX);
                char path[PATH_MAX];
                InstanceEntry e;
                int r;

                if (de->d_name[0] == '.' || !suffix || de->d_type != DT_REG)
                        continue;
                if (n >= INSTANCE_REGISTRY_MAX)
                        return -E2BIG;
                if ((size_t) snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= sizeof path)
                        continue;
                _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                if (fd < 0)
                        continue;
                r = entry_read(fd, &e);
                if (r == -EBADMSG || (r >= 0 && (strlen(e.name) != (size_t) (suffix - de->d_name) ||
                                                 strncmp(e.name, de->d_name, strlen(e.name)) != 0))) {
                        /* not an entry we wrote (or one cut short): not a daemon's */
                        if (flock(fd, LOCK_SH | LOCK_NB) >= 0)
                                (void) unlink(path);
                        continue;
                }
                if (r < 0)
                        return r;
                if (!e.live && !entry_still_reserved(&e)) {
                        (void) unlink(path);
                        continue;
                }
                if (GREEDY_REALLOC(list, allocated, n + 1) < 0)
                        return -ENOMEM;
                list[n++] = e;
        }
        *ret = TAKE_PTR(list);
        *ret_n = n;
        return 0;
}

/* Whether dir holds a subdirectory (a sandbox's cgroup below a root). */
static bool has_subdir(const char *dir) {
        _cleanup_(closedirp_) DIR *d = opendir(dir);
        struct dirent *de;

        while (d && (de = readdir(d)))
                if (de->d_type == DT_DIR && de->d_name[0] != '.')
                        return true;
        return false;
}

bool instance_entry_has_sandboxes(const InstanceEntry *e) {
        _cleanup_(closedirp_) DIR *d = NULL;
        struct dirent *de;
        char p[PATH_MAX];

        if (isempty(e->cgroup_root))
                return false;
        snprintf(p, sizeof p, "%s/%s", INSTANCE_CGROUP_FS, e->cgroup_root);
        if (has_subdir(p))
                return true;
        /* v1 and hybrid: one hierarchy per directory of the cgroup file system */
        d = opendir(INSTANCE_CGROUP_FS);
        while (d && (de = readdir(d))) {
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                if ((size_t) snprintf(p, sizeof p, "%s/%s/%s", INSTANCE_CGROUP_FS, de->d_name, e->cgroup_root) <
                            sizeof p &&
                    has_subdir(p))
                        return true;
        }
        return false;
}

int instance_registry_add(const char *dir, const InstanceEntry *e, int *ret_fd, InstanceEntry *ret_holder) {
        _cleanup_free_ char *path = strjoin(dir, "/", e->name, ENTRY_SUFFIX), *text = NULL;
        _cleanup_close_ int fd = -EBADF;
        size_t len;
        int r;

        if (!path)
                return -ENOMEM;
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return negative_errno();
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                if (errno != EWOULDBLOCK)
                        return negative_errno();
                if (ret_holder && entry_read(fd, ret_holder) < 0)
                        *ret_holder = (InstanceEntry){};
                return -EBUSY;
        }
        r = entry_to_json(e, &text, &len);
        if (r < 0)
                return r;
        if (ftruncate(fd, 0) < 0)
                return negative_errno();
        r = loop_write(fd, text, len);
        if (r < 0)
                return r;
        *ret_fd = TAKE_FD(fd);
        return 0;
}
