/* SPDX-License-Identifier: MIT */
/* The ns runtime against the real kernel: namespaces, id maps, idmapped
 * root, cgroups, and complete unwinding. Needs root. */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "cgroup-view.h"
#include "cgroup.h"
#include "fd-util.h"
#include "ns-setup.h"
#include "runtime.h"
#include "str-util.h"
#include "test.h"
#include "vm-kvm.h"

static int memfd_of(const char *path) {
        _cleanup_close_ int in = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        int fd;

        if (in < 0 || fstat(in, &st) < 0)
                return -1;
        fd = memfd_create("probe", MFD_CLOEXEC);
        if (fd < 0)
                return -1;
        if (sendfile(fd, in, NULL, (size_t) st.st_size) != st.st_size) {
                close(fd);
                return -1;
        }
        return fd;
}

static void make_root(const char *root) {
        static const char *const dirs[] = { "bin", "etc", "proc", "dev", "sys", "run", "tmp" };
        char p[PATH_MAX];

        ASSERT_OK(mkdir_p(root, 0755));
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                snprintf(p, sizeof p, "%s/%s", root, dirs[i]);
                ASSERT_OK(mkdir_p(p, 0755));
        }
        snprintf(p, sizeof p, "%s/etc/passwd", root);
        ASSERT_OK(write_file_atomic(p, "root:x:0:0::/root:/bin/sh\n", 26, 0644));
}

/* How many of the host's mounted cgroup hierarchies (v1 controllers, the v2
 * tree: whatever this host has) hold space-test/<id>. */
static unsigned cgroup_dirs_of(const char *id) {
        _cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
        char line[4096];
        unsigned n = 0, hierarchies = 0;

        ASSERT_NOT_NULL(f);
        while (fgets(line, sizeof line, f)) {
                char mnt[PATH_MAX], p[PATH_MAX + 64];
                const char *sep = strstr(line, " - ");
                if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
                        continue;
                if (!startswith(sep, " - cgroup ") && !startswith(sep, " - cgroup2 "))
                        continue;
                hierarchies++;
                snprintf(p, sizeof p, "%s/space-test/%s", mnt, id);
                if (access(p, F_OK) == 0)
                        n++;
        }
        ASSERT_TRUE(hierarchies > 0);
        return n;
}

static int query(const char *sock, char *buf, size_t n) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ssize_t k;

        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
        if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0)
                return negative_errno();
        k = loop_read(fd, buf, n - 1);
        if (k < 0)
                return (int) k;
        buf[k] = 0;
        return 0;
}

static void cleanup_cgroup_root(void) {
        (void) cgroup_teardown(); /* every hierarchy the runtime used */
}

TEST(ns_create_destroy) {
        char root[PATH_MAX], sock[PATH_MAX], probe[PATH_MAX], buf[8192];
        _cleanup_strv_free_ char **ids = NULL;
        RuntimeInstance inst = { .pidfd = -1 };
        _cleanup_close_ int exe = -EBADF;
        char err[256] = "";
        siginfo_t si = {};

        if (geteuid() != 0)
                test_skip("needs root");
        snprintf(probe, sizeof probe, "%s/tests/ns-probe", test_build_dir());
        exe = memfd_of(probe);
        ASSERT_TRUE(exe >= 0);
        ASSERT_OK(cgroup_setup("space-test"));

        snprintf(root, sizeof root, "%s/root", test_tmpdir());
        snprintf(sock, sizeof sock, "%s/agent.sock", test_tmpdir());
        make_root(root);

        RuntimeSpec spec = {
                .id = "t1",
                .root_path = root,
                .hostname = "space-t1",
                .uid_base = 1500000000,
                .limits = { .cpu_millis = 500, .memory_bytes = 64 << 20, .pids_max = 64 },
                .agent_socket = sock,
                .agent_exe_fd = exe,
        };
        int r = ns_runtime_ops.create(&spec, &inst, err, sizeof err);
        if (r < 0)
                test_fail(__FILE__, __LINE__, "create: %s (%s)", strerror(-r), err);
        ASSERT_TRUE(inst.pid > 0);
        ASSERT_TRUE(cgroup_contains("t1", inst.pid));

        ASSERT_OK(query(sock, buf, sizeof buf));
        fprintf(stderr, "  probe: %s", buf);
        ASSERT_NOT_NULL(strstr(buf, "pid=1 "));
        ASSERT_NOT_NULL(strstr(buf, "uid=0 "));
        ASSERT_NOT_NULL(strstr(buf, "host=space-t1 "));
        ASSERT_NOT_NULL(strstr(buf, ",0,1500000000,"));
        ASSERT_NOT_NULL(strstr(buf, ",65536,"));
        ASSERT_NOT_NULL(strstr(buf, "fds=0,1,2,3, "));
        ASSERT_NOT_NULL(strstr(buf, "passwd=yes"));
        ASSERT_NOT_NULL(strstr(buf, "devnull=yes"));

        /* adopt finds it again; list shows it */
        int pfd = -1;
        ASSERT_OK(ns_runtime_ops.adopt("t1", inst.pid, inst.starttime, &pfd));
        safe_close(pfd);
        ASSERT_ERRNO(ns_runtime_ops.adopt("t1", inst.pid, inst.starttime + 1, &pfd), ESRCH);
        ASSERT_OK(ns_runtime_ops.list(&ids));
        ASSERT_TRUE(strv_contains(ids, "t1"));

        ASSERT_TRUE(cgroup_dirs_of("t1") > 0); /* the check below sees what it looks for */
        ASSERT_OK(ns_runtime_ops.destroy("t1", sock));
        ASSERT_OK(waitid(P_PIDFD, (id_t) inst.pidfd, &si, WEXITED));
        safe_close(inst.pidfd);
        ASSERT_TRUE(access(sock, F_OK) < 0);
        ASSERT_EQ(cgroup_dirs_of("t1"), 0U);
        cleanup_cgroup_root();
}

TEST(ns_create_failure_unwinds) {
        char root[PATH_MAX], sock[PATH_MAX], err[256] = "";
        RuntimeInstance inst = {};
        _cleanup_close_ int exe = -EBADF;

        if (geteuid() != 0)
                test_skip("needs root");
        exe = open("/bin/true", O_RDONLY | O_CLOEXEC);
        ASSERT_OK(cgroup_setup("space-test"));
        /* a root without proc/dev directories that cannot be created: read-only bind is overkill;
         * use a root path that does not exist */
        snprintf(root, sizeof root, "%s/missing", test_tmpdir());
        snprintf(sock, sizeof sock, "%s/agent.sock", test_tmpdir());
        RuntimeSpec spec = { .id = "t2", .root_path = root, .hostname = "x", .uid_base = 1500065536,
                             .agent_socket = sock, .agent_exe_fd = exe };
        ASSERT_TRUE(ns_runtime_ops.create(&spec, &inst, err, sizeof err) < 0);
        fprintf(stderr, "  error: %s\n", err);
        ASSERT_TRUE(strlen(err) > 0);
        ASSERT_TRUE(access(sock, F_OK) < 0);
        ASSERT_EQ(cgroup_dirs_of("t2"), 0U);
        cleanup_cgroup_root();
}

/* spawn/finish: several guests set themselves up at once; each finish gives
 * the same guest create would. A failed spawn leaves nothing. */
TEST(ns_spawn_several_then_finish) {
        char root[PATH_MAX], missing[PATH_MAX], sock[2][PATH_MAX], probe[PATH_MAX], buf[8192], err[256] = "";
        static const char *const ids[2] = { "t3", "t4" };
        RuntimePending p[2], bad = { .pidfd = -EBADF, .sync_fd = -EBADF };
        _cleanup_close_ int exe = -EBADF;

        if (geteuid() != 0)
                test_skip("needs root");
        snprintf(probe, sizeof probe, "%s/tests/ns-probe", test_build_dir());
        exe = memfd_of(probe);
        ASSERT_TRUE(exe >= 0);
        ASSERT_OK(cgroup_setup("space-test"));
        snprintf(root, sizeof root, "%s/root", test_tmpdir());
        make_root(root);

        for (size_t i = 0; i < 2; i++) {
                char host[32];
                snprintf(sock[i], sizeof sock[i], "%s/agent-%s.sock", test_tmpdir(), ids[i]);
                snprintf(host, sizeof host, "space-%s", ids[i]);
                RuntimeSpec spec = {
                        .id = ids[i],
                        .root_path = root,
                        .hostname = host,
                        .uid_base = 1500000000 + (uid_t) i * RUNTIME_ID_RANGE,
                        .limits = { .pids_max = 64 },
                        .agent_socket = sock[i],
                        .agent_exe_fd = exe,
                };
                int r = ns_runtime_ops.spawn(&spec, &p[i], err, sizeof err);
                if (r < 0)
                        test_fail(__FILE__, __LINE__, "spawn: %s (%s)", strerror(-r), err);
                ASSERT_STREQ(p[i].id, ids[i]);
        }
        /* both are setting themselves up now; a third fails in spawn and unwinds */
        snprintf(missing, sizeof missing, "%s/missing", test_tmpdir());
        char sock5[PATH_MAX];
        snprintf(sock5, sizeof sock5, "%s/agent-t5.sock", test_tmpdir());
        RuntimeSpec spec = { .id = "t5", .root_path = missing, .hostname = "x", .uid_base = 1500131072,
                             .agent_socket = sock5, .agent_exe_fd = exe };
        ASSERT_TRUE(ns_runtime_ops.spawn(&spec, &bad, err, sizeof err) < 0);
        ASSERT_TRUE(access(sock5, F_OK) < 0);
        ASSERT_EQ(cgroup_dirs_of("t5"), 0U);

        for (size_t i = 0; i < 2; i++) {
                RuntimeInstance inst = { .pidfd = -EBADF };
                siginfo_t si = {};
                char want[40];
                int r = ns_runtime_ops.finish(&p[i], &inst, err, sizeof err);

                if (r < 0)
                        test_fail(__FILE__, __LINE__, "finish: %s (%s)", strerror(-r), err);
                ASSERT_TRUE(inst.pid > 0 && inst.starttime > 0);
                ASSERT_TRUE(p[i].pidfd < 0 && p[i].sync_fd < 0); /* handed over */
                ASSERT_TRUE(cgroup_contains(ids[i], inst.pid));
                ASSERT_OK(query(sock[i], buf, sizeof buf));
                snprintf(want, sizeof want, "host=space-%s ", ids[i]);
                ASSERT_NOT_NULL(strstr(buf, want));
                ASSERT_NOT_NULL(strstr(buf, "pid=1 "));
                ASSERT_OK(ns_runtime_ops.destroy(ids[i], sock[i]));
                ASSERT_OK(waitid(P_PIDFD, (id_t) inst.pidfd, &si, WEXITED));
                safe_close(inst.pidfd);
        }
        cleanup_cgroup_root();
}

/* The spawner's way: PID 1 is cloned by a helper process for its parent
 * (clone_parent) before its root exists (root_later), gets the root once it
 * is made, and is finished and reaped by the parent; one whose root never
 * comes is killed by the parent and leaves nothing. */
TEST(ns_spawn_for_parent_root_later) {
        char root[PATH_MAX], sock[2][PATH_MAX], probe[PATH_MAX], buf[8192], err[256] = "";
        static const char *const ids[2] = { "t6", "t7" };
        _cleanup_close_ int exe = -EBADF;
        int sv[2];
        pid_t helper;

        if (geteuid() != 0)
                test_skip("needs root");
        snprintf(probe, sizeof probe, "%s/tests/ns-probe", test_build_dir());
        exe = memfd_of(probe);
        ASSERT_TRUE(exe >= 0);
        ASSERT_OK(cgroup_setup("space-test"));
        snprintf(root, sizeof root, "%s/root-later", test_tmpdir());
        for (size_t i = 0; i < 2; i++)
                snprintf(sock[i], sizeof sock[i], "%s/agent-%s.sock", test_tmpdir(), ids[i]);
        ASSERT_OK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv));

        helper = fork();
        ASSERT_TRUE(helper >= 0);
        if (helper == 0) {
                /* spawns both (the root does not exist yet) and hands over pid, pidfd and sync fd */
                for (size_t i = 0; i < 2; i++) {
                        RuntimePending p = { .pidfd = -EBADF, .sync_fd = -EBADF };
                        RuntimeSpec spec = { .id = ids[i], .root_path = root, .hostname = "space-later",
                                             .uid_base = 1500000000 + (uid_t) i * RUNTIME_ID_RANGE,
                                             .limits = { .pids_max = 64 }, .agent_socket = sock[i],
                                             .agent_exe_fd = exe, .clone_parent = true, .root_later = true };
                        int32_t pid = ns_runtime_ops.spawn(&spec, &p, err, sizeof err) < 0 ? -1 : p.pid;
                        if (write(sv[1], &pid, sizeof pid) != sizeof pid || pid < 0 || send_fd(sv[1], p.pidfd) < 0 ||
                            send_fd(sv[1], p.sync_fd) < 0)
                                _exit(1);
                }
                _exit(0);
        }
        safe_close(sv[1]);
        RuntimePending p[2];
        for (size_t i = 0; i < 2; i++) {
                int32_t pid = 0;
                p[i] = (RuntimePending){ .pidfd = -EBADF, .sync_fd = -EBADF };
                ASSERT_TRUE(read(sv[0], &pid, sizeof pid) == sizeof pid);
                ASSERT_TRUE(pid > 0);
                ASSERT_OK(recv_fd(sv[0], &p[i].pidfd));
                ASSERT_OK(recv_fd(sv[0], &p[i].sync_fd));
                p[i].pid = pid;
                snprintf(p[i].id, sizeof p[i].id, "%s", ids[i]);
                snprintf(p[i].agent_socket, sizeof p[i].agent_socket, "%s", sock[i]);
        }
        safe_close(sv[0]);
        ASSERT_OK(waitid(P_PID, (id_t) helper, &(siginfo_t){}, WEXITED));

        /* now the root exists: the first gets it and runs */
        make_root(root);
        ASSERT_OK(ns_runtime_ops.give_root(&p[0], root, NULL, 0, err, sizeof err));
        RuntimeInstance inst = { .pidfd = -EBADF };
        siginfo_t si = {};
        int r = ns_runtime_ops.finish(&p[0], &inst, err, sizeof err);
        if (r < 0)
                test_fail(__FILE__, __LINE__, "finish: %s (%s)", strerror(-r), err);
        ASSERT_TRUE(cgroup_contains(ids[0], inst.pid));
        ASSERT_OK(query(sock[0], buf, sizeof buf));
        ASSERT_NOT_NULL(strstr(buf, "host=space-later "));
        ASSERT_NOT_NULL(strstr(buf, "pid=1 "));
        ASSERT_OK(ns_runtime_ops.destroy(ids[0], sock[0]));
        ASSERT_OK(waitid(P_PIDFD, (id_t) inst.pidfd, &si, WEXITED)); /* ours to reap: clone_parent */
        safe_close(inst.pidfd);

        /* the second never gets one: killed, reaped by us, nothing left */
        ASSERT_OK((int) syscall(SYS_pidfd_send_signal, p[1].pidfd, SIGKILL, NULL, 0));
        ASSERT_OK(waitid(P_PIDFD, (id_t) p[1].pidfd, &si, WEXITED));
        ASSERT_OK(ns_runtime_ops.destroy(ids[1], sock[1]));
        ASSERT_TRUE(access(sock[1], F_OK) < 0);
        ASSERT_EQ(cgroup_dirs_of("t7"), 0U);
        safe_close(p[1].pidfd);
        safe_close(p[1].sync_fd);
        cleanup_cgroup_root();
}

/* ---- the cgroup view (cgroup-view.h): which hierarchies a sandbox sees, from /proc/self/cgroup ---- */

static const char *const view_used[] = { "memory", "cpu", "pids", "freezer", "blkio", NULL };

TEST(cgroup_view_docker_like_hybrid_host) {
        static const char text[] = "12:rdma:/\n11:cpu,cpuacct:/space\n10:net_cls,net_prio:/\n9:memory:/space\n"
                                   "8:pids:/space\n7:devices:/\n6:name=systemd:/init.scope\n5:freezer:/space\n"
                                   "4:blkio:/space\n3:cpuset:/\n0::/init.scope\n";
        CgroupView v;

        ASSERT_OK(cgroup_view_build(CGROUP_MODE_HYBRID, text, strlen(text), view_used, &v));
        ASSERT_TRUE(v.tmpfs);
        ASSERT_EQ(v.n_mounts, 6);
        ASSERT_STREQ(v.mounts[0].dir, "cpu,cpuacct");
        ASSERT_STREQ(v.mounts[0].type, "cgroup");
        ASSERT_STREQ(v.mounts[0].options, "cpu,cpuacct");
        ASSERT_STREQ(v.mounts[1].dir, "memory");
        ASSERT_STREQ(v.mounts[2].dir, "pids");
        ASSERT_STREQ(v.mounts[3].dir, "freezer");
        ASSERT_STREQ(v.mounts[4].dir, "blkio");
        ASSERT_STREQ(v.mounts[5].dir, "unified");
        ASSERT_STREQ(v.mounts[5].type, "cgroup2");
        ASSERT_STREQ(v.mounts[5].options, "");
        /* cpu and cpuacct lead to the shared directory; nothing of cpuset, devices, systemd, rdma */
        ASSERT_EQ(v.n_links, 2);
        ASSERT_STREQ(v.links[0].name, "cpu");
        ASSERT_STREQ(v.links[0].target, "cpu,cpuacct");
        ASSERT_STREQ(v.links[1].name, "cpuacct");
        ASSERT_STREQ(v.links[1].target, "cpu,cpuacct");
}

TEST(cgroup_view_separate_hierarchies_and_v1_only) {
        static const char text[] = "9:name=systemd:/\n8:pids:/\n4:memory:/a/b:c\n2:cpuacct:/\n1:cpu:/\n";
        CgroupView v;

        ASSERT_OK(cgroup_view_build(CGROUP_MODE_V1, text, strlen(text), view_used, &v));
        ASSERT_TRUE(v.tmpfs);
        ASSERT_EQ(v.n_mounts, 3); /* no unified on a v1-only host */
        ASSERT_STREQ(v.mounts[0].dir, "pids");
        ASSERT_STREQ(v.mounts[1].dir, "memory");
        ASSERT_STREQ(v.mounts[2].dir, "cpu");
        ASSERT_EQ(v.n_links, 0);
        /* no v1 controller used at all: nothing mounted */
        {
                static const char *const none[] = { NULL };
                ASSERT_OK(cgroup_view_build(CGROUP_MODE_V1, text, strlen(text), none, &v));
                ASSERT_EQ(v.n_mounts, 0);
                ASSERT_FALSE(v.tmpfs);
        }
}

TEST(cgroup_view_pure_v2) {
        static const char text[] = "0::/system.slice/spaced.service\n";
        CgroupView v;

        ASSERT_OK(cgroup_view_build(CGROUP_MODE_V2, text, strlen(text), view_used, &v));
        ASSERT_FALSE(v.tmpfs);
        ASSERT_EQ(v.n_mounts, 1);
        ASSERT_STREQ(v.mounts[0].dir, "");
        ASSERT_STREQ(v.mounts[0].type, "cgroup2");
}

TEST(cgroup_view_bad_input) {
        static const char *const bad[] = {
                "x:memory:/\n", ":memory:/\n", "4memory/\n", "4:memory\n", "4:mem ory:/\n", "4:memory,,cpu:/\n",
                "4:,memory:/\n", "4:MEMORY:/\n",
        };
        char big[512];
        CgroupView v;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                ASSERT_ERRNO(cgroup_view_build(CGROUP_MODE_HYBRID, bad[i], strlen(bad[i]), view_used, &v), EBADMSG);
        /* a hierarchy name past the bound */
        memset(big, 0, sizeof big);
        memcpy(big, "4:memory", 8);
        for (size_t i = 8; i < 8 + 2 * CGROUP_VIEW_NAME_MAX; i += 2)
                memcpy(big + i, ",x", 2);
        memcpy(big + 8 + 2 * CGROUP_VIEW_NAME_MAX, ":/\n", 3);
        ASSERT_ERRNO(cgroup_view_build(CGROUP_MODE_HYBRID, big, strlen(big), view_used, &v), E2BIG);
        /* the text is a slice: nothing after n is read */
        ASSERT_OK(cgroup_view_build(CGROUP_MODE_V1, "8:pids:/\nGARBAGE", 9, view_used, &v));
        ASSERT_EQ(v.n_mounts, 1);
}

TEST(cgroup_view_of_this_host) {
        /* the parser reads what this kernel writes */
        ASSERT_OK(cgroup_view_setup(CGROUP_MODE_HYBRID, view_used));
        ASSERT_TRUE(cgroup_view_get()->n_mounts >= 1);
}

/* The child side against the real kernel: each view mounted in a private mount and cgroup
 * namespace of a forked child (nothing reaches the host's mount table), its files there,
 * every mount read-only. */
static int view_child(const char *dir, const CgroupView *v, const char *probe_file, const char *write_file) {
        char p[PATH_MAX];
        int rootfd, r;

        if (unshare(CLONE_NEWNS | CLONE_NEWCGROUP) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return 10;
        if (mount("tmpfs", dir, "tmpfs", 0, "size=64k") < 0)
                return 11;
        snprintf(p, sizeof p, "%s/sys/fs/cgroup", dir);
        if (mkdir_p(p, 0755) < 0)
                return 12;
        rootfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rootfd < 0)
                return 13;
        r = ns_mount_cgroup_view(rootfd, v);
        if (r < 0)
                return 14;
        snprintf(p, sizeof p, "%s/sys/fs/cgroup/%s", dir, probe_file);
        if (access(p, R_OK) < 0)
                return 15;
        snprintf(p, sizeof p, "%s/sys/fs/cgroup/%s", dir, write_file);
        /* a value the kernel refuses anyway (EINVAL), so that a mount that were writable changes nothing */
        r = write_string_file(p, "x");
        if (r != -EROFS) {
                fprintf(stderr, "write %s: %d\n", p, r);
                return 16;
        }
        snprintf(p, sizeof p, "%s/sys/fs/cgroup/escape", dir);
        if (mkdir(p, 0755) == 0 || errno != EROFS)
                return 17;
        return 0;
}

static void assert_view_mounts(const CgroupView *v, const char *probe_file, const char *write_file) {
        char dir[] = "/tmp/space-test-view-XXXXXX";
        int status;
        pid_t pid;

        ASSERT_TRUE(mkdtemp(dir) != NULL);
        pid = fork();
        ASSERT_OK(pid);
        if (pid == 0)
                _exit(view_child(dir, v, probe_file, write_file));
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_OK(rmdir(dir)); /* the child's mounts went with its mount namespace */
        ASSERT_TRUE(WIFEXITED(status));
        ASSERT_EQ(WEXITSTATUS(status), 0);
}

TEST(cgroup_view_mounts_read_only) {
        CgroupView v;

        if (geteuid() != 0)
                test_skip("needs root");
        if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0) {
                ASSERT_OK(cgroup_view_build(CGROUP_MODE_V2, "0::/\n", 5, view_used, &v));
                assert_view_mounts(&v, "cgroup.procs", "cgroup.subtree_control");
                return;
        }
        /* this host's v1 hierarchies as a sandbox sees them, through the symlink where cpu shares one */
        ASSERT_OK(cgroup_view_setup(access("/sys/fs/cgroup/unified", F_OK) == 0 ? CGROUP_MODE_HYBRID : CGROUP_MODE_V1,
                                    view_used));
        v = *cgroup_view_get();
        assert_view_mounts(&v, "memory/memory.limit_in_bytes", "memory/memory.limit_in_bytes");
        assert_view_mounts(&v, "cpu/cpu.cfs_quota_us", "pids/cgroup.procs");
        /* and the v2 branch too, on the unified hierarchy's own mount type */
        ASSERT_OK(cgroup_view_build(CGROUP_MODE_V2, "0::/\n", 5, view_used, &v));
        assert_view_mounts(&v, "cgroup.procs", "cgroup.subtree_control");
}

TEST(vm_kvm_access_follows_the_devices_mode) {
        struct stat st = { .st_mode = S_IFCHR | 0666, .st_gid = 0 };
        gid_t gid = 7;

        /* 0666: any uid opens it, no group kept */
        ASSERT_OK(vm_kvm_access(&st, &gid));
        ASSERT_EQ((long) gid, (long) (gid_t) -1);
        /* 0660 root:kvm: the VMM keeps the kvm group */
        st = (struct stat){ .st_mode = S_IFCHR | 0660, .st_gid = 108 };
        ASSERT_OK(vm_kvm_access(&st, &gid));
        ASSERT_EQ((long) gid, 108L);
        /* 0660 root:root: keeping group root would give more than the device */
        st.st_gid = 0;
        ASSERT_EQ(vm_kvm_access(&st, &gid), -EACCES);
        /* 0600, read-only for others, write-only for the group: none opens it read-write */
        st = (struct stat){ .st_mode = S_IFCHR | 0600, .st_gid = 108 };
        ASSERT_EQ(vm_kvm_access(&st, &gid), -EACCES);
        st.st_mode = S_IFCHR | 0624;
        ASSERT_EQ(vm_kvm_access(&st, &gid), -EACCES);
}
