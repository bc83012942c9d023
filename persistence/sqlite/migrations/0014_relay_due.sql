-- 0014: the bus carries only work that is due (persistence/bus.go): the
-- relay takes unrelayed delivery rows due now, earliest due first, and
-- OldestUnrelayed reads the earliest due time. outbox_relay is keyed by
-- due_at (the rowid is its last key column: ties go oldest first), so
-- that rows scheduled ahead cost the relay's take nothing: it reads the
-- index from its start and stops at the first row not yet due, instead
-- of walking past every one of them in id order.
DROP INDEX outbox_relay;
CREATE INDEX outbox_relay ON outbox (due_at) WHERE relayed = 0 AND +kind = 'delivery';
