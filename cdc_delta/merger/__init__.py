"""Phase 2, the merger: which tables are due (:mod:`.schedule`), rounds over their pending changelog
changes (:mod:`.run`), applying one table's changes with the row machinery of :mod:`cdc_delta.rows` and
the guarded, idempotent MERGE (:mod:`.merge`), a table that fails stopped alone (:mod:`.apply`);
rebuilding a table from the changelog (:mod:`.rebuild`) and resuming a stopped one (:mod:`.resume`).
What a round did is in :mod:`.results`, which other rooms read."""

from cdc_delta.merger.rebuild import rebuild_table
from cdc_delta.merger.resume import resume_table
from cdc_delta.merger.run import INTERPRETED, Merger
from cdc_delta.merger.with_stream import merging_for

__all__ = ["INTERPRETED", "Merger", "merging_for", "rebuild_table", "resume_table"]
