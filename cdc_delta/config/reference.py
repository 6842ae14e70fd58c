"""The configuration reference (docs/configuration.md), generated from the config models: one section per
model at its dotted path (``kafka.security``, ``tables[]``, ``tables[].stock``), one row per setting with
its type, default and meaning.

A setting's meaning is the attribute docstring written under it, read here with :mod:`ast` from the source
of the model classes (each class of the model's MRO, so inherited settings such as ``password_env`` of
:class:`~cdc_delta.config.common.PasswordSource` keep theirs; a subclass's own docstring wins). Pydantic's
``use_attribute_docstrings`` would read the same text, but only by changing the models' config (it turns
every docstring into a ``description``, and it silently gives none where it cannot read a class's source):
the models stay as they are, and a setting without a docstring is visible here as ``None``, which the
reference's test refuses.

``python -m cdc_delta.config.reference`` prints the page; ``--write PATH`` writes it, ``--check PATH``
exits 1 when the file differs (``make docs`` writes docs/configuration.md).
"""

from __future__ import annotations

import argparse
import ast
import functools
import inspect
import itertools
import json
import re
import sys
import textwrap
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from cdc_delta.config.app import AppConfig
from cdc_delta.config.env_overrides import ENV_PREFIX

_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")
_BOUNDS = ((annotated_types.Gt, ">"), (annotated_types.Ge, ">="), (annotated_types.Lt, "<"), (annotated_types.Le, "<="))


@dataclass(frozen=True)
class Section:
    """One model at its dotted path in the file (``""`` for the top level)."""

    path: str
    model: type[BaseModel]

    def setting(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    @property
    def title(self) -> str:
        return self.path or "Top level"


@functools.cache
def _class_docstrings(cls: type) -> dict[str, str]:
    """The attribute docstrings of one class's own body: ``name: type = ...`` followed by a string literal."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    found: dict[str, str] = {}
    for stmt, after in itertools.pairwise(body.body):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            found[stmt.target.id] = inspect.cleandoc(after.value.value)
    return found


def field_docstring(model: type[BaseModel], name: str) -> str | None:
    """The docstring of setting ``name`` of ``model``: its own class's, else the nearest base class's."""
    for cls in model.__mro__:
        if issubclass(cls, BaseModel) and cls is not BaseModel and name in _class_docstrings(cls):
            return _class_docstrings(cls)[name]
    return None


def _members(annotation: Any) -> list[Any]:
    return list(get_args(annotation)) if get_origin(annotation) in (Union, types.UnionType) else [annotation]


def _nested(annotation: Any, path: str) -> Iterator[tuple[str, type[BaseModel]]]:
    """The models inside ``annotation`` (a model, a list or map of them, a union), each at its path."""
    for member in _members(annotation):
        origin = get_origin(member)
        if isinstance(member, type) and issubclass(member, BaseModel):
            yield path, member
        elif origin in (list, tuple, set, frozenset):
            yield from _nested(get_args(member)[0], f"{path}[]")
        elif origin is dict:
            yield from _nested(get_args(member)[1], f"{path}.*")


def sections(model: type[BaseModel] = AppConfig, path: str = "") -> list[Section]:
    """Every section under ``model``, depth first in the order the settings are declared. A union of
    several models at one path gives each its own section, named ``path (Model)``."""
    out = [Section(path, model)]
    for name, field in model.model_fields.items():
        nested = list(_nested(field.annotation, Section(path, model).setting(name)))
        for at, inner in nested:
            out += sections(inner, f"{at} ({inner.__name__})" if len(nested) > 1 else at)
    return out


def _anchor(title: str) -> str:
    """The anchor GitHub gives a heading of ``title`` (lower case, punctuation dropped, spaces to '-')."""
    return re.sub(r"[^a-z0-9 _-]", "", title.lower()).replace(" ", "-")


def type_name(annotation: Any, path: str) -> str:
    """``annotation`` as a reader of the file sees it: ``int``, ``str | null``, ``"a" | "b"``, ``list[str]``,
    ``map[str, str]``; a model is a link to its section."""
    names: list[str] = []
    models = [m for m in _members(annotation) if isinstance(m, type) and issubclass(m, BaseModel)]
    for member in _members(annotation):
        origin = get_origin(member)
        if member is type(None):
            continue
        if origin is Literal:
            names += [json.dumps(v) for v in get_args(member)]
        elif origin in (list, tuple, set, frozenset):
            names.append(f"list[{type_name(get_args(member)[0], f'{path}[]')}]")
        elif origin is dict:
            key, value = get_args(member)
            names.append(f"map[{type_name(key, path)}, {type_name(value, f'{path}.*')}]")
        elif isinstance(member, type) and issubclass(member, BaseModel):
            title = f"{path} ({member.__name__})" if len(models) > 1 else path  # as sections() names it
            names.append(f"[section](#{_anchor(title)})")
        else:
            names.append(getattr(member, "__name__", str(member)))
    if type(None) in _members(annotation):
        names.append("null")
    return " | ".join(names)


def _bounds(field: FieldInfo) -> str:
    """The field's numeric bounds, `` (> 0)``, as pydantic checks them."""
    found = [
        f"{sign} {getattr(m, kind.__name__.lower())}"
        for m in field.metadata
        for kind, sign in _BOUNDS
        if isinstance(m, kind)
    ]
    return f" ({', '.join(found)})" if found else ""


def _yaml(value: Any) -> str:
    if isinstance(value, BaseModel):  # a section's default: written as the settings that differ from theirs
        value = value.model_dump(mode="json", exclude_defaults=True)
    text = yaml.safe_dump(value, default_flow_style=True, width=1_000_000, allow_unicode=True)
    return text.removesuffix("\n").removesuffix("\n...")


def default_text(field: FieldInfo) -> str:
    """The default as YAML would write it, or ``required``."""
    if field.is_required():
        return "required"
    return f"`{_yaml(field.get_default(call_default_factory=True, validated_data={}))}`"


def _markdown(text: str) -> str:
    """A docstring on one line of a table cell: RST roles and double backticks as Markdown code, ``|``
    escaped, ``<`` outside code spans escaped (it would start HTML)."""
    text = _ROLE.sub(r"`\1`", " ".join(text.split())).replace("``", "`")
    parts = text.split("`")
    parts[::2] = [p.replace("<", "&lt;") for p in parts[::2]]
    return "`".join(parts).replace("|", "\\|")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _header() -> str:
    return f"""# Configuration reference

Generated from the config models (`cdc_delta/config/`) by `make docs`; do not edit it by hand (a test
fails when it differs from the models).

**The file.** One YAML file (JSON is YAML too) configures the stream and every job, passed to each command
with `--config`; `cdc-delta check-config --config cdc.yaml` validates it and lists every problem at once.
`streaming/example-config.yaml` is a commented example of the settings most deployments set. A setting
the models do not know is refused; a setting left out takes its default; a section left out takes the
defaults of all its settings.

**Environment overrides.** `{ENV_PREFIX}SECTION__FIELD=value` overrides a setting of the file, one
`__` per level: `{ENV_PREFIX}KAFKA__BOOTSTRAP_SERVERS=broker:9092`,
`{ENV_PREFIX}KAFKA__SECURITY__PROTOCOL=SASL_SSL`. Section and setting names are case-insensitive; the
keys of a map (`spark.conf`, `kafka.options`) keep their case:
`{ENV_PREFIX}SPARK__CONF__spark.sql.shuffle.partitions=8`. Values are read as YAML (`8`, `true`,
`[a, b]`, `null`), except that a setting taking text keeps the text as written. The entries of a list
cannot be reached one by one: `{ENV_PREFIX}TABLES=[...]` replaces the whole `tables` list. A bad value
names the variable that set it.

**Secrets.** Passwords are never written in the file: a section that needs one (`kafka.security`,
`schema_registry`, `connect`, `source`, `tables[].source_count_jdbc`) names an environment variable
(`password_env`) or a file holding it (`password_file`, a mounted secret; surrounding whitespace is
ignored). `check-config` requires every `password_env` it finds to be set. Secrets in the pass-through
maps `kafka.options` and `spark.conf` (`*password*`, `*secret*`, `*token*`, `kafka.sasl.jaas.config`)
are refused in the file; set them with an environment override instead.

In the tables below, `tables[]` is an entry of the `tables` list; a type `section` links to the
section's own table; a default `{{}}` is the section's own defaults.
"""


def render() -> str:
    """The whole page, the same for the same models."""
    found = sections()
    anchors = [_anchor(s.title) for s in found]
    assert len(set(anchors)) == len(anchors), f"two sections share an anchor: {anchors}"
    lines = [_header(), "## Sections", ""]
    lines += [f"- [`{s.title}`](#{_anchor(s.title)})" if s.path else f"- [{s.title}](#top-level)" for s in found]
    for section in found:
        title = f"`{section.title}`" if section.path else section.title
        paragraphs = inspect.cleandoc(section.model.__doc__ or "").split("\n\n")
        lines += ["", f"## {title}", ""] + [line for p in paragraphs for line in (_markdown(p), "")]
        lines += ["| Setting | Type | Default | Meaning |", "| --- | --- | --- | --- |"]
        for name, field in section.model.model_fields.items():
            path = section.setting(name)
            kind = _cell(type_name(field.annotation, path)) + _bounds(field)
            meaning = _markdown(field_docstring(section.model, name) or "")
            lines.append(f"| `{path}` | {kind} | {_cell(default_text(field))} | {meaning} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cdc_delta.config.reference", description=__doc__)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", metavar="PATH", help="write the reference to PATH")
    mode.add_argument("--check", metavar="PATH", help="exit 1 when PATH differs from the reference")
    args = parser.parse_args(argv)
    page = render()
    if args.write:
        Path(args.write).write_text(page, encoding="utf-8")
    elif args.check:
        path = Path(args.check)
        if not path.is_file() or path.read_text(encoding="utf-8") != page:
            print(f"{path} is not what the config models give: run `make docs`", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
