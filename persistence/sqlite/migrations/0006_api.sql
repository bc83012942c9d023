-- 0006: the message fields of API v2, the search indexes, and the sweep of
-- per-message validity.
--
-- data_coding is '' (unspecified), gsm7, ucs2 or binary. body_binary holds
-- a binary message's bytes (NULL for text; body is then ''). validity_until
-- and deliver_after are the client's per-message times, unix microseconds,
-- NULL when not given.
ALTER TABLE messages ADD COLUMN data_coding TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN body_binary BLOB;
ALTER TABLE messages ADD COLUMN validity_until INTEGER;
ALTER TABLE messages ADD COLUMN deliver_after INTEGER;

-- Search (GET /api/messages?destination=&source=&since=&until=). Numbers are
-- compared without their leading '+', so each index is on that expression;
-- its rows end with the rowid (seq), so an exact number is read newest
-- first from the index alone, and a prefix is an index range. A time range
-- without a number walks messages_created (created_at, then seq). Each
-- costs an index insert per accepted message (docs/performance.md).
CREATE INDEX messages_destination ON messages (ltrim(destination_msisdn, '+'));
CREATE INDEX messages_source ON messages (ltrim(source_msisdn, '+'));
CREATE INDEX messages_created ON messages (created_at);

-- ExpireMessages: messages whose own validity_until passes before the
-- node's validity would. Only such messages, while they can expire, are in
-- it.
CREATE INDEX messages_valid_until ON messages (validity_until)
    WHERE validity_until IS NOT NULL AND state IN ('pending', 'retry');
