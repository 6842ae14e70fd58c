"""Demo tools, not the product's data path: a Debezium-shaped change generator, a Kafka producer, and
an in-process demo of the batch function."""
