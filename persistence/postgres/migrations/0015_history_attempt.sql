-- 0015: a history entry keeps the delivery attempt it speaks for and
-- whether it was a deferral (messages.HistoryEntry.Attempt, Deferrals),
-- which its detail says for people: programs (the resend mark of an smpp
-- frontend) read these instead of the text. The second entry, held by the
-- message's row, has them as second_attempt and second_deferrals. Entries
-- written before read 0, 0: their detail alone says it. (Columns with a
-- constant default: no table rewrite.)
ALTER TABLE history ADD COLUMN attempt integer NOT NULL DEFAULT 0,
	ADD COLUMN deferrals integer NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN second_attempt integer NOT NULL DEFAULT 0,
	ADD COLUMN second_deferrals integer NOT NULL DEFAULT 0;
