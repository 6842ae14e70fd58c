"""The nightly snapshot: readiness (Checkdone), the stock export, the union with the Delta tables at the
cut-off, the atomic Hive publish, its checks and its log (:mod:`cdc_delta.delta.snapshot_log`). :mod:`.run`
is the job."""
