/* SPDX-License-Identifier: MIT */
/* vm sandboxes on the host, beyond create/destroy: checkpoints with memory
 * (the disk reflinked and the machine saved at the same moment), restores
 * from them (in place: every process continues from the checkpoint),
 * branches (with memory: one saved machine restored N times, each child on
 * its own disk clone and told its new identity) and creates from base
 * snapshots (a booted idle VM of the template, saved once per template and
 * shape, restored instead of booting).
 *
 * The machine is saved with the runtime's snapshot op: stopped, memory and
 * devices written, disks flushed; the disk copies are reflinked while it is
 * stopped, so disk and memory are of one moment; then it runs on. */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alloc-util.h"
#include "fd-util.h"
#include "log.h"
#include "str-util.h"
#include "worker-internal.h"

#define VM_BRANCH_STATE "branch.state"

static uid_t owner_of(Worker *w, uint64_t slot) {
        return (uid_t) (w->config->uid_base + slot * RUNTIME_ID_RANGE);
}

/* A running guest's dirty file data onto its disk, then the machine stopped:
 * a disk-only copy then holds what its processes wrote. */
static int stop_for_disk_copy(Worker *w, LiveSandbox *l) {
        char sock[PATH_MAX];
        int r;

        if (l->frozen)
                return 0; /* paused: what is on its disk (crash-consistent) */
        if (l->rt->sync && worker_agent_socket(w, l->id, sock, sizeof sock) >= 0) {
                r = l->rt->sync(sock);
                if (r < 0)
                        log_warning_errno(r, "Sandbox %s: its guest did not sync, copying its disk as it is: %m", l->id);
        }
        return l->rt->freeze(l->id, true);
}

/* ---- checkpoints ---- */

typedef struct TakeDisk {
        Pool *pool;
        const char *id, *ck;
} TakeDisk;

static int take_disk(void *ctx) {
        TakeDisk *t = ctx;
        return pool_disk_checkpoint_take_disk(t->pool, t->id, t->ck, false);
}

void worker_vm_op_checkpoint(Worker *w, const char *id, const char *ck, bool with_memory, uint64_t max_mb,
                             JsonWriter *jw) {
        _cleanup_free_ char *dir = NULL, *mem = NULL, *saved = NULL;
        LiveSandbox *l = worker_live_find(w, id);
        TakeDisk t = { .pool = w->pool, .id = id, .ck = ck };
        bool has_saved;
        uint64_t size = 0, held = 0;
        ApiError e = {};
        int r;

        r = pool_sandbox_memory_path(w->pool, id, &saved);
        if (r < 0) {
                api_error(&e, r, API_INTERNAL, "cannot checkpoint %s: %s", id, strerror(-r));
                return worker_reply_error(jw, &e);
        }
        has_saved = access(saved, F_OK) == 0;
        if (with_memory && worker_vm_volumes_refuse_save(w, id, "a checkpoint with its memory", &e) < 0)
                return worker_reply_error(jw, &e);
        if (with_memory && !l && !has_saved) {
                api_error(&e, -ESRCH, API_SANDBOX_NOT_RUNNING,
                          "sandbox %s is not running and has no saved memory: checkpoint it with with_memory false",
                          id);
                return worker_reply_error(jw, &e);
        }
        r = pool_disk_checkpoint_create(w->pool, id, ck, &dir);
        if (r < 0) {
                api_error(&e, r, r == -EEXIST ? API_ALREADY_EXISTS : api_error_code_from_errno(r),
                          "cannot checkpoint %s: %s", id, strerror(-r));
                return worker_reply_error(jw, &e);
        }
        if (l && with_memory) {
                mem = strjoin(dir, "/memory.state");
                r = mem ? l->rt->snapshot(id, mem, l->frozen, take_disk, &t) : -ENOMEM;
        } else if (l) {
                /* the guest stopped for the copy: the disk as it stands (crash-consistent) */
                bool was = l->frozen;
                r = stop_for_disk_copy(w, l);
                if (r >= 0)
                        r = take_disk(&t);
                if (!was)
                        (void) l->rt->freeze(id, false);
        } else /* suspended: its disk, and the machine saved beside it */
                r = pool_disk_checkpoint_take_disk(w->pool, id, ck, with_memory);
        if (r >= 0 && with_memory) {
                /* the CA its processes trust goes with their memory: a restore in place keeps it */
                _cleanup_free_ char *ca = NULL;
                char from[PATH_MAX];
                r = pool_disk_checkpoint_path(w->pool, id, ck, "memory.state" WORKER_CA_SAVED_SUFFIX, &ca);
                if (r >= 0 && l)
                        r = worker_cred_save(w, id, ca);
                else if (r >= 0 && snprintf(from, sizeof from, "%s" WORKER_CA_SAVED_SUFFIX, saved) < (int) sizeof from)
                        r = worker_cred_copy_saved(from, ca);
        }
        if (r < 0) {
                (void) pool_checkpoint_remove(w->pool, id, ck);
                worker_storage_error(w, r, &e, API_INTERNAL, "cannot checkpoint %s%s: %s", id,
                                     with_memory ? " with its memory" : "", strerror(-r));
                return worker_reply_error(jw, &e);
        }
        (void) pool_checkpoint_usage(w->pool, id, ck, &size);
        /* the cap holds after it too: its files are counted as allocated, and the machine's memory is
         * only known once saved (the caller refused already when the cap was reached before it) */
        if (max_mb > 0 && pool_checkpoint_usage_total(w->pool, id, &held) >= 0 && held > max_mb << 20) {
                r = pool_checkpoint_remove(w->pool, id, ck);
                if (r < 0)
                        log_warning_errno(r, "Failed to remove checkpoint %s of %s past its cap: %m", ck, id);
                api_error(&e, -ENOSPC, API_INSUFFICIENT_STORAGE,
                          "with this checkpoint (%" PRIu64 " MiB: its disk%s) the checkpoints of sandbox %s would "
                          "hold %" PRIu64 " MiB, its cap is %" PRIu64 " MiB (checkpoints_mb): delete some first%s",
                          size >> 20, with_memory ? " and memory" : "", id, held >> 20, max_mb,
                          with_memory ? ", or take it with with_memory false" : "");
                return worker_reply_error(jw, &e);
        }
        log_info("Sandbox %s: checkpoint %s taken (%s, %" PRIu64 " MiB)", id, ck,
                 with_memory ? "disk and memory" : "disk", size >> 20);
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_key(jw, "size_bytes");
        json_w_uint(jw, size);
        json_w_kv_bool(jw, "with_memory", with_memory);
        json_w_object_end(jw);
}

/* ---- restore ---- */

void worker_vm_op_restore(Worker *w, WorkerSpec *s, const JsonValue *spec, const char *ck, JsonWriter *jw) {
        _cleanup_free_ char *disk = NULL, *mem = NULL;
        ApiError e = {};
        int64_t pid = 0;
        uint64_t st = 0;
        int r;

        if (pool_disk_checkpoint_has_memory(w->pool, s->id, ck)) {
                r = pool_disk_checkpoint_path(w->pool, s->id, ck, "memory.state", &mem);
                if (r < 0) {
                        api_error(&e, r, API_INTERNAL, "cannot restore %s: %s", s->id, strerror(-r));
                        return worker_reply_error(jw, &e);
                }
        }
        /* the machine that runs now goes; the disk becomes the checkpoint's */
        (void) worker_cleanup_sandbox(w, s->id, false);
        r = pool_sandbox_disk_restore(w->pool, s->id, ck, owner_of(w, s->slot), &disk);
        if (r < 0) {
                api_error(&e, r, api_error_code_from_errno(r), "cannot restore %s to %s: %s", s->id, ck,
                          strerror(-r));
                return worker_reply_error(jw, &e);
        }
        {
                /* a machine saved at suspend (and its CA) belongs to the disk that was replaced */
                _cleanup_free_ char *saved = NULL;
                char ca_saved[PATH_MAX];
                if (pool_sandbox_memory_path(w->pool, s->id, &saved) >= 0) {
                        (void) unlink(saved);
                        if (snprintf(ca_saved, sizeof ca_saved, "%s" WORKER_CA_SAVED_SUFFIX, saved) <
                            (int) sizeof ca_saved)
                                (void) unlink(ca_saved);
                }
        }
        /* read only: the checkpoint stays restorable (and so does the CA saved with it, which the
         * processes of that moment trust); QEMU loads it while the event loop serves others */
        s->restore_path = mem;
        s->restore_checkpoint = true;
        r = worker_start_runtime_deferred(w, s, disk, mem, true, spec, &pid, &st, &e);
        if (r >= 0 && w->reply_deferred)
                return; /* worker-boot.c replies (and boots the disk should that machine not load) */
        if (r < 0 && mem) {
                /* that machine would not run again: the checkpoint's disk, booted (the reply says so) */
                log_warning("Sandbox %s: restoring the memory of checkpoint %s failed (%s); booting its disk", s->id,
                            ck, e.message);
                mem = mfree(mem);
                s->restore_path = NULL;
                s->restore_checkpoint = false;
                e = (ApiError){};
                r = worker_start_runtime_deferred(w, s, disk, NULL, false, spec, &pid, &st, &e);
                if (r >= 0 && w->reply_deferred)
                        return;
        }
        if (r < 0)
                return worker_reply_error(jw, &e);
        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_kv_int(jw, "pid", pid);
        json_w_key(jw, "starttime");
        json_w_uint(jw, st);
        json_w_kv_bool(jw, "processes_preserved", mem != NULL);
        json_w_object_end(jw);
}

/* ---- branch ---- */

typedef struct CloneDisks {
        Worker *w;
        const char *src, *ck;
        WorkerSpec *specs;
        char **disks;
        size_t n, made;
} CloneDisks;

static int clone_disks(void *ctx) {
        CloneDisks *c = ctx;
        for (; c->made < c->n; c->made++) {
                int r = pool_sandbox_disk_branch(c->w->pool, c->src, c->ck, c->specs[c->made].id,
                                                 owner_of(c->w, c->specs[c->made].slot), &c->disks[c->made]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* {"op":"branch","source":ID,"checkpoint":CK?,"with_memory":B,"sandboxes":[spec...]} of a vm source
 * (b: parsed by worker_op_branch). */
void worker_vm_op_branch(Worker *w, WorkerBranch *b, JsonWriter *jw) {
        WorkerSpec *specs = b->specs;
        char *disks[WORKER_BRANCH_MAX] = {};
        _cleanup_free_ char *mem = NULL, *tmp_mem = NULL;
        const char *src = b->source, *ck = b->checkpoint;
        CloneDisks c = { .w = w, .specs = specs, .disks = disks, .src = src, .ck = ck, .n = b->n };
        bool with_memory = b->with_memory;
        size_t n = b->n, started = 0;
        LiveSandbox *l;
        ApiError e = {};
        int r = 0;

        if (with_memory && !ck && worker_vm_volumes_refuse_save(w, src, "a branch with its memory", &e) < 0)
                return worker_reply_error(jw, &e);

        l = ck ? NULL : worker_live_find(w, src);
        if (ck) {
                if (!pool_checkpoint_exists(w->pool, src, ck)) {
                        r = api_error(&e, -ENOENT, API_NOT_FOUND, "no checkpoint %s of sandbox %s here", ck, src);
                        goto finish;
                }
                if (with_memory && !pool_disk_checkpoint_has_memory(w->pool, src, ck)) {
                        r = api_error(&e, -ENODATA, API_INVALID_ARGUMENT,
                                      "checkpoint %s of sandbox %s holds no memory: branch from it with with_memory "
                                      "false", ck, src);
                        goto finish;
                }
                if (with_memory && (r = pool_disk_checkpoint_path(w->pool, src, ck, "memory.state", &mem)) < 0) {
                        api_error(&e, r, API_INTERNAL, "cannot branch %s: %s", src, strerror(-r));
                        goto finish;
                }
                r = clone_disks(&c);
        } else if (l && with_memory) {
                /* the source's machine saved once; every child is restored from it */
                r = pool_sandbox_memory_path(w->pool, src, &tmp_mem);
                if (r >= 0) {
                        char *dot = strrchr(tmp_mem, '/');
                        _cleanup_free_ char *dir = dot ? strndup(tmp_mem, (size_t) (dot - tmp_mem)) : NULL;
                        free(tmp_mem);
                        tmp_mem = dir ? strjoin(dir, "/" VM_BRANCH_STATE) : NULL;
                        r = tmp_mem ? 0 : -ENOMEM;
                }
                if (r >= 0)
                        r = l->rt->snapshot(src, tmp_mem, l->frozen, clone_disks, &c);
                if (r >= 0)
                        mem = strdup(tmp_mem);
        } else if (l) {
                bool was = l->frozen;
                r = stop_for_disk_copy(w, l);
                if (r >= 0)
                        r = clone_disks(&c);
                if (!was)
                        (void) l->rt->freeze(src, false);
        } else {
                /* suspended: its disk, and with memory the machine saved at suspend */
                if (with_memory) {
                        r = pool_sandbox_memory_path(w->pool, src, &mem);
                        if (r >= 0 && access(mem, F_OK) < 0)
                                r = api_error(&e, -ESRCH, API_SANDBOX_NOT_RUNNING,
                                              "sandbox %s is not running and has no saved memory", src);
                }
                if (r >= 0)
                        r = clone_disks(&c);
        }
        if (r < 0) {
                if (e.code == API_OK)
                        api_error(&e, r, r == -ENOENT ? API_NOT_FOUND : api_error_code_from_errno(r),
                                  "cannot branch %s: %s", src, strerror(-r));
                goto finish;
        }

        if (w->current_client) {
                /* the children load the saved machine (or boot) for seconds: the event loop finishes
                 * them (worker-boot.c), the last one replies; every other request is served meanwhile */
                WorkerBootGroup *g = worker_boot_group_new(w, src, specs, n, mem != NULL);
                if (!g) {
                        r = api_error(&e, -ENOMEM, API_INTERNAL, "out of memory");
                        goto finish;
                }
                for (; started < n; started++) {
                        WorkerPending p;
                        specs[started].restore_path = mem;
                        specs[started].new_identity = true;
                        r = worker_spawn_runtime(w, &specs[started], disks[started], &p, &e);
                        if (r < 0)
                                break;
                        (void) worker_boot_defer_child(w, g, started, &p); /* a failure fails the group */
                }
                /* QEMU holds the saved machine open from its spawn on: it can go now */
                if (tmp_mem)
                        (void) unlink(tmp_mem);
                worker_boot_group_release(w, g, started, &e, jw); /* it removes the disks on failure */
                goto done;
        }

        for (; started < n; started++) {
                specs[started].restore_path = mem;
                specs[started].new_identity = true;
                r = worker_start_runtime(w, &specs[started], disks[started], &b->kids[started].pid,
                                         &b->kids[started].starttime, &e);
                if (r < 0)
                        break;
        }

finish:
        if (tmp_mem)
                (void) unlink(tmp_mem); /* every child loaded it (or failed) */
        if (r < 0) {
                for (size_t i = 0; i < n; i++) {
                        b->kids[i].live = i < started;
                        b->kids[i].made = i < c.made;
                }
                worker_branch_undo(w, b->kids, n);
                worker_reply_error(jw, &e);
        } else {
                log_info("Sandbox %s branched into %zu%s", src, n, mem ? " with its memory" : "");
                worker_branch_reply(jw, b->kids, n, mem != NULL);
        }
done:
        for (size_t i = 0; i < WORKER_BRANCH_MAX; i++)
                free(disks[i]);
}

/* ---- create, from a base snapshot when there is one ---- */

static int base_variant(const WorkerSpec *s, char *buf, size_t size) {
        int k = snprintf(buf, size, "m%" PRIu64 "-c%" PRIu64 "-d%" PRIu64, s->memory_mb,
                         (s->cpu_millis + 999) / 1000 ?: 1, s->disk_mb);
        return k < 0 || (size_t) k >= size ? -ENAMETOOLONG : 0;
}

static int base_key(Worker *w, const RuntimeOps *rt, const char *template_name, char *buf, size_t size) {
        char rtkey[POOL_BASE_KEY_MAX / 2], stamp[128];
        int r, k;

        r = rt->base_key(rtkey, sizeof rtkey);
        if (r >= 0)
                r = pool_template_image_stamp(w->pool, template_name, stamp, sizeof stamp);
        if (r < 0)
                return r;
        k = snprintf(buf, size, "%s template=%s/%s\n", rtkey, template_name, stamp);
        return k < 0 || (size_t) k >= size ? -ENAMETOOLONG : 0;
}

typedef struct SaveBase {
        Pool *pool;
        const char *disk, *dir;
} SaveBase;

static int save_base_disk(void *ctx) {
        SaveBase *b = ctx;
        _cleanup_free_ char *dst = strjoin(b->dir, "/disk.img");
        _cleanup_close_ int sfd = -EBADF, dfd = -EBADF;

        if (!dst)
                return -ENOMEM;
        sfd = open(b->disk, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        dfd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (sfd < 0 || dfd < 0)
                return negative_errno();
        return pool_clone_file(sfd, dfd);
}

/* The freshly booted, neutral machine of sandbox id (nothing of the sandbox
 * in its memory yet) is saved as the base snapshot of its template and shape. */
static void base_save(Worker *w, const RuntimeOps *rt, const char *template_name, const char *id, const char *disk,
                      const char *variant) {
        _cleanup_free_ char *dir = NULL, *mem = NULL;
        char key[POOL_BASE_KEY_MAX];
        SaveBase b = { .pool = w->pool, .disk = disk };
        int64_t t0 = now_usec();
        int r;

        r = base_key(w, rt, template_name, key, sizeof key);
        if (r >= 0)
                r = pool_base_begin(w->pool, template_name, variant, &dir);
        if (r < 0) {
                log_warning_errno(r, "Cannot make a base snapshot of template %s: %m", template_name);
                return;
        }
        b.dir = dir;
        mem = strjoin(dir, "/memory.state");
        r = mem ? rt->snapshot(id, mem, false, save_base_disk, &b) : -ENOMEM;
        if (r >= 0)
                r = pool_base_commit(w->pool, template_name, variant, dir, key);
        else
                pool_base_abandon(w->pool, dir);
        if (r < 0)
                log_warning_errno(r, "Cannot save the base snapshot of template %s (%s): %m", template_name, variant);
        else
                log_info("Base snapshot of template %s (%s) saved in %" PRIi64 " ms: creates of this shape restore "
                         "it from now on", template_name, variant, (now_usec() - t0) / 1000);
}

int worker_vm_base_after_boot(Worker *w, const WorkerPending *p, ApiError *e) {
        _cleanup_free_ char *disk = NULL;
        char err[512] = "", sock[PATH_MAX];
        int r;

        if (pool_sandbox_disk_path(w->pool, p->id, &disk) >= 0)
                base_save(w, p->rt, p->base_template, p->id, disk, p->base_variant);
        r = worker_agent_socket(w, p->id, sock, sizeof sock);
        if (r >= 0)
                r = p->rt->identify_deferred(p->id, sock, err, sizeof err);
        if (r < 0)
                return api_error(e, r, API_INTERNAL, "cannot give the new VM its identity: %s",
                                 err[0] ? err : strerror(-r));
        return 0;
}

/* Starts s on disk: as a deferred boot the event loop finishes (a client waits), or at once.
 * spec (may be NULL): the create's, kept to boot cold should a base snapshot's restore fail there. */
static int vm_start(Worker *w, WorkerSpec *s, const JsonValue *spec, const char *disk, const char *base_variant,
                    int64_t *ret_pid, uint64_t *ret_starttime, ApiError *e) {
        WorkerPending p;
        int r;

        r = worker_spawn_runtime(w, s, disk, &p, e);
        if (r < 0)
                return r;
        if (base_variant) {
                p.make_base = true;
                (void) strscpy(p.base_template, sizeof p.base_template, s->template_name);
                (void) strscpy(p.base_variant, sizeof p.base_variant, base_variant);
        }
        if (w->current_client && !p.created) {
                /* a guest boots (or loads its saved machine) for seconds: the event loop finishes it
                 * (worker-boot.c); should a base snapshot not load, or KVM not work (the probe), the
                 * create runs again from its spec */
                if (s->restore_path || p.p.accel_probe)
                        p.retry_spec = worker_json_copy(spec);
                r = worker_boot_defer(w, &p);
                if (r >= 0)
                        return 0;
                p.retry_spec = json_free(p.retry_spec);
                api_error(e, r, API_INTERNAL, "cannot wait for the guest: %s", strerror(-r));
                (void) syscall(SYS_pidfd_send_signal, p.p.pidfd, SIGKILL, NULL, 0);
                (void) worker_finish_runtime(w, &p, ret_pid, ret_starttime, &(ApiError){});
                return r;
        }
        return worker_finish_runtime(w, &p, ret_pid, ret_starttime, e);
}

int worker_vm_create(Worker *w, const RuntimeOps *rt, WorkerSpec *s, const JsonValue *spec, int64_t *ret_pid,
                     uint64_t *ret_starttime, ApiError *e) {
        _cleanup_free_ char *disk = NULL, *base = NULL, *base_disk = NULL, *base_mem = NULL;
        char variant[POOL_BASE_VARIANT_MAX + 1], key[POOL_BASE_KEY_MAX];
        uid_t owner = owner_of(w, s->slot);
        bool use_base = w->config->vm_base_snapshots && rt->base_key && rt->snapshot && rt->identify_deferred &&
                        base_variant(s, variant, sizeof variant) >= 0 &&
                        !worker_sandbox_has_volumes(w, s->id); /* its machine cannot be saved (virtiofs) */
        RuntimeAccelProbe accel = rt->accel_probe_state ? rt->accel_probe_state() : RUNTIME_ACCEL_DECIDED;
        int r;

        /* another boot probes KVM: this create waits for the verdict (the event loop serves others) */
        if (accel == RUNTIME_ACCEL_PROBING && w->current_client && spec) {
                r = worker_boot_wait_probe(w, s->id, spec);
                if (r < 0)
                        return api_error(e, r, API_INTERNAL, "cannot wait for the KVM probe: %s", strerror(-r));
                return 0;
        }
        /* a base snapshot is of one accelerator: none is looked up before the choice is made (this
         * boot is the probe, and saves one of the accelerator chosen) */
        if (accel != RUNTIME_ACCEL_DECIDED)
                s->cold_boot = true;

        /* cold_boot: its base snapshot would not load; this boot saves a new one */
        if (use_base && !s->cold_boot && base_key(w, rt, s->template_name, key, sizeof key) >= 0 &&
            pool_base_lookup(w->pool, s->template_name, variant, key, &base) >= 0) {
                base_disk = strjoin(base, "/disk.img");
                base_mem = strjoin(base, "/memory.state");
                if (!base_disk || !base_mem)
                        return api_error(e, -ENOMEM, API_INTERNAL, "out of memory");
                r = pool_sandbox_disk_clone(w->pool, base_disk, s->id, owner, &disk);
                if (r < 0)
                        return api_error(e, r, api_error_code_from_errno(r), "cannot create the root disk: %s",
                                         strerror(-r));
                s->restore_path = base_mem; /* read while it starts; told its identity once it answers */
                s->new_identity = true;
                r = vm_start(w, s, spec, disk, NULL, ret_pid, ret_starttime, e);
                s->restore_path = NULL;
                s->new_identity = false;
                if (r >= 0) {
                        log_info("Sandbox %s restored from the base snapshot of template %s (%s)", s->id,
                                 s->template_name, variant);
                        return 0;
                }
                /* it would not run: it goes, and this create boots (and saves a new one) */
                log_warning("Sandbox %s: the base snapshot of template %s (%s) would not restore (%s); booting",
                            s->id, s->template_name, variant, e->message);
                (void) pool_sandbox_remove(w->pool, s->id);
                (void) pool_base_remove(w->pool, s->template_name);
                disk = mfree(disk);
                *e = (ApiError){};
        }

        {
                /* the template's image, made on its first vm create: its files may not fit ext4 */
                _cleanup_free_ char *image = NULL;
                char why[256] = "";
                r = pool_template_image_why(w->pool, s->template_name, why, sizeof why, &image);
                if (r == -EMEDIUMTYPE)
                        return api_error(e, r, API_INVALID_ARGUMENT,
                                         "template '%s' cannot be made into a vm disk image (ext4): %s; "
                                         "use it with the ns runtime, or change its files",
                                         s->template_name, why[0] ? why : "mkfs.ext4 refused its files");
                if (r == -ENOSPC)
                        return api_error(e, r, API_INSUFFICIENT_STORAGE,
                                         "no room in the pool for the disk image of template '%s'", s->template_name);
                if (r < 0)
                        return api_error(e, r, API_INTERNAL, "cannot make the disk image of template '%s': %s%s%s",
                                         s->template_name, strerror(-r), why[0] ? ": " : "", why);
        }
        r = pool_sandbox_disk_create(w->pool, s->template_name, s->id, s->disk_mb, owner, &disk);
        if (r < 0)
                return api_error(e, r, r == -EIO ? API_INTERNAL : api_error_code_from_errno(r),
                                 "cannot create the root disk: %s%s", strerror(-r),
                                 r == -EIO ? " (growing it to disk_mb failed)" : "");
        /* without a base snapshot of this shape: boot neutral, save it, then become this sandbox */
        s->neutral = use_base;
        r = vm_start(w, s, spec, disk, use_base ? variant : NULL, ret_pid, ret_starttime, e);
        if (r == -EAGAIN) { /* waited for here (no client to defer to): the probe failed, TCG now */
                *e = (ApiError){};
                r = vm_start(w, s, spec, disk, use_base ? variant : NULL, ret_pid, ret_starttime, e);
        }
        s->neutral = false;
        if (r < 0)
                (void) pool_sandbox_remove(w->pool, s->id);
        return r;
}

int worker_vm_create_cold(Worker *w, const JsonValue *spec, int64_t *ret_pid, uint64_t *ret_starttime, ApiError *e) {
        _cleanup_(worker_spec_done) WorkerSpec s = {};
        int r;

        r = worker_spec_parse(w, spec, &s, e);
        if (r < 0)
                return r;
        const RuntimeOps *vm = worker_runtime(w, "vm", e);
        if (!vm)
                return -EOPNOTSUPP;
        (void) pool_base_remove(w->pool, s.template_name);
        s.cold_boot = true;
        return worker_vm_create(w, vm, &s, NULL, ret_pid, ret_starttime, e);
}
