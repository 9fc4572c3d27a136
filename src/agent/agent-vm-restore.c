/* SPDX-License-Identifier: MIT */
/* RESTORED: the host sends it right after it restored a microVM from saved
 * memory (resume from suspend, restore of a checkpoint with memory, each
 * child of a branch with memory, a create from a base snapshot). Every such
 * guest woke up with the RNG state, clock and identity of the moment it was
 * saved, so the agent, before the host lets anyone in:
 *   - mixes the host's random bytes into the kernel's pool and forces a
 *     reseed of the CRNG (RNDADDENTROPY, RNDRESEEDCRNG): two children of one
 *     image never produce the same random numbers;
 *   - steps the clock to the host's time (clock_settime): a machine saved an
 *     hour ago does not run an hour late;
 *   - takes the sandbox's hostname, machine-id (/etc/machine-id, only when
 *     the host sends one: a new sandbox) and environment (what later
 *     processes inherit; the environment a base snapshot was booted with is
 *     empty).
 * Payload: {"entropy":"<base64, 16..512 bytes>", "time_ns":N,
 *           "hostname":"...", "machine_id":"<32 hex>"?, "env":{"K":"V",...}?,
 *           "net":{"address":"a.b.c.d","gateway":"a.b.c.e","mac":"52:54:00:.."?}?,
 *           "resolv_conf":"..."?}
 * (net: eth0 gets the sandbox's own MAC, /31 and default route again.)
 * Only PID 1 of a microVM serves it; elsewhere it is refused (EOPNOTSUPP). */
#include <fcntl.h>
#include <linux/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "alloc-util.h"
#include "base64.h"
#include "fd-util.h"
#include "log.h"
#include "str-util.h"

#define AGENT_RESTORE_ENTROPY_MIN 16U
#define AGENT_RESTORE_ENTROPY_MAX 512U
#define AGENT_RESTORE_HOSTNAME_MAX 64U
#define AGENT_RESTORE_MACHINE_ID_LEN 32U
#define AGENT_RESTORE_ENV_MAX 4096U
#define AGENT_MACHINE_ID_PATH "/etc/machine-id"
#define AGENT_RESTORE_RESOLV_MAX 4096U

static int restore_entropy(const void *bytes, size_t n) {
        _cleanup_free_ struct rand_pool_info *info = NULL;
        _cleanup_close_ int fd = -EBADF;

        info = malloc(sizeof *info + n);
        if (!info)
                return -ENOMEM;
        info->entropy_count = (int) (n * 8);
        info->buf_size = (int) n;
        memcpy(info->buf, bytes, n);
        fd = open("/dev/urandom", O_RDWR | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        if (ioctl(fd, RNDADDENTROPY, info) < 0)
                return negative_errno();
        /* the per-CPU generators take the new key on their next use */
        if (ioctl(fd, RNDRESEEDCRNG) < 0)
                return negative_errno();
        return 0;
}

static bool hostname_ok(const char *s, size_t n) {
        if (n == 0 || n > AGENT_RESTORE_HOSTNAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
                      s[i] == '-' || s[i] == '.'))
                        return false;
        return true;
}

static bool machine_id_ok(const char *s, size_t n) {
        if (n != AGENT_RESTORE_MACHINE_ID_LEN)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

/* /etc/machine-id by a temporary file and a rename: never half written. */
static int restore_machine_id(const char *id) {
        char line[AGENT_RESTORE_MACHINE_ID_LEN + 2];
        const char *tmp = AGENT_MACHINE_ID_PATH ".space-new";
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (stat("/etc", &st) < 0 || !S_ISDIR(st.st_mode))
                return 0; /* a root without /etc has nowhere to keep it */
        snprintf(line, sizeof line, "%s\n", id);
        (void) unlink(tmp);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
        if (fd < 0)
                return negative_errno();
        if (loop_write(fd, line, strlen(line)) < 0 || fsync(fd) < 0 || rename(tmp, AGENT_MACHINE_ID_PATH) < 0) {
                int r = negative_errno();
                (void) unlink(tmp);
                return r;
        }
        return 0;
}

/* Checked whole before anything changes, so a bad request changes nothing. */
static int restore_check_env(const JsonValue *env) {
        if (!env || json_is_null(env))
                return 0;
        if (json_type(env) != JSON_OBJECT || json_object_size(env) > AGENT_RESTORE_ENV_MAX)
                return -EINVAL;
        for (size_t i = 0; i < json_object_size(env); i++) {
                const char *k = json_object_key(env, i);
                const JsonValue *v = json_object_value(env, i);
                if (isempty(k) || strchr(k, '=') || json_type(v) != JSON_STRING ||
                    strlen(json_string(v)) != json_string_len(v))
                        return -EINVAL;
        }
        return 0;
}

static void restore_env(const JsonValue *env) {
        (void) clearenv();
        (void) setenv("PATH", AGENT_DEFAULT_PATH, 1);
        for (size_t i = 0; i < json_object_size(env); i++)
                (void) setenv(json_object_key(env, i), json_string(json_object_value(env, i)), 1);
}

void agent_vm_restored(Agent *a, Conn *c, uint32_t stream, const JsonValue *req) {
        const JsonValue *jent = json_get(req, "entropy"), *jhost = json_get(req, "hostname"),
                        *jmid = json_get(req, "machine_id"), *jenv = json_get(req, "env");
        _cleanup_free_ void *entropy = NULL;
        size_t n_entropy = 0;
        int64_t time_ns = 0;
        int r;

        if (!a->vm) {
                agent_conn_send_error(c, stream, EOPNOTSUPP, "RESTORED is for the agent of a microVM");
                return;
        }
        if (json_type(jent) != JSON_STRING ||
            base64_decode(json_string(jent), json_string_len(jent), &entropy, &n_entropy) < 0 ||
            n_entropy < AGENT_RESTORE_ENTROPY_MIN || n_entropy > AGENT_RESTORE_ENTROPY_MAX) {
                agent_conn_send_error(c, stream, EINVAL, "entropy must be %u to %u bytes in base64",
                                      AGENT_RESTORE_ENTROPY_MIN, AGENT_RESTORE_ENTROPY_MAX);
                return;
        }
        if (json_int64(json_get(req, "time_ns"), &time_ns) < 0 || time_ns <= 0) {
                agent_conn_send_error(c, stream, EINVAL, "time_ns must be a positive integer");
                return;
        }
        if (jhost && (json_type(jhost) != JSON_STRING || !hostname_ok(json_string(jhost), json_string_len(jhost)))) {
                agent_conn_send_error(c, stream, EINVAL, "bad hostname");
                return;
        }
        if (jmid && (json_type(jmid) != JSON_STRING || !machine_id_ok(json_string(jmid), json_string_len(jmid)))) {
                agent_conn_send_error(c, stream, EINVAL, "machine_id must be 32 lowercase hex digits");
                return;
        }
        if (restore_check_env(jenv) < 0) {
                agent_conn_send_error(c, stream, EINVAL, "env must be an object of strings (keys without '=')");
                return;
        }

        /* the clock first: the reseed below is then already at the new time */
        struct timespec ts = { .tv_sec = (time_t) (time_ns / 1000000000), .tv_nsec = (long) (time_ns % 1000000000) };
        if (clock_settime(CLOCK_REALTIME, &ts) < 0) {
                r = errno;
                agent_conn_send_error(c, stream, r, "Cannot step the clock: %s", strerror(r));
                return;
        }
        r = restore_entropy(entropy, n_entropy);
        explicit_bzero(entropy, n_entropy);
        if (r < 0) {
                agent_conn_send_error(c, stream, -r, "Cannot re-seed the kernel's random number generator: %s",
                                      strerror(-r));
                return;
        }
        if (jhost && sethostname(json_string(jhost), json_string_len(jhost)) < 0) {
                r = errno;
                agent_conn_send_error(c, stream, r, "Cannot set the hostname: %s", strerror(r));
                return;
        }
        if (jmid) {
                r = restore_machine_id(json_string(jmid));
                if (r < 0) {
                        agent_conn_send_error(c, stream, -r, "Cannot write %s: %s", AGENT_MACHINE_ID_PATH,
                                              strerror(-r));
                        return;
                }
        }
        if (jenv && !json_is_null(jenv))
                restore_env(jenv);
        {
                /* its own link's address (a base snapshot or a parent had another, or none) */
                const JsonValue *jnet = json_get(req, "net"), *jres = json_get(req, "resolv_conf");
                const char *addr = json_string(json_get(jnet, "address")), *gw = json_string(json_get(jnet, "gateway")),
                           *mac = json_string(json_get(jnet, "mac"));
                if (addr && gw) {
                        r = agent_vm_net_configure(addr, gw, mac);
                        if (r < 0) {
                                agent_conn_send_error(c, stream, -r, "Cannot configure eth0: %s", strerror(-r));
                                return;
                        }
                }
                if (json_type(jres) == JSON_STRING && strlen(json_string(jres)) == json_string_len(jres) &&
                    json_string_len(jres) <= AGENT_RESTORE_RESOLV_MAX) {
                        r = agent_vm_write_resolv(json_string(jres));
                        if (r < 0)
                                log_warning_errno(r, "Cannot write /etc/resolv.conf: %m");
                }
        }
        log_debug("restored: clock stepped, RNG re-seeded with %zu bytes%s", n_entropy,
                  jmid ? ", new machine-id" : "");
        (void) agent_conn_send_empty_result(c, stream);
}

void agent_vm_sync(Agent *a, Conn *c, uint32_t stream) {
        if (!a->vm) {
                agent_conn_send_error(c, stream, EOPNOTSUPP, "SYNC is for the agent of a microVM");
                return;
        }
        sync(); /* the guest's page cache onto its virtual disk, which the host copies next */
        (void) agent_conn_send_empty_result(c, stream);
}
