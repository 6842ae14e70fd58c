"""Each table's history (SCD type 2, a table's ``history``): the merger appends every change it applies,
and every truncate, to ``<storage.root>/_cdc_history/<db>/<table>`` (:mod:`.append`); its versions, with
when each was valid, are a query over them (:mod:`.versions`)."""
