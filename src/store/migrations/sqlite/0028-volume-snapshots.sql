-- SPDX-License-Identifier: MIT
-- 0028: a volume may be a read-only snapshot of another (read_only, mounted
-- only read-only, its files unchangeable), and records what it was made
-- from (source: the name of the volume it was snapshotted or cloned from at
-- the time, "" for one made empty). The rows made before this are writable
-- volumes of no recorded source.
ALTER TABLE volumes ADD COLUMN read_only INTEGER NOT NULL DEFAULT 0 CHECK (read_only IN (0, 1));
ALTER TABLE volumes ADD COLUMN source TEXT NOT NULL DEFAULT '';
