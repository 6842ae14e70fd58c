"""Debezium connectors through the Kafka Connect REST API: the HTTP layer (:mod:`.http`), one method per
REST call (:mod:`.client`), connector files and secret redaction (:mod:`.files`), idempotent apply
(:mod:`.apply`)."""
