-- SPDX-License-Identifier: MIT
-- 0003: network. The sandbox's egress policy in its canonical JSON form
-- ({"allow": [...], "deny": [...]}, see docs/API.md); NULL for sandboxes
-- created before it existed, which get no egress.
ALTER TABLE sandboxes ADD COLUMN network_json TEXT;
