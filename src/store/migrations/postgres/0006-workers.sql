-- SPDX-License-Identifier: MIT
-- 0006: workers of a cluster. The same shape as
-- migrations/sqlite/0006-workers.sql (see there for what the columns mean).
CREATE TABLE workers (
        name TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        address TEXT COLLATE "C" NOT NULL,
        instance TEXT COLLATE "C" NOT NULL,
        state TEXT COLLATE "C" NOT NULL,
        cpu_millis BIGINT NOT NULL DEFAULT 0,
        memory_mb BIGINT NOT NULL DEFAULT 0,
        disk_mb BIGINT NOT NULL DEFAULT 0,
        runtimes TEXT COLLATE "C" NOT NULL DEFAULT '',
        accelerators TEXT COLLATE "C" NOT NULL DEFAULT '',
        templates TEXT COLLATE "C" NOT NULL DEFAULT '',
        registered_usec BIGINT NOT NULL,
        heartbeat_usec BIGINT NOT NULL
);
CREATE INDEX sandboxes_worker ON sandboxes(worker, state);
