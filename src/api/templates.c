/* SPDX-License-Identifier: MIT */
/* /v1/templates: list (with in_use counts), import from a streamed archive
 * (admin; a root fs tar, an OCI layout in a tar or a docker save archive, told
 * apart by the worker; ?tag= picks an image), pull from a registry (admin;
 * fetched here into an OCI layout tar, then imported like one), remove
 * (admin; refused while a sandbox uses it). */

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>

#include "alloc-util.h"
#include "api-internal.h"
#include "cred-crypt.h"
#include "registry.h"
#include "fd-util.h"
#include "log.h"

#define TEMPLATE_IO_CHUNK (64U * 1024U)
#define TEMPLATE_TAG_MAX 256U

static void unlink_freep(char **p) {
        if (*p) {
                (void) unlink(*p);
                free(*p);
        }
}

int api_templates_list(ApiRequest *r, ApiError *e) {
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_free_ Template *list = NULL;
        _cleanup_free_ uint64_t *counts = NULL;
        size_t n = 0;
        int k;

        json_w_init(&w);
        k = store_template_list(r->store, &list, &n);
        if (k < 0)
                return api_store_error(e, k, "listing templates");
        counts = new0(uint64_t, n);
        if (!counts)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        for (size_t i = 0; i < n; i++) {
                k = api_sandbox_count(r, list[i].name, &counts[i], e);
                if (k < 0)
                        return k;
        }
        json_w_object_begin(&w);
        json_w_key(&w, "templates");
        json_w_array_begin(&w);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *runtime = NULL, *start = NULL;
                k = api_template_settings_get(r, list[i].name, &runtime, &start, e);
                if (k < 0)
                        return k;
                json_out_template_with(&w, &list[i], counts[i], NULL, NULL, runtime, start);
        }
        json_w_array_end(&w);
        json_w_object_end(&w);
        return api_reply_json(r, 200, &w);
}

/* Streams the request body into a new temporary file under <state_dir>/tmp. */
int api_template_receive_tar(ApiRequest *r, char **ret_path, ApiError *e) {
        const Config *c = api_config(r->api);
        const uint64_t max = c->upload_max_mb * 1024 * 1024;
        _cleanup_(unlink_freep) char *path = NULL;
        _cleanup_free_ char *dir = NULL, *buf = NULL;
        _cleanup_close_ int fd = -EBADF;
        uint64_t total = 0;
        int k;

        dir = strjoin(c->state_dir, "/tmp");
        path = strjoin(c->state_dir, "/tmp/template-XXXXXX");
        buf = malloc(TEMPLATE_IO_CHUNK);
        if (!dir || !path || !buf)
                return api_error(e, -ENOMEM, API_UNAVAILABLE, "out of memory");
        k = mkdir_p(dir, 0700);
        if (k < 0)
                return api_error(e, k, API_INTERNAL, "cannot create %s: %s", dir, strerror(-k));
        fd = mkostemp(path, O_CLOEXEC);
        if (fd < 0) {
                k = negative_errno();
                free(TAKE_PTR(path)); /* nothing to unlink */
                return api_error(e, k, API_INTERNAL, "cannot create a temporary file in %s: %s", dir, strerror(-k));
        }
        for (;;) {
                ssize_t n = http_conn_read_body(r->conn, buf, TEMPLATE_IO_CHUNK);
                if (n < 0)
                        return api_error(e, (int) n, API_BAD_REQUEST, "could not read the request body: %s",
                                         strerror((int) -n));
                if (n == 0)
                        break;
                total += (uint64_t) n;
                if (total > max)
                        return api_error(e, -EFBIG, API_PAYLOAD_TOO_LARGE, "template archives are limited to %" PRIu64
                                         " MiB", c->upload_max_mb);
                k = loop_write(fd, buf, (size_t) n);
                if (k < 0)
                        return api_error(e, k, k == -ENOSPC ? API_INSUFFICIENT_STORAGE : API_INTERNAL,
                                         "cannot write the archive to %s: %s", dir, strerror(-k));
        }
        r->body_read = true;
        if (total == 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "the body must be a tar archive, not empty");
        if (close(TAKE_FD(fd)) < 0)
                return api_error(e, negative_errno(), API_INTERNAL, "cannot write the archive: %m");
        *ret_path = TAKE_PTR(path);
        return 0;
}

/* A publish of name: its row is made (importing) if it is new, else it
 * must be ready (one publish at a time); the new version's pool name. */
static int template_publish_begin(ApiRequest *r, const char *name, bool *ret_created, uint64_t *ret_version,
                                  char *pool_name, size_t size, ApiError *e) {
        Template t = {};
        int k;

        *ret_created = false;
        k = store_template_get(r->store, name, &t);
        if (k == -ENOENT) {
                (void) strscpy(t.name, sizeof t.name, name);
                t.state = TEMPLATE_IMPORTING;
                t.created_usec = now_usec();
                k = store_template_insert(r->store, &t);
                if (k == -EEXIST)
                        return api_error(e, k, API_CONFLICT, "template '%s' is being made by another request", name);
                if (k < 0)
                        return api_store_error(e, k, "recording the template");
                *ret_created = true;
        } else if (k < 0)
                return api_store_error(e, k, "looking up the template");
        else if (t.state != TEMPLATE_READY)
                return api_error(e, -EBUSY, API_CONFLICT, "template '%s' is being imported", name);
        k = api_template_version_begin(r, name, ret_version, pool_name, size, e);
        if (k < 0 && *ret_created)
                (void) store_template_delete(r->store, name);
        return k;
}

/* A failed publish: a new template's row goes; an existing one stays as it was. */
static void template_publish_failed(ApiRequest *r, const char *name, bool created) {
        int q;

        if (!created)
                return;
        q = store_template_delete(r->store, name);
        if (q < 0)
                log_error_errno(q, "Failed to drop template row %s after a failed import: %m", name);
}

int api_template_import(ApiRequest *r, ApiError *e) {
        const char *ct = http_head_header(r->head, "Content-Type");
        _cleanup_(unlink_freep) char *path = NULL;
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_free_ char *name = NULL, *tag = NULL;
        char data[STORE_NAME_MAX + 64], pool_name[STORE_NAME_MAX];
        Template t = {};
        uint64_t size = 0, version = 0;
        bool created = false;
        int k;

        json_w_init(&w);
        k = api_query_string(r, "name", &name, e);
        if (k < 0)
                return k;
        if (k == 0 || !api_template_name_valid(name))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "query parameter 'name' must be a template name ([a-z0-9][a-z0-9._-]{0,63})");
        k = api_query_string(r, "tag", &tag, e);
        if (k < 0)
                return k;
        if (k > 0 && (isempty(tag) || strlen(tag) > TEMPLATE_TAG_MAX))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "query parameter 'tag' must be 1..%u characters",
                                 TEMPLATE_TAG_MAX);
        if (ct && strncasecmp(ct, "application/x-tar", 17) != 0 && strncasecmp(ct, "application/octet-stream", 24) != 0)
                return api_error(e, -EINVAL, API_UNSUPPORTED_MEDIA, "expected Content-Type: application/x-tar, got '%.64s'",
                                 ct);
        if (r->head->content_length > 0 &&
            (uint64_t) r->head->content_length > api_config(r->api)->upload_max_mb * 1024 * 1024)
                return api_error(e, -EFBIG, API_PAYLOAD_TOO_LARGE, "template archives are limited to %" PRIu64 " MiB",
                                 api_config(r->api)->upload_max_mb);

        k = template_publish_begin(r, name, &created, &version, pool_name, sizeof pool_name, e);
        if (k < 0)
                return k;

        k = api_template_receive_tar(r, &path, e);
        if (k >= 0)
                k = api_get_worker(r, e);
        if (k >= 0)
                k = worker_template_import(r->worker, pool_name, path, tag, &size, e);
        if (k >= 0)
                k = api_template_version_commit(r, name, version, NULL, size, e);
        if (k < 0) {
                template_publish_failed(r, name, created);
                if (e->code == API_OK)
                        (void) api_error(e, k, API_UNAVAILABLE, "the worker failed: %s", strerror(-k));
                log_warning("Importing template %s failed: %s", name, e->message);
                return k;
        }
        k = store_template_set_ready(r->store, name, size);
        if (k < 0)
                return api_store_error(e, k, "marking the template ready");
        /* validated name: nothing to escape */
        snprintf(data, sizeof data, "{\"name\":\"%s\",\"size_bytes\":%" PRIu64 "}", name, size);
        api_event(r, NULL, "template.imported", "", data);
        log_info("Imported template %s (%" PRIu64 " bytes)", name, size);

        k = store_template_get(r->store, name, &t);
        if (k < 0)
                return api_store_error(e, k, "reading the template back");
        json_out_template(&w, &t, 0);
        return api_reply_json(r, 201, &w);
}

static void cred_secret_freep_(CredSecret **s) {
        cred_secret_free(*s);
}

static int pull_layers_cached(void *userdata, char (*keys)[65], size_t n, bool *ret_cached) {
        ApiRequest *r = userdata;
        ApiError e = {};
        int k = worker_layers_cached(r->worker, NULL, keys, n, ret_cached, &e);

        if (k < 0)
                log_debug("Asking the worker for its cached layers failed (all are fetched): %s", e.message);
        return k;
}

/* The registry client's options from the host's configuration; its layer
 * cache asked of r's worker. */
void api_registry_options(ApiRequest *r, RegistryOptions *ret) {
        const Config *c = api_config(r->api);

        *ret = (RegistryOptions){
                .ca_file = c->registry_ca_file,
                .insecure = c->registry_insecure,
                .resolve = c->registry_resolve,
                .max_bytes = c->upload_max_mb * 1024 * 1024,
                .timeout_msec = (int) MIN(c->registry_timeout_s * 1000, (uint64_t) INT32_MAX),
                .layers_cached = pull_layers_cached,
                .userdata = r,
        };
}

/* The template row is made first (a name taken twice fails at once, before
 * any download) and dropped again on any failure. */
int api_template_pull(ApiRequest *r, ApiError *e) {
        static const char *const allowed[] = { "ref", "credential", NULL };
        const Config *c = api_config(r->api);
        const char *name = r->params[0], *refs, *credname, *unknown = NULL;
        _cleanup_(cred_secret_freep_) CredSecret *secret = NULL;
        _cleanup_(unlink_freep) char *path = NULL;
        _cleanup_(json_w_done) JsonWriter w;
        _cleanup_json_ JsonValue *body = NULL;
        _cleanup_free_ char *tmpdir = NULL;
        _cleanup_(credential_done) Credential cred = {};
        RegistryCredential rc = {};
        RegistryRef ref;
        RegistryOptions o;
        char data[STORE_NAME_MAX + REGISTRY_REF_MAX + 160], digest[72], err[160], pool_name[STORE_NAME_MAX];
        Template t = {};
        uint64_t size = 0, version = 0;
        bool created = false;
        int k;

        api_registry_options(r, &o);
        json_w_init(&w);
        if (!api_template_name_valid(name))
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "a template name is [a-z0-9][a-z0-9._-]{0,63}, not '%.64s'", name);
        k = api_read_json(r, &body, e);
        if (k < 0)
                return k;
        if (json_type(body) != JSON_OBJECT)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "the body must be a JSON object");
        if (json_check_keys(body, allowed, &unknown) < 0)
                return api_error(e, -EINVAL, API_UNKNOWN_FIELD, "unknown field '%.64s'", strna(unknown));
        refs = json_string(json_get(body, "ref"));
        if (!refs)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT,
                                 "ref is required: the image, e.g. docker.io/library/python:3.12");
        if (registry_ref_parse(refs, &ref, err, sizeof err) < 0)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "ref '%.128s': %s", refs, err);
        credname = json_string(json_get(body, "credential"));
        if (json_get(body, "credential") && !json_is_null(json_get(body, "credential")) && !credname)
                return api_error(e, -EINVAL, API_INVALID_ARGUMENT, "credential must be a credential's name");
        if (credname) {
                k = api_credential_open_basic(r, credname, &cred, &secret, e);
                if (k < 0)
                        return k;
                rc = (RegistryCredential){ .user = cred.basic_user, .password = (const char *) secret->data,
                                           .password_len = secret->len, .name = cred.name,
                                           .hosts_json = cred.hosts_json };
        }

        k = template_publish_begin(r, name, &created, &version, pool_name, sizeof pool_name, e);
        if (k < 0)
                return k;

        tmpdir = strjoin(c->state_dir, "/tmp");
        k = tmpdir ? api_get_worker(r, e) : -ENOMEM;
        if (k >= 0)
                k = registry_pull(&ref, credname ? &rc : NULL, &o, tmpdir, &path, digest, e);
        secret = cred_secret_free(secret);
        if (k >= 0)
                k = worker_template_import(r->worker, pool_name, path, NULL, &size, e);
        if (k >= 0)
                k = api_template_version_commit(r, name, version, digest, size, e);
        if (k < 0) {
                template_publish_failed(r, name, created);
                if (e->code == API_OK)
                        (void) api_error(e, k, API_UNAVAILABLE, "the pull failed: %s", strerror(-k));
                log_warning("Pulling template %s from %s failed: %s", name, refs, e->message);
                return k;
        }
        k = store_template_set_ready(r->store, name, size);
        if (k < 0)
                return api_store_error(e, k, "marking the template ready");
        /* validated name, ref and digest: nothing to escape */
        snprintf(data, sizeof data, "{\"name\":\"%s\",\"size_bytes\":%" PRIu64 ",\"ref\":\"%s\",\"digest\":\"%s\"}",
                 name, size, refs, digest);
        api_event(r, NULL, "template.imported", "", data);
        log_info("Pulled template %s from %s (%s, %" PRIu64 " bytes)", name, refs, digest, size);

        k = store_template_get(r->store, name, &t);
        if (k < 0)
                return api_store_error(e, k, "reading the template back");
        json_out_template_pulled(&w, &t, 0, refs, digest);
        return api_reply_json(r, 201, &w);
}

int api_template_remove(ApiRequest *r, ApiError *e) {
        const char *name = r->params[0];
        char data[STORE_NAME_MAX + 16];
        Template t;
        uint64_t users = 0;
        int k;

        if (!api_template_name_valid(name))
                return api_error(e, -ENOENT, API_NOT_FOUND, "no template '%.64s'", name);
        k = store_template_get(r->store, name, &t);
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "no template '%s'", name);
        if (k < 0)
                return api_store_error(e, k, "looking up the template");

        /* The store checks "in use" atomically with the delete; only then are the files removed. */
        k = store_template_delete(r->store, name);
        if (k == -EBUSY) {
                (void) api_sandbox_count(r, name, &users, NULL);
                return api_error(e, k, API_TEMPLATE_IN_USE, "template '%s' is used by %" PRIu64 " sandbox%s", name,
                                 users, users == 1 ? "" : "es");
        }
        if (k == -ENOENT)
                return api_error(e, k, API_NOT_FOUND, "no template '%s'", name);
        if (k < 0)
                return api_store_error(e, k, "removing the template");

        k = api_get_worker(r, e);
        if (k >= 0)
                k = worker_template_remove(r->worker, name, e);
        if (k < 0) {
                /* keep it visible so the removal can be retried */
                int q = store_template_insert(r->store, &t);
                if (q < 0)
                        log_error_errno(q, "Failed to restore template row %s after a failed removal: %m", name);
                if (e->code == API_OK)
                        (void) api_error(e, k, API_UNAVAILABLE, "the worker failed: %s", strerror(-k));
                log_warning("Removing template %s failed: %s", name, e->message);
                return k;
        }
        api_template_versions_remove(r, name); /* nothing uses them: the delete checked */
        snprintf(data, sizeof data, "{\"name\":\"%s\"}", name); /* validated name */
        /* a template imported again under this name starts without these */
        k = store_object_settings_remove(r->store, "template", name);
        if (k < 0)
                log_warning_errno(k, "Removing the settings of template %s failed: %m", name);
        api_event(r, NULL, "template.removed", "", data);
        log_info("Removed template %s", name);
        return api_reply_empty(r, 204);
}
