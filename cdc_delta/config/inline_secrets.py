"""Secrets written into the config file's pass-through maps (``kafka.options``, ``spark.conf``) are refused:
the file is copied, committed and printed; a secret comes from the environment instead."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from cdc_delta.config.env_overrides import ENV_PREFIX, Origins

MAPS = (("kafka", "options"), ("spark", "conf"))
_SECRET = re.compile(r"password|sasl\.jaas\.config|secret|token", re.IGNORECASE)
_NAMES_NO_SECRET = re.compile(
    r"(\.file|\.location|\.path|\.mechanism|\.url|\.binding|\.type|\.class)$|secretkeyref|\.secrets\.", re.IGNORECASE
)
"""Keys that name where a secret is or how it is used, not the secret (spark.authenticate.secret.file,
spark.kubernetes.driver.secrets.*, kafka.sasl.oauthbearer.token.endpoint.url, ...)."""
_FILE_SETTING = {"spark.authenticate.secret": "spark.authenticate.secret.file"}


def is_secret_option(key: str) -> bool:
    return bool(_SECRET.search(key)) and not _NAMES_NO_SECRET.search(key)


def inline_secrets(data: Mapping[str, Any], origins: Origins) -> list[tuple[tuple[str, ...], str]]:
    """(where, why) for each secret in ``kafka.options`` and ``spark.conf`` that the file itself holds
    (those set by an environment override are fine)."""
    found: list[tuple[tuple[str, ...], str]] = []
    for section, field in MAPS:
        block = data.get(section)
        values = block.get(field) if isinstance(block, dict) else None
        if not isinstance(values, dict):
            continue
        for key in values:
            loc = (section, field, str(key))
            if not is_secret_option(loc[2]) or any(loc[:n] in origins for n in range(1, 4)):
                continue
            var = f"{ENV_PREFIX}{section.upper()}__{field.upper()}__{key}"
            other = f" (or {_FILE_SETTING[key]}: a file holding it)" if key in _FILE_SETTING else ""
            found.append(
                (
                    loc,
                    f"holds a secret, which does not belong in the config file: set it from the environment, "
                    f"{var}=...{other}",
                )
            )
    return found
