-- SPDX-License-Identifier: MIT
-- 0020: the controller's leadership as a lease in the store, judged by the
-- store's clock (PostgreSQL's; SQLite's own, julianday('now')), never by a
-- wall clock of the host that holds it. One row. holder: the controller
-- that holds it (or held it last); token: the fencing token, one more at
-- each takeover (a renewal keeps it); expires_usec: the store time it ends
-- unless renewed. A controller's store handle carries its token
-- (store_fence): its writes fail while that token's lease is not current.
-- (PostgreSQL checks it in a trigger in each write's statement; SQLite in
-- temporary triggers of the fenced connection.)
CREATE TABLE controller_lease (
        id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
        holder TEXT NOT NULL DEFAULT '',
        token BIGINT NOT NULL DEFAULT 0,
        expires_usec BIGINT NOT NULL DEFAULT 0,
        acquired_usec BIGINT NOT NULL DEFAULT 0
);
INSERT INTO controller_lease (id) VALUES (1);
