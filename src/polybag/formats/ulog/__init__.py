"""PX4 ULog: reader (:mod:`.reader`), writer (:mod:`.writer`), records and PX4 events."""
