"""Airflow DAG: cdc-delta's source probes every 15 minutes (``cdc-delta check``).

Copy into the DAGs folder and set CDC_DELTA_HOME / CDC_DELTA_CONFIG as Airflow variables; the source
database's password reaches the command through the environment variable named by
``source.password_env`` (an Airflow connection or secret backend exporting it), never the config.
The task fails when a table's probes disagree (exit 1) or the source cannot be reached (exit 69); no
retries: the command already probes a disagreeing table ``source.check.attempts`` times.
"""

from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.bash import BashOperator

with DAG(
    dag_id="cdc_delta_check",
    schedule="*/15 * * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 0},
    tags=["cdc-delta"],
) as dag:
    BashOperator(
        task_id="check",
        bash_command=(
            "cd {{ var.value.CDC_DELTA_HOME }} && .venv/bin/cdc-delta check --config {{ var.value.CDC_DELTA_CONFIG }}"
        ),
        env={"SOURCE_PASSWORD": "{{ var.value.CDC_DELTA_SOURCE_PASSWORD }}"},
        append_env=True,
        execution_timeout=timedelta(minutes=14),
    )
