-- 0007: the delivery bus (NATS JetStream, --nats-url; the bus runs only on
-- the shared store, but both stores keep the same outbox). The outbox stays
-- the durable record of delivery work; the relay publishes each delivery
-- row to the bus once and marks it relayed.
--
-- relayed: 1 once the row's work is in the bus. Every delivery row starts
-- unrelayed, so that work written before the bus was enabled, or while it
-- was down, is relayed once it runs. relay_until: a relay has taken the row
-- to publish it until then (microseconds, like every time here).
ALTER TABLE outbox ADD COLUMN relayed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN relay_until INTEGER;

-- The relay's work, oldest first: only delivery rows not yet relayed.
CREATE INDEX outbox_relay ON outbox (id) WHERE kind = 'delivery' AND relayed = 0;
