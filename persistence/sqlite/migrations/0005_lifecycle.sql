-- 0005: the storage life cycle: when a message came to rest (retention
-- counts from it), and counts that are maintained instead of counted.
--
-- finalized_at: when the message entered its resting state (delivered,
-- failed, forward_failed, or forwarded: see persistence.Resting); NULL in
-- every other state. Messages already at rest take their last change as
-- that time.
ALTER TABLE messages ADD COLUMN finalized_at INTEGER;
UPDATE messages SET finalized_at = updated_at
    WHERE state IN ('delivered', 'failed', 'forward_failed', 'forwarded');

-- The cleaner walks each resting state oldest first. Only resting messages
-- are in the index, so intake pays nothing for it; a message enters it
-- once, when it comes to rest.
CREATE INDEX messages_finalized ON messages (state, finalized_at) WHERE finalized_at IS NOT NULL;

-- counters: the number of messages in each state (of 'state', key the
-- state) and of outbox rows of each kind of work for each target (of the
-- kind, key the target), kept by the transaction of every change
-- (persistence.Counts). Stats reads them instead of counting.
CREATE TABLE counters (
    of  TEXT    NOT NULL,
    key TEXT    NOT NULL,
    n   INTEGER NOT NULL,
    PRIMARY KEY (of, key)
) STRICT, WITHOUT ROWID;
INSERT INTO counters (of, key, n) SELECT 'state', state, count(*) FROM messages GROUP BY state;
INSERT INTO counters (of, key, n) SELECT kind, target, count(*) FROM outbox GROUP BY kind, target;
