"""The stream's batch line comes last: once a batch's line is in the log, its metrics count it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from cdc_delta.config import parse_config
from cdc_delta.merger.results import RoundResult
from cdc_delta.stream.query import StreamBatch
from cdc_delta.stream.results import BatchResult


class Recorder:
    """Metrics that note what they were told, in order, beside the log records seen by then."""

    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        self.caplog = caplog
        self.calls: list[tuple[str, int]] = []

    def batch_done(self, result: BatchResult) -> None:
        self.calls.append(("batch_done", len(self.caplog.records)))

    def batch_failed(self) -> None:
        self.calls.append(("batch_failed", len(self.caplog.records)))

    def round_done(self, result: RoundResult) -> None:
        self.calls.append(("round_done", len(self.caplog.records)))


class Processor:
    def __init__(self, result: BatchResult | Exception) -> None:
        self.result = result

    def process(self, batch: object, batch_id: int) -> BatchResult:
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def stream_batch(tmp_path: Path, metrics: Recorder, result: BatchResult | Exception) -> StreamBatch:
    config = parse_config(
        {
            "app_id": "t",
            "storage": {"root": str(tmp_path)},
            "tables": [{"name": "inventory.items", "topics": ["srv.inventory.items"], "key": ["id"]}],
        }
    )
    batch = StreamBatch(config, metrics=metrics)
    batch.processor = Processor(result)  # type: ignore[assignment]
    return batch


def test_a_batch_is_counted_before_its_line_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    metrics = Recorder(caplog)
    result = BatchResult(7, rows_in=3, landed=3, merge=RoundResult(through_seq=1))
    with caplog.at_level(logging.INFO, logger="cdc_delta"):
        stream_batch(tmp_path, metrics, result)(None, 7)  # type: ignore[arg-type]
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [result.summary()]
    # both counted while the log held nothing yet
    assert metrics.calls == [("batch_done", 0), ("round_done", 0)]


def test_a_failed_batch_is_counted_and_raised_without_a_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    metrics = Recorder(caplog)
    with caplog.at_level(logging.INFO, logger="cdc_delta"), pytest.raises(RuntimeError, match="boom"):
        stream_batch(tmp_path, metrics, RuntimeError("boom"))(None, 7)  # type: ignore[arg-type]
    assert metrics.calls == [("batch_failed", 0)]
    assert caplog.records == []
