-- 0011: SMPP accounts. A credential with smpp set is an ESME's account:
-- its name is the system_id of a bind and its token (hashed like every
-- other) the bind's password, at most 8 characters (SMPP v3.4); the API
-- never takes it as a token.
ALTER TABLE credentials ADD COLUMN smpp boolean NOT NULL DEFAULT false;
