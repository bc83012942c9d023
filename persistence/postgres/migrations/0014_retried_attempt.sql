-- 0014: retried_attempt is the message's attempt whose retry made the row
-- due again (persistence.WorkRow.RetriedAttempt), 0 when none did. A retry
-- of that attempt again (a pull frontend's ack sent twice) is already
-- recorded: it does not push the next attempt back. Existing rows start at
-- 0: the first such repeat after the upgrade is recorded once more.
ALTER TABLE outbox ADD COLUMN retried_attempt integer NOT NULL DEFAULT 0;
