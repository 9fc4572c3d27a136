-- SPDX-License-Identifier: MIT
-- 0029: a worker that stopped heartbeating is 'suspect' (was 'lost'), and
-- the sandboxes it held are 'unreachable' (was 'lost'): not gone, their state
-- unknown until the worker comes back or they are recovered elsewhere.
UPDATE workers SET state = 'suspect' WHERE state = 'lost';
UPDATE sandboxes SET state = 'unreachable' WHERE state = 'lost';
