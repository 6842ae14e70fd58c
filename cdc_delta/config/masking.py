"""Sensitive columns masked at the source: per table, ``mask: {column: rule}``, which ``cdc-delta
connectors apply`` turns into Debezium's column masking settings, so that plain text never reaches Kafka.

Rules: ``hash`` (SHA-256 of a secret salt and the value, lowercase hex: Debezium's hashing strategy v2,
which anyone holding the salt can recompute to join on it), ``stars N`` (N asterisks), ``truncate N``
(the first N characters). Debezium masks string columns only, and never the Kafka key: a key column is
refused."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from cdc_delta.config.common import PasswordSource
from cdc_delta.exceptions import ConfigError

RULE = re.compile(r"(?P<kind>hash|stars|truncate)(?:\s+(?P<n>\d+))?")


@dataclass(frozen=True)
class MaskRule:
    kind: str
    """``hash``, ``stars`` or ``truncate``."""
    n: int = 0

    @classmethod
    def parse(cls, text: str, where: str) -> MaskRule:
        """``hash``, ``stars 8``, ``truncate 20``; a ValueError naming ``where`` and what to write."""
        found = RULE.fullmatch(text.strip())
        kind, n = (found["kind"], found["n"]) if found else (None, None)
        if kind is None or (kind == "hash") != (n is None) or (n is not None and int(n) < 1):
            raise ValueError(
                f"{where}: '{text}' is not a mask rule: write hash (a salted SHA-256), stars N (N asterisks) or "
                "truncate N (the first N characters), N a positive whole number"
            )
        return cls(kind, int(n or 0))

    def debezium_key(self, salt: str = "") -> str:
        """The Debezium setting whose value lists the columns masked this way."""
        if self.kind == "hash":
            return f"column.mask.hash.v2.SHA-256.with.salt.{salt}"
        if self.kind == "stars":
            return f"column.mask.with.{self.n}.chars"
        return f"column.truncate.to.{self.n}.chars"


class MaskingConfig(PasswordSource):
    """The salt of the ``hash`` mask rules: read like a password, from ``password_env`` (the variable
    holding it) or ``password_file``, never from the config file. Keep it: the same salt gives the same
    hashes, so masked columns still join across tables and over time."""

    SECTION: ClassVar[str] = "masking"

    def salt(self) -> str:
        """The salt, read now; :class:`ConfigError` where it is empty (Debezium would not read a setting
        without one, and a hash without a salt is a dictionary away from the value)."""
        salt = (self.password() or "").strip()
        if not salt:
            where = self.password_env or self.password_file
            raise ConfigError(f"masking: the salt in {where} is empty: write a long random text there")
        return salt
