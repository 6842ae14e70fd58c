"""A class-data-sharing archive of the classes a local Spark JVM of cdc-delta loads (Spark's, Delta's,
the Kafka source's): made once (``cdc-delta jvm-archive``, which ``make setup`` runs), then mapped by
every local Spark JVM cdc-delta starts, which reads those classes parsed and verified from it instead of
from the jars, so a command's cold start is shorter (``bench/cold_start.py``, docs/performance.md).

An archive serves one JDK build and one set of jars only: its name holds a digest of the JDK (launcher,
VM, class modules), Spark's own jars and the extra jars (path, size, modification time of each), so a
changed jar or JDK names another file; the JVM checks the jars again itself and never maps the classes of
other jars. Where no complete archive of that name is there (not made yet, or a jar changed since),
Spark starts as before, only slower. The JVM's own messages about the archive are silenced: one it
cannot map (another Java option changed its layout) prints a warning on stdout, the command's output,
and the JVM then runs without it."""

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
"""Java options that choose archives themselves: where the config's ``spark.driver.extraJavaOptions``,
``SPARK_SUBMIT_OPTS`` or ``JAVA_TOOL_OPTIONS`` hold one, the project's archive is left out."""
MAGIC = bytes.fromhex("a8ab0bf0")
"""The first bytes of a complete JDK dynamic archive (0xf00baba8, little-endian); the JVM writes its
header last, so an archive cut short by a killed JVM does not start with them (mapped, such a file
turned class sharing off altogether, the JDK's own classes too)."""
FAILED = "the JVM class archive could not be made"
PID_LINE = "jvm-pid: "
"""How the training process names its JVM (which writes the archive as it exits)."""


def java_binary() -> Path | None:
    """The java Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the first on the PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def jdk_files(java: Path) -> list[Path]:
    """What identifies a JDK build: its launcher, its VM and its class modules (an update in place
    changes the last two)."""
    lib = java.parent.parent / "lib"
    return [java, *(p.resolve() for p in (lib / "server" / "libjvm.so", lib / "modules") if p.exists())]


def spark_jars() -> list[Path]:
    """Spark's own jars (the JVM's class path), in the Spark home PySpark uses."""
    from pyspark.find_spark_home import _find_spark_home

    return sorted(Path(_find_spark_home(), "jars").glob("*.jar"))


def archive_path(jars: Sequence[str], folder: Path) -> Path | None:
    """The archive for this JDK and these jars (``jars``: ``spark.jars``), in ``folder``; None without a
    java binary, or where a jar is not a local file."""
    java = java_binary()
    if java is None:
        return None
    digest = hashlib.sha256()
    for path in [*jdk_files(java), *spark_jars(), *map(Path, jars)]:
        try:
            st = path.stat()
        except OSError:
            return None
        digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return folder / f"{ARCHIVE_PREFIX}{digest.hexdigest()[:16]}.jsa"


def chosen_elsewhere(configured: str) -> str | None:
    """Where archives are chosen other than by this module: the ``configured`` extraJavaOptions or one
    of the JVM's option variables; None where they are not."""
    sources = {"spark.driver.extraJavaOptions": configured}
    sources.update({name: os.environ.get(name, "") for name in ("SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS")})
    return next((name for name, options in sources.items() if any(o in options for o in CHOSEN)), None)


def complete(path: Path) -> bool:
    """Whether ``path`` is a whole dynamic archive (see :data:`MAGIC`)."""
    try:
        with path.open("rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def java_options(jars: Sequence[str], folder: Path, configured: str) -> str:
    """The Java options mapping the archive where a complete one is there and archives are not chosen
    elsewhere; else none. A path with whitespace is left out too: Spark's launcher splits Java options
    on it."""
    if chosen_elsewhere(configured):
        return ""
    path = archive_path(jars, folder)
    if path is None or _split_by_launcher(path) or not complete(path):
        return ""
    return f"-XX:SharedArchiveFile={path} {SILENT}"


def _split_by_launcher(path: Path) -> bool:
    """Whether ``path`` holds whitespace, on which Spark's launcher splits the Java options."""
    return any(c.isspace() for c in str(path))


@dataclass(frozen=True)
class Made:
    path: Path
    made: bool
    """False: the archive was there already."""
    seconds: float = 0.0
    removed: tuple[Path, ...] = ()
    """Archives of earlier jars or JDKs, removed."""


def make(jars: Sequence[str], folder: Path, train: Sequence[str], timeout_s: float = 900) -> Made:
    """Make the archive for ``jars`` in ``folder`` unless a complete one is there: ``train`` (a command
    and its arguments, the archive's temporary path appended) runs a Spark JVM through the work of the
    stream, the merger and the jobs, that writes the classes it loaded as it exits; it prints its JVM's
    pid on a line of its own (``jvm-pid: N``). Written under a temporary name and renamed once complete,
    so a JVM never maps part of an archive."""
    if java_binary() is None:
        raise SparkSetupError(f"{FAILED}: no java ($JAVA_HOME/bin/java, or java on the PATH): Java 17 is required")
    path = archive_path(jars, folder)
    if path is None:
        raise SparkSetupError(f"{FAILED}: a jar of spark.jars is not a local file ({', '.join(jars)})")
    if _split_by_launcher(path):
        raise SparkSetupError(
            f"{FAILED}: its path {path} holds whitespace, on which Spark's launcher splits Java options; "
            "keep the jars in a folder without (spark.jars_dir, or $CDC_DELTA_JARS_DIR)"
        )
    if complete(path):
        return Made(path, made=False)
    _remove_abandoned(folder)
    t0 = time.monotonic()
    partial = folder / f".{path.name}.{os.getpid()}.partial"
    try:
        try:
            done = subprocess.run([*train, str(partial)], capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise SparkSetupError(f"{FAILED}: the training run took over {timeout_s:.0f}s") from exc
        found = re.search(rf"^{PID_LINE}(\d+)$", done.stdout, re.MULTILINE)
        if done.returncode != 0 or found is None:
            raise SparkSetupError(f"{FAILED}: the training run exited {done.returncode}:\n{_tail(done)}")
        _wait_gone(int(found.group(1)), timeout_s)
        if not complete(partial):
            raise SparkSetupError(f"{FAILED}: its JVM exited without writing a whole archive:\n{_tail(done)}")
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    removed = tuple(p for p in folder.glob(f"{ARCHIVE_PREFIX}*.jsa") if p != path)
    for old in removed:
        old.unlink(missing_ok=True)
    return Made(path, made=True, seconds=time.monotonic() - t0, removed=removed)


def _tail(done: subprocess.CompletedProcess[str], lines: int = 8) -> str:
    """The last lines of what the training run printed (the JVM's reasons go to stdout)."""
    return "\n".join((done.stderr.strip().splitlines() + done.stdout.strip().splitlines())[-lines:])


def _remove_abandoned(folder: Path) -> None:
    """Remove the partial archives of makings that are gone (a killed setup's JVM wrote its file late)."""
    for partial in folder.glob(f".{ARCHIVE_PREFIX}*.partial"):
        owner = partial.name.rsplit(".", 2)[-2]
        if not owner.isdigit() or not _alive(int(owner)):
            partial.unlink(missing_ok=True)


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
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"
