"""Phase 1, the long-running stream: Spark's Kafka source, the query and its graceful stop
(:mod:`.query`), the checkpoint checked at start (:mod:`.checkpoint`), the batch function
(:mod:`.batch`: decode, count, apply, dead letters, one log line), the broker watch, replays of dead
letters. It uses the merger to apply each table's changes and the shared rooms (:mod:`cdc_delta.delta`,
:mod:`cdc_delta.kafka`) for what it leaves to others."""
