-- 0018: the SMS message class (messages.Options.MessageClass, GSM 03.38):
-- 0 to 3, NULL for none (every message stored before it).
ALTER TABLE messages ADD COLUMN message_class INTEGER;
