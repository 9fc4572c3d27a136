/* SPDX-License-Identifier: MIT */
/* PATCH /v1/templates/{name}: a template's settings, which every sandbox
 * made from it takes: its runtime (where the create names none) and its
 * start command with its ready check (template-start.c). null removes one. */

#include <stdio.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "log.h"
#include "str-util.h"

int api_template_settings_get(ApiRequest *r, const char *name, char **ret_runtime, char **ret_start, ApiError *e) {
        _cleanup_free_ ObjectSetting *list = NULL;
        const char *v;
        size_t n = 0;
        int k;

        *ret_runtime = *ret_start = NULL;
        k = store_object_settings_get(r->store, "template", name, NULL, NULL, &list, &n);
        if (k < 0)
                return api_store_error(e, k, "reading the template's settings");
        if ((v = object_setting_find(list, n, "template", "runtime")) && !(*ret_runtime = strdup(v)))
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        if ((v = object_setting_find(list, n, "template", "start")) && !(*ret_start = strdup(v))) {
                *ret_runtime = mfree(*ret_runtime);
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        }
        return 0;
}

static int parse_runtime(const JsonValue *v, const char **ret, ApiError *e) {
        *ret = NULL;
        if (json_is_null(v))
                return 0;
        if (!api_runtime_name_valid(json_string(v), true))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "runtime must be 'ns', 'vm', 'auto' or null");
        *ret = json_string(v);
        return 0;
}

int api_template_patch(ApiRequest *r, ApiError *e) {
        static const char *const allowed[] = { "runtime", "start", NULL };
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_free_ char *start = NULL, *runtime_now = NULL, *start_now = NULL;
        const char *name = r->params[0], *unknown = NULL, *runtime = NULL;
        const JsonValue *rv, *sv;
        uint64_t in_use = 0;
        Template t;
        int k;

        json_w_init(&w);
        k = api_read_json(r, &body, e);
        if (k < 0)
                return k;
        if (json_type(body) != JSON_OBJECT)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "the body must be an object");
        if (json_check_keys(body, allowed, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));
        if (!api_template_name_valid(name))
                return api_error(e, -ENOENT, API_NOT_FOUND, "no template '%.64s'", name);
        k = store_template_get(r->store, name, &t);
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "no template '%s'", name);
        if (k < 0)
                return api_store_error(e, k, "looking up the template");

        /* all of it valid before any of it is written */
        rv = json_get(body, "runtime");
        if (rv) {
                k = parse_runtime(rv, &runtime, e);
                if (k < 0)
                        return k;
        }
        sv = json_get(body, "start");
        if (sv && !json_is_null(sv)) {
                k = api_template_start_parse(sv, &start, e);
                if (k < 0)
                        return k;
        }
        if (rv) {
                k = store_object_setting_set(r->store, "template", name, "runtime", runtime);
                if (k < 0)
                        return api_store_error(e, k, "recording the template's runtime");
        }
        if (sv) {
                k = store_object_setting_set(r->store, "template", name, "start", start);
                if (k < 0)
                        return api_store_error(e, k, "recording the template's start command");
        }
        {
                char data[STORE_NAME_MAX + 16];
                snprintf(data, sizeof data, "{\"name\":\"%s\"}", name); /* validated name */
                api_event(r, NULL, "template.updated", "", data);
        }
        log_info("Updated the settings of template %s", name);

        k = api_template_settings_get(r, name, &runtime_now, &start_now, e);
        if (k < 0)
                return k;
        (void) api_sandbox_count(r, name, &in_use, NULL);
        json_out_template_with(&w, &t, in_use, NULL, NULL, runtime_now, start_now);
        return api_reply_json(r, 200, &w);
}
