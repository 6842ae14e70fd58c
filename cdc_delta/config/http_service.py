"""An HTTP service the commands talk to (the Kafka Connect REST API, a schema registry): where it is,
basic auth, TLS, timeouts and retries."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator, model_validator

from cdc_delta.config.common import PasswordSource


class HttpServiceConfig(PasswordSource):
    """Base of one service's section; subclasses set ``SECTION`` and the default ``url``."""

    SECTION: ClassVar[str] = "service"
    FILES: ClassVar[tuple[str, ...]] = ("password_file", "client_cert", "client_key", "verify")
    url: str
    """Base URL of the service."""
    username: str | None = None
    """Basic-auth user; its password comes from ``password_env`` or ``password_file``."""
    verify: bool | str = True
    """TLS: verify the server's certificate (true), against a CA bundle (a file path), or not (false)."""
    client_cert: str | None = None
    """TLS client certificate (PEM), for servers that require one."""
    client_key: str | None = None
    """Its private key (PEM), when not in the certificate file."""
    timeout_seconds: float = Field(default=30, gt=0)
    """Per request."""
    retry_seconds: float = Field(default=60, ge=0)
    """How long a server that cannot be reached (or answers that it is busy) is retried."""

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{cls.SECTION}.url {without_credentials(value)!r} must start with http:// or https://")
        if "@" in value.split("//", 1)[1].split("/", 1)[0]:
            raise ValueError(
                f"{cls.SECTION}.url must not hold credentials: set {cls.SECTION}.username and password_env"
            )
        return value.rstrip("/")

    @model_validator(mode="after")
    def _auth(self) -> HttpServiceConfig:
        if (self.password_env or self.password_file) and not self.username:
            raise ValueError(f"{self.SECTION}.password_env/password_file need {self.SECTION}.username")
        return self


def without_credentials(url: str) -> str:
    """``url`` with any ``user:password@`` before its host shown as ``***@``, for messages."""
    scheme, sep, rest = url.rpartition("//")
    host, slash, path = rest.partition("/")
    if "@" in host:
        host = "***@" + host.rsplit("@", 1)[1]
    return f"{scheme}{sep}{host}{slash}{path}"
