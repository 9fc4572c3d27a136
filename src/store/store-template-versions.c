/* SPDX-License-Identifier: MIT */
/* The generic half of template versions and tags: argument checks and
 * dispatch through the ops table. Whether a version may go (newest, tagged,
 * in use) is decided by the back ends inside the delete's transaction. */

#include "store-backend.h"
#include "str-util.h"

static int check_version(uint64_t version) {
        return version == 0 ? -EINVAL : check_u64(version);
}

int store_template_version_add(Store *s, const TemplateVersion *v) {
        TemplateVersion copy;

        if (!s || !v)
                return -EINVAL;
        CHECK(CHECK_FIELD(v->name, true));
        CHECK(CHECK_FIELD(v->digest, false));
        CHECK(check_version(v->version));
        CHECK(check_u64(v->size_bytes));
        if (v->created_usec < 0)
                return -EINVAL;
        copy = *v;
        if (copy.created_usec == 0)
                copy.created_usec = now_usec();
        return s->ops->template_version_add(s, &copy);
}

int store_template_version_next(Store *s, const char *name, uint64_t *ret) {
        if (!s || !ret || !name || !name[0] || strnlen(name, STORE_NAME_MAX) >= STORE_NAME_MAX)
                return -EINVAL;
        return s->ops->template_version_next(s, name, ret);
}

int store_template_version_get(Store *s, const char *name, uint64_t version, TemplateVersion *ret) {
        if (!s || !ret)
                return -EINVAL;
        CHECK(check_lookup(name, STORE_NAME_MAX));
        if (version == 0 || check_u64(version) < 0)
                return -ENOENT;
        return s->ops->template_version_get(s, name, version, ret);
}

int store_template_version_list(Store *s, const char *name, TemplateVersion **ret, size_t *ret_n) {
        if (!s || !ret || !ret_n)
                return -EINVAL;
        if (check_lookup(name, STORE_NAME_MAX) < 0) {
                *ret = NULL;
                *ret_n = 0;
                return name ? 0 : -EINVAL;
        }
        return s->ops->template_version_list(s, name, ret, ret_n);
}

int store_template_version_delete(Store *s, const char *name, uint64_t version) {
        if (!s)
                return -EINVAL;
        CHECK(check_lookup(name, STORE_NAME_MAX));
        if (version == 0 || check_u64(version) < 0)
                return -ENOENT;
        return s->ops->template_version_delete(s, name, version);
}

int store_template_versions_drop(Store *s, const char *name) {
        if (!s)
                return -EINVAL;
        if (check_lookup(name, STORE_NAME_MAX) < 0)
                return name ? 0 : -EINVAL;
        return s->ops->template_versions_drop(s, name);
}

int store_template_tag_set(Store *s, const char *name, const char *tag, uint64_t version) {
        if (!s)
                return -EINVAL;
        CHECK(check_arg(name, STORE_NAME_MAX, true));
        CHECK(check_arg(tag, STORE_TAG_MAX, true));
        CHECK(check_version(version));
        return s->ops->template_tag_set(s, name, tag, version);
}

int store_template_tag_delete(Store *s, const char *name, const char *tag) {
        if (!s)
                return -EINVAL;
        CHECK(check_lookup(name, STORE_NAME_MAX));
        CHECK(check_lookup(tag, STORE_TAG_MAX));
        return s->ops->template_tag_delete(s, name, tag);
}

int store_template_tag_get(Store *s, const char *name, const char *tag, uint64_t *ret_version) {
        if (!s || !ret_version)
                return -EINVAL;
        CHECK(check_lookup(name, STORE_NAME_MAX));
        CHECK(check_lookup(tag, STORE_TAG_MAX));
        return s->ops->template_tag_get(s, name, tag, ret_version);
}

int store_template_tag_list(Store *s, const char *name, TemplateTag **ret, size_t *ret_n) {
        if (!s || !ret || !ret_n)
                return -EINVAL;
        if (check_lookup(name, STORE_NAME_MAX) < 0) {
                *ret = NULL;
                *ret_n = 0;
                return name ? 0 : -EINVAL;
        }
        return s->ops->template_tag_list(s, name, ret, ret_n);
}
