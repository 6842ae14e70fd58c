#!/usr/bin/env bash
# Fetch JVM jars from Maven Central into .jars/<component>, so that later runs work offline.
#   scripts/fetch-jars.sh          Spark's extras: Delta, the Kafka source, S3A for s3a:// (jvm/spark/pom.xml),
#                                  and cdc-delta's own decoder, built from jvm/decoder (cdc-delta-decoder.jar)
#   scripts/fetch-jars.sh kafka    the Kafka broker and its dependencies (jvm/kafka/pom.xml)
#   scripts/fetch-jars.sh connect  a Kafka Connect worker, and the Debezium connectors unpacked into
#                                  .jars/connect/plugins (jvm/connect/pom.xml)
# Idempotent: a complete folder newer than its POM is left alone.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
component="${1:-spark}"
pom="$root/jvm/$component/pom.xml"
[[ -f "$pom" ]] || { echo "fetch-jars: no $pom; components: $(ls "$root/jvm" | grep -v settings | tr '\n' ' ')" >&2; exit 2; }
dest="$root/.jars/$component"
[[ "$component" == spark && -n "${CDC_DELTA_JARS_DIR:-}" ]] && dest="$CDC_DELTA_JARS_DIR"
stamp="$dest/.complete"
mvn_required() {
  command -v mvn >/dev/null || { echo "fetch-jars: Maven (mvn) is required: apt-get install maven" >&2; exit 1; }
}
# The project's JVM code (jvm/decoder), built into the Spark jars when missing or older than its sources.
build_decoder() {
  local jar="$dest/cdc-delta-decoder.jar" src="$root/jvm/decoder"
  [[ -f "$jar" && -z "$(find "$src/pom.xml" "$src/src" -newer "$jar" -print -quit)" ]] && return 0
  mvn_required
  command -v javac >/dev/null || { echo "fetch-jars: a JDK (javac) is required: apt-get install openjdk-17-jdk-headless" >&2; exit 1; }
  echo "fetch-jars: building cdc-delta's decoder (jvm/decoder) into $jar"
  rm -rf "$src/target"
  mvn -q -B -s "$root/jvm/settings.xml" -f "$src/pom.xml" package -Dmaven.test.skip=true
  cp "$src/target/cdc-delta-decoder.jar" "$jar"
}
if [[ -f "$stamp" && "$stamp" -nt "$pom" ]]; then
  [[ "$component" == spark ]] && build_decoder
  echo "fetch-jars: $dest is up to date ($(ls "$dest"/*.jar | wc -l) jars)"
  exit 0
fi
mvn_required
# Maven keeps its unpack markers under jvm/<component>/target: left there, a fetch after the POM changed
# would skip the unpack and leave the plugins folder empty.
rm -rf "$dest" "$root/jvm/$component/target" && mkdir -p "$dest"
echo "fetch-jars: resolving $component ($(grep -c '<dependency>' "$pom") artifacts and what they need) into $dest"
mvn -q -B -s "$root/jvm/settings.xml" -f "$pom" dependency:copy-dependencies \
  -DoutputDirectory="$dest" -DincludeScope=runtime
if grep -q '<artifactItems>' "$pom"; then  # plugin archives the POM lists, unpacked one folder each
  mvn -q -B -s "$root/jvm/settings.xml" -f "$pom" dependency:unpack -DoutputDirectory="$dest/plugins" \
    -DmarkersDirectory="$dest/.markers"
fi
touch "$stamp"
[[ "$component" == spark ]] && build_decoder
echo "fetch-jars: $(ls "$dest"/*.jar | wc -l) jars in $dest"
