"""scripts/dist.py's cdc_delta.zip (spark-submit --py-files): the whole package, importable from the zip."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).parents[1]


def _dist() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dist", ROOT / "scripts" / "dist.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_zip_holds_every_module_and_imports_from_itself(tmp_path: Path) -> None:
    dist = _dist()
    built = dist.build_zip(tmp_path / "a")
    assert built == tmp_path / "a" / "cdc_delta.zip"
    names = set(zipfile.ZipFile(built).namelist())
    modules = {
        p.relative_to(ROOT).as_posix() for p in (ROOT / "cdc_delta").rglob("*.py") if "__pycache__" not in p.parts
    }
    assert "cdc_delta/__init__.py" in names and "cdc_delta/py.typed" in names
    assert modules <= names, f"modules missing from the zip: {sorted(modules - names)}"
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert dist.build_zip(tmp_path / "b").read_bytes() == built.read_bytes()  # same sources, same bytes

    code = f"import sys; sys.path.insert(0, {str(built)!r}); import cdc_delta.config; print(cdc_delta.config.__file__)"
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"{built}/cdc_delta/config/__init__.py"  # from the zip, not the checkout
