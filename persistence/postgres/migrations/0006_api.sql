-- 0006: the message fields of API v2, the search indexes, and the sweep of
-- per-message validity.
--
-- data_coding is '' (unspecified), gsm7, ucs2 or binary. body_binary holds
-- a binary message's bytes (NULL for text; body is then ''). validity_until
-- and deliver_after are the client's per-message times, NULL when not
-- given.
ALTER TABLE messages ADD COLUMN data_coding text NOT NULL DEFAULT '',
	ADD COLUMN body_binary bytea,
	ADD COLUMN validity_until timestamptz,
	ADD COLUMN deliver_after timestamptz;

-- Search (GET /api/messages?destination=&source=&since=&until=). Numbers are
-- compared without their leading '+', in byte order (COLLATE "C": a prefix
-- is a plain index range whatever the server's locale), then by seq, so an
-- exact number is read newest first from the index. A time range without a
-- number walks messages_created. Each costs an index insert per accepted
-- message (docs/performance.md).
CREATE INDEX messages_destination ON messages ((ltrim(destination_msisdn, '+') COLLATE "C"), seq);
CREATE INDEX messages_source ON messages ((ltrim(source_msisdn, '+') COLLATE "C"), seq);
CREATE INDEX messages_created ON messages (created_at, seq);

-- ExpireMessages: messages whose own validity_until passes before the
-- node's validity would. Only such messages, while they can expire, are in
-- it.
CREATE INDEX messages_valid_until ON messages (validity_until, seq)
	WHERE validity_until IS NOT NULL AND state IN ('pending', 'retry');
