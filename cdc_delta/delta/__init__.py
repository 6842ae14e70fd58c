"""What every job shares about the Delta tables: what a stream commit records and its one reader
(:mod:`.commits`), creating tables and their stopped flag (:mod:`.tables`), the registry of the tables
written (:mod:`.registry`), their status read with delta-rs (:mod:`.status`), table workers with a session
each (:mod:`.workers`), maintenance's write holds (:mod:`.hold`) and the snapshot log
(:mod:`.snapshot_log`)."""
