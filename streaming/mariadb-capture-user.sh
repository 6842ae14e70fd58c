#!/bin/bash
# compose.yaml: run by the MariaDB image at its first start (docker-entrypoint-initdb.d). Creates the
# capture user `cdc` with the grants Debezium documents; its password comes from the secret that the
# Connect worker reads too (/run/secrets/mariadb.properties, "password=..."), never from this file.
set -euo pipefail
password="$(sed -n 's/^password=//p' /run/secrets/mariadb.properties)"
[[ -n "$password" ]] || { echo "mariadb.properties holds no password=... line" >&2; exit 1; }
mariadb -uroot -p"${MARIADB_ROOT_PASSWORD}" <<SQL
CREATE USER IF NOT EXISTS 'cdc'@'%' IDENTIFIED BY '${password//\'/\'\'}';
GRANT SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT, LOCK TABLES ON *.* TO 'cdc'@'%';
GRANT INSERT, DELETE ON inventory.debezium_signal TO 'cdc'@'%';
SQL
