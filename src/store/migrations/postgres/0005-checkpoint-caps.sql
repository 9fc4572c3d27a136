-- SPDX-License-Identifier: MIT
-- 0005: what a sandbox's checkpoints may hold, so that checkpoints cannot
-- fill the pool: checkpoints_max checkpoints, checkpoints_mb MiB held by its
-- checkpoints alone (exclusive bytes). 0 = the host's default (the rows of
-- sandboxes made before this).
ALTER TABLE sandboxes ADD COLUMN checkpoints_max BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN checkpoints_mb BIGINT NOT NULL DEFAULT 0;
