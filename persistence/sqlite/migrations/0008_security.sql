-- 0008: who may do what. The credential of each client's submission, the
-- secret that signs a webhook frontend's calls, the credentials of a node
-- that keeps them in its store, and the audit trail.
--
-- submitted_by is '' on a node without credentials and for a peer's
-- forward. A client credential lists its own messages newest first from
-- messages_submitted_by (its entries end with the rowid, seq); the index
-- holds only messages that have a submitter, and the list query names its
-- condition so that SQLite may use it.
ALTER TABLE messages ADD COLUMN submitted_by TEXT NOT NULL DEFAULT '';
CREATE INDEX messages_submitted_by ON messages (submitted_by) WHERE submitted_by <> '';

-- A webhook frontend's signing secret ('' = calls are not signed). It is
-- stored as given: signing needs it, a hash would not do.
ALTER TABLE frontends ADD COLUMN secret TEXT NOT NULL DEFAULT '';

-- Credentials: a token is stored only as its SHA-256 (hex), which is
-- unique: a lookup by hash names one credential. frontends is the list a
-- frontend credential is bound to, comma-separated (names hold no comma).
CREATE TABLE credentials (
    name         TEXT    PRIMARY KEY,
    role         TEXT    NOT NULL,
    token_sha256 TEXT    NOT NULL UNIQUE,
    frontends    TEXT    NOT NULL DEFAULT '',
    submit_rate  REAL    NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL
) STRICT;

-- The audit trail: appended in order (seq), read newest first, purged by
-- age (audit_at) on a retention of its own, never with messages.
CREATE TABLE audit (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    at     INTEGER NOT NULL,
    actor  TEXT    NOT NULL,
    role   TEXT    NOT NULL,
    remote TEXT    NOT NULL,
    action TEXT    NOT NULL,
    target TEXT    NOT NULL,
    detail TEXT    NOT NULL
) STRICT;
CREATE INDEX audit_at ON audit (at);
