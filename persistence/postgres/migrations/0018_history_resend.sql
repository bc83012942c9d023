-- 0018: a history entry keeps whether its claim was a resend (an earlier
-- attempt left no verdict: messages.HistoryEntry.Resend), which its
-- detail says for people ("resent: attempt n left no recorded verdict
-- ..."): the resend mark of an smpp frontend reads it instead of the
-- text. The second entry, held by the message's row, has second_resend.
-- Entries written before read false: their detail alone says it.
-- (Columns with a constant default: no table rewrite.)
ALTER TABLE history ADD COLUMN resend boolean NOT NULL DEFAULT false;
ALTER TABLE messages ADD COLUMN second_resend boolean NOT NULL DEFAULT false;
