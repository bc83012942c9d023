-- 0007: the delivery bus (NATS JetStream, --nats-url). The outbox stays the
-- durable record of delivery work; the relay takes each delivery row for
-- the bus once, marking it relayed.
--
-- relayed: a relay took the row's work for the bus (or it was handed over
-- in memory to a worker at once: see persistence.WorkAdd.Relayed). Every
-- other delivery row starts unrelayed, also when no bus is configured, so
-- that work written before the bus was enabled, or while it was down, is
-- relayed once it runs. A constant default adds the column without a
-- rewrite.
ALTER TABLE outbox ADD COLUMN relayed boolean NOT NULL DEFAULT false;

-- The relay's work, oldest first: only delivery rows not yet relayed are in
-- the index, so a relayed (or forward) row costs it nothing.
CREATE INDEX outbox_relay ON outbox (id) WHERE kind = 'delivery' AND NOT relayed;
