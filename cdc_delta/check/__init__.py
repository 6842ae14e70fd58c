"""``cdc-delta check``: source probes. Per table, the source database's live rows against Delta's,
allowing for the stream's lag (:mod:`.run`), from the source (:mod:`.source_db`), the Delta table read
with delta-rs (:mod:`.delta_side`) and Kafka (:mod:`.kafka_side`)."""
