#!/usr/bin/env bash
# A real single-node Apache Kafka broker (KRaft mode, no ZooKeeper, no Docker) on 127.0.0.1,
# run from its Maven Central jars.
#   scripts/kafka.sh start [PORT]   fetch jars if needed, format storage once, start, wait until ready
#   scripts/kafka.sh stop           stop it (SIGTERM, then SIGKILL after 20 s)
#   scripts/kafka.sh status         running or not, and where
# Environment: KAFKA_PORT (default 9092; the controller listens on PORT+1), KAFKA_DIR (default
# var/kafka-PORT: config, data, log, pid), KAFKA_HEAP (default 512m). KAFKA_SASL_USERS="admin:pw,cdc:pw2"
# makes the client listener SASL_PLAINTEXT with PLAIN and those users, with ACLs (StandardAuthorizer): the
# first user is a super user (the broker's own), the others may do only what ACLs allow; each user may also
# log in with SCRAM-SHA-512 (credentials stored when the storage is formatted). KAFKA_TLS=1 makes the
# listener TLS (SASL_SSL, or SSL without users) with a certificate for 127.0.0.1 and localhost signed by a
# CA made at the first start: $KAFKA_DIR/tls/ca.pem is the CA clients check the broker against.
# KAFKA_MTLS_PORT=N (with KAFKA_TLS=1) adds a TLS listener on N that requires a client certificate
# signed by that CA; the certificate's CN is the principal (CN=cdc is User:cdc, under the same ACLs);
# $KAFKA_DIR/tls/client-cdc.pem and client-cdc.key are such a certificate and its key.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cmd="${1:-status}"
port="${2:-${KAFKA_PORT:-9092}}"
dir="${KAFKA_DIR:-$root/var/kafka-$port}"
pidfile="$dir/kafka.pid"
jars="$root/.jars/kafka"

# shellcheck source=scripts/service-lib.sh
source "$root/scripts/service-lib.sh"  # running, await_ready, stop_service
ready() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }

start() {
  if running; then echo "kafka: already running on 127.0.0.1:$port (pid $(cat "$pidfile"))"; return 0; fi
  "$root/scripts/fetch-jars.sh" kafka
  mkdir -p "$dir/data"
  local client="PLAINTEXT"
  [[ -n "${KAFKA_SASL_USERS:-}" ]] && client="SASL_PLAINTEXT"
  if [[ "${KAFKA_TLS:-0}" == 1 ]]; then
    client="SSL"; [[ -n "${KAFKA_SASL_USERS:-}" ]] && client="SASL_SSL"
    tls_files
  fi
  local listener; listener="$(echo "$client" | tr '[:upper:]' '[:lower:]')"
  local mtls="" mtls_map=""
  if [[ -n "${KAFKA_MTLS_PORT:-}" ]]; then
    [[ "${KAFKA_TLS:-0}" == 1 ]] || { echo "kafka: KAFKA_MTLS_PORT needs KAFKA_TLS=1" >&2; exit 2; }
    mtls=",MTLS://127.0.0.1:$KAFKA_MTLS_PORT"; mtls_map=",MTLS:SSL"
  fi
  cat > "$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$((port + 1))
listeners=$client://127.0.0.1:$port,CONTROLLER://127.0.0.1:$((port + 1))$mtls
advertised.listeners=$client://127.0.0.1:$port$mtls
controller.listener.names=CONTROLLER
inter.broker.listener.name=$client
listener.security.protocol.map=$client:$client,CONTROLLER:PLAINTEXT$mtls_map
log.dirs=$dir/data
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
PROPS
  if [[ -n "${KAFKA_SASL_USERS:-}" ]]; then
    local admin="${KAFKA_SASL_USERS%%,*}" users="" entry
    IFS=',' read -ra entries <<<"$KAFKA_SASL_USERS"
    for entry in "${entries[@]}"; do users+=" user_${entry%%:*}=\"${entry#*:}\""; done
    cat >> "$dir/server.properties" <<PROPS
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=PLAIN
listener.name.$listener.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="${admin%%:*}" password="${admin#*:}"$users;
listener.name.$listener.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:${admin%%:*};User:ANONYMOUS
allow.everyone.if.no.acl.found=false
PROPS
    chmod 600 "$dir/server.properties"
  fi
  if [[ "${KAFKA_TLS:-0}" == 1 ]]; then
    cat >> "$dir/server.properties" <<PROPS
ssl.keystore.type=PEM
ssl.keystore.location=$dir/tls/broker-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$dir/tls/ca.pem
ssl.endpoint.identification.algorithm=https
PROPS
  fi
  if [[ -n "$mtls" ]]; then
    cat >> "$dir/server.properties" <<PROPS
listener.name.mtls.ssl.client.auth=required
ssl.principal.mapping.rules=RULE:^CN=([^,]+)\$/\$1/,DEFAULT
PROPS
  fi
  cat > "$dir/log4j.properties" <<PROPS
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=$dir/server.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
PROPS
  local java_cmd=(java "-Xmx${KAFKA_HEAP:-512m}" -Xms128m -cp "$jars/*" "-Dlog4j.configuration=file:$dir/log4j.properties")
  if [[ ! -f "$dir/data/meta.properties" ]]; then
    local cluster_id
    cluster_id="$("${java_cmd[@]}" kafka.tools.StorageTool random-uuid)"
    local scram=() entry
    if [[ -n "${KAFKA_SASL_USERS:-}" ]]; then
      IFS=',' read -ra entries <<<"$KAFKA_SASL_USERS"
      for entry in "${entries[@]}"; do scram+=(--add-scram "SCRAM-SHA-512=[name=${entry%%:*},password=${entry#*:}]"); done
    fi
    "${java_cmd[@]}" kafka.tools.StorageTool format -t "$cluster_id" -c "$dir/server.properties" "${scram[@]}" >/dev/null
  fi
  nohup "${java_cmd[@]}" kafka.Kafka "$dir/server.properties" >"$dir/stdout.log" 2>&1 &
  echo $! >"$pidfile"
  await_ready kafka 60 "kafka: ready on 127.0.0.1:$port (pid $(cat "$pidfile"), data in $dir)" \
    "$dir/stdout.log" "$dir/server.log"
}

tls_files() {  # a CA and the broker's key and certificate (127.0.0.1, localhost), made once per KAFKA_DIR
  local tls="$dir/tls"
  [[ -f "$tls/broker-keystore.pem" ]] && return 0
  mkdir -p "$tls" && chmod 700 "$tls"
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=cdc-delta test CA" \
    -keyout "$tls/ca.key" -out "$tls/ca.pem" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$tls/broker.key" -out "$tls/broker.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$tls/san.ext"
  openssl x509 -req -in "$tls/broker.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial -days 3650 \
    -extfile "$tls/san.ext" -out "$tls/broker.pem" 2>/dev/null
  # Kafka's PEM key store: the private key (PKCS#8, not encrypted) then the certificate chain.
  openssl pkcs8 -topk8 -nocrypt -in "$tls/broker.key" >"$tls/broker-keystore.pem"
  cat "$tls/broker.pem" "$tls/ca.pem" >>"$tls/broker-keystore.pem"
  # A client certificate for the mTLS listener (CN=cdc: principal User:cdc); its key in PKCS#8, as Java reads it.
  openssl req -newkey rsa:2048 -nodes -subj "/CN=cdc" -keyout "$tls/client-cdc.key" -out "$tls/client-cdc.csr" 2>/dev/null
  openssl x509 -req -in "$tls/client-cdc.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial -days 3650 \
    -out "$tls/client-cdc.pem" 2>/dev/null
  chmod 600 "$tls"/*.key "$tls/broker-keystore.pem"
}


case "$cmd" in
  start) start ;;
  stop) stop_service kafka 20 ;;
  status) if running; then echo "kafka: running on 127.0.0.1:$port (pid $(cat "$pidfile"))"; else echo "kafka: not running"; exit 3; fi ;;
  *) echo "usage: scripts/kafka.sh start|stop|status [PORT]" >&2; exit 2 ;;
esac
