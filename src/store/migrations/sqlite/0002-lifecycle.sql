-- SPDX-License-Identifier: MIT
-- 0002: lifecycle. Checkpoints of sandboxes, and what a sandbox needs for
-- pause/suspend/resume, idle and timeout policies, lineage and warm pools.

-- A checkpoint is a read-only snapshot of a sandbox's root. name '' = none
-- (user names are unique per sandbox); auto = taken by the controller (only
-- those are pruned by retention); restorable = 0 while the snapshot is being
-- taken or after retention gave it up (the GC removes it from the pool, then
-- the row).
CREATE TABLE checkpoints (
        id TEXT NOT NULL PRIMARY KEY,
        sandbox_id TEXT NOT NULL,
        tenant_id TEXT NOT NULL,
        name TEXT NOT NULL DEFAULT '',
        created_usec BIGINT NOT NULL,
        size_bytes BIGINT NOT NULL DEFAULT 0,
        auto INTEGER NOT NULL DEFAULT 0 CHECK (auto IN (0, 1)),
        restorable INTEGER NOT NULL DEFAULT 1 CHECK (restorable IN (0, 1))
);
CREATE INDEX checkpoints_sandbox ON checkpoints(sandbox_id, created_usec);
CREATE UNIQUE INDEX checkpoints_name ON checkpoints(sandbox_id, name) WHERE name <> '';

-- processes_preserved: whether the processes of the sandbox are those it had
-- before its last suspend (an ns sandbox restarts them). idle_action: '' |
-- 'pause' | 'suspend', after idle_s seconds without exec or file calls.
-- parent_checkpoint: the checkpoint a branch came from ('' = the live
-- state). warm_pool: the template whose warm pool holds the sandbox unclaimed
-- ('' = a tenant's). checkpoint_every_s: automatic checkpoints, 0 = off.
-- timeout_warned: the warning before the timeout was sent.
ALTER TABLE sandboxes ADD COLUMN processes_preserved INTEGER NOT NULL DEFAULT 1 CHECK (processes_preserved IN (0, 1));
ALTER TABLE sandboxes ADD COLUMN idle_s BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN idle_action TEXT NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN last_activity_usec BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN parent_checkpoint TEXT NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN warm_pool TEXT NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN io_weight INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN checkpoint_every_s BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN timeout_warned INTEGER NOT NULL DEFAULT 0 CHECK (timeout_warned IN (0, 1));
UPDATE sandboxes SET last_activity_usec = updated_usec;
CREATE INDEX sandboxes_warm_pool ON sandboxes(warm_pool, state) WHERE warm_pool <> '';
