-- 0002: what federation needs: the forward queue's clock, the origin a
-- forwarded message reports to, a ledger keyed by kind of work, and the
-- registries learned from peers.

-- queued_at: when the message entered forward_queued (NULL in every other
-- state); FailForwards counts the wait from it. report_to: the peer that
-- forwarded the message to us, owed a delivery_status ('' for none).
ALTER TABLE messages ADD COLUMN queued_at timestamptz;
ALTER TABLE messages ADD COLUMN report_to text NOT NULL DEFAULT '';

-- FailForwards: forward_queued messages queued before a cutoff, oldest
-- first. Only queued messages have queued_at, so the index holds only them
-- and costs nothing to the other writes.
CREATE INDEX messages_state_queued ON messages (state, queued_at, id) WHERE queued_at IS NOT NULL;

-- The ledger gains the kind of work: a delivery to frontend X and a forward
-- to a peer named X are different work. Every entry written so far
-- recorded delivery work.
ALTER TABLE ledger ADD COLUMN kind text COLLATE "C" NOT NULL DEFAULT 'delivery';
ALTER TABLE ledger ALTER COLUMN kind DROP DEFAULT;
ALTER TABLE ledger DROP CONSTRAINT ledger_pkey;
ALTER TABLE ledger ADD PRIMARY KEY (message_id, kind, target);

-- A peer's frontend registry as last learned: one row per frontend.
CREATE TABLE peer_registry (
	peer       text COLLATE "C" NOT NULL,
	frontend   text COLLATE "C" NOT NULL,
	updated_at timestamptz NOT NULL,
	PRIMARY KEY (peer, frontend)
);
