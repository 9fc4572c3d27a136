-- SPDX-License-Identifier: MIT
-- 0004: credentials and their grants to sandboxes.
--
-- A credential's value is stored sealed only: AES-256-GCM under the master
-- key in <state>/master.key (never in the store), ciphertext and tag in
-- base64, the 12-byte nonce in base64, key_id = which master key sealed it
-- (hex of the first 8 bytes of its SHA-256). hosts_json is a JSON array of
-- host patterns. apply = 'header' (header_name: header_format, where
-- {value} stands for the value) or 'basic' (Authorization: Basic with
-- basic_user). env_name: the variable that holds the placeholder inside a
-- granted sandbox. Times in microseconds, 0 = never / not revoked. version
-- grows with every change (compare-and-set for updates).
CREATE TABLE credentials (
        id TEXT NOT NULL PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        name TEXT NOT NULL,
        hosts_json TEXT NOT NULL,
        apply TEXT NOT NULL,
        header_name TEXT NOT NULL DEFAULT '',
        header_format TEXT NOT NULL DEFAULT '',
        basic_user TEXT NOT NULL DEFAULT '',
        env_name TEXT NOT NULL DEFAULT '',
        ciphertext TEXT NOT NULL,
        nonce TEXT NOT NULL,
        key_id TEXT NOT NULL,
        created_usec BIGINT NOT NULL,
        updated_usec BIGINT NOT NULL,
        expires_usec BIGINT NOT NULL DEFAULT 0,
        revoked_usec BIGINT NOT NULL DEFAULT 0,
        version BIGINT NOT NULL DEFAULT 1
);
CREATE UNIQUE INDEX credentials_tenant_name ON credentials(tenant_id, name);

-- A grant lets a sandbox use a credential (by id: a credential deleted and
-- created again under the same name is not granted by the old rows).
CREATE TABLE credential_grants (
        sandbox_id TEXT NOT NULL,
        credential_id TEXT NOT NULL,
        tenant_id TEXT NOT NULL,
        created_usec BIGINT NOT NULL,
        PRIMARY KEY (sandbox_id, credential_id)
);
CREATE INDEX credential_grants_credential ON credential_grants(credential_id);
