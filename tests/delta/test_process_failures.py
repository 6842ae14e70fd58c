"""Which errors fail the batch (the process restarts and the batch runs again, idempotently) rather than
stop the one table they happened to: a JVM that is broken is not a table's fault."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cdc_delta.delta.workers import fails_the_batch


def running_spark() -> SimpleNamespace:
    """A session whose context answers that it is running (what fails_the_batch asks of it)."""
    context = SimpleNamespace(sc=lambda: SimpleNamespace(isStopped=lambda: False))
    return SimpleNamespace(sparkContext=SimpleNamespace(_jsc=context))


@pytest.mark.parametrize(
    "message",
    [
        "java.lang.InternalError: java.lang.NoSuchMethodException: no such method: "
        "java.lang.invoke.MethodHandle.linkToStatic(Object,int,Object,MemberName)Object/invokeStatic",
        "java.lang.OutOfMemoryError: Java heap space",
        "Cannot call methods on a stopped SparkContext",
    ],
)
def test_a_broken_jvm_fails_the_batch(message: str) -> None:
    assert fails_the_batch(running_spark(), RuntimeError(message))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "message",
    [
        "[DELTA_TABLE_NOT_FOUND] Delta table `x` doesn't exist.",
        "java.io.FileNotFoundException: part-0001.parquet does not exist",
        "[CAST_INVALID_INPUT] The value 'x' of the type STRING cannot be cast to INT",
    ],
)
def test_a_tables_own_error_stops_only_that_table(message: str) -> None:
    assert not fails_the_batch(running_spark(), RuntimeError(message))  # type: ignore[arg-type]
