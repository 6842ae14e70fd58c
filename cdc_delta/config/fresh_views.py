"""Fresh views kept in the metastore: every Spark SQL reader of it sees a table's pending changes."""

from __future__ import annotations

from pydantic import field_validator

from cdc_delta.config.common import Frozen, absolute, plain_identifier

LOCAL_JAR = "cdc-delta-decoder.jar"
"""cdc-delta's own jar, which ``make setup`` builds into the Spark jars folder."""


class FreshViewsConfig(Frozen):
    """Per replicated table ``db.name``: the views ``<database>.<db>_<name>`` (live rows) and
    ``<database>.<db>_<name>_all`` (soft-deleted rows kept) in the snapshot's metastore, over the Delta
    table and the changelog, so that any Spark session with that metastore reads a change within one
    trigger, whatever the merge delay (see :mod:`cdc_delta.views.fresh`)."""

    enabled: bool = False
    """The hourly maintenance registers the views again, after its work (their columns and where their
    reading of the changelog starts follow the tables); ``cdc-delta fresh-views --register`` does it at any
    time."""
    database: str = "cdc_fresh"
    """Hive database of the views and of the function they call."""
    function_jar: str | None = None
    """Where a reader's Spark loads the views' function from (``CREATE FUNCTION ... USING JAR``): a path or
    URI every reader can open. Default: cdc-delta's own jar in the Spark jars folder
    (``cdc-delta-decoder.jar``), which readers on this host can open; on a cluster, copy it to shared
    storage (``hdfs://``, ``s3a://``) under another file name and name it here: Spark refuses a second jar
    of the same file name in a session, and cdc-delta's own sessions hold the local one."""

    @field_validator("database")
    @classmethod
    def _database(cls, value: str) -> str:
        return plain_identifier(value, "fresh_views.database")

    @field_validator("function_jar")
    @classmethod
    def _jar(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.endswith(".jar"):
            raise ValueError(f"fresh_views.function_jar {value!r} must name a .jar file")
        if value.rstrip("/").rsplit("/", 1)[-1] == LOCAL_JAR:
            raise ValueError(
                f"fresh_views.function_jar {value!r}: copy the jar under another file name (say "
                f"cdc-delta-functions.jar): Spark refuses a second jar named {LOCAL_JAR} in cdc-delta's sessions, "
                "which load the local one; or leave the setting out to use the local one"
            )
        return absolute(value)
