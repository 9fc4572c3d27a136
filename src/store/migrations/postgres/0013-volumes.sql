-- SPDX-License-Identifier: MIT
-- 0013: volumes: a tenant's named persistent subvolumes (size_mb their
-- quota), kept on one worker's pool ("" = the local worker), and which
-- sandboxes mount them. Only mounts of sandboxes not deleted count: one
-- writer excludes every other mount; readers share.
CREATE TABLE volumes (
        id TEXT NOT NULL PRIMARY KEY,
        tenant_id TEXT NOT NULL REFERENCES tenants(id),
        name TEXT NOT NULL,
        size_mb BIGINT NOT NULL CHECK (size_mb > 0),
        worker TEXT NOT NULL DEFAULT '',
        created_usec BIGINT NOT NULL,
        UNIQUE (tenant_id, name)
);
CREATE TABLE volume_mounts (
        sandbox_id TEXT NOT NULL,
        volume_id TEXT NOT NULL REFERENCES volumes(id),
        path TEXT NOT NULL,
        read_only BOOLEAN NOT NULL,
        PRIMARY KEY (sandbox_id, volume_id)
);
CREATE INDEX volume_mounts_volume ON volume_mounts(volume_id);
