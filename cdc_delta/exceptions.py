"""The exceptions cdc-delta raises, and the exit codes the commands end with. Every message names the
bad input and what to do about it."""

from __future__ import annotations

EXIT_ATTENTION = 1
"""Done, and something needs a person: data differ (``check``), a table is stopped or behind (``status``),
a connector's task failed, some dead letters still fail, the stream failed."""
EXIT_CONFIG = 2
"""Refused before anything was done: the config, an argument or the state on disk is wrong. Restarting
does not help until it is fixed."""
EXIT_UNAVAILABLE = 69
"""EX_UNAVAILABLE: a service the command needs (Kafka, Kafka Connect, the schema registry, the metastore,
the source database) cannot be reached; nothing was lost. Restart later."""
EXIT_NOT_READY = 75
"""EX_TEMPFAIL: not ready yet (the snapshot's input is not complete), or another run of the job holds its
lock; nothing was done. Retry later."""


class CdcDeltaError(Exception):
    """Base class of every error cdc-delta raises on purpose."""


def exit_code_for(exc: BaseException) -> int:
    """The exit code of a command that ended with ``exc``: :data:`EXIT_UNAVAILABLE` for a service out of
    reach, :data:`EXIT_CONFIG` for any other refusal of cdc-delta's, 1 for the unexpected."""
    if isinstance(exc, Unavailable):
        return EXIT_UNAVAILABLE
    return EXIT_CONFIG if isinstance(exc, CdcDeltaError) else EXIT_ATTENTION


class ConfigError(CdcDeltaError):
    """The configuration file or an override is invalid; raised before any work starts."""


class SchemaChangeError(CdcDeltaError):
    """A source column changed type in a way the Delta table cannot follow; that table stops."""


class SchemasMissing(CdcDeltaError):
    """Landed changes of some tables refer to Connect schemas the changelog's schemas table does not hold:
    their images cannot be read; those tables stop (the merger), the read fails (a view, a rebuild)."""

    def __init__(self, message: str, tables: dict[str, list[str]]) -> None:
        super().__init__(message)
        self.tables = tables
        """Each table whose changes cannot be read, with the schema refs it lacks."""

    def reason_for(self, table: str) -> str:
        """Why ``table`` stops, and what to do."""
        refs = ", ".join(self.tables[table])
        return (
            f"table {table}: the Connect schema(s) {refs} of its landed changes are not in the changelog's "
            "schemas table, so their images cannot be read. The table is stopped and its changes stay pending "
            "in the changelog; restore the schemas table (<changelog>_schemas) from a backup, then "
            f"`cdc-delta resume-table --table {table}` and restart the stream: it merges them"
        )


class SparkSetupError(CdcDeltaError):
    """The Spark session cannot be built as configured (missing jars, bad Spark setting)."""


class Unavailable(CdcDeltaError):
    """A service the command needs cannot be reached (:data:`EXIT_UNAVAILABLE`)."""


class ConnectorError(CdcDeltaError):
    """The Kafka Connect REST API refused or failed a request."""


class ConnectUnavailable(ConnectorError, Unavailable):
    """No Kafka Connect worker answered."""


class ConnectorConflict(ConnectorError, Unavailable):
    """Kafka Connect is rebalancing or the connector is being changed by someone else."""


class ConnectorNotFound(ConnectorError):
    """The named connector does not exist on the Kafka Connect cluster."""


class SnapshotError(CdcDeltaError):
    """The nightly snapshot cannot be built or published as asked; nothing was published."""


class NotReady(CdcDeltaError):
    """The stream has not passed the snapshot's cut-off yet; nothing was touched. Retry later."""


class SchemaRegistryError(CdcDeltaError):
    """The schema registry cannot be reached or refused a request; the batch fails, nothing is dead-lettered."""


class RegistryUnavailable(SchemaRegistryError, Unavailable):
    """The schema registry did not answer."""


class MetastoreUnavailable(SnapshotError, Unavailable):
    """The Hive metastore did not accept a connection."""


class KafkaRefused(ConfigError):
    """The brokers refused this client: its credentials, or the ACLs its user lacks (fix, then restart)."""


class KafkaUnavailable(Unavailable):
    """The Kafka brokers cannot be reached; nothing was read or written."""


class TableUnavailable(CdcDeltaError):
    """A replicated table was deleted or replaced under the stream; that table stops, its changes pending."""


class CheckpointMismatch(CdcDeltaError):
    """The stream's checkpoint does not match what the tables recorded (older, or corrupt); nothing was read."""


class QueryError(CdcDeltaError):
    """A SQL query given to ``cdc-delta sql`` cannot be parsed or analysed; nothing was read."""


class ConcurrentStreamError(CdcDeltaError):
    """Another stream lands into the same changelog (the same ``app_id`` and storage root); this one stops."""


class RepairError(CdcDeltaError):
    """A repair (``resnapshot``) cannot be asked for as given; nothing was sent to the connector."""


def one_line(exc: BaseException, limit: int = 400) -> str:
    """The exception's type and the first line of its message (a JVM error's holds its whole trace)."""
    java = getattr(exc, "java_exception", None)  # py4j's error: its own text only names the call
    lines = [line.strip() for line in str(java if java is not None else exc).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    if len(text) > limit:
        text = text[:limit] + "..."
    if java is not None:
        return text  # the Java exception's class and message
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
