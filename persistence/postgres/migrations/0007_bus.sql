-- 0007: the delivery bus (NATS JetStream, --nats-url). The outbox stays the
-- durable record of delivery work; the relay publishes each delivery row
-- to the bus once and marks it relayed.
--
-- relayed: the row's work is in the bus (its publish was acknowledged by
-- the stream). Every delivery row starts unrelayed, also when no bus is
-- configured, so that work written before the bus was enabled, or while it
-- was down, is relayed once it runs. relay_until: a relay has taken the row
-- to publish it until then; another relay skips it meanwhile. A constant
-- default adds the columns without a rewrite.
ALTER TABLE outbox ADD COLUMN relayed boolean NOT NULL DEFAULT false,
	ADD COLUMN relay_until timestamptz;

-- The relay's work, oldest first: only delivery rows not yet relayed are in
-- the index, so a relayed (or forward) row costs it nothing.
CREATE INDEX outbox_relay ON outbox (id) WHERE kind = 'delivery' AND NOT relayed;
