-- SPDX-License-Identifier: MIT
-- 0012: public_traffic: the ingress lets anyone reach the sandbox's ports
-- (no traffic token). Off for the rows made before this (private).
ALTER TABLE sandboxes ADD COLUMN public_traffic INTEGER NOT NULL DEFAULT 0 CHECK (public_traffic IN (0, 1));
