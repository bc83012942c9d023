-- 0005: the storage life cycle: when a message came to rest (retention
-- counts from it), and counts that are maintained instead of counted.
--
-- finalized_at: when the message entered its resting state (delivered,
-- failed, forward_failed, or forwarded: see persistence.Resting); NULL in
-- every other state. Messages already at rest take their last change as
-- that time.
ALTER TABLE messages ADD COLUMN finalized_at timestamptz;
UPDATE messages SET finalized_at = updated_at
	WHERE state IN ('delivered', 'failed', 'forward_failed', 'forwarded');

-- The cleaner walks each resting state oldest first; only resting
-- messages are in the index, so intake pays nothing for it.
CREATE INDEX messages_finalized ON messages (state, finalized_at) WHERE finalized_at IS NOT NULL;

-- counters: the number of messages in each state (of 'state', key the
-- state) and of outbox rows of each kind of work for each target (of the
-- kind, key the target). Every instance of a site shares them, so a
-- transaction does not update a counter row (every transaction of every
-- instance would queue on the few rows of the hot states): it appends its
-- deltas to counter_deltas, and the janitor folds them into counters now
-- and then (Compact). A count is counters plus the deltas not yet folded,
-- read in one statement: exact at any time, after a crash too.
CREATE TABLE counters (
	of  text   NOT NULL,
	key text   NOT NULL,
	n   bigint NOT NULL,
	PRIMARY KEY (of, key)
);
CREATE TABLE counter_deltas (
	of  text   NOT NULL,
	key text   NOT NULL,
	n   bigint NOT NULL
);
INSERT INTO counters (of, key, n) SELECT 'state', state, count(*) FROM messages GROUP BY state;
INSERT INTO counters (of, key, n) SELECT kind, target, count(*) FROM outbox GROUP BY kind, target;
