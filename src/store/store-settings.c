/* SPDX-License-Identifier: MIT */
/* The generic half of object settings: which kinds and keys exist, argument
 * checks and dispatch through the ops table. */

#include "store-backend.h"
#include "str-util.h"

typedef struct SettingKey {
        const char *kind;
        const char *key;
} SettingKey;

static const SettingKey setting_keys[] = {
        { "template", "runtime" },        /* ns | vm | auto: what a create that names none gets */
        { "template", "start" },          /* JSON: the start command and its readiness check */
        { "tenant", "default_runtime" },  /* ns | vm | auto, below a template's */
};

static bool kind_known(const char *kind) {
        for (size_t i = 0; i < ELEMENTSOF(setting_keys); i++)
                if (streq(setting_keys[i].kind, kind))
                        return true;
        return false;
}

static bool key_known(const char *kind, const char *key) {
        for (size_t i = 0; i < ELEMENTSOF(setting_keys); i++)
                if (streq(setting_keys[i].kind, kind) && streq(setting_keys[i].key, key))
                        return true;
        return false;
}

int store_object_setting_set(Store *s, const char *kind, const char *name, const char *key, const char *value) {
        ObjectSetting v = {};

        if (!s || !kind || !name || !key || !key_known(kind, key))
                return -EINVAL;
        CHECK(check_arg(name, sizeof v.name, true));
        if (!value)
                return s->ops->setting_remove(s, kind, name, key);
        CHECK(check_arg(value, sizeof v.value, true));
        (void) strscpy(v.kind, sizeof v.kind, kind);
        (void) strscpy(v.name, sizeof v.name, name);
        (void) strscpy(v.key, sizeof v.key, key);
        (void) strscpy(v.value, sizeof v.value, value);
        v.updated_usec = now_usec();
        return s->ops->setting_set(s, &v);
}

int store_object_settings_get(Store *s, const char *a_kind, const char *a_name, const char *b_kind,
                              const char *b_name, ObjectSetting **ret, size_t *ret_n) {
        if (!s || !ret || !ret_n || !a_kind || !kind_known(a_kind) || (b_kind && !kind_known(b_kind)))
                return -EINVAL;
        *ret = NULL;
        *ret_n = 0;
        /* a name that cannot be stored has no settings; b alone may still have some */
        if (check_lookup(a_name, STORE_NAME_MAX) < 0)
                a_name = "";
        if (!b_kind || !b_name || check_lookup(b_name, STORE_NAME_MAX) < 0) {
                b_kind = a_kind;
                b_name = a_name;
        }
        if (isempty(a_name) && isempty(b_name))
                return 0;
        return s->ops->settings_get(s, a_kind, a_name, b_kind, b_name, ret, ret_n);
}

int store_object_settings_remove(Store *s, const char *kind, const char *name) {
        if (!s || !kind || !kind_known(kind))
                return -EINVAL;
        if (check_lookup(name, STORE_NAME_MAX) < 0)
                return 0;
        return s->ops->setting_remove(s, kind, name, NULL);
}

const char *object_setting_find(const ObjectSetting *list, size_t n, const char *kind, const char *key) {
        for (size_t i = 0; i < n; i++)
                if (streq(list[i].kind, kind) && streq(list[i].key, key))
                        return list[i].value;
        return NULL;
}
