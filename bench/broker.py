"""The native Kafka broker of one benchmark run (scripts/kafka.sh), in a fresh folder, in UTC."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).parents[1]


@contextmanager
def native_broker(port: int, prefix: str) -> Iterator[tuple[Path, str]]:
    """A new run folder and the bootstrap address of a broker started in it; stopped on exit."""
    os.environ["TZ"] = "UTC"
    time.tzset()
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    env = {**os.environ, "KAFKA_DIR": str(folder / "kafka")}
    script = str(ROOT / "scripts" / "kafka.sh")
    subprocess.run([script, "start", str(port)], check=True, env=env)
    try:
        yield folder, f"127.0.0.1:{port}"
    finally:
        subprocess.run([script, "stop", str(port)], env=env)
