"""Fresh views kept in the metastore: every Spark SQL reader of it sees a table's pending changes."""

from __future__ import annotations

from pydantic import field_validator

from cdc_delta.config.common import IDENTIFIER, Frozen, absolute


class FreshViewsConfig(Frozen):
    """Per replicated table ``db.name``: the views ``<database>.<db>_<name>`` (live rows) and
    ``<database>.<db>_<name>_all`` (soft-deleted rows kept) in the snapshot's metastore, over the Delta
    table and the changelog, so that any Spark session with that metastore reads a change within one
    trigger, whatever the merge delay (see :mod:`cdc_delta.views.fresh`)."""

    enabled: bool = False
    """The hourly maintenance registers the views again (their columns and where their reading of the
    changelog starts follow the tables); ``cdc-delta fresh-views --register`` does it at any time."""
    database: str = "cdc_fresh"
    """Hive database of the views and of the function they call."""
    function_jar: str | None = None
    """Where a reader's Spark loads the views' function from (``CREATE FUNCTION ... USING JAR``): a path or
    URI every reader can open. Default: cdc-delta's own jar in the Spark jars folder, which readers on
    this host can open; on a cluster, copy it to shared storage (``hdfs://``, ``s3a://``) and name it here."""

    @field_validator("database")
    @classmethod
    def _database(cls, value: str) -> str:
        if not IDENTIFIER.fullmatch(value):
            raise ValueError(f"fresh_views.database {value!r} must be a plain identifier")
        return value

    @field_validator("function_jar")
    @classmethod
    def _jar(cls, value: str | None) -> str | None:
        if value is not None and not value.endswith(".jar"):
            raise ValueError(f"fresh_views.function_jar {value!r} must name a .jar file")
        return absolute(value)
