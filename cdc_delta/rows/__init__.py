"""Row-level machinery that the merger, the live and fresh views and the nightly snapshot share: a
table's changes typed (:mod:`.typed`, :mod:`.typed_rows`), reduced to the latest per key
(:mod:`.dedupe`), cut at truncates (:mod:`.truncates`); its schema followed (:mod:`.schema_evolution`,
columns added with defaults: :mod:`.column_defaults`) and its layout read (:mod:`.target`); and a table's
rows as of a landing, merged rows overridden by pending changes (:mod:`.as_of`)."""
