/* SPDX-License-Identifier: MIT */
#include <limits.h>
#include <stdio.h>

#include "api-bootstrap.h"
#include "api-internal.h"
#include "fd-util.h"
#include "log.h"
#include "str-util.h"

int api_bootstrap(const Config *config, Store *store) {
        char secret[API_KEY_SECRET_LEN + 1], id[API_KEY_ID_LEN + 1], path[PATH_MAX], line[API_KEY_SECRET_LEN + 2];
        uint64_t n = 0;
        Tenant t = {};
        ApiKey k = {};
        int r;

        r = store_key_count(store, &n);
        if (r < 0)
                return log_error_errno(r, "Cannot count API keys: %m");
        if (n > 0)
                return 0;

        r = store_tenant_get_by_name(store, "default", &t);
        if (r == -ENOENT)
                r = store_tenant_create(store, "default", &t);
        if (r < 0)
                return log_error_errno(r, "Cannot create the default tenant: %m");

        r = api_key_generate(secret, id);
        if (r < 0)
                return log_error_errno(r, "Cannot generate a key: %m");
        (void) strscpy(k.id, sizeof k.id, id);
        (void) strscpy(k.tenant_id, sizeof k.tenant_id, t.id);
        (void) strscpy(k.name, sizeof k.name, "bootstrap");
        api_key_hash(secret, k.hash);
        k.admin = true;
        k.created_usec = now_usec();

        if ((size_t) snprintf(path, sizeof path, "%s/admin.key", config->state_dir) >= sizeof path)
                return -ENAMETOOLONG;
        snprintf(line, sizeof line, "%s\n", secret);
        r = write_file_atomic(path, line, strlen(line), 0600);
        explicit_bzero(line, sizeof line);
        explicit_bzero(secret, sizeof secret);
        if (r < 0)
                return log_error_errno(r, "Cannot write %s: %m", path);
        r = store_key_insert(store, &k);
        if (r < 0) {
                (void) unlink(path);
                return log_error_errno(r, "Cannot store the bootstrap key: %m");
        }
        log_info("Created the admin key %s for tenant 'default' in %s", k.id, path);
        return 0;
}
