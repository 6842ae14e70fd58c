"""Archival deletes: the purges an operational database runs to stay small (a nightly ``DELETE ... WHERE
created < ...``), which the warehouse must keep. Per table, a source transaction that deletes at least
``min_rows`` of its rows is a purge: those rows stay live in the lake, marked archived (``_cdc_op = 'a'``),
where ``where`` (a Spark SQL condition on the deleted row) takes them, or where there is no ``where``."""

from __future__ import annotations

from pydantic import Field, field_validator

from cdc_delta.config.common import Frozen


class ArchivalDeletes(Frozen):
    """A table's purges kept: the rows a source transaction deletes by the ``min_rows`` or more stay live
    in the lake, ``_cdc_op = 'a'`` (of them, those ``where`` takes)."""

    min_rows: int = Field(ge=2)
    """A source transaction deleting at least this many rows of the table is a purge (one transaction: the
    changes of one MariaDB GTID; a MySQL source without GTIDs has no transaction cdc-delta can tell, and its
    deletes stay deletes)."""
    where: str | None = None
    """Of a purge's deletes, only those of rows this Spark SQL condition takes are archived (the others
    are deletes): ``status = 'closed'``. It must give the same answer every time for the same row (no
    ``current_date()``): a rebuild or a live view decides again. A change of it applies to the purges
    merged since; the stream checks at start that it parses."""

    @field_validator("where")
    @classmethod
    def _where(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("archival_deletes.where is empty: write one SQL condition on the deleted row")
        return value
