-- SPDX-License-Identifier: MIT
-- 0014: lifecycle webhooks (the shape of migrations/sqlite/0014-webhooks.sql). A tenant's URL that the active controller POSTs
-- the tenant's events to, signed with secret (HMAC-SHA256), in event order.
-- The secret is kept as given (it must sign; it is never returned after the
-- create). events_json: a JSON array of type patterns ("sandbox.*" or exact
-- types). Delivery state: last_seq = the last event delivered (or skipped
-- by the filter); failures = consecutive failed attempts of the next event,
-- next_usec = when to try again, failing_since_usec = when the first of
-- them failed (0 = none), last_error = why the last attempt failed.
CREATE TABLE webhooks (
        id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        tenant_id TEXT COLLATE "C" NOT NULL,
        name TEXT COLLATE "C" NOT NULL DEFAULT '',
        format TEXT COLLATE "C" NOT NULL DEFAULT 'space' CHECK (format IN ('space', 'e2b')),
        url TEXT COLLATE "C" NOT NULL,
        events_json TEXT COLLATE "C" NOT NULL,
        secret TEXT COLLATE "C" NOT NULL,
        enabled BOOLEAN NOT NULL DEFAULT TRUE,
        created_usec BIGINT NOT NULL,
        last_seq BIGINT NOT NULL DEFAULT 0,
        failures BIGINT NOT NULL DEFAULT 0,
        next_usec BIGINT NOT NULL DEFAULT 0,
        failing_since_usec BIGINT NOT NULL DEFAULT 0,
        last_error TEXT COLLATE "C" NOT NULL DEFAULT ''
);
CREATE INDEX webhooks_tenant ON webhooks(tenant_id, created_usec);
