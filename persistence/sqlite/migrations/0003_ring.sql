-- 0003: the ring (multi-instance sites): the published assignment, which is
-- the fencing reference of every ring-fenced claim, and the epoch each
-- outbox row was claimed under. The embedded store is one instance, but it
-- keeps the same contract as the shared one.

-- ring_state is one row (id 1), there from the start. Epoch 0 means
-- nothing was published. epoch is the uint64 stored as its int64 bit
-- pattern; members is the published member list as JSON; published_at is
-- unix microseconds (NULL before the first publish).
CREATE TABLE ring_state (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    epoch          INTEGER NOT NULL,
    master         TEXT    NOT NULL,
    master_address TEXT    NOT NULL,
    members        TEXT    NOT NULL,
    published_at   INTEGER
) STRICT;
INSERT INTO ring_state (id, epoch, master, master_address, members) VALUES (1, 0, '', '', 'null');

-- ring_owners: who works which tokens of a service under ring_state's
-- epoch. lo and hi are tokens as stored (the int64 bit pattern); the store
-- compares them as uint64, in Go.
CREATE TABLE ring_owners (
    service TEXT    NOT NULL,
    lo      INTEGER NOT NULL,
    hi      INTEGER NOT NULL,
    owner   TEXT    NOT NULL,
    PRIMARY KEY (service, lo)
) STRICT, WITHOUT ROWID;

-- lease_epoch: the ring epoch of the claim that holds (or last held) the
-- lease; 0 for unfenced claims.
ALTER TABLE outbox ADD COLUMN lease_epoch INTEGER NOT NULL DEFAULT 0;
