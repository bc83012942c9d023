-- 0017: the SMS message class (messages.Options.MessageClass, GSM 03.38):
-- 0 to 3, NULL for none (every message stored before it).
-- (A nullable column without a default: no table rewrite.)
ALTER TABLE messages ADD COLUMN message_class smallint;
