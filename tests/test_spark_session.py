"""What a local Spark is started with, without starting one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from cdc_delta.spark_session import log4j_file


def test_the_jvm_log_configuration_is_private_to_this_process() -> None:
    path = log4j_file("WARN")
    assert path.read_text().startswith("status = error\nrootLogger.level = WARN\n")
    folder = path.parent
    assert folder.stat().st_mode & 0o077 == 0, oct(folder.stat().st_mode)  # no one else may write or read it
    assert folder.stat().st_uid == os.getuid()
    assert folder.parent == Path(tempfile.gettempdir()) and folder.name != "cdc-delta-"  # not a fixed name
    assert log4j_file("WARN") == path and log4j_file("INFO").parent == folder
