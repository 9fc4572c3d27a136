-- SPDX-License-Identifier: MIT
-- 0009: where a cluster's checkpoints are. A row per worker that holds (or
-- is receiving) a copy of a checkpoint: the worker that took it, and those
-- it was shipped to (btrfs send/receive). available: the copy is complete
-- and its stream's sha256 was verified by the receiver; a row that is not
-- available is a receive in progress (or one that failed: tried again).
-- sha256 and size_bytes describe the stream that was shipped ('' and 0 for
-- the origin's own copy).
CREATE TABLE checkpoint_copies (
        checkpoint_id TEXT NOT NULL,
        sandbox_id TEXT NOT NULL,
        worker TEXT NOT NULL,
        available BOOLEAN NOT NULL DEFAULT false,
        sha256 TEXT NOT NULL DEFAULT '',
        size_bytes BIGINT NOT NULL DEFAULT 0,
        updated_usec BIGINT NOT NULL,
        PRIMARY KEY (checkpoint_id, worker)
);
CREATE INDEX checkpoint_copies_sandbox ON checkpoint_copies(sandbox_id);
