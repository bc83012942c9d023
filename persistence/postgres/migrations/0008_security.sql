-- 0008: who may do what. The credential of each client's submission, the
-- secret that signs a webhook frontend's calls, the credentials of a site
-- (every instance reads them here, so one revocation reaches them all),
-- and the audit trail.
--
-- submitted_by is '' on a node without credentials and for a peer's
-- forward. A client credential lists its own messages newest first from
-- messages_submitted_by; the index holds only messages that have a
-- submitter, and the list query names its condition so that the planner
-- may use it with a parameter.
ALTER TABLE messages ADD COLUMN submitted_by text NOT NULL DEFAULT '';
CREATE INDEX messages_submitted_by ON messages (submitted_by, seq) WHERE submitted_by <> '';

-- A webhook frontend's signing secret ('' = calls are not signed). It is
-- stored as given: signing needs it, a hash would not do.
ALTER TABLE frontends ADD COLUMN secret text NOT NULL DEFAULT '';

-- Credentials: a token is stored only as its SHA-256 (hex), which is
-- unique: a lookup by hash names one credential.
CREATE TABLE credentials (
	name         text COLLATE "C" PRIMARY KEY,
	role         text NOT NULL,
	token_sha256 text NOT NULL UNIQUE,
	frontends    text[] NOT NULL DEFAULT '{}',
	submit_rate  double precision NOT NULL DEFAULT 0,
	created_at   timestamptz NOT NULL
);

-- The audit trail: appended in order (seq), read newest first, purged by
-- age (audit_at) on a retention of its own, never with messages.
CREATE TABLE audit (
	seq    bigserial PRIMARY KEY,
	at     timestamptz NOT NULL,
	actor  text NOT NULL,
	role   text NOT NULL,
	remote text NOT NULL,
	action text NOT NULL,
	target text NOT NULL,
	detail text NOT NULL
);
CREATE INDEX audit_at ON audit (at);
