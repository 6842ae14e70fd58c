#!/usr/bin/env bash
# `make demo-generated`: set up, start a local Kafka, generate Debezium-shaped change events, run the
# stream until it has caught up, then show lag, freshness and a SQL query over the Delta tables.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
scripts/setup.sh
config=streaming/demo-config.yaml
cli=.venv/bin/cdc-delta
rm -rf var/demo-generated
scripts/kafka.sh start 19092
trap 'scripts/kafka.sh stop 19092 >/dev/null' EXIT
$cli generate --bootstrap 127.0.0.1:19092 --events "${DEMO_EVENTS:-5000}" --partitions 3 --bad 2
$cli stream --config "$config" --until-caught-up
$cli status --config "$config"
$cli sql --config "$config" "SELECT _cdc_source_db AS shard, count(*) AS rows,
  sum(CASE WHEN _cdc_deleted THEN 1 ELSE 0 END) AS soft_deleted, sum(amount) AS amount
  FROM shop.orders GROUP BY 1 ORDER BY 1"
$cli sql --config "$config" --limit 10 "SELECT id, customer, amount, status, _cdc_op, _cdc_deleted,
  _cdc_partition, _cdc_offset FROM inventory.orders ORDER BY id"
