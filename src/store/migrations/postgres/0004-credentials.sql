-- SPDX-License-Identifier: MIT
-- 0004: credentials. The same shape as migrations/sqlite/0004-credentials.sql
-- (see there for what the columns mean).

CREATE TABLE credentials (
        id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
        tenant_id TEXT COLLATE "C" NOT NULL,
        name TEXT COLLATE "C" NOT NULL,
        hosts_json TEXT COLLATE "C" NOT NULL,
        apply TEXT COLLATE "C" NOT NULL,
        header_name TEXT COLLATE "C" NOT NULL DEFAULT '',
        header_format TEXT COLLATE "C" NOT NULL DEFAULT '',
        basic_user TEXT COLLATE "C" NOT NULL DEFAULT '',
        env_name TEXT COLLATE "C" NOT NULL DEFAULT '',
        ciphertext TEXT COLLATE "C" NOT NULL,
        nonce TEXT COLLATE "C" NOT NULL,
        key_id TEXT COLLATE "C" NOT NULL,
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
        sandbox_id TEXT COLLATE "C" NOT NULL,
        credential_id TEXT COLLATE "C" NOT NULL,
        tenant_id TEXT COLLATE "C" NOT NULL,
        created_usec BIGINT NOT NULL,
        PRIMARY KEY (sandbox_id, credential_id)
);
CREATE INDEX credential_grants_credential ON credential_grants(credential_id);
