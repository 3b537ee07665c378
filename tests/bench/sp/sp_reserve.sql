-- Prototype (issue 4 experiment, not used by the library): the whole
-- fast path of a one-unit reserve of a new checkout in one stored
-- procedure, so a reserve is one round trip (CALL) instead of six.
-- Loaded by tests/bench/sp/run.sh into the experiment's own database.
DROP PROCEDURE IF EXISTS rsv_sp_reserve1;
DELIMITER //
CREATE PROCEDURE rsv_sp_reserve1(IN p_shop BIGINT UNSIGNED, IN p_token VARBINARY(128),
    IN p_item BIGINT UNSIGNED, IN p_loc BIGINT UNSIGNED, IN p_start BIGINT UNSIGNED, IN p_ttl_us BIGINT)
BEGIN
  DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  SELECT id INTO v_id FROM reservation_units WHERE shop_id = p_shop AND inventory_item_id = p_item
     AND inventory_group_id = p_loc AND id >= p_start ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED;
  IF v_id IS NULL THEN
    ROLLBACK;
    SELECT 0, 0;
  ELSE
    DELETE FROM reservation_units WHERE inventory_item_id = p_item AND inventory_group_id = p_loc
       AND id = v_id AND shop_id = p_shop;
    INSERT INTO reservation_checkouts (generation, hold_count, expires_at, shop_id, checkout_token, status, created_at, updated_at)
       VALUES (1, 1, NOW(6) + INTERVAL p_ttl_us MICROSECOND, p_shop, p_token, 1, NOW(6), NOW(6));
    INSERT INTO reserved_quantities (shop_id, checkout_token, inventory_item_id, inventory_group_id, quantity, generation, expires_at, created_at)
       VALUES (p_shop, p_token, p_item, p_loc, 1, 1, NOW(6) + INTERVAL p_ttl_us MICROSECOND, NOW(6));
    COMMIT;
    SELECT 1, v_id;
  END IF;
END//
DELIMITER ;
