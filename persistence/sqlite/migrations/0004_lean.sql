-- 0004: fewer index entries per message, and the columns the decision core
-- keeps in the row.
--
-- history_len counts a message's history entries, its first one included:
-- the next entry's ordinal is history_len + 1, known without reading the
-- history (the decision core numbers entries as it appends them).
--
-- first_state and first_detail hold a message's first history entry (its
-- time is created_at), written with the message instead of as a history
-- row: one B-tree insert less per accepted message. Messages accepted before
-- this migration keep their first entry in history (first_state '').
ALTER TABLE messages ADD COLUMN history_len INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN first_state TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN first_detail TEXT NOT NULL DEFAULT '';
UPDATE messages SET history_len = (SELECT count(*) FROM history h WHERE h.message_id = messages.id);

-- ExpireMessages walks only the messages that can expire, oldest
-- submission first: a partial index holds pending and retry messages
-- alone, so a delivered message leaves it instead of moving within it.
DROP INDEX messages_state_submitted;
CREATE INDEX messages_live ON messages (submitted_at) WHERE state IN ('pending', 'retry');

-- ReleaseLeases (once per start) walks the leased rows of outbox_lease;
-- Stats' oldest outbox row is the first by id (rows are never renumbered:
-- new work for a message replaces its row with a new one).
DROP INDEX outbox_owner;
DROP INDEX outbox_created;
