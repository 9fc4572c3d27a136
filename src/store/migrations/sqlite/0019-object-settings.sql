-- SPDX-License-Identifier: MIT
-- 0019: settings of a named object, by key: a template's runtime and start
-- command ("template", template name), a tenant's default runtime
-- ("tenant", tenant id). A missing row is the default.
CREATE TABLE object_settings (
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        updated_usec INTEGER NOT NULL,
        PRIMARY KEY (kind, name, key)
);
