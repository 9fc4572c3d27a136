-- SPDX-License-Identifier: MIT
-- 0021: a grant may scope the credential it grants (E2B's network.rules:
-- a secret is put on a sandbox's requests only to the hosts and in the
-- header the sandbox's rules say). NULL = the credential's own hosts and
-- header; hosts_json set = those hosts, applied as header_name: header_format.
ALTER TABLE credential_grants ADD COLUMN hosts_json TEXT COLLATE "C";
ALTER TABLE credential_grants ADD COLUMN header_name TEXT COLLATE "C";
ALTER TABLE credential_grants ADD COLUMN header_format TEXT COLLATE "C";

-- The Host the sandbox's servers see for requests through the ingress
-- (E2B's maskRequestHost; "${PORT}" stands for the port), '' = the one the
-- client sent.
ALTER TABLE sandboxes ADD COLUMN ingress_host TEXT COLLATE "C" NOT NULL DEFAULT '';
