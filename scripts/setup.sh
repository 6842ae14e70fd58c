#!/usr/bin/env bash
# Set up a development/run environment from a clean clone: a virtualenv in .venv with cdc-delta
# (editable) and its test/dev tools, and the JVM jars in .jars/spark. Idempotent and quick when
# nothing changed. Needs python3 (3.10+), Java 17 and Maven (installed from Debian if missing).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if ! command -v java >/dev/null || ! command -v javac >/dev/null; then
  echo "setup: a Java 17 JDK is required (apt-get install openjdk-17-jdk-headless)" >&2; exit 1
fi
if ! command -v mvn >/dev/null; then
  echo "setup: installing Maven from Debian's packages"
  apt-get update -qq && apt-get install -y -qq maven >/dev/null
fi
if [[ ! -x .venv/bin/python ]]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
stamp=.venv/.cdc-delta-installed
if [[ ! -f $stamp || pyproject.toml -nt $stamp ]]; then
  echo "setup: installing cdc-delta and its dependencies into .venv (pyspark is a large download)"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[test,dev]'
  touch "$stamp"
fi
scripts/fetch-jars.sh
# Local Spark JVMs start from a class archive of these jars (a quarter to a third faster); made once, in one to two minutes.
.venv/bin/cdc-delta jvm-archive | sed 's/^/setup: /' \
  || echo "setup: no JVM class archive (Spark starts without it, a few seconds slower each time); the error is above" >&2
echo "setup: ready (.venv/bin/cdc-delta --help)"
