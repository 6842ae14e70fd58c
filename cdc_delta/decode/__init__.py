"""Decoding a micro-batch of Kafka records into change events, on the executors: Debezium JSON in the
JVM with Spark's own functions (:mod:`.jvm`, :mod:`.connect_values`), the reference decoder as a UDF for
what the JVM leaves, Avro over Arrow batches (:mod:`.avro`) with the schema registry client
(:mod:`.registry`); every way ends in the same struct (:mod:`.decoded`); :mod:`.batch` picks the way."""
