"""Phase 2, the merger: which tables are due (:mod:`.schedule`), rounds over their pending changelog
changes (:mod:`.run`), and applying one table's changes: its schema followed (:mod:`.schema_evolution`,
columns added with defaults: :mod:`.column_defaults`), its changes typed (:mod:`.rows`) and reduced to
the latest per key (:mod:`.dedupe`), the guarded, idempotent MERGE with its truncates (:mod:`.merge`),
and a table that fails stopped alone (:mod:`.apply`); resuming a stopped table (:mod:`.resume`)."""
