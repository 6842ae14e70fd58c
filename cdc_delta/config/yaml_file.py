"""Reading the config file: YAML (or JSON) whose repeated keys are reported, not silently dropped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

_MERGE = "tag:yaml.org,2002:merge"


@dataclass(frozen=True)
class Repeated:
    """A key given twice in one mapping: YAML keeps the second value and drops the first without a word."""

    loc: tuple[str | int, ...]
    first_line: int
    second_line: int


class ConfigLoader(yaml.SafeLoader):
    """A safe loader that records every key repeated in a mapping (``<<`` merges may still override)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.repeated: list[Repeated] = []

    def construct_document(self, node: Node) -> Any:
        self._find_repeated(node, (), set())
        return super().construct_document(node)

    def _find_repeated(self, node: Node, loc: tuple[str | int, ...], seen: set[int]) -> None:
        if id(node) in seen:  # an alias: already walked where its anchor is
            return
        seen.add(id(node))
        if isinstance(node, MappingNode):
            lines: dict[tuple[str, str], int] = {}
            for key, value in node.value:
                if key.tag == _MERGE or not isinstance(key, ScalarNode):
                    continue
                line, ident = key.start_mark.line + 1, (key.tag, key.value)
                if ident in lines:
                    self.repeated.append(Repeated((*loc, key.value), lines[ident], line))
                else:
                    lines[ident] = line
                self._find_repeated(value, (*loc, key.value), seen)
        elif isinstance(node, SequenceNode):
            for index, item in enumerate(node.value):
                self._find_repeated(item, (*loc, index), seen)


def read_yaml(text: str) -> tuple[Any, list[Repeated]]:
    """The document in ``text`` and the keys it repeats; yaml.YAMLError when it is not YAML."""
    loader = ConfigLoader(text)
    try:
        return loader.get_single_data(), loader.repeated
    finally:
        loader.dispose()
