"""What every config section shares: frozen models, path and regex checks."""

from __future__ import annotations

import os
import re
from contextvars import ContextVar
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator, model_validator

from cdc_delta.exceptions import ConfigError

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_uri(path: str) -> bool:
    """True for ``scheme:...`` locations (s3a://, abfss://, file:/); False for local filesystem paths."""
    return ":" in path.split("/")[0]


BASE_FOLDER: ContextVar[str | None] = ContextVar("cdc_delta_config_folder", default=None)
"""The folder of the config file being validated (:func:`~cdc_delta.config.loading.load_config` sets it):
relative paths in it are taken from there, not from wherever the command was started."""


def absolute(value: str | None) -> str | None:
    """A local relative path made absolute from the config file's folder (a config given as a mapping:
    the working directory); URIs and None as they are."""
    if value is None or is_uri(value):
        return value
    return os.path.abspath(os.path.join(BASE_FOLDER.get() or os.getcwd(), value))


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def plain_identifier(value: str, what: str) -> str:
    """``value`` where it is a plain identifier (a Hive database name, say), else a ValueError naming ``what``."""
    if not IDENTIFIER.fullmatch(value):
        raise ValueError(f"{what} {value!r} must be a plain identifier")
    return value


def check_regex(value: str | None, what: str) -> str | None:
    if value is not None:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(
                f"{what} '{value}' is not a valid regular expression: {exc}; write a Python regular expression "
                "(a literal '.', '(', '[' or '+' escaped with a backslash)"
            ) from None
    return value


class PasswordSource(Frozen):
    """A password read from the environment or a file when it is needed: never held in the config
    file, never logged. Subclasses name their section in ``SECTION`` for the messages."""

    SECTION: ClassVar[str] = "password"
    FILES: ClassVar[tuple[str, ...]] = ("password_file",)
    """The settings that name a file this host must read (checked by ``check-config``)."""
    password_env: str | None = None
    """Name of the environment variable holding the password."""
    password_file: str | None = None
    """Or a file holding it (a mounted secret); its surrounding whitespace is ignored."""

    @field_validator("password_file")
    @classmethod
    def _absolute_file(cls, value: str | None) -> str | None:
        return absolute(value)

    @model_validator(mode="after")
    def _one_password(self) -> PasswordSource:
        if self.password_env and self.password_file:
            raise ValueError(f"set {self.SECTION}.password_env or password_file, not both")
        return self

    @model_validator(mode="after")
    def _password_env_set(self, info: ValidationInfo) -> PasswordSource:
        """When the loader is given the environment (``context={"env": ...}``), the variable must be in it."""
        env = (info.context or {}).get("env")
        if env is not None and self.password_env and self.password_env not in env:
            raise ValueError(
                f"{self.SECTION}.password_env names {self.password_env}, which is not set in the environment: "
                f"set it, or read the password from a file with {self.SECTION}.password_file"
            )
        return self

    @model_validator(mode="after")
    def _files_readable(self, info: ValidationInfo) -> PasswordSource:
        """Given ``context={"files": True}`` (``check-config``), every file named must be readable here."""
        if not (info.context or {}).get("files"):
            return self
        unreadable = []
        for name in self.FILES:
            path = getattr(self, name)
            if not isinstance(path, str) or not path:
                continue
            try:
                with open(path, "rb"):
                    pass
            except OSError as exc:
                unreadable.append(f"{self.SECTION}.{name} {path!r} cannot be read here ({exc.strerror})")
        if unreadable:
            raise ValueError(f"{'; '.join(unreadable)}: write the path of a file this host can read")
        return self

    def password(self) -> str | None:
        """The password from the environment or the file (None when neither is set)."""
        if self.password_env:
            value = os.environ.get(self.password_env)
            if value is None:
                raise ConfigError(
                    f"{self.SECTION}.password_env names {self.password_env}, which is not set in the environment"
                )
            return value
        if self.password_file:
            try:
                return Path(self.password_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(
                    f"{self.SECTION}.password_file {self.password_file} cannot be read: {exc.strerror}"
                ) from None
        return None
