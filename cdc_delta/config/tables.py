"""One replicated table: its routing, key, column types, stock export and source count."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from cdc_delta.columns import SHARD_KEY
from cdc_delta.config.archival import ArchivalDeletes
from cdc_delta.config.common import IDENTIFIER, Frozen, PasswordSource, absolute, check_regex
from cdc_delta.config.history import History
from cdc_delta.config.masking import MaskRule
from cdc_delta.events import column_types
from cdc_delta.events.routing import NameTemplate

SOURCE_PLACEHOLDERS = ("db", "table")
"""What a pattern entry's name may hold besides the named groups of its ``topic_pattern``: the event's
``source.db`` and ``source.table``."""
ONE_TABLE_SETTINGS = ("topics", "path", "columns", "stock", "source_count_path", "source_count_jdbc", "check_source")
"""Settings of one table that a pattern entry (many tables) cannot have."""


class StockExportConfig(Frozen):
    """The full export of a table as DataX writes it: the nightly snapshot's base the first time.

    Text files have no header; their fields follow the table's ``columns`` in order.
    """

    path: str
    """A folder of export files (every file in it not starting with '.' or '_'), or a glob such as
    ``/exports/orders/orders__*``."""
    format: Literal["text", "parquet", "orc"] = "text"
    """``text``: delimited lines; ``parquet``/``orc``: columns in table order (their names are ignored)."""
    delimiter: str = "\t"
    """Field delimiter of text files, one or more characters (``"\\t"``, ``"\\u0001"``, ``","``
    in YAML double quotes)."""
    null_marker: str = "\\N"
    """A field equal to this is NULL (DataX writes ``\\N``)."""
    compression: Literal["auto", "none", "gzip", "bzip2"] = "auto"
    """Compression of text files; ``auto`` tells gzip and bzip2 by their first bytes."""
    encoding: str = "utf-8"
    """Character encoding of text files; a line that does not decode is rejected."""

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        return str(absolute(value))

    @field_validator("delimiter")
    @classmethod
    def _delimiter(cls, value: str) -> str:
        if not value or "\n" in value or "\r" in value:
            raise ValueError("stock.delimiter must be one or more characters other than a newline")
        return value

    @field_validator("encoding")
    @classmethod
    def _encoding(cls, value: str) -> str:
        try:
            "".encode(value)
        except LookupError:
            raise ValueError(f"stock.encoding {value!r} is not an encoding Python knows (e.g. utf-8, gbk)") from None
        return value


class SourceCountJdbc(PasswordSource):
    """Count the source table over JDBC when the snapshot is published (MariaDB or MySQL)."""

    SECTION: ClassVar[str] = "source_count_jdbc"

    url: str
    """``jdbc:mariadb://host:3306/shop`` (the bundled MariaDB driver also serves MySQL servers);
    never with the password in it."""
    query: str
    """The count, e.g. ``SELECT COUNT(*) FROM orders``: its first column of the first row is used."""
    user: str | None = None
    """The database user of the count; its password comes from ``password_env`` or ``password_file``."""
    driver: str = "org.mariadb.jdbc.Driver"
    """JDBC driver class; the bundled MariaDB driver serves ``jdbc:mariadb:`` and ``jdbc:mysql:`` URLs."""

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith("jdbc:"):
            raise ValueError(f"source_count_jdbc.url {value!r} must be a JDBC URL (jdbc:mariadb://host:3306/db)")
        if "password" in value.lower():
            raise ValueError(
                "source_count_jdbc.url must not hold the password: set password_env or password_file instead"
            )
        return value


class TableConfig(Frozen):
    """One logical table: which events feed it, its key, and optionally its column types."""

    name: str
    """Logical name, ``db.table`` or ``table`` (letters, digits, underscores). Or, in a *pattern entry*
    that makes one table per source table, a template: ``{db}.{table}`` (the event's source database and
    table), literal parts (``shop.{table}``) and named groups of ``topic_pattern`` (``{name}`` for
    ``(?P<name>...)``)."""
    topics: list[str] = Field(default_factory=list)
    """Topics whose events belong to this table."""
    topic_pattern: str | None = None
    """Or a Python regex matched against the whole topic name."""
    source_database: str | None = None
    """Regex matched against the whole ``source.db`` of each event (shards: ``shop_[0-7]``)."""
    source_table: str | None = None
    """Regex matched against the whole ``source.table`` of each event (shards: ``orders_\\d{3}``)."""
    key: list[str] = Field(default_factory=list, validate_default=True)
    """Primary-key columns, in order. A pattern entry without one takes each table's key from Debezium's
    record key (the table's primary key), recorded in the table index when the table is first landed."""
    key_includes_source: bool = False
    """Add the shard (source db and table) to the key, for shards that reuse primary keys."""
    columns: dict[str, str] = Field(default_factory=dict)
    """Column types (Spark SQL names) for events that carry no Connect schema. Columns the events'
    own schema describes take the schema's type."""
    path: str | None = None
    """Override of the table location; default ``<storage.root>/<db>/<table>``."""
    zorder_by: list[str] = Field(default_factory=list)
    """Columns to cluster by when maintenance runs OPTIMIZE (default: the key)."""
    stock: StockExportConfig | None = None
    """The table's full export (DataX), the nightly snapshot's base the first time. Without it the
    first snapshot holds only what the stream captured (enough when Debezium's initial snapshot ran)."""
    source_count_path: str | None = None
    """A file holding the source table's row count at the cut-off (one integer), written by the export
    job; ``{date}`` is replaced by the snapshot date. The snapshot report compares its count with it."""
    check_source: str | None = None
    """The source table ``cdc-delta check`` compares this table with, ``db.table``; default the
    logical name (tables whose key includes the shard are not checked)."""
    mask: dict[str, str] = Field(default_factory=dict)
    """Columns Debezium masks before they reach Kafka (``connectors apply`` sets it up), each with its rule:
    ``hash`` (salted SHA-256, salt from ``masking``), ``stars N`` or ``truncate N``. String columns only;
    never a key column (Debezium does not mask the Kafka key). A pattern entry names its source with
    source_database and source_table."""
    archival_deletes: ArchivalDeletes | None = None
    """Purges kept: a source transaction deleting at least ``min_rows`` rows of the table leaves them live,
    marked archived (``_cdc_op = 'a'``); ``where`` limits it to the rows a condition takes. Off: every
    delete is a delete."""
    history: History | None = None
    """Keep every version of every row (SCD type 2) in a history table beside it, read as
    ``hist.<db>_<table>`` in ``cdc-delta sql``: ``true``, or ``{columns: [...]}`` /
    ``{except_columns: [...]}`` for the columns whose changes open a version. Off: the table only."""
    source_count_jdbc: SourceCountJdbc | None = None
    """Or count the source table over JDBC when the snapshot is published (the source keeps changing:
    the difference then includes the changes since the cut-off)."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NameTemplate(value).looks_valid():
            raise ValueError(
                f"table name {value!r} must look like db.table or table (letters, digits, _), or be a template "
                "such as {db}.{table} in a pattern entry"
            )
        return value

    @property
    def row_key(self) -> list[str]:
        """The columns that name one row of the Delta table: the key, then the shard where it is part of it."""
        return [*self.key, *(SHARD_KEY if self.key_includes_source else ())]

    @property
    def is_pattern(self) -> bool:
        """A pattern entry: one table per source table its route matches, named by the ``name`` template."""
        return NameTemplate.is_template(self.name)

    def made(self, name: str, key: Sequence[str] = ()) -> TableConfig:
        """This pattern entry's table named ``name``: its settings, routed by the entry's route, and its key:
        the entry's, else ``key`` (Debezium's record key, as the table index records it)."""
        return self.model_copy(update={"name": name, "key": list(self.key or key)})

    @field_validator("key")
    @classmethod
    def _key(cls, value: list[str], info: ValidationInfo) -> list[str]:
        if not value and not NameTemplate.is_template(info.data.get("name") or ""):
            raise ValueError("key must name at least one primary-key column, e.g. key: [id]")
        for col in value:
            if not IDENTIFIER.fullmatch(col) or col.startswith("_cdc_"):
                raise ValueError(f"key column {col!r} must be a plain identifier not starting with _cdc_")
        return value

    @field_validator("columns")
    @classmethod
    def _columns(cls, value: dict[str, str]) -> dict[str, str]:
        out = {}
        for col, type_name in value.items():
            if not IDENTIFIER.fullmatch(col) or col.startswith("_cdc_"):
                raise ValueError(f"column {col!r} must be a plain identifier not starting with _cdc_")
            out[col] = column_types.normalize(type_name)
        return out

    @field_validator("history", mode="before")
    @classmethod
    def _history(cls, value: object) -> object:
        if value is True:
            return {}
        return None if value is False else value

    @field_validator("mask")
    @classmethod
    def _mask_rules(cls, value: dict[str, str]) -> dict[str, str]:
        for column, rule in value.items():
            if not IDENTIFIER.fullmatch(column) or column.startswith("_cdc_"):
                raise ValueError(f"mask: column '{column}' must be a plain identifier not starting with _cdc_")
            MaskRule.parse(str(rule), f"mask.{column}")
        return value

    def mask_rules(self) -> dict[str, MaskRule]:
        return {column: MaskRule.parse(rule, f"mask.{column}") for column, rule in self.mask.items()}

    def source_columns(self, column: str) -> list[str]:
        """Debezium's regular expressions naming ``column`` of this table's source tables
        (``db.table.column``): from source_database/source_table, else from each topic
        ``<prefix>.<db>.<table>``."""
        if self.source_database and self.source_table:
            return [f"{_debezium_part(self.source_database)}\\.{_debezium_part(self.source_table)}\\.{column}"]
        return [re.escape(".".join([*topic.split(".")[-2:], column])) for topic in self.topics]

    @model_validator(mode="after")
    def _masked_columns(self) -> TableConfig:
        keyed = sorted(c for c in self.mask if c.lower() in {k.lower() for k in self.key})
        if keyed:
            raise ValueError(
                f"table {self.name!r}: mask: {', '.join(keyed)} is in the key: Debezium never masks the Kafka key, "
                "so it would reach Kafka and the lake in plain text; leave it out of mask:"
            )
        unusable = [r for r in (self.source_database, self.source_table) if r and ("(?P<" in r or "," in r)]
        if self.mask and unusable:
            raise ValueError(
                f"table {self.name!r}: mask: Debezium splits its list of column patterns at commas and reads "
                "Java's regex syntax: write source_database and source_table without a comma (\\d+ for "
                f"\\d{{1,3}}) and without a named group (?P<...>): {', '.join(unusable)}"
            )
        if self.mask and not (self.source_database and self.source_table) and not self.topics:
            raise ValueError(
                f"table {self.name!r}: mask: needs the source tables named: set source_database and source_table "
                "(Debezium masks db.table.column), or topics"
            )
        return self

    @model_validator(mode="after")
    def _routed(self) -> TableConfig:
        check_regex(self.topic_pattern, "topic_pattern")
        check_regex(self.source_database, "source_database")
        check_regex(self.source_table, "source_table")
        if self.is_pattern:
            return self._pattern()
        if not (self.topics or self.topic_pattern or self.source_table):
            raise ValueError(f"table {self.name!r} has no route: set topics, topic_pattern or source_table")
        if self.check_source is not None and not re.fullmatch(r"[A-Za-z0-9_$]+\.[A-Za-z0-9_$]+", self.check_source):
            raise ValueError(f"table {self.name!r}: check_source {self.check_source!r} must be db.table")
        if self.source_count_path and self.source_count_jdbc:
            raise ValueError(f"table {self.name!r}: set source_count_path or source_count_jdbc, not both")
        if self.stock is not None:
            if not self.columns:
                raise ValueError(
                    f"table {self.name!r} has a stock export but no columns: list them in export order "
                    "under columns: (name: type), key columns included"
                )
            missing = [k for k in self.key if k not in self.columns]
            if missing:
                raise ValueError(f"table {self.name!r}: key column(s) {missing} missing from columns")
        return self

    def _pattern(self) -> TableConfig:
        """A pattern entry: routed by a regex, named per source table, no setting of one table only."""
        if not (self.topic_pattern or self.source_table or self.source_database):
            raise ValueError(
                f"pattern entry {self.name!r} has no route: set topic_pattern (e.g. 'shop\\.inventory\\..*'), "
                "source_database or source_table"
            )
        single = [s for s in ONE_TABLE_SETTINGS if getattr(self, s)]
        if self.key_includes_source:
            single.append("key_includes_source")
        if single:
            raise ValueError(
                f"pattern entry {self.name!r} cannot set {', '.join(single)}: they belong to one table; give that "
                "table its own entry above the pattern (the first entry that matches an event wins)"
            )
        groups = set(re.compile(self.topic_pattern).groupindex) if self.topic_pattern else set()
        unknown = [p for p in NameTemplate(self.name).placeholders if p not in SOURCE_PLACEHOLDERS and p not in groups]
        if unknown:
            raise ValueError(
                f"pattern entry {self.name!r}: {', '.join('{' + p + '}' for p in unknown)} is neither {{db}}, "
                "{table} nor a named group (?P<name>...) of its topic_pattern"
            )
        return self


def _debezium_part(regex: str) -> str:
    """A Python regex matched against a whole name, as one part of Debezium's ``db.table.column`` regular
    expression: anchors dropped (Debezium matches the whole name), grouped so that an alternation stays
    inside its part (commas and named groups are refused: :meth:`TableConfig._masked_columns`)."""
    return "(?:" + regex.removeprefix("^").removesuffix("$") + ")"
