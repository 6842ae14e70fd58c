"""spark-submit entry point of the hourly maintenance job (OPTIMIZE, tombstone purge, VACUUM, checkpoint).

    spark-submit ... maintenance/run_maintenance.py --config cdc.yaml

Locally: ``cdc-delta maintain --config cdc.yaml`` (see maintenance/crontab for the schedule).
"""

import sys

from cdc_delta.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["maintain", *sys.argv[1:]]))
