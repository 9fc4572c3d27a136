/* SPDX-License-Identifier: MIT */
/* The worker's helpers (gateway, spawner) are started again when they die,
 * with a backoff; and the health op: what the worker sees of its parts, for
 * the API's /healthz and /readyz (cheap: no store, no qgroup walk). */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <sys/statvfs.h>
#include <sys/wait.h>

#include "gateway-client.h"
#include "log.h"
#include "str-util.h"
#include "worker-internal.h"

void worker_restarts_started(WorkerRestarts *r, int64_t now) {
        if (r->started_usec > 0)
                r->restarts++;
        r->started_usec = now;
}

void worker_restarts_died(WorkerRestarts *r, int64_t now, const char *why) {
        if (r->started_usec > 0 && now - r->started_usec >= WORKER_HELPER_STABLE_USEC)
                r->delay_usec = 0; /* it ran well: once more at once */
        else if (r->delay_usec == 0)
                r->delay_usec = WORKER_HELPER_BACKOFF_MIN_USEC;
        else
                r->delay_usec = MIN(r->delay_usec * 2, (uint64_t) WORKER_HELPER_BACKOFF_MAX_USEC);
        r->next_usec = now + (int64_t) r->delay_usec;
        if (why)
                (void) strscpy(r->last_exit, sizeof r->last_exit, why);
}

bool worker_restarts_due(const WorkerRestarts *r, int64_t now) {
        return now >= r->next_usec;
}

static void helper_object(JsonWriter *jw, const char *key, const char *status, pid_t pid, const WorkerRestarts *r) {
        json_w_key(jw, key);
        json_w_object_begin(jw);
        json_w_kv_string(jw, "status", status);
        if (pid > 0)
                json_w_kv_int(jw, "pid", pid);
        json_w_kv_int(jw, "restarts", r->restarts);
        if (r->last_exit[0])
                json_w_kv_string(jw, "last_exit", r->last_exit);
        json_w_object_end(jw);
}

/* Whether the child pid has exited (not reaped: its owner does that). */
static bool child_exited(pid_t pid) {
        siginfo_t si = {};
        return pid > 0 && waitid(P_PID, (id_t) pid, &si, WEXITED | WNOHANG | WNOWAIT) >= 0 && si.si_pid == pid;
}

void worker_op_health(Worker *w, const JsonValue *req, JsonWriter *jw) {
        const char *gw, *pool_status = "ok";
        pid_t gw_pid = w->gateway ? gateway_client_pid(w->gateway) : 0;
        struct statvfs sv = {};

        (void) req;
        if (!streq(w->config->gateway, "on"))
                gw = "off";
        else if (!w->gateway)
                gw = "restarting";
        else
                gw = child_exited(gw_pid) ? "down" : "ok";
        if (!w->pool || !pool_mount_path(w->pool) || statvfs(pool_mount_path(w->pool), &sv) < 0)
                pool_status = "error";

        json_w_object_begin(jw);
        json_w_kv_bool(jw, "ok", true);
        json_w_key(jw, "health");
        json_w_object_begin(jw);
        json_w_kv_int(jw, "pid", getpid());
        json_w_kv_bool(jw, "restarted", w->restarted);
        json_w_kv_int(jw, "sandboxes_running", (int64_t) w->n_live);
        helper_object(jw, "gateway", gw, gw_pid, &w->gateway_restarts);
        helper_object(jw, "spawner", w->spawner_pid > 0 && !child_exited(w->spawner_pid) ? "ok" : "down",
                      w->spawner_pid, &w->spawner_restarts);
        json_w_key(jw, "pool");
        json_w_object_begin(jw);
        json_w_kv_string(jw, "status", pool_status);
        if (streq(pool_status, "ok")) {
                json_w_key(jw, "size_bytes");
                json_w_uint(jw, (uint64_t) sv.f_blocks * sv.f_frsize);
                json_w_key(jw, "free_bytes");
                json_w_uint(jw, (uint64_t) sv.f_bavail * sv.f_frsize);
        }
        json_w_object_end(jw);
        json_w_object_end(jw);
        json_w_object_end(jw);
}
