"""Imports run one way: the rooms that read what the merger did (views, snapshot, metrics, the stream)
reach it only through its public entry points, never its insides; the shared rooms import no job."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "cdc_delta"

MERGER_PUBLIC = {"cdc_delta.merger", "cdc_delta.merger.results"}
"""The merger's public entry points: the package (Merger, merging_for, rebuild_table, resume_table) and what
a round did."""

JOBS = ("merger", "stream", "maintenance", "snapshot", "check", "views", "cli", "demo")
SHARED = ("events", "decode", "changelog", "rows", "delta", "kafka", "config", "connect", "consistency")


def _imports(path: Path) -> set[str]:
    """Every ``cdc_delta`` module ``path`` imports (``from cdc_delta.x import y`` names ``cdc_delta.x``, and
    ``cdc_delta.x.y`` where y is a module), at any depth of the file."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cdc_delta"):
            found.add(node.module)
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                if (PACKAGE.parent / (name.replace(".", "/") + ".py")).exists():
                    found.add(name)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("cdc_delta"))
    return found


def _modules(room: str) -> list[Path]:
    return sorted((PACKAGE / room).rglob("*.py"))


@pytest.mark.parametrize("room", ["views", "snapshot", "metrics", "stream"])
def test_readers_of_the_merger_use_its_public_entry_points(room: str) -> None:
    reaching_in = {
        f"{path.relative_to(PACKAGE.parent)}: {name}"
        for path in _modules(room)
        for name in _imports(path)
        if name.startswith("cdc_delta.merger") and name not in MERGER_PUBLIC
    }
    assert not reaching_in, sorted(reaching_in)


@pytest.mark.parametrize("room", SHARED)
def test_shared_rooms_import_no_job(room: str) -> None:
    jobs = tuple(f"cdc_delta.{job}" for job in JOBS)
    up = {
        f"{path.relative_to(PACKAGE.parent)}: {name}"
        for path in _modules(room)
        for name in _imports(path)
        if name.startswith(jobs)
    }
    assert not up, sorted(up)


def test_the_scan_sees_imports_inside_functions() -> None:
    """The check above could pass by reading nothing: the stream's command imports the merger inside a
    function, and the scan must see it."""
    assert "cdc_delta.merger" in _imports(PACKAGE / "cli" / "stream.py")
