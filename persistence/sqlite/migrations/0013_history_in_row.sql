-- 0013: a message's second history entry is held by its row, as its first
-- is since 0004 (persistence.HeldByRow): a message accepted and then
-- delivered or forwarded, most of them, writes no history row, and its
-- purge deletes none. second_at is the entry's time. Messages that reached
-- their second entry before this migration keep it as a history row
-- (second_state ''); persistence.HistoryOf reads both.
ALTER TABLE messages ADD COLUMN second_state TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN second_at INTEGER;
ALTER TABLE messages ADD COLUMN second_detail TEXT NOT NULL DEFAULT '';
