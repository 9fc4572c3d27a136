-- SPDX-License-Identifier: MIT
-- 0009: where a cluster's checkpoints are. The same shape as
-- migrations/sqlite/0009-checkpoint-copies.sql (see there for the columns).
CREATE TABLE checkpoint_copies (
        checkpoint_id TEXT COLLATE "C" NOT NULL,
        sandbox_id TEXT COLLATE "C" NOT NULL,
        worker TEXT COLLATE "C" NOT NULL,
        available BOOLEAN NOT NULL DEFAULT false,
        sha256 TEXT COLLATE "C" NOT NULL DEFAULT '',
        size_bytes BIGINT NOT NULL DEFAULT 0,
        updated_usec BIGINT NOT NULL,
        PRIMARY KEY (checkpoint_id, worker)
);
CREATE INDEX checkpoint_copies_sandbox ON checkpoint_copies(sandbox_id);
