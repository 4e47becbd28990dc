-- Each statement counts in a counter slot that no open transaction holds (`SKIP LOCKED`),
-- and in the range and group slot of the same number, instead of the slot of its
-- connection. Another program's write transaction left open then holds up none of the
-- API's writes, nor the host's other unrelated ones, unless all 16 slots are held at once
-- (then a slot at random, and it waits, as before). Two connections met on one slot 1
-- time in 16 before.
--
-- A slot is taken once per statement: the first row a statement writes calls
-- `books_take_slot()`, which keeps the slot in `@books_slot` and the statement's start
-- (`NOW(6)`, the same for every row of one statement) in `@books_slot_at`; the statement's
-- other rows find them equal and count in the slot the first row locked. A slot is
-- kept across statements while its transaction holds it (the check finds it locked by
-- no other). Every `CREATE OR REPLACE` swaps a trigger in one step: no write goes
-- uncounted while this runs.
CREATE OR REPLACE PROCEDURE books_take_slot()
MODIFIES SQL DATA
BEGIN
    DECLARE start INT DEFAULT 1 + FLOOR(RAND() * 16);
    DECLARE free INT DEFAULT NULL;
    -- A SELECT … INTO that finds no row leaves `free` as it was.
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    SELECT id INTO free FROM book_count WHERE id = @books_slot FOR UPDATE SKIP LOCKED;
    -- The index order from a random start: only the slot returned is locked.
    IF free IS NULL THEN
        SELECT id INTO free FROM book_count WHERE id >= start ORDER BY id LIMIT 1
            FOR UPDATE SKIP LOCKED;
    END IF;
    IF free IS NULL THEN
        SELECT id INTO free FROM book_count WHERE id < start ORDER BY id LIMIT 1
            FOR UPDATE SKIP LOCKED;
    END IF;
    SET @books_slot = COALESCE(free, start), @books_slot_at = NOW(6);
END;

CREATE OR REPLACE TRIGGER books_insert AFTER INSERT ON books FOR EACH ROW
BEGIN
    IF NOT @books_slot_at <=> NOW(6) THEN
        CALL books_take_slot();
    END IF;
    UPDATE book_count SET n = n + 1, version = version + 1 WHERE id = @books_slot;
    INSERT INTO book_ranges (bucket, slot, n) VALUES (NEW.id >> 10, @books_slot, 1)
        ON DUPLICATE KEY UPDATE n = n + 1;
    INSERT INTO book_groups (grp, slot, n) VALUES (NEW.id >> 15, @books_slot, 1)
        ON DUPLICATE KEY UPDATE n = n + 1;
END;

CREATE OR REPLACE TRIGGER books_delete AFTER DELETE ON books FOR EACH ROW
BEGIN
    IF NOT @books_slot_at <=> NOW(6) THEN
        CALL books_take_slot();
    END IF;
    UPDATE book_count SET n = n - 1, version = version + 1, changes = changes + 1
        WHERE id = @books_slot;
    INSERT INTO book_ranges (bucket, slot, n) VALUES (OLD.id >> 10, @books_slot, -1)
        ON DUPLICATE KEY UPDATE n = n - 1;
    INSERT INTO book_groups (grp, slot, n) VALUES (OLD.id >> 15, @books_slot, -1)
        ON DUPLICATE KEY UPDATE n = n - 1;
END;

CREATE OR REPLACE TRIGGER books_update AFTER UPDATE ON books FOR EACH ROW
BEGIN
    IF NOT @books_slot_at <=> NOW(6) THEN
        CALL books_take_slot();
    END IF;
    UPDATE book_count SET version = version + 1, changes = changes + 1
        WHERE id = @books_slot;
    IF NEW.id <> OLD.id THEN
        INSERT INTO book_ranges (bucket, slot, n) VALUES (OLD.id >> 10, @books_slot, -1)
            ON DUPLICATE KEY UPDATE n = n - 1;
        INSERT INTO book_groups (grp, slot, n) VALUES (OLD.id >> 15, @books_slot, -1)
            ON DUPLICATE KEY UPDATE n = n - 1;
        INSERT INTO book_ranges (bucket, slot, n) VALUES (NEW.id >> 10, @books_slot, 1)
            ON DUPLICATE KEY UPDATE n = n + 1;
        INSERT INTO book_groups (grp, slot, n) VALUES (NEW.id >> 15, @books_slot, 1)
            ON DUPLICATE KEY UPDATE n = n + 1;
    END IF;
END;

CREATE OR REPLACE TRIGGER authors_insert AFTER INSERT ON authors FOR EACH ROW
BEGIN
    IF NOT @books_slot_at <=> NOW(6) THEN
        CALL books_take_slot();
    END IF;
    UPDATE book_count SET version = version + 1, changes = changes + 1 WHERE id = @books_slot;
END;

CREATE OR REPLACE TRIGGER authors_update AFTER UPDATE ON authors FOR EACH ROW
BEGIN
    IF NOT @books_slot_at <=> NOW(6) THEN
        CALL books_take_slot();
    END IF;
    UPDATE book_count SET version = version + 1, changes = changes + 1 WHERE id = @books_slot;
END;

CREATE OR REPLACE TRIGGER authors_delete AFTER DELETE ON authors FOR EACH ROW
BEGIN
    IF NOT @books_slot_at <=> NOW(6) THEN
        CALL books_take_slot();
    END IF;
    UPDATE book_count SET version = version + 1, changes = changes + 1 WHERE id = @books_slot;
END;
