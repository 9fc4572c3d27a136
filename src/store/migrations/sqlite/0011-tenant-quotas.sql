-- SPDX-License-Identifier: MIT
-- 0011: tenant quotas an admin sets (PUT /v1/tenants/{name}). A row holds
-- one tenant's overrides; -1 = the host's default (config tenant_max_*,
-- tenant_rps, tenant_streams_max), 0 = unlimited. No row = every default.
CREATE TABLE tenant_quotas (
        tenant_id TEXT NOT NULL PRIMARY KEY REFERENCES tenants(id),
        sandboxes BIGINT NOT NULL DEFAULT -1 CHECK (sandboxes >= -1),
        cpu_millis BIGINT NOT NULL DEFAULT -1 CHECK (cpu_millis >= -1),
        memory_mb BIGINT NOT NULL DEFAULT -1 CHECK (memory_mb >= -1),
        disk_mb BIGINT NOT NULL DEFAULT -1 CHECK (disk_mb >= -1),
        checkpoints BIGINT NOT NULL DEFAULT -1 CHECK (checkpoints >= -1),
        rps BIGINT NOT NULL DEFAULT -1 CHECK (rps >= -1),
        streams BIGINT NOT NULL DEFAULT -1 CHECK (streams >= -1),
        updated_usec BIGINT NOT NULL
);
-- what admission counts: a tenant's live sandboxes and their checkpoints
CREATE INDEX checkpoints_tenant ON checkpoints(tenant_id);
