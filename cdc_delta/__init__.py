"""cdc-delta: replicate MySQL/MariaDB tables into Delta Lake from Debezium change events."""

__version__ = "0.1.0"
