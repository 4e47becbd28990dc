-- Creates written together count once per batch, not once per book. MariaDB has no
-- statement-level triggers: a batch of N books ran the insert trigger's three statements
-- N times, the most a create paid for (BENCHMARKS.md, "What a create pays for"). The
-- store's batch now marks its rows (`counted`) and counts them itself in the same
-- transaction (`books_count_created`); the trigger still counts every other row, so an
-- insert by any other program, or a single create, is counted as before.
--
-- Online: the column is added in place without copying the table (ALGORITHM = INSTANT,
-- refused rather than run as a copy), the trigger replaced in one statement. Written to be
-- run again. A release before this one keeps working beside it: its rows are not marked.

-- Invisible: `SELECT *` and an `INSERT` without a column list do not see it; NULL (the
-- default) for every row but those of the store's own batches.
ALTER TABLE books ADD COLUMN IF NOT EXISTS counted BOOLEAN INVISIBLE, ALGORITHM = INSTANT;

CREATE OR REPLACE TRIGGER books_insert AFTER INSERT ON books FOR EACH ROW
BEGIN
    IF NEW.counted IS NULL THEN
        UPDATE book_count SET n = n + 1, version = version + 1 WHERE id = 1 + (CONNECTION_ID() & 15);
        INSERT INTO book_ranges (bucket, slot, n) VALUES (NEW.id >> 10, CONNECTION_ID() & 15, 1)
            ON DUPLICATE KEY UPDATE n = n + 1;
        INSERT INTO book_groups (grp, slot, n) VALUES (NEW.id >> 15, CONNECTION_ID() & 15, 1)
            ON DUPLICATE KEY UPDATE n = n + 1;
    END IF;
END;

-- What the trigger does for each book, for the books of one batch at once: `ids` is the
-- JSON array of the ids the batch's insert wrote (with `counted` set), in the batch's
-- transaction and on its connection, so in the connection's slot.
CREATE OR REPLACE PROCEDURE books_count_created(ids JSON)
MODIFIES SQL DATA
BEGIN
    UPDATE book_count SET n = n + JSON_LENGTH(ids), version = version + JSON_LENGTH(ids)
        WHERE id = 1 + (CONNECTION_ID() & 15);
    INSERT INTO book_ranges (bucket, slot, n)
        SELECT * FROM (SELECT j.id >> 10 AS bucket, CONNECTION_ID() & 15 AS slot, COUNT(*) AS k
                       FROM JSON_TABLE(ids, '$[*]' COLUMNS (id BIGINT PATH '$')) j
                       GROUP BY j.id >> 10) c
        ON DUPLICATE KEY UPDATE n = n + c.k;
    INSERT INTO book_groups (grp, slot, n)
        SELECT * FROM (SELECT j.id >> 15 AS grp, CONNECTION_ID() & 15 AS slot, COUNT(*) AS k
                       FROM JSON_TABLE(ids, '$[*]' COLUMNS (id BIGINT PATH '$')) j
                       GROUP BY j.id >> 15) c
        ON DUPLICATE KEY UPDATE n = n + c.k;
END;
