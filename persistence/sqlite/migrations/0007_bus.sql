-- 0007: the delivery bus (NATS JetStream, --nats-url; the bus runs only on
-- the shared store, but both stores keep the same outbox). The outbox stays
-- the durable record of delivery work; the relay takes each delivery row
-- for the bus once, marking it relayed.
--
-- relayed: 1 once a relay took the row's work for the bus (or it was
-- handed over in memory to a worker at once: see
-- persistence.WorkAdd.Relayed). Every other delivery row starts unrelayed,
-- so that work written before the bus was enabled, or while it was down, is
-- relayed once it runs.
ALTER TABLE outbox ADD COLUMN relayed INTEGER NOT NULL DEFAULT 0;

-- The relay's work, oldest first: only delivery rows not yet relayed.
CREATE INDEX outbox_relay ON outbox (id) WHERE kind = 'delivery' AND relayed = 0;
