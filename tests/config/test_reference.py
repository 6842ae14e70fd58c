"""docs/configuration.md: what the config models give, every setting in it, every setting documented."""

from __future__ import annotations

import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel, Field

from cdc_delta.config import AppConfig
from cdc_delta.config.common import PasswordSource
from cdc_delta.config.reference import default_text, field_docstring, main, render, sections, type_name

DOCS = Path(__file__).parents[2] / "docs" / "configuration.md"


def _settings(model: type[BaseModel], path: str = "") -> Iterator[tuple[str, type[BaseModel], str]]:
    """(dotted path, model, name) of every setting under ``model``, walked here apart from the generator's
    own walk: a model inside a list is ``name[]``, inside a map ``name.*``."""
    for name, field in model.model_fields.items():
        at = f"{path}.{name}" if path else name
        yield at, model, name
        todo: list[tuple[Any, str]] = [(field.annotation, at)]
        while todo:
            annotation, where = todo.pop()
            if get_origin(annotation) in (Union, types.UnionType):
                todo += [(a, where) for a in get_args(annotation)]
            elif get_origin(annotation) is list:
                todo.append((get_args(annotation)[0], f"{where}[]"))
            elif get_origin(annotation) is dict:
                todo.append((get_args(annotation)[1], f"{where}.*"))
            elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
                yield from _settings(annotation, where)


SETTINGS = list(_settings(AppConfig))


def test_the_reference_is_what_the_models_give() -> None:
    assert DOCS.is_file(), f"{DOCS} is missing: run `make docs`"
    assert DOCS.read_text(encoding="utf-8") == render(), f"{DOCS} is out of date: run `make docs`"


def test_every_setting_is_in_the_reference_by_its_dotted_path() -> None:
    text = DOCS.read_text(encoding="utf-8")
    missing = [path for path, _, _ in SETTINGS if f"\n| `{path}` |" not in text]
    assert not missing, f"settings missing from {DOCS} (run `make docs`): {missing}"
    assert len(SETTINGS) > 100  # the walk reached the nested sections
    assert '| `truncate_policy` | "soft_delete" \\| "skip" \\| "dead_letter" | `soft_delete` |' in text  # | escaped
    assert {"kafka.security.password_env", "tables[].stock.delimiter", "source.check.attempts"} <= {
        p for p, _, _ in SETTINGS
    }


def test_every_setting_has_a_docstring() -> None:
    undocumented = [path for path, model, name in SETTINGS if not field_docstring(model, name)]
    assert not undocumented, f"write a docstring under each of these settings in cdc_delta/config: {undocumented}"
    unexplained = [s.title for s in sections() if not (s.model.__doc__ or "").strip()]
    assert not unexplained, f"give these sections' models a docstring: {unexplained}"


def test_inherited_and_overridden_docstrings() -> None:
    from cdc_delta.config import SchemaRegistryConfig, SourceConfig

    assert field_docstring(SourceConfig, "password_env") == field_docstring(PasswordSource, "password_env")
    assert field_docstring(SchemaRegistryConfig, "url") == "Base URL of the registry."
    assert (field_docstring(SchemaRegistryConfig, "username") or "").startswith("Basic-auth user")


class _Sample(BaseModel):
    """A model of every kind of setting."""

    name: str
    """Required."""
    mode: str | None = "a|b"
    """Two\n    lines | with a pipe and ``code`` and :meth:`ref`."""
    sizes: list[int] = Field(default_factory=lambda: [1, 2])
    """A factory."""
    tags: dict[str, str] = Field(default_factory=dict)
    inner: PasswordSource | None = None


def test_types_defaults_and_meanings_as_the_page_writes_them() -> None:
    from typing import Literal

    fields = _Sample.model_fields
    assert type_name(fields["mode"].annotation, "mode") == "str | null"
    assert type_name(fields["tags"].annotation, "tags") == "map[str, str]"
    assert type_name(Literal["soft_delete", "skip"], "x") == '"soft_delete" | "skip"'
    assert type_name(fields["inner"].annotation, "inner") == "[section](#inner) | null"
    assert [default_text(fields[n]) for n in ("name", "mode", "sizes", "tags")] == [
        "required",
        "`a|b`",
        "`[1, 2]`",
        "`{}`",
    ]
    assert field_docstring(_Sample, "mode") == "Two\nlines | with a pipe and ``code`` and :meth:`ref`."
    assert field_docstring(_Sample, "tags") is None
    assert [s.path for s in sections(_Sample)] == ["", "inner"]


def test_check_says_run_make_docs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "configuration.md"
    assert main(["--check", str(page)]) == 1
    assert "run `make docs`" in capsys.readouterr().err
    assert main(["--write", str(page)]) == 0
    assert main(["--check", str(page)]) == 0
    page.write_text(page.read_text() + "edited\n")
    assert main(["--check", str(page)]) == 1


class _Other(BaseModel):
    """A second variant."""

    kind: str = "other"
    """Which variant."""


class _Variants(BaseModel):
    """Two models at one path."""

    either: list[PasswordSource | _Other] = Field(default_factory=list)
    """One of two."""


def test_a_union_of_models_gives_each_variant_a_section_and_a_link() -> None:
    assert [s.title for s in sections(_Variants)] == ["Top level", "either[] (PasswordSource)", "either[] (_Other)"]
    annotation = _Variants.model_fields["either"].annotation
    assert type_name(annotation, "either") == ("list[[section](#either-passwordsource) | [section](#either-_other)]")
