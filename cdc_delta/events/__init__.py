"""What a change event is and how it is read: the Debezium envelope, Connect logical types and the
column types they become, the ordering key, and the routing of topics and shards to logical tables.
Pure Python, no Spark."""
