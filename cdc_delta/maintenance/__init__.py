"""The hourly maintenance: OPTIMIZE, tombstone purge, VACUUM and a checkpoint per table, beside the
running stream (:mod:`.commands`, :mod:`.purge`, :mod:`cdc_delta.delta.hold`); :mod:`.run` is the job."""
