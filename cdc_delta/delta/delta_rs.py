"""Delta tables opened with delta-rs (``deltalake``), for the commands that answer without Spark
(``status``, ``check``).

An object store is configured once, for Spark, in ``spark.conf`` (Hadoop's ``fs.s3a.*`` settings):
delta-rs is given the same endpoint, region and addressing from there, and takes the credentials from
the environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``), where S3A's
default provider chain finds them too. Azure and GCS locations are read with what delta-rs finds in the
environment (``AZURE_*``, ``GOOGLE_*``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cdc_delta.config import AppConfig

_S3A = "spark.hadoop.fs.s3a."


def delta_rs_uri(path: str) -> str:
    """A table location as delta-rs names it (Hadoop's s3a:// and s3n:// are its s3://)."""
    for hadoop in ("s3a://", "s3n://"):
        if path.startswith(hadoop):
            return "s3://" + path[len(hadoop) :]
    return path


def storage_options(spark_conf: Mapping[str, str]) -> dict[str, str]:
    """delta-rs's options for S3 from the session's ``fs.s3a.*`` settings (none: delta-rs's defaults and
    the environment)."""
    s3a = {key[len(_S3A) :]: value for key, value in spark_conf.items() if key.startswith(_S3A)}
    options: dict[str, str] = {}
    ssl = s3a.get("connection.ssl.enabled", "true").strip().lower() != "false"
    endpoint = s3a.get("endpoint", "").strip()
    if endpoint:
        if "://" not in endpoint:  # S3A takes a bare host[:port] and picks the scheme from connection.ssl
            endpoint = f"{'https' if ssl else 'http'}://{endpoint}"
        options["AWS_ENDPOINT_URL"] = endpoint
        if endpoint.startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    region = s3a.get("endpoint.region", "").strip()
    if region:
        options["AWS_REGION"] = region
    if s3a.get("path.style.access", "").strip().lower() == "true":
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
    return options


def read(dataset: Any, columns: list[str], where: Any = None) -> Any:
    """``columns`` of the rows of ``dataset`` (a table's ``to_pyarrow_dataset()``) that match ``where``
    (a ``pyarrow.dataset`` expression), as a pyarrow table.

    Scanned in the calling thread: a scan of a delta-rs dataset on Arrow's thread pools left threads that
    aborted the process at exit ("terminate called without an active exception", apache/arrow#34314,
    delta-io/delta-rs#2184): 15 of 16 runs of a script reading a changelog's pending rows as ``status``
    does ended in SIGABRT instead of their exit code, and 11 of 12 scanning a table with a lost data file
    (the scan's error reported); none of 12 of either with this."""
    return dataset.to_table(columns=columns, filter=where, use_threads=False)


def count(dataset: Any) -> int:
    """How many rows the pyarrow dataset of a delta-rs table holds (in the calling thread, as :func:`read`)."""
    return int(dataset.count_rows(use_threads=False))


def open_table(config: AppConfig, path: str) -> Any:
    """The Delta table at ``path`` read with delta-rs, or None where there is no Delta table."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    uri = delta_rs_uri(path)
    options = storage_options(config.spark.conf) if uri.startswith("s3://") else {}
    try:
        return DeltaTable(uri, storage_options=options or None)
    except TableNotFoundError:
        return None
