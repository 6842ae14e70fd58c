"""Decoding a micro-batch of Kafka records into change events, on the executors: Debezium JSON in the
JVM by cdc-delta's own functions and Spark's (:mod:`.jvm`; images made canonical where changes are read,
:mod:`.canonical`), the reference decoder as a UDF for
what the JVM leaves, Avro over Arrow batches (:mod:`.avro`) with the schema registry client
(:mod:`.registry`); every way ends in the same struct (:mod:`.decoded`); :mod:`.batch` picks the way."""
