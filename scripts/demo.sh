#!/usr/bin/env bash
# README command one, the real thing with every service local and started here: MariaDB (Debian's
# package), Kafka and a Kafka Connect worker with Debezium (Maven Central jars). The connector is
# registered with `cdc-delta connectors apply`, a SQL workload runs (inserts, updates, deletes, a
# transaction, an ALTER), the stream catches up, and MariaDB's and Delta's row counts are printed side
# by side with a query over the Delta tables. Everything lives under var/demo; the services stop at the end.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
scripts/setup.sh
cli=.venv/bin/cdc-delta
config=streaming/demo-mariadb.yaml
demo="$root/var/demo"
export KAFKA_DIR="$demo/kafka" MARIADB_DIR="$demo/mariadb" CONNECT_DIR="$demo/connect"
export MARIADB_PORT=13306 CONNECT_BOOTSTRAP=127.0.0.1:19092

stop_all() {
  scripts/connect.sh stop 18083 || true
  scripts/mariadb.sh stop 13306 || true
  scripts/kafka.sh stop 19092 || true
} >/dev/null 2>&1
stop_all  # an earlier run's services, before their data goes
rm -rf "$demo"
mkdir -p "$demo"
trap stop_all EXIT

echo "demo: starting MariaDB, Kafka and Kafka Connect with Debezium (all local)"
scripts/mariadb.sh start 13306
scripts/kafka.sh start 19092
scripts/connect.sh start 18083
sql() { scripts/mariadb.sh sql "$1"; }
sql "$(cat scripts/demo-sql/inventory.sql)"
sql "GRANT INSERT, DELETE ON inventory.debezium_signal TO 'cdc'@'%'"  # repairs: Debezium writes its watermarks there
sql "CREATE TABLE inventory.demo_done (id INT PRIMARY KEY)"  # one row per demo step: how the script knows Debezium is done

echo "demo: registering the Debezium connector through the Kafka Connect REST API"
$cli connectors apply connectors/mariadb-inventory.yaml --config "$config" \
  --set database.hostname=127.0.0.1 --set database.port=13306 \
  --set "database.password=\${file:$MARIADB_DIR/cdc.properties:password}" \
  --set schema.history.internal.kafka.bootstrap.servers=127.0.0.1:19092
# Wait until Debezium has written the row count of inventory.demo_done (one row per step) to Kafka.
wait_for_debezium() {
  .venv/bin/python - "$1" <<'PY'
import sys, time
from confluent_kafka import Consumer, TopicPartition
topic, want, deadline = "dbserver1.inventory.demo_done", int(sys.argv[1]), time.monotonic() + 180
consumer = Consumer({"bootstrap.servers": "127.0.0.1:19092", "group.id": "demo-wait", "enable.auto.commit": False})
while time.monotonic() < deadline:
    meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
    if meta is not None and meta.partitions and consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1] >= want:
        sys.exit(0)
    time.sleep(1)
sys.exit("demo: Debezium did not write to Kafka within 180 s; see var/demo/connect/connect.log")
PY
}
sql "INSERT INTO inventory.demo_done VALUES (0)"
wait_for_debezium 1  # the connector's snapshot is in Kafka: what follows are binlog events

echo "demo: running a SQL workload: inserts, updates, deletes, a transaction, ALTER TABLE ADD COLUMN"
sql "$(cat scripts/demo-sql/workload.sql)"
wait_for_debezium 2

$cli connectors status --config "$config"

echo "demo: streaming Kafka into Delta until caught up"
$cli stream --config "$config" --until-caught-up

counts="$(sql "SELECT (SELECT COUNT(*) FROM inventory.customers), (SELECT COUNT(*) FROM inventory.orders)" | tail -1)"
read -r customers orders <<<"$counts"
$cli sql --config "$config" "SELECT 'inventory.customers' AS table, $customers AS mariadb_rows,
  count_if(NOT _cdc_deleted) AS delta_live_rows, count_if(_cdc_deleted) AS delta_soft_deleted FROM inventory.customers
  UNION ALL SELECT 'inventory.orders', $orders, count_if(NOT _cdc_deleted), count_if(_cdc_deleted) FROM inventory.orders"
$cli sql --config "$config" "SELECT c.tier, o.status, count(*) AS orders, sum(o.amount) AS amount
  FROM inventory.orders o JOIN inventory.customers c ON c.id = o.customer_id
  WHERE NOT o._cdc_deleted AND NOT c._cdc_deleted GROUP BY 1, 2 ORDER BY 1, 2"
