-- 0020: the stored ring assignment keeps the members its master saw
-- lately and no longer lists (persistence.RingState.Absent: JSON, '' for
-- none), with what they announced, so that an instance that starts
-- meanwhile knows them (ring.Roster). A master of an earlier version
-- leaves it as it was.
ALTER TABLE ring_state ADD COLUMN absent TEXT NOT NULL DEFAULT '';
