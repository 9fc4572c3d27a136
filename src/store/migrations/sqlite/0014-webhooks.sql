-- SPDX-License-Identifier: MIT
-- 0014: lifecycle webhooks. A tenant's URL that the active controller POSTs
-- the tenant's events to, signed with secret (HMAC-SHA256), in event order.
-- The secret is kept as given (it must sign; it is never returned after the
-- create). events_json: a JSON array of type patterns ("sandbox.*" or exact
-- types). Delivery state: last_seq = the last event delivered (or skipped
-- by the filter); failures = consecutive failed attempts of the next event,
-- next_usec = when to try again, failing_since_usec = when the first of
-- them failed (0 = none), last_error = why the last attempt failed.
-- format: the body's shape, 'space' or 'e2b' (made by /events/webhooks).
CREATE TABLE webhooks (
        id TEXT NOT NULL PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        name TEXT NOT NULL DEFAULT '',
        format TEXT NOT NULL DEFAULT 'space' CHECK (format IN ('space', 'e2b')),
        url TEXT NOT NULL,
        events_json TEXT NOT NULL,
        secret TEXT NOT NULL,
        enabled INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
        created_usec BIGINT NOT NULL,
        last_seq BIGINT NOT NULL DEFAULT 0,
        failures BIGINT NOT NULL DEFAULT 0,
        next_usec BIGINT NOT NULL DEFAULT 0,
        failing_since_usec BIGINT NOT NULL DEFAULT 0,
        last_error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX webhooks_tenant ON webhooks(tenant_id, created_usec);
