-- 0019: a history entry keeps whether its claim was a resend (an earlier
-- attempt left no verdict: messages.HistoryEntry.Resend), which its
-- detail says for people ("resent: attempt n left no recorded verdict
-- ..."): the resend mark of an smpp frontend reads it instead of the
-- text. The second entry, held by the message's row, has second_resend.
-- Entries written before read 0: their detail alone says it.
ALTER TABLE history ADD COLUMN resend INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN second_resend INTEGER NOT NULL DEFAULT 0;
