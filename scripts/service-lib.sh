# Sourced by the native service scripts (kafka.sh, connect.sh, mariadb.sh, s3.sh, trino.sh), which set
# $pidfile and $dir: whether the service's process is alive, waiting until it answers, and stopping it.

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

# await_ready NAME SECONDS LINE LOG...: poll the script's ready() every 0.5 s and print LINE once it answers;
# where the process ends first or SECONDS pass, name the LOGs (the end of each) and exit 1.
await_ready() {
  local name="$1" seconds="$2" line="$3"
  shift 3
  for _ in $(seq 1 $((seconds * 2))); do
    if ready; then echo "$line"; return 0; fi
    running || { echo "$name: exited during start; see $*" >&2; tail -20 "$@" >&2 || true; exit 1; }
    sleep 0.5
  done
  echo "$name: not ready after $seconds s; see $*" >&2
  exit 1
}
