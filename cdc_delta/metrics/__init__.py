"""Prometheus metrics: the stream's counters and gauges (:mod:`.stream`), its HTTP endpoint with
``/healthz`` (:mod:`.server`, :mod:`.health`), and the jobs' textfile-collector files (:mod:`.textfile`)."""
