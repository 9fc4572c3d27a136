/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "instance.h"
#include "json.h"
#include "log.h"
#include "str-util.h"

#define STATE_SIZE_MAX 4096U
#define HEX_DIGITS 6U

struct Instance {
        int fd; /* the registry entry, locked */
};

/* What the state directory remembers of its instance. */
typedef struct InstanceState {
        char name[INSTANCE_NAME_MAX + 1];
        uint64_t uid_base;
        char net_pool[32];
} InstanceState;

Instance *instance_free(Instance *i) {
        if (!i)
                return NULL;
        safe_close(i->fd);
        free(i);
        return NULL;
}

int instance_lock_fd(const Instance *i) {
        return i ? i->fd : -EBADF;
}

bool instance_name_is_valid(const char *name) {
        size_t n = name ? strlen(name) : 0;

        if (n == 0 || n > INSTANCE_NAME_MAX || !(name[0] >= 'a' && name[0] <= 'z'))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') || name[i] == '-' ||
                      name[i] == '_'))
                        return false;
        return true;
}

static uint64_t fnv1a(const char *s) {
        uint64_t h = UINT64_C(0xcbf29ce484222325);
        for (; *s; s++)
                h = (h ^ (uint8_t) *s) * UINT64_C(0x100000001b3);
        return h;
}

int instance_name_from_state_dir(const char *state_dir, char *buf, size_t size) {
        int k;

        if (streq(state_dir, INSTANCE_DEFAULT_STATE_DIR))
                k = snprintf(buf, size, "%s", INSTANCE_DEFAULT_NAME);
        else
                k = snprintf(buf, size, "%s-%06" PRIx64, INSTANCE_DEFAULT_NAME, fnv1a(state_dir) & 0xffffff);
        return k < 0 || (size_t) k >= size ? -ENAMETOOLONG : 0;
}

static bool is_hex(const char *s, size_t n) {
        if (strlen(s) != n)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

int instance_link_prefix(const char *name, char *buf, size_t size) {
        const char *hex = startswith(name, INSTANCE_DEFAULT_NAME "-");
        int k;

        if (streq(name, INSTANCE_DEFAULT_NAME))
                k = snprintf(buf, size, "%s", INSTANCE_DEFAULT_LINK_PREFIX);
        else if (hex && is_hex(hex, HEX_DIGITS))
                k = snprintf(buf, size, "sp%s-", hex);
        else
                k = snprintf(buf, size, "sp%06" PRIx64 "-", fnv1a(name) & 0xffffff);
        return k < 0 || (size_t) k >= size ? -ENAMETOOLONG : 0;
}

static int state_read(const char *state_dir, InstanceState *ret) {
        _cleanup_free_ char *path = strjoin(state_dir, "/" INSTANCE_FILE), *text = NULL;
        _cleanup_json_ JsonValue *o = NULL;
        size_t n = 0;
        int r;

        if (!path)
                return -ENOMEM;
        r = read_full_file(path, STATE_SIZE_MAX, &text, &n);
        if (r < 0)
                return r;
        if (json_parse(text, n, &o, NULL, 0) < 0 || json_type(o) != JSON_OBJECT)
                return -EBADMSG;
        *ret = (InstanceState){};
        const char *name = json_string(json_get(o, "instance")), *pool = json_string(json_get(o, "net_pool"));
        if (!name || !instance_name_is_valid(name) || json_uint64(json_get(o, "uid_base"), &ret->uid_base) < 0 ||
            !pool || strscpy(ret->net_pool, sizeof ret->net_pool, pool) < 0)
                return -EBADMSG;
        (void) strscpy(ret->name, sizeof ret->name, name);
        return 0;
}

int instance_kept_name(const char *state_dir, char *buf, size_t size) {
        InstanceState st;
        int r = state_read(state_dir, &st);
        if (r < 0)
                return r;
        return strscpy(buf, size, st.name);
}

static int state_write(const char *state_dir, const InstanceState *s) {
        _cleanup_free_ char *path = strjoin(state_dir, "/" INSTANCE_FILE), *text = NULL;
        _cleanup_(json_w_done) JsonWriter w;
        size_t len;
        int r;

        if (!path)
                return -ENOMEM;
        json_w_init(&w);
        json_w_object_begin(&w);
        json_w_kv_string(&w, "instance", s->name);
        json_w_key(&w, "uid_base");
        json_w_uint(&w, s->uid_base);
        json_w_kv_string(&w, "net_pool", s->net_pool);
        json_w_object_end(&w);
        r = json_w_finish(&w, &text, &len);
        if (r < 0)
                return r;
        return write_file_atomic(path, text, len, 0644);
}

/* The first free range of count ids from INSTANCE_UID_FIRST on, aligned to
 * INSTANCE_UID_STEP, that no other registered instance holds. */
static int pick_uid_base(const InstanceEntry *list, size_t n, const char *self, uint64_t count, uint64_t *ret) {
        for (uint64_t b = INSTANCE_UID_FIRST; b + count <= INSTANCE_UID_END; b += INSTANCE_UID_STEP) {
                bool taken = false;
                for (size_t i = 0; i < n && !taken; i++)
                        taken = !streq(list[i].name, self) &&
                                instance_uid_ranges_overlap(b, count, list[i].uid_base, list[i].uid_count);
                if (!taken) {
                        *ret = b;
                        return 0;
                }
        }
        return -ENOSPC;
}

static bool host_has_address_in(uint32_t base, uint32_t size) {
        struct ifaddrs *ifs = NULL;
        bool found = false;

        if (getifaddrs(&ifs) < 0)
                return true; /* unknown: not this block */
        for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next)
                if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
                        uint32_t a = ntohl(((const struct sockaddr_in *) (const void *) i->ifa_addr)->sin_addr.s_addr);
                        found = a >= base && a - base < size;
                }
        freeifaddrs(ifs);
        return found;
}

/* The first free block for slots /31s from INSTANCE_NET_FIRST on: in no other
 * registered instance's pool and holding none of the host's addresses. */
static int pick_net_pool(const InstanceEntry *list, size_t n, const char *self, uint64_t slots, char *buf,
                         size_t size) {
        unsigned bits = 2;

        while (bits < 24 && (UINT64_C(1) << bits) < 2 * slots)
                bits++;
        uint32_t block = UINT32_C(1) << bits;
        for (uint64_t b = INSTANCE_NET_FIRST; b + block <= INSTANCE_NET_END; b += block) {
                char cidr[32];
                bool taken = false;

                snprintf(cidr, sizeof cidr, "%u.%u.%u.%u/%u", (unsigned) (b >> 24) & 255, (unsigned) (b >> 16) & 255,
                         (unsigned) (b >> 8) & 255, (unsigned) b & 255, 32 - bits);
                for (size_t i = 0; i < n && !taken; i++)
                        taken = !streq(list[i].name, self) && instance_cidrs_overlap(cidr, list[i].net_pool);
                if (taken || host_has_address_in((uint32_t) b, block))
                        continue;
                return strscpy(buf, size, cidr);
        }
        return -ENOSPC;
}

static int resolve_name(Config *c, const char *real, const InstanceState *saved, bool have_saved, char *errbuf,
                        size_t errbuf_size) {
        if (!isempty(c->instance)) {
                if (!instance_name_is_valid(c->instance)) {
                        snprintf(errbuf, errbuf_size,
                                 "instance '%.64s' is not a name: 1-%u lowercase letters, digits, '-' or '_', "
                                 "starting with a letter", c->instance, INSTANCE_NAME_MAX);
                        return -EINVAL;
                }
                if (have_saved && !streq(saved->name, c->instance)) {
                        snprintf(errbuf, errbuf_size,
                                 "instance '%s' is not '%s', the instance state directory %s belongs to (%s): its "
                                 "sandboxes' cgroups and links carry that name; to rename it, stop every sandbox "
                                 "and remove %s/%s", c->instance, saved->name, real, INSTANCE_FILE, real,
                                 INSTANCE_FILE);
                        return -EINVAL;
                }
                return 0;
        }
        if (have_saved)
                return strscpy(c->instance, sizeof c->instance, saved->name);
        return instance_name_from_state_dir(real, c->instance, sizeof c->instance);
}

/* The unset names follow the instance. */
static int derive_names(Config *c) {
        if (isempty(c->cgroup_root) && strscpy(c->cgroup_root, sizeof c->cgroup_root, c->instance) < 0)
                return -ENAMETOOLONG;
        if (isempty(c->net_table) && strscpy(c->net_table, sizeof c->net_table, c->instance) < 0)
                return -ENAMETOOLONG;
        if (isempty(c->net_link_prefix))
                return instance_link_prefix(c->instance, c->net_link_prefix, sizeof c->net_link_prefix);
        return 0;
}

static int derive_ranges(Config *c, const InstanceEntry *list, size_t n, const InstanceState *saved,
                         bool have_saved, char *errbuf, size_t errbuf_size) {
        bool is_default = streq(c->instance, INSTANCE_DEFAULT_NAME);
        uint64_t count = c->slots_max * INSTANCE_ID_RANGE;
        int r;

        if (c->uid_base == 0) {
                if (have_saved)
                        c->uid_base = saved->uid_base;
                else if (is_default)
                        c->uid_base = INSTANCE_DEFAULT_UID_BASE;
                else if (pick_uid_base(list, n, c->instance, count, &c->uid_base) < 0) {
                        snprintf(errbuf, errbuf_size,
                                 "no free uid range of %" PRIu64 " ids (slots_max %" PRIu64 ") is left beside the "
                                 "other instances registered in %s: set uid_base, or fewer slots_max",
                                 count, c->slots_max, INSTANCE_REGISTRY_DIR);
                        return -ENOSPC;
                }
        }
        if (c->uid_base < INSTANCE_ID_RANGE || c->uid_base + count > INSTANCE_UID_END) {
                snprintf(errbuf, errbuf_size,
                         "uid range %" PRIu64 " + %" PRIu64 " ids (uid_base, slots_max × 65536) does not fit "
                         "between 65536 and %" PRIu64, c->uid_base, count, (uint64_t) INSTANCE_UID_END);
                return -ERANGE;
        }
        if (isempty(c->net_pool)) {
                if (have_saved && !isempty(saved->net_pool))
                        r = strscpy(c->net_pool, sizeof c->net_pool, saved->net_pool);
                else if (is_default)
                        r = strscpy(c->net_pool, sizeof c->net_pool, INSTANCE_DEFAULT_NET_POOL);
                else
                        r = pick_net_pool(list, n, c->instance, c->slots_max, c->net_pool, sizeof c->net_pool);
                if (r < 0) {
                        snprintf(errbuf, errbuf_size,
                                 "no free net_pool for %" PRIu64 " links is left in 10.201.0.0-10.255.255.255 "
                                 "beside the other instances registered in %s: set net_pool",
                                 c->slots_max, INSTANCE_REGISTRY_DIR);
                        return -ENOSPC;
                }
        }
        return 0;
}

int instance_setup(Config *c, const char *registry_dir, Instance **ret, char *errbuf, size_t errbuf_size) {
        _cleanup_free_ char *real = NULL, *db = NULL;
        _cleanup_free_ InstanceEntry *list = NULL;
        _cleanup_close_ int lock_fd = -EBADF, entry_fd = -EBADF;
        InstanceState saved = {}, now = {};
        InstanceEntry self = {}, holder = {};
        bool have_saved;
        size_t n = 0;
        int r;

        real = realpath(c->state_dir, NULL);
        if (!real) {
                r = negative_errno();
                snprintf(errbuf, errbuf_size, "cannot resolve state_dir %s: %s", c->state_dir, strerror(-r));
                return r;
        }
        r = state_read(real, &saved);
        if (r < 0 && r != -ENOENT) {
                snprintf(errbuf, errbuf_size, "%s/%s is damaged (%s): remove it while no sandbox runs", real,
                         INSTANCE_FILE, strerror(-r));
                return r;
        }
        have_saved = r >= 0;
        r = resolve_name(c, real, &saved, have_saved, errbuf, errbuf_size);
        if (r < 0)
                return r;
        r = derive_names(c);
        if (r < 0) {
                snprintf(errbuf, errbuf_size, "instance %s: a derived name is too long", c->instance);
                return r;
        }
        r = instance_registry_lock(registry_dir, &lock_fd);
        if (r >= 0)
                r = instance_registry_list(registry_dir, &list, &n);
        if (r < 0) {
                snprintf(errbuf, errbuf_size, "cannot read the registry of instances %s: %s", registry_dir,
                         strerror(-r));
                return r;
        }
        r = derive_ranges(c, list, n, &saved, have_saved, errbuf, errbuf_size);
        if (r < 0)
                return r;

        (void) strscpy(self.name, sizeof self.name, c->instance);
        (void) strscpy(self.state_dir, sizeof self.state_dir, real);
        (void) strscpy(self.role, sizeof self.role, c->role);
        self.pid = getpid();
        (void) instance_netns_id(&self.netns);
        self.uid_base = c->uid_base;
        self.uid_count = c->slots_max * INSTANCE_ID_RANGE;
        (void) strscpy(self.net_pool, sizeof self.net_pool, c->net_pool);
        (void) strscpy(self.net_table, sizeof self.net_table, c->net_table);
        (void) strscpy(self.net_link_prefix, sizeof self.net_link_prefix, c->net_link_prefix);
        (void) strscpy(self.cgroup_root, sizeof self.cgroup_root, c->cgroup_root);
        (void) strscpy(self.listen, sizeof self.listen, streq(c->role, "worker") ? c->worker_listen : c->listen);

        for (size_t i = 0; i < n; i++) {
                char what[2 * CONFIG_STR_MAX];
                if (streq(list[i].name, self.name) || !instance_entry_overlaps(&self, &list[i], what, sizeof what))
                        continue;
                if (list[i].live) {
                        snprintf(errbuf, errbuf_size,
                                 "%s that of instance '%s' (state dir %s, pid %" PRIi64 "), which runs on this "
                                 "host: set another value (an unset one is derived free)",
                                 what, list[i].name, list[i].state_dir, list[i].pid);
                        return -EADDRINUSE;
                }
                if (instance_entry_has_sandboxes(&list[i])) {
                        snprintf(errbuf, errbuf_size,
                                 "%s that of instance '%s' (state dir %s, last pid %" PRIi64 "), which is not "
                                 "running but whose sandboxes still run on this host (cgroup %s): start it again, "
                                 "or set another value", what, list[i].name, list[i].state_dir, list[i].pid,
                                 list[i].cgroup_root);
                        return -EADDRINUSE;
                }
                log_warning("Instance %s: %s that of the stopped instance '%s' (state dir %s): its sandboxes may still "
                            "hold them, and it cannot start again while this one runs",
                            self.name, what, list[i].name, list[i].state_dir);
        }
        r = instance_registry_add(registry_dir, &self, &entry_fd, &holder);
        if (r == -EBUSY) {
                snprintf(errbuf, errbuf_size, "instance '%s' already runs on this host (state dir %s, pid %" PRIi64
                         "): set instance to another name",
                         self.name, holder.state_dir[0] ? holder.state_dir : "?", holder.pid);
                return r;
        }
        if (r < 0) {
                snprintf(errbuf, errbuf_size, "cannot register instance %s in %s: %s", self.name, registry_dir,
                         strerror(-r));
                return r;
        }

        db = strjoin(real, "/space.db");
        if (!have_saved && db && access(db, F_OK) == 0 && !streq(self.name, INSTANCE_DEFAULT_NAME) &&
            c->uid_base != INSTANCE_DEFAULT_UID_BASE)
                log_warning("State directory %s was made before instance identities: the files of its sandboxes "
                            "are owned by uids from %" PRIu64 " on, and this instance's range starts at %" PRIu64
                            " (set uid_base=%" PRIu64 " to keep the old one)",
                            real, INSTANCE_DEFAULT_UID_BASE, c->uid_base, INSTANCE_DEFAULT_UID_BASE);
        (void) strscpy(now.name, sizeof now.name, c->instance);
        now.uid_base = c->uid_base;
        (void) strscpy(now.net_pool, sizeof now.net_pool, c->net_pool);
        if (!have_saved || !streq(now.name, saved.name) || now.uid_base != saved.uid_base ||
            !streq(now.net_pool, saved.net_pool)) {
                if (have_saved && saved.uid_base != now.uid_base)
                        log_warning("Instance %s: uid_base %" PRIu64 " is not %" PRIu64 ", the range its files were "
                                    "made with", now.name, now.uid_base, saved.uid_base);
                r = state_write(real, &now);
                if (r < 0) {
                        snprintf(errbuf, errbuf_size, "cannot write %s/%s: %s", real, INSTANCE_FILE, strerror(-r));
                        return r;
                }
        }
        Instance *i = new0(Instance, 1);
        if (!i)
                return -ENOMEM;
        i->fd = TAKE_FD(entry_fd);
        *ret = i;
        return 0;
}
