-- SPDX-License-Identifier: MIT
-- 0010: whether a checkpoint holds the machine's memory besides its disk (a
-- vm sandbox's: restoring it continues every process). Older rows: disk only.
ALTER TABLE checkpoints ADD COLUMN memory INTEGER NOT NULL DEFAULT 0;
