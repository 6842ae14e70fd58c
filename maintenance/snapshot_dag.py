"""Airflow DAG: the nightly cdc-delta snapshot (Delta tables + stock export -> Hive partition dt=ds).

Copy into the DAGs folder and set CDC_DELTA_HOME / CDC_DELTA_CONFIG as Airflow variables. The task
publishes the DAG run's logical date (``ds``, yesterday for a daily schedule). Exit code 75 ("the
stream has not passed midnight yet, nothing touched") fails the try and Airflow retries it.
"""

from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.bash import BashOperator

with DAG(
    dag_id="cdc_delta_snapshot",
    schedule="40 0 * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 6, "retry_delay": timedelta(minutes=20)},
    tags=["cdc-delta"],
) as dag:
    BashOperator(
        task_id="snapshot",
        bash_command=(
            "cd {{ var.value.CDC_DELTA_HOME }} && "
            ".venv/bin/cdc-delta snapshot --config {{ var.value.CDC_DELTA_CONFIG }} --date {{ ds }} --wait 30"
        ),
        execution_timeout=timedelta(hours=3),
    )
