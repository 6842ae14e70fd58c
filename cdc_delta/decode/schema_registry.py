"""The Avro schemas of a stream, read by id from a Confluent-compatible schema registry.

Ids are read on the driver, once each for the life of the stream (a schema id names one schema forever),
and the schema texts travel to the executors with the decoding function, where each is parsed once per
Python worker (:func:`cdc_delta.decode.avro.avro_decoded`). An id the registry does not know
is not cached (asked again in a later batch): its records are dead-lettered with the registry's URL. A
registry that cannot be reached, or answers 5xx, is retried for ``schema_registry.retry_seconds``; then
the batch fails with the URL in the message - good records are never dead-lettered because the registry
was down.

Why not confluent-kafka's ``SchemaRegistryClient``: it needs the ``[schemaregistry]`` extra (httpx,
authlib, attrs, cachetools: a second HTTP stack beside requests) and has its own TLS, auth, retry
(``max.retries``, counted) and error settings and texts. Here the registry shares
:class:`~cdc_delta.http_client.HttpClient` with Kafka Connect: one set of settings (``verify``,
``client_cert``, ``retry_seconds`` as a deadline), the same one-line messages for an untrusted
certificate or a server out of reach, and a 404 for an id turned into a dead letter, not an error.
The Avro side is fastavro's; only the fetch by id is ours.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import requests

from cdc_delta.config import SchemaRegistryConfig
from cdc_delta.events.avro import AvroEnvelope, UnsupportedSchema, unescape_name
from cdc_delta.events.avro import registry_id as wire_registry_id
from cdc_delta.events.record_keys import NO_KEY, avro_key_columns, json_key_columns
from cdc_delta.exceptions import CdcDeltaError, RegistryUnavailable, SchemaRegistryError
from cdc_delta.http_client import HttpClient, server_message

logger = logging.getLogger(__name__)


class RegistryHttp(HttpClient):
    """HTTP to the registry: 5xx and 429 are retried like a registry that cannot be reached."""

    failure = SchemaRegistryError

    def retry_answer(self, response: requests.Response) -> bool:
        return response.status_code >= 500 or response.status_code == 429

    def unreachable(self, exc: Exception) -> CdcDeltaError:
        return RegistryUnavailable(
            f"cannot reach the schema registry at {self.url} ({type(exc).__name__}) after retrying for "
            f"{self.config.retry_seconds:g}s: is it running? Check schema_registry.url"
        )

    def error(self, response: requests.Response, what: str, subject: str | None) -> CdcDeltaError:
        code = response.status_code
        if code == 404:
            return SchemaNotFound(f"{server_message(response)} (HTTP 404)")
        if code in (401, 403):
            return SchemaRegistryError(
                f"the schema registry at {self.url} refused {what} (HTTP {code}: {server_message(response)}): "
                "check schema_registry.username and password_env/password_file"
            )
        message = server_message(response)
        return SchemaRegistryError(f"the schema registry at {self.url}: {what} failed with HTTP {code}: {message}")


class SchemaNotFound(SchemaRegistryError):
    """The registry does not know the schema id asked for."""


class AvroSchemas:
    """The schemas seen by one stream, by id: the text of each good one, the reason for each other."""

    def __init__(self, config: SchemaRegistryConfig, unescape_names: bool = False, http: HttpClient | None = None):
        self.http = http or RegistryHttp(config)
        self.unescape_names = unescape_names
        self.texts: dict[int, str] = {}
        self._refused: dict[int, str] = {}
        self._key_columns: dict[int, tuple[str, ...]] = {}

    def read(self, ids: Iterable[int]) -> dict[int, str]:
        """Read the ids not read yet; returns the reason each id of ``ids`` cannot be decoded with (the
        others are in :attr:`texts`)."""
        reasons: dict[int, str] = {}
        for registry_id in sorted(set(ids)):
            if registry_id in self.texts:
                continue
            if registry_id in self._refused:
                reasons[registry_id] = self._refused[registry_id]
                continue
            text, reason = self._fetch(registry_id)
            if text is None:
                reasons[registry_id] = reason
                continue
            try:
                AvroEnvelope.from_text(registry_id, text, self.unescape_names)
            except UnsupportedSchema as exc:
                self._refused[registry_id] = reasons[registry_id] = f"not a Debezium envelope schema: {exc}"
                logger.warning("Avro schema id %d cannot be decoded: %s", registry_id, exc)
                continue
            self.texts[registry_id] = text
        return reasons

    def key_columns(self, key: bytes | None) -> tuple[str, ...]:
        """The columns of a record's key (Debezium's: the table's primary key): an Avro key from its schema in
        the registry, else a JSON one (a connector whose ``key.converter`` is JsonConverter); empty for no key
        or one that is neither."""
        key_id = wire_registry_id(key) if key else None
        if key_id is None:
            return json_key_columns(key)
        if key_id not in self._key_columns:
            text, _ = self._fetch(key_id)
            unescape = unescape_name if self.unescape_names else None
            self._key_columns[key_id] = NO_KEY if text is None else avro_key_columns(text, unescape)
        return self._key_columns[key_id]

    def _fetch(self, registry_id: int) -> tuple[str | None, str]:
        """The schema's text, or None and why there is none."""
        try:
            body = self.http.request("GET", f"/schemas/ids/{registry_id}", subject=str(registry_id))
        except SchemaNotFound as exc:
            return None, f"unknown to the schema registry at {self.http.url} ({exc})"
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise SchemaRegistryError(
                f"the schema registry at {self.http.url} answered GET /schemas/ids/{registry_id} with no schema "
                f"({str(body)[:200]}): is schema_registry.url a Confluent-compatible registry?"
            )
        schema_type = body.get("schemaType") or "AVRO"
        if schema_type != "AVRO":
            return None, f"a {schema_type} schema in the registry at {self.http.url}, not Avro"
        return body["schema"], ""
