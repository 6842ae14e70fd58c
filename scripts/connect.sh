#!/usr/bin/env bash
# A real Kafka Connect distributed worker with the Debezium MariaDB and MySQL connectors on its
# plugin.path, on 127.0.0.1, run from Maven Central jars (no Docker).
#   scripts/connect.sh start [PORT]   fetch jars if needed, write the worker config, start, wait until its
#                                     REST API lists the Debezium connectors
#   scripts/connect.sh stop [PORT]    stop it (SIGTERM, then SIGKILL after 30 s)
#   scripts/connect.sh status [PORT]  running or not, and where
# Environment: CONNECT_PORT (REST port, default 8083), CONNECT_BOOTSTRAP (Kafka, default 127.0.0.1:9092),
# CONNECT_DIR (default var/connect-PORT: config, log, pid), CONNECT_HEAP (default 768m),
# CONNECT_GROUP (the worker group and the prefix of its internal topics, default cdc-delta-connect-PORT).
# Connector configs may read secrets through the worker's config providers: ${file:/path:key} (a
# properties file) and ${env:NAME} (the worker's environment), so no password is stored in Kafka.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cmd="${1:-status}"
port="${2:-${CONNECT_PORT:-8083}}"
dir="${CONNECT_DIR:-$root/var/connect-$port}"
bootstrap="${CONNECT_BOOTSTRAP:-127.0.0.1:9092}"
group="${CONNECT_GROUP:-cdc-delta-connect-$port}"
pidfile="$dir/connect.pid"
jars="$root/.jars/connect"
url="http://127.0.0.1:$port"

# shellcheck source=scripts/service-lib.sh
source "$root/scripts/service-lib.sh"  # running, await_ready, stop_service
# Ready once the REST API answers and the Debezium plugins are loaded.
ready() { curl -fsS --max-time 2 "$url/connector-plugins" 2>/dev/null | grep -q 'io.debezium.connector.mariadb.MariaDbConnector'; }

start() {
  if running; then echo "connect: already running on $url (pid $(cat "$pidfile"))"; return 0; fi
  "$root/scripts/fetch-jars.sh" connect
  mkdir -p "$dir"
  cat > "$dir/connect.properties" <<PROPS
bootstrap.servers=$bootstrap
group.id=$group
listeners=http://127.0.0.1:$port
rest.advertised.host.name=127.0.0.1
rest.advertised.port=$port
plugin.path=$jars/plugins
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=true
value.converter.schemas.enable=true
config.storage.topic=$group-configs
offset.storage.topic=$group-offsets
status.storage.topic=$group-status
config.storage.replication.factor=1
offset.storage.replication.factor=1
status.storage.replication.factor=1
offset.storage.partitions=1
status.storage.partitions=1
offset.flush.interval.ms=1000
config.providers=file,env
config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider
config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider
PROPS
  cat > "$dir/log4j2.properties" <<PROPS
rootLogger.level=INFO
rootLogger.appenderRef.file.ref=file
appender.file.type=File
appender.file.name=file
appender.file.fileName=$dir/connect.log
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %m (%c)%n
logger.reflections.name=org.reflections
logger.reflections.level=ERROR
PROPS
  nohup java "-Xmx${CONNECT_HEAP:-768m}" -Xms128m -cp "$jars/*" \
    "-Dlog4j2.configurationFile=$dir/log4j2.properties" \
    org.apache.kafka.connect.cli.ConnectDistributed "$dir/connect.properties" >"$dir/stdout.log" 2>&1 &
  echo $! >"$pidfile"
  await_ready connect 120 "connect: ready on $url (pid $(cat "$pidfile"), Kafka $bootstrap, log $dir/connect.log)" \
    "$dir/stdout.log" "$dir/connect.log"
}


case "$cmd" in
  start) start ;;
  stop) stop_service connect 30 ;;
  status) if running; then echo "connect: running on $url (pid $(cat "$pidfile"))"; else echo "connect: not running"; exit 3; fi ;;
  *) echo "usage: scripts/connect.sh start|stop|status [PORT]" >&2; exit 2 ;;
esac
