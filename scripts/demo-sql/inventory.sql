-- The demo's source database, before the Debezium connector starts (its snapshot reads these rows).
CREATE DATABASE IF NOT EXISTS inventory;
USE inventory;
CREATE TABLE inventory.customers (
  id INT PRIMARY KEY,
  name VARCHAR(80) NOT NULL,
  email VARCHAR(120),
  created_at DATETIME(3) NOT NULL
);
CREATE TABLE inventory.orders (
  id BIGINT PRIMARY KEY,
  customer_id INT NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  status ENUM('new','paid','shipped','cancelled') NOT NULL DEFAULT 'new',
  placed_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
);
INSERT INTO inventory.customers
  SELECT seq, CONCAT('customer ', seq), CONCAT('c', seq, '@example.com'), '2026-01-01 09:00:00' + INTERVAL seq MINUTE
  FROM seq_1_to_200;
INSERT INTO inventory.orders (id, customer_id, amount, status)
  SELECT seq, 1 + seq % 200, ROUND(seq * 7.31 % 500, 2), ELT(1 + seq % 4, 'new', 'paid', 'shipped', 'cancelled')
  FROM seq_1_to_2000;
-- Debezium's signal table: the watermarks of incremental snapshots (`cdc-delta resnapshot`); the capture
-- user is granted INSERT, DELETE on it once it exists (scripts/demo.sh, streaming/mariadb-capture-user.sh).
CREATE TABLE inventory.debezium_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data VARCHAR(2048) NULL);
