-- 0002: what federation needs: the forward queue's clock, the origin a
-- forwarded message reports to, a ledger keyed by kind of work, and the
-- registries learned from peers.

-- queued_at: when the message entered forward_queued (NULL in every other
-- state); FailForwards counts the wait from it. report_to: the peer that
-- forwarded the message to us, owed a delivery_status ('' for none).
ALTER TABLE messages ADD COLUMN queued_at INTEGER;
ALTER TABLE messages ADD COLUMN report_to TEXT NOT NULL DEFAULT '';

-- FailForwards: forward_queued messages queued before a cutoff, oldest
-- first. Only queued messages have queued_at, so the index holds only them
-- and costs nothing to the other writes.
CREATE INDEX messages_state_queued ON messages (state, queued_at) WHERE queued_at IS NOT NULL;

-- The ledger gains the kind of work: a delivery to frontend X and a forward
-- to a peer named X are different work. SQLite cannot change a primary key
-- in place, so the table is rebuilt; every entry written so far recorded
-- delivery work.
CREATE TABLE ledger_v2 (
    message_id TEXT    NOT NULL REFERENCES messages (id),
    kind       TEXT    NOT NULL,
    target     TEXT    NOT NULL,
    result     TEXT    NOT NULL,
    at         INTEGER NOT NULL,
    detail     TEXT    NOT NULL,
    PRIMARY KEY (message_id, kind, target)
) STRICT, WITHOUT ROWID;
INSERT INTO ledger_v2 (message_id, kind, target, result, at, detail)
    SELECT message_id, 'delivery', target, result, at, detail FROM ledger;
DROP TABLE ledger;
ALTER TABLE ledger_v2 RENAME TO ledger;

-- A peer's frontend registry as last learned: one row per frontend.
CREATE TABLE peer_registry (
    peer       TEXT    NOT NULL,
    frontend   TEXT    NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (peer, frontend)
) STRICT, WITHOUT ROWID;
