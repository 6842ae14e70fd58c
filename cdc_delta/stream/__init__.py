"""Phase 1, the long-running stream: Spark's Kafka source, the query and its graceful stop, the merger
beside it (:mod:`.query`), the checkpoint checked at start (:mod:`.checkpoint`), the batch function
(:mod:`.batch`: decode, count, land in the changelog, dead letters, one log line), the broker watch,
replays of dead letters. It lands in :mod:`cdc_delta.changelog`, runs :mod:`cdc_delta.merger` and uses
the shared rooms (:mod:`cdc_delta.delta`, :mod:`cdc_delta.kafka`) for what it leaves to others."""
