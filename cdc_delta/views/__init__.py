"""Reading the tables from elsewhere: Hive tables and views over the live Delta tables' symlink
manifests for Presto/Trino (:mod:`.live_tables`), the current view (snapshot + Delta) of a table
(:mod:`.current_view`), and registering tables in a catalog (:mod:`.catalog`)."""
