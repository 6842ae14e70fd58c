#!/usr/bin/env bash
# A real S3-compatible object store on 127.0.0.1 (SeaweedFS: master, volume server, filer and S3 gateway in
# one `weed server` process; no Docker), for running with storage.root on s3a://.
#   scripts/s3.sh install          build the pinned weed into .tools/bin once (Go from the module proxy)
#   scripts/s3.sh start [PORT]     install if needed, write the S3 identity file, start, wait, create the bucket
#   scripts/s3.sh stop             stop it (SIGTERM, then SIGKILL after 30 s)
#   scripts/s3.sh status           running or not, and where
#   scripts/s3.sh env [PORT]       print shell exports for clients: eval "$(scripts/s3.sh env)"
# Environment: S3_PORT (default 8333, the S3 API; weed's own master, volume and filer servers and their gRPC
# ports take PORT+1..PORT+7), S3_DIR (default var/s3-PORT: data, identity file, log, pid), S3_BUCKET (default
# cdc-delta; created on start), S3_ACCESS_KEY / S3_SECRET_KEY (the one identity, allowed everything; test
# defaults; AWS_* variables are deliberately not read, so real AWS credentials never reach the test store).
# Building weed needs Go (on PATH or /usr/local/go/bin; go.mod asks for 1.26.6 and an older go fetches that
# toolchain from the module proxy). GOMODCACHE/GOCACHE default to .tools/go (~4 GB after a build) and are
# removed after a successful build unless WEED_KEEP_GO_CACHE=1: only .tools/bin/weed is needed, cache that in CI.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cmd="${1:-status}"
port="${2:-${S3_PORT:-8333}}"
dir="${S3_DIR:-$root/var/s3-$port}"
pidfile="$dir/weed.pid"
bucket="${S3_BUCKET:-cdc-delta}"
access_key="${S3_ACCESS_KEY:-cdc-delta-test}"
secret_key="${S3_SECRET_KEY:-cdc-delta-test-secret}"
# `go install module/weed@version` is refused (SeaweedFS's go.mod has a replace directive), so the script
# downloads the module at this version and builds ./weed inside it.
weed_module="github.com/seaweedfs/seaweedfs"
weed_version="v0.0.0-20261109003541-7506e5f91cd6"
tools="$root/.tools"
weed="$tools/bin/weed"
endpoint="http://127.0.0.1:$port"

# shellcheck source=scripts/service-lib.sh
source "$root/scripts/service-lib.sh"  # running, stop_service
s3curl() { curl -sS --max-time 5 --aws-sigv4 "aws:amz:us-east-1:s3" --user "$access_key:$secret_key" "$@"; }

install() {
  if [[ -x "$weed" && "$(cat "$tools/bin/.weed-version" 2>/dev/null)" == "$weed_version" ]]; then return 0; fi
  local go; go="$(command -v go || echo /usr/local/go/bin/go)"
  [[ -x "$go" ]] || { echo "s3: Go is required to build weed: install Go 1.26 (https://go.dev/dl) or put it on PATH" >&2; exit 1; }
  mkdir -p "$tools/bin"
  local own_cache=0
  if [[ -z "${GOMODCACHE:-}" && -z "${GOCACHE:-}" ]]; then
    own_cache=1; export GOMODCACHE="$tools/go/mod" GOCACHE="$tools/go/cache"
  fi
  # -modcacherw: the module cache stays deletable with a plain rm -rf.
  export GOFLAGS="${GOFLAGS:+$GOFLAGS }-modcacherw"
  local log="$tools/weed-build.log" started=$SECONDS src
  echo "s3: building weed $weed_version into $weed (first build: several minutes on 2 cores; log in $log)"
  src="$("$go" mod download -json "$weed_module@$weed_version" 2>"$log" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')"
  [[ -n "$src" && -d "$src" ]] || { echo "s3: could not download $weed_module@$weed_version; see $log" >&2; tail -20 "$log" >&2; exit 1; }
  (cd "$src" && "$go" build -trimpath -ldflags='-s -w' -o "$weed.tmp" ./weed) >>"$log" 2>&1 \
    || { echo "s3: building weed failed; see $log" >&2; tail -20 "$log" >&2; exit 1; }
  mv "$weed.tmp" "$weed"
  echo "$weed_version" >"$tools/bin/.weed-version"
  [[ $own_cache == 1 && "${WEED_KEEP_GO_CACHE:-0}" != 1 ]] && rm -rf "$tools/go"
  echo "s3: built $weed in $((SECONDS - started)) s"
}

start() {
  if running; then echo "s3: already running on $endpoint (pid $(cat "$pidfile"))"; return 0; fi
  install
  mkdir -p "$dir/data"
  (umask 077 && cat >"$dir/s3.json" <<JSON
{
  "identities": [
    {
      "name": "cdc-delta",
      "credentials": [{"accessKey": "$access_key", "secretKey": "$secret_key"}],
      "actions": ["Admin", "Read", "List", "Tagging", "Write"]
    }
  ]
}
JSON
  )
  # Everything on loopback, every port pinned (no Iceberg/Lance side servers), no telemetry, 1 GB volumes
  # grown on demand (-volume.max=0: as many as the disk holds; each bucket takes several).
  nohup "$weed" server -dir="$dir/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 -master.telemetry=false \
    -master.port=$((port + 1)) -master.port.grpc=$((port + 2)) -master.volumeSizeLimitMB=1024 \
    -volume.port=$((port + 3)) -volume.port.grpc=$((port + 4)) -volume.max=0 -volume.preStopSeconds=1 \
    -filer -filer.port=$((port + 5)) -filer.port.grpc=$((port + 6)) \
    -s3 -s3.port="$port" -s3.port.grpc=$((port + 7)) -s3.port.iceberg=0 -s3.port.lance=0 \
    -s3.config="$dir/s3.json" >"$dir/server.log" 2>&1 &
  echo $! >"$pidfile"
  local code
  for _ in $(seq 1 120); do
    # Ready once an authenticated CreateBucket succeeds (409: it exists already, ours).
    code="$(s3curl -o /dev/null -w '%{http_code}' -X PUT "$endpoint/$bucket" 2>/dev/null || true)"
    if [[ "$code" == 200 || "$code" == 409 ]]; then
      echo "s3: ready on $endpoint (pid $(cat "$pidfile"), bucket $bucket, access key $access_key, data in $dir)"
      return 0
    fi
    running || { echo "s3: weed exited during start; see $dir/server.log" >&2; tail -20 "$dir/server.log" >&2; exit 1; }
    sleep 0.5
  done
  echo "s3: not ready on $endpoint after 60 s (last CreateBucket answer: ${code:-none}); see $dir/server.log" >&2
  exit 1
}


env_exports() {
  cat <<ENV
export S3_ENDPOINT=$endpoint S3_BUCKET=$bucket
export AWS_ENDPOINT_URL=$endpoint AWS_ACCESS_KEY_ID=$access_key AWS_SECRET_ACCESS_KEY=$secret_key
export AWS_REGION=us-east-1 AWS_ALLOW_HTTP=true
ENV
}

case "$cmd" in
  install) install ;;
  start) start ;;
  stop) stop_service s3 30 ;;
  status) if running; then echo "s3: running on $endpoint (pid $(cat "$pidfile"), bucket $bucket)"; else echo "s3: not running"; exit 3; fi ;;
  env) env_exports ;;
  *) echo "usage: scripts/s3.sh install | start|stop|status|env [PORT]" >&2; exit 2 ;;
esac
