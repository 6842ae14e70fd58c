"""The config's shape, read from the models: which settings a section has, which values are maps (their
keys keep their case) and which take text. For the messages and the environment overrides."""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

Loc = Sequence[str | int]


def _options(annotation: Any) -> list[Any]:
    """The members of a union (None left out), or the annotation alone."""
    if get_origin(annotation) in (Union, types.UnionType):
        return [a for a in get_args(annotation) if a is not type(None)]
    return [annotation]


def _model(annotation: Any) -> type[BaseModel] | None:
    for option in _options(annotation):
        if isinstance(option, type) and issubclass(option, BaseModel):
            return option
    return None


def step(annotation: Any, part: str | int) -> Any:
    """The annotation of ``part`` inside a value of ``annotation``; None when the models do not say."""
    for option in _options(annotation):
        origin = get_origin(option)
        if isinstance(option, type) and issubclass(option, BaseModel) and isinstance(part, str):
            field = option.model_fields.get(part)
            if field is not None:
                return field.annotation
        elif origin in (list, tuple) and isinstance(part, int):
            return get_args(option)[0]
        elif origin is dict and isinstance(part, str):
            return get_args(option)[1]
    return None


def annotation_at(root: type[BaseModel], loc: Loc) -> Any:
    annotation: Any = root
    for part in loc:
        annotation = step(annotation, part)
        if annotation is None:
            return None
    return annotation


def model_at(root: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """The model of the section at ``loc``, or None when it is not a section."""
    return _model(annotation_at(root, loc))


def settings_at(root: type[BaseModel], loc: Loc) -> list[str]:
    """The setting names of the section at ``loc`` (empty when it is not a section)."""
    model = model_at(root, loc)
    return list(model.model_fields) if model else []


def is_map(annotation: Any) -> bool:
    """True for ``dict[...]`` annotations (optionally in a union): their keys are data, not setting names."""
    return any(get_origin(option) is dict for option in _options(annotation))


def takes_text_only(annotation: Any, value: object) -> bool:
    """True when a field of ``annotation`` takes text but not ``value``'s scalar type (an environment
    override ``8`` for a ``str`` setting, or ``false`` for a Spark setting): keep the text as written."""
    options = _options(annotation)
    if str not in options or value is None or isinstance(value, (str, list, dict)):
        return False
    kind = type(value)
    return not any(kind is option or (kind is int and option is float) for option in options)
