-- 0003: the ring (multi-instance sites): the published assignment, which is
-- the fencing reference of every ring-fenced claim, and the epoch each
-- outbox row was claimed under.

-- ring_state is one row (id 1), there from the start, so that a fenced
-- claim always has a row to lock FOR SHARE and a publish always has one to
-- update: the two serialize on it. Epoch 0 means nothing was published.
-- epoch is the uint64 stored as its int64 bit pattern. members is the
-- published member list as JSON (kept for the status page and the next
-- master).
CREATE TABLE ring_state (
	id             integer PRIMARY KEY CHECK (id = 1),
	epoch          bigint NOT NULL,
	master         text NOT NULL,
	master_address text NOT NULL,
	members        text NOT NULL,
	published_at   timestamptz
);
INSERT INTO ring_state (id, epoch, master, master_address, members) VALUES (1, 0, '', '', 'null');

-- ring_owners: who works which tokens of a service under ring_state's
-- epoch. lo and hi are tokens as stored (the int64 bit pattern); the store
-- compares them as uint64, in Go. Ranges of a service do not overlap, so
-- their starts are distinct.
CREATE TABLE ring_owners (
	service text COLLATE "C" NOT NULL,
	lo      bigint NOT NULL,
	hi      bigint NOT NULL,
	owner   text COLLATE "C" NOT NULL,
	PRIMARY KEY (service, lo)
);

-- lease_epoch: the ring epoch of the claim that holds (or last held) the
-- lease; 0 for unfenced claims. A fenced outcome applies only while it is
-- still its own. A constant default adds the column without a rewrite.
ALTER TABLE outbox ADD COLUMN lease_epoch bigint NOT NULL DEFAULT 0;
