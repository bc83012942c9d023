-- 0016: a history entry keeps the delivery attempt it speaks for and
-- whether it was a deferral (messages.HistoryEntry.Attempt, Deferrals),
-- which its detail says for people: programs (the resend mark of an smpp
-- frontend) read these instead of the text. The second entry, held by the
-- message's row, has them as second_attempt and second_deferrals. Entries
-- written before read 0, 0: their detail alone says it.
ALTER TABLE history ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE history ADD COLUMN deferrals INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN second_attempt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN second_deferrals INTEGER NOT NULL DEFAULT 0;
