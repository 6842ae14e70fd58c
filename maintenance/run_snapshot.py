"""spark-submit entry point of the nightly snapshot (Delta tables + stock export -> Hive partition).

    spark-submit ... maintenance/run_snapshot.py --config cdc.yaml [--date YYYY-MM-DD]

Locally: ``cdc-delta snapshot --config cdc.yaml``. Exit code 75 means "not ready yet, nothing
touched": the scheduler retries (see maintenance/crontab and maintenance/snapshot_dag.py).
"""

import sys

from cdc_delta.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["snapshot", *sys.argv[1:]]))
