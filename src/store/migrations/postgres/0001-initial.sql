-- SPDX-License-Identifier: MIT
-- 0001: tenants, API keys, templates, sandboxes, events.
-- The same shape as migrations/sqlite/0001-initial.sql. Every text column
-- sorts and compares byte by byte (COLLATE "C"), as in SQLite, whatever the
-- database's locale. Integers are BIGINT (SQLite's INTEGER is 64 bit), times
-- are microseconds. Strings are never NULL (empty = none) except JSON blobs.

CREATE TABLE tenants (
        id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        name TEXT COLLATE "C" NOT NULL UNIQUE,
        created_usec BIGINT NOT NULL
);

CREATE TABLE api_keys (
        id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        tenant_id TEXT COLLATE "C" NOT NULL REFERENCES tenants(id),
        hash TEXT COLLATE "C" NOT NULL UNIQUE,
        name TEXT COLLATE "C" NOT NULL DEFAULT '',
        admin BOOLEAN NOT NULL DEFAULT false,
        created_usec BIGINT NOT NULL
);
CREATE INDEX api_keys_tenant ON api_keys(tenant_id);

-- tenant_id '' = a global template.
CREATE TABLE templates (
        name TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        tenant_id TEXT COLLATE "C" NOT NULL DEFAULT '',
        state TEXT COLLATE "C" NOT NULL,
        size_bytes BIGINT NOT NULL DEFAULT 0,
        created_usec BIGINT NOT NULL
);

-- Rows in state 'deleted' are kept until purged; they hold no slot.
CREATE TABLE sandboxes (
        id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        tenant_id TEXT COLLATE "C" NOT NULL,
        template_name TEXT COLLATE "C" NOT NULL,
        runtime TEXT COLLATE "C" NOT NULL,
        worker TEXT COLLATE "C" NOT NULL DEFAULT '',
        state TEXT COLLATE "C" NOT NULL,
        reason TEXT COLLATE "C" NOT NULL DEFAULT '',
        cpu_millis BIGINT NOT NULL,
        memory_mb BIGINT NOT NULL,
        disk_mb BIGINT NOT NULL,
        pids_max BIGINT NOT NULL,
        timeout_s BIGINT NOT NULL DEFAULT 0,
        created_usec BIGINT NOT NULL,
        updated_usec BIGINT NOT NULL,
        expires_usec BIGINT NOT NULL DEFAULT 0,
        slot BIGINT NOT NULL,
        pid BIGINT NOT NULL DEFAULT 0,
        pid_starttime BIGINT NOT NULL DEFAULT 0,
        env_json TEXT,
        metadata_json TEXT,
        parent_id TEXT COLLATE "C" NOT NULL DEFAULT ''
);
-- The last word on slots: the insert also takes an advisory lock, so two
-- API servers never pick the same slot in the first place.
CREATE UNIQUE INDEX sandboxes_live_slot ON sandboxes(slot) WHERE state <> 'deleted';
CREATE INDEX sandboxes_tenant ON sandboxes(tenant_id, id);
CREATE INDEX sandboxes_template ON sandboxes(template_name);

CREATE TABLE events (
        seq BIGSERIAL PRIMARY KEY,
        time_usec BIGINT NOT NULL,
        tenant_id TEXT COLLATE "C" NOT NULL DEFAULT '',
        sandbox_id TEXT COLLATE "C" NOT NULL DEFAULT '',
        type TEXT COLLATE "C" NOT NULL,
        actor TEXT COLLATE "C" NOT NULL DEFAULT '',
        reason TEXT COLLATE "C" NOT NULL DEFAULT '',
        data_json TEXT
);
CREATE INDEX events_sandbox ON events(sandbox_id, seq);
CREATE INDEX events_tenant ON events(tenant_id, seq);
CREATE INDEX events_time ON events(time_usec);
