-- 0012: a partial index whose condition names a column by value makes
-- SQLite re-plan every statement that binds that column. When the planner
-- checks whether "kind = ?1" implies outbox_relay's "kind = 'delivery'",
-- it compares the bound value and marks the statement to be prepared again
-- whenever ?1 is bound anew: every claim, lease-end and next-due query of
-- the outbox was parsed and planned on each run (over half of the store's
-- CPU under a delivery load). The unary plus keeps the condition out of
-- that comparison; the relay's queries say "+kind = 'delivery'" to use the
-- index (Postgres has no such planner rule: its outbox_relay is unchanged).
DROP INDEX outbox_relay;
CREATE INDEX outbox_relay ON outbox (id) WHERE relayed = 0 AND +kind = 'delivery';
