"""The JVM class archive: named for its JDK and jars, mapped only where it is theirs, made whole or not at
all; and the JVM of a command really reads Spark's and Delta's classes from the one ``make setup`` made."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cdc_delta import jvm_archive
from cdc_delta.config import SparkConfig
from cdc_delta.exceptions import SparkSetupError
from cdc_delta.spark_session import session_archive, session_conf
from tests.services import ROOT


@pytest.fixture
def jars(tmp_path: Path) -> list[str]:
    folder = tmp_path / "jars"
    folder.mkdir()
    for name in ("a.jar", "b.jar"):
        (folder / name).write_bytes(name.encode())
    return sorted(str(p) for p in folder.iterdir())


def test_the_archive_is_named_for_its_jdk_and_jars(
    jars: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = Path(jars[0]).parent
    path = jvm_archive.archive_path(jars, folder)
    assert path is not None and path.parent == folder and path.name.startswith("cdc-delta-classes-")
    assert jvm_archive.archive_path(jars, folder) == path
    Path(jars[0]).write_bytes(b"changed")  # a jar replaced: another archive
    assert jvm_archive.archive_path(jars, folder) not in (path, None)
    changed = jvm_archive.archive_path(jars, folder)
    extra = folder / "c.jar"
    extra.write_bytes(b"c")
    assert jvm_archive.archive_path([*jars, str(extra)], folder) not in (changed, None)
    assert jvm_archive.archive_path([*jars, "https://repo/x.jar"], folder) is None  # not a local file
    # Another JDK: another archive; none without a java at all.
    java = jvm_archive.java_binary()
    assert java is not None
    link = tmp_path / "link"
    (link / "bin").mkdir(parents=True)
    (link / "bin" / "java").symlink_to(java)
    monkeypatch.setenv("JAVA_HOME", str(link))
    assert jvm_archive.archive_path(jars, folder) == changed  # the same JDK, reached another way
    jdk = tmp_path / "jdk"  # another JDK, then updated in place
    for name, data in (("bin/java", b"launcher"), ("lib/server/libjvm.so", b"vm"), ("lib/modules", b"classes")):
        (jdk / name).parent.mkdir(parents=True, exist_ok=True)
        (jdk / name).write_bytes(data)
    monkeypatch.setenv("JAVA_HOME", str(jdk))
    other = jvm_archive.archive_path(jars, folder)
    assert other not in (changed, None)
    (jdk / "lib" / "modules").write_bytes(b"classes of an update")
    assert jvm_archive.archive_path(jars, folder) not in (changed, other, None)
    (jdk / "bin" / "java").unlink()
    assert jvm_archive.archive_path(jars, folder) is None


def test_a_session_maps_a_whole_archive_only_and_not_where_archives_are_chosen_otherwise(
    jars: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = Path(jars[0]).parent
    config = SparkConfig(jars_dir=str(folder))
    assert "SharedArchiveFile" not in session_conf(config)["spark.driver.extraJavaOptions"]
    path = jvm_archive.archive_path(jars, folder)
    assert path is not None
    path.write_bytes(b"\0" * 64)  # cut short: its header not written
    assert "SharedArchiveFile" not in session_conf(config)["spark.driver.extraJavaOptions"]
    path.write_bytes(jvm_archive.MAGIC + b"classes")
    options = session_conf(config)["spark.driver.extraJavaOptions"]
    assert f"-XX:SharedArchiveFile={path} -Xlog:cds=off -Xlog:cds+dynamic=off" in options
    # The config's own choice of archive wins, as one in the JVM's option variables; a cluster's JVMs are
    # not started here; the config's own spark.jars name another archive.
    mine = SparkConfig(jars_dir=str(folder), conf={"spark.driver.extraJavaOptions": "-XX:SharedArchiveFile=/x.jsa"})
    assert session_conf(mine)["spark.driver.extraJavaOptions"].endswith(" -XX:SharedArchiveFile=/x.jsa")
    assert "cdc-delta-classes" not in session_conf(mine)["spark.driver.extraJavaOptions"]
    assert "spark.driver.extraJavaOptions" not in session_conf(SparkConfig(master=None, jars_dir=str(folder)))
    other = SparkConfig(jars_dir=str(folder), conf={"spark.jars": jars[0]})
    assert "SharedArchiveFile" not in session_conf(other)["spark.driver.extraJavaOptions"]
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Xshare:off")
    assert "SharedArchiveFile" not in session_conf(config)["spark.driver.extraJavaOptions"]
    assert jvm_archive.chosen_elsewhere("") == "SPARK_SUBMIT_OPTS"


def test_no_archive_where_its_path_holds_whitespace(tmp_path: Path) -> None:
    folder = tmp_path / "my jars"
    folder.mkdir()
    (folder / "a.jar").write_bytes(b"a")
    jars = [str(folder / "a.jar")]
    path = jvm_archive.archive_path(jars, folder)
    assert path is not None
    path.write_bytes(jvm_archive.MAGIC)
    assert jvm_archive.java_options(jars, folder, "") == ""  # Spark's launcher would split it
    with pytest.raises(SparkSetupError, match="holds whitespace, on which Spark's launcher splits Java options"):
        jvm_archive.make(jars, folder, [sys.executable, "-c", "pass"])


def _trainer(tmp_path: Path, body: str) -> list[str]:
    """A stand-in for the training run: a script given the archive's path last."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(body))
    return [sys.executable, str(script)]


def test_an_archive_is_made_whole_once_and_replaces_those_of_earlier_jars(jars: list[str], tmp_path: Path) -> None:
    folder = Path(jars[0]).parent
    earlier = folder / "cdc-delta-classes-0123456789abcdef.jsa"
    earlier.write_bytes(jvm_archive.MAGIC)
    abandoned = folder / ".cdc-delta-classes-0123456789abcdef.jsa.999999999.partial"  # a killed setup's
    abandoned.write_bytes(b"x")
    # The archive is written by a process that outlives the training run (the JVM, as it exits), its
    # output not tied to the run's.
    train = _trainer(
        tmp_path,
        """
        import subprocess, sys
        writer = subprocess.Popen(
            [sys.executable, "-c",
             "import sys, time; time.sleep(1.5); open(sys.argv[1], 'wb').write(bytes.fromhex('a8ab0bf0') + b'x')",
             sys.argv[1]],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        print("some JVM warning")
        print(f"jvm-pid: {writer.pid}")
        """,
    )
    made = jvm_archive.make(jars, folder, train)
    assert made.made and made.path == jvm_archive.archive_path(jars, folder) and made.seconds >= 1.5
    assert made.path.read_bytes() == jvm_archive.MAGIC + b"x" and made.removed == (earlier,)
    assert sorted(p.name for p in folder.iterdir()) == ["a.jar", "b.jar", made.path.name]
    again = jvm_archive.make(jars, folder, [sys.executable, "-c", "raise SystemExit(3)"])
    assert not again.made and again.path == made.path
    made.path.write_bytes(b"\0" * 8)  # cut short: made again
    assert jvm_archive.make(jars, folder, train).made


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("import sys; print('Error: no JVM', file=sys.stderr); sys.exit(1)", "run exited 1:\nError: no JVM"),
        (
            "import os, sys; open(sys.argv[1], 'wb').write(bytes(8)); print('Error: no room'); "
            "print(f'jvm-pid: {os.getpid()}')",
            "exited without writing a whole archive:\nError: no room",
        ),
        ("import time; time.sleep(5)", "the training run took over 1s"),
    ],
)
def test_a_failed_making_says_why_and_leaves_nothing(jars: list[str], tmp_path: Path, body: str, message: str) -> None:
    folder = Path(jars[0]).parent
    with pytest.raises(SparkSetupError, match="the JVM class archive could not be made") as failed:
        jvm_archive.make(jars, folder, _trainer(tmp_path, body), timeout_s=1)
    assert message in str(failed.value)
    assert sorted(p.name for p in folder.iterdir()) == ["a.jar", "b.jar"]


@pytest.mark.spark
def test_a_command_reads_spark_and_delta_classes_from_the_archive_setup_made(tmp_path: Path) -> None:
    archive = session_archive(SparkConfig())
    assert archive is not None and archive.is_file(), f"no JVM class archive {archive}: `make setup` makes it"
    config = tmp_path / "cdc.yaml"
    config.write_text(
        f"app_id: archive\nkafka: {{bootstrap_servers: '127.0.0.1:1'}}\nstorage: {{root: '{tmp_path}/lake'}}\n"
        "tables: [{name: db.t, topics: [s.db.t], key: [id]}]\n"
    )
    loaded = tmp_path / "classes.txt"
    done = subprocess.run(
        [sys.executable, "-m", "cdc_delta.cli", "sql", "--config", str(config), "SELECT 41 + 1 AS answer"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "SPARK_SUBMIT_OPTS": f"-Xlog:class+load=info:file={loaded}"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["+------+", "|answer|", "+------+", "|42", "|", "+------+"], done.stdout
    sources = {}
    for line in loaded.read_text().splitlines():
        name, _, source = line.partition(" source: ")
        sources[name.rsplit(" ", 1)[-1]] = source
    shared = "shared objects file (top)"
    classes = ("org.apache.spark.sql.SparkSession", "org.apache.spark.sql.delta.DeltaLog", "io.delta.tables.DeltaTable")
    for name in classes:
        assert sources.get(name) == shared, (name, sources.get(name))
    assert sum(source == shared for source in sources.values()) > 5000
