-- SPDX-License-Identifier: MIT
-- 0006: workers of a cluster. (Versions may land out of order: the runner
-- applies every version not recorded, gaps allowed.)
-- A worker registers with its capacity and heartbeats; the controller marks
-- it lost when the heartbeat stops. instance is random per start of the
-- worker: the same name from another instance while the row is live and
-- fresh is a duplicate and refused. templates: comma-separated names the
-- worker holds (for placement by locality). state: live | lost | stopped.
CREATE TABLE workers (
        name TEXT NOT NULL PRIMARY KEY,
        address TEXT NOT NULL,
        instance TEXT NOT NULL,
        state TEXT NOT NULL,
        cpu_millis BIGINT NOT NULL DEFAULT 0,
        memory_mb BIGINT NOT NULL DEFAULT 0,
        disk_mb BIGINT NOT NULL DEFAULT 0,
        runtimes TEXT NOT NULL DEFAULT '',
        accelerators TEXT NOT NULL DEFAULT '',
        templates TEXT NOT NULL DEFAULT '',
        registered_usec BIGINT NOT NULL,
        heartbeat_usec BIGINT NOT NULL
);
CREATE INDEX sandboxes_worker ON sandboxes(worker, state);
