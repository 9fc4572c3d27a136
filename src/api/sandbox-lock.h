/* SPDX-License-Identifier: MIT */
#pragma once

/* Serialises the lifecycle operations on one sandbox within this process:
 * one lock per sandbox id, so a long call on one sandbox (a vm's branch
 * waits minutes under TCG) never holds up a call on another. One lock at a
 * time: never take a second while holding one. Never fails: a lock entry
 * that cannot be allocated is retried until memory is there. */
typedef struct ApiSandboxLock ApiSandboxLock;

ApiSandboxLock *api_sandbox_lock(const char *id);
void api_sandbox_unlock(ApiSandboxLock *l);

static inline void api_sandbox_unlockp(ApiSandboxLock **l) {
        if (*l)
                api_sandbox_unlock(*l);
}
#define _cleanup_sandbox_lock_ __attribute__((cleanup(api_sandbox_unlockp)))

/* For tests: how many ids have an entry (held or waited for). */
unsigned api_sandbox_lock_entries(void);
