# cdc-delta developer targets. `make help` lists them.
PY := .venv/bin/python
PYTEST := .venv/bin/pytest

.PHONY: help setup demo demo-generated test test-fast test-object-storage lint bench docs dist

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

setup:  ## create .venv, install cdc-delta with test/dev tools, fetch the JVM jars
	@scripts/setup.sh

demo:  ## MariaDB -> Debezium (Kafka Connect) -> Kafka -> Delta, all local: apply the connector, run SQL, stream, compare
	@scripts/demo.sh

demo-generated:  ## a local Kafka only: stream generated Debezium-shaped events into Delta tables, query them
	@scripts/demo-generated.sh

test: setup  ## run every test: unit, Spark (Delta) and integration
	$(PYTEST)

test-fast: setup  ## unit tests only (no Spark), seconds
	$(PYTEST) -m "not spark and not integration"

test-object-storage: setup  ## the lake on a local S3-compatible store (scripts/s3.sh builds SeaweedFS on first use: minutes)
	$(PYTEST) -m object_storage

docs: setup  ## regenerate docs/configuration.md (every setting: type, default, meaning) from the config models
	$(PY) -m cdc_delta.config.reference --write docs/configuration.md

dist: setup  ## build what spark-submit needs into dist/: the wheel, cdc_delta.zip (--py-files), the decoder jar
	$(PY) scripts/dist.py dist

lint: setup  ## ruff and mypy
	.venv/bin/ruff check cdc_delta tests bench maintenance streaming
	.venv/bin/mypy

bench: setup  ## benchmarks: write bench/results/*.json and print the tables of docs/performance.md (long)
	$(PY) bench/merge_vs_append.py
	$(PY) bench/merge_cost.py
	$(PY) bench/merge_rounds.py
	$(PY) bench/stream_latency.py
	$(PY) bench/snapshot.py
	$(PY) bench/maintenance.py
	$(PY) bench/maintenance_tables.py
	$(PY) bench/throughput.py
	$(PY) bench/operations.py
	$(PY) bench/fresh_views.py
	$(PY) bench/cold_start.py
	$(PY) bench/summarize.py
