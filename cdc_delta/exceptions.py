"""The exceptions cdc-delta raises. Every message names the bad input and what to do about it."""

from __future__ import annotations


class CdcDeltaError(Exception):
    """Base class of every error cdc-delta raises on purpose."""


class ConfigError(CdcDeltaError):
    """The configuration file or an override is invalid; raised before any work starts."""


class EnvelopeError(CdcDeltaError):
    """A Kafka record is not a change event cdc-delta can apply; the record goes to the dead letters."""


class SchemaChangeError(CdcDeltaError):
    """A source column changed type in a way the Delta table cannot follow; that table stops."""


class SparkSetupError(CdcDeltaError):
    """The Spark session cannot be built as configured (missing jars, bad Spark setting)."""


class ConnectorError(CdcDeltaError):
    """The Kafka Connect REST API refused or failed a request."""


class ConnectorNotFound(ConnectorError):
    """The named connector does not exist on the Kafka Connect cluster."""


class ConnectorConflict(ConnectorError):
    """Kafka Connect is rebalancing or the connector is being changed by someone else."""


class SnapshotError(CdcDeltaError):
    """The nightly snapshot cannot be built or published as asked; nothing was published."""


class NotReady(CdcDeltaError):
    """The stream has not passed the snapshot's cut-off yet; nothing was touched. Retry later."""


class SchemaRegistryError(CdcDeltaError):
    """The schema registry cannot be reached or refused a request; the batch fails, nothing is dead-lettered."""


class KafkaUnavailable(CdcDeltaError):
    """The Kafka brokers cannot be reached; nothing was read or written."""


class TableUnavailable(CdcDeltaError):
    """A replicated table was deleted or replaced under the stream; that table stops, its changes pending."""


class CheckpointMismatch(CdcDeltaError):
    """The stream's checkpoint does not match what the tables recorded (older, or corrupt); nothing was read."""


class QueryError(CdcDeltaError):
    """A SQL query given to ``cdc-delta sql`` cannot be parsed or analysed; nothing was read."""


class ConcurrentStreamError(CdcDeltaError):
    """Another stream lands into the same changelog (the same ``app_id`` and storage root); this one stops."""
