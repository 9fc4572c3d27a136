-- SPDX-License-Identifier: MIT
-- 0001: tenants, API keys, templates, sandboxes, events.
-- Plain TEXT / INTEGER / BIGINT columns so the PostgreSQL back end can follow
-- the same shape; strings are never NULL (empty = none) except JSON blobs.

CREATE TABLE tenants (
        id TEXT NOT NULL PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        created_usec BIGINT NOT NULL
);

CREATE TABLE api_keys (
        id TEXT NOT NULL PRIMARY KEY,
        tenant_id TEXT NOT NULL REFERENCES tenants(id),
        hash TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL DEFAULT '',
        admin INTEGER NOT NULL DEFAULT 0 CHECK (admin IN (0, 1)),
        created_usec BIGINT NOT NULL
);
CREATE INDEX api_keys_tenant ON api_keys(tenant_id);

-- tenant_id '' = a global template.
CREATE TABLE templates (
        name TEXT NOT NULL PRIMARY KEY,
        tenant_id TEXT NOT NULL DEFAULT '',
        state TEXT NOT NULL,
        size_bytes BIGINT NOT NULL DEFAULT 0,
        created_usec BIGINT NOT NULL
);

-- Rows in state 'deleted' are kept until purged; they hold no slot.
CREATE TABLE sandboxes (
        id TEXT NOT NULL PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        template_name TEXT NOT NULL,
        runtime TEXT NOT NULL,
        worker TEXT NOT NULL DEFAULT '',
        state TEXT NOT NULL,
        reason TEXT NOT NULL DEFAULT '',
        cpu_millis INTEGER NOT NULL,
        memory_mb BIGINT NOT NULL,
        disk_mb BIGINT NOT NULL,
        pids_max INTEGER NOT NULL,
        timeout_s BIGINT NOT NULL DEFAULT 0,
        created_usec BIGINT NOT NULL,
        updated_usec BIGINT NOT NULL,
        expires_usec BIGINT NOT NULL DEFAULT 0,
        slot INTEGER NOT NULL,
        pid BIGINT NOT NULL DEFAULT 0,
        pid_starttime BIGINT NOT NULL DEFAULT 0,
        env_json TEXT,
        metadata_json TEXT,
        parent_id TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX sandboxes_live_slot ON sandboxes(slot) WHERE state <> 'deleted';
CREATE INDEX sandboxes_tenant ON sandboxes(tenant_id, id);
CREATE INDEX sandboxes_template ON sandboxes(template_name);

CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        time_usec BIGINT NOT NULL,
        tenant_id TEXT NOT NULL DEFAULT '',
        sandbox_id TEXT NOT NULL DEFAULT '',
        type TEXT NOT NULL,
        actor TEXT NOT NULL DEFAULT '',
        reason TEXT NOT NULL DEFAULT '',
        data_json TEXT
);
CREATE INDEX events_sandbox ON events(sandbox_id, seq);
CREATE INDEX events_tenant ON events(tenant_id, seq);
CREATE INDEX events_time ON events(time_usec);
