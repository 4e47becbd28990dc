-- Creates are written in batches (group commit): one statement may write ids 1020 to
-- 1069, entering range 1 without its first id being among range 1's first 16. Each
-- statement now folds the previous range (and group) of every range (and group) it
-- entered, not only its first id's; otherwise the same as migration 6.
CREATE OR REPLACE FUNCTION books_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    first BIGINT;
    added BIGINT;
    ranged BOOLEAN := false;
    grouped BOOLEAN := false;
BEGIN
    SELECT MIN(id), COUNT(*) INTO first, added FROM new_rows;
    IF added = 0 THEN
        RETURN NULL;
    END IF;
    UPDATE book_count SET n = n + added, version = version + 1 WHERE id = 1 + (first & 15);
    -- One row into slots that exist already: two updates, nothing else.
    IF added = 1 THEN
        UPDATE book_ranges SET n = n + 1 WHERE bucket = first >> 10 AND slot = first & 15;
        ranged := FOUND;
        UPDATE book_groups SET n = n + 1 WHERE grp = first >> 15 AND slot = first & 15;
        grouped := FOUND;
    END IF;
    IF NOT ranged THEN
        INSERT INTO book_ranges AS r (bucket, slot, n)
            SELECT id >> 10, first & 15, COUNT(*) FROM new_rows GROUP BY 1
            ON CONFLICT (bucket, slot) DO UPDATE SET n = r.n + excluded.n;
        WITH entered AS (
            SELECT DISTINCT (id >> 10) - 1 AS bucket FROM new_rows WHERE id & 1023 < 16
        ), folded AS (
            DELETE FROM book_ranges r USING entered e
                WHERE r.bucket = e.bucket AND r.slot <> 0
                RETURNING r.bucket, r.n
        )
        INSERT INTO book_ranges AS r (bucket, slot, n)
            SELECT bucket, 0, SUM(n) FROM folded GROUP BY bucket
            ON CONFLICT (bucket, slot) DO UPDATE SET n = r.n + excluded.n;
    END IF;
    IF NOT grouped THEN
        INSERT INTO book_groups AS g (grp, slot, n)
            SELECT id >> 15, first & 15, COUNT(*) FROM new_rows GROUP BY 1
            ON CONFLICT (grp, slot) DO UPDATE SET n = g.n + excluded.n;
        WITH entered AS (
            SELECT DISTINCT (id >> 15) - 1 AS grp FROM new_rows WHERE id & 32767 < 16
        ), folded AS (
            DELETE FROM book_groups g USING entered e
                WHERE g.grp = e.grp AND g.slot <> 0
                RETURNING g.grp, g.n
        )
        INSERT INTO book_groups AS g (grp, slot, n)
            SELECT grp, 0, SUM(n) FROM folded GROUP BY grp
            ON CONFLICT (grp, slot) DO UPDATE SET n = g.n + excluded.n;
    END IF;
    RETURN NULL;
END
$$;

-- CREATE OR REPLACE drops the function's settings: find the tables as before.
ALTER FUNCTION books_inserted() SET search_path FROM CURRENT;
