-- SPDX-License-Identifier: MIT
-- 0008: auto_resume: an exec or file call (and, on the E2B surface, any envd
-- request) that reaches the sandbox while it is paused resumes it instead of
-- being refused. 0 for the rows made before this (the host's setting
-- auto_resume_paused still applies to every sandbox).
ALTER TABLE sandboxes ADD COLUMN auto_resume INTEGER NOT NULL DEFAULT 0 CHECK (auto_resume IN (0, 1));
