"""The stream: Spark's Kafka source and graceful stop (:mod:`.stream`), the batch function (:mod:`.batch`)
and its steps (decode, typed rows, dedupe, schema evolution, the guarded MERGE, dead letters), and what
the stream leaves behind for others to read (commit metadata, consumer-group offsets, table status)."""
