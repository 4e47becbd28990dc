-- The first batch into a range of ids folds the closed range's slots into slot 0,
-- leaving out the slots another open transaction holds: two writers whose batches enter
-- a range together (two processes during a rollout) each waited for the slot the other
-- held, a deadlock that PostgreSQL settles after `deadlock_timeout` (1 s) by failing one.
-- A slot left out stays a row of its own; every sum still counts it. Replacing a
-- function stops no write: safe at any size, and a release before this one keeps
-- working beside it.
CREATE OR REPLACE FUNCTION books_inserted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    first BIGINT;
    last BIGINT;
    added BIGINT;
    free INTEGER;
    ranged BOOLEAN := false;
    grouped BOOLEAN := false;
BEGIN
    SELECT MIN(id), MAX(id), COUNT(*) INTO first, last, added FROM new_rows;
    IF added = 0 THEN
        RETURN NULL;
    END IF;
    free := books_free_slot();
    UPDATE book_count SET n = n + added, version = version + 1 WHERE id = free;
    -- Rows into slots that exist already, in one range and group: two updates.
    IF first >> 10 = last >> 10 AND (added = 1 OR first & 1023 >= 16) THEN
        UPDATE book_ranges SET n = n + added WHERE bucket = first >> 10 AND slot = free - 1;
        ranged := FOUND;
    END IF;
    IF first >> 15 = last >> 15 AND (added = 1 OR first & 32767 >= 16) THEN
        UPDATE book_groups SET n = n + added WHERE grp = first >> 15 AND slot = free - 1;
        grouped := FOUND;
    END IF;
    IF NOT ranged THEN
        INSERT INTO book_ranges AS r (bucket, slot, n)
            SELECT id >> 10, free - 1, COUNT(*) FROM new_rows GROUP BY 1
            ON CONFLICT (bucket, slot) DO UPDATE SET n = r.n + excluded.n;
        WITH entered AS (
            SELECT DISTINCT (id >> 10) - 1 AS bucket FROM new_rows WHERE id & 1023 < 16
        ), folded AS (
            DELETE FROM book_ranges r
                WHERE (r.bucket, r.slot) IN (
                    SELECT bucket, slot FROM book_ranges
                        WHERE bucket IN (SELECT bucket FROM entered) AND slot <> 0
                        FOR UPDATE SKIP LOCKED)
                RETURNING r.bucket, r.n
        )
        INSERT INTO book_ranges AS r (bucket, slot, n)
            SELECT bucket, 0, SUM(n) FROM folded GROUP BY bucket
            ON CONFLICT (bucket, slot) DO UPDATE SET n = r.n + excluded.n;
    END IF;
    IF NOT grouped THEN
        INSERT INTO book_groups AS g (grp, slot, n)
            SELECT id >> 15, free - 1, COUNT(*) FROM new_rows GROUP BY 1
            ON CONFLICT (grp, slot) DO UPDATE SET n = g.n + excluded.n;
        WITH entered AS (
            SELECT DISTINCT (id >> 15) - 1 AS grp FROM new_rows WHERE id & 32767 < 16
        ), folded AS (
            DELETE FROM book_groups g
                WHERE (g.grp, g.slot) IN (
                    SELECT grp, slot FROM book_groups
                        WHERE grp IN (SELECT grp FROM entered) AND slot <> 0
                        FOR UPDATE SKIP LOCKED)
                RETURNING g.grp, g.n
        )
        INSERT INTO book_groups AS g (grp, slot, n)
            SELECT grp, 0, SUM(n) FROM folded GROUP BY grp
            ON CONFLICT (grp, slot) DO UPDATE SET n = g.n + excluded.n;
    END IF;
    RETURN NULL;
END
$$;
