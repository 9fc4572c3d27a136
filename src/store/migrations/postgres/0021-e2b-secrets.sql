-- SPDX-License-Identifier: MIT
-- 0021: a grant may scope the credential it grants (E2B's network.rules:
-- a secret is put on a sandbox's requests only to the hosts and in the
-- header the sandbox's rules say). NULL = the credential's own hosts and
-- header; hosts_json set = those hosts, applied as header_name: header_format.
ALTER TABLE credential_grants ADD COLUMN hosts_json TEXT COLLATE "C";
ALTER TABLE credential_grants ADD COLUMN header_name TEXT COLLATE "C";
ALTER TABLE credential_grants ADD COLUMN header_format TEXT COLLATE "C";
