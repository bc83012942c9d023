-- 0004: fewer index entries per message, and the columns the decision core
-- keeps in the row.
--
-- first_state and first_detail hold a message's first history entry (its
-- time is created_at), written with the message instead of as a history
-- row: one index insert less per accepted message. Messages accepted before
-- this migration keep their first entry in history (first_state '').
ALTER TABLE messages ADD COLUMN first_state text NOT NULL DEFAULT '',
	ADD COLUMN first_detail text NOT NULL DEFAULT '';

-- ExpireMessages walks only the messages that can expire, oldest
-- submission first: a partial index holds pending and retry messages
-- alone, so a delivered message leaves it instead of moving within it.
DROP INDEX messages_state_submitted;
CREATE INDEX messages_live ON messages (submitted_at, seq) WHERE state IN ('pending', 'retry');

-- ReleaseLeases (once per start) walks the leased rows of outbox_leased;
-- Stats' oldest outbox row is the first by id (new work for a message
-- replaces its row with a new one).
DROP INDEX outbox_lease_owner;
DROP INDEX outbox_created;
