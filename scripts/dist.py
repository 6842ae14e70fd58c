"""Build what spark-submit needs on a cluster into one folder (``make dist``: ``dist/``).

- ``cdc_delta-<version>-py3-none-any.whl``: cdc-delta with its dependencies declared, to install on the
  driver's and the executors' Python (``pip install``), or as a source of truth for an image;
- ``cdc_delta.zip``: the ``cdc_delta`` package alone, for ``spark-submit --py-files`` (which takes
  .zip, .egg and .py files, not wheels); its dependencies (pydantic, PyYAML, ...) must be installed
  where it runs;
- ``cdc-delta-decoder.jar``: cdc-delta's own JVM classes (``make setup`` builds them into
  ``.jars/spark``), for ``--jars``.

The zip is the same bytes for the same sources (sorted entries, fixed timestamps), so a deployment
can tell whether it changed. Usage: ``python scripts/dist.py [OUT]``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "cdc_delta"
JAR = ROOT / ".jars" / "spark" / "cdc-delta-decoder.jar"
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can hold


def package_files(package: Path) -> list[Path]:
    """The package's files as they are shipped: sources and data, no bytecode caches."""
    return sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def build_zip(out: Path, package: Path = ROOT / PACKAGE) -> Path:
    """``out/cdc_delta.zip``: ``package`` at the root of the archive, importable with ``zipimport``."""
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{package.name}.zip"
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in package_files(package):
            entry = zipfile.ZipInfo(path.relative_to(package.parent).as_posix(), date_time=_EPOCH)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, path.read_bytes())
    return target


def build_wheel(out: Path) -> Path:
    """The wheel of cdc-delta (``pip wheel --no-deps``), replacing the wheels an earlier build left."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob(f"{PACKAGE}-*.whl"):
        old.unlink()
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)], check=True
    )
    (wheel,) = out.glob(f"{PACKAGE}-*.whl")
    return wheel


def copy_jar(out: Path) -> Path:
    """cdc-delta's decoder jar, as ``make setup`` built it."""
    if not JAR.is_file():
        raise SystemExit(f"dist: {JAR} is missing: run `make setup`, which builds it")
    out.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy2(JAR, out / JAR.name))


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else ROOT / "dist").resolve()
    for built in (copy_jar(out), build_wheel(out), build_zip(out)):  # the jar first: missing, nothing is built
        print(f"dist: {built}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
