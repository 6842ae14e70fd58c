#!/usr/bin/env bash
# Fetch JVM jars from Maven Central into .jars/<component>, so that later runs work offline.
#   scripts/fetch-jars.sh          Spark's extras: Delta, the Kafka source, S3A for s3a:// (jvm/spark/pom.xml)
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
if [[ -f "$stamp" && "$stamp" -nt "$pom" ]]; then
  echo "fetch-jars: $dest is up to date ($(ls "$dest"/*.jar | wc -l) jars)"
  exit 0
fi
command -v mvn >/dev/null || { echo "fetch-jars: Maven (mvn) is required: apt-get install maven" >&2; exit 1; }
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
echo "fetch-jars: $(ls "$dest"/*.jar | wc -l) jars in $dest"
