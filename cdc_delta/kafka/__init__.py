"""What cdc-delta asks Kafka itself (librdkafka, not Spark): consumer-group offsets, end offsets and lag,
whether a broker answers (:mod:`.offsets`)."""
