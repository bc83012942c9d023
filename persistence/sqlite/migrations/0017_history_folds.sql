-- 0017: deferrals of the same attempt, one after another, fold into one
-- history entry (persistence.FoldsInto): its deferrals count them, at is
-- the first's time and last_at the last's (NULL for an entry that folded
-- none). The second entry, held by the message's row, has second_last_at.
ALTER TABLE history ADD COLUMN last_at INTEGER;
ALTER TABLE messages ADD COLUMN second_last_at INTEGER;
