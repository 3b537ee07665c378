-- libreserve schema (MariaDB >= 10.6 or MySQL >= 8.0.16, InnoDB), version 3.
--
-- Load it into the application's database, to install and to upgrade
-- (loading it again keeps every row):
--   mariadb your_db < /usr/local/share/libreserve/schema.sql
-- Every name it creates starts with rsv_, so it never touches the
-- application's own tables.
--
-- Every key starts with shop_id, so a deployment sharded on shop_id keeps
-- each libreserve transaction on one shard.
--
-- How the numbers fit together, per (shop, item, location):
--   rsv_ledger.issued = units in rsv_pool (the sum of its rows' units)
--                     + quantity in rsv_holds
--                     + quantity in rsv_journal
--   and 0 <= issued <= on_hand (enforced by a CHECK constraint).
-- Stock on hand as a buyer sees it is
--   on_hand - (claimed quantity in rsv_journal),
-- because claims are journalled and folded into the ledger row later, so
-- that claiming never queues on the ledger row.  Use rsv_stock_get() or
-- the view rsv_stock rather than reading on_hand directly.
--
-- Sections, in the order they must run:
--   1. Upgrades before the tables exist (renames to the rsv_ names)
--   2. Tables
--   3. Upgrades of tables that already existed (new columns)
--   4. View and schema version
--   5. Procedures (optional: without them the library sends statements)
--   6. Retired names (procedures of earlier versions, dropped)

-- =======================================================================
-- 1. Upgrades before the tables exist
-- Before any CREATE TABLE IF NOT EXISTS: a CREATE of a new name would
-- make an empty table of that name, and the rename, which does nothing
-- once a table of the new names exists, would leave the old tables and
-- their rows behind.
-- =======================================================================

-- Upgrade from version 1, or from the unversioned schema before it, whose
-- tables had unprefixed names (inventory_levels, ...).  They are renamed,
-- rows kept, only when they are provably libreserve's: every one of the
-- five has libreserve's columns, and rsv_schema is absent or says
-- version 1; never when a table of the new names exists (loading this
-- file again), so an application's own inventory_levels stays as it is.
-- Renames of tables, columns and indexes change metadata only.  The CHECK
-- constraints keep their old names: renaming one copies its table.
-- Libraries of those versions cannot run on the renamed tables: stop them
-- before loading this file (README, "Upgrading").
DROP PROCEDURE IF EXISTS rsv_upgrade_to_v2;
DELIMITER //
CREATE PROCEDURE rsv_upgrade_to_v2()
  MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE v_new, v_ours, v_version INT DEFAULT 0;
  SELECT COUNT(*) INTO v_new FROM information_schema.tables
   WHERE table_schema = DATABASE()
     AND table_name IN ('rsv_ledger', 'rsv_pool', 'rsv_checkouts',
                        'rsv_holds', 'rsv_journal');
  IF v_new = 0 THEN
    -- libreserve's columns in the five old tables: all 15, or not ours
    SELECT COUNT(*) INTO v_ours FROM information_schema.columns
     WHERE table_schema = DATABASE()
       AND ((table_name = 'inventory_levels'
             AND column_name IN ('inventory_item_id', 'inventory_group_id',
                                 'issued', 'next_unit_id'))
         OR (table_name = 'reservation_units'
             AND column_name IN ('inventory_item_id', 'inventory_group_id',
                                 'id'))
         OR (table_name = 'reservation_checkouts'
             AND column_name IN ('checkout_token', 'hold_count'))
         OR (table_name = 'reserved_quantities'
             AND column_name IN ('inventory_item_id', 'inventory_group_id',
                                 'generation'))
         OR (table_name = 'reservation_settlements'
             AND column_name IN ('inventory_item_id', 'inventory_group_id',
                                 'kind')));
    IF EXISTS (SELECT 1 FROM information_schema.tables
                WHERE table_schema = DATABASE()
                  AND table_name = 'rsv_schema') THEN
      SELECT COALESCE(MAX(version), 0) INTO v_version FROM rsv_schema;
    END IF;
    IF v_version = 1 AND v_ours < 15 THEN
      -- stop rather than install empty tables beside the data
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
        'libreserve schema 1: its tables are missing or changed';
    END IF;
    IF v_version <= 1 AND v_ours = 15 THEN
      RENAME TABLE inventory_levels TO rsv_ledger,
                   reservation_units TO rsv_pool,
                   reservation_checkouts TO rsv_checkouts,
                   reserved_quantities TO rsv_holds,
                   reservation_settlements TO rsv_journal;
      IF EXISTS (SELECT 1 FROM information_schema.views
                  WHERE table_schema = DATABASE()
                    AND table_name = 'inventory_stock') THEN
        DROP VIEW inventory_stock;
      END IF;
    END IF;
  END IF;
  -- The columns and indexes of renamed tables, also of a load that
  -- stopped after the rename.
  IF EXISTS (SELECT 1 FROM information_schema.columns
              WHERE table_schema = DATABASE() AND table_name = 'rsv_ledger'
                AND column_name = 'inventory_item_id') THEN
    ALTER TABLE rsv_ledger RENAME COLUMN inventory_item_id TO item_id,
      RENAME COLUMN inventory_group_id TO location_id;
  END IF;
  IF EXISTS (SELECT 1 FROM information_schema.columns
              WHERE table_schema = DATABASE() AND table_name = 'rsv_pool'
                AND column_name = 'inventory_item_id') THEN
    ALTER TABLE rsv_pool RENAME COLUMN inventory_item_id TO item_id,
      RENAME COLUMN inventory_group_id TO location_id;
  END IF;
  IF EXISTS (SELECT 1 FROM information_schema.statistics
              WHERE table_schema = DATABASE()
                AND table_name = 'rsv_checkouts'
                AND index_name = 'reservation_checkouts_settled') THEN
    ALTER TABLE rsv_checkouts
      RENAME INDEX reservation_checkouts_settled TO rsv_checkouts_settled;
  END IF;
  IF EXISTS (SELECT 1 FROM information_schema.columns
              WHERE table_schema = DATABASE() AND table_name = 'rsv_holds'
                AND column_name = 'inventory_item_id') THEN
    ALTER TABLE rsv_holds RENAME COLUMN inventory_item_id TO item_id,
      RENAME COLUMN inventory_group_id TO location_id,
      RENAME INDEX reserved_quantities_expiry TO rsv_holds_expiry;
  END IF;
  IF EXISTS (SELECT 1 FROM information_schema.columns
              WHERE table_schema = DATABASE() AND table_name = 'rsv_journal'
                AND column_name = 'inventory_item_id') THEN
    ALTER TABLE rsv_journal RENAME COLUMN inventory_item_id TO item_id,
      RENAME COLUMN inventory_group_id TO location_id;
  END IF;
END//
DELIMITER ;
CALL rsv_upgrade_to_v2();
DROP PROCEDURE rsv_upgrade_to_v2;

-- =======================================================================
-- 2. Tables
-- CREATE TABLE IF NOT EXISTS only: a table that exists is kept as it is,
-- rows and all; what an older version of it lacks, section 3 adds.
-- New tables go at the end of this section.
-- =======================================================================

-- The schema's version, one row.  rsv_open compares it with the version
-- its library works on (RSV_SCHEMA_VERSION): a database older than the
-- library must be upgraded first (load this file); one whose
-- oldest_library is newer than the library needs a newer library.
-- Loading this file never lowers either: during a rolling deploy an
-- older copy may be loaded last.
CREATE TABLE IF NOT EXISTS rsv_schema (
  id             TINYINT UNSIGNED NOT NULL, -- always 1
  version        INT UNSIGNED NOT NULL,     -- this schema's version
  oldest_library INT UNSIGNED NOT NULL,     -- the oldest library schema
                                            -- version that still works
  updated_at     DATETIME(6) NOT NULL,      -- last change of version
  PRIMARY KEY (id),
  CONSTRAINT rsv_schema_one_row CHECK (id = 1)
) ENGINE=InnoDB;

-- The stock ledger: one row per shop, item and location.
CREATE TABLE IF NOT EXISTS rsv_ledger (
  shop_id            BIGINT UNSIGNED NOT NULL, -- the application's shop id
  item_id            BIGINT UNSIGNED NOT NULL, -- the application's item id
  location_id        BIGINT UNSIGNED NOT NULL, -- location (warehouse, store)
  on_hand            BIGINT NOT NULL,          -- units in stock, minus the
                                               -- claims folded so far
  issued             BIGINT NOT NULL DEFAULT 0,-- units handed to the pool
                                               -- and holds, not yet folded
                                               -- back (see above)
  next_unit_id       BIGINT UNSIGNED NOT NULL DEFAULT 1,
                                               -- id of the next pool row;
                                               -- ids only grow
  pool_cap           INT NULL,                 -- per-row pool cap; NULL =
                                               -- the context's pool_cap
  updated_at         DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
                                               -- last change of this row
  PRIMARY KEY (shop_id, item_id, location_id),
  CONSTRAINT rsv_ledger_bounds
    CHECK (on_hand >= 0 AND issued >= 0 AND issued <= on_hand
           AND (pool_cap IS NULL OR pool_cap BETWEEN 1 AND 10000))
) ENGINE=InnoDB;

-- The pool: lockable rows of reservable units, at most pool_cap units per
-- key.  A row carries `units` units (at least 1): a pool is minted in rows
-- of pool_cap / 100 units each (1 below a cap of 200), so a full pool has
-- about 100 rows, enough for that many buyers at once to take different
-- rows, and a reserve of several units usually takes one row.  A take
-- updates a row in place, or deletes it when it takes all its units: a
-- pool of one row per unit was minted and deleted row by row, and its
-- buyers spent their time reading past deleted rows and spinning on a
-- few index pages (docs/performance.md).  The filter columns lead the
-- clustered key, so taking units locks one index record per row (no
-- secondary index, no second lock).
CREATE TABLE IF NOT EXISTS rsv_pool (
  shop_id            BIGINT UNSIGNED NOT NULL, -- as in rsv_ledger
  item_id            BIGINT UNSIGNED NOT NULL, -- as in rsv_ledger
  location_id        BIGINT UNSIGNED NOT NULL, -- as in rsv_ledger
  id                 BIGINT UNSIGNED NOT NULL, -- from next_unit_id
  units              INT NOT NULL DEFAULT 1,   -- units in this row (>= 1)
  PRIMARY KEY (shop_id, item_id, location_id, id)
) ENGINE=InnoDB;

-- One row per checkout that ever reserved: its state, and the record that
-- makes claims idempotent.  Claimed/released rows are purged by rsv_sweep()
-- after the retention period.
CREATE TABLE IF NOT EXISTS rsv_checkouts (
  shop_id        BIGINT UNSIGNED NOT NULL,      -- the shop
  checkout_token VARBINARY(128) NOT NULL,       -- the application's token,
                                                -- byte-exact
  status         TINYINT UNSIGNED NOT NULL,     -- 1 held, 2 claimed,
                                                -- 3 released, 4 expired
  generation     INT UNSIGNED NOT NULL,         -- bumped on every reserve
                                                -- of this token
  hold_count     INT UNSIGNED NOT NULL,         -- rows in rsv_holds when
                                                -- held (fewer = expired)
  expires_at     DATETIME(6) NOT NULL,          -- the hold's deadline
                                                -- (server clock)
  created_at     DATETIME(6) NOT NULL,          -- first reserve
  updated_at     DATETIME(6) NOT NULL,          -- last state change
  PRIMARY KEY (shop_id, checkout_token),
  KEY rsv_checkouts_settled (shop_id, status, updated_at)
) ENGINE=InnoDB;

-- Active holds: one row per checkout and (item, location).
CREATE TABLE IF NOT EXISTS rsv_holds (
  shop_id            BIGINT UNSIGNED NOT NULL, -- the shop
  checkout_token     VARBINARY(128) NOT NULL,  -- the holding checkout
  item_id            BIGINT UNSIGNED NOT NULL, -- held item
  location_id        BIGINT UNSIGNED NOT NULL, -- held at this location
  quantity           BIGINT NOT NULL,          -- units held (> 0)
  generation         INT UNSIGNED NOT NULL,    -- the checkout's generation
  expires_at         DATETIME(6) NOT NULL,     -- deadline (server clock);
                                               -- past it the units may be
                                               -- given back
  created_at         DATETIME(6) NOT NULL,     -- when reserved
  PRIMARY KEY (shop_id, checkout_token, item_id, location_id),
  KEY rsv_holds_expiry (shop_id, item_id, location_id, expires_at),
  CONSTRAINT rsv_holds_positive CHECK (quantity > 0)
) ENGINE=InnoDB;

-- Settled holds not yet folded into the ledger: written by claim and
-- release instead of updating the (hot) ledger row, folded under the ledger
-- row lock by the next refill, sweep or stock change.  The key makes each
-- hold settle at most once.
CREATE TABLE IF NOT EXISTS rsv_journal (
  shop_id            BIGINT UNSIGNED NOT NULL, -- the shop
  item_id            BIGINT UNSIGNED NOT NULL, -- settled item
  location_id        BIGINT UNSIGNED NOT NULL, -- settled location
  checkout_token     VARBINARY(128) NOT NULL,  -- the checkout
  generation         INT UNSIGNED NOT NULL,    -- its generation
  kind               TINYINT UNSIGNED NOT NULL,-- 2 claimed (leaves the
                                               -- ledger), 3 released
  quantity           BIGINT NOT NULL,          -- units settled (> 0)
  settled_at         DATETIME(6) NOT NULL,     -- when
  PRIMARY KEY (shop_id, item_id, location_id, checkout_token, generation),
  CONSTRAINT rsv_journal_positive CHECK (quantity > 0)
) ENGINE=InnoDB;

-- Migration from the store a shop sold through before (docs/migration.md).
-- Optional: a library that never calls rsv_migrate_open() never reads
-- these tables, and they need no schema version of their own (loading
-- this file again adds them to an older database).
--
-- Each shop's stage.  A shop without a row is at stage 0.  Every handle of
-- rsv_migrate_open() reads the rows whose version is above the highest it
-- has seen, once per refresh interval, off the request path.  So every
-- change takes the next version of the table, and versions are committed
-- in order: rsv-admin migrate locks the row of rsv_migration_change from
-- reading the highest version to its COMMIT.  Change the rows only
-- through rsv-admin migrate, or by that same rule.
CREATE TABLE IF NOT EXISTS rsv_migration_stage (
  shop_id        BIGINT UNSIGNED NOT NULL,  -- the shop
  stage          TINYINT UNSIGNED NOT NULL, -- 0 the old store only,
                                            -- 1 shadow (the old store
                                            -- decides, libreserve mirrors),
                                            -- 2 primary (libreserve
                                            -- decides, the old store is
                                            -- kept current), 3 complete
                                            -- (libreserve only)
  version        BIGINT UNSIGNED NOT NULL,  -- the table's change number
                                            -- of this row's last change
  changed_at     DATETIME(6) NOT NULL,      -- when
  reason         VARCHAR(255) NOT NULL DEFAULT '', -- why (the operator's
                                            -- words)
  shadow_since   DATETIME(6) NULL,          -- since when the shop has been
                                            -- at stage 1 or above without a
                                            -- break (NULL at stage 0)
  rollout_seq    BIGINT UNSIGNED NULL,      -- the version at which
                                            -- migrate percent took the shop
                                            -- in (lowering the percentage
                                            -- removes the highest first)
  needs_compare  TINYINT UNSIGNED NOT NULL DEFAULT 0, -- mirroring work was
                                            -- dropped (a full queue) or
                                            -- the old store failed while
                                            -- primary: compare the stores
                                            -- before the next step
                                            -- (rsv-admin migrate compared
                                            -- clears it)
  PRIMARY KEY (shop_id),
  UNIQUE KEY rsv_migration_stage_version (version),
  CONSTRAINT rsv_migration_stage_known CHECK (stage <= 3)
) ENGINE=InnoDB;

-- The one row every change of rsv_migration_stage locks (SELECT ... FOR
-- UPDATE) before it reads the highest version, and writes when it writes
-- a stage.  On one server the lock makes changes wait for each other; a
-- Galera cluster refuses named locks and keeps row locks per node, but two
-- changes made at once on two nodes both write this row, so the later
-- fails certification (1213) and rsv-admin runs it again.  Either way
-- versions become visible in order and every check sees the stages it
-- decides on.
CREATE TABLE IF NOT EXISTS rsv_migration_change (
  id             TINYINT UNSIGNED NOT NULL, -- always 1
  changes        BIGINT UNSIGNED NOT NULL DEFAULT 0, -- changes that wrote
                                            -- a stage, ever
  changed_at     DATETIME(6) NULL,          -- the last one
  PRIMARY KEY (id),
  CONSTRAINT rsv_migration_change_one_row CHECK (id = 1)
) ENGINE=InnoDB;
INSERT IGNORE INTO rsv_migration_change (id) VALUES (1);

-- What the handles found when both stores answered the same call, per
-- shop and class (both_accepted, old_refused_new_accepted, dropped ...):
-- each handle adds what it counted every fifth refresh interval.
CREATE TABLE IF NOT EXISTS rsv_migration_counts (
  shop_id        BIGINT UNSIGNED NOT NULL,  -- the shop
  class          VARCHAR(32) NOT NULL,      -- the class's name
  n              BIGINT UNSIGNED NOT NULL,  -- calls counted, ever
  updated_at     DATETIME(6) NOT NULL,      -- last addition
  PRIMARY KEY (shop_id, class)
) ENGINE=InnoDB;

-- A sample of recent calls where the stores disagreed, or the new side
-- failed or did not know the checkout: a ring of 256 slots per shop, so
-- it never grows (rsv-admin migrate mismatches reads it).
CREATE TABLE IF NOT EXISTS rsv_migration_mismatch (
  shop_id        BIGINT UNSIGNED NOT NULL,  -- the shop
  slot           SMALLINT UNSIGNED NOT NULL,-- 0..255
  seen_at        DATETIME(6) NOT NULL,      -- when the second answer came
  class          VARCHAR(32) NOT NULL,      -- as in rsv_migration_counts
  op             TINYINT UNSIGNED NOT NULL, -- 1 reserve, 2 claim,
                                            -- 3 release (RSV_OP_*)
  stage          TINYINT UNSIGNED NOT NULL, -- the shop's stage then
  checkout_token VARBINARY(128) NOT NULL,   -- the checkout
  item_id        BIGINT UNSIGNED NOT NULL,  -- 0 for claims and releases
  location_id    BIGINT UNSIGNED NOT NULL,  -- 0 for claims and releases
  quantity       BIGINT NOT NULL,           -- 0 for claims and releases
  old_code       INT NOT NULL,              -- the old store's answer
  new_code       INT NOT NULL,              -- libreserve's (RSV_* codes)
  PRIMARY KEY (shop_id, slot)
) ENGINE=InnoDB;

-- Where each stock import (rsv-admin import) or compare (rsv-admin
-- migrate compare) stands: the rows of its source done so far, committed
-- with them, so one stopped in any way goes on from there when run again.
CREATE TABLE IF NOT EXISTS rsv_import_progress (
  source         VARCHAR(255) NOT NULL,     -- "csv:PATH", "query:CRC",
                                            -- "compare:..."
  fingerprint    VARCHAR(64) NOT NULL,      -- the source's size and time,
                                            -- or row count: another
                                            -- source under the same name
                                            -- starts again
  rows_total     BIGINT UNSIGNED NOT NULL,  -- rows in the source
  rows_done      BIGINT UNSIGNED NOT NULL,  -- rows applied, in order
  rows_new       BIGINT UNSIGNED NOT NULL,  -- ledger rows created
  rows_changed   BIGINT UNSIGNED NOT NULL,  -- stock levels changed
  started_at     DATETIME(6) NOT NULL,      -- the first run
  updated_at     DATETIME(6) NOT NULL,      -- the last chunk
  finished_at    DATETIME(6) NULL,          -- every row done
  last_key       VARCHAR(64) NULL,          -- compare: the last key
                                            -- compared ("SHOP:ITEM:LOC")
  PRIMARY KEY (source)
) ENGINE=InnoDB;

-- The keys a compare found different in libreserve and the old store,
-- until it has checked them again (it keeps those that stay different).
CREATE TABLE IF NOT EXISTS rsv_compare_drift (
  source         VARCHAR(255) NOT NULL,     -- as in rsv_import_progress
  shop_id        BIGINT UNSIGNED NOT NULL,
  item_id        BIGINT UNSIGNED NOT NULL,
  location_id    BIGINT UNSIGNED NOT NULL,
  old_available  BIGINT NULL,               -- NULL: not in the old store
  new_available  BIGINT NULL,               -- NULL: not in libreserve
  found_at       DATETIME(6) NOT NULL,
  PRIMARY KEY (source, shop_id, item_id, location_id)
) ENGINE=InnoDB;

-- =======================================================================
-- 3. Upgrades of tables that already existed
-- After section 2, so that every table exists; before section 4 and the
-- procedures, which use the columns these add (the view reads
-- rsv_pool.units, which a version 2 pool lacks until rsv_upgrade_to_v3).
-- =======================================================================

-- Upgrade from version 2, whose pool rows were one unit each: rsv_pool's
-- column units, added in place (metadata only), says 1 for every row
-- already there.
-- Libraries of version 2 count pool rows as units: stop them before
-- loading this file (README, "Upgrading").
DROP PROCEDURE IF EXISTS rsv_upgrade_to_v3;
DELIMITER //
CREATE PROCEDURE rsv_upgrade_to_v3()
  MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  IF NOT EXISTS (SELECT 1 FROM information_schema.columns
                  WHERE table_schema = DATABASE() AND table_name = 'rsv_pool'
                    AND column_name = 'units') THEN
    ALTER TABLE rsv_pool ADD COLUMN units INT NOT NULL DEFAULT 1 AFTER id;
  END IF;
END//
DELIMITER ;
CALL rsv_upgrade_to_v3();
DROP PROCEDURE rsv_upgrade_to_v3;

-- =======================================================================
-- 4. View and schema version
-- =======================================================================

-- Stock as a buyer sees it, for reports and operators (not locking).
-- SQL SECURITY INVOKER: read with the reader's rights, so it does not
-- depend on the account that loaded the schema.
-- The subqueries name their indexes: with the statistics of freshly
-- loaded tables the optimizer read every hold of the shop, or every
-- settlement, once per ledger row.
CREATE OR REPLACE SQL SECURITY INVOKER VIEW rsv_stock AS
SELECT l.shop_id, l.item_id, l.location_id,
       l.on_hand - COALESCE((SELECT SUM(s.quantity)
                               FROM rsv_journal s
                                    FORCE INDEX (PRIMARY)
                              WHERE s.shop_id = l.shop_id
                                AND s.item_id = l.item_id
                                AND s.location_id = l.location_id
                                AND s.kind = 2), 0) AS on_hand,
       COALESCE((SELECT SUM(h.quantity)
                   FROM rsv_holds h
                        FORCE INDEX (rsv_holds_expiry)
                  WHERE h.shop_id = l.shop_id
                    AND h.item_id = l.item_id
                    AND h.location_id = l.location_id
                    AND h.expires_at > NOW(6)), 0) AS held,
       COALESCE((SELECT SUM(u.units) FROM rsv_pool u FORCE INDEX (PRIMARY)
                  WHERE u.shop_id = l.shop_id
                    AND u.item_id = l.item_id
                    AND u.location_id = l.location_id), 0) AS pooled
  FROM rsv_ledger l;

-- The version this file installs, once its tables and view exist (the
-- procedures below are optional: without them the library sends
-- statements).
INSERT INTO rsv_schema (id, version, oldest_library, updated_at)
  VALUES (1, 3, 3, NOW(6))
  ON DUPLICATE KEY UPDATE updated_at = IF(version < 3, NOW(6), updated_at),
                          version = GREATEST(version, 3),
                          oldest_library = GREATEST(oldest_library, 3);

-- =======================================================================
-- 5. Procedures
-- Each is dropped by its current name right before it is created, so that
-- loading this file again replaces it.  A new version of a procedure gets
-- a new name (lib/internal.h, RSV_PROC_*); its old name goes to section 6.
-- =======================================================================

-- Top a pool up from inside a reserve procedure that holds its ledger row
-- (libreserve's procedures call it; never call it yourself).  A top-up
-- after a reserve does not wait for the ledger row, and the procedures
-- hold a hot item's row whenever they take units from it; a top-up that
-- found it held is therefore left to the next procedure of that context
-- that gets the row, which does it here, on the server, with no round trip
-- and no transaction of its own.  Counts the pool's units (under the
-- ledger row lock nobody else adds rows; units this transaction took do
-- not count), and mints up to p_cap units, within p_avail units not yet
-- issued and at most 1,000 at a time, in rows of p_cap / 100 units (at
-- least 1; the last row takes the rest), with ids from p_next.  The caller
-- adds *p_units to the ledger row's issued and *p_rows to its
-- next_unit_id.  The same rule mints in the library (ledger_issue).
DROP PROCEDURE IF EXISTS rsv_pool_top_up_v3;
DELIMITER //
CREATE PROCEDURE rsv_pool_top_up_v3(
    IN p_shop BIGINT UNSIGNED, IN p_item BIGINT UNSIGNED,
    IN p_loc BIGINT UNSIGNED, IN p_next BIGINT UNSIGNED, IN p_cap BIGINT,
    IN p_avail BIGINT, OUT p_units BIGINT, OUT p_rows BIGINT)
  MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE v_count, v_per BIGINT DEFAULT 0;
  SELECT COALESCE(SUM(units), 0) INTO v_count FROM rsv_pool
   WHERE shop_id = p_shop AND item_id = p_item
     AND location_id = p_loc;
  SET p_units = GREATEST(0, LEAST(p_cap - v_count, p_avail, 1000)),
      v_per = GREATEST(1, p_cap DIV 100),
      p_rows = (p_units + v_per - 1) DIV v_per;
  IF p_rows > 0 THEN
    INSERT INTO rsv_pool (shop_id, item_id,
        location_id, id, units)
      SELECT p_shop, p_item, p_loc, p_next + n,
             LEAST(v_per, p_units - n * v_per)
        FROM (SELECT a.d + 10 * b.d + 100 * c.d AS n
                FROM (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2
                      UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5
                      UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8
                      UNION ALL SELECT 9) a
                CROSS JOIN (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL
                      SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL
                      SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL
                      SELECT 8 UNION ALL SELECT 9) b
                CROSS JOIN (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL
                      SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL
                      SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL
                      SELECT 8 UNION ALL SELECT 9) c) seq
       WHERE n < p_rows;
  END IF;
END//
DELIMITER ;

-- The top-up due (p_fill > 0) after a reserve took a key's units from its
-- pool, in the caller's transaction (libreserve's procedures call it;
-- never call it yourself): when the caller holds the key's ledger row
-- (p_locked), mint as rsv_pool_top_up_v3 does and count the units as
-- issued (p_next and p_avail follow); otherwise p_mint is -1: still due,
-- left to the library.  p_cap: the ledger row's pool_cap, else p_fill.
-- p_mint: the units minted.
DROP PROCEDURE IF EXISTS rsv_pool_top_up_held_v1;
DELIMITER //
CREATE PROCEDURE rsv_pool_top_up_held_v1(
    IN p_shop BIGINT UNSIGNED, IN p_item BIGINT UNSIGNED,
    IN p_loc BIGINT UNSIGNED, IN p_locked INT, IN p_cap BIGINT,
    INOUT p_next BIGINT UNSIGNED, INOUT p_avail BIGINT, OUT p_mint BIGINT)
  MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE v_rows BIGINT DEFAULT 0;
  SET p_mint = -1;
  IF p_locked THEN
    CALL rsv_pool_top_up_v3(p_shop, p_item, p_loc, p_next, p_cap, p_avail,
                            p_mint, v_rows);
    IF p_mint > 0 THEN
      UPDATE rsv_ledger
         SET issued = issued + p_mint,
             next_unit_id = next_unit_id + v_rows, updated_at = NOW(6)
       WHERE shop_id = p_shop AND item_id = p_item
         AND location_id = p_loc;
      SET p_next = p_next + v_rows, p_avail = p_avail - p_mint;
    END IF;
  END IF;
END//
DELIMITER ;

-- Take up to p_want units of a key's pool, from the lowest ids from p_from
-- up that no other transaction holds (SKIP LOCKED: never waited for), in
-- the caller's transaction (libreserve's procedures call it; never call
-- it yourself): one row at a time, so that a reserve locks only the rows
-- it takes units from (usually one: a row carries several units); a row
-- whose units are all taken is deleted, the last one otherwise keeps the
-- rest.  A short take (p_taken < p_want) is rolled back by the caller.
-- p_first and p_last: the lowest and highest ids taken from.
DROP PROCEDURE IF EXISTS rsv_pool_take_units_v1;
DELIMITER //
CREATE PROCEDURE rsv_pool_take_units_v1(
    IN p_shop BIGINT UNSIGNED, IN p_item BIGINT UNSIGNED,
    IN p_loc BIGINT UNSIGNED, IN p_want INT, IN p_from BIGINT UNSIGNED,
    OUT p_taken INT, OUT p_first BIGINT UNSIGNED,
    OUT p_last BIGINT UNSIGNED)
  MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE v_id, v_from BIGINT UNSIGNED;
  DECLARE v_units, v_take INT;
  SET p_taken = 0, p_first = NULL, p_last = NULL, v_from = p_from;
  each_row: LOOP
    SET v_id = NULL;
    SELECT id, units INTO v_id, v_units FROM rsv_pool
     WHERE shop_id = p_shop AND item_id = p_item
       AND location_id = p_loc AND id >= v_from
     ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED;
    IF v_id IS NULL THEN
      LEAVE each_row;
    END IF;
    SET v_take = LEAST(v_units, p_want - p_taken);
    IF v_take = v_units THEN
      DELETE FROM rsv_pool
       WHERE shop_id = p_shop AND item_id = p_item
         AND location_id = p_loc AND id = v_id;
    ELSE
      UPDATE rsv_pool SET units = units - v_take
       WHERE shop_id = p_shop AND item_id = p_item
         AND location_id = p_loc AND id = v_id;
    END IF;
    SET p_taken = p_taken + v_take, p_first = COALESCE(p_first, v_id),
        p_last = v_id, v_from = v_id + 1;
    IF p_taken = p_want THEN
      LEAVE each_row;
    END IF;
  END LOOP each_row;
END//
DELIMITER ;

-- One new checkout taking p_want units at one item and location.  Two
-- callers share this one body: the library calls it for a one-key reserve
-- with p_own = 1 (it then runs in a transaction of its own and answers a
-- row), and every entry of the batch procedure runs it with p_own = 0, in
-- the batch's transaction, which it neither starts nor ends.  Never call
-- it yourself.  Called directly rather than from a wrapper: a nested CALL
-- cost a one-key reserve about a quarter of its server time
-- (docs/performance.md).
-- Lock order as in docs/internals.md section 3, but the hold (4) comes
-- right after the checkout row (1): nobody can reach it while this
-- transaction holds that row, and it shortens the time a hot ledger row
-- is held.  The units come straight from the ledger row when no other
-- transaction holds it and it has enough not yet issued; otherwise from
-- the pool (lock order 3), read upward from p_start (0: the bottom).
-- The ledger row is never waited for: a guarded UPDATE whose lock wait is
-- 0 (MariaDB's SET STATEMENT; 1205 at once when the row is held), else a
-- locking read with SKIP LOCKED.  The UPDATE alone is one statement where
-- the read and the UPDATE were two, for the usual reserve of an item
-- nobody else is buying; it is tried only when the caller reads the pool
-- from its bottom (p_start 0: it has not seen this key served by its
-- pool), so the buyers of a pooled item do not pay a failed UPDATE.  A
-- server that rolls the whole transaction back on a lock-wait timeout
-- (innodb_rollback_on_timeout) only gets the read.
-- p_wait, the waited take, after this key's pool came up short while its
-- ledger row had the units: the ledger row is waited for before anything
-- is written.  1, in share mode, before the checkout row, and released at
-- once (in a transaction of our own: p_own): a refill in flight holds the
-- row; when it commits, every buyer waiting so goes on together to the
-- reserve above, from the bottom of the pool, or none (status 2).  Keeping
-- the shared lock through the reserve held the next refill back behind
-- every buyer's commit.  2, exclusively, after the checkout row (lock
-- order 1, 2, 4: nothing another transaction could want is held while
-- waiting): the units come from the ledger row or not at all (status 2,
-- the pool not read), and the pool is topped up (p_fill) for the buyers
-- behind.  When hundreds of buyers find a small pool empty at
-- once, they queue for the row that way, each holding it for one CALL;
-- the slow path they went to before held it across a dozen round trips
-- each, and the last of them ran out of time (docs/scaling.md, the
-- refill stampede).
-- The pool gate: at most four buyers of a key read and take its pool at
-- once; the others sleep in GET_LOCK on one of four named locks (by
-- connection id), taken after the checkout row and the hold and given
-- back right after the take, before the commit.  Ungated, a crowd of
-- hundreds of connections on one key spun on the latches of the pool's
-- few pages and read past rows other buyers held: the server's CPU per
-- reserve grew with the crowd, to nine times its cost at 64 buyers
-- (docs/performance.md, the crowd).  A named lock, not a row lock: a row
-- lock is held through the commit and its log flush, which serialised
-- the commits the gate's holders could otherwise share.  While it waits
-- for the gate a buyer holds only rows nobody else can want (its new
-- checkout and hold), and while it holds the gate it never waits (SKIP
-- LOCKED), so the gate cannot close a cycle of waits.  It changes no
-- answer and no row: a gate not had within a second (or the statement's
-- lock wait, if shorter), or refused (Galera), is simply gone without; a
-- second, so that the gate never adds a wait the call's budget did not
-- plan for (the waited take may already have waited for the ledger row).
-- p_fill: a top-up of the pool is due (its cap, 0 if none): done here if
-- this transaction holds the ledger row (rsv_pool_top_up_v3).
-- Out: o_status 0 = done, to be committed; 1 = the checkout exists (a
-- re-reserve, which the library does with statements), 2 = the pool had
-- fewer rows free than wanted, 3 = no ledger row (the caller rolls back
-- whatever this wrote).  o_taken units taken from the pool, o_first and
-- o_last the pool ids taken; o_next the ledger's next_unit_id and o_avail
-- its on_hand - issued (after this reserve when it read the ledger row
-- locked; NULL when it took the units with the guarded UPDATE, or the row
-- was held elsewhere and a read from p_start succeeded without reading
-- it); o_direct units taken from the ledger; o_mint pool rows minted by
-- the top-up (-1: due, but the row was held elsewhere).
-- With p_own = 1 the answer is one row: (status, units taken from the
-- pool, first and last pool id taken, ledger next_unit_id, ledger
-- on_hand - issued, units taken from the ledger, pool rows minted), the
-- out values with NULL as 0; status 0 = committed, else rolled back.  The
-- library binds its OUT arguments as placeholders and never reads them
-- (no user variable is left in the caller's session).
-- SQL SECURITY INVOKER (no definer account to keep alive); READ WRITE and
-- AND NO CHAIN NO RELEASE, whatever the session's defaults.
DROP PROCEDURE IF EXISTS rsv_reserve_key_v3;
DELIMITER //
CREATE PROCEDURE rsv_reserve_key_v3(
    IN p_shop BIGINT UNSIGNED, IN p_token VARBINARY(128),
    IN p_item BIGINT UNSIGNED, IN p_loc BIGINT UNSIGNED,
    IN p_want INT, IN p_start BIGINT UNSIGNED, IN p_ttl_us BIGINT,
    IN p_fill BIGINT, IN p_wait INT, IN p_own INT, OUT o_status INT,
    OUT o_taken INT,
    OUT o_first BIGINT UNSIGNED, OUT o_last BIGINT UNSIGNED,
    OUT o_next BIGINT UNSIGNED, OUT o_avail BIGINT, OUT o_direct BIGINT,
    OUT o_mint BIGINT)
  MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE v_dup, v_held, v_took, v_units INT DEFAULT 0;
  DECLARE v_cap, v_rows BIGINT DEFAULT 0;
  -- held here (but short), or held elsewhere
  DECLARE v_locked INT DEFAULT 0;
  -- the pool gate this call holds (see above), NULL when none
  DECLARE v_gate VARCHAR(64) DEFAULT NULL;
  -- A deadlock, lock-wait timeout or any other error: in a transaction of
  -- our own, give everything back; either way tell the caller (who
  -- retries or reports it).
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN
    IF v_gate IS NOT NULL THEN
      DO RELEASE_LOCK(v_gate);
    END IF;
    IF p_own THEN
      ROLLBACK AND NO CHAIN NO RELEASE;
    END IF;
    RESIGNAL;
  END;
  DECLARE CONTINUE HANDLER FOR 1062 SET v_dup = 1;
  SET o_status = 0, o_taken = 0, o_first = NULL, o_last = NULL,
      o_next = NULL, o_avail = NULL, o_direct = 0, o_mint = 0;
  IF p_own THEN
    -- READ COMMITTED for this transaction only, as in the statement path:
    -- no gap locks, so refills never wait for buyers.
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION READ WRITE;
  END IF;
  body: BEGIN
    -- The wait in share mode (p_wait 1, see above): nothing is held but
    -- the row's shared lock, given back before the reserve.
    IF p_wait = 1 THEN
      SELECT next_unit_id INTO o_next
        FROM rsv_ledger
       WHERE shop_id = p_shop AND item_id = p_item
         AND location_id = p_loc LOCK IN SHARE MODE;
      IF o_next IS NULL THEN
        SET o_status = 3;
        LEAVE body;
      END IF;
      SET o_next = NULL;
      IF p_own THEN
        ROLLBACK AND NO CHAIN NO RELEASE;
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        START TRANSACTION READ WRITE;
      END IF;
    END IF;
    -- Creating the row locks it (lock order 1).
    INSERT INTO rsv_checkouts (shop_id, checkout_token, status,
        generation, hold_count, expires_at, created_at, updated_at)
      VALUES (p_shop, p_token, 1, 1, 1,
              NOW(6) + INTERVAL p_ttl_us MICROSECOND, NOW(6), NOW(6));
    IF v_dup THEN
      SET o_status = 1;
      LEAVE body;
    END IF;
    -- The waited take exclusively: the ledger row first, waiting (lock
    -- order 2).
    IF p_wait = 2 THEN
      SELECT next_unit_id, on_hand - issued, pool_cap
        INTO o_next, o_avail, v_cap
        FROM rsv_ledger
       WHERE shop_id = p_shop AND item_id = p_item
         AND location_id = p_loc FOR UPDATE;
      IF o_next IS NULL THEN
        SET o_status = 3;
        LEAVE body;
      END IF;
      IF o_avail < p_want THEN
        SET o_status = 2;
        LEAVE body;
      END IF;
    END IF;
    -- The hold, before the ledger row (see above) unless waited for.
    INSERT INTO rsv_holds (shop_id, checkout_token,
        item_id, location_id, quantity, generation,
        expires_at, created_at)
      VALUES (p_shop, p_token, p_item, p_loc, p_want, 1,
              NOW(6) + INTERVAL p_ttl_us MICROSECOND, NOW(6));
    -- The units from the ledger row in one guarded UPDATE that never
    -- waits (lock order 2); in a batch an earlier entry may hold the row:
    -- then it is ours and the UPDATE goes through.
    IF p_wait <> 2 AND p_fill = 0 AND p_start = 0
       AND NOT @@innodb_rollback_on_timeout THEN
      BEGIN
        DECLARE CONTINUE HANDLER FOR 1205 SET v_held = 1;
        /*M! SET STATEMENT innodb_lock_wait_timeout = 0 FOR */
        UPDATE rsv_ledger
           SET issued = issued + p_want, updated_at = NOW(6)
         WHERE shop_id = p_shop AND item_id = p_item
           AND location_id = p_loc AND on_hand - issued >= p_want;
        SET v_took = ROW_COUNT();
      END;
      IF v_took = 1 AND NOT v_held THEN
        SET o_direct = p_want;
        LEAVE body;
      END IF;
    END IF;
    -- The ledger row, if no other transaction holds it (lock order 2).
    -- Not asked for again when the UPDATE above found it held: that read
    -- would skip it too, and it was a statement more on every pool take
    -- while a refill or another buyer holds the row.
    IF p_wait <> 2 AND NOT v_held THEN
      SELECT next_unit_id, on_hand - issued, pool_cap
        INTO o_next, o_avail, v_cap
        FROM rsv_ledger
       WHERE shop_id = p_shop AND item_id = p_item
         AND location_id = p_loc FOR UPDATE SKIP LOCKED;
    END IF;
    IF o_avail >= p_want THEN
      -- The units from the ledger row, and a pending top-up if one is
      -- due, minted from what is left after this reserve.
      IF p_fill > 0 THEN
        CALL rsv_pool_top_up_v3(p_shop, p_item, p_loc, o_next,
                                COALESCE(v_cap, p_fill), o_avail - p_want,
                                o_mint, v_rows);
      END IF;
      UPDATE rsv_ledger
         SET issued = issued + p_want + o_mint,
             next_unit_id = next_unit_id + v_rows, updated_at = NOW(6)
       WHERE shop_id = p_shop AND item_id = p_item
         AND location_id = p_loc;
      SET o_direct = p_want, o_next = o_next + v_rows,
          o_avail = o_avail - p_want - o_mint;
      LEAVE body;
    END IF;
    SET v_locked = o_next IS NOT NULL AND p_wait <> 2;
    -- Held elsewhere: read as last committed, without a lock, when the
    -- caller needs it: to place its read cursor after a read from the
    -- bottom of the pool (p_start 0), and to decide what to do after a
    -- short read.  A read from the cursor that succeeds, the usual case
    -- under contention, does without.  A missing ledger row shows as an
    -- empty pool.
    IF p_start = 0 AND o_next IS NULL THEN
      SELECT next_unit_id, on_hand - issued INTO o_next, o_avail
        FROM rsv_ledger
       WHERE shop_id = p_shop AND item_id = p_item
         AND location_id = p_loc;
    END IF;
    IF p_start = 0 AND o_next IS NULL THEN
      SET o_status = 3;
      LEAVE body;
    END IF;
    -- The pool gate (see above), unless this transaction holds the
    -- ledger row: then it is the key's one refiller and must not queue
    -- behind buyers.  On Galera some MariaDB releases refuse GET_LOCK
    -- (1235): there the pool is read ungated; others take it on the node
    -- only, which is all a gate of one node's readers needs.
    IF NOT v_locked THEN
      BEGIN
        DECLARE CONTINUE HANDLER FOR 1235 SET v_gate = NULL;
        SET v_gate = CONCAT('rsv/', HEX(p_shop), '/', HEX(p_item), '/',
                            HEX(p_loc), '/', CONNECTION_ID() MOD 4);
        IF NOT GET_LOCK(v_gate, LEAST(@@innodb_lock_wait_timeout, 1))
               <=> 1 THEN
          SET v_gate = NULL;
        END IF;
      END;
    END IF;
    -- One unit, the usual reserve, without the nested CALL: it cost a
    -- batch entry about 5 % of its server time (docs/performance.md).
    IF p_want = 1 THEN
      SELECT id, units INTO o_first, v_units FROM rsv_pool
       WHERE shop_id = p_shop AND item_id = p_item
         AND location_id = p_loc AND id >= p_start
       ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED;
      SET o_taken = o_first IS NOT NULL, o_last = o_first;
      IF o_taken AND v_units = 1 THEN
        DELETE FROM rsv_pool
         WHERE shop_id = p_shop AND item_id = p_item
           AND location_id = p_loc AND id = o_first;
      ELSEIF o_taken THEN
        UPDATE rsv_pool SET units = units - 1
         WHERE shop_id = p_shop AND item_id = p_item
           AND location_id = p_loc AND id = o_first;
      END IF;
    ELSE
      CALL rsv_pool_take_units_v1(p_shop, p_item, p_loc, p_want, p_start,
                                  o_taken, o_first, o_last);
    END IF;
    IF v_gate IS NOT NULL THEN
      DO RELEASE_LOCK(v_gate);
      SET v_gate = NULL;
    END IF;
    IF o_taken < p_want AND o_next IS NULL THEN
      SELECT next_unit_id, on_hand - issued INTO o_next, o_avail
        FROM rsv_ledger
       WHERE shop_id = p_shop AND item_id = p_item
         AND location_id = p_loc;
    END IF;
    IF o_taken < p_want THEN
      SET o_status = IF(o_next IS NULL, 3, 2);
    END IF;
    IF o_status = 0 AND p_fill > 0 THEN
      CALL rsv_pool_top_up_held_v1(p_shop, p_item, p_loc, v_locked,
                                   COALESCE(v_cap, p_fill), o_next,
                                   o_avail, o_mint);
    END IF;
  END body;
  IF p_own THEN
    IF o_status = 0 THEN
      COMMIT AND NO CHAIN NO RELEASE;
    ELSE
      ROLLBACK AND NO CHAIN NO RELEASE;
    END IF;
    SELECT o_status, o_taken, COALESCE(o_first, 0), COALESCE(o_last, 0),
           COALESCE(o_next, 0), COALESCE(o_avail, 0), o_direct, o_mint;
  END IF;
END//
DELIMITER ;

-- The same for a cart (libreserve calls it; never call it yourself): a new
-- checkout of several (item, location) keys in one round trip: the
-- checkout row (1) and the holds (4, inserted first for the reason given
-- above), then in two passes over the keys in ascending key order: every
-- key's ledger row with SKIP LOCKED, taken as above if no one holds it and
-- it covers the key; then the pool rows, with SKIP LOCKED, of the keys
-- their ledger row did not cover.
-- Two passes keep the lock order (ledger rows before pool rows): a cart
-- that asked for a later key's ledger row while holding an earlier key's
-- pool rows never waited (SKIP LOCKED), yet InnoDB's deadlock detector
-- counted the request as a wait and rolled back a slow path that held
-- that ledger row and waited for those pool rows (check_soak caught it).
-- (Stopping the ledger requests at the first key that took pool rows
-- avoided that too, but cost carts with a hot item most of their ledger
-- takes: the hot item's row is often held.)
-- It commits only when every key got all the units asked for; else it
-- rolls back and answers what it read at every key, and the library
-- decides what next (the read from the bottom, another location, the slow
-- path, out of stock) as after the statement path's read.
-- p_keys: one "idx,item,location,units,start,fill;" per key; idx is the
-- caller's own index of the key, echoed in the answer; start and fill as
-- p_start and p_fill above.  First the keys with 0 units, locations the cart names but takes
-- nothing at, only checked to have a ledger row; then the keys to take
-- units at, in ascending (item, location) order.  p_nkeys: how many keys
-- take units (the checkout's hold_count).
-- p_own as in rsv_reserve_key_v3: 1, a transaction of its own and the
-- answer row below; 0, in the caller's transaction (an entry of
-- rsv_reserve_cart_batch_v1), which it neither starts nor ends, the
-- answer in o_status and o_answer only (the caller rolls back whatever
-- this wrote when o_status is not 0).
-- Answer: one row, (status as above: 0 committed; 1 the checkout exists,
-- nothing read; 2 some key came up short; 3 a key has no ledger row, and
-- the text stops there; then a text with one
-- "idx,taken,first,last,next,avail,direct,minted;" per key units were
-- taken at, the values as above: units taken from the pool, first and
-- last pool id taken, ledger next_unit_id and on_hand - issued, units
-- taken from the ledger, pool rows minted).  One row of text, not a row
-- per key: each row would be a result set of its own (a procedure has no
-- other way to answer a variable number of rows), and those SELECTs and
-- the sends after each were a fifth of a 5-line cart's CALL (measured:
-- docs/performance.md).
-- Text, not JSON: the same statements with the keys as a JSON array read
-- with JSON_TABLE, the keys left for pass 2 as JSON, and a row per key
-- sent by a SELECT over JSON_TABLE cost the CALL 11-20 % more server CPU
-- (a JSON value as the answer instead: 5-10 %; measured:
-- docs/performance.md).
-- The statements inside cost the server about as much as the statement
-- path's fewer, larger ones (measured: docs/performance.md); what it saves
-- is the round trips.
-- Pass 2 takes each key's units with rsv_pool_take_units_v1, as
-- rsv_reserve_key_v3 does.
DROP PROCEDURE IF EXISTS rsv_fast_cart_v5;
DELIMITER //
CREATE PROCEDURE rsv_fast_cart_v5(
    IN p_shop BIGINT UNSIGNED, IN p_token VARBINARY(128),
    IN p_keys VARBINARY(4096), IN p_nkeys INT, IN p_ttl_us BIGINT,
    IN p_own INT, OUT o_status INT,
    OUT o_answer VARCHAR(4096) CHARACTER SET latin1)
  MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE v_dup INT DEFAULT 0;
  DECLARE v_rest, v_key VARBINARY(4096);
  DECLARE v_later VARBINARY(4096) DEFAULT '';
  DECLARE v_idx, v_want, v_taken, v_status, v_found, v_locked, v_held,
    v_took INT DEFAULT 0;
  DECLARE v_fill, v_cap, v_mint, v_rows BIGINT DEFAULT 0;
  DECLARE v_item, v_loc, v_start, v_from BIGINT UNSIGNED;
  DECLARE v_first, v_last, v_next BIGINT UNSIGNED;
  DECLARE v_avail BIGINT;
  DECLARE v_answer VARCHAR(4096) CHARACTER SET latin1 DEFAULT '';
  -- A deadlock, lock-wait timeout or any other error: in a transaction of
  -- our own, give everything back; either way tell the caller (who
  -- retries or reports it).
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN
    IF p_own THEN
      ROLLBACK AND NO CHAIN NO RELEASE;
    END IF;
    RESIGNAL;
  END;
  DECLARE CONTINUE HANDLER FOR 1062 SET v_dup = 1;
  SET o_status = 0, o_answer = '';
  IF p_own THEN
    -- READ COMMITTED for this transaction only, as in the statement path:
    -- no gap locks, so refills never wait for buyers.
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION READ WRITE;
  END IF;
  -- Creating the row locks it (lock order 1); an existing checkout is a
  -- re-reserve, which the statement path settles.
  INSERT INTO rsv_checkouts (shop_id, checkout_token, status,
      generation, hold_count, expires_at, created_at, updated_at)
    VALUES (p_shop, p_token, 1, 1, p_nkeys,
            NOW(6) + INTERVAL p_ttl_us MICROSECOND, NOW(6), NOW(6));
  IF v_dup THEN
    SET o_status = 1;
    IF p_own THEN
      ROLLBACK AND NO CHAIN NO RELEASE;
      SELECT 1, '';
    END IF;
  ELSE
    -- The holds, one per key, before any ledger or pool row (see above).
    SET v_rest = p_keys;
    WHILE v_rest <> '' DO
      SET v_key = SUBSTRING_INDEX(v_rest, ';', 1);
      SET v_rest = SUBSTRING(v_rest, LENGTH(v_key) + 2);
      SET v_want = SUBSTRING_INDEX(SUBSTRING_INDEX(v_key, ',', 4), ',', -1);
      IF v_want > 0 THEN
        INSERT INTO rsv_holds (shop_id, checkout_token,
            item_id, location_id, quantity, generation,
            expires_at, created_at)
          VALUES (p_shop, p_token,
                  SUBSTRING_INDEX(SUBSTRING_INDEX(v_key, ',', 2), ',', -1),
                  SUBSTRING_INDEX(SUBSTRING_INDEX(v_key, ',', 3), ',', -1),
                  v_want, 1, NOW(6) + INTERVAL p_ttl_us MICROSECOND, NOW(6));
      END IF;
    END WHILE;
    -- Pass 1, every key's ledger row, in key order, before any pool row
    -- (see above): its units if no one holds it and it covers the key.
    -- The keys it does not cover go on v_later, with what was read.
    SET v_rest = p_keys;
    each_key: WHILE v_rest <> '' DO
      SET v_key = SUBSTRING_INDEX(v_rest, ';', 1);
      SET v_rest = SUBSTRING(v_rest, LENGTH(v_key) + 2);
      SET v_idx = SUBSTRING_INDEX(v_key, ',', 1);
      SET v_item = SUBSTRING_INDEX(SUBSTRING_INDEX(v_key, ',', 2), ',', -1);
      SET v_loc = SUBSTRING_INDEX(SUBSTRING_INDEX(v_key, ',', 3), ',', -1);
      SET v_want = SUBSTRING_INDEX(SUBSTRING_INDEX(v_key, ',', 4), ',', -1);
      IF v_want = 0 THEN
        -- A location the cart names but takes nothing at, whose ledger row
        -- the caller has not seen: it must exist, as the statement path
        -- requires.  These keys come first and lock nothing (a SELECT
        -- reads without locks; a subquery in an IF would take a shared
        -- lock and wait for a refill holding the row).
        SELECT COUNT(*) INTO v_found FROM rsv_ledger
         WHERE shop_id = p_shop AND item_id = v_item
           AND location_id = v_loc;
        IF v_found = 0 THEN
          SET v_status = 3;
          LEAVE each_key;
        END IF;
        ITERATE each_key;
      END IF;
      SET v_next = NULL, v_avail = NULL, v_cap = NULL, v_mint = 0,
          v_held = 0, v_took = 0;
      SET v_start = SUBSTRING_INDEX(SUBSTRING_INDEX(v_key, ',', 5), ',', -1),
          v_fill = SUBSTRING_INDEX(v_key, ',', -1);
      -- The guarded UPDATE that never waits, as in rsv_reserve_key_v3.
      IF v_fill = 0 AND v_start = 0 AND NOT @@innodb_rollback_on_timeout THEN
        BEGIN
          DECLARE CONTINUE HANDLER FOR 1205 SET v_held = 1;
          /*M! SET STATEMENT innodb_lock_wait_timeout = 0 FOR */
          UPDATE rsv_ledger
             SET issued = issued + v_want, updated_at = NOW(6)
           WHERE shop_id = p_shop AND item_id = v_item
             AND location_id = v_loc AND on_hand - issued >= v_want;
          SET v_took = ROW_COUNT();
        END;
        IF v_took = 1 AND NOT v_held THEN
          SET v_answer = CONCAT(v_answer, v_idx, ',0,0,0,0,0,', v_want,
                                ',0;');
          ITERATE each_key;
        END IF;
      END IF;
      -- Not asked for again when the UPDATE found it held (as in
      -- rsv_reserve_key_v3).
      IF NOT v_held THEN
        SELECT next_unit_id, on_hand - issued, pool_cap
          INTO v_next, v_avail, v_cap
          FROM rsv_ledger
         WHERE shop_id = p_shop AND item_id = v_item
           AND location_id = v_loc FOR UPDATE SKIP LOCKED;
      END IF;
      IF v_avail >= v_want THEN
        SET v_avail = v_avail - v_want;
        SET v_rows = 0;
        IF v_fill > 0 THEN
          CALL rsv_pool_top_up_v3(p_shop, v_item, v_loc, v_next,
                                  COALESCE(v_cap, v_fill), v_avail, v_mint,
                                  v_rows);
        END IF;
        UPDATE rsv_ledger
           SET issued = issued + v_want + v_mint,
               next_unit_id = next_unit_id + v_rows, updated_at = NOW(6)
         WHERE shop_id = p_shop AND item_id = v_item
           AND location_id = v_loc;
        SET v_answer = CONCAT(v_answer, v_idx, ',0,0,0,', v_next + v_rows,
                              ',', v_avail - v_mint, ',', v_want, ',',
                              v_mint, ';');
      ELSE
        -- held elsewhere (next 0), or held here but short
        SET v_later = CONCAT(v_later, v_key, ',', COALESCE(v_next, 0), ',',
                             COALESCE(v_avail, 0), ',', COALESCE(v_cap, 0),
                             ';');
      END IF;
    END WHILE each_key;
    -- Pass 2, pool rows for the keys on v_later, in key order: read as
    -- last committed, without a lock, the ledger rows held elsewhere when
    -- the caller needs them: to place its read cursor after a read from
    -- the bottom of the pool (start 0), and to decide what to do after a
    -- short read.  A read from the cursor that succeeds does without.
    SET v_rest = IF(v_status = 0, v_later, '');
    each_pool: WHILE v_rest <> '' DO
      SET v_key = SUBSTRING_INDEX(v_rest, ';', 1);
      SET v_rest = SUBSTRING(v_rest, LENGTH(v_key) + 2);
      SET v_idx = SUBSTRING_INDEX(v_key, ',', 1);
      SET v_item = SUBSTRING_INDEX(SUBSTRING_INDEX(v_key, ',', 2), ',', -1);
      SET v_loc = SUBSTRING_INDEX(SUBSTRING_INDEX(v_key, ',', 3), ',', -1);
      SET v_want = SUBSTRING_INDEX(SUBSTRING_INDEX(v_key, ',', 4), ',', -1);
      SET v_start = SUBSTRING_INDEX(SUBSTRING_INDEX(v_key, ',', 5), ',', -1);
      SET v_fill = SUBSTRING_INDEX(SUBSTRING_INDEX(v_key, ',', 6), ',', -1);
      SET v_next = NULLIF(SUBSTRING_INDEX(SUBSTRING_INDEX(v_key, ',', 7),
                                          ',', -1), '0');
      SET v_avail = IF(v_next IS NULL, NULL,
                       SUBSTRING_INDEX(SUBSTRING_INDEX(v_key, ',', 8), ',',
                                       -1));
      SET v_cap = NULLIF(SUBSTRING_INDEX(v_key, ',', -1), '0');
      SET v_locked = v_next IS NOT NULL, v_from = v_start, v_taken = 0,
          v_first = NULL, v_last = NULL, v_mint = 0;
      IF v_start = 0 AND v_next IS NULL THEN
        SELECT next_unit_id, on_hand - issued INTO v_next, v_avail
          FROM rsv_ledger
         WHERE shop_id = p_shop AND item_id = v_item
           AND location_id = v_loc;
        IF v_next IS NULL THEN
          SET v_status = 3;
          LEAVE each_pool;
        END IF;
      END IF;
      CALL rsv_pool_take_units_v1(p_shop, v_item, v_loc, v_want, v_from,
                                  v_taken, v_first, v_last);
      IF v_taken < v_want THEN
        IF v_next IS NULL THEN
          SELECT next_unit_id, on_hand - issued INTO v_next, v_avail
            FROM rsv_ledger
           WHERE shop_id = p_shop AND item_id = v_item
             AND location_id = v_loc;
        END IF;
        IF v_next IS NULL THEN
          SET v_status = 3;
          LEAVE each_pool;
        END IF;
        -- short: everything is given back, but the other keys are read
        -- too, so that the caller sees the whole cart, as the statement
        -- path's one read does, to decide what next
        SET v_status = 2;
      END IF;
      IF v_status = 0 AND v_fill > 0 THEN
        CALL rsv_pool_top_up_held_v1(p_shop, v_item, v_loc, v_locked,
                                     COALESCE(v_cap, v_fill), v_next,
                                     v_avail, v_mint);
      END IF;
      SET v_answer = CONCAT(v_answer, v_idx, ',', v_taken, ',',
          COALESCE(v_first, 0), ',', COALESCE(v_last, 0), ',',
          COALESCE(v_next, 0), ',', COALESCE(v_avail, 0), ',0,', v_mint,
          ';');
    END WHILE each_pool;
    SET o_status = v_status, o_answer = v_answer;
    IF p_own THEN
      IF v_status = 0 THEN
        COMMIT AND NO CHAIN NO RELEASE;
      ELSE
        ROLLBACK AND NO CHAIN NO RELEASE;
      END IF;
      SELECT v_status, v_answer;
    END IF;
  END IF;
END//
DELIMITER ;

-- Claim or release one checkout, in the caller's transaction, which it
-- neither starts nor ends: the settle procedure below and every entry of
-- the batch settle procedure run it (libreserve calls those; never call it
-- yourself).  The statements of rsv_claim and rsv_release
-- (lib/checkout.c), in the same order: lock the checkout row and its holds
-- (lock order 1 then 4), move the holds into the settlement journal,
-- delete them, set the checkout's status.  It never touches the ledger
-- row (the journal is folded by the next refill), so claims of one hot
-- item do not queue on one row.  p_kind: 2 claim, 3 release.
-- Out: o_status the checkout's status before (0: no such checkout),
-- o_count its hold_count, o_holds its holds still there, o_done what was
-- done: 0 nothing (nothing written), 1 settled as p_kind, 2 a claim found
-- some holds already given back by the reaper and released the rest, and
-- the checkout is now expired.
DROP PROCEDURE IF EXISTS rsv_settle_checkout_v1;
DELIMITER //
CREATE PROCEDURE rsv_settle_checkout_v1(
    IN p_shop BIGINT UNSIGNED, IN p_token VARBINARY(128), IN p_kind INT,
    OUT o_status INT, OUT o_count INT, OUT o_holds INT, OUT o_done INT)
  MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE v_gen INT UNSIGNED DEFAULT 0; -- (as the column)
  DECLARE v_kind INT DEFAULT p_kind;
  SET o_done = 0;
  -- The checkout row, then its holds, locked (as lib/checkout.c's
  -- lock_checkout); an unknown checkout reads status 0.
  SELECT COALESCE(MAX(c.status), 0), COALESCE(MAX(c.generation), 0),
         COALESCE(MAX(c.hold_count), 0), COUNT(h.quantity)
    INTO o_status, v_gen, o_count, o_holds
    FROM rsv_checkouts c LEFT JOIN rsv_holds h
      ON h.shop_id = c.shop_id AND h.checkout_token = c.checkout_token
   WHERE c.shop_id = p_shop AND c.checkout_token = p_token FOR UPDATE;
  IF o_status = 1 THEN
    -- Some holds given back by the reaper: a claim cannot take the rest
    -- either, so it releases them and the checkout expires.
    IF p_kind = 2 AND o_holds < o_count THEN
      SET v_kind = 3, o_done = 2;
    ELSE
      SET o_done = 1;
    END IF;
    -- FOR UPDATE: see b_settle_insert in lib/checkout.c (a consistent read
    -- would still see a hold the reaper has deleted but not committed).
    INSERT INTO rsv_journal (shop_id, item_id,
        location_id, checkout_token, generation, kind, quantity,
        settled_at)
      SELECT shop_id, item_id, location_id, checkout_token,
             v_gen, v_kind, quantity, NOW(6)
        FROM rsv_holds
       WHERE shop_id = p_shop AND checkout_token = p_token FOR UPDATE;
    DELETE FROM rsv_holds
     WHERE shop_id = p_shop AND checkout_token = p_token;
    UPDATE rsv_checkouts
       SET status = IF(o_done = 2, 4, p_kind), updated_at = NOW(6)
     WHERE shop_id = p_shop AND checkout_token = p_token;
  END IF;
END//
DELIMITER ;

-- Claim or release in one round trip (libreserve calls it; never call it
-- yourself): rsv_settle_checkout_v1 in a transaction of its own.  The
-- library uses it only when the caller has no transaction open (a claim
-- may join the caller's transaction; this procedure commits its own).
-- p_kind: 2 claim, 3 release.  Answer, one row: (found, status before,
-- the checkout's hold_count, its holds still there, what was done), as
-- rsv_settle_checkout_v1 gives them; it commits when something was done,
-- else rolls back.  The library turns that into its return code.
DROP PROCEDURE IF EXISTS rsv_settle_v2;
DELIMITER //
CREATE PROCEDURE rsv_settle_v2(
    IN p_shop BIGINT UNSIGNED, IN p_token VARBINARY(128), IN p_kind INT)
  MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE v_status, v_count, v_holds, v_done INT DEFAULT 0;
  -- A deadlock, lock-wait timeout or any other error: give everything
  -- back and tell the caller (who retries or reports it).
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK AND NO CHAIN NO RELEASE; RESIGNAL; END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION READ WRITE;
  CALL rsv_settle_checkout_v1(p_shop, p_token, p_kind, v_status, v_count,
                              v_holds, v_done);
  IF v_done > 0 THEN
    COMMIT AND NO CHAIN NO RELEASE;
  ELSE
    ROLLBACK AND NO CHAIN NO RELEASE;
  END IF;
  SELECT v_status > 0, v_status, v_count, v_holds, v_done;
END//
DELIMITER ;

-- Many new checkouts in one round trip and one commit (libreserve calls
-- it for rsv_reserve_batch; never call it yourself): for each entry of
-- p_batch, rsv_reserve_key_v3 runs for one checkout of one item at one
-- location, in one transaction for
-- the whole batch, so that one COMMIT (one flush of the redo log and the
-- binary log) serves every checkout of it.  Each entry runs after a
-- SAVEPOINT; an entry the fast path cannot decide (the checkout exists,
-- the pool is short, no ledger row: where rsv_reserve_key_v3 rolls back)
-- is rolled back to it alone, answered undecided, and the library runs
-- it on its own after this CALL.  The others commit together.
-- p_batch: a JSON array of [idx, "shop", "token in hex", "item",
-- "location", units, "start", fill] in ascending (shop, item, location)
-- order (the caller sorts it); idx is the caller's index of the entry,
-- echoed; the 64-bit values are strings, so no JSON number parser rounds
-- them; start and fill as p_start and p_fill of rsv_reserve_key_v3.
-- Lock order.  An entry takes its checkout row (1), its hold (4), its
-- ledger row (2, SKIP LOCKED) and pool rows (3, SKIP LOCKED), as
-- rsv_reserve_key_v3 does; the next entry then inserts its checkout row
-- while this transaction holds the earlier entries' rows.  That insert
-- waits only for a transaction holding that same checkout row, that is
-- another call on the same checkout running at the same time: a claim,
-- release or extension of it takes checkout, holds and journal rows only
-- (1 -> 4 -> 5), none of which this transaction holds but for its own
-- new checkouts, reachable only by their tokens; so no cycle.  A reserve
-- of the same token on its slow path could wait for a ledger or pool row
-- held here: that cycle InnoDB reports as a deadlock, this procedure rolls
-- back whole, and the library retries the batch like any deadlock.  Every
-- ledger and pool row is asked for with SKIP LOCKED and never waited for;
-- keys come in ascending order, so the rows of one key are taken together.
-- One set first.  A batch whose entries all have distinct keys and would
-- all try the guarded ledger UPDATE first (no pool cursor, no pending
-- top-up: start and fill 0) is first tried as one set: one INSERT of
-- every checkout row, one UPDATE of every ledger row (the guard per row,
-- a lock wait of 0), one INSERT of every hold, three statements for the
-- batch instead of about eight per entry.  Rows are taken in the same
-- order as above (checkouts, then ledger rows without waiting, then
-- holds, which only this transaction can reach).  It is kept only if
-- every entry was served so, when the answer is what rsv_reserve_key_v3
-- gives a ledger take; otherwise (a checkout that exists, a key short or
-- without a ledger row, a ledger row held elsewhere) it is rolled back to
-- its savepoint and every entry runs as below.  The ledger rows it
-- updated stay locked by this transaction until the batch commits, as
-- every row an entry rolled back to its savepoint does.
-- Answer: one result set, a row per entry of (idx, status, units taken
-- from the pool, first and last pool id taken, ledger next_unit_id,
-- on_hand - issued, units taken from the ledger, pool rows minted), the
-- values and status as rsv_reserve_key_v3 answers them (0 committed,
-- 1 the checkout exists, 2 short, 3 no ledger row).  One SELECT over the
-- answer collected as JSON: a SELECT per entry would be a result set each.
DROP PROCEDURE IF EXISTS rsv_reserve_batch_v1;
DELIMITER //
CREATE PROCEDURE rsv_reserve_batch_v1(
    IN p_batch MEDIUMTEXT CHARACTER SET utf8mb4, IN p_ttl_us BIGINT)
  MODIFIES SQL DATA SQL SECURITY INVOKER
proc: BEGIN
  DECLARE v_eof, v_idx, v_want, v_taken, v_status, v_plain INT DEFAULT 0;
  DECLARE v_shop, v_item, v_loc, v_start BIGINT UNSIGNED;
  DECLARE v_first, v_last, v_next BIGINT UNSIGNED;
  DECLARE v_tok VARBINARY(128);
  DECLARE v_avail BIGINT;
  DECLARE v_fill, v_mint, v_direct BIGINT DEFAULT 0;
  DECLARE v_answer MEDIUMTEXT CHARACTER SET latin1 DEFAULT '';
  DECLARE entries CURSOR FOR
    SELECT b.idx, b.shop, UNHEX(b.tok), b.item, b.loc, b.want, b.start,
           b.fill
      FROM JSON_TABLE(p_batch, '$[*]' COLUMNS (
             idx INT PATH '$[0]', shop BIGINT UNSIGNED PATH '$[1]',
             tok VARCHAR(256) CHARACTER SET latin1 PATH '$[2]',
             item BIGINT UNSIGNED PATH '$[3]',
             loc BIGINT UNSIGNED PATH '$[4]', want INT PATH '$[5]',
             start BIGINT UNSIGNED PATH '$[6]', fill BIGINT PATH '$[7]'))
           AS b;
  -- A deadlock, lock-wait timeout or any other error: give everything
  -- back and tell the caller (who retries or reports it).
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK AND NO CHAIN NO RELEASE; RESIGNAL; END;
  -- Also set by a SELECT ... INTO in rsv_reserve_key_v3 that finds no row
  -- (a ledger row held elsewhere, a pool read that ran dry): cleared
  -- before every FETCH.
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_eof = 1;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION READ WRITE;
  -- The set (see above).  A duplicate key (a checkout that exists) or a
  -- lock wait timeout (a ledger row held elsewhere) ends only its
  -- statement; the set is then given back.  With
  -- innodb_rollback_on_timeout a timeout would end the transaction, so
  -- the set is not tried, as rsv_reserve_key_v3 skips its guarded UPDATE.
  plain: BEGIN
    DECLARE v_n, v_keys, v_busy, v_fail INT DEFAULT 0;
    DECLARE CONTINUE HANDLER FOR 1062, 1205 SET v_fail = 1;
    IF @@innodb_rollback_on_timeout THEN
      LEAVE plain;
    END IF;
    SELECT COUNT(*), COUNT(DISTINCT b.shop, b.item, b.loc),
           SUM(b.start <> 0 OR b.fill <> 0)
      INTO v_n, v_keys, v_busy
      FROM JSON_TABLE(p_batch, '$[*]' COLUMNS (
             shop BIGINT UNSIGNED PATH '$[1]',
             item BIGINT UNSIGNED PATH '$[3]',
             loc BIGINT UNSIGNED PATH '$[4]',
             start BIGINT UNSIGNED PATH '$[6]', fill BIGINT PATH '$[7]'))
           AS b;
    IF v_n < 2 OR v_keys <> v_n OR v_busy <> 0 THEN
      LEAVE plain;
    END IF;
    SAVEPOINT rsv_plain;
    INSERT INTO rsv_checkouts (shop_id, checkout_token, status,
        generation, hold_count, expires_at, created_at, updated_at)
      SELECT b.shop, UNHEX(b.tok), 1, 1, 1,
             NOW(6) + INTERVAL p_ttl_us MICROSECOND, NOW(6), NOW(6)
        FROM JSON_TABLE(p_batch, '$[*]' COLUMNS (
               shop BIGINT UNSIGNED PATH '$[1]',
               tok VARCHAR(256) CHARACTER SET latin1 PATH '$[2]')) AS b;
    IF v_fail = 0 THEN
      /*M! SET STATEMENT innodb_lock_wait_timeout = 0 FOR */
      UPDATE JSON_TABLE(p_batch, '$[*]' COLUMNS (
               shop BIGINT UNSIGNED PATH '$[1]',
               item BIGINT UNSIGNED PATH '$[3]',
               loc BIGINT UNSIGNED PATH '$[4]', want INT PATH '$[5]')) AS b
             STRAIGHT_JOIN rsv_ledger l
          ON l.shop_id = b.shop AND l.item_id = b.item
         AND l.location_id = b.loc
         SET l.issued = l.issued + b.want, l.updated_at = NOW(6)
       WHERE l.on_hand - l.issued >= b.want;
      IF v_fail = 0 AND ROW_COUNT() <> v_n THEN
        SET v_n = 0;
      END IF;
      IF v_fail = 0 AND v_n > 0 THEN
        INSERT INTO rsv_holds (shop_id, checkout_token,
            item_id, location_id, quantity, generation,
            expires_at, created_at)
          SELECT b.shop, UNHEX(b.tok), b.item, b.loc, b.want, 1,
                 NOW(6) + INTERVAL p_ttl_us MICROSECOND, NOW(6)
            FROM JSON_TABLE(p_batch, '$[*]' COLUMNS (
                   shop BIGINT UNSIGNED PATH '$[1]',
                   tok VARCHAR(256) CHARACTER SET latin1 PATH '$[2]',
                   item BIGINT UNSIGNED PATH '$[3]',
                   loc BIGINT UNSIGNED PATH '$[4]', want INT PATH '$[5]'))
                 AS b;
      END IF;
      IF v_fail = 0 AND v_n > 0 THEN
        COMMIT AND NO CHAIN NO RELEASE;
        SELECT b.idx, 0, 0, 0, 0, 0, 0, b.want, 0
          FROM JSON_TABLE(p_batch, '$[*]' COLUMNS (
                 idx INT PATH '$[0]', want BIGINT PATH '$[5]')) AS b;
        SET v_plain = 1;
        LEAVE plain;
      END IF;
    END IF;
    ROLLBACK TO SAVEPOINT rsv_plain;
  END plain;
  IF v_plain THEN
    LEAVE proc;
  END IF;
  OPEN entries;
  each_entry: LOOP
    SET v_eof = 0;
    FETCH entries INTO v_idx, v_shop, v_tok, v_item, v_loc, v_want, v_start,
                       v_fill;
    IF v_eof THEN
      LEAVE each_entry;
    END IF;
    SAVEPOINT rsv_entry;
    CALL rsv_reserve_key_v3(v_shop, v_tok, v_item, v_loc, v_want, v_start,
                            p_ttl_us, v_fill, 0, 0, v_status, v_taken,
                            v_first, v_last, v_next, v_avail, v_direct,
                            v_mint);
    IF v_status <> 0 THEN
      ROLLBACK TO SAVEPOINT rsv_entry;
    END IF;
    SET v_answer = CONCAT(v_answer, IF(v_answer = '', '', ','), '[', v_idx,
        ',', v_status, ',', v_taken, ',"', COALESCE(v_first, 0), '","',
        COALESCE(v_last, 0), '","', COALESCE(v_next, 0), '",',
        COALESCE(v_avail, 0), ',', v_direct, ',', v_mint, ']');
  END LOOP each_entry;
  CLOSE entries;
  COMMIT AND NO CHAIN NO RELEASE;
  SELECT a.idx, a.status, a.taken, a.first_id, a.last_id, a.next_id,
         a.avail, a.direct, a.minted
    FROM JSON_TABLE(CONCAT('[', v_answer, ']'), '$[*]' COLUMNS (
           idx INT PATH '$[0]', status INT PATH '$[1]',
           taken INT PATH '$[2]', first_id BIGINT UNSIGNED PATH '$[3]',
           last_id BIGINT UNSIGNED PATH '$[4]',
           next_id BIGINT UNSIGNED PATH '$[5]', avail BIGINT PATH '$[6]',
           direct BIGINT PATH '$[7]', minted BIGINT PATH '$[8]')) AS a;
END//
DELIMITER ;

-- Many new checkouts of carts in one round trip and one commit
-- (libreserve calls it for rsv_reserve_cart_batch; never call it
-- yourself): for each entry of p_batch, rsv_fast_cart_v5 in the batch's
-- one transaction, after a SAVEPOINT, as rsv_reserve_batch_v1 runs
-- rsv_reserve_key_v3; an entry the cart procedure cannot decide (status
-- 1-3) is rolled back to its savepoint alone, answered undecided, and
-- the library runs it on its own after this CALL.
-- p_batch: a JSON array of [idx, "shop", "token in hex", "keys", keys
-- taken], the last two as p_keys and p_nkeys of rsv_fast_cart_v5, in
-- ascending (shop, first key) order (the caller sorts it).
-- Lock order.  Every ledger and pool row is asked for with SKIP LOCKED or
-- a lock wait of 0 and never waited for (the keys only checked are read
-- without locks), so the only rows an entry can wait for are checkout
-- rows, as in rsv_reserve_batch_v1 (see there: no cycle but with a
-- reserve of the same token on its slow path, which InnoDB reports as a
-- deadlock, and the library retries the batch).
-- Answer: one result set, a row per key of every committed entry of
-- (idx, status 0, the key's idx, the seven values of rsv_fast_cart_v5's
-- text), and one row (idx, status, -1, seven 0s) per entry rolled back.
-- The cart's text becomes the JSON rows by two REPLACEs, each value a
-- JSON string, so that no JSON number parser rounds a pool id.
DROP PROCEDURE IF EXISTS rsv_reserve_cart_batch_v1;
DELIMITER //
CREATE PROCEDURE rsv_reserve_cart_batch_v1(
    IN p_batch MEDIUMTEXT CHARACTER SET utf8mb4, IN p_ttl_us BIGINT)
  MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE v_eof, v_idx, v_nkeys, v_status INT DEFAULT 0;
  DECLARE v_shop BIGINT UNSIGNED;
  DECLARE v_tok VARBINARY(128);
  DECLARE v_keys VARBINARY(4096);
  DECLARE v_cart VARCHAR(4096) CHARACTER SET latin1;
  DECLARE v_head VARCHAR(64) CHARACTER SET latin1;
  DECLARE v_answer MEDIUMTEXT CHARACTER SET latin1 DEFAULT '';
  DECLARE entries CURSOR FOR
    SELECT b.idx, b.shop, UNHEX(b.tok), b.keylist, b.nkeys
      FROM JSON_TABLE(p_batch, '$[*]' COLUMNS (
             idx INT PATH '$[0]', shop BIGINT UNSIGNED PATH '$[1]',
             tok VARCHAR(256) CHARACTER SET latin1 PATH '$[2]',
             keylist VARCHAR(4096) CHARACTER SET latin1 PATH '$[3]',
             nkeys INT PATH '$[4]')) AS b;
  -- A deadlock, lock-wait timeout or any other error: give everything
  -- back and tell the caller (who retries or reports it).
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK AND NO CHAIN NO RELEASE; RESIGNAL; END;
  -- Also set by a SELECT ... INTO in rsv_fast_cart_v5 that finds no row:
  -- cleared before every FETCH.
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_eof = 1;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION READ WRITE;
  OPEN entries;
  each_entry: LOOP
    SET v_eof = 0;
    FETCH entries INTO v_idx, v_shop, v_tok, v_keys, v_nkeys;
    IF v_eof THEN
      LEAVE each_entry;
    END IF;
    SAVEPOINT rsv_entry;
    CALL rsv_fast_cart_v5(v_shop, v_tok, v_keys, v_nkeys, p_ttl_us, 0,
                          v_status, v_cart);
    -- (a cart is never committed without a key answered)
    IF v_status = 0 AND v_cart = '' THEN
      SET v_status = 2;
    END IF;
    SET v_head = CONCAT(IF(v_answer = '', '', ','), '[', v_idx, ',',
                        v_status, ',');
    IF v_status <> 0 THEN
      ROLLBACK TO SAVEPOINT rsv_entry;
      SET v_answer = CONCAT(v_answer, v_head, '-1,0,0,0,0,0,0,0]');
    ELSE
      -- "k,v,...;k,v,...;" -> ["k","v",...],[idx,0,"k","v",...]
      SET v_answer = CONCAT(v_answer, v_head, '"',
          REPLACE(REPLACE(TRIM(TRAILING ';' FROM v_cart), ',', '","'), ';',
                  CONCAT('"],[', v_idx, ',0,"')), '"]');
    END IF;
  END LOOP each_entry;
  CLOSE entries;
  COMMIT AND NO CHAIN NO RELEASE;
  SELECT a.idx, a.status, a.k, a.taken, a.first_id, a.last_id, a.next_id,
         a.avail, a.direct, a.minted
    FROM JSON_TABLE(CONCAT('[', v_answer, ']'), '$[*]' COLUMNS (
           idx INT PATH '$[0]', status INT PATH '$[1]', k INT PATH '$[2]',
           taken INT PATH '$[3]', first_id BIGINT UNSIGNED PATH '$[4]',
           last_id BIGINT UNSIGNED PATH '$[5]',
           next_id BIGINT UNSIGNED PATH '$[6]', avail BIGINT PATH '$[7]',
           direct BIGINT PATH '$[8]', minted BIGINT PATH '$[9]')) AS a;
END//
DELIMITER ;

-- Claims or releases of many checkouts in one round trip and one commit
-- (libreserve calls it for rsv_claim_batch and rsv_release_batch; never
-- call it yourself): for each entry of p_batch rsv_settle_checkout_v1, in
-- one transaction for the whole batch.  p_batch: a JSON
-- array of [idx, "shop", "token in hex"] in ascending (shop, token) order
-- (the caller sorts it), so that two batches lock the checkout rows they
-- share in the same order; each entry takes its checkout row and holds,
-- then journal rows (1 -> 4 -> 5), and nothing else, so no entry waits for
-- a row another checkout's transaction would wait for while holding it.
-- An entry that finds nothing to do writes nothing.  p_kind: 2 claim,
-- 3 release.  Answer: one result set, a row per entry of (idx, found,
-- status before, hold_count, holds still there, what was done), the last
-- five as rsv_settle_v2 answers them.
DROP PROCEDURE IF EXISTS rsv_settle_batch_v1;
DELIMITER //
CREATE PROCEDURE rsv_settle_batch_v1(
    IN p_batch MEDIUMTEXT CHARACTER SET utf8mb4, IN p_kind INT)
  MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE v_eof, v_idx, v_status, v_count, v_holds, v_done INT DEFAULT 0;
  DECLARE v_shop BIGINT UNSIGNED;
  DECLARE v_tok VARBINARY(128);
  DECLARE v_answer MEDIUMTEXT CHARACTER SET latin1 DEFAULT '';
  DECLARE entries CURSOR FOR
    SELECT b.idx, b.shop, UNHEX(b.tok)
      FROM JSON_TABLE(p_batch, '$[*]' COLUMNS (
             idx INT PATH '$[0]', shop BIGINT UNSIGNED PATH '$[1]',
             tok VARCHAR(256) CHARACTER SET latin1 PATH '$[2]')) AS b;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK AND NO CHAIN NO RELEASE; RESIGNAL; END;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_eof = 1;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION READ WRITE;
  OPEN entries;
  each_entry: LOOP
    SET v_eof = 0;
    FETCH entries INTO v_idx, v_shop, v_tok;
    IF v_eof THEN
      LEAVE each_entry;
    END IF;
    CALL rsv_settle_checkout_v1(v_shop, v_tok, p_kind, v_status, v_count,
                                v_holds, v_done);
    SET v_answer = CONCAT(v_answer, IF(v_answer = '', '', ','), '[', v_idx,
        ',', v_status > 0, ',', v_status, ',', v_count, ',', v_holds, ',',
        v_done, ']');
  END LOOP each_entry;
  CLOSE entries;
  COMMIT AND NO CHAIN NO RELEASE;
  SELECT a.idx, a.found, a.status, a.hold_count, a.holds, a.done
    FROM JSON_TABLE(CONCAT('[', v_answer, ']'), '$[*]' COLUMNS (
           idx INT PATH '$[0]', found INT PATH '$[1]',
           status INT PATH '$[2]', hold_count INT PATH '$[3]',
           holds INT PATH '$[4]', done INT PATH '$[5]')) AS a;
END//
DELIMITER ;

-- =======================================================================
-- 6. Retired names
-- =======================================================================

-- Created by earlier versions, no longer used: dropped when upgrading.
DROP PROCEDURE IF EXISTS rsv_pool_top_up_v1;
DROP PROCEDURE IF EXISTS rsv_pool_top_up_v2;
DROP PROCEDURE IF EXISTS rsv_reserve_key_v1;
DROP PROCEDURE IF EXISTS rsv_reserve_key_v2;
DROP PROCEDURE IF EXISTS rsv_fast_reserve_v1;
DROP PROCEDURE IF EXISTS rsv_fast_reserve_v2;
DROP PROCEDURE IF EXISTS rsv_fast_reserve_v3;
DROP PROCEDURE IF EXISTS rsv_fast_reserve_v4;
DROP PROCEDURE IF EXISTS rsv_fast_reserve_v5;
DROP PROCEDURE IF EXISTS rsv_fast_reserve_v6;
DROP PROCEDURE IF EXISTS rsv_pool_take_v1;
DROP PROCEDURE IF EXISTS rsv_pool_take_v2;
DROP PROCEDURE IF EXISTS rsv_fast_cart_v1;
DROP PROCEDURE IF EXISTS rsv_fast_cart_v2;
DROP PROCEDURE IF EXISTS rsv_fast_cart_v3;
DROP PROCEDURE IF EXISTS rsv_fast_cart_v4;
DROP PROCEDURE IF EXISTS rsv_settle_v1;
