"""Phase 2, applying one table's changes: its schema followed (:mod:`.schema_evolution`, columns added
with defaults: :mod:`.column_defaults`), its events typed (:mod:`.rows`) and reduced to the latest per
key (:mod:`.dedupe`), the guarded, idempotent MERGE and truncates (:mod:`.merge`), and a table that
fails stopped alone (:mod:`.apply`); resuming a stopped table (:mod:`.resume`)."""
