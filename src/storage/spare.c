/* SPDX-License-Identifier: MIT */
/* Spare roots: writable snapshots of a template made ahead of the creates
 * that take them (btrfs pools). A snapshot commits a transaction (~3 ms);
 * a create that finds a spare renames it into place instead. A spare is made
 * from its template and from nothing else, never held by a sandbox before,
 * and only given for the template subvolume it was made of: a template
 * imported again under its name (a new subvolume) makes its old spares
 * stale, and they go. They live in tmp/, which the pool empties when it
 * opens: a crash leaves none behind. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>

#include "alloc-util.h"
#include "btrfs.h"
#include "fd-util.h"
#include "log.h"
#include "pool-internal.h"
#include "str-util.h"

#define SPARE_PREFIX "spare."

typedef struct Spare {
        char template_name[POOL_TEMPLATE_NAME_MAX + 1];
        uint64_t template_subvolid; /* the subvolume it was made of */
        char name[32];              /* tmp/<name> */
} Spare;

typedef struct Wanted {
        char template_name[POOL_TEMPLATE_NAME_MAX + 1];
        int64_t used;               /* a counter: the least recently used goes first */
} Wanted;

struct PoolSpares {
        pthread_mutex_t lock;
        Spare items[POOL_SPARES_MAX];
        size_t n;
        Wanted wanted[POOL_SPARE_TEMPLATES_MAX];
        size_t n_wanted;
        int64_t uses;
        uint64_t seq;
};

static PoolSpares *spares_get(Pool *p) {
        /* made once, by pool_open() (one thread) */
        return p->spares;
}

int pool_spares_init(Pool *p) {
        PoolSpares *s = new0(PoolSpares, 1);
        if (!s)
                return -ENOMEM;
        pthread_mutex_init(&s->lock, NULL);
        p->spares = s;
        return 0;
}

static int template_subvolid(Pool *p, const char *template_name, int *ret_fd, uint64_t *ret_id) {
        _cleanup_close_ int tpls_fd = pool_open_subdir(p, POOL_TEMPLATES_DIR), fd = -EBADF;
        int r;

        if (tpls_fd < 0)
                return tpls_fd;
        fd = openat(tpls_fd, template_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        r = btrfs_subvol_get_id(fd, ret_id);
        if (r < 0)
                return r;
        if (ret_fd)
                *ret_fd = TAKE_FD(fd);
        return 0;
}

static void spare_remove(Pool *p, int tmp_fd, const char *name) {
        int r = btrfs_subvol_remove(tmp_fd, name);
        if (r < 0)
                log_debug_errno(r, "Failed to remove spare root '%s' (removed at the next open): %m", name);
}

void pool_spare_want(Pool *p, const char *template_name) {
        PoolSpares *s = spares_get(p);
        size_t i, oldest = 0;

        if (!s || p->kind != POOL_BTRFS || !pool_template_name_valid(template_name))
                return;
        pthread_mutex_lock(&s->lock);
        s->uses++;
        for (i = 0; i < s->n_wanted; i++) {
                if (streq(s->wanted[i].template_name, template_name))
                        break;
                if (s->wanted[i].used < s->wanted[oldest].used)
                        oldest = i;
        }
        if (i == s->n_wanted) {
                if (s->n_wanted < POOL_SPARE_TEMPLATES_MAX)
                        i = s->n_wanted++;
                else
                        i = oldest; /* its spares stay until taken or stale */
                (void) strscpy(s->wanted[i].template_name, sizeof s->wanted[i].template_name, template_name);
        }
        s->wanted[i].used = s->uses;
        pthread_mutex_unlock(&s->lock);
}

static size_t count_locked(PoolSpares *s, const char *template_name) {
        size_t n = 0;
        for (size_t i = 0; i < s->n; i++)
                if (!template_name || streq(s->items[i].template_name, template_name))
                        n++;
        return n;
}

unsigned pool_spare_count(Pool *p, const char *template_name) {
        PoolSpares *s = spares_get(p);
        size_t n;

        if (!s)
                return 0;
        pthread_mutex_lock(&s->lock);
        n = count_locked(s, template_name);
        pthread_mutex_unlock(&s->lock);
        return (unsigned) n;
}

/* The wanted template with the fewest spares below per_template, or false. */
static bool next_short(PoolSpares *s, unsigned per_template, char ret[static POOL_TEMPLATE_NAME_MAX + 1]) {
        size_t best = SIZE_MAX, best_n = per_template;

        pthread_mutex_lock(&s->lock);
        if (s->n < POOL_SPARES_MAX)
                for (size_t i = 0; i < s->n_wanted; i++) {
                        size_t n = count_locked(s, s->wanted[i].template_name);
                        if (n < best_n) {
                                best = i;
                                best_n = n;
                        }
                }
        if (best != SIZE_MAX)
                memcpy(ret, s->wanted[best].template_name, POOL_TEMPLATE_NAME_MAX + 1);
        pthread_mutex_unlock(&s->lock);
        return best != SIZE_MAX;
}

static void unwant(PoolSpares *s, const char *template_name) {
        pthread_mutex_lock(&s->lock);
        for (size_t i = 0; i < s->n_wanted; i++)
                if (streq(s->wanted[i].template_name, template_name)) {
                        s->wanted[i] = s->wanted[--s->n_wanted];
                        break;
                }
        pthread_mutex_unlock(&s->lock);
}

/* The spares of a template that is gone: removed (they hold its extents). */
static void drop_template(Pool *p, PoolSpares *s, const char *template_name) {
        _cleanup_close_ int tmp_fd = pool_open_subdir(p, POOL_TMP_DIR);
        Spare items[POOL_SPARES_MAX];
        size_t n = 0;

        pthread_mutex_lock(&s->lock);
        for (size_t i = 0; i < s->n;)
                if (streq(s->items[i].template_name, template_name)) {
                        items[n++] = s->items[i];
                        s->items[i] = s->items[--s->n];
                } else
                        i++;
        pthread_mutex_unlock(&s->lock);
        for (size_t i = 0; i < n && tmp_fd >= 0; i++)
                spare_remove(p, tmp_fd, items[i].name);
}

int pool_spare_make(Pool *p, unsigned per_template) {
        PoolSpares *s = spares_get(p);
        char tpl[POOL_TEMPLATE_NAME_MAX + 1];
        _cleanup_close_ int tpl_fd = -EBADF, tmp_fd = -EBADF;
        Spare sp = {};
        int r;

        r = pool_usable(p);
        if (r < 0)
                return r;
        if (!s || p->kind != POOL_BTRFS || per_template == 0)
                return -EOPNOTSUPP;
        if (!next_short(s, per_template, tpl))
                return 0;
        r = template_subvolid(p, tpl, &tpl_fd, &sp.template_subvolid);
        if (r < 0) {
                unwant(s, tpl); /* removed since: no spares for it */
                drop_template(p, s, tpl);
                return r;
        }
        tmp_fd = pool_open_subdir(p, POOL_TMP_DIR);
        if (tmp_fd < 0)
                return tmp_fd;
        pthread_mutex_lock(&s->lock);
        snprintf(sp.name, sizeof sp.name, SPARE_PREFIX "%" PRIu64, ++s->seq);
        pthread_mutex_unlock(&s->lock);
        memcpy(sp.template_name, tpl, sizeof sp.template_name);
        r = btrfs_subvol_snapshot(tpl_fd, tmp_fd, sp.name, false);
        if (r < 0)
                return r;
        pthread_mutex_lock(&s->lock);
        bool kept = s->n < POOL_SPARES_MAX && !p->released;
        if (kept)
                s->items[s->n++] = sp;
        pthread_mutex_unlock(&s->lock);
        if (!kept)
                spare_remove(p, tmp_fd, sp.name); /* full meanwhile */
        else
                log_debug("Spare root %s of template %s made", sp.name, tpl);
        return 1;
}

int pool_spare_take(Pool *p, const char *template_name, int tpl_fd, int dfd, const char *name) {
        PoolSpares *s = spares_get(p);
        _cleanup_close_ int tmp_fd = -EBADF;
        uint64_t id;
        int r;

        if (!s || p->kind != POOL_BTRFS)
                return -ENOENT;
        pool_spare_want(p, template_name);
        if (pool_spare_count(p, template_name) == 0)
                return -ENOENT;
        r = btrfs_subvol_get_id(tpl_fd, &id);
        if (r < 0)
                return r;
        tmp_fd = pool_open_subdir(p, POOL_TMP_DIR);
        if (tmp_fd < 0)
                return tmp_fd;
        for (;;) {
                Spare sp;
                bool found = false;

                pthread_mutex_lock(&s->lock);
                for (size_t i = 0; i < s->n && !found; i++)
                        if (streq(s->items[i].template_name, template_name)) {
                                sp = s->items[i];
                                s->items[i] = s->items[--s->n];
                                found = true;
                        }
                pthread_mutex_unlock(&s->lock);
                if (!found)
                        return -ENOENT;
                if (sp.template_subvolid != id) {
                        /* made of the template this name had before: never given */
                        spare_remove(p, tmp_fd, sp.name);
                        continue;
                }
                if (renameat2(tmp_fd, sp.name, dfd, name, RENAME_NOREPLACE) < 0) {
                        r = negative_errno();
                        spare_remove(p, tmp_fd, sp.name);
                        return r;
                }
                return 0;
        }
}

void pool_spare_drop_all(Pool *p) {
        PoolSpares *s = spares_get(p);
        _cleanup_close_ int tmp_fd = -EBADF;
        Spare items[POOL_SPARES_MAX];
        size_t n;

        if (!s)
                return;
        pthread_mutex_lock(&s->lock);
        n = s->n;
        memcpy(items, s->items, n * sizeof *items);
        s->n = 0;
        s->n_wanted = 0;
        pthread_mutex_unlock(&s->lock);
        if (n == 0)
                return;
        tmp_fd = pool_open_subdir(p, POOL_TMP_DIR);
        if (tmp_fd < 0)
                return;
        for (size_t i = 0; i < n; i++)
                spare_remove(p, tmp_fd, items[i].name);
}

void pool_spares_free(Pool *p) {
        if (!p->spares)
                return;
        pthread_mutex_destroy(&p->spares->lock);
        p->spares = mfree(p->spares);
}
