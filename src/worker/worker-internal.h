/* SPDX-License-Identifier: MIT */
#pragma once

#include "api-error.h"
#include "config.h"
#include "json.h"
#include "pool.h"
#include "runtime.h"
#include "store.h"

typedef struct LiveSandbox {
        char id[STORE_ID_MAX];
        pid_t pid;
        uint64_t starttime;
        int pidfd;
} LiveSandbox;

typedef struct Worker {
        const Config *config;
        Store *store;
        Pool *pool;
        const RuntimeOps *runtime;
        int agent_exe_fd;   /* sealed memfd of space-agent */
        int epoll_fd;
        char agent_dir[512];
        LiveSandbox *live;
        size_t n_live, allocated_live;
} Worker;

/* worker-sandbox.c */
int worker_create_sandbox(Worker *w, const JsonValue *spec, int64_t *ret_pid, uint64_t *ret_starttime, ApiError *e);
int worker_destroy_sandbox(Worker *w, const char *id, ApiError *e);
/* PID 1 of a live sandbox exited (its pidfd became readable). */
void worker_sandbox_died(Worker *w, LiveSandbox *l);
LiveSandbox *worker_live_find(Worker *w, const char *id);
int worker_live_add(Worker *w, const char *id, pid_t pid, uint64_t starttime, int pidfd);
void worker_live_remove(Worker *w, const char *id);
int worker_agent_socket(Worker *w, const char *id, char *buf, size_t n);
/* Removes every host trace of a sandbox id (processes, cgroups, socket dir,
 * and the root too if remove_root). */
int worker_cleanup_sandbox(Worker *w, const char *id, bool remove_root);
void worker_event(Worker *w, const Sandbox *sb, const char *type, const char *reason, const char *data_json);

/* worker-reconcile.c */
int worker_reconcile(Worker *w);
int worker_import_bundled_templates(Worker *w);
