#!/usr/bin/env bash
# A real Hive metastore (the Thrift service, Hive 2.3, over an embedded Derby database) on PORT, run
# from the Hive jars pyspark ships (.venv's pyspark/jars: nothing to download): what Spark registers the
# nightly snapshot and the live tables in (snapshot.metastore_uri) and what Trino's Hive connector reads.
#   scripts/hive-metastore.sh start [PORT]   start, wait until it accepts connections
#   scripts/hive-metastore.sh stop           stop it (SIGTERM, then SIGKILL after 20 s)
#   scripts/hive-metastore.sh status         running or not, and where
# Hive 2.3 listens on every interface, without authentication: for a test machine, not a shared network.
# Environment: HMS_PORT (default 9083), HMS_DIR (default var/hive-metastore-PORT: the Derby database, the
# warehouse folder, log, pid), HMS_HEAP (default 384m).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cmd="${1:-status}"
port="${2:-${HMS_PORT:-9083}}"
dir="${HMS_DIR:-$root/var/hive-metastore-$port}"
pidfile="$dir/hms.pid"

# shellcheck source=scripts/service-lib.sh
source "$root/scripts/service-lib.sh"  # running, await_ready, stop_service
ready() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }

start() {
  if running; then echo "hive-metastore: already running on 127.0.0.1:$port (pid $(cat "$pidfile"))"; return 0; fi
  local jars
  jars="$("$root/.venv/bin/python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
  mkdir -p "$dir/warehouse"
  # hive.async.log.enabled=false: Hive's asynchronous logging needs the LMAX disruptor, which Spark does
  # not ship. The schema is created on first use (no schematool), its version not checked.
  nohup java "-Xmx${HMS_HEAP:-384m}" -cp "$jars/*" \
    -Dhive.async.log.enabled=false -Dhive.log.dir="$dir" -Dderby.stream.error.file="$dir/derby.log" \
    -Djavax.jdo.option.ConnectionURL="jdbc:derby:;databaseName=$dir/metastore_db;create=true" \
    -Ddatanucleus.schema.autoCreateAll=true -Dhive.metastore.schema.verification=false \
    -Dhive.metastore.warehouse.dir="file:$dir/warehouse" \
    org.apache.hadoop.hive.metastore.HiveMetaStore -p "$port" > "$dir/hms.log" 2>&1 &
  echo $! > "$pidfile"
  await_ready hive-metastore 120 "hive-metastore: ready on thrift://127.0.0.1:$port (pid $(cat "$pidfile"), log $dir/hms.log)" \
    "$dir/hms.log"
}

case "$cmd" in
  start) start ;;
  stop) stop_service hive-metastore 20 ;;
  status) if running; then echo "hive-metastore: running on 127.0.0.1:$port (pid $(cat "$pidfile"))"; else echo "hive-metastore: not running"; fi ;;
  *) echo "usage: scripts/hive-metastore.sh start|stop|status [PORT]" >&2; exit 2 ;;
esac
