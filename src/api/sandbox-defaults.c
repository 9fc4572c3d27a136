/* SPDX-License-Identifier: MIT */
/* What a new sandbox takes from its template and tenant: the runtime when
 * the request names none (the template's "runtime", else the tenant's
 * "default_runtime", else the host's default_runtime; "auto" is vm where a
 * vm would run under KVM, else ns) and the template's start command. So
 * clients that never name a runtime (every E2B SDK) get the isolation the
 * operator chose. */

#include <stdatomic.h>
#include <stdio.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "log.h"
#include "str-util.h"

#define AUTO_CACHE_USEC (5 * 1000000LL) /* how long "auto" trusts what the workers said */

bool api_runtime_name_valid(const char *s, bool allow_auto) {
        return s && (streq(s, "ns") || streq(s, "vm") || (allow_auto && streq(s, "auto")));
}

/* "auto": vm where KVM is there; the answer is kept a few seconds (a create
 * must not ask the workers each time). A worker that cannot be asked: ns. */
static const char *resolve_auto(ApiRequest *r) {
        static _Atomic int64_t until_usec;
        static atomic_bool vm;
        int64_t now = now_usec();
        ApiError ignored = {};
        bool kvm = false;

        if (now < atomic_load(&until_usec))
                return atomic_load(&vm) ? "vm" : "ns";
        if (api_get_worker(r, &ignored) < 0 || worker_kvm_available(r->worker, &kvm, &ignored) < 0) {
                log_warning("Resolving the runtime 'auto': the workers cannot be asked (%s); using ns",
                            ignored.message);
                return "ns";
        }
        atomic_store(&vm, kvm);
        atomic_store(&until_usec, now + AUTO_CACHE_USEC);
        return kvm ? "vm" : "ns";
}

const char *api_runtime_resolve(ApiRequest *r, const char *setting) {
        return streq(setting, "auto") ? resolve_auto(r) : setting;
}

int api_sandbox_defaults(ApiRequest *r, Sandbox *sb, char **ret_start_json, ApiError *e) {
        _cleanup_free_ ObjectSetting *list = NULL;
        const char *runtime, *from, *start;
        size_t n = 0;
        int k;

        *ret_start_json = NULL;
        k = store_object_settings_get(r->store, "template", sb->template_name, "tenant", r->key.tenant_id, &list, &n);
        if (k < 0)
                return api_store_error(e, k, "reading the template's and tenant's settings");

        if (isempty(sb->runtime)) {
                from = "template";
                runtime = object_setting_find(list, n, "template", "runtime");
                if (!runtime) {
                        from = "tenant";
                        runtime = object_setting_find(list, n, "tenant", "default_runtime");
                }
                if (!runtime) {
                        from = "host";
                        runtime = api_config(r->api)->default_runtime;
                }
                if (!api_runtime_name_valid(runtime, true)) {
                        log_warning("The %s's default runtime '%s' is not one; using ns", from, runtime);
                        runtime = "ns";
                }
                (void) strscpy(sb->runtime, sizeof sb->runtime, api_runtime_resolve(r, runtime));
                if (streq(sb->runtime, "vm") && sb->memory_mb < API_SANDBOX_VM_MEMORY_MB_MIN)
                        return api_error(e, -ERANGE, API_INVALID_ARGUMENT,
                                         "memory_mb must be at least %u for runtime 'vm' (the %s's default runtime; "
                                         "name runtime 'ns' to run it smaller)",
                                         API_SANDBOX_VM_MEMORY_MB_MIN, from);
        }

        start = object_setting_find(list, n, "template", "start");
        if (start) {
                *ret_start_json = strdup(start);
                if (!*ret_start_json)
                        return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        }
        return 0;
}

int api_sandbox_start_command(ApiRequest *r, const Sandbox *sb, const char *start_json, ApiError *e) {
        ApiError ignored = {};
        int k;

        if (isempty(start_json))
                return 0;
        k = api_sandbox_run_start(r, sb->id, start_json, e);
        if (k < 0 && api_sandbox_destroy(r, sb->id, "its template's start command failed", &ignored) < 0)
                log_warning("Removing sandbox %s after its start command failed: %s", sb->id, ignored.message);
        return k;
}

void api_sandbox_restart_command(ApiRequest *r, const Sandbox *sb) {
        _cleanup_free_ char *runtime = NULL, *start = NULL;
        ApiError e = {};

        if (api_template_settings_get(r, sb->template_name, &runtime, &start, &e) < 0) {
                log_warning("Reading the start command of %s's template failed, not starting it: %s", sb->id,
                            e.message);
                return;
        }
        if (!start || api_sandbox_run_start(r, sb->id, start, &e) >= 0)
                return;
        /* its files and the rest of it are someone's work: it stays, and says so */
        api_event(r, sb->id, "sandbox.start_failed", e.message, NULL);
}
