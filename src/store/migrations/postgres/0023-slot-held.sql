-- SPDX-License-Identifier: MIT
-- 0023: slot_held: a deleted sandbox whose teardown on its worker (network
-- link, firewall element, cgroups, root) is still running in the background
-- keeps its slot (uid range, link, address) until that ends. The rows made
-- before this hold none.
ALTER TABLE sandboxes ADD COLUMN slot_held BOOLEAN NOT NULL DEFAULT false;
CREATE INDEX sandboxes_held_slot ON sandboxes(slot) WHERE slot_held;
