#!/usr/bin/env bash
# A real MariaDB server on 127.0.0.1 from Debian's mariadb-server package (no Docker), set up as
# Debezium needs it: the binlog in ROW format with full row images, a server id, utf8mb4 (Debian's
# default is latin1), and UTC as the server's time zone.
#   scripts/mariadb.sh start [PORT]   install the package if missing, create the data folder once, start, wait
#   scripts/mariadb.sh stop           stop it (SIGTERM, then SIGKILL after 30 s)
#   scripts/mariadb.sh status         running or not, and where
#   scripts/mariadb.sh sql "SQL"      run SQL as root through the server's socket
# Environment: MARIADB_PORT (default 3306), MARIADB_DIR (default var/mariadb-PORT: data, socket, log, pid),
# MARIADB_CDC_PASSWORD (the capture user's password; default: generated once).
# root connects through the socket only. The first start creates the capture user `cdc` with the grants
# Debezium documents; its password is in $MARIADB_DIR/cdc.properties (mode 600, "password=..."), the
# file Kafka Connect's FileConfigProvider reads: ${file:$MARIADB_DIR/cdc.properties:password}.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cmd="${1:-status}"
if [[ "$cmd" == sql ]]; then port="${MARIADB_PORT:-3306}"; else port="${2:-${MARIADB_PORT:-3306}}"; fi
dir="${MARIADB_DIR:-$root/var/mariadb-$port}"
pidfile="$dir/mariadb.pid"
socket="$dir/mariadb.sock"

# shellcheck source=scripts/service-lib.sh
source "$root/scripts/service-lib.sh"  # running, stop_service
client() { mariadb --protocol=socket --socket="$socket" -uroot --default-character-set=utf8mb4 "$@"; }

install() {
  command -v mariadbd >/dev/null && return 0
  echo "mariadb: installing Debian's mariadb-server"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq mariadb-server >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq mariadb-server >/dev/null; }
}

create_capture_user() {
  local password="${MARIADB_CDC_PASSWORD:-$(head -c 32 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 20)}"
  client -e "CREATE OR REPLACE USER 'cdc'@'%' IDENTIFIED BY '$password';
    GRANT SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT, LOCK TABLES ON *.* TO 'cdc'@'%';"
  (umask 077 && printf 'password=%s\n' "$password" >"$dir/cdc.properties")
}

start() {
  if running; then echo "mariadb: already running on 127.0.0.1:$port (pid $(cat "$pidfile"))"; return 0; fi
  install
  mkdir -p "$dir"
  local fresh=0
  if [[ ! -d "$dir/data/mysql" ]]; then
    fresh=1
    mariadb-install-db --no-defaults --datadir="$dir/data" --user="$(id -un)" \
      --auth-root-authentication-method=socket >"$dir/install.log" 2>&1 \
      || { echo "mariadb: could not create $dir/data; see $dir/install.log" >&2; tail -20 "$dir/install.log" >&2; exit 1; }
  fi
  nohup mariadbd --no-defaults --datadir="$dir/data" --socket="$socket" --port="$port" --bind-address=127.0.0.1 \
    --pid-file="$pidfile" --user="$(id -un)" --log-error="$dir/error.log" --server-id=1 --log-bin=mysql-bin \
    --binlog-format=ROW --binlog-row-image=FULL --innodb-buffer-pool-size=64M \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci --default-time-zone=+00:00 \
    >"$dir/stdout.log" 2>&1 &
  for _ in $(seq 1 120); do
    if client -e "SELECT 1" >/dev/null 2>&1; then
      # Anonymous users would shadow 'user'@'%' for clients on localhost.
      [[ $fresh == 1 ]] && client -e "DROP USER IF EXISTS ''@'localhost', ''@'$(hostname)'"
      [[ -f "$dir/cdc.properties" ]] || create_capture_user
      echo "mariadb: ready on 127.0.0.1:$port (pid $(cat "$pidfile"), socket $socket, data in $dir;" \
        "capture user cdc, password in $dir/cdc.properties)"; return 0
    fi
    sleep 0.5
  done
  echo "mariadb: not ready on 127.0.0.1:$port after 60 s; see $dir/error.log" >&2
  tail -20 "$dir/error.log" >&2 || true
  exit 1
}


case "$cmd" in
  start) start ;;
  stop) stop_service mariadb 30 ;;
  status) if running; then echo "mariadb: running on 127.0.0.1:$port (pid $(cat "$pidfile"))"; else echo "mariadb: not running"; exit 3; fi ;;
  sql) client -e "$2" ;;
  *) echo "usage: scripts/mariadb.sh start|stop|status [PORT] | sql \"SQL\"" >&2; exit 2 ;;
esac
