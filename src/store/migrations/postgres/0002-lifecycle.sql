-- SPDX-License-Identifier: MIT
-- 0002: lifecycle. The same shape as migrations/sqlite/0002-lifecycle.sql
-- (see there for what the columns mean).

CREATE TABLE checkpoints (
        id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        sandbox_id TEXT COLLATE "C" NOT NULL,
        tenant_id TEXT COLLATE "C" NOT NULL,
        name TEXT COLLATE "C" NOT NULL DEFAULT '',
        created_usec BIGINT NOT NULL,
        size_bytes BIGINT NOT NULL DEFAULT 0,
        auto BOOLEAN NOT NULL DEFAULT false,
        restorable BOOLEAN NOT NULL DEFAULT true
);
CREATE INDEX checkpoints_sandbox ON checkpoints(sandbox_id, created_usec);
CREATE UNIQUE INDEX checkpoints_name ON checkpoints(sandbox_id, name) WHERE name <> '';

ALTER TABLE sandboxes ADD COLUMN processes_preserved BOOLEAN NOT NULL DEFAULT true;
ALTER TABLE sandboxes ADD COLUMN idle_s BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN idle_action TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN last_activity_usec BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN parent_checkpoint TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN warm_pool TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN io_weight BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN checkpoint_every_s BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN timeout_warned BOOLEAN NOT NULL DEFAULT false;
UPDATE sandboxes SET last_activity_usec = updated_usec;
CREATE INDEX sandboxes_warm_pool ON sandboxes(warm_pool, state) WHERE warm_pool <> '';
