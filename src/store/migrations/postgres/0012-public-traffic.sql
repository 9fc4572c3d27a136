-- SPDX-License-Identifier: MIT
-- 0012: public_traffic: the ingress lets anyone reach the sandbox's ports
-- (no traffic token). Off for the rows made before this (private).
ALTER TABLE sandboxes ADD COLUMN public_traffic BOOLEAN NOT NULL DEFAULT false;
