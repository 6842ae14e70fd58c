"""What every config section shares: frozen models, path and regex checks."""

from __future__ import annotations

import os
import re

from pydantic import BaseModel, ConfigDict

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_uri(path: str) -> bool:
    """True for ``scheme:...`` locations (s3a://, abfss://, file:/); False for local filesystem paths."""
    return ":" in path.split("/")[0]


def absolute(value: str | None) -> str | None:
    """A local relative path made absolute from the working directory; URIs and None as they are."""
    return value if value is None or is_uri(value) else os.path.abspath(value)


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def check_regex(value: str | None, what: str) -> str | None:
    if value is not None:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"{what} {value!r} is not a valid regular expression: {exc}") from None
    return value
