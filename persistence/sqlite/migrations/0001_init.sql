-- 0001: the first schema.
--
-- Times are INTEGER unix microseconds (UTC), the precision every store keeps.
-- Tokens are the uint64 ring hash stored as its int64 bit pattern.

-- messages: seq is the rowid, so the table is appended to in acceptance order
-- and list cursors walk the primary key; id is the natural key every lookup
-- and foreign key uses. AUTOINCREMENT keeps seq from ever being reused.
CREATE TABLE messages (
    seq                INTEGER PRIMARY KEY AUTOINCREMENT,
    id                 TEXT    NOT NULL UNIQUE,
    token              INTEGER NOT NULL,
    source_msisdn      TEXT    NOT NULL,
    destination_msisdn TEXT    NOT NULL,
    body               TEXT    NOT NULL,
    state              TEXT    NOT NULL,
    source_smsc        TEXT    NOT NULL,
    dest_smsc          TEXT    NOT NULL,
    frontend           TEXT    NOT NULL,
    attempts           INTEGER NOT NULL DEFAULT 0,
    reason             TEXT    NOT NULL DEFAULT '',
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    submitted_at       INTEGER NOT NULL
) STRICT;

-- ListMessages with a state filter (newest first by seq) and Stats' GROUP BY
-- state, which reads this index instead of the table.
CREATE INDEX messages_state_seq ON messages (state, seq);
-- ExpireMessages: pending/retry messages submitted before the cutoff.
CREATE INDEX messages_state_submitted ON messages (state, submitted_at);

CREATE TABLE history (
    message_id TEXT    NOT NULL REFERENCES messages (id),
    ordinal    INTEGER NOT NULL,
    state      TEXT    NOT NULL,
    at         INTEGER NOT NULL,
    detail     TEXT    NOT NULL,
    PRIMARY KEY (message_id, ordinal)
) STRICT, WITHOUT ROWID;

CREATE TABLE outbox (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    kind        TEXT    NOT NULL,
    target      TEXT    NOT NULL,
    message_id  TEXT    NOT NULL REFERENCES messages (id),
    token       INTEGER NOT NULL,
    due_at      INTEGER NOT NULL,
    lease_owner TEXT,
    lease_until INTEGER,
    created_at  INTEGER NOT NULL
) STRICT;

-- ClaimWork: due rows of one kind and target in (due_at, id) order; the rowid
-- is the last key column, so the index order is the claim order.
CREATE INDEX outbox_claim ON outbox (kind, target, due_at);
-- ClaimWork's NextDue: the earliest live lease of one kind and target.
CREATE INDEX outbox_lease ON outbox (kind, target, lease_until) WHERE lease_until IS NOT NULL;
-- CompleteWork, ExpireMessages and Resubmit find a message's work; one row
-- per message, kind and target.
CREATE UNIQUE INDEX outbox_message ON outbox (message_id, kind, target);
-- ReleaseLeases by owner.
CREATE INDEX outbox_owner ON outbox (lease_owner) WHERE lease_owner IS NOT NULL;
-- Stats' OldestOutbox.
CREATE INDEX outbox_created ON outbox (created_at);

CREATE TABLE ledger (
    message_id TEXT    NOT NULL REFERENCES messages (id),
    target     TEXT    NOT NULL,
    result     TEXT    NOT NULL,
    at         INTEGER NOT NULL,
    detail     TEXT    NOT NULL,
    PRIMARY KEY (message_id, target)
) STRICT, WITHOUT ROWID;

CREATE TABLE routes (
    prefix     TEXT    NOT NULL PRIMARY KEY,
    frontend   TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE frontends (
    name       TEXT    NOT NULL PRIMARY KEY,
    mode       TEXT    NOT NULL,
    url        TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
