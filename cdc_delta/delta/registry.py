"""The replicated tables the lake holds, each with the id of its Delta table: a table deleted or replaced
under the stream is recognised (its path holds no table, or a table with another id) and stopped,
instead of being silently re-created holding only the changes that come after.

The registry is a folder, ``<storage.root>/_cdc_tables``, with one small JSON file per table (its name,
path, Delta table id and when it was registered), written when the stream creates the table or first
writes a table that predates the registry: a file write, not a Delta commit, so that a batch into many
new tables pays nothing noticeable for it. Each file is read once per process, when its table is first
written; ``resume-table`` replaces a table's file once an operator has dealt with the loss.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
import urllib.parse
from dataclasses import dataclass

from pyspark.sql import SparkSession

from cdc_delta import hadoop_fs
from cdc_delta.config import AppConfig
from cdc_delta.exceptions import TableUnavailable

logger = logging.getLogger(__name__)


def registry_path(config: AppConfig) -> str:
    return f"{config.storage.root.rstrip('/')}/_cdc_tables"


def registry_file(folder: str, name: str) -> str:
    """Where table ``name``'s registration is, in the registry ``folder``."""
    return f"{folder}/{urllib.parse.quote(name, safe='')}.json"


@dataclass(frozen=True)
class KnownTable:
    """A table the stream has written, as registered."""

    name: str
    path: str
    table_id: str
    registered_at: str
    """UTC, ISO 8601."""


def parse_registration(text: str) -> KnownTable:
    """A registration file's content."""
    data = json.loads(text)
    return KnownTable(data["table"], data["path"], data["table_id"], data["registered_at"])


class TableRegistry:
    """The registered tables of one lake; thread-safe for the table workers."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        self.spark = spark
        self.path = path
        self._lock = threading.Lock()
        self._known: dict[str, KnownTable | None] = {}

    def _file(self, name: str) -> str:
        return registry_file(self.path, name)

    def get(self, name: str) -> KnownTable | None:
        """The table's registration (read once, then kept); None when it has none."""
        with self._lock:
            if name in self._known:
                return self._known[name]
        text = hadoop_fs.read_text(self.spark, self._file(name))
        known = None
        if text is not None:
            known = parse_registration(text)
        with self._lock:
            self._known[name] = known
        return known

    def check(self, name: str, path: str, table_id: str | None) -> None:
        """Raise :class:`TableUnavailable` when the table was registered with another Delta table than
        the one at ``path`` now (``table_id`` None: there is none)."""
        known = self.get(name)
        if known is None or known.table_id == table_id:
            return
        fix = (
            f"restore {path} from a backup of that table (the stream then goes on by itself after a restart, "
            f"merging what stayed pending), or accept the loss with `cdc-delta resume-table --table {name}` "
            "(the table is then made anew from the changes the changelog still holds) and re-read the table "
            f"from the source once the stream runs (`cdc-delta resnapshot --table {name} --delete-missing`)"
        )
        since = f"registered {known.registered_at} as Delta table {known.table_id}"
        if table_id is None:
            raise TableUnavailable(
                f"table {name} was deleted under the stream ({since}, no Delta table at {path} now): it is "
                f"stopped, not re-created holding only later changes, and its changes stay pending; {fix}"
            )
        raise TableUnavailable(
            f"table {name} was replaced under the stream ({since}, Delta table {table_id} at {path} now): it "
            f"is stopped and its changes stay pending; {fix}"
        )

    def register(self, name: str, path: str, table_id: str) -> None:
        """Record the table's Delta table (one file of its own: concurrent workers do not meet)."""
        now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        known = KnownTable(name, path, table_id, now)
        record = {"table": name, "path": path, "table_id": table_id, "registered_at": now}
        hadoop_fs.write_text(self.spark, self._file(name), json.dumps(record) + "\n")
        with self._lock:
            self._known[name] = known

    def replace(self, name: str, path: str, table_id: str | None) -> None:
        """Forget the table's registration and record the Delta table at ``path`` now, if any."""
        hadoop_fs.delete(self.spark, self._file(name))
        with self._lock:
            self._known[name] = None
        if table_id is not None:
            self.register(name, path, table_id)
        logger.info("table %s: registration replaced (now %s)", name, table_id or "none")
