-- 0009: a message's trace. traceparent is the W3C trace context of the
-- span its later spans are children of (its submit, or its receipt from a
-- peer), kept so that a retry hours later, a restart or a drain after a
-- partition continues the same trace. '' when its trace was not sampled
-- (the default sampler keeps a small share of new traces).
ALTER TABLE messages ADD COLUMN traceparent text NOT NULL DEFAULT '';
