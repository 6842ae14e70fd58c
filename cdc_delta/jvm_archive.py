"""A class-data-sharing archive of the classes a local Spark JVM of cdc-delta loads (Spark's, Delta's,
the Kafka source's): made once (``cdc-delta jvm-archive``, which ``make setup`` runs), then mapped by
every local Spark JVM cdc-delta starts, which reads those classes parsed and verified from it instead of
from the jars. A command's cold start (the session, then a first Delta query) took 18.9 s without it
and 13.1 s with it on 2 cores (C1 only, as the tests' processes run; 25.5 s -> 19.5 s with both
compilers).

An archive serves one JVM build and one set of jars only: its name holds a digest of the java binary,
Spark's own jars and the extra jars (path, size, modification time of each), so a changed jar or JDK
names another file and a JVM never maps the classes of other jars. Where no archive of that name is
there (not made yet, or a jar changed since), Spark starts as before, only slower. The JVM's own
messages about the archive are silenced: one it cannot map (another Java option changed its layout)
prints a warning on stdout, the command's output, and the JVM then runs without it."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cdc_delta.exceptions import SparkSetupError

ARCHIVE_PREFIX = "cdc-delta-classes-"
SILENT = "-Xlog:cds=off -Xlog:cds+dynamic=off"
CHOSEN = ("SharedArchiveFile", "ArchiveClassesAtExit", "-Xshare")
"""Java options by which the configured ``spark.driver.extraJavaOptions`` chooses archives itself."""
FAILED = "the JVM class archive could not be made"
PID_LINE = "jvm-pid: "
"""How the training process names its JVM (which writes the archive as it exits)."""


def java_binary() -> Path | None:
    """The java Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the first on the PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def spark_jars() -> list[Path]:
    """Spark's own jars (the JVM's class path): ``$SPARK_HOME/jars``, else PySpark's."""
    home = os.environ.get("SPARK_HOME")
    if not home:
        import pyspark

        home = str(Path(pyspark.__file__).parent)
    return sorted(Path(home, "jars").glob("*.jar"))


def archive_path(jars: Sequence[str], folder: Path) -> Path | None:
    """The archive for this JVM and these jars (``jars``: ``spark.jars``), in ``folder``; None without a
    java binary."""
    java = java_binary()
    if java is None:
        return None
    digest = hashlib.sha256()
    for path in [java, *spark_jars(), *map(Path, jars)]:
        try:
            st = path.stat()
        except OSError:
            return None
        digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return folder / f"{ARCHIVE_PREFIX}{digest.hexdigest()[:16]}.jsa"


def java_options(jars: Sequence[str], folder: Path, configured: str) -> str:
    """The Java options mapping the archive where it is there and the ``configured`` options do not
    choose archives themselves; else none."""
    if any(option in configured for option in CHOSEN):
        return ""
    path = archive_path(jars, folder)
    return f"-XX:SharedArchiveFile={path} {SILENT}" if path is not None and path.is_file() else ""


@dataclass(frozen=True)
class Made:
    path: Path
    made: bool
    """False: the archive was there already."""
    seconds: float = 0.0
    removed: tuple[Path, ...] = ()
    """Archives of earlier jars or JDKs, removed."""


def make(jars: Sequence[str], folder: Path, train: Sequence[str], timeout_s: float = 900) -> Made:
    """Make the archive for ``jars`` in ``folder`` unless it is there: ``train`` (a command and its
    arguments, the archive's temporary path appended) runs a Spark JVM through the work of the stream,
    the merger and the jobs, that writes the classes it loaded as it exits; it prints its JVM's pid on
    a line of its own (``jvm-pid: N``). Written under a temporary name and renamed when complete, so
    a JVM never maps half an archive."""
    path = archive_path(jars, folder)
    if path is None:
        raise SparkSetupError("no java binary ($JAVA_HOME/bin/java, or java on the PATH): Java 17 is required")
    if path.is_file():
        return Made(path, made=False)
    t0 = time.monotonic()
    partial = folder / f".{path.name}.{os.getpid()}.partial"
    try:
        done = subprocess.run([*train, str(partial)], capture_output=True, text=True, timeout=timeout_s)
        found = re.search(rf"^{PID_LINE}(\d+)$", done.stdout, re.MULTILINE)
        if done.returncode != 0 or found is None:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
            raise SparkSetupError(f"{FAILED}: the training run exited {done.returncode}:\n{tail}")
        _wait_gone(int(found.group(1)), timeout_s)
        if not partial.is_file() or partial.stat().st_size == 0:
            raise SparkSetupError(f"{FAILED}: its JVM exited without writing {partial}")
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    removed = tuple(p for p in folder.glob(f"{ARCHIVE_PREFIX}*.jsa") if p != path)
    for old in removed:
        old.unlink(missing_ok=True)
    return Made(path, made=True, seconds=time.monotonic() - t0, removed=removed)


def _wait_gone(pid: int, timeout_s: float) -> None:
    """Wait for the training's JVM to exit (it writes the archive in its exit)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.2)
    raise SparkSetupError(f"{FAILED}: its JVM (pid {pid}) did not exit in {timeout_s:.0f}s")


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not: where no init reaps the orphaned JVM, it stays one)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"
