"""spark-submit entry point of the streaming application.

    spark-submit --master yarn --packages io.delta:delta-spark_2.13:4.0.0,\
org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0 \
        --jars .jars/spark/cdc-delta-decoder.jar \
        --py-files cdc_delta.zip streaming/run_stream.py --config cdc.yaml

``cdc-delta-decoder.jar`` is cdc-delta's own JSON envelope reader, built by ``make setup``
(``scripts/fetch-jars.sh``) from ``jvm/decoder``. Set ``spark.master: null`` in the config so the
cluster's master applies. Locally, use ``cdc-delta stream --config ...`` instead (it builds its own
local session).
"""

import sys

from cdc_delta.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["stream", *sys.argv[1:]]))
