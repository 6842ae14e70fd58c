"""Reading the tables from elsewhere: live views in a Spark session (:mod:`.live`), fresh views kept in
the metastore for every Spark SQL reader (:mod:`.fresh`), and Hive tables and views over the live Delta
tables' symlink manifests for Presto/Trino (:mod:`.live_tables`)."""
