#!/usr/bin/env bash
# Fetch the JVM jars the Spark driver needs (Delta, the Kafka source) from Maven Central into
# .jars/spark, so that every later run works offline. Idempotent: a complete folder is left alone.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${CDC_DELTA_JARS_DIR:-$root/.jars/spark}"
stamp="$dest/.complete"
pom="$root/jvm/spark/pom.xml"
if [[ -f "$stamp" && "$stamp" -nt "$pom" ]]; then
  echo "fetch-jars: $dest is up to date ($(ls "$dest"/*.jar | wc -l) jars)"
  exit 0
fi
command -v mvn >/dev/null || { echo "fetch-jars: Maven (mvn) is required: apt-get install maven" >&2; exit 1; }
rm -rf "$dest" && mkdir -p "$dest"
echo "fetch-jars: resolving $(grep -c '<dependency>' "$pom") artifacts from Maven Central into $dest"
mvn -q -B -s "$root/jvm/settings.xml" -f "$pom" dependency:copy-dependencies \
  -DoutputDirectory="$dest" -DincludeScope=runtime
touch "$stamp"
echo "fetch-jars: $(ls "$dest"/*.jar | wc -l) jars in $dest"
