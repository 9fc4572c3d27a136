/* SPDX-License-Identifier: MIT */
/* space-agent as /init of a microVM (the vm runtime): the initramfs holds
 * the agent, the guest kernel's virtio modules (/modules/order) and the
 * sandbox's settings (/config); the agent loads the modules, mounts the
 * sandbox's disk (/dev/vda, ext4) and makes it the root, mounts the API file
 * systems, sets the hostname and environment, brings up lo and eth0 (the
 * sandbox's /31 and default route via the host end of its tap, the gateway;
 * /etc/resolv.conf names it), and serves the usual agent socket inside the
 * guest. A thread of PID 1 (so nothing inside
 * the guest can kill it) multiplexes the host's connections over the
 * virtio-serial port named "space.agent" onto that socket (vmux.h). */
#include <arpa/inet.h>
#include <net/if_arp.h>
#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "fd-util.h"
#include "log.h"
#include "str-util.h"
#include "vmux.h"

#define AGENT_VM_CONFIG "/config"
#define AGENT_VM_CONFIG_MAX (256U * 1024U)
#define AGENT_VM_MODULES "/modules"
#define AGENT_VM_PORT_NAME "space.agent"
#define AGENT_VM_DEVICE_WAIT_MSEC 20000U
#define AGENT_VM_SOCKET_DIR "/run/space-agent"
#define AGENT_VM_SOCKET AGENT_VM_SOCKET_DIR "/agent.sock"
#define AGENT_VM_NEWROOT "/newroot"

#define AGENT_VM_NET_DEVICE "eth0"
#define AGENT_VM_MAC_STRING_LEN 17U /* "52:54:00:0a:0b:0c" */
#define AGENT_VM_RESOLV_MAX 4096U
#define AGENT_VM_VOLUMES_MAX 16U

static int agent_vm_port_fd = -EBADF;
/* from /config: the guest's address and gateway (no N record: no network), resolv.conf */
static struct in_addr agent_vm_net_addr, agent_vm_net_gateway;
static bool agent_vm_net;
static char *agent_vm_resolv;
/* from /config: volumes ("<index> <rw|ro> <path>"), mounted once the root is */
static char *agent_vm_volumes[AGENT_VM_VOLUMES_MAX];
static size_t agent_vm_n_volumes;

bool agent_vm_is_init(const char *argv0) {
        return getpid() == 1 && argv0 && streq(argv0, "/init") && access(AGENT_VM_MODULES "/order", F_OK) == 0;
}

static void agent_vm_sleep_msec(unsigned ms) {
        struct timespec ts = { .tv_sec = ms / 1000U, .tv_nsec = (long) (ms % 1000U) * 1000000L };
        (void) nanosleep(&ts, NULL);
}

static int agent_vm_load_modules(void) {
        _cleanup_free_ char *order = NULL;
        char *save = NULL;

        if (read_full_file(AGENT_VM_MODULES "/order", 64 * 1024, &order, NULL) < 0)
                return 0;
        for (char *m = strtok_r(order, "\n", &save); m; m = strtok_r(NULL, "\n", &save)) {
                char path[256];
                _cleanup_close_ int fd = -EBADF;
                if (strchr(m, '/'))
                        continue;
                snprintf(path, sizeof path, "%s/%s", AGENT_VM_MODULES, m);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                if (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST)
                        log_warning_errno(errno, "Cannot load module %s: %m", m);
        }
        return 0;
}

/* /dev/vportNpM of the port named AGENT_VM_PORT_NAME, once the driver shows it. */
static int agent_vm_find_port(char *buf, size_t n) {
        for (unsigned waited = 0; waited < AGENT_VM_DEVICE_WAIT_MSEC; waited += 10) {
                _cleanup_(closedirp_) DIR *d = opendir("/sys/class/virtio-ports");
                struct dirent *de;
                while (d && (de = readdir(d))) {
                        char p[512];
                        _cleanup_free_ char *name = NULL;
                        if (de->d_name[0] == '.')
                                continue;
                        snprintf(p, sizeof p, "/sys/class/virtio-ports/%s/name", de->d_name);
                        if (read_full_file(p, 256, &name, NULL) < 0)
                                continue;
                        name[strcspn(name, "\n")] = 0;
                        if (streq(name, AGENT_VM_PORT_NAME)) {
                                snprintf(buf, n, "/dev/%s", de->d_name);
                                if (access(buf, F_OK) == 0)
                                        return 0;
                        }
                }
                agent_vm_sleep_msec(10);
        }
        return -ENODEV;
}

static int agent_vm_wait_for(const char *path) {
        for (unsigned waited = 0; waited < AGENT_VM_DEVICE_WAIT_MSEC; waited += 10) {
                if (access(path, F_OK) == 0)
                        return 0;
                agent_vm_sleep_msec(10);
        }
        return -ENODEV;
}

static int agent_vm_mount(const char *src, const char *dst, const char *type, unsigned long flags, const char *data) {
        (void) mkdir(dst, 0755);
        if (mount(src, dst, type, flags, data) < 0)
                return log_error_errno(errno, "Cannot mount %s on %s: %m", type ?: src, dst);
        return 0;
}

/* "a.b.c.d e.f.g.h": the guest's address and its gateway. */
static int agent_vm_parse_net(const char *s, size_t n) {
        char a[INET_ADDRSTRLEN], g[INET_ADDRSTRLEN];
        const char *sp = memchr(s, ' ', n);

        if (!sp || (size_t) (sp - s) >= sizeof a || n - (size_t) (sp - s) - 1 >= sizeof g)
                return -EINVAL;
        memcpy(a, s, (size_t) (sp - s));
        a[sp - s] = 0;
        memcpy(g, sp + 1, n - (size_t) (sp - s) - 1);
        g[n - (size_t) (sp - s) - 1] = 0;
        if (inet_pton(AF_INET, a, &agent_vm_net_addr) != 1 || inet_pton(AF_INET, g, &agent_vm_net_gateway) != 1)
                return -EINVAL;
        agent_vm_net = true;
        return 0;
}

/* /config: NUL-terminated records, "H<hostname>", "E<KEY=VALUE>", "N<address> <gateway>", "R<resolv.conf>". */
static int agent_vm_apply_config(void) {
        _cleanup_free_ char *cfg = NULL;
        size_t n = 0;
        int r;

        r = read_full_file(AGENT_VM_CONFIG, AGENT_VM_CONFIG_MAX, &cfg, &n);
        if (r < 0)
                return log_error_errno(r, "Cannot read %s: %m", AGENT_VM_CONFIG);
        (void) clearenv();
        (void) setenv("PATH", AGENT_DEFAULT_PATH, 1);
        for (size_t i = 0; i < n;) {
                const char *rec = cfg + i;
                size_t l = strnlen(rec, n - i);
                if (l > 1 && rec[0] == 'H')
                {
                        if (sethostname(rec + 1, MIN(l - 1, (size_t) 64)) < 0)
                                log_warning_errno(errno, "Cannot set the hostname: %m");
                }
                else if (l > 1 && rec[0] == 'E' && strchr(rec + 1, '=') && rec[1] != '=') {
                        _cleanup_free_ char *k = strndup(rec + 1, (size_t) (strchr(rec + 1, '=') - rec - 1));
                        if (k)
                                (void) setenv(k, strchr(rec + 1, '=') + 1, 1);
                } else if (l > 1 && rec[0] == 'N') {
                        if (agent_vm_parse_net(rec + 1, l - 1) < 0)
                                log_warning("Ignoring a malformed network record in %s", AGENT_VM_CONFIG);
                } else if (l > 1 && rec[0] == 'V' && agent_vm_n_volumes < AGENT_VM_VOLUMES_MAX) {
                        agent_vm_volumes[agent_vm_n_volumes] = strndup(rec + 1, l - 1);
                        if (agent_vm_volumes[agent_vm_n_volumes])
                                agent_vm_n_volumes++;
                } else if (l > 1 && rec[0] == 'R' && l - 1 <= AGENT_VM_RESOLV_MAX) {
                        free(agent_vm_resolv);
                        agent_vm_resolv = strndup(rec + 1, l - 1);
                }
                i += l + 1;
        }
        return 0;
}

/* Each volume: virtiofs tag space<index> on its path (made if missing), nosuid, nodev, and
 * read-only when the host says so (its virtiofsd serves a read-only mount then too). */
static int agent_vm_mount_volumes(void) {
        for (size_t i = 0; i < agent_vm_n_volumes; i++) {
                char *rec = agent_vm_volumes[i], tag[32], *path, *sep;
                unsigned idx;
                bool ro;
                int r = 0;

                if (sscanf(rec, "%u", &idx) != 1 || !(sep = strchr(rec, ' ')) || strlen(sep) < 5 ||
                    (!strneq(sep + 1, "ro ", 3) && !strneq(sep + 1, "rw ", 3)) || sep[4] != '/')
                        return log_error_errno(EINVAL, "Malformed volume record in %s", AGENT_VM_CONFIG);
                ro = strneq(sep + 1, "ro", 2);
                path = sep + 4;
                snprintf(tag, sizeof tag, "space%u", idx);
                /* the directories on the way, one at a time */
                for (char *p = path + 1;; p++)
                        if (*p == '/' || *p == 0) {
                                char c = *p;
                                *p = 0;
                                if (mkdir(path, 0755) < 0 && errno != EEXIST)
                                        r = -errno;
                                *p = c;
                                if (r < 0 || c == 0)
                                        break;
                        }
                if (r < 0)
                        return log_error_errno(-r, "Cannot create %s for a volume: %m", path);
                if (mount(tag, path, "virtiofs", MS_NOSUID | MS_NODEV | (ro ? MS_RDONLY : 0), NULL) < 0)
                        return log_error_errno(errno, "Cannot mount the volume %s on %s: %m", tag, path);
                agent_vm_volumes[i] = mfree(agent_vm_volumes[i]);
        }
        agent_vm_n_volumes = 0;
        return 0;
}

static void agent_vm_loopback_up(void) {
        struct ifreq ifr = {};
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return;
        (void) strscpy(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                return;
        ifr.ifr_flags |= IFF_UP;
        (void) ioctl(fd, SIOCSIFFLAGS, &ifr);
}

static void agent_vm_sin(struct sockaddr *sa, struct in_addr a) {
        struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr = a };
        memcpy(sa, &sin, sizeof sin);
}

/* eth0: the address of the /31, up, the default route via the gateway
 * (ioctls: the agent has no netlink client, and these are all it needs). */
static int agent_vm_net_up(void) {
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr = {};
        struct rtentry rt = {};
        char dev[] = AGENT_VM_NET_DEVICE;

        if (fd < 0)
                return -errno;
        if (agent_vm_wait_for("/sys/class/net/" AGENT_VM_NET_DEVICE) < 0)
                return -ENODEV;
        (void) strscpy(ifr.ifr_name, sizeof ifr.ifr_name, AGENT_VM_NET_DEVICE);
        agent_vm_sin(&ifr.ifr_addr, agent_vm_net_addr);
        if (ioctl(fd, SIOCSIFADDR, &ifr) < 0)
                return -errno;
        agent_vm_sin(&ifr.ifr_netmask, (struct in_addr){ .s_addr = htonl(0xfffffffeU) }); /* /31 */
        if (ioctl(fd, SIOCSIFNETMASK, &ifr) < 0)
                return -errno;
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                return -errno;
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                return -errno;
        agent_vm_sin(&rt.rt_dst, (struct in_addr){ .s_addr = INADDR_ANY });
        agent_vm_sin(&rt.rt_genmask, (struct in_addr){ .s_addr = INADDR_ANY });
        agent_vm_sin(&rt.rt_gateway, agent_vm_net_gateway);
        rt.rt_flags = RTF_UP | RTF_GATEWAY;
        rt.rt_dev = dev;
        {
                /* a restored guest's old default route (another gateway) goes first */
                struct rtentry old = {};
                agent_vm_sin(&old.rt_dst, (struct in_addr){ .s_addr = INADDR_ANY });
                agent_vm_sin(&old.rt_genmask, (struct in_addr){ .s_addr = INADDR_ANY });
                old.rt_dev = dev;
                while (ioctl(fd, SIOCDELRT, &old) >= 0)
                        ;
        }
        if (ioctl(fd, SIOCADDRT, &rt) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

static int agent_vm_hex(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -EINVAL;
}

/* "52:54:00:0a:0b:0c" → 6 bytes: exactly that form, a unicast address, not all zero. */
static int agent_vm_parse_mac(const char *s, uint8_t ret[static 6]) {
        uint8_t m[6];

        if (strlen(s) != AGENT_VM_MAC_STRING_LEN)
                return -EINVAL;
        for (size_t i = 0; i < 6; i++) {
                const char *p = s + i * 3;
                int hi = agent_vm_hex(p[0]), lo = agent_vm_hex(p[1]);
                if (hi < 0 || lo < 0 || (i < 5 && p[2] != ':'))
                        return -EINVAL;
                m[i] = (uint8_t) (hi << 4 | lo);
        }
        if ((m[0] & 1) || (m[0] | m[1] | m[2] | m[3] | m[4] | m[5]) == 0)
                return -EINVAL;
        memcpy(ret, m, 6);
        return 0;
}

/* eth0 takes the sandbox's own MAC: a restored guest woke up with the one of
 * the machine it was saved from (a branch's parent, a base snapshot). The
 * virtio NIC tells the VMM (its control queue), so both ends agree. A device
 * that cannot change it while up is taken down for it (agent_vm_net_up
 * brings it up again and puts its route back). */
static int agent_vm_net_set_mac(const uint8_t mac[static 6]) {
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr = {};

        if (fd < 0)
                return -errno;
        if (agent_vm_wait_for("/sys/class/net/" AGENT_VM_NET_DEVICE) < 0)
                return -ENODEV;
        (void) strscpy(ifr.ifr_name, sizeof ifr.ifr_name, AGENT_VM_NET_DEVICE);
        if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0)
                return -errno;
        if (memcmp(ifr.ifr_hwaddr.sa_data, mac, 6) == 0)
                return 0;
        ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
        memcpy(ifr.ifr_hwaddr.sa_data, mac, 6);
        if (ioctl(fd, SIOCSIFHWADDR, &ifr) >= 0)
                return 0;
        if (errno != EBUSY)
                return -errno;
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                return -errno;
        ifr.ifr_flags &= ~IFF_UP;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                return -errno;
        ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
        memcpy(ifr.ifr_hwaddr.sa_data, mac, 6);
        if (ioctl(fd, SIOCSIFHWADDR, &ifr) < 0)
                return -errno;
        return 0;
}

int agent_vm_net_configure(const char *address, const char *gateway, const char *mac) {
        struct in_addr a, g;
        uint8_t m[6];
        int r;

        if (inet_pton(AF_INET, address, &a) != 1 || inet_pton(AF_INET, gateway, &g) != 1)
                return -EINVAL;
        if (mac && agent_vm_parse_mac(mac, m) < 0)
                return -EINVAL;
        if (mac) {
                r = agent_vm_net_set_mac(m);
                if (r < 0)
                        return r;
        }
        agent_vm_net_addr = a;
        agent_vm_net_gateway = g;
        agent_vm_net = true;
        return agent_vm_net_up();
}

/* /etc/resolv.conf of the root disk (a symlink there is replaced, not followed). */
int agent_vm_write_resolv(const char *text) {
        _cleanup_close_ int fd = -EBADF;

        (void) mkdir("/etc", 0755);
        if (unlink("/etc/resolv.conf") < 0 && errno != ENOENT)
                return -errno;
        fd = open("/etc/resolv.conf", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        return loop_write(fd, text, strlen(text));
}

int agent_vm_boot(const char **ret_listen_path) {
        char port[128];
        int r;

        (void) umask(022);
        if (agent_vm_mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755") < 0 ||
            agent_vm_mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 ||
            agent_vm_mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                return -EIO;
        /* the console: where log lines of PID 1 go (the host keeps it as the VM's log) */
        {
                int fd = open("/dev/console", O_WRONLY | O_NOCTTY | O_CLOEXEC);
                if (fd >= 0) {
                        (void) dup2(fd, STDOUT_FILENO);
                        (void) dup2(fd, STDERR_FILENO);
                        safe_close(fd);
                }
        }
        (void) agent_vm_load_modules();
        r = agent_vm_apply_config();
        if (r < 0)
                return r;

        r = agent_vm_find_port(port, sizeof port);
        if (r < 0)
                return log_error_errno(r, "No virtio-serial port named %s: %m", AGENT_VM_PORT_NAME);
        agent_vm_port_fd = open(port, O_RDWR | O_CLOEXEC | O_NOCTTY);
        if (agent_vm_port_fd < 0)
                return log_error_errno(errno, "Cannot open %s: %m", port);

        r = agent_vm_wait_for("/dev/vda");
        if (r < 0)
                return log_error_errno(r, "No root disk /dev/vda: %m");
        if (agent_vm_mount("/dev/vda", AGENT_VM_NEWROOT, "ext4", MS_NOATIME, NULL) < 0)
                return -EIO;
        /* switch root: the API file systems move along, the initramfs stays below, unreachable */
        (void) mkdir(AGENT_VM_NEWROOT "/dev", 0755);
        (void) mkdir(AGENT_VM_NEWROOT "/proc", 0555);
        (void) mkdir(AGENT_VM_NEWROOT "/sys", 0555);
        if (mount("/dev", AGENT_VM_NEWROOT "/dev", NULL, MS_MOVE, NULL) < 0 ||
            mount("/proc", AGENT_VM_NEWROOT "/proc", NULL, MS_MOVE, NULL) < 0 ||
            mount("/sys", AGENT_VM_NEWROOT "/sys", NULL, MS_MOVE, NULL) < 0)
                return log_error_errno(errno, "Cannot move the API file systems: %m");
        if (chdir(AGENT_VM_NEWROOT) < 0 || mount(".", "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0 ||
            chdir("/") < 0)
                return log_error_errno(errno, "Cannot switch to the root disk: %m");

        (void) agent_vm_mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "gid=5,mode=620,ptmxmode=666");
        (void) agent_vm_mount("shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
        (void) agent_vm_mount("run", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
        (void) mkdir("/tmp", 01777);
        r = agent_vm_mount_volumes();
        if (r < 0)
                return r;
        if (mkdir(AGENT_VM_SOCKET_DIR, 0700) < 0 && errno != EEXIST)
                return log_error_errno(errno, "Cannot create %s: %m", AGENT_VM_SOCKET_DIR);
        agent_vm_loopback_up();
        if (agent_vm_net) {
                r = agent_vm_net_up();
                if (r < 0)
                        log_error_errno(r, "Cannot configure %s: %m (the sandbox has no network)", AGENT_VM_NET_DEVICE);
        }
        if (agent_vm_resolv) {
                r = agent_vm_write_resolv(agent_vm_resolv);
                if (r < 0)
                        log_warning_errno(r, "Cannot write /etc/resolv.conf: %m");
                agent_vm_resolv = mfree(agent_vm_resolv);
        }
        *ret_listen_path = AGENT_VM_SOCKET;
        return 0;
}

static void *agent_vm_mux_thread(void *arg) {
        sigset_t all;
        (void) arg;

        sigfillset(&all);
        (void) pthread_sigmask(SIG_BLOCK, &all, NULL);
        for (;;) {
                VmuxConfig cfg = {
                        .role = VMUX_ROLE_GUEST,
                        .link_fd = fcntl(agent_vm_port_fd, F_DUPFD_CLOEXEC, 3),
                        .listen_fd = -1,
                        .connect_path = AGENT_VM_SOCKET,
                        .ready_fd = -1,
                };
                int r;
                if (cfg.link_fd < 0)
                        return NULL;
                r = vmux_run(&cfg);
                /* the host went away or broke the protocol: start over with a HELLO */
                log_warning_errno(r, "agent channel ended (%m), starting again");
                agent_vm_sleep_msec(100);
        }
        return NULL;
}

int agent_vm_start_mux(void) {
        pthread_t t;
        int r;

        r = pthread_create(&t, NULL, agent_vm_mux_thread, NULL);
        if (r != 0)
                return log_error_errno(r, "Cannot start the agent channel: %m");
        (void) pthread_detach(t);
        return 0;
}
