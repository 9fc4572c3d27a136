-- SPDX-License-Identifier: MIT
-- 0007: settings every process of a cluster shares, set once by the first
-- that needs them: token_fingerprint (HMAC of the cluster token, so that a
-- process with another token is refused at its start).
CREATE TABLE cluster_settings (
        name TEXT NOT NULL PRIMARY KEY,
        value TEXT NOT NULL
);
