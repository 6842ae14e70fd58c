"""Airflow DAG: the hourly cdc-delta maintenance (OPTIMIZE, tombstone purge, VACUUM, checkpoint).

Copy into the DAGs folder and set CDC_DELTA_HOME / CDC_DELTA_CONFIG as Airflow variables. One run
at a time (max_active_runs=1); the job's own lock also keeps it apart from manual runs.
"""

from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.bash import BashOperator

with DAG(
    dag_id="cdc_delta_maintenance",
    schedule="17 * * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=5)},
    tags=["cdc-delta"],
) as dag:
    BashOperator(
        task_id="maintain",
        bash_command=(
            "cd {{ var.value.CDC_DELTA_HOME }} && "
            "nice -n 10 .venv/bin/cdc-delta maintain --config {{ var.value.CDC_DELTA_CONFIG }} --wait 600"
        ),
        execution_timeout=timedelta(minutes=50),
    )
