"""Small files of cdc-delta's own under the storage root (leases, stop records), read and written without
Spark through delta-rs' object store: the lake's own access, with the same endpoint and credentials as
:func:`~cdc_delta.delta.delta_rs.open_table`, so that they work where the lake does (a local folder, S3,
ADLS, GCS). A write is a whole-object put: a reader never sees half a file."""

from __future__ import annotations

import contextlib
import os
from typing import Any

from cdc_delta.config import AppConfig
from cdc_delta.config.common import is_uri
from cdc_delta.delta.delta_rs import delta_rs_uri, storage_options


class LakeFiles:
    """Files under the storage root, named by their path relative to it."""

    def __init__(self, config: AppConfig) -> None:
        root = config.storage.root
        self.local = not is_uri(root) or root.startswith("file:")
        if self.local:
            root = root.removeprefix("file://").removeprefix("file:")
        self.root = root.rstrip("/")
        self._options = storage_options(config.spark.conf) if delta_rs_uri(root).startswith("s3://") else {}
        self._opened: Any = None

    def _files(self) -> Any:
        if self._opened is None:
            from deltalake.fs import DeltaStorageHandler

            if self.local:
                os.makedirs(self.root, exist_ok=True)  # delta-rs opens only a local folder that exists
            # The raw handler: DeltaStorageHandler's own output stream hands pyarrow buffers to a writer that
            # takes bytes only (deltalake 1.6 with pyarrow 26).
            self._opened = DeltaStorageHandler(delta_rs_uri(self.root), self._options or None)._handler
        return self._opened

    def read(self, path: str) -> str | None:
        """The file's UTF-8 text; None where there is none."""
        if self.local and not os.path.exists(f"{self.root}/{path}"):
            return None  # and no folder made for a lake that does not exist yet
        try:
            file = self._files().open_input_file(path)
            try:
                return bytes(file.read(file.size())).decode("utf-8")
            finally:
                file.close()
        except FileNotFoundError:
            return None
        except OSError as exc:
            if "not found" in str(exc).lower():
                return None
            raise

    def write(self, path: str, text: str) -> None:
        out = self._files().open_output_stream(path, None)  # a whole-object put: a reader never sees half
        out.write(text.encode("utf-8"))
        out.close()

    def delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._files().delete_file(path)
