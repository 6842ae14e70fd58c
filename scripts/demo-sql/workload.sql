-- Changes after the connector's snapshot: inserts, updates, deletes, a transaction, an ALTER.
USE inventory;
INSERT INTO inventory.orders (id, customer_id, amount, status)
  SELECT 2000 + seq, 1 + seq % 200, ROUND(seq * 3.17 % 300, 2), 'new' FROM seq_1_to_500;
UPDATE inventory.orders SET status = 'paid' WHERE id % 7 = 0 AND status = 'new';
UPDATE inventory.customers SET email = NULL WHERE id % 10 = 0;
DELETE FROM inventory.orders WHERE status = 'cancelled' AND id % 3 = 0;
START TRANSACTION;
INSERT INTO inventory.customers VALUES (201, 'late customer', 'late@example.com', NOW(3));
UPDATE inventory.orders SET customer_id = 201, amount = amount + 1 WHERE id BETWEEN 2001 AND 2010;
COMMIT;
ALTER TABLE inventory.customers ADD COLUMN tier VARCHAR(10) NOT NULL DEFAULT 'standard';
UPDATE inventory.customers SET tier = 'gold' WHERE id <= 20;
INSERT INTO inventory.demo_done VALUES (1);
