-- SPDX-License-Identifier: MIT
-- 0024: template versions and tags. Every publish of a template (import,
-- pull, build) is a version, numbered per name from 1; the template's name
-- means its newest version. A tag names one version of a template and moves
-- when set again. A sandbox records the version it was made from (0: made
-- before versions, or from a template that has none).
CREATE TABLE template_versions (
        name TEXT NOT NULL,
        version BIGINT NOT NULL CHECK (version > 0),
        digest TEXT NOT NULL DEFAULT '',
        size_bytes BIGINT NOT NULL DEFAULT 0,
        created_usec BIGINT NOT NULL,
        PRIMARY KEY (name, version)
);
CREATE TABLE template_tags (
        name TEXT NOT NULL,
        tag TEXT NOT NULL,
        version BIGINT NOT NULL,
        PRIMARY KEY (name, tag),
        FOREIGN KEY (name, version) REFERENCES template_versions(name, version)
);
ALTER TABLE sandboxes ADD COLUMN template_version BIGINT NOT NULL DEFAULT 0;
CREATE INDEX sandboxes_template_version ON sandboxes(template_name, template_version);
