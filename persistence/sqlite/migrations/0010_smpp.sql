-- 0010: the message ids an smpp frontend's SMSC gave the messages it
-- accepted (one per submit_sm: a long text sent in parts has one per
-- part), by (frontend, SMSC id): a delivery receipt names only that id.
-- An SMSC that reuses an id names the newest message (the row is
-- replaced). receipt is the stat of the latest receipt ('' before one).
-- The rows go with their message when it is purged.
CREATE TABLE smsc_refs (
    frontend        TEXT    NOT NULL,
    smsc_message_id TEXT    NOT NULL,
    message_id      TEXT    NOT NULL,
    part            INTEGER NOT NULL,
    at              INTEGER NOT NULL,
    receipt         TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (frontend, smsc_message_id)
) WITHOUT ROWID;
CREATE INDEX smsc_refs_message ON smsc_refs (message_id);
