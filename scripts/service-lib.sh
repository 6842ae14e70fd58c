# Sourced by the native service scripts (kafka.sh, connect.sh, mariadb.sh, s3.sh), which set $pidfile and
# $dir: whether the service's process is alive, and stopping it.

running() { [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

# stop_service NAME SECONDS: SIGTERM, then SIGKILL if it has not ended after SECONDS.
stop_service() {
  local name="$1" seconds="$2" pid
  if ! running; then echo "$name: not running ($dir)"; rm -f "$pidfile"; return 0; fi
  pid="$(cat "$pidfile")"
  kill "$pid"
  for _ in $(seq 1 $((seconds * 2))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  rm -f "$pidfile"
  echo "$name: stopped (pid $pid)"
}
