/* SPDX-License-Identifier: MIT */
/* Instance identities and the host registry (src/shared/instance*.c), on a
 * registry directory of the test's own: names derived from the state
 * directory, ranges chosen free and kept, overlaps with a live daemon
 * refused and named, a stopped daemon's ranges reserved until its state
 * directory no longer names it. */
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "fd-util.h"
#include "instance.h"
#include "str-util.h"
#include "test.h"

typedef struct Dirs {
        char registry[PATH_MAX];
        char state[4][PATH_MAX];
} Dirs;

static void dirs_make(Dirs *d) {
        snprintf(d->registry, sizeof d->registry, "%s/registry", test_tmpdir());
        for (size_t i = 0; i < ELEMENTSOF(d->state); i++) {
                snprintf(d->state[i], sizeof d->state[i], "%s/state%zu", test_tmpdir(), i);
                ASSERT_OK(mkdir_p(d->state[i], 0700));
        }
}

/* A daemon's configuration on state_dir: the defaults but for its listener
 * (the port its state directory's last digit) and fewer slots. */
static void config_for(Config *c, const char *state_dir) {
        char err[256], listen[64];
        config_defaults(c);
        ASSERT_OK(config_set(c, "state_dir", state_dir, err, sizeof err));
        snprintf(listen, sizeof listen, "127.0.0.1:%d", 17070 + (state_dir[strlen(state_dir) - 1] - '0'));
        ASSERT_OK(config_set(c, "listen", listen, err, sizeof err));
        ASSERT_OK(config_set(c, "slots_max", "1024", err, sizeof err));
        ASSERT_OK(config_finish(c, err, sizeof err));
}

/* Whether someone holds the entry's lock (another open file: flock sees it). */
static bool entry_live(const Dirs *d, const char *name) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s.json", d->registry, name);
        _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        return flock(fd, LOCK_SH | LOCK_NB) < 0;
}

static bool entry_exists(const Dirs *d, const char *name) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s.json", d->registry, name);
        return access(p, F_OK) == 0;
}

TEST(instance_names) {
        static const char *const bad[] = { "", "Space", "1space", "-a", "a/b", "a.b", "a b",
                                           "abcdefghijklmnopqrstuvwxyz0123456" };
        static const char *const good[] = { "space", "space-3f9a1c", "a", "prod_2", "abcdefghijklmnopqrstuvwxyz012345" };
        char buf[64], other[64];

        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                ASSERT_FALSE(instance_name_is_valid(bad[i]));
        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                ASSERT_TRUE(instance_name_is_valid(good[i]));

        /* the default state directory keeps today's names */
        ASSERT_OK(instance_name_from_state_dir("/var/lib/space", buf, sizeof buf));
        ASSERT_STREQ(buf, "space");
        ASSERT_OK(instance_link_prefix("space", buf, sizeof buf));
        ASSERT_STREQ(buf, "sp-");
        /* another: space-<6 hex>, stable, different per path */
        ASSERT_OK(instance_name_from_state_dir("/srv/space-b", buf, sizeof buf));
        ASSERT_TRUE(startswith(buf, "space-") && strlen(buf) == 12 && instance_name_is_valid(buf));
        ASSERT_OK(instance_name_from_state_dir("/srv/space-b", other, sizeof other));
        ASSERT_STREQ(buf, other);
        ASSERT_OK(instance_name_from_state_dir("/srv/space-c", other, sizeof other));
        ASSERT_FALSE(streq(buf, other));
        ASSERT_OK(instance_link_prefix("space-3f9a1c", buf, sizeof buf));
        ASSERT_STREQ(buf, "sp3f9a1c-");
        /* any other name: sp + 6 hex + '-', room for a 5-digit slot in 15 */
        ASSERT_OK(instance_link_prefix("prod", buf, sizeof buf));
        ASSERT_TRUE(startswith(buf, "sp") && strlen(buf) == 9 && buf[8] == '-');
        /* no prefix is a prefix of another's links */
        ASSERT_FALSE(startswith("sp3f9a1c-0", "sp-"));
        ASSERT_FALSE(startswith("sp-0", "sp3f9a1c-"));
}

TEST(instance_overlaps) {
        ASSERT_TRUE(instance_cidrs_overlap("10.200.0.0/16", "10.200.8.0/21"));
        ASSERT_TRUE(instance_cidrs_overlap("10.200.8.0/21", "10.200.0.0/16"));
        ASSERT_FALSE(instance_cidrs_overlap("10.200.0.0/16", "10.201.0.0/19"));
        ASSERT_FALSE(instance_cidrs_overlap("10.201.0.0/19", "10.201.32.0/19"));
        ASSERT_FALSE(instance_cidrs_overlap("bogus", "10.201.32.0/19"));
        ASSERT_TRUE(instance_uid_ranges_overlap(1000, 100, 1099, 1));
        ASSERT_FALSE(instance_uid_ranges_overlap(1000, 100, 1100, 1));
        ASSERT_FALSE(instance_uid_ranges_overlap(1100, 1, 1000, 100));
        ASSERT_FALSE(instance_uid_ranges_overlap(1000, 0, 1000, 100));

        InstanceEntry a = { .name = "a", .state_dir = "/a", .netns = 1, .uid_base = 1000, .uid_count = 100,
                            .net_pool = "10.201.0.0/19", .net_table = "a", .net_link_prefix = "spa-",
                            .cgroup_root = "a", .listen = "127.0.0.1:7070" };
        InstanceEntry b = { .name = "b", .state_dir = "/b", .netns = 1, .uid_base = 2000, .uid_count = 100,
                            .net_pool = "10.201.32.0/19", .net_table = "b", .net_link_prefix = "spb-",
                            .cgroup_root = "b", .listen = "127.0.0.1:7071" };
        char what[512];
        ASSERT_FALSE(instance_entry_overlaps(&a, &b, what, sizeof what));
        /* one of each at a time */
        InstanceEntry c = b;
        (void) strscpy(c.listen, sizeof c.listen, "0.0.0.0:7070");
        ASSERT_TRUE(instance_entry_overlaps(&a, &c, what, sizeof what));
        ASSERT_TRUE(startswith(what, "listener"));
        c = b;
        c.uid_base = 1099;
        ASSERT_TRUE(instance_entry_overlaps(&a, &c, what, sizeof what));
        ASSERT_TRUE(startswith(what, "uid range"));
        c = b;
        (void) strscpy(c.cgroup_root, sizeof c.cgroup_root, "a");
        ASSERT_TRUE(instance_entry_overlaps(&a, &c, what, sizeof what));
        ASSERT_TRUE(startswith(what, "cgroup_root"));
        c = b;
        (void) strscpy(c.net_link_prefix, sizeof c.net_link_prefix, "spa-");
        ASSERT_TRUE(instance_entry_overlaps(&a, &c, what, sizeof what));
        ASSERT_TRUE(startswith(what, "net_link_prefix"));
        /* in another network namespace the network is another's: only uids and cgroups count */
        c = b;
        c.netns = 2;
        (void) strscpy(c.net_pool, sizeof c.net_pool, a.net_pool);
        (void) strscpy(c.net_table, sizeof c.net_table, "a");
        (void) strscpy(c.listen, sizeof c.listen, a.listen);
        ASSERT_FALSE(instance_entry_overlaps(&a, &c, what, sizeof what));
        c.uid_base = a.uid_base;
        ASSERT_TRUE(instance_entry_overlaps(&a, &c, what, sizeof what));
}

TEST(instance_setup_two_daemons) {
        _cleanup_(instance_freep) Instance *ia = NULL, *ib = NULL, *ic = NULL;
        Config a, b, c;
        Dirs d;
        char err[2048], want[64], real[PATH_MAX];

        dirs_make(&d);
        config_for(&a, d.state[0]);
        ASSERT_OK(instance_setup(&a, d.registry, &ia, err, sizeof err));
        ASSERT_NOT_NULL(realpath(d.state[0], real));
        ASSERT_OK(instance_name_from_state_dir(real, want, sizeof want));
        ASSERT_STREQ(a.instance, want);
        ASSERT_STREQ(a.cgroup_root, want);
        ASSERT_STREQ(a.net_table, want);
        ASSERT_TRUE(startswith(a.net_link_prefix, "sp") && strlen(a.net_link_prefix) == 9);
        ASSERT_TRUE(a.uid_base >= INSTANCE_UID_FIRST);
        ASSERT_TRUE(entry_live(&d, a.instance));

        /* the second: other names, ranges apart */
        config_for(&b, d.state[1]);
        ASSERT_OK(instance_setup(&b, d.registry, &ib, err, sizeof err));
        ASSERT_FALSE(streq(a.instance, b.instance));
        ASSERT_FALSE(instance_uid_ranges_overlap(a.uid_base, 1024 * 65536, b.uid_base, 1024 * 65536));
        ASSERT_FALSE(instance_cidrs_overlap(a.net_pool, b.net_pool));

        /* explicit settings overlapping a live one: refused, naming it */
        static const char *const clash[][2] = {
                { "uid_base", NULL }, { "net_pool", NULL }, { "cgroup_root", NULL }, { "net_table", NULL },
                { "net_link_prefix", NULL }, { "listen", "0.0.0.0:17070" }, { "instance", NULL },
        };
        for (size_t i = 0; i < ELEMENTSOF(clash); i++) {
                char value[64];
                const char *k = clash[i][0];
                if (streq(k, "uid_base"))
                        snprintf(value, sizeof value, "%" PRIu64, a.uid_base + 3 * 65536);
                else if (streq(k, "net_pool"))
                        (void) strscpy(value, sizeof value, a.net_pool);
                else if (streq(k, "net_link_prefix"))
                        (void) strscpy(value, sizeof value, a.net_link_prefix);
                else if (clash[i][1])
                        (void) strscpy(value, sizeof value, clash[i][1]);
                else
                        (void) strscpy(value, sizeof value, a.instance);
                config_for(&c, d.state[2]);
                ASSERT_OK(config_set(&c, k, value, err, sizeof err));
                if (streq(k, "uid_base")) /* one range inside a's, not reaching b's right after it */
                        ASSERT_OK(config_set(&c, "slots_max", "1", err, sizeof err));
                int r = instance_setup(&c, d.registry, &ic, err, sizeof err);
                ASSERT_TRUE(r == -EADDRINUSE || r == -EBUSY);
                ASSERT_NULL(ic);
                snprintf(want, sizeof want, "instance '%s'", a.instance);
                ASSERT_NOT_NULL(strstr(err, want));
                snprintf(want, sizeof want, "pid %d", (int) getpid());
                ASSERT_NOT_NULL(strstr(err, want));
                ASSERT_NOT_NULL(strstr(err, real));
        }
        /* nothing of the refused one kept */
        snprintf(want, sizeof want, "%s/" INSTANCE_FILE, d.state[2]);
        ASSERT_TRUE(access(want, F_OK) < 0);
        /* a bad name, a uid range past the end */
        config_for(&c, d.state[2]);
        ASSERT_OK(config_set(&c, "instance", "Bad", err, sizeof err));
        ASSERT_ERRNO(instance_setup(&c, d.registry, &ic, err, sizeof err), EINVAL);
        config_for(&c, d.state[2]);
        ASSERT_OK(config_set(&c, "uid_base", "4000000000", err, sizeof err));
        ASSERT_OK(config_set(&c, "slots_max", "8192", err, sizeof err)); /* 2^29 ids: past 2^32 */
        ASSERT_ERRNO(instance_setup(&c, d.registry, &ic, err, sizeof err), ERANGE);
        /* the same state directory twice (another spelling): refused */
        config_for(&c, d.state[0]);
        snprintf(want, sizeof want, "%s/../state0", d.state[1]);
        ASSERT_OK(config_set(&c, "state_dir", want, err, sizeof err));
        ASSERT_ERRNO(instance_setup(&c, d.registry, &ic, err, sizeof err), EBUSY);
}

TEST(instance_setup_stopped_and_restarted) {
        _cleanup_(instance_freep) Instance *ib = NULL, *ic = NULL;
        Instance *ia = NULL;
        Config a, a2, b, c;
        Dirs d;
        char err[2048], path[PATH_MAX];

        dirs_make(&d);
        config_for(&a, d.state[0]);
        ASSERT_OK(instance_setup(&a, d.registry, &ia, err, sizeof err));
        ia = instance_free(ia); /* stopped (or crashed): the lock is gone */
        ASSERT_FALSE(entry_live(&d, a.instance));

        /* its ranges stay reserved for it: a new one takes others */
        config_for(&b, d.state[1]);
        ASSERT_OK(instance_setup(&b, d.registry, &ib, err, sizeof err));
        ASSERT_FALSE(instance_uid_ranges_overlap(a.uid_base, 1024 * 65536, b.uid_base, 1024 * 65536));
        ASSERT_FALSE(instance_cidrs_overlap(a.net_pool, b.net_pool));
        ASSERT_TRUE(entry_exists(&d, a.instance));

        /* it starts again with the same ones (kept in its state directory) */
        config_for(&a2, d.state[0]);
        ASSERT_OK(instance_setup(&a2, d.registry, &ia, err, sizeof err));
        ASSERT_STREQ(a2.instance, a.instance);
        ASSERT_EQ(a2.uid_base, a.uid_base);
        ASSERT_STREQ(a2.net_pool, a.net_pool);
        ia = instance_free(ia);

        /* a stopped one does not block an explicit overlap (a warning only) */
        config_for(&c, d.state[2]);
        snprintf(path, sizeof path, "%" PRIu64, a.uid_base);
        ASSERT_OK(config_set(&c, "uid_base", path, err, sizeof err));
        ASSERT_OK(instance_setup(&c, d.registry, &ic, err, sizeof err));
        ic = instance_free(ic);

        /* another name than the one the state directory has: refused */
        config_for(&a2, d.state[0]);
        ASSERT_OK(config_set(&a2, "instance", "renamed", err, sizeof err));
        ASSERT_ERRNO(instance_setup(&a2, d.registry, &ia, err, sizeof err), EINVAL);
        ASSERT_NOT_NULL(strstr(err, a.instance));

        /* once its state directory is gone, its entry goes at the next start */
        snprintf(path, sizeof path, "%s/" INSTANCE_FILE, d.state[0]);
        ASSERT_OK(unlink(path));
        config_for(&c, d.state[3]);
        ASSERT_OK(instance_setup(&c, d.registry, &ic, err, sizeof err));
        ASSERT_FALSE(entry_exists(&d, a.instance));
        /* and a damaged entry is not a daemon's */
        snprintf(path, sizeof path, "%s/junk.json", d.registry);
        ASSERT_OK(write_file_atomic(path, "{", 1, 0644));
        ic = instance_free(ic);
        config_for(&c, d.state[3]);
        ASSERT_OK(instance_setup(&c, d.registry, &ic, err, sizeof err));
        ASSERT_TRUE(access(path, F_OK) < 0);
}

/* Instance space (the default state directory's, or configured) keeps the
 * names and ranges every host had before instances. */
TEST(instance_default_keeps_todays_settings) {
        _cleanup_(instance_freep) Instance *i = NULL;
        Config c;
        Dirs d;
        char err[2048];

        dirs_make(&d);
        config_for(&c, d.state[0]);
        ASSERT_OK(config_set(&c, "instance", "space", err, sizeof err));
        ASSERT_OK(instance_setup(&c, d.registry, &i, err, sizeof err));
        ASSERT_STREQ(c.cgroup_root, "space");
        ASSERT_STREQ(c.net_table, "space");
        ASSERT_STREQ(c.net_link_prefix, "sp-");
        ASSERT_EQ(c.uid_base, INSTANCE_DEFAULT_UID_BASE);
        ASSERT_STREQ(c.net_pool, INSTANCE_DEFAULT_NET_POOL);
}
