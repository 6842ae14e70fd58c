"""History (SCD type 2): every version of every row of a table, kept beside it. A version opens when a
change gives the row new values in the tracked columns (every business column, or those ``columns``
names, or all but ``except_columns``), and closes at the row's next version, its delete, or a truncate
of its source table; a change to untracked columns only updates the open version in place."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from cdc_delta.config.common import IDENTIFIER, Frozen


class History(Frozen):
    """A table's history: ``history: true``, or with the columns whose changes open a version."""

    columns: list[str] = Field(default_factory=list)
    """Only a change to one of these columns opens a new version; a change to the others updates the open
    version in place (Databricks' ``track_history_column_list``). Empty: every business column."""
    except_columns: list[str] = Field(default_factory=list)
    """Or every business column but these (``track_history_except_column_list``): a change to only these
    updates the open version in place."""

    @field_validator("columns", "except_columns")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        for column in value:
            if not IDENTIFIER.fullmatch(column) or column.startswith("_cdc_"):
                raise ValueError(f"history column {column!r} must be a plain identifier not starting with _cdc_")
        return value

    @model_validator(mode="after")
    def _one_list(self) -> History:
        if self.columns and self.except_columns:
            raise ValueError("history: give columns or except_columns, not both")
        return self

    def tracked(self, business: list[str]) -> list[str]:
        """Of the table's business columns, those whose change opens a version (names compared without
        case, as the source does)."""
        if self.columns:
            wanted = {c.lower() for c in self.columns}
            return [c for c in business if c.lower() in wanted]
        unwanted = {c.lower() for c in self.except_columns}
        return [c for c in business if c.lower() not in unwanted]
