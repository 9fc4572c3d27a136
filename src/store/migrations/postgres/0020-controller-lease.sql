-- SPDX-License-Identifier: MIT
-- 0020: leases judged by the store's clock. See
-- migrations/sqlite/0020-controller-lease.sql for the lease row.
--
-- space_now_usec(): the server's clock (clock_timestamp, not the
-- transaction's start), the one clock every lease is judged by: worker
-- heartbeats are written with it and the controller lease expires by it.
CREATE FUNCTION space_now_usec() RETURNS BIGINT LANGUAGE sql VOLATILE AS
        $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint $$;

CREATE TABLE controller_lease (
        id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
        holder TEXT COLLATE "C" NOT NULL DEFAULT '',
        token BIGINT NOT NULL DEFAULT 0,
        expires_usec BIGINT NOT NULL DEFAULT 0,
        acquired_usec BIGINT NOT NULL DEFAULT 0
);
INSERT INTO controller_lease (id) VALUES (1);

-- Fencing: a session that set space.fence_token (the controller's handles,
-- store_fence) writes only while that token's lease is unexpired. The lease
-- row is read FOR SHARE: a takeover (an UPDATE of it) waits for the write's
-- transaction to end, so no write of the old token commits after it.
CREATE FUNCTION space_fence_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
        t TEXT := current_setting('space.fence_token', true);
BEGIN
        IF t IS NULL OR t = '' THEN
                RETURN NULL;
        END IF;
        PERFORM 1 FROM controller_lease
                WHERE id = 1 AND token = t::bigint AND expires_usec > space_now_usec() FOR SHARE;
        IF NOT FOUND THEN
                RAISE EXCEPTION 'fenced: the controller lease of token % is no longer held', t
                        USING ERRCODE = 'SPF01';
        END IF;
        RETURN NULL;
END $$;

DO $$
DECLARE
        tbl TEXT;
BEGIN
        FOREACH tbl IN ARRAY ARRAY['tenants', 'api_keys', 'templates', 'sandboxes', 'events', 'checkpoints',
                                   'credentials', 'credential_grants', 'workers', 'cluster_settings',
                                   'checkpoint_copies', 'tenant_quotas', 'volumes', 'volume_mounts',
                                   'webhooks', 'object_settings'] LOOP
                EXECUTE format('CREATE TRIGGER %I BEFORE INSERT OR UPDATE OR DELETE ON %I '
                               'FOR EACH STATEMENT EXECUTE FUNCTION space_fence_check()',
                               tbl || '_fence', tbl);
        END LOOP;
END $$;
